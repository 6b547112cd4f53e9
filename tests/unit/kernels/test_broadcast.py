"""Broadcast buffer kernels (spec/transport.md §8) against the reference model and the spec tables."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import broadcast as BC
from aeron_numba.layout import broadcast as L
from tests.reference.broadcast import ReferenceBroadcast, ReferenceReceiver
from tests.unit.guarded_memory import guarded
from tests.unit.message_support import body_of, collect, collected, new_ctx

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_buffer(capacity: int) -> np.ndarray:
    return np.zeros(capacity + L.TRAILER_LENGTH, dtype=np.uint8)


def counter(buf: np.ndarray, capacity: int, offset: int) -> int:
    return int(buf[capacity + offset : capacity + offset + 8].view(np.int64)[0])


def set_counter(buf: np.ndarray, capacity: int, offset: int, value: int) -> None:
    buf[capacity + offset : capacity + offset + 8].view(np.int64)[0] = value


def send(buf, capacity, type_id, body: bytes) -> int:
    return BC.transmit(buf, capacity, type_id, np.frombuffer(body, np.uint8), 0, len(body))


def joined(buf, capacity) -> np.ndarray:
    state = BC.new_receiver_state()
    assert BC.receiver_init(buf, capacity, state) == 0
    return state


def receive_one(buf, capacity, state, scratch_length=None):
    """``(type, body)`` or the code, through ``receive_copy``."""
    scratch = np.zeros(capacity // 8 if scratch_length is None else scratch_length, np.uint8)
    status = BC.receive_copy(buf, capacity, state, scratch)
    if status <= 0:
        return status
    length = int(state[BC.RECEIVER_RECORD_LENGTH]) - 8
    return status, scratch[:length].tobytes()


def receive_batch(buf, capacity, state, scratch_length, limit):
    scratch = np.zeros(scratch_length, np.uint8)
    descriptors = np.full((limit, BC.DESCRIPTOR_FIELDS), -99, np.int64)
    count = BC.receive_batch(buf, capacity, state, scratch, descriptors, limit)
    if count <= 0:
        return count
    return [(int(t), scratch[o : o + n].tobytes()) for o, n, t in descriptors[:count].tolist()]


def receive_handler(buf, capacity, state, scratch_length, limit):
    scratch = np.zeros(scratch_length, np.uint8)
    ctx = new_ctx(capacity)
    count = BC.receive(buf, capacity, state, scratch, collect, ctx, limit)
    if count <= 0:
        assert ctx[0] == 0
        return count
    assert count == ctx[0]
    return collected(ctx)


# ----------------------------------------------------------------------------------------------- layout pins


def test_trailer_and_record_layout_match_spec():
    assert (L.TAIL_INTENT_COUNTER_OFFSET, L.TAIL_COUNTER_OFFSET, L.LATEST_COUNTER_OFFSET) == (0, 8, 16)
    assert L.TRAILER_LENGTH == 128
    assert (L.RECORD_LENGTH_OFFSET, L.RECORD_TYPE_OFFSET, L.RECORD_HEADER_LENGTH) == (0, 4, 8)
    assert (L.RECORD_ALIGNMENT, L.PADDING_MSG_TYPE_ID) == (8, -1)
    assert L.max_msg_length(4096) == 512
    codes = [L.INVALID_MSG_TYPE_ID, L.MSG_TOO_LONG, L.INVALID_LENGTH, L.LAPPED, L.SCRATCH_TOO_SMALL,
             L.CORRUPT_RECORD, L.INVALID_CAPACITY, L.CORRUPT_TAIL]
    assert len(set(codes)) == len(codes) and all(c < 0 for c in codes) and L.NOTHING_RECEIVED == 0


def test_record_and_counters_are_pinned():
    cap = 1024
    buf = new_buffer(cap)
    assert send(buf, cap, 7, b"abc") == 0
    assert struct.unpack_from("<ii", buf, 0) == (11, 7) and bytes(buf[8:11]) == b"abc"
    assert (counter(buf, cap, 0), counter(buf, cap, 8), counter(buf, cap, 16)) == (16, 16, 0)
    assert send(buf, cap, 8, b"") == 0
    assert struct.unpack_from("<ii", buf, 16) == (8, 8)
    assert (counter(buf, cap, 0), counter(buf, cap, 8), counter(buf, cap, 16)) == (24, 24, 16)


def test_padding_at_wrap_is_pinned():
    cap = 128
    buf = new_buffer(cap)
    state = None
    for i in range(6):  # 6 x 16 bytes: tail 96
        assert send(buf, cap, 1, bytes([i]) * 8) == 0
        if i == 4:
            state = joined(buf, cap)  # latest = record 4 at 64
    assert send(buf, cap, 2, bytes([9]) * 16) == 0  # 24 bytes, 32 left: fits at 96, tail 120
    assert send(buf, cap, 3, bytes([7]) * 16) == 0  # 8 left: padding at 120, the record at 0
    assert struct.unpack_from("<ii", buf, 120) == (8, -1)
    assert struct.unpack_from("<ii", buf, 0) == (24, 3)
    assert (counter(buf, cap, 0), counter(buf, cap, 8), counter(buf, cap, 16)) == (152, 152, 128)
    got = [receive_one(buf, cap, state) for _ in range(5)]
    assert got == [(1, bytes([4]) * 8), (1, bytes([5]) * 8), (2, bytes([9]) * 16), (3, bytes([7]) * 16), 0]
    assert state[BC.RECEIVER_CURSOR] == 128 and state[BC.RECEIVER_NEXT_RECORD] == 152


def test_argument_errors_return_codes_and_wrapper_raises():
    cap = 1024
    buf = new_buffer(cap)
    src = np.zeros(200, np.uint8)
    assert BC.transmit(buf, cap, 0, src, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert BC.transmit(buf, cap, 2**31, src, 0, 1) == L.INVALID_MSG_TYPE_ID
    assert BC.transmit(buf, cap, 1, src, 0, 129) == L.MSG_TOO_LONG
    assert BC.transmit(buf, cap, 1, src, 0, -1) == L.INVALID_LENGTH
    assert BC.transmit(buf, cap, 1, src, 190, 20) == L.INVALID_LENGTH
    assert BC.transmit(buf, 2048, 1, src, 0, 1) == L.INVALID_CAPACITY
    assert BC.transmit(buf, 1000, 1, src, 0, 1) == L.INVALID_CAPACITY
    assert counter(buf, cap, 8) == 0
    state = joined(buf, cap)
    assert BC.receive_copy(buf, 2048, state, src) == L.INVALID_CAPACITY
    assert BC.receive_copy(buf, cap, np.zeros(3, np.int64), src) == L.INVALID_LENGTH
    assert not BC.receive_next(buf, 2048, state) and not BC.validate(buf, 2048, state)
    assert BC.receiver_init(buf, cap, np.zeros(2, np.int64)) == L.INVALID_LENGTH

    with pytest.raises(LayoutError, match="capacity=1000"):
        BC.BroadcastTransmitter(np.zeros(1000 + 128, np.uint8))
    tx = BC.BroadcastTransmitter(buf)
    with pytest.raises(ConfigurationError, match="length=2000 > max_msg_length=128"):
        tx.transmit(1, bytes(2000))
    with pytest.raises(ConfigurationError, match="msg_type_id=-1"):
        tx.transmit(-1, b"x")
    with pytest.raises(ConfigurationError, match="src_offset=5"):
        tx.transmit(1, b"abc", 5, 1)


def test_new_receiver_starts_at_latest_and_sees_no_history():
    cap = 1024
    buf = new_buffer(cap)
    early = joined(buf, cap)
    assert receive_one(buf, cap, early) == 0
    for i in range(3):
        send(buf, cap, 10 + i, bytes([i]) * i)
    late = joined(buf, cap)
    assert receive_one(buf, cap, late) == (12, bytes([2, 2]))  # the latest record, nothing before it
    assert receive_one(buf, cap, late) == 0
    assert [receive_one(buf, cap, early) for _ in range(4)] == [(10, b""), (11, b"\x01"), (12, b"\x02\x02"), 0]


def test_lapped_receiver_counts_the_lap_and_recovers():
    cap = 256
    buf = new_buffer(cap)
    rx = BC.CopyBroadcastReceiver(BC.BroadcastReceiver(buf))
    tx = BC.BroadcastTransmitter(buf)
    tx.transmit(1, b"first")
    assert rx.receive_messages() == [(1, b"first")]
    for i in range(40):  # 40 x 24 bytes: several capacities past the receiver
        tx.transmit(2, i.to_bytes(4, "little") * 4)
    assert rx.receive_messages() == L.LAPPED  # Agrona's "unable to keep up": the latest record is skipped
    assert rx.receiver.lapped_count() == 1
    assert rx.receive_messages() == []  # nothing new
    tx.transmit(3, b"after")
    assert rx.receive_messages() == [(3, b"after")]
    assert rx.receiver.lapped_count() == 1


def test_validate_fails_once_the_record_is_being_overwritten():
    cap = 256
    buf = new_buffer(cap)
    rx = BC.BroadcastReceiver(buf)
    send(buf, cap, 1, b"x" * 16)
    assert rx.receive_next() and rx.validate() and rx.type_id() == 1 and rx.length() == 16
    assert bytes(buf[rx.offset() : rx.offset() + rx.length()]) == b"x" * 16
    while counter(buf, cap, L.TAIL_INTENT_COUNTER_OFFSET) < cap:
        assert rx.validate()
        send(buf, cap, 2, b"y" * 16)
    assert not rx.validate()  # the transmitter intends to write over the record's bytes


def test_scratch_too_small_skips_one_record_but_a_batch_leaves_it_for_the_next_call():
    cap = 1024
    buf = new_buffer(cap)
    state = joined(buf, cap)
    send(buf, cap, 1, b"a" * 40)
    send(buf, cap, 2, b"b" * 10)
    assert receive_one(buf, cap, state, scratch_length=20) == L.SCRATCH_TOO_SMALL  # Agrona throws, skips it
    assert receive_one(buf, cap, state, scratch_length=20) == (2, b"b" * 10)
    send(buf, cap, 3, b"c" * 30)
    send(buf, cap, 4, b"d" * 30)
    assert receive_batch(buf, cap, state, 40, 10) == [(3, b"c" * 30)]  # no room for the second
    assert receive_batch(buf, cap, state, 40, 10) == [(4, b"d" * 30)]
    send(buf, cap, 5, b"e" * 30)
    send(buf, cap, 6, b"f" * 30)
    assert receive_handler(buf, cap, state, 30, 10) == [(5, b"e" * 30), (6, b"f" * 30)]  # scratch reused


def test_wrapper_round_trip_with_compiled_handler():
    buf = new_buffer(512)
    tx = BC.BroadcastTransmitter(buf)
    rx = BC.CopyBroadcastReceiver(BC.BroadcastReceiver(buf), scratch_length=64)
    tx.transmit(5, b"hello")
    tx.transmit(6, np.frombuffer(b"world!", np.uint8), 1, 3)
    ctx = new_ctx(512)
    assert rx.receive(collect, ctx, 10) == 2 and collected(ctx) == [(5, b"hello"), (6, b"orl")]
    assert rx.receive(collect, ctx, 10) == L.NOTHING_RECEIVED


# ----------------------------------------------------------------------------------------------- vs reference


@st.composite
def operations(draw):
    capacity = draw(st.sampled_from([64, 128, 512]))
    max_len = capacity // 8
    length = st.one_of(st.just(0), st.just(max_len), st.integers(0, max_len))
    receiver = st.integers(0, 2)
    scratch = st.sampled_from([max_len, max_len // 2, 3 * max_len])
    op = st.one_of(
        st.tuples(st.just("transmit"), st.integers(1, 1000), length),
        st.tuples(st.just("transmit"), st.integers(1, 1000), length),
        st.tuples(st.just("transmit_burst"), st.integers(1, 30)),
        st.tuples(st.just("receive_copy"), receiver, scratch),
        st.tuples(st.just("receive_batch"), receiver, scratch, st.integers(1, 8)),
        st.tuples(st.just("receive_handler"), receiver, scratch, st.integers(1, 8)),
        st.tuples(st.just("join"), receiver),
    )
    return capacity, draw(st.lists(op, min_size=20, max_size=100))


@SETTINGS
@given(operations())
def test_matches_reference(case):
    """Same bytes after every transmit; every receive path gives the model's messages, codes and laps."""
    capacity, ops = case
    buf = new_buffer(capacity)
    ref = ReferenceBroadcast(capacity)
    states = [joined(buf, capacity) for _ in range(3)]
    models = [ReferenceReceiver(ref) for _ in range(3)]
    for seed, op in enumerate(ops):
        kind = op[0]
        if kind in ("transmit", "transmit_burst"):
            sends = [(op[1], op[2])] if kind == "transmit" else [(1 + k, (seed * 7 + k) % (capacity // 8 + 1))
                                                              for k in range(op[1])]
            for type_id, length in sends:
                body = body_of(seed + type_id, length)
                assert BC.transmit(buf, capacity, type_id, body, 0, length) == 0
                ref.transmit(type_id, body.tobytes())
            assert bytes(buf) == bytes(ref.buf), f"bytes differ after {op}"
        elif kind == "join":
            states[op[1]] = joined(buf, capacity)
            models[op[1]] = ReferenceReceiver(ref)
        else:
            r, scratch = op[1], op[2]
            state, model = states[r], models[r]
            if kind == "receive_copy":
                assert receive_one(buf, capacity, state, scratch) == model.receive(scratch)
            elif kind == "receive_batch":
                got = receive_batch(buf, capacity, state, scratch, op[3])
                assert got == model.receive_batch(scratch, op[3])
            else:
                got = receive_handler(buf, capacity, state, scratch, op[3])
                assert got == model.receive_batch(scratch, op[3], whole_scratch_each=True)
            assert state[BC.RECEIVER_LAPPED_COUNT] == model.lapped_count
            assert state[BC.RECEIVER_NEXT_RECORD] == model.next_record
            assert state[BC.RECEIVER_CORRUPT_COUNT] == 0


@SETTINGS
@given(st.lists(st.integers(0, 60), min_size=50, max_size=300), st.integers(1, 8))
def test_delivered_messages_are_an_ordered_subsequence_of_those_sent(lengths, receive_every):
    """Model-free check: whatever the laps, a receiver gets intact sent messages in order, none twice."""
    cap = 512
    buf = new_buffer(cap)
    state = joined(buf, cap)
    sent, got = [], []
    for seq, length in enumerate(lengths):
        body = seq.to_bytes(4, "little") + body_of(seq, length).tobytes()
        assert send(buf, cap, 1 + seq % 50, body) == 0
        sent.append((1 + seq % 50, body))
        if seq % receive_every == 0:
            result = receive_batch(buf, cap, state, 200, 3)
            if isinstance(result, list):
                got += result
    while isinstance(result := receive_batch(buf, cap, state, 200, 8), list) or result == L.LAPPED:
        got += result if isinstance(result, list) else []
    seqs = [int.from_bytes(body[:4], "little") for _, body in got]
    assert seqs == sorted(set(seqs))
    assert all(sent[s] == message for s, message in zip(seqs, got))
    if state[BC.RECEIVER_LAPPED_COUNT] == 0:
        assert seqs == list(range(len(lengths)))  # never lapped: nothing missed
    assert (seqs and seqs[-1] == len(lengths) - 1) or state[BC.RECEIVER_LAPPED_COUNT] > 0


# ----------------------------------------------------------------------------------------------- garbage


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.sampled_from([64, 1024]),
    seed=st.integers(0, 2**32 - 1),
    at_end=st.booleans(),
    sane_counters=st.booleans(),
)
def test_garbage_never_leads_outside_the_buffer(capacity, seed, at_end, sane_counters):
    rng = np.random.default_rng(seed)
    buf = guarded(capacity + L.TRAILER_LENGTH, at_end)
    buf[:] = rng.integers(0, 256, buf.shape[0], dtype=np.uint8)
    if sane_counters:
        tail = int(rng.integers(1, 1 << 20)) * 8
        set_counter(buf, capacity, L.TAIL_COUNTER_OFFSET, tail)
        set_counter(buf, capacity, L.TAIL_INTENT_COUNTER_OFFSET, tail)
        set_counter(buf, capacity, L.LATEST_COUNTER_OFFSET, tail - int(rng.integers(1, capacity // 8 + 1)) * 8)
    max_len = capacity // 8
    for path in ("copy", "batch", "handler"):
        state = BC.new_receiver_state()
        assert BC.receiver_init(buf, capacity, state) == 0
        state[BC.RECEIVER_NEXT_RECORD] = int(rng.integers(-(1 << 20), 1 << 20)) * 8 if path == "copy" else state[1]
        for _ in range(20):
            if path == "copy":
                result = receive_one(buf, capacity, state, max_len)
            elif path == "batch":
                result = receive_batch(buf, capacity, state, 2 * max_len, 4)
            else:
                result = receive_handler(buf, capacity, state, max_len, 4)
            if isinstance(result, int):
                assert result in (0, L.LAPPED, L.SCRATCH_TOO_SMALL, L.CORRUPT_RECORD)
            else:
                messages = [result] if path == "copy" else result
                assert all(t >= 1 and len(b) <= 2 * max_len for t, b in messages)
    status = BC.transmit(buf, capacity, 1, np.zeros(max_len, np.uint8), 0, max_len)
    assert status in (0, L.CORRUPT_TAIL)


@pytest.mark.parametrize("length", [2**31 - 1, 1025, 1024 - 16 + 1, 7, 0, -8])
def test_receiver_skips_a_garbage_record_that_was_not_overwritten(length):
    cap = 1024
    buf = new_buffer(cap)
    rx = BC.CopyBroadcastReceiver(BC.BroadcastReceiver(buf))
    tx = BC.BroadcastTransmitter(buf)
    tx.transmit(1, b"good")
    tx.transmit(2, b"soon bad")
    struct.pack_into("<i", buf, 16, length)
    assert rx.receive_messages(1) == [(1, b"good")]
    assert rx.receive_messages(1) == L.CORRUPT_RECORD
    assert rx.receiver.corrupt_count() == 1 and rx.receiver.lapped_count() == 0
    tx.transmit(3, b"later")
    assert rx.receive_messages() == [(3, b"later")]


def test_garbage_type_in_a_valid_record_is_reported():
    cap = 1024
    buf = new_buffer(cap)
    state = joined(buf, cap)
    send(buf, cap, 1, b"x")
    struct.pack_into("<i", buf, 4, 0)
    assert receive_one(buf, cap, state) == L.CORRUPT_RECORD
    assert state[BC.RECEIVER_CORRUPT_COUNT] == 1


def test_transmit_refuses_a_corrupt_tail():
    cap = 1024
    buf = new_buffer(cap)
    set_counter(buf, cap, L.TAIL_COUNTER_OFFSET, 13)
    assert send(buf, cap, 1, b"x") == L.CORRUPT_TAIL
    set_counter(buf, cap, L.TAIL_COUNTER_OFFSET, -16)
    assert send(buf, cap, 1, b"x") == L.CORRUPT_TAIL
    assert not buf[:cap].any()
