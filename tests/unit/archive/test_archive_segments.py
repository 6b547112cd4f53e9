"""Recording blocks of a real log into segment files (spec/archive.md §4) and finding where an interrupted
recording's frames end (§3.2)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.archive.segment_files import (
    RecordingWriter,
    SegmentFileError,
    delete_segment_files,
    recover_stop_position,
    segment_files,
    truncate_segment_files,
)
from aeron_numba.kernels.replay_rewrite import frame_checksum
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout.checksum import CHECKSUM_CRC32C, CHECKSUM_NONE
from aeron_numba.layout.log_buffers import LogBuffers
from tests.unit.log_support import LimitCounter, new_pub_state, offer_until_done

TERM = 64 * 1024
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def publish(shm_dir, sizes, name="rec"):
    """A log with ``sizes`` messages appended (exclusive); returns (log buffer, end position)."""
    log = LogBuffers.create(shm_dir / f"{name}.logbuffer", term_length=TERM, initial_term_id=5, session_id=77,
                            stream_id=1001).buffer
    state, limit = new_pub_state(log, True), LimitCounter()
    position = 0
    for i, size in enumerate(sizes):
        position = offer_until_done(log, state, limit, np.full(size, i & 0xFF, np.uint8), True)
        assert position > 0
    return log, position


def record(writer, log, start, end, max_block=8 * 1024):
    """Write [start, end) of the log in blocks as a recorder would (scan_block: a PAD frame alone)."""
    position = start
    while position < end:
        term_base = ((position // TERM) % 3) * TERM
        term_offset = position % TERM
        limit = min(TERM, term_offset + max_block, term_offset + end - position)
        block_end = scan_block(log, term_base, term_offset, limit)
        assert block_end > term_offset
        writer.write(log, term_base + term_offset, block_end - term_offset)
        position += block_end - term_offset
    return position


def pad_frames(log, end):
    """Offsets (in the log) and lengths of the PAD frames before ``end``."""
    pads, position = [], 0
    while position < end:
        at = ((position // TERM) % 3) * TERM + position % TERM
        length, _, _, frame_type = struct.unpack_from("<iBBH", log, at)
        aligned = (length + 31) & ~31
        if frame_type == 0:
            pads.append((at, aligned))
        position += aligned
    return pads


@SETTINGS
@given(sizes=st.lists(st.integers(1, 1500), min_size=60, max_size=100), start_frames=st.integers(0, 3))
def test_segments_hold_the_terms_byte_for_byte_and_padding_as_headers(tmp_path_factory, sizes, start_frames):
    archive = tmp_path_factory.mktemp("archive")
    log, end = publish(archive, sizes)
    assert end <= 3 * TERM  # at most 100 frames of 1536 bytes: the three partitions are never lapped
    pads = pad_frames(log, end)
    for at, aligned in pads:  # a PAD frame's body is whatever the term held: never recorded
        log[at + 32:at + aligned] = 0xEE
    start = 0
    for _ in range(start_frames):  # a recording that joined a few frames in
        start += (struct.unpack_from("<i", log, start)[0] + 31) & ~31
    writer = RecordingWriter(archive, 3, start, start, TERM, TERM)
    assert record(writer, log, start, end) == end == writer.position
    writer.close()
    files = segment_files(archive, 3)
    assert [base for base, _ in files] == [k * TERM for k in range((end - 1) // TERM + 1)]
    for base, path in files:
        data = np.fromfile(path, dtype=np.uint8)
        assert data.size == TERM
        expected = log[(base // TERM % 3) * TERM:(base // TERM % 3 + 1) * TERM].copy()
        if base == 0:
            expected[:start] = 0  # before the start position: never written
        expected[max(0, end - base):] = 0
        for at, aligned in pads:
            if base <= at < base + TERM:
                expected[at - base + 32:at - base + aligned] = 0
        assert np.array_equal(data, expected), f"segment {base}"
    assert recover_stop_position(archive, 3, start, TERM, TERM) == end


@pytest.mark.parametrize("segment, bases", [(TERM, [0, TERM, 2 * TERM]), (4 * TERM, [0])])
def test_a_recording_across_three_terms_rolls_over_segments_at_their_ends(shm_dir, tmp_path, segment, bases):
    log, end = publish(shm_dir, [1500] * 120)  # 1536-byte frames: 42 per term, then padding
    assert 2 * TERM < end <= 3 * TERM and len(pad_frames(log, end)) == 2
    writer = RecordingWriter(tmp_path, 8, 0, 0, TERM, segment)
    assert record(writer, log, 0, end) == end
    writer.close()
    assert [base for base, _ in segment_files(tmp_path, 8)] == bases
    data = b"".join(path.read_bytes() for _, path in segment_files(tmp_path, 8))
    assert all(data[k * TERM:k * TERM + 32] == bytes(log[k * TERM:k * TERM + 32]) for k in range(3))
    assert recover_stop_position(tmp_path, 8, 0, TERM, segment) == end


def test_record_checksums_go_into_the_session_id_of_the_written_copy_only(shm_dir, tmp_path):
    log, end = publish(shm_dir, [100, 2000, 33, 1400])
    before = log[:end].copy()
    writer = RecordingWriter(tmp_path, 0, 0, 0, TERM, TERM, checksum_algorithm=CHECKSUM_CRC32C)
    record(writer, log, 0, end)
    writer.close()
    assert np.array_equal(log[:end], before)  # the image's log is never written
    data = np.fromfile(tmp_path / "0-0.rec", dtype=np.uint8)
    offset = 0
    while offset < end:
        length, session_id = struct.unpack_from("<i8xi", data, offset)
        aligned = (length + 31) & ~31
        assert session_id == frame_checksum(CHECKSUM_CRC32C, data, offset + 32, aligned - 32)
        assert struct.unpack_from("<i", before, offset + 12)[0] == 77
        offset += aligned


def test_recovery_stops_at_the_last_whole_frame_written(shm_dir, tmp_path):
    log, end = publish(shm_dir, [500] * 40)
    writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, TERM)
    record(writer, log, 0, end)
    writer.close()
    path = tmp_path / "1-0.rec"
    data = bytearray(path.read_bytes())
    last = end - 544  # 500 + 32 -> 544 aligned
    data[last:last + 32] = bytes(32)  # the crash came before the last frame's header reached the file
    path.write_bytes(bytes(data))
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == last
    struct.pack_into("<i", data, last - 544 + 8, 12345)  # a header whose term offset is not where it lies
    path.write_bytes(bytes(data))
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == last - 544
    assert recover_stop_position(tmp_path, 99, 4096, TERM, TERM) == 4096  # nothing written yet


@pytest.mark.parametrize("held", [0, 544 * 3 + 100])
def test_recovery_takes_a_segment_its_writer_died_before_extending_and_grows_it_back(shm_dir, tmp_path, held):
    # Killed between creating the next segment file and setting its length: the file holds nothing, or (a file
    # system that wrote part of it) less than a segment. Its frames are what it holds; the recording goes on there.
    log, end = publish(shm_dir, [500] * 150)  # 544-byte frames over two terms
    writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, TERM)
    record(writer, log, 0, TERM)
    writer.close()
    (tmp_path / f"1-{TERM}.rec").write_bytes(bytes(log[TERM:TERM + held]))
    stop = recover_stop_position(tmp_path, 1, 0, TERM, TERM)
    assert stop == TERM + (held // 544) * 544
    assert (tmp_path / f"1-{TERM}.rec").stat().st_size == TERM
    writer = RecordingWriter(tmp_path, 1, 0, stop, TERM, TERM)
    record(writer, log, stop, end)
    writer.close()
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == end
    assert (tmp_path / f"1-{TERM}.rec").read_bytes()[:end - TERM] == bytes(log[TERM:end])


def test_a_new_segment_is_never_written_over_and_misplaced_blocks_are_refused(shm_dir, tmp_path):
    log, end = publish(shm_dir, [100] * 5)
    (tmp_path / "2-0.rec").write_bytes(b"someone else's")
    writer = RecordingWriter(tmp_path, 2, 0, 0, TERM, TERM)
    with pytest.raises(SegmentFileError, match="2-0.rec already exists"):
        writer.write(log, 0, 128)
    writer = RecordingWriter(tmp_path, 4, 0, TERM - 64, TERM, TERM)
    with pytest.raises(SegmentFileError, match="block of length=128 at position 65472 does not fit"):
        writer.write(log, 0, 128)
    with pytest.raises(SegmentFileError, match="segment length=65536 must be a multiple of term length=131072"):
        RecordingWriter(tmp_path, 5, 0, 0, 2 * TERM, TERM)
    assert RecordingWriter(tmp_path, 6, 0, 0, TERM, TERM).checksum_algorithm == CHECKSUM_NONE


@pytest.mark.parametrize("segment", [TERM, 2 * TERM])
def test_reading_a_recording_back_gives_its_frames_in_blocks_within_terms(shm_dir, tmp_path, segment):
    from aeron_numba.archive.segment_files import RecordingReader

    log, end = publish(shm_dir, [700] * 200)  # 736-byte frames over three terms, with padding at each term end
    start = 736 * 3
    writer = RecordingWriter(tmp_path, 9, start, start, TERM, segment)
    record(writer, log, start, end)
    writer.close()
    reader = RecordingReader(tmp_path, 9, start, TERM, segment)
    position, blocks = start, []
    while True:
        buffer, offset, length = reader.read(position, end, 4096)
        if length == 0:
            break
        assert length <= 4096 and (position + length - 1) // TERM == position // TERM  # never across a term
        blocks.append(bytes(buffer[offset:offset + 32]))
        expected = log[(position // TERM % 3) * TERM + position % TERM:][:length]
        frame_type = struct.unpack_from("<H", buffer, offset + 6)[0]
        if frame_type == 0:  # padding: recorded as its header, alone
            assert length == struct.unpack_from("<i", buffer, offset)[0] and \
                bytes(buffer[offset:offset + 32]) == bytes(expected[:32])
        else:
            assert bytes(buffer[offset:offset + length]) == bytes(expected)
        position += length
    reader.close()
    assert position == end
    assert RecordingReader(tmp_path, 9, start, TERM, segment).read(end, end + 4096, 4096)[2] == 0  # nothing more
    with pytest.raises(SegmentFileError, match="position=100 is not a multiple of 32"):
        reader.read(100, end, 4096)


def test_a_short_write_records_the_whole_frames_it_wrote_and_leaves_no_torn_frame(shm_dir, tmp_path, monkeypatch):
    import errno
    import os

    from aeron_numba.archive import segment_files as sf

    log, end = publish(shm_dir, [500] * 40)  # 544-byte frames
    writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, TERM)
    record(writer, log, 0, 544 * 10)
    real_pwrite = os.pwrite

    def full_disk(fd, data, offset):  # the file system takes 3.5 frames of the block, then is full
        return real_pwrite(fd, bytes(data)[:544 * 3 + 272], offset)

    monkeypatch.setattr(sf.os, "pwrite", full_disk)
    with pytest.raises(OSError) as error:
        writer.write(log, 544 * 10, 544 * 8)
    monkeypatch.setattr(sf.os, "pwrite", real_pwrite)
    writer.close()
    assert error.value.errno == errno.ENOSPC and "recorded up to 7072" in str(error.value)
    assert writer.position == 544 * 13  # the three whole frames count as recorded
    data = (tmp_path / "1-0.rec").read_bytes()
    assert data[:544 * 13] == bytes(log[:544 * 13]) and data[544 * 13:] == bytes(TERM - 544 * 13)
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == writer.position


@SETTINGS
# Messages up to 4000 bytes: a frame (with its 32-byte header) always fits the smallest block, as a recorder's block
# always holds at least one frame (Aeron's file I/O length is never below the MTU); a 6000-byte message with 4096-byte
# blocks made the test's recorder stall on its first frame, not the code under test fail.
@given(sizes=st.lists(st.integers(1, 4000), min_size=10, max_size=40), max_block=st.sampled_from([4096, 8192, TERM]))
def test_a_recorder_killed_inside_any_write_recovers_only_frames_written_whole(tmp_path_factory, sizes, max_block):
    """SIGKILL inside ``pwrite`` leaves a page-granular prefix of it in the file. Cut the recording at every such
    point of every write: recovery must stop at an end of whole frames, no earlier than the blocks written
    before the cut, and zero what the cut write left after it."""
    import mmap
    import os

    from aeron_numba.archive import segment_files as sf

    shm_dir = tmp_path_factory.mktemp("log")
    log, end = publish(shm_dir, sizes)
    end = min(end, TERM)
    calls, blocks_done = [], []  # (offset, bytes) of each pwrite; (pwrites so far, position) after each block
    real_pwrite = os.pwrite

    def logged_pwrite(fd, data, offset):
        calls.append((offset, bytes(data)))
        return real_pwrite(fd, data, offset)

    writer = RecordingWriter(tmp_path_factory.mktemp("rec"), 1, 0, 0, TERM, TERM)
    real_write = writer.write

    def write(block, offset, length):
        real_write(block, offset, length)
        blocks_done.append((len(calls), writer.position))

    writer.write = write
    sf.os.pwrite = logged_pwrite
    try:
        record(writer, log, 0, end, max_block)
    finally:
        sf.os.pwrite = real_pwrite
    writer.close()
    whole = (writer.archive_dir / "1-0.rec").read_bytes()
    cut_dir = tmp_path_factory.mktemp("cut")
    for i, (offset, data) in enumerate(calls):
        done = max((position for n, position in blocks_done if n <= i), default=0)
        first_page = (offset // mmap.PAGESIZE + 1) * mmap.PAGESIZE
        for cut in [offset, *range(first_page, offset + len(data), mmap.PAGESIZE)]:
            file = bytearray(TERM)
            for at, earlier in calls[:i]:
                file[at:at + len(earlier)] = earlier
            file[offset:cut] = data[:cut - offset]
            (cut_dir / "1-0.rec").write_bytes(bytes(file))
            stop = recover_stop_position(cut_dir, 1, 0, TERM, TERM)
            assert done <= stop <= end, (i, cut, done, stop)
            after = (cut_dir / "1-0.rec").read_bytes()
            assert after[:stop] == whole[:stop], f"torn frame before the recovered stop {stop} (write {i}, cut {cut})"
            assert after[stop:] == bytes(TERM - stop)


def test_undo_zeroes_a_block_written_from_a_log_the_image_lost(shm_dir, tmp_path):
    log, end = publish(shm_dir, [500] * 20)  # 544-byte frames
    writer = RecordingWriter(tmp_path, 1, 0, 0, TERM, TERM)
    record(writer, log, 0, 544 * 4)
    writer.write(log, 544 * 4, 544 * 6)  # written, then found no longer owned
    writer.undo(544 * 4)
    assert writer.position == 544 * 4
    record(writer, log, 544 * 4, 544 * 5)  # the next block goes where the undone one was
    writer.close()
    data = (tmp_path / "1-0.rec").read_bytes()
    assert data[:544 * 5] == bytes(log[:544 * 5]) and data[544 * 5:] == bytes(TERM - 544 * 5)
    assert recover_stop_position(tmp_path, 1, 0, TERM, TERM) == 544 * 5


def test_record_block_extent_and_commit_as_block_poll(shm_dir):
    from aeron_numba.kernels.segment_scanner import (
        EXTENT_END_POSITION,
        EXTENT_LOG_OFFSET,
        commit_record_block,
        record_block_extent,
    )
    from aeron_numba.layout import counters as C

    log, end = publish(shm_dir, [500] * 150)  # 544-byte frames over two terms (a PAD frame ends the first)
    metadata = np.zeros(4 * C.METADATA_LENGTH, dtype=np.uint8)
    values = np.zeros(4 * C.COUNTER_LENGTH, dtype=np.uint8)
    counter_id, registration_id = 2, 99
    metadata[counter_id * C.METADATA_LENGTH + C.METADATA_STATE_OFFSET] = C.RECORD_ALLOCATED
    values[counter_id * C.COUNTER_LENGTH + C.COUNTER_REGISTRATION_ID_OFFSET] = registration_id
    position_offset = counter_id * C.COUNTER_LENGTH + C.COUNTER_VALUE_OFFSET
    extent = np.zeros(2, dtype=np.int64)
    blocks = []
    while True:
        length = record_block_extent(log, values, position_offset, 16 * 1024, extent)
        if length == 0:
            break
        position = int(values[position_offset:position_offset + 8].view(np.int64)[0])
        term_base = (position // TERM % 3) * TERM
        assert extent[EXTENT_LOG_OFFSET] == term_base + position % TERM
        assert position % TERM + length == scan_block(log, term_base, position % TERM,
                                                       min(TERM, position % TERM + 16 * 1024))
        blocks.append(length)
        assert commit_record_block(metadata, values, counter_id, registration_id, position_offset,
                                   int(extent[EXTENT_END_POSITION]))
    assert sum(blocks) == end and max(blocks) <= 16 * 1024
    values[counter_id * C.COUNTER_LENGTH + C.COUNTER_REGISTRATION_ID_OFFSET] = registration_id + 1  # reused
    assert not commit_record_block(metadata, values, counter_id, registration_id, position_offset, 0)
    assert int(values[position_offset:position_offset + 8].view(np.int64)[0]) == end  # not stored


def test_truncate_deletes_the_segments_after_the_position_and_zeroes_the_rest_of_its_own(shm_dir, tmp_path):
    log, end = publish(shm_dir, [500] * 300)  # 544-byte frames over three terms
    writer = RecordingWriter(tmp_path, 4, 0, 0, TERM, TERM)
    record(writer, log, 0, end)
    writer.close()
    other = RecordingWriter(tmp_path, 5, 0, 0, TERM, TERM)  # another recording's files are left alone
    record(other, log, 0, 544)
    other.close()
    assert [base for base, _ in segment_files(tmp_path, 4)] == [0, TERM, 2 * TERM]
    assert truncate_segment_files(tmp_path, 4, 0, end, TERM + 544 * 3, TERM, TERM) == 1
    assert [base for base, _ in segment_files(tmp_path, 4)] == [0, TERM]
    data = (tmp_path / f"4-{TERM}.rec").read_bytes()
    assert data[:544 * 3] == bytes(log[TERM:TERM + 544 * 3]) and data[544 * 3:] == bytes(TERM - 544 * 3)
    assert recover_stop_position(tmp_path, 4, 0, TERM, TERM) == TERM + 544 * 3
    # At a segment's start: nothing of it is kept.
    assert truncate_segment_files(tmp_path, 4, 0, TERM + 544 * 3, TERM, TERM, TERM) == 1
    assert [base for base, _ in segment_files(tmp_path, 4)] == [0]
    assert delete_segment_files(tmp_path, 4) == 1
    assert segment_files(tmp_path, 4) == [] and [base for base, _ in segment_files(tmp_path, 5)] == [0]


def test_detached_segment_bases_are_those_a_start_position_moved_past_lowest_first():
    from aeron_numba.archive.segment_files import detached_segment_bases

    segment = 2 * TERM
    assert detached_segment_bases(96, 3 * segment, TERM, segment) == [0, segment, 2 * segment]
    assert detached_segment_bases(segment, segment, TERM, segment) == []


def test_move_segments_checks_every_file_before_it_renames_any(tmp_path):
    from aeron_numba.archive.segment_files import move_segments
    from aeron_numba.layout import archive as A

    for base in (0, 2 * TERM):  # the one at TERM is missing
        (tmp_path / A.segment_file_name(1, base)).write_bytes(b"x")
    with pytest.raises(SegmentFileError, match=f"missing src segment file {tmp_path / A.segment_file_name(1, TERM)}"):
        move_segments(tmp_path, 1, 2, 0, 3 * TERM - 32, TERM, TERM)
    assert segment_files(tmp_path, 2) == [] and len(segment_files(tmp_path, 1)) == 2
    (tmp_path / A.segment_file_name(1, TERM)).write_bytes(b"x")
    assert move_segments(tmp_path, 1, 2, 0, 3 * TERM, TERM, TERM) == (3, [3 * TERM])  # the stop's: not moved
    assert [base for base, _ in segment_files(tmp_path, 2)] == [0, TERM, 2 * TERM]
