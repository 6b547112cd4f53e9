"""Frame-block kernels of the Archive: record checksums and the replay rewrite (spec/archive.md §4.2-4.3, §6.3).

A *block* is a run of whole, 32-byte aligned frames as the recorder receives them from an image or as the
replayer reads them back from a segment file (``buf[offset:offset+length]``, both multiples of 32).

* :func:`record_checksums`: for each DATA frame, the checksum of the bytes after its 32-byte header up to the
  aligned frame end is stored in its ``session_id`` field (§4.3).
* :func:`replay_rewrite`: for each DATA frame, the stored checksum is verified (if an algorithm is given),
  then ``session_id`` and ``stream_id`` are overwritten with the replay publication's (§6.3); flags,
  reserved value and every other byte are preserved.
* :func:`replay_block`: a replay's whole duty cycle in one call: find the block in a mapped segment file,
  check it, and append it straight into the replay publication's log (one copy), rewriting the ids there
  before the block is published (Aeron reads into a replay buffer and offers it: two copies).

PAD frames are skipped by both (not checksummed, not rewritten). Frames are validated before use, so garbage
in the block yields a negative status (``layout/checksum.py``) and the offset of the offending frame in
``out``, never an out-of-bounds access. Frames before the offending one have already been processed, so a
caller may resume at ``out[REWRITE_OUT_OFFSET_INDEX]``: e.g. ``FRAME_PAST_END`` at a frame after the block
start is a read that cut the last frame short.

Header fields go through ``kernels.atomics`` (relaxed) because the block may be a mapping another process
writes; in plain Python (``py_func``, ``NUMBA_DISABLE_JIT=1``) the same helpers read the bytes directly.
"""

from __future__ import annotations

import numpy as np
from numba.extending import overload

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.crc32 import Crc32, as_byte_buffer, crc32_register, crc_to_int32
from aeron_numba.kernels.crc32c import Crc32c, crc32c_register
from aeron_numba.kernels.memory import copy_bytes, fill_bytes
from aeron_numba.kernels.term_appender import (
    _back_pressure_status,
    _exclusive_trip,
    exclusive_append_padding,
    log_session_id,
    log_stream_id,
    log_term_length,
    tail_counter_offset,
)
from aeron_numba.kernels.bits import align
from aeron_numba.layout.bits import INT32_MAX
from aeron_numba.layout.checksum import (
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    CHECKSUM_MISMATCH,
    CHECKSUM_NONE,
    CRC_INITIAL_VALUE,
    FRAME_PAST_END,
    INVALID_ARGUMENT,
    MALFORMED_FRAME,
    REWRITE_OUT_COMPUTED_INDEX,
    REWRITE_OUT_FRAME_LENGTH_INDEX,
    REWRITE_OUT_FRAME_TYPE_INDEX,
    REWRITE_OUT_LENGTH,
    REWRITE_OUT_OFFSET_INDEX,
    REWRITE_OUT_STORED_INDEX,
    check_checksum_algorithm,
)
from aeron_numba.layout.frame import (
    END_FRAG_FLAG,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    FRAME_LENGTH_FIELD_OFFSET,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    SESSION_ID_FIELD_OFFSET,
    STREAM_ID_FIELD_OFFSET,
    TERM_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
)
from aeron_numba.kernels.position import pack_tail
from aeron_numba.layout.publication_status import (
    CLOSED,
    PUB_STATE_CLOSED,
    PUB_STATE_LIMIT_COUNTER_OFFSET,
    PUB_STATE_PARTITION_INDEX,
    PUB_STATE_TERM_BEGIN_POSITION,
    PUB_STATE_TERM_ID,
    PUB_STATE_TERM_OFFSET,
)

# --- header field access: relaxed atomics when compiled, plain bytes in Python ----------------------------


def _get_int32(buf, offset):
    return int.from_bytes(buf[offset:offset + 4].tobytes(), "little", signed=True)


def _get_uint16(buf, offset):
    return int.from_bytes(buf[offset:offset + 2].tobytes(), "little", signed=False)


def _put_int32(buf, offset, value):
    buf[offset:offset + 4] = np.frombuffer((int(value) & 0xFFFFFFFF).to_bytes(4, "little"), dtype=np.uint8)


@overload(_get_int32, inline="always")
def _get_int32_compiled(buf, offset):
    def impl(buf, offset):
        return atomics.get_int32(buf, offset)

    return impl


@overload(_get_uint16, inline="always")
def _get_uint16_compiled(buf, offset):
    def impl(buf, offset):
        return np.int64(atomics.get_int16(buf, offset)) & 0xFFFF

    return impl


@overload(_put_int32, inline="always")
def _put_int32_compiled(buf, offset, value):
    if not buf.mutable:  # a read-only mapping would fault: refuse to compile instead
        return None

    def impl(buf, offset, value):
        atomics.put_int32(buf, offset, value)

    return impl


# --- kernels -----------------------------------------------------------------------------------------------


@kernel
def frame_checksum(algorithm, buf, offset, length):
    """Checksum of ``buf[offset:offset+length]`` (a checked range) with algorithm id ``algorithm``.

    Returns
    -------
    int64
        The signed i32 checksum for ``CHECKSUM_CRC32``/``CHECKSUM_CRC32C``, 0 for any other id.
    """
    if algorithm == CHECKSUM_CRC32C:
        return crc_to_int32(crc32c_register(CRC_INITIAL_VALUE, buf, offset, length) ^ CRC_INITIAL_VALUE)
    if algorithm == CHECKSUM_CRC32:
        return crc_to_int32(crc32_register(CRC_INITIAL_VALUE, buf, offset, length) ^ CRC_INITIAL_VALUE)
    return np.int64(0)


@kernel
def _check_block(buf, offset, length, algorithm, out):
    """Shared argument checks; writes the block offset to ``out`` and returns INVALID_ARGUMENT or 0."""
    if out.size < REWRITE_OUT_LENGTH:
        return INVALID_ARGUMENT
    out[REWRITE_OUT_OFFSET_INDEX] = offset
    out[REWRITE_OUT_COMPUTED_INDEX] = 0
    out[REWRITE_OUT_STORED_INDEX] = 0
    if offset < 0 or length < 0 or offset > buf.size - length:
        return INVALID_ARGUMENT
    if (offset & (FRAME_ALIGNMENT - 1)) != 0 or (length & (FRAME_ALIGNMENT - 1)) != 0:
        return INVALID_ARGUMENT
    if algorithm != CHECKSUM_NONE and algorithm != CHECKSUM_CRC32 and algorithm != CHECKSUM_CRC32C:
        return INVALID_ARGUMENT
    return 0


@kernel
def _frame_extent(buf, frame_offset, end, out):
    """Aligned length of the frame at ``frame_offset``, or a negative status with details in ``out``.

    ``frame_offset + HEADER_LENGTH <= end`` holds (32-aligned offsets below a 32-aligned end).
    """
    frame_length = np.int64(_get_int32(buf, frame_offset + FRAME_LENGTH_FIELD_OFFSET))
    frame_type = _get_uint16(buf, frame_offset + TYPE_FIELD_OFFSET)
    status = np.int64(0)
    if frame_length < HEADER_LENGTH or (frame_type != HDR_TYPE_DATA and frame_type != HDR_TYPE_PAD):
        status = MALFORMED_FRAME
    elif align(frame_length, FRAME_ALIGNMENT) > end - frame_offset:
        status = FRAME_PAST_END
    if status < 0:
        out[REWRITE_OUT_OFFSET_INDEX] = frame_offset
        out[REWRITE_OUT_FRAME_LENGTH_INDEX] = frame_length
        out[REWRITE_OUT_FRAME_TYPE_INDEX] = frame_type
        return status
    return align(frame_length, FRAME_ALIGNMENT)


@kernel
def replay_rewrite(buf, offset, length, session_id, stream_id, algorithm, out):
    """Verify (optionally) and rewrite the DATA frames of a recorded block for a replay publication (§6.3).

    Parameters
    ----------
    buf : uint8[::1]
        Buffer holding the block.
    offset, length : int64
        The block ``buf[offset:offset+length]``; both multiples of ``FRAME_ALIGNMENT``.
    session_id, stream_id : int64
        The replay publication's ids, written (as i32) into every DATA frame.
    algorithm : int64
        ``CHECKSUM_NONE`` (no verification), ``CHECKSUM_CRC32`` or ``CHECKSUM_CRC32C``: the record checksum
        stored in ``session_id`` is checked before it is overwritten.
    out : int64[REWRITE_OUT_LENGTH]
        On an error: [offset of the frame, computed checksum | frame_length, stored checksum | frame type].

    Returns
    -------
    int64
        ``length`` when the whole block was processed, else ``CHECKSUM_MISMATCH``, ``MALFORMED_FRAME``,
        ``FRAME_PAST_END`` (frames before ``out[0]`` are rewritten, the rest untouched) or
        ``INVALID_ARGUMENT`` (nothing touched).
    """
    status = _check_block(buf, offset, length, algorithm, out)
    if status < 0:
        return status
    end = offset + length
    frame_offset = offset
    while frame_offset < end:
        aligned_length = _frame_extent(buf, frame_offset, end, out)
        if aligned_length < 0:
            return aligned_length
        if _get_uint16(buf, frame_offset + TYPE_FIELD_OFFSET) == HDR_TYPE_DATA:
            if algorithm != CHECKSUM_NONE:
                computed = frame_checksum(
                    algorithm, buf, frame_offset + HEADER_LENGTH, aligned_length - HEADER_LENGTH
                )
                stored = np.int64(_get_int32(buf, frame_offset + SESSION_ID_FIELD_OFFSET))
                if computed != stored:
                    out[REWRITE_OUT_OFFSET_INDEX] = frame_offset
                    out[REWRITE_OUT_COMPUTED_INDEX] = computed
                    out[REWRITE_OUT_STORED_INDEX] = stored
                    return CHECKSUM_MISMATCH
            _put_int32(buf, frame_offset + SESSION_ID_FIELD_OFFSET, session_id)
            _put_int32(buf, frame_offset + STREAM_ID_FIELD_OFFSET, stream_id)
        frame_offset += aligned_length
    out[REWRITE_OUT_OFFSET_INDEX] = end
    return length


@kernel
def record_checksums(buf, offset, length, algorithm, out):
    """Store the record checksum of every DATA frame of a block in its ``session_id`` field (§4.3).

    Parameters
    ----------
    buf : uint8[::1]
    offset, length : int64
        The block ``buf[offset:offset+length]``; both multiples of ``FRAME_ALIGNMENT``.
    algorithm : int64
        ``CHECKSUM_CRC32`` or ``CHECKSUM_CRC32C``; ``CHECKSUM_NONE`` only validates the frames.
    out : int64[REWRITE_OUT_LENGTH]
        On an error: [offset of the frame, frame_length, frame type].

    Returns
    -------
    int64
        ``length``, or ``MALFORMED_FRAME`` / ``FRAME_PAST_END`` (frames before ``out[0]`` done) or
        ``INVALID_ARGUMENT``.
    """
    status = _check_block(buf, offset, length, algorithm, out)
    if status < 0:
        return status
    end = offset + length
    frame_offset = offset
    while frame_offset < end:
        aligned_length = _frame_extent(buf, frame_offset, end, out)
        if aligned_length < 0:
            return aligned_length
        if algorithm != CHECKSUM_NONE and _get_uint16(buf, frame_offset + TYPE_FIELD_OFFSET) == HDR_TYPE_DATA:
            checksum = frame_checksum(algorithm, buf, frame_offset + HEADER_LENGTH, aligned_length - HEADER_LENGTH)
            _put_int32(buf, frame_offset + SESSION_ID_FIELD_OFFSET, checksum)
        frame_offset += aligned_length
    out[REWRITE_OUT_OFFSET_INDEX] = end
    return length


#: ``replay_block`` results besides a position and the publication's statuses (NOT_CONNECTED .. ERROR, -1..-6);
#: details in ``out`` as for ``replay_rewrite``.
REPLAY_CHECKSUM_MISMATCH = -11
REPLAY_MALFORMED_FRAME = -12  # a frame other than DATA after the first (PAD frames end a block)
REPLAY_MISPLACED_BLOCK = -13  # the recorded frame is not where the publication is: [term offset, term id] in out
#: ``replay_block`` walks, copies and rewrites this much at a time (it stays in L1 between the three).
REPLAY_CHUNK_LENGTH = 16 * 1024


@kernel(inline="always")
def _erase_earlier_chunks(log, src, delta, chunk_start):
    """A refused frame in a later chunk: zero what the earlier chunks copied into the log (all of the block but
    the first frame's length, which was never written), so the term is left as it was."""
    fill_bytes(log, src + 4 + delta, chunk_start - src - 4 if chunk_start > src else 0, 0)


@kernel
def replay_block(segment, term_base, term_offset, limit_offset, log, pub_state, limit_buf, algorithm, out):
    """One replay duty cycle (§6.3): append the recorded frames at ``segment[term_base + term_offset:]`` straight
    into an exclusive replay publication's log, positioned where they were recorded.

    The block is the whole frames up to ``limit_offset`` (at most the term length: the caller's bound of
    replay buffer, limit position and term end), cut back to the end of its last whole message unless its
    first message does not end in it; a PAD frame comes alone and is appended as padding. In chunks of
    ``REPLAY_CHUNK_LENGTH``, DATA frames are checked (with ``algorithm``, their record checksum too), copied
    into the log after the publication's term offset (all but the first frame's length) and given the
    publication's session and stream ids there; then, as ``term_appender.exclusive_offer_block`` ends, the
    tail and at last the first frame's length are release-stored, so a subscriber sees the block whole and
    rewritten. Bytes copied but not published (an error, a cut) are zeroed again: the term stays clean.

    Parameters
    ----------
    segment : uint8[::1]
        A mapped segment file; ``term_base`` is where the term starts in it.
    term_offset, limit_offset : int64
        The replay position's offset in its term, and how far the block may reach in that term.
    log, pub_state, limit_buf :
        The replay publication's (``Publication.log_buffer``, ``pub_state``, ``limit_buffer``).
    algorithm : int64
        ``CHECKSUM_NONE``, ``CHECKSUM_CRC32`` or ``CHECKSUM_CRC32C`` (verify before the ids are overwritten).
    out : int64[REWRITE_OUT_LENGTH]
        On an error: [segment offset of the frame, computed checksum | frame length | term offset,
        stored checksum | frame type | term id].

    Returns
    -------
    int64
        The publication's new position; 0 when no whole frame is recorded there yet; the publication's
        statuses (BACK_PRESSURED, ADMIN_ACTION after a full term: retry, NOT_CONNECTED, CLOSED,
        MAX_POSITION_EXCEEDED); ``REPLAY_CHECKSUM_MISMATCH``, ``REPLAY_MALFORMED_FRAME`` or
        ``REPLAY_MISPLACED_BLOCK`` (nothing published).
    """
    if pub_state[PUB_STATE_CLOSED] != 0:
        return CLOSED
    term_length = log_term_length(log)
    pub_term_offset = pub_state[PUB_STATE_TERM_OFFSET]
    term_id = pub_state[PUB_STATE_TERM_ID]
    index = pub_state[PUB_STATE_PARTITION_INDEX]
    if pub_term_offset >= term_length:  # the last block filled the term: rotate first
        return _exclusive_trip(log, pub_state, index * term_length, pub_term_offset, term_length, term_id,
                               log_session_id(log), log_stream_id(log))
    term_begin_position = pub_state[PUB_STATE_TERM_BEGIN_POSITION]
    position = term_begin_position + pub_term_offset
    if position >= atomics.get_int64_acquire(limit_buf, pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET]):
        return _back_pressure_status(log, position, 0, term_length)
    src = term_base + term_offset
    end_limit = term_base + min(limit_offset, term_length)
    if src + HEADER_LENGTH > end_limit:
        return 0
    first_frame_length = np.int64(_get_int32(segment, src))
    if first_frame_length < HEADER_LENGTH or src + align(first_frame_length, FRAME_ALIGNMENT) > end_limit:
        return 0  # not recorded yet (or not whole below the limit)
    out[REWRITE_OUT_OFFSET_INDEX] = src
    if pub_term_offset != term_offset or _get_int32(segment, src + TERM_OFFSET_FIELD_OFFSET) != term_offset \
            or _get_int32(segment, src + TERM_ID_FIELD_OFFSET) != term_id:
        out[REWRITE_OUT_FRAME_LENGTH_INDEX] = _get_int32(segment, src + TERM_OFFSET_FIELD_OFFSET)
        out[REWRITE_OUT_FRAME_TYPE_INDEX] = _get_int32(segment, src + TERM_ID_FIELD_OFFSET)
        return REPLAY_MISPLACED_BLOCK
    if _get_uint16(segment, src + TYPE_FIELD_OFFSET) == HDR_TYPE_PAD:
        return exclusive_append_padding(log, pub_state, limit_buf, first_frame_length - HEADER_LENGTH)
    # One pass, a chunk at a time so the chunk is still in L1 when it is copied and rewritten: walk whole DATA
    # frames (checked, checksums verified), copy them into the log after the term offset (all but the first
    # frame's length), put the publication's ids into the copies. Nothing is visible until the release below.
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    delta = index * term_length + term_offset - src  # log offset = segment offset + delta
    at = src
    whole_end = np.int64(0)
    done = False
    while not done:
        chunk_start = at
        chunk_limit = min(end_limit, at + REPLAY_CHUNK_LENGTH)
        while at < chunk_limit:
            frame_length = np.int64(_get_int32(segment, at))
            aligned_length = align(frame_length, FRAME_ALIGNMENT)
            if frame_length < HEADER_LENGTH or at + aligned_length > end_limit:
                done = True  # not written yet, or past the limit
                break
            frame_type = _get_uint16(segment, at + TYPE_FIELD_OFFSET)
            if frame_type != HDR_TYPE_DATA:
                if frame_type == HDR_TYPE_PAD or whole_end > 0:
                    done = True  # a PAD frame comes in a block of its own; a bad frame is refused when it is next
                    break
                _erase_earlier_chunks(log, src, delta, chunk_start)
                out[REWRITE_OUT_OFFSET_INDEX] = at
                out[REWRITE_OUT_FRAME_LENGTH_INDEX] = frame_length
                out[REWRITE_OUT_FRAME_TYPE_INDEX] = frame_type
                return REPLAY_MALFORMED_FRAME
            if algorithm != CHECKSUM_NONE:
                computed = frame_checksum(algorithm, segment, at + HEADER_LENGTH, aligned_length - HEADER_LENGTH)
                stored = np.int64(_get_int32(segment, at + SESSION_ID_FIELD_OFFSET))
                if computed != stored:
                    if whole_end > 0:
                        done = True  # the whole messages before it go out first
                        break
                    _erase_earlier_chunks(log, src, delta, chunk_start)
                    out[REWRITE_OUT_OFFSET_INDEX] = at
                    out[REWRITE_OUT_COMPUTED_INDEX] = computed
                    out[REWRITE_OUT_STORED_INDEX] = stored
                    return REPLAY_CHECKSUM_MISMATCH
            if (segment[at + FLAGS_FIELD_OFFSET] & END_FRAG_FLAG) != 0:
                whole_end = at + aligned_length
            at += aligned_length
        if at >= end_limit:
            done = True
        if at > chunk_start:
            skip = 4 if chunk_start == src else 0  # the first frame's length goes in last
            copy_bytes(log, chunk_start + skip + delta, segment, chunk_start + skip, at - chunk_start - skip)
            frame_at = chunk_start
            while frame_at < at:
                _put_int32(log, frame_at + delta + SESSION_ID_FIELD_OFFSET, session_id)
                _put_int32(log, frame_at + delta + STREAM_ID_FIELD_OFFSET, stream_id)
                frame_at += align(np.int64(_get_int32(segment, frame_at)), FRAME_ALIGNMENT)
    end = at
    if whole_end > 0 and whole_end < end:  # cut back to the last whole message: the rest must not be reachable
        fill_bytes(log, whole_end + delta, end - whole_end, 0)
        end = whole_end
    resulting_offset = term_offset + (end - src)
    atomics.put_int64_release(log, tail_counter_offset(log, index), pack_tail(term_id, resulting_offset))
    atomics.put_int32_release(log, src + delta, first_frame_length)
    pub_state[PUB_STATE_TERM_OFFSET] = resulting_offset
    return term_begin_position + resulting_offset


# --- Python callers ------------------------------------------------------------------------------------------


def new_checksum(algorithm: int):
    """A :class:`Crc32` / :class:`Crc32c` for an algorithm id, ``None`` for ``CHECKSUM_NONE``."""
    check_checksum_algorithm(algorithm)
    if algorithm == CHECKSUM_CRC32:
        return Crc32()
    if algorithm == CHECKSUM_CRC32C:
        return Crc32c()
    return None


def _check_int32(name: str, value: int) -> None:
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise ConfigurationError(f"{name}={value} outside the i32 range [{-INT32_MAX - 1}, {INT32_MAX}]")


def _writable_buffer(buffer) -> np.ndarray:
    buf = as_byte_buffer(buffer)
    if not buf.flags.writeable:
        raise LayoutError(f"buffer of capacity={buf.size} is read-only: frames are rewritten in place")
    return buf


def _check_block_args(buf: np.ndarray, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > buf.size:
        raise ConfigurationError(f"offset={offset} + length={length} outside buffer capacity={buf.size}")
    if offset % FRAME_ALIGNMENT or length % FRAME_ALIGNMENT:
        raise ConfigurationError(
            f"offset={offset} and length={length} must be multiples of FRAME_ALIGNMENT={FRAME_ALIGNMENT}"
        )


class ReplayFrameRewriter:
    """Rewrites recorded blocks for one replay publication (the per-block step of Aeron's ``ReplaySession``).

    :meth:`rewrite` returns the kernel's status; after an error :attr:`error_offset` (and
    :attr:`computed_checksum` / :attr:`stored_checksum` for ``CHECKSUM_MISMATCH``) say where and why.
    """

    def __init__(self, session_id: int, stream_id: int, checksum_algorithm: int = CHECKSUM_NONE) -> None:
        _check_int32("session_id", session_id)
        _check_int32("stream_id", stream_id)
        self.session_id = session_id
        self.stream_id = stream_id
        self.checksum_algorithm = check_checksum_algorithm(checksum_algorithm)
        self._out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)

    def rewrite(self, buffer, offset: int, length: int) -> int:
        buf = _writable_buffer(buffer)
        _check_block_args(buf, offset, length)
        return int(
            replay_rewrite(buf, offset, length, self.session_id, self.stream_id, self.checksum_algorithm, self._out)
        )

    @property
    def error_offset(self) -> int:
        return int(self._out[REWRITE_OUT_OFFSET_INDEX])

    @property
    def computed_checksum(self) -> int:
        return int(self._out[REWRITE_OUT_COMPUTED_INDEX])

    @property
    def stored_checksum(self) -> int:
        return int(self._out[REWRITE_OUT_STORED_INDEX])


class RecordChecksumWriter:
    """Stores record checksums into the DATA frames of blocks before they are written (Aeron's
    ``RecordingWriter`` with a record checksum)."""

    def __init__(self, checksum_algorithm: int) -> None:
        self.checksum_algorithm = check_checksum_algorithm(checksum_algorithm)
        self._out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)

    def apply(self, buffer, offset: int, length: int) -> int:
        buf = _writable_buffer(buffer)
        _check_block_args(buf, offset, length)
        return int(record_checksums(buf, offset, length, self.checksum_algorithm, self._out))

    @property
    def error_offset(self) -> int:
        return int(self._out[REWRITE_OUT_OFFSET_INDEX])
