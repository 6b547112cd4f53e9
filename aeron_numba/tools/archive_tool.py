"""archive-tool: inspect and repair an archive dir offline, like Aeron's ``ArchiveTool`` (spec/archive.md §2-§5).

```
archive-tool <archive dir> describe [recording id]      catalog header and descriptors
archive-tool <archive dir> dump [frame count]           descriptors and the first frames of each recording
archive-tool <archive dir> verify [recording id] [-a ALGORITHM]
                                                        walk every frame (and record checksum); mark INVALID on error
archive-tool <archive dir> checksum <recording id|all> -a ALGORITHM
                                                        write record checksums into frames and descriptors
archive-tool <archive dir> count-entries | errors | pid
archive-tool <archive dir> mark-valid <id> | mark-invalid <id>
archive-tool <archive dir> delete-orphaned-segments     segment files of no VALID recording, or outside it
```
Commands that write refuse to run while a live archive holds the dir (its mark file). Exit code 0, or 1 with
the reason on stderr (``verify`` also exits 1 when it found a bad recording).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from aeron_numba.archive.catalog import Catalog, CatalogError
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.archive.segment_files import segment_files
from aeron_numba.errors import AeronError
from aeron_numba.kernels.replay_rewrite import record_checksums
from aeron_numba.kernels.segment_scanner import VERIFY_CHECKSUM_MISMATCH, verify_frames
from aeron_numba.layout import archive as A
from aeron_numba.layout import frame
from aeron_numba.layout.checksum import CHECKSUM_NONE, REWRITE_OUT_LENGTH, checksum_algorithm
from aeron_numba.layout.mapped_file import MappedFile
from aeron_numba.tools._common import EXIT_FAILURE, EXIT_OK, fail, format_timestamp_ms
from aeron_numba.tools.error_stat import read_error_log

TOOL = "archive-tool"
STATES = {A.RECORDING_STATE_INVALID: "INVALID", A.RECORDING_STATE_VALID: "VALID", A.RECORDING_STATE_DELETED: "DELETED"}


def describe_lines(catalog: Catalog, recording_id: int | None = None) -> list[str]:
    ids = catalog.recording_ids() if recording_id is None else [recording_id]
    lines = [] if recording_id is not None else [
        f"Catalog: version={A.CATALOG_VERSION >> 16}.{(A.CATALOG_VERSION >> 8) & 0xFF}.{A.CATALOG_VERSION & 0xFF}, "
        f"alignment={catalog.alignment}, nextRecordingId={catalog.next_recording_id}, capacity={catalog.capacity}"]
    for rid in ids:
        d = catalog.descriptor(rid)
        lines.append(
            f"{STATES.get(catalog.state(rid), catalog.state(rid))} recordingId={d.recording_id} "
            f"startTimestamp={format_timestamp_ms(d.start_timestamp)} "
            f"stopTimestamp={format_timestamp_ms(d.stop_timestamp) if d.stop_timestamp >= 0 else -1} "
            f"startPosition={d.start_position} stopPosition={d.stop_position} initialTermId={d.initial_term_id} "
            f"segmentFileLength={d.segment_file_length} termBufferLength={d.term_buffer_length} "
            f"mtuLength={d.mtu_length} sessionId={d.session_id} streamId={d.stream_id} "
            f"strippedChannel={d.stripped_channel} originalChannel={d.original_channel} "
            f"sourceIdentity={d.source_identity}")
    return lines


def _recording_end(catalog: Catalog, archive_dir: Path, rid: int) -> int:
    """Stop position, or for a recording still marked active the end of its segment files."""
    d = catalog.descriptor(rid)
    if d.stop_position != A.NULL_POSITION:
        return d.stop_position
    segments = segment_files(archive_dir, rid)
    return segments[-1][0] + d.segment_file_length if segments else d.start_position


def verify_recording(catalog: Catalog, archive_dir: Path, rid: int, algorithm: int) -> str | None:
    """Walk the recording's frames from start to stop in its segment files; the first problem, or None."""
    d = catalog.descriptor(rid)
    end = _recording_end(catalog, archive_dir, rid)
    position = d.start_position
    out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)
    while position < end:
        base = A.segment_file_base_position(d.start_position, position, d.term_buffer_length, d.segment_file_length)
        path = archive_dir / A.segment_file_name(rid, base)
        if not path.exists():
            return f"segment file {path.name} is missing (position {position} of [{d.start_position}, {end}))"
        with MappedFile.open(path) as mapped:
            if mapped.length < d.segment_file_length:
                return f"segment file {path.name} has length {mapped.length} < {d.segment_file_length}"
            limit = min(d.segment_file_length, end - base)
            reached = int(verify_frames(mapped.buffer, position - base, limit, base, d.term_buffer_length, algorithm,
                                        out))
        if reached < 0:
            at = base + int(out[0])
            if reached == VERIFY_CHECKSUM_MISMATCH:
                return f"checksum mismatch in the frame at position {at}: computed {int(out[1])}, stored {int(out[2])}"
            return f"bad frame header at position {at} (frame length {int(out[1])})"
        if base + reached < end and reached < limit:
            if d.stop_position == A.NULL_POSITION:
                return None  # an active-looking recording ends where its frames end
            return f"frames end at position {base + reached}, before the stop position {end}"
        position = base + d.segment_file_length
    return None


def checksum_recording(catalog: Catalog, archive_dir: Path, rid: int, algorithm: int) -> None:
    """Write each DATA frame's record checksum into its session id field (§4.3)."""
    d = catalog.descriptor(rid)
    end = _recording_end(catalog, archive_dir, rid)
    out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)
    for base, path in segment_files(archive_dir, rid):
        first = max(0, d.start_position - base)
        last = min(d.segment_file_length, end - base)
        if last <= first:
            continue
        with MappedFile.open(path) as mapped:
            status = record_checksums(mapped.buffer, first, last - first, algorithm, out)
            if status < 0:
                raise AeronError(f"recording {rid}: bad frame at position {base + int(out[0])} (status {status})")


def _archive_is_live(archive_dir: Path) -> str | None:
    path = archive_dir / A.MARK_FILE
    if not path.exists():
        return None
    age = ArchiveMarkFile.live_owner_age_ms(path, time.time_ns() // 1_000_000)
    if age is not None:
        return f"an archive is running in {archive_dir} (mark file touched {age} ms ago): stop it first"
    return None


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=TOOL, description="inspect and repair an aeron archive dir")
    parser.add_argument("archive_dir")
    commands = parser.add_subparsers(dest="command", required=True)
    describe = commands.add_parser("describe")
    describe.add_argument("recording_id", nargs="?", type=int)
    dump = commands.add_parser("dump")
    dump.add_argument("frames", nargs="?", type=int, default=10)
    verify = commands.add_parser("verify")
    verify.add_argument("recording_id", nargs="?", type=int)
    verify.add_argument("-a", "--algorithm", default="")
    checksum = commands.add_parser("checksum")
    checksum.add_argument("recording", help="a recording id or 'all'")
    checksum.add_argument("-a", "--algorithm", required=True)
    for name in ("count-entries", "errors", "pid", "delete-orphaned-segments"):
        commands.add_parser(name)
    for name in ("mark-valid", "mark-invalid"):
        commands.add_parser(name).add_argument("recording_id", type=int)
    return parser.parse_args(argv)


def run(args) -> tuple[list[str], int]:
    archive_dir = Path(args.archive_dir)
    if not archive_dir.is_dir():
        raise AeronError(f"archive dir {archive_dir} does not exist")
    if args.command in ("errors", "pid"):
        with ArchiveMarkFile.open(archive_dir) as mark:
            if args.command == "pid":
                return [str(mark.pid)], EXIT_OK
            lines, _ = read_error_log(mark.error_log_buffer)
            return lines, EXIT_OK
    writes = args.command in ("verify", "checksum", "mark-valid", "mark-invalid", "delete-orphaned-segments")
    if writes and (problem := _archive_is_live(archive_dir)):
        raise AeronError(problem)
    algorithm = checksum_algorithm(getattr(args, "algorithm", "") or None)
    with Catalog.open(archive_dir, create=False, checksum_algorithm=algorithm) as catalog:
        lines = list(catalog.errors)
        if args.command == "describe":
            return lines + describe_lines(catalog, args.recording_id), EXIT_OK
        if args.command == "count-entries":
            return [str(len(catalog.recording_ids()))], EXIT_OK
        if args.command == "dump":
            for rid in catalog.recording_ids():
                lines += describe_lines(catalog, rid) + _frame_lines(catalog, archive_dir, rid, args.frames)
            return lines, EXIT_OK
        if args.command in ("mark-valid", "mark-invalid"):
            state = A.RECORDING_STATE_VALID if args.command == "mark-valid" else A.RECORDING_STATE_INVALID
            catalog.change_state(args.recording_id, state)
            return [f"recording {args.recording_id} marked {STATES[state]}"], EXIT_OK
        if args.command == "verify":
            ids = catalog.recording_ids() if args.recording_id is None else [args.recording_id]
            code = EXIT_OK
            for rid in ids:
                if catalog.state(rid) == A.RECORDING_STATE_DELETED:
                    continue
                problem = verify_recording(catalog, archive_dir, rid, algorithm)
                if problem is None and algorithm != CHECKSUM_NONE and not catalog.checksum_matches(rid):
                    problem = "descriptor checksum mismatch"
                if problem is None:
                    lines.append(f"recording {rid}: VALID")
                else:
                    catalog.change_state(rid, A.RECORDING_STATE_INVALID)
                    lines.append(f"recording {rid}: INVALID: {problem}")
                    code = EXIT_FAILURE
            return lines, code
        if args.command == "checksum":
            ids = catalog.recording_ids() if args.recording == "all" else [int(args.recording)]
            for rid in ids:
                checksum_recording(catalog, archive_dir, rid, algorithm)
                d = catalog.descriptor(rid)
                catalog.update_stop_position(rid, d.stop_position, d.stop_timestamp)  # rewrites the checksum
                lines.append(f"recording {rid}: checksums written")
            return lines, EXIT_OK
        if args.command == "delete-orphaned-segments":
            for path in sorted(archive_dir.iterdir()):
                parsed = A.parse_segment_file_name(path.name)
                if parsed is None:
                    continue
                rid, base = parsed
                if _is_orphan(catalog, archive_dir, rid, base):
                    path.unlink()
                    lines.append(f"deleted {path.name}")
            return lines, EXIT_OK
    raise AeronError(f"unknown command {args.command}")


def _is_orphan(catalog: Catalog, archive_dir: Path, rid: int, base: int) -> bool:
    if not catalog.has_recording(rid) or catalog.state(rid) != A.RECORDING_STATE_VALID:
        return True
    d = catalog.descriptor(rid)
    first = A.segment_file_base_position(d.start_position, d.start_position, d.term_buffer_length,
                                         d.segment_file_length)
    end = _recording_end(catalog, archive_dir, rid)
    return base < first or base >= max(end, first + 1)


def _frame_lines(catalog: Catalog, archive_dir: Path, rid: int, count: int) -> list[str]:
    d = catalog.descriptor(rid)
    lines, position = [], d.start_position
    end = _recording_end(catalog, archive_dir, rid)
    for base, path in segment_files(archive_dir, rid):
        data = np.fromfile(path, dtype=np.uint8)
        offset = max(0, position - base)
        while count > 0 and offset + frame.HEADER_LENGTH <= data.size and base + offset < end:
            length, version, flags, frame_type, term_offset, session, stream, term_id = np.frombuffer(
                data[offset:offset + 24].tobytes(), dtype=np.dtype("<i4,u1,u1,<u2,<i4,<i4,<i4,<i4"))[0]
            if length <= 0:
                break
            lines.append(f"  frame at position {base + offset}: length={length} version={version} flags=0x{flags:02x} "
                         f"type={frame_type} termOffset={term_offset} sessionId={session} streamId={stream} "
                         f"termId={term_id}")
            offset += (int(length) + 31) & ~31
            count -= 1
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        lines, code = run(args)
    except (AeronError, CatalogError, OSError, ValueError) as exc:
        return fail(TOOL, str(exc))
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
