"""Loss report: Aeron's ``LossReport`` (driver side) and ``LossReportReader`` over one ``np.uint8`` view (spec §13.1).

The driver's receiver creates one entry per image the first time it sees a gap, then records each later
gap on it. Entries are appended from offset 0 at multiples of 64 (``layout/loss_report.py``).

Publication protocol: ``create_entry`` writes every field and both strings, then release-stores
``observation_count = 1``; a reader acquire-loads the count first, so once it sees a positive count the
rest of the entry is complete, and the strings never change afterwards. ``record_observation`` stores the
last timestamp, get-and-adds the bytes lost, and get-and-adds the count last: a reader that acquire-loads
a count of ``n`` then sees bytes lost and a last timestamp at least as new as observation ``n``.

One writer per report (the driver that owns the file); its next-entry offset lives in a one-element
``int64`` state array, as in Aeron's ``next_record_offset``. A writer reopening an existing report
resumes after its last entry (``loss_report_end_offset``).

Every length read from the buffer is checked against the capacity before it is used: a walk over
garbage stops with ``LOSS_REPORT_CORRUPT`` and never reads out of bounds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.kernels.memory import copy_bytes, fill_bytes
from aeron_numba.layout.bits import INT32_MAX, INT64_MAX
from aeron_numba.layout.loss_report import (
    CHANNEL_LENGTH_OFFSET,
    CHANNEL_OFFSET,
    ENTRY_ALIGNMENT,
    FIRST_OBSERVATION_TIMESTAMP_OFFSET,
    INSUFFICIENT_SPACE,
    INVALID_ENTRY_OFFSET,
    INVALID_LENGTH,
    INVALID_STATE,
    LAST_OBSERVATION_TIMESTAMP_OFFSET,
    LOSS_REPORT_CORRUPT,
    LOSS_REPORT_END,
    MIN_ENTRY_LENGTH,
    OBSERVATION_COUNT_OFFSET,
    SESSION_ID_OFFSET,
    STREAM_ID_OFFSET,
    STRING_ALIGNMENT,
    STRING_LENGTH_FIELD_LENGTH,
    TOTAL_BYTES_LOST_OFFSET,
    check_buffer_length,
)


# Entry lengths (spec/transport.md §13.1), inlined into the kernels below; also callable from Python.
@kernel(inline="always", nogil=False)
def source_length_offset(channel_length):
    """Offset of the source's i32 length within an entry: ``44 + align(C, 4)``."""
    return CHANNEL_OFFSET + align(channel_length, STRING_ALIGNMENT)


@kernel(inline="always", nogil=False)
def entry_length(channel_length, source_length):
    """Unaligned bytes an entry occupies: ``48 + align(C, 4) + S``."""
    return source_length_offset(channel_length) + STRING_LENGTH_FIELD_LENGTH + source_length


@kernel(inline="always", nogil=False)
def aligned_entry_length(channel_length, source_length):
    """Distance from an entry to the next one: ``align(entry_length, 64)``."""
    return align(entry_length(channel_length, source_length), ENTRY_ALIGNMENT)


# Columns of the entry descriptor array filled by ``collect_loss_entries``.
LOSS_DESC_OFFSET = 0
LOSS_DESC_OBSERVATION_COUNT = 1
LOSS_DESC_TOTAL_BYTES_LOST = 2
LOSS_DESC_FIRST_TIMESTAMP = 3
LOSS_DESC_LAST_TIMESTAMP = 4
LOSS_DESC_SESSION_ID = 5
LOSS_DESC_STREAM_ID = 6
LOSS_DESC_CHANNEL_OFFSET = 7  # absolute offset of the channel bytes in the buffer
LOSS_DESC_CHANNEL_LENGTH = 8
LOSS_DESC_SOURCE_OFFSET = 9  # absolute offset of the source bytes in the buffer
LOSS_DESC_SOURCE_LENGTH = 10
LOSS_DESC_COLUMNS = 11

# Writer state array (int64[1]).
STATE_NEXT_ENTRY_OFFSET = 0


# --------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------


@kernel
def create_entry(
    buffer, state, initial_bytes_lost, timestamp_ms, session_id, stream_id, channel, channel_length, source, source_length
):
    """Create an entry at the writer's next offset (§13.1) and return its offset.

    Writes bytes lost, first and last timestamp, session and stream ids, the channel and source strings
    (i32 length, bytes; the source length at the next 4-byte boundary, padding zeroed), then release-stores
    ``observation_count = 1`` and advances ``state[0]`` by the entry length rounded up to 64.

    Parameters
    ----------
    buffer : uint8[::1]
        The loss report.
    state : int64[::1]
        ``state[0]``: offset of the next entry (0 for an empty report; ``loss_report_end_offset`` to resume).
    initial_bytes_lost, timestamp_ms : int
        Bytes lost by the first observation and its epoch ms (first and last timestamp).
    session_id, stream_id : int
        Stored as i32.
    channel, source : uint8[::1]
        ASCII bytes; ``channel_length`` / ``source_length`` of them are used.

    Returns
    -------
    int
        Entry offset ``>= 0``, or ``INSUFFICIENT_SPACE``, ``INVALID_LENGTH`` or ``INVALID_STATE``.
    """
    if channel_length < 0 or channel_length > channel.size or source_length < 0 or source_length > source.size:
        return INVALID_LENGTH
    offset = state[STATE_NEXT_ENTRY_OFFSET]
    if offset < 0 or offset % ENTRY_ALIGNMENT != 0:
        return INVALID_STATE
    capacity = buffer.size
    if offset > capacity or entry_length(channel_length, source_length) > capacity - offset:
        return INSUFFICIENT_SPACE

    atomics.put_int64(buffer, offset + TOTAL_BYTES_LOST_OFFSET, initial_bytes_lost)
    atomics.put_int64(buffer, offset + FIRST_OBSERVATION_TIMESTAMP_OFFSET, timestamp_ms)
    atomics.put_int64(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET, timestamp_ms)
    atomics.put_int32(buffer, offset + SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buffer, offset + STREAM_ID_OFFSET, stream_id)
    atomics.put_int32(buffer, offset + CHANNEL_LENGTH_OFFSET, channel_length)
    start = offset + CHANNEL_OFFSET
    copy_bytes(buffer, start, channel, 0, channel_length)
    source_field = offset + source_length_offset(channel_length)
    fill_bytes(buffer, start + channel_length, source_field - (start + channel_length), 0)
    atomics.put_int32(buffer, source_field, source_length)
    start = source_field + STRING_LENGTH_FIELD_LENGTH
    copy_bytes(buffer, start, source, 0, source_length)
    # Publish last: a reader that acquire-loads a positive count sees every field above.
    atomics.put_int64_release(buffer, offset + OBSERVATION_COUNT_OFFSET, 1)
    state[STATE_NEXT_ENTRY_OFFSET] = offset + aligned_entry_length(channel_length, source_length)
    return offset


@kernel
def record_observation(buffer, entry_offset, bytes_lost, timestamp_ms):
    """Record one more loss on an existing entry (§13.1).

    Stores the last timestamp, get-and-adds ``bytes_lost`` to the total, then get-and-adds 1 to the count
    (a sequentially consistent RMW, so it is ordered after the two writes before it).

    Returns
    -------
    int
        0, or ``INVALID_ENTRY_OFFSET`` when ``entry_offset`` is negative, not 64-aligned, leaves no room for
        an entry header, or holds no created entry (count ``<= 0``).
    """
    if entry_offset < 0 or entry_offset % ENTRY_ALIGNMENT != 0 or entry_offset > buffer.size - MIN_ENTRY_LENGTH:
        return INVALID_ENTRY_OFFSET
    if atomics.get_int64_acquire(buffer, entry_offset + OBSERVATION_COUNT_OFFSET) <= 0:
        return INVALID_ENTRY_OFFSET
    atomics.put_int64(buffer, entry_offset + LAST_OBSERVATION_TIMESTAMP_OFFSET, timestamp_ms)
    atomics.get_and_add_int64(buffer, entry_offset + TOTAL_BYTES_LOST_OFFSET, bytes_lost)
    atomics.get_and_add_int64(buffer, entry_offset + OBSERVATION_COUNT_OFFSET, 1)
    return 0


@kernel(inline="always")
def _entry_lengths(buffer, offset):
    """``(status, channel_length, source_length)`` of the entry at ``offset >= 0``.

    Status 0 for a complete entry, ``LOSS_REPORT_END`` when there is no entry (count ``<= 0`` or no room
    for the count), ``LOSS_REPORT_CORRUPT`` when a published entry's lengths do not fit in the buffer.
    """
    capacity = buffer.size
    if offset > capacity - 8:
        return LOSS_REPORT_END, 0, 0
    if atomics.get_int64_acquire(buffer, offset + OBSERVATION_COUNT_OFFSET) <= 0:
        return LOSS_REPORT_END, 0, 0
    room = capacity - offset  # >= 8
    if room < MIN_ENTRY_LENGTH:
        return LOSS_REPORT_CORRUPT, 0, 0
    channel_length = atomics.get_int32(buffer, offset + CHANNEL_LENGTH_OFFSET)
    # entry_length(C, 0) <= room; lengths are i32, so this int64 arithmetic cannot overflow.
    if channel_length < 0 or entry_length(channel_length, 0) > room:
        return LOSS_REPORT_CORRUPT, 0, 0
    source_length = atomics.get_int32(buffer, offset + source_length_offset(channel_length))
    if source_length < 0 or entry_length(channel_length, source_length) > room:
        return LOSS_REPORT_CORRUPT, 0, 0
    return 0, channel_length, source_length


@kernel
def loss_report_end_offset(buffer):
    """Offset after the last entry, rounded up to 64 (where a resumed writer creates the next entry).

    Returns ``LOSS_REPORT_CORRUPT`` when the walk meets a published entry whose lengths cannot be valid.
    The result may exceed the capacity when the last entry's padding runs past the end.
    """
    offset = 0
    while True:
        status, channel_length, source_length = _entry_lengths(buffer, offset)
        if status == LOSS_REPORT_END:
            return offset
        if status != 0:
            return LOSS_REPORT_CORRUPT
        offset += aligned_entry_length(channel_length, source_length)


@kernel
def collect_loss_entries(buffer, cursor, out):
    """Describe up to ``out.shape[0]`` entries from ``cursor[0]`` on (one call per batch, for Python callers).

    Parameters
    ----------
    buffer : uint8[::1]
        The loss report.
    cursor : int64[::1]
        ``cursor[0]``: in, the entry offset to start from (0 for the first call); out, where to resume, or
        ``LOSS_REPORT_END`` when the walk reached the end, or ``LOSS_REPORT_CORRUPT`` at a bad entry.
    out : int64[:, ::1]
        ``n x LOSS_DESC_COLUMNS`` rows of ``LOSS_DESC_*``. The count is acquire-loaded first; bytes lost
        and the last timestamp are then at least as new as that count's observation.

    Returns
    -------
    int
        Rows filled (entries before a corrupt one are still reported). 0 and ``cursor[0]`` set to
        ``LOSS_REPORT_END`` when ``cursor[0]`` is negative or not 64-aligned, or ``out`` is too narrow.
    """
    offset = cursor[0]
    if offset < 0 or offset % ENTRY_ALIGNMENT != 0 or out.shape[1] < LOSS_DESC_COLUMNS:
        cursor[0] = LOSS_REPORT_END
        return 0
    count = 0
    while count < out.shape[0]:
        status, channel_length, source_length = _entry_lengths(buffer, offset)
        if status != 0:
            cursor[0] = status
            return count
        observation_count = atomics.get_int64_acquire(buffer, offset + OBSERVATION_COUNT_OFFSET)
        out[count, LOSS_DESC_OFFSET] = offset
        out[count, LOSS_DESC_OBSERVATION_COUNT] = observation_count
        out[count, LOSS_DESC_TOTAL_BYTES_LOST] = atomics.get_int64(buffer, offset + TOTAL_BYTES_LOST_OFFSET)
        out[count, LOSS_DESC_FIRST_TIMESTAMP] = atomics.get_int64(buffer, offset + FIRST_OBSERVATION_TIMESTAMP_OFFSET)
        out[count, LOSS_DESC_LAST_TIMESTAMP] = atomics.get_int64(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET)
        out[count, LOSS_DESC_SESSION_ID] = atomics.get_int32(buffer, offset + SESSION_ID_OFFSET)
        out[count, LOSS_DESC_STREAM_ID] = atomics.get_int32(buffer, offset + STREAM_ID_OFFSET)
        out[count, LOSS_DESC_CHANNEL_OFFSET] = offset + CHANNEL_OFFSET
        out[count, LOSS_DESC_CHANNEL_LENGTH] = channel_length
        out[count, LOSS_DESC_SOURCE_OFFSET] = offset + source_length_offset(channel_length) + STRING_LENGTH_FIELD_LENGTH
        out[count, LOSS_DESC_SOURCE_LENGTH] = source_length
        count += 1
        offset += aligned_entry_length(channel_length, source_length)
    cursor[0] = offset
    return count


# --------------------------------------------------------------------------------------------------------
# Python wrappers
# --------------------------------------------------------------------------------------------------------

_INT32_MIN = -INT32_MAX - 1
_INT64_MIN = -INT64_MAX - 1


@dataclass(frozen=True)
class LossEntry:
    """One entry as read back from a loss report (the arguments of Aeron's ``EntryConsumer``)."""

    observation_count: int
    total_bytes_lost: int
    first_observation_timestamp_ms: int
    last_observation_timestamp_ms: int
    session_id: int
    stream_id: int
    channel: str
    source: str


@dataclass(frozen=True)
class LossReportScan:
    """Every readable entry, and the offset of the corrupt entry that ended the walk (None if it ended cleanly)."""

    entries: list[LossEntry]
    corrupt_offset: int | None


def _check_view(buffer: np.ndarray) -> None:
    if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
        raise LayoutError(f"loss report buffer must be a 1-D np.uint8 array, got {type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise LayoutError("loss report buffer must be C-contiguous")


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise ConfigurationError(f"{name}={value!r} must be an int")
    if value < low or value > high:
        raise ConfigurationError(f"{name}={value} outside [{low}, {high}]")
    return int(value)


def _ascii(name: str, text: str) -> np.ndarray:
    if not isinstance(text, str):
        raise ConfigurationError(f"{name}={text!r} must be a str")
    # Aeron writes US-ASCII; anything else becomes '?'. A writable copy keeps one array type per kernel.
    return np.frombuffer(bytearray(text.encode("ascii", errors="replace")), dtype=np.uint8)


class ReportEntry:
    """A created entry of a ``LossReport``: record further loss on its stream (Aeron ``ReportEntry``)."""

    def __init__(self, report: "LossReport", offset: int):
        self._report = report
        self.offset = offset

    def record_observation(self, bytes_lost: int, timestamp_ms: int) -> None:
        self._report.record_observation(self.offset, bytes_lost, timestamp_ms)


class LossReport:
    """Writes a loss report (Aeron ``LossReport``); one per driver, owned by the receiver.

    Parameters
    ----------
    buffer : np.ndarray
        ``np.uint8`` view of ``loss-report.dat`` (at least ``MIN_ENTRY_LENGTH`` bytes).

    Entries already in the buffer are kept and new ones appended after them; a buffer whose entries
    cannot be walked raises ``LayoutError``.
    """

    def __init__(self, buffer: np.ndarray):
        _check_view(buffer)
        check_buffer_length(buffer.size)
        end = int(loss_report_end_offset(buffer))
        if end == LOSS_REPORT_CORRUPT:
            raise LayoutError("loss report holds a corrupt entry: cannot append after it")
        self.buffer = buffer
        self._state = np.array([end], dtype=np.int64)
        self._lock = threading.Lock()  # create_entry reads then advances the state: one writer at a time

    @property
    def next_record_offset(self) -> int:
        return int(self._state[STATE_NEXT_ENTRY_OFFSET])

    def create_entry(
        self, initial_bytes_lost: int, timestamp_ms: int, session_id: int, stream_id: int, channel: str, source: str
    ) -> ReportEntry | None:
        """Create the entry of one stream; None when the report has no room left (Aeron returns null)."""
        initial_bytes_lost = _check_int("initial_bytes_lost", initial_bytes_lost, _INT64_MIN, INT64_MAX)
        timestamp_ms = _check_int("timestamp_ms", timestamp_ms, _INT64_MIN, INT64_MAX)
        session_id = _check_int("session_id", session_id, _INT32_MIN, INT32_MAX)
        stream_id = _check_int("stream_id", stream_id, _INT32_MIN, INT32_MAX)
        channel_bytes = _ascii("channel", channel)
        source_bytes = _ascii("source", source)
        with self._lock:
            offset = int(
                create_entry(
                    self.buffer, self._state, initial_bytes_lost, timestamp_ms, session_id, stream_id,
                    channel_bytes, channel_bytes.size, source_bytes, source_bytes.size,
                )
            )
        if offset == INSUFFICIENT_SPACE:
            return None
        if offset < 0:
            raise LayoutError(f"loss report create_entry failed with status {offset}")
        return ReportEntry(self, offset)

    def record_observation(self, entry_offset: int, bytes_lost: int, timestamp_ms: int) -> None:
        """Record a loss on the entry at ``entry_offset`` (as returned by ``create_entry``)."""
        entry_offset = _check_int("entry_offset", entry_offset, 0, self.buffer.size)
        bytes_lost = _check_int("bytes_lost", bytes_lost, _INT64_MIN, INT64_MAX)
        timestamp_ms = _check_int("timestamp_ms", timestamp_ms, _INT64_MIN, INT64_MAX)
        if record_observation(self.buffer, entry_offset, bytes_lost, timestamp_ms) == INVALID_ENTRY_OFFSET:
            raise ConfigurationError(f"entry_offset={entry_offset} is not the offset of a created loss report entry")


class LossReportReader:
    """Reads a loss report another process writes (Aeron ``LossReportReader``)."""

    _BATCH = 64

    @staticmethod
    def scan(buffer: np.ndarray) -> LossReportScan:
        """Every entry in report order, plus where a corrupt entry stopped the walk (if one did)."""
        _check_view(buffer)
        out = np.zeros((LossReportReader._BATCH, LOSS_DESC_COLUMNS), dtype=np.int64)
        cursor = np.zeros(1, dtype=np.int64)
        entries: list[LossEntry] = []
        while True:
            start = int(cursor[0])
            count = collect_loss_entries(buffer, cursor, out)
            for row in range(count):
                d = out[row]
                channel_start, source_start = int(d[LOSS_DESC_CHANNEL_OFFSET]), int(d[LOSS_DESC_SOURCE_OFFSET])
                channel = buffer[channel_start : channel_start + int(d[LOSS_DESC_CHANNEL_LENGTH])].tobytes()
                source = buffer[source_start : source_start + int(d[LOSS_DESC_SOURCE_LENGTH])].tobytes()
                entries.append(
                    LossEntry(
                        observation_count=int(d[LOSS_DESC_OBSERVATION_COUNT]),
                        total_bytes_lost=int(d[LOSS_DESC_TOTAL_BYTES_LOST]),
                        first_observation_timestamp_ms=int(d[LOSS_DESC_FIRST_TIMESTAMP]),
                        last_observation_timestamp_ms=int(d[LOSS_DESC_LAST_TIMESTAMP]),
                        session_id=int(d[LOSS_DESC_SESSION_ID]),
                        stream_id=int(d[LOSS_DESC_STREAM_ID]),
                        channel=channel.decode("ascii", errors="replace"),
                        source=source.decode("ascii", errors="replace"),
                    )
                )
            if cursor[0] == LOSS_REPORT_CORRUPT:
                if count:
                    last = out[count - 1]
                    corrupt = int(last[LOSS_DESC_OFFSET]) + int(
                        aligned_entry_length(int(last[LOSS_DESC_CHANNEL_LENGTH]), int(last[LOSS_DESC_SOURCE_LENGTH]))
                    )
                else:
                    corrupt = start
                return LossReportScan(entries, corrupt)
            if cursor[0] < 0:
                return LossReportScan(entries, None)

    @staticmethod
    def read(buffer: np.ndarray) -> list[LossEntry]:
        """Every entry in report order; a corrupt entry ends the walk and the entries before it are returned."""
        return LossReportReader.scan(buffer).entries

    @staticmethod
    def is_corrupt(buffer: np.ndarray) -> bool:
        _check_view(buffer)
        return loss_report_end_offset(buffer) == LOSS_REPORT_CORRUPT
