"""The consensus module's timer services (wheel, the default, and priority heap) against a sorted-list model, and
the failover case: timers taken into a snapshot and scheduled again on a new leader expire as they would have on the
old one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.timer_service import (
    POLL_LIMIT,
    TIMER_SERVICE_SUPPLIER_DEFAULT,
    TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP,
    TIMER_SERVICE_SUPPLIER_WHEEL,
    PriorityHeapTimerService,
    WheelTimerService,
    find_next_positive_power_of_two,
    new_timer_service,
    wheel_tick_resolution,
)
from aeron_numba.errors import ConfigurationError

SUPPLIERS = [TIMER_SERVICE_SUPPLIER_WHEEL, TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP]


class Log:
    """Stands in for the consensus module's log publisher: records TimerEvents, or refuses while back pressured."""

    def __init__(self):
        self.events: list[int] = []
        self.back_pressured = False

    def on_timer_event(self, correlation_id: int) -> bool:
        if self.back_pressured:
            return False
        self.events.append(correlation_id)
        return True


def make(supplier: str, log: Log):
    return new_timer_service(supplier, log.on_timer_event, ClusterTimeUnit.MILLIS)


def drain(service, log: Log, now: int) -> list[int]:
    """Poll at ``now`` until nothing changes. A wheel poll that ends by moving to the next tick has not looked into
    it yet, so stop only after three empty polls in a row (at most one of them can move the wheel)."""
    start, empty = len(log.events), 0
    while empty < 3:
        empty = empty + 1 if service.poll(now) == 0 else 0
    return log.events[start:]


def test_default_supplier_is_the_wheel_as_in_aeron_1_48():
    assert TIMER_SERVICE_SUPPLIER_DEFAULT == TIMER_SERVICE_SUPPLIER_WHEEL
    assert isinstance(new_timer_service(TIMER_SERVICE_SUPPLIER_DEFAULT, Log().on_timer_event), WheelTimerService)
    heap = new_timer_service(TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP, Log().on_timer_event)
    assert isinstance(heap, PriorityHeapTimerService)


def test_unknown_supplier_names_the_value_and_the_choices():
    with pytest.raises(ConfigurationError, match=r"timer.service.supplier='x.Y' .*WheelTimerServiceSupplier"):
        new_timer_service("x.Y", Log().on_timer_event)


def test_tick_resolution_in_cluster_time_units():
    assert find_next_positive_power_of_two(0) == 1
    assert find_next_positive_power_of_two(8) == 8
    assert find_next_positive_power_of_two(9) == 16
    assert wheel_tick_resolution(ClusterTimeUnit.MILLIS, 8_000_000) == 8
    assert wheel_tick_resolution(ClusterTimeUnit.MICROS, 8_000_000) == 8192
    assert wheel_tick_resolution(ClusterTimeUnit.NANOS, 8_000_000) == 1 << 23
    assert wheel_tick_resolution(ClusterTimeUnit.MILLIS, 500_000) == 1  # under a ms: 0 ms rounds up to 1


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_timer_fires_once_at_its_deadline(supplier):
    log = Log()
    service = make(supplier, log)
    service.schedule_timer_for_correlation_id(7, 1_000)
    assert drain(service, log, 999) == []
    assert drain(service, log, 1_000) == [7]
    assert drain(service, log, 5_000) == []
    assert service.timer_count == 0


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_schedule_replaces_the_timer_with_the_same_correlation_id(supplier):
    log = Log()
    service = make(supplier, log)
    service.schedule_timer_for_correlation_id(7, 100)
    service.schedule_timer_for_correlation_id(7, 300)
    assert service.timer_count == 1
    assert drain(service, log, 200) == []
    service.schedule_timer_for_correlation_id(7, 150)  # earlier again: already due
    assert drain(service, log, 200) == [7]
    assert drain(service, log, 400) == []


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_cancel(supplier):
    log = Log()
    service = make(supplier, log)
    assert service.cancel_timer_by_correlation_id(1) is False
    service.schedule_timer_for_correlation_id(1, 100)
    service.schedule_timer_for_correlation_id(2, 100)
    assert service.cancel_timer_by_correlation_id(1) is True
    assert service.cancel_timer_by_correlation_id(1) is False
    assert drain(service, log, 100) == [2]
    assert service.cancel_timer_by_correlation_id(2) is False  # already expired


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_poll_expires_at_most_poll_limit(supplier):
    log = Log()
    service = make(supplier, log)
    for correlation_id in range(POLL_LIMIT + 5):
        service.schedule_timer_for_correlation_id(correlation_id, 10 + correlation_id)
    assert service.poll(1_000) == POLL_LIMIT
    assert drain(service, log, 1_000) == log.events[POLL_LIMIT:]
    assert sorted(log.events) == list(range(POLL_LIMIT + 5))


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_back_pressured_log_keeps_the_timer(supplier):
    log = Log()
    service = make(supplier, log)
    service.schedule_timer_for_correlation_id(1, 10)
    service.schedule_timer_for_correlation_id(2, 20)
    log.back_pressured = True
    assert service.poll(100) == 0
    assert service.timer_count == 2
    log.back_pressured = False
    assert sorted(drain(service, log, 100)) == [1, 2]


@pytest.mark.parametrize("supplier", SUPPLIERS)
def test_snapshot_lists_every_live_timer(supplier):
    log = Log()
    service = make(supplier, log)
    for correlation_id, deadline in ((1, 50), (2, 10), (3, 70), (4, 10)):
        service.schedule_timer_for_correlation_id(correlation_id, deadline)
    service.cancel_timer_by_correlation_id(3)
    drain(service, log, 20)
    taken = []
    service.snapshot(lambda correlation_id, deadline: taken.append((correlation_id, deadline)))
    assert taken == [(1, 50)]


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.integers(0, 12), st.integers(-30, 600)),
        st.tuples(st.just("cancel"), st.integers(0, 12), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 200), st.just(0)),
        st.tuples(st.just("failover"), st.just(0), st.just(0)),
    ),
    max_size=80,
)


@pytest.mark.parametrize("supplier", SUPPLIERS)
@settings(max_examples=120, deadline=None)
@given(operations=_operations)
def test_service_matches_model_across_failovers(supplier, operations):
    """The model is a dict correlation id -> (deadline, order scheduled); a drain at ``now`` must fire exactly the
    timers due by ``now``: in deadline order (ties in scheduling order) for the heap, in any order for the wheel
    (timers in one tick are unordered). A failover snapshots the timers and schedules them on a fresh service, as
    a new leader does from the consensus module snapshot; the model does not change."""
    log = Log()
    service = make(supplier, log)
    model: dict[int, tuple[int, int]] = {}
    now, sequence = 0, 0
    for op, correlation_id, value in operations:
        if op == "schedule":
            service.schedule_timer_for_correlation_id(correlation_id, now + value)
            model[correlation_id] = (now + value, sequence)
            sequence += 1
        elif op == "cancel":
            assert service.cancel_timer_by_correlation_id(correlation_id) is (correlation_id in model)
            model.pop(correlation_id, None)
        elif op == "failover":
            taken = []
            service.snapshot(lambda c, d: taken.append((c, d)))
            assert sorted(taken) == sorted((c, d) for c, (d, _) in model.items())
            service = make(supplier, log)
            service.current_time(now)  # before scheduling: timers already due land on the current tick
            for c, d in taken:
                service.schedule_timer_for_correlation_id(c, d)
            # Restored timers are scheduled in snapshot order: the model's tie order follows it.
            for c, _ in taken:
                model[c] = (model[c][0], sequence)
                sequence += 1
        else:
            now += value
            fired = drain(service, log, now)
            due = sorted((d, s, c) for c, (d, s) in model.items() if d <= now)
            if supplier == TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP:
                assert fired == [c for _, _, c in due]
            else:
                assert sorted(fired) == sorted(c for _, _, c in due)
            for _, _, c in due:
                del model[c]
        assert service.timer_count == len(model)


def test_wheel_restore_order_matters_for_timers_already_due():
    """A timer restored before the wheel is moved to the new leader's time waits for its spoke to come round
    (Aeron's caveat); restored after it, it fires at the first poll."""
    late_log, prompt_log = Log(), Log()
    late, prompt = make(TIMER_SERVICE_SUPPLIER_WHEEL, late_log), make(TIMER_SERVICE_SUPPLIER_WHEEL, prompt_log)
    late.schedule_timer_for_correlation_id(1, 100)  # tick 12
    late.current_time(10_000)  # tick 1250; spoke 12 next comes round at tick 1292, time 10_336
    prompt.current_time(10_000)
    prompt.schedule_timer_for_correlation_id(1, 100)
    assert drain(prompt, prompt_log, 10_000) == [1]
    assert drain(late, late_log, 10_000) == []
    assert drain(late, late_log, 10_335) == []
    assert drain(late, late_log, 10_336) == [1]
