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
  duty-cycle counters and ends the whole thread when one of them stops by itself;
* ``WatchedCompositeAgent`` runs them as one duty cycle of which each cycle runs only the agents whose idle watch
  says they may have work: a word of theirs changed, a socket of theirs is readable, the time they named passed,
  or (unless their watch names what a cycle leaves undone) they worked in the cycle before. A peer's status
  message then costs the driver's cycle, not every agent's.
"""

from __future__ import annotations

import time

import numpy as np

from aeron_numba.agent.agent import AgentTerminationException, CompositeAgent
from aeron_numba.agent.clock import SystemNanoClock
from aeron_numba.kernels.counters import set_counter_value
from aeron_numba.kernels.idle_wait import (POLLFD_INT32S, changed_agents, changed_since_snapshot, first_changed_word,
                                           poll_sockets, snapshot_range)


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


class StartingInvoker:
    """An invoker known only later (``target``), which it starts on its first ``invoke()``: a consensus module
    waiting at start-up for its service's ack, with the service on its thread, starts the service from that wait
    (the service's start needs what the consensus module made before it waits: its counters)."""

    def __init__(self):
        self.target = None

    def invoke(self) -> int:
        target = self.target
        if target is None:
            return 0
        if not target.is_started:
            target.start()
        return target.invoke()

    def __repr__(self) -> str:
        return f"StartingInvoker({self.target!r})"


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
    ``add_idle_watch`` and ``names_work_left`` are the agent's own, when it has them. ``cycles`` counts the
    invocations, also stored in ``cycle_counter`` (``(values_buffer, counter_id)`` of a counter of type
    ``AGENT_CYCLES_COUNTER_TYPE_ID``) when given."""

    def __init__(self, invoker, duty_cycle_tracker=None, nano_clock=SystemNanoClock, cycle_counter=None):
        self.invoker = invoker
        self.duty_cycle_tracker = duty_cycle_tracker
        self._nano_time = nano_clock.nano_time
        self.cycles = 0
        self.cycle_counter = cycle_counter
        add = getattr(invoker.agent, "add_idle_watch", None)
        if add is not None:
            self.add_idle_watch = add
        self.names_work_left = getattr(invoker.agent, "names_work_left", False)
        self.runs_by_its_watch = getattr(invoker.agent, "runs_by_its_watch", False)  # a composite's, as its own

    def role_name(self) -> str:
        return self.invoker.role_name()

    @property
    def invocations(self) -> int | None:
        """Duty cycles of the agent entered so far, here or from another agent's wait; None for an agent that
        decides what to run from the watch built before each of its cycles (``runs_by_its_watch``): a composite
        whose watch were named again from an earlier cycle would decide from that cycle's snapshot."""
        return None if self.runs_by_its_watch else self.invoker.invocations

    def on_start(self) -> None:
        self.invoker.start()
        if not self.invoker.is_running:
            raise AgentTerminationException(f"{self.role_name()} did not start")

    def do_work(self) -> int:
        invoker = self.invoker
        if not invoker.is_running:
            raise AgentTerminationException(f"{self.role_name()} stopped")
        self.cycles += 1
        if self.cycle_counter is not None:
            set_counter_value(self.cycle_counter[0], self.cycle_counter[1], self.cycles)
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


class WatchedCompositeAgent(CompositeAgent):
    """Agents of one thread as one duty cycle that runs only the agents a change concerns.

    Every agent must offer ``add_idle_watch`` for the composite to offer one; the watch the runner builds before
    each cycle (``agent/idle_watch.py``) then holds each agent's words and sockets in a range of its own, and the
    earliest of the times the agents named. A cycle that follows a watched one runs an agent only if

    * one of its words holds another value than in the snapshot before the previous cycle (the snapshot before
      this one is taken before this decision, so a later change is seen by the next park or the next cycle), a
      reader's next frame it watches is there and was not then, or it names words it did not name then
      (``kernels/idle_wait.changed_agents``);
    * one of its sockets is readable;
    * the time it named passed. An agent that did not run keeps the earliest time it named since it last ran: it
      names its next timer afresh at each watch (a consensus module's "10 ms from now"), which would otherwise
      move away from it for as long as other agents' wakes keep coming;
    * it did work in the previous cycle, as a runner of its own would run it again before it idles: a cycle may
      stop short of what it has (a batch limit) without a word showing it. Not an agent whose watch names that
      too (``names_work_left``): a client conductor's names its broadcast's tail past what it received.

    and within the cycle, an agent not run yet runs as soon as the work of one that ran moved one of its words
    (``changed_since_snapshot``): after it in the same pass, or in another pass over those not run yet, until a
    pass does no work. A put handed from the network cycles to the consensus module, from there to the archive,
    then is one cycle, not one per hand-over, each with a watch built for it. An agent's words are read again just
    before it runs, so the next cycle compares against what it saw.

    Agents that call into each other in Python are not run for each other: a client conductor hands its owner new
    images and unavailable ones in a cycle that moves its ``work_generation``, which every owner's watch names
    (``Aeron.add_idle_watch``), and what the owner asks of its conductor it awaits in its own cycle (the driver's
    answer comes on the broadcast the conductor watches). Everything else goes through shared memory (streams,
    counters, the driver's command queue), which the words show.

    Its runner builds a watch before every cycle (``runs_by_its_watch``), busy or idle. Every agent runs whenever
    there is no watch (a strategy that parks in Python, an agent that cannot name its work now), as in
    ``CompositeAgent``. ``cycles``: how many times each agent ran, in order (a profile of where the thread's
    cycles go), also stored in ``cycle_counters[i]`` (``(values_buffer, counter_id)``, or None) when they are set.
    A composite names its own work left (``names_work_left``): while an agent of it is to run again after its work,
    the time its watch names is now. An agent that counts its
    ``invocations`` (``InvokedAgent``) is asked for its watch only after it ran, here or from another agent's wait:
    until then the words, sockets and time it named last are named again as they were (building every agent's
    watch before every cycle was most of a busy member's Python time)."""

    runs_by_its_watch = True  # its runner builds a watch before every cycle, not only once idle
    names_work_left = True  # an agent of it to run again after its work makes its watch's time now

    def __init__(self, *agents, nano_time=time.monotonic_ns):
        super().__init__(*agents)
        count = len(self.agents)
        self.cycles = [0] * count
        self.cycle_counters: list[tuple | None] = [None] * count
        self._nano_time = nano_time
        # Who runs again after a cycle with work: an agent whose watch may not show what it left.
        self._reruns_after_work = [not getattr(agent, "names_work_left", False) for agent in self.agents]
        self._watch = None  # the watch built for the coming cycle, and its per-agent layout
        self._current = None  # the watch of the cycle under way, while it runs by it
        self._ranges = np.zeros(2 * count, np.int64)
        self._sockets: list[tuple[int, int]] = [(0, 0)] * count
        self._previous = None  # the watch of the cycle before, when there was one
        self._previous_ranges = np.zeros(2 * count, np.int64)
        self._deadlines: list[int | None] = [None] * count  # earliest time each agent named since it last ran
        self._ran = [True] * count
        self._worked = [False] * count  # which agents did work in the previous cycle
        self._changed = np.zeros(count, np.int64)
        self._ran_now = np.zeros(count, np.int64)  # which agents ran in the cycle under way
        # Per agent: (invocations, watch segment, deadline) of the watch it named last, named again as is while it
        # has not run since when it counts its ``invocations`` (``IdleWatch.segment_since``), and the piece it
        # names again when it names the same.
        self._segments: list[tuple | None] = [None] * count
        # Composites among the agents: they name their agents' pieces, each kept by them, not one of their own.
        self._names_pieces = [getattr(agent, "runs_by_its_watch", False) for agent in self.agents]

    def add_idle_watch(self, watch) -> bool:
        deadline = watch.deadline_ns
        segments, deadlines, ran, ranges, sockets_of = self._segments, self._deadlines, self._ran, self._ranges, \
            self._sockets
        names_pieces = self._names_pieces
        for i, agent in enumerate(self.agents):
            words, sockets = watch.word_count, watch.socket_count
            invocations = getattr(agent, "invocations", None)
            kept = segments[i]
            if kept is not None and invocations is not None and kept[0] == invocations:
                # Not run since it named these (here or from a wait): its watch still holds, and its deadline is
                # no later than one it would name now.
                watch.add_segment(kept[1])
                named = kept[2]
            else:
                add = getattr(agent, "add_idle_watch", None)
                watch.deadline_ns = None
                mark = watch.mark()
                if add is None or not add(watch):
                    segments[i] = None
                    self._watch = None
                    watch.deadline_ns = deadline
                    return False
                named = watch.deadline_ns
                if not names_pieces[i]:
                    # Named the same as before (its readers' next frames follow their positions): the same piece,
                    # so the watch's arrays need not be built again.
                    segment = watch.segment_since(mark, kept[1] if kept is not None else None)
                    segments[i] = (invocations, segment, named)
            known = deadlines[i]
            if not ran[i] and known is not None and (named is None or known < named):
                named = known
            deadlines[i] = named
            if named is not None and (deadline is None or named < deadline):
                deadline = named
            ranges[2 * i], ranges[2 * i + 1] = words, watch.word_count
            sockets_of[i] = (sockets, watch.socket_count)
        worked, reruns = self._worked, self._reruns_after_work
        if any(worked[i] and reruns[i] for i in range(len(worked))):
            deadline = self._nano_time()  # one of its agents is to run again at once: so is this composite
        watch.deadline_ns = deadline
        self._watch = watch
        return True

    def do_work(self) -> int:
        watch, previous = self._watch, self._previous
        self._watch = self._previous = None
        if watch is not None and not watch.snapshot_taken:
            # Named, then not snapshotted: an agent after this composite in its parent could not name its work,
            # so the runner idles without the watch. Its words were never read: run everyone, as without one.
            watch = None
        if watch is None or previous is None:
            self._current = None
            work_count = self._run_all()
        else:
            self._current = watch
            work_count = self._run_due(watch, previous)
            self._current = None
        if watch is not None:
            self._previous = watch
            self._previous_ranges[:] = self._ranges
        return work_count

    def _run_all(self) -> int:
        ran, worked, ran_now = self._ran, self._worked, self._ran_now
        for i in range(len(ran)):
            ran[i] = worked[i] = False
        ran_now[:] = 0
        agents = self.agents
        work_count = 0
        while self._next_index < len(agents):  # as CompositeAgent's: after an exception, on past the culprit
            i = self._next_index
            self._next_index += 1
            ran[i] = ran_now[i] = True
            self._count_cycle(i)
            work = agents[i].do_work()
            if work:
                worked[i] = True
                work_count += work
                work_count += self.after_work(i)
        self._next_index = 0
        return work_count

    def after_work(self, i: int) -> int:
        """Called as soon as agent ``i`` did work in a cycle, before any other agent runs: for a composite whose
        first agent takes on at once what the others write (a member's network cycles sending it). The work done."""
        return 0

    def ran_in_this_cycle(self, i: int) -> bool:
        """Whether agent ``i`` ran in the cycle under way (in ``after_work``: before the agent that worked)."""
        return self._ran_now[i] != 0

    def moved_since_it_ran(self, i: int) -> bool:
        """Whether a word agent ``i`` watches moved since it last ran in the cycle under way, and its words as they are
        now are what the rest of the cycle compares against (for ``after_work`` before it runs agent ``i`` again).
        True in a cycle without a watch."""
        watch = self._current
        if watch is None:
            return True
        start, end = self._ranges[2 * i], self._ranges[2 * i + 1]
        if first_changed_word(watch.addresses[start:end], watch.values[start:end]) < 0:
            return False
        snapshot_range(watch.addresses, watch.values, start, end)
        return True

    def _run_due(self, watch, previous) -> int:
        changed = self._changed
        changed_agents(previous.addresses, previous.values, self._previous_ranges, watch.addresses, watch.values,
                       self._ranges, changed)
        now_ns = self._nano_time()
        ran, worked, reruns, ranges = self._ran, self._worked, self._reruns_after_work, self._ranges
        ran_now = self._ran_now
        ran_now[:] = 0
        work_count = 0
        first_pass, passes_on = True, True
        while passes_on:
            passes_on = False
            for i, agent in enumerate(self.agents):
                if ran_now[i]:
                    continue
                if first_pass:
                    deadline = self._deadlines[i]
                    due = (changed[i] != 0 or (worked[i] and reruns[i])
                           or (deadline is not None and deadline <= now_ns) or self._readable(watch, i))
                    worked[i] = False
                else:  # a later pass: only what this cycle's work gave it
                    due = changed[i] != 0 or self._readable(watch, i)
                if not due:
                    continue
                ran_now[i] = 1
                # Its words as it starts: the next cycle compares against what it saw, not the snapshot before
                # this cycle (a word another agent moved meanwhile is not a change for it next time).
                snapshot_range(watch.addresses, watch.values, ranges[2 * i], ranges[2 * i + 1])
                self._count_cycle(i)
                work = agent.do_work()
                if work:
                    worked[i] = True
                    work_count += work
                    work_count += self.after_work(i)
                    # Agents not run yet whose words that work moved run in this cycle too: those after it in this
                    # pass, those before it in the next.
                    changed_since_snapshot(watch.addresses, watch.values, ranges, ran_now, changed)
                    passes_on = True
            first_pass = False
        for i in range(len(ran)):
            ran[i] = ran_now[i] != 0
        return work_count

    def run_again(self, i: int) -> int:
        """Run agent ``i`` once more in the cycle under way, counted as a cycle of its own: for a parent that knows
        the work its later agents did is this agent's to move on (a member's network cycles sending what its
        consensus module and service just wrote), without a cycle and a watch built first."""
        self._count_cycle(i)
        work = self.agents[i].do_work()
        if work:
            self._worked[i] = True
        return work

    def _count_cycle(self, i: int) -> None:
        self.cycles[i] += 1
        counter = self.cycle_counters[i]
        if counter is not None:
            set_counter_value(counter[0], counter[1], self.cycles[i])

    def _readable(self, watch, i: int) -> bool:
        first, end = self._sockets[i]
        if first == end:
            return False
        return poll_sockets(watch.pollfds[first * POLLFD_INT32S:end * POLLFD_INT32S], 0, -1) != 0
