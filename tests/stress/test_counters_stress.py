"""Counters across processes (spec §9): exact get-and-add totals, and no reader ever sees a torn record.

Three adder processes hammer two counters in one /dev/shm file while this process (the driver's part)
allocates and frees churn counters with a short reuse timeout, and a reader process walks the counters
over and over, checking that every ALLOCATED churn counter has one generation's whole label and key.

Only the reuse timeout stops a reader's copy from mixing two generations of one id (free + reuse while it
copies), so the reader trusts only calls shorter than half the timeout. Checking happens in compiled code
in a tight loop: with the kernel's ALLOCATED store moved before the label writes, this test fails.
"""

from __future__ import annotations

import random
import time

import pytest

from aeron_numba.kernels import counters as C
from aeron_numba.layout.counters import MAX_LABEL_LENGTH
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import await_condition
from harness.processes import join_all, spawned, watched
from tests.stress import workers_counters as W

ADDERS = 3
ITERATIONS = 2_000_000
REUSE_TIMEOUT_MS = 20
MIN_CHURN_S = 2.0
TARGET_LIVE_CHURN = 30
TIMEOUT_S = 90


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.stress
def test_adders_exact_and_reader_never_sees_torn_labels(shm_dir):
    assert W.MAX_TRUSTED_CALL_S * 1000 < REUSE_TIMEOUT_MS / 2
    assert W.churn_label(42, 30) == "churn g=00000042 L=030 qqqqqqq"
    path = shm_dir / "counters.dat"
    mapped = MappedFile.create(path, W.FILE_LENGTH)
    metadata, values = mapped.buffer[: W.METADATA_BYTES], mapped.buffer[W.METADATA_BYTES :]
    manager = C.CountersManager(metadata, values, free_to_reuse_timeout_ms=REUSE_TIMEOUT_MS, epoch_clock=_epoch_ms)
    for expected_id, label in enumerate(W.CONTROL_LABELS + ["hot shared", "hot weighted"]):
        assert manager.allocate(label, 1) == expected_id

    rng = random.Random(1234)
    live: dict[int, tuple[int, int]] = {}  # counter id -> (generation, label length)
    ever_freed: set[int] = set()
    generation = allocations = reuses = frees = fulls = 0
    args = [(str(path), w + 1, ITERATIONS, TIMEOUT_S) for w in range(ADDERS)]
    with spawned(W.adder, args) as adders, spawned(W.reader, [(str(path), TIMEOUT_S)]) as readers:
        await_condition(lambda: manager.get_counter_value(W.READY) == ADDERS + 1, TIMEOUT_S, "all workers ready",
                        processes=watched(adders + readers))
        manager.set_counter_value(W.GO, 1)
        start = time.monotonic()
        while manager.get_counter_value(W.ADDERS_DONE) < ADDERS or time.monotonic() - start < MIN_CHURN_S:
            assert time.monotonic() - start < TIMEOUT_S, "adders did not finish"
            assert all(p.is_alive() or p.exitcode == 0 for p in adders + readers), "a worker died"
            # Keep ~TARGET_LIVE_CHURN counters for the reader to check; the other churn ids wait out their
            # reuse deadline, so allocation spins on CountersFullError until one becomes reusable.
            if len(live) >= TARGET_LIVE_CHURN:
                counter_id = rng.choice(sorted(live))
                manager.free(counter_id)
                del live[counter_id]
                ever_freed.add(counter_id)
                frees += 1
                continue
            generation += 1
            length = rng.randint(25, 420)
            try:
                counter_id = manager.allocate(
                    W.churn_label(generation, length), W.CHURN_TYPE_ID, W.churn_key(generation, length)
                )
            except C.CountersFullError:
                fulls += 1
                continue
            assert counter_id >= W.FIRST_CHURN_ID
            reuses += counter_id in ever_freed
            allocations += 1
            live[counter_id] = (generation, length)
        manager.set_counter_value(W.STOP, 1)
        join_all(adders + readers, TIMEOUT_S)

    assert manager.get_counter_value(W.HOT_SHARED) == ADDERS * ITERATIONS
    assert manager.get_counter_value(W.HOT_WEIGHTED) == ITERATIONS * sum(range(1, ADDERS + 1))
    checked = manager.get_counter_value(W.READER_CHECKED)
    truncated = manager.get_counter_value(W.READER_TRUNCATED)
    skipped = manager.get_counter_value(W.READER_SKIPPED_CALLS)
    assert reuses > 20 and frees > 100, (allocations, reuses, frees, fulls)
    assert checked > 1000 and truncated > 0, (checked, truncated, skipped)

    # After the storm the counters hold exactly the live set, labels and keys whole.
    seen = {c.counter_id: c for c in manager.counters() if c.counter_id >= W.FIRST_CHURN_ID}
    assert sorted(seen) == sorted(live)
    for counter_id, (gen, length) in live.items():
        assert seen[counter_id].label == W.churn_label(gen, length)[:MAX_LABEL_LENGTH]
        assert seen[counter_id].key == W.churn_key(gen, length)
    del metadata, values, manager, seen
    mapped.close()
