"""Term reader, image poll and term scanners (spec §5) against the reference, including garbage input."""

from __future__ import annotations

import struct

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.jit import handler_address
from aeron_numba.kernels import term_reader as TR
from aeron_numba.kernels.handlers import FragmentHandler
from aeron_numba.kernels import term_scanner as TS
from aeron_numba.layout import frame as F
from aeron_numba.layout.log_buffers import LogBuffers
from tests.reference import log_buffer as ref
from tests.unit.log_support import LimitCounter, new_pub_state, offer_until_done

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TERM_LENGTH = 64 * 1024
TERM_ID = 0  # the first term of the fixture log (initial term id 0)


@numba.njit
def count_fragments(ctx, buffer, offset, length):
    """ctx[0] fragments, ctx[1] payload bytes, ctx[2] sum of first payload bytes."""
    ctx[0] += 1
    ctx[1] += length
    if length > 0:
        ctx[2] += buffer[offset]


COUNT_FRAGMENTS_ADDRESS = handler_address(count_fragments, FragmentHandler)


def frames_strategy():
    """A term image: a run of DATA/PAD frames (random lengths), then optionally garbage bytes."""
    frame = st.tuples(st.booleans(), st.integers(0, 3000))
    return st.tuples(st.lists(frame, max_size=40), st.binary(max_size=256), st.integers(0, 2**31 - 1))


def build_term(frames, garbage: bytes, garbage_length_field: int) -> bytearray:
    term = bytearray(TERM_LENGTH)
    offset = 0
    for is_pad, payload_length in frames:
        frame_length = F.HEADER_LENGTH + payload_length
        aligned = ref.align(frame_length, F.FRAME_ALIGNMENT)
        if offset + aligned > TERM_LENGTH:
            break
        ftype = F.HDR_TYPE_PAD if is_pad else F.HDR_TYPE_DATA
        struct.pack_into("<iBBhiiiiq", term, offset, frame_length, 0, F.UNFRAGMENTED, ftype, offset, 1, 2, TERM_ID, 0)
        term[offset + 32 : offset + 32 + payload_length] = bytes([offset % 251]) * payload_length
        offset += aligned
    if offset + 4 <= TERM_LENGTH and garbage:
        # A record another process scribbled: a length field that may claim to run past the term.
        struct.pack_into("<i", term, offset, garbage_length_field)
        end = min(TERM_LENGTH, offset + 4 + len(garbage))
        term[offset + 4 : end] = garbage[: end - offset - 4]
    return term


@pytest.fixture
def log(shm_dir):
    logbuf = LogBuffers.create(shm_dir / "r.logbuffer", term_length=TERM_LENGTH, initial_term_id=0,
                               session_id=1, stream_id=2)
    yield logbuf.buffer


@SETTINGS
@given(term=frames_strategy(), start_frames=st.integers(0, 5), limit=st.integers(1, 50))
def test_read_matches_reference_and_stays_in_term(log, term, start_frames, limit):
    image = build_term(*term)
    log[:TERM_LENGTH] = np.frombuffer(image, np.uint8)
    # Start on a frame boundary a few frames in.
    start = 0
    for _ in range(start_frames):
        length = struct.unpack_from("<i", image, start)[0]
        if length < F.HEADER_LENGTH or start + ref.align(length, 32) > TERM_LENGTH:
            break
        start += ref.align(length, 32)
    expected, expected_offset = ref.read_fragments(bytes(image), start, limit, TERM_ID)

    out = np.zeros((limit, TR.FRAGMENT_COLUMNS), np.int64)
    count, offset = TR.read_batch(log, 0, start, TERM_LENGTH, 0, out)
    assert offset == expected_offset
    assert [(int(r[0]), int(r[1])) for r in out[:count]] == [(o, n) for o, n, _ in expected]
    assert all(int(r[0]) + int(r[1]) <= TERM_LENGTH for r in out[:count])

    ctx = np.zeros(3, np.int64)
    fragments, offset = TR.read(log, 0, start, TERM_LENGTH, TERM_ID, limit, count_fragments, ctx)
    assert (fragments, offset) == (len(expected), expected_offset)
    assert ctx[1] == sum(n - F.HEADER_LENGTH for _, n, _ in expected)
    # The handler with its address looked up once (a Python caller's hot path) reads the same.
    again = np.zeros(3, np.int64)
    assert TR.read(log, 0, start, TERM_LENGTH, TERM_ID, limit, COUNT_FRAGMENTS_ADDRESS, again) == (fragments, offset)
    assert list(again) == list(ctx)


@SETTINGS
@given(term=frames_strategy(), max_length=st.integers(32, 20000), start_frames=st.integers(0, 3))
def test_scan_for_availability_matches_reference(log, term, max_length, start_frames):
    image = build_term(*term)
    log[:TERM_LENGTH] = np.frombuffer(image, np.uint8)
    start = 0
    for _ in range(start_frames):
        length = struct.unpack_from("<i", image, start)[0]
        if length < F.HEADER_LENGTH or start + ref.align(length, 32) > TERM_LENGTH:
            break
        start += ref.align(length, 32)
    packed = TS.scan_for_availability(log, 0, start, max_length, TERM_LENGTH)
    assert (TS.available_of(packed), TS.padding_of(packed)) == ref.scan_for_availability(bytes(image), start, max_length)


def test_scan_block_stops_before_padding_and_at_limit(log):
    frames = [(False, 100), (False, 40), (True, 500), (False, 10)]
    log[:TERM_LENGTH] = np.frombuffer(build_term(frames, b"", 0), np.uint8)
    first, second = ref.align(132, 32), ref.align(72, 32)
    pad = ref.align(532, 32)
    assert TS.scan_block(log, 0, 0, TERM_LENGTH) == first + second  # stops before the PAD
    assert TS.scan_block(log, 0, first + second, TERM_LENGTH) == first + second + pad  # PAD alone as a block
    assert TS.scan_block(log, 0, 0, first + 10) == first  # the second frame would pass the limit
    assert TS.scan_block(log, 0, first + second + pad, TERM_LENGTH) == first + second + pad + 64


def test_garbage_length_never_read_past_term(log):
    """A huge or misaligned length at the head stops readers and scanners where they are."""
    for garbage in (0x7FFF_FFFF, TERM_LENGTH + 32, 17, 31):
        log[:TERM_LENGTH] = 0
        log[:4].view(np.int32)[0] = garbage
        out = np.zeros((4, TR.FRAGMENT_COLUMNS), np.int64)
        assert TR.read_batch(log, 0, 0, TERM_LENGTH, 0, out) == (0, 0)
        assert TS.available_of(TS.scan_for_availability(log, 0, 0, 1408, TERM_LENGTH)) == 0
        assert TS.scan_block(log, 0, 0, TERM_LENGTH) == 0


def test_a_frame_of_another_lap_is_never_delivered(log):
    """A reader a whole lap behind (timed out, no longer counted by the driver) stops at frames that carry
    a later term id instead of delivering another term's data as this one's."""
    log[:TERM_LENGTH] = np.frombuffer(build_term([(False, 100), (False, 100)], b"", 0), np.uint8)
    second = ref.align(132, 32)
    log[second + F.TERM_ID_FIELD_OFFSET : second + F.TERM_ID_FIELD_OFFSET + 4].view(np.int32)[0] = TERM_ID + 3
    out = np.zeros((4, TR.FRAGMENT_COLUMNS), np.int64)
    assert TR.read_batch(log, 0, 0, TERM_LENGTH, 0, out) == (1, second)
    ctx = np.zeros(3, np.int64)
    assert TR.read(log, 0, 0, TERM_LENGTH, TERM_ID, 4, count_fragments, ctx) == (1, second)
    sub_pos = np.zeros(128, np.uint8)
    assert TR.image_poll(log, sub_pos, 0, 4, count_fragments, ctx) == 1
    assert int(sub_pos[:8].view(np.int64)[0]) == second
    assert ref.read_fragments(bytes(log[:TERM_LENGTH]), 0, 4, TERM_ID)[1] == second


def test_image_poll_advances_subscriber_position_across_terms(shm_dir):
    """image_poll with a compiled handler: every message once, sub-pos release-stored, terms crossed."""
    logbuf = LogBuffers.create(shm_dir / "p.logbuffer", term_length=TERM_LENGTH, initial_term_id=3,
                               session_id=1, stream_id=2)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive=True)
    limit = LimitCounter()
    sub_pos = np.zeros(128, np.uint8)
    ctx = np.zeros(3, np.int64)
    total = 0
    for i in range(500):  # 500 * 288 bytes > 2 terms
        message = np.full(256, i % 251, np.uint8)
        assert offer_until_done(log, state, limit, message, True) > 0
        while True:  # a poll over padding alone reads 0 fragments but moves the position
            before = int(sub_pos[:8].view(np.int64)[0])
            TR.image_poll(log, sub_pos, 0, 10, count_fragments, ctx)
            if int(sub_pos[:8].view(np.int64)[0]) == before:
                break
        total += i % 251
        # Clean the term the subscriber left, as the driver would.
        position = int(sub_pos[:8].view(np.int64)[0])
        previous = (position // TERM_LENGTH - 1) % 3
        if position >= TERM_LENGTH:
            log[previous * TERM_LENGTH : (previous + 1) * TERM_LENGTH] = 0
    assert ctx[0] == 500 and ctx[1] == 500 * 256 and ctx[2] == total
    assert int(sub_pos[:8].view(np.int64)[0]) > 2 * TERM_LENGTH
