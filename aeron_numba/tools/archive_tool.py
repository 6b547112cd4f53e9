"""archive-tool: inspect and repair an archive dir offline, with Aeron ``ArchiveTool``'s command line and output.

```
archive-tool <archive-dir> <command> [args]
  capacity [bytes]                        describe [recordingId]       describe-all
  checksum className [recordingId] [-a]   dump [fragment limit]        errors      pid
  compact                                 count-entries                max-entries [n] (deprecated)
  delete-orphaned-segments [recordingId]  migrate                      mark-valid|mark-invalid <recordingId>
  verify [recordingId] [-a] [-checksum className]
```
Output lines are ArchiveTool's (SBE ``toString()`` of descriptors and the mark file header, ``(recordingId=N) OK``,
the hex dump of ``dump``), and like it ``dump``, ``compact``, ``delete-orphaned-segments`` and ``migrate`` ask
"Continue? (y/n)" on stdin (an empty answer is yes; end of input is no). ``className`` is Aeron's checksum class
(``io.aeron.archive.checksum.Crc32`` / ``Crc32c``) or ``CRC-32`` / ``CRC-32C``.

Exit codes as ArchiveTool's: 255 (its ``System.exit(-1)``) for bad arguments (an ``ERR:`` line naming the problem,
then the command's usage line) and for a ``verify`` that found a faulty recording; 1 when the command could not
be done (unknown recording, a state change that is not allowed, unreadable files), with an ``ERR:`` line.
Commands that write refuse to run while a live archive holds the dir (its mark file is being touched).
Not done: verify's interactive truncation of a last fragment that straddles a page boundary.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from aeron_numba import cli
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.layout import archive as A
from aeron_numba.layout import cnc
from aeron_numba.layout import frame as F
from aeron_numba.layout.bits import semantic_version_major
from aeron_numba.layout.checksum import CHECKSUM_NONE, checksum_algorithm
from aeron_numba.tools._archive_text import (descriptor_header_text, descriptor_text, error_log_lines,
                                             mark_header_text, mark_summary_line, pretty_hex_dump, state_name)
from aeron_numba.tools._common import EXIT_FAILURE, EXIT_OK, epoch_ms

# numpy, the archive's modules and the kernels are bound by ``_import_archive()`` when a command runs: ``--help``
# and ``--version`` answer without loading Numba.
np = ArchiveMarkFile = Catalog = CatalogError = CncFile = MappedFile = frame_checksum = None


def _import_archive() -> None:
    global np, ArchiveMarkFile, Catalog, CatalogError, CncFile, MappedFile, frame_checksum
    import numpy as np
    from aeron_numba.archive.catalog import Catalog, CatalogError
    from aeron_numba.archive.mark_file import ArchiveMarkFile
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels.replay_rewrite import frame_checksum
    from aeron_numba.layout.mapped_file import MappedFile

TOOL = "archive-tool"
#: ArchiveTool's System.exit(-1): bad arguments, or verify found faults.
EXIT_USAGE = 255
_MAX_ARGS = 6  # ArchiveTool's limit, archive dir included
_NO_LIMIT = (1 << 63) - 1  # dump without a limit: Long.MAX_VALUE, as ArchiveTool prints it

USAGE = {
    "capacity": "capacity [capacity in bytes]: gets or increases catalog capacity.",
    "checksum": "checksum className [recordingId] [-a]: computes and persists checksums (last segment file of each "
                "recording, all with '-a').",
    "compact": "compact: removes non-valid entries from the catalog and deletes their segment files.",
    "count-entries": "count-entries: prints the number of entries in the catalog.",
    "delete-orphaned-segments": "delete-orphaned-segments [recordingId]: deletes segment files outside their "
                                "recording's start and stop positions.",
    "describe": "describe [recordingId]: prints the descriptors of all valid recordings, or of the one given.",
    "describe-all": "describe-all: prints the descriptors of all recordings with their state.",
    "dump": "dump [data fragment limit per recording]: prints descriptors and the recorded data.",
    "errors": "errors: prints the errors of the archive and its media driver.",
    "max-entries": "max-entries [number of entries]: *** DEPRECATED: use `capacity` instead. ***",
    "migrate": "migrate: migrates the archive mark file, catalog and recordings to the latest version.",
    "pid": "pid: prints the PID of the archive.",
    "verify": "verify [recordingId] [-a] [-checksum className]: verifies descriptors and segment files (the last "
              "segment file, all with '-a'); faulty entries are marked INVALID.",
    "mark-invalid": "mark-invalid <recordingId>: marks a recording as invalid.",
    "mark-valid": "mark-valid <recordingId>: marks a previously invalidated recording as valid.",
}
_WRITES = {"checksum", "compact", "delete-orphaned-segments", "mark-invalid", "mark-valid", "migrate", "verify"}


class UsageError(AeronError):
    """Arguments ArchiveTool would not accept; ``command`` names whose usage line to show (None: all). An id
    that names no recording is understood but cannot be done: it exits 1, as ArchiveTool's exception does."""

    def __init__(self, problem: str, command: str | None = None, exit_code: int = EXIT_USAGE):
        super().__init__(problem)
        self.command = command
        self.exit_code = exit_code


class ToolFailure(AeronError):
    """The command was understood but cannot be done (ArchiveTool throws; its message is printed)."""


def usage_lines(command: str | None = None, prog: str = TOOL) -> list[str]:
    if command in USAGE:
        return [f"Usage: {prog} <archive-dir> {USAGE[command]}"]
    return [f"Usage: {prog} <archive-dir> <command> (items in square brackets are optional)", "",
            *(f"  {line}" for line in USAGE.values())]


# ------------------------------------------------------------------------------------------------ arguments
@dataclass
class Command:
    archive_dir: Path
    name: str
    recording_id: int | None = None
    number: int | None = None  # dump's fragment limit, capacity's bytes, max-entries' count
    all_segment_files: bool = False
    checksum: int = CHECKSUM_NONE
    apply_checksum: bool = False


def _number(command: str, what: str, text: str, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{what} must be a number: {text!r}", command) from None
    if value < minimum:
        raise UsageError(f"{what}={value} must be >= {minimum}", command)
    return value


def _checksum_class(command: str, text: str | None) -> int:
    if text is None or not text.strip():
        raise UsageError("Checksum class name must be specified!", command)
    try:
        return checksum_algorithm(text.strip())
    except ConfigurationError as exc:
        raise UsageError(str(exc), command) from None


def parse_command(argv: list[str]) -> Command:
    if not argv or len(argv) > _MAX_ARGS:
        raise UsageError("no archive dir given" if not argv else f"{len(argv)} arguments > at most {_MAX_ARGS}")
    if len(argv) == 1:
        raise UsageError("no command given")
    archive_dir, name, args = Path(argv[0]), argv[1], argv[2:]
    if name not in USAGE:
        raise UsageError(f"Invalid command {name!r}")
    command = Command(archive_dir, name)
    optional_id = {"describe", "delete-orphaned-segments"}
    if name in optional_id or name in ("mark-valid", "mark-invalid"):
        if len(args) > 1 or (not args and name not in optional_id):
            raise UsageError("expected one recordingId" if args else "missing recordingId", name)
        if args:
            command.recording_id = _number(name, "recordingId", args[0])
    elif name in ("dump", "capacity", "max-entries"):
        if len(args) > 1:
            raise UsageError(f"unexpected arguments {args[1:]}", name)
        if args:
            what = {"dump": "fragment limit", "capacity": "capacity", "max-entries": "number of entries"}[name]
            command.number = _number(name, what, args[0], 1)
    elif name == "verify":
        _parse_verify(command, args)
    elif name == "checksum":
        if not args:
            raise UsageError("missing checksum className", name)
        command.checksum = _checksum_class(name, args[0])
        for arg in args[1:]:
            if arg == "-a" and not command.all_segment_files:
                command.all_segment_files = True
            elif command.recording_id is None and not command.all_segment_files:
                command.recording_id = _number(name, "recordingId", arg)
            else:
                raise UsageError(f"unexpected argument {arg!r}", name)
    elif args:
        raise UsageError(f"{name} takes no arguments, got {args}", name)
    return command


def _parse_verify(command: Command, args: list[str]) -> None:
    it = iter(enumerate(args))
    for i, arg in it:
        if arg == "-a" and not command.all_segment_files:
            command.all_segment_files = True
        elif arg == "-checksum" and not command.apply_checksum:
            command.apply_checksum = True
            command.checksum = _checksum_class("verify", next(it, (0, None))[1])
        elif arg.startswith("-") and not arg.lstrip("-").isdigit():
            raise UsageError(f"unknown or repeated option {arg!r}", "verify")
        elif i == 0:
            command.recording_id = _number("verify", "recordingId", arg)
        else:
            raise UsageError(f"unexpected argument {arg!r}", "verify")


# --------------------------------------------------------------------------------------------- console
class Console:
    """Where a command prints, and how it asks "Continue? (y/n)" (ArchiveTool reads a line from stdin)."""

    def __init__(self, out: TextIO, answers: TextIO):
        self.out = out
        self.answers = answers

    def println(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def print(self, text: str) -> None:
        self.out.write(text)

    def confirm(self, question: str) -> bool:
        self.println()
        self.print(f"{question}: ")
        self.out.flush()
        line = self.answers.readline()
        if not line:
            return False  # no one to answer: do not go on
        answer = line.strip().lower()
        return answer in ("", "y", "yes")


# --------------------------------------------------------------------------------------------- helpers
def _mark_dir(archive_dir: Path) -> Path:
    link = archive_dir / A.MARK_LINK_FILE
    return Path(link.read_text("ascii").strip()) if link.exists() else archive_dir


def _print_mark_information(console: Console, archive_dir: Path) -> None:
    path = (_mark_dir(archive_dir) / A.MARK_FILE).absolute()
    if not path.exists():
        console.println(f"INFO: no mark file at {path}")
        return
    console.println(f"INFO: Mark file exists: {path}")
    with ArchiveMarkFile.open(path.parent, read_only=True) as mark:
        console.println(mark_summary_line(epoch_ms(), mark.start_timestamp, mark.activity_timestamp))
        console.println(mark_header_text(mark))


def _require(catalog: Catalog, command: Command) -> None:
    if command.recording_id is not None and not catalog.has_recording(command.recording_id):
        raise UsageError(f"no recording found with recordingId: {command.recording_id}", command.name, EXIT_FAILURE)


def _segment_names(archive_dir: Path) -> dict[int, list[str]]:
    """Segment file names by recording id: every ``<id>-<anything>.rec`` (a bad position is the caller's)."""
    index: dict[int, list[str]] = {}
    for name in sorted(os.listdir(archive_dir)):
        head, dash, _ = name.partition("-")
        if name.endswith(A.SEGMENT_FILE_SUFFIX) and dash and head.lstrip("-").isdigit():
            index.setdefault(int(head), []).append(name)
    return index


def _segment_position(name: str) -> int:
    parsed = A.parse_segment_file_name(name)
    if parsed is None:
        raise ToolFailure(f"invalid segment file name: {name}")
    return parsed[1]


def _highest_segment(names: list[str]) -> str | None:
    return max(names, key=_segment_position) if names else None


def _term_id(position: int, term_length: int, initial_term_id: int) -> int:
    value = (position >> (term_length.bit_length() - 1)) + initial_term_id
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 wrap, as Java's


def _first_offset(base: int, start_position: int, term_length: int) -> int:
    """Where a segment file's frames begin: the start's term offset in the file of the start's term, else 0."""
    start_term_offset = start_position & (term_length - 1)
    return start_term_offset if base == start_position - start_term_offset else 0


def _header(buffer: np.ndarray, offset: int) -> tuple[int, int, int, int, int, int, int]:
    """(frame length, flags, type, term offset, session id, stream id, term id) of the frame at ``offset``."""
    length, _, flags, frame_type, term_offset, session, stream, term_id = struct.unpack_from(
        "<iBBHiiii", buffer, offset)
    return length, flags, frame_type, term_offset, session, stream, term_id


def _aligned(length: int) -> int:
    return (length + F.FRAME_ALIGNMENT - 1) & ~(F.FRAME_ALIGNMENT - 1)


# -------------------------------------------------------------------------------------------- commands
def describe(console: Console, command: Command, catalog: Catalog) -> int:
    if command.recording_id is not None:
        _require(catalog, command)
        console.println(descriptor_text(catalog.descriptor(command.recording_id)))
        return EXIT_OK
    _print_mark_information(console, command.archive_dir)
    console.println(f"Catalog capacity in bytes: {catalog.capacity}")
    for rid in catalog.recording_ids():
        state = catalog.state(rid)
        if command.name == "describe-all":
            console.println(f"{descriptor_text(catalog.descriptor(rid))}|{state_name(state)}")
        elif state == A.RECORDING_STATE_VALID:
            console.println(descriptor_text(catalog.descriptor(rid)))
    return EXIT_OK


def dump(console: Console, command: Command, catalog: Catalog) -> int:
    limit = command.number if command.number is not None else _NO_LIMIT
    _print_mark_information(console, command.archive_dir)
    console.println(f"Catalog capacity in bytes: {catalog.capacity}")
    console.println()
    console.println(f"Dumping up to {limit} fragments per recording")
    for rid in catalog.recording_ids():
        _dump_recording(console, command.archive_dir, catalog, rid, limit)
    return EXIT_OK


def _dump_recording(console: Console, archive_dir: Path, catalog: Catalog, rid: int, limit: int) -> None:
    d = catalog.descriptor(rid)
    stream_length = d.stop_position - d.start_position
    console.println()
    console.println()
    console.println(f"Recording {rid}")
    console.println(f"  channel: {d.stripped_channel}")
    console.println(f"  streamId: {d.stream_id}")
    console.println(f"  stream length: {A.NULL_POSITION if d.stop_position == A.NULL_POSITION else stream_length}")
    console.println(descriptor_header_text(*catalog.entry_header(rid)))
    console.println(descriptor_text(d))
    if stream_length == 0:
        console.println("Recording is empty")
        return
    end = d.stop_position if d.stop_position != A.NULL_POSITION else _NO_LIMIT
    position, countdown, mapped = d.start_position, limit, {}
    while True:
        console.println()
        console.print(f"Frame at position [{position}] ")
        step = _dump_frame(console, archive_dir, d, position, mapped)
        if step <= 0:
            return  # nothing written there (or no segment file): the reader is done
        position += step
        countdown -= 1
        if countdown == 0:
            countdown = limit
            if d.stop_position != A.NULL_POSITION:
                # ArchiveTool's own arithmetic: the stream length less the position, start position not taken off
                console.println(f"{stream_length - position} bytes of (from {stream_length}) remaining in "
                                f"recording id {rid}")
            if not console.confirm(f"Specified frame limit {limit} reached. Continue? (y/n)"):
                return
        if position >= end:
            return


def _dump_frame(console: Console, archive_dir: Path, d, position: int, mapped: dict) -> int:
    """Print the frame at ``position``; its aligned length, or 0 where no frame was written. ``mapped`` keeps
    the current segment file's read-only map (one per segment, not per frame)."""
    base = A.segment_file_base_position(d.start_position, position, d.term_buffer_length, d.segment_file_length)
    if base not in mapped:
        path = archive_dir / A.segment_file_name(d.recording_id, base)
        mapped.clear()
        mapped[base] = np.memmap(path, dtype=np.uint8, mode="r") if path.exists() else None
    segment = mapped[base]
    if segment is None:
        return 0
    offset = position - base
    if offset + F.HEADER_LENGTH > segment.size:
        return 0
    length, flags, frame_type, *_ = _header(segment, offset)
    if length <= 0:
        return 0
    data_offset = (position & (d.term_buffer_length - 1)) + F.HEADER_LENGTH
    data_length = length - F.HEADER_LENGTH
    console.println(f"data at offset [{data_offset}] with length = {data_length}")
    if frame_type == F.HDR_TYPE_PAD:
        console.println("PADDING FRAME")
    elif frame_type == F.HDR_TYPE_DATA:
        if flags & F.UNFRAGMENTED != F.UNFRAGMENTED:
            suffix = ("BEGIN_FRAGMENT" if flags & F.BEGIN_FRAG_FLAG else "") + \
                     ("END_FRAGMENT" if flags & F.END_FRAG_FLAG else "")
            console.println(f"Fragmented frame. {suffix}")
        payload = bytes(segment[offset + F.HEADER_LENGTH:offset + max(length, F.HEADER_LENGTH)])
        console.println(pretty_hex_dump(payload))
    else:
        console.println(f"Unexpected frame type {frame_type}")
    return _aligned(length)


def errors(console: Console, command: Command) -> int:
    with ArchiveMarkFile.open(_mark_dir(command.archive_dir), read_only=True) as mark:
        console.println("Archive error log:")
        for line in error_log_lines(mark.error_log_buffer):
            console.println(line)
        aeron_dir = mark.strings()["aeron_directory"]
    console.println()
    console.println(f"Aeron driver error log (directory: {aeron_dir}):")
    path = Path(aeron_dir) / cnc.CNC_FILE
    if not path.exists():
        raise ToolFailure(f"no media driver error log: {path} does not exist")
    with CncFile.open(path) as cnc_file:
        for line in error_log_lines(cnc_file.error_log_buffer):
            console.println(line)
    return EXIT_OK


def pid(console: Console, command: Command) -> int:
    with ArchiveMarkFile.open(_mark_dir(command.archive_dir), read_only=True) as mark:
        console.println(str(mark.pid))
    return EXIT_OK


def count_entries(console: Console, command: Command, catalog: Catalog) -> int:
    console.println(str(len(catalog.recording_ids())))
    return EXIT_OK


def max_entries(console: Console, command: Command, catalog: Catalog) -> int:
    console.println("max-entries is deprecated please use capacity.")
    return EXIT_OK


def capacity(console: Console, command: Command, catalog: Catalog) -> int:
    if command.number is not None:
        catalog.grow_to(command.number)
    console.println(f"Catalog capacity in bytes: {catalog.capacity}")
    return EXIT_OK


def change_state(console: Console, command: Command, catalog: Catalog) -> int:
    rid = command.recording_id
    _require(catalog, command)
    if command.name == "mark-valid":
        expected, target = A.RECORDING_STATE_INVALID, A.RECORDING_STATE_VALID
    else:
        expected, target = A.RECORDING_STATE_VALID, A.RECORDING_STATE_INVALID
    current = catalog.state(rid)
    if current != target:
        if current != expected:
            raise ToolFailure(f"(recordingId={rid}) state transition {state_name(current)} -> {state_name(target)} "
                              f"is not allowed")
        catalog.change_state(rid, target)
        console.println(f"(recordingId={rid}) changed state to {state_name(target)}")
    return EXIT_OK


def verify(console: Console, command: Command, catalog: Catalog) -> int:
    _require(catalog, command)
    ids = catalog.recording_ids() if command.recording_id is None else [command.recording_id]
    index = _segment_names(command.archive_dir)
    faults = sum(not _verify_recording(console, command, catalog, rid, index.get(rid, [])) for rid in ids)
    return EXIT_OK if faults == 0 else EXIT_USAGE


def _verify_recording(console: Console, command: Command, catalog: Catalog, rid: int, names: list[str]) -> bool:
    """ArchiveTool's checks, in its order; a fault is printed and marks the recording INVALID."""
    state = catalog.state(rid)
    if state not in (A.RECORDING_STATE_VALID, A.RECORDING_STATE_INVALID):
        console.println(f"(recordingId={rid}) skipping: {state_name(state)}")
        return True
    d = catalog.descriptor(rid)
    problem = _position_problem(d.start_position, d.stop_position)
    highest = computed_stop = None
    if problem is None:
        try:
            highest = _highest_segment(names)
            if highest is not None:
                max_position = _segment_position(highest) + d.segment_file_length - 1
                if d.start_position > max_position or d.stop_position > max_position:
                    problem = (f"Invariant violation: startPosition={d.start_position} and/or stopPosition="
                               f"{d.stop_position} exceed max segment file position={max_position}")
            if problem is None:
                computed_stop = _computed_stop_position(command.archive_dir, highest, d)
        except (ToolFailure, OSError) as exc:
            problem = str(exc)
    if problem is None and command.apply_checksum:
        computed = catalog.computed_checksum(rid)
        stored = catalog.entry_header(rid)[2]
        if computed != stored:
            problem = f"invalid Catalog checksum: expected={computed}, actual={stored}"
    line = None if problem is None else f"(recordingId={rid}) ERR: {problem}"
    if line is None and highest is not None:
        for name in (sorted(names, key=_segment_position) if command.all_segment_files else [highest]):
            line = _segment_file_problem(command.archive_dir / name, d, command)  # names the file
            if line is not None:
                break
    if line is not None:
        console.println(line)
        catalog.change_state(rid, A.RECORDING_STATE_INVALID)
        return False
    if computed_stop != d.stop_position:
        catalog.update_stop_position(rid, computed_stop, epoch_ms())
    if state == A.RECORDING_STATE_INVALID and names:
        catalog.change_state(rid, A.RECORDING_STATE_VALID)
    console.println(f"(recordingId={rid}) OK")
    return True


def _position_problem(start: int, stop: int) -> str | None:
    if start < 0:
        return f"Negative startPosition={start}"
    if start % F.FRAME_ALIGNMENT:
        return f"Non-aligned startPosition={start}"
    if stop != A.NULL_POSITION:
        if stop < start:
            return f"Invariant violation stopPosition={stop} is before startPosition={start}"
        if stop % F.FRAME_ALIGNMENT:
            return f"Non-aligned stopPosition={stop}"
    return None


def _computed_stop_position(archive_dir: Path, highest: str | None, d) -> int:
    """Where the frames of the highest segment file end (the start position without one)."""
    if highest is None:
        return d.start_position
    base = _segment_position(highest)
    segment = np.memmap(archive_dir / highest, dtype=np.uint8, mode="r")
    offset = _first_offset(base, d.start_position, d.term_buffer_length)
    limit = min(d.segment_file_length, segment.size)
    while offset + F.HEADER_LENGTH <= limit:
        length = _header(segment, offset)[0]
        if length <= 0:
            break
        offset += _aligned(length)
    return max(base + offset, d.start_position)


def _segment_file_problem(path: Path, d, command: Command) -> str | None:
    """Walk one segment file's frames: headers where they belong, and with ``-checksum`` each DATA frame's
    record checksum; the first fault (naming the file), or None."""
    where = f"(recordingId={d.recording_id}, file={path})"
    base = _segment_position(path.name)
    with MappedFile.open(path, read_only=True) as mapped:
        segment = mapped.buffer
        limit = min(d.segment_file_length, segment.size)
        offset = _first_offset(base, d.start_position, d.term_buffer_length)
        while True:
            if offset + F.HEADER_LENGTH > segment.size:
                return f"{where} ERR: failed to read fragment header"
            length, _, frame_type, term_offset, session, stream, term_id = _header(segment, offset)
            if length == 0:
                return None
            position = base + offset
            expected_term_id = _term_id(position, d.term_buffer_length, d.initial_term_id)
            expected_offset = position & (d.term_buffer_length - 1)
            if term_offset != expected_offset or term_id != expected_term_id or stream != d.stream_id:
                return (f"{where} ERR: fragment termOffset={term_offset} (expected={expected_offset}), "
                        f"termId={term_id} (expected={expected_term_id}), "
                        f"streamId={stream} (expected={d.stream_id})")
            data_length = _aligned(length) - F.HEADER_LENGTH
            if length < F.HEADER_LENGTH or offset + F.HEADER_LENGTH + data_length > segment.size:
                return (f"{where} ERR: failed to read {data_length} byte(s) of data at offset "
                        f"{offset + F.HEADER_LENGTH}")
            if command.apply_checksum and frame_type == F.HDR_TYPE_DATA:
                computed = int(frame_checksum(command.checksum, segment, offset + F.HEADER_LENGTH, data_length))
                if computed != session:
                    return f"{where} ERR: checksum failed recorded={session} (expected={computed})"
            offset += F.HEADER_LENGTH + data_length
            if offset >= limit:
                return None


def checksum(console: Console, command: Command, catalog: Catalog) -> int:
    _require(catalog, command)
    ids = catalog.recording_ids() if command.recording_id is None else [command.recording_id]
    index = _segment_names(command.archive_dir)
    code = EXIT_OK
    for rid in ids:
        catalog.update_checksum(rid)
        d = catalog.descriptor(rid)
        names = index.get(rid, [])
        chosen = sorted(names, key=_segment_position) if command.all_segment_files else \
            [n for n in [_highest_segment(names)] if n is not None]
        for name in chosen:
            problem = _checksum_segment_file(command.archive_dir / name, d, command.checksum)
            if problem is not None:
                console.println(problem)
                code = EXIT_FAILURE
    return code


def _checksum_segment_file(path: Path, d, algorithm: int) -> str | None:
    """Store each DATA frame's record checksum in its session id field (what the recorder does with one)."""
    where = f"(recordingId={d.recording_id}, file={path})"
    with MappedFile.open(path) as mapped:
        segment = mapped.buffer
        offset = _first_offset(_segment_position(path.name), d.start_position, d.term_buffer_length)
        while offset < segment.size:
            if offset + F.HEADER_LENGTH > segment.size:
                return f"{where} ERR: failed to read fragment header"
            length, _, frame_type, *_ = _header(segment, offset)
            if length == 0:
                break
            aligned = _aligned(length)
            if length < F.HEADER_LENGTH or offset + aligned > segment.size:
                return (f"{where} ERR: failed to read {aligned - F.HEADER_LENGTH} byte(s) of data at offset "
                        f"{offset + F.HEADER_LENGTH}")
            if frame_type == F.HDR_TYPE_DATA:
                value = int(frame_checksum(algorithm, segment, offset + F.HEADER_LENGTH, aligned - F.HEADER_LENGTH))
                struct.pack_into("<i", segment, offset + F.SESSION_ID_FIELD_OFFSET, value)
            offset += aligned
    return None


def compact(console: Console, command: Command, catalog: Catalog) -> int:
    console.print("WARNING: Compacting the Catalog is non-recoverable operation! All recordings in state "
                  "`INVALID` will be deleted along with the corresponding segment files.")
    if not console.confirm("Continue? (y/n)"):
        return EXIT_OK
    path = catalog.path
    kept, deleted, reclaimed = [], 0, 0
    index = _segment_names(command.archive_dir)
    for rid in catalog.recording_ids():
        entry = catalog.entry_bytes(rid)
        if catalog.state(rid) == A.RECORDING_STATE_VALID:
            kept.append(entry)
            continue
        deleted += 1
        reclaimed += len(entry)
        for name in index.get(rid, []):
            (command.archive_dir / name).unlink(missing_ok=True)
    header = path.read_bytes()[:A.CATALOG_HEADER_LENGTH]
    compacted = path.with_name(A.CATALOG_FILE + ".compact")
    try:
        with open(compacted, "xb") as f:
            f.write(header + b"".join(kept))  # entries from the end of the header on, as Aeron lays them out
        catalog.close()
        os.replace(compacted, path)
    finally:
        compacted.unlink(missing_ok=True)
    console.println(f"Compaction result: deleted {deleted} records and reclaimed {reclaimed} bytes")
    return EXIT_OK


def delete_orphaned_segments(console: Console, command: Command, catalog: Catalog) -> int:
    rid = command.recording_id
    if rid is None:
        console.print("WARNING: All orphaned segment files will be deleted.")
    else:
        console.print(f"WARNING: All orphaned segment files owned by the RecordingId[{rid}] will be deleted.")
    if not console.confirm("Continue? (y/n)"):
        return EXIT_OK
    _require(catalog, command)
    index = _segment_names(command.archive_dir)
    for recording_id in ([rid] if rid is not None else catalog.recording_ids()):
        d = catalog.descriptor(recording_id)
        first = A.segment_file_base_position(d.start_position, d.start_position, d.term_buffer_length,
                                             d.segment_file_length)
        last = None if d.stop_position == A.NULL_POSITION else A.segment_file_base_position(
            d.start_position, d.stop_position, d.term_buffer_length, d.segment_file_length)
        for name in index.get(recording_id, []):
            parsed = A.parse_segment_file_name(name)
            if parsed is None or parsed[1] < first or (last is not None and parsed[1] > last):
                (command.archive_dir / name).unlink(missing_ok=True)
    return EXIT_OK


def _full_version(version: int) -> str:
    return f"{version}(Major {(version >> 16) & 0xFF} Minor {(version >> 8) & 0xFF} Patch {version & 0xFF})"


def migrate(console: Console, command: Command) -> int:
    console.print("WARNING: please ensure archive is not running and that a backup has been taken of the archive "
                  "directory before attempting migration(s).")
    if not console.confirm("Continue? (y/n)"):
        return EXIT_OK
    mark_path = _mark_dir(command.archive_dir) / A.MARK_FILE
    catalog_path = command.archive_dir / A.CATALOG_FILE
    for path in (mark_path, catalog_path):
        if not path.exists():
            raise ToolFailure(f"{path} does not exist: nothing to migrate")
    mark_version = struct.unpack_from("<i", mark_path.read_bytes(), A.MARK_VERSION_OFFSET)[0]
    catalog_version = struct.unpack_from("<i", catalog_path.read_bytes(), A.CATALOG_VERSION_OFFSET)[0]
    console.println(f"MarkFile version={_full_version(mark_version)}")
    console.println(f"Catalog version={_full_version(catalog_version)}")
    console.println(f"Latest version={_full_version(A.MARK_VERSION)}")
    # Aeron's migration steps are per major version; every step a 3.x archive needs is none.
    if semantic_version_major(mark_version) != semantic_version_major(A.MARK_VERSION):
        raise ToolFailure(f"migration from major version {semantic_version_major(mark_version)} is not supported "
                          f"(this archive reads major version {semantic_version_major(A.MARK_VERSION)} only)")
    return EXIT_OK


_CATALOG_COMMANDS: dict[str, Callable[[Console, Command, Catalog], int]] = {
    "describe": describe, "describe-all": describe, "dump": dump, "count-entries": count_entries,
    "max-entries": max_entries, "capacity": capacity, "mark-valid": change_state, "mark-invalid": change_state,
    "verify": verify, "checksum": checksum, "compact": compact, "delete-orphaned-segments": delete_orphaned_segments,
}
_OTHER_COMMANDS: dict[str, Callable[[Console, Command], int]] = {"errors": errors, "pid": pid, "migrate": migrate}


def _archive_is_live(archive_dir: Path) -> str | None:
    path = _mark_dir(archive_dir) / A.MARK_FILE
    if not path.exists():
        return None
    age = ArchiveMarkFile.live_owner_age_ms(path, time.time_ns() // 1_000_000)
    if age is not None:
        return f"an archive is running in {archive_dir} (mark file touched {age} ms ago): stop it first"
    return None


def run(console: Console, command: Command) -> int:
    if not command.archive_dir.is_dir():
        raise UsageError(f"Archive folder not found: {command.archive_dir.absolute()}")
    writes = command.name in _WRITES or (command.name == "capacity" and command.number is not None)
    if writes and (problem := _archive_is_live(command.archive_dir)):
        raise ToolFailure(problem)
    if command.name in _OTHER_COMMANDS:
        return _OTHER_COMMANDS[command.name](console, command)
    with Catalog.open(command.archive_dir, create=False, read_only=not writes,
                      checksum_algorithm=command.checksum) as catalog:
        for problem in catalog.errors:
            print(f"{TOOL}: {problem}", file=sys.stderr)
        return _CATALOG_COMMANDS[command.name](console, command, catalog)


def main(argv: list[str] | None = None, stdin: TextIO | None = None, prog: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print("\n".join(usage_lines(prog=prog or TOOL)))
        return EXIT_OK
    if argv[:1] == ["--version"]:
        print(cli.version_text(prog or TOOL))
        return EXIT_OK
    _import_archive()
    console = Console(sys.stdout, stdin if stdin is not None else sys.stdin)
    try:
        command = parse_command(argv)
        code = run(console, command)
        sys.stdout.flush()  # here, so that a reader gone before the last buffered lines is caught below
    except BrokenPipeError:  # the reader went away (``| head``): not an error of the archive
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as exc:
        sys.stdout.flush()
        print(f"ERR: {exc}", file=sys.stderr)
        print("\n".join(usage_lines(exc.command, prog or TOOL)), file=sys.stderr)
        return exc.exit_code
    except (ToolFailure, CatalogError, ConfigurationError, AeronError, OSError, ValueError) as exc:
        sys.stdout.flush()
        print(f"ERR: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return code


if __name__ == "__main__":
    sys.exit(main())
