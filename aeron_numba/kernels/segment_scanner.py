"""Walking the frames of a recorded segment file (spec/archive.md §3.2 fix-up, §4.2): where do the whole
frames a recording wrote end? Used when an archive restarts over a recording that was active when it died."""

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.layout.bits import align
from aeron_numba.layout.frame import (
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
)


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
