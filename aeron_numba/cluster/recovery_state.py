"""The recovery-state counter (type 204, spec/cluster.md §10; Aeron's RecoveryState): how the consensus module tells
the services of its node where to recover from before the first JoinLog.

The consensus module allocates it at start-up from its recovery plan: the leadership term and log position of the
latest valid snapshot set, the cluster time it was taken at, and one snapshot recording id per service (indexed by
service id; ``NULL_VALUE`` when there is no snapshot). A starting service container waits for the counter of its
cluster id, loads the snapshot recording named for its service id, then acks the log position. The counter's
value is unused: all of it is in the key (layout in ``layout/cluster.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout import cluster as C
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout.bits import NULL_VALUE

_HEAD = struct.Struct("<qqqii")  # leadershipTermId, logPosition, timestamp, clusterId, serviceCount
_ID = struct.Struct("<q")
NULL_COUNTER_ID = -1


@dataclass(frozen=True)
class RecoveryState:
    """The decoded key of a recovery-state counter."""
    counter_id: int
    leadership_term_id: int
    log_position: int
    timestamp: int
    cluster_id: int
    snapshot_recording_ids: tuple[int, ...]

    @property
    def service_count(self) -> int:
        return len(self.snapshot_recording_ids)

    def snapshot_recording_id(self, service_id: int) -> int:
        """The snapshot recording a service recovers from, ``NULL_VALUE`` for none; a service id outside the
        counter's service count is an error (the node's service count and the service's id disagree)."""
        if not 0 <= service_id < len(self.snapshot_recording_ids):
            raise ClusterError(f"serviceId={service_id} outside the recovery state's serviceCount="
                               f"{len(self.snapshot_recording_ids)} (AERON_CLUSTER_SERVICE_COUNT of the consensus "
                               f"module and AERON_CLUSTER_SERVICE_ID of the service disagree)")
        return self.snapshot_recording_ids[service_id]


def encode_key(leadership_term_id: int, log_position: int, timestamp: int, cluster_id: int,
               snapshot_recording_ids: tuple[int, ...] | list[int]) -> bytes:
    """The counter's key; refuses more services than the key can hold."""
    key_length = C.RECOVERY_STATE_SNAPSHOT_RECORDING_IDS_OFFSET + len(snapshot_recording_ids) * _ID.size
    if key_length > counters_layout.MAX_KEY_LENGTH:
        raise ClusterError(f"recovery state key length={key_length} for serviceCount={len(snapshot_recording_ids)} "
                           f"> MAX_KEY_LENGTH={counters_layout.MAX_KEY_LENGTH}")
    return _HEAD.pack(leadership_term_id, log_position, timestamp, cluster_id, len(snapshot_recording_ids)) + \
        b"".join(_ID.pack(i) for i in snapshot_recording_ids)


def label(leadership_term_id: int, log_position: int, cluster_id: int) -> str:
    return (f"{C.RECOVERY_STATE_LABEL_PREFIX}leadershipTermId={leadership_term_id} logPosition={log_position} "
            f"clusterId={cluster_id}")


def decode_key(counter_id: int, key: bytes) -> RecoveryState:
    """Decode a recovery-state key; a key too short for what it claims is a ``ClusterError`` naming the lengths."""
    if len(key) < _HEAD.size:
        raise ClusterError(f"recovery state counter {counter_id}: key length={len(key)} < {_HEAD.size}")
    term, position, timestamp, cluster_id, service_count = _HEAD.unpack_from(key, 0)
    needed = C.RECOVERY_STATE_SNAPSHOT_RECORDING_IDS_OFFSET + max(service_count, 0) * _ID.size
    if service_count < 0 or needed > len(key):
        raise ClusterError(f"recovery state counter {counter_id}: serviceCount={service_count} needs a key of "
                           f"{needed} bytes, it has {len(key)}")
    ids = tuple(_ID.unpack_from(key, C.RECOVERY_STATE_SNAPSHOT_RECORDING_IDS_OFFSET + i * _ID.size)[0]
                for i in range(service_count))
    return RecoveryState(counter_id, term, position, timestamp, cluster_id, ids)


def allocate(aeron, leadership_term_id: int, log_position: int, timestamp: int, cluster_id: int,
             snapshot_recording_ids: tuple[int, ...] | list[int]):
    """Allocate the counter through the consensus module's Aeron client (it lives until that client closes it)."""
    return aeron.add_counter(C.RECOVERY_STATE_TYPE_ID,
                             encode_key(leadership_term_id, log_position, timestamp, cluster_id,
                                        snapshot_recording_ids),
                             label(leadership_term_id, log_position, cluster_id))


def find(counters_reader, cluster_id: int) -> RecoveryState | None:
    """The recovery state of ``cluster_id`` among the allocated counters, or None while there is none yet."""
    for info in counters_reader.for_each():
        if info.type_id != C.RECOVERY_STATE_TYPE_ID:
            continue
        if struct.unpack_from("<i", info.key, C.RECOVERY_STATE_CLUSTER_ID_OFFSET)[0] == cluster_id:
            return decode_key(info.counter_id, info.key)
    return None


__all__ = ["RecoveryState", "allocate", "find", "encode_key", "decode_key", "label", "NULL_COUNTER_ID",
           "NULL_VALUE"]
