"""The consensus module's archive-facing parts against a real media driver and archive process: its snapshot
written through ``record_snapshot`` is recorded byte-identical to Aeron's (the golden node-2 recording 2, frame
header session and term ids aside) and loads back field by field; the golden node-2 log recording, opened by our
archive, is replayed by ``LogReplay`` between two positions delivering exactly Aeron's frames of that range."""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.consensus_module_snapshot import (
    ConsensusModuleSnapshotLoader, ConsensusModuleSnapshotTaker, record_snapshot, snapshot_state)
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.cluster.log_replay import LogReplay
from aeron_numba.layout.cluster import ClusterRole
from harness.awaiting import NotYet, await_condition
from tests.integration.test_archive_process import Stack, publish

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node" / "node-2"
INT64_MIN = -(1 << 63)
RESPONSE_CHANNEL = "aeron:udp?endpoint=127.0.0.1:19000|term-length=64k"
FRAME_SESSION_ID, FRAME_STREAM_ID, FRAME_TERM_ID = slice(12, 16), slice(16, 20), slice(20, 24)


class Tracker:
    next_service_session_id, log_service_session_id, service_id, leadership_term_id, size = \
        INT64_MIN + 1, INT64_MIN, 0, 0, 0

    def for_each(self, consumer):
        pass


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
    ConsensusModuleSnapshotLoader(listener, stack.archive, stack.aeron,
                                  ConsensusModuleContext(replay_channel="aeron:ipc", replay_stream_id=103)).load(
        recording_id)
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

    def set_image(self, image):
        self.image = image

    @property
    def position(self):
        return self.image.position

    def disconnect(self):
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


def test_recovery_from_a_real_archive_falls_back_to_the_previous_snapshot_when_the_latest_is_invalidated(stack,
                                                                                                           tmp_path):
    """Two snapshot sets taken and indexed as the agent's takeSnapshot does; the latest invalidated (ClusterTool
    invalidate-latest-snapshot); the recovery plan made with the running archive loads the earlier snapshot, names
    its service snapshot for the recovery-state counter and replays the log from its position."""
    from aeron_numba.cluster.consensus_module_recovery import Recovery, create_recovery_plan, stop_log_recording
    from aeron_numba.cluster.recording_log import RecordingLog

    # the log: a recording of a few messages on the log stream
    stack.archive.start_recording("aeron:ipc?term-length=64k", 100)
    log = stack.aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 100)
    _, log_end = publish(log, 50, random.Random(3))[-1]
    await_condition(lambda: stack.archive.get_recording_position(0) == log_end, 30, "log recorded")

    def snapshot_of(next_session_id, log_position):
        def write(publication):
            snapshot_state(ConsensusModuleSnapshotTaker(publication), log_position, 0, ClusterTimeUnit.MILLIS, 1,
                           next_session_id, [], None, [Tracker()])
        return record_snapshot(stack.aeron, stack.archive, "aeron:ipc?alias=snapshot", 107, write)

    cluster_dir = tmp_path / "cluster"
    cluster_dir.mkdir()
    with RecordingLog(cluster_dir, create_new=True) as recording_log:
        recording_log.append_term(0, 0, 0, 1000)
        for next_session_id, position, service_recording_id in ((5, 1024, 900), (9, 4096, 901)):
            cm_recording_id = snapshot_of(next_session_id, position)
            recording_log.append_snapshot(service_recording_id, 0, 0, position, 2000 + position, 0)
            recording_log.append_snapshot(cm_recording_id, 0, 0, position, 2000 + position, -1)
        assert recording_log.invalidate_latest_snapshot()

    with RecordingLog(cluster_dir) as recording_log:
        with pytest.raises(ClusterError, match="log recording 0 is still active"):
            Recovery.from_plan(create_recovery_plan(recording_log, stack.archive, 1), 1)
        assert stop_log_recording(recording_log, stack.archive) == 0  # as a starting consensus module does
        recovery = Recovery.from_plan(create_recovery_plan(recording_log, stack.archive, 1), 1)
    assert (recovery.log_position, recovery.service_snapshot_recording_ids) == (1024, (900,))
    assert (recovery.log_recording_id, recovery.replay_start_position) == (0, 1024)
    assert recovery.replay_stop_position == stack.archive.get_stop_position(0) == log_end
    listener = Listener()
    ConsensusModuleSnapshotLoader(listener, stack.archive, stack.aeron, ConsensusModuleContext()).load(
        recovery.consensus_module_snapshot)
    assert listener.calls[0] == ("begin_snapshot", 1, 0)
    assert listener.calls[1] == ("consensus_module_state", 5, INT64_MIN + 1, INT64_MIN, 0)  # the earlier set's
    log.close()


class EventAgent:
    """An agent's replay side over the consensus module's real ``LogAdapter``: polls it to the stop position and
    keeps the events it decodes."""

    def __init__(self):
        self.events = []

    def __getattr__(self, name):
        if not name.startswith("on_replay_"):
            raise AttributeError(name)
        return lambda *args: self.events.append((name[len("on_replay_"):], *args))

    def await_services_ready(self, *args):
        pass

    def replay_log_poll(self, log_adapter, stop_position):
        return log_adapter.poll(stop_position)

    def is_taking_snapshot(self):
        return False


def test_the_golden_log_replayed_through_the_consensus_modules_log_adapter_gives_aerons_events(process_manager,
                                                                                                aeron_dir, tmp_path):
    from aeron_numba.cluster.log_adapter import LogAdapter as ConsensusModuleLogAdapter

    archive_dir = tmp_path / "archive"
    archive_dir.mkdir()
    for name in ("archive.catalog", "0-0.rec"):
        shutil.copy(GOLDEN / "archive" / name, archive_dir / name)
    stack = Stack(process_manager, aeron_dir, archive_dir, AERON_ARCHIVE_SEGMENT_FILE_LENGTH="64k")
    try:
        agent = EventAgent()
        log_adapter = ConsensusModuleLogAdapter(agent, 10)
        replay = LogReplay(stack.archive, 0, 0, 19552, log_adapter, ConsensusModuleContext(), agent)
        try:
            await_condition(lambda: replay.do_work() >= 0 and replay.is_done() or NotYet(
                f"log at {log_adapter.position}, {len(agent.events)} events"), 60, "term 0 replayed")
        finally:
            replay.close()
        kinds = [e[0] for e in agent.events]
        assert [k for k in kinds if k != "session_message"] == ["new_leadership_term_event", "session_open",
                                                                 "cluster_action"]
        # The 100 application messages on each side of the action reach the module as their session's activity
        # (the compiled read reports a session's last one once per poll): in log order, from session 1 only.
        action = kinds.index("cluster_action")
        messages = [e for e in agent.events if e[0] == "session_message"]
        assert "session_message" in kinds[2:action] and "session_message" in kinds[action + 1:]
        assert {e[1] for e in messages} == {1}
        timestamps = [e[2] for e in messages]
        assert timestamps == sorted(timestamps) and timestamps[0] <= agent.events[action][3] <= timestamps[-1]
        # term 0, based at 0, app version 1 (its logPosition field, as Aeron wrote it, is the event's end: 96)
        assert (agent.events[0][1], agent.events[0][2], agent.events[0][4], agent.events[0][6]) == (0, 96, 0, 1)
        assert agent.events[1][1:4] == (256, 6, 1)  # opened at 256 (the frame's end), correlation 6, session 1
        assert agent.events[action][2] == 9952  # the snapshot action: the position its snapshots were taken at
        assert log_adapter.position == 19552 and log_adapter.image is None  # let go of on close
    finally:
        stack.close()
