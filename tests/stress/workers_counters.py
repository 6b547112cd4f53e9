"""Worker processes for the counters stress test: adders (get-and-add) and a reader checking every label.

The file holds the metadata section followed by the values section. The test process allocates the
control counters (ids 0-6) and the two hot counters (7, 8) before any churn, so every process knows their
ids; churn counters come and go from id 9 up.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from aeron_numba.kernels import counters as C
from aeron_numba.layout.counters import COUNTER_LENGTH, MAX_KEY_LENGTH, MAX_LABEL_LENGTH, METADATA_LENGTH
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition

CAPACITY = 64
METADATA_BYTES = CAPACITY * METADATA_LENGTH
FILE_LENGTH = CAPACITY * (METADATA_LENGTH + COUNTER_LENGTH)

# Control counter ids (allocated by the test process before any churn).
READY, GO, STOP, ADDERS_DONE, READER_CHECKED, READER_TRUNCATED, READER_SKIPPED_CALLS = range(7)
HOT_SHARED, HOT_WEIGHTED = 7, 8
CONTROL_LABELS = ["ready", "go", "stop", "adders done", "reader checked", "reader truncated", "reader skipped"]
FIRST_CHURN_ID = 9

CHURN_TYPE_ID = 1001
# A reader call that took longer than this may have overlapped a free + reuse of the same id, which only
# the reuse timeout excludes; such calls are not trusted (counted instead). Must be < the reuse timeout / 2.
MAX_TRUSTED_CALL_S = 0.005
SNAPSHOTS_PER_CALL = 100

# Churn label: "churn g=%08d L=%03d " then the letter 'a' + g % 26 up to L chars (over 380 gets truncated).
_PREFIX = np.frombuffer(b"churn g=", dtype=np.uint8).copy()
HEADER_LENGTH = 23
MAX_CHURN_LABEL = 999

# check_snapshots stats columns and failure kinds.
CHECKED, TRUNCATED, FAILURES, FAIL_ID, FAIL_KIND, FAIL_LABEL_LENGTH, STATS_LENGTH = range(7)
BAD_TYPE, BAD_HEADER, BAD_LENGTH, BAD_LABEL, BAD_KEY = range(1, 6)


@numba.njit(cache=True)
def _put_digits(dst, offset, value, width):
    for i in range(width - 1, -1, -1):
        dst[offset + i] = 48 + value % 10
        value //= 10


@numba.njit(cache=True)
def fill_churn_label(dst, generation, length):
    """Write the whole (untruncated) label into ``dst`` (>= MAX_CHURN_LABEL bytes); returns ``length``."""
    dst[:8] = _PREFIX
    _put_digits(dst, 8, generation, 8)
    dst[16] = 32
    dst[17] = 76  # 'L'
    dst[18] = 61  # '='
    _put_digits(dst, 19, length, 3)
    dst[22] = 32
    dst[HEADER_LENGTH:length] = 97 + generation % 26
    return length


@numba.njit(cache=True)
def fill_churn_key(dst, generation, length):
    """i64 generation, i32 length (little-endian), then the byte generation % 251 up to 112 bytes."""
    for i in range(8):
        dst[i] = (generation >> (8 * i)) & 0xFF
    for i in range(4):
        dst[8 + i] = (length >> (8 * i)) & 0xFF
    dst[12:MAX_KEY_LENGTH] = generation % 251


def churn_label(generation: int, length: int) -> str:
    buf = np.zeros(MAX_CHURN_LABEL, np.uint8)
    return buf[: fill_churn_label(buf, generation, length)].tobytes().decode("ascii")


def churn_key(generation: int, length: int) -> bytes:
    buf = np.zeros(MAX_KEY_LENGTH, np.uint8)
    fill_churn_key(buf, generation, length)
    return buf.tobytes()


@numba.njit(cache=True)
def _parse_digits(label, offset, width):
    value = 0
    for i in range(offset, offset + width):
        if label[i] < 48 or label[i] > 57:
            return -1
        value = value * 10 + label[i] - 48
    return value


@numba.njit(cache=True)
def check_churn_row(type_id, label, label_length, key, label_scratch, key_scratch):
    """0 if the row is one generation's whole label and key, else a BAD_* kind."""
    if type_id != CHURN_TYPE_ID:
        return BAD_TYPE
    if label_length < HEADER_LENGTH:
        return BAD_HEADER
    generation = _parse_digits(label, 8, 8)
    length = _parse_digits(label, 19, 3)
    if generation < 0 or length < HEADER_LENGTH:
        return BAD_HEADER
    fill_churn_label(label_scratch, generation, length)
    if label_length != min(length, MAX_LABEL_LENGTH):
        return BAD_LENGTH
    for i in range(label_length):
        if label[i] != label_scratch[i]:
            return BAD_LABEL
    fill_churn_key(key_scratch, generation, length)
    for i in range(MAX_KEY_LENGTH):
        if key[i] != key_scratch[i]:
            return BAD_KEY
    return 0


@numba.njit(cache=True)
def check_snapshots(metadata, values, snapshots, desc, keys, labels, stats, fail_label):
    """Walk the counters ``snapshots`` times, checking every churn row in compiled code (a tight loop
    makes a reader copy overlapping a writer's unpublished record as likely as possible)."""
    label_scratch = np.zeros(MAX_CHURN_LABEL, np.uint8)
    key_scratch = np.zeros(MAX_KEY_LENGTH, np.uint8)
    for _ in range(snapshots):
        n = C.collect_counters(metadata, values, 0, desc, keys, labels)
        for row in range(n):
            if desc[row, C.COUNTER_DESC_ID] < FIRST_CHURN_ID:
                continue
            label_length = desc[row, C.COUNTER_DESC_LABEL_LENGTH]
            kind = check_churn_row(
                desc[row, C.COUNTER_DESC_TYPE_ID], labels[row], label_length, keys[row], label_scratch, key_scratch
            )
            if kind != 0:
                if stats[FAILURES] == 0:
                    stats[FAIL_ID] = desc[row, C.COUNTER_DESC_ID]
                    stats[FAIL_KIND] = kind
                    stats[FAIL_LABEL_LENGTH] = label_length
                    fail_label[:label_length] = labels[row, :label_length]
                stats[FAILURES] += 1
            else:
                stats[CHECKED] += 1
                if label_length == MAX_LABEL_LENGTH:
                    stats[TRUNCATED] += 1


def open_views(path: str):
    mapped = MappedFile.open(path, FILE_LENGTH)
    return mapped, mapped.buffer[:METADATA_BYTES], mapped.buffer[METADATA_BYTES:FILE_LENGTH]


def await_value(values: np.ndarray, counter_id: int, minimum: int, timeout_s: float) -> None:
    """Spin (yielding the CPU: a sleep of 0) until the counter reaches ``minimum``; raise after ``timeout_s``."""
    await_condition(lambda: C.get_counter_value(values, counter_id) >= minimum, timeout_s,
                    f"counter {counter_id} >= {minimum}", poll_interval_s=0.0, max_poll_interval_s=0.0)


@numba.njit(cache=True)
def add_loop(values, shared_id, weighted_id, weight, iterations):
    for _ in range(iterations):
        C.get_and_add_counter_value(values, shared_id, 1)
        C.get_and_add_counter_value(values, weighted_id, weight)


def adder(path: str, weight: int, iterations: int, timeout_s: float) -> None:
    mapped, metadata, values = open_views(path)
    try:
        add_loop(values, HOT_SHARED, HOT_WEIGHTED, weight, 0)  # compile or load from cache before "ready"
        C.get_and_add_counter_value(values, READY, 1)
        await_value(values, GO, 1, timeout_s)
        add_loop(values, HOT_SHARED, HOT_WEIGHTED, weight, iterations)
        C.get_and_add_counter_value(values, ADDERS_DONE, 1)
    finally:
        del metadata, values
        mapped.close()


def reader(path: str, timeout_s: float) -> None:
    """Check snapshots until STOP; fail on any torn row seen in a trusted (short enough) call."""
    mapped, metadata, values = open_views(path)
    desc = np.zeros((CAPACITY, C.COUNTER_DESC_COLUMNS), np.int64)
    keys = np.zeros((CAPACITY, MAX_KEY_LENGTH), np.uint8)
    labels = np.zeros((CAPACITY, MAX_LABEL_LENGTH), np.uint8)
    stats = np.zeros(STATS_LENGTH, np.int64)
    fail_label = np.zeros(MAX_LABEL_LENGTH, np.uint8)
    try:
        check_snapshots(metadata, values, 1, desc, keys, labels, stats, fail_label)  # compile / load cache
        C.get_and_add_counter_value(values, READY, 1)
        await_value(values, GO, 1, timeout_s)
        checked = truncated = skipped = 0
        deadline = time.monotonic() + timeout_s
        while C.get_counter_value(values, STOP) == 0:
            assert time.monotonic() < deadline, "reader: no stop signal before the deadline"
            stats[:] = 0
            start = time.monotonic()
            check_snapshots(metadata, values, SNAPSHOTS_PER_CALL, desc, keys, labels, stats, fail_label)
            if time.monotonic() - start > MAX_TRUSTED_CALL_S:
                skipped += 1
                continue
            assert stats[FAILURES] == 0, (
                f"{stats[FAILURES]} torn rows; first: counter {stats[FAIL_ID]} kind {stats[FAIL_KIND]}"
                f" label {fail_label[: stats[FAIL_LABEL_LENGTH]].tobytes()!r}"
            )
            checked += int(stats[CHECKED])
            truncated += int(stats[TRUNCATED])
        C.set_counter_value(values, READER_CHECKED, checked)
        C.set_counter_value(values, READER_TRUNCATED, truncated)
        C.set_counter_value(values, READER_SKIPPED_CALLS, skipped)
    finally:
        del metadata, values
        mapped.close()
