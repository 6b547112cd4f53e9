"""Unblocking a log whose publisher died mid-claim (spec/transport.md §15.1).

A concurrent publisher that dies between its get-and-add on the tail and the release-store of the frame
length leaves a hole: a negative length (it had started the header) or zeros (it had not). Readers stop
at the hole, so subscribers, and after them every other publisher, block. The driver fills the hole with
a PAD frame once the consumer position has not moved for the unblock timeout. If the dead writer's claim
crossed the end of the term and nobody rotated, the driver rotates the log too.
"""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.term_appender import (
    log_initial_term_id,
    log_session_id,
    log_stream_id,
    log_term_length,
    metadata_offset,
    rotate_log,
    tail_counter_offset,
    write_padding,
)
from aeron_numba.layout.frame import FRAME_ALIGNMENT
from aeron_numba.layout.log_buffer_descriptor import LOG_ACTIVE_TERM_COUNT_OFFSET, PARTITION_COUNT
from aeron_numba.kernels.position import (
    compute_term_id_from_position,
    position_bits_to_shift,
    raw_tail_term_id,
    raw_tail_term_offset,
    to_int32,
)

NO_ACTION = 0
UNBLOCKED = 1
UNBLOCKED_TO_END = 2


@kernel
def term_unblock(log, term_base, blocked_offset, tail_offset, term_id, term_length):
    """Pad over the hole at ``blocked_offset`` of one term (``term_base``), up to ``tail_offset``.

    Returns ``NO_ACTION``, ``UNBLOCKED`` or ``UNBLOCKED_TO_END`` (the hole reached the end of the term).
    """
    session_id = log_session_id(log)
    stream_id = log_stream_id(log)
    frame_length = atomics.get_int32_acquire(log, term_base + blocked_offset)
    if frame_length < 0:
        # The writer had started its header: its claimed length is known, pad exactly over it.
        write_padding(log, term_base + blocked_offset, -frame_length, blocked_offset, term_id, session_id, stream_id)
        return UNBLOCKED
    if frame_length > 0:
        return NO_ACTION
    # Zeros: find the next published frame after the hole; everything between must still be zero.
    offset = blocked_offset + FRAME_ALIGNMENT
    limit = tail_offset if tail_offset < term_length else term_length
    while offset < limit:
        if atomics.get_int32_acquire(log, term_base + offset) != 0:
            if _scan_is_zero(log, term_base, blocked_offset, offset):
                write_padding(
                    log, term_base + blocked_offset, offset - blocked_offset, blocked_offset, term_id, session_id, stream_id
                )
                return UNBLOCKED
            return NO_ACTION
        offset += FRAME_ALIGNMENT
    if offset >= term_length and atomics.get_int32_acquire(log, term_base + blocked_offset) == 0:
        write_padding(
            log, term_base + blocked_offset, term_length - blocked_offset, blocked_offset, term_id, session_id, stream_id
        )
        return UNBLOCKED_TO_END
    return NO_ACTION


@kernel
def _scan_is_zero(log, term_base, from_offset, to_offset):
    """Re-check the frame-length slots of the hole: a writer may have published into it meanwhile."""
    offset = from_offset
    while offset < to_offset:
        if atomics.get_int32_acquire(log, term_base + offset) != 0:
            return False
        offset += FRAME_ALIGNMENT
    return True


@kernel
def unblock(log, blocked_position):
    """Unblock the log at ``blocked_position`` (the consumer position that stopped moving).

    Returns True when something was unblocked (the caller counts "Unblocked Publications").
    """
    term_length = log_term_length(log)
    shift = position_bits_to_shift(term_length)
    initial_term_id = log_initial_term_id(log)
    blocked_term_count = to_int32(blocked_position >> shift)
    index = blocked_term_count % PARTITION_COUNT
    blocked_offset = blocked_position & (term_length - 1)
    active_term_count = atomics.get_int32_acquire(log, metadata_offset(log) + LOG_ACTIVE_TERM_COUNT_OFFSET)
    raw_tail = atomics.get_int64_acquire(log, tail_counter_offset(log, index))
    if active_term_count == blocked_term_count - 1 and blocked_offset == 0:
        # The previous term was filled but its writer died before rotating.
        active_index = active_term_count % PARTITION_COUNT
        active_raw_tail = atomics.get_int64_acquire(log, tail_counter_offset(log, active_index))
        rotate_log(log, active_term_count, raw_tail_term_id(active_raw_tail))
        return True
    term_id = compute_term_id_from_position(blocked_position, shift, initial_term_id)
    if raw_tail_term_id(raw_tail) != term_id:
        return False  # the partition has moved on: nothing of this term is blocked any more
    status = term_unblock(
        log, index * term_length, blocked_offset, raw_tail_term_offset(raw_tail, term_length), term_id, term_length
    )
    if status == UNBLOCKED_TO_END:
        rotate_log(log, blocked_term_count, term_id)
    return status != NO_ACTION
