"""Idle strategies: what an agent's thread does after a duty cycle (Agrona ``IdleStrategy``).

``idle(work_count)`` is called after every duty cycle: any work resets the strategy, no work takes one
idle step. ``idle()`` (no argument) takes a step unconditionally. On the 2-core machines this project runs
on, a spinning agent steals the core its peer needs, so tests and defaults use backoff or sleeping
(DESIGN.md "Processes and agents"); busy spin is for benchmarks with pinned processes.

Names follow Aeron: the aliases of the C driver's table (``spin``, ``noop``, ``yield``, ``sleep-ns`` or
``sleeping``, ``sleep-ms``, ``backoff``, ``controllable``) and the Java class names
(``org.agrona.concurrent.BackoffIdleStrategy``...), with the C driver's init-argument strings
(``sleep-ns``: a duration; ``backoff``: ``spins-yields-minPark-maxPark``).
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable, Protocol, runtime_checkable

from aeron_numba.errors import ConfigurationError

NsParker = Callable[[int], None]


def park_ns(duration_ns: int) -> None:
    """Sleep for ``duration_ns`` (``time.sleep`` uses ``clock_nanosleep``; the OS rounds up to its timer slack)."""
    time.sleep(duration_ns / 1e9)


@runtime_checkable
class IdleStrategy(Protocol):
    alias: str

    def idle(self, work_count: int | None = None) -> None: ...

    def reset(self) -> None: ...


def _check_non_negative(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name}={value!r} must be an int")
    if value < 0:
        raise ConfigurationError(f"{name}={value} < 0")
    return value


def _check_positive(name: str, value: int) -> int:
    if _check_non_negative(name, value) == 0:
        raise ConfigurationError(f"{name}=0 must be > 0")
    return value


class NoOpIdleStrategy:
    """Does nothing: the caller's loop is the spin."""

    alias = "noop"

    def idle(self, work_count: int | None = None) -> None:
        pass

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return "NoOpIdleStrategy()"


class BusySpinIdleStrategy:
    """Spin. Python has no pause instruction; the call itself is the spin-wait hint's cost."""

    alias = "spin"

    def idle(self, work_count: int | None = None) -> None:
        pass

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return "BusySpinIdleStrategy()"


class YieldingIdleStrategy:
    """``sched_yield`` when there was no work: gives the core away only if another thread wants it."""

    alias = "yield"
    #: Yields a compiled wait may take before it returns for the deadline (in practice: until work or the deadline).
    _WAIT_YIELDS = 1 << 62

    def __init__(self, *, yielder: Callable[[], None] = os.sched_yield):
        self._yield = yielder
        self._idle = False

    def idle(self, work_count: int | None = None) -> None:
        if work_count is not None and work_count > 0:
            self._idle = False
            return
        self._idle = True
        self._yield()

    def reset(self) -> None:
        self._idle = False

    @property
    def can_wait_compiled(self) -> bool:
        """True after a cycle without work, with the real yielder: the runner may then yield in a compiled wait
        (``park_until_changed``), looking at the agent's words and sockets between yields, instead of running a
        Python duty cycle between them."""
        return self._idle and self._yield is os.sched_yield

    def park_until_changed(self, watch, default_deadline_ns: int) -> int:
        """Yields in compiled code until a word or socket of ``watch`` has work or its deadline passes; returns the
        yields taken (each stands for a yield and a duty cycle that would have found no work)."""
        steps, _ = watch.park_until_changed(1, default_deadline_ns, yields=self._WAIT_YIELDS)
        return steps

    def __repr__(self) -> str:
        return "YieldingIdleStrategy()"


class SleepingIdleStrategy:
    """Sleep ``sleep_period_ns`` when there was no work (default 1 µs, Agrona's)."""

    alias = "sleep-ns"
    DEFAULT_SLEEP_PERIOD_NS = 1_000

    def __init__(self, sleep_period_ns: int = DEFAULT_SLEEP_PERIOD_NS, *, parker: NsParker = park_ns):
        self.sleep_period_ns = _check_positive("sleep_period_ns", sleep_period_ns)
        self._park = parker

    def idle(self, work_count: int | None = None) -> None:
        if work_count is not None and work_count > 0:
            return
        self._park(self.sleep_period_ns)

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"SleepingIdleStrategy(sleep_period_ns={self.sleep_period_ns})"


class SleepingMillisIdleStrategy(SleepingIdleStrategy):
    """Sleep whole milliseconds (default 1 ms): the client conductor's kind of idling."""

    alias = "sleep-ms"

    def __init__(self, sleep_period_ms: int = 1, *, parker: NsParker = park_ns):
        self.sleep_period_ms = _check_positive("sleep_period_ms", sleep_period_ms)
        super().__init__(sleep_period_ms * 1_000_000, parker=parker)

    def __repr__(self) -> str:
        return f"SleepingMillisIdleStrategy(sleep_period_ms={self.sleep_period_ms})"


class BackoffIdleStrategy:
    """Spin, then yield, then park with a period doubling from ``min_park_period_ns`` to ``max_park_period_ns``.

    The first ``max_spins`` idle steps after work spin, the next ``max_yields`` yield, every later one
    parks (first for ``min_park_period_ns``, then twice as long each time, capped at the max). Any work
    resets the progression. ``state`` is one of NOT_IDLE, SPINNING, YIELDING, PARKING (for tests/tools).
    """

    alias = "backoff"
    NOT_IDLE, SPINNING, YIELDING, PARKING = 0, 1, 2, 3
    DEFAULT_MAX_SPINS = 10
    DEFAULT_MAX_YIELDS = 5
    DEFAULT_MIN_PARK_PERIOD_NS = 1_000
    DEFAULT_MAX_PARK_PERIOD_NS = 1_000_000

    def __init__(
        self,
        max_spins: int = DEFAULT_MAX_SPINS,
        max_yields: int = DEFAULT_MAX_YIELDS,
        min_park_period_ns: int = DEFAULT_MIN_PARK_PERIOD_NS,
        max_park_period_ns: int = DEFAULT_MAX_PARK_PERIOD_NS,
        *,
        yielder: Callable[[], None] = os.sched_yield,
        parker: NsParker = park_ns,
    ):
        self.max_spins = _check_non_negative("max_spins", max_spins)
        self.max_yields = _check_non_negative("max_yields", max_yields)
        self.min_park_period_ns = _check_positive("min_park_period_ns", min_park_period_ns)
        self.max_park_period_ns = _check_positive("max_park_period_ns", max_park_period_ns)
        if max_park_period_ns < min_park_period_ns:
            raise ConfigurationError(
                f"max_park_period_ns={max_park_period_ns} < min_park_period_ns={min_park_period_ns}"
            )
        self._yield = yielder
        self._park = parker
        self.reset()

    def reset(self) -> None:
        self.spins = 0
        self.yields = 0
        self.park_period_ns = self.min_park_period_ns
        self.state = self.NOT_IDLE

    def idle(self, work_count: int | None = None) -> None:
        if work_count is not None and work_count > 0:
            if self.state != self.NOT_IDLE:
                self.reset()
            return
        if self.spins < self.max_spins:
            self.spins += 1
            self.state = self.SPINNING
        elif self.yields < self.max_yields:
            self.yields += 1
            self.state = self.YIELDING
            self._yield()
        else:
            self.state = self.PARKING
            self._park(self.park_period_ns)
            self.park_period_ns = min(self.park_period_ns * 2, self.max_park_period_ns)

    @property
    def can_wait_compiled(self) -> bool:
        """True once an idle step was taken (the last cycle found no work) with the real yielder and parker: from
        here an agent runner may run the rest of the backoff in a compiled wait (``park_until_changed``) instead
        of a duty cycle after each step. A test's yielder or parker decides its steps itself."""
        return self.state != self.NOT_IDLE and self._park is park_ns and self._yield is os.sched_yield

    def park_until_changed(self, watch, default_deadline_ns: int) -> int:
        """The backoff from where it stands, in compiled code, until a word or socket of ``watch`` (an
        ``agent.idle_watch.IdleWatch`` with its snapshot taken) has work or its deadline passes; returns the steps
        taken. Each stands for an idle step and a duty cycle that would have found no work, so the strategy
        carries on from where the wait left it."""
        spins, yields = self.max_spins - self.spins, self.max_yields - self.yields
        steps, _ = watch.park_until_changed(self.park_period_ns, default_deadline_ns, spins=spins, yields=yields,
                                            max_park_ns=self.max_park_period_ns)
        spins_left, yields_left, self.park_period_ns = watch.backoff_left
        self.spins, self.yields = self.max_spins - spins_left, self.max_yields - yields_left
        if steps > spins + yields:
            self.state = self.PARKING
        elif steps > spins:
            self.state = self.YIELDING
        elif steps:
            self.state = self.SPINNING
        return steps

    def __repr__(self) -> str:
        return (
            f"BackoffIdleStrategy(max_spins={self.max_spins}, max_yields={self.max_yields},"
            f" min_park_period_ns={self.min_park_period_ns}, max_park_period_ns={self.max_park_period_ns})"
        )


class ControllableIdleStrategy:
    """Idles as a status indicator (a counter another process sets) says: Aeron's ``controllable``.

    ``status_indicator`` is a callable returning the status, or an object with ``get()``: NOT_CONTROLLED
    (parks 1 µs), NOOP, BUSY_SPIN, YIELD or PARK (parks 1 µs); an unknown value parks.
    """

    alias = "controllable"
    NOT_CONTROLLED, NOOP, BUSY_SPIN, YIELD, PARK = 0, 1, 2, 3, 4
    PARK_PERIOD_NS = 1_000

    def __init__(self, status_indicator, *, yielder: Callable[[], None] = os.sched_yield, parker: NsParker = park_ns):
        if callable(status_indicator):
            self._status = status_indicator
        elif hasattr(status_indicator, "get"):
            self._status = status_indicator.get
        else:
            raise ConfigurationError(f"status_indicator={status_indicator!r} must be callable or have get()")
        self._yield = yielder
        self._park = parker

    def idle(self, work_count: int | None = None) -> None:
        if work_count is not None and work_count > 0:
            return
        status = self._status()
        if status == self.NOOP or status == self.BUSY_SPIN:
            return
        if status == self.YIELD:
            self._yield()
        else:
            self._park(self.PARK_PERIOD_NS)

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return "ControllableIdleStrategy()"


# ------------------------------------------------------------------------------------------- by name
_DURATION = re.compile(r"\s*(\d+)\s*(ns|us|ms|s)?\s*", re.IGNORECASE)
_NS_PER_UNIT = {None: 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_duration_ns(text: str) -> int:
    """``"250"``/``"250ns"``, ``"10us"``, ``"1ms"``, ``"2s"`` -> nanoseconds (Aeron's duration suffixes)."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigurationError(f"duration={text!r} is not <integer>[ns|us|ms|s]")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _NS_PER_UNIT[unit]


def _sleeping(init_args: str | None, status_indicator) -> SleepingIdleStrategy:
    if init_args is None:
        return SleepingIdleStrategy()
    return SleepingIdleStrategy(parse_duration_ns(init_args))


def _sleeping_ms(init_args: str | None, status_indicator) -> SleepingMillisIdleStrategy:
    if init_args is None:
        return SleepingMillisIdleStrategy()
    return SleepingMillisIdleStrategy(max(1, parse_duration_ns(init_args) // 1_000_000))


def _backoff(init_args: str | None, status_indicator) -> BackoffIdleStrategy:
    if init_args is None:
        return BackoffIdleStrategy()
    parts = init_args.split("-")
    if len(parts) != 4 or not parts[0].strip().isdigit() or not parts[1].strip().isdigit():
        raise ConfigurationError(
            f"backoff init_args={init_args!r} must be 'spins-yields-minPark-maxPark', e.g. '10-5-1us-1ms'"
        )
    return BackoffIdleStrategy(int(parts[0]), int(parts[1]), parse_duration_ns(parts[2]), parse_duration_ns(parts[3]))


def _controllable(init_args: str | None, status_indicator) -> ControllableIdleStrategy:
    if status_indicator is None:
        raise ConfigurationError("idle strategy 'controllable' needs a status_indicator (its control counter)")
    return ControllableIdleStrategy(status_indicator)


def _no_args(cls):
    return lambda init_args, status_indicator: cls()


_AGRONA = "org.agrona.concurrent."
_FACTORIES = {
    "noop": _no_args(NoOpIdleStrategy),
    "spin": _no_args(BusySpinIdleStrategy),
    "yield": _no_args(YieldingIdleStrategy),
    "sleep-ns": _sleeping,
    "sleeping": _sleeping,
    "sleep-ms": _sleeping_ms,
    "backoff": _backoff,
    "controllable": _controllable,
    _AGRONA + "NoOpIdleStrategy": _no_args(NoOpIdleStrategy),
    _AGRONA + "BusySpinIdleStrategy": _no_args(BusySpinIdleStrategy),
    _AGRONA + "YieldingIdleStrategy": _no_args(YieldingIdleStrategy),
    _AGRONA + "SleepingIdleStrategy": _sleeping,
    _AGRONA + "SleepingMillisIdleStrategy": _sleeping_ms,
    _AGRONA + "BackoffIdleStrategy": _backoff,
    _AGRONA + "ControllableIdleStrategy": _controllable,
}

IDLE_STRATEGY_NAMES = tuple(_FACTORIES)


def idle_strategy_from_name(name: str, init_args: str | None = None, *, status_indicator=None) -> IdleStrategy:
    """Build the idle strategy Aeron would for ``name`` (an alias or an Agrona class name).

    ``init_args`` follows the C driver's ``*_IDLE_STRATEGY_INIT_ARGS``: a duration for ``sleep-ns``/``sleep-ms``
    and ``spins-yields-minPark-maxPark`` for ``backoff``; the others ignore it. An unknown name is an error,
    never a silent fallback to the default.
    """
    if not isinstance(name, str):
        raise ConfigurationError(f"idle strategy name={name!r} must be a str")
    factory = _FACTORIES.get(name.strip())
    if factory is None:
        aliases = ", ".join(n for n in _FACTORIES if not n.startswith(_AGRONA))
        raise ConfigurationError(
            f"idle strategy name={name!r} is not one of {aliases} or an org.agrona.concurrent.*IdleStrategy class"
        )
    return factory(init_args, status_indicator)
