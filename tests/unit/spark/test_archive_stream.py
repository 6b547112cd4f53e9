"""The streaming ``aeron-archive`` source's planning, called as Spark's driver calls it (no session): offsets land
on durable frame or message boundaries, a frame being written is never passed, maxBytesPerTrigger is shared in
whole units and fairly, and bad options are named with their values."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingWriter
from aeron_numba.spark.archive_source import ArchiveSourceError, scan_segment_range
from aeron_numba.spark.archive_stream import ArchiveStreamReader
from tests.unit.archive.test_archive_segments import TERM, publish, record

SIZES = [100, 3000, 33, 1500, 8, 4000, 700] * 16  # single frames and 2..3-fragment messages over three terms


class GrowingRecording:
    """A recording the test writes bit by bit with the archive's own RecordingWriter and catalog, as the
    archive's recorder would while a query follows it."""

    def __init__(self, archive, shm_dir, sizes, stream_id=1001, name="growing", segment_terms=1, session_id=77):
        self.archive = archive
        self.log, self.end = publish(shm_dir, sizes, name=name)
        self.frames = []  # (position, frame_length, frame_type, flags) of every frame, PAD included
        position = 0
        while position < self.end:
            at = ((position // TERM) % 3) * TERM + position % TERM
            length, _, flags, frame_type = struct.unpack_from("<iBBH", self.log, at)  # length, version, flags, type
            self.frames.append((position, length, frame_type, flags))
            position += (length + 31) & ~31
        with Catalog.open(archive) as catalog:
            self.recording_id = catalog.add_recording(
                start_position=0, start_timestamp=1, initial_term_id=5, segment_file_length=segment_terms * TERM,
                term_buffer_length=TERM, mtu_length=1408, session_id=session_id, stream_id=stream_id,
                stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc")
        self.writer = RecordingWriter(archive, self.recording_id, 0, 0, TERM, segment_terms * TERM)
        self.position = 0

    def frame_ends(self) -> list[int]:
        return [position + ((length + 31) & ~31) for position, length, _, _ in self.frames]

    def message_starts(self) -> list[int]:
        """Positions of the frames that begin a message (BEGIN flag)."""
        return [position for position, _, frame_type, flags in self.frames if frame_type == 1 and flags & 0x80]

    def grow_to(self, position: int) -> None:
        assert position in self.frame_ends() and position >= self.position
        if position > self.position:
            self.position = record(self.writer, self.log, self.position, position)

    def stop(self) -> None:
        self.grow_to(self.end)
        self.writer.close()
        with Catalog.open(self.archive) as catalog:
            catalog.update_stop_position(self.recording_id, self.end, 2)

    def data_positions(self, below: int) -> list[int]:
        return [position for position, _, frame_type, _ in self.frames if frame_type == 1 and position < below]


@pytest.fixture
def archive(tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    return folder


def reader(archive, **options) -> ArchiveStreamReader:
    return ArchiveStreamReader(str(archive), {k: str(v) for k, v in options.items()})


def read_rows(stream_reader, start, end) -> list:
    rows = []
    for part in stream_reader.partitions(start, end):
        batch = scan_segment_range(part, stream_reader.messages, 0)
        rows.extend(zip(batch.column("recording_id").to_pylist(), batch.column("position").to_pylist(),
                        batch.column("frame_length").to_pylist()))
    return rows


@pytest.mark.parametrize("messages", [False, True])
def test_a_micro_batch_deep_into_a_segment_scans_from_the_term_holding_its_start(archive, tmp_path, messages):
    rec = GrowingRecording(archive, tmp_path, SIZES, segment_terms=4)  # three terms of frames in one segment
    rec.stop()
    low = next(p for p in (rec.message_starts() if messages else rec.frame_ends()) if p > 2 * TERM + 1000)
    r = reader(archive, messages=str(messages).lower())
    parts = r.partitions({"0": low}, {"0": rec.end})
    assert [(p.from_offset, p.to_offset) for p in parts] == [(2 * TERM, rec.end)]  # not the two terms before
    everything = [row for row in read_rows(r, {"0": 0}, {"0": rec.end}) if row[1] >= low]
    assert read_rows(r, {"0": low}, {"0": rec.end}) == everything and everything


def test_the_live_end_is_the_last_whole_frame_and_a_header_being_written_is_never_passed(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, SIZES)
    ends = rec.frame_ends()
    rec.grow_to(ends[10])
    r = reader(archive)
    assert r.initialOffset() == {"0": 0}
    assert r.latestOffset({"0": 0}, ReadAllAvailable()) == {"0": ends[10]}
    # the next frame's length word is in the file but the rest of its header is not yet: not durable
    segment = archive / "0-0.rec"
    data = bytearray(segment.read_bytes())
    struct.pack_into("<i", data, ends[10], 64)
    segment.write_bytes(bytes(data))
    assert r.latestOffset({"0": 0}, ReadAllAvailable()) == {"0": ends[10]}
    assert r.latestOffset({"0": ends[10]}, ReadAllAvailable()) == {"0": ends[10]}


def test_with_messages_the_live_end_stops_before_a_message_not_yet_whole(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, SIZES)
    fragmented = next(p for p, length, t, flags in rec.frames if t == 1 and flags == 0x80)  # a BEGIN-only frame
    middle = next(e for e in rec.frame_ends() if e > fragmented)  # after its first fragment
    rec.grow_to(middle)
    assert reader(archive).latestOffset({}, ReadAllAvailable()) == {"0": middle}
    assert reader(archive, messages=True).latestOffset({}, ReadAllAvailable()) == {"0": fragmented}
    rec.stop()  # a stopped recording is durable to its stop position
    assert reader(archive, messages=True).latestOffset({}, ReadAllAvailable()) == {"0": rec.end}


@pytest.mark.parametrize("messages", [False, True])
def test_max_bytes_per_trigger_bounds_each_batch_in_whole_units_and_reads_everything_once(archive, tmp_path,
                                                                                         messages):
    rec = GrowingRecording(archive, tmp_path, SIZES)
    rec.stop()
    r = reader(archive, maxBytesPerTrigger=10000, messages=messages)
    assert r.getDefaultReadLimit() == ReadMaxBytes(10000)
    boundaries = set(rec.message_starts() if messages else [p for p, *_ in rec.frames]) | {rec.end}
    start, seen, batches = r.initialOffset(), [], 0
    while (end := r.latestOffset(start, ReadMaxBytes(10000))) != start:
        assert end["0"] - start["0"] <= 10000 and end["0"] in boundaries
        seen.extend(position for _, position, _ in read_rows(r, start, end))
        start, batches = end, batches + 1
    assert start == {"0": rec.end} and batches >= rec.end // 10000
    expected = rec.message_starts() if messages else rec.data_positions(rec.end)
    assert seen == expected


def test_a_frame_larger_than_the_limit_goes_through_alone(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, [1000, 1000, 100])
    rec.stop()
    r = reader(archive, maxBytesPerTrigger=500)
    first = r.latestOffset({"0": 0}, ReadMaxBytes(500))
    assert first == {"0": 1056}  # 1000 + 32 bytes of header, aligned: more than 500, alone
    assert r.latestOffset(first, ReadMaxBytes(500)) == {"0": 2112}
    assert r.latestOffset({"0": 2112}, ReadMaxBytes(500)) == {"0": 2112 + 160}


def test_recordings_share_the_limit_take_turns_and_a_new_recording_joins_at_its_start(archive, tmp_path):
    small = GrowingRecording(archive, tmp_path, [100] * 200, name="small")  # 160-byte frames
    small.stop()
    r = reader(archive, maxBytesPerTrigger=2000)
    assert r.latestOffset({}, ReadMaxBytes(2000)) == {"0": 1920}  # alone: all of the budget, in whole frames
    big = GrowingRecording(archive, tmp_path, [1300] * 20, stream_id=1002, name="big")  # 1344-byte frames
    big.grow_to(big.frame_ends()[-1])
    turns, start = [], {"0": 1920}
    for _ in range(4):
        end = r.latestOffset(start, ReadMaxBytes(2000))
        turns.append({k: end[k] - start.get(k, 0) for k in end})
        start = end
    # The new recording joins from its start and goes first on every other trigger: its 1344-byte frame is more
    # than its 1000-byte share but fits the budget, so it goes whole and the other takes what is left. On the
    # other's turns that one takes its share, the big frame does not fit the rest, and the other takes more.
    assert turns == [{"0": 640, "1": 1344}, {"0": 1920, "1": 0}] * 2


def test_trigger_available_now_ends_at_what_was_durable_when_it_was_prepared(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, SIZES)
    ends = rec.frame_ends()
    rec.grow_to(ends[20])
    r = reader(archive, maxBytesPerTrigger=8192)
    r.prepareForTriggerAvailableNow()
    rec.grow_to(ends[40])
    GrowingRecording(archive, tmp_path, [100] * 10, name="later").stop()  # created after: left to the next run
    start = r.initialOffset()
    while (end := r.latestOffset(start, ReadMaxBytes(8192))) != start:
        start = end
    assert start == {"0": ends[20], "1": 0}
    assert r.latestOffset(start, ReadAllAvailable()) == start


def test_starting_positions_earliest_latest_and_json(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, SIZES)
    ends = rec.frame_ends()
    rec.grow_to(ends[30])
    assert reader(archive, startingPositions="latest").initialOffset() == {"0": ends[30]}
    assert reader(archive, startingPositions=f'{{"0": {ends[5]}}}').initialOffset() == {"0": ends[5]}
    with pytest.raises(ArchiveSourceError, match=rf"recording 0 position={ends[5] + 32} is not at the start of a "
                                                 rf"frame \(the frame holding it starts at {ends[5]}\)"):
        reader(archive, startingPositions=f'{{"0": {ends[5] + 32}}}').initialOffset()
    with pytest.raises(ArchiveSourceError, match=rf"position={ends[31]} is outside \[0, {ends[30]}\]"):
        reader(archive, startingPositions=f'{{"0": {ends[31]}}}').initialOffset()
    with pytest.raises(ArchiveSourceError, match=r"recording 9 is not a VALID recording"):
        reader(archive, startingPositions='{"9": 0}').initialOffset()


def test_recording_ids_stream_ids_and_session_ids_choose_the_recordings_followed(archive, tmp_path):
    GrowingRecording(archive, tmp_path, [100] * 4, name="a").stop()
    GrowingRecording(archive, tmp_path, [100] * 4, stream_id=1002, name="b", session_id=78).stop()
    assert reader(archive, recordingIds="1").initialOffset() == {"1": 0}
    assert reader(archive, streamIds="1001").latestOffset({}, ReadAllAvailable()) == {"0": 640}
    assert reader(archive, sessionIds="78").latestOffset({}, ReadAllAvailable()) == {"1": 640}


@pytest.mark.parametrize("options, message", [
    ({"maxBytesPerTrigger": "-5"}, r"option maxBytesPerTrigger='-5': expected a positive byte count"),
    ({"startingPositions": "sideways"}, r"option startingPositions='sideways': expected earliest, latest or JSON"),
    ({"recordingIds": "1,x"}, r"option recordingIds='1,x': expected comma-separated integer ids"),
    ({"endingPositions": '{"0": 64}'}, r"option endingPositions is for spark.read \(batch\) only"),
    ({"includeInvalid": "true"}, r"option includeInvalid is for spark.read \(batch\) only"),
    ({"messages": "maybe"}, r"option messages='maybe': expected true or false"),
])
def test_a_bad_option_is_named_with_its_value(archive, options, message):
    with pytest.raises(ArchiveSourceError, match=message):
        ArchiveStreamReader(str(archive), options)


def test_a_segment_deleted_under_the_query_is_data_lost_or_skipped(archive, tmp_path):
    rec = GrowingRecording(archive, tmp_path, [1500] * 120)  # three segments, 1568 bytes a message
    rec.stop()
    (archive / f"0-{TERM}.rec").unlink()
    with pytest.raises(ArchiveSourceError, match=rf"recording 0: data lost at position {TERM}: segment file "
                                                 rf"0-{TERM}.rec is missing"):
        reader(archive, maxBytesPerTrigger=TERM).latestOffset({"0": 64128}, ReadMaxBytes(TERM))
    r = reader(archive, maxBytesPerTrigger=TERM, failOnDataLoss=False)
    assert r.latestOffset({"0": 64128}, ReadMaxBytes(TERM)) == {"0": 2 * TERM}  # the lost segment skipped
    rows = read_rows(r, {"0": 0}, {"0": rec.end})
    assert [p for _, p, _ in rows] == [p for p in rec.data_positions(rec.end) if not TERM <= p < 2 * TERM]
    assert np.all(np.diff([p for _, p, _ in rows]) > 0)
