"""Distinct error log kernels (spec §10) against the §10 table and the model in tests/reference/error_log.py."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import LayoutError
from aeron_numba.kernels import error_log as k
from aeron_numba.layout import error_log as lay
from tests.reference.error_log import ReferenceErrorLog, align8, decode_log
from tests.unit.guarded_memory import guarded, u8


def kernel_read(buffer: np.ndarray, since_ms: int = 0):
    return [
        (o.observation_count, o.first_observation_timestamp_ms, o.last_observation_timestamp_ms, o.encoded_exception)
        for o in k.ErrorLogReader.read(buffer, since_ms)
    ]


def as_text(records):
    """Reference records with the text decoded as the reader decodes it (UTF-8, invalid bytes replaced)."""
    return [(count, first, last, text.decode("utf-8", errors="replace")) for count, first, last, text in records]


# --- layout pins -----------------------------------------------------------------------------------------


def test_layout_constants_match_spec_table():
    assert (lay.LENGTH_OFFSET, lay.OBSERVATION_COUNT_OFFSET) == (0, 4)
    assert (lay.LAST_OBSERVATION_TIMESTAMP_OFFSET, lay.FIRST_OBSERVATION_TIMESTAMP_OFFSET) == (8, 16)
    assert (lay.ENCODED_ERROR_OFFSET, lay.RECORD_ALIGNMENT) == (24, 8)
    codes = {lay.ERROR_LOG_END, lay.ERROR_LOG_CORRUPT, lay.INSUFFICIENT_SPACE, lay.INVALID_TEXT_LENGTH}
    assert len(codes) == 4 and max(codes) < 0


def test_records_are_written_at_spec_offsets():
    buffer = np.zeros(256, np.uint8)
    assert not k.error_log_exists(buffer)
    text = b"java.lang.IllegalStateException: xy"  # 35 bytes: record length 59, next record at 64
    assert len(text) == 35
    assert k.record_observation(buffer, u8(text), len(text), 1000) == 0
    assert k.error_log_exists(buffer)
    assert struct.unpack_from("<iiqq", buffer.tobytes(), 0) == (59, 1, 1000, 1000)
    assert buffer[24:59].tobytes() == text and not buffer[59:].any()
    assert k.record_observation(buffer, u8(text), len(text), 2000) == 0
    assert struct.unpack_from("<iiqq", buffer.tobytes(), 0) == (59, 2, 2000, 1000)
    assert k.record_observation(buffer, u8(b"second"), 6, 3000) == 64
    assert struct.unpack_from("<iiqq", buffer.tobytes(), 64) == (30, 1, 3000, 3000)
    assert k.error_log_end_offset(buffer) == 64 + 32


# --- property test against the reference ----------------------------------------------------------------

_TEXTS = [b"", b"a", b"boom", b"x" * 7, b"x" * 8, b"\xe2\x98\x83 snow", b"long " * 20, b"boom "]


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(4, 80).map(lambda n: n * 8),
    ops=st.lists(st.tuples(st.integers(0, len(_TEXTS) - 1), st.integers(0, 50)), max_size=40),
    since_ms=st.integers(0, 2500),
)
def test_record_sequences_match_reference(capacity, ops, since_ms):
    buffer = np.zeros(capacity, np.uint8)
    ref = ReferenceErrorLog(capacity)
    now_ms = 0
    for index, dt in ops:
        now_ms += dt
        text = _TEXTS[index]
        expected = ref.record(text, now_ms)
        assert k.record(buffer, u8(text), len(text), now_ms) == expected
        if not expected:
            event("log full")
    assert buffer.tobytes() == ref.render()
    assert kernel_read(buffer) == as_text(ref.read())
    assert kernel_read(buffer, since_ms) == as_text(ref.read(since_ms))
    assert k.error_log_exists(buffer) == bool(ref.entries)
    assert k.error_log_end_offset(buffer) == ref.end_offset()


def test_full_log_still_counts_repeats():
    buffer = np.zeros(64, np.uint8)
    assert k.record(buffer, u8(b"first"), 5, 1)  # 29 -> next at 32
    assert k.record(buffer, u8(b"x" * 8), 8, 2)  # 32 + 32 = 64: exactly full
    assert not k.record(buffer, u8(b""), 0, 3)
    assert k.record_observation(buffer, u8(b"new"), 3, 3) == lay.INSUFFICIENT_SPACE
    assert k.record(buffer, u8(b"first"), 5, 4)
    assert kernel_read(buffer) == [(2, 1, 4, "first"), (1, 2, 2, "x" * 8)]


def test_text_length_is_validated():
    buffer = np.zeros(64, np.uint8)
    assert k.record_observation(buffer, u8(b"abc"), 4, 0) == lay.INVALID_TEXT_LENGTH
    assert k.record_observation(buffer, u8(b"abc"), -1, 0) == lay.INVALID_TEXT_LENGTH
    assert k.record_observation(buffer, u8(b"abcdef"), 2, 0) == 0  # a prefix of the array
    assert kernel_read(buffer) == [(1, 0, 0, "ab")]
    assert not buffer[32:].any()


def test_reader_crosses_batches():
    buffer = np.zeros(64 * 200, np.uint8)
    for i in range(150):
        assert k.record(buffer, u8(f"error {i}".encode()), len(f"error {i}"), i)
    observations = k.ErrorLogReader.read(buffer)
    assert [o.encoded_exception for o in observations] == [f"error {i}" for i in range(150)]
    assert [o.last_observation_timestamp_ms for o in k.ErrorLogReader.read(buffer, 140)] == list(range(140, 150))


def test_cursor_contract():
    buffer = np.zeros(256, np.uint8)
    for i in range(3):
        k.record(buffer, u8(b"e%d" % i), 2, i)
    out = np.zeros((2, k.ERROR_DESC_COLUMNS), np.int64)
    cursor = np.zeros(1, np.int64)
    assert k.collect_error_records(buffer, 0, cursor, out) == 2 and cursor[0] == 64
    assert list(out[:, k.ERROR_DESC_OFFSET]) == [0, 32]
    assert k.collect_error_records(buffer, 0, cursor, out) == 1 and cursor[0] == lay.ERROR_LOG_END
    for bad in (-8, 3):
        cursor[0] = bad
        assert k.collect_error_records(buffer, 0, cursor, out) == 0 and cursor[0] == lay.ERROR_LOG_END
    cursor[0] = 0
    assert k.collect_error_records(buffer, 0, cursor, np.zeros((2, 4), np.int64)) == 0


# --- garbage ---------------------------------------------------------------------------------------------

_lengths = st.one_of(
    st.sampled_from([0, 1, 23, 24, 25, 31, 32, 2**31 - 1, -1, -(2**31), 4096]), st.integers(-(2**31), 2**31 - 1)
)


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 300),
    headers=st.lists(st.tuples(_lengths, st.integers(0, 2**32 - 1)), max_size=10),
    since_ms=st.integers(-(2**63), 2**63 - 1),
)
def test_garbage_log_is_walked_safely(size, headers, since_ms):
    """Chains of plausible and impossible lengths, in buffers of any size: same answer as the obvious walk."""
    raw = bytearray(size)
    offset = 0
    for length, seed in headers:
        if offset + 4 > size:
            break
        rng = np.random.default_rng(seed)
        noise = rng.integers(0, 256, min(24, size - offset - 4), dtype=np.uint8).tobytes()
        raw[offset + 4 : offset + 4 + len(noise)] = noise
        struct.pack_into("<i", raw, offset, length)
        if not 24 <= length <= size - offset:
            break
        offset += align8(length)
    buffer = guarded(size)
    buffer[:] = np.frombuffer(bytes(raw), np.uint8)

    expected, corrupt = decode_log(bytes(raw), since_ms)
    event("corrupt" if corrupt else "clean")
    assert kernel_read(buffer, since_ms) == as_text(expected)
    assert k.ErrorLogReader.is_corrupt(buffer) == corrupt
    assert k.error_log_exists(buffer) == (size >= 4 and struct.unpack_from("<i", raw, 0)[0] != 0)
    end = k.error_log_end_offset(buffer)
    result = k.record_observation(buffer, u8(b"new error"), 9, 5)
    if corrupt:
        assert end == result == lay.ERROR_LOG_CORRUPT
    elif result == lay.INSUFFICIENT_SPACE:
        assert end + 24 + 9 > size
    else:
        assert 0 <= result <= end and buffer[result + 24 : result + 33].tobytes() == b"new error"
        assert decode_log(buffer.tobytes())[0][-1][3] == b"new error" or result < end


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(0, 2048))
def test_random_bytes_never_read_out_of_bounds(seed, size):
    buffer = guarded(size)
    buffer[:] = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    expected, corrupt = decode_log(buffer.tobytes())
    assert kernel_read(buffer) == as_text(expected)
    k.record(buffer, u8(b"x"), 1, 1)


# --- Python classes --------------------------------------------------------------------------------------


def _fail(message):
    raise RuntimeError(message)


def _wrapped():
    try:
        _fail("inner")
    except RuntimeError as exc:
        raise ValueError("outer") from exc


def test_encode_error_looks_like_a_java_stack_trace():
    try:
        _wrapped()
    except ValueError as exc:
        text = k.encode_error(exc)
    lines = text.split("\n")
    assert lines[0] == "ValueError: outer"
    assert lines[1].startswith("\tat test_error_log._wrapped(test_error_log.py:")
    assert lines[2].startswith("\tat test_error_log.test_encode_error_looks_like_a_java_stack_trace(")
    cause = lines.index("Caused by: RuntimeError: inner")
    assert lines[cause + 1].startswith("\tat test_error_log._fail(test_error_log.py:")  # innermost frame first
    assert k.encode_error("plain message") == "plain message"
    assert k.encode_error(KeyError("k")) == "KeyError: 'k'"

    class Custom(Exception):
        pass

    assert k.encode_error(Custom()).endswith("test_encode_error_looks_like_a_java_stack_trace.<locals>.Custom")


def test_distinct_error_log_dedups_same_error_from_same_place():
    buffer = np.zeros(4096, np.uint8)
    clock = [100]
    log = k.DistinctErrorLog(buffer, epoch_clock=lambda: clock[0])
    for i in range(3):
        clock[0] += 10
        try:
            _fail("same")
        except RuntimeError as exc:
            assert log.record(exc)
    clock[0] = 200
    try:
        _fail("different")
    except RuntimeError as exc:
        assert log.record(exc)
    assert log.record("just text")
    observations = k.ErrorLogReader.read(buffer)
    assert [o.observation_count for o in observations] == [3, 1, 1]
    assert (observations[0].first_observation_timestamp_ms, observations[0].last_observation_timestamp_ms) == (110, 130)
    assert observations[0].encoded_exception.startswith("RuntimeError: same\n\tat test_error_log._fail(")
    assert observations[2].encoded_exception == "just text"
    assert observations[1].encoded_exception.startswith("RuntimeError: different\n\tat ")
    assert [o.encoded_exception for o in k.ErrorLogReader.read(buffer, 131)] == [
        observations[1].encoded_exception,
        "just text",
    ]


def test_distinct_error_log_full_and_bad_buffers():
    buffer = np.zeros(64, np.uint8)
    log = k.DistinctErrorLog(buffer, epoch_clock=lambda: 1)
    assert log.record("a" * 40)
    assert not log.record("b" * 10)
    with pytest.raises(LayoutError, match="buffer_length=20"):
        k.DistinctErrorLog(np.zeros(20, np.uint8))
    with pytest.raises(LayoutError, match="np.uint8"):
        k.DistinctErrorLog(np.zeros(64, np.int64))
