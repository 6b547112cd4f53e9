"""Scanning a term for whole frames without delivering them (spec §5 "Term scanner"; used by the network
sender, the archive recorder and replay).

Both scanners acquire-load frame lengths and stop at the first incomplete frame (length <= 0) or at a
length that cannot be a frame of this term (garbage), so they never read past the term.
"""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import FRAME_ALIGNMENT, HDR_TYPE_PAD, HEADER_LENGTH, TYPE_FIELD_OFFSET


@kernel(inline="always")
def _is_padding(log, frame_offset):
    return (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD


@kernel(inline="always")
def pack_availability(padding, available):
    return (padding << 32) | (available & 0xFFFF_FFFF)


@kernel(inline="always")
def available_of(packed):
    """Bytes of whole frames available (negative: the first frame alone exceeds the max length)."""
    low = packed & 0xFFFF_FFFF
    return low - 0x1_0000_0000 if low >= 0x8000_0000 else low


@kernel(inline="always")
def padding_of(packed):
    return packed >> 32


@kernel
def scan_for_availability(log, term_base, term_offset, max_length, term_length):
    """How many bytes of whole frames can be sent from ``term_offset``, up to ``max_length`` (an MTU).

    A PAD frame counts only its 32-byte header as available; the rest of its aligned length is
    reported as padding and the scan stops after it (the sender sends the header, then skips).
    Returns ``pack_availability(padding, available)``; ``available`` is negative when the very first
    frame is longer than ``max_length``.
    """
    limit = max_length if max_length < term_length - term_offset else term_length - term_offset
    available = 0
    padding = 0
    while True:
        offset = term_offset + available
        if offset >= term_length:
            break
        frame_length = atomics.get_int32_acquire(log, term_base + offset)
        if frame_length <= 0:
            break
        aligned_length = align(frame_length, FRAME_ALIGNMENT)
        if frame_length < HEADER_LENGTH or offset + aligned_length > term_length:
            break  # not a frame of this term: garbage, never walk past it
        if _is_padding(log, term_base + offset):
            padding = aligned_length - HEADER_LENGTH
            aligned_length = HEADER_LENGTH
        available += aligned_length
        if available > limit:
            available -= aligned_length
            padding = 0
            if available == 0:
                available = -aligned_length
            break
        if padding != 0 or available >= limit:
            break
    return pack_availability(padding, available)


@kernel
def scan_block(log, term_base, term_offset, limit_offset):
    """Offset up to which whole frames are available from ``term_offset``, not past ``limit_offset``.

    A PAD frame ends the block; it is included only when it is the first frame (so a recorder or
    replayer moves past it in a block of its own). ``limit_offset`` must not exceed the term length.
    """
    offset = term_offset
    while offset < limit_offset:
        frame_length = atomics.get_int32_acquire(log, term_base + offset)
        if frame_length <= 0:
            break
        aligned_length = align(frame_length, FRAME_ALIGNMENT)
        if frame_length < HEADER_LENGTH:
            break
        if _is_padding(log, term_base + offset):
            if offset == term_offset and offset + aligned_length <= limit_offset:
                offset += aligned_length
            break
        if offset + aligned_length > limit_offset:
            break
        offset += aligned_length
    return offset
