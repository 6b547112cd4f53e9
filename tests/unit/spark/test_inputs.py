"""The input checks every Spark source makes: each failure names the file and the bad value with its limit."""

from __future__ import annotations

import struct

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.spark.inputs import (InputError, archive_dir, check_segment_file, open_catalog,
                                      recording_descriptor)

_FIRST_ENTRY = 32  # the catalog header's length: entries start there with the default 64-byte alignment


def one_recording(folder):
    with Catalog.open(folder, capacity=4096) as catalog:
        catalog.add_recording(start_position=0, start_timestamp=1, initial_term_id=7, segment_file_length=65536,
                              term_buffer_length=65536, mtu_length=1408, session_id=3, stream_id=1001,
                              stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc")
    return folder / "archive.catalog"


def patch_i32(path, offset: int, value: int, fmt: str = "<i"):
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    path.write_bytes(bytes(data))


def test_an_archive_dir_is_accepted_and_its_catalog_read(tmp_path):
    one_recording(tmp_path)
    assert archive_dir(str(tmp_path)) == tmp_path
    with open_catalog(tmp_path) as catalog:
        assert recording_descriptor(catalog, 0).stream_id == 1001


@pytest.mark.parametrize("path, reason", [
    (None, "no archive dir given"),
    ("missing", "does not exist"),
    ("file", "is not a folder"),
    ("empty", "is not an Aeron archive: it has no archive.catalog"),
])
def test_a_path_that_is_no_archive_dir_is_refused_naming_it(tmp_path, path, reason):
    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=reason) as caught:
        open_catalog(None if path is None else tmp_path / path)
    if path is not None:
        assert str(tmp_path / path) in str(caught.value)


def test_a_truncated_catalog_is_refused_naming_the_file_and_the_length(tmp_path):
    (tmp_path / "archive.catalog").write_bytes(b"\0" * 10)
    with pytest.raises(InputError, match=r"archive.catalog: file length=10 < required 32"):
        open_catalog(tmp_path)


def test_a_catalog_of_another_major_version_is_refused(tmp_path):
    path = one_recording(tmp_path)
    patch_i32(path, 0, 4 << 16)
    with pytest.raises(InputError, match=rf"{path}: catalog version 4.0.0 is not compatible with 3.1.0"):
        open_catalog(tmp_path)


def test_an_entry_with_a_bad_length_is_refused_naming_the_file_offset_and_limits(tmp_path):
    path = one_recording(tmp_path)
    patch_i32(path, _FIRST_ENTRY, 100)  # not 64-aligned with its header
    with pytest.raises(InputError, match=rf"corrupt catalog: {path}: entry at offset 32 has length=100 "
                                         r"\(must be >= \d+, leave the entry 64-aligned"):
        open_catalog(tmp_path)


def test_an_entry_whose_body_does_not_decode_is_refused_naming_the_file_and_recording(tmp_path):
    path = one_recording(tmp_path)
    patch_i32(path, _FIRST_ENTRY + 32 + 80, 100_000, "<I")  # stripped_channel's length runs past the body
    with open_catalog(tmp_path) as catalog:
        with pytest.raises(InputError, match=rf"corrupt catalog: {path}: recording 0: "):
            recording_descriptor(catalog, 0)


def test_a_segment_file_shorter_than_its_length_is_refused_as_truncated(tmp_path):
    segment = tmp_path / "0-0.rec"
    segment.write_bytes(b"\0" * 65536)
    assert check_segment_file(segment, 65536) == segment
    segment.write_bytes(b"\0" * 4096)
    with pytest.raises(InputError, match=rf"truncated segment file {segment}: length=4096 < "
                                         r"segment_file_length=65536"):
        check_segment_file(segment, 65536)
    with pytest.raises(InputError, match=rf"segment file {tmp_path / '1-0.rec'} does not exist"):
        check_segment_file(tmp_path / "1-0.rec", 65536)
