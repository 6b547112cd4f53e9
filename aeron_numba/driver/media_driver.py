"""The media driver process: directory checks, cnc.dat, the agents and their threads, and launching from Python.

``python -m aeron_numba.driver`` (console script ``aeron-numba-driver``) runs a driver in the current
process until SIGINT/SIGTERM or an allowed TERMINATE_DRIVER command. ``MediaDriverProcess.launch(context)`` starts
one as a child process, waits until its cnc.dat is ready, and returns a handle that can close it.

Threading modes (``AERON_THREADING_MODE``, Aeron's): SHARED runs conductor, sender and receiver as one
``CompositeAgent`` on one thread (our default); SHARED_NETWORK runs the conductor on one thread and the sender and
receiver together on another; DEDICATED gives each its own. Each thread has its own ``AgentRunner``, idle strategy
(Aeron's rule: ``shared_idle_strategy`` in SHARED mode, ``conductor_idle_strategy`` for the conductor's own thread,
``shared_network_idle_strategy`` / ``sender_idle_strategy`` / ``receiver_idle_strategy`` for the network threads)
and duty-cycle tracker feeding its agents' max-cycle-time and threshold-exceeded system counters; every runner's
errors go to the driver's error log and ERRORS counter and the runner carries on (Agrona's policy). The conductor
runs on the thread that calls ``run()`` (the main thread: it takes the signals), the network agents on threads of
their own; with threads, the agents talk only through the proxies (``sender_proxy.py``, ``receiver_proxy.py``,
``driver_conductor_proxy.py``).

Stopping: SIGINT/SIGTERM or TERMINATE_DRIVER ends the conductor's loop; its close stops the network threads (each
ends after its current duty cycle and is joined), applies the commands they left, then runs the conductor's
``on_close``, which releases everything on its thread. A network thread that ends any other way (an exception its
runner does not catch) is recorded as an error and stops the whole driver, which then exits with an error: a
driver never looks alive (its heartbeat fresh) while nothing sends or receives.

Each network thread also runs its own compiled data path (``network_cycles.py``: the sender's, the receiver's or
both), which releases the GIL and returns when its command queue gets a command; in SHARED mode one runs beside
the three agents and returns on a client command. Under the GIL only one thread runs Python at a time, and on two
cores extra threads compete with the clients: see docs/driver-threading.md for what each mode costs.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from aeron_numba.agent import AgentRunner, AgentTerminationException, CompositeAgent, close_on_signals
from aeron_numba.agent.duty_cycle_tracker import DutyCycleTracker, SharedDutyCycleTracker
from aeron_numba.child_processes import with_parent_death_signal
from aeron_numba.kernels import idle_wait
from aeron_numba.kernels.cnc_file import CncFile, CncNotReadyError, body_problem
from aeron_numba.kernels.counters import counter_value_address
from aeron_numba.errors import AeronError, InsufficientStorageError, LayoutError
from aeron_numba.kernels.loss_report import LossReport
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import cnc
from aeron_numba.layout import counters as cl
from aeron_numba.layout.bits import semantic_version
from aeron_numba.layout.mapped_file import MappedFile

from aeron_numba.driver.command_queue import CommandQueue
from aeron_numba.driver.context import (THREADING_MODE_DEDICATED, THREADING_MODE_SHARED,
                                        THREADING_MODE_SHARED_NETWORK, DriverContext)
from aeron_numba.driver.driver_conductor import DriverConductor
from aeron_numba.driver.network_cycles import NetworkCycles
from aeron_numba.driver.receiver import Receiver
from aeron_numba.driver.sender import Sender
from aeron_numba.driver.warmup import warm_up_driver_kernels, warm_up_storage_length

LOSS_REPORT_FILE = "loss-report.dat"
log = logging.getLogger("aeron_numba.driver")
DRIVER_VERSION = "0.1.0"
DRIVER_SEMANTIC_VERSION = semantic_version(0, 1, 0)


class ActiveDriverError(AeronError):
    """Another driver is alive in the aeron dir (its heartbeat is fresher than the driver timeout)."""


def driver_heartbeat_age_ms(cnc_path: Path, now_ms: int | None = None) -> int | None:
    """Age of the driver heartbeat in ``cnc_path``, or None if there is no usable cnc.dat there."""
    try:
        cnc_file = CncFile.open(cnc_path)
    except (FileNotFoundError, CncNotReadyError, LayoutError):
        return None
    try:
        heartbeat_ms = ManyToOneRingBuffer(cnc_file.to_driver_buffer).consumer_heartbeat_time()
    finally:
        cnc_file.close()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return now_ms - int(heartbeat_ms)


def _is_garbage(ctx: DriverContext) -> bool:
    """A valid cnc.dat header over a body no driver writes (a heartbeat from the future, impossible ring
    positions) is not a live driver: the dir is replaced, not refused."""
    try:
        cnc_file = CncFile.open(ctx.cnc_path)
    except (FileNotFoundError, CncNotReadyError, LayoutError):
        return False
    try:
        return body_problem(ManyToOneRingBuffer(cnc_file.to_driver_buffer), int(time.time() * 1000),
                            ctx.driver_timeout_ms) is not None
    finally:
        cnc_file.close()


def prepare_aeron_dir(ctx: DriverContext) -> None:
    """Refuse a dir with a live driver; otherwise (stale or asked to) delete it, then create it afresh."""
    aeron_dir = Path(ctx.aeron_dir)
    if aeron_dir.exists() and not aeron_dir.is_dir():  # a file the user named: never removed, named back
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(aeron_dir))
    if aeron_dir.exists():
        age_ms = driver_heartbeat_age_ms(ctx.cnc_path)
        live = age_ms is not None and age_ms <= ctx.driver_timeout_ms and not _is_garbage(ctx)
        if live and not ctx.dir_delete_on_start:
            # As Aeron: the heartbeat of a driver that stopped cleanly stays fresh for the driver timeout.
            wait_s = -(-(ctx.driver_timeout_ms - max(age_ms, 0)) // 1000)
            raise ActiveDriverError(
                f"active driver detected in {aeron_dir}: heartbeat {age_ms} ms old <= driver_timeout_ms="
                f"{ctx.driver_timeout_ms}; stop it or use another AERON_DIR (--dir). If its driver has just "
                f"stopped, wait {wait_s} s for the heartbeat to go stale, or start with "
                f"AERON_DIR_DELETE_ON_START=true"
            )
        shutil.rmtree(aeron_dir)
    aeron_dir.mkdir(parents=True)


def check_start_storage(ctx: DriverContext, warm_up: bool) -> None:
    """Refuse to start where cnc.dat, loss-report.dat and the warm-up's scratch files cannot fit: on tmpfs
    the files would be created sparse and the first touch past the room would fail (or raise SIGBUS)."""
    if not ctx.perform_storage_checks:
        return
    sections = cnc.compute_sections(ctx.conductor_buffer_length, ctx.clients_buffer_length,
                                    ctx.counters_values_buffer_length, ctx.error_buffer_length)
    needed = sections.file_length + ctx.loss_report_buffer_length + (warm_up_storage_length() if warm_up else 0)
    stats = os.statvfs(ctx.aeron_dir)
    usable = stats.f_bavail * stats.f_frsize
    if usable < needed:
        raise InsufficientStorageError(
            f"insufficient usable storage to start a driver in {ctx.aeron_dir}: needs {needed} bytes (cnc.dat, "
            f"loss-report.dat, warm-up scratch) usable={usable}; free some space or use a larger file system "
            f"(--dir / AERON_DIR)")


def system_counter_label_suffixes(ctx: DriverContext) -> dict[int, str]:
    """What the C driver appends to the system counter labels (aeron_system_counters.c and the conductor's
    init): version and commit, the resolver name, the threading mode and each agent's cycle threshold."""
    version = f": version={DRIVER_VERSION} commit=aeron-numba"
    mode = ctx.threading_mode.strip().upper()  # as aeronmd: every cycle counter names the driver's mode
    return {
        cl.ERRORS: version,
        cl.AERON_VERSION: version,
        cl.RESOLUTION_CHANGES: f": driverName={ctx.resolver_name}",
        cl.CONDUCTOR_MAX_CYCLE_TIME: f": {mode}",
        cl.SENDER_MAX_CYCLE_TIME: f": {mode}",
        cl.RECEIVER_MAX_CYCLE_TIME: f": {mode}",
        cl.CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED: f": threshold={ctx.conductor_cycle_threshold_ns}ns {mode}",
        cl.SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED: f": threshold={ctx.sender_cycle_threshold_ns}ns {mode}",
        cl.RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED: f": threshold={ctx.receiver_cycle_threshold_ns}ns {mode}",
    }


def _max_proposer(counters, system_id: int):
    return lambda ns: counters.propose_max(system_id, ns)


def _incrementer(counters, system_id: int):
    return lambda: counters.increment(system_id)


class MediaDriver:
    """The driver running in this process: owns cnc.dat, loss-report.dat and the conductor."""

    def __init__(self, ctx: DriverContext, *, nano_clock=None, epoch_clock=None, warm_up: bool = True):
        self.ctx = ctx.conclude()
        prepare_aeron_dir(self.ctx)
        check_start_storage(self.ctx, warm_up)
        if warm_up:  # compile/load every conductor kernel before clients can see cnc.dat (see driver/warmup.py)
            # Its scratch dir goes inside the aeron dir: a driver killed while warming up leaves nothing behind
            # that removing its aeron dir (the next driver's start, a test's teardown) does not remove.
            warm_up_driver_kernels(self.ctx.aeron_dir)
        aeron_dir = Path(self.ctx.aeron_dir)
        self.loss_report = MappedFile.create(aeron_dir / LOSS_REPORT_FILE, self.ctx.loss_report_buffer_length)
        self.cnc_file = CncFile.create(
            self.ctx.cnc_path,
            to_driver_buffer_length=self.ctx.conductor_buffer_length,
            to_clients_buffer_length=self.ctx.clients_buffer_length,
            counters_values_buffer_length=self.ctx.counters_values_buffer_length,
            error_log_buffer_length=self.ctx.error_buffer_length,
            client_liveness_timeout_ns=self.ctx.client_liveness_timeout_ns,
            signal_ready=False,
        )
        clocks = {k: v for k, v in (("nano_clock", nano_clock), ("epoch_clock", epoch_clock)) if v is not None}
        self.conductor = DriverConductor(self.ctx, self.cnc_file, loss_report=LossReport(self.loss_report.buffer),
                                         **clocks)
        self.conductor.counters.allocate_system_counters(system_counter_label_suffixes(self.ctx))
        self.conductor.doorbell_counter_id = self.conductor.counters.allocate(cl.DOORBELL_NAME,
                                                                              cl.DOORBELL_COUNTER_TYPE_ID, b"")
        # The driver parks in ppoll on its sockets, where the doorbell's futex cannot wake it: rings send an empty
        # datagram to this socket instead, so that a client's or a cluster agent's new message is sent at once.
        self._doorbell_address = counter_value_address(self.conductor.counters.values_buffer,
                                                       self.conductor.doorbell_counter_id)
        self.doorbell_wake_socket = idle_wait.open_wake_socket(self._doorbell_address)
        self.conductor.doorbell_wake_fd = self.doorbell_wake_socket.fileno()
        counters = self.conductor.system_counters
        counters.increment(cl.AERON_VERSION, DRIVER_SEMANTIC_VERSION)
        # As aeronmd: the files the driver itself maps count from the start (cnc.dat, loss-report.dat).
        counters.increment(cl.BYTES_CURRENTLY_MAPPED, self.cnc_file.buffer.size + self.ctx.loss_report_buffer_length)
        self.conductor.on_start()
        self.cnc_file.signal_ready()  # clients may connect from here on (§6.1)
        self.threads: list[threading.Thread] = []
        self.failure: BaseException | None = None  # why a network thread ended unasked, if one did
        self._closing = False
        self.shared_network_cycles = None  # SHARED mode: the compiled data path of the one agent (network_cycles.py)
        self.runner, self.network_runners = self._agent_runners()
        idle = ", ".join(f"{agents}={name}" for agents, name in self.ctx.agent_idle_strategies())
        log.info("media driver %s ready in %s (pid %d, threading mode %s, idle strategies %s)", DRIVER_VERSION,
                 self.ctx.aeron_dir, os.getpid(), self.ctx.threading_mode, idle)
        for name, value in sorted(vars(self.ctx).items()):
            log.debug("setting %s=%r", name, value)

    # ----------------------------------------------------------------------------------- runners
    def _tracker(self, max_id: int, exceeded_id: int, threshold_ns: int) -> DutyCycleTracker:
        counters = self.conductor.system_counters
        return DutyCycleTracker(_max_proposer(counters, max_id), _incrementer(counters, exceeded_id),
                                cycle_time_threshold_ns=threshold_ns)

    def _shared_tracker(self, *agents: tuple[int, int, int]) -> SharedDutyCycleTracker:
        counters = self.conductor.system_counters
        return SharedDutyCycleTracker([(_max_proposer(counters, max_id), _incrementer(counters, exceeded_id), threshold)
                                       for max_id, exceeded_id, threshold in agents])

    def _agent_runners(self) -> tuple[AgentRunner, list[AgentRunner]]:
        """The conductor's runner (or SHARED mode's one runner) and the network agents' runners of this mode."""
        ctx, network = self.ctx, self.conductor.network
        conductor_cycle = (cl.CONDUCTOR_MAX_CYCLE_TIME, cl.CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED,
                           ctx.conductor_cycle_threshold_ns)
        sender_cycle = (cl.SENDER_MAX_CYCLE_TIME, cl.SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED, ctx.sender_cycle_threshold_ns)
        receiver_cycle = (cl.RECEIVER_MAX_CYCLE_TIME, cl.RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED,
                          ctx.receiver_cycle_threshold_ns)
        record_error = self.conductor._record_error
        conductor = _TerminatingConductor(self.conductor, self)
        values = self.conductor.counters.values_buffer
        if ctx.threading_mode == THREADING_MODE_SHARED:
            # Conductor, sender and receiver take turns on this thread, and each one's cycle time counters get the
            # shared cycle (with its own threshold), as in aeronmd. The compiled data path (network_cycles.py)
            # returns when the conductor has work (a client command, an IPC stream moving) or its timer is due. It
            # goes first: a datagram that ends an idle wait is served at once, not after the Python cycles (about
            # 45 us here), which the peer of a round trip would otherwise wait out at every turn.
            idle = ctx.idle_strategy("shared_idle_strategy")
            cycles = NetworkCycles(values, network.sender, network.receiver,
                                   add_watch=self.conductor.add_work_watch, idle_strategy=idle,
                                   nano_clock=self.conductor.nano_clock)
            self.shared_network_cycles = cycles
            runner = AgentRunner(CompositeAgent(cycles, conductor, network.sender, network.receiver), idle, record_error,
                                 duty_cycle_tracker=self._shared_tracker(conductor_cycle, sender_cycle, receiver_cycle))
            return runner, []
        sender_queue, receiver_queue = network.use_command_queues()
        runner = AgentRunner(conductor, ctx.idle_strategy("conductor_idle_strategy"), record_error,
                             duty_cycle_tracker=self._tracker(*conductor_cycle))
        if ctx.threading_mode == THREADING_MODE_SHARED_NETWORK:
            idle = ctx.idle_strategy("shared_network_idle_strategy")
            agent = _NetworkAgent("[sender,receiver]", (sender_queue, receiver_queue),
                                  (network.sender, network.receiver), values, idle)
            return runner, [AgentRunner(agent, idle, record_error,
                                        duty_cycle_tracker=self._shared_tracker(sender_cycle, receiver_cycle))]
        assert ctx.threading_mode == THREADING_MODE_DEDICATED, ctx.threading_mode
        sender_idle = ctx.idle_strategy("sender_idle_strategy")
        receiver_idle = ctx.idle_strategy("receiver_idle_strategy")
        return runner, [
            AgentRunner(_NetworkAgent("sender", (sender_queue,), (network.sender,), values, sender_idle), sender_idle,
                        record_error, duty_cycle_tracker=self._tracker(*sender_cycle)),
            AgentRunner(_NetworkAgent("receiver", (receiver_queue,), (network.receiver,), values, receiver_idle),
                        receiver_idle, record_error, duty_cycle_tracker=self._tracker(*receiver_cycle)),
        ]

    @property
    def shared_agent(self):
        """SHARED mode's one agent, ``[network-cycles,driver-conductor,sender,receiver]``, for a process that runs it
        in a duty cycle of its own (``ClusteredMediaDriver``) rather than through ``run()``; its cycle tracker is
        ``shared_duty_cycle_tracker`` and its errors go to ``record_error``. Only in SHARED mode: another mode's
        threads need ``run()``."""
        if self.network_runners or self.ctx.threading_mode != THREADING_MODE_SHARED:
            raise AeronError(f"threading_mode={self.ctx.threading_mode!r}: only a SHARED driver (AERON_THREADING_MODE="
                             f"SHARED) runs as one agent in another duty cycle")
        return self.runner.agent

    @property
    def shared_duty_cycle_tracker(self):
        """The tracker of ``shared_agent``'s cycles, into the conductor's, sender's and receiver's cycle counters."""
        return self.runner.duty_cycle_tracker

    def record_error(self, error: BaseException) -> None:
        """Into the driver's error log and ERRORS counter (what its runners do with an error)."""
        self.conductor._record_error(error)

    def start_network_threads(self) -> None:
        """Start each network agent's runner on a thread of its own (none in SHARED mode)."""
        for runner in self.network_runners:
            thread = threading.Thread(target=self._run_network_agent, args=(runner,),
                                      name=f"aeron-numba-{runner.role_name()}", daemon=True)
            runner._thread = thread
            self.threads.append(thread)
            thread.start()

    def _run_network_agent(self, runner: AgentRunner) -> None:
        try:
            runner.run()
        except BaseException as exc:  # noqa: BLE001 - the runner counted what it could; this ends the thread
            self._network_agent_failed(runner, exc)
            return
        if not self._closing:
            self._network_agent_failed(runner, None)

    def _network_agent_failed(self, runner: AgentRunner, exc: BaseException | None) -> None:
        """A network thread ended without being asked: record it and stop the driver (see the module docstring)."""
        error = AeronError(f"the {runner.role_name()} agent's thread stopped"
                           f"{f': {type(exc).__name__}: {exc}' if exc is not None else ''}; the driver stops")
        if exc is not None:
            error.__cause__ = exc
        self.failure = self.failure or error
        try:
            self.conductor._record_error(error)
        finally:
            self.runner.request_close()

    def stop_network_threads(self, timeout_s: float = 10.0) -> None:
        """Stop every network agent (each after its current duty cycle) and wait for its thread to end; then the
        proxies call directly, applying what the agents left queued, so the conductor can release everything."""
        self._closing = True
        for runner in self.network_runners:
            runner.request_close()
        for runner in self.network_runners:
            try:
                runner.close(timeout_s)
            except TimeoutError as exc:  # a duty cycle that blocks: recorded, the process still exits (daemon)
                self.conductor._record_error(exc)
        for thread in self.threads:
            thread.join(timeout_s)
        self.conductor.network.run_proxies_directly()

    def run(self) -> None:
        """Run until SIGINT/SIGTERM or TERMINATE_DRIVER, then release everything. Raises ``AeronError`` if a
        network thread stopped the driver by failing."""
        close_on_signals(self.runner)
        try:
            self.start_network_threads()
            self.runner.run()  # the conductor's close stops the network threads first (_TerminatingConductor)
        finally:
            self.stop_network_threads()  # if the conductor never started
            self.close()
        if self.failure is not None:
            raise self.failure

    def close(self) -> None:
        """Unmap cnc.dat and loss-report.dat, and delete the aeron dir when ``dir_delete_on_shutdown`` is set."""
        if self.doorbell_wake_socket.fileno() >= 0:  # not closed yet: cnc.dat is still mapped
            idle_wait.close_wake_socket(self._doorbell_address)  # rings stop sending before the socket goes
            self.doorbell_wake_socket.close()
        self.cnc_file.close()
        self.loss_report.close()
        if self.ctx.dir_delete_on_shutdown:
            shutil.rmtree(self.ctx.aeron_dir, ignore_errors=True)
        log.info("media driver in %s stopped%s", self.ctx.aeron_dir,
                 " and its aeron dir deleted" if self.ctx.dir_delete_on_shutdown else "")


class _TerminatingConductor:
    """Adapts the conductor to the runner: an allowed TERMINATE_DRIVER ends the run loop cleanly, and closing stops
    the network threads before the conductor's ``on_close`` releases what they used."""

    names_work_left = DriverConductor.names_work_left

    def __init__(self, conductor: DriverConductor, driver: MediaDriver):
        self.conductor = conductor
        self.driver = driver

    def role_name(self) -> str:
        return self.conductor.role_name()

    def on_start(self) -> None:
        pass  # started before cnc.dat was signalled ready

    def do_work(self) -> int:
        work = self.conductor.do_work()
        if self.conductor.terminate_requested:
            raise AgentTerminationException("driver terminated by TERMINATE_DRIVER command")
        return work

    def add_idle_watch(self, watch) -> bool:
        return self.conductor.add_idle_watch(watch)

    def on_close(self) -> None:
        self.driver.stop_network_threads()
        self.conductor.on_close()


class _NetworkAgent:
    """The sender, the receiver or both on a thread of their own: at the start of each duty cycle it applies the
    commands their proxies queued (``command_queue.py``), as Aeron's sender and receiver drain their command
    queues, then runs their Python duty cycles and their compiled data path (``network_cycles.py``, which returns
    when a command is queued)."""

    def __init__(self, role_name: str, queues: tuple[CommandQueue, ...], agents: tuple, values_buffer, idle_strategy):
        self._role_name = role_name
        self.queues = queues
        self.agents = agents
        sender = next((a for a in agents if isinstance(a, Sender)), None)
        receiver = next((a for a in agents if isinstance(a, Receiver)), None)
        self.cycles = NetworkCycles(values_buffer, sender, receiver, add_watch=self._watch_queues,
                                    idle_strategy=idle_strategy, nano_clock=agents[0].nano_clock)

    def _watch_queues(self, watch) -> None:
        for queue in self.queues:
            watch.watch_int64(queue.offers, 0)

    def role_name(self) -> str:
        return self._role_name

    def on_start(self) -> None:
        for agent in self.agents:
            agent.on_start()

    def do_work(self) -> int:
        work = 0
        for queue in self.queues:
            work += queue.drain()
        work += self.cycles.do_work()  # first, as in SHARED mode (see there)
        for agent in self.agents:
            work += agent.do_work()
        return work

    def add_idle_watch(self, watch) -> bool:
        """Only agents with nothing to poll can wait in compiled code: then for their next command."""
        if not all(agent.add_idle_watch(watch) for agent in self.agents):
            return False
        self._watch_queues(watch)
        return True

    def on_close(self) -> None:
        for agent in self.agents:
            agent.on_close()


class MediaDriverProcess:
    """Handle on a driver running as a child process (``MediaDriverProcess.launch``)."""

    def __init__(self, process: subprocess.Popen, ctx: DriverContext):
        self.process = process
        self.context = ctx
        self.ready = False  # its cnc.dat showed its pid: the dir is its own
        self.made_dir = False  # the dir did not exist before the launch: a driver stopped while starting made it

    @property
    def aeron_dir(self) -> str:
        """The aeron dir of the driver process."""
        return self.context.aeron_dir

    @classmethod
    def launch(cls, context: DriverContext | None = None, *, timeout_s: float = 30.0,
               stdout=None, stderr=None) -> "MediaDriverProcess":
        """Start ``python -m aeron_numba.driver`` with this context and wait until its cnc.dat is ready.

        The driver gets SIGTERM when this process dies, even by SIGKILL (``with_parent_death_signal``), and is
        stopped if anything (a signal included) interrupts the wait, so it never outlives its launcher.
        """
        ctx = (context or DriverContext.from_env()).conclude()
        env = dict(os.environ)
        env.update(ctx.environment())
        made_dir = not os.path.exists(ctx.aeron_dir)
        process = subprocess.Popen(
            with_parent_death_signal([sys.executable, "-m", "aeron_numba.driver"], signal.SIGTERM),
            env=env, stdout=stdout, stderr=stderr, start_new_session=True,
        )
        driver = cls(process, ctx)
        driver.made_dir = made_dir
        try:
            driver._await_ready(timeout_s)
        except BaseException:
            driver.close()
            raise
        return driver

    def _await_ready(self, timeout_s: float) -> None:
        ctx, process = self.context, self.process
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                CncFile.open(ctx.cnc_path).close()
                # A stale cnc.dat from an earlier driver may still be there: wait for our pid.
                with CncFile.open(ctx.cnc_path) as cnc_file:
                    if cnc_file.pid == process.pid:
                        self.ready = True
                        return
            except (FileNotFoundError, CncNotReadyError, LayoutError):
                pass
            if process.poll() is not None:
                raise AeronError(f"media driver exited with code {process.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise AeronError(f"media driver not ready within {timeout_s}s in {ctx.aeron_dir}")
            time.sleep(0.01)

    def close(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; returns the exit code.

        With ``dir_delete_on_shutdown`` the dir is removed here too, for a driver that could not do it itself
        (killed, or stopped while warming up): only a dir it owned or made, never one a live driver kept.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.context.dir_delete_on_shutdown and (self.ready or self.made_dir):
            shutil.rmtree(self.context.aeron_dir, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> "MediaDriverProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
