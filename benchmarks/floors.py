"""The floors measured in the same run: what no protocol could beat on this machine.

* ``rtt-floor-compiled``: two compiled processes ping-pong one cache line of the control file's case page
  (A stores a value at byte 0 and spins until B stores it back at byte 8): the cost of moving a cache
  line to the other core and back, with no protocol at all.
* ``rtt-floor-python``: the same with Python loops, each message one trivial compiled store and trivial
  compiled loads (``atomics_for_python.put_int64_release`` / ``get_int64_acquire``) called as Numba functions
  normally are (each call dispatched on its argument types): the issue's Python floor, the cost of
  crossing from Python into compiled code per message. Like the client's per-message kernels, they hold
  the GIL (``@kernel(nogil=False)``, see ``jit.KERNEL_FLAGS``): the floor gets every saving our calls get.
* ``rtt-floor-python-entry``: the same calls through entry points bound once (``jit.compiled_entry``, no
  per-call dispatch), as the client calls its own kernels: the stricter floor, what a Python API over
  shared memory could at least pay.
* ``tp-memcpy``: one process copying a term-sized block (``memory.copy_bytes``, an ``llvm.memmove``):
  the memory bandwidth a stream of copies into a log can at most reach.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from aeron_numba.jit import compiled_entry
from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from benchmarks import loops, stats

SPIN_CHECK_MASK = 0xFFFF


def _line(env) -> np.ndarray:
    line = env.page()[:64]
    line[:] = 0  # both sides do this before the first barrier: the case's page starts at zero
    return line


def _total(case: dict) -> int:
    return case["warmup"] + case["runs"] * case["n"]


def ping_compiled(case: dict, env) -> dict:
    line = _line(env)
    env.sync(1)
    return stats.compiled_round_trips(
        case, env, lambda base, count, lat, timeout: loops.floor_ping(line, base, count, lat, timeout),
        "round trips before the deadline")


def pong_compiled(case: dict, env) -> dict:
    line = _line(env)
    env.sync(1)
    total = _total(case)
    done = loops.floor_pong(line, 0, total, env.timeout_ticks())
    if done != total:
        raise RuntimeError(f"echoed {done} of {total} before the deadline")
    return {"echoed": int(done)}


def _dispatched(line: np.ndarray):
    return put_int64_release, get_int64_acquire


def _entries(line: np.ndarray):
    return compiled_entry(put_int64_release, line, 0, 0), compiled_entry(get_int64_acquire, line, 0)


def ping_python(case: dict, env, bind=_dispatched) -> dict:
    line = _line(env)
    env.sync(1)
    (store, load), clock = bind(line), time.perf_counter_ns
    deadline = env.case_deadline

    def batch(base: int, count: int) -> np.ndarray:
        out = []
        append = out.append
        for i in range(count):
            value = base + i + 1
            t0 = clock()
            store(line, 0, value)
            spins = 0
            while load(line, 8) != value:
                spins += 1
                if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"no echo of value {value}")
            append(clock() - t0)
        return np.array(out, dtype=np.int64)

    warm = batch(0, case["warmup"])
    runs = [batch(case["warmup"] + r * case["n"], case["n"]) for r in range(case["runs"])]
    return stats.latency_result(runs, warm, case["windows"], received=_total(case), expected=_total(case), errors=0,
                                timing="perf_counter_ns")


def pong_python(case: dict, env, bind=_dispatched) -> dict:
    line = _line(env)
    env.sync(1)
    store, load = bind(line)
    deadline = env.case_deadline
    total = _total(case)
    for i in range(total):
        value = i + 1
        spins = 0
        while load(line, 0) != value:
            spins += 1
            if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                raise TimeoutError(f"echoed {i} of {total} before the deadline")
        store(line, 8, value)
    return {"echoed": total}


def memcpy_bandwidth(case: dict, env) -> dict:
    env.sync(1)
    block = case["size"]
    src = np.ones(block, np.uint8)
    dst = np.zeros(block, np.uint8)
    iterations = case["window"]
    loops.memcpy_loop(dst, src, 1)
    marks = []
    for _ in range(case["windows"] + 1):  # the first mark ends the warm-up window
        loops.memcpy_loop(dst, src, iterations)
        marks.append((len(marks) * iterations, time.perf_counter_ns()))
    return stats.throughput_result(marks, block, case["runs"], received=len(marks) * iterations, expected=len(marks) * iterations,
                                   errors=0)


def idle(case: dict, env) -> dict:
    env.sync(1)
    return {}


ROLES = {
    "rtt-floor-compiled": {"A": ping_compiled, "B": pong_compiled},
    "rtt-floor-python": {"A": ping_python, "B": pong_python},
    "rtt-floor-python-entry": {"A": partial(ping_python, bind=_entries), "B": partial(pong_python, bind=_entries)},
    "tp-memcpy": {"A": memcpy_bandwidth, "B": idle},
}
