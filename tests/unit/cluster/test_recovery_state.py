"""The recovery-state counter's key and label (spec/cluster.md §10, Aeron's RecoveryState)."""

import struct

import pytest

from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout import cluster as C
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout.bits import NULL_VALUE


def test_key_bytes_follow_the_spec_table():
    key = recovery_state.encode_key(3, 29344, 1795597160123, 7, [4, NULL_VALUE])
    assert len(key) == 32 + 2 * 8
    assert struct.unpack_from("<qqqii", key, 0) == (3, 29344, 1795597160123, 7, 2)
    assert struct.unpack_from("<qq", key, C.RECOVERY_STATE_SNAPSHOT_RECORDING_IDS_OFFSET) == (4, NULL_VALUE)


def test_label_is_aerons():
    assert recovery_state.label(1, 19552, 0) == "Cluster recovery: leadershipTermId=1 logPosition=19552 clusterId=0"


def test_decode_round_trips_a_key_padded_as_the_counters_file_holds_it():
    key = recovery_state.encode_key(0, 9952, 5, 0, [1]).ljust(counters_layout.MAX_KEY_LENGTH, b"\0")
    state = recovery_state.decode_key(12, key)
    assert (state.counter_id, state.leadership_term_id, state.log_position, state.timestamp, state.cluster_id) == \
        (12, 0, 9952, 5, 0)
    assert state.snapshot_recording_ids == (1,)
    assert state.snapshot_recording_id(0) == 1


def test_a_service_id_outside_the_service_count_is_named():
    state = recovery_state.decode_key(0, recovery_state.encode_key(0, 0, 0, 0, [1]))
    with pytest.raises(ClusterError, match=r"serviceId=1 outside the recovery state's serviceCount=1"):
        state.snapshot_recording_id(1)


def test_too_many_services_for_the_key_are_refused():
    with pytest.raises(ClusterError, match=r"> MAX_KEY_LENGTH=112"):
        recovery_state.encode_key(0, 0, 0, 0, [0] * 11)


def test_a_key_shorter_than_its_service_count_claims_is_refused():
    key = recovery_state.encode_key(0, 0, 0, 0, [1, 2])[:40]
    with pytest.raises(ClusterError, match=r"serviceCount=2 needs a key of 48 bytes, it has 40"):
        recovery_state.decode_key(3, key)
