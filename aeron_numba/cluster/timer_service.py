"""The consensus module's timer service: the services' timers keyed by correlation id (Aeron's ``TimerService``).

A service's ``schedule_timer(correlation_id, deadline)`` replaces any timer with that correlation id;
``cancel_timer`` removes it; the leader's ``poll(now)`` hands each expired timer to ``on_timer_event(correlation_id)``
(the consensus module appends a TimerEvent to the log, and returns False when the log is back pressured: the timer
stays and the poll ends) and expires at most ``POLL_LIMIT`` per call. The timers are the consensus module snapshot's
``Timer`` messages (spec/cluster.md §9): ``snapshot(taker)`` calls ``taker(correlation_id, deadline)`` for each, and a
node recovering from that snapshot schedules them again, which is how timers survive a restart or a failover.

Two implementations, as Aeron 1.48: ``WheelTimerService`` (the default, ``aeron.cluster.timer.service.supplier``
``io.aeron.cluster.WheelTimerServiceSupplier``) over ``DeadlineTimerWheel``: timers in one tick expire in no
particular order; and ``PriorityHeapTimerService`` (``...PriorityHeapTimerServiceSupplier``): timers expire in
deadline order, ties in order of scheduling. Deadlines are in the cluster's time unit (``cluster_time``).

Restoring on a new leader: call ``current_time(now)`` before scheduling the snapshot's timers. Scheduled first, a
timer already due sits on a spoke the wheel has just jumped past and waits up to a turn of the wheel (128 ticks of
8 ms) for it; Aeron 1.48 schedules first and documents that restored expired timers may fire out of order.
One deliberate difference: ``WheelTimerService.poll`` never expires more than ``POLL_LIMIT`` in one call (its
documented contract); Aeron's loop passes the full limit to each tick's poll and can exceed it.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable

from aeron_numba.cluster.cluster_time import ClusterTimeUnit, convert
from aeron_numba.cluster.context import DEFAULT_TICKS_PER_WHEEL, DEFAULT_WHEEL_TICK_RESOLUTION_NS
from aeron_numba.cluster.timer_wheel import DeadlineTimerWheel
from aeron_numba.errors import ConfigurationError

#: Most timers one ``poll`` expires (Aeron's ``TimerService.POLL_LIMIT``).
POLL_LIMIT = 20

TIMER_SERVICE_SUPPLIER_PROP_NAME = "aeron.cluster.timer.service.supplier"
TIMER_SERVICE_SUPPLIER_ENV = "AERON_CLUSTER_TIMER_SERVICE_SUPPLIER"
TIMER_SERVICE_SUPPLIER_WHEEL = "io.aeron.cluster.WheelTimerServiceSupplier"
TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP = "io.aeron.cluster.PriorityHeapTimerServiceSupplier"
TIMER_SERVICE_SUPPLIER_DEFAULT = TIMER_SERVICE_SUPPLIER_WHEEL

# The settings and their defaults live in ``context`` (aeron.cluster.wheel.tick.resolution, .ticks.per.wheel).
WHEEL_TICK_RESOLUTION_DEFAULT_NS = DEFAULT_WHEEL_TICK_RESOLUTION_NS
TICKS_PER_WHEEL_DEFAULT = DEFAULT_TICKS_PER_WHEEL

#: ``on_timer_event(correlation_id) -> bool``: True when the event went to the log.
TimerEventHandler = Callable[[int], bool]
#: ``taker(correlation_id, deadline)``, for each timer of a snapshot.
TimerSnapshotTaker = Callable[[int, int], None]


def find_next_positive_power_of_two(value: int) -> int:
    """Smallest power of two >= ``value`` (1 for ``value`` <= 1), as Agrona's ``findNextPositivePowerOfTwo``."""
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def wheel_tick_resolution(time_unit: ClusterTimeUnit, wheel_tick_resolution_ns: int) -> int:
    """The wheel's tick in cluster time units: the setting converted, rounded up to a power of two (8 ms → 8 in
    ms, 8192 in us, 8388608 in ns), as Aeron's consensus module derives it."""
    return find_next_positive_power_of_two(convert(wheel_tick_resolution_ns, ClusterTimeUnit.NANOS, time_unit))


class WheelTimerService:
    """Timers by correlation id over a ``DeadlineTimerWheel`` (Aeron's ``WheelTimerService``)."""

    def __init__(
        self,
        on_timer_event: TimerEventHandler,
        time_unit: ClusterTimeUnit = ClusterTimeUnit.MILLIS,
        start_time: int = 0,
        tick_resolution: int = 8,
        ticks_per_wheel: int = TICKS_PER_WHEEL_DEFAULT,
    ):
        self._on_timer_event = on_timer_event
        self._wheel = DeadlineTimerWheel(time_unit, start_time, tick_resolution, ticks_per_wheel)
        self._timer_id_by_correlation_id: dict[int, int] = {}
        self._correlation_id_by_timer_id: dict[int, int] = {}
        self._is_abort = False

    @property
    def timer_count(self) -> int:
        return len(self._timer_id_by_correlation_id)

    def poll(self, now: int) -> int:
        """Expire due timers, up to ``POLL_LIMIT``, a tick at a time until the wheel has caught up with ``now``."""
        expired = 0
        self._is_abort = False
        while True:
            expired += self._wheel.poll(now, self._on_timer_expiry, POLL_LIMIT - expired)
            if self._is_abort or expired >= POLL_LIMIT or self._wheel.current_tick_time() >= now:
                return expired

    def _on_timer_expiry(self, _time_unit: ClusterTimeUnit, _now: int, timer_id: int) -> bool:
        correlation_id = self._correlation_id_by_timer_id[timer_id]
        if self._on_timer_event(correlation_id):
            del self._correlation_id_by_timer_id[timer_id]
            del self._timer_id_by_correlation_id[correlation_id]
            return True
        self._is_abort = True
        return False

    def schedule_timer_for_correlation_id(self, correlation_id: int, deadline: int) -> None:
        self.cancel_timer_by_correlation_id(correlation_id)
        timer_id = self._wheel.schedule_timer(deadline)
        self._timer_id_by_correlation_id[correlation_id] = timer_id
        self._correlation_id_by_timer_id[timer_id] = correlation_id

    def cancel_timer_by_correlation_id(self, correlation_id: int) -> bool:
        timer_id = self._timer_id_by_correlation_id.pop(correlation_id, None)
        if timer_id is None:
            return False
        self._wheel.cancel_timer(timer_id)
        del self._correlation_id_by_timer_id[timer_id]
        return True

    def snapshot(self, taker: TimerSnapshotTaker) -> None:
        for correlation_id, timer_id in self._timer_id_by_correlation_id.items():
            taker(correlation_id, self._wheel.deadline(timer_id))

    def current_time(self, now: int) -> None:
        """Move the wheel up to ``now`` (a new leader does this so old ticks are not walked one poll at a time)."""
        self._wheel.advance_current_tick_time(now)


class PriorityHeapTimerService:
    """Timers by correlation id in deadline order (Aeron's ``PriorityHeapTimerService``): a binary heap with lazy
    deletion; a rescheduled or cancelled timer's old entry is skipped when it reaches the top."""

    def __init__(self, on_timer_event: TimerEventHandler):
        self._on_timer_event = on_timer_event
        self._heap: list[tuple[int, int, int]] = []  # (deadline, sequence, correlation_id)
        self._entry_by_correlation_id: dict[int, tuple[int, int, int]] = {}
        self._sequence = itertools.count()

    @property
    def timer_count(self) -> int:
        return len(self._entry_by_correlation_id)

    def poll(self, now: int) -> int:
        expired = 0
        while self._heap and expired < POLL_LIMIT:
            entry = self._heap[0]
            if self._entry_by_correlation_id.get(entry[2]) is not entry:
                heapq.heappop(self._heap)  # cancelled or rescheduled since
                continue
            if entry[0] > now or not self._on_timer_event(entry[2]):
                break
            heapq.heappop(self._heap)
            del self._entry_by_correlation_id[entry[2]]
            expired += 1
        return expired

    def schedule_timer_for_correlation_id(self, correlation_id: int, deadline: int) -> None:
        entry = (deadline, next(self._sequence), correlation_id)
        self._entry_by_correlation_id[correlation_id] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._entry_by_correlation_id) + 64:
            self._compact()

    def cancel_timer_by_correlation_id(self, correlation_id: int) -> bool:
        return self._entry_by_correlation_id.pop(correlation_id, None) is not None

    def snapshot(self, taker: TimerSnapshotTaker) -> None:
        for deadline, _, correlation_id in sorted(self._entry_by_correlation_id.values()):
            taker(correlation_id, deadline)

    def current_time(self, now: int) -> None:
        """Nothing to do: a heap does not walk time."""

    def _compact(self) -> None:
        # Stale entries pile up when timers are rescheduled or cancelled and never reach the top.
        self._heap = list(self._entry_by_correlation_id.values())
        heapq.heapify(self._heap)


def new_timer_service(
    supplier: str,
    on_timer_event: TimerEventHandler,
    time_unit: ClusterTimeUnit = ClusterTimeUnit.MILLIS,
    wheel_tick_resolution_ns: int = WHEEL_TICK_RESOLUTION_DEFAULT_NS,
    ticks_per_wheel: int = TICKS_PER_WHEEL_DEFAULT,
) -> WheelTimerService | PriorityHeapTimerService:
    """The timer service a consensus module's settings name (``aeron.cluster.timer.service.supplier``)."""
    if supplier == TIMER_SERVICE_SUPPLIER_WHEEL:
        return WheelTimerService(
            on_timer_event, time_unit, 0, wheel_tick_resolution(time_unit, wheel_tick_resolution_ns), ticks_per_wheel
        )
    if supplier == TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP:
        return PriorityHeapTimerService(on_timer_event)
    raise ConfigurationError(
        f"{TIMER_SERVICE_SUPPLIER_PROP_NAME}={supplier!r} is not a timer service supplier: expected "
        f"{TIMER_SERVICE_SUPPLIER_WHEEL} or {TIMER_SERVICE_SUPPLIER_PRIORITY_HEAP}"
    )
