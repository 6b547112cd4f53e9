"""``archive.catalog`` written by ``Catalog`` and read back with offsets typed from spec/archive.md §3."""

from __future__ import annotations

import struct
import zlib

import pytest

from aeron_numba.archive.catalog import Catalog, CatalogError
from aeron_numba.errors import LayoutError
from aeron_numba.layout.checksum import CHECKSUM_CRC32


def add(catalog, n: int, channel: str = "aeron:ipc"):
    return catalog.add_recording(
        start_position=n * 64, start_timestamp=1000 + n, initial_term_id=n, segment_file_length=128 << 20,
        term_buffer_length=64 * 1024, mtu_length=1408, session_id=-n, stream_id=1000 + n,
        stripped_channel=channel, original_channel=channel + "?term-length=64k", source_identity="aeron:ipc")


def test_entries_are_where_the_spec_puts_them_and_survive_a_reopen(tmp_path):
    with Catalog.open(tmp_path, capacity=4096) as catalog:
        assert [add(catalog, n) for n in range(3)] == [0, 1, 2]
        catalog.update_stop_position(1, 4096, 2000)
    data = (tmp_path / "archive.catalog").read_bytes()
    assert len(data) == 4096
    version, length, next_id, alignment = struct.unpack_from("<iiqi", data, 0)
    assert (version, length, next_id, alignment) == (196_864, 32, 3, 64)
    offset = 32
    for n in range(3):
        body_length, state = struct.unpack_from("<ii", data, offset)
        # 80-byte block + 3 x (4 + len): 9 + 25 + 9 = 43 -> 135 bytes, entry align(32 + 135, 64) = 192
        assert (body_length, state) == (192 - 32, 1)
        body = offset + 32
        recording_id, start_ts, stop_ts, start, stop = struct.unpack_from("<qqqqq", data, body + 16)
        assert (recording_id, start_ts, start) == (n, 1000 + n, n * 64)
        assert (stop, stop_ts) == ((4096, 2000) if n == 1 else (-1, -1))
        initial_term_id, segment, term, mtu, session, stream = struct.unpack_from("<iiiiii", data, body + 56)
        assert (initial_term_id, segment, term, mtu, session, stream) == (n, 128 << 20, 65536, 1408, -n, 1000 + n)
        (stripped_length,) = struct.unpack_from("<I", data, body + 80)
        assert data[body + 84:body + 84 + stripped_length] == b"aeron:ipc"
        offset += 192
    assert struct.unpack_from("<i", data, offset)[0] == 0  # end of the catalog
    with Catalog.open(tmp_path) as again:
        assert again.recording_ids() == [0, 1, 2] and again.next_recording_id == 3
        d = again.descriptor(1)
        assert (d.recording_id, d.stop_position, d.stop_timestamp, d.original_channel) == (
            1, 4096, 2000, "aeron:ipc?term-length=64k")
        assert add(again, 3) == 3


def test_the_catalog_grows_by_half_until_an_entry_fits(tmp_path):
    with Catalog.open(tmp_path, capacity=256) as catalog:
        ids = [add(catalog, n, channel="aeron:ipc?alias=" + "x" * 100) for n in range(10)]
        assert catalog.capacity > 256
    size = (tmp_path / "archive.catalog").stat().st_size
    assert size in {int(256 * 1.5 ** k) for k in range(1, 20)} or size == 256
    with Catalog.open(tmp_path) as again:
        assert again.recording_ids() == ids
        assert [d.recording_id for d in again.descriptors()] == ids


def test_descriptor_checksums_are_crc32_of_the_body_and_follow_updates(tmp_path):
    with Catalog.open(tmp_path, checksum_algorithm=CHECKSUM_CRC32) as catalog:
        add(catalog, 0)
        catalog.update_stop_position(0, 640, 5)
        data = (tmp_path / "archive.catalog").read_bytes()
        body_length, _, stored = struct.unpack_from("<iii", data, 32)
        expected = struct.unpack("<i", struct.pack("<I", zlib.crc32(data[64:64 + body_length])))[0]
        assert stored == expected and catalog.checksum_matches(0)


def test_state_changes_and_listing_skip_what_is_not_valid(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        for n in range(4):
            add(catalog, n)
        catalog.change_state(1, 2)  # DELETED
        catalog.change_state(2, 0)  # INVALID
        assert [d.recording_id for d in catalog.descriptors()] == [0, 3]
        assert [d.recording_id for d in catalog.descriptors(from_recording_id=1, count=1)] == [3]
        with pytest.raises(CatalogError, match="recording state=7 is not"):
            catalog.change_state(0, 7)
        with pytest.raises(CatalogError, match="unknown recording id=9"):
            catalog.descriptor(9)


def test_a_corrupt_entry_is_reported_what_is_before_it_stays_and_nothing_is_appended_over_it(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        for n in range(3):
            add(catalog, n)
    path = tmp_path / "archive.catalog"
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 32 + 192, 12345)  # entry 1's length: not aligned
    path.write_bytes(bytes(data))
    with Catalog.open(tmp_path) as catalog:
        assert catalog.recording_ids() == [0]
        assert catalog.descriptor(0).recording_id == 0
        assert len(catalog.errors) == 1 and "entry at offset 224 has length=12345" in catalog.errors[0]
        with pytest.raises(CatalogError, match="cannot append after the corrupt entry at offset 224"):
            add(catalog, 3)


def test_a_catalog_of_another_major_version_or_alignment_is_refused(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        add(catalog, 0)
    path = tmp_path / "archive.catalog"
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 0, (4 << 16) | (0 << 8))
    path.write_bytes(bytes(data))
    with pytest.raises(LayoutError, match="catalog version 4.0.0 is not compatible with 3.1.0"):
        Catalog.open(tmp_path)
    struct.pack_into("<ii", data, 0, 196_864, 32)
    struct.pack_into("<i", data, 16, 48)
    path.write_bytes(bytes(data))
    with pytest.raises(LayoutError, match="catalog alignment=48"):
        Catalog.open(tmp_path)
    with pytest.raises(CatalogError, match="no catalog at"):
        Catalog.open(tmp_path / "elsewhere", create=False)
