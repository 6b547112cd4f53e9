"""``recording.log`` (spec/cluster.md §2): the node's index of leadership terms and snapshots.

Entries are appended at the next 64-byte boundary in single positional writes; later changes are single-field
writes in place (a term's log position when it is committed, the invalid flag, -1 for a removed entry). In memory
the entries are kept sorted (term, base position, TERM before SNAPSHOT, snapshots by position then descending
service id), with an index from each valid term's id to its place in that list.

The file is read whole and checked: a truncated entry, an entry type no writer produces, or TERM entries naming
two log recordings raise ``ClusterFileError`` naming the file, the offset and the limit.

Where Aeron's own behaviour is the reference (``RecordingLog.java`` in aeron-cluster 1.48), so are its texts:
``str(recording_log)`` is what ``ClusterTool <dir> recording-log`` prints.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from aeron_numba.cluster.cluster_error import ClusterError, ClusterFileError
from aeron_numba.cluster.recovery_plan import NULL_POSITION, ExtentLookup, RecoveryPlan, plan_recovery
from aeron_numba.cluster.term_index import TermIndex
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE, align
from aeron_numba.layout.sbe import VAR_LENGTH_PREFIX

_FIELDS = struct.Struct(C.ENTRY_FIELDS_FORMAT)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


@dataclass(frozen=True)
class Entry:
    """One entry as read or appended; ``position`` is its file offset (-1 before it is written)."""

    recording_id: int
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    timestamp: int
    service_id: int
    type: int
    is_valid: bool = True
    entry_index: int = NULL_VALUE
    archive_endpoint: str | None = None
    position: int = field(default=NULL_VALUE, compare=False)

    @property
    def length(self) -> int:
        endpoint = len(self.archive_endpoint or "")
        return C.entry_length(self.type, endpoint)

    def encode(self) -> bytes:
        """The entry's bytes as written: the fields, the endpoint for STANDBY_SNAPSHOT, zero to its length."""
        entry_type = self.type if self.is_valid else (self.type | C.ENTRY_TYPE_INVALID_FLAG)
        data = _FIELDS.pack(self.recording_id, self.leadership_term_id, self.term_base_log_position,
                            self.log_position, self.timestamp, self.service_id,
                            entry_type - (1 << 32) if entry_type & C.ENTRY_TYPE_INVALID_FLAG else entry_type)
        if self.type == C.ENTRY_TYPE_STANDBY_SNAPSHOT and self.archive_endpoint:
            endpoint = self.archive_endpoint.encode("ascii")
            data += struct.pack("<i", len(endpoint)) + endpoint
        return data.ljust(self.length, b"\0")

    def __str__(self) -> str:
        endpoint = (f", archiveEndpoint={self.archive_endpoint}"
                    if self.type == C.ENTRY_TYPE_STANDBY_SNAPSHOT else "")
        return (f"Entry{{recordingId={self.recording_id}, leadershipTermId={self.leadership_term_id}, "
                f"termBaseLogPosition={self.term_base_log_position}, logPosition={self.log_position}, "
                f"timestamp={self.timestamp}, serviceId={self.service_id}, "
                f"type={C.ENTRY_TYPE_NAMES.get(self.type, 'UNKNOWN')}, isValid={_java_bool(self.is_valid)}, "
                f"entryIndex={self.entry_index}{endpoint}}}")


def _compare(e1: Entry, e2: Entry) -> int:
    """§2.3's order; Aeron's comparator, so a sort here and in Aeron give the same list."""
    for a, b in ((e1.leadership_term_id, e2.leadership_term_id),
                 (e1.term_base_log_position, e2.term_base_log_position)):
        if a != b:
            return -1 if a < b else 1
    if e1.type != e2.type:
        if e1.type == C.ENTRY_TYPE_SNAPSHOT:
            return 1
        if e2.type == C.ENTRY_TYPE_SNAPSHOT:
            return -1
        return -1 if e1.type < e2.type else 1
    if e1.type == C.ENTRY_TYPE_TERM:
        return (e1.entry_index > e2.entry_index) - (e1.entry_index < e2.entry_index)
    if e1.log_position != e2.log_position:
        return -1 if e1.log_position < e2.log_position else 1
    return (e2.service_id > e1.service_id) - (e2.service_id < e1.service_id)  # descending service id


sort_key = functools.cmp_to_key(_compare)


def is_valid_term(entry: Entry) -> bool:
    return entry.is_valid and entry.type == C.ENTRY_TYPE_TERM


def is_valid_snapshot(entry: Entry) -> bool:
    return entry.is_valid and entry.type == C.ENTRY_TYPE_SNAPSHOT


def is_valid_any_snapshot(entry: Entry) -> bool:
    return entry.is_valid and entry.type in (C.ENTRY_TYPE_SNAPSHOT, C.ENTRY_TYPE_STANDBY_SNAPSHOT)


def parse_entries(data: bytes, path: str | os.PathLike) -> tuple[list[Entry], int]:
    """The file's entries in file order (removed ones skipped) and the next entry index.

    Raises ``ClusterFileError`` for a truncated entry, an unknown entry type, a bad endpoint, or TERM entries
    that name two different log recordings.
    """
    entries: list[Entry] = []
    offset, index, limit = 0, 0, len(data)
    term_recording_id = NULL_VALUE
    while offset < limit:
        if limit - offset < C.ENTRY_ENDPOINT_OFFSET:
            raise ClusterFileError(path, f"truncated entry {index}: {limit - offset} bytes < the "
                                   f"{C.ENTRY_ENDPOINT_OFFSET} of an entry's fields (file length={limit})",
                                   offset, limit)
        fields = _FIELDS.unpack_from(data, offset)
        raw_type = fields[6]
        entry_type = raw_type & ~C.ENTRY_TYPE_INVALID_FLAG & 0xFFFF_FFFF
        endpoint = None
        if raw_type != C.ENTRY_TYPE_REMOVED and entry_type not in C.ENTRY_TYPE_NAMES:
            raise ClusterFileError(path, f"entry {index} has entryType={raw_type} (0x{raw_type & 0xFFFF_FFFF:08x}): "
                                   f"not 0 TERM, 1 SNAPSHOT, 2 STANDBY_SNAPSHOT (optionally | 0x80000000 invalid) "
                                   f"or -1 removed", offset + C.ENTRY_TYPE_OFFSET, limit)
        if entry_type == C.ENTRY_TYPE_STANDBY_SNAPSHOT and raw_type != C.ENTRY_TYPE_REMOVED:
            at = offset + C.ENTRY_ENDPOINT_OFFSET
            if at + VAR_LENGTH_PREFIX > limit:
                raise ClusterFileError(path, f"truncated STANDBY_SNAPSHOT entry {index}: no endpoint length before "
                                       f"the end of the file (file length={limit})", at, limit)
            (length,) = struct.unpack_from("<i", data, at)
            if not 0 < length <= C.MAX_ENDPOINT_LENGTH or at + VAR_LENGTH_PREFIX + length > limit:
                raise ClusterFileError(path, f"STANDBY_SNAPSHOT entry {index} has endpoint length={length}: must be "
                                       f"in [1, {C.MAX_ENDPOINT_LENGTH}] and end by the file length={limit}",
                                       at, limit)
            endpoint = data[at + VAR_LENGTH_PREFIX:at + VAR_LENGTH_PREFIX + length].decode("ascii", "replace")
        entry = Entry(*fields[:6], entry_type, is_valid=not raw_type & C.ENTRY_TYPE_INVALID_FLAG,
                      entry_index=index, archive_endpoint=endpoint, position=offset)
        if raw_type != C.ENTRY_TYPE_REMOVED:
            if entry_type == C.ENTRY_TYPE_TERM:
                if term_recording_id == NULL_VALUE:
                    term_recording_id = entry.recording_id
                elif entry.recording_id != term_recording_id:
                    raise ClusterFileError(path, f"TERM entry {index} has recordingId={entry.recording_id}, but the "
                                           f"log's TERM entries name recordingId={term_recording_id}", offset, limit)
            entries.append(entry)
        offset += C.entry_length(entry_type, len(endpoint or ""))
        index += 1
    return entries, index


class RecordingLog:
    """A cluster dir's ``recording.log``: the sorted entries in memory, every change written through to the file.

    ``read_only`` opens it for tools that only print (no method that writes may then be called).
    """

    def __init__(self, cluster_dir: str | os.PathLike, *, create_new: bool = False, read_only: bool = False,
                 file_sync_level: int = 0):
        self.path = Path(cluster_dir) / C.RECORDING_LOG_FILE
        self.read_only = read_only
        self.file_sync_level = file_sync_level
        if not self.path.exists() and (read_only or not create_new):
            raise ClusterFileError(self.path, "no recording.log in this cluster directory")
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create_new else 0)
        self._fd = os.open(self.path, flags, 0o644)
        self.entries: list[Entry] = []
        self.term_index = TermIndex()
        self._invalid_snapshots: list[int] = []
        self._term_recording_id = NULL_VALUE
        self.next_entry_index = 0
        try:
            self.reload()
        except BaseException:
            self.close()
            raise

    # -------------------------------------------------------------------------------------------- reading
    def reload(self) -> None:
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        entries, self.next_entry_index = parse_entries(data, self.path)
        self._term_recording_id = next((e.recording_id for e in entries if e.type == C.ENTRY_TYPE_TERM), NULL_VALUE)
        entries.sort(key=sort_key)
        self.entries = entries
        self.term_index.clear_and_compact()
        self._invalid_snapshots = []
        for i, entry in enumerate(entries):
            if is_valid_term(entry):
                self.term_index.put(entry.leadership_term_id, i)
            if not entry.is_valid and entry.type in (C.ENTRY_TYPE_SNAPSHOT, C.ENTRY_TYPE_STANDBY_SNAPSHOT):
                self._invalid_snapshots.append(i)

    def __str__(self) -> str:
        return f"RecordingLog{{entries=[{', '.join(map(str, self.entries))}], cacheIndex={self.term_index}}}"

    def find_last_term(self) -> Entry | None:
        return next((e for e in reversed(self.entries) if is_valid_term(e)), None)

    def find_last_term_recording_id(self) -> int:
        last = self.find_last_term()
        return NULL_VALUE if last is None else last.recording_id

    def find_term_entry(self, leadership_term_id: int) -> Entry | None:
        index = self.term_index.get(leadership_term_id)
        return None if index == NULL_VALUE else self.entries[index]

    def get_term_entry(self, leadership_term_id: int) -> Entry:
        entry = self.find_term_entry(leadership_term_id)
        if entry is None:
            raise ClusterError(f"unknown leadershipTermId={leadership_term_id}")
        return entry

    def get_term_timestamp(self, leadership_term_id: int) -> int:
        entry = self.find_term_entry(leadership_term_id)
        return NULL_VALUE if entry is None else entry.timestamp

    def is_unknown(self, leadership_term_id: int) -> bool:
        return leadership_term_id not in self.term_index

    def get_latest_snapshot(self, service_id: int) -> Entry | None:
        """The latest valid snapshot of ``service_id`` that belongs to the latest valid consensus-module
        snapshot (a service's snapshot sits ``service_id + 1`` places before the consensus module's)."""
        for i in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[i]
            if is_valid_snapshot(entry) and entry.service_id == C.CONSENSUS_MODULE_SERVICE_ID:
                if service_id == C.CONSENSUS_MODULE_SERVICE_ID:
                    return entry
                at = i - (service_id + 1)
                if at >= 0 and is_valid_snapshot(self.entries[at]) and self.entries[at].service_id == service_id:
                    return self.entries[at]
        return None

    def create_recovery_plan(self, service_count: int, extent_of: ExtentLookup,
                             replicated_recording_id: int = NULL_VALUE) -> RecoveryPlan:
        """The latest valid snapshot set and the log after it, with the log's extent from ``extent_of``."""
        return plan_recovery(self.entries, service_count, extent_of, replicated_recording_id)

    # -------------------------------------------------------------------------------------------- writing
    def append_term(self, recording_id: int, leadership_term_id: int, term_base_log_position: int,
                    timestamp: int) -> None:
        """Add a TERM entry; the previous term's log position becomes this term's base (it is committed)."""
        self._validate_term_recording_id(recording_id)
        log_position = NULL_POSITION
        if self.entries:
            if leadership_term_id in self.term_index:
                raise ClusterError(f"duplicate TERM entry for leadershipTermId={leadership_term_id}")
            if leadership_term_id - 1 in self.term_index:
                self.commit_log_position(leadership_term_id - 1, term_base_log_position)
            following = self.find_term_entry(leadership_term_id + 1)
            if following is not None:
                log_position = following.term_base_log_position
        index = self._append(C.ENTRY_TYPE_TERM, recording_id, leadership_term_id, term_base_log_position,
                             log_position, timestamp, NULL_VALUE, None)
        self.term_index.put(leadership_term_id, index)

    def append_snapshot(self, recording_id: int, leadership_term_id: int, term_base_log_position: int,
                        log_position: int, timestamp: int, service_id: int) -> None:
        """Add a SNAPSHOT entry (services first, in descending id, then the consensus module's, id -1); an
        identical snapshot invalidated earlier is made valid again in place instead."""
        _validate_recording_id(recording_id)
        if not self._restore_invalid_snapshot(C.ENTRY_TYPE_SNAPSHOT, recording_id, leadership_term_id,
                                              term_base_log_position, log_position, timestamp, service_id, None):
            self._append(C.ENTRY_TYPE_SNAPSHOT, recording_id, leadership_term_id, term_base_log_position,
                         log_position, timestamp, service_id, None)

    def append_standby_snapshot(self, recording_id: int, leadership_term_id: int, term_base_log_position: int,
                                log_position: int, timestamp: int, service_id: int, archive_endpoint: str) -> None:
        _validate_recording_id(recording_id)
        if not archive_endpoint:
            raise ClusterError("a STANDBY_SNAPSHOT entry needs an archive endpoint")
        if len(archive_endpoint) > C.MAX_ENDPOINT_LENGTH:
            raise ClusterError(f"archiveEndpoint length={len(archive_endpoint)} > "
                               f"MAX_ENDPOINT_LENGTH={C.MAX_ENDPOINT_LENGTH}")
        if not self._restore_invalid_snapshot(C.ENTRY_TYPE_STANDBY_SNAPSHOT, recording_id, leadership_term_id,
                                              term_base_log_position, log_position, timestamp, service_id,
                                              archive_endpoint):
            self._append(C.ENTRY_TYPE_STANDBY_SNAPSHOT, recording_id, leadership_term_id, term_base_log_position,
                         log_position, timestamp, service_id, archive_endpoint)

    def commit_log_position(self, leadership_term_id: int, log_position: int) -> None:
        """Set a term's end position (offset 24 of its entry), if it changed."""
        index = self.term_index.get(leadership_term_id)
        if index == NULL_VALUE:
            raise ClusterError(f"unknown leadershipTermId={leadership_term_id}")
        entry = self.entries[index]
        if entry.log_position != log_position:
            self._write(entry.position + C.ENTRY_LOG_POSITION_OFFSET, struct.pack("<q", log_position))
            self.entries[index] = replace(entry, log_position=log_position)

    def invalidate_entry(self, index: int) -> None:
        """Set the invalid flag of the entry at ``index`` of the sorted list (offset 44 of its entry)."""
        entry = replace(self.entries[index], is_valid=False)
        self.entries[index] = entry
        if entry.type == C.ENTRY_TYPE_TERM:
            self.term_index.remove(entry.leadership_term_id)
        elif entry.type in (C.ENTRY_TYPE_SNAPSHOT, C.ENTRY_TYPE_STANDBY_SNAPSHOT):
            self._invalid_snapshots.append(index)
        self._write(entry.position + C.ENTRY_TYPE_OFFSET, struct.pack("<I", entry.type | C.ENTRY_TYPE_INVALID_FLAG))

    def invalidate_latest_snapshot(self) -> bool:
        """Invalidate the latest valid snapshot set (the consensus module's entry and its services' before it);
        False when there is none."""
        starts: list[int] = []
        high = NULL_POSITION
        for i in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[i]
            if is_valid_any_snapshot(entry) and entry.service_id == C.CONSENSUS_MODULE_SERVICE_ID:
                if entry.log_position < high:
                    break  # an earlier snapshot: the latest set is found
                if entry.leadership_term_id not in self.term_index:
                    raise ClusterError(f"no matching term for snapshot: leadershipTermId={entry.leadership_term_id}")
                if entry.log_position > high:
                    starts.clear()
                    high = entry.log_position
                starts.append(i)
        for start in reversed(starts):
            service_id = C.CONSENSUS_MODULE_SERVICE_ID
            for i in range(start, -1, -1):
                entry = self.entries[i]
                if not (is_valid_any_snapshot(entry) and entry.service_id == service_id):
                    break
                self.invalidate_entry(i)
                service_id += 1
        return bool(starts)

    def remove_entry(self, leadership_term_id: int, entry_index: int) -> None:
        """Mark an entry removed (entryType -1) and reload."""
        target = next((e for e in reversed(self.entries)
                       if e.leadership_term_id == leadership_term_id and e.entry_index == entry_index), None)
        if target is None:
            raise ClusterError(f"unknown entry index: {entry_index}")
        self._write(target.position + C.ENTRY_TYPE_OFFSET, struct.pack("<i", C.ENTRY_TYPE_REMOVED))
        self.reload()

    def ensure_coherent(self, recording_id: int, initial_log_leadership_term_id: int,
                        initial_term_base_log_position: int, leadership_term_id: int, term_base_log_position: int,
                        log_position: int, timestamp: int) -> None:
        """Make the log hold every term up to ``leadership_term_id`` (back-filling missing ones) and commit
        ``log_position`` to it when known."""
        last = self.find_last_term()
        if last is None:
            for term in range(max(0, initial_log_leadership_term_id), leadership_term_id):
                self.append_term(recording_id, term, initial_term_base_log_position, timestamp)
            self.append_term(recording_id, leadership_term_id, term_base_log_position, timestamp)
        elif last.leadership_term_id < leadership_term_id:
            if last.log_position == NULL_POSITION:
                if term_base_log_position == NULL_POSITION:
                    raise ClusterError(f"Prior term was not committed: {last} and logTermBasePosition was not "
                                       f"specified: leadershipTermId = {leadership_term_id}, logTermBasePosition = "
                                       f"{term_base_log_position}, logPosition = {log_position}")
                self.commit_log_position(last.leadership_term_id, term_base_log_position)
                last = self.find_last_term()
            for term in range(last.leadership_term_id + 1, leadership_term_id):
                self.append_term(recording_id, term, last.log_position, timestamp)
            self.append_term(recording_id, leadership_term_id, last.log_position, timestamp)
        if log_position != NULL_POSITION:
            self.commit_log_position(leadership_term_id, log_position)
        self.force()

    def force(self) -> None:
        if self.file_sync_level > 0 and not self.read_only:
            os.fsync(self._fd) if self.file_sync_level > 1 else os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RecordingLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------- internals
    def _validate_term_recording_id(self, recording_id: int) -> None:
        _validate_recording_id(recording_id)
        if self._term_recording_id == NULL_VALUE:
            self._term_recording_id = recording_id
        elif recording_id != self._term_recording_id:
            raise ClusterError(f"invalid TERM recordingId={recording_id}, expected "
                               f"recordingId={self._term_recording_id}")

    def _write(self, offset: int, data: bytes) -> None:
        if self.read_only:
            raise ClusterError(f"{self.path} was opened read-only")
        if os.pwrite(self._fd, data, offset) != len(data):
            raise ClusterError(f"{self.path}: short write of {len(data)} bytes at offset {offset}")

    def _append(self, entry_type: int, recording_id: int, leadership_term_id: int, term_base_log_position: int,
                log_position: int, timestamp: int, service_id: int, endpoint: str | None) -> int:
        position = align(os.fstat(self._fd).st_size, C.ENTRY_RECORD_ALIGNMENT)
        entry = Entry(recording_id, leadership_term_id, term_base_log_position, log_position, timestamp, service_id,
                      entry_type, True, self.next_entry_index, endpoint, position)
        self._write(position, entry.encode())
        self.next_entry_index += 1
        index = len(self.entries)
        while index > 0 and _compare(entry, self.entries[index - 1]) < 0:
            index -= 1
        self.entries.insert(index, entry)
        if index < len(self.entries) - 1:
            self.term_index.shift_after(leadership_term_id)
            self._invalid_snapshots = [i + 1 if i >= index else i for i in self._invalid_snapshots]
        return index

    def _restore_invalid_snapshot(self, entry_type: int, recording_id: int, leadership_term_id: int,
                                  term_base_log_position: int, log_position: int, timestamp: int, service_id: int,
                                  endpoint: str | None) -> bool:
        for k in range(len(self._invalid_snapshots) - 1, -1, -1):
            index = self._invalid_snapshots[k]
            old = self.entries[index]
            if (old.type == entry_type and old.leadership_term_id == leadership_term_id
                    and old.term_base_log_position == term_base_log_position and old.log_position == log_position
                    and old.service_id == service_id):
                entry = Entry(recording_id, leadership_term_id, term_base_log_position, log_position, timestamp,
                              service_id, entry_type, True, old.entry_index, endpoint or old.archive_endpoint,
                              old.position)
                self._write(old.position, entry.encode())
                self.entries[index] = entry
                self._invalid_snapshots[k] = self._invalid_snapshots[-1]  # unordered remove, as Aeron's
                self._invalid_snapshots.pop()
                return True
        return False


def _validate_recording_id(recording_id: int) -> None:
    if recording_id == NULL_VALUE:
        raise ClusterError(f"invalid recordingId={recording_id}")


def rewrite_recording_log(cluster_dir: str | os.PathLike, entries: Iterable[Entry]) -> None:
    """Replace the dir's recording.log with ``entries`` written back to back in the given order (through a
    ``.tmp`` file renamed over it); no entries deletes the file. What ClusterTool's sort and seed commands do."""
    path = Path(cluster_dir) / C.RECORDING_LOG_FILE
    entries = list(entries)
    if not entries:
        path.unlink()
        return
    temp = path.with_name(C.RECORDING_LOG_FILE + C.RECORDING_LOG_TEMP_SUFFIX)
    temp.unlink(missing_ok=True)
    with open(temp, "xb") as f:
        for entry in entries:
            f.write(entry.encode())
    os.replace(temp, path)


def is_sorted_on_disk(entries: list[Entry]) -> bool:
    """Whether the file already holds the entries in sorted order (each at its own entry index)."""
    return all(entry.entry_index == i for i, entry in enumerate(entries))
