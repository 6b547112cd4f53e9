"""Slow, obvious model of the distinct error log (spec §10) for property tests of kernels/error_log.py."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


def align8(value: int) -> int:
    return (value + 7) // 8 * 8


@dataclass
class Entry:
    text: bytes
    count: int
    first_ms: int
    last_ms: int


@dataclass
class ReferenceErrorLog:
    capacity: int
    entries: list = field(default_factory=list)

    def end_offset(self) -> int:
        return sum(align8(24 + len(e.text)) for e in self.entries)

    def record(self, text: bytes, now_ms: int) -> bool:
        for entry in self.entries:
            if entry.text == text:
                entry.count += 1
                entry.last_ms = now_ms
                return True
        if self.end_offset() + 24 + len(text) > self.capacity:
            return False
        self.entries.append(Entry(text, 1, now_ms, now_ms))
        return True

    def read(self, since_ms: int = 0) -> list[tuple[int, int, int, bytes]]:
        """(count, first ms, last ms, text) of each entry last seen at or after ``since_ms``."""
        return [(e.count, e.first_ms, e.last_ms, e.text) for e in self.entries if e.last_ms >= since_ms]

    def render(self) -> bytes:
        """The exact bytes the log buffer must hold: records back to back, padded to 8, zeros after."""
        out = bytearray(self.capacity)
        offset = 0
        for e in self.entries:
            struct.pack_into("<iiqq", out, offset, 24 + len(e.text), e.count, e.last_ms, e.first_ms)
            out[offset + 24 : offset + 24 + len(e.text)] = e.text
            offset += align8(24 + len(e.text))
        return bytes(out)


def decode_log(buf: bytes, since_ms: int = 0) -> tuple[list[tuple[int, int, int, bytes]], bool]:
    """Walk raw bytes the obvious way: (records, corrupt). Stops at length 0, the end, or a bad length."""
    records = []
    offset = 0
    while offset + 4 <= len(buf):
        (length,) = struct.unpack_from("<i", buf, offset)
        if length == 0:
            return records, False
        if length < 24 or offset + length > len(buf):
            return records, True
        count, last_ms, first_ms = struct.unpack_from("<iqq", buf, offset + 4)
        if last_ms >= since_ms:
            records.append((count, first_ms, last_ms, bytes(buf[offset + 24 : offset + length])))
        offset += align8(length)
    return records, False
