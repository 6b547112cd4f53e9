"""The load generator of the cluster benchmark: open loop at a fixed rate, closed loop (one operation at a time),
the sustained-rate decision, the rate ladder and the failover measurement.

**Open loop.** Operation ``k`` is scheduled at ``start + k / rate``. The generator sends it when that time comes
(at once if it is late: the client was back-pressured or the loop was busy) and times its acknowledgement from
the *scheduled* time, so a stall shows in the latency of every operation it delayed instead of being hidden by a
sender that waited (coordinated omission). Nothing bounds the operations in flight but ``max_in_flight`` (a
safety net, far above any window a rate here needs); a client that refuses a put (``put`` returns False:
back pressure, no leader) gets it again on the next turn, the wait counting in its latency.

**Closed loop** ("synchronous", ``rate=None``): the next operation is sent when the previous one is acknowledged;
its latency runs from its send. This is what a caller blocked on each put sees.

**Sustained rate** (``judge_sustained``): a rate is sustained when, over the measured operations (warm-up left
out):

1. every operation was acknowledged successfully (none failed, none still outstanding at the deadline);
2. the backlog did not grow: split by scheduled time into thirds, the median latency of the last third is at
   most ``GROWTH_FACTOR`` x that of the first third plus ``GROWTH_SLACK_NS`` (a queue that grows by a constant
   amount each second shows as latency rising linearly with scheduled time; the slack keeps a 200 us -> 500 us
   wobble of a noisy machine from counting as growth);
3. the p99 stayed bounded: at most ``max(P99_FACTOR x the system's own closed-loop p99 in the same run,
   P99_FLOOR_NS)``. Relative to the system's own synchronous p99, so a system that batches (PySyncObj's default:
   ~100 ms per operation at any rate) is judged against its own latency rather than disqualified by it.

**Rate ladder** (``find_sustained_rate``): rates from ``start`` up by ``factor`` until one is not sustained (a
rate that fails is tried once more before it counts as failed: one preemption on a shared machine is not the
system's limit), then ``refine`` bisections (geometric) between the last sustained and the first failed rate.
The highest sustained rate is the answer; every trial is reported.

**Failover** (``FailoverSpec``): an open loop at a fixed rate; ``kill_after_s`` into it the generator itself
SIGKILLs the leader (its process group, or the system's own kill), so the kill time and the send and acknowledgement
times are stamped on one clock in one process, wherever the generator runs; it keeps sending until an operation
*sent after the kill* is acknowledged: the failover time runs from the kill to that acknowledgement. An operation
sent after the kill can only be committed by a new leader, so this is "leader SIGKILLed to the first acknowledged
response from the new leader" without asking the system who answered. Operations in flight at the kill may be
lost: they are counted, not waited for.

A client (``KvClient``) has three methods: ``put(key, value, token) -> bool`` queues an asynchronous put,
``poll(on_complete, timeout_ns) -> int`` delivers acknowledgements by calling ``on_complete(token, ok)`` (it may
block up to ``timeout_ns`` waiting for one; a client whose acknowledgements arrive on another thread passes the
time it saw each, ``on_complete(token, ok, at_ns)``, on the generator's clock) and ``close()``. Everything here
takes the clock as an argument so the tests drive it with a fake clock and a fake system of known delays.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol

import numpy as np

VALUE_SIZE = 64
KEY_COUNT = 10_000
MAX_IN_FLIGHT = 1_000_000
GROWTH_FACTOR = 2.0
GROWTH_SLACK_NS = 2_000_000
P99_FACTOR = 10.0
P99_FLOOR_NS = 10_000_000
#: How long an open-loop run may take past its last scheduled send before what is outstanding counts as lost.
DRAIN_S = 5.0
#: Longest single wait in ``poll`` while nothing is due, so the deadline is checked.
MAX_POLL_WAIT_NS = 10_000_000
NOT_DONE = -1


class KvClient(Protocol):
    def put(self, key: str, value: bytes, token: int) -> bool: ...

    def poll(self, on_complete: Callable[..., None], timeout_ns: int) -> int: ...

    def close(self) -> None: ...


@dataclass
class LoadSpec:
    """One load run: ``rate`` operations/s open loop (None: closed loop), ``count`` operations of which the first
    ``warmup`` are left out of the figures; a closed loop also stops after ``max_seconds``."""

    rate: float | None
    count: int
    warmup: int = 0
    max_seconds: float | None = None
    value_size: int = VALUE_SIZE
    keys: int = KEY_COUNT
    drain_s: float = DRAIN_S
    max_in_flight: int = MAX_IN_FLIGHT

    def __post_init__(self):
        if self.count < 1:
            raise ValueError(f"count={self.count} must be >= 1")
        if not 0 <= self.warmup < self.count:
            raise ValueError(f"warmup={self.warmup} must be >= 0 and < count={self.count}")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"rate={self.rate} must be > 0 (or None for a closed loop)")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FailoverSpec:
    """Open loop at ``rate``; ``kill_after_s`` in, kill the leader (``kill(kill_target)``: by default SIGKILL to
    process group ``kill_target``; a system with a kill of its own says what its target is); stop at the first
    acknowledgement of an operation sent after the kill, or ``timeout_s`` after the kill."""

    rate: float
    kill_target: int
    kill_after_s: float = 1.0
    timeout_s: float = 15.0
    value_size: int = VALUE_SIZE
    keys: int = KEY_COUNT

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadResult:
    """Per operation (index = token): scheduled, sent and acknowledged times (ns, ``NOT_DONE`` when not) and
    whether the acknowledgement was a success. For a closed loop ``scheduled_ns == sent_ns``. ``back_pressured``
    counts refused put attempts (a put refused on ten turns counts ten)."""

    rate: float | None
    warmup: int
    scheduled_ns: np.ndarray
    sent_ns: np.ndarray
    done_ns: np.ndarray
    ok: np.ndarray
    back_pressured: int = 0
    kill_ns: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def count(self) -> int:
        return int(self.scheduled_ns.shape[0])

    def measured(self) -> slice:
        return slice(self.warmup, self.count)

    def latency_ns(self) -> np.ndarray:
        """Acknowledged minus scheduled, of every operation (``NOT_DONE`` where not acknowledged)."""
        lat = self.done_ns - self.scheduled_ns
        lat[self.done_ns == NOT_DONE] = NOT_DONE
        return lat

    def to_dict(self) -> dict:
        return {"rate": self.rate, "warmup": self.warmup, "scheduled_ns": self.scheduled_ns,
                "sent_ns": self.sent_ns, "done_ns": self.done_ns, "ok": self.ok,
                "back_pressured": self.back_pressured, "kill_ns": self.kill_ns, "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "LoadResult":
        return cls(**d)


def keys_and_value(keys: int, value_size: int) -> tuple[list[str], bytes]:
    return [f"k{i}" for i in range(keys)], bytes((i * 7 + 1) & 0xFF for i in range(value_size))


def run_open_loop(client: KvClient, spec: LoadSpec, clock: Callable[[], int] = time.perf_counter_ns) -> LoadResult:
    """Run ``spec`` (``rate`` set) against ``client``; see the module docstring."""
    if spec.rate is None:
        return run_closed_loop(client, spec, clock)
    n = spec.count
    keys, value = keys_and_value(spec.keys, spec.value_size)
    nkeys = len(keys)
    period = 1e9 / spec.rate
    scheduled = np.empty(n, np.int64)
    sent = np.full(n, NOT_DONE, np.int64)
    done = np.full(n, NOT_DONE, np.int64)
    ok = np.zeros(n, np.bool_)
    state = [0]  # acknowledgements

    def on_complete(token: int, success: bool, at_ns: int | None = None) -> None:
        if 0 <= token < n and done[token] == NOT_DONE:
            done[token] = clock() if at_ns is None else at_ns
            ok[token] = success
            state[0] += 1

    start = clock() + int(period)
    scheduled[:] = start + np.rint(np.arange(n, dtype=np.float64) * period).astype(np.int64)
    last_due = int(scheduled[-1])
    deadline = last_due + int(spec.drain_s * 1e9)
    max_in_flight = spec.max_in_flight
    i = 0
    back_pressured = 0
    put, poll = client.put, client.poll
    while state[0] < n:
        now = clock()
        while i < n and scheduled[i] <= now and i - state[0] < max_in_flight:
            at = clock()
            if not put(keys[i % nkeys], value, i):
                back_pressured += 1
                break
            sent[i] = at
            i += 1
        if now > deadline:
            break
        if i < n and scheduled[i] > now:
            wait = min(int(scheduled[i]) - now, MAX_POLL_WAIT_NS)
        elif i < n:
            wait = 0  # due but refused or window full: poll without blocking, then try again
        else:
            wait = min(deadline - now, MAX_POLL_WAIT_NS)
        poll(on_complete, max(0, wait))
    return LoadResult(spec.rate, spec.warmup, scheduled, sent, done, ok, back_pressured)


def run_closed_loop(client: KvClient, spec: LoadSpec, clock: Callable[[], int] = time.perf_counter_ns) -> LoadResult:
    """One put at a time: each sent when the previous one is acknowledged (or failed); latency from its send.
    Stops after ``count`` operations or ``max_seconds``, whichever is first (at least two); stopped early, the
    warm-up shrinks in proportion (``warmup * done / count``), so a slow system's few puts are not all warm-up."""
    n = spec.count
    keys, value = keys_and_value(spec.keys, spec.value_size)
    nkeys = len(keys)
    sent = np.full(n, NOT_DONE, np.int64)
    done = np.full(n, NOT_DONE, np.int64)
    ok = np.zeros(n, np.bool_)
    current = [-1]

    def on_complete(token: int, success: bool, at_ns: int | None = None) -> None:
        if token == current[0] and done[token] == NOT_DONE:
            done[token] = clock() if at_ns is None else at_ns
            ok[token] = success

    started = clock()
    stop_at = started + int(spec.max_seconds * 1e9) if spec.max_seconds else None
    back_pressured = 0
    drain_ns = int(spec.drain_s * 1e9)
    i = 0
    while i < n:
        if stop_at is not None and i >= 2 and clock() > stop_at:
            break
        current[0] = i
        t = clock()  # a refused put's waiting counts: the caller was blocked from its first attempt
        while not client.put(keys[i % nkeys], value, i):
            back_pressured += 1
            client.poll(on_complete, 0)
            if clock() - t > drain_ns:
                raise TimeoutError(f"closed loop: put {i} refused for {spec.drain_s}s")
        sent[i] = t
        while done[i] == NOT_DONE:
            client.poll(on_complete, MAX_POLL_WAIT_NS)
            if clock() - sent[i] > drain_ns:
                break
        if done[i] == NOT_DONE:
            i += 1
            break
        i += 1
    warmup = min(spec.warmup * i // n, max(0, i - 1))
    return LoadResult(None, warmup, sent[:i].copy(), sent[:i].copy(), done[:i].copy(), ok[:i].copy(), back_pressured)


def kill_process_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_failover(client: KvClient, spec: FailoverSpec, clock: Callable[[], int] = time.perf_counter_ns,
                 kill: Callable[[int], None] = kill_process_group) -> LoadResult:
    """Open loop at ``spec.rate`` with the leader killed ``kill_after_s`` in; see the module docstring. The
    result's ``kill_ns`` is when ``kill`` was called; ``failover_ns(result)`` reads the figure."""
    keys, value = keys_and_value(spec.keys, spec.value_size)
    nkeys = len(keys)
    period = 1e9 / spec.rate
    n = int(math.ceil((spec.kill_after_s + spec.timeout_s) * spec.rate)) + 1
    scheduled = np.empty(n, np.int64)
    sent = np.full(n, NOT_DONE, np.int64)
    done = np.full(n, NOT_DONE, np.int64)
    ok = np.zeros(n, np.bool_)
    kill_ns = [None]
    first_after = [False]

    def on_complete(token: int, success: bool, at_ns: int | None = None) -> None:
        if 0 <= token < n and done[token] == NOT_DONE:
            done[token] = clock() if at_ns is None else at_ns
            ok[token] = success
            if success and kill_ns[0] is not None and sent[token] > kill_ns[0]:
                first_after[0] = True

    start = clock() + int(period)
    scheduled[:] = start + np.rint(np.arange(n, dtype=np.float64) * period).astype(np.int64)
    kill_at = start + int(spec.kill_after_s * 1e9)
    i = 0
    back_pressured = 0
    while not first_after[0]:
        now = clock()
        if kill_ns[0] is None and now >= kill_at:
            kill_ns[0] = clock()
            kill(spec.kill_target)
            now = clock()
        elif kill_ns[0] is not None and now - kill_ns[0] > spec.timeout_s * 1e9:
            break
        while i < n and scheduled[i] <= now:
            at = clock()
            if not client.put(keys[i % nkeys], value, i):
                back_pressured += 1
                break
            sent[i] = at
            i += 1
        if i >= n:
            wait = MAX_POLL_WAIT_NS
        else:
            wait = max(0, min(int(scheduled[i]) - now, MAX_POLL_WAIT_NS))
        if kill_ns[0] is None:
            wait = max(0, min(wait, kill_at - now))
        client.poll(on_complete, wait)
    return LoadResult(spec.rate, 0, scheduled[:i].copy(), sent[:i].copy(), done[:i].copy(), ok[:i].copy(),
                      back_pressured, kill_ns=kill_ns[0])


def failover_ns(result: LoadResult) -> int | None:
    """Kill to the first successful acknowledgement of an operation sent after the kill (None: none came)."""
    if result.kill_ns is None:
        return None
    after = (result.sent_ns > result.kill_ns) & result.ok & (result.done_ns != NOT_DONE)
    if not after.any():
        return None
    return int(result.done_ns[after].min() - result.kill_ns)


def failover_figures(result: LoadResult) -> dict:
    """The failover figure and what happened around it: operations sent before the kill and never acknowledged
    (lost with the leader or failed), the last acknowledgement before the kill."""
    f = failover_ns(result)
    kill = result.kill_ns
    before = result.sent_ns <= kill if kill is not None else np.zeros(result.count, np.bool_)
    lost = int(np.count_nonzero(before & ~result.ok))
    acked_before = result.done_ns[(result.done_ns != NOT_DONE) & result.ok & (result.done_ns <= (kill or 0))]
    new_leader = result.extra.get("new_leader_event_ns")
    return {"failover_ns": f, "kill_ns": kill, "sent": int(np.count_nonzero(result.sent_ns != NOT_DONE)),
            # kill to the client's NewLeaderEvent, what Aeron's golden run timed (None: the client has none)
            "new_leader_event_ns": None if new_leader is None or kill is None else int(new_leader - kill),
            "lost_at_kill": lost,
            "last_ack_before_kill_ns": None if acked_before.size == 0 else int(kill - acked_before.max()),
            "failed_after_kill": int(np.count_nonzero((result.sent_ns > (kill or 0)) & (result.done_ns != NOT_DONE)
                                                      & ~result.ok))}


# ---------------------------------------------------------------------------------------- sustained rate
@dataclass
class Verdict:
    rate: float | None
    sustained: bool
    reasons: list[str]
    p50_ns: int | None
    p99_ns: int | None
    p99_bound_ns: int | None
    first_third_median_ns: int | None
    last_third_median_ns: int | None
    acknowledged: int
    count: int

    def to_dict(self) -> dict:
        return asdict(self)


def short_reasons(verdict: Verdict) -> str:
    """The verdict's reasons in a few words each, for a table column."""
    words = []
    for reason in verdict.reasons:
        if "not acknowledged" in reason:
            words.append("not all acknowledged")
        elif "failed" in reason:
            words.append("puts failed")
        elif reason.startswith("p99"):
            words.append("p99 over bound")
        elif reason.startswith("backlog"):
            words.append("backlog grew")
        else:
            words.append(reason)
    return ", ".join(words)


def p99_bound_ns(closed_loop_p99_ns: float | None) -> int:
    """The p99 a sustained rate may reach: ``P99_FACTOR`` x the system's closed-loop p99, at least the floor."""
    if closed_loop_p99_ns is None:
        return P99_FLOOR_NS
    return int(max(P99_FACTOR * closed_loop_p99_ns, P99_FLOOR_NS))


def judge_sustained(result: LoadResult, bound_ns: int) -> Verdict:
    """Whether ``result`` (an open-loop run) sustained its rate; the reasons when it did not."""
    m = result.measured()
    done, ok = result.done_ns[m], result.ok[m]
    lat = result.latency_ns()[m]
    count = int(done.shape[0])
    acked = int(np.count_nonzero((done != NOT_DONE) & ok))
    reasons = []
    outstanding = int(np.count_nonzero(done == NOT_DONE))
    failed = int(np.count_nonzero((done != NOT_DONE) & ~ok))
    if outstanding:
        reasons.append(f"{outstanding} of {count} operations not acknowledged")
    if failed:
        reasons.append(f"{failed} of {count} operations failed")
    good = lat[(done != NOT_DONE) & ok]
    p50 = p99 = first = last = None
    if good.size:
        p50, p99 = int(np.percentile(good, 50)), int(np.percentile(good, 99))
        if p99 > bound_ns:
            reasons.append(f"p99 {p99 / 1e6:.2f} ms over the bound {bound_ns / 1e6:.2f} ms")
    if count >= 3 and not outstanding:
        thirds = np.array_split(lat, 3)
        first, last = int(np.median(thirds[0])), int(np.median(thirds[2]))
        if last > GROWTH_FACTOR * first + GROWTH_SLACK_NS:
            reasons.append(f"backlog grew: median latency {first / 1e6:.2f} ms in the first third, "
                           f"{last / 1e6:.2f} ms in the last")
    return Verdict(result.rate, not reasons, reasons, p50, p99, bound_ns, first, last, acked, count)


def ladder_rates(start: float, factor: float, max_rate: float) -> list[float]:
    """The ladder's climbing rates: ``start``, ``start * factor``, ... up to ``max_rate`` (rounded)."""
    if start <= 0 or factor <= 1 or max_rate < start:
        raise ValueError(f"ladder start={start}, factor={factor}, max_rate={max_rate}: need 0 < start <= max_rate "
                         f"and factor > 1")
    rates, rate = [], float(start)
    while rate <= max_rate * (1 + 1e-9):
        rates.append(float(round(rate)))
        rate *= factor
    return rates


def find_sustained_rate(measure: Callable[[float], Verdict], start: float, factor: float, max_rate: float,
                        refine: int = 2, retry: bool = True) -> tuple[float | None, list[Verdict]]:
    """The highest sustained rate by the ladder of the module docstring; ``measure(rate)`` runs one trial.
    Returns ``(rate or None when even ``start`` failed, every trial in order)``."""
    trials: list[Verdict] = []

    def sustained(rate: float) -> bool:
        verdict = measure(rate)
        trials.append(verdict)
        if not verdict.sustained and retry:
            verdict = measure(rate)
            trials.append(verdict)
        return verdict.sustained

    good = bad = None
    for rate in ladder_rates(start, factor, max_rate):
        if sustained(rate):
            good = rate
        else:
            bad = rate
            break
    for _ in range(refine):
        if good is None or bad is None or bad / good < 1.05:
            break
        mid = float(round(math.sqrt(good * bad)))
        if sustained(mid):
            good = mid
        else:
            bad = mid
    return good, trials
