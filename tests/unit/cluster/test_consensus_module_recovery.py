"""Recovery at start-up from recording.log files written with ``RecordingLog``: the snapshot the consensus module
loads, the service snapshot ids of the recovery-state counter, and the log range replayed after the snapshot; an
invalidated latest snapshot set falls back to the set before it; no snapshot, no log, and a damaged set."""

from __future__ import annotations

import pytest

from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.consensus_module_recovery import Recovery, archive_extent_lookup, create_recovery_plan
from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.layout.bits import NULL_VALUE

LOG_RECORDING_ID, LOG_STOP = 0, 34240


class Archive:
    """``list_recording`` of an archive holding the log recording (0 .. LOG_STOP) and nothing else."""

    def __init__(self):
        self.asked = []

    def list_recording(self, recording_id, consumer=None):
        self.asked.append(recording_id)
        if recording_id != LOG_RECORDING_ID:
            return 0
        consumer(ARCHIVE.RecordingDescriptor(
            control_session_id=1, correlation_id=2, recording_id=0, start_timestamp=0, stop_timestamp=0,
            start_position=0, stop_position=LOG_STOP, initial_term_id=7, segment_file_length=65536,
            term_buffer_length=65536, mtu_length=1408, session_id=99, stream_id=100, stripped_channel="aeron:udp",
            original_channel="aeron:udp", source_identity="x"))
        return 1


def two_snapshot_sets(cluster_dir, service_count=2) -> RecordingLog:
    """Term 0 from 0, a snapshot set at 9952 (recordings 10+), term 1 from 19552, a set at 29344 (recordings 20+);
    services appended before the consensus module, in descending service id, as Aeron's agent appends them."""
    log = RecordingLog(cluster_dir, create_new=True)
    log.append_term(LOG_RECORDING_ID, 0, 0, 1000)
    for base, term, position, ts in ((10, 0, 9952, 2000), (20, 1, 29344, 4000)):
        if term == 1:
            log.append_term(LOG_RECORDING_ID, 1, 19552, 3000)
        term_base = 0 if term == 0 else 19552
        for service_id in range(service_count - 1, -1, -1):
            log.append_snapshot(base + 1 + service_id, term, term_base, position, ts, service_id)
        log.append_snapshot(base, term, term_base, position, ts, -1)
    return log


def test_the_latest_snapshot_set_is_loaded_and_the_log_after_it_replayed(tmp_path):
    archive = Archive()
    with two_snapshot_sets(tmp_path) as log:
        recovery = Recovery.from_plan(create_recovery_plan(log, archive, 2), 2)
    assert archive.asked == [LOG_RECORDING_ID]
    assert recovery.consensus_module_snapshot.recording_id == 20
    assert recovery.service_snapshot_recording_ids == (21, 22)
    assert (recovery.leadership_term_id, recovery.log_position, recovery.timestamp) == (1, 29344, 4000)
    assert (recovery.log_recording_id, recovery.replay_start_position, recovery.replay_stop_position) == \
        (LOG_RECORDING_ID, 29344, LOG_STOP)
    assert (recovery.term_base_log_position, recovery.append_position) == (19552, LOG_STOP)
    assert recovery.has_replay


def test_an_invalidated_latest_set_falls_back_to_the_previous_one_read_back_from_the_file(tmp_path):
    with two_snapshot_sets(tmp_path) as log:
        assert log.invalidate_latest_snapshot()
    with RecordingLog(tmp_path) as log:  # what a restarting node reads
        recovery = Recovery.from_plan(create_recovery_plan(log, Archive(), 2), 2)
    assert recovery.consensus_module_snapshot.recording_id == 10
    assert recovery.service_snapshot_recording_ids == (11, 12)
    assert (recovery.leadership_term_id, recovery.log_position, recovery.timestamp) == (0, 9952, 2000)
    # the log from the older snapshot on, through term 1, is replayed
    assert (recovery.replay_start_position, recovery.replay_stop_position) == (9952, LOG_STOP)


def test_both_sets_invalidated_leave_no_snapshot_and_the_whole_log_to_replay(tmp_path):
    with two_snapshot_sets(tmp_path) as log:
        assert log.invalidate_latest_snapshot() and log.invalidate_latest_snapshot()
        recovery = Recovery.from_plan(create_recovery_plan(log, Archive(), 2), 2, leadership_term_id=NULL_VALUE)
    assert recovery.consensus_module_snapshot is None and recovery.service_snapshot_recording_ids == ()
    assert (recovery.replay_start_position, recovery.replay_stop_position) == (0, LOG_STOP)


def test_a_fresh_node_has_nothing_to_load_or_replay(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        recovery = Recovery.from_plan(create_recovery_plan(log, Archive(), 1), 1)
    assert recovery.consensus_module_snapshot is None and recovery.log_recording_id == NULL_VALUE
    assert not recovery.has_replay and recovery.leadership_term_id == NULL_VALUE


def test_a_set_missing_a_service_snapshot_is_refused_naming_the_service(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(LOG_RECORDING_ID, 0, 0, 1000)
        log.append_snapshot(31, 0, 0, 9952, 2000, 1)  # service 1 only, then the consensus module's
        log.append_snapshot(30, 0, 0, 9952, 2000, -1)
        log.append_snapshot(99, 0, 0, 4000, 1500, 0)  # service 0 of an older position: not of this set
        with pytest.raises(ClusterError, match=r"no snapshot for serviceId\(s\) \[0\] of serviceCount=2"):
            Recovery.from_plan(create_recovery_plan(log, Archive(), 2), 2)


def test_a_log_recording_the_archive_does_not_know_is_named(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(5, 0, 0, 1000)
        with pytest.raises(ClusterError, match="unknown recording id: 5"):
            create_recovery_plan(log, Archive(), 1)


class Aeron:
    def add_counter(self, type_id, key, label):
        self.counter = (type_id, key, label)
        return self.counter


def test_the_recovery_state_counter_carries_the_set_or_the_term_alone(tmp_path):
    with two_snapshot_sets(tmp_path) as log:
        recovery = Recovery.from_plan(create_recovery_plan(log, Archive(), 2), 2)
    aeron = Aeron()
    type_id, key, label = recovery.allocate_recovery_state(aeron, cluster_id=3)
    state = recovery_state.decode_key(9, key)
    assert (state.leadership_term_id, state.log_position, state.timestamp, state.cluster_id) == (1, 29344, 4000, 3)
    assert state.snapshot_recording_ids == (21, 22)
    assert label == "Cluster recovery: leadershipTermId=1 logPosition=29344 clusterId=3"
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    with RecordingLog(fresh_dir, create_new=True) as fresh_log:
        fresh = Recovery.from_plan(create_recovery_plan(fresh_log, Archive(), 2), 2, leadership_term_id=4)
    _, key, _ = fresh.allocate_recovery_state(aeron, cluster_id=3)
    state = recovery_state.decode_key(9, key)
    assert (state.leadership_term_id, state.log_position, state.timestamp, state.snapshot_recording_ids) == \
        (4, 0, 0, ())


def test_archive_extent_lookup_answers_none_for_an_unknown_recording():
    extent_of = archive_extent_lookup(Archive())
    assert extent_of(3) is None
    extent = extent_of(LOG_RECORDING_ID)
    assert (extent.start_position, extent.stop_position, extent.initial_term_id, extent.term_buffer_length,
            extent.mtu_length, extent.session_id) == (0, LOG_STOP, 7, 65536, 1408, 99)


class ActiveLogArchive(Archive):
    """The log recording is still active until stopped by identity; its stop lands a few queries later."""

    def __init__(self, stop_after: int = 2):
        super().__init__()
        self.context = type("Ctx", (), {"message_timeout_ns": 1_000_000_000})()
        self.stopping, self.stop_after, self.stopped_by_identity = False, stop_after, []

    def stop_recording_by_identity(self, recording_id):
        self.stopped_by_identity.append(recording_id)
        self.stopping = True
        return True

    def get_stop_position(self, recording_id):
        if self.stopping:
            self.stop_after -= 1
            if self.stop_after < 0:
                return LOG_STOP
        return -1

    def list_recording(self, recording_id, consumer=None):
        if recording_id != LOG_RECORDING_ID:
            return 0
        if consumer is not None:
            consumer(ARCHIVE.RecordingDescriptor(
                control_session_id=1, correlation_id=2, recording_id=0, start_timestamp=0, stop_timestamp=0,
                start_position=0, stop_position=self.get_stop_position(0), initial_term_id=7,
                segment_file_length=65536, term_buffer_length=65536, mtu_length=1408, session_id=99, stream_id=100,
                stripped_channel="aeron:udp", original_channel="aeron:udp", source_identity="x"))
        return 1


def test_an_active_log_recording_is_refused_until_stopped_and_stopping_waits_for_its_stop(tmp_path):
    from aeron_numba.cluster.consensus_module_recovery import stop_log_recording

    archive = ActiveLogArchive()
    with two_snapshot_sets(tmp_path) as log:
        with pytest.raises(ClusterError, match="log recording 0 is still active: stop it before planning"):
            Recovery.from_plan(create_recovery_plan(log, archive, 2), 2)
        assert stop_log_recording(log, archive) == LOG_RECORDING_ID
        assert archive.stopped_by_identity == [LOG_RECORDING_ID]
        recovery = Recovery.from_plan(create_recovery_plan(log, archive, 2), 2)
    assert recovery.replay_stop_position == LOG_STOP


def test_stopping_without_a_term_or_with_a_stopped_log_asks_nothing(tmp_path):
    from aeron_numba.cluster.consensus_module_recovery import stop_log_recording

    archive = ActiveLogArchive()
    with RecordingLog(tmp_path, create_new=True) as log:
        assert stop_log_recording(log, archive) == NULL_VALUE
    archive.stopping, archive.stop_after = True, 0
    with RecordingLog(tmp_path) as log:
        log.append_term(LOG_RECORDING_ID, 0, 0, 1)
        assert stop_log_recording(log, archive) == LOG_RECORDING_ID
    assert archive.stopped_by_identity == []
