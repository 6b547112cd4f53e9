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

With recording events enabled (``recording_events``: the archive's ``RecordingEventsProxy``), the session
publishes them as Aeron's RecordingSession does: RecordingStarted on its first duty cycle, RecordingProgress in
any later cycle that finds the recorded position past the last one announced (a progress the publication did not
take is sent again, with the newer position, next cycle), RecordingStopped when it stops; each carries the
image's join position as the start position. An event the publication refuses is dropped: the recording never
waits for the events channel.
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
from aeron_numba.layout.publication_status import CLOSED, MAX_POSITION_EXCEEDED


class RecordingState(enum.Enum):
    RECORDING = "recording"
    STOPPED = "stopped"  # everything written, catalog updated, files closed


class RecordingSession:
    def __init__(self, *, catalog: Catalog, recording_id: int, image, writer: RecordingWriter, position_counter,
                 file_io_max_length: int = A.DEFAULT_FILE_IO_MAX_LENGTH, epoch_clock=None,
                 subscription_id: int = A.NULL_VALUE, on_write=None, recording_events=None, stream_id: int = 0,
                 original_channel: str = "", on_error=None):
        """``on_write(bytes, ns)``: told of every block written and how long the write took (recorder counters).
        ``recording_events``: a ``RecordingEventsProxy`` or None (disabled); ``stream_id`` and
        ``original_channel`` (the recording subscription's) go into RecordingStarted; ``on_error(text)`` hears
        of an events publication that can take no more (closed, at its max position)."""
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
        self.recording_events = recording_events
        self.stream_id = stream_id
        self.original_channel = original_channel
        self.on_error = on_error
        self._started_sent = False
        self._progress_event_position = image.join_position
        position_counter.set(writer.position)

    @property
    def position(self) -> int:
        return self.writer.position

    def request_stop(self) -> None:
        """Stop at the next duty cycle, after what has been polled so far."""
        self._stop_requested = True

    def add_idle_watch(self, watch) -> bool:
        """The image's next frame: all an idle recording waits on (``agent/idle_watch.py``); the image closing comes
        as a driver event, which the conductor watches. False while an event or a stop is still to be done."""
        if (self.state is RecordingState.STOPPED or self._stop_requested or self.image.log_buffer is None
                or (self.recording_events is not None
                    and (not self._started_sent or self._progress_event_position < self.writer.position))):
            return False
        self.image.add_idle_watch(watch)
        return True

    def do_work(self) -> int:
        if self.state is RecordingState.STOPPED:
            return 0
        work = 0
        events = self.recording_events
        if events is not None and not self._started_sent:
            self._started_sent = True
            image = self.image
            self._sent(events.recording_started(self.recording_id, image.join_position, image.session_id,
                                                self.stream_id, self.original_channel, image.source_identity))
            work += 1
        if not self._stop_requested:
            recorded = 0
            try:
                recorded = self._record_block()
            except (OSError, SegmentFileError) as exc:
                # Disk full, a file size limit, a segment that cannot be made: the image has moved past the block
                # (block_poll consumed it), so no later block may be written: stop at the last whole one.
                self.error = exc
                self._stop_requested = True
            work += recorded
            if recorded:
                self.position_counter.set(self.writer.position)
            elif self.image.is_closed or self.image.is_end_of_stream:
                self._stop_requested = True
            if events is not None and self.error is None and self._progress_event_position < self.writer.position:
                position = self.writer.position
                if self._sent(events.recording_progress(self.recording_id, self.image.join_position, position)):
                    self._progress_event_position = position
        if self._stop_requested:
            self._stop()
            if events is not None:
                self._sent(events.recording_stopped(self.recording_id, self.image.join_position, self.writer.position))
            work += 1
        return work

    def _sent(self, taken: bool) -> bool:
        """Whether the events publication took an event; one it can never take again is reported."""
        if not taken and self.on_error is not None:
            result = self.recording_events.last_result
            if result == CLOSED:
                self.on_error("recording events publication is closed")
            elif result == MAX_POSITION_EXCEEDED:
                self.on_error("recording events publication at max position")
        return taken

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
