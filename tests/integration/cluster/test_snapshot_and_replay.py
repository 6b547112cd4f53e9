"""The consensus module's archive-facing parts against a real media driver and archive process: its snapshot
written through ``record_snapshot`` is recorded byte-identical to Aeron's (the golden node-2 recording 2, frame
header session and term ids aside) and loads back field by field; the golden node-2 log recording, opened by our
archive, is replayed by ``LogReplay`` between two positions delivering exactly Aeron's frames of that range."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.consensus_module_snapshot_loader import ConsensusModuleSnapshotLoader
from aeron_numba.cluster.consensus_module_snapshot_taker import (
    ConsensusModuleSnapshotTaker, record_snapshot, snapshot_state)
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.cluster.log_replay import LogReplay
from aeron_numba.layout.cluster import ClusterRole
from harness.awaiting import NotYet, await_condition
from tests.integration.test_archive_process import Stack

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node" / "node-2"
INT64_MIN = -(1 << 63)
RESPONSE_CHANNEL = "aeron:udp?endpoint=127.0.0.1:19000|term-length=64k"
FRAME_SESSION_ID, FRAME_STREAM_ID, FRAME_TERM_ID = slice(12, 16), slice(16, 20), slice(20, 24)


class Tracker:
    next_service_session_id, log_service_session_id, service_id = INT64_MIN + 1, INT64_MIN, 0

    def pending_messages(self):
        return iter(())

    def size(self):
        return 0


class Listener:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name[len("on_load_"):], *args))


def frames(data: bytes) -> list[bytes]:
    """Whole frames (header and payload) from the start of a segment up to the first empty one."""
    offset, found = 0, []
    while offset < len(data) and (frame_length := struct.unpack_from("<i", data, offset)[0]) > 0:
        found.append(data[offset:offset + frame_length])
        offset += (frame_length + 31) & ~31
    return found


def without_session_and_term(frame: bytes) -> bytes:
    """A frame with its session id and term id zeroed: what differs between two recordings of equal content."""
    masked = bytearray(frame)
    masked[FRAME_SESSION_ID] = bytes(4)
    masked[FRAME_TERM_ID] = bytes(4)
    return bytes(masked)


@pytest.fixture
def stack(process_manager, aeron_dir, tmp_path):
    s = Stack(process_manager, aeron_dir, tmp_path / "archive", AERON_ARCHIVE_SEGMENT_FILE_LENGTH="64k")
    yield s
    s.close()


def test_a_consensus_module_snapshot_is_recorded_as_aerons_and_loads_back_field_by_field(stack):
    session = SimpleNamespace(id=1, correlation_id=6, opened_log_position=256, close_reason=None,
                              response_stream_id=102, response_channel=RESPONSE_CHANNEL)

    def write(publication):
        snapshot_state(ConsensusModuleSnapshotTaker(publication), 9952, 0, ClusterTimeUnit.MILLIS, 1, 2, [session],
                       None, [Tracker()])

    recording_id = record_snapshot(stack.aeron, stack.archive, "aeron:ipc?alias=snapshot", 107, write)
    # auto-stop: the recording ends with the publication, at the snapshot's length
    await_condition(lambda: stack.archive.get_stop_position(recording_id) == 512 or NotYet(
        f"stop position {stack.archive.get_stop_position(recording_id)}"), 30, "snapshot recording stopped")

    ours = (stack.archive_dir / f"{recording_id}-0.rec").read_bytes()
    aerons = (GOLDEN / "archive" / "2-0.rec").read_bytes()
    assert [without_session_and_term(f) for f in frames(ours)] == [without_session_and_term(f) for f in frames(aerons)]
    assert ours[512:65536] == bytes(65536 - 512)
    assert {f[FRAME_STREAM_ID] for f in frames(ours)} == {struct.pack("<i", 107)}

    listener = Listener()
    ConsensusModuleSnapshotLoader(stack.archive, recording_id, "aeron:ipc", 103, listener).load()
    assert listener.calls == [
        ("begin_snapshot", 1, int(ClusterTimeUnit.MILLIS)),
        ("consensus_module_state", 2, INT64_MIN + 1, INT64_MIN, 0),
        ("cluster_session", 1, 6, 256, -1, -(1 << 31), 102, RESPONSE_CHANNEL),
        ("pending_message_tracker", INT64_MIN + 1, INT64_MIN, 0, 0),
        ("end_snapshot",),
    ]


class ReplayAgent:
    """The agent's side of a replay: reads the log image to the stop position, keeping every fragment."""

    def __init__(self):
        self.joins, self.fragments = [], []
        self._assembler = FragmentAssembler(
            lambda buffer, offset, length, header: self.fragments.append(
                (header.position - ((length + 32 + 31) & ~31), bytes(buffer[offset:offset + length]))))

    def await_services_ready(self, *args):
        self.joins.append(args)

    def replay_log_poll(self, log_adapter, stop_position):
        return log_adapter.image.poll(self._assembler, 10)

    def is_taking_snapshot(self):
        return False


class LogAdapter:
    def __init__(self):
        self.consensus_module_agent = ReplayAgent()
        self.image = None
        self.disconnected = False

    def position(self):
        return self.image.position

    def disconnect(self, error_handler):
        self.disconnected = True
        self.image = None


def test_the_golden_log_is_replayed_between_two_positions_as_exactly_aerons_frames(process_manager, aeron_dir,
                                                                                     tmp_path):
    archive_dir = tmp_path / "archive"
    archive_dir.mkdir()
    for name in ("archive.catalog", "0-0.rec"):
        shutil.copy(GOLDEN / "archive" / name, archive_dir / name)
    with Catalog.open(archive_dir, create=False, read_only=True) as catalog:
        assert catalog.descriptor(0).stop_position == 34240
    stack = Stack(process_manager, aeron_dir, archive_dir, AERON_ARCHIVE_SEGMENT_FILE_LENGTH="64k")
    try:
        log_adapter = LogAdapter()
        ctx = ConsensusModuleContext(replay_channel="aeron:ipc?term-length=64k", replay_stream_id=103)
        start, stop = 9952, 19552  # after the first snapshot to the end of term 0: 100 session messages
        replay = LogReplay(stack.archive, 0, start, stop, log_adapter, ctx)
        try:
            await_condition(lambda: replay.do_work() >= 0 and replay.is_done() or NotYet(
                f"log at {log_adapter.image.position if log_adapter.image else None}"), 60, "log replayed")
        finally:
            replay.close()
        agent = log_adapter.consensus_module_agent
        assert agent.joins == [(f"aeron:ipc?term-length=64k|session-id={replay.log_session_id}", 103,
                                replay.log_session_id, start, stop, True, ClusterRole.FOLLOWER)]
        assert log_adapter.disconnected
        golden_log = (GOLDEN / "archive" / "0-0.rec").read_bytes()
        expected, position = [], start
        for frame in frames(golden_log[start:stop]):
            expected.append((position, frame[32:]))
            position += (len(frame) + 31) & ~31
        assert len(expected) == 100 and position == stop
        assert agent.fragments == expected
    finally:
        stack.close()
