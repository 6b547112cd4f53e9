"""``spark.readStream.format("aeron-archive")`` over recordings that grow while the query runs (written by the
archive's own RecordingWriter and catalog in this process): every (recording_id, position) is read exactly once
across a restart from the checkpoint, maxBytesPerTrigger bounds each micro-batch, Trigger.AvailableNow reads what
existed when it started and stops, and a bad option fails the query naming it."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.spark.test_archive_stream import SIZES, GrowingRecording

pytestmark = pytest.mark.spark

LIMIT = 65536  # bytes a micro-batch: a few batches per test keep it quick


class Batches:
    """A foreachBatch sink keeping each micro-batch's rows: (recording_id, position, frame_length) by batch id."""

    def __init__(self):
        self.rows: dict[int, list[tuple]] = {}
        self.on_batch = None  # called with the batch id after a batch is kept (to grow the recording then)

    def __call__(self, df, batch_id):
        self.rows[batch_id] = [tuple(r) for r in df.select("recording_id", "position", "frame_length").collect()]
        if self.on_batch is not None:
            self.on_batch(batch_id)

    def all(self) -> list[tuple]:
        return [row for batch_id in sorted(self.rows) for row in self.rows[batch_id]]


def start(spark, archive, checkpoint, sink, trigger=None, **options):
    reader = spark.readStream.format("aeron-archive")
    for key, value in options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    writer = reader.load(str(archive)).writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return (writer.trigger(**trigger) if trigger else writer).start()


def assert_bounded(sink: Batches, limit: int):
    for rows in sink.rows.values():
        assert len(rows) == 1 or sum((length + 31) & ~31 for _, _, length in rows) <= limit


def test_a_growing_recording_is_read_exactly_once_across_a_restart_from_the_checkpoint(spark, tmp_path):
    archive, checkpoint = tmp_path / "archive", tmp_path / "checkpoint"
    archive.mkdir()
    first = GrowingRecording(archive, tmp_path, SIZES, name="first")
    ends = first.frame_ends()
    first.grow_to(ends[len(ends) // 3])
    sink = Batches()
    query = start(spark, archive, checkpoint, sink, maxBytesPerTrigger=LIMIT)
    try:
        query.processAllAvailable()
        assert [p for _, p, _ in sink.all()] == first.data_positions(ends[len(ends) // 3])
        first.grow_to(ends[2 * len(ends) // 3])  # grows while the query runs, and a second recording starts
        second = GrowingRecording(archive, tmp_path, [200] * 120, stream_id=1002, name="second")
        second.grow_to(second.frame_ends()[40])
        query.processAllAvailable()
    finally:
        query.stop()
    batches_before = max(sink.rows)
    first.stop()  # while no query runs: the restarted one must pick up here
    second.grow_to(second.frame_ends()[80])
    query = start(spark, archive, checkpoint, sink, maxBytesPerTrigger=LIMIT)
    try:
        query.processAllAvailable()
        second.stop()
        query.processAllAvailable()
    finally:
        query.stop()
    assert min(batch_id for batch_id in sink.rows if batch_id > batches_before) == batches_before + 1
    seen = Counter((recording_id, position) for recording_id, position, _ in sink.all())
    assert max(seen.values()) == 1  # nothing read twice
    expected = [(first.recording_id, p) for p in first.data_positions(first.end)] + \
        [(second.recording_id, p) for p in second.data_positions(second.end)]
    assert sorted(seen) == sorted(expected)  # nothing skipped
    assert_bounded(sink, LIMIT)
    assert len(sink.rows) >= first.end // LIMIT + 2


def test_trigger_available_now_reads_what_existed_at_its_start_in_bounded_batches_then_stops(spark, tmp_path):
    archive, checkpoint = tmp_path / "archive", tmp_path / "checkpoint"
    archive.mkdir()
    rec = GrowingRecording(archive, tmp_path, SIZES)
    ends = rec.frame_ends()
    rec.grow_to(ends[len(ends) // 2])
    sink = Batches()
    sink.on_batch = lambda batch_id: rec.grow_to(ends[-1]) if batch_id == 0 else None  # grows during the run
    query = start(spark, archive, checkpoint, sink, trigger={"availableNow": True}, maxBytesPerTrigger=LIMIT // 2,
                  messages=True)
    assert query.awaitTermination(120)  # it stops by itself
    assert len(sink.rows) >= 2
    assert_bounded(sink, LIMIT // 2)
    messages = [p for p in rec.message_starts() if p < ends[len(ends) // 2]]
    assert [p for _, p, _ in sink.all()] == messages
    sink.on_batch = None
    query = start(spark, archive, checkpoint, sink, trigger={"availableNow": True}, messages=True)
    assert query.awaitTermination(120)
    assert [p for _, p, _ in sink.all()] == rec.message_starts()  # the rest, once
    lengths = [length - 32 for _, _, length in sink.all()]
    assert lengths == SIZES[:len(lengths)] and len(lengths) == len(SIZES)


def test_a_bad_option_fails_the_query_naming_it(spark, tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    GrowingRecording(archive, tmp_path, [100] * 4).stop()
    with pytest.raises(Exception, match=r"option maxBytesPerTrigger='lots': expected a positive byte count"):
        start(spark, archive, tmp_path / "checkpoint", Batches(), maxBytesPerTrigger="lots").awaitTermination(120)
