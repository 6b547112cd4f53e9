"""RecordingReplication and friends driven by recording signals and an injected clock against a fake archive whose
``rec-pos`` counters live in a real ``CountersManager``: the replicate request it sends, the signals it follows,
progress read from the destination's counter, the progress timeout (and the replication stopped on it), DELETE,
the snapshot replications that restart a copy that did not SYNC, and the channels of a follower's log replication."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.archive import recording_pos
from aeron_numba.archive.archive_counters import rec_pos_key
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.cluster.recording_replication import (
    MultipleRecordingReplication, RecordingReplication, ReplicationParams, SnapshotReplication,
    create_destination_uri, new_log_replication)
from aeron_numba.cluster.recovery_plan import Snapshot
from aeron_numba.kernels.counters import CountersManager
from aeron_numba.layout import archive as A
from aeron_numba.layout.bits import NULL_VALUE

ARCHIVE_ID = 4242
TIMEOUT_NS, INTERVAL_NS = 10_000, 1_000
SRC_CHANNEL = "aeron:udp?endpoint=leader:8010"


class Archive:
    """What the replication uses of an ``AeronArchive``."""

    def __init__(self):
        self.counters = CountersManager(np.zeros(64 * 1024, dtype=np.uint8), np.zeros(16 * 1024, dtype=np.uint8))
        self.aeron = SimpleNamespace(counters_reader=self.counters, next_correlation_id=self._next_id)
        self.archive_id = ARCHIVE_ID
        self.context = SimpleNamespace(control_request_stream_id=10)
        self.requests, self.stopped = [], []
        self._ids = iter(range(500, 10_000))
        self.stop_fails = False

    def _next_id(self):
        return next(self._ids)

    def replicate(self, src_recording_id, dst_recording_id, src_control_stream_id, src_control_channel,
                  live_destination=None, **params):
        replication_id = 700 + len(self.requests)
        self.requests.append(dict(src_recording_id=src_recording_id, dst_recording_id=dst_recording_id,
                                  src_control_stream_id=src_control_stream_id,
                                  src_control_channel=src_control_channel, live_destination=live_destination,
                                  **params))
        return replication_id

    def try_stop_replication(self, replication_id):
        if self.stop_fails:
            raise RuntimeError("archive gone")
        self.stopped.append(replication_id)
        return True

    def rec_pos(self, recording_id: int, archive_id: int = ARCHIVE_ID) -> int:
        return self.counters.allocate(f"rec-pos: {recording_id}", A.RECORDING_POSITION_TYPE_ID,
                                      rec_pos_key(recording_id, 5, "127.0.0.1:1234", archive_id))


def replication(archive, stop_position=8192, now_ns=0, dst_recording_id=NULL_VALUE) -> RecordingReplication:
    params = ReplicationParams(dst_recording_id=dst_recording_id, stop_position=stop_position,
                               replication_channel="aeron:udp?endpoint=me:0", replication_session_id=9)
    return RecordingReplication(archive, 3, SRC_CHANNEL, 10, params, TIMEOUT_NS, INTERVAL_NS, now_ns)


def test_the_request_carries_the_params_and_the_signals_follow_aerons_order_to_the_end():
    archive = Archive()
    r = replication(archive)
    assert archive.requests == [dict(src_recording_id=3, dst_recording_id=NULL_VALUE, src_control_stream_id=10,
                                     src_control_channel=SRC_CHANNEL, live_destination=None, stop_position=8192,
                                     replication_channel="aeron:udp?endpoint=me:0", file_io_max_length=NULL_VALUE,
                                     replication_session_id=9, encoded_credentials=b"", src_response_channel=None,
                                     channel_tag_id=NULL_VALUE, subscription_tag_id=NULL_VALUE)]
    counter_id = archive.rec_pos(11)
    r.on_signal(r.replication_id, 11, 0, "REPLICATE")
    r.on_signal(r.replication_id, 11, 0, "EXTEND")
    assert (r.recording_id, r.recording_position_counter_id) == (11, counter_id)
    archive.counters.set_counter_value(counter_id, 4096)
    assert r.poll(INTERVAL_NS) == 1 and r.position == 4096  # read from the destination's counter
    r.on_signal(r.replication_id, 11, 8192, "SYNC")
    r.on_signal(r.replication_id, NULL_VALUE, A.NULL_POSITION, "REPLICATE_END")
    assert r.has_synced() and r.has_replication_ended() and not r.has_stopped()
    r.on_signal(r.replication_id, 11, 8192, "STOP")
    assert r.has_stopped() and r.position == 8192 and r.recording_id == 11
    assert r.poll(10**9) == 0  # ended: no more checks, no timeout
    r.close()
    assert archive.stopped == []  # nothing to stop once it ended


def test_signals_of_other_requests_are_ignored_and_codes_are_accepted_as_names():
    archive = Archive()
    r = replication(archive)
    r.on_signal(r.replication_id + 1, 11, 100, "STOP")
    assert not r.has_stopped() and r.position == A.NULL_POSITION
    r.on_signal(r.replication_id, 11, 100, A.RECORDING_SIGNALS["STOP"])
    assert r.has_stopped() and r.last_recording_signal == "STOP"
    with pytest.raises(ClusterError, match="unknown recording signal 99"):
        r.on_signal(r.replication_id, 11, 100, 99)


def test_no_progress_for_the_timeout_stops_the_replication_and_raises():
    archive = Archive()
    r = replication(archive, now_ns=1_000)
    r.on_signal(r.replication_id, 11, 0, "EXTEND")  # no rec-pos counter: nothing to read progress from
    for now in range(1_000, 11_000, INTERVAL_NS):
        r.poll(now)
    with pytest.raises(ClusterError, match="log replication has not progressed"):
        r.poll(11_000)
    assert archive.stopped == [r.replication_id] and r.has_replication_ended()


def test_progress_moves_the_deadline_and_stalling_at_the_stop_position_is_a_failure_to_stop():
    archive = Archive()
    r = replication(archive)
    counter_id = archive.rec_pos(11)
    r.on_signal(r.replication_id, 11, 0, "EXTEND")
    for step, position in enumerate((1024, 4096, 8192), start=1):
        archive.counters.set_counter_value(counter_id, position)
        r.poll(step * 9_000)  # each check within the timeout of the last progress
    assert r.position == 8192
    with pytest.raises(ClusterError, match="log replication failed to stop"):
        r.poll(3 * 9_000 + TIMEOUT_NS)


def test_a_counter_of_another_archive_or_recording_gives_no_progress():
    archive = Archive()
    r = replication(archive)
    other_archive = archive.rec_pos(11, archive_id=1)
    r.on_signal(r.replication_id, 11, 0, "EXTEND")
    assert r.recording_position_counter_id == recording_pos.NULL_COUNTER_ID
    r.recording_position_counter_id = other_archive
    archive.counters.set_counter_value(other_archive, 512)
    r.recording_id = 12  # the counter is not that recording's
    r.poll(INTERVAL_NS)
    assert r.position == 0  # the EXTEND signal's, not the other recording's 512


def test_a_deleted_recording_is_an_error_and_a_failed_stop_is_reported():
    archive = Archive()
    r = replication(archive)
    with pytest.raises(ClusterError, match="recording was deleted during replication"):
        r.on_signal(r.replication_id, 11, 0, "DELETE")
    archive.stop_fails = True
    with pytest.raises(ClusterError, match="failed to stop log replication: archive gone"):
        r.close()


def test_snapshots_are_replicated_in_turn_and_one_ended_without_sync_is_started_again():
    archive = Archive()
    snapshots = [Snapshot(30, 1, 0, 4096, 7, 0), Snapshot(31, 1, 0, 4096, 7, -1)]
    replication_set = SnapshotReplication(archive, 10, SRC_CHANNEL, "aeron:udp?endpoint=me:0", TIMEOUT_NS,
                                          INTERVAL_NS)
    ended = []
    replication_set._replication.event_listener = lambda *args: ended.append(args)
    for s in snapshots:
        replication_set.add_snapshot(s)
    now = 0
    assert replication_set.poll(now) == 1  # the first replicate request
    first = archive.requests[-1]
    assert (first["src_recording_id"], first["dst_recording_id"], first["stop_position"]) == (30, -1, -1)
    current = replication_set._replication.recording_replication
    replication_set.on_signal(current.replication_id, 40, 0, "REPLICATE")
    replication_set.on_signal(current.replication_id, 40, 1024, "REPLICATE_END")  # the source went: no SYNC
    assert replication_set.poll(now) == 1 and len(archive.requests) == 2  # the same snapshot again
    assert archive.requests[-1]["src_recording_id"] == 30
    for dst, src in ((41, 30), (42, 31)):
        current = replication_set._replication.recording_replication
        for signal in ("REPLICATE", "SYNC", "REPLICATE_END"):
            replication_set.on_signal(current.replication_id, dst, 4096, signal)
        replication_set.poll(now)
        if src == 30:
            replication_set.poll(now)  # starts the next
    assert replication_set.is_complete()
    assert [s.recording_id for s in replication_set.snapshots_retrieved()] == [41, 42]
    assert [(e[1], e[2], e[4]) for e in ended] == [(30, 40, False), (30, 41, True), (31, 42, True)]


def test_multiple_replication_propagates_a_progress_timeout():
    archive = Archive()
    multiple = MultipleRecordingReplication(archive, 10, SRC_CHANNEL, "aeron:udp?endpoint=me:0", TIMEOUT_NS)
    assert multiple.progress_interval_ns == TIMEOUT_NS // 10
    multiple.add_recording(30, NULL_VALUE, NULL_VALUE)
    multiple.poll(0)
    with pytest.raises(ClusterError, match="has not progressed"):
        multiple.poll(TIMEOUT_NS)


def test_a_follower_log_replication_uses_the_leaders_archive_endpoint_and_heartbeat_timing():
    archive = Archive()
    ctx = ConsensusModuleContext(replication_channel="aeron:udp?endpoint=127.0.0.2:0",
                                 leader_archive_control_channel="aeron:udp?term-length=64k",
                                 leader_heartbeat_timeout_ns=2_000, leader_heartbeat_interval_ns=200)
    r = new_log_replication(archive, ctx, "127.0.0.1:20001", None, 0, 5, 19552, 100)
    request = archive.requests[-1]
    assert request["src_control_channel"] == "aeron:udp?endpoint=127.0.0.1:20001"
    assert (request["src_recording_id"], request["dst_recording_id"], request["stop_position"]) == (0, 5, 19552)
    assert request["replication_channel"] == "aeron:udp?endpoint=127.0.0.2:0"
    assert request["src_response_channel"] is None and request["replication_session_id"] == 500
    assert (r.progress_check_timeout_ns, r.progress_check_interval_ns, r.progress_deadline_ns) == (2_000, 200, 2_100)
    new_log_replication(archive, ctx, "127.0.0.1:20001", "127.0.0.2:20009", 0, 5, 19552, 100)
    assert archive.requests[-1]["src_response_channel"] == archive.requests[-1]["replication_channel"] == \
        "aeron:udp?control=127.0.0.2:20009|control-mode=response"


def test_a_destination_uri_keeps_the_media_and_interface_only():
    assert create_destination_uri("aeron:udp?term-length=64k|interface=10.0.0.1", "h:1") == \
        "aeron:udp?endpoint=h:1|interface=10.0.0.1"


def test_for_log_replicates_into_the_agents_log_recording_from_the_leaders_archive():
    archive = Archive()
    ctx = ConsensusModuleContext(replication_channel="aeron:udp?endpoint=127.0.0.2:0")
    agent = SimpleNamespace(archive=archive, ctx=ctx, log_recording_id=lambda: 7)
    leader = SimpleNamespace(archive_endpoint="127.0.0.1:20001", archive_response_endpoint=None)
    r = RecordingReplication.for_log(agent, leader, 0, 19552, 0)
    request = archive.requests[-1]
    assert (request["src_control_channel"], request["dst_recording_id"], request["stop_position"]) == \
        ("aeron:udp?endpoint=127.0.0.1:20001", 7, 19552)
    assert r.stop_position == 19552


def test_a_snapshot_replication_from_the_context_uses_its_channel_and_progress_timeout():
    archive = Archive()
    ctx = ConsensusModuleContext(replication_channel="aeron:udp?endpoint=127.0.0.2:0",
                                 replication_progress_timeout_ns=3_000)
    replication_set = SnapshotReplication.from_context(archive, ctx, 10, SRC_CHANNEL)
    replication_set.add_snapshot(Snapshot(30, 1, 0, 4096, 7, 0))
    replication_set.poll(0)
    assert archive.requests[-1]["replication_channel"] == "aeron:udp?endpoint=127.0.0.2:0"
    with pytest.raises(ClusterError, match="has not progressed"):
        replication_set.poll(3_000)
    assert not replication_set.is_complete()
