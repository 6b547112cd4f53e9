"""Agents that share a thread and wait for each other (aeron_numba.agent.invoked_agents): an invoker never enters a
duty cycle twice, a wait invokes the agents below it, and the thread stops when one part stops."""

from __future__ import annotations

import pytest

from aeron_numba.agent import (AgentInvoker, AgentRunner, AgentTerminationException, CompositeAgent, DutyCycleTracker,
                               NoOpIdleStrategy, SleepingIdleStrategy)
from aeron_numba.agent.invoked_agents import InvokedAgent, InvokerGroup, InvokingIdleStrategy
from tests.unit.agent.test_agent import Recorder, ScriptedAgent, stop


class WaitingAgent(ScriptedAgent):
    """An agent whose duty cycle waits: it calls ``during_cycle()`` (an invoker of another agent) once per cycle."""

    def __init__(self, name, during_cycle=None, then=1):
        super().__init__(name, then=then)
        self.during_cycle = during_cycle

    def do_work(self):
        if self.during_cycle is not None:
            self.during_cycle()
        return super().do_work()


def test_an_invoke_from_inside_the_agents_own_cycle_does_not_run_it_again():
    invoker_box = []
    agent = WaitingAgent("self-waiting", during_cycle=lambda: invoker_box[0].invoke())
    invoker = AgentInvoker(agent)
    invoker_box.append(invoker)
    invoker.start()
    assert invoker.invoke() == 1
    assert agent.calls == 1  # the inner invoke returned 0 without a second, nested cycle
    assert not invoker.is_invoking


def test_a_wait_of_the_upper_agent_runs_the_lower_one_and_not_itself():
    lower = AgentInvoker(ScriptedAgent("lower", then=2))
    upper_box = []
    group = InvokerGroup(lower)
    upper = AgentInvoker(WaitingAgent("upper", during_cycle=lambda: (group.invoke(), upper_box[0].invoke())))
    upper_box.append(upper)
    lower.start()
    upper.start()
    upper.invoke()
    assert lower.agent.calls == 1 and upper.agent.calls == 1


def test_the_group_sums_its_invokers_in_order_and_refuses_what_cannot_be_invoked():
    order = []
    a = AgentInvoker(ScriptedAgent("a", then=lambda: order.append("a") or 2))
    b = AgentInvoker(ScriptedAgent("b", then=lambda: order.append("b") or 3))
    a.start()
    b.start()
    assert InvokerGroup(a, b).invoke() == 5
    assert order == ["a", "b"]
    with pytest.raises(TypeError, match="has no invoke"):
        InvokerGroup(a, object())


def test_an_invoking_idle_strategy_runs_the_agents_first_and_counts_their_work():
    recorder = Recorder()
    busy = AgentInvoker(ScriptedAgent("busy", script=[1, 0, 0], then=0))
    busy.start()
    idle = InvokingIdleStrategy(SleepingIdleStrategy(1000, parker=recorder.parker), busy)
    assert idle.alias == "sleep-ns"
    idle.idle(0)  # the agent did work: no park
    assert recorder.calls == []
    idle.idle(0)  # nothing anywhere: one park
    assert recorder.calls == [("park", 1000)]
    idle.idle()  # an unconditional step parks when the agents did nothing
    assert recorder.calls == [("park", 1000)] * 2
    assert busy.agent.calls == 3


def test_an_invoked_agent_stops_the_thread_once_its_invoker_has_closed():
    errors = []
    ended = AgentInvoker(ScriptedAgent("ends", script=[1, stop]), errors.append)
    other = AgentInvoker(ScriptedAgent("other", then=1))
    composite = CompositeAgent(InvokedAgent(ended), InvokedAgent(other))
    runner = AgentRunner(composite, NoOpIdleStrategy(), errors.append)
    runner.run()  # returns: the first part terminated, so the thread ends
    assert errors == []
    assert ended.is_closed and ended.agent.events == ["start", "close"]
    assert other.agent.calls >= 1


def test_an_invoked_agent_that_fails_to_start_ends_the_start_and_its_error_is_reported():
    class FailingStart(ScriptedAgent):
        def on_start(self):
            raise ValueError("no archive dir")

    errors = []
    invoked = InvokedAgent(AgentInvoker(FailingStart("archive"), errors.append))
    with pytest.raises(AgentTerminationException, match="archive did not start"):
        invoked.on_start()
    assert [str(e) for e in errors] == ["no archive dir"]


def test_an_invoked_agent_times_each_cycle_into_its_own_tracker_and_offers_its_agents_idle_watch():
    recorded = []

    class Tracker(DutyCycleTracker):
        def __init__(self):
            pass

        def record(self, cycle_time_ns):
            recorded.append(cycle_time_ns)

    class Clock:
        now = 0

        def nano_time(self):
            self.now += 7
            return self.now

    class Watching(ScriptedAgent):
        def add_idle_watch(self, watch):
            return True

    invoker = AgentInvoker(Watching("timed", then=4))
    invoked = InvokedAgent(invoker, Tracker(), nano_clock=Clock())
    invoked.on_start()
    assert invoked.do_work() == 4
    assert recorded == [7]
    assert invoked.add_idle_watch(None) is True
    assert not hasattr(InvokedAgent(AgentInvoker(ScriptedAgent("plain"))), "add_idle_watch")
