"""IPC throughput through the media driver's log: one producer process (A), one consumer process (B).

A offers ``total`` messages carrying their sequence number as fast as the log accepts them (spinning on
back pressure); B polls them and takes a timestamp after the warm-up and after every window of messages.
Each window's seconds per message is one pyperf value. B checks every sequence number (compiled path) or
counts every message and samples every 1024th sequence number (Python path); the counts must match.

* ``tp-aeron-compiled``: ``loops.stream_publish`` / ``loops.stream_subscribe`` (``*_offer`` and
  ``image_poll`` with a compiled handler, fragment limit ``FRAGMENT_LIMIT``), one compiled call per window.
* ``tp-aeron-python``: ``Publication.offer`` per message, ``Subscription.poll(handler, FRAGMENT_LIMIT)`` with
  a Python handler.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import loops, stats
from benchmarks.aeron_pairs import (await_connected, offer_python, open_publication, open_subscription, status_text,
                                     yield_mask)

FRAGMENT_LIMIT = 256
SPIN_CHECK_MASK = 0xFFFF


def targets(case: dict) -> list[int]:
    """Message counts at which the consumer takes a mark: end of warm-up, then every window."""
    return [case["warmup"] + k * case["window"] for k in range(case["windows"] + 1)]


def total(case: dict) -> int:
    return targets(case)[-1]


def message_with_sequence(size: int) -> tuple[np.ndarray, memoryview]:
    """A message of ``size`` bytes and a view of its first 8 as an int64, the sequence number, which a memoryview
    writes at about half numpy's per-item cost (ours and the peers' Python loops all use this)."""
    msg = np.zeros(size, np.uint8)
    return msg, memoryview(msg).cast("q")


# ------------------------------------------------------------------------------------------- compiled
def produce_compiled(case: dict, env) -> dict:
    publication = open_publication(env, case, 0)
    await_connected(env, publication)
    env.sync(1)
    msg, _ = message_with_sequence(case["size"])
    end = total(case)
    counters = np.zeros(loops.PUB_COUNTERS, np.int64)
    sent = loops.stream_publish(
        publication.compiled(), msg, case["size"], 0, end, counters, env.timeout_ticks(), yield_mask(case),
    )
    if sent != end:
        raise RuntimeError(f"sent {sent} of {end} before the deadline")
    return {"sent": int(sent), "back_pressured": int(counters[loops.PUB_BACK_PRESSURED]),
            "admin_actions": int(counters[loops.PUB_ADMIN_ACTIONS])}


def consume_compiled(case: dict, env) -> dict:
    subscription = open_subscription(env, case, 0)
    image = await_connected(env, subscription=subscription)
    env.sync(1)
    ctx = np.zeros(loops.ECHO_CTX_WORDS, np.int64)
    marks = []
    handle = image.compiled()
    for target in targets(case):
        got = loops.stream_subscribe(
            handle, FRAGMENT_LIMIT, loops.on_stream_fragment, ctx, target, env.timeout_ticks(), yield_mask(case),
        )
        marks.append((int(got), time.perf_counter_ns()))
        if got < target:
            raise RuntimeError(f"received {got} of {target}, then {status_text(ctx[loops.CTX_STATUS])}")
    received, errors = int(ctx[loops.CTX_RECEIVED]), int(ctx[loops.CTX_ERRORS])
    if errors or received != total(case) or int(ctx[loops.CTX_NEXT_SEQ]) != total(case):
        raise AssertionError(f"received {received} of {total(case)}, {errors} out of order")
    return stats.throughput_result(marks, case["size"], case["runs"], received=received, expected=total(case),
                                   errors=errors)


# --------------------------------------------------------------------------------------------- python
def produce_python(case: dict, env) -> dict:
    publication = open_publication(env, case, 0)
    await_connected(env, publication)
    env.sync(1)
    msg, seq_view = message_with_sequence(case["size"])
    offer = publication.offer
    deadline = env.case_deadline
    for seq in range(total(case)):
        seq_view[0] = seq
        if offer(msg) < 0:
            offer_python(offer, deadline, msg)
    return {"sent": total(case)}


def consume_python(case: dict, env) -> dict:
    subscription = open_subscription(env, case, 0)
    await_connected(env, subscription=subscription)
    env.sync(1)
    state = [0, 0]  # messages, wrong sampled sequence numbers

    def on_fragment(buffer, offset, length, header):
        count = state[0]
        if count & 1023 == 0 and buffer[offset : offset + 8].view(np.int64)[0] != count:
            state[1] += 1
        state[0] = count + 1

    poll = subscription.poll
    deadline = env.case_deadline
    marks = []
    for target in targets(case):
        spins = 0
        while state[0] < target:
            if poll(on_fragment, FRAGMENT_LIMIT) == 0:
                spins += 1
                if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"received {state[0]} of {target} before the deadline")
        marks.append((state[0], time.perf_counter_ns()))
    if state[1] or state[0] != total(case):
        raise AssertionError(f"received {state[0]} of {total(case)}, {state[1]} sampled sequence numbers wrong")
    return stats.throughput_result(marks, case["size"], case["runs"], received=state[0], expected=total(case),
                                   errors=state[1])


ROLES = {
    "tp-aeron-compiled": {"A": produce_compiled, "B": consume_compiled},
    "tp-aeron-python": {"A": produce_python, "B": consume_python},
}
