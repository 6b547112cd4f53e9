"""Distinct error log: Agrona's ``DistinctErrorLog`` / ``ErrorLogReader`` over one ``np.uint8`` view (spec §10).

Records are appended from offset 0, each aligned to 8: a header (length, observation count, last and first
observation timestamps) and the encoded error text. A new distinct error is published by release-storing
its ``length`` after the text, so a reader that acquire-loads a non-zero length sees the whole record; the
text never changes afterwards. A repeat of an identical text only bumps the count (atomic) and
release-stores the last timestamp.

Agrona keeps the list of distinct errors in the writer's heap; here the kernel finds them by walking the
buffer and comparing texts, so the log's state lives only in the buffer (a restarted writer resumes it).
Only one process writes a given log (the driver, archive or cluster node that owns the file); the Python
``DistinctErrorLog`` serialises its own threads.

Every length read from the buffer is checked (``>= ENCODED_ERROR_OFFSET`` and inside the buffer) before
use: a walk over garbage stops with ``ERROR_LOG_CORRUPT`` and never reads out of bounds.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.bits import align
from aeron_numba.layout.error_log import (
    ENCODED_ERROR_OFFSET,
    ERROR_LOG_CORRUPT,
    ERROR_LOG_END,
    FIRST_OBSERVATION_TIMESTAMP_OFFSET,
    INSUFFICIENT_SPACE,
    INVALID_TEXT_LENGTH,
    LAST_OBSERVATION_TIMESTAMP_OFFSET,
    LENGTH_FIELD_LENGTH,
    LENGTH_OFFSET,
    OBSERVATION_COUNT_OFFSET,
    RECORD_ALIGNMENT,
    check_buffer_length,
)

# Columns of the record descriptor array filled by ``collect_error_records``.
ERROR_DESC_OFFSET = 0  # record offset; the text starts at offset + ENCODED_ERROR_OFFSET
ERROR_DESC_TEXT_LENGTH = 1
ERROR_DESC_OBSERVATION_COUNT = 2
ERROR_DESC_FIRST_TIMESTAMP = 3
ERROR_DESC_LAST_TIMESTAMP = 4
ERROR_DESC_COLUMNS = 5


# --------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------


@kernel(inline="always")
def _record_length(buffer, offset):
    """Length of the record at ``offset``: 0 at the end of the log, ``ERROR_LOG_CORRUPT`` if it cannot be valid."""
    capacity = buffer.size
    if offset + LENGTH_FIELD_LENGTH > capacity:
        return 0  # no room for another record header: the log ends here
    length = atomics.get_int32_acquire(buffer, offset + LENGTH_OFFSET)
    if length == 0:
        return 0
    if length < ENCODED_ERROR_OFFSET or length > capacity - offset:
        return ERROR_LOG_CORRUPT
    return length


@kernel
def error_log_exists(buffer):
    """True when the first record's length is non-zero (§10): at least one error was recorded."""
    return buffer.size >= LENGTH_FIELD_LENGTH and atomics.get_int32_acquire(buffer, LENGTH_OFFSET) != 0


@kernel
def error_log_end_offset(buffer):
    """Offset just after the last record (where the next distinct error goes), or ``ERROR_LOG_CORRUPT``."""
    offset = 0
    while True:
        length = _record_length(buffer, offset)
        if length == 0:
            return offset
        if length < 0:
            return ERROR_LOG_CORRUPT
        offset += align(length, RECORD_ALIGNMENT)


@kernel(inline="always")
def _text_equals(buffer, text_offset, text, text_length):
    for i in range(text_length):
        if buffer[text_offset + i] != text[i]:
            return False
    return True


@kernel
def record_observation(buffer, encoded_text, text_length, now_ms):
    """Record one observation of an error (§10) and return the offset of its record.

    If a record with an identical text exists its ``observation_count`` is atomically incremented and
    ``last_observation_timestamp`` release-stored. Otherwise a record is appended: first (and last)
    timestamp, count 0 and text, then ``length`` release-stored, then the count incremented and the last
    timestamp release-stored.

    Parameters
    ----------
    buffer : uint8[::1]
        The error log.
    encoded_text : uint8[::1]
        Encoded error text; ``text_length`` bytes of it are used.
    now_ms : int
        Epoch ms of this observation.

    Returns
    -------
    int
        Record offset ``>= 0``, or ``INSUFFICIENT_SPACE``, ``ERROR_LOG_CORRUPT`` or ``INVALID_TEXT_LENGTH``.
    """
    if text_length < 0 or text_length > encoded_text.size:
        return INVALID_TEXT_LENGTH
    offset = 0
    while True:
        length = _record_length(buffer, offset)
        if length == 0:
            break
        if length < 0:
            return ERROR_LOG_CORRUPT
        if length - ENCODED_ERROR_OFFSET == text_length and _text_equals(
            buffer, offset + ENCODED_ERROR_OFFSET, encoded_text, text_length
        ):
            atomics.get_and_add_int32(buffer, offset + OBSERVATION_COUNT_OFFSET, 1)
            atomics.put_int64_release(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET, now_ms)
            return offset
        offset += align(length, RECORD_ALIGNMENT)

    record_length = ENCODED_ERROR_OFFSET + text_length
    if record_length > buffer.size - offset:
        return INSUFFICIENT_SPACE
    atomics.put_int64(buffer, offset + FIRST_OBSERVATION_TIMESTAMP_OFFSET, now_ms)
    # Not in Agrona's sequence, but harmless: a reader never sees a published record with last ts 0.
    atomics.put_int64(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET, now_ms)
    atomics.put_int32(buffer, offset + OBSERVATION_COUNT_OFFSET, 0)
    text_start = offset + ENCODED_ERROR_OFFSET
    copy_bytes(buffer, text_start, encoded_text, 0, text_length)
    # Publish: everything above is visible to a reader that acquire-loads this length.
    atomics.put_int32_release(buffer, offset + LENGTH_OFFSET, record_length)
    atomics.get_and_add_int32(buffer, offset + OBSERVATION_COUNT_OFFSET, 1)
    atomics.put_int64_release(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET, now_ms)
    return offset


@kernel
def record(buffer, encoded_text, text_length, now_ms):
    """``record_observation`` as Agrona's ``DistinctErrorLog.record``: False when it could not be recorded."""
    return record_observation(buffer, encoded_text, text_length, now_ms) >= 0


@kernel
def collect_error_records(buffer, since_timestamp_ms, cursor, out):
    """Describe up to ``out.shape[0]`` records whose last observation is ``>= since_timestamp_ms``.

    Parameters
    ----------
    buffer : uint8[::1]
        The error log.
    cursor : int64[::1]
        ``cursor[0]``: in, the record offset to start from (0 for the first call); out, where to resume,
        or ``ERROR_LOG_END`` when the walk reached the end, or ``ERROR_LOG_CORRUPT`` at a bad length.
    out : int64[:, ::1]
        ``n x ERROR_DESC_COLUMNS`` rows of ``ERROR_DESC_*``.

    Returns
    -------
    int
        Rows filled (records before a corrupt length are still reported). 0 and ``cursor[0]`` set to
        ``ERROR_LOG_END`` when ``cursor[0]`` is negative or not 8-aligned, or ``out`` is too narrow.
    """
    offset = cursor[0]
    if offset < 0 or offset % RECORD_ALIGNMENT != 0 or out.shape[1] < ERROR_DESC_COLUMNS:
        cursor[0] = ERROR_LOG_END
        return 0
    count = 0
    while count < out.shape[0]:
        length = _record_length(buffer, offset)
        if length == 0:
            cursor[0] = ERROR_LOG_END
            return count
        if length < 0:
            cursor[0] = ERROR_LOG_CORRUPT
            return count
        last_ms = atomics.get_int64_acquire(buffer, offset + LAST_OBSERVATION_TIMESTAMP_OFFSET)
        if last_ms >= since_timestamp_ms:
            out[count, ERROR_DESC_OFFSET] = offset
            out[count, ERROR_DESC_TEXT_LENGTH] = length - ENCODED_ERROR_OFFSET
            out[count, ERROR_DESC_OBSERVATION_COUNT] = atomics.get_int32_acquire(
                buffer, offset + OBSERVATION_COUNT_OFFSET
            )
            out[count, ERROR_DESC_FIRST_TIMESTAMP] = atomics.get_int64(buffer, offset + FIRST_OBSERVATION_TIMESTAMP_OFFSET)
            out[count, ERROR_DESC_LAST_TIMESTAMP] = last_ms
            count += 1
        offset += align(length, RECORD_ALIGNMENT)
    cursor[0] = offset
    return count


# --------------------------------------------------------------------------------------------------------
# Python wrappers
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorObservation:
    """One distinct error as read back from the log (Agrona's ``ErrorConsumer`` arguments)."""

    observation_count: int
    first_observation_timestamp_ms: int
    last_observation_timestamp_ms: int
    encoded_exception: str


def _check_view(buffer: np.ndarray) -> None:
    if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
        raise LayoutError(f"error log buffer must be a 1-D np.uint8 array, got {type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise LayoutError("error log buffer must be C-contiguous")


def _frame_text(frame: traceback.FrameSummary) -> str:
    path = Path(frame.filename)
    return f"\tat {path.stem}.{frame.name}({path.name}:{frame.lineno})"


def encode_error(error: BaseException | str) -> str:
    """The text recorded for an error, shaped like a Java stack trace as Aeron records it.

    ``"<module.Type>: <message>"``, then one ``"\\tat <module>.<function>(<file>:<line>)"`` line per frame,
    innermost first, then ``"Caused by: …"`` for each chained cause. A ``str`` is recorded as is.
    """
    if isinstance(error, str):
        return error
    if not isinstance(error, BaseException):
        raise ConfigurationError(f"error={error!r} must be an exception or a str")
    parts = []
    seen = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cls = type(current)
        name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
        message = str(current)
        lines = [f"{name}: {message}" if message else name]
        frames = traceback.extract_tb(current.__traceback__) if current.__traceback__ is not None else []
        lines.extend(_frame_text(frame) for frame in reversed(frames))
        parts.append("\n".join(lines))
        cause = current.__cause__
        if cause is None and not current.__suppress_context__:
            cause = current.__context__
        current = cause
    return "\nCaused by: ".join(parts)


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class DistinctErrorLog:
    """Records distinct errors into a log buffer (Agrona ``DistinctErrorLog``): repeats only bump a count.

    Parameters
    ----------
    buffer : np.ndarray
        ``np.uint8`` view of the error log section (>= 32 bytes, a multiple of 8).
    epoch_clock : callable, optional
        Returns epoch ms; defaults to the wall clock.
    """

    def __init__(self, buffer: np.ndarray, epoch_clock: Callable[[], int] | None = None):
        _check_view(buffer)
        check_buffer_length(buffer.size)
        self.buffer = buffer
        self._epoch_clock = epoch_clock or _epoch_ms
        self._lock = threading.Lock()  # the kernel walks then appends: one recorder at a time

    def record(self, error: BaseException | str) -> bool:
        """Record an observation; False when the log has no room for a new distinct error (or is corrupt)."""
        data = encode_error(error).encode("utf-8")
        text = np.frombuffer(bytearray(data), dtype=np.uint8)
        with self._lock:
            return bool(record(self.buffer, text, len(data), int(self._epoch_clock())))


class ErrorLogReader:
    """Reads a distinct error log another process writes (Agrona ``ErrorLogReader``)."""

    _BATCH = 64

    @staticmethod
    def read(buffer: np.ndarray, since_timestamp_ms: int = 0) -> list[ErrorObservation]:
        """Every distinct error whose last observation is at or after ``since_timestamp_ms``, in log order.

        A corrupt length ends the walk: the records before it are returned.
        """
        _check_view(buffer)
        out = np.zeros((ErrorLogReader._BATCH, ERROR_DESC_COLUMNS), dtype=np.int64)
        cursor = np.zeros(1, dtype=np.int64)
        observations = []
        while True:
            count = collect_error_records(buffer, int(since_timestamp_ms), cursor, out)
            for row in range(count):
                start = int(out[row, ERROR_DESC_OFFSET]) + ENCODED_ERROR_OFFSET
                text = buffer[start : start + int(out[row, ERROR_DESC_TEXT_LENGTH])].tobytes()
                observations.append(
                    ErrorObservation(
                        observation_count=int(out[row, ERROR_DESC_OBSERVATION_COUNT]),
                        first_observation_timestamp_ms=int(out[row, ERROR_DESC_FIRST_TIMESTAMP]),
                        last_observation_timestamp_ms=int(out[row, ERROR_DESC_LAST_TIMESTAMP]),
                        encoded_exception=text.decode("utf-8", errors="replace"),
                    )
                )
            if cursor[0] < 0:
                return observations

    @staticmethod
    def is_corrupt(buffer: np.ndarray) -> bool:
        """True when a walk of the log meets an impossible record length."""
        _check_view(buffer)
        return error_log_end_offset(buffer) == ERROR_LOG_CORRUPT
