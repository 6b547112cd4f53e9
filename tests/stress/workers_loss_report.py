"""Loss report stress: the writer's schedule (run by the test process) and a reader process checking snapshots.

Entry ``i`` is fully determined by ``i``: session ``i``, stream ``3i + 1``, channel and source lengths and
bytes from a hash, ``k_i`` bytes lost per observation. Its first observation (the create) and every later one
lose ``k_i`` bytes, and the observation that makes the count ``n`` stamps ``BASE_TS + n``. So a reader that
sees count ``n`` must also see ``total >= n * k_i`` (a multiple of ``k_i``) and ``last >= BASE_TS + n``,
whole strings, and entries at the offsets their lengths imply.

Control file (int64 slots): READY, GO, WRITER_DONE, then the reader's statistics.
"""

from __future__ import annotations

import sys
import time

import numba
import numpy as np

from aeron_numba.kernels import atomics
from aeron_numba.kernels import loss_report as LR
from aeron_numba.kernels.atomics_for_python import get_and_add_int64, get_int64_acquire, put_int64_release
from aeron_numba.kernels.loss_report import aligned_entry_length
from aeron_numba.layout.loss_report import LOSS_REPORT_END
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition
from tests.stress.stress_support import mix32

ENTRIES = 400
CAPACITY = 64 * 1024  # about 430 average entries: the last creates may find the report full
MAX_CHANNEL = 60
MAX_SOURCE = 30
BASE_TS = 1_700_000_000_000

READY, GO, WRITER_DONE, SNAPSHOTS, PARTIAL_SNAPSHOTS, ROWS_CHECKED, FAILURES, FAIL_KIND, FAIL_ENTRY = range(9)
CONTROL_SLOTS = 16
CONTROL_LENGTH = CONTROL_SLOTS * 8
BAD_STATUS, BAD_SHRINK, BAD_OFFSET, BAD_IDS, BAD_LENGTHS, BAD_CHANNEL, BAD_SOURCE, BAD_COUNT, BAD_TOTAL, BAD_FIRST, BAD_LAST = range(1, 12)


@numba.njit(cache=True)
def entry_shape(i):
    """(session id, stream id, bytes lost per observation, channel length, source length) of entry ``i``."""
    return i, 3 * i + 1, 1 + i % 97, mix32(i, 1) % (MAX_CHANNEL + 1), mix32(i, 2) % (MAX_SOURCE + 1)


@numba.njit(cache=True)
def channel_byte(i, j):
    return 97 + (i + j) % 26


@numba.njit(cache=True)
def source_byte(i, j):
    return 65 + (7 * i + j) % 26


@numba.njit(cache=True)
def write_schedule(report, state, offsets, counts, steps, create_every):
    """Create entries every ``create_every`` steps (until ENTRIES or full) and record on them otherwise.

    ``offsets`` / ``counts`` are the writer's ledger. Returns the number of entries created.
    """
    channel = np.zeros(MAX_CHANNEL, np.uint8)
    source = np.zeros(MAX_SOURCE, np.uint8)
    created = 0
    full = False
    for step in range(steps):
        if not full and created < ENTRIES and step % create_every == 0:
            session_id, stream_id, k, channel_length, source_length = entry_shape(created)
            for j in range(channel_length):
                channel[j] = channel_byte(created, j)
            for j in range(source_length):
                source[j] = source_byte(created, j)
            offset = LR.create_entry(
                report, state, k, BASE_TS + 1, session_id, stream_id, channel, channel_length, source, source_length
            )
            if offset < 0:
                full = True
            else:
                offsets[created] = offset
                counts[created] = 1
                created += 1
        elif created > 0:
            i = (step * 2654435761) % created
            n = counts[i] + 1
            LR.record_observation(report, offsets[i], entry_shape(i)[2], BASE_TS + n)
            counts[i] = n
    return created


@numba.njit(cache=True)
def _fail(control, kind, entry):
    if atomics.get_and_add_int64(control, FAILURES * 8, 1) == 0:
        atomics.put_int64(control, FAIL_KIND * 8, kind)
        atomics.put_int64(control, FAIL_ENTRY * 8, entry)


@numba.njit(cache=True)
def check_row(buffer, d, i):
    """0 if descriptor row ``d`` is a whole, consistent entry ``i``, else a BAD_* kind."""
    session_id, stream_id, k, channel_length, source_length = entry_shape(i)
    if d[LR.LOSS_DESC_SESSION_ID] != session_id or d[LR.LOSS_DESC_STREAM_ID] != stream_id:
        return BAD_IDS
    if d[LR.LOSS_DESC_CHANNEL_LENGTH] != channel_length or d[LR.LOSS_DESC_SOURCE_LENGTH] != source_length:
        return BAD_LENGTHS
    start = d[LR.LOSS_DESC_CHANNEL_OFFSET]
    for j in range(channel_length):
        if buffer[start + j] != channel_byte(i, j):
            return BAD_CHANNEL
    start = d[LR.LOSS_DESC_SOURCE_OFFSET]
    for j in range(source_length):
        if buffer[start + j] != source_byte(i, j):
            return BAD_SOURCE
    n = d[LR.LOSS_DESC_OBSERVATION_COUNT]
    if n < 1:
        return BAD_COUNT
    total = d[LR.LOSS_DESC_TOTAL_BYTES_LOST]
    if total < n * k or total % k != 0:
        return BAD_TOTAL
    if d[LR.LOSS_DESC_FIRST_TIMESTAMP] != BASE_TS + 1:
        return BAD_FIRST
    if d[LR.LOSS_DESC_LAST_TIMESTAMP] < BASE_TS + n:
        return BAD_LAST
    return 0


@numba.njit(cache=True)
def check_snapshots(buffer, control, out, cursor, seen, max_snapshots):
    """Walk the report up to ``max_snapshots`` times, checking every row; returns True once a snapshot taken
    after WRITER_DONE was checked (the final, complete one). ``seen[0]`` carries the entry count between calls."""
    for _ in range(max_snapshots):
        done = atomics.get_int64_acquire(control, WRITER_DONE * 8)
        cursor[0] = 0
        n = LR.collect_loss_entries(buffer, cursor, out)
        if cursor[0] != LOSS_REPORT_END:
            _fail(control, BAD_STATUS, n)
        if n < seen[0]:
            _fail(control, BAD_SHRINK, n)
        seen[0] = n
        expected_offset = 0
        for i in range(n):
            if out[i, LR.LOSS_DESC_OFFSET] != expected_offset:
                _fail(control, BAD_OFFSET, i)
                break
            kind = check_row(buffer, out[i], i)
            if kind != 0:
                _fail(control, kind, i)
                break
            channel_length, source_length = entry_shape(i)[3], entry_shape(i)[4]
            expected_offset += aligned_entry_length(channel_length, source_length)
        atomics.get_and_add_int64(control, ROWS_CHECKED * 8, n)
        atomics.get_and_add_int64(control, SNAPSHOTS * 8, 1)
        if done == 0:
            atomics.get_and_add_int64(control, PARTIAL_SNAPSHOTS * 8, 1)
        else:
            return True
    return False


def reader(report_path: str, control_path: str, timeout_s: float) -> None:
    report = MappedFile.open(report_path)
    control_file = MappedFile.open(control_path)
    buffer, control = report.buffer, control_file.buffer
    out = np.zeros((ENTRIES + 1, LR.LOSS_DESC_COLUMNS), np.int64)
    cursor = np.zeros(1, np.int64)
    seen = np.zeros(1, np.int64)
    try:
        check_snapshots(buffer, control, out, cursor, seen, 0)  # compile or load from cache before READY
        get_and_add_int64(control, READY * 8, 1)
        deadline = time.monotonic() + timeout_s
        # Spinning (a sleep of 0 yields the CPU) keeps the reader on the writer's heels.
        await_condition(lambda: get_int64_acquire(control, GO * 8) != 0, timeout_s, "reader: GO",
                        poll_interval_s=0.0, max_poll_interval_s=0.0)
        await_condition(lambda: check_snapshots(buffer, control, out, cursor, seen, 1000),
                        max(0.0, deadline - time.monotonic()), "reader: the writer done", poll_interval_s=0.0,
                        max_poll_interval_s=0.0)
        failures = int(get_int64_acquire(control, FAILURES * 8))
        if failures:
            print(
                f"reader: {failures} failures, first kind={int(control[FAIL_KIND * 8:FAIL_KIND * 8 + 8].view(np.int64)[0])}"
                f" entry={int(control[FAIL_ENTRY * 8:FAIL_ENTRY * 8 + 8].view(np.int64)[0])}",
                file=sys.stderr,
            )
            sys.exit(1)
    finally:
        del buffer, control
        report.close()
        control_file.close()


def mark_writer_done(control: np.ndarray) -> None:
    put_int64_release(control, WRITER_DONE * 8, 1)
