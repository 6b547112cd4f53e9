"""Cluster mark files (spec/cluster.md §4): ``cluster-mark.dat`` of the consensus module and
``cluster-mark-service-<id>.dat`` of each service container — who runs in this dir, with which settings, whether
it is alive, and its distinct error log at offset 8192.

The layout differs from the archive's mark file (schema 110, not 100; other fields; six strings), so it has its
own descriptor in ``layout/cluster.py``; the liveness rule is the same (touched within 10 s by a pid that still
runs), so the pid check is the archive mark file's ``ArchiveMarkFile.pid_alive``.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np

from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.cluster.cluster_error import ClusterError, ClusterFileError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import semantic_version_major, semantic_version_string
from aeron_numba.layout.mapped_file import MappedFile
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH, VAR_LENGTH_PREFIX


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterMarkFile:
    """A mapped cluster mark file: header fields, the six strings, the error log view."""

    def __init__(self, mapped: MappedFile, *, owner: bool = False):
        self._mapped = mapped
        self._owner = owner  # the component that created it; a tool that opened it never writes it
        self.path = mapped.path

    # ----------------------------------------------------------------------------------------- opening
    @classmethod
    def create(cls, path: str | os.PathLike, *, component_type: str, member_id: int, service_id: int,
               cluster_id: int = 0, archive_stream_id: int = 10, service_stream_id: int = 104,
               consensus_module_stream_id: int = 105, ingress_stream_id: int = -1, aeron_directory: str = "",
               control_channel: str = "", ingress_channel: str = "", service_name: str = "",
               authenticator: str = "", services_cluster_dir: str = "",
               error_buffer_length: int = C.DEFAULT_ERROR_BUFFER_LENGTH,
               epoch_clock=_epoch_ms) -> "ClusterMarkFile":
        """Create (or replace) a mark file and signal it ready (version written last)."""
        C.check_error_buffer_length(error_buffer_length)
        if component_type not in C.COMPONENT_TYPE_IDS:
            raise ClusterError(f"componentType={component_type!r} is not one of {', '.join(C.COMPONENT_TYPE_IDS)}")
        strings = [s.encode("ascii") for s in (aeron_directory, control_channel, ingress_channel, service_name,
                                               authenticator, services_cluster_dir)]
        C.check_mark_strings_fit([len(s) for s in strings])
        path = Path(path)
        path.unlink(missing_ok=True)
        mapped = MappedFile.create(path, C.mark_file_length(error_buffer_length))
        buffer = mapped.buffer
        now = epoch_clock()
        struct.pack_into("<HHHH", buffer, 0, C.MARK_BLOCK_LENGTH, C.MARK_TEMPLATE_ID, C.MARK_SCHEMA_ID,
                         C.MARK_SCHEMA_VERSION)
        values = {"componentType": C.COMPONENT_TYPE_IDS[component_type], "activityTimestamp": now,
                  "startTimestamp": now, "pid": os.getpid(), "candidateTermId": -1,
                  "archiveStreamId": archive_stream_id, "serviceStreamId": service_stream_id,
                  "consensusModuleStreamId": consensus_module_stream_id, "ingressStreamId": ingress_stream_id,
                  "memberId": member_id, "serviceId": service_id, "headerLength": C.MARK_HEADER_LENGTH,
                  "errorBufferLength": error_buffer_length, "clusterId": cluster_id}
        for name, offset, fmt in C.MARK_FIELDS:
            if name in values:
                struct.pack_into("<" + fmt, buffer, MESSAGE_HEADER_LENGTH + offset, values[name])
        at = C.MARK_STRINGS_OFFSET
        for data in strings:
            struct.pack_into(f"<I{len(data)}s", buffer, at, len(data), data)
            at += VAR_LENGTH_PREFIX + len(data)
        atomics_for_python.put_int32_release(buffer, C.MARK_VERSION_OFFSET, C.MARK_VERSION)
        return cls(mapped, owner=True)

    @classmethod
    def open(cls, path: str | os.PathLike, *, read_only: bool = True) -> "ClusterMarkFile":
        """Map an existing mark file and check it: length, SBE header (schema 110, template 200), major version,
        header and error buffer lengths inside the file."""
        path = Path(path)
        if not path.exists():
            raise ClusterFileError(path, "mark file does not exist")
        mapped = MappedFile.open(path, read_only=read_only)
        try:
            cls._check(mapped)
            return cls(mapped)
        except BaseException:
            mapped.close()
            raise

    @staticmethod
    def _check(mapped: MappedFile) -> None:
        path, length, buffer = mapped.path, mapped.length, mapped.buffer
        if length < C.MARK_STRINGS_OFFSET:
            raise ClusterFileError(path, f"file length={length} < {C.MARK_STRINGS_OFFSET}, the SBE header and "
                                   f"MarkFileHeader block", 0, length)
        block_length, template_id, schema_id, _ = struct.unpack_from("<HHHH", buffer, 0)
        if template_id != C.MARK_TEMPLATE_ID or schema_id != C.MARK_SCHEMA_ID:
            raise ClusterFileError(path, f"templateId={template_id}, schemaId={schema_id}: not a cluster mark file "
                                   f"(expected templateId={C.MARK_TEMPLATE_ID}, schemaId={C.MARK_SCHEMA_ID})", 0,
                                   length)
        if block_length < C.MARK_BLOCK_LENGTH:
            raise ClusterFileError(path, f"blockLength={block_length} < {C.MARK_BLOCK_LENGTH}", 0, length)
        version = struct.unpack_from("<i", buffer, C.MARK_VERSION_OFFSET)[0]
        if semantic_version_major(version) != semantic_version_major(C.MARK_VERSION):
            raise ClusterFileError(path, f"mark file major version {semantic_version_major(version)} "
                                   f"({semantic_version_string(version)}) does not match software: "
                                   f"{semantic_version_major(C.MARK_VERSION)}", C.MARK_VERSION_OFFSET, length)
        header_length, error_buffer_length = struct.unpack_from("<ii", buffer, C.MARK_HEADER_LENGTH_OFFSET)
        if header_length < C.MARK_STRINGS_OFFSET or error_buffer_length < 0 \
                or header_length + error_buffer_length > length:
            raise ClusterFileError(path, f"headerLength={header_length} + errorBufferLength={error_buffer_length} "
                                   f"runs past the file length={length}", C.MARK_HEADER_LENGTH_OFFSET, length)

    # -------------------------------------------------------------------------------------------- fields
    @property
    def sbe_block_length(self) -> int:
        return struct.unpack_from("<H", self._mapped.buffer, 0)[0]

    @property
    def sbe_schema_version(self) -> int:
        return struct.unpack_from("<H", self._mapped.buffer, 6)[0]

    def fields(self) -> dict[str, int]:
        """The MarkFileHeader block's fields by their SBE names."""
        buffer = self._mapped.buffer
        return {name: struct.unpack_from("<" + fmt, buffer, MESSAGE_HEADER_LENGTH + offset)[0]
                for name, offset, fmt in C.MARK_FIELDS}

    def _i32(self, offset: int) -> int:
        return struct.unpack_from("<i", self._mapped.buffer, offset)[0]

    def _i64(self, offset: int) -> int:
        return struct.unpack_from("<q", self._mapped.buffer, offset)[0]

    @property
    def version(self) -> int:
        return int(atomics_for_python.get_int32_acquire(self._mapped.buffer, C.MARK_VERSION_OFFSET))

    @property
    def component_type(self) -> str:
        value = self._i32(C.MARK_COMPONENT_TYPE_OFFSET)
        return C.COMPONENT_TYPES.get(value, str(value))

    @property
    def pid(self) -> int:
        return self._i64(C.MARK_PID_OFFSET)

    @property
    def start_timestamp(self) -> int:
        return self._i64(C.MARK_START_TIMESTAMP_OFFSET)

    @property
    def activity_timestamp(self) -> int:
        return int(atomics_for_python.get_int64_acquire(self._mapped.buffer, C.MARK_ACTIVITY_TIMESTAMP_OFFSET))

    @property
    def member_id(self) -> int:
        return self._i32(C.MARK_MEMBER_ID_OFFSET)

    @property
    def service_id(self) -> int:
        return self._i32(C.MARK_SERVICE_ID_OFFSET)

    @property
    def cluster_id(self) -> int:
        return self._i32(C.MARK_CLUSTER_ID_OFFSET)

    @property
    def header_length(self) -> int:
        return self._i32(C.MARK_HEADER_LENGTH_OFFSET)

    @property
    def error_buffer_length(self) -> int:
        return self._i32(C.MARK_ERROR_BUFFER_LENGTH_OFFSET)

    def strings(self) -> dict[str, str]:
        """The var strings present in this file's schema version, each checked to end by the header length."""
        buffer, at, out = self._mapped.buffer, C.MARK_STRINGS_OFFSET, {}
        limit = min(self.header_length, self._mapped.length)
        for name in C.MARK_STRINGS:
            if self.sbe_schema_version < C.MARK_STRINGS_SINCE_VERSION.get(name, 0):
                continue
            if at + VAR_LENGTH_PREFIX > limit:
                raise ClusterFileError(self.path, f"{name} length runs past headerLength={limit}", at, limit)
            (length,) = struct.unpack_from("<I", buffer, at)
            if at + VAR_LENGTH_PREFIX + length > limit:
                raise ClusterFileError(self.path, f"{name} length={length} runs past headerLength={limit}", at, limit)
            out[name] = bytes(buffer[at + VAR_LENGTH_PREFIX:at + VAR_LENGTH_PREFIX + length]).decode("ascii",
                                                                                                     "replace")
            at += VAR_LENGTH_PREFIX + length
        return out

    def describe(self) -> str:
        """The header as Aeron's generated ``MarkFileHeaderDecoder.toString()`` prints it (ClusterTool describe)."""
        parts = []
        for name, value in self.fields().items():
            if name == "componentType":
                value = C.COMPONENT_TYPES.get(value, value)
            parts.append(f"{name}={value}")
        parts.extend(f"{name}='{value}'" for name, value in self.strings().items())
        return (f"[MarkFileHeader](sbeTemplateId={C.MARK_TEMPLATE_ID}|sbeSchemaId={C.MARK_SCHEMA_ID}|"
                f"sbeSchemaVersion={self.sbe_schema_version}|sbeBlockLength={self.sbe_block_length}):"
                + "|".join(parts))

    @property
    def error_log_buffer(self) -> np.ndarray:
        return self._mapped.view(self.header_length, self.error_buffer_length)

    # ----------------------------------------------------------------------------------------- liveness
    def update_activity_timestamp(self, now_ms: int) -> None:
        atomics_for_python.put_int64_release(self._mapped.buffer, C.MARK_ACTIVITY_TIMESTAMP_OFFSET, now_ms)

    def is_active(self, now_ms: int, liveness_timeout_ms: int = C.MARK_LIVENESS_TIMEOUT_MS) -> bool:
        """Whether a live component owns the file: touched within the timeout and its pid still running."""
        timestamp = self.activity_timestamp
        return (timestamp >= 0 and now_ms - timestamp < liveness_timeout_ms
                and ArchiveMarkFile.pid_alive(self.pid))

    def close(self, *, clean_shutdown: bool = True) -> None:
        """Unmap; the owner's clean shutdown first sets the activity timestamp to -1."""
        if self._mapped.buffer is not None and clean_shutdown and self._owner:
            self.update_activity_timestamp(-1)
        self._mapped.close()

    def __enter__(self) -> "ClusterMarkFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def resolve_mark_file_dir(cluster_dir: str | os.PathLike) -> Path:
    """The dir holding ``cluster-mark.dat``: the one a ``cluster-mark.lnk`` names, else the cluster dir."""
    link = Path(cluster_dir) / C.MARK_LINK_FILE
    return Path(link.read_text("ascii").strip()) if link.exists() else Path(cluster_dir)


def service_mark_files(services_dir: str | os.PathLike) -> list[Path]:
    """The service mark files of a dir, ``.lnk`` files resolved first (a link wins over a file of its name)."""
    directory = Path(services_dir)
    try:
        names = sorted(p.name for p in directory.iterdir() if p.name.startswith(C.SERVICE_MARK_FILE_PREFIX))
    except OSError:
        return []
    resolved: dict[str, Path] = {}
    for name in names:
        if name.endswith(C.MARK_LINK_FILE_EXTENSION):
            stem = name[:-len(C.MARK_LINK_FILE_EXTENSION)]
            target = Path((directory / name).read_text("ascii").strip())
            resolved[stem] = target / (stem + C.MARK_FILE_EXTENSION)
    for name in names:
        if name.endswith(C.MARK_FILE_EXTENSION):
            resolved.setdefault(name[:-len(C.MARK_FILE_EXTENSION)], directory / name)
    return list(resolved.values())
