"""archive-tool over an archive dir made by the catalog and the recording writer (spec/archive.md §3-§5)."""

from __future__ import annotations

import struct

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.archive.segment_files import RecordingWriter
from aeron_numba.layout.checksum import CHECKSUM_CRC32C
from aeron_numba.tools.archive_tool import main
from tests.unit.archive.test_archive_segments import TERM, publish, record


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


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_describe_count_and_dump(archive, capsys):
    path, end = archive
    code, out, _ = run(capsys, path, "describe")
    assert code == 0 and "nextRecordingId=2" in out
    assert f"VALID recordingId=0 " in out and f"stopPosition={end} " in out and "streamId=1001" in out
    assert run(capsys, path, "count-entries")[1].strip() == "2"
    code, out, _ = run(capsys, path, "dump", 3)
    assert code == 0 and out.count("frame at position") == 6 and "frame at position 1056: length=1032" in out


def test_verify_finds_a_flipped_byte_by_its_checksum_and_marks_the_recording_invalid(archive, capsys):
    path, end = archive
    code, out, _ = run(capsys, path, "verify", "-a", "CRC-32C")
    assert code == 1  # recording 1 has no record checksums: its frames' session ids are not CRCs
    assert "recording 0: VALID" in out and "recording 1: INVALID: checksum mismatch" in out
    assert run(capsys, path, "mark-valid", 1)[0] == 0
    assert run(capsys, path, "verify", 1)[1].strip() == "recording 1: VALID"  # headers alone are fine
    segment = path / f"0-{TERM}.rec"
    data = bytearray(segment.read_bytes())
    data[5000] ^= 0x40  # a payload byte
    segment.write_bytes(bytes(data))
    code, out, _ = run(capsys, path, "verify", 0, "-a", "CRC-32C")
    assert code == 1 and f"recording 0: INVALID: checksum mismatch in the frame at position {TERM + 4224}:" in out
    assert "INVALID recordingId=0" in run(capsys, path, "describe", 0)[1]


def test_checksum_writes_record_checksums_that_verify_then_accepts(archive, capsys):
    path, _ = archive
    assert run(capsys, path, "checksum", 1, "-a", "CRC-32C")[0] == 0
    code, out, _ = run(capsys, path, "verify", 1, "-a", "CRC-32C")
    assert code == 0 and "recording 1: VALID" in out


def test_a_truncated_recording_and_orphaned_segments(archive, capsys):
    path, end = archive
    (path / "7-0.rec").write_bytes(bytes(TERM))  # a recording the catalog never had
    (path / f"0-{3 * TERM}.rec").write_bytes(bytes(TERM))  # past recording 0's stop position
    code, out, _ = run(capsys, path, "delete-orphaned-segments")
    assert code == 0 and sorted(out.split()) == sorted(["deleted", "7-0.rec", "deleted", f"0-{3 * TERM}.rec"])
    assert (path / "0-0.rec").exists()
    (path / "1-0.rec").unlink()
    code, out, _ = run(capsys, path, "verify", 1)
    assert code == 1 and "recording 1: INVALID: segment file 1-0.rec is missing" in out


def test_pid_and_errors_come_from_the_mark_file_and_a_live_archive_is_not_written(archive, capsys):
    path, _ = archive
    with ArchiveMarkFile.create(path, archive_id=5, error_buffer_length=64 * 1024) as mark:
        mark.error_log.record(ValueError("segment file 9-0.rec could not be written"))
        code, out, _ = run(capsys, path, "pid")
        assert code == 0 and int(out) > 0
        assert "segment file 9-0.rec could not be written" in run(capsys, path, "errors")[1]
        code, _, err = run(capsys, path, "mark-invalid", 0)
        assert code == 1 and "an archive is running in" in err
    assert run(capsys, path, "mark-invalid", 0)[0] == 0  # closed cleanly: the dir is free
    assert run(capsys, tmp := path / "nope", "describe")[2].startswith(f"archive-tool: archive dir {tmp} does not exist")
