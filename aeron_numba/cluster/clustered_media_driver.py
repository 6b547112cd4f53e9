"""A cluster member's media driver, archive and consensus module in one process and one duty cycle (Aeron's
``ClusteredMediaDriver`` with the INVOKER threading modes).

A member used to be four processes, and a put crossed thirteen process hops, each a Python duty cycle and a wake-up
on a shared core. Here the three agents of a member run on the thread that calls ``run()``, as one composite duty
cycle in this order:

    [network-cycles,driver-conductor,sender,receiver]  the driver's SHARED agent: the compiled data path first
    aeron-client-conductor                             the archive's Aeron client (invoker mode)
    archive-conductor
    aeron-client-conductor                             the consensus module's Aeron client (invoker mode)
    consensus-module
    aeron-client-conductor, clustered-service          with ``service_ctx``: the service container's client and agent

Every agent is driven by an ``AgentInvoker`` and waits by invoking the agents below it (``agent/invoked_agents.py``):
a client's wait for the driver invokes the driver (``Context.driver_agent_invoker``); the consensus module's waits
for its archive (``AeronArchiveContext.agent_invoker``) and every other wait inside its duty cycle (its idle
strategy) invoke its client's conductor, the archive's client and archive, and the driver. Nothing sleeps while
another agent of the thread has the answer, and no duty cycle is entered twice. A service container on the thread
is started and invoked from the consensus module's waits too (they wait for its acks: at start-up, for snapshots,
at termination), and its own waits invoke everything else.

Each part keeps what it had in a process of its own: its files, its Aeron client (named as before), its error log
and error counter, its duty-cycle counters (each agent's cycle is timed on its own). The thread idles with the
driver's SHARED idle strategy (``member_idle_strategy``), parking in compiled code on what all of them watch, and
each cycle runs only the agents a change concerns (``WatchedCompositeAgent``): a status message from a peer runs
the driver alone, a consensus message the driver and then the consensus module, not the archive and the clients.
The driver's own parts are chosen the same way: a datagram or a stream the compiled data path serves runs its
network cycles only, not the conductor's, sender's and receiver's Python cycles. The archive records in the
driver's compiled stretch (the network cycles' stages, ``archive/recording_session.py``): the log a follower
receives, and the log its consensus module appends as a leader, is in its segment file before the archive's own
cycle would have run, which then does not run. On a follower the AppendPosition for what was recorded goes out
there too (``kernels/cluster_append_position``): a block of the log costs the member no Python cycle until its
commit position comes. A leader's commit is taken there from its followers' AppendPositions
(``kernels/cluster_leader_commit``), and a compiled service on this thread reads what was committed, and sends its
replies, there as well (``kernels/cluster_service_stage``); a commit the consensus module sets in Python is taken
on by running the stretch once more in the same cycle (``NetworkStages.any_due``).

Start-up: the archive's and the consensus module's kernels are compiled or loaded first, since nothing runs the
driver (its heartbeat, its clients' liveness) while the GIL compiles; then the driver, the archive (its catalog
recovered), the consensus module. ``close()`` releases them in the reverse order, so the driver is there to the
end for the others' clients. The service container runs here only when it is given (``service_ctx`` and the
service): a compiled service, whose messages never run Python callbacks that could stall the consensus module;
otherwise it runs in a process of its own connected to this driver (``commands/cluster.py`` decides).
"""

from __future__ import annotations

import logging
import threading
import time

from aeron_numba.agent import AgentInvoker, AgentRunner, close_on_signals
from aeron_numba.agent.invoked_agents import InvokedAgent, InvokerGroup, StartingInvoker, WatchedCompositeAgent
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout.bits import NULL_VALUE

log = logging.getLogger("aeron_numba.cluster")


#: The member thread's backoff when the driver's shared idle strategy is ``backoff`` with no init args
#: (AERON_SHARED_IDLE_STRATEGY_INIT_ARGS unset): straight to parks, 100 us doubling to 100 ms, without Aeron's spins,
#: yields and 1 us ramp, and no polling on in the compiled network cycles after a datagram. Every wake of a member is
#: signalled (a datagram on a watched socket, the doorbell rung by the node's other processes, the earliest deadline
#: of its agents), so the ramp's short parks only add timer wake-ups; and members share the machine's cores, so a
#: member polling for its peer's next datagram takes the CPU that peer needs to send it. Measured on an idle and a
#: busy 3-member cluster against Aeron's ramp (``python -m benchmarks.cluster.member_profile --env
#: AERON_SHARED_IDLE_STRATEGY_INIT_ARGS=10-5-1us-1ms``; docs/cluster.md has the figures).
MEMBER_BACKOFF_INIT_ARGS = "0-0-100us-100ms"


def uses_member_backoff(driver_ctx) -> bool:
    """True when the member idles with ``MEMBER_BACKOFF_INIT_ARGS`` (the default backoff, no init args set)."""
    return driver_ctx.shared_idle_strategy == "backoff" and driver_ctx.shared_idle_strategy_init_args is None


def member_idle_strategy(driver_ctx):
    """The idle strategy of the member's thread: the driver's shared one, or ``MEMBER_BACKOFF_INIT_ARGS`` for the
    default backoff."""
    from aeron_numba.agent import idle_strategy_from_name

    if uses_member_backoff(driver_ctx):
        return idle_strategy_from_name("backoff", MEMBER_BACKOFF_INIT_ARGS)
    return driver_ctx.idle_strategy("shared_idle_strategy")


class _DriverPythonRuns:
    """How often the driver's Python parts ran, and the compiled network cycles handed them work."""

    def __init__(self, network_cycles):
        self.runs = 0
        self.network_cycles = network_cycles

    @property
    def generation(self) -> tuple[int, int]:
        return self.runs, self.network_cycles.python_returns


class _DriverPart:
    """The driver's conductor, sender or receiver as an agent of the member's driver parts, whose ``invocations``
    move whenever any Python part of the driver ran or the network cycles handed one of them work. Each part's
    watch reads the others' state (the conductor adds a publication to the sender, the sender's datagrams create
    the conductor's images) and the rows the compiled path writes (the times of the last status message or
    heartbeat), but the compiled path hands over to Python whatever would need a part sooner (``run_network_cycles``:
    a new receiver, a SETUP, NAKs, a due NAK): until then a watch named stays right, its times at worst early, and
    is named again as it was (``WatchedCompositeAgent``) instead of afresh before every cycle."""

    def __init__(self, part, runs: _DriverPythonRuns):
        self.part = part
        self._runs = runs
        self.names_work_left = getattr(part, "names_work_left", False)
        self.add_idle_watch = part.add_idle_watch

    @property
    def invocations(self) -> tuple[int, int]:
        return self._runs.generation

    def role_name(self) -> str:
        return self.part.role_name()

    def on_start(self) -> None:
        self.part.on_start()

    def do_work(self) -> int:
        self._runs.runs += 1
        return self.part.do_work()

    def on_close(self) -> None:
        self.part.on_close()

    def __repr__(self) -> str:
        return f"_DriverPart({self.part!r})"


def _driver_parts(driver) -> list:
    """The driver's SHARED agent's parts, network cycles first, the Python ones as ``_DriverPart``."""
    cycles = driver.shared_network_cycles
    runs = _DriverPythonRuns(cycles)
    return [part if part is cycles else _DriverPart(part, runs) for part in driver.shared_agent.agents]


class _MemberAgent(WatchedCompositeAgent):
    """The member's composite duty cycle. Closing is ``ClusteredMediaDriver.close``'s, in its order.

    The driver runs first; what the agents after it write to the network (the log appended, an append or commit
    position, a reply) would wait for the next cycle, after a watch is built and snapshotted for it. So as soon as
    one of them did work after the driver ran that moved a word the driver watches, the driver's network cycles run
    once more (``run_again``), before any other agent: they send it at once, and their stages take it on (the
    archive records the log the consensus module just appended, so the archive's own cycle has nothing left to do).
    A driver not run yet in the cycle runs in the next pass if that work moved its words, first of all."""

    def __init__(self, *agents, driver_parts: WatchedCompositeAgent, network_cycles_index: int, stages):
        super().__init__(*agents)
        self._driver_parts = driver_parts
        self._network_cycles_index = network_cycles_index
        self._stages = stages

    def after_work(self, i: int) -> int:
        # Not for the driver's own work, a driver still to run, or work that moved nothing the driver watches (a
        # publication's frame to send, an image's subscriber, the conductor's commands) and left its stages
        # nothing (a commit position the consensus module set, which the service's log stage reads): no need.
        if i == 0 or not self.ran_in_this_cycle(0) or not (self.moved_since_it_ran(0) or self._stages.any_due()):
            return 0
        return self._driver_parts.run_again(self._network_cycles_index)

    def on_close(self) -> None:
        pass


class ClusteredMediaDriver:
    """Driver, archive and consensus module of one member (see the module docstring). ``run()`` blocks until
    SIGINT/SIGTERM, ``request_close()``, the cluster's termination or one part stopping; ``close()`` (also after a
    failed start) releases everything. A node stops in Aeron's order: ``close_consensus_module()``, then
    ``serve_until`` its service container has stopped (the driver still answering it), then ``close()``."""

    def __init__(self, driver_ctx, archive_ctx, consensus_module_ctx, service_ctx=None, service=None):
        from aeron_numba.archive.archive import Archive
        from aeron_numba.archive.client import AeronArchiveContext
        from aeron_numba.archive.warmup import warm_up_archive_kernels
        from aeron_numba.cluster.consensus_module import ConsensusModule
        from aeron_numba.cluster.service.container import ClusteredServiceContainer
        from aeron_numba.cluster.warmup import warm_up_cluster_kernels
        from aeron_numba.driver.media_driver import MediaDriver

        self.driver = self.archive = self.consensus_module = self.service_container = None
        self.runner: AgentRunner | None = None
        self._archive_aeron = self._consensus_module_aeron = None  # the two clients, in invoker mode
        self._service_aeron = None  # the service container's, when it runs here
        self._stop_requested = False
        self._invokers: dict[str, AgentInvoker] = {}
        self.stopped: list[str] = []  # after run(): ``stopped_parts()`` as the duty cycle ended
        try:
            warm_up_archive_kernels()
            warm_up_cluster_kernels()
            self.driver = MediaDriver(driver_ctx)
            if uses_member_backoff(driver_ctx):
                self.driver.shared_network_cycles.idle_ns = 0  # a datagram's stretch ends once nothing is left
            # The driver's parts (network cycles, conductor, sender, receiver) run as the member's agents do: only
            # those a wake concerns, so a datagram the compiled data path serves costs no Python duty cycle of
            # the conductor, sender and receiver.
            self.driver.shared_network_cycles.serve_as_own_agent()
            driver_parts = WatchedCompositeAgent(*_driver_parts(self.driver))
            driver = self._invokers["media driver"] = AgentInvoker(driver_parts, self.driver.record_error)
            driver.start()  # the archive's and consensus module's clients are answered by it from here on
            archive_aeron = self._archive_aeron = self._connect(
                driver, "archive" if archive_ctx.archive_id == NULL_VALUE else f"archive-{archive_ctx.archive_id}")
            self.archive = Archive(archive_ctx, aeron=archive_aeron)
            # The archive records in the driver's compiled stretch: a log block received is recorded there and then.
            self.archive.conductor.recording_stages = self.driver.shared_network_cycles.stages
            archive = self._invokers["archive"] = AgentInvoker(self.archive.conductor,
                                                               self.archive.conductor.record_error)
            archive.start()
            ctx = consensus_module_ctx
            cm_aeron = self._consensus_module_aeron = self._connect(
                driver, f"consensus-module-{ctx.cluster_id}-{ctx.cluster_member_id}")
            archive_and_below = InvokerGroup(archive_aeron.conductor_agent_invoker, archive, driver)
            # The consensus module waits for its service's acks inside its own cycle (its start-up, snapshots,
            # termination): a service on this thread is invoked, and started, from those waits.
            service_starter = StartingInvoker()
            cm_waits = InvokerGroup(cm_aeron.conductor_agent_invoker, archive_and_below)
            if service_ctx is not None:
                cm_waits = InvokerGroup(cm_aeron.conductor_agent_invoker, service_starter, archive_and_below)
            self.consensus_module = ConsensusModule(
                ctx, cm_aeron, archive_context=AeronArchiveContext(
                    control_response_stream_id=ctx.archive_control_response_stream_id,
                    agent_invoker=archive_and_below),
                co_agents=cm_waits)
            # A follower's AppendPositions go from the driver's stretch, once the archive recorded the log there.
            self.consensus_module.agent.use_network_stages(self.driver.shared_network_cycles.stages)
            cm = self._invokers["consensus module"] = AgentInvoker(self.consensus_module.agent,
                                                                   self.consensus_module.record_error)
            agents = [
                InvokedAgent(driver, self.driver.shared_duty_cycle_tracker),
                InvokedAgent(archive_aeron.conductor_agent_invoker),
                InvokedAgent(archive, self.archive.runner.duty_cycle_tracker),
                InvokedAgent(cm_aeron.conductor_agent_invoker),
                InvokedAgent(cm, self.consensus_module.duty_cycle_tracker()),
            ]
            owners = ["", "archive", "", "consensus module", ""]  # whose client each conductor is
            if service_ctx is not None:
                service_aeron = self._service_aeron = self._connect(
                    driver, f"cluster-service-{service_ctx.cluster_id}-{service_ctx.service_id}")
                self.service_container = ClusteredServiceContainer(
                    service_ctx, service, aeron=service_aeron, wait_invoker=InvokerGroup(
                        service_aeron.conductor_agent_invoker, cm_aeron.conductor_agent_invoker, cm,
                        archive_and_below))
                container = self.service_container
                # The service's committed log is read, and its replies sent, in the driver's stretch.
                container.agent.use_network_stages(self.driver.shared_network_cycles.stages)
                service_starter.target = self._invokers["service container"] = AgentInvoker(
                    container.agent, container.record_error)
                agents += [InvokedAgent(service_aeron.conductor_agent_invoker),
                           InvokedAgent(service_starter.target, container.runner.duty_cycle_tracker)]
                owners += ["service container", ""]
            self.agents = tuple(agents)
            counters = self.driver.conductor.counters
            for agent, owner in zip(self.agents, owners):  # each agent's cycles, for a profile read from cnc.dat
                role = agent.role_name() + (f" of the {owner}" if owner else "")
                agent.cycle_counter = (counters.values_buffer, counters.allocate(
                    counters_layout.AGENT_CYCLES_LABEL.format(role=role), counters_layout.AGENT_CYCLES_COUNTER_TYPE_ID))
            for i, part in enumerate(driver_parts.agents):  # and which of the driver's parts those cycles ran
                driver_parts.cycle_counters[i] = (counters.values_buffer, counters.allocate(
                    counters_layout.AGENT_CYCLES_LABEL.format(role=f"{part.role_name()} of the media driver"),
                    counters_layout.AGENT_CYCLES_COUNTER_TYPE_ID))
            member = _MemberAgent(*self.agents, driver_parts=driver_parts,
                                  network_cycles_index=driver_parts.agents.index(self.driver.shared_network_cycles),
                                  stages=self.driver.shared_network_cycles.stages)
            self.runner = AgentRunner(member, member_idle_strategy(driver_ctx),
                                      self.driver.record_error)
        except BaseException:
            self.close()
            raise

    def _connect(self, driver_invoker, client_name: str):
        """An Aeron client of this process's driver, in invoker mode, whose waits invoke the driver."""
        from aeron_numba.client import Aeron, Context

        return Aeron.connect(Context(aeron_dir=self.driver.ctx.aeron_dir, client_name=client_name,
                                     use_conductor_agent_invoker=True, driver_agent_invoker=driver_invoker))

    # ---------------------------------------------------------------------------------------------- facts
    def role_name(self) -> str:
        return self.runner.role_name() if self.runner is not None else "[]"

    def stopped_parts(self) -> list[str]:
        """The parts whose agent ended (terminated or failed), by name: ``"media driver"``, ``"archive"``,
        ``"consensus module"`` (a cluster shutdown or abort ends it), ``"service container"`` when it runs here."""
        return [name for name, invoker in self._invokers.items() if invoker.is_closed]

    def service_stopped(self) -> bool:
        """True once the service container on this thread has stopped (its agent terminated or failed), or when
        none runs here."""
        invoker = self._invokers.get("service container")
        return invoker is None or invoker.is_closed

    # ---------------------------------------------------------------------------------------------- running
    def request_close(self) -> None:
        """Stop after the current duty cycle (safe in a signal handler: it only stores flags). A wait inside the
        consensus module's cycle ends too."""
        self._stop_requested = True
        if self.consensus_module is not None:
            self.consensus_module.request_close()
        if self.runner is not None:
            self.runner.request_close()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def run(self) -> None:
        """Run the member's duty cycle on this thread until it stops (see the class). The parts stay open, for
        ``serve_until`` and ``close``."""
        if threading.current_thread() is threading.main_thread():
            close_on_signals(self.request_close)
        self.runner.run()
        self.stopped = self.stopped_parts()

    def close_consensus_module(self) -> None:
        """Close the consensus module (its agent, files and client) and leave the archive and the driver open: a
        service container of this driver then sees its consensus module go while its driver still answers."""
        invoker = self._invokers.get("consensus module")
        if invoker is not None:
            self._quietly("closing the consensus module's agent", invoker.close)
        if self.consensus_module is not None:
            self._quietly("closing the consensus module", self.consensus_module.close)
            self.consensus_module = None
        if self._consensus_module_aeron is not None:
            self._quietly("closing the consensus module's client", self._consensus_module_aeron.close)
            self._consensus_module_aeron = None

    def serve_until(self, condition, timeout_s: float) -> bool:
        """Run the driver and the archive (and their client) until ``condition()`` or ``timeout_s``: what the
        member's other processes need while this one waits for them; True if ``condition()`` became true."""
        from aeron_numba.agent.idle_strategy import SleepingIdleStrategy

        rest = [invoker for name, invoker in self._invokers.items() if name != "consensus module"]
        for aeron in (self._archive_aeron, self._service_aeron):
            if aeron is not None:
                rest.append(aeron.conductor_agent_invoker)
        idle = SleepingIdleStrategy(1_000_000)
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            idle.idle(sum(invoker.invoke() for invoker in rest))
        return True

    def close(self) -> None:
        """Consensus module, archive, then driver: each agent's ``on_close``, then its files, and the two clients
        before the driver, which answers their last commands. Idempotent."""
        if self.runner is not None and not self.runner.is_closed:
            self.runner.close()  # one that never ran (its composite's on_close is nothing)
        self.close_consensus_module()
        parts = (("service container", self.service_container), ("archive", self.archive),
                 ("media driver", self.driver))
        for name, part in parts:
            invoker = self._invokers.get(name)
            if invoker is not None:
                self._quietly(f"closing the {name}'s agent", invoker.close)
            if part is not None:
                self._quietly(f"closing the {name}", part.close)
            if name == "service container" and self._service_aeron is not None:
                self._quietly("closing the service container's client", self._service_aeron.close)
                self._service_aeron = None
            if name == "archive" and self._archive_aeron is not None:
                self._quietly("closing the archive's client", self._archive_aeron.close)
                self._archive_aeron = None
        self.service_container = self.archive = self.driver = None

    @staticmethod
    def _quietly(what: str, action) -> None:
        try:
            action()
        except Exception as exc:  # keep closing the others
            log.error("%s: %s", what, exc)
