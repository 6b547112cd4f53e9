"""Slow, obvious model of a log buffer and its appender/reader (spec/transport.md §1-§5), on a bytearray.

Written straight from the spec with struct and Python ints, to check the kernels byte for byte.
"""

from __future__ import annotations

import struct

from aeron_numba.layout import frame as F
from aeron_numba.layout import log_buffer_descriptor as LB
from aeron_numba.layout import publication_status as P

PARTITIONS = 3


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def wrap32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ReferenceLog:
    """One exclusive writer over a model of the whole log file (terms + metadata)."""

    def __init__(self, term_length: int, mtu: int, initial_term_id: int, session_id: int, stream_id: int):
        self.term_length, self.mtu = term_length, mtu
        self.initial_term_id, self.session_id, self.stream_id = initial_term_id, session_id, stream_id
        self.terms = bytearray(PARTITIONS * term_length)
        self.tails = [initial_term_id << 32, wrap32(initial_term_id - 2) << 32, wrap32(initial_term_id - 1) << 32]
        self.active_term_count = 0
        self.term_id, self.term_offset, self.index = initial_term_id, 0, 0
        self.shift = term_length.bit_length() - 1

    # -- position math (§3)
    def position(self) -> int:
        return (wrap32(self.term_id - self.initial_term_id) << self.shift) + self.term_offset

    def max_message_length(self) -> int:
        return min(self.term_length // 8, F.MAX_MESSAGE_LENGTH_LIMIT)

    def _frame(self, base: int, offset: int, flags: int, ftype: int, payload: bytes, reserved: int) -> None:
        at = base + offset
        header = struct.pack(
            "<iBBhiiiiq", F.HEADER_LENGTH + len(payload), 0, flags, ftype, offset, self.session_id,
            self.stream_id, self.term_id, reserved,
        )
        self.terms[at : at + F.HEADER_LENGTH] = header
        self.terms[at + F.HEADER_LENGTH : at + F.HEADER_LENGTH + len(payload)] = payload

    def _pad(self, base: int, offset: int, length: int) -> None:
        at = base + offset
        self.terms[at : at + F.HEADER_LENGTH] = struct.pack(
            "<iBBhiiiiq", length, 0, F.UNFRAGMENTED, F.HDR_TYPE_PAD, offset, self.session_id, self.stream_id,
            self.term_id, 0,
        )

    def offer(self, message: bytes, reserved: int = 0) -> int:
        """Append like an exclusive publication with no limit; returns position, ADMIN_ACTION or ERROR."""
        max_payload = self.mtu - F.HEADER_LENGTH
        length = len(message)
        if length > max_payload and length > self.max_message_length():
            return P.ERROR
        if length <= max_payload:
            aligned = align(length + F.HEADER_LENGTH, F.FRAME_ALIGNMENT)
        else:
            full, rest = divmod(length, max_payload)
            aligned = full * self.mtu + (align(rest + F.HEADER_LENGTH, F.FRAME_ALIGNMENT) if rest else 0)
        base = self.index * self.term_length
        resulting = self.term_offset + aligned
        self.tails[self.index] = (self.term_id << 32) | resulting
        if resulting > self.term_length:
            if self.term_offset < self.term_length:
                self._pad(base, self.term_offset, self.term_length - self.term_offset)
            next_index = (self.index + 1) % PARTITIONS
            self.term_id = wrap32(self.term_id + 1)
            self.index, self.term_offset = next_index, 0
            self.tails[next_index] = self.term_id << 32
            self.active_term_count = wrap32(self.term_id - self.initial_term_id)
            return P.ADMIN_ACTION
        if length <= max_payload:
            self._frame(base, self.term_offset, F.UNFRAGMENTED, F.HDR_TYPE_DATA, message, reserved)
        else:
            offset, start = self.term_offset, 0
            while start < length:
                chunk = message[start : start + max_payload]
                flags = (F.BEGIN_FRAG_FLAG if start == 0 else 0) | (
                    F.END_FRAG_FLAG if start + len(chunk) == length else 0
                )
                self._frame(base, offset, flags, F.HDR_TYPE_DATA, chunk, reserved)
                offset += align(len(chunk) + F.HEADER_LENGTH, F.FRAME_ALIGNMENT)
                start += len(chunk)
        self.term_offset = resulting
        return self.position()

    def clean_term(self, index: int) -> None:
        """What the driver does behind the slowest consumer: zero a whole term (§4.7)."""
        self.terms[index * self.term_length : (index + 1) * self.term_length] = bytes(self.term_length)


def read_fragments(term: bytes, offset: int, limit: int, term_id: int) -> tuple[list[tuple[int, int, int]], int]:
    """Reference term reader (§5): ``[(frame_offset, frame_length, flags)]`` of DATA frames, and new offset.
    A frame of another term (its term id differs) ends the read like an incomplete one."""
    fragments = []
    term_length = len(term)
    while len(fragments) < limit and offset < term_length:
        frame_length = struct.unpack_from("<i", term, offset)[0]
        if frame_length <= 0:
            break
        aligned = align(frame_length, F.FRAME_ALIGNMENT)
        if frame_length < F.HEADER_LENGTH or offset + aligned > term_length:
            break
        if struct.unpack_from("<i", term, offset + F.TERM_ID_FIELD_OFFSET)[0] != term_id:
            break
        ftype = struct.unpack_from("<H", term, offset + F.TYPE_FIELD_OFFSET)[0]
        if ftype != F.HDR_TYPE_PAD:
            fragments.append((offset, frame_length, term[offset + F.FLAGS_FIELD_OFFSET]))
        offset += aligned
    return fragments, offset


def scan_for_availability(term: bytes, offset: int, max_length: int) -> tuple[int, int]:
    """Reference term scanner (§5): ``(available, padding)``."""
    term_length = len(term)
    limit = min(max_length, term_length - offset)
    available = padding = 0
    while True:
        at = offset + available
        if at >= term_length:
            break
        frame_length = struct.unpack_from("<i", term, at)[0]
        if frame_length <= 0:
            break
        aligned = align(frame_length, F.FRAME_ALIGNMENT)
        if frame_length < F.HEADER_LENGTH or at + aligned > term_length:
            break
        if struct.unpack_from("<H", term, at + F.TYPE_FIELD_OFFSET)[0] == F.HDR_TYPE_PAD:
            padding = aligned - F.HEADER_LENGTH
            aligned = F.HEADER_LENGTH
        available += aligned
        if available > limit:
            available -= aligned
            padding = 0
            if available == 0:
                available = -aligned
            break
        if padding or available >= limit:
            break
    return available, padding


def metadata_tails(log_bytes: bytes) -> tuple[list[int], int]:
    meta = len(log_bytes) - LB.LOG_META_DATA_LENGTH
    tails = list(struct.unpack_from("<qqq", log_bytes, meta + LB.TERM_TAIL_COUNTERS_OFFSET))
    return tails, struct.unpack_from("<i", log_bytes, meta + LB.LOG_ACTIVE_TERM_COUNT_OFFSET)[0]
