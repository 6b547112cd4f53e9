"""One recording in progress: an image's frames into segment files (spec/archive.md §4), its ``rec-pos`` counter
and its catalog entry.

Each ``do_work`` takes one block of up to ``file_io_max_length`` bytes from the image (as ``Image.block_poll``:
whole frames, never across a term end), writes it through the ``RecordingWriter`` straight from the image's log
(no private copy; the image's ownership of its log is checked after the write, and a write made when it was gone
is undone, as ``block_poll`` drops its copy then), and then sets ``rec-pos``
(a replay that tails the recording reads up to it). The recording ends when asked to stop, when the image
goes (closed or end of stream, once everything up to its end was written), or when a write fails (disk full:
the error is kept for the conductor to report, the recording stopped cleanly at the last whole block). The
catalog then gets the stop position and timestamp.
"""

from __future__ import annotations

import enum
import time

import numpy as np

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingWriter, SegmentFileError
from aeron_numba.kernels.segment_scanner import (
    EXTENT_END_POSITION,
    EXTENT_LOG_OFFSET,
    commit_record_block,
    record_block_extent,
)
from aeron_numba.layout import archive as A


class RecordingState(enum.Enum):
    RECORDING = "recording"
    STOPPED = "stopped"  # everything written, catalog updated, files closed


def rec_pos_key(recording_id: int, session_id: int, source_identity: str, archive_id: int) -> bytes:
    """The ``rec-pos`` counter key (§4.4), the source identity truncated so the key fits 112 bytes."""
    source = source_identity.encode("ascii", errors="replace")[:A.REC_POS_MAX_SOURCE_IDENTITY_LENGTH]
    return (recording_id.to_bytes(8, "little", signed=True) + session_id.to_bytes(4, "little", signed=True)
            + len(source).to_bytes(4, "little") + source + archive_id.to_bytes(8, "little", signed=True))


def rec_pos_label(recording_id: int, session_id: int, stream_id: int, stripped_channel: str, archive_id: int) -> str:
    """``rec-pos: <recordingId> <sessionId> <streamId> <strippedChannel> - archiveId=<archiveId>`` (§4.4)."""
    suffix = f" - archiveId={archive_id}"
    head = f"rec-pos: {recording_id} {session_id} {stream_id} "
    return head + stripped_channel[:max(0, 380 - len(head) - len(suffix))] + suffix


class RecordingSession:
    def __init__(self, *, catalog: Catalog, recording_id: int, image, writer: RecordingWriter, position_counter,
                 file_io_max_length: int = A.DEFAULT_FILE_IO_MAX_LENGTH, epoch_clock=None,
                 subscription_id: int = A.NULL_VALUE, on_write=None):
        """``on_write(bytes, ns)``: told of every block written and how long the write took (recorder counters)."""
        self.catalog = catalog
        self.recording_id = recording_id
        self.subscription_id = subscription_id  # the archive's recording subscription the image came on
        self.image = image
        self.writer = writer
        self.position_counter = position_counter
        self.file_io_max_length = file_io_max_length
        self.epoch_clock = epoch_clock or (lambda: time.time_ns() // 1_000_000)
        self.state = RecordingState.RECORDING
        self.on_write = on_write
        self.error: BaseException | None = None
        self._stop_requested = False
        self._extent = np.zeros(2, dtype=np.int64)  # record_block_extent's answer
        position_counter.set(writer.position)

    @property
    def position(self) -> int:
        return self.writer.position

    def request_stop(self) -> None:
        """Stop at the next duty cycle, after what has been polled so far."""
        self._stop_requested = True

    def do_work(self) -> int:
        if self.state is RecordingState.STOPPED:
            return 0
        work = 0
        if not self._stop_requested:
            try:
                work = self._record_block()
            except (OSError, SegmentFileError) as exc:
                # Disk full, a file size limit, a segment that cannot be made: the image has moved past the block
                # (block_poll consumed it), so no later block may be written: stop at the last whole one.
                self.error = exc
                self._stop_requested = True
            if work:
                self.position_counter.set(self.writer.position)
            elif self.image.is_closed or self.image.is_end_of_stream:
                self._stop_requested = True
        if self._stop_requested:
            self._stop()
            work += 1
        return work

    def _record_block(self) -> int:
        """One block from the image's log straight into the segment file (Aeron's ``blockPoll`` with the
        writer as handler; ``Image.block_poll`` would copy it first). Returns the bytes recorded."""
        image = self.image
        log, position_buffer = image.log_buffer, image.position_buffer
        if log is None or position_buffer is None:
            return 0
        extent = self._extent
        length = record_block_extent(log, position_buffer, image.position_offset, self.file_io_max_length, extent)
        if length <= 0:
            return 0
        position = self.writer.position
        started = time.perf_counter_ns()
        try:
            self.writer.write(log, int(extent[EXTENT_LOG_OFFSET]), length)
        finally:  # as Aeron: a block handed to the writer is consumed, written or not
            owned = commit_record_block(image.counters_metadata_buffer, position_buffer, image.subscriber_position_id,
                                        image.subscription_registration_id, image.position_offset,
                                        int(extent[EXTENT_END_POSITION]))
        if not owned:  # the driver dropped the image while the write read its log: no torn frames kept
            self.writer.undo(position)
            return 0
        if self.on_write is not None:
            self.on_write(length, time.perf_counter_ns() - started)
        return length

    def _stop(self) -> None:
        self.writer.close()
        self.catalog.update_stop_position(self.recording_id, self.writer.position, self.epoch_clock())
        self.position_counter.set(self.writer.position)
        self.state = RecordingState.STOPPED

    def close(self) -> None:
        """Stop if still recording, and free the ``rec-pos`` counter."""
        if self.state is not RecordingState.STOPPED:
            self._stop()
        self.position_counter.close()
