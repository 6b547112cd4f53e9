"""Processes for the broadcast stress test: one fast transmitter, receivers of which some are slow.

Message body (little-endian): i64 sequence | i32 length | u32 FNV-1a checksum of the payload | payload
bytes ``(seq * 13 + i) & 0xFF``. msg_type_id = ``DATA_TYPE`` or ``END_TYPE``. The length is a function of
the sequence, so a receiver regenerates and compares the whole message from its header.

Protocol over the control file (int64 slots): each receiver sets READY after joining; the transmitter
waits for all, sends ``DATA_MESSAGES`` in paced bursts, then sends END messages (still numbered) until
every receiver has acknowledged one. So a receiver lapped at the very end still receives a later END.
Each receiver publishes its results in its own block of slots.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from aeron_numba.kernels import broadcast as BC
from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.kernels.handlers import MESSAGE_HANDLER_SIG
from aeron_numba.layout import broadcast as L
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition
from tests.stress.stress_support import mix32

CAPACITY = 4096
MAX_LENGTH = L.max_msg_length(CAPACITY)
DATA_TYPE = 1
END_TYPE = 2
DATA_MESSAGES = 150_000
BURST = 32

SEQ_OFFSET = 0
LENGTH_OFFSET = 8
CHECKSUM_OFFSET = 12
PAYLOAD_OFFSET = 16
MIN_LENGTH = PAYLOAD_OFFSET

# Control file: receiver r uses the 128-byte block at RECEIVER_BLOCK * (r + 1).
CONTROL_LENGTH = 4096
TRANSMITTER_SENT = 0
RECEIVER_BLOCK = 128
READY = 0
ACK = 8
DELIVERED = 16
ERRORS = 24
LAPS = 32
DELIVERED_AFTER_FIRST_LAP = 40
LAST_SEQ = 48
CORRUPT = 56
RECOVERIES = 64  # laps after which the receiver delivered a data message again

# Fast receiver handler context.
CTX_DELIVERED = 0
CTX_ERRORS = 1
CTX_LAST_SEQ = 2
CTX_END_SEEN = 3
CTX_LENGTH = 4

OK = 0
BAD_TYPE = 1
BAD_LENGTH = 2
NOT_INCREASING = 3
BAD_CHECKSUM = 4
BAD_PAYLOAD = 5


@numba.njit(cache=True)
def message_length(seq):
    x = mix32(0, seq)
    pick = x % 64
    if pick == 0:
        return MAX_LENGTH
    if pick == 1:
        return MIN_LENGTH
    return MIN_LENGTH + (x >> 6) % 80


@numba.njit(cache=True)
def checksum(buf, start, end):
    """32-bit FNV-1a (in int64 arithmetic: numba widens uint32 products)."""
    h = np.int64(0x811C9DC5)
    for i in range(start, end):
        h = ((h ^ np.int64(buf[i])) * 0x01000193) & 0xFFFF_FFFF
    return h


@numba.njit(cache=True)
def fill_message(buf, seq):
    length = message_length(seq)
    for i in range(PAYLOAD_OFFSET, length):
        buf[i] = (seq * 13 + i) & 0xFF
    buf[SEQ_OFFSET : SEQ_OFFSET + 8].view(np.int64)[0] = seq
    buf[LENGTH_OFFSET : LENGTH_OFFSET + 4].view(np.int32)[0] = length
    buf[CHECKSUM_OFFSET : CHECKSUM_OFFSET + 4].view(np.uint32)[0] = np.uint32(checksum(buf, PAYLOAD_OFFSET, length))
    return length


@numba.njit(cache=True)
def _le(buf, offset, size):
    value = np.int64(0)
    for i in range(size):
        value |= np.int64(buf[offset + i]) << (8 * i)
    return value


@numba.njit(cache=True)
def check_message(buf, offset, length, msg_type_id, last_seq):
    """OK, or what is wrong with the message at ``buf[offset:offset + length]``."""
    if msg_type_id != DATA_TYPE and msg_type_id != END_TYPE:
        return BAD_TYPE
    if length < MIN_LENGTH:
        return BAD_LENGTH
    seq = _le(buf, offset + SEQ_OFFSET, 8)
    if seq <= last_seq:
        return NOT_INCREASING
    if length != message_length(seq) or _le(buf, offset + LENGTH_OFFSET, 4) != length:
        return BAD_LENGTH
    if _le(buf, offset + CHECKSUM_OFFSET, 4) != checksum(buf, offset + PAYLOAD_OFFSET, offset + length):
        return BAD_CHECKSUM
    for i in range(PAYLOAD_OFFSET, length):
        if buf[offset + i] != (seq * 13 + i) & 0xFF:
            return BAD_PAYLOAD
    return OK


@numba.njit(cache=True)
def transmit_burst(buf, capacity, seq, count, msg_type_id, scratch):
    """Send ``count`` numbered messages from ``seq``; returns the next sequence (or a negative status)."""
    for _ in range(count):
        length = fill_message(scratch, seq)
        status = BC.transmit(buf, capacity, msg_type_id, scratch, 0, length)
        if status != 0:
            return status
        seq += 1
    return seq


def warm_up() -> None:
    """Load (or compile) every function a worker runs, with the worker's argument types, on a private buffer.

    Workers call it before announcing READY, so no receiver is still loading code while data flows.
    """
    buf = np.zeros(CAPACITY + L.TRAILER_LENGTH, np.uint8)
    scratch = np.zeros(MAX_LENGTH, np.uint8)
    rx = BC.CopyBroadcastReceiver(BC.BroadcastReceiver(buf))
    assert transmit_burst(buf, CAPACITY, 0, 4, DATA_TYPE, scratch) == 4
    ctx = np.zeros(CTX_LENGTH, np.int64)
    ctx[CTX_LAST_SEQ] = -1
    assert BC.receive(buf, CAPACITY, rx.receiver.state, scratch, verify_handler, ctx, 1) == 1
    assert ctx[CTX_DELIVERED] == 1 and ctx[CTX_ERRORS] == 0
    assert BC.receive_copy(buf, CAPACITY, rx.receiver.state, scratch) == DATA_TYPE
    messages = rx.receive_messages(8)
    assert len(messages) == 2 and BC.receive_copy(buf, CAPACITY, rx.receiver.state, scratch) == 0
    for type_id, body in messages:
        assert check_message(np.frombuffer(body, np.uint8), 0, len(body), type_id, -1) == OK
    assert get_int64_acquire(buf, CAPACITY) > 0
    put_int64_release(ctx.view(np.uint8), 0, 0)


IDLE_S = 50e-6
END_INTERVAL_S = 1e-3  # between END messages while waiting for every receiver's acknowledgement


def idle(seconds: float = IDLE_S) -> None:
    """Back off between polls (an idle strategy, not a wait for a condition)."""
    time.sleep(seconds)


def transmitter(bc_path: str, control_path: str, receivers: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with MappedFile.open(bc_path) as bc_file, MappedFile.open(control_path) as control_file:
        buf, control = bc_file.buffer, control_file.buffer
        capacity = L.check_capacity(buf.shape[0])
        scratch = np.zeros(MAX_LENGTH, np.uint8)
        warm_up()
        slots = [RECEIVER_BLOCK * (r + 1) for r in range(receivers)]
        await_condition(lambda: all(get_int64_acquire(control, s + READY) for s in slots), timeout_s,
                        "every receiver to join", poll_interval_s=IDLE_S, max_poll_interval_s=IDLE_S)
        seq = 0
        while seq < DATA_MESSAGES:
            seq = transmit_burst(buf, capacity, seq, BURST, DATA_TYPE, scratch)
            if seq < 0:
                raise RuntimeError(f"transmit failed with status {seq}")
            idle()  # pacing: fast enough to lap a slow receiver in a 4 KiB buffer, not every receiver
        end_seq = [seq]

        def transmit_end() -> int:
            """One more END message; never counted as work, so the wait backs off 1 ms between them."""
            end_seq[0] = transmit_burst(buf, capacity, end_seq[0], 1, END_TYPE, scratch)
            return 0

        await_condition(lambda: all(get_int64_acquire(control, s + ACK) for s in slots),
                        max(0.0, deadline - time.monotonic()), "every receiver to acknowledge END", work=transmit_end,
                        poll_interval_s=END_INTERVAL_S, max_poll_interval_s=END_INTERVAL_S)
        seq = end_seq[0]
        put_int64_release(control, TRANSMITTER_SENT, seq)
        del buf, control


def _publish(control, block, delivered, errors, laps, after_first_lap, last_seq, corrupt, recoveries=0):
    for slot, value in (
        (DELIVERED, delivered), (ERRORS, errors), (LAPS, laps), (DELIVERED_AFTER_FIRST_LAP, after_first_lap),
        (LAST_SEQ, last_seq), (CORRUPT, corrupt), (RECOVERIES, recoveries),
    ):
        put_int64_release(control, block + slot, int(value))
    put_int64_release(control, block + ACK, 1)


@numba.njit(MESSAGE_HANDLER_SIG, cache=True)
def verify_handler(ctx, msg_type_id, buffer, offset, length):
    result = check_message(buffer, offset, length, msg_type_id, ctx[CTX_LAST_SEQ])
    if result != OK:
        ctx[CTX_ERRORS] += 1
        return
    ctx[CTX_LAST_SEQ] = _le(buffer, offset + SEQ_OFFSET, 8)
    ctx[CTX_DELIVERED] += 1
    if msg_type_id == END_TYPE:
        ctx[CTX_END_SEEN] = 1


def fast_receiver(bc_path: str, control_path: str, index: int, timeout_s: float) -> None:
    """Compiled handler path, polling without pause."""
    deadline = time.monotonic() + timeout_s
    block = RECEIVER_BLOCK * (index + 1)
    with MappedFile.open(bc_path) as bc_file, MappedFile.open(control_path) as control_file:
        buf, control = bc_file.buffer, control_file.buffer
        capacity = L.check_capacity(buf.shape[0])
        state = BC.new_receiver_state()
        BC.receiver_init(buf, capacity, state)
        scratch = np.zeros(MAX_LENGTH, np.uint8)
        ctx = np.zeros(CTX_LENGTH, np.int64)
        ctx[CTX_LAST_SEQ] = -1
        after_first_lap = -1
        warm_up()
        put_int64_release(control, block + READY, 1)
        while ctx[CTX_END_SEEN] == 0 and time.monotonic() < deadline:
            n = BC.receive(buf, capacity, state, scratch, verify_handler, ctx, 256)
            if after_first_lap < 0 and state[BC.RECEIVER_LAPPED_COUNT] > 0:
                after_first_lap = ctx[CTX_DELIVERED]
            if n <= 0:
                idle(20e-6)
        after = ctx[CTX_DELIVERED] - after_first_lap if after_first_lap >= 0 else 0
        _publish(control, block, ctx[CTX_DELIVERED], ctx[CTX_ERRORS], state[BC.RECEIVER_LAPPED_COUNT], after,
                 ctx[CTX_LAST_SEQ], state[BC.RECEIVER_CORRUPT_COUNT])
        del buf, control


def slow_receiver(bc_path: str, control_path: str, index: int, timeout_s: float, batch: int, pause_s: float) -> None:
    """Python path (``CopyBroadcastReceiver.receive_messages``), pausing after every delivered batch as if
    processing it, so the transmitter laps it; after a lap it retries at once and delivers again.

    ``batch == 1`` uses ``receive_copy`` one message at a time instead.
    """
    deadline = time.monotonic() + timeout_s
    block = RECEIVER_BLOCK * (index + 1)
    with MappedFile.open(bc_path) as bc_file, MappedFile.open(control_path) as control_file:
        buf, control = bc_file.buffer, control_file.buffer
        capacity = L.check_capacity(buf.shape[0])
        receiver = BC.CopyBroadcastReceiver(BC.BroadcastReceiver(buf))
        state, scratch = receiver.receiver.state, receiver.scratch
        delivered = errors = recoveries = 0
        last_seq = -1
        after_first_lap = -1
        laps_seen = 0
        end_seen = False
        warm_up()
        put_int64_release(control, block + READY, 1)
        while not end_seen and time.monotonic() < deadline:
            if batch == 1:
                status = BC.receive_copy(buf, capacity, state, scratch)
                length = int(state[BC.RECEIVER_RECORD_LENGTH]) - L.RECORD_HEADER_LENGTH
                messages = [(status, scratch[:length].tobytes())] if status > 0 else []
            else:
                result = receiver.receive_messages(batch)
                messages = result if isinstance(result, list) else []
            laps = receiver.receiver.lapped_count()
            if after_first_lap < 0 and laps > 0:
                after_first_lap = delivered
            for type_id, body in messages:
                data = np.frombuffer(body, np.uint8)
                if check_message(data, 0, len(body), type_id, last_seq) != OK:
                    errors += 1
                    continue
                last_seq = int.from_bytes(body[0:8], "little")
                delivered += 1
                end_seen = end_seen or type_id == END_TYPE
                if type_id == DATA_TYPE and laps > laps_seen:
                    recoveries += 1
                    laps_seen = laps
            if messages:
                # A deliberately slow consumer: it simulates work per batch, it does not wait for a condition.
                time.sleep(pause_s)
            elif laps == laps_seen or batch != 1:
                idle()
        after = delivered - after_first_lap if after_first_lap >= 0 else 0
        _publish(control, block, delivered, errors, receiver.receiver.lapped_count(), after, last_seq,
                 receiver.receiver.corrupt_count(), recoveries)
        del buf, control, state, scratch, receiver
