"""What a starting consensus module recovers from (Aeron's ``ConsensusModuleAgent.recoverFromSnapshotAndLog`` and
``addRecoveryStateCounter``, around ``RecordingLog.createRecoveryPlan``).

``create_recovery_plan(recording_log, archive, service_count)`` plans with the running local archive: each log
recording's extent comes from ``AeronArchive.list_recording`` (Aeron's ``createRecoveryPlan(archive, ...)``); a
recording the archive does not list is a ``ClusterError`` naming it. ``Recovery.from_plan(plan, service_count)``
turns the plan into what the consensus module does with it:

* ``consensus_module_snapshot``: the snapshot to load (``ConsensusModuleSnapshotLoader``), or None on a fresh log.
  The plan takes the latest *valid* snapshot set: a set invalidated in recording.log (ClusterTool
  ``invalidate-latest-snapshot``) is passed over for the set before it, whose log position the replay then starts
  from.
* ``service_snapshot_recording_ids``: one per service, indexed by service id, for the recovery-state counter
  (``recovery_state.allocate``); with no snapshot, none at all (Aeron allocates the counter with an empty id list
  and the term then known, log position 0, timestamp 0: its services start empty).
* ``log_recording_id`` and the replay range ``replay_start_position`` .. ``replay_stop_position``: the log recorded
  after the snapshot, which the first election replays into the services (LEADER_REPLAY / FOLLOWER_REPLAY); an
  empty range when there is nothing after the snapshot or no log.
* ``leadership_term_id`` / ``term_base_log_position`` / ``log_position`` (the commit position after loading) /
  ``append_position``: the election's starting point, as Aeron's agent takes them from the plan.

A service snapshot missing from a set (recording.log damaged by hand) is a ``ClusterError``: the services could not
all recover to the same position. So is a log recording still active when the plan is made: the replay range needs
its stop position, which is why a starting consensus module first stops the last term's recording
(``stop_log_recording``, Aeron's ``tryStopRecordingByIdentity`` in ``onStart``); unlike Aeron it also waits for the
archive to record the stop, so the plan never sees a recording half stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.recovery_plan import RecordingExtent, RecoveryPlan, Snapshot
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE

NULL_POSITION = -1


def archive_extent_lookup(archive):
    """An ``ExtentLookup`` over a running archive (its ``list_recording``)."""

    def extent_of(recording_id: int) -> RecordingExtent | None:
        found = []
        if archive.list_recording(recording_id, found.append) == 0:
            return None
        d = found[0]
        return RecordingExtent(d.start_position, d.stop_position, d.initial_term_id, d.term_buffer_length,
                               d.mtu_length, d.session_id)

    return extent_of


def stop_log_recording(recording_log, archive, timeout_ns: int | None = None) -> int:
    """Stop the recording of the last term (a previous run's, still active in the archive after a crash of this
    process alone) and wait for its stop position; returns that recording id (NULL_VALUE: none)."""
    recording_id = recording_log.find_last_term_recording_id()
    if recording_id == NULL_VALUE:
        return recording_id
    if archive.list_recording(recording_id) == 0:
        return recording_id  # the plan names it as unknown
    if archive.get_stop_position(recording_id) == NULL_POSITION:
        archive.stop_recording_by_identity(recording_id)
        timeout_ns = archive.context.message_timeout_ns if timeout_ns is None else timeout_ns
        deadline_ns = time.monotonic_ns() + timeout_ns
        while archive.get_stop_position(recording_id) == NULL_POSITION:
            if time.monotonic_ns() > deadline_ns:
                raise ClusterError(f"log recording {recording_id} did not stop within {timeout_ns / 1e9:.1f}s")
            time.sleep(0.001)
    return recording_id


def create_recovery_plan(recording_log, archive, service_count: int,
                         replicated_recording_id: int = NULL_VALUE) -> RecoveryPlan:
    """Aeron's ``RecordingLog.createRecoveryPlan(archive, serviceCount, replicatedRecordingId)``."""
    return recording_log.create_recovery_plan(service_count, archive_extent_lookup(archive), replicated_recording_id)


@dataclass(frozen=True)
class Recovery:
    """A recovery plan as the consensus module acts on it (see the module docstring)."""

    plan: RecoveryPlan
    consensus_module_snapshot: Snapshot | None
    service_snapshot_recording_ids: tuple[int, ...]
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    append_position: int
    timestamp: int
    log_recording_id: int
    replay_start_position: int
    replay_stop_position: int

    @classmethod
    def from_plan(cls, plan: RecoveryPlan, service_count: int,
                  leadership_term_id: int = NULL_VALUE) -> "Recovery":
        """``leadership_term_id``: the agent's, used for the recovery-state counter when there is no snapshot."""
        cm_snapshot = plan.snapshots[0] if plan.snapshots else None
        ids: tuple[int, ...] = ()
        if cm_snapshot is not None:
            if cm_snapshot.service_id != C.CONSENSUS_MODULE_SERVICE_ID:
                raise ClusterError(f"the recovery plan's first snapshot is not the consensus module's: {cm_snapshot}")
            by_service = {s.service_id: s for s in plan.snapshots[1:]}
            missing = [i for i in range(service_count) if i not in by_service]
            if missing:
                raise ClusterError(f"snapshot set at logPosition={cm_snapshot.log_position} leadershipTermId="
                                   f"{cm_snapshot.leadership_term_id} has no snapshot for serviceId(s) {missing} "
                                   f"of serviceCount={service_count}")
            ids = tuple(by_service[i].recording_id for i in range(service_count))
            term, position, timestamp = cm_snapshot.leadership_term_id, cm_snapshot.log_position, \
                cm_snapshot.timestamp
        else:
            term, position, timestamp = leadership_term_id, 0, 0
        log = plan.log
        if log is not None:
            if log.stop_position == NULL_POSITION:
                raise ClusterError(f"log recording {log.recording_id} is still active: stop it before planning "
                                   f"recovery (stop_log_recording)")
            log_recording_id = log.recording_id
            start = log.start_position
            stop = max(log.stop_position, start)
        else:
            log_recording_id = NULL_VALUE
            start = stop = position
        return cls(plan, cm_snapshot, ids, term, plan.last_term_base_log_position, position,
                   plan.appended_log_position, timestamp, log_recording_id, start, stop)

    @property
    def has_replay(self) -> bool:
        """Is there log after the snapshot to replay into the services."""
        return self.log_recording_id != NULL_VALUE and self.replay_stop_position > self.replay_start_position

    def allocate_recovery_state(self, aeron, cluster_id: int):
        """The recovery-state counter (type 204) the services recover from; the agent closes it once they acked."""
        if self.consensus_module_snapshot is None:
            return recovery_state.allocate(aeron, self.leadership_term_id, 0, 0, cluster_id, ())
        return recovery_state.allocate(aeron, self.leadership_term_id, self.log_position, self.timestamp, cluster_id,
                                       self.service_snapshot_recording_ids)
