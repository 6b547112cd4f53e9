"""archive-tool: ArchiveTool's command line and output (spec/archive.md §3-§5), over archive dirs made by the
catalog and the recording writer, and over the archives real Aeron 1.48 wrote (tests/golden, copied from ../shared/reference)."""

from __future__ import annotations

import io
import os
import shutil
import stat
import struct
import sys
import time
from pathlib import Path

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.archive.segment_files import RecordingWriter
from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.kernels.error_log import DistinctErrorLog
from aeron_numba.layout import archive as A
from aeron_numba.layout.checksum import CHECKSUM_CRC32C
from aeron_numba.tools.archive_tool import EXIT_USAGE, main
from tests.unit.archive.test_archive_segments import TERM, publish, record

#: Files real Aeron 1.48 wrote and what its ArchiveTool printed for them (read only: writing tests copy them).
REFERENCE = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48"  # copies of ../shared/reference


@pytest.fixture
def archive(shm_dir, tmp_path):
    """Two recordings: 0 with CRC-32C record checksums over three segments, 1 without."""
    log, end = publish(shm_dir, [1000] * 150)
    with Catalog.open(tmp_path, checksum_algorithm=CHECKSUM_CRC32C) as catalog:
        for rid, algorithm in ((0, CHECKSUM_CRC32C), (1, 0)):
            catalog.add_recording(start_position=0, start_timestamp=1_700_000_000_000, initial_term_id=5,
                                  segment_file_length=TERM, term_buffer_length=TERM, mtu_length=1408, session_id=77,
                                  stream_id=1001, stripped_channel="aeron:ipc", original_channel="aeron:ipc",
                                  source_identity="aeron:ipc")
            writer = RecordingWriter(tmp_path, rid, 0, 0, TERM, TERM, checksum_algorithm=algorithm)
            record(writer, log, 0, end)
            writer.close()
            catalog.update_stop_position(rid, end, 1_700_000_001_000)
    return tmp_path, end


@pytest.fixture
def utc(monkeypatch):
    """Java printed the reference dates in UTC (the host's zone)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def run(capsys, *argv, answers=""):
    code = main([str(a) for a in argv], stdin=io.StringIO(answers))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def state_of(path, rid):
    with Catalog.open(path, create=False) as catalog:
        return catalog.state(rid)


# ------------------------------------------------------------------------------- against real ArchiveTool
def writable_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.iterdir()]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return target


def assert_same_as_archive_tool(ours: str, theirs: str) -> None:
    """Equal but for what must differ: line 1 names the mark file by its absolute path (ours is here, Aeron's
    was /tmp/golden/...), and line 2 starts with the clock at the time the tool ran (HH:MM:SS)."""
    ours_lines, their_lines = ours.rstrip().split("\n"), theirs.rstrip().split("\n")
    assert len(ours_lines) == len(their_lines)
    assert ours_lines[0].startswith("INFO: Mark file exists: /") and ours_lines[0].endswith("/archive-mark.dat")
    assert ours_lines[1][8:] == their_lines[1][8:]
    assert ours_lines[2:] == their_lines[2:]


@pytest.mark.parametrize("node", ["archive-java", "cluster-3node/node-0", "cluster-3node/node-1",
                                  "cluster-3node/node-2"])
def test_describe_prints_what_archive_tool_printed_for_the_java_archives(node, utc, capsys):
    code, out, err = run(capsys, REFERENCE / node / "archive", "describe")
    assert code == 0 and err == ""
    assert_same_as_archive_tool(out, (REFERENCE / node / "archivetool-describe.txt").read_text())


def test_dump_with_a_limit_asks_to_continue_and_prints_what_archive_tool_printed(utc, capsys):
    code, out, _ = run(capsys, REFERENCE / "archive-java/archive", "dump", 3, answers="n\nn\nn\n")
    assert code == 0
    assert_same_as_archive_tool(out, (REFERENCE / "archive-java/archivetool-dump-3-frames-per-recording.txt")
                                .read_text())
    assert "-37728 bytes of (from 30144) remaining in recording id 1" in out  # ArchiveTool's own arithmetic


def test_dump_without_a_limit_prints_every_frame_as_archive_tool_does(utc, capsys):
    code, out, _ = run(capsys, REFERENCE / "archive-java/archive", "dump")
    theirs = (REFERENCE / "archive-java/archivetool-dump-first-200-lines.txt").read_text()
    assert code == 0
    assert_same_as_archive_tool("\n".join(out.split("\n")[:200]), theirs)
    assert out.count("Frame at position") >= 349 + 69 + 233  # every data frame of the three recordings
    assert "PADDING FRAME" in out and "Fragmented frame. END_FRAGMENT" in out


@pytest.mark.parametrize("args, expected", [(["verify"], "archivetool-verify.txt"),
                                            (["verify", "-a"], "archivetool-verify-all-segments.txt")])
def test_verify_of_the_java_archive_agrees_with_archive_tool_and_changes_nothing(args, expected, tmp_path, capsys):
    path = writable_copy(REFERENCE / "archive-java/archive", tmp_path / "archive")
    code, out, _ = run(capsys, path, *args)
    assert code == 0 and out == (REFERENCE / "archive-java" / expected).read_text()
    assert (path / A.CATALOG_FILE).read_bytes() == (REFERENCE / "archive-java/archive" / A.CATALOG_FILE).read_bytes()


def test_verify_finishes_a_crashed_recording_at_the_end_of_its_frames(tmp_path, capsys):
    # node-2 was killed while recording the log: stop position -1; the restart found 19552.
    path = writable_copy(REFERENCE / "cluster-3node/node-2-crash-state/archive", tmp_path / "archive")
    code, out, _ = run(capsys, path, "verify", 0)
    assert code == 0 and out == "(recordingId=0) OK\n"
    with Catalog.open(path, create=False) as catalog:
        assert catalog.stop_position(0) == 19552


# ------------------------------------------------------------------------------------------ each command
def test_describe_one_all_and_counts(archive, capsys):
    path, end = archive
    code, out, err = run(capsys, path, "describe")
    assert code == 0 and "INFO: no mark file at" in out and "Catalog capacity in bytes: 1048576" in out
    assert out.count("[RecordingDescriptor](sbeTemplateId=22|sbeSchemaId=101|sbeSchemaVersion=10") == 2
    code, out, _ = run(capsys, path, "describe", 1)
    assert code == 0 and out.startswith("[RecordingDescriptor]") and f"|recordingId=1|" in out
    assert f"|stopPosition={end}|" in out and "|sourceIdentity='aeron:ipc'" in out
    assert run(capsys, path, "mark-invalid", 1)[1] == "(recordingId=1) changed state to INVALID\n"
    assert "recordingId=1" not in run(capsys, path, "describe")[1]  # describe: VALID ones only
    out = run(capsys, path, "describe-all")[1]
    assert "sourceIdentity='aeron:ipc'|VALID\n" in out and "sourceIdentity='aeron:ipc'|INVALID\n" in out
    assert run(capsys, path, "count-entries")[1] == "2\n"  # every entry, as the catalog index counts them
    assert run(capsys, path, "max-entries")[1] == "max-entries is deprecated please use capacity.\n"


def test_capacity_gets_and_only_increases(archive, capsys):
    path, _ = archive
    assert run(capsys, path, "capacity")[1] == "Catalog capacity in bytes: 1048576\n"
    assert run(capsys, path, "capacity", 4096)[1] == "Catalog capacity in bytes: 1048576\n"  # smaller: no change
    assert run(capsys, path, "capacity", 2_000_000)[1] == "Catalog capacity in bytes: 2000000\n"
    assert (path / A.CATALOG_FILE).stat().st_size == 2_000_000
    assert run(capsys, path, "count-entries")[1] == "2\n"


def test_verify_finds_a_flipped_byte_by_its_checksum_and_marks_the_recording_invalid(archive, capsys):
    path, end = archive
    code, out, _ = run(capsys, path, "verify", "-a", "-checksum", "io.aeron.archive.checksum.Crc32c")
    assert code == EXIT_USAGE  # recording 1 has no record checksums: its frames' session ids are not CRCs
    assert out.startswith("(recordingId=0) OK\n(recordingId=1, file=") and "ERR: checksum failed recorded=77" in out
    assert state_of(path, 1) == A.RECORDING_STATE_INVALID
    assert run(capsys, path, "verify", 1) == (0, "(recordingId=1) OK\n", "")  # headers alone are fine: VALID again
    assert state_of(path, 1) == A.RECORDING_STATE_VALID
    segment = path / f"0-{TERM}.rec"
    data = bytearray(segment.read_bytes())
    data[5000] ^= 0x40  # a payload byte
    segment.write_bytes(bytes(data))
    # Without -a only the last segment file is walked, as ArchiveTool does: the flip in the second goes unseen.
    assert run(capsys, path, "verify", 0, "-checksum", "CRC-32C")[0] == 0
    code, out, _ = run(capsys, path, "verify", 0, "-a", "-checksum", "CRC-32C")
    assert code == EXIT_USAGE and f"(recordingId=0, file={segment}) ERR: checksum failed recorded=" in out
    assert "INVALID" in run(capsys, path, "describe-all")[1].split("\n")[2]


def test_verify_reports_a_bad_frame_header_and_a_missing_segment(archive, capsys):
    path, end = archive
    last = path / f"0-{2 * TERM}.rec"
    data = bytearray(last.read_bytes())
    struct.pack_into("<i", data, 20, 999)  # term id of the first frame
    last.write_bytes(bytes(data))
    code, out, _ = run(capsys, path, "verify", 0)
    assert code == EXIT_USAGE and out == (f"(recordingId=0, file={last}) ERR: fragment termOffset=0 (expected=0), "
                                          f"termId=999 (expected=7), streamId=1001 (expected=1001)\n")
    for name in (f"1-{TERM}.rec", f"1-{2 * TERM}.rec"):
        (path / name).unlink()
    code, out, _ = run(capsys, path, "verify", 1)
    assert code == EXIT_USAGE and out == (f"(recordingId=1) ERR: Invariant violation: startPosition=0 and/or "
                                          f"stopPosition={end} exceed max segment file position={TERM - 1}\n")


def test_checksum_writes_record_checksums_that_verify(archive, capsys):
    path, _ = archive
    assert run(capsys, path, "checksum", "io.aeron.archive.checksum.Crc32c", 1) == (0, "", "")
    # the last segment only, as ArchiveTool does by default
    assert run(capsys, path, "verify", 1, "-checksum", "CRC-32C")[0] == 0
    assert run(capsys, path, "verify", 1, "-a", "-checksum", "CRC-32C")[0] == EXIT_USAGE
    assert run(capsys, path, "mark-valid", 1)[0] == 0
    assert run(capsys, path, "checksum", "CRC-32C", 1, "-a") == (0, "", "")
    assert run(capsys, path, "verify", 1, "-a", "-checksum", "CRC-32C") == (0, "(recordingId=1) OK\n", "")


def test_mark_valid_and_invalid_follow_archive_tool_transitions(archive, capsys):
    path, _ = archive
    assert run(capsys, path, "mark-valid", 0) == (0, "", "")  # already VALID: nothing to say
    assert run(capsys, path, "mark-invalid", 0)[1] == "(recordingId=0) changed state to INVALID\n"
    assert run(capsys, path, "mark-valid", 0)[1] == "(recordingId=0) changed state to VALID\n"
    with Catalog.open(path, create=False) as catalog:
        catalog.change_state(0, A.RECORDING_STATE_DELETED)
    code, out, err = run(capsys, path, "mark-valid", 0)
    assert code == 1 and err == "ERR: (recordingId=0) state transition DELETED -> VALID is not allowed\n"
    assert "(recordingId=0) skipping: DELETED" in run(capsys, path, "verify")[1]


def test_compact_asks_then_drops_invalid_entries_and_their_segments(archive, capsys):
    path, _ = archive
    run(capsys, path, "mark-invalid", 0)
    before = (path / A.CATALOG_FILE).read_bytes()
    code, out, _ = run(capsys, path, "compact", answers="n\n")
    assert code == 0 and out.endswith("Continue? (y/n): ") and (path / A.CATALOG_FILE).read_bytes() == before
    code, out, _ = run(capsys, path, "compact", answers="\n")  # an empty answer is yes, as in ArchiveTool
    entry_length = struct.unpack_from("<i", before, A.CATALOG_HEADER_LENGTH)[0] + A.DESCRIPTOR_HEADER_LENGTH
    assert code == 0 and out.endswith(f"Compaction result: deleted 1 records and reclaimed {entry_length} bytes\n")
    assert not list(path.glob("0-*.rec")) and len(list(path.glob("1-*.rec"))) == 3
    assert (path / A.CATALOG_FILE).stat().st_size == A.CATALOG_HEADER_LENGTH + entry_length
    assert run(capsys, path, "count-entries")[1] == "1\n"
    assert run(capsys, path, "verify", "-a") == (0, "(recordingId=1) OK\n", "")


def test_delete_orphaned_segments_removes_files_outside_their_recording(archive, capsys):
    path, end = archive
    (path / "7-0.rec").write_bytes(bytes(TERM))  # a recording the catalog never had: ArchiveTool leaves it
    (path / f"0-{3 * TERM}.rec").write_bytes(bytes(TERM))  # past recording 0's stop position
    (path / f"1-{3 * TERM}.rec").write_bytes(bytes(TERM))
    code, out, _ = run(capsys, path, "delete-orphaned-segments", 1, answers="y\n")
    assert code == 0 and out == ("WARNING: All orphaned segment files owned by the RecordingId[1] will be deleted.\n"
                                 "Continue? (y/n): ")
    assert not (path / f"1-{3 * TERM}.rec").exists() and (path / f"0-{3 * TERM}.rec").exists()
    assert run(capsys, path, "delete-orphaned-segments")[0] == 0  # no answer (end of input): nothing done
    assert (path / f"0-{3 * TERM}.rec").exists()
    run(capsys, path, "delete-orphaned-segments", answers="yes\n")
    assert not (path / f"0-{3 * TERM}.rec").exists() and (path / "7-0.rec").exists()
    assert (path / "0-0.rec").exists() and (path / f"0-{2 * TERM}.rec").exists()


def test_migrate_reports_versions_and_finds_nothing_to_do(archive, capsys):
    path, _ = archive
    with ArchiveMarkFile.create(path, archive_id=5, error_buffer_length=64 * 1024):
        pass
    code, out, _ = run(capsys, path, "migrate", answers="y\n")
    assert code == 0 and out.endswith("MarkFile version=196864(Major 3 Minor 1 Patch 0)\n"
                                      "Catalog version=196864(Major 3 Minor 1 Patch 0)\n"
                                      "Latest version=196864(Major 3 Minor 1 Patch 0)\n")


def test_pid_and_errors_read_the_mark_file_and_the_driver_error_log(archive, tmp_path, capsys, utc):
    path, _ = archive
    aeron_dir = tmp_path / "aeron"
    aeron_dir.mkdir()
    with ArchiveMarkFile.create(path, archive_id=5, error_buffer_length=64 * 1024,
                                aeron_directory=str(aeron_dir)) as mark:
        mark.error_log.record(ValueError("segment file 9-0.rec could not be written"))
        code, out, _ = run(capsys, path, "pid")
        assert code == 0 and int(out) > 0
        code, out, err = run(capsys, path, "errors")
        assert code == 1 and f"no media driver error log: {aeron_dir / 'cnc.dat'} does not exist" in err
        assert out.startswith("Archive error log:\n\n1 observations from ") and "1 distinct errors observed." in out
        with CncFile.create(aeron_dir / "cnc.dat", error_log_buffer_length=64 * 1024) as cnc_file:
            DistinctErrorLog(cnc_file.error_log_buffer).record("driver trouble")
        code, out, _ = run(capsys, path, "errors")
        assert code == 0 and out.count("1 distinct errors observed.") == 2 and "driver trouble" in out
        assert f"\n\nAeron driver error log (directory: {aeron_dir}):\n" in out
        code, _, err = run(capsys, path, "mark-invalid", 0)
        assert code == 1 and "an archive is running in" in err  # a live archive's dir is not written
    assert run(capsys, path, "mark-invalid", 0)[0] == 0  # closed cleanly: the dir is free


def test_describe_and_dump_leave_a_read_only_dir_alone(archive, capsys, utc):
    path, _ = archive
    for file in path.iterdir():
        file.chmod(0o444)
    before = {f.name: f.read_bytes() for f in path.iterdir()}
    assert run(capsys, path, "describe")[0] == 0
    assert run(capsys, path, "dump", 2, answers="y\nn\nn\n")[1].count("Frame at position") == 4 + 2
    assert {f.name: f.read_bytes() for f in path.iterdir()} == before


# ---------------------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("argv, code, problem, usage", [
    ([], EXIT_USAGE, "ERR: no archive dir given", "Usage: archive-tool <archive-dir> <command>"),
    (["{dir}"], EXIT_USAGE, "ERR: no command given", "Usage: archive-tool <archive-dir> <command>"),
    (["{dir}", "frobnicate"], EXIT_USAGE, "ERR: Invalid command 'frobnicate'", "  verify [recordingId]"),
    (["{dir}", "mark-valid"], EXIT_USAGE, "ERR: missing recordingId", "Usage: archive-tool <archive-dir> mark-valid"),
    (["{dir}", "describe", "one"], EXIT_USAGE, "ERR: recordingId must be a number: 'one'", "describe [recordingId]"),
    (["{dir}", "describe", "9"], 1, "ERR: no recording found with recordingId: 9", "describe [recordingId]"),
    (["{dir}", "verify", "9", "-a"], 1, "ERR: no recording found with recordingId: 9", "verify [recordingId]"),
    (["{dir}", "verify", "-checksum"], EXIT_USAGE, "ERR: Checksum class name must be specified!", "verify"),
    (["{dir}", "verify", "-b"], EXIT_USAGE, "ERR: unknown or repeated option '-b'", "verify"),
    (["{dir}", "checksum"], EXIT_USAGE, "ERR: missing checksum className", "checksum className"),
    (["{dir}", "checksum", "Adler"], EXIT_USAGE, "ERR: checksum='Adler' is not one of", "checksum className"),
    (["{dir}", "dump", "0"], EXIT_USAGE, "ERR: fragment limit=0 must be >= 1", "dump"),
    (["{dir}", "pid", "now"], EXIT_USAGE, "ERR: pid takes no arguments, got ['now']", "pid"),
    (["{dir}", "verify", "1", "-a", "-checksum", "CRC-32", "x"], EXIT_USAGE, "ERR: 7 arguments > at most 6",
     "<command>"),
    (["{dir}/nope", "describe"], EXIT_USAGE, "ERR: Archive folder not found: ", "<command>"),
])
def test_bad_arguments_get_a_usage_line_naming_the_problem(archive, capsys, argv, code, problem, usage):
    path, _ = archive
    got, out, err = run(capsys, *[a.replace("{dir}", str(path)) for a in argv])
    assert got == code and out == ""
    first, *rest = err.split("\n")
    assert first.startswith(problem) and any(usage in line for line in rest) and "Traceback" not in err


@pytest.mark.parametrize("argv", [["describe"], ["dump"]])
def test_a_reader_gone_before_the_last_buffered_lines_ends_quietly(monkeypatch, argv):
    """``archive-tool DIR dump | head -2``: head exits, and the flush of what is still buffered meets a closed
    pipe (at once here: the read end is closed before the tool writes). It ends with status 0, no traceback."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_fd, "w"), buffer_size=1 << 20))
    monkeypatch.setattr(sys, "stdout", stdout)
    try:
        assert main([str(REFERENCE / "archive-java/archive"), *argv], stdin=io.StringIO("")) == 0
    finally:
        monkeypatch.undo()
        try:
            stdout.close()  # its fd now points at /dev/null: closing flushes nothing into a broken pipe
        except BrokenPipeError:
            pass
