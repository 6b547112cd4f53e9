"""``spark.read.format("aeron-archive")``: rows equal an independent parse of the segment files (the archive's
RecordingReader), the archive recorded by real Aeron Java reads back exactly, filters prune segments before any is
opened, ``messages=true`` joins fragments, and a missing segment fails or is skipped as ``failOnDataLoss`` says."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingReader, RecordingWriter
from aeron_numba.layout.archive import RECORDING_STATE_INVALID
from aeron_numba.layout.checksum import CHECKSUM_CRC32
from tests.unit.archive.test_archive_segments import TERM, publish, record

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).resolve().parents[1] / "golden/aeron-1.48/archive-java"
FRAGMENT_COLUMNS = ["recording_id", "stream_id", "session_id", "position", "term_id", "term_offset",
                    "frame_length", "flags", "frame_type", "reserved_value", "payload"]
SIZES = [100, 3000, 33, 1500, 8, 4000, 700] * 16 # single frames and 2..3-fragment messages over three terms


def golden_message(i: int) -> bytes:
    """Message i of every stream of the Java-recorded archive (its README's rule)."""
    length = 1500 + (i * 53) % 3000 if i % 10 == 7 else 8 + (i * 37) % 400
    return struct.pack("<q", i) + bytes((i + k) % 256 for k in range(8, length))


def load(spark, path, **options):
    return spark.read.format("aeron-archive").options(**{k: str(v).lower() if isinstance(v, bool) else str(v)
                                                         for k, v in options.items()}).load(str(path))


@pytest.fixture(scope="module", autouse=True)
def filter_pushdown(spark):
    """Spark hands filters to Python sources only with this setting (off by default in 4.3)."""
    key = "spark.sql.python.filterPushdown.enabled"
    before = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    yield
    spark.conf.set(key, before)


def rows(df, columns=FRAGMENT_COLUMNS):
    return sorted(tuple(r) for r in df.select(*columns).collect())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Our archive's files for one recording over three 64 KiB segments (term rotations, padding, fragmented
    messages), written by its RecordingWriter with CRC-32 record checksums."""
    archive = tmp_path_factory.mktemp("archive")
    log, end = publish(tmp_path_factory.mktemp("log"), SIZES, name="spark-source")
    assert 2 * TERM < end <= 3 * TERM
    with Catalog.open(archive) as catalog:
        recording_id = catalog.add_recording(
            start_position=0, start_timestamp=1, initial_term_id=5, segment_file_length=TERM,
            term_buffer_length=TERM, mtu_length=1408, session_id=77, stream_id=1001,
            stripped_channel="aeron:ipc", original_channel="aeron:ipc?term-length=64k", source_identity="aeron:ipc",
            stop_position=end, stop_timestamp=2)
    writer = RecordingWriter(archive, recording_id, 0, 0, TERM, TERM, checksum_algorithm=CHECKSUM_CRC32)
    assert record(writer, log, 0, end) == end
    writer.close()
    return archive, recording_id, end


def independent_parse(archive, recording_id, end):
    """Every DATA frame, as RecordingReader hands out blocks, its header read field by field."""
    reader = RecordingReader(archive, recording_id, 0, TERM, TERM)
    found, position = [], 0
    try:
        while position < end:
            buffer, offset, length = reader.read(position, end, 4096)
            assert length > 0
            block = bytes(buffer[offset:offset + length])
            at = 0
            while at < length:
                frame_length, flags, frame_type, term_offset, _, stream_id, term_id, reserved = \
                    struct.unpack_from("<ixBhiiiiq", block, at)
                if frame_type == 1:  # the session id field holds the checksum: the recording's is 77
                    found.append((recording_id, stream_id, 77, position + at, term_id, term_offset, frame_length,
                                  flags, frame_type, reserved, block[at + 32:at + frame_length]))
                at += (frame_length + 31) & ~31
            position += length
    finally:
        reader.close()
    return found


def test_fragments_equal_an_independent_parse_of_our_recording(spark, recorded):
    archive, recording_id, end = recorded
    df = load(spark, archive, verifyChecksums="crc32")
    expected = independent_parse(archive, recording_id, end)
    assert any(flags != 0xC0 for *_, flags, _, _, _ in expected)  # fragmented messages are in it
    assert rows(df) == sorted(expected)
    assert df.rdd.getNumPartitions() == 3  # one per segment file
    assert {tuple(r) for r in df.select("channel", "stripped_channel", "source_identity").distinct().collect()} \
        == {("aeron:ipc?term-length=64k", "aeron:ipc", "aeron:ipc")}


def test_messages_true_joins_the_fragments_of_each_message(spark, recorded):
    archive, _, _ = recorded
    df = load(spark, archive, messages=True).orderBy("position")
    payloads = [r.payload for r in df.select("payload").collect()]
    assert [len(p) for p in payloads] == SIZES
    assert all(p == bytes([i & 0xFF]) * len(p) for i, p in enumerate(payloads))
    assert {r.flags for r in df.select("flags").collect()} == {0xC0}


def test_a_flipped_payload_byte_fails_verify_checksums_naming_the_file(spark, recorded, tmp_path):
    archive = Path(shutil.copytree(recorded[0], tmp_path / "archive"))
    segment = archive / f"{recorded[1]}-{TERM}.rec"
    data = bytearray(segment.read_bytes())
    data[32 + 10] ^= 0xFF  # the first frame's payload
    segment.write_bytes(bytes(data))
    assert load(spark, archive).count() == load(spark, recorded[0]).count()  # unchecked: read as it is
    with pytest.raises(Exception, match=rf"file .*{segment.name}: checksum failed at position {TERM}"):
        load(spark, archive, verifyChecksums=True).count()


def test_the_java_recorded_archive_reads_back_every_message_exactly(spark):
    df = load(spark, GOLDEN / "archive", messages=True)
    got = {(r.recording_id, r.stream_id, r.session_id, r.position): r.payload for r in
           df.select("recording_id", "stream_id", "session_id", "position", "payload").collect()}
    by_recording = {}
    for (recording_id, stream_id, session_id, position), payload in sorted(got.items()):
        by_recording.setdefault((recording_id, stream_id, session_id), []).append(payload)
    # README: recording 0 messages 0..299, recording 1 the first 60 of 140 (truncated), recording 2 0..199
    expected = {(0, 1001, 988464273): 300, (1, 1002, 988464274): 60, (2, 1003, 988464275): 200}
    assert {key: len(payloads) for key, payloads in by_recording.items()} == expected
    for payloads in by_recording.values():
        assert payloads == [golden_message(i) for i in range(len(payloads))]
    fragments = load(spark, GOLDEN / "archive").where("recording_id = 0").select("flags").collect()
    assert len(fragments) == 349  # README: 349 data frames, 79 of them fragments
    assert sum(r.flags != 0xC0 for r in fragments) == 79


def test_the_java_recorded_archive_agrees_with_archive_tools_dump(spark):
    dump = (GOLDEN / "archivetool-dump-3-frames-per-recording.txt").read_text()
    theirs, recording_id = [], None
    for line in dump.splitlines():
        if match := re.fullmatch(r"Recording (\d+)", line):
            recording_id = int(match[1])
        elif match := re.fullmatch(r"Frame at position \[(\d+)\] data at offset \[\d+\] with length = (\d+)", line):
            theirs.append((recording_id, int(match[1]), int(match[2])))
    assert len(theirs) == 9
    ours = sorted((r.recording_id, r.position, r.frame_length - 32) for r in
                  load(spark, GOLDEN / "archive").select("recording_id", "position", "frame_length").collect())
    assert [row for k in (0, 1, 2) for row in [o for o in ours if o[0] == k][:3]] == theirs


def test_pushed_filters_prune_segments_and_keep_the_rows(spark):
    # pushFilters=true is opt-in, and wants a fresh load per query: PySpark 4.3 keeps a pushdown's read plan on the
    # relation (see archive_source)
    def pruning():
        return load(spark, GOLDEN / "archive", pushFilters=True)

    assert pruning().rdd.getNumPartitions() == 4
    condition = (F.col("recording_id") == 0) & (F.col("position") >= 131072)
    filtered = pruning().where(condition)
    assert filtered.rdd.getNumPartitions() == 1  # only 0-131072.rec is opened
    everything = load(spark, GOLDEN / "archive")
    assert rows(filtered) == rows(spark.createDataFrame(everything.collect(), everything.schema).where(condition))
    assert rows(filtered) and all(r[0] == 0 and r[3] >= 131072 for r in rows(filtered))
    assert pruning().where(F.col("stream_id").isin(1002, 1003)).rdd.getNumPartitions() == 2
    assert pruning().where("session_id = 988464274 and position < 70000").rdd.getNumPartitions() == 1
    assert pruning().where("recording_id = 99").count() == 0  # no segment at all
    # term ids map to positions through each recording's initial term id (the catalog's) and term length
    d = {r.recording_id: r for r in load(spark, GOLDEN / "archive").groupBy("recording_id")
         .agg(F.min("term_id").alias("first"), F.max("term_id").alias("last")).collect()}
    by_terms = pruning().where((F.col("recording_id") == 0) & (F.col("term_id") >= d[0].first + 2))
    assert by_terms.rdd.getNumPartitions() == 1  # its third term: only 0-131072.rec
    assert rows(by_terms) == rows(spark.createDataFrame(everything.collect(), everything.schema)
                                  .where((F.col("recording_id") == 0) & (F.col("term_id") >= d[0].first + 2)))
    assert rows(by_terms)


def test_the_default_reader_filters_on_spark_defaults_and_a_reused_dataframe_stays_whole(spark):
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "false")  # Spark's default; a reader with pushFilters would make PySpark refuse the read
    try:
        frames = load(spark, GOLDEN / "archive")
        total = frames.count()
        assert frames.where("recording_id = 0").count() == len([r for r in frames.collect() if r.recording_id == 0])
        assert frames.count() == total  # the filtered query left no trace on the DataFrame
    finally:
        spark.conf.set(key, "true")  # this module's setting (the fixture above)
    by_option = load(spark, GOLDEN / "archive", recordingIds="0,2", streamIds="1001,1003")
    assert by_option.rdd.getNumPartitions() == len([p for p in (GOLDEN / "archive").glob("[02]-*.rec")])
    assert sorted({r.recording_id for r in by_option.select("recording_id").collect()}) == [0, 2]


def test_a_segment_larger_than_max_bytes_per_partition_splits_at_term_boundaries(spark):
    split = load(spark, GOLDEN / "archive", maxBytesPerPartition=65536)
    assert split.rdd.getNumPartitions() == 6  # 0-0.rec and 2-0.rec hold two terms each
    assert rows(split) == rows(load(spark, GOLDEN / "archive"))


def test_starting_and_ending_positions_bound_a_recording(spark):
    df = load(spark, GOLDEN / "archive", startingPositions='{"0": 64}', endingPositions='{"0": 448}')
    assert [r.position for r in df.where("recording_id = 0").orderBy("position").collect()] == [64, 160, 288]
    assert df.where("recording_id = 2").count() == load(spark, GOLDEN / "archive").where("recording_id = 2").count()


def test_an_invalid_recording_is_read_only_with_include_invalid(spark, tmp_path):
    archive = Path(shutil.copytree(GOLDEN / "archive", tmp_path / "archive"))
    with Catalog.open(archive, create=False) as catalog:
        catalog.change_state(1, RECORDING_STATE_INVALID)  # as archive-tool verify marks a recording it finds bad
    assert sorted({r.recording_id for r in load(spark, archive).select("recording_id").collect()}) == [0, 2]
    everything = rows(load(spark, GOLDEN / "archive"))
    assert rows(load(spark, archive, includeInvalid=True)) == everything


def test_a_missing_segment_fails_naming_the_recording_and_position_or_is_skipped(spark, tmp_path):
    archive = Path(shutil.copytree(GOLDEN / "archive", tmp_path / "archive"))
    (archive / "0-131072.rec").unlink()
    with pytest.raises(Exception, match=r"recording 0: data lost at position 131072: segment file 0-131072.rec"):
        load(spark, archive).count()
    assert load(spark, archive, failOnDataLoss=False).where("recording_id = 0").agg(F.max("position")).first()[0] \
        < 131072
    kept = load(spark, GOLDEN / "archive").where("recording_id != 0 or position < 131072")
    assert rows(load(spark, archive, failOnDataLoss=False)) == rows(kept)


def test_a_segment_cut_short_is_data_lost_at_its_first_missing_frame(spark, tmp_path):
    archive = Path(shutil.copytree(GOLDEN / "archive", tmp_path / "archive"))
    with open(archive / "2-0.rec", "r+b") as f:
        f.truncate(70000)  # recording 2 stops at 106368; a frame straddles offset 70000
    whole = rows(load(spark, GOLDEN / "archive").where("recording_id = 2"))
    cut = max(r[3] for r in whole if r[3] + ((r[6] + 31) & ~31) <= 70000)
    first_lost = min(r[3] for r in whole if r[3] + ((r[6] + 31) & ~31) > 70000)
    with pytest.raises(Exception, match=rf"recording 2: data lost at position {first_lost}: no frame in .*2-0.rec"):
        load(spark, archive).where("recording_id = 2").count()
    kept = rows(load(spark, archive, failOnDataLoss=False).where("recording_id = 2"))
    assert kept == [r for r in whole if r[3] < first_lost] and kept[-1][3] == cut


@pytest.mark.parametrize("options, message", [
    ({"messages": "yes"}, r"option messages='yes': expected true or false"),
    ({"startingPositions": "[1]"}, r"option startingPositions='\[1\]': expected JSON"),
    ({"verifyChecksums": "md5"}, r"option verifyChecksums='md5': expected one of"),
    ({"recordingIds": "0,x"}, r"option recordingIds='0,x': expected comma-separated integer ids"),
])
def test_a_bad_option_is_named_with_its_value(spark, options, message):
    with pytest.raises(Exception, match=message):
        load(spark, GOLDEN / "archive", **options).count()


def test_a_folder_without_a_catalog_is_not_an_archive(spark, tmp_path):
    with pytest.raises(Exception, match=rf"{tmp_path} is not an Aeron archive: it has no archive.catalog"):
        load(spark, tmp_path).count()
