"""segment_columns: a segment's frames as column arrays, checked against a plain Python walk of the same bytes
(fragments, whole messages, a position window, PAD frames, a torn message, checksums, garbage)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.kernels.replay_rewrite import frame_checksum
from aeron_numba.kernels.segment_columns import (
    COUNT_FRAMES,
    COUNT_PAYLOAD_BYTES,
    SCAN_BAD_FRAME,
    SCAN_CHECKSUM_MISMATCH,
    WALK_BAD_OFFSET,
    WALK_BOUNDARY,
    WALK_FIRST_UNIT_END,
    count_fragments,
    fill_fragments,
    walk_units,
)
from aeron_numba.layout.checksum import CHECKSUM_CRC32

BASE = 1 << 20  # the segment's base position
DATA, PAD = 1, 0
BEGIN, END = 0x80, 0x40


def build(frames, size=64 * 1024, checksum=False):
    """A segment holding ``frames`` = [(type, flags, payload bytes)] back to back from offset 0."""
    segment = np.zeros(size, np.uint8)
    offset = 0
    for i, (frame_type, flags, payload) in enumerate(frames):
        length = 32 + len(payload)
        struct.pack_into("<iBBhiiiiq", segment, offset, length, 0, flags, frame_type, offset, 99, 1001, 7, i)
        segment[offset + 32:offset + length] = np.frombuffer(payload, np.uint8)
        if checksum and frame_type == DATA:
            aligned = (length + 31) & ~31
            struct.pack_into("<i", segment, offset + 12, frame_checksum(CHECKSUM_CRC32, segment, offset + 32,
                                                                         aligned - 32))
        offset += (length + 31) & ~31
    return segment


def naive(segment, low, high, messages):
    """(position, flags, frame_length, reserved, payload) rows the obvious way."""
    rows, offset, current = [], 0, None
    while offset + 32 <= segment.size:
        length, _, flags, frame_type = struct.unpack_from("<iBBh", segment, offset)
        if length == 0 or BASE + offset >= high:
            break
        if frame_type == DATA and BASE + offset >= low:
            reserved = struct.unpack_from("<q", segment, offset + 24)[0]
            payload = bytes(segment[offset + 32:offset + length])
            if not messages:
                rows.append((BASE + offset, flags, length, reserved, payload))
            elif flags & BEGIN:
                current = [BASE + offset, flags, reserved, payload]
            elif current is not None:
                current[3] += payload
            if messages and current is not None and flags & END:
                rows.append((current[0], flags | BEGIN, 32 + len(current[3]), current[2], current[3]))
                current = None
        offset += (length + 31) & ~31
    return rows


def scan(segment, low=0, high=1 << 62, messages=False, algorithm=0):
    out = np.zeros(3, np.int64)
    status = count_fragments(segment, 0, segment.size, BASE, low, high, algorithm, out)
    if status < 0:
        return status, out
    n, payload_bytes = int(out[COUNT_FRAMES]), int(out[COUNT_PAYLOAD_BYTES])
    cols = [np.empty(n, t) for t in (np.int64, np.int32, np.int32, np.int32, np.int16, np.int32, np.int64)]
    offsets, payload = np.empty(n + 1, np.int32), np.empty(payload_bytes, np.uint8)
    rows = fill_fragments(segment, 0, segment.size, BASE, low, high, messages, *cols, offsets, payload)
    positions, term_ids, term_offsets, lengths, flags, types, reserved = cols
    assert (types[:rows] == DATA).all() and (term_ids[:rows] == 7).all()
    assert (term_offsets[:rows] == positions[:rows] - BASE).all()  # the test's frames sit where they belong
    return [(int(positions[i]), int(flags[i]), int(lengths[i]), int(reserved[i]),
             bytes(payload[offsets[i]:offsets[i + 1]])) for i in range(rows)], out


frame_strategy = st.one_of(
    st.tuples(st.just(DATA), st.sampled_from([BEGIN | END, BEGIN, 0, END]), st.binary(max_size=300)),
    st.tuples(st.just(PAD), st.just(0), st.binary(max_size=100)))


@settings(max_examples=60, deadline=None)
@given(st.lists(frame_strategy, max_size=40), st.integers(0, 16 * 1024), st.integers(0, 16 * 1024),
       st.booleans())
def test_rows_equal_a_plain_walk(frames, low_offset, window, messages):
    segment = build(frames)
    low, high = BASE + low_offset, BASE + low_offset + window
    got, _ = scan(segment, low, high, messages)
    assert got == naive(segment, low, high, messages)


def test_messages_join_fragments_and_drop_torn_ones():
    frames = [(DATA, END, b"orphan"), (DATA, BEGIN, b"ab"), (DATA, 0, b"cd"), (DATA, END, b"ef"),
              (PAD, 0, b"\xee" * 40), (DATA, BEGIN, b"torn"), (DATA, BEGIN | END, b"whole")]
    got, _ = scan(build(frames), messages=True)
    assert [(row[2], row[4]) for row in got] == [(38, b"abcdef"), (37, b"whole")]
    assert {row[1] for row in got} == {BEGIN | END}
    got, _ = scan(build(frames))
    assert [row[4] for row in got] == [b"orphan", b"ab", b"cd", b"ef", b"torn", b"whole"]  # no PAD row


def test_record_checksums_are_verified_and_a_flipped_byte_is_named():
    segment = build([(DATA, BEGIN | END, bytes(range(50))), (DATA, BEGIN | END, b"x" * 10)], checksum=True)
    got, _ = scan(segment, algorithm=CHECKSUM_CRC32)
    assert len(got) == 2
    segment[96 + 32 + 3] ^= 1  # second frame (offset 96), a payload byte
    status, out = scan(segment, algorithm=CHECKSUM_CRC32)
    assert status == SCAN_CHECKSUM_MISMATCH and out[0] == 96 and out[1] != out[2]


@pytest.mark.parametrize("length, frame_type", [(12, DATA), (64 * 1024, DATA), (40, 7)])
def test_a_bad_frame_header_is_reported_with_its_offset(length, frame_type):
    segment = build([(DATA, BEGIN | END, b"ok")])
    struct.pack_into("<iBBh", segment, 64, length, 0, BEGIN | END, frame_type)
    status, out = scan(segment)
    assert status == SCAN_BAD_FRAME and out[0] == 64 and out[1] == length and out[2] == frame_type


TERM_LENGTH = 64 * 1024
INITIAL_TERM_ID = 7 - BASE // TERM_LENGTH  # build() writes term id 7: the term of BASE


def naive_boundaries(frames, messages):
    """Offsets a micro-batch may end at: after every frame; with ``messages`` after a message's END or a PAD or
    a fragment outside any message, and before a BEGIN or PAD that cuts off an unfinished message."""
    boundaries, offset, in_message = {0}, 0, False
    for frame_type, flags, payload in frames:
        if in_message and (frame_type == PAD or flags & BEGIN):
            boundaries.add(offset)
            in_message = False
        if messages and frame_type == DATA and flags & BEGIN:
            in_message = True
        if messages and frame_type == DATA and flags & END:
            in_message = False
        offset += (32 + len(payload) + 31) & ~31
        if not in_message:
            boundaries.add(offset)
    return boundaries, offset


@settings(max_examples=60, deadline=None)
@given(st.lists(frame_strategy, max_size=40), st.integers(0, 16 * 1024), st.booleans())
def test_walk_units_ends_at_the_last_boundary_within_the_limit_and_completes_the_first_unit(frames, limit,
                                                                                           messages):
    segment = build(frames)
    boundaries, written = naive_boundaries(frames, messages)
    out = np.zeros(4, np.int64)
    reached = walk_units(segment, 0, segment.size, limit, BASE, TERM_LENGTH, INITIAL_TERM_ID, messages, out)
    assert out[WALK_BOUNDARY] == max(b for b in boundaries if b <= limit)
    assert out[WALK_FIRST_UNIT_END] == min([b for b in boundaries if b > 0] or [0])
    if limit >= written:
        assert reached == written


def test_walk_units_stops_before_a_header_not_yet_whole():
    segment = build([(DATA, BEGIN | END, b"a" * 40), (DATA, BEGIN | END, b"b" * 40)])
    out = np.zeros(4, np.int64)
    segment[96 + 4:96 + 32] = 0  # the second frame's length word has landed, the rest of its header not yet
    assert walk_units(segment, 0, segment.size, segment.size, BASE, TERM_LENGTH, INITIAL_TERM_ID, False, out) \
        == SCAN_BAD_FRAME
    assert out[WALK_BAD_OFFSET] == 96 and out[WALK_BOUNDARY] == 96
