"""The consensus module snapshot adapter (spec/cluster.md §9): Aeron 1.48's snapshot recording decoded into the
listener calls it makes, every message kind of a snapshot, and the marker rules that make a snapshot unloadable."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotAdapter
from aeron_numba.codecs.cluster_messages import CLUSTER

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node"
NULL_INT32 = -(1 << 31)


class Recorder:
    """A listener that keeps every call."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if not name.startswith("on_load_"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name[len("on_load_"):], *args))


def marker(mark: int, type_id: int = 1) -> bytes:
    return CLUSTER.encode(CLUSTER.SnapshotMarker(type_id=type_id, log_position=4096, leadership_term_id=3, index=0,
                                                 mark=mark, time_unit=0, app_version=7))


def feed(adapter, *messages: bytes) -> None:
    for data in messages:
        adapter.on_message(data, 0, len(data))


def test_aerons_snapshot_recording_decodes_to_its_messages():
    # Node 2's recording 4: the consensus module's second snapshot, frames of one message each.
    data = (GOLDEN / "node-2" / "archive" / "4-0.rec").read_bytes()
    listener = Recorder()
    adapter = ConsensusModuleSnapshotAdapter(listener)
    offset = 0
    while not adapter.is_done:
        (frame_length,) = struct.unpack_from("<i", data, offset)
        adapter.on_message(data, offset + 32, frame_length - 32)
        offset += (frame_length + 31) & ~31
    assert offset == 512
    assert listener.calls == [
        ("begin_snapshot", 1, 0),
        ("consensus_module_state", 2, -(1 << 63) + 1, -(1 << 63), 0),
        ("cluster_session", 1, 6, 256, -1, NULL_INT32, 102, "aeron:udp?endpoint=127.0.0.1:19000|term-length=64k"),
        ("pending_message_tracker", -(1 << 63) + 1, -(1 << 63), 0, 0),
        ("end_snapshot",),
    ]


def test_every_kind_of_snapshot_message_reaches_the_listener():
    listener = Recorder()
    adapter = ConsensusModuleSnapshotAdapter(listener)
    pending = CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=3, cluster_session_id=9, timestamp=5,
                                                          payload=b"x" * 100))
    feed(adapter, marker(0),
         CLUSTER.encode(CLUSTER.ConsensusModule(next_session_id=10, next_service_session_id=20,
                                                log_service_session_id=19, pending_message_capacity=1024)),
         CLUSTER.encode(CLUSTER.Timer(correlation_id=77, deadline=123_456)),
         CLUSTER.encode(CLUSTER.ClusterMembers(member_id=0, high_member_id=2, cluster_members="0,a:1|1,b:2")),
         pending,
         marker(2), CLUSTER.encode(CLUSTER.Timer(correlation_id=78, deadline=1)))  # after END: not read
    assert listener.calls == [("begin_snapshot", 7, 0), ("consensus_module_state", 10, 20, 19, 1024),
                              ("timer", 77, 123_456), ("pending_message", 9, len(pending)), ("end_snapshot",)]
    assert adapter.is_done


@pytest.mark.parametrize("messages,error", [
    ([marker(2)], "missing begin snapshot"),
    ([marker(0), marker(0)], "already in snapshot"),
    ([marker(0, type_id=2)], "unexpected snapshot type: 2"),
    ([marker(0), b"\x08\x00\x09\x00\x6f\x00\x0c\x00garbage!"], "consensus module snapshot: .*templateId=9"),
    ([marker(0), bytes(4)], "consensus module snapshot: .*shorter than its 8-byte header"),
])
def test_snapshots_that_break_the_rules_cannot_be_loaded(messages, error):
    with pytest.raises(ClusterError, match=error):
        feed(ConsensusModuleSnapshotAdapter(Recorder()), *messages)
