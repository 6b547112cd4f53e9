"""A recording's segment files (spec/archive.md §4): writing blocks of recorded frames, finding where an
interrupted recording's frames end, and the file work of the segment operations (truncate, purge, detach and
attach, delete, migrate).

``RecordingWriter`` writes the blocks a recorder takes from an image (whole frames of one term, from the term
scanner) byte for byte at ``position - segment base``: a lone PAD frame as its 32-byte header only, the file
offset still advancing by its full length. Each segment file is created at its full length (sparse) and a new
one begins when a write reaches the end of the last; an existing file for a new segment is an error, never
overwritten. With a record checksum the block is copied and every DATA frame's ``session_id`` gets the checksum
of its payload (``replay_rewrite.record_checksums``); the image's log is never written.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import numpy as np

from aeron_numba.errors import AeronError
from aeron_numba.kernels import recorder
from aeron_numba.kernels.replay_rewrite import record_checksums
from aeron_numba.kernels.segment_scanner import recorded_frames_end
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout import archive as A
from aeron_numba.layout import frame
from aeron_numba.layout.checksum import CHECKSUM_NONE, REWRITE_OUT_LENGTH, check_checksum_algorithm
from aeron_numba.layout.mapped_file import MappedFile


PAGE_SIZE = mmap.PAGESIZE


class SegmentFileError(AeronError):
    """A segment file cannot be written as the recording requires (exists already, block misplaced)."""


def segment_files(archive_dir: str | os.PathLike, recording_id: int) -> list[tuple[int, Path]]:
    """``(segment base position, path)`` of the recording's segment files, lowest base first."""
    found = []
    for path in Path(archive_dir).iterdir():
        parsed = A.parse_segment_file_name(path.name)
        if parsed is not None and parsed[0] == recording_id:
            found.append((parsed[1], path))
    return sorted(found)


def truncate_segment_files(archive_dir: str | os.PathLike, recording_id: int, start_position: int,
                           stop_position: int, position: int, term_length: int, segment_length: int) -> int:
    """Cut a recording's files at ``position`` (a TruncateRecording): delete the segments wholly after it, and
    zero the rest of the one holding it (a segment starting exactly at ``position`` past the start goes too:
    nothing of it is kept; a cut at the start position deletes every file).

    Returns how many segment files it deleted, counted as Aeron's archive counts them for its answer: the segments
    from the cut to ``stop_position``, a segment starting exactly at the stop position included though a recorder
    that stopped there never made it.
    """
    if position == start_position:
        return delete_segment_files(archive_dir, recording_id)
    base_at = A.segment_file_base_position(start_position, position, term_length, segment_length)
    offset = position - base_at
    doomed = [] if offset > 0 else [base_at]
    if offset > 0 and position != stop_position:
        path = Path(archive_dir) / A.segment_file_name(recording_id, base_at)
        if path.exists():
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(bytes(segment_length - offset))
    doomed.extend(range(base_at + segment_length, stop_position + 1, segment_length))
    for base in doomed:
        (Path(archive_dir) / A.segment_file_name(recording_id, base)).unlink(missing_ok=True)
    return len(doomed)


def delete_segment_files(archive_dir: str | os.PathLike, recording_id: int) -> int:
    """Delete every segment file of a recording (a PurgeRecording); returns how many there were."""
    files = segment_files(archive_dir, recording_id)
    for _, path in files:
        path.unlink()
    return len(files)


def lowest_segment_base(archive_dir: str | os.PathLike, recording_id: int) -> int | None:
    """The lowest base position among the recording's segment files, those renamed for deletion (``.del``)
    included, or None when it has none."""
    lowest = None
    for path in Path(archive_dir).iterdir():
        name = path.name[:-len(A.DELETE_SUFFIX)] if path.name.endswith(A.DELETE_SUFFIX) else path.name
        parsed = A.parse_segment_file_name(name)
        if parsed is not None and parsed[0] == recording_id and (lowest is None or parsed[1] < lowest):
            lowest = parsed[1]
    return lowest


def detached_segment_bases(previous_start_position: int, start_position: int, term_length: int,
                           segment_length: int) -> list[int]:
    """Bases of the segments before the one holding ``start_position``, down to the one that held
    ``previous_start_position``, lowest first: the files a start position moved past left behind."""
    lowest = A.segment_file_base_position(previous_start_position, previous_start_position, term_length,
                                          segment_length)
    start_base = A.segment_file_base_position(start_position, start_position, term_length, segment_length)
    return list(range(start_base - segment_length, lowest - 1, -segment_length))[::-1]


def delete_segments(archive_dir: str | os.PathLike, recording_id: int, bases) -> list[Path]:
    """Delete the recording's segment files at ``bases``; one already gone may have been renamed for deletion
    (``.del``), which goes then. Returns the files that could not be deleted."""
    failed = []
    for base in bases:
        path = Path(archive_dir) / A.segment_file_name(recording_id, base)
        for candidate in (path, path.with_name(path.name + A.DELETE_SUFFIX)):
            try:
                candidate.unlink()
                break
            except FileNotFoundError:
                continue
            except OSError:
                failed.append(candidate)
                break
    return failed


def attach_start_positions(archive_dir: str | os.PathLike, recording_id: int, start_position: int,
                           segment_length: int, term_length: int, initial_term_id: int, stream_id: int):
    """The start positions a recording gets back as the segment files before its start are attached again,
    one per file, walking down from the segment before ``start_position`` while files are there.

    A file whose first term starts with a frame moves the start to its base and the walk goes on; one whose first
    frame lies further in moves the start to that frame, and the walk ends. Raises ``SegmentFileError`` (with
    Aeron's words) for a file of the wrong length, without a frame in its first term, or whose first frame is not
    of the recording (term id, stream id); the positions yielded before stand.
    """
    position = start_position - segment_length
    while position >= 0:
        path = Path(archive_dir) / A.segment_file_name(recording_id, position)
        if not path.exists():
            return
        file_length = path.stat().st_size
        if file_length != segment_length:
            raise SegmentFileError(f"fileLength={file_length} not equal to segmentLength={segment_length}")
        term_id = initial_term_id + (position >> (term_length.bit_length() - 1))
        term_offset = _first_frame_offset(path, term_id, term_length, stream_id)
        yield position + term_offset
        if term_offset != 0:
            return
        position -= segment_length


def _first_frame_offset(path: Path, term_id: int, term_length: int, stream_id: int) -> int:
    """Offset of the first frame in the file's first term, checked to be of ``term_id`` and ``stream_id``."""
    with open(path, "rb") as f:
        term = np.frombuffer(f.read(term_length), dtype=np.uint8)
    usable = term.size - term.size % frame.FRAME_ALIGNMENT
    lengths = term[:usable].view(np.int32)[::frame.FRAME_ALIGNMENT // 4] if usable else np.zeros(0, np.int32)
    found = np.flatnonzero(lengths > 0)
    if found.size == 0:
        raise SegmentFileError(f"fragment not found in first term of segment {path}")
    offset = int(found[0]) * frame.FRAME_ALIGNMENT
    header = term[offset:offset + frame.HEADER_LENGTH]
    if header.size < frame.HEADER_LENGTH:
        raise SegmentFileError(f"fragment not found in first term of segment {path}")
    file_term_id = int(header[frame.TERM_ID_FIELD_OFFSET:frame.TERM_ID_FIELD_OFFSET + 4].view(np.int32)[0])
    if file_term_id != term_id:
        raise SegmentFileError(f"term id does not match: actual={file_term_id} expected={term_id}")
    file_stream_id = int(header[frame.STREAM_ID_FIELD_OFFSET:frame.STREAM_ID_FIELD_OFFSET + 4].view(np.int32)[0])
    if file_stream_id != stream_id:
        raise SegmentFileError(f"stream id does not match: actual={file_stream_id} expected={stream_id}")
    return offset


def move_segments(archive_dir: str | os.PathLike, src_recording_id: int, dst_recording_id: int, start_position: int,
                  stop_position: int, term_length: int, segment_length: int) -> tuple[int, list[int]]:
    """Rename a stopped recording's segment files to another recording's (a MigrateSegments): every file from the
    one holding ``start_position`` to the one holding ``stop_position``, but a segment starting exactly at the stop
    position (nothing was recorded in it), whose base is returned to be deleted instead.

    All are checked before any is moved: a missing source or an existing destination raises ``SegmentFileError``
    (Aeron's words) and nothing moves. Returns (files moved, bases of the empty segment to delete)."""
    first = A.segment_file_base_position(start_position, start_position, term_length, segment_length)
    last = A.segment_file_base_position(start_position, stop_position, term_length, segment_length)
    bases = range(first, last + 1, segment_length)
    directory = Path(archive_dir)
    for base in bases:
        if base == stop_position:
            continue
        src = directory / A.segment_file_name(src_recording_id, base)
        dst = directory / A.segment_file_name(dst_recording_id, base)
        if not src.exists():
            raise SegmentFileError(f"missing src segment file {src}")
        if dst.exists():
            raise SegmentFileError(f"preexisting dst segment file {dst}")
    moved, empty = 0, []
    for base in bases:
        if base == stop_position:
            empty.append(base)
            continue
        src = directory / A.segment_file_name(src_recording_id, base)
        dst = directory / A.segment_file_name(dst_recording_id, base)
        try:
            os.rename(src, dst)
        except OSError:
            raise SegmentFileError(f"failed to rename {src} to {dst}") from None
        moved += 1
    return moved, empty


def _whole_frames_length(block: np.ndarray, written: int) -> int:
    """Bytes of whole frames at the start of ``block`` within its first ``written`` bytes."""
    at = 0
    while at + frame.HEADER_LENGTH <= written:
        aligned = (int(block[at:at + 4].view(np.int32)[0]) + frame.FRAME_ALIGNMENT - 1) & ~(frame.FRAME_ALIGNMENT - 1)
        if aligned <= 0 or at + aligned > written:
            break
        at += aligned
    return at


def _holds_no_frame(path: Path) -> bool:
    """The segment file's first frame length is 0 (or the file is shorter than a header): nothing recorded in it."""
    with open(path, "rb") as file:
        head = file.read(4)
    return len(head) < 4 or int.from_bytes(head, "little", signed=True) == 0


class RecordingWriter:
    """Appends a recording's frames to its segment files from ``position`` on.

    Its position, segment and open file are words of ``state`` (``kernels/recorder``'s state array), which a
    recording session's compiled block write (``recorder.record_block``) moves too: a block written there or here
    moves the same recording. ``write`` is the whole write in Python (opening and rolling segments, checksums)."""

    def __init__(self, archive_dir: str | os.PathLike, recording_id: int, start_position: int, position: int,
                 term_length: int, segment_length: int, checksum_algorithm: int = CHECKSUM_NONE):
        A.check_segment_file_length(segment_length)
        if segment_length < term_length or segment_length % term_length:
            raise SegmentFileError(f"segment length={segment_length} must be a multiple of term length={term_length}")
        self.archive_dir = Path(archive_dir)
        self.recording_id = recording_id
        self.start_position = start_position
        self.term_length = term_length
        self.segment_length = segment_length
        self.checksum_algorithm = check_checksum_algorithm(checksum_algorithm)
        self.state = recorder.new_state()
        self.state[recorder.STATE_POSITION] = position
        self.state[recorder.STATE_SEGMENT_BASE] = A.segment_file_base_position(start_position, position, term_length,
                                                                              segment_length)
        self.state[recorder.STATE_SEGMENT_LENGTH] = segment_length
        self.state[recorder.STATE_PAGE_SIZE] = PAGE_SIZE
        self._scratch = np.zeros(0, dtype=np.uint8)
        self._out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)

    @property
    def position(self) -> int:
        return int(self.state[recorder.STATE_POSITION])

    @position.setter
    def position(self, value: int) -> None:
        self.state[recorder.STATE_POSITION] = value

    @property
    def segment_base_position(self) -> int:
        return int(self.state[recorder.STATE_SEGMENT_BASE])

    @property
    def _segment_base(self) -> int:
        return int(self.state[recorder.STATE_SEGMENT_BASE])

    @_segment_base.setter
    def _segment_base(self, value: int) -> None:
        self.state[recorder.STATE_SEGMENT_BASE] = value

    @property
    def _fd(self) -> int | None:
        fd = int(self.state[recorder.STATE_FD])
        return None if fd < 0 else fd

    @_fd.setter
    def _fd(self, fd: int | None) -> None:
        self.state[recorder.STATE_FD] = -1 if fd is None else fd

    def _open_segment(self) -> int:
        path = self.archive_dir / A.segment_file_name(self.recording_id, self._segment_base)
        # A recording extended (or resumed) inside a segment continues in its file; a new segment must be new.
        resuming = self.position > self._segment_base and self.position > self.start_position
        flags = os.O_WRONLY | os.O_CREAT | (0 if resuming else os.O_EXCL)
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            if not _holds_no_frame(path):
                raise SegmentFileError(f"segment file {path} already exists: a new segment is never written over") \
                    from None
            fd = os.open(path, os.O_WRONLY)  # made by a writer killed before its first frame, and recovered
        try:
            if os.fstat(fd).st_size < self.segment_length:
                os.ftruncate(fd, self.segment_length)  # full length, sparse
        except OSError:
            os.close(fd)
            raise
        return fd

    def write(self, block: np.ndarray, offset: int, length: int) -> None:
        """Append ``block[offset:offset+length]``: whole frames of one term, recorded at ``self.position``."""
        segment_offset = self.position - self._segment_base
        if segment_offset == self.segment_length:  # the last write filled the segment: roll over
            self.close()
            self._segment_base += self.segment_length
            segment_offset = 0
        if length <= 0 or length % frame.FRAME_ALIGNMENT or segment_offset + length > self.segment_length:
            raise SegmentFileError(f"block of length={length} at position {self.position} does not fit the segment "
                                   f"[{self._segment_base}, {self._segment_base + self.segment_length}) in whole frames")
        if self._fd is None:
            self._fd = self._open_segment()
        frame_type = int(block[offset + frame.TYPE_FIELD_OFFSET:offset + frame.TYPE_FIELD_OFFSET + 2].view(np.uint16)[0])
        if frame_type == frame.HDR_TYPE_PAD:
            data = block[offset:offset + frame.HEADER_LENGTH]  # the rest of a padding frame stays sparse zeros
        elif self.checksum_algorithm != CHECKSUM_NONE:
            if self._scratch.size < length:
                self._scratch = np.zeros(max(length, 2 * self._scratch.size), dtype=np.uint8)
            data = self._scratch[:length]
            data[:] = block[offset:offset + length]
            status = record_checksums(data, 0, length, self.checksum_algorithm, self._out)
            if status != length:
                raise SegmentFileError(f"recording {self.recording_id}: malformed frame at position "
                                       f"{self.position + int(self._out[0])} (status {status}, "
                                       f"frame_length {int(self._out[1])}, type {int(self._out[2])})")
        else:
            data = block[offset:offset + length]
        written = self._write_frames_first_header_last(data, segment_offset)
        if written != data.size:  # the file system took part of it: out of space, or at a file size limit
            self._short_write(data, written, segment_offset, frame_type == frame.HDR_TYPE_PAD)
        self.position += length

    def compiled_write_failed(self, block: np.ndarray, offset: int, length: int, written: int) -> None:
        """After ``recorder.record_block`` said ``WRITE_FAILED`` for ``block[offset:offset+length]``: keep its whole
        frames that the file system took (``written`` bytes, or ``-errno`` when it took none) and raise the
        ``OSError`` a write here would have raised."""
        if written < 0:
            raise OSError(-written, f"{os.strerror(-written)}: recording {self.recording_id} at position "
                                    f"{self.position}")
        is_pad = int(block[offset + frame.TYPE_FIELD_OFFSET:offset + frame.TYPE_FIELD_OFFSET + 2]
                     .view(np.uint16)[0]) == frame.HDR_TYPE_PAD
        data = block[offset:offset + (frame.HEADER_LENGTH if is_pad else length)]
        self._short_write(data, written, self.position - self._segment_base, is_pad)

    def _short_write(self, data: np.ndarray, written: int, segment_offset: int, is_pad: bool) -> None:
        whole = _whole_frames_length(data, written) if not is_pad else 0
        if written > whole:  # no torn frame may stay behind the last whole one (recovery would count it)
            os.pwrite(self._fd, bytes(written - whole), segment_offset + whole)
        self.position += whole
        raise OSError(errno.ENOSPC, f"short write: {written} of {data.size} bytes at {segment_offset} of segment "
                                    f"{self._segment_base} (disk full?); recorded up to {self.position}")

    def _write_frames_first_header_last(self, data: np.ndarray, segment_offset: int) -> int:
        """Write ``data`` at ``segment_offset``; returns the bytes written from its start.

        A process killed inside ``pwrite`` leaves a prefix of it in the file, cut at a page boundary (the kernel
        checks for a fatal signal before each page it copies). Had that prefix held a frame's header but not the
        frame's end, recovery would count the frame as whole. So a block crossing a page boundary is written as
        the recorder's log is published: its frames after the first header, then that header, which lies within
        one page and lands whole or not at all. A cut before it leaves the block's first length 0, where
        recovery stops.
        """
        fd, head = self._fd, frame.HEADER_LENGTH
        if data.size <= head or segment_offset // PAGE_SIZE == (segment_offset + data.size - 1) // PAGE_SIZE:
            return os.pwrite(fd, memoryview(data), segment_offset)
        body = os.pwrite(fd, memoryview(data[head:]), segment_offset + head)
        if body == 0:
            return 0
        if os.pwrite(fd, memoryview(data[:head]), segment_offset) != head:  # no space for the header's page
            return 0
        return head + body

    def undo(self, position: int) -> None:
        """Zero what the last write put after ``position`` (in the current segment) and go back to it: a block
        written from an image's log that the image no longer owned may hold torn frames."""
        if self._fd is not None and self._segment_base <= position < self.position:
            os.pwrite(self._fd, bytes(self.position - position), position - self._segment_base)
        self.position = min(self.position, position)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def recorded_stop_position(archive_dir: str | os.PathLike, recording_id: int, start_position: int, term_length: int,
                           segment_length: int) -> tuple[int, Path | None, int]:
    """Where the whole frames of a recording end, read from its highest segment file without changing it: the
    position, that file (None when there is none: nothing was written, the start position) and the offset in it
    where the frames end."""
    segments = segment_files(archive_dir, recording_id)
    if not segments:
        return start_position, None, 0
    base, path = segments[-1]
    first_offset = max(0, start_position - base)
    # Shorter than a segment: its writer was killed between creating it and setting its length (``_open_segment``);
    # its frames are what it holds.
    length = min(path.stat().st_size, segment_length)
    if length <= first_offset:
        return base + first_offset, path, first_offset
    with MappedFile.open(path, read_only=True) as mapped:
        end = int(recorded_frames_end(mapped.buffer[:length], first_offset, base, term_length))
    return base + end, path, end


def recover_stop_position(archive_dir: str | os.PathLike, recording_id: int, start_position: int, term_length: int,
                          segment_length: int) -> int:
    """Where the whole frames of an interrupted recording end: walk its highest segment file (§3.2 fix-up).

    What lies after them in that file (a block cut short by the crash) is zeroed, so that frames written when
    the recording is extended can never run into stale ones, and a file left short of the segment length grows
    back to it (one with no frame at all is then the writer's to write from its start). No segment file yet means
    nothing was written: the start position.
    """
    stop, path, end = recorded_stop_position(archive_dir, recording_id, start_position, term_length, segment_length)
    if path is not None and end < segment_length:
        os.truncate(path, end)  # drops the tail; the file grows back to its length as sparse zeros
        os.truncate(path, segment_length)
    return stop


class RecordingReader:
    """Reads a recording back from its segment files in blocks of whole frames (what a replay offers).

    One segment file is mapped at a time, and mapped again when a read moves into the next one. A live
    recording is read up to where its writer got: frames not yet written read as length 0 and end a block.
    """

    def __init__(self, archive_dir: str | os.PathLike, recording_id: int, start_position: int, term_length: int,
                 segment_length: int, *, read_only: bool = False):
        self.archive_dir = Path(archive_dir)
        self.read_only = read_only  # a tool reading a dir it must not change (or cannot: a read-only copy)
        self.recording_id = recording_id
        self.start_position = start_position
        self.term_length = term_length
        self.segment_length = segment_length
        self._mapped: MappedFile | None = None
        self._mapped_base = -1

    def _segment(self, position: int) -> tuple[np.ndarray | None, int]:
        base = self._mapped_base
        if base <= position < base + self.segment_length and base >= 0:  # the usual case: the mapped one
            return self._mapped.buffer, base
        base = A.segment_file_base_position(self.start_position, position, self.term_length, self.segment_length)
        if base != self._mapped_base:
            self.close()
            path = self.archive_dir / A.segment_file_name(self.recording_id, base)
            if not path.exists():
                return None, base  # not written yet
            self._mapped = MappedFile.open(path, min_length=self.segment_length, read_only=self.read_only)
            self._mapped_base = base
        return self._mapped.buffer, base

    def term_at(self, position: int) -> tuple[np.ndarray | None, int]:
        """``(segment buffer, where the term holding position starts in it)``, or ``(None, 0)`` while its segment
        file is not written yet (what ``replay_rewrite.replay_block`` reads from)."""
        buffer, base = self._segment(position)
        if buffer is None:
            return None, 0
        return buffer, position - base - (position & (self.term_length - 1))

    def read(self, position: int, limit_position: int, max_length: int) -> tuple[np.ndarray | None, int, int]:
        """``(buffer, offset, length)``: whole frames from ``position`` up to ``max_length`` bytes, not past
        ``limit_position`` nor the end of the term (a PAD frame comes alone); length 0 when none is there yet."""
        if position % frame.FRAME_ALIGNMENT:
            raise SegmentFileError(f"position={position} is not a multiple of {frame.FRAME_ALIGNMENT}")
        if position >= limit_position:
            return None, 0, 0
        buffer, base = self._segment(position)
        if buffer is None:
            return None, 0, 0
        term_offset = position & (self.term_length - 1)
        term_base = position - base - term_offset  # where the term starts in the file
        limit_offset = min(self.term_length, term_offset + max_length, term_offset + (limit_position - position))
        end = scan_block(buffer, term_base, term_offset, limit_offset)
        return buffer, term_base + term_offset, end - term_offset

    def close(self) -> None:
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None
            self._mapped_base = -1
