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

A block is written in one compiled call (``kernels/recorder.record_block``: the write, the subscriber position,
``rec-pos`` and the write counters) unless the recording keeps checksums; Python writes the blocks that open or
roll a segment, and handles a failed write and an image dropped under the write. Given the ``stages`` of the
driver's network cycles on the archive's thread (a cluster member, ``ClusteredMediaDriver``), a recording without
events also runs as a stage of theirs (``recorder.recording_stage``): a block the driver just received is recorded
in the same compiled stretch. The stage turns itself off at anything Python must do; this session's next cycle,
woken by the frame left at the image's position, does it and turns the stage on again.
"""

from __future__ import annotations

import enum
import time

import numpy as np

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingWriter, SegmentFileError
from aeron_numba.kernels import recorder
from aeron_numba.kernels.counters import counter_value_address
from aeron_numba.kernels.segment_scanner import (EXTENT_END_POSITION, EXTENT_LOG_OFFSET, commit_record_block,
                                                 record_block_extent)
from aeron_numba.layout import archive as A
from aeron_numba.layout.checksum import CHECKSUM_NONE
from aeron_numba.layout.publication_status import CLOSED, MAX_POSITION_EXCEEDED


class RecordingState(enum.Enum):
    RECORDING = "recording"
    STOPPED = "stopped"  # everything written, catalog updated, files closed


class RecordingSession:
    def __init__(self, *, catalog: Catalog, recording_id: int, image, writer: RecordingWriter, position_counter,
                 file_io_max_length: int = A.DEFAULT_FILE_IO_MAX_LENGTH, epoch_clock=None,
                 subscription_id: int = A.NULL_VALUE, on_write=None, recording_events=None, stream_id: int = 0,
                 original_channel: str = "", on_error=None, write_counters=None, stages=None):
        """``on_write(bytes, ns)``: told of every block Python wrote and how long the write took, and
        ``write_counters`` (the bytes, time and longest-write counters, or None) counted into by the compiled
        writes (the recorder counters). ``recording_events``: a ``RecordingEventsProxy`` or None (disabled);
        ``stream_id`` and ``original_channel`` (the recording subscription's) go into RecordingStarted;
        ``on_error(text)`` hears of an events publication that can take no more (closed, at its max position).
        ``stages``: the ``NetworkStages`` of the driver on this thread, or None."""
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
        self._compiled = writer.checksum_algorithm == CHECKSUM_NONE  # checksums are computed in Python
        if self._compiled:
            self._bind_state(write_counters)
        self._stages = stages if self._compiled and recording_events is None else None
        self._stage_key = None

    def _bind_state(self, write_counters) -> None:
        """The image's and counters' words in the writer's state, for ``recorder.record_block``."""
        state, image = self.writer.state, self.image
        log, values, metadata = image.log_buffer, image.position_buffer, image.counters_metadata_buffer
        state[recorder.STATE_LOG_ADDRESS], state[recorder.STATE_LOG_LENGTH] = log.ctypes.data, log.size
        state[recorder.STATE_VALUES_ADDRESS], state[recorder.STATE_VALUES_LENGTH] = values.ctypes.data, values.size
        state[recorder.STATE_METADATA_ADDRESS], state[recorder.STATE_METADATA_LENGTH] = (metadata.ctypes.data,
                                                                                         metadata.size)
        state[recorder.STATE_POSITION_OFFSET] = image.position_offset
        state[recorder.STATE_COUNTER_ID] = image.subscriber_position_id
        state[recorder.STATE_REGISTRATION_ID] = image.subscription_registration_id
        state[recorder.STATE_FILE_IO_MAX_LENGTH] = self.file_io_max_length
        state[recorder.STATE_REC_POS_ADDRESS] = counter_value_address(self.position_counter.values_buffer,
                                                                      self.position_counter.id)
        if write_counters is not None:
            (state[recorder.STATE_WRITE_BYTES_ADDRESS], state[recorder.STATE_WRITE_NS_ADDRESS],
             state[recorder.STATE_MAX_WRITE_NS_ADDRESS]) = (counter_value_address(c.values_buffer, c.id)
                                                            for c in write_counters)
        # What the addresses point into, held while the state is in use (a stage's table holds them too).
        self._state_holds = (log, values, metadata, self.position_counter.values_buffer,
                             *(c.values_buffer for c in write_counters or ()))

    @property
    def position(self) -> int:
        return self.writer.position

    def request_stop(self) -> None:
        """Stop at the next duty cycle, after what has been polled so far."""
        self._stop_requested = True
        self.writer.state[recorder.STATE_STAGE_ON] = 0  # nothing more recorded in the driver's stretch either

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
        elif self._stages is not None:
            self._enter_stages()
        return work

    def _enter_stages(self) -> None:
        """Record in the driver's stretch from now on (again, after the stage turned itself off)."""
        self.writer.state[recorder.STATE_STAGE_ON] = 1
        if self._stage_key is None:
            self._stage_key = self._stages.add(recorder.recording_stage, self.writer.state, self._state_holds)

    def _leave_stages(self) -> None:
        self.writer.state[recorder.STATE_STAGE_ON] = 0
        if self._stage_key is not None:
            self._stages.remove(self._stage_key)
            self._stage_key = None

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
        state, writer = self.writer.state, self.writer
        if self._compiled:
            recorded = recorder.record_block(state)
            if recorded >= 0:
                return recorded
            if recorded == recorder.NOT_OWNED:  # the driver dropped the image while the write read its log
                start = writer.position
                writer.position = start + int(state[recorder.STATE_BLOCK_LENGTH])  # what the write may have put there
                writer.undo(start)
                return 0
            if recorded == recorder.WRITE_FAILED:
                try:
                    writer.compiled_write_failed(log, int(state[recorder.STATE_BLOCK_LOG_OFFSET]),
                                                 int(state[recorder.STATE_BLOCK_LENGTH]),
                                                 int(state[recorder.STATE_WRITTEN]))
                finally:  # as below: a block handed to the writer is consumed
                    self._commit(int(state[recorder.STATE_BLOCK_END_POSITION]))
            # NEEDS_SEGMENT: a segment to open or roll first, and its block written here (its extent is in state)
        else:
            extent = self._extent
            length = record_block_extent(log, position_buffer, image.position_offset, self.file_io_max_length, extent)
            if length <= 0:
                return 0
            state[recorder.STATE_BLOCK_LOG_OFFSET] = extent[EXTENT_LOG_OFFSET]
            state[recorder.STATE_BLOCK_LENGTH] = length
            state[recorder.STATE_BLOCK_END_POSITION] = extent[EXTENT_END_POSITION]
        length = int(state[recorder.STATE_BLOCK_LENGTH])
        position = writer.position
        started = time.perf_counter_ns()
        try:
            writer.write(log, int(state[recorder.STATE_BLOCK_LOG_OFFSET]), length)
        finally:  # as Aeron: a block handed to the writer is consumed, written or not
            owned = self._commit(int(state[recorder.STATE_BLOCK_END_POSITION]))
        if not owned:  # the driver dropped the image while the write read its log: no torn frames kept
            writer.undo(position)
            return 0
        if self.on_write is not None:
            self.on_write(length, time.perf_counter_ns() - started)
        return length

    def _commit(self, end_position: int) -> bool:
        image = self.image
        return commit_record_block(image.counters_metadata_buffer, image.position_buffer, image.subscriber_position_id,
                                   image.subscription_registration_id, image.position_offset, end_position)

    def _stop(self) -> None:
        self._leave_stages()
        self.writer.close()
        self.catalog.update_stop_position(self.recording_id, self.writer.position, self.epoch_clock())
        self.position_counter.set(self.writer.position)
        self.state = RecordingState.STOPPED

    def close(self) -> None:
        """Stop if still recording, and free the ``rec-pos`` counter."""
        if self.state is not RecordingState.STOPPED:
            self._stop()
        self.position_counter.close()

