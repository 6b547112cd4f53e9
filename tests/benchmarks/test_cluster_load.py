"""The cluster benchmark's load generator, sustained-rate rule, ladder and failover figure, against a fake system
of known delays on a fake clock: every time here is exact, nothing depends on the machine."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from benchmarks.cluster import load as L


class FakeClock:
    def __init__(self, start: int = 1_000_000_000):
        self.now = start

    def __call__(self) -> int:
        return self.now


class FakeClient:
    """Acknowledges a put ``delay(token)`` ns after it was accepted; refuses puts while ``refusing(now)``; puts
    accepted while ``losing(now)`` are never acknowledged. ``poll`` advances the clock to the next acknowledgement
    or by its timeout, whichever is first, as a blocking wait would (at least by ``POLL_COST_NS``: time passes
    while the generator polls for nothing)."""

    POLL_COST_NS = 1_000

    def __init__(self, clock: FakeClock, delay=lambda token: 100_000, refusing=lambda now: False,
                 losing=lambda now: False, put_cost_ns: int = 0):
        self.clock, self.delay, self.refusing, self.losing = clock, delay, refusing, losing
        self.put_cost_ns = put_cost_ns
        self.due: list[tuple[int, int]] = []
        self.accepted: dict[int, int] = {}
        self.closed = False

    def put(self, key: str, value: bytes, token: int) -> bool:
        assert isinstance(key, str) and len(value) == L.VALUE_SIZE
        now = self.clock()
        self.clock.now += self.put_cost_ns
        if self.refusing(now):
            return False
        self.accepted[token] = now
        if not self.losing(now):
            heapq.heappush(self.due, (now + self.delay(token), token))
        return True

    def poll(self, on_complete, timeout_ns: int) -> int:
        assert timeout_ns >= 0
        if not self.due or self.due[0][0] > self.clock.now:
            target = self.clock.now + max(timeout_ns, self.POLL_COST_NS)
            if self.due:
                target = min(target, self.due[0][0])
            self.clock.now = max(self.clock.now, target)
        done = 0
        while self.due and self.due[0][0] <= self.clock.now:
            _, token = heapq.heappop(self.due)
            on_complete(token, True)
            done += 1
        return done

    def close(self) -> None:
        self.closed = True


def test_open_loop_schedules_at_the_rate_and_times_from_the_schedule():
    clock = FakeClock()
    client = FakeClient(clock, delay=lambda token: 100_000 + 1_000 * (token % 3))
    result = L.run_open_loop(client, L.LoadSpec(rate=1_000, count=50, warmup=5), clock)
    assert np.all(np.diff(result.scheduled_ns) == 1_000_000)  # 1 ms apart at 1 k/s
    assert np.array_equal(result.sent_ns, result.scheduled_ns)  # nothing held the sender: sent on time
    assert np.array_equal(result.latency_ns(), 100_000 + 1_000 * (np.arange(50) % 3))
    assert result.ok.all() and result.back_pressured == 0
    assert result.measured() == slice(5, 50)


def test_a_stall_shows_in_every_delayed_put_not_only_the_first():
    """Coordinated omission: while the system refuses puts (a stall of 10 ms), the puts scheduled meanwhile are sent
    when it ends and each is timed from its own scheduled time."""
    clock = FakeClock()
    start = clock.now + 1_000_000  # the first put is scheduled one period in
    stall = (start + 20_000_000, start + 30_000_000)
    client = FakeClient(clock, delay=lambda token: 50_000, refusing=lambda now: stall[0] <= now < stall[1])
    result = L.run_open_loop(client, L.LoadSpec(rate=1_000, count=60), clock)
    lat = result.latency_ns()
    stalled = (result.scheduled_ns >= stall[0]) & (result.scheduled_ns < stall[1])
    assert stalled.sum() == 10
    # Each stalled put went out at the stall's end (polls advance a 0 ns timeout, so exactly then) ...
    assert np.all(result.sent_ns[stalled] == stall[1])
    # ... and its latency is the wait since its own schedule plus the system's 50 us: 10.05 ms down to 1.05 ms.
    assert np.array_equal(lat[stalled], stall[1] - result.scheduled_ns[stalled] + 50_000)
    assert lat[stalled].max() == 10_050_000 and lat[stalled].min() == 1_050_000
    assert np.all(lat[~stalled] == 50_000)
    assert result.back_pressured > 0


def test_a_slow_sender_counts_its_lateness():
    """A put that costs the sender 1.5 periods makes every later put later still: the latency grows with it."""
    clock = FakeClock()
    client = FakeClient(clock, delay=lambda token: 10_000, put_cost_ns=1_500_000)
    result = L.run_open_loop(client, L.LoadSpec(rate=1_000, count=20), clock)
    lateness = result.sent_ns - result.scheduled_ns
    assert lateness[0] == 0 and np.all(np.diff(lateness) == 500_000)  # each put 0.5 ms later than the last
    # Acknowledged no sooner than sent + 10 us, and timed from the schedule: the lateness is in every latency.
    assert np.all(result.latency_ns() >= lateness + 10_000)
    assert result.latency_ns()[-1] >= 19 * 500_000


def test_puts_never_acknowledged_end_the_run_at_the_drain_deadline():
    clock = FakeClock()
    client = FakeClient(clock, losing=lambda now: True)
    spec = L.LoadSpec(rate=1_000, count=10, drain_s=0.5)
    result = L.run_open_loop(client, spec, clock)
    assert np.all(result.done_ns == L.NOT_DONE) and np.all(result.latency_ns() == L.NOT_DONE)
    assert clock.now - result.scheduled_ns[-1] == pytest.approx(0.5e9, abs=L.MAX_POLL_WAIT_NS)
    verdict = L.judge_sustained(result, L.P99_FLOOR_NS)
    assert not verdict.sustained and verdict.reasons == ["10 of 10 operations not acknowledged"]


def test_closed_loop_sends_each_put_when_the_last_is_acknowledged():
    clock = FakeClock()
    client = FakeClient(clock, delay=lambda token: 200_000 + token)
    result = L.run_closed_loop(client, L.LoadSpec(rate=None, count=30, warmup=3), clock)
    assert result.count == 30 and result.warmup == 3 and result.ok.all()
    assert np.array_equal(result.sent_ns[1:], result.done_ns[:-1])
    assert np.array_equal(result.latency_ns(), 200_000 + np.arange(30))


def test_closed_loop_stops_after_max_seconds():
    clock = FakeClock()
    client = FakeClient(clock, delay=lambda token: 100_000_000)  # 100 ms a put
    result = L.run_closed_loop(client, L.LoadSpec(rate=None, count=1_000, warmup=100, max_seconds=0.5), clock)
    assert result.count == 6  # 0.0, 0.1, ... 0.5 s: the sixth starts at the limit
    assert result.ok.all() and result.warmup == 0  # 100 of 1000 planned is 10 %: none of 6 (rounded down)
    result = L.run_closed_loop(client, L.LoadSpec(rate=None, count=20, warmup=10, max_seconds=0.5), clock)
    assert result.count == 6 and result.warmup == 3


@pytest.mark.parametrize("bad", [dict(count=0), dict(count=5, warmup=5), dict(count=5, rate=0.0)])
def test_a_bad_spec_names_the_value(bad):
    args = {"rate": 1_000.0, **bad}
    with pytest.raises(ValueError, match="must be"):
        L.LoadSpec(**args)


# ------------------------------------------------------------------------------------------- sustained rule
def _result(latency_ns, ok=None, rate=1_000.0) -> L.LoadResult:
    latency_ns = np.asarray(latency_ns, np.int64)
    n = latency_ns.shape[0]
    scheduled = np.arange(n, dtype=np.int64) * 1_000_000
    done = np.where(latency_ns == L.NOT_DONE, L.NOT_DONE, scheduled + latency_ns)
    ok = np.ones(n, np.bool_) if ok is None else np.asarray(ok)
    return L.LoadResult(rate, 0, scheduled, scheduled.copy(), done, ok & (done != L.NOT_DONE))


def test_flat_latency_is_sustained():
    rng = np.random.default_rng(1)
    verdict = L.judge_sustained(_result(rng.integers(200_000, 400_000, 3_000)), L.P99_FLOOR_NS)
    assert verdict.sustained and verdict.reasons == [] and verdict.acknowledged == 3_000


def test_a_growing_backlog_is_not_sustained():
    latency = 1_000_000 + np.arange(3_000) * 5_000  # a queue that grows by 5 us per put: 1 ms -> 16 ms
    verdict = L.judge_sustained(_result(latency), bound_ns=10**9)
    assert not verdict.sustained
    assert len(verdict.reasons) == 1 and verdict.reasons[0].startswith("backlog grew")
    assert L.short_reasons(verdict) == "backlog grew"


def test_growth_within_the_slack_is_noise():
    latency = np.concatenate([np.full(1_000, 200_000), np.full(1_000, 300_000), np.full(1_000, 600_000)])
    assert L.judge_sustained(_result(latency), L.P99_FLOOR_NS).sustained  # 0.2 -> 0.6 ms: under 2x + 2 ms


def test_a_p99_over_the_bound_is_not_sustained():
    latency = np.full(1_000, 100_000)
    latency[::50] = 50_000_000  # 2 % at 50 ms, spread evenly (no growth)
    verdict = L.judge_sustained(_result(latency), bound_ns=L.p99_bound_ns(1_000_000))
    assert not verdict.sustained and L.short_reasons(verdict) == "p99 over bound"
    assert verdict.p99_bound_ns == L.P99_FLOOR_NS  # 10 x 1 ms is the floor


def test_failed_puts_are_not_sustained():
    verdict = L.judge_sustained(_result(np.full(100, 100_000), ok=np.arange(100) != 7), L.P99_FLOOR_NS)
    assert not verdict.sustained and verdict.reasons == ["1 of 100 operations failed"]


def test_the_bound_follows_the_systems_own_closed_loop_p99():
    assert L.p99_bound_ns(None) == L.P99_FLOOR_NS
    assert L.p99_bound_ns(100_000) == L.P99_FLOOR_NS
    assert L.p99_bound_ns(105_000_000) == 1_050_000_000  # a batching system is judged against its own latency


# ------------------------------------------------------------------------------------------------- ladder
def _capacity_measure(capacity: float, flaky: set[float] = frozenset()):
    calls = []

    def measure(rate: float) -> L.Verdict:
        calls.append(rate)
        sustained = rate <= capacity and not (rate in flaky and calls.count(rate) == 1)
        return L.Verdict(rate, sustained, [] if sustained else ["backlog grew"], None, None, None, None, None, 0, 0)
    return measure, calls


def test_ladder_climbs_then_bisects_between_the_last_good_and_first_bad_rate():
    measure, calls = _capacity_measure(11_000)
    best, trials = L.find_sustained_rate(measure, 1_000, 2.0, 256_000, refine=2, retry=True)
    # 1k 2k 4k 8k ok, 16k fails (twice: retried), then sqrt(8k*16k)=11.3k fails (twice), sqrt(8k*11.3k)=9.5k ok
    assert calls == [1_000, 2_000, 4_000, 8_000, 16_000, 16_000, 11_314, 11_314, 9_514]
    assert best == 9_514 and [t.rate for t in trials] == calls


def test_ladder_retries_a_failed_rate_once():
    measure, calls = _capacity_measure(5_000, flaky={2_000})
    best, trials = L.find_sustained_rate(measure, 1_000, 2.0, 8_000, refine=0, retry=True)
    assert best == 4_000 and calls == [1_000, 2_000, 2_000, 4_000, 8_000, 8_000]


def test_ladder_without_retry_and_at_its_top():
    measure, _ = _capacity_measure(5_000, flaky={2_000})
    assert L.find_sustained_rate(measure, 1_000, 2.0, 8_000, refine=0, retry=False)[0] == 1_000
    measure, calls = _capacity_measure(10**9)
    assert L.find_sustained_rate(measure, 500, 2.0, 2_000, refine=2)[0] == 2_000 and calls == [500, 1_000, 2_000]
    measure, _ = _capacity_measure(100)
    assert L.find_sustained_rate(measure, 500, 2.0, 2_000, refine=2)[0] is None


def test_ladder_rates_refuse_a_bad_ladder():
    assert L.ladder_rates(1_000, 2.0, 8_000) == [1_000, 2_000, 4_000, 8_000]
    with pytest.raises(ValueError, match="factor > 1"):
        L.ladder_rates(1_000, 1.0, 8_000)


# ----------------------------------------------------------------------------------------------- failover
def test_failover_runs_from_the_kill_to_the_first_ack_of_a_put_sent_after_it():
    clock = FakeClock()
    killed = []
    outage_ns = 3_000_000_000  # no leader for 3 s after the kill

    def refusing(now):
        return bool(killed) and killed[0][1] <= now < killed[0][1] + outage_ns

    def losing(now):  # a put accepted just before the kill but not yet acknowledged dies with the leader
        return bool(killed) and now < killed[0][1]

    client = FakeClient(clock, delay=lambda token: 400_000, refusing=refusing, losing=losing)
    client.POLL_COST_NS = 100_000  # the generator polls while refused: 100 us a poll keeps the fake run short

    def kill(pgid):
        killed.append((pgid, clock()))

    spec = L.FailoverSpec(rate=1_000, kill_target=4242, kill_after_s=0.5, timeout_s=10.0)
    result = L.run_failover(client, spec, clock, kill=kill)
    assert [pgid for pgid, _ in killed] == [4242]
    kill_ns = killed[0][1]
    assert result.kill_ns == kill_ns
    assert kill_ns - result.scheduled_ns[0] == pytest.approx(0.5e9, abs=1_000_000)
    # The first put after the outage is accepted at its end and acknowledged 400 us later.
    assert L.failover_ns(result) == outage_ns + 400_000
    figures = L.failover_figures(result)
    assert figures["failover_ns"] == outage_ns + 400_000 and figures["kill_ns"] == kill_ns
    assert figures["lost_at_kill"] == 0  # nothing was in flight at the kill: each put is acknowledged in 0.4 ms
    assert 0 < figures["last_ack_before_kill_ns"] <= 1_000_000
    # It stopped there: nothing was sent after the first acknowledged put after the kill.
    assert result.sent_ns.max() <= kill_ns + outage_ns + 1_000_000
    assert figures["new_leader_event_ns"] is None  # this client sees no NewLeaderEvent
    result.extra["new_leader_event_ns"] = kill_ns + outage_ns - 50_000  # one that does (an AeronCluster's)
    assert L.failover_figures(result)["new_leader_event_ns"] == outage_ns - 50_000


def test_failover_without_a_new_leader_has_no_figure():
    clock = FakeClock()
    killed = []
    client = FakeClient(clock, refusing=lambda now: bool(killed))
    client.POLL_COST_NS = 100_000
    spec = L.FailoverSpec(rate=1_000, kill_target=1, kill_after_s=0.1, timeout_s=1.0)
    result = L.run_failover(client, spec, clock, kill=lambda pgid: killed.append(clock()))
    assert L.failover_ns(result) is None and L.failover_figures(result)["failover_ns"] is None
    assert clock.now - killed[0] == pytest.approx(1e9, abs=2_000_000)


def test_results_cross_a_process_boundary_as_dicts():
    clock = FakeClock()
    result = L.run_open_loop(FakeClient(clock), L.LoadSpec(rate=1_000, count=5), clock)
    copy = L.LoadResult.from_dict(result.to_dict())
    assert np.array_equal(copy.latency_ns(), result.latency_ns()) and copy.rate == 1_000
