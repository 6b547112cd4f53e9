"""Walking the frames of a recorded segment file (spec/archive.md §3.2 fix-up, §4.2): where do the whole
frames a recording wrote end? Used when an archive restarts over a recording that was active when it died.
And the recorder's side of its image: where the next block lies in the image's log (``record_block_extent``),
and handing it back once written (``commit_record_block``), so a block goes from the log to the segment file
in one write, without a private copy."""

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.counters import get_counter_registration_id, get_counter_state
from aeron_numba.kernels.term_appender import log_term_length
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout.counters import RECORD_ALLOCATED
from aeron_numba.kernels.position import index_by_position, position_bits_to_shift
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import (
    END_FRAG_FLAG,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
)


@kernel
def frame_header_sane(segment, offset, end, expected_term_offset):
    """True when the frame at ``offset`` has a length of at least a header, its aligned end inside ``end``, type
    DATA or PAD and (unless ``expected_term_offset`` is negative) that value in its term offset field: the one
    header check of the archive's recovery walk and the Spark scan."""
    frame_length = np.int64(atomics.get_int32(segment, offset))
    if frame_length < HEADER_LENGTH or offset + align(frame_length, FRAME_ALIGNMENT) > end:
        return False
    frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
    if frame_type != HDR_TYPE_DATA and frame_type != HDR_TYPE_PAD:
        return False
    return expected_term_offset < 0 or \
        np.int64(atomics.get_int32(segment, offset + TERM_OFFSET_FIELD_OFFSET)) == expected_term_offset


@kernel
def recorded_frames_end(segment, offset, segment_base_position, term_length):
    """Offset in ``segment`` just after the last whole frame from ``offset`` on: the walk stops at the first frame
    that is not ``frame_header_sane`` where it lies in its term (a zero or garbage header)."""
    end = segment.shape[0]
    mask = term_length - 1
    while offset + HEADER_LENGTH <= end:
        if not frame_header_sane(segment, offset, end, (segment_base_position + offset) & mask):
            break
        offset += align(np.int64(atomics.get_int32(segment, offset)), FRAME_ALIGNMENT)
    return offset


@kernel
def whole_messages_length(buffer, offset, length):
    """Length of the block's prefix that ends with a whole message (its last frame carries the END flag), or
    the whole block when its first message does not end in it (a message longer than one read)."""
    end = 0
    at = offset
    stop = offset + length
    while at < stop:
        aligned = align(np.int64(atomics.get_int32(buffer, at)), FRAME_ALIGNMENT)
        if aligned <= 0:
            break
        if (buffer[at + FLAGS_FIELD_OFFSET] & END_FRAG_FLAG) != 0:
            end = at + aligned - offset
        at += aligned
    return end if end > 0 else length


# record_block_extent's ``extent`` slots
EXTENT_LOG_OFFSET = 0  # where the block starts in the log
EXTENT_END_POSITION = 1  # the stream position after it


@kernel
def record_block_extent(log, position_buffer, position_offset, block_length_limit, extent):
    """The next block a recorder writes from its image (Aeron ``Image.blockPoll``): whole frames from the
    subscriber position (``position_buffer[position_offset]``) up to ``block_length_limit`` bytes, never past
    the term end, a PAD frame alone (``term_scanner.scan_block``). Returns its length (0: nothing new), with
    its log offset and end position in ``extent``. The caller writes ``log[offset:offset+length]`` straight
    from the log, then ``commit_record_block`` checks that the log was still the image's while it did."""
    position = atomics.get_int64_acquire(position_buffer, position_offset)
    term_length = log_term_length(log)
    term_offset = position & (term_length - 1)
    term_base = index_by_position(position, position_bits_to_shift(term_length)) * term_length
    length = scan_block(log, term_base, term_offset, min(term_length, term_offset + block_length_limit)) - term_offset
    if length <= 0:
        return 0
    extent[EXTENT_LOG_OFFSET] = term_base + term_offset
    extent[EXTENT_END_POSITION] = position + length
    return length


@kernel
def commit_record_block(metadata, position_buffer, counter_id, registration_id, position_offset, position):
    """After a block was written from the log: if subscriber position counter ``counter_id`` is still allocated to
    ``registration_id``, release-store ``position`` into it and return True. False means the driver dropped the
    image (and may have let the publisher reuse the log) before the write had read it: the write may hold torn
    frames and must be undone. The acquire loads of the check stay after the write's loads (the write is a
    system call, and Client.Image's ``block_poll_and_copy`` makes the same check after its copy)."""
    atomics.acquire_fence()
    if get_counter_state(metadata, counter_id) != RECORD_ALLOCATED or \
            get_counter_registration_id(position_buffer, counter_id) != registration_id:
        return False
    atomics.put_int64_release(position_buffer, position_offset, position)
    return True
