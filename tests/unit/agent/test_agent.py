"""Agents, runners, idle strategies, clocks and duty-cycle tracking (aeron_numba.agent)."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.agent import (
    IDLE_STRATEGY_NAMES,
    Agent,
    AgentInvoker,
    AgentRunner,
    AgentTerminationException,
    BackoffIdleStrategy,
    BusySpinIdleStrategy,
    CachedEpochClock,
    CachedNanoClock,
    CompositeAgent,
    ControllableIdleStrategy,
    DutyCycleTracker,
    IdleStrategy,
    NoOpIdleStrategy,
    SleepingIdleStrategy,
    SleepingMillisIdleStrategy,
    SystemEpochClock,
    SystemEpochNanoClock,
    SystemNanoClock,
    YieldingIdleStrategy,
    close_on_signals,
    idle_strategy_from_name,
    parse_duration_ns,
)
from aeron_numba.errors import ConfigurationError
from harness.awaiting import await_condition

TIMEOUT_S = 10.0


# ------------------------------------------------------------------------------------------ fakes
class Recorder:
    """Fake yielder/parker: records each call instead of giving the CPU away."""

    def __init__(self):
        self.calls: list[tuple] = []

    def yielder(self):
        self.calls.append(("yield",))

    def parker(self, ns):
        self.calls.append(("park", ns))


class ScriptedAgent:
    """Plays back a script of do_work results: an int is a work count, an exception instance is raised."""

    def __init__(self, name="scripted", script=(), then=0):
        self.name = name
        self.script = list(script)
        self.then = then
        self.events: list[str] = []
        self.calls = 0

    def role_name(self):
        return self.name

    def on_start(self):
        self.events.append("start")

    def do_work(self):
        self.calls += 1
        step = self.script.pop(0) if self.script else self.then
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return step()
        return step

    def on_close(self):
        self.events.append("close")


class Counter:
    def __init__(self):
        self.value = 0

    def increment(self):
        self.value += 1


def stop():
    raise AgentTerminationException("done")


# ------------------------------------------------------------------------------------ idle strategies
def test_backoff_spins_then_yields_then_parks_doubling_up_to_the_max():
    rec = Recorder()
    idle = BackoffIdleStrategy(3, 2, 1_000, 5_000, yielder=rec.yielder, parker=rec.parker)
    states = []
    for _ in range(3):
        idle.idle(0)
        states.append(idle.state)
    assert states == [BackoffIdleStrategy.SPINNING] * 3 and rec.calls == []
    idle.idle(0)
    idle.idle(0)
    assert idle.state == BackoffIdleStrategy.YIELDING and rec.calls == [("yield",), ("yield",)]
    for _ in range(5):
        idle.idle(0)
    assert idle.state == BackoffIdleStrategy.PARKING
    assert rec.calls[2:] == [("park", 1_000), ("park", 2_000), ("park", 4_000), ("park", 5_000), ("park", 5_000)]


def test_backoff_work_resets_to_spinning_and_min_park():
    rec = Recorder()
    idle = BackoffIdleStrategy(1, 1, 10, 80, yielder=rec.yielder, parker=rec.parker)
    for _ in range(5):
        idle.idle(0)
    assert rec.calls == [("yield",), ("park", 10), ("park", 20), ("park", 40)]
    idle.idle(7)
    assert (idle.state, idle.spins, idle.yields, idle.park_period_ns) == (BackoffIdleStrategy.NOT_IDLE, 0, 0, 10)
    rec.calls.clear()
    for _ in range(3):
        idle.idle(0)
    assert rec.calls == [("yield",), ("park", 10)]


def test_backoff_idle_without_work_count_always_steps():
    rec = Recorder()
    idle = BackoffIdleStrategy(0, 0, 100, 100, yielder=rec.yielder, parker=rec.parker)
    idle.idle()
    idle.idle()
    assert rec.calls == [("park", 100), ("park", 100)]


@settings(max_examples=100, deadline=None)
@given(
    max_spins=st.integers(0, 5),
    max_yields=st.integers(0, 5),
    min_park=st.integers(1, 1_000),
    factor=st.integers(1, 64),
    work=st.lists(st.integers(0, 3), max_size=60),
)
def test_backoff_matches_reference_progression(max_spins, max_yields, min_park, factor, work):
    """The actions taken equal a direct model: k-th idle step since work -> spin, yield or park(min*2^j capped)."""
    max_park = min_park * factor
    rec = Recorder()
    idle = BackoffIdleStrategy(max_spins, max_yields, min_park, max_park, yielder=rec.yielder, parker=rec.parker)
    expected = []
    steps_since_work = 0
    for count in work:
        idle.idle(count)
        if count > 0:
            steps_since_work = 0
            continue
        k = steps_since_work
        steps_since_work += 1
        if k < max_spins:
            continue
        if k < max_spins + max_yields:
            expected.append(("yield",))
        else:
            expected.append(("park", min(min_park * 2 ** (k - max_spins - max_yields), max_park)))
    assert rec.calls == expected


def test_sleeping_strategies_park_only_without_work():
    rec = Recorder()
    sleeping = SleepingIdleStrategy(2_500, parker=rec.parker)
    sleeping.idle(1)
    sleeping.idle(0)
    sleeping.idle()
    millis = SleepingMillisIdleStrategy(3, parker=rec.parker)
    millis.idle(5)
    millis.idle(0)
    assert rec.calls == [("park", 2_500), ("park", 2_500), ("park", 3_000_000)]


def test_yielding_yields_only_without_work():
    rec = Recorder()
    idle = YieldingIdleStrategy(yielder=rec.yielder)
    idle.idle(3)
    idle.idle(0)
    assert rec.calls == [("yield",)]


def test_real_sleep_and_yield_run():
    SleepingIdleStrategy(1_000).idle(0)
    YieldingIdleStrategy().idle(0)
    BackoffIdleStrategy(0, 0, 1_000, 1_000).idle(0)
    BusySpinIdleStrategy().idle(0)
    NoOpIdleStrategy().idle(0)


def test_controllable_follows_its_status_indicator():
    rec = Recorder()
    status = [ControllableIdleStrategy.NOOP]
    idle = ControllableIdleStrategy(lambda: status[0], yielder=rec.yielder, parker=rec.parker)
    for value in (
        ControllableIdleStrategy.NOOP,
        ControllableIdleStrategy.BUSY_SPIN,
        ControllableIdleStrategy.YIELD,
        ControllableIdleStrategy.PARK,
        ControllableIdleStrategy.NOT_CONTROLLED,
    ):
        status[0] = value
        idle.idle(0)
        idle.idle(1)
    assert rec.calls == [("yield",), ("park", 1_000), ("park", 1_000)]


@pytest.mark.parametrize(
    "name, cls",
    [
        ("noop", NoOpIdleStrategy),
        ("spin", BusySpinIdleStrategy),
        ("yield", YieldingIdleStrategy),
        ("sleep-ns", SleepingIdleStrategy),
        ("sleeping", SleepingIdleStrategy),
        ("sleep-ms", SleepingMillisIdleStrategy),
        ("backoff", BackoffIdleStrategy),
        ("org.agrona.concurrent.BackoffIdleStrategy", BackoffIdleStrategy),
        ("org.agrona.concurrent.BusySpinIdleStrategy", BusySpinIdleStrategy),
        ("org.agrona.concurrent.NoOpIdleStrategy", NoOpIdleStrategy),
        ("org.agrona.concurrent.YieldingIdleStrategy", YieldingIdleStrategy),
        ("org.agrona.concurrent.SleepingIdleStrategy", SleepingIdleStrategy),
        ("org.agrona.concurrent.SleepingMillisIdleStrategy", SleepingMillisIdleStrategy),
    ],
)
def test_idle_strategy_from_name(name, cls):
    strategy = idle_strategy_from_name(name)
    assert type(strategy) is cls
    assert isinstance(strategy, IdleStrategy)
    assert name in IDLE_STRATEGY_NAMES


def test_idle_strategy_aliases_are_aerons():
    assert [c.alias for c in (NoOpIdleStrategy, BusySpinIdleStrategy, YieldingIdleStrategy)] == ["noop", "spin", "yield"]
    assert (SleepingIdleStrategy.alias, SleepingMillisIdleStrategy.alias, BackoffIdleStrategy.alias) == (
        "sleep-ns",
        "sleep-ms",
        "backoff",
    )
    for alias in ("noop", "spin", "yield", "sleep-ns", "sleep-ms", "backoff"):
        assert idle_strategy_from_name(alias).alias == alias


def test_idle_strategy_defaults_are_agronas():
    backoff = idle_strategy_from_name("backoff")
    assert (backoff.max_spins, backoff.max_yields, backoff.min_park_period_ns, backoff.max_park_period_ns) == (
        10,
        5,
        1_000,
        1_000_000,
    )
    assert idle_strategy_from_name("sleep-ns").sleep_period_ns == 1_000
    assert idle_strategy_from_name("sleep-ms").sleep_period_ns == 1_000_000


def test_idle_strategy_init_args():
    backoff = idle_strategy_from_name("backoff", "2-3-10us-1ms")
    assert (backoff.max_spins, backoff.max_yields, backoff.min_park_period_ns, backoff.max_park_period_ns) == (
        2,
        3,
        10_000,
        1_000_000,
    )
    assert idle_strategy_from_name("sleep-ns", "5us").sleep_period_ns == 5_000
    assert idle_strategy_from_name("sleeping", "250").sleep_period_ns == 250
    assert idle_strategy_from_name("sleep-ms", "16ms").sleep_period_ns == 16_000_000
    assert type(idle_strategy_from_name("yield", "ignored")) is YieldingIdleStrategy
    status = Counter()
    controllable = idle_strategy_from_name("controllable", status_indicator=lambda: status.value)
    assert type(controllable) is ControllableIdleStrategy


@pytest.mark.parametrize("name", ["Backoff", "busy-spin", "sleep", "", "org.agrona.concurrent.Nope", "backof"])
def test_unknown_idle_strategy_name_is_an_error_naming_it(name):
    with pytest.raises(ConfigurationError, match=f"name={name!r}"):
        idle_strategy_from_name(name)


@pytest.mark.parametrize(
    "name, args, match",
    [
        ("backoff", "2-3-10us", "spins-yields-minPark-maxPark"),
        ("backoff", "a-3-10us-1ms", "spins-yields-minPark-maxPark"),
        ("backoff", "2-3-x-1ms", "duration='x'"),
        ("backoff", "1-1-1ms-1us", "max_park_period_ns=1000 < min_park_period_ns=1000000"),
        ("sleep-ns", "1 fortnight", "duration='1 fortnight'"),
        ("sleep-ns", "0", "sleep_period_ns=0"),
        ("controllable", None, "status_indicator"),
    ],
)
def test_bad_init_args_are_errors_naming_the_value(name, args, match):
    with pytest.raises(ConfigurationError, match=match):
        idle_strategy_from_name(name, args)


def test_constructor_validation_names_value_and_limit():
    with pytest.raises(ConfigurationError, match="max_spins=-1 < 0"):
        BackoffIdleStrategy(max_spins=-1)
    with pytest.raises(ConfigurationError, match="min_park_period_ns=0"):
        BackoffIdleStrategy(min_park_period_ns=0)
    with pytest.raises(ConfigurationError, match="sleep_period_ns=-5"):
        SleepingIdleStrategy(-5)


def test_parse_duration_ns():
    assert [parse_duration_ns(t) for t in ("7", "7ns", "7us", "7ms", "7s", " 7MS ")] == [
        7,
        7,
        7_000,
        7_000_000,
        7_000_000_000,
        7_000_000,
    ]
    with pytest.raises(ConfigurationError, match="duration='-1'"):
        parse_duration_ns("-1")


# ------------------------------------------------------------------------------------------- runner
def test_runner_counts_and_handles_each_error_and_keeps_running():
    errors = []
    counter = Counter()
    agent = ScriptedAgent(script=[1, ValueError("bad 1"), 2, KeyError("bad 2"), 0, stop])
    runner = AgentRunner(agent, NoOpIdleStrategy(), errors.append, counter)
    runner.run()
    assert [str(e) for e in errors] == ["bad 1", "'bad 2'"]
    assert counter.value == 2 and runner.error_count == 2
    assert agent.calls == 6
    assert agent.events == ["start", "close"]
    assert runner.is_closed and not runner.is_running


def test_runner_error_counter_may_be_a_callable():
    hits = []
    agent = ScriptedAgent(script=[RuntimeError("x"), stop])
    AgentRunner(agent, NoOpIdleStrategy(), lambda exc: None, lambda: hits.append(1)).run()
    assert hits == [1]


def test_runner_idles_with_each_work_count_and_after_an_error():
    seen = []

    class Spy(NoOpIdleStrategy):
        def idle(self, work_count=None):
            seen.append(work_count)

    agent = ScriptedAgent(script=[3, 0, RuntimeError("x"), 5, stop])
    AgentRunner(agent, Spy(), lambda exc: None).run()
    assert seen == [3, 0, 0, 5]


def test_runner_termination_is_clean_and_not_an_error():
    errors = []
    agent = ScriptedAgent(script=[1, stop, 99])
    runner = AgentRunner(agent, NoOpIdleStrategy(), errors.append)
    runner.run()
    assert errors == [] and agent.calls == 2 and agent.events == ["start", "close"]


def test_runner_failing_error_handler_does_not_kill_the_loop(capsys):
    def handler(exc):
        raise RuntimeError("handler broke")

    agent = ScriptedAgent(script=[ValueError("first"), ValueError("second"), stop])
    runner = AgentRunner(agent, NoOpIdleStrategy(), handler)
    runner.run()
    err = capsys.readouterr().err
    assert agent.calls == 3 and runner.error_count == 2
    assert "first" in err and "second" in err and "handler broke" in err


def test_runner_default_error_handler_prints_role_and_traceback(capsys):
    agent = ScriptedAgent(name="conductor", script=[ZeroDivisionError("boom"), stop])
    AgentRunner(agent, NoOpIdleStrategy(), None).run()
    err = capsys.readouterr().err
    assert "[conductor]" in err and "ZeroDivisionError: boom" in err


def test_runner_on_start_failure_reports_and_still_closes():
    errors = []

    class BadStart(ScriptedAgent):
        def on_start(self):
            raise OSError("cannot map")

    agent = BadStart(then=1)
    AgentRunner(agent, NoOpIdleStrategy(), errors.append).run()
    assert [str(e) for e in errors] == ["cannot map"]
    assert agent.calls == 0 and agent.events == ["close"]


def test_runner_on_close_failure_is_reported():
    errors = []

    class BadClose(ScriptedAgent):
        def on_close(self):
            raise OSError("unmap failed")

    AgentRunner(BadClose(script=[stop]), NoOpIdleStrategy(), errors.append).run()
    assert [str(e) for e in errors] == ["unmap failed"]


def test_runner_on_close_runs_when_a_base_exception_escapes():
    agent = ScriptedAgent(script=[KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        AgentRunner(agent, NoOpIdleStrategy(), None).run()
    assert agent.events == ["start", "close"]


def test_runner_close_from_another_thread_stops_the_loop():
    agent = ScriptedAgent(then=0)
    runner = AgentRunner(agent, SleepingIdleStrategy(100_000), None)
    thread = AgentRunner.start_on_thread(runner)
    await_condition(lambda: agent.calls > 3, TIMEOUT_S, "some duty cycles")
    assert runner.is_running
    runner.close(TIMEOUT_S)
    assert not thread.is_alive()
    assert agent.events == ["start", "close"] and runner.is_closed
    runner.close()  # idempotent
    assert agent.events == ["start", "close"]


def test_runner_closed_before_start_calls_on_close_once_and_run_does_nothing():
    agent = ScriptedAgent(then=1)
    runner = AgentRunner(agent, NoOpIdleStrategy(), None)
    runner.close()
    runner.run()
    assert agent.events == ["close"] and agent.calls == 0


def test_runner_request_close_before_run_starts_and_closes_without_cycles():
    agent = ScriptedAgent(then=1)
    runner = AgentRunner(agent, NoOpIdleStrategy(), None)
    runner.request_close()
    runner.run()
    assert agent.events == ["start", "close"] and agent.calls == 0


def test_runner_close_from_inside_do_work_ends_after_that_cycle():
    holder = {}

    def close_me():
        holder["runner"].close()
        return 1

    agent = ScriptedAgent(script=[1, close_me], then=1)
    runner = holder["runner"] = AgentRunner(agent, NoOpIdleStrategy(), None)
    runner.run()
    assert agent.calls == 2 and agent.events == ["start", "close"]


def test_runner_close_times_out_on_a_blocked_duty_cycle():
    release = threading.Event()
    entered = threading.Event()

    def block():
        entered.set()
        release.wait(TIMEOUT_S)
        return 0

    agent = ScriptedAgent(script=[block])
    runner = AgentRunner(agent, NoOpIdleStrategy(), None)
    AgentRunner.start_on_thread(runner)
    assert entered.wait(TIMEOUT_S)
    with pytest.raises(TimeoutError, match="'scripted' did not stop within timeout_s=0.05"):
        runner.close(0.05)
    release.set()
    runner.close(TIMEOUT_S)
    assert agent.events == ["start", "close"]


def test_runner_runs_only_once():
    release = threading.Event()
    agent = ScriptedAgent(then=lambda: release.wait(TIMEOUT_S) and 0)
    runner = AgentRunner(agent, NoOpIdleStrategy(), None)
    AgentRunner.start_on_thread(runner)
    await_condition(lambda: agent.calls >= 1, TIMEOUT_S, "first duty cycle")
    with pytest.raises(RuntimeError, match="already running"):
        runner.run()
    runner.request_close()
    release.set()
    runner.close(TIMEOUT_S)


def test_runner_signal_handler_requests_close():
    """request_close from a real signal handler (SIGUSR1 to ourselves, delivered on the main thread)."""

    def raise_signal_on_third_cycle():
        os.kill(os.getpid(), signal.SIGUSR1)
        return 0

    agent = ScriptedAgent(script=[1, 1, raise_signal_on_third_cycle], then=1)
    runner = AgentRunner(agent, NoOpIdleStrategy(), None)
    previous = close_on_signals(runner, (signal.SIGUSR1,))
    try:
        runner.run()
    finally:
        signal.signal(signal.SIGUSR1, previous[signal.SIGUSR1])
    # the handler runs within a few bytecodes of the kill: the loop stops a cycle or so later, not never
    assert 3 <= agent.calls <= 5 and agent.events == ["start", "close"]


def test_runner_records_duty_cycle_times_with_its_nano_clock():
    clock = CachedNanoClock(0)

    def work(ns):
        def step():
            clock.advance(ns)
            return 1

        return step

    tracker = DutyCycleTracker(cycle_time_threshold_ns=50)
    agent = ScriptedAgent(script=[work(10), work(70), work(30), stop])
    AgentRunner(agent, NoOpIdleStrategy(), None, duty_cycle_tracker=tracker, nano_clock=clock).run()
    stats = tracker.statistics()
    assert (stats.cycles, stats.max_cycle_time_ns, stats.threshold_exceeded_count, stats.last_cycle_time_ns) == (3, 70, 1, 30)


def test_runner_rejects_non_agents():
    with pytest.raises(TypeError, match="is not an Agent"):
        AgentRunner(object(), NoOpIdleStrategy(), None)
    with pytest.raises(TypeError, match="is not an IdleStrategy"):
        AgentRunner(ScriptedAgent(), object(), None)


# ------------------------------------------------------------------------------------------ invoker
def test_invoker_drives_duty_cycles_and_handles_errors():
    errors = []
    counter = Counter()
    agent = ScriptedAgent(script=[2, ValueError("x"), 3, stop, 5])
    invoker = AgentInvoker(agent, errors.append, counter)
    assert invoker.invoke() == 0 and agent.calls == 0  # not started
    invoker.start()
    assert [invoker.invoke() for _ in range(5)] == [2, 0, 3, 0, 0]
    assert agent.calls == 4 and invoker.is_closed and counter.value == 1
    assert agent.events == ["start", "close"]
    invoker.close()
    assert agent.events == ["start", "close"]


# --------------------------------------------------------------------------------------- composite
def test_composite_sums_work_and_names_roles():
    a = ScriptedAgent("a", then=2)
    b = ScriptedAgent("b", then=3)
    composite = CompositeAgent(a, b)
    assert isinstance(composite, Agent)
    assert composite.role_name() == "[a,b]"
    composite.on_start()
    assert composite.do_work() == 5
    composite.on_close()
    assert a.events == b.events == ["start", "close"]


def test_composite_resumes_after_the_agent_that_raised():
    a = ScriptedAgent("a", then=1)
    b = ScriptedAgent("b", script=[ValueError("b failed")], then=10)
    c = ScriptedAgent("c", then=100)
    composite = CompositeAgent(a, b, c)
    with pytest.raises(ValueError, match="b failed"):
        composite.do_work()
    assert (a.calls, b.calls, c.calls) == (1, 1, 0)
    assert composite.do_work() == 100  # c runs first: b cannot starve it
    assert composite.do_work() == 111
    assert (a.calls, b.calls, c.calls) == (2, 2, 2)


def test_composite_closes_all_even_if_some_raise():
    class BadClose(ScriptedAgent):
        def on_close(self):
            super().on_close()
            raise OSError(f"{self.name} close failed")

    a, b, c = BadClose("a"), ScriptedAgent("b"), BadClose("c")
    with pytest.raises(ExceptionGroup) as info:
        CompositeAgent(a, b, c).on_close()
    assert [str(e) for e in info.value.exceptions] == ["a close failed", "c close failed"]
    assert a.events == b.events == c.events == ["close"]
    with pytest.raises(OSError, match="a close failed"):
        CompositeAgent(a, b).on_close()


def test_composite_starts_all_even_if_one_raises():
    class BadStart(ScriptedAgent):
        def on_start(self):
            raise OSError("no start")

    a, b = BadStart("a"), ScriptedAgent("b")
    with pytest.raises(OSError, match="no start"):
        CompositeAgent(a, b).on_start()
    assert b.events == ["start"]


def test_composite_under_a_runner_keeps_running_through_errors():
    errors = []
    a = ScriptedAgent("a", script=[1, RuntimeError("a once")], then=1)
    b = ScriptedAgent("b", script=[1, 1, 1, stop], then=1)
    runner = AgentRunner(CompositeAgent(a, b), NoOpIdleStrategy(), errors.append)
    runner.run()
    assert [str(e) for e in errors] == ["a once"]
    assert a.events == b.events == ["start", "close"]
    assert b.calls == 4


def test_composite_validation():
    with pytest.raises(ValueError, match="at least one agent"):
        CompositeAgent()
    with pytest.raises(TypeError, match="is not an Agent"):
        CompositeAgent(ScriptedAgent(), 42)


# ------------------------------------------------------------------------------------------- clocks
def test_system_clocks():
    import time

    before_ms = time.time_ns() // 1_000_000
    epoch_ms = SystemEpochClock.time()
    assert before_ms <= epoch_ms <= time.time_ns() // 1_000_000
    assert abs(SystemEpochNanoClock.nano_time() // 1_000_000 - epoch_ms) < 60_000
    t0 = SystemNanoClock.nano_time()
    t1 = SystemNanoClock.nano_time()
    assert 0 <= t1 - t0 < 1_000_000_000


def test_cached_clocks_set_advance_update():
    epoch = CachedEpochClock(1_000)
    epoch.advance(5)
    assert epoch.time() == 1_005
    epoch.update(42)
    assert epoch.time() == 42
    nano = CachedNanoClock()
    assert nano.nano_time() == 0
    nano.advance(7)
    nano.advance(3)
    assert nano.nano_time() == 10
    nano.update(SystemNanoClock.nano_time())
    assert nano.nano_time() > 10


# ------------------------------------------------------------------------------------- duty cycles
def test_duty_cycle_tracker_measure_and_update_proposes_max_and_counts_stalls():
    proposed = []
    exceeded = Counter()

    class MaxCounter:
        def __init__(self):
            self.value = 0

        def propose_max(self, value):
            proposed.append(value)
            self.value = max(self.value, value)

    max_counter = MaxCounter()
    tracker = DutyCycleTracker(max_counter, exceeded, cycle_time_threshold_ns=100)
    tracker.measure_and_update(1_000)  # first call only starts the clock
    for now in (1_050, 1_250, 1_300, 1_301, 1_500):
        tracker.measure_and_update(now)
    assert proposed == [50, 200]  # only a new maximum is proposed: smaller cycles cannot change a max counter
    assert max_counter.value == 200 and exceeded.value == 2
    stats = tracker.statistics()
    assert (stats.cycles, stats.last_cycle_time_ns, stats.max_cycle_time_ns, stats.threshold_exceeded_count) == (
        5,
        199,
        200,
        2,
    )


def test_duty_cycle_tracker_update_restarts_and_callables_work():
    proposed, exceeded = [], []
    tracker = DutyCycleTracker(proposed.append, lambda: exceeded.append(1), cycle_time_threshold_ns=10)
    tracker.update(100)
    tracker.measure_and_update(150)
    tracker.update(1_000)
    tracker.measure_and_update(1_005)
    tracker.record(-3)  # a clock moved back by a test: never a negative max
    tracker.record(60)
    assert proposed == [50, 60] and exceeded == [1, 1]


def test_duty_cycle_tracker_validation():
    with pytest.raises(ConfigurationError, match="cycle_time_threshold_ns=0"):
        DutyCycleTracker(cycle_time_threshold_ns=0)
    with pytest.raises(ConfigurationError, match="max_cycle_time="):
        DutyCycleTracker(max_cycle_time=42)
