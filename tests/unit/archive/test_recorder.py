"""A recording session's compiled block writes (``kernels/recorder``): the same segment files as the Python writer,
the subscriber position, rec-pos and write counters moved with each block, Python left what is rare (a segment to
open or roll, an image dropped under the write, a failed write), and the same as a network cycles stage."""

from __future__ import annotations

import itertools
import os
import resource
import signal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeron_numba.archive.recording_session import RecordingSession, RecordingState
from aeron_numba.archive.segment_files import RecordingWriter, recover_stop_position
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels import recorder
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.layout import counters as C
from tests.unit.archive.archive_fakes import Counter
from tests.unit.archive.test_archive_segments import SETTINGS, TERM, publish, record

COUNTER_ID, REGISTRATION_ID = 2, 99
MAX_BLOCK = 8 * 1024
_LOG_NAMES = itertools.count()  # hypothesis runs many examples in one shm dir


class Image:
    """The parts of a client image a recording session reads: a real log and a subscriber position counter."""

    def __init__(self, log):
        self.log_buffer = log
        self.counters_metadata_buffer = np.zeros(4 * C.METADATA_LENGTH, np.uint8)
        self.position_buffer = np.zeros(4 * C.COUNTER_LENGTH, np.uint8)
        self.counters_metadata_buffer[COUNTER_ID * C.METADATA_LENGTH + C.METADATA_STATE_OFFSET] = C.RECORD_ALLOCATED
        self.position_buffer[COUNTER_ID * C.COUNTER_LENGTH + C.COUNTER_REGISTRATION_ID_OFFSET] = REGISTRATION_ID
        self.position_offset = COUNTER_ID * C.COUNTER_LENGTH + C.COUNTER_VALUE_OFFSET
        self.subscriber_position_id, self.subscription_registration_id = COUNTER_ID, REGISTRATION_ID
        self.join_position, self.session_id, self.source_identity = 0, 77, "aeron:ipc"
        self.is_closed = self.is_end_of_stream = False

    @property
    def position(self) -> int:
        return int(self.position_buffer[self.position_offset:self.position_offset + 8].view(np.int64)[0])

    def drop(self) -> None:
        """The driver let go of the image and gave its counter to another registration."""
        self.position_buffer[COUNTER_ID * C.COUNTER_LENGTH + C.COUNTER_REGISTRATION_ID_OFFSET] = REGISTRATION_ID + 1


class Catalog:
    def __init__(self):
        self.stops = []

    def update_stop_position(self, recording_id, position, timestamp):
        self.stops.append(position)


class Recording:
    def __init__(self, shm_dir, tmp_path, sizes, segment_terms=2, stages=None):
        self.log, self.end = publish(shm_dir, sizes, name=f"ours-{next(_LOG_NAMES)}")
        self.image = Image(self.log)
        self.rec_pos = Counter()
        self.write_counters = (Counter(), Counter(), Counter())  # bytes, time, longest write
        self.python_writes: list[int] = []
        self.writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, segment_terms * TERM)
        self.catalog = Catalog()
        self.session = RecordingSession(catalog=self.catalog, recording_id=1, image=self.image, writer=self.writer,
                                        position_counter=self.rec_pos, file_io_max_length=MAX_BLOCK,
                                        on_write=self._on_write, write_counters=self.write_counters, stages=stages)

    def _on_write(self, length, ns):
        self.python_writes.append(length)
        self.write_counters[0].get_and_add(length)

    def record_all(self) -> None:
        while self.image.position < self.end:
            assert self.session.do_work() > 0


def _reference(shm_dir, tmp_path, sizes, segment_terms):
    """The segment files the Python writer alone makes of the same log."""
    log, end = publish(shm_dir, sizes, name=f"reference-{next(_LOG_NAMES)}")
    writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, segment_terms * TERM)
    record(writer, log, 0, end, MAX_BLOCK)
    writer.close()
    return {p.name: p.read_bytes() for p in tmp_path.iterdir()}


@SETTINGS
@given(sizes=st.lists(st.integers(1, 4000), min_size=40, max_size=120), segment_terms=st.sampled_from([1, 2]))
def test_compiled_blocks_make_the_segments_the_python_writer_makes_and_move_every_position(
        shm_dir, tmp_path_factory, sizes, segment_terms):
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    recording = Recording(shm_dir, ours, sizes, segment_terms)
    recording.record_all()
    recording.writer.close()
    assert {p.name: p.read_bytes() for p in ours.iterdir()} == _reference(shm_dir, theirs, sizes, segment_terms)
    end = recording.end
    assert recording.image.position == recording.writer.position == recording.rec_pos.get() == end
    assert recording.write_counters[0].get() == end  # compiled blocks and Python's, counted once each
    # Python wrote only the blocks that opened or rolled a segment.
    segments = -(-end // (segment_terms * TERM))
    assert len(recording.python_writes) == segments
    assert recording.write_counters[2].get() <= recording.write_counters[1].get()


@pytest.mark.parametrize("in_stage", [False, True])
def test_a_block_written_while_the_driver_dropped_the_image_is_undone(shm_dir, tmp_path, in_stage):
    stages = NetworkStages()
    recording = Recording(shm_dir, tmp_path, [500] * 40, stages=stages)  # 544-byte frames
    while recording.image.position < 544 * 15:
        recording.session.do_work()
    kept = recording.writer.position
    recording.image.drop()
    if in_stage:  # the driver's stretch finds it first: it leaves the block to Python and turns itself off
        assert run_stages(stages.table, len(stages)) == 0
        assert recording.writer.state[recorder.STATE_STAGE_ON] == 0 and recording.writer.position == kept
    assert recording.session.do_work() == 0
    assert recording.writer.position == kept and recording.image.position == kept  # the block not handed back
    recording.writer.close()
    data = (tmp_path / "1-0.rec").read_bytes()
    assert data[:kept] == bytes(recording.log[:kept]) and data[kept:] == bytes(len(data) - kept)


def test_a_write_past_the_file_size_limit_keeps_its_whole_frames_and_stops_the_recording(shm_dir, tmp_path):
    recording = Recording(shm_dir, tmp_path, [500] * 60, segment_terms=1)
    recording.session.do_work()  # the first block, which opens the segment (full length, sparse)
    limit = 544 * 20 + 100  # the file system takes part of a frame past 20 frames
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous_limit[1]))
    try:
        while recording.session.state is RecordingState.RECORDING:
            recording.session.do_work()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert isinstance(recording.session.error, OSError)
    position = recording.writer.position
    assert position == 544 * 20  # its whole frames
    assert recording.catalog.stops == [position] and recording.rec_pos.get() == position
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == position  # no torn frame after them
    data = (tmp_path / "1-0.rec").read_bytes()
    assert data[:position] == bytes(recording.log[:position]) and data[position:] == bytes(len(data) - position)


def test_an_unwritable_file_is_an_error_with_its_errno_and_nothing_recorded(shm_dir, tmp_path):
    recording = Recording(shm_dir, tmp_path, [500] * 40)
    recording.session.do_work()
    kept = recording.writer.position
    os.close(int(recording.writer.state[recorder.STATE_FD]))
    recording.writer.state[recorder.STATE_FD] = os.open(tmp_path / "1-0.rec", os.O_RDONLY)
    recording.session.do_work()
    assert isinstance(recording.session.error, OSError) and recording.session.error.errno == 9  # EBADF
    assert recording.writer.position == kept and recording.session.state is RecordingState.STOPPED


def test_as_a_stage_it_records_until_python_must_act_and_python_turns_it_on_again(shm_dir, tmp_path):
    stages = NetworkStages()
    recording = Recording(shm_dir, tmp_path, [500] * 300, segment_terms=1, stages=stages)  # three terms
    assert len(stages) == 0 and recording.session.do_work() > 0  # the first block opens the segment in Python
    assert len(stages) == 1
    # The driver's stretch records the rest of the first term, and stops at the second segment's first block.
    while run_stages(stages.table, len(stages)) > 0:
        pass
    assert recording.writer.position == TERM and recording.image.position == TERM == recording.rec_pos.get()
    assert recording.writer.state[recorder.STATE_STAGE_ON] == 0
    assert run_stages(stages.table, len(stages)) == 0 and recording.writer.position == TERM  # off: nothing
    assert recording.session.do_work() > 0  # Python rolls the segment and writes that block, and turns it on
    assert recording.writer.state[recorder.STATE_STAGE_ON] == 1
    while run_stages(stages.table, len(stages)) > 0:
        pass
    assert recording.writer.position == 2 * TERM
    recording.session.request_stop()
    assert run_stages(stages.table, len(stages)) == 0  # a stop requested records nothing more
    recording.session.do_work()
    assert recording.session.state is RecordingState.STOPPED and len(stages) == 0


def test_a_stage_table_runs_its_stages_in_order_and_refuses_a_state_it_cannot_address():
    stages = NetworkStages()
    with pytest.raises(ValueError, match="contiguous int64"):
        stages.add(recorder.recording_stage, np.zeros(recorder.STATE_LENGTH, np.int32))
    off = recorder.new_state()
    key = stages.add(recorder.recording_stage, off)
    assert len(stages) == 1 and run_stages(stages.table, 1) == 0  # off: touches nothing
    stages.remove(key)
    stages.remove(key)  # twice: ignored
    assert len(stages) == 0 and stages.table.shape == (0, 2)
