"""The recovery plan (Aeron's ``RecordingLog.RecoveryPlan``): from the sorted recording.log entries, the latest valid
snapshot set a starting node loads (the consensus module's first, then service 0, 1, ...) and the log recording it
replays after them, with that recording's extent from the archive. ``str()`` of each is ClusterTool's
``recovery-plan`` text.

The archive is reached through ``ExtentLookup``: a running archive's ``listRecording`` in the node, the
``archive.catalog`` file in ``cluster-tool``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE

if TYPE_CHECKING:
    from aeron_numba.cluster.recording_log import Entry

NULL_POSITION = -1


@dataclass(frozen=True)
class Snapshot:
    recording_id: int
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    timestamp: int
    service_id: int

    def __str__(self) -> str:
        return (f"Snapshot{{recordingId={self.recording_id}, leadershipTermId={self.leadership_term_id}, "
                f"termBaseLogPosition={self.term_base_log_position}, logPosition={self.log_position}, "
                f"timestamp={self.timestamp}, serviceId={self.service_id}}}")


@dataclass(frozen=True)
class Log:
    """The log recording to replay from: the last valid term and its archive extent."""

    recording_id: int
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    start_position: int
    stop_position: int
    initial_term_id: int
    term_buffer_length: int
    mtu_length: int
    session_id: int

    def __str__(self) -> str:
        return (f"Log{{recordingId={self.recording_id}, leadershipTermId={self.leadership_term_id}, "
                f"termBaseLogPosition={self.term_base_log_position}, logPosition={self.log_position}, "
                f"startPosition={self.start_position}, stopPosition={self.stop_position}, "
                f"initialTermId={self.initial_term_id}, termBufferLength={self.term_buffer_length}, "
                f"mtuLength={self.mtu_length}, sessionId={self.session_id}}}")


@dataclass(frozen=True)
class RecoveryPlan:
    """What a starting node loads (the snapshots, consensus module first) and replays (the log after them)."""

    last_leadership_term_id: int
    last_term_base_log_position: int
    appended_log_position: int
    committed_log_position: int
    snapshots: tuple[Snapshot, ...]
    log: Log | None

    def __str__(self) -> str:
        snapshots = ", ".join(map(str, self.snapshots))
        return (f"RecoveryPlan{{lastLeadershipTermId={self.last_leadership_term_id}, "
                f"lastTermBaseLogPosition={self.last_term_base_log_position}, "
                f"appendedLogPosition={self.appended_log_position}, "
                f"committedLogPosition={self.committed_log_position}, snapshots=[{snapshots}], "
                f"log={'null' if self.log is None else self.log}}}")


@dataclass(frozen=True)
class RecordingExtent:
    """What the recovery plan needs of a log recording (Aeron's ``RecordingExtent``, from the archive)."""

    start_position: int
    stop_position: int
    initial_term_id: int
    term_buffer_length: int
    mtu_length: int
    session_id: int


#: Looks a recording up in the archive: its extent, or None when the archive does not know it.
ExtentLookup = Callable[[int], "RecordingExtent | None"]


def _is_valid_snapshot(entry: Entry) -> bool:
    return entry.is_valid and entry.type == C.ENTRY_TYPE_SNAPSHOT


def _is_valid_term(entry: Entry) -> bool:
    return entry.is_valid and entry.type == C.ENTRY_TYPE_TERM


def plan_recovery(entries: list[Entry], service_count: int, extent_of: ExtentLookup,
                  replicated_recording_id: int = NULL_VALUE) -> RecoveryPlan:
    """The plan for ``entries`` sorted as recording.log sorts them (§2.3)."""
    snapshots: list[Snapshot] = []
    log = _plan_log(entries, snapshots, service_count, extent_of, replicated_recording_id)
    last_term, last_base, appended, committed = NULL_VALUE, 0, 0, 0
    if snapshots:
        first = snapshots[0]
        last_term, last_base = first.leadership_term_id, first.term_base_log_position
        appended = committed = first.log_position
    if log is not None:
        last_term, last_base = log.leadership_term_id, log.term_base_log_position
        appended = log.stop_position
        committed = log.log_position if log.log_position != NULL_POSITION else committed
    return RecoveryPlan(last_term, last_base, appended, committed, tuple(snapshots), log)


def _plan_log(entries: list[Entry], snapshots: list[Snapshot], service_count: int, extent_of: ExtentLookup,
              replicated_recording_id: int) -> Log | None:
    if not entries:
        if replicated_recording_id == NULL_VALUE:
            return None
        extent = _extent(extent_of, replicated_recording_id)
        return Log(replicated_recording_id, NULL_VALUE, 0, 0, extent.start_position, extent.stop_position,
                   extent.initial_term_id, extent.term_buffer_length, extent.mtu_length, extent.session_id)
    log_index = snapshot_index = -1
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if snapshot_index == -1 and _is_valid_snapshot(entry) and entry.service_id == C.CONSENSUS_MODULE_SERVICE_ID:
            snapshot_index = i
        elif log_index == -1 and _is_valid_term(entry) and entry.recording_id != NULL_VALUE:
            log_index = i
        elif snapshot_index != -1 and log_index != -1:
            break
    if snapshot_index != -1:
        _add_snapshots(snapshots, entries, service_count, snapshot_index)
    if log_index == -1:
        return None
    entry = entries[log_index]
    extent = _extent(extent_of, entry.recording_id)
    start = extent.start_position if snapshot_index == -1 else snapshots[0].log_position
    return Log(entry.recording_id, entry.leadership_term_id, entry.term_base_log_position, entry.log_position, start,
               extent.stop_position, extent.initial_term_id, extent.term_buffer_length, extent.mtu_length,
               extent.session_id)


def _extent(extent_of: ExtentLookup, recording_id: int) -> RecordingExtent:
    extent = extent_of(recording_id)
    if extent is None:
        raise ClusterError(f"unknown recording id: {recording_id}")
    return extent


def _snapshot(entry: Entry) -> Snapshot:
    return Snapshot(entry.recording_id, entry.leadership_term_id, entry.term_base_log_position, entry.log_position,
                    entry.timestamp, entry.service_id)


def _add_snapshots(snapshots: list[Snapshot], entries: list[Entry], service_count: int, cm_index: int) -> None:
    """The consensus module's snapshot first, then service k's at place k + 1 (found just before it)."""
    cm = entries[cm_index]
    snapshots.append(_snapshot(cm))
    for i in range(1, service_count + 1):
        if cm_index - i < 0:
            raise ClusterError(f"snapshot missing for service at index {i} in "
                               f"[{', '.join(map(str, entries))}]")
        entry = entries[cm_index - i]
        if (entry.type == C.ENTRY_TYPE_SNAPSHOT and entry.leadership_term_id == cm.leadership_term_id
                and entry.log_position == cm.log_position):
            snapshots.insert(entry.service_id + 1, _snapshot(entry))
