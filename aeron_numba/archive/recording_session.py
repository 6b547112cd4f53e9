"""One recording in progress: an image's frames into segment files (spec/archive.md §4), its ``rec-pos`` counter
and its catalog entry.

Each ``do_work`` takes one block of up to ``file_io_max_length`` bytes from the image (``Image.block_poll``:
whole frames, never across a term end), writes it through the ``RecordingWriter`` and then sets ``rec-pos``
(a replay that tails the recording reads up to it). The recording ends when asked to stop, when the image
goes (closed or end of stream, once everything up to its end was written), or when a write fails (disk full:
the error is kept for the conductor to report, the recording stopped cleanly at the last whole block). The
catalog then gets the stop position and timestamp.
"""

from __future__ import annotations

import enum
import time

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingWriter, SegmentFileError
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
                work = self.image.block_poll(self._on_block, self.file_io_max_length)
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

    def _on_block(self, buffer, offset: int, length: int, session_id: int, term_id: int) -> None:
        started = time.perf_counter_ns()
        self.writer.write(buffer, offset, length)
        if self.on_write is not None:
            self.on_write(length, time.perf_counter_ns() - started)

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
