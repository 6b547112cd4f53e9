"""Wait for a condition with a deadline, never a bare sleep-and-hope (Aeron's ``Tests.await``).

``await_condition`` polls with a short backoff (1 ms growing to 10 ms) and returns the condition's first
truthy value; at the deadline it raises ``ConditionTimeout`` with the description, the timeout and the
last value seen, so a failing test says what it was waiting for and how far it got. ``assert_stays`` is
the converse, for the rare negative check ("the paused process's heartbeat does not move"): it polls for
a bounded window and fails as soon as the condition breaks.

Processes passed as ``processes=`` are checked on every poll (``check_alive()``): a child that died fails
the wait at once with its exit code and log tail, instead of timing out later with no clue.

A test that must drive something for the condition to come true (poll a subscription, run an agent's duty
cycle) passes it as ``work=``: it runs after each unmet check, and the wait sleeps only when it did no work,
as an idle strategy would.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")

MIN_POLL_INTERVAL_S = 0.001
MAX_POLL_INTERVAL_S = 0.01


class ConditionTimeout(AssertionError):
    """A condition did not hold before its deadline.

    Attributes
    ----------
    description : str
        What was awaited.
    timeout_s : float
    last_value : object
        The condition's last result (or the last ignored exception).
    attempts : int
        How many times the condition was evaluated.
    """

    def __init__(self, description: str, timeout_s: float, last_value: Any, attempts: int):
        self.description = description
        self.timeout_s = timeout_s
        self.last_value = last_value
        self.attempts = attempts
        super().__init__(
            f"timed out after {timeout_s:g}s waiting for {description} (last value: {last_value!r}, attempts={attempts})"
        )


class NotYet:
    """A falsy condition result that says why (``await_condition`` reports it as the last value)."""

    __slots__ = ("detail",)

    def __init__(self, detail: str):
        self.detail = detail

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.detail

    __str__ = __repr__


def _check_processes(processes: Iterable[Any]) -> None:
    for process in processes:
        process.check_alive()


def await_condition(
    condition: Callable[[], T],
    timeout_s: float,
    description: str,
    *,
    poll_interval_s: float = MIN_POLL_INTERVAL_S,
    max_poll_interval_s: float = MAX_POLL_INTERVAL_S,
    ignore: tuple[type[BaseException], ...] = (),
    processes: Iterable[Any] = (),
    work: Callable[[], int] | None = None,
) -> T:
    """Poll ``condition()`` until it returns something truthy and return that; raise ``ConditionTimeout`` at the deadline.

    A condition whose satisfied value may be falsy (a counter at 0) should return it wrapped (``(value,)``);
    one that is not satisfied yet may return ``NotYet("why")`` so the timeout message explains.
    Exceptions of the types in ``ignore`` count as "not yet" (the exception becomes the last value).
    ``work()``, if given, runs after each unmet check and returns a work count; after work the condition is
    checked again at once, without sleeping.
    The condition is always evaluated at least once, and once more at the deadline.
    """
    if timeout_s < 0:
        raise ValueError(f"timeout_s={timeout_s} < 0")
    processes = tuple(processes)
    deadline = time.monotonic() + timeout_s
    interval = poll_interval_s
    attempts = 0
    last: Any = None
    while True:
        attempts += 1
        try:
            last = condition()
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        _check_processes(processes)
        work_count = work() if work is not None else 0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ConditionTimeout(description, timeout_s, last, attempts)
        if work_count > 0:
            interval = poll_interval_s  # busy: the backoff starts again when the work runs dry
            continue
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, max_poll_interval_s)


def assert_stays(
    condition: Callable[[], Any],
    duration_s: float,
    description: str,
    *,
    poll_interval_s: float = MIN_POLL_INTERVAL_S,
) -> None:
    """Check ``condition()`` stays truthy for ``duration_s``; raise ``AssertionError`` the first time it is not."""
    deadline = time.monotonic() + duration_s
    attempts = 0
    while True:
        attempts += 1
        value = condition()
        if not value:
            raise AssertionError(f"{description} stopped holding after {attempts} checks (value: {value!r})")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(poll_interval_s, remaining))
