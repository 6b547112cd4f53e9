"""IPC round trip through the media driver's logs: ping (worker A) and pong (worker B), 32-byte messages.

Two streams per case: A offers on stream 0 and polls stream 1, B polls stream 0 and offers each message
back on stream 1. One message is in flight; A times each round trip from before its offer to after its
handler saw the echo.

* ``rtt-aeron-compiled``: both loops in compiled code (``loops.aeron_rtt_ping`` / ``loops.aeron_echo``:
  ``term_appender.exclusive_offer`` / ``concurrent_offer`` and ``term_reader.image_poll`` with a compiled
  ``FragmentHandler``), TSC timing.
* ``rtt-aeron-python``: both loops in Python through the public API (``Publication.offer``,
  ``Subscription.poll`` with a Python handler), ``time.perf_counter_ns`` timing.
* ``rtt-aeron-python-bytes``: the same with the type most Python users send: A offers a new ``bytes`` message
  each time (built, like the array case's sequence number, before its clock starts) and B echoes each fragment
  as ``bytes`` (``buffer[offset:offset + length].tobytes()``, the cheapest conversion of the fragment's array).

Every echo carries the sequence number it was sent with; A counts mismatches (must be 0): of every echo in
the compiled case, of every 64th in the Python one.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from benchmarks import loops, stats
from benchmarks.aeron_pairs import offer_python, open_pair, status_text, yield_mask
from benchmarks.ipc_throughput import message_with_sequence

SPIN_CHECK_MASK = 0xFFFF
#: The Python ping checks the sequence number of every 64th echo (reading it costs about 70 ns, a twentieth
#: of the round trip); a lost or repeated echo stops the loop anyway, as each poll waits for exactly one.
CHECK_MASK = 63


def _total(case: dict) -> int:
    return case["warmup"] + case["runs"] * case["n"]


def _check_ctx(ctx: np.ndarray, what: str) -> None:
    if ctx[loops.CTX_ERRORS]:
        raise AssertionError(f"{what}: {int(ctx[loops.CTX_ERRORS])} messages with a wrong sequence number")


# ------------------------------------------------------------------------------------------- compiled
def ping_compiled(case: dict, env) -> dict:
    publication, _, image = open_pair(env, case, 0, 1)
    pub, img = publication.compiled(), image.compiled()
    env.sync(1)
    size = case["size"]
    src = np.zeros(max(size, 8), np.uint8)
    ctx = np.zeros(loops.ECHO_CTX_WORDS, np.int64)

    def batch(base: int, count: int) -> np.ndarray:
        lat = np.zeros(count, np.int64)
        done = loops.aeron_rtt_ping(
            pub, img, src, size, base, count, lat, loops.on_echo, ctx, env.timeout_ticks(), yield_mask(case),
        )
        if done != count:
            raise RuntimeError(f"{done} of {count} round trips, then {status_text(ctx[loops.CTX_STATUS])}")
        return stats.ticks_to_ns(lat, env.tsc_hz)

    warm = batch(0, case["warmup"])
    runs = [batch(case["warmup"] + r * case["n"], case["n"]) for r in range(case["runs"])]
    _check_ctx(ctx, "ping")
    return stats.latency_result(
        runs, warm, case["windows"], received=int(ctx[loops.CTX_RECEIVED]), expected=_total(case),
        errors=int(ctx[loops.CTX_ERRORS]), timing="rdtsc", back_pressured=int(ctx[loops.CTX_BACK_PRESSURED]),
    )


def echo_compiled(case: dict, env, total: int | None = None) -> dict:
    publication, _, image = open_pair(env, case, 1, 0)
    env.sync(1)
    total = _total(case) if total is None else total
    ctx = np.zeros(loops.ECHO_CTX_WORDS, np.int64)
    done = loops.aeron_echo(
        image.compiled(), loops.on_ping, ctx, publication.compiled(), total, env.timeout_ticks(), yield_mask(case),
    )
    if done != total:
        raise RuntimeError(f"echoed {done} of {total}, then {status_text(ctx[loops.CTX_STATUS])}")
    _check_ctx(ctx, "pong")
    return {"echoed": int(done), "back_pressured": int(ctx[loops.CTX_BACK_PRESSURED])}


# --------------------------------------------------------------------------------------------- python
def ping_python(case: dict, env, as_bytes: bool = False) -> dict:
    publication, subscription, _ = open_pair(env, case, 0, 1)
    env.sync(1)
    msg, seq_view = message_with_sequence(case["size"])
    tail = bytes(msg[8:])  # a bytes message: the sequence number's 8 bytes, then these
    echoed_seq = [-1]

    def on_fragment(buffer, offset, length, header):
        pass  # poll's return value says an echo came

    def on_checked_fragment(buffer, offset, length, header):
        echoed_seq[0] = int(buffer[offset : offset + 8].view(np.int64)[0])

    offer, poll, clock = publication.offer, subscription.poll, time.perf_counter_ns
    deadline = env.case_deadline
    errors = 0

    def batch(base: int, count: int) -> np.ndarray:
        nonlocal errors
        out = []
        append = out.append
        for i in range(count):
            seq = base + i
            if as_bytes:
                message = seq.to_bytes(8, "little") + tail
            else:
                seq_view[0] = seq
                message = msg
            checked = seq & CHECK_MASK == 0
            handler = on_checked_fragment if checked else on_fragment
            t0 = clock()
            if offer(message) < 0:
                offer_python(offer, deadline, message)
            spins = 0
            while poll(handler, 1) == 0:
                spins += 1
                if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"no echo of message {seq}")
            append(clock() - t0)
            if checked and echoed_seq[0] != seq:
                errors += 1
        return np.array(out, dtype=np.int64)

    warm = batch(0, case["warmup"])
    runs = [batch(case["warmup"] + r * case["n"], case["n"]) for r in range(case["runs"])]
    if errors:
        raise AssertionError(f"ping: {errors} echoes with a wrong sequence number")
    return stats.latency_result(
        runs, warm, case["windows"], received=_total(case), expected=_total(case), errors=errors,
        timing="perf_counter_ns",
    )


def echo_python(case: dict, env, total: int | None = None, as_bytes: bool = False) -> dict:
    publication, subscription, _ = open_pair(env, case, 1, 0)
    env.sync(1)
    total = _total(case) if total is None else total
    offer, poll = publication.offer, subscription.poll
    deadline = env.case_deadline

    def echo_array(buffer, offset, length, header):
        if offer(buffer, offset, length) < 0:
            offer_python(offer, deadline, buffer, offset, length)

    def echo_bytes(buffer, offset, length, header):
        message = buffer[offset : offset + length].tobytes()
        if offer(message) < 0:
            offer_python(offer, deadline, message)

    echo = echo_bytes if as_bytes else echo_array

    for echoed in range(total):
        spins = 0
        while poll(echo, 1) == 0:
            spins += 1
            if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                raise TimeoutError(f"echoed {echoed} of {total} before the deadline")
    return {"echoed": total}


ROLES = {
    "rtt-aeron-compiled": {"A": ping_compiled, "B": echo_compiled},
    "rtt-aeron-python": {"A": ping_python, "B": echo_python},
    "rtt-aeron-python-bytes": {"A": partial(ping_python, as_bytes=True), "B": partial(echo_python, as_bytes=True)},
}
