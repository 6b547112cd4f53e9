"""``archive.catalog``: the archive's list of recordings (spec/archive.md §3), byte-compatible with Aeron's.

One ``Catalog`` owns the mapped file. Entries are appended in recording-id order; the in-memory index maps a
recording id to its entry offset, built by walking the entries on open. A descriptor body is the SBE
``RecordingDescriptor`` block and strings (``codecs/archive_messages.py``), so listing a recording sends the
very bytes the catalog holds. With a checksum algorithm every body change recomputes the descriptor checksum.

Positions another process may read while the archive runs (``stop_position``, ``start_position``) are
release-stored. A corrupt entry (a length that is not aligned or runs past the file) ends the walk: what is
before it stays usable, the problem is reported in ``Catalog.errors``, and new entries are not appended over
it (``CatalogError`` on append) until an operator repairs the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np

from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.sbe import MalformedMessageError
from aeron_numba.errors import AeronError, LayoutError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.kernels.replay_rewrite import frame_checksum
from aeron_numba.layout import archive as A
from aeron_numba.layout.bits import semantic_version_major, semantic_version_string
from aeron_numba.layout.checksum import CHECKSUM_NONE, check_checksum_algorithm
from aeron_numba.layout.mapped_file import MappedFile

_STOP_POSITION = A.DESCRIPTOR_HEADER_LENGTH + A.DESCRIPTOR_BODY_OFFSETS["stop_position"]
_START_POSITION = A.DESCRIPTOR_HEADER_LENGTH + A.DESCRIPTOR_BODY_OFFSETS["start_position"]
_STOP_TIMESTAMP = A.DESCRIPTOR_HEADER_LENGTH + A.DESCRIPTOR_BODY_OFFSETS["stop_timestamp"]
_RECORDING_ID = A.DESCRIPTOR_HEADER_LENGTH + A.DESCRIPTOR_BODY_OFFSETS["recording_id"]


class CatalogError(AeronError):
    """The catalog cannot do what was asked (unknown recording, full, corrupt)."""


def _i32(buffer: np.ndarray, offset: int) -> int:
    return int(buffer[offset:offset + 4].view(np.int32)[0])


def _i64(buffer: np.ndarray, offset: int) -> int:
    return int(buffer[offset:offset + 8].view(np.int64)[0])


class Catalog:
    """The mapped ``archive.catalog`` of an archive dir."""

    def __init__(self, path: Path, mapped: MappedFile, checksum_algorithm: int):
        self.path = path
        self._mapped = mapped
        self.checksum_algorithm = check_checksum_algorithm(checksum_algorithm)
        self.errors: list[str] = []
        buffer = mapped.buffer
        version = _i32(buffer, A.CATALOG_VERSION_OFFSET)
        if semantic_version_major(version) != semantic_version_major(A.CATALOG_VERSION):
            raise LayoutError(f"{path}: catalog version {semantic_version_string(version)} is not compatible with "
                              f"{semantic_version_string(A.CATALOG_VERSION)} (major versions differ)")
        self.alignment = A.check_catalog_alignment(_i32(buffer, A.CATALOG_ALIGNMENT_OFFSET))
        self._index: dict[int, int] = {}  # recording id -> entry offset
        self._corrupt_at: int | None = None  # offset of an entry the walk could not read
        self._end = self._walk()

    # ----------------------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, archive_dir: str | os.PathLike, *, capacity: int = A.DEFAULT_CATALOG_CAPACITY,
             checksum_algorithm: int = CHECKSUM_NONE, create: bool = True, read_only: bool = False) -> "Catalog":
        """Map the dir's catalog, creating an empty one of ``capacity`` bytes if there is none (and ``create``);
        ``read_only`` maps an existing one for reading only (tools describing a dir they must not change)."""
        path = Path(archive_dir) / A.CATALOG_FILE
        if path.exists():
            mapped = MappedFile.open(path, min_length=A.CATALOG_HEADER_LENGTH, read_only=read_only)
        elif not create:
            raise CatalogError(f"no catalog at {path}")
        else:
            A.check_catalog_capacity(capacity)
            mapped = MappedFile.create(path, capacity)
            buffer = mapped.buffer
            buffer[A.CATALOG_LENGTH_OFFSET:A.CATALOG_LENGTH_OFFSET + 4].view(np.int32)[0] = A.CATALOG_HEADER_LENGTH
            buffer[A.CATALOG_ALIGNMENT_OFFSET:A.CATALOG_ALIGNMENT_OFFSET + 4].view(np.int32)[0] = \
                A.DEFAULT_CATALOG_ALIGNMENT
            atomics_for_python.put_int32_release(buffer, A.CATALOG_VERSION_OFFSET, A.CATALOG_VERSION)  # written last
        try:
            return cls(path, mapped, checksum_algorithm)
        except BaseException:
            mapped.close()
            raise

    def close(self) -> None:
        self._mapped.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def capacity(self) -> int:
        return self._mapped.length

    @property
    def next_recording_id(self) -> int:
        return _i64(self._mapped.buffer, A.CATALOG_NEXT_RECORDING_ID_OFFSET)

    def _walk(self) -> int:
        """Index the entries; returns the offset after the last good one."""
        buffer, capacity = self._mapped.buffer, self._mapped.length
        offset = A.first_entry_offset(_i32(buffer, A.CATALOG_ALIGNMENT_OFFSET))
        while offset + A.DESCRIPTOR_HEADER_LENGTH <= capacity:
            length = _i32(buffer, offset + A.DESCRIPTOR_LENGTH_OFFSET)
            if length == 0:
                break
            entry_length = A.DESCRIPTOR_HEADER_LENGTH + length
            if length < A.descriptor_body_length(0, 0, 0) or entry_length % self.alignment or \
                    offset + entry_length > capacity:
                self.errors.append(f"{self.path}: entry at offset {offset} has length={length} (must be >= "
                                   f"{A.descriptor_body_length(0, 0, 0)}, leave the entry {self.alignment}-aligned "
                                   f"and end within {capacity} bytes): entries from here on are not read")
                self._corrupt_at = offset
                return offset
            self._index[_i64(buffer, offset + _RECORDING_ID)] = offset
            offset += entry_length
        return offset

    # ----------------------------------------------------------------------------------------- writing
    def add_recording(self, *, start_position: int, start_timestamp: int, initial_term_id: int,
                      segment_file_length: int, term_buffer_length: int, mtu_length: int, session_id: int,
                      stream_id: int, stripped_channel: str, original_channel: str, source_identity: str,
                      stop_position: int = A.NULL_POSITION, stop_timestamp: int = A.NULL_TIMESTAMP) -> int:
        """Append a VALID entry for a new recording; returns its recording id."""
        if self._corrupt_at is not None:
            raise CatalogError(f"{self.path}: cannot append after the corrupt entry at offset {self._corrupt_at}")
        recording_id = self.next_recording_id
        body = ARCHIVE.encode_body(ARCHIVE.RecordingDescriptor(
            control_session_id=0, correlation_id=0, recording_id=recording_id, start_timestamp=start_timestamp,
            stop_timestamp=stop_timestamp, start_position=start_position, stop_position=stop_position,
            initial_term_id=initial_term_id, segment_file_length=segment_file_length,
            term_buffer_length=term_buffer_length, mtu_length=mtu_length, session_id=session_id,
            stream_id=stream_id, stripped_channel=stripped_channel, original_channel=original_channel,
            source_identity=source_identity))
        entry_length = A.DESCRIPTOR_HEADER_LENGTH + len(body)
        entry_length += -entry_length % self.alignment
        offset = self._end
        if offset + entry_length > self._mapped.length:
            self._grow(offset + entry_length)
        buffer = self._mapped.buffer
        start = offset + A.DESCRIPTOR_HEADER_LENGTH
        buffer[start:start + len(body)] = np.frombuffer(body, dtype=np.uint8)
        buffer[offset + A.DESCRIPTOR_STATE_OFFSET:offset + A.DESCRIPTOR_STATE_OFFSET + 4].view(np.int32)[0] = \
            A.RECORDING_STATE_VALID
        self._index[recording_id] = offset
        self._update_checksum(offset, entry_length - A.DESCRIPTOR_HEADER_LENGTH)
        # The length makes the entry visible to a reader walking the file: it goes last.
        atomics_for_python.put_int32_release(buffer, offset + A.DESCRIPTOR_LENGTH_OFFSET, entry_length - A.DESCRIPTOR_HEADER_LENGTH)
        atomics_for_python.put_int64_release(buffer, A.CATALOG_NEXT_RECORDING_ID_OFFSET, recording_id + 1)
        self._end = offset + entry_length
        return recording_id

    def _grow(self, needed: int) -> None:
        self.grow_to(A.grown_catalog_capacity(self._mapped.length, needed))

    def grow_to(self, capacity: int) -> None:
        """Make the file ``capacity`` bytes long if that is more than it is now (a smaller one is no change)."""
        A.check_catalog_capacity(capacity)
        if capacity <= self._mapped.length:
            return
        self._mapped.close()
        os.truncate(self.path, capacity)
        self._mapped = MappedFile.open(self.path)

    def _entry(self, recording_id: int) -> int:
        offset = self._index.get(recording_id)
        if offset is None:
            raise CatalogError(f"unknown recording id={recording_id} (catalog holds "
                               f"{len(self._index)} recordings, next id {self.next_recording_id})")
        return offset

    def _update_checksum(self, offset: int, body_length: int) -> None:
        if self.checksum_algorithm == CHECKSUM_NONE:
            return
        buffer = self._mapped.buffer
        value = frame_checksum(self.checksum_algorithm, buffer, offset + A.DESCRIPTOR_HEADER_LENGTH, body_length)
        buffer[offset + A.DESCRIPTOR_CHECKSUM_OFFSET:offset + A.DESCRIPTOR_CHECKSUM_OFFSET + 4].view(np.int32)[0] = value

    def _body_length(self, offset: int) -> int:
        return _i32(self._mapped.buffer, offset + A.DESCRIPTOR_LENGTH_OFFSET)

    def update_stop_position(self, recording_id: int, stop_position: int, stop_timestamp: int) -> None:
        offset = self._entry(recording_id)
        buffer = self._mapped.buffer
        buffer[offset + _STOP_TIMESTAMP:offset + _STOP_TIMESTAMP + 8].view(np.int64)[0] = stop_timestamp
        atomics_for_python.put_int64_release(buffer, offset + _STOP_POSITION, stop_position)
        self._update_checksum(offset, self._body_length(offset))

    def update_start_position(self, recording_id: int, start_position: int) -> None:
        offset = self._entry(recording_id)
        atomics_for_python.put_int64_release(self._mapped.buffer, offset + _START_POSITION, start_position)
        self._update_checksum(offset, self._body_length(offset))

    def update_checksum(self, recording_id: int) -> None:
        """Recompute the descriptor checksum with the catalog's algorithm (a tool adding checksums afterwards)."""
        offset = self._entry(recording_id)
        self._update_checksum(offset, self._body_length(offset))

    def change_state(self, recording_id: int, state: int) -> None:
        if state not in (A.RECORDING_STATE_INVALID, A.RECORDING_STATE_VALID, A.RECORDING_STATE_DELETED):
            raise CatalogError(f"recording state={state} is not INVALID 0, VALID 1 or DELETED 2")
        offset = self._entry(recording_id)
        atomics_for_python.put_int32_release(self._mapped.buffer, offset + A.DESCRIPTOR_STATE_OFFSET, state)

    # ----------------------------------------------------------------------------------------- reading
    def has_recording(self, recording_id: int) -> bool:
        return recording_id in self._index

    def state(self, recording_id: int) -> int:
        return _i32(self._mapped.buffer, self._entry(recording_id) + A.DESCRIPTOR_STATE_OFFSET)

    def stop_position(self, recording_id: int) -> int:
        return int(atomics_for_python.get_int64_acquire(self._mapped.buffer, self._entry(recording_id) + _STOP_POSITION))

    def descriptor(self, recording_id: int):
        """The recording's ``RecordingDescriptor`` (decoded from the entry body)."""
        offset = self._entry(recording_id)
        return ARCHIVE.decode_body("RecordingDescriptor", self._mapped.buffer, offset + A.DESCRIPTOR_HEADER_LENGTH,
                                   self._body_length(offset))

    def descriptor_body(self, recording_id: int) -> bytes:
        """The entry's body bytes (what a list response carries after its SBE header)."""
        offset = self._entry(recording_id)
        start = offset + A.DESCRIPTOR_HEADER_LENGTH
        return bytes(self._mapped.buffer[start:start + self._body_length(offset)])

    @property
    def version(self) -> int:
        return _i32(self._mapped.buffer, A.CATALOG_VERSION_OFFSET)

    def entry_header(self, recording_id: int) -> tuple[int, int, int]:
        """The entry's ``RecordingDescriptorHeader``: (body length, state, checksum)."""
        offset = self._entry(recording_id)
        buffer = self._mapped.buffer
        return (self._body_length(offset), _i32(buffer, offset + A.DESCRIPTOR_STATE_OFFSET),
                _i32(buffer, offset + A.DESCRIPTOR_CHECKSUM_OFFSET))

    def entry_bytes(self, recording_id: int) -> bytes:
        """The whole entry, header and aligned body, as stored."""
        offset = self._entry(recording_id)
        return bytes(self._mapped.buffer[offset:offset + A.DESCRIPTOR_HEADER_LENGTH + self._body_length(offset)])

    def computed_checksum(self, recording_id: int) -> int:
        """The descriptor checksum the catalog's algorithm gives for the entry's body now."""
        offset = self._entry(recording_id)
        return int(frame_checksum(self.checksum_algorithm, self._mapped.buffer, offset + A.DESCRIPTOR_HEADER_LENGTH,
                                  self._body_length(offset)))

    def checksum_matches(self, recording_id: int) -> bool:
        """Whether the stored descriptor checksum is that of the body (always True without an algorithm)."""
        if self.checksum_algorithm == CHECKSUM_NONE:
            return True
        offset = self._entry(recording_id)
        buffer = self._mapped.buffer
        computed = frame_checksum(self.checksum_algorithm, buffer, offset + A.DESCRIPTOR_HEADER_LENGTH,
                                  self._body_length(offset))
        return computed == _i32(buffer, offset + A.DESCRIPTOR_CHECKSUM_OFFSET)

    def recording_ids(self) -> list[int]:
        return sorted(self._index)

    def descriptors(self, from_recording_id: int = 0, count: int | None = None) -> Iterator:
        """Descriptors of VALID recordings from ``from_recording_id`` on, at most ``count``; an entry whose body
        does not decode is reported in ``errors`` and skipped."""
        sent = 0
        for recording_id in self.recording_ids():
            if recording_id < from_recording_id or self.state(recording_id) != A.RECORDING_STATE_VALID:
                continue
            if count is not None and sent >= count:
                return
            try:
                descriptor = self.descriptor(recording_id)
            except MalformedMessageError as exc:
                self.errors.append(f"{self.path}: recording {recording_id}: {exc}")
                continue
            sent += 1
            yield descriptor
