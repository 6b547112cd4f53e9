"""Reading a log: deliver whole fragments, skip padding, stop at the first incomplete frame (spec §5).

A read starts at a stream position and never crosses a term boundary in one call; the next call
continues in the next partition. Frame lengths are acquire-loaded: a writer publishes a frame by
release-storing its positive length last (§4.3), so everything before it is visible once we see it.

A frame length that does not fit in the rest of the term (garbage written by a broken process) is
treated like an incomplete frame: the read stops before it and never touches memory past the term.
So is a frame whose term id is not the term being read: a reader that fell a whole lap behind (a
subscriber the driver has already timed out and stopped waiting for) would otherwise deliver the data
of a later term that reuses the partition.

Compiled callers pass a ``FragmentHandler`` (see ``kernels/handlers.py``); Python callers use the
``*_batch`` kernels, which describe up to ``limit`` fragments in an array for one call.
"""

from numba import types

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.handlers import FragmentHandler
from aeron_numba.kernels.term_appender import log_initial_term_id, log_term_length
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import FRAME_ALIGNMENT, HDR_TYPE_PAD, HEADER_LENGTH, TERM_ID_FIELD_OFFSET, TYPE_FIELD_OFFSET
from aeron_numba.kernels.position import index_by_position, position_bits_to_shift, to_int32

# Columns of the fragment descriptor array filled by the batch readers.
FRAGMENT_FRAME_OFFSET = 0  # absolute offset of the frame header in the log buffer
FRAGMENT_FRAME_LENGTH = 1  # frame length (header + payload)
FRAGMENT_POSITION = 2  # stream position just after this fragment
FRAGMENT_COLUMNS = 3

_READ_SIG = types.UniTuple(types.int64, 2)(
    types.uint8[::1], types.int64, types.int64, types.int64, types.int64, types.int64, FragmentHandler,
    types.int64[::1],
)


@kernel(inline="always")
def _is_padding(log, frame_offset):
    return (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD


@kernel(inline="always")
def _frame_fits(frame_length, offset, term_length):
    return frame_length >= HEADER_LENGTH and offset + align(frame_length, FRAME_ALIGNMENT) <= term_length


@kernel(inline="always")
def _is_frame_of_term(log, frame_offset, term_id):
    return atomics.get_int32(log, frame_offset + TERM_ID_FIELD_OFFSET) == term_id


@kernel(inline="always")
def _term_id_of(log, term_begin_position, term_length):
    return to_int32(log_initial_term_id(log) + (term_begin_position >> position_bits_to_shift(term_length)))


@kernel(_READ_SIG, inline="always")  # inlined, as the offers are (term_appender.concurrent_offer says why)
def read(log, term_base, term_offset, term_length, term_id, fragments_limit, handler, ctx):
    """Deliver up to ``fragments_limit`` fragments of the term at ``term_base`` from ``term_offset``.

    Parameters
    ----------
    log : uint8[::1]
        The log buffer file.
    term_base : int
        Byte offset of the term (partition index * term length).
    term_offset, term_length : int
        Where to start in the term, and the term length.
    term_id : int
        The term being read: a frame carrying another term id ends the read.
    fragments_limit : int
        Most fragments to deliver (padding frames do not count).
    handler : FragmentHandler
        ``handler(ctx, log, payload_offset, payload_length)``; the header is at ``payload_offset - 32``.
    ctx : int64[::1]
        Passed through to the handler.

    Returns
    -------
    (fragments_read, new_term_offset)
    """
    fragments_read = 0
    offset = term_offset
    while fragments_read < fragments_limit and offset < term_length:
        frame_offset = term_base + offset
        frame_length = atomics.get_int32_acquire(log, frame_offset)
        if frame_length <= 0 or not _frame_fits(frame_length, offset, term_length):
            break
        if not _is_frame_of_term(log, frame_offset, term_id):
            break
        offset += align(frame_length, FRAME_ALIGNMENT)
        if not _is_padding(log, frame_offset):
            handler(ctx, log, frame_offset + HEADER_LENGTH, frame_length - HEADER_LENGTH)
            fragments_read += 1
    return fragments_read, offset


@kernel
def read_batch(log, term_base, term_offset, term_length, term_begin_position, out):
    """Describe up to ``len(out)`` fragments in ``out`` (columns ``FRAGMENT_*``) without a handler.

    Returns ``(fragments_read, new_term_offset)``. Positions in ``out`` let a caller that stops early
    resume exactly after the last fragment it handled.
    """
    fragments_limit = out.shape[0]
    fragments_read = 0
    offset = term_offset
    term_id = _term_id_of(log, term_begin_position, term_length)
    while fragments_read < fragments_limit and offset < term_length:
        frame_offset = term_base + offset
        frame_length = atomics.get_int32_acquire(log, frame_offset)
        if frame_length <= 0 or not _frame_fits(frame_length, offset, term_length):
            break
        if not _is_frame_of_term(log, frame_offset, term_id):
            break
        offset += align(frame_length, FRAME_ALIGNMENT)
        if not _is_padding(log, frame_offset):
            out[fragments_read, FRAGMENT_FRAME_OFFSET] = frame_offset
            out[fragments_read, FRAGMENT_FRAME_LENGTH] = frame_length
            out[fragments_read, FRAGMENT_POSITION] = term_begin_position + offset
            fragments_read += 1
    return fragments_read, offset


_POLL_SIG = types.int64(
    types.uint8[::1], types.uint8[::1], types.int64, types.int64, FragmentHandler, types.int64[::1]
)


@kernel(_POLL_SIG, inline="always")  # inlined, as read is
def image_poll(log, position_buf, position_offset, fragments_limit, handler, ctx):
    """Image poll (§5): read from the subscriber position, then release-store the new position.

    ``position_buf[position_offset]`` is this subscriber's ``sub-pos`` counter (only this subscriber
    writes it; the driver reads it for flow control). Returns the number of fragments delivered.
    """
    position = atomics.get_int64(position_buf, position_offset)
    term_length = log_term_length(log)
    shift = position_bits_to_shift(term_length)
    term_offset = position & (term_length - 1)
    term_base = index_by_position(position, shift) * term_length
    term_id = _term_id_of(log, position - term_offset, term_length)
    fragments_read, new_offset = read(log, term_base, term_offset, term_length, term_id, fragments_limit, handler, ctx)
    if new_offset > term_offset:
        atomics.put_int64_release(position_buf, position_offset, position + (new_offset - term_offset))
    return fragments_read


@kernel
def image_poll_batch(log, position, out):
    """Python-side poll: describe up to ``len(out)`` fragments from ``position``; returns
    ``(fragments_read, new_position)``. The caller release-stores the position after handling them."""
    term_length = log_term_length(log)
    shift = position_bits_to_shift(term_length)
    term_offset = position & (term_length - 1)
    term_base = index_by_position(position, shift) * term_length
    fragments_read, new_offset = read_batch(log, term_base, term_offset, term_length, position - term_offset, out)
    return fragments_read, position + (new_offset - term_offset)
