"""Processes for the many-to-one ring buffer stress test: producers writing numbered, verifiable messages
and a consumer checking them with a compiled handler.

Message body (little-endian): i32 producer id | u32 FNV-1a checksum of the payload | i64 sequence |
i64 correlation id (from ``next_correlation_id``) | payload bytes ``(producer_id * 31 + seq * 7 + i) & 0xFF``.
msg_type_id = ``MSG_TYPE_BASE + producer id``. The length is a function of (producer id, sequence), so a
checker regenerates the whole expected message from its header fields.

The control file holds int64 slots: a start flag, per-producer status, and the consumer's results.
"""

from __future__ import annotations

import os
import time

import numba
import numpy as np
from numba import types

from aeron_numba.kernels import ring_buffer as RB
from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.kernels.handlers import MESSAGE_HANDLER_SIG, MessageHandler
from aeron_numba.layout import ring_buffer as L
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition
from tests.stress.stress_support import mix32

PRODUCERS = 3
CAPACITY = 16 * 1024
MAX_LENGTH = L.max_msg_length(CAPACITY)
MSG_TYPE_BASE = 100

PRODUCER_ID_OFFSET = 0
CHECKSUM_OFFSET = 4
SEQ_OFFSET = 8
CORRELATION_OFFSET = 16
PAYLOAD_OFFSET = 24
MIN_LENGTH = PAYLOAD_OFFSET

# Control file slots (byte offsets of int64s).
CONTROL_LENGTH = 4096
GO = 0
PRODUCER_STATUS = 64  # + 8 * producer id: 1 = done, < 0 = error code
READY = 128  # + 8 * worker: producers 0..PRODUCERS-1, then the consumer
CONSUMER_READY = READY + 8 * PRODUCERS
CONSUMER_RECEIVED = 256
CONSUMER_ERRORS = 264
CONSUMER_FIRST_ERROR = 272
CONSUMER_DUPLICATE_IDS = 280
CONSUMER_CORRUPT = 288

# Consumer handler context (int64 slots).
CTX_RECEIVED = 0
CTX_ERRORS = 1
CTX_FIRST_ERROR = 2
CTX_DUPLICATE_IDS = 3
CTX_NEXT_SEQ = 4  # + producer id
CTX_IDS = CTX_NEXT_SEQ + PRODUCERS  # + correlation id: 1 once seen

# check_message results
OK = 0
BAD_PRODUCER = 1
BAD_TYPE = 2
BAD_SEQ = 3
BAD_LENGTH = 4
BAD_CHECKSUM = 5
BAD_PAYLOAD = 6


@numba.njit(cache=True)
def message_length(producer_id, seq):
    """Mostly small, sometimes exactly MIN_LENGTH or MAX_LENGTH (the ring buffer's limit)."""
    x = mix32(producer_id, seq)
    pick = x % 32
    if pick == 0:
        return MAX_LENGTH
    if pick == 1:
        return MIN_LENGTH
    return MIN_LENGTH + (x >> 5) % 200


@numba.njit(cache=True)
def payload_checksum(buf, start, end):
    """32-bit FNV-1a (in int64 arithmetic: numba widens uint32 products)."""
    h = np.int64(0x811C9DC5)
    for i in range(start, end):
        h = ((h ^ np.int64(buf[i])) * 0x01000193) & 0xFFFF_FFFF
    return h


@numba.njit(cache=True)
def fill_message(buf, producer_id, seq, correlation_id):
    """Write the message for (producer_id, seq) at ``buf[0:]``; returns its length."""
    length = message_length(producer_id, seq)
    for i in range(PAYLOAD_OFFSET, length):
        buf[i] = (producer_id * 31 + seq * 7 + i) & 0xFF
    buf[PRODUCER_ID_OFFSET : PRODUCER_ID_OFFSET + 4].view(np.int32)[0] = producer_id
    checksum = payload_checksum(buf, PAYLOAD_OFFSET, length)
    buf[CHECKSUM_OFFSET : CHECKSUM_OFFSET + 4].view(np.uint32)[0] = np.uint32(checksum)
    buf[SEQ_OFFSET : SEQ_OFFSET + 8].view(np.int64)[0] = seq
    buf[CORRELATION_OFFSET : CORRELATION_OFFSET + 8].view(np.int64)[0] = correlation_id
    return length


@numba.njit(cache=True)
def _i32(buf, offset):
    return np.int64(buf[offset]) | (np.int64(buf[offset + 1]) << 8) | (np.int64(buf[offset + 2]) << 16) | (
        np.int64(np.int8(buf[offset + 3])) << 24
    )


@numba.njit(cache=True)
def _i64(buf, offset):
    value = np.int64(0)
    for i in range(8):
        value |= np.int64(buf[offset + i]) << (8 * i)
    return value


@numba.njit(cache=True)
def check_message(buf, offset, length, msg_type_id, expected_seq):
    """OK, or what is wrong with the message at ``buf[offset:offset + length]``."""
    if length < MIN_LENGTH:
        return BAD_LENGTH
    producer_id = _i32(buf, offset + PRODUCER_ID_OFFSET)
    if producer_id < 0 or producer_id >= PRODUCERS:
        return BAD_PRODUCER
    if msg_type_id != MSG_TYPE_BASE + producer_id:
        return BAD_TYPE
    seq = _i64(buf, offset + SEQ_OFFSET)
    if seq != expected_seq:
        return BAD_SEQ
    if length != message_length(producer_id, seq):
        return BAD_LENGTH
    checksum = _i32(buf, offset + CHECKSUM_OFFSET) & 0xFFFF_FFFF
    if checksum != payload_checksum(buf, offset + PAYLOAD_OFFSET, offset + length):
        return BAD_CHECKSUM
    for i in range(PAYLOAD_OFFSET, length):
        if buf[offset + i] != (producer_id * 31 + seq * 7 + i) & 0xFF:
            return BAD_PAYLOAD
    return OK


@numba.njit(cache=True)
def produce(rb, capacity, producer_id, seq, end_seq, scratch, pending):
    """Send ``seq..end_seq`` until the buffer is full; returns the next sequence, or a negative status.

    Rotates through the producer paths: ``write``; ``try_claim`` + copy + ``commit``; an aborted claim
    (padding the consumer must skip) followed by ``write``. ``pending[0]`` keeps the correlation id of a
    message that could not be sent yet, so every id is used by exactly one message.
    """
    while seq < end_seq:
        if pending[0] < 0:
            pending[0] = RB.next_correlation_id(rb, capacity)
        length = fill_message(scratch, producer_id, seq, pending[0])
        type_id = MSG_TYPE_BASE + producer_id
        path = seq % 3
        if path == 1:
            index = RB.try_claim(rb, capacity, type_id, length)
            if index == L.INSUFFICIENT_CAPACITY:
                return seq
            if index < 0:
                return index
            rb[index : index + length] = scratch[:length]
            status = RB.commit(rb, capacity, index)
            if status != 0:
                return status
        else:
            if path == 2:
                index = RB.try_claim(rb, capacity, type_id, seq % 64)
                if index > 0:
                    status = RB.abort(rb, capacity, index)
                    if status != 0:
                        return status
            status = RB.write(rb, capacity, type_id, scratch, 0, length)
            if status == L.INSUFFICIENT_CAPACITY:
                return seq
            if status != 1:
                return status
        pending[0] = -1
        seq += 1
    return seq


def warm_up() -> None:
    """Load (or compile) every function a worker runs, with the worker's argument types, on a private buffer.

    Workers call it before announcing READY, so the start signal finds every process already running
    compiled code.
    """
    rb = np.zeros(CAPACITY + L.TRAILER_LENGTH, np.uint8)
    scratch = np.zeros(MAX_LENGTH, np.uint8)
    assert produce(rb, CAPACITY, 0, 0, 3, scratch, np.full(1, -1, np.int64)) == 3
    ctx = np.zeros(CTX_IDS + 3, np.int64)
    assert drain(rb, CAPACITY, verify_handler, ctx, 3, 10) == 0 and ctx[CTX_RECEIVED] == 3
    RB.set_consumer_heartbeat_time(rb, CAPACITY, 1)
    put_int64_release(rb, CAPACITY, get_int64_acquire(rb, CAPACITY))


IDLE_S = 50e-6


def idle() -> None:
    """Back off between polls (an idle strategy, not a wait for a condition)."""
    time.sleep(IDLE_S)


def await_go(control: np.ndarray, deadline: float) -> None:
    await_condition(lambda: get_int64_acquire(control, GO) != 0, max(0.0, deadline - time.monotonic()),
                    "the start signal", poll_interval_s=IDLE_S, max_poll_interval_s=IDLE_S)


def producer(rb_path: str, control_path: str, producer_id: int, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with MappedFile.open(rb_path) as rb_file, MappedFile.open(control_path) as control_file:
        rb, control = rb_file.buffer, control_file.buffer
        capacity = L.check_capacity(rb.shape[0])
        scratch = np.zeros(MAX_LENGTH, np.uint8)
        pending = np.full(1, -1, np.int64)
        warm_up()
        put_int64_release(control, READY + 8 * producer_id, 1)
        await_go(control, deadline)
        seq = 0
        while seq < count:
            result = produce(rb, capacity, producer_id, seq, count, scratch, pending)
            if result < 0:
                put_int64_release(control, PRODUCER_STATUS + 8 * producer_id, result)
                os._exit(3)
            if result == seq:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"producer {producer_id} stuck at seq {seq}")
                idle()
            seq = result
        put_int64_release(control, PRODUCER_STATUS + 8 * producer_id, 1)
        del rb, control


@numba.njit(MESSAGE_HANDLER_SIG, cache=True)
def verify_handler(ctx, msg_type_id, buffer, offset, length):
    """Checks each message in place: per-producer order, content, and correlation ids used once."""
    producer_id = _i32(buffer, offset + PRODUCER_ID_OFFSET) if length >= MIN_LENGTH else -1
    expected = ctx[CTX_NEXT_SEQ + producer_id] if 0 <= producer_id < PRODUCERS else -1
    result = check_message(buffer, offset, length, msg_type_id, expected)
    if result != OK:
        if ctx[CTX_ERRORS] == 0:
            ctx[CTX_FIRST_ERROR] = result * 1_000_000_000 + max(producer_id, 0) * 100_000_000 + max(expected, 0)
        ctx[CTX_ERRORS] += 1
        return
    correlation_id = _i64(buffer, offset + CORRELATION_OFFSET)
    slot = CTX_IDS + correlation_id
    if correlation_id < 0 or slot >= ctx.shape[0] or ctx[slot] != 0:
        ctx[CTX_DUPLICATE_IDS] += 1
    else:
        ctx[slot] = 1
    ctx[CTX_NEXT_SEQ + producer_id] += 1
    ctx[CTX_RECEIVED] += 1


# Explicit signature with the handler as an argument: a compiled function that named ``verify_handler``
# as a global first-class function could not be cached (numba: "uses dynamic globals").
DRAIN_SIG = types.int64(types.uint8[::1], types.int64, MessageHandler, types.int64[::1], types.int64, types.int64)


@numba.njit(DRAIN_SIG, cache=True)
def drain(rb, capacity, handler, ctx, total, max_empty_polls):
    """Read in a spin loop until ``max_empty_polls`` reads in a row find nothing, ``total`` messages were
    seen, or at the first bad message; returns the number of reads that reported a corrupt record.

    Spinning keeps the reader on the producers' heels, so a record published before its body was complete
    would be caught.
    """
    empty = 0
    corrupt = 0
    while empty < max_empty_polls and ctx[CTX_RECEIVED] < total and ctx[CTX_ERRORS] == 0:
        n = RB.read(rb, capacity, handler, ctx, 256)
        if n > 0:
            empty = 0
        else:
            empty += 1
            if n < 0:
                corrupt += 1
    return corrupt


def consumer(rb_path: str, control_path: str, total: int, timeout_s: float) -> None:
    """Read with the compiled handler until ``total`` messages arrived (or one was bad); publish the results."""
    deadline = time.monotonic() + timeout_s
    with MappedFile.open(rb_path) as rb_file, MappedFile.open(control_path) as control_file:
        rb, control = rb_file.buffer, control_file.buffer
        capacity = L.check_capacity(rb.shape[0])
        ctx = np.zeros(CTX_IDS + total, np.int64)
        corrupt = 0
        warm_up()
        put_int64_release(control, CONSUMER_READY, 1)
        await_go(control, deadline)
        while ctx[CTX_RECEIVED] < total and ctx[CTX_ERRORS] == 0 and time.monotonic() < deadline:
            corrupt += drain(rb, capacity, verify_handler, ctx, total, 100_000)
            RB.set_consumer_heartbeat_time(rb, capacity, int(time.time() * 1000))
            idle()
        for slot, value in (
            (CONSUMER_ERRORS, ctx[CTX_ERRORS]),
            (CONSUMER_FIRST_ERROR, ctx[CTX_FIRST_ERROR]),
            (CONSUMER_DUPLICATE_IDS, ctx[CTX_DUPLICATE_IDS]),
            (CONSUMER_CORRUPT, corrupt),
            (CONSUMER_RECEIVED, ctx[CTX_RECEIVED]),
        ):
            put_int64_release(control, slot, int(value))
        del rb, control
