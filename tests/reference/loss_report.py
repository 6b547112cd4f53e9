"""Slow, obvious model of ``loss-report.dat`` (spec §13.1) for property tests of kernels/loss_report.py.

``ReferenceLossReport`` is the writer (entries as a list, rendered to the exact bytes), and
``reference_scan`` the reader: it walks any bytes with Python slicing and explicit bounds checks, so it
can judge the kernel's walk over garbage.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

HEADER = struct.Struct("<qqqqiii")  # count, bytes lost, first ms, last ms, session, stream, channel length


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def entry_length(channel_length: int, source_length: int) -> int:
    return 44 + align(channel_length, 4) + 4 + source_length


@dataclass
class Entry:
    offset: int
    count: int
    bytes_lost: int
    first_ms: int
    last_ms: int
    session_id: int
    stream_id: int
    channel: bytes
    source: bytes

    def as_tuple(self):
        return (
            self.count, self.bytes_lost, self.first_ms, self.last_ms, self.session_id, self.stream_id,
            self.channel.decode("ascii", errors="replace"), self.source.decode("ascii", errors="replace"),
        )


def wrap_i64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


@dataclass
class ReferenceLossReport:
    capacity: int
    entries: list[Entry] = field(default_factory=list)
    next_offset: int = 0

    def create_entry(self, bytes_lost, timestamp_ms, session_id, stream_id, channel: bytes, source: bytes):
        """The new entry's offset, or None when it does not fit."""
        required = entry_length(len(channel), len(source))
        if self.next_offset > self.capacity or required > self.capacity - self.next_offset:
            return None
        offset = self.next_offset
        self.entries.append(Entry(offset, 1, bytes_lost, timestamp_ms, timestamp_ms, session_id, stream_id, channel, source))
        self.next_offset += align(required, 64)
        return offset

    def record_observation(self, offset: int, bytes_lost: int, timestamp_ms: int) -> None:
        entry = next(e for e in self.entries if e.offset == offset)
        entry.count += 1
        entry.bytes_lost = wrap_i64(entry.bytes_lost + bytes_lost)
        entry.last_ms = timestamp_ms

    def read(self):
        return [e.as_tuple() for e in self.entries]

    def render(self) -> bytes:
        """The exact bytes the buffer must hold: entries at their offsets, zeros everywhere else."""
        out = bytearray(self.capacity)
        for e in self.entries:
            HEADER.pack_into(
                out, e.offset, e.count, e.bytes_lost, e.first_ms, e.last_ms, e.session_id, e.stream_id, len(e.channel)
            )
            start = e.offset + 44
            out[start : start + len(e.channel)] = e.channel
            source_field = start + align(len(e.channel), 4)
            struct.pack_into("<i", out, source_field, len(e.source))
            out[source_field + 4 : source_field + 4 + len(e.source)] = e.source
        return bytes(out)


def reference_scan(data: bytes):
    """Walk any bytes as a loss report: ``(entries as tuples, offset of the corrupt entry or None)``."""
    capacity = len(data)
    offset = 0
    entries = []
    while True:
        if offset + 8 > capacity:
            return entries, None
        (count,) = struct.unpack_from("<q", data, offset)
        if count <= 0:
            return entries, None
        if offset + 48 > capacity:
            return entries, offset
        _, bytes_lost, first_ms, last_ms, session_id, stream_id, channel_length = HEADER.unpack_from(data, offset)
        if channel_length < 0 or offset + entry_length(channel_length, 0) > capacity:
            return entries, offset
        source_field = offset + 44 + align(channel_length, 4)
        (source_length,) = struct.unpack_from("<i", data, source_field)
        if source_length < 0 or offset + entry_length(channel_length, source_length) > capacity:
            return entries, offset
        channel = data[offset + 44 : offset + 44 + channel_length]
        source = data[source_field + 4 : source_field + 4 + source_length]
        entries.append(
            Entry(offset, count, bytes_lost, first_ms, last_ms, session_id, stream_id, channel, source).as_tuple()
        )
        offset += align(entry_length(channel_length, source_length), 64)
