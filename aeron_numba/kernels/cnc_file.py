"""Create or map ``cnc.dat`` and hand out a view of each section (spec/transport.md §6).

The driver creates the file, fills in the lengths, pid, start time and liveness timeout, and release-stores
``cnc_version`` last (§6.1): a client that maps the file waits for a non-zero version before it trusts the
lengths, then checks the major version and that the file holds every section the header announces.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from aeron_numba.errors import LayoutError
from aeron_numba.kernels.atomics_for_python import get_int32_acquire, put_int32_release
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import cnc
from aeron_numba.layout.mapped_file import MappedFile


def _get_i32(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset : offset + 4].view(np.int32)[0])


def _get_i64(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset : offset + 8].view(np.int64)[0])


class CncFile:
    """A mapped ``cnc.dat`` with ``np.uint8`` views of its five sections.

    Attributes
    ----------
    to_driver_buffer, to_clients_buffer, counters_metadata_buffer, counters_values_buffer, error_log_buffer
        Views of the sections, in file order.
    sections : cnc.CncSections
        Offsets and lengths.
    """

    def __init__(self, mapped: MappedFile, sections: cnc.CncSections):
        self._mapped = mapped
        self.sections = sections
        s = sections
        self.to_driver_buffer = mapped.view(s.to_driver_offset, s.to_driver_length)
        self.to_clients_buffer = mapped.view(s.to_clients_offset, s.to_clients_length)
        self.counters_metadata_buffer = mapped.view(s.counters_metadata_offset, s.counters_metadata_length)
        self.counters_values_buffer = mapped.view(s.counters_values_offset, s.counters_values_length)
        self.error_log_buffer = mapped.view(s.error_log_offset, s.error_log_length)

    # ------------------------------------------------------------------------------------------------ header
    @property
    def buffer(self) -> np.ndarray:
        return self._mapped.buffer

    @property
    def path(self) -> Path:
        return self._mapped.path

    @property
    def cnc_version(self) -> int:
        return int(get_int32_acquire(self._mapped.buffer, cnc.CNC_VERSION_FIELD_OFFSET))

    @property
    def client_liveness_timeout_ns(self) -> int:
        return _get_i64(self._mapped.buffer, cnc.CLIENT_LIVENESS_TIMEOUT_FIELD_OFFSET)

    @property
    def start_timestamp_ms(self) -> int:
        return _get_i64(self._mapped.buffer, cnc.START_TIMESTAMP_FIELD_OFFSET)

    @property
    def pid(self) -> int:
        return _get_i64(self._mapped.buffer, cnc.PID_FIELD_OFFSET)

    # ------------------------------------------------------------------------------------------ create / map
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        to_driver_buffer_length: int = cnc.DEFAULT_TO_DRIVER_BUFFER_LENGTH,
        to_clients_buffer_length: int = cnc.DEFAULT_TO_CLIENTS_BUFFER_LENGTH,
        counters_values_buffer_length: int = cnc.DEFAULT_COUNTERS_VALUES_BUFFER_LENGTH,
        error_log_buffer_length: int = cnc.DEFAULT_ERROR_LOG_BUFFER_LENGTH,
        client_liveness_timeout_ns: int = cnc.DEFAULT_CLIENT_LIVENESS_TIMEOUT_NS,
        start_timestamp_ms: int | None = None,
        pid: int | None = None,
        signal_ready: bool = True,
    ) -> "CncFile":
        """Create a zeroed ``cnc.dat`` laid out per §6.2 (the file must not exist).

        With ``signal_ready`` the version is release-stored at once; a driver that must initialise its
        buffers first passes False and calls ``signal_ready()`` when it is ready for clients.
        """
        sections = cnc.compute_sections(
            to_driver_buffer_length, to_clients_buffer_length, counters_values_buffer_length, error_log_buffer_length
        )
        mapped = MappedFile.create(path, sections.file_length)
        buf = mapped.buffer
        header = [
            (cnc.TO_DRIVER_BUFFER_LENGTH_FIELD_OFFSET, np.int32, sections.to_driver_length),
            (cnc.TO_CLIENTS_BUFFER_LENGTH_FIELD_OFFSET, np.int32, sections.to_clients_length),
            (cnc.COUNTERS_METADATA_BUFFER_LENGTH_FIELD_OFFSET, np.int32, sections.counters_metadata_length),
            (cnc.COUNTERS_VALUES_BUFFER_LENGTH_FIELD_OFFSET, np.int32, sections.counters_values_length),
            (cnc.ERROR_LOG_BUFFER_LENGTH_FIELD_OFFSET, np.int32, sections.error_log_length),
            (cnc.CLIENT_LIVENESS_TIMEOUT_FIELD_OFFSET, np.int64, client_liveness_timeout_ns),
            (cnc.START_TIMESTAMP_FIELD_OFFSET, np.int64, int(time.time() * 1000) if start_timestamp_ms is None else start_timestamp_ms),
            (cnc.PID_FIELD_OFFSET, np.int64, os.getpid() if pid is None else pid),
        ]
        for offset, dtype, value in header:
            buf[offset : offset + np.dtype(dtype).itemsize].view(dtype)[0] = value
        cnc_file = cls(mapped, sections)
        if signal_ready:
            cnc_file.signal_ready()
        return cnc_file

    def signal_ready(self) -> None:
        """Release-store ``cnc_version``: from now on clients may use the file (§6.1)."""
        put_int32_release(self._mapped.buffer, cnc.CNC_VERSION_FIELD_OFFSET, cnc.CNC_VERSION)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "CncFile":
        """Map an existing ``cnc.dat`` and validate it.

        Raises ``LayoutError`` if it is not ready (version 0), has another major version, or is shorter
        than its header says. Callers that wait for a starting driver retry on ``CncNotReadyError``.
        """
        path = Path(path)
        mapped = MappedFile.open(path, min_length=cnc.END_OF_METADATA_OFFSET + 1)
        try:
            buf = mapped.buffer
            version = int(get_int32_acquire(buf, cnc.CNC_VERSION_FIELD_OFFSET))
            if version == 0:
                raise CncNotReadyError(f"{path}: cnc_version=0, the driver has not finished starting")
            cnc.check_version(version)
            sections = cnc.compute_sections(
                _get_i32(buf, cnc.TO_DRIVER_BUFFER_LENGTH_FIELD_OFFSET),
                _get_i32(buf, cnc.TO_CLIENTS_BUFFER_LENGTH_FIELD_OFFSET),
                _get_i32(buf, cnc.COUNTERS_VALUES_BUFFER_LENGTH_FIELD_OFFSET),
                _get_i32(buf, cnc.ERROR_LOG_BUFFER_LENGTH_FIELD_OFFSET),
                counters_metadata_length=_get_i32(buf, cnc.COUNTERS_METADATA_BUFFER_LENGTH_FIELD_OFFSET),
            )
            cnc.check_file_length(mapped.length, sections)
            del buf
            return cls(mapped, sections)
        except BaseException:
            mapped.close()
            raise

    def close(self) -> None:
        self.to_driver_buffer = self.to_clients_buffer = None
        self.counters_metadata_buffer = self.counters_values_buffer = self.error_log_buffer = None
        self._mapped.close()

    def __enter__(self) -> "CncFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def body_problem(to_driver: ManyToOneRingBuffer, now_ms: int, future_tolerance_ms: int) -> str | None:
    """Why a ready ``cnc.dat`` holds values no driver writes (a valid header over a garbage body), or None.

    A driver's heartbeat is epoch ms, never negative and not ahead of this clock by more than the tolerance
    (clocks of one machine agree); its ring buffer's head and tail are positions producers could store.
    """
    heartbeat_ms = to_driver.consumer_heartbeat_time()
    if heartbeat_ms < 0:
        return f"driver heartbeat={heartbeat_ms} is negative"
    if heartbeat_ms - now_ms > future_tolerance_ms:
        return f"driver heartbeat={heartbeat_ms} is {heartbeat_ms - now_ms} ms in the future"
    problem = to_driver.trailer_problem()
    return None if problem is None else f"to-driver ring buffer {problem}"


class CncNotReadyError(LayoutError):
    """``cnc.dat`` exists but its version is still 0: the driver is starting (retry until a deadline)."""
