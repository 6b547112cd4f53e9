"""The archive's file layouts (spec/archive.md §3-§5, §7) against numbers typed here from the spec."""

from __future__ import annotations

import pytest

from aeron_numba.errors import LayoutError
from aeron_numba.layout import archive as A


def test_catalog_header_and_entry_offsets_are_the_spec_tables():
    assert A.CATALOG_VERSION == 196_864 == (3 << 16) | (1 << 8)
    assert (A.CATALOG_HEADER_LENGTH, A.CATALOG_VERSION_OFFSET, A.CATALOG_LENGTH_OFFSET,
            A.CATALOG_NEXT_RECORDING_ID_OFFSET, A.CATALOG_ALIGNMENT_OFFSET) == (32, 0, 4, 8, 16)
    assert (A.DESCRIPTOR_HEADER_LENGTH, A.DESCRIPTOR_LENGTH_OFFSET, A.DESCRIPTOR_STATE_OFFSET,
            A.DESCRIPTOR_CHECKSUM_OFFSET) == (32, 0, 4, 8)
    assert (A.RECORDING_STATE_INVALID, A.RECORDING_STATE_VALID, A.RECORDING_STATE_DELETED) == (0, 1, 2)
    body = A.DESCRIPTOR_BODY_OFFSETS
    assert [body[n] for n in ("control_session_id", "correlation_id", "recording_id", "start_timestamp",
                              "stop_timestamp", "start_position", "stop_position", "initial_term_id",
                              "segment_file_length", "term_buffer_length", "mtu_length", "session_id",
                              "stream_id")] == [0, 8, 16, 24, 32, 40, 48, 56, 60, 64, 68, 72, 76]
    assert A.DESCRIPTOR_BLOCK_LENGTH == 80
    assert A.DESCRIPTOR_STRINGS == ("stripped_channel", "original_channel", "source_identity")


@pytest.mark.parametrize("lengths, alignment, expected", [
    ((9, 9, 9), 64, 192),  # 32 + 92 + 27 = 151 -> 192
    ((0, 0, 0), 64, 128),  # 124 -> 128
    ((4, 0, 0), 64, 128),  # exactly 128
    ((5, 0, 0), 64, 192),
    ((9, 25, 9), 1024, 1024),  # a legacy catalog's alignment
])
def test_catalog_entry_length_is_the_spec_formula(lengths, alignment, expected):
    assert A.catalog_entry_length(*lengths, alignment=alignment) == expected


def test_catalog_alignment_capacity_and_growth_guards_name_the_value_and_the_limit():
    assert A.check_catalog_alignment(64) == 64 and A.check_catalog_alignment(0) == 1024
    assert A.first_entry_offset(64) == 32 and A.first_entry_offset(0) == 1024
    with pytest.raises(LayoutError, match="catalog alignment=48 must be a power of two >= 32"):
        A.check_catalog_alignment(48)
    with pytest.raises(LayoutError, match=r"catalog capacity=31 must be in \[32, 2147483647\]"):
        A.check_catalog_capacity(31)
    assert A.grown_catalog_capacity(1024 * 1024, 1024 * 1024 + 1) == 1536 * 1024
    assert A.grown_catalog_capacity(1024, 5000) == 5184  # 1024 -> 1536 -> 2304 -> 3456 -> 5184
    assert A.grown_catalog_capacity(2**30 + 2**29, 2**31 - 1) == 2**31 - 1  # capped at the max
    with pytest.raises(LayoutError, match="catalog needs 2147483648 bytes > MAX_CATALOG_CAPACITY"):
        A.grown_catalog_capacity(1024, 2**31)


def test_segment_geometry_is_the_spec_rules():
    assert A.DEFAULT_SEGMENT_FILE_LENGTH == 134_217_728
    assert A.segment_file_name(7, 134_217_728) == "7-134217728.rec"
    assert A.parse_segment_file_name("7-134217728.rec") == (7, 134_217_728)
    for name in ("7-1.del", "x-1.rec", "7_1.rec", "7-.rec", "-1-5.rec", "archive.catalog"):
        assert A.parse_segment_file_name(name) is None, name
    term, segment = 64 * 1024, 256 * 1024
    # A recording starting mid-term: its first segment starts at that term's base.
    start = 3 * term + 4096
    assert A.segment_file_base_position(start, start, term, segment) == 3 * term
    assert A.segment_file_base_position(start, 3 * term + segment - 32, term, segment) == 3 * term
    assert A.segment_file_base_position(start, 3 * term + segment, term, segment) == 3 * term + segment
    assert A.recording_segment_file_length(64 * 1024, 1024 * 1024) == 1024 * 1024
    A.check_segment_file_length(64 * 1024)
    for bad in (32 * 1024, 3 * 64 * 1024, 2 * 1024 * 1024 * 1024):
        with pytest.raises(LayoutError, match=f"segment file length={bad} must be a power of two"):
            A.check_segment_file_length(bad)


def test_mark_file_and_counter_layouts_are_the_spec_tables():
    assert (A.MARK_VERSION_OFFSET, A.MARK_ACTIVITY_TIMESTAMP_OFFSET, A.MARK_START_TIMESTAMP_OFFSET, A.MARK_PID_OFFSET,
            A.MARK_CONTROL_STREAM_ID_OFFSET, A.MARK_LOCAL_CONTROL_STREAM_ID_OFFSET, A.MARK_EVENTS_STREAM_ID_OFFSET,
            A.MARK_HEADER_LENGTH_OFFSET, A.MARK_ERROR_BUFFER_LENGTH_OFFSET, A.MARK_ARCHIVE_ID_OFFSET,
            A.MARK_STRINGS_OFFSET) == (8, 16, 24, 32, 40, 44, 48, 52, 56, 64, 136)
    assert A.mark_file_length(A.DEFAULT_ERROR_BUFFER_LENGTH) == 1_056_768
    A.check_mark_strings_fit([8040, 0, 0, 0])  # exactly up to the error log
    with pytest.raises(LayoutError, match="strings end at 8193 > MARK_HEADER_LENGTH=8192"):
        A.check_mark_strings_fit([8041, 0, 0, 0])
    assert A.rec_pos_key_length(9) == 33 and A.rec_pos_key_length(500) == 112
    assert A.ARCHIVE_PROTOCOL_VERSION == 68_352
    assert A.ARCHIVE_ERROR_CODES["REPLICATION_CONNECTION_FAILURE"] == 14
    assert A.CONTROL_RESPONSE_CODES == {"OK": 0, "ERROR": 1, "RECORDING_UNKNOWN": 2, "SUBSCRIPTION_UNKNOWN": 3}
