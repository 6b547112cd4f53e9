"""Appending messages to a log buffer: concurrent and exclusive publications (spec/transport.md §3.1, §4).

All kernels take ``log``, the ``np.uint8`` view of a whole ``*.logbuffer`` file; term ``i`` starts at
``i * term_length`` and the metadata is the last 4096 bytes (§2). Constants of the log (term length,
initial term id, mtu, session and stream ids) are read from the metadata, which the driver wrote before
any client mapped the file, so they need no ordering.

Concurrent publications (many processes share one log) reserve space with a get-and-add on the raw tail
of the active partition (§4.2). Exclusive publications have a single writer that keeps its position in
``pub_state`` and release-stores the tail before writing (§4.6). Both write frames the same way (§4.3):
negative length first, header, payload, then the positive length with release order as the publish point.

Return values follow Aeron: a new stream position (> 0) or a negative status of ``layout.publication_status``.
"""


from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes, prefetch_for_write
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import (
    CURRENT_VERSION,
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    RESERVED_VALUE_OFFSET,
    SESSION_ID_FIELD_OFFSET,
    STREAM_ID_FIELD_OFFSET,
    TERM_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
    UNFRAGMENTED,
    MAX_MESSAGE_LENGTH_LIMIT,
)
from aeron_numba.layout.log_buffer_descriptor import (
    LOG_ACTIVE_TERM_COUNT_OFFSET,
    LOG_DEFAULT_FRAME_HEADER_OFFSET,
    LOG_INITIAL_TERM_ID_OFFSET,
    LOG_IS_CONNECTED_OFFSET,
    LOG_META_DATA_LENGTH,
    LOG_MTU_LENGTH_OFFSET,
    LOG_TERM_LENGTH_OFFSET,
    PARTITION_COUNT,
    TERM_TAIL_COUNTER_LENGTH,
    TERM_TAIL_COUNTERS_OFFSET,
)
from aeron_numba.kernels.position import (
    compute_position,
    compute_term_begin_position,
    max_possible_position,
    pack_tail,
    position_bits_to_shift,
    raw_tail_term_id,
    raw_tail_term_offset,
    to_int32,
)
from aeron_numba.layout.publication_status import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    CLAIM_FRAME_LENGTH,
    CLAIM_FRAME_OFFSET,
    CLOSED,
    ERROR,
    MAX_POSITION_EXCEEDED,
    NOT_CONNECTED,
    PUB_STATE_CLOSED,
    PUB_STATE_LIMIT_COUNTER_OFFSET,
    PUB_STATE_PARTITION_INDEX,
    PUB_STATE_TERM_BEGIN_POSITION,
    PUB_STATE_TERM_ID,
    PUB_STATE_TERM_OFFSET,
)

_FLAGS_SHIFT = 40
_TYPE_SHIFT = 48
_VERSION_SHIFT = 32


# ----------------------------------------------------------------------------------------------------------
# Metadata accessors (immutable fields, relaxed loads suffice).


@kernel
def metadata_offset(log):
    return log.size - LOG_META_DATA_LENGTH


@kernel
def tail_counter_offset(log, partition_index):
    return log.size - LOG_META_DATA_LENGTH + TERM_TAIL_COUNTERS_OFFSET + partition_index * TERM_TAIL_COUNTER_LENGTH


@kernel
def log_term_length(log):
    return atomics.get_int32(log, log.size - LOG_META_DATA_LENGTH + LOG_TERM_LENGTH_OFFSET)


@kernel
def log_initial_term_id(log):
    return atomics.get_int32(log, log.size - LOG_META_DATA_LENGTH + LOG_INITIAL_TERM_ID_OFFSET)


@kernel
def log_mtu_length(log):
    return atomics.get_int32(log, log.size - LOG_META_DATA_LENGTH + LOG_MTU_LENGTH_OFFSET)


@kernel
def log_session_id(log):
    return atomics.get_int32(
        log, log.size - LOG_META_DATA_LENGTH + LOG_DEFAULT_FRAME_HEADER_OFFSET + SESSION_ID_FIELD_OFFSET
    )


@kernel
def log_stream_id(log):
    return atomics.get_int32(
        log, log.size - LOG_META_DATA_LENGTH + LOG_DEFAULT_FRAME_HEADER_OFFSET + STREAM_ID_FIELD_OFFSET
    )


@kernel
def max_message_length(term_length):
    """``min(term_length / 8, 16 MiB)`` (§1.3)."""
    limit = term_length >> 3
    return limit if limit < MAX_MESSAGE_LENGTH_LIMIT else MAX_MESSAGE_LENGTH_LIMIT


@kernel
def fragmented_length(length, max_payload):
    """Term space of a message split into ``max_payload`` fragments (§1.4)."""
    full = length // max_payload
    remainder = length - full * max_payload
    last = align(remainder + HEADER_LENGTH, FRAME_ALIGNMENT) if remainder > 0 else 0
    return full * (max_payload + HEADER_LENGTH) + last


# ----------------------------------------------------------------------------------------------------------
# Frame writing (§4.3).


@kernel
def write_header(log, frame_offset, frame_length, term_offset, term_id, session_id, stream_id, flags, frame_type):
    """Steps 1-2 of §4.3: release-store the negative length (with version, flags and type), then the ids.

    Same bytes as Aeron's three 64-bit stores; the release order keeps the negative length ahead of the
    header fields for a reader that races us.
    """
    first_word = (
        ((-frame_length) & 0xFFFF_FFFF)
        | (CURRENT_VERSION << _VERSION_SHIFT)
        | ((flags & 0xFF) << _FLAGS_SHIFT)
        | ((frame_type & 0xFFFF) << _TYPE_SHIFT)
    )
    atomics.put_int64_release(log, frame_offset, first_word)
    atomics.release_fence()
    atomics.put_int64(
        log, frame_offset + TERM_OFFSET_FIELD_OFFSET, (term_offset & 0xFFFF_FFFF) | (session_id << 32)
    )
    atomics.put_int64(log, frame_offset + STREAM_ID_FIELD_OFFSET, (stream_id & 0xFFFF_FFFF) | (term_id << 32))


@kernel
def write_padding(log, frame_offset, padding_length, term_offset, term_id, session_id, stream_id):
    """A PAD frame covering ``padding_length`` bytes, published with a release store (§1.5)."""
    write_header(log, frame_offset, padding_length, term_offset, term_id, session_id, stream_id, UNFRAGMENTED, HDR_TYPE_PAD)
    atomics.put_int32_release(log, frame_offset, padding_length)


@kernel(inline="always")  # the offers' hot path: inlined with them (see concurrent_offer)
def _write_unfragmented(log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, reserved_value):
    frame_offset = term_base + term_offset
    frame_length = length + HEADER_LENGTH
    write_header(log, frame_offset, frame_length, term_offset, term_id, session_id, stream_id, UNFRAGMENTED, HDR_TYPE_DATA)
    payload = frame_offset + HEADER_LENGTH
    copy_bytes(log, payload, src, src_offset, length)
    atomics.put_int64(log, frame_offset + RESERVED_VALUE_OFFSET, reserved_value)
    atomics.put_int32_release(log, frame_offset, frame_length)


@kernel
def _write_fragmented(
    log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, max_payload, reserved_value
):
    """Consecutive fragments BEGIN, middle..., END of one message, each published on its own (§1.4)."""
    remaining = length
    offset = term_offset
    flags = BEGIN_FRAG_FLAG
    while True:
        bytes_to_write = remaining if remaining < max_payload else max_payload
        frame_length = bytes_to_write + HEADER_LENGTH
        if bytes_to_write == remaining:
            flags |= END_FRAG_FLAG
        frame_offset = term_base + offset
        write_header(log, frame_offset, frame_length, offset, term_id, session_id, stream_id, flags, HDR_TYPE_DATA)
        payload = frame_offset + HEADER_LENGTH
        start = src_offset + (length - remaining)
        copy_bytes(log, payload, src, start, bytes_to_write)
        atomics.put_int64(log, frame_offset + RESERVED_VALUE_OFFSET, reserved_value)
        atomics.put_int32_release(log, frame_offset, frame_length)
        flags = 0
        offset += align(frame_length, FRAME_ALIGNMENT)
        remaining -= bytes_to_write
        if remaining <= 0:
            break


# ----------------------------------------------------------------------------------------------------------
# Rotation (§3.1).


@kernel
def rotate_log(log, current_term_count, current_term_id):
    """Move the log to the next term: CAS the next partition's tail to ``next_term_id << 32``, then CAS
    ``active_term_count``. Safe to race: the loser sees the term id already changed. Returns True if this
    call advanced ``active_term_count``."""
    next_term_id = to_int32(current_term_id + 1)
    next_term_count = to_int32(current_term_count + 1)
    next_index = next_term_count % PARTITION_COUNT
    expected_term_id = to_int32(next_term_id - PARTITION_COUNT)
    tail_offset = tail_counter_offset(log, next_index)
    new_raw_tail = pack_tail(next_term_id, 0)
    while True:
        raw_tail = atomics.get_int64_acquire(log, tail_offset)
        if raw_tail_term_id(raw_tail) != expected_term_id:
            break
        if atomics.compare_and_set_int64(log, tail_offset, raw_tail, new_raw_tail):
            break
    return atomics.compare_and_set_int32(
        log, metadata_offset(log) + LOG_ACTIVE_TERM_COUNT_OFFSET, current_term_count, next_term_count
    )


@kernel
def _back_pressure_status(log, current_position, message_length, term_length):
    """NOT_CONNECTED / BACK_PRESSURED at the limit, or MAX_POSITION_EXCEEDED near the end of the stream (§4.5)."""
    if current_position + message_length >= max_possible_position(term_length):
        return MAX_POSITION_EXCEEDED
    if atomics.get_int32_acquire(log, metadata_offset(log) + LOG_IS_CONNECTED_OFFSET) == 1:
        return BACK_PRESSURED
    return NOT_CONNECTED


# ----------------------------------------------------------------------------------------------------------
# Concurrent publication (§4.1, §4.2, §4.4).


@kernel
def _concurrent_claim(log, aligned_length, term_length, initial_term_id, shift, session_id, stream_id, index):
    """Reserve ``aligned_length`` bytes with get-and-add on the partition's raw tail.

    Returns ``(position, term_offset, term_id)``; ``position`` <= 0 is a status after a trip (§4.4).
    """
    raw_tail = atomics.get_and_add_int64(log, tail_counter_offset(log, index), aligned_length)
    term_id = raw_tail_term_id(raw_tail)
    term_offset = raw_tail & 0xFFFF_FFFF
    resulting_offset = term_offset + aligned_length
    position = compute_position(term_id, resulting_offset, shift, initial_term_id)
    if resulting_offset > term_length:
        # Trip: the writer that crossed the end pads the rest of the term; everyone rotates (§4.4).
        if term_offset < term_length:
            write_padding(
                log, index * term_length + term_offset, term_length - term_offset, term_offset, term_id, session_id, stream_id
            )
        if position >= max_possible_position(term_length):
            return MAX_POSITION_EXCEEDED, term_offset, term_id
        rotate_log(log, to_int32(term_id - initial_term_id), term_id)
        return ADMIN_ACTION, term_offset, term_id
    return position, term_offset, term_id


#: How far past its own frame a concurrent append asks for the log's next cache line for writing. The
#: get-and-add on the tail (a locked instruction) waits until the previous append's stores are in the cache,
#: so without it every append waits out the miss on its frame's line: 32-byte messages went from about 26 to
#: 38 M msgs/s between two processes (distances of 0, 192, 448 and 960 bytes measured: 192 was best).
PREFETCH_DISTANCE = 192


@kernel
def _concurrent_prepare(log, pub_state, limit_buf):
    """§4.1 checks 1-5: returns ``(status_or_position, limit, index)``; status < 0 means stop."""
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED, 0, 0
    limit = atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])
    meta = metadata_offset(log)
    term_count = atomics.get_int32_acquire(log, meta + LOG_ACTIVE_TERM_COUNT_OFFSET)
    index = term_count % PARTITION_COUNT
    raw_tail = atomics.get_int64_acquire(log, tail_counter_offset(log, index))
    term_length = log_term_length(log)
    initial_term_id = log_initial_term_id(log)
    term_id = raw_tail_term_id(raw_tail)
    if term_count != to_int32(term_id - initial_term_id):
        return ADMIN_ACTION, limit, index  # rotation in progress
    position = compute_position(
        term_id, raw_tail_term_offset(raw_tail, term_length), position_bits_to_shift(term_length), initial_term_id
    )
    return position, limit, index


# The two offers (with _write_unfragmented) and term_reader.image_poll / read are inlined into their compiled
# callers: a call between kernels passes every array as its seven fields, mostly on the stack. Inlined, the
# compiled round trip went from 311 to about 285 ns and 32-byte concurrent throughput from about 50 to 70 M
# msgs/s.
@kernel(inline="always")
def concurrent_offer(log, pub_state, limit_buf, src, src_offset, length, reserved_value):
    """Offer ``src[src_offset:src_offset+length]`` to a log shared by many publishers (§4.1, §4.2).

    Parameters
    ----------
    log : uint8[::1]
        The whole log buffer file.
    pub_state : int64[::1]
        Publication state (``layout.publication_status.PUB_STATE_*``): closed flag and the byte offset of the
        ``pub-lmt`` counter value in ``limit_buf``.
    limit_buf : uint8[::1]
        Buffer holding the publication limit (the counters values section).
    src, src_offset, length : uint8[::1], int, int
        The message; longer than ``mtu - 32`` it is fragmented (§1.4).
    reserved_value : int
        Written into each frame's reserved value field.

    Returns
    -------
    int
        New stream position (> 0), or NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION, CLOSED,
        MAX_POSITION_EXCEEDED, or ERROR when ``length`` is negative or over the max message length.
    """
    position, limit, index = _concurrent_prepare(log, pub_state, limit_buf)
    if position < 0:
        return position
    term_length = log_term_length(log)
    max_payload = log_mtu_length(log) - HEADER_LENGTH
    if length < 0 or (length > max_payload and length > max_message_length(term_length)):
        return ERROR
    if position >= limit:
        return _back_pressure_status(log, position, align(length + HEADER_LENGTH, FRAME_ALIGNMENT), term_length)
    initial_term_id = log_initial_term_id(log)
    shift = position_bits_to_shift(term_length)
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    if length <= max_payload:
        aligned_length = align(length + HEADER_LENGTH, FRAME_ALIGNMENT)
    else:
        aligned_length = fragmented_length(length, max_payload)
    result, term_offset, term_id = _concurrent_claim(
        log, aligned_length, term_length, initial_term_id, shift, session_id, stream_id, index
    )
    if result <= 0:
        return result
    term_base = index * term_length
    prefetch_for_write(log, term_base + term_offset + aligned_length + PREFETCH_DISTANCE)
    if length <= max_payload:
        _write_unfragmented(log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, reserved_value)
    else:
        _write_fragmented(
            log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, max_payload, reserved_value
        )
    return result


@kernel
def concurrent_try_claim(log, pub_state, limit_buf, length, claim):
    """Claim an unfragmented frame of ``length`` payload bytes (``length <= mtu - 32``) for in-place writing.

    On success fills ``claim`` (``CLAIM_FRAME_OFFSET``, ``CLAIM_FRAME_LENGTH``) and returns the new position;
    the frame is published by ``commit`` or turned into padding by ``abort``. Returns a status otherwise.
    """
    position, limit, index = _concurrent_prepare(log, pub_state, limit_buf)
    if position < 0:
        return position
    term_length = log_term_length(log)
    if length < 0 or length > log_mtu_length(log) - HEADER_LENGTH:
        return ERROR
    aligned_length = align(length + HEADER_LENGTH, FRAME_ALIGNMENT)
    if position >= limit:
        return _back_pressure_status(log, position, aligned_length, term_length)
    initial_term_id = log_initial_term_id(log)
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    result, term_offset, term_id = _concurrent_claim(
        log, aligned_length, term_length, initial_term_id, position_bits_to_shift(term_length), session_id, stream_id, index
    )
    if result <= 0:
        return result
    frame_offset = index * term_length + term_offset
    prefetch_for_write(log, frame_offset + aligned_length + PREFETCH_DISTANCE)
    frame_length = length + HEADER_LENGTH
    write_header(log, frame_offset, frame_length, term_offset, term_id, session_id, stream_id, UNFRAGMENTED, HDR_TYPE_DATA)
    atomics.put_int64(log, frame_offset + RESERVED_VALUE_OFFSET, 0)
    claim[CLAIM_FRAME_OFFSET] = frame_offset
    claim[CLAIM_FRAME_LENGTH] = frame_length
    return result


@kernel
def commit_claim(log, claim):
    """Publish a claimed frame: release-store its positive length (§4.3 step 6)."""
    atomics.put_int32_release(log, claim[CLAIM_FRAME_OFFSET], claim[CLAIM_FRAME_LENGTH])


@kernel
def abort_claim(log, claim):
    """Turn a claimed frame into padding so readers skip it (§4.3)."""
    frame_offset = claim[CLAIM_FRAME_OFFSET]
    atomics.put_int16(log, frame_offset + TYPE_FIELD_OFFSET, HDR_TYPE_PAD)
    atomics.put_int32_release(log, frame_offset, claim[CLAIM_FRAME_LENGTH])


# ----------------------------------------------------------------------------------------------------------
# Exclusive publication (§4.6).


@kernel
def exclusive_init_state(log, pub_state):
    """Load the writer-private position fields from the log metadata (when the publication is created)."""
    term_length = log_term_length(log)
    term_count = atomics.get_int32_acquire(log, metadata_offset(log) + LOG_ACTIVE_TERM_COUNT_OFFSET)
    index = term_count % PARTITION_COUNT
    raw_tail = atomics.get_int64_acquire(log, tail_counter_offset(log, index))
    term_id = raw_tail_term_id(raw_tail)
    pub_state[PUB_STATE_TERM_ID] = term_id
    pub_state[PUB_STATE_TERM_OFFSET] = raw_tail_term_offset(raw_tail, term_length)
    pub_state[PUB_STATE_TERM_BEGIN_POSITION] = compute_term_begin_position(
        term_id, position_bits_to_shift(term_length), log_initial_term_id(log)
    )
    pub_state[PUB_STATE_PARTITION_INDEX] = index


@kernel
def _exclusive_rotate(log, pub_state, term_length, initial_term_id):
    """Single-writer rotation: plain store of the next tail, release-store of active_term_count (§3.1)."""
    next_index = (pub_state[PUB_STATE_PARTITION_INDEX] + 1) % PARTITION_COUNT
    next_term_id = to_int32(pub_state[PUB_STATE_TERM_ID] + 1)
    term_count = to_int32(next_term_id - initial_term_id)
    pub_state[PUB_STATE_PARTITION_INDEX] = next_index
    pub_state[PUB_STATE_TERM_ID] = next_term_id
    pub_state[PUB_STATE_TERM_OFFSET] = 0
    pub_state[PUB_STATE_TERM_BEGIN_POSITION] += term_length
    atomics.put_int64(log, tail_counter_offset(log, next_index), pack_tail(next_term_id, 0))
    atomics.put_int32_release(log, metadata_offset(log) + LOG_ACTIVE_TERM_COUNT_OFFSET, term_count)


@kernel
def _exclusive_trip(log, pub_state, term_base, term_offset, term_length, term_id, session_id, stream_id):
    """End of term for the single writer: pad the rest of the term, then rotate (§4.6 step 3)."""
    if term_offset < term_length:
        write_padding(log, term_base + term_offset, term_length - term_offset, term_offset, term_id, session_id, stream_id)
    # The spec's §4.6 writes '>' but the sum can never exceed the max; '>=' is what stops a rotation
    # into term count 2^31 (which would wrap).
    if pub_state[PUB_STATE_TERM_BEGIN_POSITION] + term_length >= max_possible_position(term_length):
        return MAX_POSITION_EXCEEDED
    _exclusive_rotate(log, pub_state, term_length, log_initial_term_id(log))
    return ADMIN_ACTION


@kernel(inline="always")  # see concurrent_offer
def exclusive_offer(log, pub_state, limit_buf, src, src_offset, length, reserved_value):
    """Offer a message from the single writer of an exclusive publication (§4.6).

    Same parameters and return values as ``concurrent_offer``; ``pub_state`` also holds the writer's
    term id, term offset, term begin position and partition index (``exclusive_init_state``).
    """
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED
    limit = atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])
    term_length = log_term_length(log)
    max_payload = log_mtu_length(log) - HEADER_LENGTH
    if length < 0 or (length > max_payload and length > max_message_length(term_length)):
        return ERROR
    term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    term_begin_position = pub_state[PUB_STATE_TERM_BEGIN_POSITION]
    position = term_begin_position + term_offset
    if position >= limit:
        return _back_pressure_status(log, position, length, term_length)
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    if length <= max_payload:
        aligned_length = align(length + HEADER_LENGTH, FRAME_ALIGNMENT)
    else:
        aligned_length = fragmented_length(length, max_payload)
    term_id = pub_state[PUB_STATE_TERM_ID]
    index = pub_state[PUB_STATE_PARTITION_INDEX]
    resulting_offset = term_offset + aligned_length
    # The tail is published before the frame is written, so the driver sees the claim (§4.6 step 2).
    atomics.put_int64_release(log, tail_counter_offset(log, index), pack_tail(term_id, resulting_offset))
    term_base = index * term_length
    if resulting_offset > term_length:
        return _exclusive_trip(log, pub_state, term_base, term_offset, term_length, term_id, session_id, stream_id)
    if length <= max_payload:
        _write_unfragmented(log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, reserved_value)
    else:
        _write_fragmented(
            log, term_base, term_offset, term_id, session_id, stream_id, src, src_offset, length, max_payload, reserved_value
        )
    pub_state[PUB_STATE_TERM_OFFSET] = resulting_offset
    return term_begin_position + resulting_offset


@kernel(inline="always")
def _is_byte_range(src, src_offset, length):
    """``src[src_offset:src_offset + length]`` is inside ``src``, a contiguous array of bytes."""
    return (src.itemsize == 1 and src.strides[0] == 1
            and src_offset >= 0 and length >= 0 and src_offset <= src.shape[0] - length)


# The entries Publication.offer calls from Python. They take any 1-D byte array (the client binds them with
# layout "A"), so that Python need not check a message's strides and dtype per call (about 50 ns), and check
# the range themselves: ERROR, with nothing appended, for a range outside src, bytes that are not contiguous
# or a message over the max message length. They pass reserved value 0: fewer arguments to convert.
@kernel(nogil=False)
def exclusive_offer_message(log, pub_state, limit_buf, src):
    """``exclusive_offer`` of the whole of ``src`` (reserved value 0), from Python."""
    if not _is_byte_range(src, 0, src.shape[0]):
        return ERROR
    return exclusive_offer(log, pub_state, limit_buf, src, 0, src.shape[0], 0)


@kernel(nogil=False)
def concurrent_offer_message(log, pub_state, limit_buf, src):
    """``concurrent_offer`` of the whole of ``src`` (reserved value 0), from Python."""
    if not _is_byte_range(src, 0, src.shape[0]):
        return ERROR
    return concurrent_offer(log, pub_state, limit_buf, src, 0, src.shape[0], 0)


@kernel(nogil=False)
def exclusive_offer_range(log, pub_state, limit_buf, src, src_offset, length):
    """``exclusive_offer`` of ``src[src_offset:src_offset + length]`` (reserved value 0), from Python."""
    if not _is_byte_range(src, src_offset, length):
        return ERROR
    return exclusive_offer(log, pub_state, limit_buf, src, src_offset, length, 0)


@kernel(nogil=False)
def concurrent_offer_range(log, pub_state, limit_buf, src, src_offset, length):
    """``concurrent_offer`` of ``src[src_offset:src_offset + length]`` (reserved value 0), from Python."""
    if not _is_byte_range(src, src_offset, length):
        return ERROR
    return concurrent_offer(log, pub_state, limit_buf, src, src_offset, length, 0)


@kernel
def exclusive_offer_block(log, pub_state, limit_buf, src, src_offset, length):
    """Append a block of whole, already framed frames (a replay, §4.6 ``offer_block``) at the writer's term
    offset. The block must start with a DATA frame carrying this term offset, session id, stream id and term
    id, and fit in the rest of the term; otherwise ``ERROR`` and nothing is written (``block_error`` says
    which). The block's first frame length is release-stored last, so readers see the block whole.

    Returns the new position, or CLOSED, NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION (the term was full:
    rotated, retry), MAX_POSITION_EXCEEDED or ERROR.
    """
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED
    term_length = log_term_length(log)
    term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    term_id = pub_state[PUB_STATE_TERM_ID]
    if term_offset >= term_length:  # the last block filled the term: rotate first
        return _exclusive_trip(log, pub_state, pub_state[PUB_STATE_PARTITION_INDEX] * term_length, term_offset,
                               term_length, term_id, log_session_id(log), log_stream_id(log))
    limit = atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])
    term_begin_position = pub_state[PUB_STATE_TERM_BEGIN_POSITION]
    position = term_begin_position + term_offset
    if position >= limit:
        return _back_pressure_status(log, position, length, term_length)
    if block_error(log, pub_state, src, src_offset, length) != 0:
        return ERROR
    index = pub_state[PUB_STATE_PARTITION_INDEX]
    resulting_offset = term_offset + length
    atomics.put_int64_release(log, tail_counter_offset(log, index), pack_tail(term_id, resulting_offset))
    frame_offset = index * term_length + term_offset
    first_frame_length = atomics.get_int32(src, src_offset)
    copy_bytes(log, frame_offset + 4, src, src_offset + 4, length - 4)
    atomics.put_int32_release(log, frame_offset, first_frame_length)
    pub_state[PUB_STATE_TERM_OFFSET] = resulting_offset
    return term_begin_position + resulting_offset


#: ``block_error`` results: what is wrong with a block offered with ``exclusive_offer_block``.
BLOCK_OK = 0
BLOCK_BAD_LENGTH = 1  # not a positive multiple of 32 fitting in the rest of the term, or outside src
BLOCK_NOT_DATA = 2  # the first frame is not a DATA frame
BLOCK_WRONG_TERM_OFFSET = 3
BLOCK_WRONG_SESSION_ID = 4
BLOCK_WRONG_STREAM_ID = 5
BLOCK_WRONG_TERM_ID = 6


@kernel
def block_error(log, pub_state, src, src_offset, length):
    """``BLOCK_OK`` if ``src[src_offset:src_offset+length]`` may be appended by ``exclusive_offer_block`` now."""
    term_length = log_term_length(log)
    term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    if length < HEADER_LENGTH or length % FRAME_ALIGNMENT != 0 or term_offset + length > term_length or \
            src_offset < 0 or src_offset + length > src.shape[0]:
        return BLOCK_BAD_LENGTH
    if (atomics.get_int16(src, src_offset + TYPE_FIELD_OFFSET) & 0xFFFF) != HDR_TYPE_DATA:
        return BLOCK_NOT_DATA
    if atomics.get_int32(src, src_offset + TERM_OFFSET_FIELD_OFFSET) != term_offset:
        return BLOCK_WRONG_TERM_OFFSET
    if atomics.get_int32(src, src_offset + SESSION_ID_FIELD_OFFSET) != log_session_id(log):
        return BLOCK_WRONG_SESSION_ID
    if atomics.get_int32(src, src_offset + STREAM_ID_FIELD_OFFSET) != log_stream_id(log):
        return BLOCK_WRONG_STREAM_ID
    if atomics.get_int32(src, src_offset + TERM_ID_FIELD_OFFSET) != pub_state[PUB_STATE_TERM_ID]:
        return BLOCK_WRONG_TERM_ID
    return BLOCK_OK


@kernel
def exclusive_append_padding(log, pub_state, limit_buf, length):
    """Append a PAD frame of ``length`` payload bytes (a replayed padding frame): frame length ``length + 32``,
    aligned like any frame. Returns the new position or a status as ``exclusive_offer``."""
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED
    term_length = log_term_length(log)
    if length < 0 or length > max_message_length(term_length):
        return ERROR
    limit = atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])
    term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    term_begin_position = pub_state[PUB_STATE_TERM_BEGIN_POSITION]
    position = term_begin_position + term_offset
    if position >= limit:
        return _back_pressure_status(log, position, length, term_length)
    term_id = pub_state[PUB_STATE_TERM_ID]
    index = pub_state[PUB_STATE_PARTITION_INDEX]
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    frame_length = length + HEADER_LENGTH
    resulting_offset = term_offset + align(frame_length, FRAME_ALIGNMENT)
    atomics.put_int64_release(log, tail_counter_offset(log, index), pack_tail(term_id, resulting_offset))
    term_base = index * term_length
    if resulting_offset > term_length:
        return _exclusive_trip(log, pub_state, term_base, term_offset, term_length, term_id, session_id, stream_id)
    write_padding(log, term_base + term_offset, frame_length, term_offset, term_id, session_id, stream_id)
    pub_state[PUB_STATE_TERM_OFFSET] = resulting_offset
    return term_begin_position + resulting_offset


@kernel
def exclusive_try_claim(log, pub_state, limit_buf, length, claim):
    """``try_claim`` for an exclusive publication; see ``concurrent_try_claim``."""
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED
    limit = atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])
    term_length = log_term_length(log)
    if length < 0 or length > log_mtu_length(log) - HEADER_LENGTH:
        return ERROR
    term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    term_begin_position = pub_state[PUB_STATE_TERM_BEGIN_POSITION]
    position = term_begin_position + term_offset
    if position >= limit:
        return _back_pressure_status(log, position, length, term_length)
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    term_id = pub_state[PUB_STATE_TERM_ID]
    index = pub_state[PUB_STATE_PARTITION_INDEX]
    resulting_offset = term_offset + align(length + HEADER_LENGTH, FRAME_ALIGNMENT)
    atomics.put_int64_release(log, tail_counter_offset(log, index), pack_tail(term_id, resulting_offset))
    term_base = index * term_length
    if resulting_offset > term_length:
        return _exclusive_trip(log, pub_state, term_base, term_offset, term_length, term_id, session_id, stream_id)
    frame_offset = term_base + term_offset
    frame_length = length + HEADER_LENGTH
    write_header(log, frame_offset, frame_length, term_offset, term_id, session_id, stream_id, UNFRAGMENTED, HDR_TYPE_DATA)
    atomics.put_int64(log, frame_offset + RESERVED_VALUE_OFFSET, 0)
    claim[CLAIM_FRAME_OFFSET] = frame_offset
    claim[CLAIM_FRAME_LENGTH] = frame_length
    pub_state[PUB_STATE_TERM_OFFSET] = resulting_offset
    return term_begin_position + resulting_offset


@kernel
def producer_position(log):
    """Position of the active partition's tail: what the driver publishes as ``pub-pos`` (§3)."""
    term_length = log_term_length(log)
    term_count = atomics.get_int32_acquire(log, metadata_offset(log) + LOG_ACTIVE_TERM_COUNT_OFFSET)
    raw_tail = atomics.get_int64_acquire(log, tail_counter_offset(log, term_count % PARTITION_COUNT))
    return compute_position(
        raw_tail_term_id(raw_tail),
        raw_tail_term_offset(raw_tail, term_length),
        position_bits_to_shift(term_length),
        log_initial_term_id(log),
    )
