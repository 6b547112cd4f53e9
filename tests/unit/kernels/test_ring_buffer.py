"""Many-to-one ring buffer kernels (spec/transport.md §7) against the reference model and the spec tables."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
from collections import deque
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import AeronError, ConfigurationError, LayoutError
from aeron_numba.kernels import ring_buffer as RB
from aeron_numba.kernels.handlers import MESSAGE_HANDLER_SIG
from aeron_numba.layout import ring_buffer as L
from tests.reference.ring_buffer import ReferenceRingBuffer
from tests.unit.guarded_memory import guarded
from tests.unit.message_support import body_of, collect, collected, new_ctx

CAPACITIES = [64, 128, 512]  # small, so that op sequences wrap many times
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_buffer(capacity: int) -> np.ndarray:
    return np.zeros(capacity + L.TRAILER_LENGTH, dtype=np.uint8)


def trailer_i64(buf: np.ndarray, capacity: int, offset: int) -> int:
    return int(buf[capacity + offset : capacity + offset + 8].view(np.int64)[0])


def set_trailer_i64(buf: np.ndarray, capacity: int, offset: int, value: int) -> None:
    buf[capacity + offset : capacity + offset + 8].view(np.int64)[0] = value


@numba.njit(MESSAGE_HANDLER_SIG)
def record_bounds(ctx, msg_type_id, buffer, offset, length):
    """Garbage tests: remember only the smallest offset and the largest end (never touch the bytes)."""
    ctx[0] += 1
    ctx[1] = min(ctx[1], offset)
    ctx[2] = max(ctx[2], offset + length)
    ctx[3] = min(ctx[3], length)
    ctx[4] = min(ctx[4], msg_type_id)


def read_handler(buf, capacity, limit):
    ctx = new_ctx(capacity)
    n = RB.read(buf, capacity, collect, ctx, limit)
    assert n == ctx[0] or n < 0
    return n, collected(ctx)


def read_batch(buf, capacity, limit):
    descriptors = np.full((limit, RB.DESCRIPTOR_FIELDS), -99, dtype=np.int64)
    count, bytes_read = RB.read_descriptors(buf, capacity, descriptors, limit)
    if count < 0:
        return count, []
    got = [(int(t), bytes(buf[o : o + n])) for o, n, t in descriptors[:count].tolist()]
    assert RB.consume(buf, capacity, bytes_read) == 0
    return count, got


# ----------------------------------------------------------------------------------------------- layout pins


def test_trailer_offsets_match_spec_table():
    # §7.1: each field alone in its own 128-byte block; the trailer is 768 bytes.
    assert (L.TAIL_POSITION_OFFSET, L.HEAD_CACHE_POSITION_OFFSET, L.HEAD_POSITION_OFFSET) == (128, 256, 384)
    assert (L.CORRELATION_COUNTER_OFFSET, L.CONSUMER_HEARTBEAT_OFFSET, L.TRAILER_LENGTH) == (512, 640, 768)
    # §7.2 record header.
    assert (L.RECORD_LENGTH_OFFSET, L.RECORD_TYPE_OFFSET, L.RECORD_HEADER_LENGTH) == (0, 4, 8)
    assert (L.RECORD_ALIGNMENT, L.PADDING_MSG_TYPE_ID) == (8, -1)
    assert L.max_msg_length(1024) == 128


def test_status_codes_are_distinct_and_negative():
    codes = [
        L.INSUFFICIENT_CAPACITY, L.INVALID_MSG_TYPE_ID, L.MSG_TOO_LONG, L.INVALID_LENGTH,
        L.INVALID_INDEX, L.CLAIM_NOT_ACTIVE, L.CORRUPT_RECORD, L.INVALID_CAPACITY,
    ]
    assert len(set(codes)) == len(codes) and all(c < 0 for c in codes)


def test_record_and_trailer_bytes_are_pinned():
    cap = 1024
    buf = new_buffer(cap)
    assert RB.write(buf, cap, 7, np.frombuffer(b"abc", np.uint8), 0, 3) == 1
    assert struct.unpack_from("<ii", buf, 0) == (11, 7)  # length includes the header, not aligned
    assert bytes(buf[8:11]) == b"abc"
    assert trailer_i64(buf, cap, 128) == 16  # tail advanced by the aligned record
    assert RB.next_correlation_id(buf, cap) == 0 and RB.next_correlation_id(buf, cap) == 1
    assert trailer_i64(buf, cap, 512) == 2
    RB.set_consumer_heartbeat_time(buf, cap, 123456789)
    assert trailer_i64(buf, cap, 640) == 123456789 == RB.consumer_heartbeat_time(buf, cap)
    assert read_batch(buf, cap, 10) == (1, [(7, b"abc")])
    assert trailer_i64(buf, cap, 384) == 16 and not buf[:16].any()  # consumed bytes zeroed


def test_padding_record_at_wrap_is_pinned():
    cap = 128
    buf = new_buffer(cap)
    for _ in range(5):  # 16-byte records: tail 80
        assert RB.write(buf, cap, 1, np.zeros(8, np.uint8), 0, 8) == 1
    assert read_batch(buf, cap, 10)[0] == 5  # head 80
    assert RB.write(buf, cap, 2, np.ones(8, np.uint8), 0, 8) == 1  # 16 bytes at 80
    assert RB.write(buf, cap, 3, np.ones(16, np.uint8), 0, 16) == 1  # 24 bytes at 96
    # 24 bytes with 8 left before the end: a padding record fills them and the record goes at 0.
    assert RB.write(buf, cap, 4, np.full(16, 2, np.uint8), 0, 16) == 1
    assert struct.unpack_from("<ii", buf, 120) == (8, -1)
    assert struct.unpack_from("<ii", buf, 0) == (24, 4)
    assert trailer_i64(buf, cap, L.TAIL_POSITION_OFFSET) == 120 + 8 + 24
    assert trailer_i64(buf, cap, L.HEAD_CACHE_POSITION_OFFSET) == 80  # refreshed to check the start
    # A read stops at the end of the buffer (the padding is consumed with it), the next starts at 0.
    assert read_batch(buf, cap, 10) == (2, [(2, bytes([1]) * 8), (3, bytes([1]) * 16)])
    assert RB.consumer_position(buf, cap) == 128
    assert read_handler(buf, cap, 10) == (1, [(4, bytes([2]) * 16)])
    assert not buf[:cap].any()


def test_capacity_checks():
    with pytest.raises(LayoutError, match="capacity=1000"):
        RB.ManyToOneRingBuffer(np.zeros(1000 + 768, np.uint8))
    buf = new_buffer(1024)
    src = np.zeros(8, np.uint8)
    assert RB.write(buf, 1000, 1, src, 0, 8) == L.INVALID_CAPACITY
    assert RB.write(buf, 2048, 1, src, 0, 8) == L.INVALID_CAPACITY  # larger than the array holds
    assert RB.read(buf, 2048, collect, new_ctx(64), 10) == L.INVALID_CAPACITY
    assert RB.unblock(buf, 4) == L.INVALID_CAPACITY


# ----------------------------------------------------------------------------------------------- producers


def test_argument_errors_return_codes_and_wrapper_raises():
    cap = 1024
    buf = new_buffer(cap)
    src = np.zeros(200, np.uint8)
    assert RB.write(buf, cap, 0, src, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert RB.write(buf, cap, -1, src, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert RB.write(buf, cap, 2**31, src, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert RB.write(buf, cap, 1, src, 0, 129) == L.MSG_TOO_LONG
    assert RB.write(buf, cap, 1, src, 0, -1) == L.INVALID_LENGTH
    assert RB.write(buf, cap, 1, src, 150, 60) == L.INVALID_LENGTH  # past the end of src
    assert RB.write(buf, cap, 1, src, -1, 5) == L.INVALID_LENGTH
    assert RB.try_claim(buf, cap, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert RB.try_claim(buf, cap, 1, 129) == L.MSG_TOO_LONG
    assert RB.producer_position(buf, cap) == 0  # nothing was claimed

    rb = RB.ManyToOneRingBuffer(buf)
    with pytest.raises(ConfigurationError, match="length=2000 > max_msg_length=128"):
        rb.write(1, bytes(2000))
    with pytest.raises(ConfigurationError, match="msg_type_id=0"):
        rb.write(0, b"x")
    with pytest.raises(ConfigurationError, match="src_offset=3"):
        rb.write(1, b"abcd", 3, 2)
    with pytest.raises(ConfigurationError, match="length=129 > max_msg_length=128"):
        rb.try_claim(1, 129)


def test_max_length_and_zero_length_messages():
    cap = 256
    buf = new_buffer(cap)
    src = body_of(3, 32)
    assert RB.write(buf, cap, 9, src, 0, 32) == 1  # max_msg_length = 256 / 8
    assert RB.write(buf, cap, 10, src, 0, 0) == 1
    assert read_handler(buf, cap, 10) == (2, [(9, src.tobytes()), (10, b"")])


def test_full_buffer_reports_insufficient_capacity_until_consumed():
    cap = 256
    buf = new_buffer(cap)
    src = np.zeros(24, np.uint8)
    written = 0
    while RB.write(buf, cap, 1, src, 0, 24) == 1:  # 32-byte records
        written += 1
    assert written == cap // 32
    assert RB.size(buf, cap) == cap
    assert RB.try_claim(buf, cap, 1, 0) == L.INSUFFICIENT_CAPACITY
    assert read_batch(buf, cap, 3)[0] == 3
    assert RB.size(buf, cap) == cap - 96
    assert RB.write(buf, cap, 1, src, 0, 24) == 1  # wraps into the freed space
    assert trailer_i64(buf, cap, L.HEAD_CACHE_POSITION_OFFSET) == 96  # refreshed when space looked short


def test_try_claim_commit_and_abort():
    cap = 1024
    buf = new_buffer(cap)
    index = RB.try_claim(buf, cap, 5, 4)
    assert index == 8
    assert struct.unpack_from("<i", buf, 0)[0] == -12  # negative while being written
    assert read_batch(buf, cap, 10) == (0, [])  # not visible yet
    buf[index : index + 4] = np.frombuffer(b"wxyz", np.uint8)
    assert RB.commit(buf, cap, index) == 0
    assert RB.commit(buf, cap, index) == L.CLAIM_NOT_ACTIVE
    assert RB.abort(buf, cap, index) == L.CLAIM_NOT_ACTIVE
    aborted = RB.try_claim(buf, cap, 6, 100)
    assert RB.abort(buf, cap, aborted) == 0
    assert struct.unpack_from("<ii", buf, aborted - 8) == (108, -1)  # became padding
    assert RB.write(buf, cap, 7, np.frombuffer(b"after", np.uint8), 0, 5) == 1
    assert read_handler(buf, cap, 10) == (2, [(5, b"wxyz"), (7, b"after")])
    for bad in (0, 7, 12, cap + 8, cap + 16, -8):
        assert RB.commit(buf, cap, bad) == L.INVALID_INDEX
        assert RB.abort(buf, cap, bad) == L.INVALID_INDEX

    rb = RB.ManyToOneRingBuffer(buf)
    claimed = rb.try_claim(3, 0)
    rb.commit(claimed)
    with pytest.raises(AeronError, match="already committed or aborted"):
        rb.commit(claimed)
    with pytest.raises(ConfigurationError, match="index=5"):
        rb.abort(5)


def test_message_count_limit_and_contiguous_block():
    cap = 1024
    buf = new_buffer(cap)
    for i in range(5):
        assert RB.write(buf, cap, i + 1, body_of(i, i), 0, i) == 1
    assert read_handler(buf, cap, 2) == (2, [(1, b""), (2, body_of(1, 1).tobytes())])
    assert read_batch(buf, cap, 2) == (2, [(3, body_of(2, 2).tobytes()), (4, body_of(3, 3).tobytes())])
    assert read_handler(buf, cap, 100) == (1, [(5, body_of(4, 4).tobytes())])
    assert RB.size(buf, cap) == 0
    assert RB.producer_position(buf, cap) == RB.consumer_position(buf, cap) == 8 + 4 * 16


def test_read_messages_of_an_empty_buffer_makes_no_kernel_call(monkeypatch):
    """An idle driver reads its empty command buffer every duty cycle: head == tail is answered in Python."""
    rb = RB.ManyToOneRingBuffer(new_buffer(512))
    assert rb.write(4, b"one") and rb.read_messages() == [(4, b"one")]

    def no_kernel(*args):
        raise AssertionError("read_descriptors called on an empty buffer")

    monkeypatch.setattr(RB, "read_descriptors", no_kernel)
    assert rb.read_messages() == []
    monkeypatch.undo()
    assert rb.write(5, b"two") and rb.read_messages() == [(5, b"two")]


def test_wrapper_round_trip():
    buf = new_buffer(512)
    rb = RB.ManyToOneRingBuffer(buf)
    assert rb.capacity == 512 and rb.max_msg_length == 64
    assert rb.write(4, b"hello") and rb.write(5, np.frombuffer(b"world!", np.uint8), 1, 4)
    assert rb.read_messages() == [(4, b"hello"), (5, b"orld")]
    ctx = new_ctx(512)
    assert rb.write(6, b"") and rb.read(collect, ctx) == 1 and collected(ctx) == [(6, b"")]
    rb.set_consumer_heartbeat_time(99)
    assert rb.consumer_heartbeat_time() == 99
    assert rb.next_correlation_id() == 0 and rb.size() == 0
    assert rb.producer_position() == rb.consumer_position() == 40
    written = 0
    while rb.write(1, bytes(64)):
        written += 1
    # 72-byte records from 40 to 472; the next would wrap, but [0, head index 40) is too small for it.
    assert written == 6 and rb.size() == 6 * 72
    assert len(rb.read_messages()) + len(rb.read_messages()) == written


# ----------------------------------------------------------------------------------------------- vs reference


@st.composite
def operations(draw):
    capacity = draw(st.sampled_from(CAPACITIES))
    max_len = capacity // 8
    length = st.one_of(st.just(0), st.just(max_len), st.integers(0, max_len))
    type_id = st.integers(1, 1000)
    op = st.one_of(
        st.tuples(st.just("write"), type_id, length),
        st.tuples(st.just("write"), type_id, length),
        st.tuples(st.just("claim_commit"), type_id, length),
        st.tuples(st.just("claim_abort"), type_id, length),
        st.tuples(st.just("read_handler"), st.integers(1, 6)),
        st.tuples(st.just("read_batch"), st.integers(1, 6)),
        st.tuples(st.just("dead_claim"), type_id, length),
        st.tuples(st.just("dead_hole"), length),
        st.tuples(st.just("unblock")),
        st.tuples(st.just("correlation")),
    )
    return capacity, draw(st.lists(op, min_size=20, max_size=100))


@SETTINGS
@given(operations())
def test_matches_reference_byte_for_byte(case):
    """Every op gives the same result and leaves the same bytes as the model; reads are FIFO of live writes."""
    capacity, ops = case
    buf = new_buffer(capacity)
    ref = ReferenceRingBuffer(capacity)
    live = deque()  # messages written and not yet read, in claim order (dead claims are not in it)
    for seed, op in enumerate(ops):
        kind = op[0]
        if kind == "write":
            _, type_id, length = op
            src = body_of(seed, length)
            status = RB.write(buf, capacity, type_id, src, 0, length)
            assert status == ref.write(type_id, src.tobytes())
            if status == 1:
                live.append((type_id, src.tobytes()))
        elif kind in ("claim_commit", "claim_abort", "dead_claim"):
            _, type_id, length = op
            index = RB.try_claim(buf, capacity, type_id, length)
            assert index == ref.try_claim(type_id, length)
            if index > 0:
                src = body_of(seed, length)
                buf[index : index + length] = src
                ref.buf[index : index + length] = src.tobytes()
                if kind == "claim_commit":
                    assert RB.commit(buf, capacity, index) == 0
                    ref.commit(index)
                    live.append((type_id, src.tobytes()))
                elif kind == "claim_abort":
                    assert RB.abort(buf, capacity, index) == 0
                    ref.abort(index)
        elif kind == "dead_hole":  # claimed by CAS, died before writing the header
            required = (op[1] + 8 + 7) // 8 * 8
            assert RB._claim_capacity(buf, capacity, required) == ref.claim(required)
        elif kind in ("read_handler", "read_batch"):
            limit = op[1]
            n, got = (read_handler if kind == "read_handler" else read_batch)(buf, capacity, limit)
            assert (n, got) == (len(got), ref.read(limit))
            for message in got:
                assert message == live.popleft()
        elif kind == "unblock":
            assert RB.unblock(buf, capacity) == int(ref.unblock())
        elif kind == "correlation":
            assert RB.next_correlation_id(buf, capacity) == ref.next_correlation_id()
        assert bytes(buf) == bytes(ref.buf), f"bytes differ after {op}"
        assert RB.size(buf, capacity) == ref.size()


# ----------------------------------------------------------------------------------------------- dead producers


def test_unblock_dead_producer_that_left_a_negative_length():
    cap = 1024
    buf = new_buffer(cap)
    assert RB.write(buf, cap, 1, body_of(1, 10), 0, 10) == 1
    dead = RB.try_claim(buf, cap, 2, 50)  # the producer dies before commit
    assert RB.write(buf, cap, 3, body_of(3, 20), 0, 20) == 1
    assert RB.unblock(buf, cap) == 0  # head is on a committed record: nothing to do
    assert read_handler(buf, cap, 10) == (1, [(1, body_of(1, 10).tobytes())])
    assert read_handler(buf, cap, 10) == (0, [])  # stuck behind the dead claim
    assert RB.consumer_position(buf, cap) == dead - 8
    assert RB.unblock(buf, cap) == 1
    assert struct.unpack_from("<ii", buf, dead - 8) == (58, -1)
    assert read_handler(buf, cap, 10) == (1, [(3, body_of(3, 20).tobytes())])
    assert RB.unblock(buf, cap) == 0  # empty
    assert RB.size(buf, cap) == 0


def test_unblock_dead_producer_that_never_wrote_its_header():
    cap = 1024
    buf = new_buffer(cap)
    rb = RB.ManyToOneRingBuffer(buf)
    assert RB._claim_capacity(buf, cap, 64) == 0  # tail moved by CAS, then death
    assert rb.unblock() is False  # nothing after the hole yet: cannot tell a hole from a slow producer
    assert rb.write(4, b"next")
    assert rb.read_messages() == []
    assert rb.unblock() is True
    assert struct.unpack_from("<ii", buf, 0) == (64, -1)
    assert rb.read_messages() == [(4, b"next")]


def test_unblock_pads_only_up_to_the_first_non_zero_slot():
    cap = 1024
    buf = new_buffer(cap)
    assert RB._claim_capacity(buf, cap, 64) == 0
    assert RB.write(buf, cap, 4, np.zeros(4, np.uint8), 0, 4) == 1  # at 64
    struct.pack_into("<i", buf, 32, -24)  # inside the hole: a producer that got as far as its header
    assert RB.unblock(buf, cap) == 1
    assert struct.unpack_from("<ii", buf, 0) == (32, -1)  # the hole up to it, not up to the record at 64
    assert read_batch(buf, cap, 10) == (0, [])  # now stuck on the negative length at 32
    assert RB.unblock(buf, cap) == 1
    assert struct.unpack_from("<ii", buf, 32) == (24, -1)
    assert read_batch(buf, cap, 10) == (0, [])  # padding consumed; [56, 64) is a hole again
    assert RB.consumer_position(buf, cap) == 56
    assert RB.unblock(buf, cap) == 1
    assert read_batch(buf, cap, 10) == (1, [(4, bytes(4))])


def test_unblock_rejects_impossible_negative_length():
    cap = 1024
    buf = new_buffer(cap)
    RB.try_claim(buf, cap, 2, 8)
    struct.pack_into("<i", buf, 0, -(2**31))
    assert RB.unblock(buf, cap) == L.CORRUPT_RECORD
    struct.pack_into("<i", buf, 0, -(cap + 8))
    assert RB.unblock(buf, cap) == L.CORRUPT_RECORD
    assert struct.unpack_from("<i", buf, 4)[0] == 2  # nothing was written


# ----------------------------------------------------------------------------------------------- head repair


def test_skip_unreadable_pads_garbage_up_to_the_next_plausible_record():
    cap = 1024
    buf = new_buffer(cap)
    rb = RB.ManyToOneRingBuffer(buf)
    assert rb.write(1, bytes(16)) and rb.write(2, b"next")
    struct.pack_into("<i", buf, 0, 3)  # the first record's length: shorter than a header
    assert rb.read_messages() == L.CORRUPT_RECORD
    assert rb.skip_unreadable_record() == RB.HeadRepair(0, unblocked=False, skipped_length=24)
    assert struct.unpack_from("<ii", buf, 0) == (24, L.PADDING_MSG_TYPE_ID)
    assert rb.read_messages() == [(2, b"next")]
    assert rb.skip_unreadable_record() == RB.HeadRepair(40, skipped_length=0)  # empty: nothing to do
    assert not rb.skip_unreadable_record().repaired


def test_skip_unreadable_stops_before_a_record_being_written_and_at_the_tail():
    cap = 1024
    buf = new_buffer(cap)
    assert RB.write(buf, cap, 1, np.zeros(16, np.uint8), 0, 16) == 1
    struct.pack_into("<i", buf, 0, 0x7000_0000)
    index = RB.try_claim(buf, cap, 2, 8)  # at 24+8: length -16 until committed
    assert RB.skip_unreadable(buf, cap) == 24
    assert RB.consumer_position(buf, cap) == 0 and read_batch(buf, cap, 10) == (0, [])  # waits for the claim
    assert RB.commit(buf, cap, index) == 0
    assert read_batch(buf, cap, 10) == (1, [(2, bytes(8))])
    # Garbage with nothing plausible after it is padded over to the tail, never past it.
    assert RB.write(buf, cap, 3, np.zeros(40, np.uint8), 0, 40) == 1
    struct.pack_into("<ii", buf, 48, -(2**31), 9)
    assert RB.skip_unreadable(buf, cap) == 48
    assert RB.size(buf, cap) == 48 and read_batch(buf, cap, 10) == (0, [])
    assert RB.size(buf, cap) == 0


def test_unblock_or_skip_frees_a_dead_claim_else_pads_over_garbage():
    cap = 1024
    buf = new_buffer(cap)
    rb = RB.ManyToOneRingBuffer(buf)
    rb.try_claim(2, 16)  # dies before commit
    assert rb.write(3, b"after")
    assert rb.unblock_or_skip() == RB.HeadRepair(0, unblocked=True, skipped_length=0)
    assert rb.read_messages() == [(3, b"after")]
    head = rb.consumer_position()
    assert rb.write(5, bytes(16)) and rb.write(4, b"later")
    struct.pack_into("<i", buf, head, -(2**31))  # an impossible "being written" length: not a dead claim
    assert rb.read_messages() == [] and rb.unblock() is False
    repair = rb.unblock_or_skip()
    assert repair == RB.HeadRepair(head, unblocked=False, skipped_length=24) and repair.repaired
    assert rb.read_messages() == [(4, b"later")]


def test_skip_unreadable_refuses_a_bad_capacity_and_a_misaligned_head():
    buf = new_buffer(1024)
    assert RB.skip_unreadable(buf, 1000) == L.INVALID_CAPACITY
    set_trailer_i64(buf, 1024, L.HEAD_POSITION_OFFSET, 4)
    set_trailer_i64(buf, 1024, L.TAIL_POSITION_OFFSET, 64)
    assert RB.skip_unreadable(buf, 1024) == L.CORRUPT_RECORD
    assert not buf[:1024].any()  # nothing was written


# ----------------------------------------------------------------------------------------------- garbage


@pytest.mark.parametrize("at_end, offset, faults", [(True, 1000, True), (False, -1, True), (True, 999, False)])
def test_guard_pages_really_fault(at_end, offset, faults):
    """The garbage tests rely on it: one byte past either guarded end kills the process (and inside does not)."""
    code = (
        "import ctypes; from tests.unit.guarded_memory import guarded; "
        f"view = guarded(1000, {at_end}); view[:] = 1; "
        f"print(ctypes.c_uint8.from_address(view.ctypes.data + {offset}).value)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], capture_output=True)
    expected = -signal.SIGSEGV if faults else 0
    assert result.returncode == expected, result.stderr.decode()[-500:]


def check_every_entry_point_on(buf: np.ndarray, cap: int) -> None:
    snapshot = buf.copy()
    ctx = np.array([0, 2**62, -1, 2**62, 2**62], dtype=np.int64)
    n = RB.read(buf, cap, record_bounds, ctx, 1000)
    assert n == ctx[0] if n >= 0 else n in (L.CORRUPT_RECORD,)
    if ctx[0]:
        assert 8 <= ctx[1] and ctx[2] <= cap and ctx[3] >= 0 and ctx[4] >= 1

    buf[:] = snapshot
    descriptors = np.zeros((64, RB.DESCRIPTOR_FIELDS), np.int64)
    count, bytes_read = RB.read_descriptors(buf, cap, descriptors, 64)
    assert count >= 0 or count == L.CORRUPT_RECORD
    for offset, length, type_id in descriptors[: max(count, 0)].tolist():
        assert 8 <= offset and offset + length <= cap and length >= 0 and type_id >= 1
    if count >= 0:
        assert 0 <= bytes_read <= cap
        assert RB.consume(buf, cap, bytes_read) == 0
    assert RB.consume(buf, cap, cap + 8) in (L.INVALID_LENGTH, L.CORRUPT_RECORD)

    buf[:] = snapshot
    assert RB.unblock(buf, cap) in (0, 1, L.CORRUPT_RECORD)
    buf[:] = snapshot
    assert 0 <= RB.size(buf, cap) <= cap
    buf[:] = snapshot
    status = RB.write(buf, cap, 3, np.zeros(cap // 8, np.uint8), 0, cap // 8)
    assert status in (1, L.INSUFFICIENT_CAPACITY, L.CORRUPT_RECORD)
    buf[:] = snapshot
    index = RB.try_claim(buf, cap, 3, 5)
    assert index in (L.INSUFFICIENT_CAPACITY, L.CORRUPT_RECORD) or 8 <= index <= cap - 5
    if index > 0:
        assert RB.commit(buf, cap, index) == 0


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.sampled_from([64, 1024]),
    seed=st.integers(0, 2**32 - 1),
    at_end=st.booleans(),
    sane_trailer=st.booleans(),
)
def test_garbage_never_leads_outside_the_buffer(capacity, seed, at_end, sane_trailer):
    """Random bytes everywhere (or a sane head/tail over random records): codes, never a fault."""
    rng = np.random.default_rng(seed)
    buf = guarded(capacity + L.TRAILER_LENGTH, at_end)
    buf[:] = rng.integers(0, 256, buf.shape[0], dtype=np.uint8)
    if sane_trailer:
        head = int(rng.integers(0, 1 << 20)) * 8
        set_trailer_i64(buf, capacity, L.HEAD_POSITION_OFFSET, head)
        set_trailer_i64(buf, capacity, L.HEAD_CACHE_POSITION_OFFSET, head)
        set_trailer_i64(buf, capacity, L.TAIL_POSITION_OFFSET, head + int(rng.integers(0, capacity // 8 + 1)) * 8)
        # A plausible record at head with a hostile length.
        head_index = head & (capacity - 1)
        struct.pack_into("<ii", buf, head_index, int(rng.choice([capacity + 1, 2**31 - 1, 5, 9, -7])), 1)
    check_every_entry_point_on(buf, capacity)


@pytest.mark.parametrize(
    "length, type_id",
    [(2**31 - 1, 1), (1025, 1), (1024 - 16 + 1, 1), (3, 1), (7, 1), (16, 0), (16, -5), (1 << 20, -1)],
)
def test_reader_stops_at_a_garbage_record_and_reports_it(length, type_id):
    cap = 1024
    buf = new_buffer(cap)
    assert RB.write(buf, cap, 1, np.zeros(8, np.uint8), 0, 8) == 1  # 16 bytes at 0
    assert RB.write(buf, cap, 2, np.zeros(8, np.uint8), 0, 8) == 1  # 16 bytes at 16: overwritten below
    struct.pack_into("<ii", buf, 16, length, type_id)
    rb = RB.ManyToOneRingBuffer(buf)
    assert rb.read_messages() == [(1, bytes(8))]  # the good record before it is delivered and consumed
    assert rb.read_messages() == L.CORRUPT_RECORD
    assert RB.read(buf, cap, collect, new_ctx(cap), 10) == L.CORRUPT_RECORD
    assert RB.consumer_position(buf, cap) == 16  # head stays on the bad record


def test_reader_rejects_a_record_beyond_the_tail_and_an_unaligned_head():
    cap = 1024
    buf = new_buffer(cap)
    struct.pack_into("<ii", buf, 0, 16, 1)  # looks committed, but no producer ever claimed it
    assert RB.read(buf, cap, collect, new_ctx(cap), 10) == L.CORRUPT_RECORD
    set_trailer_i64(buf, cap, L.TAIL_POSITION_OFFSET, 16)
    assert RB.read(buf, cap, collect, new_ctx(cap), 10) == 1
    set_trailer_i64(buf, cap, L.HEAD_POSITION_OFFSET, 20)
    assert RB.read_descriptors(buf, cap, np.zeros((4, 3), np.int64), 4) == (L.CORRUPT_RECORD, 0)
    assert RB.consume(buf, cap, 8) == L.CORRUPT_RECORD


def test_trailer_problem_passes_live_positions_and_names_impossible_ones():
    """What a client checks before trusting cnc.dat: positions a producer or consumer stores, or garbage."""
    rb = RB.ManyToOneRingBuffer(np.zeros(64 + L.TRAILER_LENGTH, np.uint8))
    for _ in range(20):  # wraps: positions past the capacity are live too
        assert rb.write(1, b"x" * 5)
        assert rb.trailer_problem() is None
        assert len(rb.read_messages()) == 1
    words = rb.buffer[64:].view(np.int64)
    tail, head = L.TAIL_POSITION_OFFSET // 8, L.HEAD_POSITION_OFFSET // 8
    for head_value, tail_value, problem in [(0, 12, "must be non-negative multiples of 8"),
                                            (-8, 0, "must be non-negative multiples of 8"),
                                            (64, 8, "head=64 > tail=8"), (0, 72, "tail=72 - head=0 > capacity=64")]:
        words[head], words[tail] = head_value, tail_value
        assert problem in rb.trailer_problem()
    words[head], words[tail] = 0, 12
    with pytest.raises(LayoutError, match=r"ring buffer is corrupt: .*\(CORRUPT_RECORD\)"):
        rb.write(1, b"x")  # was AeronError("ring buffer status -7")
