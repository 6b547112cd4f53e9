"""``DeadlineTimerWheel``: timers by deadline in a wheel of power-of-two ticks, with the semantics of Agrona's
``DeadlineTimerWheel`` (the store under Aeron Cluster's default timer service, spec/cluster.md §11: 8 ms ticks,
128 ticks per wheel).

Scheduling and cancelling are O(1); a poll looks at one tick's slots, so timers expire in order of their ticks, and
timers in one tick in slot order, not deadline order (Aeron's documented caveat). The arrays live in numpy and every
step is a kernel of ``kernels/timer_wheel.py``; this class validates, grows the wheel when a spoke is full, and runs
the Python handler over what a poll expired.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels import timer_wheel as k
from aeron_numba.layout.bits import is_power_of_two

NULL_DEADLINE = int(k.NULL_DEADLINE)
INITIAL_TICK_ALLOCATION = 16
#: Agrona's limit on slots in the whole wheel: growth past it fails.
MAX_CAPACITY = 1 << 30

#: ``handler(time_unit, now, timer_id) -> bool``: True when the timer was handled; False keeps it and ends the poll.
TimerHandler = Callable[[ClusterTimeUnit, int, int], bool]


def _check_power_of_two(name: str, value: int, limit: int) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1 or value > limit or not is_power_of_two(int(value)):
        raise ConfigurationError(f"{name} must be a power of 2 in [1, {limit}]: {name}={value}")


class TimerWheelStateError(AeronError, RuntimeError):
    """An operation the wheel's state forbids: resetting the start time with timers scheduled, growing past
    ``MAX_CAPACITY``, or changing the wheel from inside its own poll's handler."""


class DeadlineTimerWheel:
    """Timers keyed by an id encoding (tick on the wheel, slot in the tick); deadlines in ``time_unit``."""

    def __init__(
        self,
        time_unit: ClusterTimeUnit,
        start_time: int,
        tick_resolution: int,
        ticks_per_wheel: int,
        initial_tick_allocation: int = INITIAL_TICK_ALLOCATION,
    ):
        _check_power_of_two("ticks_per_wheel", ticks_per_wheel, 1 << 30)
        _check_power_of_two("tick_resolution", tick_resolution, 1 << 62)
        _check_power_of_two("initial_tick_allocation", initial_tick_allocation, MAX_CAPACITY // ticks_per_wheel)
        self.time_unit = ClusterTimeUnit(time_unit)
        self.tick_resolution = int(tick_resolution)
        self.ticks_per_wheel = int(ticks_per_wheel)
        self._state = np.zeros(k.STATE_LENGTH, dtype=np.int64)
        self._state[k.START_TIME] = start_time
        self._state[k.TICK_ALLOCATION] = initial_tick_allocation
        self._state[k.ALLOCATION_SHIFT] = int(initial_tick_allocation).bit_length() - 1
        self._state[k.RESOLUTION_SHIFT] = self.tick_resolution.bit_length() - 1
        self._state[k.TICK_MASK] = self.ticks_per_wheel - 1
        self._wheel = np.full(self.ticks_per_wheel * initial_tick_allocation, k.NULL_DEADLINE, dtype=np.int64)
        self._expired_ids = np.zeros(0, dtype=np.int64)
        self._expired_deadlines = np.zeros(0, dtype=np.int64)
        self._polling = False

    @property
    def start_time(self) -> int:
        return int(self._state[k.START_TIME])

    @property
    def timer_count(self) -> int:
        return int(self._state[k.TIMER_COUNT])

    @property
    def tick_allocation(self) -> int:
        """Slots per tick now (doubles when a tick fills)."""
        return int(self._state[k.TICK_ALLOCATION])

    def current_tick_time(self) -> int:
        """Time at which the current tick ends."""
        return int(k.current_tick_time(self._state))

    def advance_current_tick_time(self, now: int) -> None:
        """Move the current tick up to ``now``'s, never back (Agrona's ``currentTickTime(now)``)."""
        k.advance_current_tick(self._state, np.int64(now))

    def reset_start_time(self, start_time: int) -> None:
        if self.timer_count > 0:
            raise TimerWheelStateError(f"can not reset start_time with active timers: timer_count={self.timer_count}")
        self._state[k.START_TIME] = start_time
        self._state[k.CURRENT_TICK] = 0
        self._state[k.POLL_INDEX] = 0

    def schedule_timer(self, deadline: int) -> int:
        """Schedule a timer for ``deadline`` (a past deadline expires at the next poll); its timer id."""
        self._check_not_polling("schedule_timer")
        timer_id = int(k.schedule_timer(self._state, self._wheel, np.int64(deadline)))
        while timer_id == k.NO_TIMER:
            self._increase_capacity()
            timer_id = int(k.schedule_timer(self._state, self._wheel, np.int64(deadline)))
        return timer_id

    def cancel_timer(self, timer_id: int) -> bool:
        """Cancel a timer; False when ``timer_id`` holds no timer."""
        self._check_not_polling("cancel_timer")
        return bool(k.cancel_timer(self._state, self._wheel, np.int64(timer_id)))

    def deadline(self, timer_id: int) -> int:
        """Deadline of ``timer_id``, or ``NULL_DEADLINE`` when it holds no timer."""
        return int(k.deadline_of(self._state, self._wheel, np.int64(timer_id)))

    def poll(self, now: int, handler: TimerHandler, expiry_limit: int) -> int:
        """Expire up to ``expiry_limit`` timers of the current tick whose deadline is <= ``now``, calling
        ``handler(time_unit, now, timer_id)`` for each, and move to the next tick when the tick is done and ``now`` is
        past it. A handler returning False keeps its timer, which is polled first next time, and ends the poll.
        The handler must not schedule or cancel on this wheel. Returns the number of timers handled."""
        if expiry_limit < 0:
            raise ConfigurationError(f"expiry_limit must be >= 0: expiry_limit={expiry_limit}")
        if self._expired_ids.shape[0] < expiry_limit:
            self._expired_ids = np.zeros(expiry_limit, dtype=np.int64)
            self._expired_deadlines = np.zeros(expiry_limit, dtype=np.int64)
        tick_before = int(self._state[k.CURRENT_TICK])
        count = int(
            k.poll_expired(
                self._state, self._wheel, np.int64(now), expiry_limit, self._expired_ids, self._expired_deadlines
            )
        )
        self._polling = True
        i = 0
        try:
            while i < count:
                if not handler(self.time_unit, now, int(self._expired_ids[i])):
                    self._restore(tick_before, i, count)
                    return i
                i += 1
        except BaseException:
            # The timer whose handler raised counts as not handled, like a refused one: nothing is lost.
            self._restore(tick_before, i, count)
            raise
        finally:
            self._polling = False
        return count

    def _restore(self, tick_before: int, first: int, count: int) -> None:
        ids, deadlines = self._expired_ids, self._expired_deadlines
        k.restore_expired(self._state, self._wheel, tick_before, ids, deadlines, first, count)

    def for_each(self, consumer: Callable[[int, int], None]) -> None:
        """``consumer(deadline, timer_id)`` for every scheduled timer, in wheel order (for snapshots)."""
        shift = int(self._state[k.ALLOCATION_SHIFT])
        mask = self.tick_allocation - 1
        index = int(k.next_timer(self._wheel, 0))
        while index >= 0:
            consumer(int(self._wheel[index]), int(k.timer_id_for_slot(index >> shift, index & mask)))
            index = int(k.next_timer(self._wheel, index + 1))

    def clear(self) -> None:
        """Drop every timer."""
        self._check_not_polling("clear")
        self._wheel.fill(k.NULL_DEADLINE)
        self._state[k.TIMER_COUNT] = 0

    def _check_not_polling(self, what: str) -> None:
        if self._polling:
            raise TimerWheelStateError(f"{what} called from a timer handler during poll: not allowed on this wheel")

    def _increase_capacity(self) -> None:
        allocation = self.tick_allocation
        if self.ticks_per_wheel * allocation * 2 > MAX_CAPACITY:
            raise TimerWheelStateError(
                f"max capacity reached at tick_allocation={allocation}: "
                f"ticks_per_wheel={self.ticks_per_wheel} * slots > {MAX_CAPACITY}"
            )
        grown = np.full((self.ticks_per_wheel, allocation * 2), k.NULL_DEADLINE, dtype=np.int64)
        grown[:, :allocation] = self._wheel.reshape(self.ticks_per_wheel, allocation)
        self._wheel = grown.reshape(-1)
        self._state[k.TICK_ALLOCATION] = allocation * 2
        self._state[k.ALLOCATION_SHIFT] += 1
