"""Run an agent's duty cycle: ``AgentRunner`` owns a loop, ``AgentInvoker`` lets the caller drive it.

Error policy (Agrona's): an exception from one duty cycle is counted, handed to the error handler and the
loop carries on, so a process never dies on one bad input from another process. ``AgentTerminationException``
stops the loop cleanly. ``on_close`` always runs exactly once, even if the runner never started.

Stopping: ``request_close()`` only stores flags, so it is safe from a signal handler (Python runs handlers
in the main thread between bytecodes; taking a lock there could deadlock against the interrupted code).
``close()`` requests and then waits for the loop to finish. ``close_on_signals`` wires SIGINT/SIGTERM to
``request_close`` for a process's main loop; ``StopOnSignals`` does it from before the runner exists (a signal
while the process starts is kept and passed on), so no moment of a start-up dies of the default disposition.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
import weakref
from typing import Any, Callable, Iterable

import numpy as np

from aeron_numba.agent.agent import Agent, AgentTerminationException
from aeron_numba.agent.clock import SystemNanoClock
from aeron_numba.agent.duty_cycle_tracker import DutyCycleTracker
from aeron_numba.agent.idle_strategy import IdleStrategy
from aeron_numba.agent.idle_watch import IdleWatch, WatchArrays
from aeron_numba.kernels.idle_wait import ring_doorbell, wake_doorbell_sleepers, wake_socket_fd

ErrorHandler = Callable[[BaseException], None]

#: The longest compiled wait when the agent names no earlier deadline: it then runs a duty cycle at least once a
#: second whatever it watches (Aeron's default timer interval).
MAX_COMPILED_WAIT_NS = 1_000_000_000


def _print_error(role_name: str, exc: BaseException) -> None:
    print(f"[{role_name}] error in duty cycle:", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)


def _as_increment(error_counter: Any) -> Callable[[], Any] | None:
    if error_counter is None:
        return None
    if hasattr(error_counter, "increment"):
        return error_counter.increment
    if callable(error_counter):
        return error_counter
    raise TypeError(f"error_counter={error_counter!r} must be callable or have increment()")


class _ErrorReporter:
    """Counts an error, then hands it to the handler; a failing handler or counter is reported on stderr."""

    def __init__(self, role_name: str, error_handler: ErrorHandler | None, error_counter: Any):
        self._role_name = role_name
        self._handler = error_handler
        self._increment = _as_increment(error_counter)
        self.error_count = 0

    def __call__(self, exc: BaseException) -> None:
        self.error_count += 1
        try:
            if self._increment is not None:
                self._increment()
            if self._handler is None:
                _print_error(self._role_name, exc)
            else:
                self._handler(exc)
        except Exception as handler_exc:  # the loop must survive its own error reporting
            _print_error(self._role_name, exc)
            print(f"[{self._role_name}] and the error handler/counter failed:", file=sys.stderr)
            traceback.print_exception(handler_exc, file=sys.stderr)


class AgentRunner:
    """Run ``agent`` in the calling thread until closed.

    Parameters
    ----------
    agent : Agent
    idle_strategy : IdleStrategy
        Called with each cycle's work count.
    error_handler : callable(exc) or None
        Receives every exception from ``on_start``/``do_work``/``on_close``; None prints to stderr.
    error_counter : callable or object with ``increment()``, optional
        Incremented once per error (the driver's ERRORS system counter).
    duty_cycle_tracker : DutyCycleTracker, optional
        If given, every ``do_work`` call is timed with ``nano_clock`` and recorded into it.

    Under ``BackoffIdleStrategy``, an agent with ``add_idle_watch`` that has backed off to the max park has its parks
    taken in a compiled wait until a word it watches changes, its deadline passes or close is requested
    (``agent/idle_watch.py``); the parks and the cycles they stand for are not timed (nothing ran).
    """

    _NEW, _RUNNING, _CLOSED = 0, 1, 2

    def __init__(
        self,
        agent: Agent,
        idle_strategy: IdleStrategy,
        error_handler: ErrorHandler | None,
        error_counter: Any = None,
        *,
        duty_cycle_tracker: DutyCycleTracker | None = None,
        nano_clock=SystemNanoClock,
    ):
        if not isinstance(agent, Agent):
            raise TypeError(f"{agent!r} is not an Agent (needs on_start, do_work, on_close, role_name)")
        if not isinstance(idle_strategy, IdleStrategy):
            raise TypeError(f"{idle_strategy!r} is not an IdleStrategy (needs alias, idle, reset)")
        self.agent = agent
        self.idle_strategy = idle_strategy
        self.duty_cycle_tracker = duty_cycle_tracker
        self._nano_clock = nano_clock
        self._report = _ErrorReporter(agent.role_name(), error_handler, error_counter)
        self._running = True
        self._close_requested = np.zeros(1, np.int64)  # the flag in memory, for a compiled wait to watch
        self._close_watch = IdleWatch.segment_of(lambda watch: watch.watch_int64(self._close_requested, 0))
        self._watch_arrays = WatchArrays()  # the arrays of the last watch, reused while its pieces are the same
        self._compiled_parks = 0
        self._doorbell: tuple[int, weakref.ref] | None = None  # (address, its buffer): rung after working cycles
        self._wake_fd = -1  # the process's socket for the doorbell's wake datagrams, once there is a doorbell
        self._state = self._NEW
        self._state_lock = threading.Lock()
        self._done = threading.Event()
        self._run_thread_id: int | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------------------------------- state
    def role_name(self) -> str:
        return self.agent.role_name()

    @property
    def is_running(self) -> bool:
        return self._state == self._RUNNING and self._running

    @property
    def is_closed(self) -> bool:
        return self._done.is_set()

    @property
    def error_count(self) -> int:
        return self._report.error_count

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    # ------------------------------------------------------------------------------------------ run
    def run(self) -> None:
        """Start the agent and run duty cycles until closed; ``on_close`` runs before this returns."""
        with self._state_lock:
            if self._state == self._CLOSED:
                return
            if self._state == self._RUNNING:
                raise RuntimeError(f"AgentRunner for {self.role_name()!r} is already running")
            self._state = self._RUNNING
            self._run_thread_id = threading.get_ident()
        try:
            if self._start_agent():
                self._loop()
        finally:
            try:
                self._close_agent()
            finally:
                with self._state_lock:
                    self._state = self._CLOSED
                self._done.set()

    def _start_agent(self) -> bool:
        try:
            self.agent.on_start()
            return True
        except AgentTerminationException:
            self._running = False
        except Exception as exc:
            self._report(exc)
            self._running = False
        return False

    def _close_agent(self) -> None:
        try:
            self.agent.on_close()
        except Exception as exc:
            self._report(exc)

    def _loop(self) -> None:
        do_work = self.agent.do_work
        strategy = self.idle_strategy
        idle = strategy.idle
        tracker = self.duty_cycle_tracker
        nano_time = self._nano_clock.nano_time
        # An agent that can name what its next cycle depends on, under a strategy that can take its steps in
        # compiled code: once a cycle found no work, the rest of the backoff runs in a kernel (agent/idle_watch.py),
        # not a duty cycle after each spin, yield and park.
        add_idle_watch = getattr(self.agent, "add_idle_watch", None)
        if not hasattr(strategy, "park_until_changed"):
            add_idle_watch = None
        # An agent that decides from each cycle's watch what to run (WatchedCompositeAgent) gets one every cycle,
        # busy or not.
        every_cycle = getattr(self.agent, "runs_by_its_watch", False)
        while self._running:
            try:
                watch = None
                if add_idle_watch is not None and (every_cycle or strategy.can_wait_compiled):
                    watch = self._idle_watch(add_idle_watch)  # its snapshot is taken before the cycle
                if tracker is None:
                    work_count = do_work()
                else:
                    start_ns = nano_time()
                    work_count = do_work()
                    tracker.record(nano_time() - start_ns)
                if watch is not None and watch.doorbell_address and (  # a new reference only for a new doorbell
                        self._doorbell is None or self._doorbell[1]() is not watch.doorbell_buffer):
                    self._doorbell = (watch.doorbell_address, weakref.ref(watch.doorbell_buffer))
                    self._wake_fd = wake_socket_fd()
                if work_count and self._doorbell is not None:
                    self._ring_doorbell()
                if watch is not None and not work_count and self._running:
                    self._compiled_parks += strategy.park_until_changed(
                        watch, time.monotonic_ns() + MAX_COMPILED_WAIT_NS)
                else:
                    idle(work_count)
            except AgentTerminationException:
                self._running = False
            except Exception as exc:
                self._report(exc)
                if self._running:
                    idle(0)  # a cycle that keeps failing must not become a hot loop

    def _ring_doorbell(self) -> None:
        """What this cycle wrote may be what an agent of another process, asleep on the driver's doorbell, waits
        for: ring it. Held weakly, so that the client closing its cnc.dat mapping is never held up by the runner
        (a closed mapping has no live view left: the reference is then dead and the ringing stops)."""
        address, buffer_ref = self._doorbell
        buffer = buffer_ref()
        if buffer is None:
            self._doorbell = None
            return
        ring_doorbell(address, self._wake_fd)

    def _idle_watch(self, add_idle_watch) -> IdleWatch | None:
        watch = IdleWatch(self._watch_arrays)
        watch.add_segment(self._close_watch)  # close() from another thread ends a compiled wait at once
        if not add_idle_watch(watch):
            return None
        watch.snapshot()
        return watch

    @property
    def compiled_parks(self) -> int:
        """Idle steps taken in compiled waits so far: each a spin, yield or park after which the agent's duty
        cycle would have found no work (see ``agent/idle_watch.py``)."""
        return self._compiled_parks

    # ---------------------------------------------------------------------------------------- close
    def request_close(self) -> None:
        """Ask the loop to stop after the current duty cycle: stores flags and wakes a wait asleep on the doorbell
        (a futex wake through ctypes: no lock, no JIT), so it is safe in signal handlers."""
        self._running = False
        self._close_requested[0] = 1
        doorbell = self._doorbell
        if doorbell is not None and doorbell[1]() is not None:  # asleep on it, a wait sees the flag only when woken
            wake_doorbell_sleepers(doorbell[0])

    def close(self, timeout_s: float | None = 10.0) -> None:
        """Request close and wait until the loop has finished and ``on_close`` has run.

        A runner that never ran calls ``on_close`` here. Called from inside the agent's own duty cycle it
        only requests (the loop ends after the current cycle). Raises ``TimeoutError`` if the loop does
        not finish within ``timeout_s`` (a duty cycle that blocks).
        """
        self.request_close()
        with self._state_lock:
            state = self._state
            if state == self._NEW:
                self._state = self._CLOSED
        if state == self._NEW:
            try:
                self._close_agent()
            finally:
                self._done.set()
            return
        if self._run_thread_id == threading.get_ident():
            return
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"agent {self.role_name()!r} did not stop within timeout_s={timeout_s}")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def __enter__(self) -> "AgentRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def start_on_thread(runner: "AgentRunner", name: str | None = None) -> threading.Thread:
        """Run ``runner`` on a new daemon thread: for agents that mostly wait (the client conductor, tests, tools); the
        GIL makes threads useless for work that competes for the CPU."""
        thread = threading.Thread(target=runner.run, name=name or runner.role_name(), daemon=True)
        runner._thread = thread
        thread.start()
        return thread

    def __repr__(self) -> str:
        return f"AgentRunner({self.role_name()!r}, idle={self.idle_strategy!r})"


class AgentInvoker:
    """Drive an agent's duty cycle from the caller's own loop (Aeron's invoker mode).

    ``start()`` runs ``on_start``; each ``invoke()`` runs one ``do_work`` and returns its work count (0 when
    not running). Errors are counted and handled as in ``AgentRunner``; ``AgentTerminationException`` closes.
    An ``invoke()`` from inside the agent's own duty cycle (an agent of the same thread waiting for this one, called
    back from a wait of this one) returns 0 without running it: a duty cycle is never entered twice.
    """

    def __init__(self, agent: Agent, error_handler: ErrorHandler | None = None, error_counter: Any = None):
        if not isinstance(agent, Agent):
            raise TypeError(f"{agent!r} is not an Agent (needs on_start, do_work, on_close, role_name)")
        self.agent = agent
        self._report = _ErrorReporter(agent.role_name(), error_handler, error_counter)
        self.is_started = False
        self.is_running = False
        self.is_closed = False
        self.is_invoking = False
        self.invocations = 0  # duty cycles entered: a watch built since none ran still holds (WatchedCompositeAgent)

    @property
    def error_count(self) -> int:
        return self._report.error_count

    def start(self) -> None:
        if self.is_started or self.is_closed:
            return
        self.is_started = True
        try:
            self.agent.on_start()
            self.is_running = True
        except AgentTerminationException:
            self.close()
        except Exception as exc:
            self._report(exc)
            self.close()

    def invoke(self) -> int:
        if not self.is_running or self.is_invoking:
            return 0
        self.is_invoking = True
        self.invocations += 1
        try:
            return self.agent.do_work()
        except AgentTerminationException:
            self.close()
        except Exception as exc:
            self._report(exc)
        finally:
            self.is_invoking = False
        return 0

    def role_name(self) -> str:
        return self.agent.role_name()

    def close(self) -> None:
        if self.is_closed:
            return
        self.is_closed = True
        self.is_running = False
        try:
            self.agent.on_close()
        except Exception as exc:
            self._report(exc)


def close_on_signals(
    target: AgentRunner | Callable[[], None], signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)
) -> dict[int, Any]:
    """Make each signal request close of ``target`` (a runner, or a no-argument callable); main thread only.

    Returns the previous handlers so a caller can restore them.
    """
    request = target.request_close if hasattr(target, "request_close") else target
    if not callable(request):
        raise TypeError(f"target={target!r} must have request_close() or be callable")

    def on_signal(signum, frame):
        request()

    return {signum: signal.signal(signum, on_signal) for signum in signals}


class StopOnSignals:
    """SIGINT/SIGTERM from construction on (main thread only): a signal that comes before ``forward_to`` is kept and
    the stop request is made as soon as there is something to stop, so a process told to stop while it starts
    (warming up, or between announcing itself ready and running its loop) still stops cleanly and removes what
    it made."""

    def __init__(self, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)):
        self.signalled = False
        self._request: Callable[[], None] | None = None
        self.previous = close_on_signals(self._on_signal, signals)

    def _on_signal(self) -> None:
        self.signalled = True
        if self._request is not None:
            self._request()

    def forward_to(self, request: Callable[[], None]) -> None:
        """From now on a signal calls ``request``; a signal that already came calls it now."""
        self._request = request
        if self.signalled:
            request()
