"""Broadcast buffer kernels: the to-clients response buffer (spec/transport.md §8).

Agrona's ``BroadcastTransmitter`` / ``BroadcastReceiver`` / ``CopyBroadcastReceiver`` over a ``np.uint8`` view
of ``capacity + TRAILER_LENGTH`` bytes. One transmitter (the driver) never waits for anyone; receivers
(clients) follow behind and may be overwritten ("lapped").

Lap detection works like a sequence lock: before touching any byte the transmitter release-stores
``tail_intent_counter`` (how far it is about to write) and fences, and only then writes the record. A receiver
copies a record out, fences, and re-reads ``tail_intent_counter``: if the transmitter now intends to write a
full capacity past the record's start (``cursor + capacity <= tail_intent``), the copy may be torn and is
discarded. So a receiver never delivers a torn record, and every length it reads is bounds-checked before
use, so garbage cannot make it read outside the array.

Receiver state is a small ``int64`` array (``RECEIVER_*`` indices below) created by ``new_receiver_state``:
no objects, so compiled callers can keep it anywhere.
"""

from __future__ import annotations

import numpy as np
from numba import types

from aeron_numba.errors import ConfigurationError
from aeron_numba.jit import kernel
from aeron_numba.kernels.atomics import (
    acquire_fence,
    get_int32,
    get_int64,
    get_int64_acquire,
    put_int32,
    put_int64_release,
    release_fence,
)
from aeron_numba.kernels.handlers import MessageHandler
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.bits import align
from aeron_numba.layout.bits import INT32_MAX
from aeron_numba.layout.broadcast import (
    CORRUPT_RECORD,
    CORRUPT_TAIL,
    INVALID_CAPACITY,
    INVALID_LENGTH,
    INVALID_MSG_TYPE_ID,
    LAPPED,
    LATEST_COUNTER_OFFSET,
    MAX_MSG_LENGTH_DIVISOR,
    MIN_CAPACITY,
    MSG_TOO_LONG,
    NOTHING_RECEIVED,
    PADDING_MSG_TYPE_ID,
    RECORD_ALIGNMENT,
    RECORD_HEADER_LENGTH,
    RECORD_LENGTH_OFFSET,
    RECORD_TYPE_OFFSET,
    SCRATCH_TOO_SMALL,
    TAIL_COUNTER_OFFSET,
    TAIL_INTENT_COUNTER_OFFSET,
    TRAILER_LENGTH,
    check_capacity,
    max_msg_length,
)

# Receiver state: indices into its int64 array.
RECEIVER_CURSOR = 0  #: position of the current record
RECEIVER_NEXT_RECORD = 1  #: position of the record after it
RECEIVER_RECORD_OFFSET = 2  #: index of the current record in the buffer
RECEIVER_RECORD_LENGTH = 3  #: current record's length field (header included), as read by receive_next
RECEIVER_MSG_TYPE_ID = 4  #: current record's msg_type_id, as read by receive_next
RECEIVER_LAPPED_COUNT = 5  #: times the transmitter overwrote this receiver's position
RECEIVER_CORRUPT_COUNT = 6  #: records skipped because they held impossible lengths or types
RECEIVER_STATE_LENGTH = 8

# Columns of the descriptors filled by ``receive_batch`` (one row per delivered message).
DESCRIPTOR_OFFSET = 0  #: body offset in the scratch array
DESCRIPTOR_LENGTH = 1  #: body length
DESCRIPTOR_MSG_TYPE_ID = 2
DESCRIPTOR_FIELDS = 3

#: ``receive(buf, capacity, state, scratch, handler, ctx, message_count_limit) -> int64``; explicit so it is
#: compiled and cached once whatever handler is passed (kernels/handlers.py).
RECEIVE_SIG = types.int64(
    types.uint8[::1],
    types.int64,
    types.int64[::1],
    types.uint8[::1],
    MessageHandler,
    types.int64[::1],
    types.int64,
)


@kernel
def _capacity_invalid(buf, capacity):
    """True unless ``capacity`` is a power of two >= MIN_CAPACITY and ``buf`` holds data + trailer."""
    return capacity < MIN_CAPACITY or (capacity & (capacity - 1)) != 0 or buf.shape[0] < capacity + TRAILER_LENGTH


@kernel
def _receiver_args_invalid(buf, capacity, state):
    """True if ``capacity`` is invalid for ``buf`` or ``state`` is shorter than RECEIVER_STATE_LENGTH."""
    return _capacity_invalid(buf, capacity) or state.shape[0] < RECEIVER_STATE_LENGTH


# --------------------------------------------------------------------------------------------------- transmitter


@kernel
def transmit(buf, capacity, msg_type_id, src, src_offset, length):
    """Append one message, overwriting whatever receivers have not read (Agrona ``BroadcastTransmitter``).

    Parameters
    ----------
    buf : np.uint8[::1]
        The broadcast buffer: ``capacity`` data bytes then the 128-byte trailer.
    capacity : int
        Data area length, a power of two.
    msg_type_id : int
        Message type, >= 1.
    src, src_offset, length : np.uint8[::1], int, int
        The body is ``src[src_offset:src_offset + length]``; ``0 <= length <= capacity / 8``.

    Returns
    -------
    int
        0 when sent; ``INVALID_MSG_TYPE_ID``, ``INVALID_LENGTH``, ``MSG_TOO_LONG``, ``INVALID_CAPACITY``
        for bad arguments; ``CORRUPT_TAIL`` if ``tail_counter`` was overwritten with garbage.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if msg_type_id < 1 or msg_type_id > INT32_MAX:
        return INVALID_MSG_TYPE_ID
    if length < 0:
        return INVALID_LENGTH
    if length > capacity // MAX_MSG_LENGTH_DIVISOR:
        return MSG_TOO_LONG
    if src_offset < 0 or src_offset + length > src.shape[0]:
        return INVALID_LENGTH

    tail_intent_offset = capacity + TAIL_INTENT_COUNTER_OFFSET
    # Relaxed: the transmitter is the only writer of tail_counter.
    tail = get_int64(buf, capacity + TAIL_COUNTER_OFFSET)
    if tail < 0 or (tail & (RECORD_ALIGNMENT - 1)) != 0:
        return CORRUPT_TAIL
    record_offset = tail & (capacity - 1)
    record_length = length + RECORD_HEADER_LENGTH
    aligned_length = align(record_length, RECORD_ALIGNMENT)
    new_tail = tail + aligned_length
    to_end_of_buffer = capacity - record_offset

    if to_end_of_buffer < aligned_length:
        # Intent first, fenced before any byte is overwritten: receivers validate against it.
        put_int64_release(buf, tail_intent_offset, new_tail + to_end_of_buffer)
        release_fence()
        put_int32(buf, record_offset + RECORD_LENGTH_OFFSET, to_end_of_buffer)
        put_int32(buf, record_offset + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
        tail += to_end_of_buffer
        record_offset = 0
    else:
        put_int64_release(buf, tail_intent_offset, new_tail)
        release_fence()

    put_int32(buf, record_offset + RECORD_LENGTH_OFFSET, record_length)
    put_int32(buf, record_offset + RECORD_TYPE_OFFSET, msg_type_id)
    body = record_offset + RECORD_HEADER_LENGTH
    copy_bytes(buf, body, src, src_offset, length)

    put_int64_release(buf, capacity + LATEST_COUNTER_OFFSET, tail)
    put_int64_release(buf, capacity + TAIL_COUNTER_OFFSET, tail + aligned_length)
    return 0


# --------------------------------------------------------------------------------------------------- receiver


def new_receiver_state() -> np.ndarray:
    """A zeroed receiver state array; ``receiver_init`` fills it."""
    return np.zeros(RECEIVER_STATE_LENGTH, dtype=np.int64)


@kernel
def receiver_init(buf, capacity, state):
    """Join the stream at ``latest_counter``: the next record received is the most recent one (no history).

    Returns 0, or ``INVALID_CAPACITY`` / ``INVALID_LENGTH`` (state shorter than RECEIVER_STATE_LENGTH).
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if state.shape[0] < RECEIVER_STATE_LENGTH:
        return INVALID_LENGTH
    latest = get_int64_acquire(buf, capacity + LATEST_COUNTER_OFFSET)
    for i in range(RECEIVER_STATE_LENGTH):
        state[i] = 0
    state[RECEIVER_CURSOR] = latest
    state[RECEIVER_NEXT_RECORD] = latest
    state[RECEIVER_RECORD_OFFSET] = latest & (capacity - 1)
    return 0


@kernel
def _is_valid(buf, capacity, cursor):
    """The record at ``cursor`` has not been (and is not being) overwritten."""
    return cursor + capacity > get_int64_acquire(buf, capacity + TAIL_INTENT_COUNTER_OFFSET)


@kernel
def validate(buf, capacity, state):
    """After reading the current record: True if it was not overwritten meanwhile (Agrona ``validate``)."""
    if _receiver_args_invalid(buf, capacity, state):
        return False
    return _validate(buf, capacity, state)


@kernel
def _validate(buf, capacity, state):
    # Order the caller's reads of the record before the re-read of tail_intent (seqlock read side).
    acquire_fence()
    return _is_valid(buf, capacity, state[RECEIVER_CURSOR])


@kernel
def _record_length_sane(length, record_offset, capacity):
    return length >= RECORD_HEADER_LENGTH and length <= capacity - record_offset


@kernel
def _skip_insane(buf, capacity, state, cursor, tail):
    """The record at ``cursor`` has an impossible length: a lap in progress or garbage. Reposition."""
    acquire_fence()
    if not _is_valid(buf, capacity, cursor):
        state[RECEIVER_LAPPED_COUNT] += 1
        state[RECEIVER_NEXT_RECORD] = get_int64_acquire(buf, capacity + LATEST_COUNTER_OFFSET)
    else:
        # Not overwritten, so the transmitter (or a foreign writer) put garbage there: skip all there is.
        state[RECEIVER_CORRUPT_COUNT] += 1
        state[RECEIVER_NEXT_RECORD] = tail
    return False


@kernel
def receive_next(buf, capacity, state):
    """Move to the next record if there is one (Agrona ``BroadcastReceiver.receiveNext``).

    On success the record's index, length and type are in ``state``; its bytes may still be overwritten, so
    read them and then call ``validate`` before trusting them. If the receiver was lapped it counts a lap
    in ``state[RECEIVER_LAPPED_COUNT]`` and jumps to ``latest_counter``. A record with an impossible length
    is never exposed: the call returns False and counts a lap (if overwritten) or a corrupt record.

    Returns
    -------
    bool
        True if a record is available at ``state[RECEIVER_RECORD_OFFSET]``; False also for an invalid
        ``capacity``.
    """
    if _receiver_args_invalid(buf, capacity, state):
        return False
    return _receive_next(buf, capacity, state)


@kernel
def _receive_next(buf, capacity, state):
    tail = get_int64_acquire(buf, capacity + TAIL_COUNTER_OFFSET)
    cursor = state[RECEIVER_NEXT_RECORD]
    if tail <= cursor:
        return False

    mask = capacity - 1
    if not _is_valid(buf, capacity, cursor):
        state[RECEIVER_LAPPED_COUNT] += 1
        cursor = get_int64_acquire(buf, capacity + LATEST_COUNTER_OFFSET)
    record_offset = cursor & mask

    length = np.int64(get_int32(buf, record_offset + RECORD_LENGTH_OFFSET))
    msg_type_id = np.int64(get_int32(buf, record_offset + RECORD_TYPE_OFFSET))
    if not _record_length_sane(length, record_offset, capacity):
        return _skip_insane(buf, capacity, state, cursor, tail)

    if msg_type_id == PADDING_MSG_TYPE_ID:
        # The record is at the start of the next lap. Computed, not cursor + padding length: a torn padding
        # length must not leave the cursor off a record boundary.
        cursor = cursor - record_offset + capacity
        record_offset = 0
        length = np.int64(get_int32(buf, RECORD_LENGTH_OFFSET))
        msg_type_id = np.int64(get_int32(buf, RECORD_TYPE_OFFSET))
        if not _record_length_sane(length, record_offset, capacity):
            return _skip_insane(buf, capacity, state, cursor, tail)

    state[RECEIVER_CURSOR] = cursor
    state[RECEIVER_NEXT_RECORD] = cursor + align(length, RECORD_ALIGNMENT)
    state[RECEIVER_RECORD_OFFSET] = record_offset
    state[RECEIVER_RECORD_LENGTH] = length
    state[RECEIVER_MSG_TYPE_ID] = msg_type_id
    return True


@kernel
def _receive_one(buf, capacity, state, scratch, scratch_offset):
    """Copy the next record's body to ``scratch[scratch_offset:]`` and validate it (``CopyBroadcastReceiver``).

    Returns the msg_type_id (>= 1) when delivered, else NOTHING_RECEIVED, LAPPED, SCRATCH_TOO_SMALL (the
    record is skipped; the caller may rewind to it with ``state[NEXT_RECORD] = state[CURSOR]``) or
    CORRUPT_RECORD.
    """
    lapped_before = state[RECEIVER_LAPPED_COUNT]
    corrupt_before = state[RECEIVER_CORRUPT_COUNT]
    available = _receive_next(buf, capacity, state)
    if state[RECEIVER_CORRUPT_COUNT] != corrupt_before:
        return CORRUPT_RECORD
    if state[RECEIVER_LAPPED_COUNT] != lapped_before:
        # Agrona's "unable to keep up with broadcast": the receiver is now at latest; report the loss.
        return LAPPED
    if not available:
        return NOTHING_RECEIVED

    length = state[RECEIVER_RECORD_LENGTH] - RECORD_HEADER_LENGTH
    if length > scratch.shape[0] - scratch_offset:
        return SCRATCH_TOO_SMALL
    body = state[RECEIVER_RECORD_OFFSET] + RECORD_HEADER_LENGTH
    copy_bytes(scratch, scratch_offset, buf, body, length)

    if not _validate(buf, capacity, state):
        # Torn copy. next_record came from a length that may be torn too, so rejoin at latest.
        state[RECEIVER_LAPPED_COUNT] += 1
        state[RECEIVER_NEXT_RECORD] = get_int64_acquire(buf, capacity + LATEST_COUNTER_OFFSET)
        return LAPPED
    msg_type_id = state[RECEIVER_MSG_TYPE_ID]
    if msg_type_id < 1:
        state[RECEIVER_CORRUPT_COUNT] += 1
        return CORRUPT_RECORD
    return msg_type_id


@kernel
def receive_copy(buf, capacity, state, scratch):
    """Python-friendly single receive: the body is copied to ``scratch[:state[RECEIVER_RECORD_LENGTH] - 8]``.

    Returns
    -------
    int
        The msg_type_id (>= 1) of the delivered message; ``NOTHING_RECEIVED`` (0); ``LAPPED`` (the lap is
        counted and the receiver rejoined at latest; call again); ``SCRATCH_TOO_SMALL`` (that record is
        skipped); ``CORRUPT_RECORD``; ``INVALID_CAPACITY`` / ``INVALID_LENGTH`` (state too short).
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if state.shape[0] < RECEIVER_STATE_LENGTH:
        return INVALID_LENGTH
    return _receive_one(buf, capacity, state, scratch, 0)


@kernel
def receive_batch(buf, capacity, state, scratch, descriptors, message_count_limit):
    """Batch path for Python: copy up to ``message_count_limit`` validated bodies back to back into ``scratch``.

    Row ``i`` of ``descriptors`` (int64, shape ``(n, DESCRIPTOR_FIELDS)``) gets the body's offset in
    ``scratch``, its length and msg_type_id. The batch stops at the first record that does not fit in the
    rest of ``scratch`` (it is received by the next call), at a lap or at a corrupt record (both counted in
    ``state``).

    Returns
    -------
    int
        Messages delivered (>= 1), or when none: a ``receive_copy`` code (<= 0), ``INVALID_LENGTH`` if
        ``state`` is too short or ``descriptors`` too narrow, ``INVALID_CAPACITY``.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if state.shape[0] < RECEIVER_STATE_LENGTH or descriptors.shape[1] < DESCRIPTOR_FIELDS:
        return INVALID_LENGTH
    limit = min(message_count_limit, descriptors.shape[0])
    count = 0
    scratch_offset = 0
    while count < limit:
        status = _receive_one(buf, capacity, state, scratch, scratch_offset)
        if status <= 0:
            if count == 0:
                return status
            if status == SCRATCH_TOO_SMALL:
                state[RECEIVER_NEXT_RECORD] = state[RECEIVER_CURSOR]
            break
        length = state[RECEIVER_RECORD_LENGTH] - RECORD_HEADER_LENGTH
        descriptors[count, DESCRIPTOR_OFFSET] = scratch_offset
        descriptors[count, DESCRIPTOR_LENGTH] = length
        descriptors[count, DESCRIPTOR_MSG_TYPE_ID] = status
        scratch_offset += length
        count += 1
    return count


@kernel(RECEIVE_SIG)
def receive(buf, capacity, state, scratch, handler, ctx, message_count_limit):
    """Deliver up to ``message_count_limit`` validated copies to a compiled handler.

    ``handler(ctx, msg_type_id, scratch, 0, body_length)`` sees each body in ``scratch`` only after it was
    validated, so never a torn record. Stops early as ``receive_batch`` does.

    Returns
    -------
    int
        Messages delivered (>= 1), or when none a ``receive_copy`` code (<= 0) or ``INVALID_CAPACITY``.
        Laps and corrupt records met after a delivery are visible in ``state[RECEIVER_LAPPED_COUNT]`` and
        ``state[RECEIVER_CORRUPT_COUNT]``.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if state.shape[0] < RECEIVER_STATE_LENGTH:
        return INVALID_LENGTH
    count = 0
    while count < message_count_limit:
        status = _receive_one(buf, capacity, state, scratch, 0)
        if status <= 0:
            if count == 0:
                return status
            if status == SCRATCH_TOO_SMALL:
                state[RECEIVER_NEXT_RECORD] = state[RECEIVER_CURSOR]
            break
        handler(ctx, status, scratch, 0, state[RECEIVER_RECORD_LENGTH] - RECORD_HEADER_LENGTH)
        count += 1
    return count


# --------------------------------------------------------------------------------------------------- Python roles


def _as_bytes(src) -> np.ndarray:
    if isinstance(src, np.ndarray):
        if src.dtype != np.uint8 or src.ndim != 1:
            raise ConfigurationError(f"src dtype={src.dtype} ndim={src.ndim}: need a 1-D np.uint8 array")
        return np.ascontiguousarray(src)
    return np.frombuffer(bytes(src), dtype=np.uint8)


def _check_buffer(buffer) -> int:
    if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
        raise ConfigurationError("broadcast buffer must be a 1-D np.uint8 array")
    return check_capacity(buffer.shape[0])


class BroadcastTransmitter:
    """The single writer of a broadcast buffer (Agrona ``BroadcastTransmitter``)."""

    def __init__(self, buffer: np.ndarray):
        self.capacity = _check_buffer(buffer)
        self.max_msg_length = max_msg_length(self.capacity)
        self.buffer = buffer

    def transmit(self, msg_type_id: int, src, src_offset: int = 0, length: int | None = None) -> None:
        data = _as_bytes(src)
        if length is None:
            length = data.shape[0] - src_offset
        if msg_type_id < 1 or msg_type_id > INT32_MAX:
            raise ConfigurationError(f"msg_type_id={msg_type_id} must be >= 1 and <= {INT32_MAX}")
        if length > self.max_msg_length:
            raise ConfigurationError(f"length={length} > max_msg_length={self.max_msg_length}")
        if length < 0 or src_offset < 0 or src_offset + length > data.shape[0]:
            raise ConfigurationError(
                f"src_offset={src_offset} + length={length} outside src of length={data.shape[0]}"
            )
        status = transmit(self.buffer, self.capacity, msg_type_id, data, src_offset, length)
        if status == CORRUPT_TAIL:
            raise ConfigurationError(f"broadcast tail_counter is corrupt (status {status})")


class BroadcastReceiver:
    """One receiver's position in a broadcast buffer (Agrona ``BroadcastReceiver``); state is an int64 array."""

    def __init__(self, buffer: np.ndarray):
        self.capacity = _check_buffer(buffer)
        self.buffer = buffer
        self.state = new_receiver_state()
        receiver_init(buffer, self.capacity, self.state)

    def receive_next(self) -> bool:
        return receive_next(self.buffer, self.capacity, self.state)

    def validate(self) -> bool:
        return validate(self.buffer, self.capacity, self.state)

    def type_id(self) -> int:
        return int(self.state[RECEIVER_MSG_TYPE_ID])

    def offset(self) -> int:
        """Index of the current record's body in the buffer."""
        return int(self.state[RECEIVER_RECORD_OFFSET]) + RECORD_HEADER_LENGTH

    def length(self) -> int:
        """Length of the current record's body."""
        return int(self.state[RECEIVER_RECORD_LENGTH]) - RECORD_HEADER_LENGTH

    def lapped_count(self) -> int:
        return int(self.state[RECEIVER_LAPPED_COUNT])

    def next_record_position(self) -> int:
        """Where the next record to receive starts: the transmitter's tail is past it while one is there."""
        return int(self.state[RECEIVER_NEXT_RECORD])

    def corrupt_count(self) -> int:
        return int(self.state[RECEIVER_CORRUPT_COUNT])


class CopyBroadcastReceiver:
    """Receives validated copies only (Agrona ``CopyBroadcastReceiver``): never a torn record."""

    def __init__(self, receiver: BroadcastReceiver, scratch_length: int | None = None):
        if scratch_length is None:
            scratch_length = max_msg_length(receiver.capacity)
        if scratch_length < 0:
            raise ConfigurationError(f"scratch_length={scratch_length} must be >= 0")
        self.receiver = receiver
        self.scratch = np.zeros(scratch_length, dtype=np.uint8)
        self._descriptors = np.zeros((0, DESCRIPTOR_FIELDS), dtype=np.int64)

    def receive(self, handler, ctx: np.ndarray, message_count_limit: int = 1) -> int:
        """Deliver to a compiled ``MessageHandler``; returns the count or a code <= 0."""
        r = self.receiver
        return receive(r.buffer, r.capacity, r.state, self.scratch, handler, ctx, message_count_limit)

    def receive_messages(self, message_count_limit: int = 64) -> list[tuple[int, bytes]] | int:
        """Up to ``message_count_limit`` validated ``(msg_type_id, body)`` pairs ([] when nothing is new),
        or a negative code (``LAPPED``, ``CORRUPT_RECORD``, ...)."""
        if self._descriptors.shape[0] < message_count_limit:
            self._descriptors = np.zeros((message_count_limit, DESCRIPTOR_FIELDS), dtype=np.int64)
        r = self.receiver
        count = receive_batch(r.buffer, r.capacity, r.state, self.scratch, self._descriptors, message_count_limit)
        if count <= 0:
            return [] if count == NOTHING_RECEIVED else int(count)
        scratch = self.scratch
        return [
            (int(type_id), bytes(scratch[offset : offset + length]))
            for offset, length, type_id in self._descriptors[:count].tolist()
        ]
