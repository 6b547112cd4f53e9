"""``archive-mark.dat`` (spec/archive.md §5): an archive's liveness, identity and error log.

An archive creates it on start (refusing a dir whose mark file another archive touched within the liveness
timeout), refreshes the activity timestamp every second, records its errors in the distinct error log at
``MARK_HEADER_LENGTH``, and sets the timestamp to -1 on a clean shutdown. The version is written last (the
"ready" signal), so a reader that sees it sees the rest.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np

from aeron_numba.errors import AeronError, LayoutError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.kernels.error_log import DistinctErrorLog
from aeron_numba.layout import archive as A
from aeron_numba.layout.bits import semantic_version_major, semantic_version_string
from aeron_numba.layout.mapped_file import MappedFile


class ArchiveActiveError(AeronError):
    """Another archive is alive on this archive dir (its mark file was touched within the liveness timeout)."""


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class ArchiveMarkFile:
    def __init__(self, mapped: MappedFile, epoch_clock=_epoch_ms, *, owner: bool = False):
        self._mapped = mapped
        self._owner = owner  # the archive that created it; a tool that opened it never writes it
        self.path = mapped.path
        self.epoch_clock = epoch_clock
        buffer = mapped.buffer
        self.error_buffer_length = int(buffer[A.MARK_ERROR_BUFFER_LENGTH_OFFSET:A.MARK_ERROR_BUFFER_LENGTH_OFFSET + 4]
                                       .view(np.int32)[0])
        if A.mark_file_length(self.error_buffer_length) > mapped.length:
            raise LayoutError(f"{self.path}: errorBufferLength={self.error_buffer_length} runs past the file "
                              f"length={mapped.length}")
        self.error_log = DistinctErrorLog(mapped.view(A.MARK_HEADER_LENGTH, self.error_buffer_length),
                                          epoch_clock=epoch_clock)

    @classmethod
    def create(cls, archive_dir: str | os.PathLike, *, archive_id: int, control_channel: str = "",
               control_stream_id: int = A.DEFAULT_CONTROL_STREAM_ID,
               local_control_channel: str = A.DEFAULT_LOCAL_CONTROL_CHANNEL,
               local_control_stream_id: int = A.DEFAULT_LOCAL_CONTROL_STREAM_ID, events_channel: str = "",
               events_stream_id: int = A.DEFAULT_RECORDING_EVENTS_STREAM_ID, aeron_directory: str = "",
               error_buffer_length: int = A.DEFAULT_ERROR_BUFFER_LENGTH, epoch_clock=_epoch_ms,
               liveness_timeout_ms: int = A.MARK_LIVENESS_TIMEOUT_MS) -> "ArchiveMarkFile":
        """Create (or take over a stale) mark file; raises ``ArchiveActiveError`` if an archive is alive there."""
        path = Path(archive_dir) / A.MARK_FILE
        now = epoch_clock()
        if path.exists():
            age = cls.live_owner_age_ms(path, now, liveness_timeout_ms)
            if age is not None:
                raise ArchiveActiveError(f"an archive is active in {archive_dir}: {path} was touched {age} ms ago "
                                         f"(< liveness timeout {liveness_timeout_ms} ms)")
            path.unlink()
        strings = [s.encode("ascii") for s in (control_channel, local_control_channel, events_channel, aeron_directory)]
        A.check_mark_strings_fit([len(s) for s in strings])
        mapped = MappedFile.create(path, A.mark_file_length(error_buffer_length))
        buffer = mapped.buffer
        struct.pack_into("<HHHH", buffer, 0, A.MARK_BLOCK_LENGTH, A.MARK_TEMPLATE_ID, A.MARK_SCHEMA_ID,
                         A.MARK_SCHEMA_VERSION)
        struct.pack_into("<q", buffer, A.MARK_ACTIVITY_TIMESTAMP_OFFSET, now)
        struct.pack_into("<qq", buffer, A.MARK_START_TIMESTAMP_OFFSET, now, os.getpid())
        struct.pack_into("<iiiii", buffer, A.MARK_CONTROL_STREAM_ID_OFFSET, control_stream_id, local_control_stream_id,
                         events_stream_id, A.MARK_HEADER_LENGTH, error_buffer_length)
        struct.pack_into("<q", buffer, A.MARK_ARCHIVE_ID_OFFSET, archive_id)
        at = A.MARK_STRINGS_OFFSET
        for data in strings:
            struct.pack_into(f"<I{len(data)}s", buffer, at, len(data), data)
            at += 4 + len(data)
        atomics_for_python.put_int32_release(buffer, A.MARK_VERSION_OFFSET, A.MARK_VERSION)
        return cls(mapped, epoch_clock, owner=True)

    @staticmethod
    def activity_age_ms(path: str | os.PathLike, now_ms: int) -> int | None:
        """How long ago the mark file at ``path`` was touched; None if it is not a ready mark file (or cleanly
        shut down: timestamp -1)."""
        with open(path, "rb") as f:
            head = f.read(A.MARK_ACTIVITY_TIMESTAMP_OFFSET + 8)
        if len(head) < A.MARK_ACTIVITY_TIMESTAMP_OFFSET + 8:
            return None
        schema_id = struct.unpack_from("<H", head, 4)[0]
        version = struct.unpack_from("<i", head, A.MARK_VERSION_OFFSET)[0]
        if schema_id != A.MARK_SCHEMA_ID or semantic_version_major(version) != semantic_version_major(A.MARK_VERSION):
            return None
        timestamp = struct.unpack_from("<q", head, A.MARK_ACTIVITY_TIMESTAMP_OFFSET)[0]
        return None if timestamp < 0 else now_ms - timestamp

    @classmethod
    def live_owner_age_ms(cls, path: str | os.PathLike, now_ms: int,
                          liveness_timeout_ms: int = A.MARK_LIVENESS_TIMEOUT_MS) -> int | None:
        """How long ago a live archive touched the mark file at ``path``; None if no live archive holds it (never
        ready, cleanly closed, stale, or its owner's pid is gone)."""
        age = cls.activity_age_ms(path, now_ms)
        return age if age is not None and age < liveness_timeout_ms and cls._owner_alive(Path(path)) else None

    @staticmethod
    def _owner_alive(path: Path) -> bool:
        """Whether the pid the mark file names is a live process on this host (a SIGKILLed archive's is not, so
        a restart need not wait out the liveness timeout); True when it cannot be told."""
        with open(path, "rb") as f:
            head = f.read(A.MARK_PID_OFFSET + 8)
        if len(head) < A.MARK_PID_OFFSET + 8:
            return True
        return ArchiveMarkFile.pid_alive(struct.unpack_from("<q", head, A.MARK_PID_OFFSET)[0])

    @staticmethod
    def pid_alive(pid: int) -> bool:
        """Whether ``pid`` is a live (not zombie) process on this host; True when it cannot be told (no pid, or
        another user's process). The cluster's mark files use the same rule."""
        if pid <= 0:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:  # a zombie is dead too
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except (OSError, IndexError):
            return True

    @classmethod
    def open(cls, archive_dir: str | os.PathLike, epoch_clock=_epoch_ms, *, read_only: bool = False) -> "ArchiveMarkFile":
        """Map an existing mark file (tools: pid, errors); checks its header and version."""
        path = Path(archive_dir) / A.MARK_FILE
        mapped = MappedFile.open(path, min_length=A.MARK_HEADER_LENGTH, read_only=read_only)
        try:
            schema_id = int(mapped.buffer[4:6].view(np.uint16)[0])
            version = int(atomics_for_python.get_int32_acquire(mapped.buffer, A.MARK_VERSION_OFFSET))
            if schema_id != A.MARK_SCHEMA_ID:
                raise LayoutError(f"{path}: schemaId={schema_id}, expected {A.MARK_SCHEMA_ID} (archive mark file)")
            if semantic_version_major(version) != semantic_version_major(A.MARK_VERSION):
                raise LayoutError(f"{path}: mark file version {semantic_version_string(version)} is not compatible "
                                  f"with {semantic_version_string(A.MARK_VERSION)}")
            return cls(mapped, epoch_clock)
        except BaseException:
            mapped.close()
            raise

    # ------------------------------------------------------------------------------------------ fields
    def _i64(self, offset: int) -> int:
        return int(self._mapped.buffer[offset:offset + 8].view(np.int64)[0])

    @property
    def pid(self) -> int:
        return self._i64(A.MARK_PID_OFFSET)

    @property
    def archive_id(self) -> int:
        return self._i64(A.MARK_ARCHIVE_ID_OFFSET)

    @property
    def start_timestamp(self) -> int:
        return self._i64(A.MARK_START_TIMESTAMP_OFFSET)

    @property
    def activity_timestamp(self) -> int:
        return int(atomics_for_python.get_int64_acquire(self._mapped.buffer, A.MARK_ACTIVITY_TIMESTAMP_OFFSET))

    @property
    def version(self) -> int:
        return int(atomics_for_python.get_int32_acquire(self._mapped.buffer, A.MARK_VERSION_OFFSET))

    def stream_ids(self) -> tuple[int, int, int]:
        """Control, local control and recording-events stream ids."""
        return struct.unpack_from("<iii", self._mapped.buffer, A.MARK_CONTROL_STREAM_ID_OFFSET)

    @property
    def header_length(self) -> int:
        return struct.unpack_from("<i", self._mapped.buffer, A.MARK_HEADER_LENGTH_OFFSET)[0]

    def strings(self) -> dict[str, str]:
        """The four channel/dir strings, read with their lengths checked against the header length."""
        buffer, at, out = self._mapped.buffer, A.MARK_STRINGS_OFFSET, {}
        for name in A.MARK_STRINGS:
            (length,) = struct.unpack_from("<I", buffer, at)
            if at + 4 + length > A.MARK_HEADER_LENGTH:
                raise LayoutError(f"{self.path}: {name} length={length} runs past MARK_HEADER_LENGTH")
            out[name] = bytes(buffer[at + 4:at + 4 + length]).decode("ascii", errors="replace")
            at += 4 + length
        return out

    def update_activity_timestamp(self, now_ms: int) -> None:
        atomics_for_python.put_int64_release(self._mapped.buffer, A.MARK_ACTIVITY_TIMESTAMP_OFFSET, now_ms)

    @property
    def error_log_buffer(self) -> np.ndarray:
        return self._mapped.view(A.MARK_HEADER_LENGTH, self.error_buffer_length)

    def close(self, *, clean_shutdown: bool = True) -> None:
        """Unmap; the owning archive's clean shutdown first sets the activity timestamp to -1 (no archive here
        any more). A tool that only opened the file leaves it as it was."""
        if self._mapped.buffer is not None and clean_shutdown and self._owner:
            self.update_activity_timestamp(-1)
        self.error_log = None
        self._mapped.close()

    def __enter__(self) -> "ArchiveMarkFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
