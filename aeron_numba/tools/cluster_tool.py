"""cluster-tool: read (and repair) a cluster node's directory offline, with Aeron ``ClusterTool``'s command line
and output.

```
cluster-tool <cluster-dir> <command> [args]
  describe                      the mark files' headers (consensus module, then each service)
  pid                           the consensus module's process id
  recovery-plan <serviceCount>  what a restart would load and replay [--archive-dir DIR]
  recording-log                 recording.log as RecordingLog.toString() prints it
  sort-recording-log            rewrite recording.log in its in-memory order
  seed-recording-log-from-snapshot   a new recording.log holding only the latest valid snapshot set
  errors                        the mark files' error logs and the media driver's
  invalidate-latest-snapshot    mark the latest snapshot set invalid, so a restart loads the one before
  describe-latest-cm-snapshot   the latest consensus module snapshot's contents [--archive-dir DIR]
  list-members                  leader, this member and the active members, asked of the running node
  is-leader                     exit 0 if the running node is the leader (election closed), 1 if not
  snapshot | suspend | resume | shutdown | abort    flip the running node's control toggle and report
```

Output is ClusterTool's byte for byte where it is deterministic (the ``Type:`` lines start with the clock now).
Differences, all because this tool reads files where ClusterTool asks running processes:

* ``recovery-plan`` reads the log recording's extent from the archive's ``archive.catalog`` (``--archive-dir``,
  default the ``archive`` or ``aeron-archive`` dir beside the cluster dir), not from a running archive; a
  recording the catalog still shows as active (a crashed archive) gets its stop position from its segment files,
  as the archive itself would on its next start.
* ``describe-latest-cm-snapshot`` reads the snapshot recording from the archive's segment files instead of
  replaying it through a running archive (same output; a dir without them is a one-line error).
* ``describe`` and ``errors`` look for service mark files in the cluster dir when the ``servicesClusterDir`` the
  consensus module recorded no longer exists (a copied or moved cluster dir); ClusterTool silently lists none.
* ``errors`` says so in one line when the media driver's ``cnc.dat`` is gone (ClusterTool throws).
* ``sort-recording-log``, ``seed-recording-log-from-snapshot`` and ``invalidate-latest-snapshot`` refuse to run
  while a live consensus module holds the dir (its mark file touched within 10 s by a running pid).

The live commands find the node's media driver from the aeron dir its mark file names, as ClusterTool does:
``is-leader`` reads the node-role (201) and election-state (207) counters of the node's cluster id in its
``cnc.dat``; ``list-members`` sends the consensus module a ClusterMembersQuery on its control channel (stream 105) and
prints the ClusterMembersExtendedResponse it answers on the service stream (104); ``snapshot``, ``suspend``,
``resume``, ``shutdown`` and ``abort`` ask the same query first (the member must be the leader), check the
consensus-module-state counter (200), compare-and-set the control toggle (202) from NEUTRAL and, for snapshot and
resume, wait for the consensus module to put NEUTRAL back, printing ClusterTool's lines
(``Member [2]: SNAPSHOT applied successfully``; see ``tools/cluster_control.py``). ``AERON_CLUSTER_TOOL_TIMEOUT``
(Aeron's ``aeron.cluster.tool.timeout``) lengthens the waits. Two differences from ClusterTool: a members query
that gets no answer is "timeout waiting for response from node" and exit 1 (ClusterTool's query reports success
whatever happened), and a toggle that does not complete in time prints the timeout line and exits 1 without
"applied successfully" after it.

Not here: backup-query (there is no cluster backup). Exit status: 0 done (is-leader: the node leads); 1 the command
failed, or found nothing to act on (no snapshot to invalidate or describe; is-leader: not the leader), with one
``cluster-tool:`` line on stderr when it failed; 2 a usage error (one line).
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import Callable

from aeron_numba import cli
from aeron_numba.layout import cluster as C
from aeron_numba.layout import cnc
from aeron_numba.settings import CLUSTER_TOOL_TIMEOUT_ENV
from aeron_numba.tools._common import EXIT_FAILURE, EXIT_OK, epoch_ms

TOOL = "cluster-tool"
EXIT_USAGE = 2

COMMANDS: dict[str, str] = {
    "describe": "prints out all descriptors in the mark file.",
    "pid": "prints PID of cluster component.",
    "recovery-plan": "[service count] prints recovery plan of cluster component.",
    "recording-log": "prints recording log of cluster component.",
    "sort-recording-log": "reorders entries in the recording log to match the order in memory.",
    "seed-recording-log-from-snapshot": "creates a new recording log based on the latest valid snapshot.",
    "errors": "prints Aeron and cluster component error logs.",
    "invalidate-latest-snapshot": "marks the latest snapshot as a invalid so the previous is loaded.",
    "describe-latest-cm-snapshot": "prints the contents of the latest valid consensus module snapshot.",
    "list-members": "prints leader memberId, active members and passive members lists.",
    "is-leader": "returns zero if the cluster node is leader, non-zero if not.",
    "snapshot": "triggers a snapshot on the leader.",
    "suspend": "suspends appending to the log.",
    "resume": "resumes appending to the log.",
    "shutdown": "initiates an orderly stop of the cluster with a snapshot.",
    "abort": "stops the cluster without a snapshot.",
}
#: ClusterTool's commands this tool does not have (there is no cluster backup): named in the error a user gets.
NEEDS_RUNNING_NODE = ("backup-query",)
#: Aeron's aeron.cluster.tool.timeout: the least time the live commands wait (0: each command's own default).
TOOL_TIMEOUT_ENV = CLUSTER_TOOL_TIMEOUT_ENV
ARCHIVE_DIR_NAMES = ("archive", "aeron-archive")


class UsageError(Exception):
    """A bad command line: one line, exit 2."""


class ToolFailure(Exception):
    """The command could not be done: one line, exit 1."""


def usage_lines(prog: str = TOOL) -> list[str]:
    width = max(map(len, COMMANDS)) + 1
    return ([f"Usage: {prog} <cluster-dir> <command> [options]"]
            + [f"{' ' * (width - len(name))} {name}: {about}" for name, about in COMMANDS.items()]
            + ["", "recovery-plan and describe-latest-cm-snapshot take --archive-dir DIR (default: the archive dir "
                   "beside the cluster dir).",
               f"list-members, is-leader, snapshot, suspend, resume, shutdown and abort ask the running node; "
               f"${TOOL_TIMEOUT_ENV} lengthens their waits.",
               f"Not available here: {', '.join(NEEDS_RUNNING_NODE)}."])


# ------------------------------------------------------------------------------------------ mark files
def _type_line(mark, now_ms: int) -> str:
    from aeron_numba.tools._archive_text import mark_summary_line

    return f"Type: {mark.component_type} {mark_summary_line(now_ms, mark.start_timestamp, mark.activity_timestamp)}"


def _mark_path(cluster_dir: Path) -> Path:
    from aeron_numba.cluster.mark_file import resolve_mark_file_dir

    return resolve_mark_file_dir(cluster_dir) / C.MARK_FILE


def _services_dir(cluster_dir: Path, mark) -> Path:
    recorded = mark.strings().get("servicesClusterDir", "")
    if recorded and Path(recorded).is_dir():
        return Path(recorded)
    return cluster_dir


def _open_mark(path: Path):
    from aeron_numba.cluster.mark_file import ClusterMarkFile

    return ClusterMarkFile.open(path, read_only=True)


def _service_marks(services_dir: Path, out: list[str]):
    """Open each service mark file, announcing it as Agrona's MarkFile does."""
    from aeron_numba.cluster.mark_file import service_mark_files

    for path in service_mark_files(services_dir):
        out.append(f"INFO: Mark file exists: {path}")
        yield _open_mark(path)


def describe(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    path = _mark_path(cluster_dir)
    if not path.exists():
        out.append(f"{C.MARK_FILE} does not exist.")
        return EXIT_FAILURE
    now = epoch_ms()
    with _open_mark(path) as mark:
        out += [_type_line(mark, now), mark.describe()]
        services_dir = _services_dir(cluster_dir, mark)
    for service in _service_marks(services_dir, out):
        with service:
            out += [_type_line(service, now), service.describe()]
    return EXIT_OK


def pid(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    path = _mark_path(cluster_dir)
    if not path.exists():
        raise ToolFailure(f"{path} does not exist: no consensus module has run in {cluster_dir}")
    with _open_mark(path) as mark:
        out.append(str(mark.pid))
    return EXIT_OK


def _error_log_lines(mark) -> list[str]:
    from aeron_numba.tools._archive_text import error_log_lines

    return ["Cluster component error log:", *error_log_lines(mark.error_log_buffer)]


def _driver_error_lines(aeron_dir: str) -> list[str]:
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.tools._archive_text import error_log_lines

    lines = [f"Aeron driver error log (directory: {aeron_dir}):"]
    path = Path(aeron_dir) / cnc.CNC_FILE
    if not path.exists():
        return lines + ["", f"{path} does not exist: the media driver is gone and left no error log"]
    with CncFile.open(path) as cnc_file:
        return lines + error_log_lines(cnc_file.error_log_buffer)


def errors(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    path = _mark_path(cluster_dir)
    services_dir = cluster_dir
    now = epoch_ms()
    if path.exists():
        with _open_mark(path) as mark:
            out += [_type_line(mark, now), *_error_log_lines(mark), ""]
            out += _driver_error_lines(mark.strings()["aeronDirectory"])
            services_dir = _services_dir(cluster_dir, mark)
    else:
        out.append(f"{C.MARK_FILE} does not exist.")
    for service in _service_marks(services_dir, out):
        with service:
            out += [_type_line(service, now), *_error_log_lines(service)]
    return EXIT_OK


# --------------------------------------------------------------------------------------- recording.log
def _recording_log(cluster_dir: Path, *, read_only: bool):
    from aeron_numba.cluster.recording_log import RecordingLog

    return RecordingLog(cluster_dir, read_only=read_only)


def _refuse_if_live(cluster_dir: Path) -> None:
    """A tool must not rewrite recording.log under a running consensus module."""
    path = _mark_path(cluster_dir)
    if not path.exists():
        return
    with _open_mark(path) as mark:
        now = epoch_ms()
        if mark.is_active(now):
            raise ToolFailure(f"a consensus module (pid {mark.pid}) is active in {cluster_dir}: {path} was touched "
                              f"{now - mark.activity_timestamp} ms ago (< {C.MARK_LIVENESS_TIMEOUT_MS} ms); "
                              f"stop the node first")


def recording_log(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    with _recording_log(cluster_dir, read_only=True) as log:
        out.append(str(log))
    return EXIT_OK


def sort_recording_log(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    from aeron_numba.cluster.recording_log import is_sorted_on_disk, rewrite_recording_log

    _refuse_if_live(cluster_dir)
    with _recording_log(cluster_dir, read_only=True) as log:
        entries = list(log.entries)
    if not is_sorted_on_disk(entries):  # already in order: nothing to write (ClusterTool prints nothing either)
        rewrite_recording_log(cluster_dir, entries)
    return EXIT_OK


def seed_recording_log_from_snapshot(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    from dataclasses import replace

    from aeron_numba.cluster.recording_log import is_valid_snapshot, rewrite_recording_log

    _refuse_if_live(cluster_dir)
    with _recording_log(cluster_dir, read_only=True) as log:
        entries = list(log.entries)
    cm_index = next((i for i in range(len(entries) - 1, -1, -1)
                     if is_valid_snapshot(entries[i])
                     and entries[i].service_id == C.CONSENSUS_MODULE_SERVICE_ID), None)
    path = cluster_dir / C.RECORDING_LOG_FILE
    shutil.copy2(path, path.with_name(C.RECORDING_LOG_FILE + C.RECORDING_LOG_BACKUP_SUFFIX))
    seeded = []
    if cm_index is not None:
        service_id = C.CONSENSUS_MODULE_SERVICE_ID
        for i in range(cm_index, -1, -1):  # the consensus module's entry, then service 0, 1, ... before it
            entry = entries[i]
            if not (is_valid_snapshot(entry) and entry.service_id == service_id):
                break
            seeded.append(replace(entry, term_base_log_position=0, log_position=0))
            service_id += 1
        seeded.reverse()
    rewrite_recording_log(cluster_dir, seeded)
    return EXIT_OK


def invalidate_latest_snapshot(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    _refuse_if_live(cluster_dir)
    with _recording_log(cluster_dir, read_only=False) as log:
        result = log.invalidate_latest_snapshot()
    out.append(f" invalidate latest snapshot: {'true' if result else 'false'}")
    return EXIT_OK if result else EXIT_FAILURE


def _archive_dir(cluster_dir: Path, given: str | None) -> Path:
    """``--archive-dir``, else the node's archive dir beside its cluster dir (``archive`` or ``aeron-archive``)."""
    if given is not None:
        if not Path(given).is_dir():
            raise UsageError(f"--archive-dir {given}: no such directory")
        return Path(given)
    candidates = [cluster_dir.resolve().parent / name for name in ARCHIVE_DIR_NAMES]
    for candidate in candidates:
        if (candidate / "archive.catalog").exists():
            return candidate
    raise ToolFailure(f"no archive.catalog in {' or '.join(map(str, candidates))}: name the node's archive dir with "
                      f"--archive-dir")


def _split_archive_dir_option(args: list[str]) -> tuple[str | None, list[str]]:
    """``--archive-dir DIR`` (or ``--archive-dir=DIR``) taken out of ``args``: (DIR or None, the other args)."""
    archive_dir, rest, i = None, [], 0
    while i < len(args):
        if args[i] == "--archive-dir":
            if i + 1 >= len(args):
                raise UsageError("--archive-dir needs a directory")
            archive_dir, i = args[i + 1], i + 2
        elif args[i].startswith("--archive-dir="):
            archive_dir, i = args[i].split("=", 1)[1], i + 1
        else:
            rest.append(args[i])
            i += 1
    return archive_dir, rest


def _parse_archive_dir_option(args: list[str], command: str) -> str | None:
    archive_dir, rest = _split_archive_dir_option(args)
    if rest:
        raise UsageError(f"{command} takes only --archive-dir DIR, got {' '.join(rest)!r}")
    return archive_dir


def _parse_recovery_plan_args(args: list[str]) -> tuple[int, str | None]:
    archive_dir, rest = _split_archive_dir_option(args)
    if len(rest) != 1:
        raise UsageError("recovery-plan needs the service count: recovery-plan <serviceCount> [--archive-dir DIR]")
    try:
        service_count = int(rest[0])
    except ValueError:
        raise UsageError(f"recovery-plan: service count {rest[0]!r} is not an integer") from None
    if service_count < 0:
        raise UsageError(f"recovery-plan: service count {service_count} < 0")
    return service_count, archive_dir


def recovery_plan(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    from aeron_numba.archive.catalog import Catalog
    from aeron_numba.archive.segment_files import recorded_stop_position
    from aeron_numba.cluster.recovery_plan import RecordingExtent
    from aeron_numba.layout import archive as A

    service_count, given = _parse_recovery_plan_args(args)
    archive_dir = _archive_dir(cluster_dir, given)
    with _recording_log(cluster_dir, read_only=True) as log, \
            Catalog.open(archive_dir, create=False, read_only=True) as catalog:

        def extent_of(recording_id: int) -> RecordingExtent | None:
            if not catalog.has_recording(recording_id) or catalog.state(recording_id) != A.RECORDING_STATE_VALID:
                return None
            d = catalog.descriptor(recording_id)
            stop = d.stop_position
            if stop == A.NULL_POSITION:  # a crashed archive's recording: where its whole frames end
                stop, _, _ = recorded_stop_position(archive_dir, recording_id, d.start_position,
                                                    d.term_buffer_length, d.segment_file_length)
            return RecordingExtent(d.start_position, stop, d.initial_term_id, d.term_buffer_length, d.mtu_length,
                                   d.session_id)

        out.append(str(log.create_recovery_plan(service_count, extent_of)))
    return EXIT_OK


# ------------------------------------------------------------------------- describe-latest-cm-snapshot
_TIME_UNITS = {0: "MILLISECONDS", 1: "MICROSECONDS", 2: "NANOSECONDS"}
_INT32_NULL = -(1 << 31)
_FRAME_HEADER = struct.Struct("<iBBH")  # frame length, version, flags, type (spec/transport.md §1)


class ConsensusModuleSnapshotPrinter:
    """A snapshot adapter's listener that prints each message as Aeron's ConsensusModuleSnapshotPrinter does."""

    def __init__(self, out: list[str]):
        self.out = out

    def on_load_begin_snapshot(self, app_version: int, time_unit: int) -> None:
        # Aeron maps an absent time unit (NULL_VAL) to milliseconds, as the consensus module does on load.
        self.out.append(f"Snapshot: appVersion={app_version} timeUnit={_TIME_UNITS.get(time_unit, 'MILLISECONDS')}")

    def on_load_end_snapshot(self) -> None:
        pass

    def on_load_consensus_module_state(self, next_session_id, next_service_session_id, log_service_session_id,
                                       pending_message_capacity) -> None:
        self.out.append(f"Consensus Module State: nextSessionId={next_session_id} "
                        f"nextServiceSessionId={next_service_session_id} logServiceSessionId={log_service_session_id}"
                        f" pendingMessageCapacity={pending_message_capacity}")

    def on_load_pending_message(self, cluster_session_id, length) -> None:
        self.out.append(f"Pending Message: length={length} clusterSessionId={cluster_session_id}")

    def on_load_cluster_session(self, cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
                                close_reason, response_stream_id, response_channel) -> None:
        from aeron_numba.layout.cluster_schema import ENUMS

        reason = "NULL_VAL" if close_reason == _INT32_NULL else next(
            (name for name, code in ENUMS["CloseReason"].items() if code == close_reason), str(close_reason))
        self.out.append(f"Cluster Session: clusterSessionId={cluster_session_id} correlationId={correlation_id} "
                        f"openedLogPosition={opened_log_position} timeOfLastActivity={time_of_last_activity} "
                        f"closeReason={reason} responseStreamId={response_stream_id} "
                        f"responseChannel={response_channel}")

    def on_load_timer(self, correlation_id, deadline) -> None:
        self.out.append(f"Timer: correlationId={correlation_id} deadline={deadline}")

    def on_load_pending_message_tracker(self, next_service_session_id, log_service_session_id,
                                        pending_message_capacity, service_id) -> None:
        self.out.append(f"Pending Message Tracker: nextServiceSessionId={next_service_session_id} "
                        f"logServiceSessionId={log_service_session_id} "
                        f"pendingMessageCapacity={pending_message_capacity} serviceId={service_id}")


def _recorded_messages(reader, start_position: int, stop_position: int):
    """``(buffer, offset, length, position after)`` of each whole message a recording holds, read from its segment
    files: data frames in order, fragments joined, padding skipped."""
    from aeron_numba.layout import frame as F

    position, pending = start_position, None
    while position < stop_position:
        buffer, offset, length = reader.read(position, stop_position, 1 << 20)
        if buffer is None or length == 0:
            raise ToolFailure(f"recording {reader.recording_id} has no frames at position {position} in "
                              f"{reader.archive_dir}: its segment file is missing or ends before the recording's "
                              f"stop position {stop_position}")
        end = offset + length
        while offset < end:
            frame_length, _, flags, frame_type = _FRAME_HEADER.unpack_from(buffer, offset)
            aligned = (frame_length + F.FRAME_ALIGNMENT - 1) & ~(F.FRAME_ALIGNMENT - 1)
            position += aligned
            if frame_type == F.HDR_TYPE_DATA:
                data = bytes(buffer[offset + F.HEADER_LENGTH:offset + frame_length])
                if flags & F.UNFRAGMENTED == F.UNFRAGMENTED:
                    yield data, 0, len(data), position
                elif flags & F.BEGIN_FRAG_FLAG:
                    pending = bytearray(data)
                elif pending is not None:
                    pending += data
                    if flags & F.END_FRAG_FLAG:
                        whole, pending = bytes(pending), None
                        yield whole, 0, len(whole), position
            offset += aligned


def describe_latest_cm_snapshot(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    from aeron_numba.archive.catalog import Catalog
    from aeron_numba.archive.segment_files import RecordingReader, recorded_stop_position
    from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotAdapter
    from aeron_numba.layout import archive as A

    archive_dir = _archive_dir(cluster_dir, _parse_archive_dir_option(args, "describe-latest-cm-snapshot"))
    with _recording_log(cluster_dir, read_only=True) as log:
        entry = log.get_latest_snapshot(C.CONSENSUS_MODULE_SERVICE_ID)
    if entry is None:
        out.append("Snapshot not found")
        return EXIT_FAILURE
    path = _mark_path(cluster_dir)
    if not path.exists():
        raise ToolFailure(f"{path} does not exist: no consensus module has run in {cluster_dir}")
    with _open_mark(path) as mark:
        member_id = mark.member_id
    rid = entry.recording_id
    with Catalog.open(archive_dir, create=False, read_only=True) as catalog:
        if not catalog.has_recording(rid):
            raise ToolFailure(f"snapshot recording {rid} is not in {archive_dir / A.CATALOG_FILE}")
        d = catalog.descriptor(rid)
    stop = d.stop_position
    if stop == A.NULL_POSITION:
        stop, _, _ = recorded_stop_position(archive_dir, rid, d.start_position, d.term_buffer_length,
                                            d.segment_file_length)
    adapter = ConsensusModuleSnapshotAdapter(ConsensusModuleSnapshotPrinter(out))
    reader = RecordingReader(archive_dir, rid, d.start_position, d.term_buffer_length, d.segment_file_length,
                             read_only=True)
    position = d.start_position
    try:
        for data, offset, length, position in _recorded_messages(reader, d.start_position, stop):
            adapter.on_message(data, offset, length)
            if adapter.is_done:
                break
    finally:
        reader.close()
    if not adapter.is_done:
        raise ToolFailure(f"snapshot ended unexpectedly: recording {rid} stops at {stop} without an END marker")
    out.append(f"Consensus Module Snapshot End: memberId={member_id} recordingId={rid} length={position}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------- live commands
def _tool_timeout_ms() -> int:
    from aeron_numba.settings import duration

    value = os.environ.get(TOOL_TIMEOUT_ENV, "")
    if not value:
        return 0
    try:
        return duration(value, TOOL_TIMEOUT_ENV) // 1_000_000
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _control_properties(cluster_dir: Path, out: list[str]) -> dict | None:
    """What the mark file tells a tool about the running node (Aeron's ClusterNodeControlProperties), or None
    (and ClusterTool's line) when there is no mark file."""
    path = _mark_path(cluster_dir)
    if not path.exists():
        out.append(f"{C.MARK_FILE} does not exist.")
        return None
    with _open_mark(path) as mark:
        fields, strings = mark.fields(), mark.strings()
        return {"member_id": mark.member_id, "cluster_id": mark.cluster_id, "aeron_dir": strings["aeronDirectory"],
                "control_channel": strings["controlChannel"], "service_stream_id": fields["serviceStreamId"],
                "consensus_module_stream_id": fields["consensusModuleStreamId"]}


class _NodeCounters:
    """The counters of the node's driver (``<aeron dir>/cnc.dat``), mapped for one command."""

    def __init__(self, aeron_dir: str):
        from aeron_numba.kernels.cnc_file import CncFile
        from aeron_numba.kernels.counters import CountersReader

        self.cnc_file = CncFile.open(Path(aeron_dir) / cnc.CNC_FILE)
        self.reader = CountersReader(self.cnc_file.counters_metadata_buffer, self.cnc_file.counters_values_buffer)

    def find(self, type_id: int, cluster_id: int):
        from aeron_numba.tools.cluster_control import find_cluster_counter

        return find_cluster_counter(self.reader, type_id, cluster_id)

    def value(self, counter_id: int) -> int:
        return self.reader.get_counter_value(counter_id)

    def close(self) -> None:
        self.reader = None  # its views go before the mapping
        self.cnc_file.close()

    def __enter__(self) -> "_NodeCounters":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_leader(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    props = _control_properties(cluster_dir, out)
    if props is None:
        return EXIT_FAILURE
    path = Path(props["aeron_dir"]) / cnc.CNC_FILE
    if not path.exists():
        raise ToolFailure(f"{path} does not exist: the node's media driver is not running")
    with _NodeCounters(props["aeron_dir"]) as counters:
        role = counters.find(C.NODE_ROLE_TYPE_ID, props["cluster_id"])
        election = counters.find(C.ELECTION_STATE_TYPE_ID, props["cluster_id"])
        leads = (role is not None and election is not None and counters.value(role.counter_id) == C.ClusterRole.LEADER
                 and counters.value(election.counter_id) == C.ElectionState.CLOSED)
    return EXIT_OK if leads else EXIT_FAILURE


def _query_members(props: dict, timeout_ms: int):
    from aeron_numba.tools.cluster_control import query_cluster_members

    return query_cluster_members(props["aeron_dir"], props["control_channel"], props["consensus_module_stream_id"],
                                 props["service_stream_id"], timeout_ms)


def list_members(cluster_dir: Path, args: list[str], out: list[str]) -> int:
    props = _control_properties(cluster_dir, out)
    if props is None:
        return EXIT_FAILURE
    membership = _query_members(props, max(1000, _tool_timeout_ms()))
    if membership is None:
        out.append("timeout waiting for response from node")
        return EXIT_FAILURE
    out.append(str(membership))
    return EXIT_OK


def toggle_cluster_state(cluster_dir: Path, out: list[str], expected_state: "C.ConsensusModuleState",
                         target: "C.ClusterControlToggle", wait_for_completion: bool, default_timeout_ms: int) -> int:
    """Aeron's ClusterToolOperator.toggleClusterState: the node must lead and be in ``expected_state``; then the
    toggle goes NEUTRAL -> ``target`` and, if asked, back to NEUTRAL when the consensus module has acted."""
    from aeron_numba.tools.cluster_control import apply_toggle, read_toggle

    props = _control_properties(cluster_dir, out)
    if props is None:
        return EXIT_FAILURE
    tool_timeout_ms = _tool_timeout_ms()
    membership = _query_members(props, max(1000, tool_timeout_ms))
    if membership is None:
        out.append("Timed out querying cluster.")
        return EXIT_FAILURE
    prefix = f"Member [{membership.member_id}]: "
    if membership.leader_member_id != membership.member_id:
        out.append(f"{prefix}Current node is not the leader (leaderMemberId = {membership.leader_member_id}), "
                   f"unable to {target.name}")
        return EXIT_FAILURE
    path = Path(props["aeron_dir"]) / cnc.CNC_FILE
    if not path.exists():
        out.append(f"{prefix}Unable to locate media driver. C`n`C file [{path.absolute()}] does not exist.")
        return EXIT_FAILURE
    with _NodeCounters(props["aeron_dir"]) as counters:
        state_counter = counters.find(C.CONSENSUS_MODULE_STATE_TYPE_ID, props["cluster_id"])
        state = None
        if state_counter is not None:
            try:
                state = C.ConsensusModuleState(counters.value(state_counter.counter_id))
            except ValueError:
                state = None
        if state is None:
            out.append(f"{prefix}Unable to resolve state of consensus module.")
            return EXIT_FAILURE
        if state != expected_state:
            out.append(f"{prefix}Unable to {target.name} as the state of the consensus module is {state.name}, but "
                       f"needs to be {expected_state.name}")
            return EXIT_FAILURE
        toggle = counters.find(C.CONTROL_TOGGLE_TYPE_ID, props["cluster_id"])
        if toggle is None:
            out.append(f"{prefix}Failed to find control toggle")
            return EXIT_FAILURE
        values = counters.reader.values_buffer
        if not apply_toggle(values, toggle.counter_id, target):
            out.append(f"{prefix}Failed to apply {target.name}, current toggle value = "
                       f"{read_toggle(values, toggle.counter_id).name}")
            return EXIT_FAILURE
        if wait_for_completion:
            timeout_ms = max(default_timeout_ms, tool_timeout_ms)
            deadline = time.monotonic() + timeout_ms / 1000
            while read_toggle(values, toggle.counter_id) != C.ClusterControlToggle.NEUTRAL:
                if time.monotonic() > deadline:
                    out.append(f"{prefix}Timed out after {timeout_ms}ms waiting for {target.name} to complete.")
                    return EXIT_FAILURE
                time.sleep(0.001)
    out.append(f"{prefix}{target.name} applied successfully")
    return EXIT_OK


def _toggle_command(expected: str, target: str, wait: bool, timeout_ms: int):
    def command(cluster_dir: Path, args: list[str], out: list[str]) -> int:
        return toggle_cluster_state(cluster_dir, out, C.ConsensusModuleState[expected], C.ClusterControlToggle[target],
                                    wait, timeout_ms)

    return command


HANDLERS: dict[str, Callable[[Path, list[str], list[str]], int]] = {
    "describe": describe,
    "pid": pid,
    "recovery-plan": recovery_plan,
    "recording-log": recording_log,
    "sort-recording-log": sort_recording_log,
    "seed-recording-log-from-snapshot": seed_recording_log_from_snapshot,
    "errors": errors,
    "invalidate-latest-snapshot": invalidate_latest_snapshot,
    "describe-latest-cm-snapshot": describe_latest_cm_snapshot,
    "list-members": list_members,
    "is-leader": is_leader,
    # ClusterToolOperator's expected states, waits and timeouts
    "snapshot": _toggle_command("ACTIVE", "SNAPSHOT", True, 30_000),
    "suspend": _toggle_command("ACTIVE", "SUSPEND", False, 1_000),
    "resume": _toggle_command("SUSPENDED", "RESUME", True, 1_000),
    "shutdown": _toggle_command("ACTIVE", "SHUTDOWN", False, 1_000),
    "abort": _toggle_command("ACTIVE", "ABORT", False, 1_000),
}


def parse_command(argv: list[str]) -> tuple[Path, str, list[str]]:
    if len(argv) < 2:
        raise UsageError("expected <cluster-dir> <command> [args] (--help lists the commands)")
    cluster_dir, command, args = Path(argv[0]), argv[1], argv[2:]
    if command not in HANDLERS:
        if command in NEEDS_RUNNING_NODE:
            raise UsageError(f"command '{command}' is not available: there is no cluster backup "
                             f"(commands: {', '.join(HANDLERS)})")
        raise UsageError(f"unknown command '{command}' (commands: {', '.join(HANDLERS)})")
    if not cluster_dir.is_dir():
        raise UsageError(f"cluster directory not found: {cluster_dir.absolute()}")
    if command not in ("recovery-plan", "describe-latest-cm-snapshot") and args:
        raise UsageError(f"{command} takes no arguments, got {' '.join(args)!r}")
    return cluster_dir, command, args


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    prog = prog or TOOL
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print("\n".join(usage_lines(prog)))
        return EXIT_OK
    if argv[:1] == ["--version"]:
        print(cli.version_text(prog))
        return EXIT_OK
    from aeron_numba.cluster.cluster_error import ClusterError
    from aeron_numba.errors import AeronError

    out: list[str] = []
    try:
        cluster_dir, command, args = parse_command(argv)
        code = HANDLERS[command](cluster_dir, args, out)
    except UsageError as exc:
        return cli.fail(prog, str(exc), EXIT_USAGE)
    except (ToolFailure, ClusterError, AeronError, ValueError) as exc:
        _print(out)
        return cli.fail(prog, str(exc), EXIT_FAILURE)
    except OSError as exc:
        _print(out)
        where = f" {os.fsdecode(exc.filename)}" if exc.filename else ""
        return cli.fail(prog, f"{exc.strerror or exc}{':' if where else ''}{where}", EXIT_FAILURE)
    _print(out)
    return code


def _print(lines: list[str]) -> None:
    from aeron_numba.tools._common import print_lines

    if lines:
        print_lines(lines)


if __name__ == "__main__":
    sys.exit(main())
