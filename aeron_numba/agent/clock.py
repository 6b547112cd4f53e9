"""Clocks (Agrona ``EpochClock``/``NanoClock`` and their cached forms).

Agents read the time once per duty cycle into a cached clock and pass that one value to every duty
(Aeron's conductor does this): fewer system calls and one consistent "now" per cycle. Tests drive the
same cached clocks by hand (``update``/``advance``) instead of sleeping.
"""

from __future__ import annotations

import time


class SystemEpochClock:
    """Wall-clock milliseconds since 1970 (timestamps written to files and counters)."""

    @staticmethod
    def time() -> int:
        return time.time_ns() // 1_000_000


class SystemEpochNanoClock:
    """Wall-clock nanoseconds since 1970."""

    @staticmethod
    def nano_time() -> int:
        return time.time_ns()


class SystemNanoClock:
    """Monotonic nanoseconds (CLOCK_MONOTONIC, like ``System.nanoTime``): only differences mean anything."""

    @staticmethod
    def nano_time() -> int:
        return time.monotonic_ns()


class CachedEpochClock:
    """An epoch-ms value set by its owner: ``update(now_ms)`` once per duty cycle, or ``advance`` in tests."""

    __slots__ = ("_time_ms",)

    def __init__(self, time_ms: int = 0):
        self._time_ms = int(time_ms)

    def time(self) -> int:
        return self._time_ms

    def update(self, time_ms: int) -> None:
        self._time_ms = int(time_ms)

    def advance(self, delta_ms: int) -> None:
        self._time_ms += int(delta_ms)

    def __repr__(self) -> str:
        return f"CachedEpochClock({self._time_ms})"


class CachedNanoClock:
    """A nanosecond value set by its owner: ``update(now_ns)`` once per duty cycle, or ``advance`` in tests."""

    __slots__ = ("_nano_time",)

    def __init__(self, nano_time: int = 0):
        self._nano_time = int(nano_time)

    def nano_time(self) -> int:
        return self._nano_time

    def update(self, nano_time: int) -> None:
        self._nano_time = int(nano_time)

    def advance(self, delta_ns: int) -> None:
        self._nano_time += int(delta_ns)

    def __repr__(self) -> str:
        return f"CachedNanoClock({self._nano_time})"
