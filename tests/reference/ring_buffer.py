"""Slow, obvious model of the many-to-one ring buffer (spec/transport.md §7), single-threaded.

Works on a ``bytearray`` with ``struct``; written from the spec text, not from the kernels, so the
property tests can compare every byte of the two after every operation.
"""

from __future__ import annotations

import struct

TRAILER = 768
TAIL, HEAD_CACHE, HEAD, CORRELATION, HEARTBEAT = 128, 256, 384, 512, 640
HEADER = 8
PADDING = -1

OK = 1
FULL = -1
BAD_TYPE = -2
TOO_LONG = -3
BAD_LENGTH = -4
CORRUPT = -7


def align8(n: int) -> int:
    return (n + 7) // 8 * 8


class ReferenceRingBuffer:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.buf = bytearray(capacity + TRAILER)

    # field access
    def i32(self, index: int) -> int:
        return struct.unpack_from("<i", self.buf, index)[0]

    def set_i32(self, index: int, value: int) -> None:
        struct.pack_into("<i", self.buf, index, value)

    def i64(self, trailer_offset: int) -> int:
        return struct.unpack_from("<q", self.buf, self.capacity + trailer_offset)[0]

    def set_i64(self, trailer_offset: int, value: int) -> None:
        struct.pack_into("<q", self.buf, self.capacity + trailer_offset, value)

    @property
    def max_msg_length(self) -> int:
        return self.capacity // 8

    def _check(self, type_id: int, length: int) -> int:
        if type_id < 1:
            return BAD_TYPE
        if length < 0:
            return BAD_LENGTH
        if length > self.max_msg_length:
            return TOO_LONG
        return 0

    def claim(self, required: int) -> int:
        """Advance the tail by ``required`` (plus padding at the end); record index, or FULL."""
        cap = self.capacity
        tail = self.i64(TAIL)
        head = self.i64(HEAD_CACHE)
        if required > cap - (tail - head):
            head = self.i64(HEAD)
            if required > cap - (tail - head):
                return FULL
            self.set_i64(HEAD_CACHE, head)
        tail_index = tail % cap
        to_end = cap - tail_index
        padding = 0
        if required > to_end:
            if required > head % cap:
                head = self.i64(HEAD)
                if required > head % cap:
                    return FULL
                self.set_i64(HEAD_CACHE, head)
            padding = to_end
        self.set_i64(TAIL, tail + required + padding)
        if padding:
            self.set_i32(tail_index, padding)
            self.set_i32(tail_index + 4, PADDING)
            return 0
        return tail_index

    def write(self, type_id: int, body: bytes) -> int:
        status = self._check(type_id, len(body))
        if status:
            return status
        index = self.claim(align8(len(body) + HEADER))
        if index < 0:
            return index
        self.set_i32(index, len(body) + HEADER)
        self.set_i32(index + 4, type_id)
        self.buf[index + HEADER : index + HEADER + len(body)] = body
        return OK

    def try_claim(self, type_id: int, length: int) -> int:
        status = self._check(type_id, length)
        if status:
            return status
        index = self.claim(align8(length + HEADER))
        if index < 0:
            return index
        self.set_i32(index, -(length + HEADER))
        self.set_i32(index + 4, type_id)
        return index + HEADER

    def commit(self, body_index: int) -> None:
        self.set_i32(body_index - HEADER, -self.i32(body_index - HEADER))

    def abort(self, body_index: int) -> None:
        self.set_i32(body_index - HEADER + 4, PADDING)
        self.set_i32(body_index - HEADER, -self.i32(body_index - HEADER))

    def read(self, limit: int) -> list[tuple[int, bytes]]:
        """Deliver up to ``limit`` messages from the contiguous block at head, then zero it and move head."""
        cap = self.capacity
        head = self.i64(HEAD)
        head_index = head % cap
        got: list[tuple[int, bytes]] = []
        read = 0
        while head_index + read < cap and len(got) < limit:
            index = head_index + read
            length = self.i32(index)
            if length <= 0:
                break
            read += align8(length)
            type_id = self.i32(index + 4)
            if type_id != PADDING:
                got.append((type_id, bytes(self.buf[index + HEADER : index + length])))
        if read:
            self.buf[head_index : head_index + read] = bytes(read)
            self.set_i64(HEAD, head + read)
        return got

    def unblock(self) -> bool:
        cap = self.capacity
        head, tail = self.i64(HEAD), self.i64(TAIL)
        if head == tail:
            return False
        consumer, producer = head % cap, tail % cap
        length = self.i32(consumer)
        if length < 0:
            self.set_i32(consumer + 4, PADDING)
            self.set_i32(consumer, -length)
            return True
        if length == 0:
            limit = producer if producer > consumer else cap
            for i in range(consumer + 8, limit, 8):
                if self.i32(i) != 0:
                    if all(self.i32(j) == 0 for j in range(consumer, i, 8)):
                        self.set_i32(consumer + 4, PADDING)
                        self.set_i32(consumer, i - consumer)
                        return True
                    return False
        return False

    def size(self) -> int:
        return min(max(self.i64(TAIL) - self.i64(HEAD), 0), self.capacity)

    def next_correlation_id(self) -> int:
        value = self.i64(CORRELATION)
        self.set_i64(CORRELATION, value + 1)
        return value
