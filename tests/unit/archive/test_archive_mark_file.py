"""``archive-mark.dat`` written by ``ArchiveMarkFile`` and read back with offsets typed from spec/archive.md §5."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from aeron_numba.archive.mark_file import ArchiveActiveError, ArchiveMarkFile
from aeron_numba.errors import LayoutError
from aeron_numba.kernels.error_log import ErrorLogReader


class Clock:
    def __init__(self, now: int):
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_fields_strings_and_error_log_are_where_the_spec_puts_them(tmp_path):
    clock = Clock(1_700_000_000_000)
    with ArchiveMarkFile.create(tmp_path, archive_id=42, control_channel="aeron:udp?endpoint=localhost:8010",
                                aeron_directory="/dev/shm/aeron", error_buffer_length=64 * 1024,
                                epoch_clock=clock) as mark:
        assert mark.error_log.record(ValueError("replay of recording 7 failed"))
        clock.now += 1500
        mark.update_activity_timestamp(clock.now)
        data = (tmp_path / "archive-mark.dat").read_bytes()
        assert len(data) == 8192 + 64 * 1024
        assert struct.unpack_from("<HHHH", data, 0) == (128, 200, 100, 2)
        assert struct.unpack_from("<i", data, 8)[0] == 196_864
        activity, start, pid = struct.unpack_from("<qqq", data, 16)
        assert (activity, start, pid) == (1_700_000_001_500, 1_700_000_000_000, os.getpid())
        assert struct.unpack_from("<iiiii", data, 40) == (10, 10, 30, 8192, 64 * 1024)
        assert struct.unpack_from("<q", data, 64)[0] == 42
        at, strings = 136, []
        for _ in range(4):
            (length,) = struct.unpack_from("<I", data, at)
            strings.append(data[at + 4:at + 4 + length].decode())
            at += 4 + length
        assert strings == ["aeron:udp?endpoint=localhost:8010", "aeron:ipc?term-length=64k", "", "/dev/shm/aeron"]
        (error,) = ErrorLogReader.read(np.frombuffer(bytearray(data[8192:]), dtype=np.uint8))
        assert "replay of recording 7 failed" in error.encoded_exception
    # A clean shutdown says no archive is here any more.
    assert struct.unpack_from("<q", (tmp_path / "archive-mark.dat").read_bytes(), 16)[0] == -1
    with ArchiveMarkFile.open(tmp_path) as mark:
        assert (mark.pid, mark.archive_id, mark.strings()["aeron_directory"]) == (os.getpid(), 42, "/dev/shm/aeron")


def test_a_live_archive_is_refused_a_stale_or_cleanly_closed_one_is_taken_over(tmp_path):
    clock = Clock(10_000_000)
    live = ArchiveMarkFile.create(tmp_path, archive_id=1, epoch_clock=clock)
    clock.now += 9_999
    with pytest.raises(ArchiveActiveError, match=r"touched 9999 ms ago \(< liveness timeout 10000 ms\)"):
        ArchiveMarkFile.create(tmp_path, archive_id=2, epoch_clock=clock)
    live.close(clean_shutdown=False)  # a crash: the timestamp stays
    clock.now += 1
    with ArchiveMarkFile.create(tmp_path, archive_id=2, epoch_clock=clock) as second:
        assert second.archive_id == 2
    with ArchiveMarkFile.create(tmp_path, archive_id=3, epoch_clock=clock) as third:  # after a clean close
        assert third.archive_id == 3


def test_strings_that_do_not_fit_and_foreign_files_get_typed_errors(tmp_path):
    with pytest.raises(LayoutError, match="strings end at .* > MARK_HEADER_LENGTH=8192"):
        ArchiveMarkFile.create(tmp_path, archive_id=1, control_channel="x" * 9000)
    (tmp_path / "archive-mark.dat").write_bytes(bytes(8192 + 1024))
    with pytest.raises(LayoutError, match="schemaId=0, expected 100"):
        ArchiveMarkFile.open(tmp_path)
