"""One transmitter process sending fast into a 4 KiB broadcast buffer, three receiver processes (§8).

One receiver polls flat out with a compiled handler; two are deliberately slow (Python paths with pauses)
so they are lapped again and again. Every delivered message must be intact (regenerated from its header),
sequence numbers strictly increasing per receiver, the slow receivers must count laps and keep delivering
after them, and every receiver must get one of the END messages sent after the data.
"""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.kernels.atomics_for_python import get_int64_acquire
from aeron_numba.layout import broadcast as L
from aeron_numba.layout.mapped_file import MappedFile
from harness.processes import join_all, spawned
from tests.stress import workers_broadcast as W

TIMEOUT_S = 60
FIELDS = ("ack", "delivered", "errors", "laps", "delivered_after_first_lap", "last_seq", "corrupt", "recoveries")


@pytest.fixture(scope="module", autouse=True)
def warm_up():
    """Compile what the workers run here first, so the spawned processes only load it from the cache."""
    W.warm_up()


def results(control: np.ndarray, index: int) -> dict:
    block = W.RECEIVER_BLOCK * (index + 1)
    slots = (W.ACK, W.DELIVERED, W.ERRORS, W.LAPS, W.DELIVERED_AFTER_FIRST_LAP, W.LAST_SEQ, W.CORRUPT, W.RECOVERIES)
    return {name: get_int64_acquire(control, block + slot) for name, slot in zip(FIELDS, slots)}


@pytest.mark.stress
def test_slow_receivers_are_lapped_recover_and_never_see_a_torn_message(shm_dir):
    bc_path, control_path = shm_dir / "to-clients.bc", shm_dir / "control.dat"
    bc_file = MappedFile.create(bc_path, W.CAPACITY + L.TRAILER_LENGTH)
    control_file = MappedFile.create(control_path, W.CONTROL_LENGTH)
    control = control_file.buffer
    paths = (str(bc_path), str(control_path))
    with spawned(W.fast_receiver, [(*paths, 0, TIMEOUT_S)]) as fast, spawned(
        W.slow_receiver, [(*paths, 1, TIMEOUT_S, 8, 2e-3), (*paths, 2, TIMEOUT_S, 1, 5e-4)]
    ) as slow, spawned(W.transmitter, [(*paths, 3, TIMEOUT_S)]) as transmitter:
        join_all(transmitter + fast + slow, TIMEOUT_S)

    sent = get_int64_acquire(control, W.TRANSMITTER_SENT)
    assert sent > W.DATA_MESSAGES
    receivers = [results(control, r) for r in range(3)]
    for r, got in enumerate(receivers):
        assert got["ack"] == 1, f"receiver {r} never received END: {got}"
        assert got["errors"] == 0 and got["corrupt"] == 0, f"receiver {r} saw a bad message: {got}"
        assert W.DATA_MESSAGES <= got["last_seq"] < sent, f"receiver {r}: {got}"
        assert 0 < got["delivered"] <= sent
    for r in (1, 2):
        got = receivers[r]
        assert got["laps"] > 0, f"slow receiver {r} was never lapped: {got}"
        assert got["delivered_after_first_lap"] > 0, f"slow receiver {r} did not recover: {got}"
        assert got["recoveries"] >= 2, f"slow receiver {r} did not deliver data again after laps: {got}"
        assert got["delivered"] < W.DATA_MESSAGES  # it really missed messages
    del control
    bc_file.close()
    control_file.close()
