"""Slow, obvious record-checksum and replay-rewrite over a block of frames (spec/archive.md §4.3, §6.3),
plus a builder for frame blocks. Field offsets are the spec's numbers written out (transport.md §1).

Status codes and the out triple mirror ``aeron_numba.layout.checksum``: values are repeated here on purpose.
"""

import struct
import zlib

from tests.reference.crc import crc32c_reference, to_int32

CHECKSUM_MISMATCH = -1
MALFORMED_FRAME = -2
FRAME_PAST_END = -3
INVALID_ARGUMENT = -4

# frame_length, version, flags, type, term_offset, session_id, stream_id, term_id, reserved_value
HEADER = struct.Struct("<iBBHiiiiq")
DATA, PAD = 1, 0


def align32(value: int) -> int:
    return (value + 31) // 32 * 32


def checksum(algorithm: int, data: bytes) -> int:
    if algorithm == 1:
        return to_int32(zlib.crc32(data))
    if algorithm == 2:
        return to_int32(crc32c_reference(data))
    raise ValueError(algorithm)


def build_frame(
    frame_type: int,
    frame_length: int,
    flags: int = 0xC0,
    term_offset: int = 0,
    session_id: int = 0,
    stream_id: int = 0,
    term_id: int = 0,
    reserved: int = 0,
    body: bytes = b"",
) -> bytes:
    """Header + ``body`` (everything after the header up to the aligned end), zero-filled to the aligned length."""
    aligned = align32(frame_length)
    header = HEADER.pack(frame_length, 0, flags, frame_type, term_offset, session_id, stream_id, term_id, reserved)
    frame = header + body[: aligned - 32]
    return frame + bytes(aligned - len(frame))


def _walk(block: bytearray, offset: int, length: int, algorithm: int, on_data):
    """Shared walk; ``on_data(frame_offset, aligned_length)`` returns None or an error (status, out)."""
    outside = offset < 0 or length < 0 or offset + length > len(block)
    if outside or offset % 32 or length % 32 or algorithm not in (0, 1, 2):
        return INVALID_ARGUMENT, [offset, 0, 0]
    end = offset + length
    pos = offset
    while pos < end:
        frame_length, _, _, frame_type = struct.unpack_from("<iBBH", block, pos)
        if frame_length < 32 or frame_type not in (DATA, PAD):
            return MALFORMED_FRAME, [pos, frame_length, frame_type]
        aligned = align32(frame_length)
        if pos + aligned > end:
            return FRAME_PAST_END, [pos, frame_length, frame_type]
        if frame_type == DATA:
            error = on_data(pos, aligned)
            if error is not None:
                return error
        pos += aligned
    return length, [end, 0, 0]


def record_checksums_reference(block: bytearray, offset: int, length: int, algorithm: int):
    """Mutates ``block``; returns ``(status, out)``."""

    def on_data(pos, aligned):
        if algorithm != 0:
            value = checksum(algorithm, bytes(block[pos + 32 : pos + aligned]))
            struct.pack_into("<i", block, pos + 12, value)
        return None

    return _walk(block, offset, length, algorithm, on_data)


def replay_rewrite_reference(
    block: bytearray, offset: int, length: int, session_id: int, stream_id: int, algorithm: int
):
    """Mutates ``block``; returns ``(status, out)``."""

    def on_data(pos, aligned):
        if algorithm != 0:
            computed = checksum(algorithm, bytes(block[pos + 32 : pos + aligned]))
            (stored,) = struct.unpack_from("<i", block, pos + 12)
            if computed != stored:
                return CHECKSUM_MISMATCH, [pos, computed, stored]
        struct.pack_into("<ii", block, pos + 12, to_int32(session_id), to_int32(stream_id))
        return None

    return _walk(block, offset, length, algorithm, on_data)


def frame_offsets(block: bytes, offset: int, length: int):
    """``[(frame_offset, type, aligned_length)]`` of a well-formed block."""
    result = []
    pos = offset
    while pos < offset + length:
        frame_length, _, _, frame_type = struct.unpack_from("<iBBH", block, pos)
        aligned = align32(frame_length)
        result.append((pos, frame_type, aligned))
        pos += aligned
    return result
