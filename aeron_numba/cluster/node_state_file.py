"""``node-state.dat`` (spec/cluster.md §3): the node's highest candidate term, kept across restarts so a node never
votes twice in one term.

A 1 MiB mapped file of schema 112 frames (16-byte headers carrying their frame length) after an 8-byte
``nodeStateHeader``; readers find a frame by walking the headers from offset 8 until the footer. The candidate
term id is stored last with release semantics, after the timestamp and log position it goes with.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from aeron_numba.cluster.cluster_error import ClusterError, ClusterFileError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE, align, semantic_version_major, semantic_version_string
from aeron_numba.layout.mapped_file import MappedFile

_HEADER = struct.Struct(C.NODE_STATE_HEADER_FORMAT)


def find_frame(buffer, template_id: int, path: str | os.PathLike) -> int:
    """File offset of the first frame with ``template_id``, or -1 when the footer (or a zero frame length)
    comes first. Raises ``ClusterFileError`` for a negative frame length or a frame running off the file."""
    limit = len(buffer)
    offset = C.NODE_STATE_HEADER_BLOCK_LENGTH
    while offset + C.NODE_STATE_MESSAGE_HEADER_LENGTH <= limit:
        _, found, _, _, frame_length, _ = _HEADER.unpack_from(buffer, offset)
        if found == template_id:
            return offset
        if found == C.NODE_STATE_FOOTER_TEMPLATE_ID or frame_length == 0:
            return NULL_VALUE
        if frame_length < 0:
            raise ClusterFileError(path, f"frame with templateId={found} has frameLength={frame_length} < 0",
                                   offset + C.NODE_STATE_FRAME_LENGTH_OFFSET, limit)
        offset += align(frame_length, C.NODE_STATE_ALIGNMENT)
    return NULL_VALUE


class NodeStateFile:
    """The mapped ``node-state.dat`` of a cluster dir: ``candidate_term_id``, ``timestamp``, ``log_position``."""

    def __init__(self, mapped: MappedFile, candidate_term_offset: int):
        self._mapped = mapped
        self.path = mapped.path
        self._block = candidate_term_offset + C.NODE_STATE_MESSAGE_HEADER_LENGTH

    @classmethod
    def open(cls, cluster_dir: str | os.PathLike, *, create_new: bool = False,
             read_only: bool = False) -> "NodeStateFile":
        """Map the dir's node-state.dat, creating a fresh one (candidate term -1) when there is none and
        ``create_new``. An existing file is checked: its version's major, a footer, a candidateTerm frame."""
        path = Path(cluster_dir) / C.NODE_STATE_FILE
        if not path.exists():
            if not create_new or read_only:
                raise ClusterFileError(path, "NodeStateFile does not exist and createNew=false")
            return cls._create(path)
        mapped = MappedFile.open(path, read_only=read_only)
        try:
            return cls(mapped, cls._check(mapped))
        except BaseException:
            mapped.close()
            raise

    @classmethod
    def _create(cls, path: Path) -> "NodeStateFile":
        mapped = MappedFile.create(path, C.NODE_STATE_FILE_LENGTH)
        buffer = mapped.buffer
        struct.pack_into("<i", buffer, C.NODE_STATE_VERSION_OFFSET, C.MARK_VERSION)
        at = C.CANDIDATE_TERM_FRAME_OFFSET
        _HEADER.pack_into(buffer, at, C.CANDIDATE_TERM_BLOCK_LENGTH, C.CANDIDATE_TERM_TEMPLATE_ID,
                          C.NODE_STATE_SCHEMA_ID, C.NODE_STATE_SCHEMA_VERSION, C.CANDIDATE_TERM_FRAME_LENGTH, 0)
        block = at + C.NODE_STATE_MESSAGE_HEADER_LENGTH
        struct.pack_into("<q", buffer, block + C.CANDIDATE_TERM_LOG_POSITION_FIELD_OFFSET, NULL_VALUE)
        struct.pack_into("<q", buffer, block + C.CANDIDATE_TERM_TIMESTAMP_FIELD_OFFSET, NULL_VALUE)
        _HEADER.pack_into(buffer, C.NODE_STATE_FOOTER_FRAME_OFFSET, 0, C.NODE_STATE_FOOTER_TEMPLATE_ID,
                          C.NODE_STATE_SCHEMA_ID, C.NODE_STATE_SCHEMA_VERSION, C.NODE_STATE_MESSAGE_HEADER_LENGTH, 0)
        atomics_for_python.put_int64_release(buffer, block + C.CANDIDATE_TERM_ID_FIELD_OFFSET, NULL_VALUE)
        return cls(mapped, at)

    @staticmethod
    def _check(mapped: MappedFile) -> int:
        buffer, path = mapped.buffer, mapped.path
        if mapped.length < C.NODE_STATE_FOOTER_FRAME_OFFSET + C.NODE_STATE_MESSAGE_HEADER_LENGTH:
            raise ClusterFileError(path, f"file length={mapped.length} < "
                                   f"{C.NODE_STATE_FOOTER_FRAME_OFFSET + C.NODE_STATE_MESSAGE_HEADER_LENGTH}, "
                                   f"the header, candidateTerm and footer frames", 0, mapped.length)
        (version,) = struct.unpack_from("<i", buffer, C.NODE_STATE_VERSION_OFFSET)
        if semantic_version_major(version) != semantic_version_major(C.MARK_VERSION):
            raise ClusterFileError(path, f"node state version {semantic_version_string(version)} does not match "
                                   f"major version {semantic_version_major(C.MARK_VERSION)}",
                                   C.NODE_STATE_VERSION_OFFSET, mapped.length)
        if find_frame(buffer, C.NODE_STATE_FOOTER_TEMPLATE_ID, path) == NULL_VALUE:
            raise ClusterFileError(path, "failed to find NodeStateFooter entry, file corrupt?",
                                   C.NODE_STATE_HEADER_BLOCK_LENGTH, mapped.length)
        offset = find_frame(buffer, C.CANDIDATE_TERM_TEMPLATE_ID, path)
        if offset == NULL_VALUE:
            raise ClusterFileError(path, "failed to find CandidateTerm entry", C.NODE_STATE_HEADER_BLOCK_LENGTH,
                                   mapped.length)
        if offset + C.CANDIDATE_TERM_FRAME_LENGTH > mapped.length:
            raise ClusterFileError(path, "candidateTerm frame runs past the end of the file", offset, mapped.length)
        return offset

    # -------------------------------------------------------------------------------------------- fields
    @property
    def candidate_term_id(self) -> int:
        return int(atomics_for_python.get_int64_acquire(self._mapped.buffer,
                                                        self._block + C.CANDIDATE_TERM_ID_FIELD_OFFSET))

    @property
    def timestamp(self) -> int:
        return struct.unpack_from("<q", self._mapped.buffer, self._block + C.CANDIDATE_TERM_TIMESTAMP_FIELD_OFFSET)[0]

    @property
    def log_position(self) -> int:
        return struct.unpack_from("<q", self._mapped.buffer,
                                  self._block + C.CANDIDATE_TERM_LOG_POSITION_FIELD_OFFSET)[0]

    def update_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp_ms: int) -> None:
        """Store the term with its log position and time; the term id last, so a reader that sees it sees them."""
        buffer = self._mapped.buffer
        if not buffer.flags.writeable:
            raise ClusterError(f"{self.path} was opened read-only")
        struct.pack_into("<q", buffer, self._block + C.CANDIDATE_TERM_LOG_POSITION_FIELD_OFFSET, log_position)
        struct.pack_into("<q", buffer, self._block + C.CANDIDATE_TERM_TIMESTAMP_FIELD_OFFSET, timestamp_ms)
        atomics_for_python.put_int64_release(buffer, self._block + C.CANDIDATE_TERM_ID_FIELD_OFFSET,
                                             candidate_term_id)

    def propose_max_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp_ms: int) -> int:
        """Store ``candidate_term_id`` only if it is above the stored one; returns the stored one after."""
        existing = self.candidate_term_id
        if candidate_term_id > existing:
            self.update_candidate_term_id(candidate_term_id, log_position, timestamp_ms)
            return candidate_term_id
        return existing

    def close(self) -> None:
        self._mapped.close()

    def __enter__(self) -> "NodeStateFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
