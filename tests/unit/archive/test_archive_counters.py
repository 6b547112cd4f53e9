"""The archive's counters (spec/archive.md §4.4) as aeron-stat reads them: type ids, keys, labels, and what
they hold."""

from __future__ import annotations

import struct

from aeron_numba.archive.archive_counters import ArchiveCounters, rec_pos_key, rec_pos_label
from aeron_numba.layout import archive as A
from tests.unit.archive.archive_fakes import Aeron


def test_each_counter_has_its_type_the_archive_id_as_key_and_its_label():
    aeron = Aeron()
    ArchiveCounters(aeron, archive_id=7)
    key = struct.pack("<q", 7)
    assert [(c.type_id, c.key, c.label) for c in aeron.counters] == [
        (A.ARCHIVE_ERROR_COUNT_TYPE_ID, key, "Archive Errors - archiveId=7"),
        (A.ARCHIVE_CONTROL_SESSIONS_TYPE_ID, key, "Archive Control Sessions - archiveId=7"),
        (A.ARCHIVE_RECORDING_SESSIONS_TYPE_ID, key, "Archive Recording Sessions - archiveId=7"),
        (A.ARCHIVE_REPLAY_SESSIONS_TYPE_ID, key, "Archive Replay Sessions - archiveId=7"),
        (A.ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID, key, "archive-recorder max write time in ns - archiveId=7"),
        (A.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, key, "archive-recorder total write bytes - archiveId=7"),
        (A.ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID, key, "archive-recorder total write time in ns - archiveId=7"),
        (A.ARCHIVE_REPLAYER_MAX_READ_TIME_TYPE_ID, key, "archive-replayer max read time in ns - archiveId=7"),
        (A.ARCHIVE_REPLAYER_TOTAL_READ_BYTES_TYPE_ID, key, "archive-replayer total read bytes - archiveId=7"),
        (A.ARCHIVE_REPLAYER_TOTAL_READ_TIME_TYPE_ID, key, "archive-replayer total read time in ns - archiveId=7"),
        (A.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, key, "archive-conductor max cycle time in ns: SHARED - archiveId=7"),
        (A.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
         "archive-conductor work cycle time exceeded count: threshold=1000000000ns SHARED - archiveId=7"),
    ]


def test_the_conductors_duty_cycles_keep_the_longest_and_count_those_over_the_threshold():
    counters = ArchiveCounters(Aeron(), archive_id=2, conductor_cycle_threshold_ns=5_000)
    assert counters.cycle_time_threshold_exceeded.label == \
        "archive-conductor work cycle time exceeded count: threshold=5000ns SHARED - archiveId=2"
    tracker = counters.duty_cycle_tracker()
    for cycle_ns in (1_000, 7_000, 3_000, 5_000, 6_000):
        tracker.record(cycle_ns)
    assert (counters.max_cycle_time.value, counters.cycle_time_threshold_exceeded.value) == (7_000, 2)
    counters.close()
    assert counters.max_cycle_time.is_closed and counters.cycle_time_threshold_exceeded.is_closed


def test_session_counts_are_stored_only_when_one_changed():
    counters = ArchiveCounters(Aeron(), archive_id=1)
    for counts in ((0, 0, 0), (1, 0, 0), (1, 0, 0), (1, 2, 0), (1, 2, 0), (0, 0, 1)):
        counters.update_session_counts(*counts)
    sessions = (counters.control_sessions, counters.recording_sessions, counters.replay_sessions)
    assert [c.value for c in sessions] == [0, 0, 1]
    assert [c.stores for c in sessions] == [3, 3, 3]  # three changes, each storing all three


def test_io_counters_sum_bytes_and_time_and_keep_the_longest_and_errors_count():
    counters = ArchiveCounters(Aeron(), archive_id=1)
    for length, ns in ((4096, 300), (1024, 900), (64, 100)):
        counters.on_write(length, ns)
    counters.on_read(2048, 50)
    counters.on_error()
    counters.on_error()
    assert {name: c.value for name, c in counters.io.items()} == {
        "max_write_ns": 900, "write_bytes": 5184, "write_ns": 1300, "max_read_ns": 50, "read_bytes": 2048,
        "read_ns": 50}
    assert counters.errors.value == 2


def test_a_recording_position_counter_and_closing():
    aeron = Aeron()
    counters = ArchiveCounters(aeron, archive_id=9)
    rec_pos = counters.add_recording_position(3, -5, "127.0.0.1:4000", 1001, "aeron:udp?endpoint=x:1")
    assert (rec_pos.type_id, rec_pos.label) == (A.RECORDING_POSITION_TYPE_ID,
                                                "rec-pos: 3 -5 1001 aeron:udp?endpoint=x:1 - archiveId=9")
    assert rec_pos.key == struct.pack("<qii14sq", 3, -5, 14, b"127.0.0.1:4000", 9)
    counters.close()
    assert all(c.is_closed for c in aeron.counters if c is not rec_pos) and not rec_pos.is_closed


def test_rec_pos_key_and_label_are_bounded():
    key = rec_pos_key(1, 2, "s" * 1000, 3)
    assert len(key) == A.rec_pos_key_length(1000) <= 112
    label = rec_pos_label(1, 2, 3, "aeron:ipc?alias=" + "a" * 1000, 4)
    assert len(label) == 380 and label.startswith("rec-pos: 1 2 3 aeron:ipc?alias=a")
    assert label.endswith(" - archiveId=4")
