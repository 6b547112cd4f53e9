"""Loss report across processes (spec §13.1): a reader never sees a half-written entry or a count ahead of its
totals, while this process creates entries and records millions of observations in compiled code.

With ``create_entry`` publishing the count before the strings, or ``record_observation`` bumping the count
before the bytes lost or the timestamp, the reader's checks (workers_loss_report.check_row) fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.kernels.loss_report import LossEntry, LossReportReader
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition
from harness.processes import join_all, spawned, watched
from tests.stress import workers_loss_report as W

STEPS = 20_000_000
TIMEOUT_S = 120


def _expected_entry(i: int, count: int) -> LossEntry:
    session_id, stream_id, k, channel_length, source_length = W.entry_shape(i)
    return LossEntry(
        observation_count=count,
        total_bytes_lost=count * k,
        first_observation_timestamp_ms=W.BASE_TS + 1,
        last_observation_timestamp_ms=W.BASE_TS + count,
        session_id=session_id,
        stream_id=stream_id,
        channel="".join(chr(W.channel_byte(i, j)) for j in range(channel_length)),
        source="".join(chr(W.source_byte(i, j)) for j in range(source_length)),
    )


@pytest.mark.stress
def test_reader_never_sees_partial_entries_or_stale_totals(shm_dir):
    report_path, control_path = shm_dir / "loss-report.dat", shm_dir / "control.dat"
    report = MappedFile.create(report_path, W.CAPACITY)
    control_file = MappedFile.create(control_path, W.CONTROL_LENGTH)
    buffer, control = report.buffer, control_file.buffer
    state = np.zeros(1, np.int64)
    offsets = np.zeros(W.ENTRIES, np.int64)
    counts = np.zeros(W.ENTRIES, np.int64)
    W.write_schedule(buffer, state, offsets, counts, 0, 1)  # compile or load from cache before GO
    try:
        with spawned(W.reader, [(str(report_path), str(control_path), TIMEOUT_S)]) as procs:
            await_condition(lambda: get_int64_acquire(control, W.READY * 8) >= 1, TIMEOUT_S, "the reader ready",
                            processes=watched(procs))
            put_int64_release(control, W.GO * 8, 1)
            created = W.write_schedule(buffer, state, offsets, counts, STEPS, STEPS // W.ENTRIES)
            W.mark_writer_done(control)
            join_all(procs, TIMEOUT_S)

        stats = control.view(np.int64).tolist()
        assert stats[W.FAILURES] == 0
        # The reader overlapped the writer: many snapshots were taken while entries were still being added.
        assert stats[W.PARTIAL_SNAPSHOTS] >= 100, stats
        # Every step wrote one observation, except the create that found the report full (if one did).
        assert created >= 300
        assert counts[:created].sum() == (STEPS if created == W.ENTRIES else STEPS - 1)
        assert LossReportReader.read(buffer) == [_expected_entry(i, int(counts[i])) for i in range(created)]
    finally:
        del buffer, control
        report.close()
        control_file.close()
