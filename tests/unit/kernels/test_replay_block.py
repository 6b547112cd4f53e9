"""``replay_block`` (one copy, segment file -> replay log) against the obvious two-copy path it replaces: scan the
block, cut it to whole messages, copy it, rewrite the copy (``replay_rewrite``) and ``exclusive_offer_block`` it."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.kernels import replay_rewrite as R
from aeron_numba.kernels import term_appender as TA
from aeron_numba.kernels.segment_scanner import whole_messages_length
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout import checksum as K
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from tests.reference import replay_rewrite as REF
from tests.unit.log_support import LimitCounter, new_pub_state

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TERM_LENGTH = 64 * 1024
INITIAL_TERM_ID = 7
SESSION_ID, STREAM_ID = 42, 1001
STATUS_OF = {K.CHECKSUM_MISMATCH: R.REPLAY_CHECKSUM_MISMATCH, K.MALFORMED_FRAME: R.REPLAY_MALFORMED_FRAME}


@pytest.fixture
def make_log(shm_dir):
    count = [0]

    def make() -> np.ndarray:
        count[0] += 1
        logbuf = LogBuffers.create(shm_dir / f"{count[0]}.logbuffer", term_length=TERM_LENGTH, mtu_length=4096,
                                   initial_term_id=INITIAL_TERM_ID, session_id=SESSION_ID, stream_id=STREAM_ID)
        return logbuf.buffer

    return make


def recorded_term(frames: list[tuple[int, int, int]], term_base: int, algorithm: int) -> np.ndarray:
    """A segment holding one recorded term at ``term_base``: ``(type, frame_length, flags)`` frames from offset 0
    with the recording's ids and their term offsets, random payloads, then zeros; DATA frames checksummed."""
    rng = np.random.default_rng(len(frames))
    segment = bytearray(term_base + TERM_LENGTH)
    at = 0
    for frame_type, frame_length, flags in frames:
        aligned = REF.align32(frame_length)
        if at + aligned > TERM_LENGTH:
            break
        body = rng.integers(0, 256, aligned - 32, dtype=np.uint8).tobytes()
        segment[term_base + at:term_base + at + aligned] = REF.build_frame(
            frame_type, frame_length, flags=flags, term_offset=at, session_id=-5, stream_id=-6,
            term_id=INITIAL_TERM_ID, reserved=at, body=body)
        at += aligned
    buf = np.frombuffer(segment, dtype=np.uint8)
    if algorithm != K.CHECKSUM_NONE and at:
        walked = R.record_checksums(buf, term_base, at, algorithm, np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64))
        assert walked in (at, K.MALFORMED_FRAME)  # a frame of another type is left for the replay to refuse
    return buf


def two_copy_replay(segment, term_base, term_offset, limit_offset, log, pub_state, limit_buf, algorithm):
    """What ReplaySession did before ``replay_block``."""
    length = scan_block(segment, term_base, term_offset, min(limit_offset, TERM_LENGTH)) - term_offset
    if length <= 0:
        return 0
    src = term_base + term_offset
    if struct.unpack_from("<H", segment, src + 6)[0] == REF.PAD:
        return TA.exclusive_append_padding(log, pub_state, limit_buf, struct.unpack_from("<i", segment, src)[0] - 32)
    length = whole_messages_length(segment, src, length)
    block = segment[src:src + length].copy()
    status = R.replay_rewrite(block, 0, length, SESSION_ID, STREAM_ID, algorithm,
                              np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64))
    if status != length:
        return STATUS_OF[int(status)]
    return TA.exclusive_offer_block(log, pub_state, limit_buf, block, 0, length)


FRAMES = st.lists(
    st.tuples(st.sampled_from([REF.DATA] * 12 + [REF.PAD, 3]), st.integers(32, 3000),
              st.sampled_from([0xC0, 0xC0, 0x80, 0x00, 0x40])),
    min_size=1, max_size=80)


@SETTINGS
@given(frames=FRAMES, term_base=st.sampled_from([0, TERM_LENGTH]),
       algorithm=st.sampled_from([K.CHECKSUM_NONE, K.CHECKSUM_CRC32C]),
       block_lengths=st.lists(st.integers(1, 40000), min_size=1, max_size=8), corrupt=st.integers(-1, 40))
def test_replay_block_appends_what_the_two_copy_path_appended(make_log, frames, term_base, algorithm,
                                                             block_lengths, corrupt):
    segment = recorded_term(frames, term_base, algorithm)
    if corrupt >= 0 and algorithm != K.CHECKSUM_NONE:
        segment[term_base + 32 + corrupt * 97 % (TERM_LENGTH - 32)] ^= 0x10
    log, expected_log = make_log(), make_log()
    limit = LimitCounter()
    out = np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64)

    def run(replay, log):
        """Blocks until the term ends, an error or 200 tries: ``(results without the 0s, pub_state)``."""
        pub_state = new_pub_state(log, True)
        results = []
        for step in range(200):
            term_offset = int(pub_state[P.PUB_STATE_TERM_OFFSET])
            limit_offset = term_offset + block_lengths[step % len(block_lengths)]
            results.append(int(replay(segment, term_base, term_offset, limit_offset, log, pub_state, limit.buffer)))
            if results[-1] < 0 or results[-1] >= TERM_LENGTH:
                break
        return [r for r in results if r != 0] or [0], pub_state

    got, state = run(lambda *a: R.replay_block(*a, algorithm, out), log)
    expected, expected_state = run(lambda *a: two_copy_replay(*a, algorithm), expected_log)
    if got[-1] == R.REPLAY_MISPLACED_BLOCK:  # a corrupt term offset or term id field: refused even in a PAD frame
        published = max([0] + [r for r in got if r > 0])
        term_offset, term_id = struct.unpack_from("<i8xi", segment, term_base + published + 8)
        assert (term_offset, term_id) != (published, INITIAL_TERM_ID)
        assert got[:-1] == expected[:len(got) - 1]
        assert log[:published].tobytes() == expected_log[:published].tobytes() and not log[published:TERM_LENGTH].any()
    elif expected[-1] >= 0:
        assert got == expected
        assert (state == expected_state).all()
        assert log.tobytes() == expected_log.tobytes()
    else:  # refused at the same frame; the whole messages before it may have gone out in more blocks
        assert got[-1] == expected[-1]
        published = max([0] + [r for r in got if r > 0])
        expected_published = max([0] + [r for r in expected if r > 0])
        assert published >= expected_published
        assert log[:expected_published].tobytes() == expected_log[:expected_published].tobytes()
        assert not log[published:TERM_LENGTH].any()  # nothing reachable after what was published
        extra = segment[term_base + expected_published:term_base + published].copy()
        if all(t == REF.DATA for _, t, _ in REF.frame_offsets(extra.tobytes(), 0, extra.size)):
            assert R.replay_rewrite(extra, 0, extra.size, SESSION_ID, STREAM_ID, algorithm, out) == extra.size
            assert log[expected_published:published].tobytes() == extra.tobytes()


def test_an_error_after_copied_chunks_leaves_the_term_clean(make_log):
    # ~40 KiB of fragments of one message (no whole message to send first), then a frame of a bad type
    frames = [(REF.DATA, 1000, 0x80)] + [(REF.DATA, 1000, 0x00)] * 39 + [(3, 64, 0xC0)]
    segment = recorded_term(frames, 0, K.CHECKSUM_NONE)
    log = make_log()
    pub_state = new_pub_state(log, True)
    out = np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64)
    status = R.replay_block(segment, 0, 0, TERM_LENGTH, log, pub_state, LimitCounter().buffer, 0, out)
    assert status == R.REPLAY_MALFORMED_FRAME
    assert out.tolist() == [40 * 1024, 64, 3]
    assert not log[:TERM_LENGTH].any() and pub_state[P.PUB_STATE_TERM_OFFSET] == 0
    segment[40 * 1024 + 6] = REF.DATA  # mended: it ends no message, so the fragments go out in one block
    assert R.replay_block(segment, 0, 0, TERM_LENGTH, log, pub_state, LimitCounter().buffer, 0, out) == 41 * 1024 \
        - 1024 + 64


def test_a_cut_to_whole_messages_leaves_nothing_reachable_after_the_block(make_log):
    frames = [(REF.DATA, 1000, 0xC0)] * 20 + [(REF.DATA, 1000, 0x80)] * 3  # a message begun, not ended
    segment = recorded_term(frames, 0, K.CHECKSUM_NONE)
    log = make_log()
    pub_state = new_pub_state(log, True)
    out = np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64)
    assert R.replay_block(segment, 0, 0, TERM_LENGTH, log, pub_state, LimitCounter().buffer, 0, out) == 20 * 1024
    assert not log[20 * 1024:TERM_LENGTH].any()


def test_misplaced_blocks_back_pressure_and_closed(make_log):
    segment = recorded_term([(REF.DATA, 100, 0xC0)] * 3, 0, K.CHECKSUM_NONE)
    log = make_log()
    pub_state = new_pub_state(log, True)
    out = np.zeros(K.REWRITE_OUT_LENGTH, dtype=np.int64)
    assert R.replay_block(segment, 0, 128, TERM_LENGTH, log, pub_state, LimitCounter().buffer, 0, out) == \
        R.REPLAY_MISPLACED_BLOCK  # the publication is at 0
    assert R.replay_block(segment, 0, 0, TERM_LENGTH, log, pub_state, LimitCounter(0).buffer, 0, out) in \
        (P.BACK_PRESSURED, P.NOT_CONNECTED)
    assert R.replay_block(segment, 0, 0, 64, log, pub_state, LimitCounter().buffer, 0, out) == 0  # 128 > limit
    assert not log[:TERM_LENGTH].any()
    pub_state[P.PUB_STATE_CLOSED] = 1
    assert R.replay_block(segment, 0, 0, TERM_LENGTH, log, pub_state, LimitCounter().buffer, 0, out) == P.CLOSED
