"""Atomics: each operation's effect and width, and atomicity across real processes."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from aeron_numba.kernels import atomics, atomics_for_python
from aeron_numba.layout.mapped_file import MappedFile
from harness.processes import run_workers

INCREMENTS = 200_000


@numba.njit(cache=True)
def _exercise(buf):
    atomics.put_int8(buf, 0, -1)
    atomics.put_int16(buf, 2, -2)
    atomics.put_int32(buf, 4, -3)
    atomics.put_int64(buf, 8, -4)
    atomics.put_int32_release(buf, 16, 0x1234_5678)
    atomics.put_int64_release(buf, 24, 1 << 40)
    atomics.full_fence()
    atomics.acquire_fence()
    atomics.release_fence()
    return (
        atomics.get_int8(buf, 0), atomics.get_int16(buf, 2), atomics.get_int32(buf, 4),
        atomics.get_int64(buf, 8), atomics.get_int32_acquire(buf, 16), atomics.get_int64_acquire(buf, 24),
    )


def test_loads_and_stores_have_the_right_width_and_sign():
    buf = np.zeros(40, np.uint8)
    assert _exercise(buf) == (-1, -2, -3, -4, 0x1234_5678, 1 << 40)
    assert buf[1] == 0 and buf[32:].sum() == 0  # nothing written past each field
    assert buf[4:8].view(np.int32)[0] == -3 and buf[24:32].view(np.int64)[0] == 1 << 40


def test_get_and_add_and_compare_and_set():
    buf = np.zeros(16, np.uint8)
    assert atomics_for_python.get_and_add_int64(buf, 8, 5) == 0
    assert atomics_for_python.get_and_add_int64(buf, 8, -7) == 5
    assert atomics_for_python.get_int64_acquire(buf, 8) == -2
    assert atomics_for_python.get_and_add_int32(buf, 0, 3) == 0
    assert atomics_for_python.compare_and_set_int32(buf, 0, 3, 10)
    assert not atomics_for_python.compare_and_set_int32(buf, 0, 3, 11)
    assert atomics_for_python.get_int32_acquire(buf, 0) == 10
    assert atomics_for_python.compare_and_set_int64(buf, 8, -2, 1 << 50)
    assert not atomics_for_python.compare_and_set_int64(buf, 8, -2, 0)
    assert atomics_for_python.get_int64_acquire(buf, 8) == 1 << 50
    assert buf[4:8].sum() == 0  # 32-bit ops stay in their 4 bytes


@numba.njit(cache=True)
def _add_many(buf, offset, count):
    for _ in range(count):
        atomics.get_and_add_int64(buf, offset, 1)


@numba.njit(cache=True)
def _cas_increment_many(buf, offset, count):
    for _ in range(count):
        while True:
            current = atomics.get_int64_acquire(buf, offset)
            if atomics.compare_and_set_int64(buf, offset, current, current + 1):
                break


def increment_worker(path: str, use_cas: bool) -> None:
    with MappedFile.open(path) as mapped:
        buf = mapped.buffer
        if use_cas:
            _cas_increment_many(buf, 64, INCREMENTS)
        else:
            _add_many(buf, 0, INCREMENTS)
        del buf


@pytest.mark.requires_jit
def test_increments_from_several_processes_are_never_lost(shm_dir):
    path = shm_dir / "counter.dat"
    with MappedFile.create(path, 4096):
        pass
    run_workers(increment_worker, [(str(path), use_cas) for use_cas in (False, False, True, True)], timeout_s=120)
    with MappedFile.open(path) as mapped:
        values = mapped.buffer[:8].view(np.int64)[0], mapped.buffer[64:72].view(np.int64)[0]
    assert values == (2 * INCREMENTS, 2 * INCREMENTS)
