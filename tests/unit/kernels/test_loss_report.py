"""Loss report kernels (spec §13.1) against the §13.1 table and the model in tests/reference/loss_report.py."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import loss_report as k
from aeron_numba.layout import loss_report as lay
from tests.reference.loss_report import ReferenceLossReport, reference_scan
from tests.unit.guarded_memory import guarded, u8


def kernel_scan(buffer: np.ndarray):
    scan = k.LossReportReader.scan(buffer)
    rows = [
        (e.observation_count, e.total_bytes_lost, e.first_observation_timestamp_ms, e.last_observation_timestamp_ms,
         e.session_id, e.stream_id, e.channel, e.source)
        for e in scan.entries
    ]
    return rows, scan.corrupt_offset


def create(buffer, state, bytes_lost, ts, session, stream, channel: bytes, source: bytes) -> int:
    return k.create_entry(buffer, state, bytes_lost, ts, session, stream, u8(channel), len(channel), u8(source), len(source))


# --- layout pins -----------------------------------------------------------------------------------------


def test_layout_constants_match_spec_table():
    assert (lay.OBSERVATION_COUNT_OFFSET, lay.TOTAL_BYTES_LOST_OFFSET) == (0, 8)
    assert (lay.FIRST_OBSERVATION_TIMESTAMP_OFFSET, lay.LAST_OBSERVATION_TIMESTAMP_OFFSET) == (16, 24)
    assert (lay.SESSION_ID_OFFSET, lay.STREAM_ID_OFFSET, lay.CHANNEL_LENGTH_OFFSET, lay.CHANNEL_OFFSET) == (32, 36, 40, 44)
    assert (lay.ENTRY_ALIGNMENT, lay.STRING_ALIGNMENT, lay.MIN_ENTRY_LENGTH) == (64, 4, 48)
    assert lay.LOSS_REPORT_FILE == "loss-report.dat"
    assert lay.DEFAULT_LOSS_REPORT_BUFFER_LENGTH == 1024 * 1024
    codes = {lay.LOSS_REPORT_END, lay.LOSS_REPORT_CORRUPT, lay.INSUFFICIENT_SPACE, lay.INVALID_LENGTH,
             lay.INVALID_ENTRY_OFFSET, lay.INVALID_STATE}
    assert len(codes) == 6 and max(codes) < 0


@pytest.mark.parametrize(
    "channel_length, source_length, source_field, length, aligned",
    [(0, 0, 44, 48, 64), (1, 13, 48, 65, 128), (4, 12, 48, 64, 64), (5, 0, 52, 56, 64), (17, 14, 64, 82, 128)],
)
def test_entry_arithmetic(channel_length, source_length, source_field, length, aligned):
    # (1, 13): the source length sits at align(1, 4) past the channel, and the entry needs 65 bytes, so the
    # next entry is at 128 (Aeron's C reader would step by align(48 + 1 + 13, 64) = 64: not where it is).
    assert k.source_length_offset(channel_length) == source_field
    assert k.entry_length(channel_length, source_length) == length
    assert k.aligned_entry_length(channel_length, source_length) == aligned


def test_entry_is_written_at_spec_offsets():
    buffer = np.zeros(256, np.uint8)
    state = np.zeros(1, np.int64)
    channel, source = b"aeron:udp?endpoint=localhost:20121", b"127.0.0.1:5"  # 34 and 11 bytes
    assert create(buffer, state, 32, 7000, -5, 1001, channel, source) == 0
    data = buffer.tobytes()
    assert struct.unpack_from("<qqqqiii", data, 0) == (1, 32, 7000, 7000, -5, 1001, 34)
    assert data[44:78] == channel and data[78:80] == b"\0\0"
    assert struct.unpack_from("<i", data, 80) == (11,) and data[84:95] == source
    assert state[0] == 128 and not buffer[95:].any()
    assert k.record_observation(buffer, 0, 100, 9000) == 0
    assert struct.unpack_from("<qqqq", buffer.tobytes(), 0) == (2, 132, 7000, 9000)
    assert create(buffer, state, 1, 9500, 1, 2, b"", b"") == 128
    assert struct.unpack_from("<qqqqiiii", buffer.tobytes(), 128) == (1, 1, 9500, 9500, 1, 2, 0, 0)
    assert state[0] == 192 and k.loss_report_end_offset(buffer) == 192


# --- property test against the reference ----------------------------------------------------------------

_STRINGS = [b"", b"a", b"ab", b"abc", b"abcd", b"aeron:udp?endpoint=localhost:20121", b"x" * 61, b"10.0.0.1:4000"]

_create = st.tuples(
    st.just("create"),
    st.integers(-(2**40), 2**40),
    st.integers(0, 10**13),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from(_STRINGS),
    st.sampled_from(_STRINGS),
)
_record = st.tuples(st.just("record"), st.integers(0, 50), st.integers(-(2**40), 2**40), st.integers(0, 10**13))


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(0, 700), ops=st.lists(st.one_of(_create, _record), max_size=40))
def test_operation_sequences_match_reference(capacity, ops):
    buffer = guarded(capacity)  # an over-read or over-write past the end faults
    state = np.zeros(1, np.int64)
    ref = ReferenceLossReport(capacity)
    for op in ops:
        if op[0] == "create":
            _, bytes_lost, ts, session, stream, channel, source = op
            expected = ref.create_entry(bytes_lost, ts, session, stream, channel, source)
            got = create(buffer, state, bytes_lost, ts, session, stream, channel, source)
            assert got == (lay.INSUFFICIENT_SPACE if expected is None else expected)
            assert state[0] == ref.next_offset
            if expected is None:
                event("report full")
        elif ref.entries:
            _, index, bytes_lost, ts = op
            offset = ref.entries[index % len(ref.entries)].offset
            ref.record_observation(offset, bytes_lost, ts)
            assert k.record_observation(buffer, offset, bytes_lost, ts) == 0
    assert buffer.tobytes() == ref.render()
    assert kernel_scan(buffer) == (ref.read(), None)
    assert k.loss_report_end_offset(buffer) == ref.next_offset


def test_reader_batches_across_many_entries():
    capacity = 64 * 300
    buffer = np.zeros(capacity, np.uint8)
    report = k.LossReport(buffer)
    ref = ReferenceLossReport(capacity)
    for i in range(300):
        channel, source = f"h{i}:1", f"s{i}"  # one 64-byte slot each
        assert report.create_entry(i, 1000 + i, i, -i, channel, source).offset == ref.create_entry(
            i, 1000 + i, i, -i, channel.encode(), source.encode()
        )
    assert report.create_entry(0, 0, 0, 0, "", "") is None
    assert kernel_scan(buffer) == (ref.read(), None)
    assert len(ref.read()) == 300


# --- Python wrappers -------------------------------------------------------------------------------------


def test_writer_wrapper_records_and_resumes_after_existing_entries():
    buffer = np.zeros(1024, np.uint8)
    report = k.LossReport(buffer)
    entry = report.create_entry(10, 5000, 7, 1001, "aeron:udp?endpoint=localhost:1", "127.0.0.1:9")
    entry.record_observation(20, 6000)
    report.record_observation(entry.offset, 30, 7000)
    assert report.next_record_offset == 128
    again = k.LossReport(buffer)  # a writer reopening the file appends after the existing entry
    assert again.next_record_offset == 128
    second = again.create_entry(1, 8000, 8, 1002, "aeron:ipc", "snow \u2603")
    assert second.offset == 128
    assert k.LossReportReader.read(buffer) == [
        k.LossEntry(3, 60, 5000, 7000, 7, 1001, "aeron:udp?endpoint=localhost:1", "127.0.0.1:9"),
        k.LossEntry(1, 1, 8000, 8000, 8, 1002, "aeron:ipc", "snow ?"),  # US-ASCII: '?' for the rest
    ]
    assert not k.LossReportReader.is_corrupt(buffer)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(session_id=2**31), "session_id=2147483648"),
        (dict(stream_id=-(2**31) - 1), "stream_id=-2147483649"),
        (dict(initial_bytes_lost=2**63), "initial_bytes_lost="),
        (dict(timestamp_ms=1.5), "timestamp_ms=1.5 must be an int"),
        (dict(channel=b"aeron:ipc"), "channel=b'aeron:ipc' must be a str"),
        (dict(source=None), "source=None must be a str"),
    ],
)
def test_writer_wrapper_rejects_bad_input_naming_it(kwargs, message):
    report = k.LossReport(np.zeros(256, np.uint8))
    args = dict(initial_bytes_lost=1, timestamp_ms=1, session_id=1, stream_id=1, channel="c", source="s")
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=message.replace("?", r"\?").replace("(", r"\(")):
        report.create_entry(**args)
    assert report.next_record_offset == 0


def test_writer_wrapper_rejects_bad_buffers_and_offsets():
    with pytest.raises(LayoutError, match="buffer_length=40 < MIN_ENTRY_LENGTH=48"):
        k.LossReport(np.zeros(40, np.uint8))
    with pytest.raises(LayoutError, match="1-D np.uint8"):
        k.LossReport(np.zeros(64, np.int64))
    corrupt = np.zeros(128, np.uint8)
    struct.pack_into("<qqqqiii", corrupt, 0, 1, 0, 0, 0, 0, 0, 1000)  # channel runs past the end
    with pytest.raises(LayoutError, match="corrupt"):
        k.LossReport(corrupt)
    report = k.LossReport(np.zeros(256, np.uint8))
    report.create_entry(1, 1, 1, 1, "c", "s")
    for offset in (64, 1, 300):
        with pytest.raises(ConfigurationError, match=f"entry_offset={offset}"):
            report.record_observation(offset, 1, 1)


# --- status codes and garbage ----------------------------------------------------------------------------


def test_kernel_status_codes():
    buffer = np.zeros(256, np.uint8)
    state = np.zeros(1, np.int64)
    channel = u8(b"abc")
    assert k.create_entry(buffer, state, 0, 0, 0, 0, channel, 4, channel, 0) == lay.INVALID_LENGTH
    assert k.create_entry(buffer, state, 0, 0, 0, 0, channel, -1, channel, 0) == lay.INVALID_LENGTH
    assert k.create_entry(buffer, state, 0, 0, 0, 0, channel, 0, channel, 4) == lay.INVALID_LENGTH
    for bad_state, code in ((-64, lay.INVALID_STATE), (32, lay.INVALID_STATE), (320, lay.INSUFFICIENT_SPACE),
                            (2**62, lay.INSUFFICIENT_SPACE)):
        state[0] = bad_state
        assert k.create_entry(buffer, state, 0, 0, 0, 0, channel, 3, channel, 3) == code
        assert state[0] == bad_state
    assert not buffer.any()
    state[0] = 192
    assert k.create_entry(buffer, state, 0, 0, 0, 0, channel, 3, channel, 3) == 192  # 56 bytes fit in the last 64
    for offset in (-64, 8, 64, 256, 2**62):
        assert k.record_observation(buffer, offset, 1, 1) == lay.INVALID_ENTRY_OFFSET
    assert k.record_observation(buffer, 192, 1, 1) == 0


def test_collect_rejects_bad_cursor_and_narrow_output():
    buffer = np.zeros(128, np.uint8)
    create(buffer, np.zeros(1, np.int64), 1, 1, 1, 1, b"c", b"s")
    out = np.zeros((4, k.LOSS_DESC_COLUMNS), np.int64)
    for start in (-64, 8):
        cursor = np.array([start], np.int64)
        assert k.collect_loss_entries(buffer, cursor, out) == 0 and cursor[0] == lay.LOSS_REPORT_END
    cursor = np.zeros(1, np.int64)
    assert k.collect_loss_entries(buffer, cursor, np.zeros((4, k.LOSS_DESC_COLUMNS - 1), np.int64)) == 0
    assert cursor[0] == lay.LOSS_REPORT_END
    cursor = np.zeros(1, np.int64)
    assert k.collect_loss_entries(buffer, cursor, out) == 1 and cursor[0] == lay.LOSS_REPORT_END


@pytest.mark.parametrize(
    "header, capacity, corrupt_at",
    [
        ((1, 0, 0, 0, 0, 0, -1), 128, 0),  # negative channel length
        ((1, 0, 0, 0, 0, 0, 2**31 - 1), 128, 0),  # channel runs past the end
        ((1, 0, 0, 0, 0, 0, 81), 128, 0),  # only the source length field would not fit
    ],
)
def test_corrupt_entries_stop_the_walk(header, capacity, corrupt_at):
    buffer = guarded(capacity)
    struct.pack_into("<qqqqiii", buffer, 0, *header)
    assert kernel_scan(buffer) == ([], corrupt_at)
    assert k.loss_report_end_offset(buffer) == lay.LOSS_REPORT_CORRUPT
    assert k.LossReportReader.is_corrupt(buffer)


def test_positive_count_without_room_for_a_header_is_corrupt():
    buffer = guarded(64 + 40)
    create(buffer, np.zeros(1, np.int64), 1, 1, 1, 1, b"c", b"s")
    struct.pack_into("<q", buffer, 64, 5)
    rows, corrupt = kernel_scan(buffer)
    assert len(rows) == 1 and corrupt == 64


@st.composite
def mutated_reports(draw):
    """A valid report in guarded memory with a few i32/i64 fields overwritten by arbitrary values."""
    capacity = draw(st.integers(0, 600))
    ref = ReferenceLossReport(capacity)
    for _ in range(draw(st.integers(0, 8))):
        ref.create_entry(1, 2, 3, 4, draw(st.sampled_from(_STRINGS)), draw(st.sampled_from(_STRINGS)))
    data = bytearray(ref.render())
    # Length and count fields are where garbage bites: aim half the writes at them.
    fields = [(e.offset + 40, 4) for e in ref.entries] + [(e.offset, 8) for e in ref.entries]
    fields += [(e.offset + 44 + (len(e.channel) + 3) // 4 * 4, 4) for e in ref.entries]
    for _ in range(draw(st.integers(0, 4))):
        if capacity < 8:
            break
        if fields and draw(st.booleans()):
            offset, width = draw(st.sampled_from(fields))
        else:
            width = draw(st.sampled_from([4, 8]))
            offset = draw(st.integers(0, capacity - width))
        value = draw(st.one_of(st.integers(-70, 600), st.integers(-(2 ** (8 * width - 1)), 2 ** (8 * width - 1) - 1)))
        struct.pack_into("<i" if width == 4 else "<q", data, offset, value)
    return bytes(data)


@settings(max_examples=300, deadline=None)
@given(data=mutated_reports())
def test_garbage_is_walked_exactly_like_the_reference(data):
    buffer = guarded(len(data))
    buffer[:] = np.frombuffer(data, np.uint8)
    rows, corrupt = reference_scan(data)
    event("corrupt" if corrupt is not None else "clean")
    assert kernel_scan(buffer) == (rows, corrupt)
    expected_end = k.loss_report_end_offset(buffer)
    assert (expected_end == lay.LOSS_REPORT_CORRUPT) == (corrupt is not None)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=400), at_end=st.booleans())
def test_random_bytes_never_fault(data, at_end):
    buffer = guarded(len(data), at_end=at_end)
    buffer[:] = np.frombuffer(data, np.uint8)
    assert kernel_scan(buffer) == reference_scan(data)
    k.loss_report_end_offset(buffer)
    for offset in range(0, len(data) + 64, 64):
        k.record_observation(buffer, offset, 1, 1)  # validates the offset before it touches the buffer
