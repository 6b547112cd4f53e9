"""Many-to-one ring buffer kernels: the to-driver command buffer (spec/transport.md §7).

Agrona's ``ManyToOneRingBuffer`` over a ``np.uint8`` view of ``capacity + TRAILER_LENGTH`` bytes. Producers
(clients, in any process) claim space by CAS on ``tail_position``; the single consumer (the driver conductor)
reads the contiguous block from ``head_position``, zeroes it and release-stores the new head.

Record protocol (§7.2): a claimed record's length is release-stored *negative* first, the body and type are
written, then the positive length is release-stored last. So a reader that acquire-loads a positive length
sees the whole record; a length <= 0 is "not yet written" and ends the read. Zeroing consumed bytes matters:
the next lap's readers, and ``unblock``, take 0 to mean "nothing claimed here yet".

Every kernel returns a status code (``layout.ring_buffer``) instead of raising; every length read from the
shared buffer is checked against the capacity before it is used, so garbage written by a foreign process
cannot make a kernel touch memory outside the array (the reader stops with ``CORRUPT_RECORD``).

``ManyToOneRingBuffer`` at the bottom is the thin Python role object over these kernels.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types

from aeron_numba.errors import AeronError, ConfigurationError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels.atomics import (
    compare_and_set_int64,
    get_and_add_int64,
    get_int32,
    get_int32_acquire,
    get_int64,
    get_int64_acquire,
    put_int32,
    put_int32_release,
    put_int64_release,
)
from aeron_numba.kernels.handlers import MessageHandler
from aeron_numba.kernels.memory import copy_bytes, fill_bytes
from aeron_numba.kernels.bits import align
from aeron_numba.layout.bits import INT32_MAX
from aeron_numba.layout.ring_buffer import (
    CLAIM_NOT_ACTIVE,
    CONSUMER_HEARTBEAT_OFFSET,
    CORRELATION_COUNTER_OFFSET,
    CORRUPT_RECORD,
    HEAD_CACHE_POSITION_OFFSET,
    HEAD_POSITION_OFFSET,
    INSUFFICIENT_CAPACITY,
    INVALID_CAPACITY,
    INVALID_INDEX,
    INVALID_LENGTH,
    INVALID_MSG_TYPE_ID,
    MAX_MSG_LENGTH_DIVISOR,
    MIN_CAPACITY,
    MSG_TOO_LONG,
    PADDING_MSG_TYPE_ID,
    RECORD_ALIGNMENT,
    RECORD_HEADER_LENGTH,
    RECORD_LENGTH_OFFSET,
    RECORD_TYPE_OFFSET,
    TAIL_POSITION_OFFSET,
    TRAILER_LENGTH,
    check_capacity,
    max_msg_length,
)

# Columns of the record descriptors filled by ``read_descriptors`` (one row per message).
DESCRIPTOR_OFFSET = 0  #: body offset in the ring buffer array
DESCRIPTOR_LENGTH = 1  #: body length
DESCRIPTOR_MSG_TYPE_ID = 2
DESCRIPTOR_FIELDS = 3

#: ``read(buf, capacity, handler, ctx, message_count_limit) -> int64``: explicit, so it is compiled and
#: cached once whatever handler is passed (kernels/handlers.py).
READ_SIG = types.int64(types.uint8[::1], types.int64, MessageHandler, types.int64[::1], types.int64)


# --------------------------------------------------------------------------------------------------- guards


@kernel
def _capacity_invalid(buf, capacity):
    """True unless ``capacity`` is a power of two >= MIN_CAPACITY and ``buf`` holds data + trailer."""
    return capacity < MIN_CAPACITY or (capacity & (capacity - 1)) != 0 or buf.shape[0] < capacity + TRAILER_LENGTH


@kernel
def _check_message(buf, capacity, msg_type_id, length):
    """0 if a message of ``length`` bytes and type ``msg_type_id`` may be written, else a status code."""
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    if msg_type_id < 1 or msg_type_id > INT32_MAX:
        return INVALID_MSG_TYPE_ID
    if length < 0:
        return INVALID_LENGTH
    if length > capacity // MAX_MSG_LENGTH_DIVISOR:
        return MSG_TOO_LONG
    return 0


# --------------------------------------------------------------------------------------------------- producers


@kernel
def _claim_capacity(buf, capacity, required):
    """Claim ``required`` (aligned) bytes by CAS on the tail; return the record index, INSUFFICIENT_CAPACITY,
    or CORRUPT_RECORD if the tail is not a position any producer could have stored.

    The head cache spares producers a read of the consumer's cache line on every claim; it is refreshed only
    when the space looks insufficient (§7.2). If the record does not fit before the end of the buffer, the
    rest of the buffer is claimed too and filled with a padding record, and the record goes at index 0.
    """
    mask = capacity - 1
    tail_offset = capacity + TAIL_POSITION_OFFSET
    head_offset = capacity + HEAD_POSITION_OFFSET
    head_cache_offset = capacity + HEAD_CACHE_POSITION_OFFSET

    head = get_int64_acquire(buf, head_cache_offset)
    while True:
        tail = get_int64_acquire(buf, tail_offset)
        if tail < 0 or (tail & (RECORD_ALIGNMENT - 1)) != 0:
            return CORRUPT_RECORD  # producers only ever add aligned lengths: a foreign write
        if required > capacity - (tail - head):
            head = get_int64_acquire(buf, head_offset)
            if required > capacity - (tail - head):
                return INSUFFICIENT_CAPACITY
            put_int64_release(buf, head_cache_offset, head)

        padding = 0
        tail_index = tail & mask
        to_buffer_end = capacity - tail_index
        if required > to_buffer_end:
            # Wrap: the record must also fit in [0, head_index) at the start of the buffer.
            head_index = head & mask
            if required > head_index:
                head = get_int64_acquire(buf, head_offset)
                head_index = head & mask
                if required > head_index:
                    return INSUFFICIENT_CAPACITY
                put_int64_release(buf, head_cache_offset, head)
            padding = to_buffer_end

        if compare_and_set_int64(buf, tail_offset, tail, tail + required + padding):
            break

    if padding != 0:
        # Negative first so the reader never sees a half-built padding record as complete.
        put_int32_release(buf, tail_index + RECORD_LENGTH_OFFSET, -padding)
        put_int32(buf, tail_index + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
        put_int32_release(buf, tail_index + RECORD_LENGTH_OFFSET, padding)
        return 0
    return tail_index


@kernel
def write(buf, capacity, msg_type_id, src, src_offset, length):
    """Write one message (Agrona ``ManyToOneRingBuffer.write``).

    Parameters
    ----------
    buf : np.uint8[::1]
        The ring buffer: ``capacity`` data bytes then the 768-byte trailer.
    capacity : int
        Data area length, a power of two.
    msg_type_id : int
        Message type, >= 1.
    src, src_offset, length : np.uint8[::1], int, int
        The body is ``src[src_offset:src_offset + length]``; ``0 <= length <= capacity / 8``.

    Returns
    -------
    int
        1 when written; ``INSUFFICIENT_CAPACITY`` when full; ``INVALID_MSG_TYPE_ID``, ``INVALID_LENGTH``,
        ``MSG_TOO_LONG`` or ``INVALID_CAPACITY`` for bad arguments; ``CORRUPT_RECORD`` if the stored tail
        is negative or unaligned.
    """
    status = _check_message(buf, capacity, msg_type_id, length)
    if status != 0:
        return status
    if src_offset < 0 or src_offset + length > src.shape[0]:
        return INVALID_LENGTH

    record_length = length + RECORD_HEADER_LENGTH
    record_index = _claim_capacity(buf, capacity, align(record_length, RECORD_ALIGNMENT))
    if record_index < 0:
        return record_index

    put_int32_release(buf, record_index + RECORD_LENGTH_OFFSET, -record_length)
    body = record_index + RECORD_HEADER_LENGTH
    copy_bytes(buf, body, src, src_offset, length)
    put_int32(buf, record_index + RECORD_TYPE_OFFSET, msg_type_id)
    # Release: body and type are visible before the positive length that publishes them.
    put_int32_release(buf, record_index + RECORD_LENGTH_OFFSET, record_length)
    return 1


@kernel
def try_claim(buf, capacity, msg_type_id, length):
    """Claim space for a ``length``-byte body to be written in place, then ``commit`` or ``abort`` it.

    Returns
    -------
    int
        The body's index in ``buf`` (>= 8) on success, else a negative status code as for ``write``.
    """
    status = _check_message(buf, capacity, msg_type_id, length)
    if status != 0:
        return status

    record_length = length + RECORD_HEADER_LENGTH
    record_index = _claim_capacity(buf, capacity, align(record_length, RECORD_ALIGNMENT))
    if record_index < 0:
        return record_index

    put_int32_release(buf, record_index + RECORD_LENGTH_OFFSET, -record_length)
    put_int32(buf, record_index + RECORD_TYPE_OFFSET, msg_type_id)
    return record_index + RECORD_HEADER_LENGTH


@kernel
def _claimed_record(buf, capacity, index):
    """Record index of the active claim whose body is at ``index``, or INVALID_INDEX / CLAIM_NOT_ACTIVE."""
    record_index = index - RECORD_HEADER_LENGTH
    if (
        _capacity_invalid(buf, capacity)
        or record_index < 0
        or record_index > capacity - RECORD_HEADER_LENGTH
        or (record_index & (RECORD_ALIGNMENT - 1)) != 0
    ):
        return INVALID_INDEX
    if get_int32(buf, record_index + RECORD_LENGTH_OFFSET) >= 0:
        return CLAIM_NOT_ACTIVE
    return record_index


@kernel
def commit(buf, capacity, index):
    """Publish a claim made by ``try_claim`` (``index`` = the body index it returned).

    Returns 0, or ``INVALID_INDEX`` / ``CLAIM_NOT_ACTIVE`` (already committed or aborted).
    """
    record_index = _claimed_record(buf, capacity, index)
    if record_index < 0:
        return record_index
    length = get_int32(buf, record_index + RECORD_LENGTH_OFFSET)
    put_int32_release(buf, record_index + RECORD_LENGTH_OFFSET, -length)
    return 0


@kernel
def abort(buf, capacity, index):
    """Turn a claim made by ``try_claim`` into a padding record the reader skips.

    Returns 0, or ``INVALID_INDEX`` / ``CLAIM_NOT_ACTIVE`` (already committed or aborted).
    """
    record_index = _claimed_record(buf, capacity, index)
    if record_index < 0:
        return record_index
    length = get_int32(buf, record_index + RECORD_LENGTH_OFFSET)
    put_int32(buf, record_index + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
    put_int32_release(buf, record_index + RECORD_LENGTH_OFFSET, -length)
    return 0


@kernel
def next_correlation_id(buf, capacity):
    """Get-and-add 1 on ``correlation_counter``: a unique id across every client of this driver."""
    return get_and_add_int64(buf, capacity + CORRELATION_COUNTER_OFFSET, 1)


# --------------------------------------------------------------------------------------------------- consumer


@kernel
def _record_at(buf, capacity, record_index, record_position, tail):
    """Check the record at ``record_index`` (stream position ``record_position``).

    Returns ``(length, msg_type_id, tail)``: ``length`` is the record length (header included, > 0), 0 when
    nothing is published there yet, or ``CORRUPT_RECORD`` when the length or type is impossible; ``tail`` is
    the (maybe refreshed) tail position.
    """
    length = np.int64(get_int32_acquire(buf, record_index + RECORD_LENGTH_OFFSET))
    if length <= 0:
        return np.int64(0), np.int64(0), tail
    if length < RECORD_HEADER_LENGTH or align(length, RECORD_ALIGNMENT) > capacity - record_index:
        return np.int64(CORRUPT_RECORD), np.int64(0), tail
    end_position = record_position + align(length, RECORD_ALIGNMENT)
    if end_position > tail:
        # A record committed after our first tail load is legal: its claim CAS precedes its length store.
        tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
        if end_position > tail:
            return np.int64(CORRUPT_RECORD), np.int64(0), tail
    msg_type_id = np.int64(get_int32(buf, record_index + RECORD_TYPE_OFFSET))
    if msg_type_id < 1 and msg_type_id != PADDING_MSG_TYPE_ID:
        return np.int64(CORRUPT_RECORD), np.int64(0), tail
    return length, msg_type_id, tail


@kernel
def _head_index(buf, capacity):
    """``(head, head_index)``, head_index = CORRUPT_RECORD if the stored head is not record-aligned."""
    # Relaxed: the consumer is the only writer of head_position.
    head = get_int64(buf, capacity + HEAD_POSITION_OFFSET)
    head_index = head & (capacity - 1)
    if head < 0 or (head_index & (RECORD_ALIGNMENT - 1)) != 0:
        return head, CORRUPT_RECORD
    return head, head_index


@kernel
def _consume(buf, capacity, head, head_index, bytes_read):
    """Zero the consumed bytes, then release-store the new head so producers may reuse them."""
    fill_bytes(buf, head_index, bytes_read, 0)
    put_int64_release(buf, capacity + HEAD_POSITION_OFFSET, head + bytes_read)


@kernel(READ_SIG)
def read(buf, capacity, handler, ctx, message_count_limit):
    """Deliver up to ``message_count_limit`` messages to a compiled handler, then consume them.

    Parameters
    ----------
    buf, capacity
        As for ``write``.
    handler : MessageHandler
        ``handler(ctx, msg_type_id, buf, body_offset, body_length)``; an ``@njit`` function.
    ctx : np.int64[::1]
        Passed through to the handler.
    message_count_limit : int
        Most messages to deliver (padding records are not counted).

    Returns
    -------
    int
        Messages delivered (>= 0). A negative code (``CORRUPT_RECORD``, ``INVALID_CAPACITY``) only when the
        very first record is garbage: nothing was delivered or consumed, and head stays on the bad record.
        A bad record after good ones ends the batch; the next call reports it.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    head, head_index = _head_index(buf, capacity)
    if head_index < 0:
        return head_index
    tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
    max_block_length = capacity - head_index
    bytes_read = 0
    messages_read = 0
    status = 0
    while bytes_read < max_block_length and messages_read < message_count_limit:
        record_index = head_index + bytes_read
        length, msg_type_id, tail = _record_at(buf, capacity, record_index, head + bytes_read, tail)
        if length <= 0:
            status = length
            break
        bytes_read += align(length, RECORD_ALIGNMENT)
        if msg_type_id == PADDING_MSG_TYPE_ID:
            continue
        handler(ctx, msg_type_id, buf, record_index + RECORD_HEADER_LENGTH, length - RECORD_HEADER_LENGTH)
        messages_read += 1

    if bytes_read > 0:
        _consume(buf, capacity, head, head_index, bytes_read)
    elif status < 0:
        return status
    return messages_read


@kernel
def read_descriptors(buf, capacity, descriptors, message_count_limit):
    """Batch path for Python: describe up to ``message_count_limit`` messages without consuming them.

    Row ``i`` of ``descriptors`` (int64, shape ``(n, DESCRIPTOR_FIELDS)``) gets the body offset in ``buf``,
    the body length and the msg_type_id. The bodies stay valid until ``consume(buf, capacity, bytes_read)``
    is called with the returned ``bytes_read`` (which includes skipped padding).

    Returns
    -------
    (int, int)
        ``(count, bytes_read)``; count is negative (``CORRUPT_RECORD``, ``INVALID_CAPACITY``,
        ``INVALID_LENGTH`` for a descriptors array that is too narrow) only when nothing was read.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY, 0
    if descriptors.shape[1] < DESCRIPTOR_FIELDS:
        return INVALID_LENGTH, 0
    head, head_index = _head_index(buf, capacity)
    if head_index < 0:
        return head_index, 0
    limit = min(message_count_limit, descriptors.shape[0])
    tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
    max_block_length = capacity - head_index
    bytes_read = 0
    count = 0
    status = 0
    while bytes_read < max_block_length and count < limit:
        record_index = head_index + bytes_read
        length, msg_type_id, tail = _record_at(buf, capacity, record_index, head + bytes_read, tail)
        if length <= 0:
            status = length
            break
        bytes_read += align(length, RECORD_ALIGNMENT)
        if msg_type_id == PADDING_MSG_TYPE_ID:
            continue
        descriptors[count, DESCRIPTOR_OFFSET] = record_index + RECORD_HEADER_LENGTH
        descriptors[count, DESCRIPTOR_LENGTH] = length - RECORD_HEADER_LENGTH
        descriptors[count, DESCRIPTOR_MSG_TYPE_ID] = msg_type_id
        count += 1

    if bytes_read == 0 and status < 0:
        return status, 0
    return count, bytes_read


@kernel
def consume(buf, capacity, bytes_read):
    """Zero ``bytes_read`` bytes from head and release-store ``head_position += bytes_read``.

    Returns 0, or ``INVALID_LENGTH`` if ``bytes_read`` is negative, unaligned or past the end of the buffer,
    ``CORRUPT_RECORD`` if the stored head is, ``INVALID_CAPACITY``.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    head, head_index = _head_index(buf, capacity)
    if head_index < 0:
        return head_index
    if bytes_read < 0 or bytes_read > capacity - head_index or (bytes_read & (RECORD_ALIGNMENT - 1)) != 0:
        return INVALID_LENGTH
    if bytes_read > 0:
        _consume(buf, capacity, head, head_index, bytes_read)
    return 0


@kernel
def _zeroed_back_to(buf, from_index, limit_index):
    """True if every record-aligned length slot in ``[limit_index, from_index)`` is still 0."""
    i = from_index - RECORD_ALIGNMENT
    while i >= limit_index:
        if get_int32_acquire(buf, i) != 0:
            return False
        i -= RECORD_ALIGNMENT
    return True


@kernel
def unblock(buf, capacity):
    """Free the consumer from a producer that died mid-write (Agrona ``unblock``), converting to padding.

    Two cases at head: a negative length (claimed, never committed) becomes a padding record of the same
    length; a 0 length (claimed by CAS, header never written) followed, after only zeros, by a non-zero
    slot becomes a padding record up to that slot. Call it only once the head has been stuck for longer
    than any live producer could take (the driver uses the client liveness timeout).

    Returns
    -------
    int
        1 if unblocked, 0 if nothing to do, ``CORRUPT_RECORD`` if head/tail or the length at head are
        impossible (nothing is written then), ``INVALID_CAPACITY``.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    head = get_int64_acquire(buf, capacity + HEAD_POSITION_OFFSET)
    tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
    if head == tail:
        return 0
    mask = capacity - 1
    consumer_index = head & mask
    producer_index = tail & mask
    if tail - head < 0 or tail - head > capacity or (consumer_index & (RECORD_ALIGNMENT - 1)) != 0:
        return CORRUPT_RECORD

    length = np.int64(get_int32_acquire(buf, consumer_index + RECORD_LENGTH_OFFSET))
    if length < 0:
        if -length < RECORD_HEADER_LENGTH or -length > capacity - consumer_index:
            return CORRUPT_RECORD
        put_int32(buf, consumer_index + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
        put_int32_release(buf, consumer_index + RECORD_LENGTH_OFFSET, -length)
        return 1
    if length == 0:
        limit = producer_index if producer_index > consumer_index else capacity
        i = consumer_index + RECORD_ALIGNMENT
        while i < limit:
            if get_int32_acquire(buf, i) != 0:
                # Re-check the hole: a slow (live) producer may have written its header meanwhile.
                if _zeroed_back_to(buf, i, consumer_index):
                    put_int32(buf, consumer_index + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
                    put_int32_release(buf, consumer_index + RECORD_LENGTH_OFFSET, i - consumer_index)
                    return 1
                return 0
            i += RECORD_ALIGNMENT
    return 0


@kernel
def skip_unreadable(buf, capacity):
    """Pad over the record at head that cannot be read, up to the next slot that looks like a record.

    For garbage a foreign process wrote where a record header should be, or a 0-length hole ``unblock``
    cannot prove dead: the record at head becomes one padding record ending at the first record-aligned slot
    that holds a plausible header (a positive length that fits and a non-zero type) or a record being
    written (a negative length that fits), else at the end of the readable region, so the commands behind
    it are still read. A record being written is never skipped.

    Returns
    -------
    int
        the bytes turned into padding (> 0), 0 if there was nothing to skip, ``CORRUPT_RECORD`` if the
        stored head is not record-aligned (nothing is written then), ``INVALID_CAPACITY``.
    """
    if _capacity_invalid(buf, capacity):
        return INVALID_CAPACITY
    head = get_int64_acquire(buf, capacity + HEAD_POSITION_OFFSET)
    tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
    head_index = head & (capacity - 1)
    if (head_index & (RECORD_ALIGNMENT - 1)) != 0:
        return CORRUPT_RECORD
    limit = head_index + min(max(tail - head, 0), capacity - head_index)
    slot = head_index + RECORD_ALIGNMENT
    while slot < limit:
        length = np.int64(get_int32_acquire(buf, slot + RECORD_LENGTH_OFFSET))
        if RECORD_HEADER_LENGTH <= -length <= limit - slot:
            break  # a producer is writing this record right now: stop before it
        if RECORD_HEADER_LENGTH <= length <= limit - slot and get_int32(buf, slot + RECORD_TYPE_OFFSET) != 0:
            break
        slot += RECORD_ALIGNMENT
    slot = min(slot, limit)
    if slot <= head_index:
        return 0
    put_int32(buf, head_index + RECORD_TYPE_OFFSET, PADDING_MSG_TYPE_ID)
    put_int32_release(buf, head_index + RECORD_LENGTH_OFFSET, slot - head_index)
    return slot - head_index


# --------------------------------------------------------------------------------------------------- trailer


@kernel
def consumer_heartbeat_time(buf, capacity):
    """Epoch ms of the consumer's (driver conductor's) last heartbeat (acquire)."""
    return get_int64_acquire(buf, capacity + CONSUMER_HEARTBEAT_OFFSET)


@kernel
def set_consumer_heartbeat_time(buf, capacity, time_ms):
    """Release-store the consumer heartbeat (epoch ms): clients judge driver liveness by it."""
    put_int64_release(buf, capacity + CONSUMER_HEARTBEAT_OFFSET, time_ms)


@kernel
def producer_position(buf, capacity):
    """Tail position: bytes ever claimed by producers (acquire)."""
    return get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)


@kernel
def consumer_position(buf, capacity):
    """Head position: bytes ever consumed (acquire)."""
    return get_int64_acquire(buf, capacity + HEAD_POSITION_OFFSET)


@kernel
def size(buf, capacity):
    """Bytes claimed but not yet consumed, clamped to ``[0, capacity]``.

    Head is loaded before and after tail until it is stable, so the pair is consistent.
    """
    head_offset = capacity + HEAD_POSITION_OFFSET
    head_after = get_int64_acquire(buf, head_offset)
    while True:
        head_before = head_after
        tail = get_int64_acquire(buf, capacity + TAIL_POSITION_OFFSET)
        head_after = get_int64_acquire(buf, head_offset)
        if head_after == head_before:
            break
    used = tail - head_after
    if used < 0:
        return 0
    if used > capacity:
        return capacity
    return used


# --------------------------------------------------------------------------------------------------- Python role


def _status_error(status: int, msg_type_id: int, length: int, max_length: int) -> AeronError:
    if status == INVALID_MSG_TYPE_ID:
        return ConfigurationError(f"msg_type_id={msg_type_id} must be >= 1 and <= {INT32_MAX}")
    if status == MSG_TOO_LONG:
        return ConfigurationError(f"length={length} > max_msg_length={max_length}")
    if status == INVALID_LENGTH:
        return ConfigurationError(f"length={length} must be >= 0 and the source range inside the source buffer")
    if status == CORRUPT_RECORD:
        return LayoutError("ring buffer is corrupt: its tail or a record holds values no producer could have "
                           "written (CORRUPT_RECORD)")
    return AeronError(f"ring buffer status {status}")


def _as_bytes(src) -> np.ndarray:
    if isinstance(src, np.ndarray):
        if src.dtype != np.uint8 or src.ndim != 1:
            raise ConfigurationError(f"src dtype={src.dtype} ndim={src.ndim}: need a 1-D np.uint8 array")
        return np.ascontiguousarray(src)
    return np.frombuffer(bytes(src), dtype=np.uint8)


class HeadRepair(NamedTuple):
    """What the consumer did to a head it could not read past (``repaired`` is False when nothing)."""

    position: int  #: head position of the repaired record
    unblocked: bool = False  #: a dead producer's claim became padding (Agrona ``unblock``): no garbage seen
    skipped_length: int = 0  #: else the bytes of unreadable garbage padded over

    @property
    def repaired(self) -> bool:
        return self.unblocked or self.skipped_length > 0


_HEAD_WORD, _TAIL_WORD = HEAD_POSITION_OFFSET // 8, TAIL_POSITION_OFFSET // 8


class ManyToOneRingBuffer:
    """Producers' and consumer's view of one to-driver ring buffer (Agrona ``ManyToOneRingBuffer``).

    ``buffer`` is a ``np.uint8`` view of exactly ``capacity + TRAILER_LENGTH`` bytes (e.g. the to-driver
    section of cnc.dat). Every method is one kernel call (``read_messages`` of an empty buffer none); ``read``
    with a compiled handler and ``read_messages`` (copies, for Python callers) are the two consumer paths. A
    consumer that cannot read past its head repairs it here (``skip_unreadable_record``, ``unblock_or_skip``)
    and is told what was done, to record it.
    """

    def __init__(self, buffer: np.ndarray):
        if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
            raise ConfigurationError("ring buffer must be a 1-D np.uint8 array")
        self.capacity = check_capacity(buffer.shape[0])
        self.max_msg_length = max_msg_length(self.capacity)
        self.buffer = buffer
        self._descriptors = np.zeros((0, DESCRIPTOR_FIELDS), dtype=np.int64)
        # Head and tail seen from Python: a consumer with nothing to read makes no kernel call (an idle driver
        # reads its empty command buffer every duty cycle; a call to compiled code from a cold cache is costly).
        self._trailer_words = buffer[self.capacity:].view(np.int64)

    def _check(self, msg_type_id: int, length: int) -> None:
        status = _check_message(self.buffer, self.capacity, msg_type_id, length)
        if status != 0:
            raise _status_error(status, msg_type_id, length, self.max_msg_length)

    def write(self, msg_type_id: int, src, src_offset: int = 0, length: int | None = None) -> bool:
        """Write one message; False when the buffer is full. Raises ``ConfigurationError`` on bad input."""
        data = _as_bytes(src)
        if length is None:
            length = data.shape[0] - src_offset
        self._check(msg_type_id, length)
        if src_offset < 0 or src_offset + length > data.shape[0]:
            raise ConfigurationError(
                f"src_offset={src_offset} + length={length} outside src of length={data.shape[0]}"
            )
        status = write(self.buffer, self.capacity, msg_type_id, data, src_offset, length)
        if status == INSUFFICIENT_CAPACITY:
            return False
        if status < 0:
            raise _status_error(status, msg_type_id, length, self.max_msg_length)
        return True

    def try_claim(self, msg_type_id: int, length: int) -> int:
        """Body index to write ``length`` bytes at, or ``INSUFFICIENT_CAPACITY`` when full."""
        self._check(msg_type_id, length)
        return try_claim(self.buffer, self.capacity, msg_type_id, length)

    def _finish_claim(self, kernel_fn, index: int, action: str) -> None:
        status = kernel_fn(self.buffer, self.capacity, index)
        if status == INVALID_INDEX:
            raise ConfigurationError(f"index={index} is not a claimed body index in capacity={self.capacity}")
        if status == CLAIM_NOT_ACTIVE:
            raise AeronError(f"cannot {action} index={index}: claim already committed or aborted")

    def commit(self, index: int) -> None:
        self._finish_claim(commit, index, "commit")

    def abort(self, index: int) -> None:
        self._finish_claim(abort, index, "abort")

    def read(self, handler, ctx: np.ndarray, message_count_limit: int = 2**31 - 1) -> int:
        """Deliver messages to a compiled ``MessageHandler``; returns the count or a negative status."""
        return read(self.buffer, self.capacity, handler, ctx, message_count_limit)

    def read_messages(self, message_count_limit: int = 1024) -> list[tuple[int, bytes]] | int:
        """Copy out and consume up to ``message_count_limit`` messages as ``(msg_type_id, body)``.

        Returns the list, or a negative status (``CORRUPT_RECORD``) when the record at head is garbage.
        """
        # Head == tail: nothing claimed, nothing to read (a stale tail only defers the read to the next call).
        if self._trailer_words[_HEAD_WORD] == self._trailer_words[_TAIL_WORD]:
            return []
        if self._descriptors.shape[0] < message_count_limit:
            self._descriptors = np.zeros((message_count_limit, DESCRIPTOR_FIELDS), dtype=np.int64)
        count, bytes_read = read_descriptors(self.buffer, self.capacity, self._descriptors, message_count_limit)
        if count < 0:
            return int(count)  # a plain int status also when the kernel runs as Python (NUMBA_DISABLE_JIT)
        buf = self.buffer
        messages = [
            (int(type_id), bytes(buf[offset : offset + length]))
            for offset, length, type_id in self._descriptors[:count].tolist()
        ]
        consume(self.buffer, self.capacity, bytes_read)
        return messages

    def next_record_word_offsets(self) -> tuple[int, int]:
        """Consumer side: byte offsets of the tail (a producer claims) and of the head, whose record's header
        changes when its producer commits (or pads to the end), for a consumer waiting on them in compiled code:
        the header at ``head % capacity`` (``IdleWatch.watch_frame_at``)."""
        return self.capacity + TAIL_POSITION_OFFSET, self.capacity + HEAD_POSITION_OFFSET

    def unblock(self) -> bool:
        return unblock(self.buffer, self.capacity) == 1

    def skip_unreadable_record(self) -> HeadRepair:
        """Consumer side: pad over the unreadable record at head (see ``skip_unreadable``)."""
        position = self.consumer_position()
        skipped = skip_unreadable(self.buffer, self.capacity)
        return HeadRepair(position, skipped_length=max(int(skipped), 0))

    def unblock_or_skip(self) -> HeadRepair:
        """Consumer side, for a head stuck longer than any live producer takes: free a dead producer's
        claim as Agrona's ``unblock`` does, else pad over the garbage at head."""
        position = self.consumer_position()
        if self.unblock():
            return HeadRepair(position, unblocked=True)
        return self.skip_unreadable_record()

    def trailer_problem(self) -> str | None:
        """Why the head and tail are positions no producer or consumer stores (garbage in the file), or None.

        Head is read before tail, so live values never show head > tail; a consumer moving head between the
        two reads could make tail - head look larger than the capacity, so a problem must be seen twice.
        """
        problem = None
        for _ in range(2):
            head = int(self._trailer_words[_HEAD_WORD])
            tail = int(self._trailer_words[_TAIL_WORD])
            if head < 0 or tail < 0 or (head | tail) & (RECORD_ALIGNMENT - 1):
                problem = f"head={head} tail={tail} must be non-negative multiples of {RECORD_ALIGNMENT}"
            elif head > tail:
                problem = f"head={head} > tail={tail}"
            elif tail - head > self.capacity:
                problem = f"tail={tail} - head={head} > capacity={self.capacity}"
            else:
                return None
        return problem

    def next_correlation_id(self) -> int:
        return next_correlation_id(self.buffer, self.capacity)

    def consumer_heartbeat_time(self) -> int:
        return consumer_heartbeat_time(self.buffer, self.capacity)

    def set_consumer_heartbeat_time(self, time_ms: int) -> None:
        set_consumer_heartbeat_time(self.buffer, self.capacity, time_ms)

    def producer_position(self) -> int:
        return producer_position(self.buffer, self.capacity)

    def consumer_position(self) -> int:
        return consumer_position(self.buffer, self.capacity)

    def size(self) -> int:
        return size(self.buffer, self.capacity)
