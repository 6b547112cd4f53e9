"""Placing received frames into an image's term (Aeron's ``TermRebuilder``; spec/transport.md §5, §16).

The receiver hands over a whole DATA/PAD datagram (several frames back to back) at the term offset of its first
frame. The block goes in only if that slot is still empty (frame length word 0): a duplicate or a retransmit of
data already there changes nothing. Everything after the first 8 bytes is copied first, then the first 8 bytes
(frame length, version, flags, type) are release-stored in one go, so a subscriber that acquire-loads a positive
frame length sees the whole frame, and the frames after it in the block, already in place.

The block is validated before anything is written: every frame in it must be at least a header long and end
inside the term (a PAD header may claim padding past the end of the block, §5 "term scanner"), so the gap
scanner and subscribers that later walk these lengths can never be led out of the term. The term must have been
zeroed before it is reused for a new term id (Aeron's image cleans behind its subscribers): "empty" means 0.
"""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import (
    FRAME_ALIGNMENT,
    FRAME_LENGTH_FIELD_OFFSET,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    TYPE_FIELD_OFFSET,
)
from aeron_numba.layout.udp_frames import (
    COMMON_HEADER_LENGTH,
    INVALID_BOUNDS,
    INVALID_FRAME_LENGTH,
    INVALID_TERM_OFFSET,
)

#: ``insert`` result when the slot already held a frame (duplicate or retransmit of data already there).
ALREADY_PRESENT = 0


@kernel(inline="always")
def _check_block(packet, packet_offset, length, room):
    """0 if the frames of ``packet[packet_offset:+length]`` tile it and each ends within ``room`` bytes."""
    o = 0
    while o < length:
        if length - o < HEADER_LENGTH:
            return INVALID_FRAME_LENGTH
        frame_length = atomics.get_int32(packet, packet_offset + o + FRAME_LENGTH_FIELD_OFFSET)
        if frame_length < HEADER_LENGTH:
            return INVALID_FRAME_LENGTH
        aligned_length = align(frame_length, FRAME_ALIGNMENT)
        if aligned_length > room - o:
            return INVALID_FRAME_LENGTH
        if frame_length > length - o:
            # Only a PAD sent as its bare header may claim bytes the block does not carry, and it ends the block.
            frame_type = atomics.get_int16(packet, packet_offset + o + TYPE_FIELD_OFFSET) & 0xFFFF
            if frame_type != HDR_TYPE_PAD or o + HEADER_LENGTH != length:
                return INVALID_FRAME_LENGTH
        o += aligned_length
    return 0


@kernel
def insert(term, term_offset, packet, packet_offset, length):
    """Insert the block of frames ``packet[packet_offset:packet_offset + length]`` at ``term_offset`` of ``term``.

    Parameters
    ----------
    term : uint8[::1]
        One term of the image log (``term.size`` = term length).
    term_offset : int
        Term offset of the block's first frame (its header's ``term_offset``).
    packet : uint8[::1]
        The datagram (receive buffer).
    packet_offset, length : int
        Where the block starts in ``packet`` and its length (the datagram length).

    Returns
    -------
    int
        ``length`` when inserted, ``ALREADY_PRESENT`` (0) when the slot at ``term_offset`` was not empty, or
        ``INVALID_BOUNDS`` (block outside ``packet``), ``INVALID_TERM_OFFSET`` (negative, not a multiple of
        32, or the block would pass the end of the term), ``INVALID_FRAME_LENGTH`` (a frame shorter than a
        header, not inside the block, or ending past the term). Nothing is written on any error.
    """
    if packet_offset < 0 or length < 0 or packet_offset > packet.size - length:
        return INVALID_BOUNDS
    if length < HEADER_LENGTH:
        return INVALID_FRAME_LENGTH
    term_length = term.size
    if term_offset < 0 or term_offset % FRAME_ALIGNMENT != 0 or term_offset > term_length - length:
        return INVALID_TERM_OFFSET
    status = _check_block(packet, packet_offset, length, term_length - term_offset)
    if status != 0:
        return status
    if atomics.get_int32(term, term_offset + FRAME_LENGTH_FIELD_OFFSET) != 0:
        return ALREADY_PRESENT
    copy_bytes(term, term_offset + COMMON_HEADER_LENGTH, packet, packet_offset + COMMON_HEADER_LENGTH,
               length - COMMON_HEADER_LENGTH)
    # Frame length, version, flags and type last and together: a reader acquiring a positive length sees the rest.
    atomics.put_int64_release(term, term_offset, atomics.get_int64(packet, packet_offset))
    return length
