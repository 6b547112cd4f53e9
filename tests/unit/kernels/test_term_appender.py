"""Appender kernels against the reference model, and the stream properties of §1-§5."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.kernels import term_appender as TA
from aeron_numba.layout import frame as F
from aeron_numba.layout import log_buffer_descriptor as LB
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from tests.reference.log_buffer import ReferenceLog, metadata_tails
from tests.unit.log_support import Consumer, LimitCounter, new_pub_state, offer, offer_until_done

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MTUS = st.sampled_from([64, 96, 160, 1408, 4096, 8192])
TERM_LENGTHS = st.sampled_from([64 * 1024, 128 * 1024, 256 * 1024])


@pytest.fixture
def make_log(shm_dir):
    opened = []

    def make(**kwargs) -> LogBuffers:
        kwargs.setdefault("initial_term_id", 7)
        kwargs.setdefault("session_id", 42)
        kwargs.setdefault("stream_id", 1001)
        log = LogBuffers.create(shm_dir / f"{len(opened)}.logbuffer", **kwargs)
        opened.append(log)
        return log

    yield make
    for log in opened:
        del log  # views are dropped with the test's locals; the files go with shm_dir


def message_bytes(rng: np.random.Generator, length: int) -> np.ndarray:
    return rng.integers(0, 256, size=length, dtype=np.uint8)


@SETTINGS
@given(
    term_length=TERM_LENGTHS,
    mtu=MTUS,
    exclusive=st.booleans(),
    initial_term_id=st.integers(-(2**31), 2**31 - 1),
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=120),
)
def test_appended_bytes_match_reference_and_read_back_in_order(
    make_log, term_length, mtu, exclusive, initial_term_id, seed, sizes
):
    """Random streams across several rotations: same bytes as the reference, every message back once,
    intact and in order, padding never delivered, positions per §3."""
    logbuf = make_log(term_length=term_length, mtu_length=mtu, initial_term_id=initial_term_id)
    log = logbuf.buffer
    ref = ReferenceLog(term_length, mtu, initial_term_id, 42, 1001)
    max_len = logbuf.max_message_length
    rng = np.random.default_rng(seed)
    state = new_pub_state(log, exclusive)
    limit = LimitCounter()
    consumer = Consumer(log, term_length)
    sent = []
    for i, size in enumerate(sizes):
        length = size % (max_len + 1)
        message = message_bytes(rng, length)
        expected = ref.offer(message.tobytes(), i)
        result = offer(log, state, limit, message, exclusive, i)
        assert result == expected
        if result == P.ADMIN_ACTION:
            expected = ref.offer(message.tobytes(), i)
            result = offer(log, state, limit, message, exclusive, i)
            assert result == expected
        assert result > 0
        assert result == ref.position()
        sent.append((message.tobytes(), i))
        old_term = consumer.position // term_length
        consumer.drain()
        for term_count in range(old_term, consumer.position // term_length):
            ref.clean_term(term_count % 3)
        assert consumer.position == result  # consumer caught up exactly to the publisher position
        assert log[: 3 * term_length].tobytes() == bytes(ref.terms)
        tails, active_term_count = metadata_tails(log.tobytes())
        assert [t & 0xFFFF_FFFF_FFFF_FFFF for t in tails] == [t & 0xFFFF_FFFF_FFFF_FFFF for t in ref.tails]
        assert active_term_count == ref.active_term_count
    assert consumer.messages == [m for m, _ in sent]
    assert consumer.reserved == [r for _, r in sent]
    assert TA.producer_position(log) == ref.position()


@SETTINGS
@given(mtu=MTUS, exclusive=st.booleans(), seed=st.integers(0, 1000))
def test_fragmentation_flags_and_claimed_length(make_log, mtu, exclusive, seed):
    """A message over mtu-32 bytes is BEGIN, middle..., END and occupies the §1.4 length."""
    term_length = 64 * 1024
    logbuf = make_log(term_length=term_length, mtu_length=mtu)
    log = logbuf.buffer
    max_payload = mtu - F.HEADER_LENGTH
    length = int(np.random.default_rng(seed).integers(max_payload + 1, logbuf.max_message_length + 1))
    state = new_pub_state(log, exclusive)
    result = offer(log, state, LimitCounter(), message_bytes(np.random.default_rng(seed), length), exclusive)
    assert result == F.compute_fragmented_length(length, max_payload)
    consumer = Consumer(log, term_length)
    consumer.drain()
    fragments = -(-length // max_payload)
    assert len(consumer.flags_seen) == fragments
    assert consumer.flags_seen[0] == F.BEGIN_FRAG_FLAG
    assert consumer.flags_seen[-1] == F.END_FRAG_FLAG
    assert all(flag == 0 for flag in consumer.flags_seen[1:-1])


def test_spec_fragmentation_example(make_log):
    """§1.4: mtu 1408, payload 3000 → frames 1408, 1408, 280 occupying 3104 bytes."""
    logbuf = make_log(term_length=64 * 1024, mtu_length=1408)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive=False)
    assert offer(log, state, LimitCounter(), np.zeros(3000, np.uint8), exclusive=False) == 3104
    lengths = [int(log[o : o + 4].view(np.int32)[0]) for o in (0, 1408, 2816)]
    assert lengths == [1408, 1408, 280]


@pytest.mark.parametrize("exclusive", [False, True])
def test_messages_over_max_length_or_negative_are_errors(make_log, exclusive):
    logbuf = make_log(term_length=64 * 1024)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive)
    too_long = logbuf.max_message_length + 1
    assert logbuf.max_message_length == 8192
    assert offer(log, state, LimitCounter(), np.zeros(too_long, np.uint8), exclusive) == P.ERROR
    fn = TA.exclusive_offer if exclusive else TA.concurrent_offer
    assert fn(log, state, LimitCounter().buffer, np.zeros(8, np.uint8), 0, -1, 0) == P.ERROR
    assert TA.producer_position(log) == 0


@pytest.mark.parametrize("exclusive", [False, True])
def test_python_offer_kernels_check_the_range_and_contiguity_and_append_nothing_when_refused(make_log, exclusive):
    """``*_offer_message`` / ``*_offer_range`` (what ``Publication.offer`` calls first) take any 1-D byte array
    and refuse, with ERROR and no byte written, what the checked path must handle instead."""
    logbuf = make_log(term_length=64 * 1024)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive)
    limit = LimitCounter().buffer
    message = TA.exclusive_offer_message if exclusive else TA.concurrent_offer_message
    offer_range = TA.exclusive_offer_range if exclusive else TA.concurrent_offer_range
    src = np.arange(64, dtype=np.uint8)
    before = log.copy()
    refused = [
        message(log, state, limit, src[::2]),  # not contiguous
        message(log, state, limit, np.zeros(logbuf.max_message_length + 1, np.uint8)),  # too long
        offer_range(log, state, limit, src[::2], 0, 4),
        offer_range(log, state, limit, src, -1, 4),
        offer_range(log, state, limit, src, 0, -1),
        offer_range(log, state, limit, src, 60, 5),  # ends one byte past src
        offer_range(log, state, limit, src, 1 << 62, 1 << 62),  # would overflow as offset + length
    ]
    assert refused == [P.ERROR] * len(refused)
    assert np.array_equal(log, before) and TA.producer_position(log) == 0
    assert message(log, state, limit, src) == 96
    assert offer_range(log, state, limit, src, 60, 4) == 96 + 64
    assert offer_range(log, state, limit, src, 64, 0) == 96 + 64 + 32
    consumer = Consumer(log, 64 * 1024)
    consumer.drain()
    assert consumer.messages == [src.tobytes(), src[60:].tobytes(), b""]


@pytest.mark.parametrize("exclusive", [False, True])
def test_limit_gives_not_connected_then_back_pressured(make_log, exclusive):
    logbuf = make_log(term_length=64 * 1024)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive)
    limit = LimitCounter(64)
    message = np.zeros(32, np.uint8)
    assert offer(log, state, limit, message, exclusive) == 64
    assert offer(log, state, limit, message, exclusive) == P.NOT_CONNECTED
    log[logbuf.metadata_offset + LB.LOG_IS_CONNECTED_OFFSET] = 1
    assert offer(log, state, limit, message, exclusive) == P.BACK_PRESSURED
    limit.set(128)
    assert offer(log, state, limit, message, exclusive) == 128


@pytest.mark.parametrize("exclusive", [False, True])
def test_closed_publication(make_log, exclusive):
    logbuf = make_log(term_length=64 * 1024)
    state = new_pub_state(logbuf.buffer, exclusive)
    state[P.PUB_STATE_CLOSED] = 1
    assert offer(logbuf.buffer, state, LimitCounter(), np.zeros(8, np.uint8), exclusive) == P.CLOSED


@pytest.mark.parametrize("exclusive", [False, True])
def test_max_position_exceeded_in_last_term(make_log, exclusive):
    """In the 2^31st term an append that trips the end returns MAX_POSITION_EXCEEDED (§3, §4.4)."""
    term_length = 64 * 1024
    initial = 5
    last_term_id = ((initial + (1 << 31) - 1 + (1 << 31)) % (1 << 32)) - (1 << 31)
    logbuf = make_log(term_length=term_length, initial_term_id=initial, term_id=last_term_id,
                      term_offset=term_length - 64)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive)
    assert TA.producer_position(log) == (term_length << 31) - 64
    assert offer(log, state, LimitCounter(), np.zeros(32, np.uint8), exclusive) == (term_length << 31)
    assert offer(log, state, LimitCounter(), np.zeros(32, np.uint8), exclusive) == P.MAX_POSITION_EXCEEDED


@pytest.mark.parametrize("exclusive", [False, True])
def test_try_claim_commit_and_abort(make_log, exclusive):
    term_length = 64 * 1024
    logbuf = make_log(term_length=term_length)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive)
    limit = LimitCounter()
    claim = np.zeros(P.CLAIM_LENGTH, np.int64)
    try_claim = TA.exclusive_try_claim if exclusive else TA.concurrent_try_claim
    assert try_claim(log, state, limit.buffer, 100, claim) == 160
    frame_offset = int(claim[P.CLAIM_FRAME_OFFSET])
    # Claimed but not committed: negative length, invisible to readers.
    assert int(log[frame_offset : frame_offset + 4].view(np.int32)[0]) == -132
    consumer = Consumer(log, term_length)
    assert consumer.poll() == 0
    log[frame_offset + 32 : frame_offset + 132] = 9
    TA.commit_claim(log, claim)
    assert consumer.poll() == 1 and consumer.messages[-1] == bytes([9]) * 100
    assert try_claim(log, state, limit.buffer, 10, claim) == 160 + 64
    TA.abort_claim(log, claim)
    assert consumer.poll() == 0  # aborted claim became padding
    assert consumer.position == 224
    assert try_claim(log, state, limit.buffer, logbuf.max_payload_length + 1, claim) == P.ERROR


def test_concurrent_offer_sees_rotation_in_progress(make_log):
    """If active_term_count lags the active tail's term id, a concurrent offer returns ADMIN_ACTION (§4.1.4)."""
    logbuf = make_log(term_length=64 * 1024)
    log = logbuf.buffer
    meta = logbuf.metadata_offset
    log[meta : meta + 8].view(np.int64)[0] = (9 << 32)  # partition 0 tail claims term id 9, count says 0
    state = new_pub_state(log, exclusive=False)
    assert offer(log, state, LimitCounter(), np.zeros(8, np.uint8), exclusive=False) == P.ADMIN_ACTION


def test_rotate_log_is_idempotent_for_racing_writers(make_log):
    logbuf = make_log(term_length=64 * 1024, initial_term_id=7)
    log = logbuf.buffer
    assert TA.rotate_log(log, 0, 7)
    assert not TA.rotate_log(log, 0, 7)  # the second writer finds it done
    tails, count = metadata_tails(log.tobytes())
    assert count == 1 and tails[1] == 8 << 32 and tails[2] == (7 - 1) << 32


def test_offer_after_trip_lands_in_next_term(make_log):
    term_length = 64 * 1024
    logbuf = make_log(term_length=term_length)
    log = logbuf.buffer
    state = new_pub_state(log, exclusive=False)
    limit = LimitCounter()
    message = np.zeros(1000, np.uint8)  # 1056 bytes framed: 62 fit, then a 64-byte PAD ends the term
    positions = [offer_until_done(log, state, limit, message, False) for _ in range(70)]
    assert positions[-1] > term_length
    # Term 0 ends with a PAD frame whose length reaches exactly the end of the term.
    offset = 0
    while True:
        length = int(log[offset : offset + 4].view(np.int32)[0])
        if offset + ((length + 31) & ~31) >= term_length:
            assert int(log[offset + 6 : offset + 8].view(np.int16)[0]) == F.HDR_TYPE_PAD
            assert offset + length == term_length
            break
        offset += (length + 31) & ~31


def _frame(term_offset: int, term_id: int, payload_length: int, session_id=42, stream_id=1001) -> bytearray:
    out = bytearray(align_up(payload_length + 32))
    struct.pack_into("<iBBHiiiiq", out, 0, payload_length + 32, 0, 0xC0, 1, term_offset, session_id, stream_id, term_id, 9)
    out[32:32 + payload_length] = bytes([term_offset & 0xFF]) * payload_length
    return out


def align_up(n: int) -> int:
    return (n + 31) & ~31


def test_offer_block_fills_a_term_then_rotates_and_the_reader_sees_every_frame(make_log):
    term = 64 * 1024
    logbuf = make_log(term_length=term)
    log = logbuf.buffer
    state = new_pub_state(log, True)
    limit = LimitCounter()
    position = 0
    for _ in range(term // 1024):  # 1024-byte blocks of two 512-byte frames fill the term exactly
        block = _frame(position % term, 7, 480) + _frame(position % term + 512, 7, 480)
        position = TA.exclusive_offer_block(log, state, limit.buffer, np.frombuffer(bytes(block), np.uint8), 0, 1024)
        assert position > 0
    assert position == term
    block = _frame(0, 8, 100)
    assert TA.exclusive_offer_block(log, state, limit.buffer, np.frombuffer(bytes(block), np.uint8), 0, 160) == P.ADMIN_ACTION
    assert TA.exclusive_offer_block(log, state, limit.buffer, np.frombuffer(bytes(block), np.uint8), 0, 160) == term + 160
    consumer = Consumer(log, term)
    consumer.drain()
    assert len(consumer.messages) == 2 * term // 1024 + 1
    assert consumer.reserved[0] == 9
