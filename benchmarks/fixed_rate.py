"""Fixed-rate (open loop) latency, as Aeron's load rigs measure it: A sends at a set rate, B echoes.

Message ``k`` is scheduled at ``start + k / rate``; A sends it at that time (at once if it is late) and
times its echo from the *scheduled* time, so a stall shows in the latency of every message it delayed
instead of being hidden by a sender that waited (coordinated omission). The first ``warmup_fraction`` of
the messages is a warm-up. A rate is "sustained" when the last message left less than
``MAX_BEHIND_NS`` behind its schedule; otherwise the sender could not keep up and the figures say how far
behind it fell.

* ``fixed-aeron-compiled``: ``loops.aeron_fixed_rate_ping`` (TSC clock) with the compiled echo.
* ``fixed-aeron-python``: the same loop in Python through the public API with the Python echo.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import ipc_rtt, loops, stats
from benchmarks.aeron_pairs import offer_python, open_pair, status_text
from benchmarks.ipc_throughput import message_with_sequence

MAX_BEHIND_NS = 1_000_000
SPIN_CHECK_MASK = 0xFFF


def message_count(case: dict) -> int:
    return max(10, int(case["rate"] * case["seconds"]))


def _result(case: dict, lat_ns: np.ndarray, behind_ns: int, errors: int, timing: str) -> dict:
    count = lat_ns.shape[0]
    warm = int(count * case["warmup_fraction"])
    return stats.latency_result(
        [lat_ns[warm:]], lat_ns[:warm], case["windows"], received=int(count), expected=int(count), errors=errors,
        rate=case["rate"], behind_ns=int(behind_ns), sustained=bool(behind_ns < MAX_BEHIND_NS), timing=timing,
    )


def send_compiled(case: dict, env) -> dict:
    publication, _, image = open_pair(env, case, 0, 1)
    env.sync(1)
    count = message_count(case)
    size = case["size"]
    src = np.zeros(max(size, 8), np.uint8)
    ctx = np.zeros(loops.CTX_HEADER_WORDS + 2 * count, np.int64)
    ctx[loops.CTX_FR_BASE] = 0
    ctx[loops.CTX_FR_COUNT] = count
    received = loops.aeron_fixed_rate_ping(
        publication.compiled(), image.compiled(), src, size, 0, env.tsc_hz / case["rate"], loops.on_fixed_rate_echo,
        ctx, env.timeout_ticks(),
    )
    if received != count:
        raise RuntimeError(f"{received} of {count} echoes, then {status_text(ctx[loops.CTX_STATUS])}")
    if ctx[loops.CTX_ERRORS]:
        raise AssertionError(f"{int(ctx[loops.CTX_ERRORS])} echoes with an unknown sequence number")
    start = loops.CTX_HEADER_WORDS + count
    lat = stats.ticks_to_ns(ctx[start : start + count], env.tsc_hz)
    behind = int(stats.ticks_to_ns(ctx[loops.CTX_HEADER_WORDS - 1 : loops.CTX_HEADER_WORDS], env.tsc_hz)[0])
    result = _result(case, lat, behind, 0, "rdtsc")
    result["back_pressured"] = int(ctx[loops.CTX_BACK_PRESSURED])
    return result


def send_python(case: dict, env) -> dict:
    publication, subscription, _ = open_pair(env, case, 0, 1)
    env.sync(1)
    count = message_count(case)
    msg, seq_view = message_with_sequence(case["size"])
    sched = [0] * count
    lat = [0] * count
    state = [0, 0]  # echoes, errors
    clock = time.perf_counter_ns

    def on_fragment(buffer, offset, length, header):
        now = clock()
        seq = int(buffer[offset : offset + 8].view(np.int64)[0])
        if 0 <= seq < count:
            lat[seq] = now - sched[seq]
        else:
            state[1] += 1
        state[0] += 1

    offer, poll = publication.offer, subscription.poll
    deadline = env.case_deadline
    period = 1e9 / case["rate"]
    start = clock() + int(period)
    sent = 0
    behind = 0
    spins = 0
    while state[0] < count:
        if sent < count:
            due = start + int(sent * period)
            if clock() >= due:
                seq_view[0] = sent
                sched[sent] = due
                if offer(msg) < 0:
                    offer_python(offer, deadline, msg)
                if sent == count - 1:
                    behind = clock() - due
                sent += 1
        poll(on_fragment, 16)
        spins += 1
        if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
            raise TimeoutError(f"sent {sent}, {state[0]} echoes of {count} before the deadline")
    if state[1]:
        raise AssertionError(f"{state[1]} echoes with an unknown sequence number")
    return _result(case, np.array(lat, dtype=np.int64), behind, 0, "perf_counter_ns")


def echo_compiled(case: dict, env) -> dict:
    return ipc_rtt.echo_compiled(case, env, total=message_count(case))


def echo_python(case: dict, env) -> dict:
    return ipc_rtt.echo_python(case, env, total=message_count(case))


ROLES = {
    "fixed-aeron-compiled": {"A": send_compiled, "B": echo_compiled},
    "fixed-aeron-python": {"A": send_python, "B": echo_python},
}
