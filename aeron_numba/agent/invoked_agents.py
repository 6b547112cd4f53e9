"""Agents that share one thread and wait for each other (Aeron's INVOKER mode, as a ``ClusteredMediaDriver`` runs its
driver, archive and consensus module).

When agents share a thread, an agent that waits inside its duty cycle for another one (the consensus module for
its archive's answer, the archive for the driver's) waits forever unless the wait itself runs the other agent. So:

* each agent is driven by an ``AgentInvoker`` (``agent_runner.py``), whose ``invoke()`` never enters a duty cycle
  that is already running (a wait of the archive, called back from a wait of the consensus module, does not run the
  consensus module again);
* a wait runs the agents *below* its own (``InvokerGroup``): the driver for any client's wait, the archive and the
  driver for the consensus module's; never the agents above, which may be the ones waiting;
* an idle strategy handed to an agent for its waits (``InvokingIdleStrategy``) invokes those agents first, and
  counts what they did as work, so a wait that made progress is not followed by a park;
* the thread's runner drives every agent in turn through ``InvokedAgent``, which times each one's cycle for its own
  duty-cycle counters and ends the whole thread when one of them stops by itself.
"""

from __future__ import annotations

from aeron_numba.agent.agent import AgentTerminationException
from aeron_numba.agent.clock import SystemNanoClock


class InvokerGroup:
    """Several invokers (objects with ``invoke() -> int``) invoked in order as one; ``invoke()`` returns the sum."""

    def __init__(self, *invokers):
        for invoker in invokers:
            if not callable(getattr(invoker, "invoke", None)):
                raise TypeError(f"{invoker!r} has no invoke()")
        self.invokers = tuple(invokers)

    def invoke(self) -> int:
        work_count = 0
        for invoker in self.invokers:
            work_count += invoker.invoke()
        return work_count

    def __repr__(self) -> str:
        return f"InvokerGroup({', '.join(map(repr, self.invokers))})"


class InvokingIdleStrategy:
    """``idle_strategy`` that first invokes ``invoker`` (the agents a wait depends on): their work counts as work."""

    def __init__(self, idle_strategy, invoker):
        self.idle_strategy = idle_strategy
        self.invoker = invoker
        self.alias = idle_strategy.alias

    def idle(self, work_count: int | None = None) -> None:
        work = self.invoker.invoke()
        if work_count is None and work == 0:
            self.idle_strategy.idle()  # an unconditional step, as asked
        else:
            self.idle_strategy.idle((work_count or 0) + work)

    def reset(self) -> None:
        self.idle_strategy.reset()

    def __repr__(self) -> str:
        return f"InvokingIdleStrategy({self.idle_strategy!r}, {self.invoker!r})"


class InvokedAgent:
    """The agent of ``invoker`` as an agent of a composite duty cycle.

    ``on_start`` starts the invoker; ``do_work`` invokes it (timed into ``duty_cycle_tracker`` when given) and raises
    ``AgentTerminationException`` once the invoker has closed (its agent terminated, or failed to start), so that
    the thread stops with it: one part of a member cannot go on without the others. ``on_close`` closes it.
    ``add_idle_watch`` is the agent's own, when it has one."""

    def __init__(self, invoker, duty_cycle_tracker=None, nano_clock=SystemNanoClock):
        self.invoker = invoker
        self.duty_cycle_tracker = duty_cycle_tracker
        self._nano_time = nano_clock.nano_time
        add = getattr(invoker.agent, "add_idle_watch", None)
        if add is not None:
            self.add_idle_watch = add

    def role_name(self) -> str:
        return self.invoker.role_name()

    def on_start(self) -> None:
        self.invoker.start()
        if not self.invoker.is_running:
            raise AgentTerminationException(f"{self.role_name()} did not start")

    def do_work(self) -> int:
        invoker = self.invoker
        if not invoker.is_running:
            raise AgentTerminationException(f"{self.role_name()} stopped")
        tracker = self.duty_cycle_tracker
        if tracker is None:
            return invoker.invoke()
        start_ns = self._nano_time()
        work_count = invoker.invoke()
        tracker.record(self._nano_time() - start_ns)
        return work_count

    def on_close(self) -> None:
        self.invoker.close()

    def __repr__(self) -> str:
        return f"InvokedAgent({self.role_name()!r})"
