"""Create or map a ``*.logbuffer`` file and read its metadata (Aeron's ``LogBuffers``, spec §2).

The driver creates the file and writes the metadata before any client maps it (the file name only
reaches clients afterwards, in a command response), so plain stores suffice here; everything that
changes while the log is in use is read and written by the kernels with atomics.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import frame, log_buffer_descriptor as lb
from aeron_numba.layout.mapped_file import MappedFile


def _put(buf: np.ndarray, offset: int, dtype, value: int) -> None:
    buf[offset : offset + np.dtype(dtype).itemsize].view(dtype)[0] = value


def _get(buf: np.ndarray, offset: int, dtype) -> int:
    return int(buf[offset : offset + np.dtype(dtype).itemsize].view(dtype)[0])


def _wrap_i32(value: int) -> int:
    return ((value + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


def initial_raw_tails(initial_term_id: int, term_id: int | None = None, term_offset: int = 0) -> tuple[list[int], int]:
    """Raw tails of the three partitions and ``active_term_count`` for a new log (§2.1 initialisation).

    Without a start position the log starts at ``initial_term_id``; with ``term_id``/``term_offset`` (URI
    ``init-term-id``/``term-id``/``term-offset``) it starts there. The two partitions after the active one
    hold term ids 3 less than their next use, which is what the rotation CAS expects (§3.1).
    """
    if term_id is None:
        term_id = initial_term_id
    term_count = _wrap_i32(term_id - initial_term_id)
    active = term_count % lb.PARTITION_COUNT
    tails = [0, 0, 0]
    tails[active] = (term_id << 32) | term_offset
    for step in (1, 2):
        future_term_id = _wrap_i32(term_id + step - lb.PARTITION_COUNT)
        tails[(active + step) % lb.PARTITION_COUNT] = future_term_id << 32
    return tails, term_count


class LogBuffers:
    """A mapped log buffer file: ``buffer`` (whole file), ``terms`` views and metadata accessors."""

    def __init__(self, mapped: MappedFile):
        self._mapped = mapped
        buf = mapped.buffer
        self.metadata_offset = lb.metadata_offset(mapped.length)
        meta = self.metadata_offset
        self.term_length = _get(buf, meta + lb.LOG_TERM_LENGTH_OFFSET, np.int32)
        self.page_size = _get(buf, meta + lb.LOG_PAGE_SIZE_OFFSET, np.int32)
        lb.check_log_file(mapped.length, self.term_length, self.page_size)
        lb.check_default_header_length(_get(buf, meta + lb.LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET, np.int32))
        self.mtu_length = _get(buf, meta + lb.LOG_MTU_LENGTH_OFFSET, np.int32)
        frame.check_mtu_length(self.mtu_length)
        self.initial_term_id = _get(buf, meta + lb.LOG_INITIAL_TERM_ID_OFFSET, np.int32)
        header = meta + lb.LOG_DEFAULT_FRAME_HEADER_OFFSET
        self.session_id = _get(buf, header + frame.SESSION_ID_FIELD_OFFSET, np.int32)
        self.stream_id = _get(buf, header + frame.STREAM_ID_FIELD_OFFSET, np.int32)
        self.correlation_id = _get(buf, meta + lb.LOG_CORRELATION_ID_OFFSET, np.int64)
        self.position_bits_to_shift = self.term_length.bit_length() - 1
        self.max_message_length = frame.compute_max_message_length(self.term_length)
        self.max_payload_length = frame.max_payload_length(self.mtu_length)

    @property
    def buffer(self) -> np.ndarray:
        return self._mapped.buffer

    @property
    def path(self) -> Path:
        return self._mapped.path

    def term(self, index: int) -> np.ndarray:
        return self._mapped.view(index * self.term_length, self.term_length)

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        term_length: int,
        initial_term_id: int,
        session_id: int,
        stream_id: int,
        correlation_id: int = 0,
        mtu_length: int = frame.DEFAULT_MTU_LENGTH,
        page_size: int = lb.DEFAULT_FILE_PAGE_SIZE,
        term_id: int | None = None,
        term_offset: int = 0,
        linger_timeout_ns: int = 5_000_000_000,
        pre_touch: bool = False,
        entity_tag: int = 0,
    ) -> "LogBuffers":
        """Create a zeroed log buffer file and write its metadata as the driver does (§2, §2.1).

        ``pre_touch`` writes a zero into every page of the terms now (nobody else maps the file yet), so that
        the pages exist before the stream's first pass: otherwise each is allocated by the first process to
        fault on it, in the middle of the stream (about 36 us per page measured in this VM).
        """
        lb.check_term_length(term_length)
        lb.check_page_size(page_size)
        frame.check_mtu_length(mtu_length)
        if term_offset < 0 or term_offset > term_length or term_offset % frame.FRAME_ALIGNMENT:
            raise ConfigurationError(
                f"term_offset={term_offset} must be in [0, term_length={term_length}] and a multiple of "
                f"{frame.FRAME_ALIGNMENT}"
            )
        mapped = MappedFile.create(path, lb.compute_log_length(term_length, page_size))
        buf, meta = mapped.buffer, lb.metadata_offset(mapped.length)
        if pre_touch:
            buf[:lb.PARTITION_COUNT * term_length:mmap.PAGESIZE] = 0
        tails, term_count = initial_raw_tails(initial_term_id, term_id, term_offset)
        for index, raw_tail in enumerate(tails):
            _put(buf, meta + lb.term_tail_counter_offset(index), np.int64, raw_tail)
        _put(buf, meta + lb.LOG_ACTIVE_TERM_COUNT_OFFSET, np.int32, term_count)
        _put(buf, meta + lb.LOG_END_OF_STREAM_POSITION_OFFSET, np.int64, lb.END_OF_STREAM_OPEN)
        _put(buf, meta + lb.LOG_CORRELATION_ID_OFFSET, np.int64, correlation_id)
        _put(buf, meta + lb.LOG_INITIAL_TERM_ID_OFFSET, np.int32, initial_term_id)
        _put(buf, meta + lb.LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET, np.int32, frame.HEADER_LENGTH)
        _put(buf, meta + lb.LOG_MTU_LENGTH_OFFSET, np.int32, mtu_length)
        _put(buf, meta + lb.LOG_TERM_LENGTH_OFFSET, np.int32, term_length)
        _put(buf, meta + lb.LOG_PAGE_SIZE_OFFSET, np.int32, page_size)
        _put(buf, meta + lb.LOG_LINGER_TIMEOUT_NS_OFFSET, np.int64, linger_timeout_ns)
        _put(buf, meta + lb.LOG_ENTITY_TAG_OFFSET, np.int64, entity_tag)  # a publication's tag; 0 for an image, as C
        header = meta + lb.LOG_DEFAULT_FRAME_HEADER_OFFSET
        buf[header + frame.VERSION_FIELD_OFFSET] = frame.CURRENT_VERSION
        buf[header + frame.FLAGS_FIELD_OFFSET] = frame.UNFRAGMENTED
        _put(buf, header + frame.TYPE_FIELD_OFFSET, np.int16, frame.HDR_TYPE_DATA)
        _put(buf, header + frame.SESSION_ID_FIELD_OFFSET, np.int32, session_id)
        _put(buf, header + frame.STREAM_ID_FIELD_OFFSET, np.int32, stream_id)
        _put(buf, header + frame.TERM_ID_FIELD_OFFSET, np.int32, initial_term_id)
        for flag_offset in (lb.LOG_REJOIN_OFFSET, lb.LOG_RELIABLE_OFFSET, lb.LOG_SIGNAL_EOS_OFFSET, lb.LOG_TETHER_OFFSET):
            buf[meta + flag_offset] = 1  # Aeron's defaults: rejoin, reliable, eos and tether are on (§14)
        return cls(mapped)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "LogBuffers":
        """Map an existing log buffer file and validate its metadata against the file length."""
        return cls(MappedFile.open(path, min_length=lb.LOG_META_DATA_LENGTH))

    def close(self) -> None:
        self._mapped.close()

    def __enter__(self) -> "LogBuffers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
