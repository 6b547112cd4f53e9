"""Slow, obvious model of the counters sections (spec §9) for property tests of kernels/counters.py.

Two parts:
- ``ReferenceCounters``: the allocator as a list of Python records (what the buffers should mean).
- ``decode_*`` / ``reference_*`` functions: read raw bytes with ``struct`` the obvious way, clamping
  lengths exactly as the spec's readers must, for garbage-input tests.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from aeron_numba.layout.counters import (
    COUNTER_ID_INVALID,
    COUNTER_LENGTH,
    COUNTER_NOT_ALLOCATED,
    COUNTERS_FULL,
    MAX_KEY_LENGTH,
    MAX_LABEL_LENGTH,
    METADATA_LENGTH,
    NOT_FREE_TO_REUSE,
    RECORD_ALLOCATED,
    RECORD_RECLAIMED,
    RECORD_UNUSED,
)


@dataclass
class Record:
    state: int = RECORD_UNUSED
    type_id: int = 0
    deadline_ms: int = 0
    key: bytes = bytes(MAX_KEY_LENGTH)
    label: bytes = b""
    value: int = 0
    registration_id: int = 0
    owner_id: int = 0
    reference_id: int = 0


@dataclass
class ReferenceCounters:
    capacity: int
    records: list = field(default_factory=list)

    def __post_init__(self):
        self.records = [Record() for _ in range(self.capacity)]

    def allocate(self, type_id: int, key: bytes, label: bytes, now_ms: int) -> int:
        chosen = None
        for counter_id, rec in enumerate(self.records):
            if rec.state == RECORD_UNUSED:
                chosen = counter_id
                break
            if rec.state == RECORD_RECLAIMED and now_ms >= rec.deadline_ms:
                chosen = counter_id
                break
        if chosen is None:
            return COUNTERS_FULL
        key = key[:MAX_KEY_LENGTH]
        self.records[chosen] = Record(
            state=RECORD_ALLOCATED,
            type_id=type_id,
            deadline_ms=NOT_FREE_TO_REUSE,
            key=key + bytes(MAX_KEY_LENGTH - len(key)),
            label=label[:MAX_LABEL_LENGTH],
        )
        return chosen

    def free(self, counter_id: int, now_ms: int, timeout_ms: int) -> int:
        if not 0 <= counter_id < self.capacity:
            return COUNTER_ID_INVALID
        rec = self.records[counter_id]
        if rec.state != RECORD_ALLOCATED:
            return COUNTER_NOT_ALLOCATED
        rec.state = RECORD_RECLAIMED
        rec.key = bytes(MAX_KEY_LENGTH)
        rec.deadline_ms = min(now_ms + max(timeout_ms, 0), NOT_FREE_TO_REUSE)
        return 0

    def allocated(self) -> list[tuple[int, int, bytes, bytes]]:
        """(id, type id, key, label) of every ALLOCATED counter, stopping at the first UNUSED record."""
        out = []
        for counter_id, rec in enumerate(self.records):
            if rec.state == RECORD_UNUSED:
                break
            if rec.state == RECORD_ALLOCATED:
                out.append((counter_id, rec.type_id, rec.key, rec.label))
        return out

    def find_by_type_id_and_registration_id(self, type_id: int, registration_id: int) -> int:
        for counter_id, rec in enumerate(self.records):
            if rec.state == RECORD_UNUSED:
                break
            if rec.state == RECORD_ALLOCATED and rec.type_id == type_id and rec.registration_id == registration_id:
                return counter_id
        return -1


# --- raw-byte readers, for garbage tests ------------------------------------------------------------------


def _i32(buf: bytes, offset: int) -> int:
    return struct.unpack_from("<i", buf, offset)[0]


def _i64(buf: bytes, offset: int) -> int:
    return struct.unpack_from("<q", buf, offset)[0]


def reference_capacity(metadata: bytes, values: bytes) -> int:
    return min(len(values) // COUNTER_LENGTH, len(metadata) // METADATA_LENGTH)


def decode_allocated(metadata: bytes, values: bytes) -> list[tuple]:
    """(id, type id, key, label, value, registration id, owner id, reference id) for each ALLOCATED record.

    Label lengths outside [0, 380] are clamped, as a reader of untrusted memory must.
    """
    out = []
    for counter_id in range(reference_capacity(metadata, values)):
        m = counter_id * METADATA_LENGTH
        v = counter_id * COUNTER_LENGTH
        state = _i32(metadata, m)
        if state == RECORD_UNUSED:
            break
        if state != RECORD_ALLOCATED:
            continue
        label_length = min(max(_i32(metadata, m + 128), 0), MAX_LABEL_LENGTH)
        out.append(
            (
                counter_id,
                _i32(metadata, m + 4),
                bytes(metadata[m + 16 : m + 128]),
                bytes(metadata[m + 132 : m + 132 + label_length]),
                _i64(values, v),
                _i64(values, v + 8),
                _i64(values, v + 16),
                _i64(values, v + 24),
            )
        )
    return out


def reference_choose_id(metadata: bytes, values: bytes, now_ms: int) -> int:
    """The id ``allocate`` must pick over arbitrary bytes (any state other than 0 and -1 counts as in use)."""
    for counter_id in range(reference_capacity(metadata, values)):
        m = counter_id * METADATA_LENGTH
        state = _i32(metadata, m)
        if state == RECORD_UNUSED:
            return counter_id
        if state == RECORD_RECLAIMED and now_ms >= _i64(metadata, m + 8):
            return counter_id
    return COUNTERS_FULL
