"""Walking the frames of a recorded segment file (spec/archive.md §3.2 fix-up, §4.2): where do the whole
frames a recording wrote end? Used when an archive restarts over a recording that was active when it died."""

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.layout.bits import align
from aeron_numba.layout.frame import (
    END_FRAG_FLAG,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    SESSION_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
)
from aeron_numba.kernels.replay_rewrite import frame_checksum


@kernel
def recorded_frames_end(segment, offset, segment_base_position, term_length):
    """Offset in ``segment`` just after the last whole frame from ``offset`` on.

    A frame counts when its length is at least a header, its aligned end lies inside the segment, its type is
    DATA or PAD and its term offset field is where it lies in its term (a zero or garbage header ends the walk).
    """
    end = segment.shape[0]
    mask = term_length - 1
    while offset + HEADER_LENGTH <= end:
        frame_length = np.int64(atomics.get_int32(segment, offset))
        if frame_length < HEADER_LENGTH:
            break
        aligned = align(frame_length, FRAME_ALIGNMENT)
        if offset + aligned > end:
            break
        frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
        if frame_type != HDR_TYPE_DATA and frame_type != HDR_TYPE_PAD:
            break
        if np.int64(atomics.get_int32(segment, offset + TERM_OFFSET_FIELD_OFFSET)) != \
                ((segment_base_position + offset) & mask):
            break
        offset += aligned
    return offset


# verify_frames results (negative); details in ``out``: [0] offset of the frame, [1] its length, [2] checksums.
VERIFY_BAD_HEADER = -1  # length below a header, past the segment, unknown type, or a wrong term offset field
VERIFY_CHECKSUM_MISMATCH = -2


@kernel
def verify_frames(segment, offset, end, segment_base_position, term_length, algorithm, out):
    """Check every frame in ``segment[offset:end)``: a sane header at its position and, with ``algorithm``, the
    record checksum in a DATA frame's session id field. A zero frame length ends the walk early (nothing was
    written there). Returns the offset the walk reached, or a negative ``VERIFY_*`` with ``out`` filled."""
    mask = term_length - 1
    while offset + HEADER_LENGTH <= end:
        frame_length = np.int64(atomics.get_int32(segment, offset))
        if frame_length == 0:
            break
        aligned = align(frame_length, FRAME_ALIGNMENT)
        frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
        term_offset = np.int64(atomics.get_int32(segment, offset + TERM_OFFSET_FIELD_OFFSET))
        if frame_length < HEADER_LENGTH or offset + aligned > end or \
                (frame_type != HDR_TYPE_DATA and frame_type != HDR_TYPE_PAD) or \
                term_offset != ((segment_base_position + offset) & mask):
            out[0] = offset
            out[1] = frame_length
            return VERIFY_BAD_HEADER
        if algorithm != 0 and frame_type == HDR_TYPE_DATA:
            computed = frame_checksum(algorithm, segment, offset + HEADER_LENGTH, aligned - HEADER_LENGTH)
            stored = np.int64(atomics.get_int32(segment, offset + SESSION_ID_FIELD_OFFSET))
            if computed != stored:
                out[0] = offset
                out[1] = computed
                out[2] = stored
                return VERIFY_CHECKSUM_MISMATCH
        offset += aligned
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
