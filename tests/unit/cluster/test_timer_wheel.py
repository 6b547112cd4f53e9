"""DeadlineTimerWheel against a plain model: a list of (deadline, id) that expires every deadline <= now, with the
wheel's one documented freedom: timers of one tick may expire in any order among themselves."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.timer_wheel import NULL_DEADLINE, DeadlineTimerWheel, TimerWheelStateError
from aeron_numba.errors import ConfigurationError
from aeron_numba.kernels import timer_wheel as kernels

MS = ClusterTimeUnit.MILLIS


def drain(wheel: DeadlineTimerWheel, now: int, limit: int = 1_000) -> list[tuple[int, int]]:
    """Poll at ``now`` until a poll neither expires a timer nor moves the wheel on (a poll that moves to the next
    tick does not look into it: a deadline on a tick boundary expires one poll later, as in Aeron); (timer id,
    deadline) in order of expiry."""
    expired: list[tuple[int, int]] = []

    def handler(time_unit, poll_now, timer_id):
        assert time_unit is MS and poll_now == now
        expired.append((timer_id, deadlines[timer_id]))
        return True

    deadlines = {}
    wheel.for_each(lambda deadline, timer_id: deadlines.__setitem__(timer_id, deadline))
    while True:
        tick_time = wheel.current_tick_time()
        if wheel.poll(now, handler, limit) == 0 and wheel.current_tick_time() == tick_time:
            return expired


def test_timer_expires_at_its_deadline_not_before():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    timer_id = wheel.schedule_timer(100)
    assert wheel.deadline(timer_id) == 100
    assert drain(wheel, 99) == []
    assert drain(wheel, 100) == [(timer_id, 100)]
    assert wheel.timer_count == 0
    assert wheel.deadline(timer_id) == NULL_DEADLINE


def test_timer_id_encodes_tick_and_slot():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16, initial_tick_allocation=2)
    first = wheel.schedule_timer(8 * 3)  # tick 3, slot 0
    second = wheel.schedule_timer(8 * 3 + 7)  # same tick, slot 1
    beyond_a_turn = wheel.schedule_timer(8 * (3 + 16))  # same spoke one turn later: slot 2, after growing
    assert (first >> 32, first & 0xFFFFFFFF) == (3, 0)
    assert (second >> 32, second & 0xFFFFFFFF) == (3, 1)
    assert (beyond_a_turn >> 32, beyond_a_turn & 0xFFFFFFFF) == (3, 2)
    assert wheel.tick_allocation == 4
    # Growth keeps the ids already handed out.
    assert [wheel.deadline(t) for t in (first, second, beyond_a_turn)] == [24, 31, 152]


def test_cancel_unknown_or_spent_id_is_false():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    timer_id = wheel.schedule_timer(50)
    for bogus in (-1, 1 << 40, (5 << 32) | 9, (99 << 32), (3 << 32) | 10_000):
        assert wheel.cancel_timer(bogus) is False
    assert wheel.cancel_timer(timer_id) is True
    assert wheel.cancel_timer(timer_id) is False
    assert wheel.timer_count == 0
    assert drain(wheel, 1_000) == []


def test_past_deadline_lands_on_current_tick_and_expires_next_poll():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    drain(wheel, 500)
    timer_id = wheel.schedule_timer(10)
    assert timer_id >> 32 == (500 >> 3) & 15
    assert drain(wheel, 500) == [(timer_id, 10)]


def test_limited_poll_resumes_in_the_same_tick():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    ids = [wheel.schedule_timer(d) for d in (1, 2, 3, 4, 5)]
    got = []
    handler = lambda _u, _n, timer_id: got.append(timer_id) or True  # noqa: E731
    assert [wheel.poll(7, handler, 2) for _ in range(4)] == [2, 2, 1, 0]
    assert got == ids
    assert wheel.timer_count == 0


def test_refused_timer_stays_and_is_polled_first_next_time():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    ids = [wheel.schedule_timer(d) for d in (1, 2, 3)]
    got, refuse = [], {ids[1]}
    tick_time = wheel.current_tick_time()

    def handler(_u, _n, timer_id):
        if timer_id in refuse:
            return False
        got.append(timer_id)
        return True

    assert wheel.poll(100, handler, 10) == 1
    assert got == [ids[0]]
    assert wheel.timer_count == 2
    assert wheel.current_tick_time() == tick_time  # the wheel did not move past the refused timer's tick
    assert wheel.deadline(ids[1]) == 2 and wheel.deadline(ids[2]) == 3
    refuse.clear()
    assert wheel.poll(100, handler, 10) == 2
    assert got == ids


def test_handler_that_raises_loses_no_timer():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    ids = [wheel.schedule_timer(d) for d in (1, 2)]

    def boom(_u, _n, _timer_id):
        raise RuntimeError("log back pressured")

    with pytest.raises(RuntimeError):
        wheel.poll(100, boom, 10)
    assert wheel.timer_count == 2
    assert [t for t, _ in drain(wheel, 100)] == ids


def test_handler_may_not_change_the_wheel_mid_poll():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    wheel.schedule_timer(1)
    with pytest.raises(TimerWheelStateError, match="schedule_timer called from a timer handler"):
        wheel.poll(100, lambda _u, _n, _t: wheel.schedule_timer(5) > 0, 10)
    assert wheel.timer_count == 1


def test_reset_start_time_needs_no_timers_and_rebases_ticks():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    timer_id = wheel.schedule_timer(10)
    with pytest.raises(TimerWheelStateError, match="timer_count=1"):
        wheel.reset_start_time(1_000)
    wheel.cancel_timer(timer_id)
    wheel.reset_start_time(1_000)
    assert (wheel.start_time, wheel.current_tick_time()) == (1_000, 1_008)
    timer_id = wheel.schedule_timer(1_000 + 8 * 5)
    assert timer_id >> 32 == 5


def test_clear_and_advance_current_tick_time():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    for d in (5, 50, 500):
        wheel.schedule_timer(d)
    wheel.clear()
    assert wheel.timer_count == 0 and drain(wheel, 1_000) == []
    wheel.advance_current_tick_time(2_000)
    assert wheel.current_tick_time() == 2_008
    wheel.advance_current_tick_time(16)  # never back
    assert wheel.current_tick_time() == 2_008


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tick_resolution=10, ticks_per_wheel=16), "tick_resolution must be a power of 2 .*tick_resolution=10"),
        (dict(tick_resolution=0, ticks_per_wheel=16), "tick_resolution=0"),
        (dict(tick_resolution=8, ticks_per_wheel=100), "ticks_per_wheel must be a power of 2 .*ticks_per_wheel=100"),
        (dict(tick_resolution=8, ticks_per_wheel=-4), "ticks_per_wheel=-4"),
        (dict(tick_resolution=8, ticks_per_wheel=16, initial_tick_allocation=3), "initial_tick_allocation=3"),
    ],
)
def test_bad_arguments_name_the_value_and_the_limit(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        DeadlineTimerWheel(MS, 0, **kwargs)


def test_negative_expiry_limit_is_refused():
    wheel = DeadlineTimerWheel(MS, 0, 8, 16)
    with pytest.raises(ConfigurationError, match="expiry_limit=-1"):
        wheel.poll(0, lambda *_: True, -1)


# Steps of time shorter than a turn of the wheel: a longer jump lets a timer a turn ahead expire with the tick
# that shares its spoke (Aeron's documented caveat), which the tick-order check below would flag.
_RESOLUTION, _TICKS = 4, 16
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.integers(-20, 400)),
        st.tuples(st.just("cancel"), st.integers(0, 60)),
        st.tuples(st.just("advance"), st.integers(0, _RESOLUTION * (_TICKS - 2))),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(operations=_operations, start_time=st.integers(0, 50))
def test_wheel_matches_sorted_list_model(operations, start_time):
    wheel = DeadlineTimerWheel(MS, start_time, _RESOLUTION, _TICKS, initial_tick_allocation=1)
    model: dict[int, int] = {}  # timer id -> deadline, the live timers
    issued: list[int] = []
    now = start_time
    current_tick = 0
    effective_tick: dict[int, int] = {}
    for op, value in operations:
        if op == "schedule":
            deadline = now + value
            timer_id = wheel.schedule_timer(deadline)
            assert timer_id not in model, "timer ids of live timers are unique"
            model[timer_id] = deadline
            issued.append(timer_id)
            effective_tick[timer_id] = max((deadline - start_time) >> 2, current_tick)
        elif op == "cancel" and issued:
            timer_id = issued[value % len(issued)]
            assert wheel.cancel_timer(timer_id) is (timer_id in model)
            model.pop(timer_id, None)
        else:
            now += value
            expired = drain(wheel, now, limit=3)
            due = sorted(t for t, d in model.items() if d <= now)
            assert sorted(t for t, _ in expired) == due
            assert all(model[t] == d for t, d in expired)
            ticks = [effective_tick[t] for t, _ in expired]
            assert ticks == sorted(ticks), "timers expire in order of their ticks"
            for t in due:
                del model[t]
            current_tick = max(current_tick, (now - start_time) >> 2)
        assert wheel.timer_count == len(model)
    seen = {}
    wheel.for_each(lambda deadline, timer_id: seen.__setitem__(timer_id, deadline))
    assert seen == model


def _scenario(seed: int) -> list:
    """A fixed random run of schedules, cancels and limited polls (some refused); its full trace."""
    rng = random.Random(seed)
    wheel = DeadlineTimerWheel(MS, 3, 4, 8, initial_tick_allocation=1)
    trace, ids, now = [], [], 3
    for _ in range(400):
        roll = rng.random()
        if roll < 0.45:
            ids.append(wheel.schedule_timer(now + rng.randint(-10, 100)))
            trace.append(("schedule", ids[-1]))
        elif roll < 0.6 and ids:
            trace.append(("cancel", wheel.cancel_timer(rng.choice(ids))))
        else:
            now += rng.randint(0, 12)
            refuse_at = rng.randint(0, 4)
            handled = []
            handler = lambda _u, _n, t: len(handled) != refuse_at and not handled.append(t)  # noqa: E731
            trace.append(("poll", wheel.poll(now, handler, rng.randint(1, 4)), handled, wheel.current_tick_time()))
        trace.append(wheel.timer_count)
    wheel.for_each(lambda d, t: trace.append((d, t)))
    return trace


def test_plain_python_kernels_behave_as_compiled(monkeypatch):
    """What NUMBA_DISABLE_JIT=1 runs: every kernel's Python body, against the compiled kernels."""
    compiled = [_scenario(seed) for seed in range(3)]
    for name in dir(kernels):
        py_func = getattr(getattr(kernels, name), "py_func", None)
        if py_func is not None:
            monkeypatch.setattr(kernels, name, py_func)
    assert [_scenario(seed) for seed in range(3)] == compiled
