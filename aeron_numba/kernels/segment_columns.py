"""A recorded segment's frames as columns (spec/archive.md §4.2): the scan behind the ``aeron-archive`` Spark
source. Two passes over ``segment[offset:end)``: ``count_fragments`` sizes the arrays, ``fill_fragments`` fills
them, so no row is ever a Python object. The payloads are copied back to back into one byte array with an
Arrow-style offsets array (``n + 1`` int32 entries), which pyarrow takes as a binary column without a copy.

Only DATA frames whose position lies in ``[low_position, high_position)`` become rows; PAD frames are walked
over. A zero frame length ends the walk (nothing was written there yet). With ``messages`` the fragments of a
message (BEGIN .. END flags) become one row: the header fields of its first frame, flags BEGIN|END, a frame
length of header + whole message, and the payloads joined; fragments without their BEGIN (a recording that
started inside a message) or cut off by a new BEGIN are dropped, as Aeron's FragmentAssembler drops them.
"""

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.replay_rewrite import frame_checksum
from aeron_numba.kernels.segment_scanner import frame_header_sane
from aeron_numba.layout.frame import (
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    RESERVED_VALUE_OFFSET,
    SESSION_ID_FIELD_OFFSET,
    TERM_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
)

# Scan results (negative); details in ``out``: [0] offset of the frame, [1] frame length or computed checksum,
# [2] frame type or stored checksum.
SCAN_BAD_FRAME = -1  # length below a header, past the scanned range, or a type neither DATA nor PAD
SCAN_CHECKSUM_MISMATCH = -2

# count_fragments' ``out`` slots on success
COUNT_FRAMES = 0  # DATA frames in the position window (an upper bound on message rows)
COUNT_PAYLOAD_BYTES = 1  # their payload bytes


@kernel
def _check_frame(segment, offset, end, algorithm, out):
    """0 when the frame at ``offset`` is sane (its term offset field is not checked) and, with a checksum
    ``algorithm``, a DATA frame's record checksum (in its session id field) matches its payload; else a
    ``SCAN_*`` code with ``out`` filled."""
    frame_length = np.int64(atomics.get_int32(segment, offset))
    frame_type = np.int64(atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF)
    if not frame_header_sane(segment, offset, end, -1):
        out[0] = offset
        out[1] = frame_length
        out[2] = frame_type
        return SCAN_BAD_FRAME
    if algorithm != 0 and frame_type == HDR_TYPE_DATA:
        aligned = align(frame_length, FRAME_ALIGNMENT)
        computed = frame_checksum(algorithm, segment, offset + HEADER_LENGTH, aligned - HEADER_LENGTH)
        stored = np.int64(atomics.get_int32(segment, offset + SESSION_ID_FIELD_OFFSET))
        if computed != stored:
            out[0] = offset
            out[1] = computed
            out[2] = stored
            return SCAN_CHECKSUM_MISMATCH
    return 0


@kernel
def count_fragments(segment, offset, end, base_position, low_position, high_position, algorithm, out):
    """Count the DATA frames of ``segment[offset:end)`` whose position (``base_position`` + offset) lies in
    ``[low_position, high_position)``, and their payload bytes, into ``out``. Every frame walked is checked
    (and, with ``algorithm``, its record checksum verified, window or not). Returns the offset the walk
    reached, or a negative ``SCAN_*`` code with ``out`` filled."""
    frames = 0
    payload = 0
    while offset + HEADER_LENGTH <= end:
        frame_length = np.int64(atomics.get_int32(segment, offset))
        if frame_length == 0:
            break
        status = _check_frame(segment, offset, end, algorithm, out)
        if status != 0:
            return status
        position = base_position + offset
        if position >= high_position:
            break
        frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
        if frame_type == HDR_TYPE_DATA and position >= low_position:
            frames += 1
            payload += frame_length - HEADER_LENGTH
        offset += align(frame_length, FRAME_ALIGNMENT)
    out[COUNT_FRAMES] = frames
    out[COUNT_PAYLOAD_BYTES] = payload
    return offset


@kernel
def fill_fragments(segment, offset, end, base_position, low_position, high_position, messages,
                   positions, term_ids, term_offsets, frame_lengths, flags, frame_types, reserved_values,
                   payload_offsets, payload):
    """Fill the columns with the rows ``count_fragments`` counted (arrays at least that long, ``payload_offsets``
    one longer, ``payload`` as long as the payload bytes). With ``messages`` one row per whole message.
    Returns the number of rows (the frames were checked by ``count_fragments``)."""
    rows = 0
    written = 0
    payload_offsets[0] = 0
    open_message = False  # a BEGIN was seen and its END not yet
    while offset + HEADER_LENGTH <= end:
        frame_length = np.int64(atomics.get_int32(segment, offset))
        if frame_length == 0:
            break
        position = base_position + offset
        if position >= high_position:
            break
        frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
        if frame_type == HDR_TYPE_DATA and position >= low_position:
            frame_flags = segment[offset + FLAGS_FIELD_OFFSET]
            data_length = frame_length - HEADER_LENGTH
            begins = (frame_flags & BEGIN_FRAG_FLAG) != 0
            if not messages or begins:
                written = payload_offsets[rows]  # a message cut off by this BEGIN is dropped
                positions[rows] = position
                term_ids[rows] = atomics.get_int32(segment, offset + TERM_ID_FIELD_OFFSET)
                term_offsets[rows] = atomics.get_int32(segment, offset + TERM_OFFSET_FIELD_OFFSET)
                frame_lengths[rows] = HEADER_LENGTH
                flags[rows] = frame_flags
                frame_types[rows] = frame_type
                reserved_values[rows] = atomics.get_int64(segment, offset + RESERVED_VALUE_OFFSET)
                open_message = True
            if open_message:
                copy_bytes(payload, written, segment, offset + HEADER_LENGTH, data_length)
                written += data_length
                frame_lengths[rows] += data_length
                if not messages or (frame_flags & END_FRAG_FLAG) != 0:
                    if messages:
                        flags[rows] = frame_flags | BEGIN_FRAG_FLAG
                    rows += 1
                    payload_offsets[rows] = written
                    open_message = False
        offset += align(frame_length, FRAME_ALIGNMENT)
    return rows


# walk_units' ``out`` slots
WALK_BOUNDARY = 0  # the furthest unit boundary at or before the limit (the walk's start when none)
WALK_FIRST_UNIT_END = 1  # the end of the first whole unit, limit or not (the walk's start when none is whole)
WALK_BAD_OFFSET = 2  # on SCAN_BAD_FRAME: the frame's offset and its length word
WALK_BAD_LENGTH = 3


@kernel
def walk_units(segment, offset, end, limit, base_position, term_length, initial_term_id, messages, out):
    """Walk the whole frames of ``segment[offset:end)`` from ``offset`` (a unit boundary) to find where the
    streaming source may end a micro-batch: a *unit* is a frame, or with ``messages`` a whole message (BEGIN ..
    END; PAD frames and fragments outside a message are units of their own). Fills ``out`` (``WALK_*`` slots)
    and returns the offset where the walk stopped (the end of the written frames, or the start of the frame that
    would pass ``limit``), or ``SCAN_BAD_FRAME``.

    A frame counts only when its length word is positive (acquire-loaded) and its header says it lies where it
    lies: term offset and term id match its position (``base_position`` + offset). A header still being copied
    into the file fails that check, so the walk never passes a frame that is not wholly written: for a recording
    still being written the caller stops there; in a stopped one it is a bad frame. The walk goes past ``limit``
    only to complete the first unit (a unit larger than the limit is still reported whole)."""
    start = offset
    boundary = offset
    first_end = offset
    in_message = False
    while offset + HEADER_LENGTH <= end:
        frame_length = np.int64(atomics.get_int32_acquire(segment, offset))
        if frame_length <= 0:
            break  # not written yet, or being written
        position = base_position + offset
        term_id = np.int64(atomics.get_int32(segment, offset + TERM_ID_FIELD_OFFSET))
        expected_term_id = (initial_term_id + position // term_length + 0x80000000) % 0x100000000 - 0x80000000
        if not frame_header_sane(segment, offset, end, position % term_length) or term_id != expected_term_id:
            out[WALK_BOUNDARY] = boundary
            out[WALK_FIRST_UNIT_END] = first_end
            out[WALK_BAD_OFFSET] = offset
            out[WALK_BAD_LENGTH] = frame_length
            return SCAN_BAD_FRAME
        next_offset = offset + align(frame_length, FRAME_ALIGNMENT)
        frame_type = atomics.get_int16(segment, offset + TYPE_FIELD_OFFSET) & 0xFFFF
        frame_flags = segment[offset + FLAGS_FIELD_OFFSET]
        if in_message and (frame_type == HDR_TYPE_PAD or (frame_flags & BEGIN_FRAG_FLAG) != 0):
            in_message = False  # the message cut off here is dropped by the reader: a boundary before this frame
            if offset <= limit:
                boundary = offset
            if first_end == start:
                first_end = offset
        if next_offset > limit and first_end > start:
            break
        if messages and frame_type == HDR_TYPE_DATA:
            if (frame_flags & BEGIN_FRAG_FLAG) != 0:
                in_message = True
            if (frame_flags & END_FRAG_FLAG) != 0:
                in_message = False
        offset = next_offset
        if not in_message:
            if offset <= limit:
                boundary = offset
            if first_end == start:
                first_end = offset
    out[WALK_BOUNDARY] = boundary
    out[WALK_FIRST_UNIT_END] = first_end
    return offset
