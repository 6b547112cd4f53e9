"""The compiled half of a Python caller's poll (``client/image.py``): describe fragments from a subscriber position,
copy them into the image's private buffer, then check that the ``sub-pos`` counter is still ours, all in one call.

Why a copy and the ownership check: see ``client/image.py``. Compiled callers read the log in place with
``term_reader.image_poll`` instead.
"""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.position import index_by_position, position_bits_to_shift
from aeron_numba.kernels.term_appender import log_term_length
from aeron_numba.kernels.term_reader import image_poll_batch
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import frame

_HEADER_LENGTH = frame.HEADER_LENGTH
_FRAME_ALIGNMENT = frame.FRAME_ALIGNMENT
_METADATA_LENGTH = counters_layout.METADATA_LENGTH
_STATE_OFFSET = counters_layout.METADATA_STATE_OFFSET
_ALLOCATED = counters_layout.RECORD_ALLOCATED
_COUNTER_LENGTH = counters_layout.COUNTER_LENGTH
_REGISTRATION_ID_OFFSET = counters_layout.COUNTER_REGISTRATION_ID_OFFSET
_COUNTER_VALUE_OFFSET = counters_layout.COUNTER_VALUE_OFFSET



#: ``poll_and_copy`` results that deliver nothing.
NOT_OWNED = -1  # our sub-pos counter was freed: the driver dropped this subscriber, the copy may be stale
COPY_TOO_SMALL = -2  # the batch does not fit the private buffer: grow it to ``result[RESULT_WANTED]`` bytes, poll again
#: ``poll_and_copy``'s ``result`` slots.
RESULT_END = 0  # position after the batch
RESULT_START = 1  # position before it
RESULT_WANTED = 2  # private buffer length the batch needs (COPY_TOO_SMALL)
RESULT_NEXT_FRAME = 3  # the int32 slot of the log where the next frame's length will be
#: Two slots of ``result`` that ``poll_and_copy`` reads instead: the image's ``sub-pos`` counter id and its
#: subscription's registration id (set once; as arguments they would cost a conversion each per poll).
RESULT_COUNTER_ID = 4
RESULT_REGISTRATION_ID = 5
RESULT_LENGTH = 6


@kernel(inline="always")
def _owned(metadata, values, counter_id, registration_id):
    """Counter ``counter_id`` is still allocated to ``registration_id`` (the driver has not dropped us)."""
    return (atomics.get_int32_acquire(metadata, counter_id * _METADATA_LENGTH + _STATE_OFFSET) == _ALLOCATED
            and atomics.get_int64_acquire(values, counter_id * _COUNTER_LENGTH + _REGISTRATION_ID_OFFSET)
            == registration_id)


@kernel(inline="always")
def _subscriber(result):
    """``(counter_id, registration_id, position_offset)`` of our ``sub-pos`` counter, from ``result``'s two
    id slots."""
    counter_id = result[RESULT_COUNTER_ID]
    return counter_id, result[RESULT_REGISTRATION_ID], counter_id * _COUNTER_LENGTH + _COUNTER_VALUE_OFFSET


@kernel(inline="always")
def _frame_slot(log, position):
    """Index, in the log as int32s, of the length field of the frame at ``position`` (``Image.poll``'s peek)."""
    term_length = log_term_length(log)
    term_base = index_by_position(position, position_bits_to_shift(term_length)) * term_length
    return (term_base + (position & (term_length - 1))) >> 2


@kernel(nogil=False)
def poll_and_copy(log, position_buffer, out, scratch, metadata, result, consume_single):
    """One Python poll's compiled work, in one call: describe up to ``len(out)`` fragments from our ``sub-pos``
    (counter ``result[RESULT_COUNTER_ID]``), copy them (one contiguous run of the term) into ``scratch``, then
    check that the counter is still allocated to ``result[RESULT_REGISTRATION_ID]``. With ``consume_single`` a
    batch of one fragment is consumed here too (its position stored): the handler reads the copy, and a fragment
    whose handler raises counts as consumed anyway.

    Returns the fragment count, 0 when there is none (a padding frame skipped is stored here at once),
    ``NOT_OWNED`` or ``COPY_TOO_SMALL``. For a count > 0, ``result`` holds the positions before and after the
    batch and the rows of ``out`` become (payload offset in ``scratch``, payload length, position after the
    fragment). ``result[RESULT_NEXT_FRAME]``, the slot of the log that Python's peek reads (``_frame_slot``), is
    moved here wherever this call stores the position (a lone fragment consumed, a padding frame skipped); for
    a batch the caller moves it when it stores the position (``Image._store_position``).

    The acquire fence keeps the state loads after the copy's loads; the driver frees the counter (a release
    store) before it cleans or lets a publisher reuse anything this subscriber had not consumed.
    """
    counter_id, registration_id, position_offset = _subscriber(result)
    position = atomics.get_int64_acquire(position_buffer, position_offset)
    count, new_position = image_poll_batch(log, position, out)
    if count == 0:
        if new_position > position:  # past a padding frame
            store_position_if_owned(metadata, position_buffer, counter_id, registration_id, new_position)
            result[RESULT_NEXT_FRAME] = _frame_slot(log, new_position)
        return 0
    start = out[0, 0]
    length = out[count - 1, 0] + align(out[count - 1, 1], _FRAME_ALIGNMENT) - start
    if length > scratch.shape[0]:
        result[RESULT_WANTED] = length
        return COPY_TOO_SMALL
    copy_bytes(scratch, 0, log, start, length)
    atomics.acquire_fence()  # the ownership loads after the copy's loads
    if not _owned(metadata, position_buffer, counter_id, registration_id):
        return NOT_OWNED
    for i in range(count):
        out[i, 0] += _HEADER_LENGTH - start
        out[i, 1] -= _HEADER_LENGTH
    result[RESULT_START] = position
    result[RESULT_END] = new_position
    if consume_single and count == 1:
        atomics.put_int64_release(position_buffer, position_offset, new_position)
        result[RESULT_NEXT_FRAME] = _frame_slot(log, new_position)
    return count


@kernel(nogil=False)
def block_poll_and_copy(log, position_buffer, block_length_limit, scratch, metadata, result):
    """``block_poll``'s compiled work: whole frames from our ``sub-pos`` up to ``block_length_limit`` bytes, not
    past the term end (a PAD frame alone: ``term_scanner.scan_block``), copied into ``scratch`` and checked to be
    ours as in ``poll_and_copy`` (the same ``result`` slots). Returns the block length, 0, ``NOT_OWNED`` or
    ``COPY_TOO_SMALL``."""
    counter_id, registration_id, position_offset = _subscriber(result)
    position = atomics.get_int64_acquire(position_buffer, position_offset)
    term_length = log_term_length(log)
    term_offset = position & (term_length - 1)
    term_base = index_by_position(position, position_bits_to_shift(term_length)) * term_length
    limit_offset = min(term_length, term_offset + block_length_limit)
    length = scan_block(log, term_base, term_offset, limit_offset) - term_offset
    if length <= 0:
        return 0
    if length > scratch.shape[0]:
        result[RESULT_WANTED] = length
        return COPY_TOO_SMALL
    copy_bytes(scratch, 0, log, term_base + term_offset, length)
    atomics.acquire_fence()  # the ownership loads after the copy's loads
    if not _owned(metadata, position_buffer, counter_id, registration_id):
        return NOT_OWNED
    result[RESULT_START] = position
    result[RESULT_END] = position + length
    return length


@kernel(nogil=False)
def store_position_if_owned(metadata, values, counter_id, registration_id, position):
    """Release-store the subscriber position unless the driver freed (and maybe re-used) the counter."""
    if _owned(metadata, values, counter_id, registration_id):
        atomics.put_int64_release(values, counter_id * _COUNTER_LENGTH, position)
