"""Duty-cycle time tracking (Agrona ``DutyCycleTracker``/``DutyCycleStallTracker``).

The driver publishes "max cycle time" and "cycle time threshold exceeded" counters per agent (§9.5 system
counters 26/27 for the conductor): a stalled agent shows up in AeronStat. An agent calls
``measure_and_update(now_ns)`` at the top of each ``do_work`` with its cycle's cached time (so the measured
cycle includes the idle step before it, as Aeron measures), or a runner calls ``record(duration_ns)``
around ``do_work``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aeron_numba.errors import ConfigurationError


@dataclass(frozen=True)
class DutyCycleStatistics:
    cycles: int
    last_cycle_time_ns: int
    max_cycle_time_ns: int
    threshold_exceeded_count: int


def _as_propose_max(target: Any):
    if target is None or callable(target):
        return target
    if hasattr(target, "propose_max"):
        return target.propose_max
    raise ConfigurationError(f"max_cycle_time={target!r} must be callable or have propose_max(value)")


def _as_increment(target: Any):
    if target is None or callable(target):
        return target
    if hasattr(target, "increment"):
        return target.increment
    raise ConfigurationError(f"threshold_exceeded={target!r} must be callable or have increment()")


class DutyCycleTracker:
    """Measure cycle times, propose each into ``max_cycle_time`` and count those over the threshold.

    Parameters
    ----------
    max_cycle_time : callable or object with ``propose_max(value)``, optional
        Receives every measured cycle time; a max counter keeps the largest.
    threshold_exceeded : callable or object with ``increment()``, optional
        Called once per cycle longer than ``cycle_time_threshold_ns``.
    cycle_time_threshold_ns : int
        Aeron's default for the conductor, sender and receiver is 1 s (spec §14).
    """

    def __init__(self, max_cycle_time=None, threshold_exceeded=None, *, cycle_time_threshold_ns: int = 1_000_000_000):
        if isinstance(cycle_time_threshold_ns, bool) or not isinstance(cycle_time_threshold_ns, int):
            raise ConfigurationError(f"cycle_time_threshold_ns={cycle_time_threshold_ns!r} must be an int")
        if cycle_time_threshold_ns <= 0:
            raise ConfigurationError(f"cycle_time_threshold_ns={cycle_time_threshold_ns} must be > 0")
        self.cycle_time_threshold_ns = cycle_time_threshold_ns
        self._propose_max = _as_propose_max(max_cycle_time)
        self._increment_exceeded = _as_increment(threshold_exceeded)
        self._time_of_last_update_ns: int | None = None
        self._cycles = 0
        self._last_ns = 0
        self._max_ns = 0
        self._exceeded = 0

    def update(self, now_ns: int) -> None:
        """Start measuring from ``now_ns`` (call once before the first cycle)."""
        self._time_of_last_update_ns = now_ns

    def measure_and_update(self, now_ns: int) -> None:
        """Record the time since the last update (nothing on the first call) and restart from ``now_ns``."""
        last = self._time_of_last_update_ns
        self._time_of_last_update_ns = now_ns
        if last is not None:
            self.record(now_ns - last)

    def record(self, cycle_time_ns: int) -> None:
        """Report one measured cycle."""
        if cycle_time_ns < 0:
            cycle_time_ns = 0  # a clock set backwards by a test; never propose a negative maximum
        self._cycles += 1
        self._last_ns = cycle_time_ns
        if cycle_time_ns > self._max_ns:  # only a new maximum can change a max counter: an idle cycle costs a compare
            self._max_ns = cycle_time_ns
            if self._propose_max is not None:
                self._propose_max(cycle_time_ns)
        if cycle_time_ns > self.cycle_time_threshold_ns:
            self._exceeded += 1
            if self._increment_exceeded is not None:
                self._increment_exceeded()

    def statistics(self) -> DutyCycleStatistics:
        return DutyCycleStatistics(self._cycles, self._last_ns, self._max_ns, self._exceeded)


class SharedDutyCycleTracker:
    """One duty cycle measured for several agents that share a thread (Aeron's SHARED threading mode).

    In aeronmd's SHARED mode the conductor, sender and receiver each time the same loop, so each agent's "max
    cycle time" counter gets the shared cycle and each agent's own threshold decides its "exceeded" count.
    ``agents`` holds one ``(max_cycle_time, threshold_exceeded, cycle_time_threshold_ns)`` per agent, the first
    two as for ``DutyCycleTracker``. A max counter is only proposed a new maximum: a smaller value cannot change
    it, and skipping it keeps the per-cycle cost to a comparison however many agents share the thread.
    """

    def __init__(self, agents):
        self._agents = [DutyCycleTracker(max_cycle_time, threshold_exceeded, cycle_time_threshold_ns=threshold_ns)
                        for max_cycle_time, threshold_exceeded, threshold_ns in agents]  # each checks its threshold
        if not self._agents:
            raise ConfigurationError("SharedDutyCycleTracker needs at least one agent")
        self._min_threshold_ns = min(t.cycle_time_threshold_ns for t in self._agents)
        self._max_ns = 0

    def record(self, cycle_time_ns: int) -> None:
        """Report one measured cycle of the shared thread."""
        if cycle_time_ns > self._max_ns or cycle_time_ns > self._min_threshold_ns:
            if cycle_time_ns > self._max_ns:
                self._max_ns = cycle_time_ns
            for tracker in self._agents:
                tracker.record(cycle_time_ns)
