"""Slow, obvious model of the broadcast buffer (spec/transport.md §8), single-threaded.

A ``bytearray`` with ``struct``; the transmitter writes records, a receiver model follows with its own
cursor. In one thread nothing is torn, so a receiver is lapped exactly when the transmitter's intent has
reached a capacity past its next record; it then rejoins at the latest record and skips it (Agrona's
CopyBroadcastReceiver reports "unable to keep up" instead of delivering it).
"""

from __future__ import annotations

import struct

TRAILER = 128
TAIL_INTENT, TAIL, LATEST = 0, 8, 16
HEADER = 8
PADDING = -1

NOTHING = 0
LAPPED = -5
SCRATCH_TOO_SMALL = -6


def align8(n: int) -> int:
    return (n + 7) // 8 * 8


class ReferenceBroadcast:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.buf = bytearray(capacity + TRAILER)

    def i32(self, index: int) -> int:
        return struct.unpack_from("<i", self.buf, index)[0]

    def set_i32(self, index: int, value: int) -> None:
        struct.pack_into("<i", self.buf, index, value)

    def counter(self, offset: int) -> int:
        return struct.unpack_from("<q", self.buf, self.capacity + offset)[0]

    def set_counter(self, offset: int, value: int) -> None:
        struct.pack_into("<q", self.buf, self.capacity + offset, value)

    def transmit(self, type_id: int, body: bytes) -> None:
        cap = self.capacity
        tail = self.counter(TAIL)
        offset = tail % cap
        length = HEADER + len(body)
        aligned = align8(length)
        to_end = cap - offset
        if to_end < aligned:
            self.set_counter(TAIL_INTENT, tail + aligned + to_end)
            self.set_i32(offset, to_end)
            self.set_i32(offset + 4, PADDING)
            tail += to_end
            offset = 0
        else:
            self.set_counter(TAIL_INTENT, tail + aligned)
        self.set_i32(offset, length)
        self.set_i32(offset + 4, type_id)
        self.buf[offset + HEADER : offset + length] = body
        self.set_counter(LATEST, tail)
        self.set_counter(TAIL, tail + aligned)


class ReferenceReceiver:
    def __init__(self, bc: ReferenceBroadcast):
        self.bc = bc
        self.next_record = bc.counter(LATEST)
        self.cursor = self.next_record
        self.lapped_count = 0

    def receive(self, scratch_length: int) -> tuple[int, bytes] | int:
        """``(type_id, body)`` or NOTHING / LAPPED / SCRATCH_TOO_SMALL."""
        bc, cap = self.bc, self.bc.capacity
        if bc.counter(TAIL) <= self.next_record:
            return NOTHING
        cursor = self.next_record
        lapped = cursor + cap <= bc.counter(TAIL_INTENT)
        if lapped:
            self.lapped_count += 1
            cursor = bc.counter(LATEST)
        offset = cursor % cap
        if bc.i32(offset + 4) == PADDING:
            cursor += cap - offset
            offset = 0
        length = bc.i32(offset)
        self.cursor = cursor
        self.next_record = cursor + align8(length)
        if lapped:
            return LAPPED
        if length - HEADER > scratch_length:
            return SCRATCH_TOO_SMALL
        return bc.i32(offset + 4), bytes(bc.buf[offset + HEADER : offset + length])

    def rewind(self) -> None:
        """Receive the current record again (a batch that had no room left for it)."""
        self.next_record = self.cursor

    def receive_batch(self, scratch_length: int, limit: int, whole_scratch_each: bool = False):
        """The kernels' batch: stop at the first non-delivery; a record that does not fit waits for the next
        batch. ``whole_scratch_each``: every message may use the whole scratch (the handler path)."""
        got: list[tuple[int, bytes]] = []
        used = 0
        while len(got) < limit:
            result = self.receive(scratch_length if whole_scratch_each else scratch_length - used)
            if isinstance(result, int):
                if not got:
                    return result
                if result == SCRATCH_TOO_SMALL:
                    self.rewind()
                break
            got.append(result)
            used += len(result[1])
        return got
