"""Agents that share a thread and wait for each other (aeron_numba.agent.invoked_agents): an invoker never enters a
duty cycle twice, a wait invokes the agents below it, and the thread stops when one part stops."""

from __future__ import annotations

import select

import numpy as np
import pytest

from aeron_numba.agent import (AgentInvoker, AgentRunner, AgentTerminationException, CompositeAgent, DutyCycleTracker,
                               NoOpIdleStrategy, SleepingIdleStrategy)
from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.agent.invoked_agents import InvokedAgent, InvokerGroup, InvokingIdleStrategy, WatchedCompositeAgent
from aeron_numba.kernels.idle_wait import changed_agents
from harness.awaiting import await_condition
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


class WordAgent:
    """An agent whose work is a word of its own changing (and, optionally, a time it names): it counts its cycles
    and reports work when the word moved since its last cycle."""

    def __init__(self, name, deadline=None):
        self.name = name
        self.word = np.zeros(1, np.int64)
        self.seen = 0
        self.calls = 0
        self.deadline = deadline  # callable: the time it names at each watch, or None

    def role_name(self):
        return self.name

    def on_start(self):
        pass

    def on_close(self):
        pass

    def add_idle_watch(self, watch):
        watch.watch_int64(self.word, 0)
        if self.deadline is not None:
            watch.run_by(self.deadline())
        return True

    def do_work(self):
        self.calls += 1
        work = int(self.word[0] != self.seen)
        self.seen = int(self.word[0])
        return work


class ManualClock:
    def __init__(self):
        self.now = 1_000

    def __call__(self):
        return self.now


def _cycle(composite, arrays=None):
    """One duty cycle as the runner runs it under a compiled-wait strategy: a watch built and snapshotted first
    (with the runner's ``WatchArrays`` when given)."""
    watch = IdleWatch(arrays)
    watched = composite.add_idle_watch(watch)
    if watched:
        watch.snapshot()
    return composite.do_work(), watch if watched else None


def test_after_an_idle_cycle_only_the_agent_whose_word_changed_runs():
    a, b, c = WordAgent("a"), WordAgent("b"), WordAgent("c")
    composite = WatchedCompositeAgent(a, b, c, nano_time=ManualClock())
    assert _cycle(composite)[0] == 0  # the first cycle runs everyone
    assert (a.calls, b.calls, c.calls) == (1, 1, 1)
    b.word[0] = 5  # lands while the thread parks on the watch of the cycle before
    assert _cycle(composite)[0] == 1
    assert (a.calls, b.calls, c.calls) == (1, 2, 1)
    assert _cycle(composite)[0] == 0  # after its work, b runs again: it may have more
    assert (a.calls, b.calls, c.calls) == (1, 3, 1)
    assert _cycle(composite)[0] == 0  # idle, nothing changed: nobody runs
    assert (a.calls, b.calls, c.calls) == (1, 3, 1)
    assert composite.cycles == [1, 3, 1]
    composite.do_work()  # no watch built (a strategy that parks in Python): everyone
    assert composite.cycles == [2, 4, 2]


class CompleteWordAgent(WordAgent):
    """A WordAgent whose watch names everything a cycle leaves (``names_work_left``)."""

    names_work_left = True


def test_an_agent_whose_watch_names_its_work_left_does_not_run_again_after_its_work():
    complete, plain = CompleteWordAgent("complete"), WordAgent("plain")
    composite = WatchedCompositeAgent(complete, plain, nano_time=ManualClock())
    assert composite.names_work_left  # its watch's time is now while an agent of it is to run again
    _cycle(composite)
    complete.word[0] = 1
    plain.word[0] = 1
    assert _cycle(composite)[0] == 2
    _cycle(composite)  # only the plain one runs again: it may have more that its word does not show
    assert (complete.calls, plain.calls) == (2, 3)
    _cycle(composite)
    assert (complete.calls, plain.calls) == (2, 3)
    complete.word[0] = 2
    assert _cycle(composite)[0] == 1
    assert (complete.calls, plain.calls) == (3, 3)
    clock = ManualClock()
    nested = WatchedCompositeAgent(CompleteWordAgent("complete"), WordAgent("plain"), nano_time=clock)
    _cycle(nested)
    _, watch = _cycle(nested)
    assert watch.deadline_ns is None  # nobody worked
    nested.agents[0].word[0] = 1
    _cycle(nested)
    _, watch = _cycle(nested)
    assert watch.deadline_ns is None  # the agent that worked names what it left
    nested.agents[1].word[0] = 1
    _cycle(nested)
    _, watch = _cycle(nested)
    assert watch.deadline_ns == clock.now  # the plain one worked: it runs again, and its parent must run it
    invoked = InvokedAgent(AgentInvoker(CompleteWordAgent("invoked")))
    assert invoked.names_work_left and not InvokedAgent(AgentInvoker(WordAgent("other"))).names_work_left


class SlotReader:
    """Reads slots of a log in order, as a subscriber reads frames: its watch names the slot at its position, empty
    (0) while there is nothing to read; all it left is there (``names_work_left``)."""

    names_work_left = True

    def __init__(self):
        self.log = np.zeros(16, np.int64)
        self._position = np.zeros(1, np.int64)  # in bytes, as a subscriber position counter holds it
        self.calls = 0

    def role_name(self):
        return "slot-reader"

    def on_start(self):
        pass

    def on_close(self):
        pass

    def add_idle_watch(self, watch):
        watch.watch_frame_at(self.log, self.log.nbytes, self._position, 0)
        return True

    @property
    def position(self):
        return int(self._position[0]) // 8

    @position.setter
    def position(self, value):
        self._position[0] = 8 * value

    def do_work(self):
        self.calls += 1
        read = 0
        while self.log[self.position] != 0 and read < 2:  # a fragment limit of 2
            self.position += 1
            read += 1
        return read


def test_a_reader_that_read_everything_is_not_run_for_the_empty_slot_it_names_next():
    reader = SlotReader()
    composite = WatchedCompositeAgent(reader, WordAgent("other"), nano_time=ManualClock())
    _cycle(composite)
    reader.log[0] = 1
    assert _cycle(composite)[0] == 1 and reader.calls == 2
    _cycle(composite)  # it names the empty slot 1: nothing to do
    assert reader.calls == 2
    reader.log[1:4] = 1
    assert _cycle(composite)[0] == 2  # two of three: the limit
    assert _cycle(composite)[0] == 1  # the slot it names next holds a frame: it runs for it
    _cycle(composite)
    assert (reader.calls, reader.position) == (4, 4)


def test_a_reader_that_ran_names_the_same_piece_again_and_the_watch_keeps_its_arrays():
    """Its watch names its next frame by its position: reading moves the position, not what it names, so a busy
    cycle builds no new arrays for it."""
    from aeron_numba.agent.idle_watch import WatchArrays

    reader = SlotReader()
    composite = WatchedCompositeAgent(InvokedAgent(AgentInvoker(reader)), WordAgent("other"), nano_time=ManualClock())
    composite.on_start()
    arrays = WatchArrays()
    _cycle(composite, arrays)
    _, before = _cycle(composite, arrays)
    reader.log[0:2] = 1
    assert _cycle(composite, arrays)[0] == 2 and reader.position == 2  # it ran, and named its watch again
    _, after = _cycle(composite, arrays)
    assert after.addresses is before.addresses  # the same pieces: the arrays as they were
    reader.log[2] = 1
    assert _cycle(composite, arrays)[0] == 1 and reader.position == 3  # and they still wake it


class CountingWatchAgent(WordAgent):
    """A WordAgent that counts how often it is asked for its watch."""

    names_work_left = True

    def __init__(self, name):
        super().__init__(name)
        self.watches = 0

    def add_idle_watch(self, watch):
        self.watches += 1
        watch.watch_int64(self.word, 0)
        watch.watch_socket(self.socket_fd)
        watch.run_by(5_000 + self.watches)
        return True


def test_an_invoked_agent_is_asked_for_its_watch_only_after_it_ran():
    import socket

    agents = [CountingWatchAgent("a"), CountingWatchAgent("b")]
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in agents]
    try:
        for agent, sock in zip(agents, sockets):
            agent.socket_fd = sock.fileno()
        invokers = [AgentInvoker(agent) for agent in agents]
        composite = WatchedCompositeAgent(*(InvokedAgent(invoker) for invoker in invokers), nano_time=ManualClock())
        composite.on_start()
        a, b = agents
        _cycle(composite)  # everyone runs; each names its watch after
        _, watch = _cycle(composite)
        assert (a.watches, b.watches) == (2, 2) and (a.calls, b.calls) == (1, 1)
        for _ in range(3):  # nobody runs: the watches named are named again as they were
            _, again = _cycle(composite)
            assert (a.watches, b.watches) == (2, 2)
            assert list(again.socket_fds) == list(watch.socket_fds)
            assert again.word_count == watch.word_count and again.deadline_ns == watch.deadline_ns == 5_002
        b.word[0] = 1
        _cycle(composite)  # b ran: it names its watch afresh; a's stays
        _, watch = _cycle(composite)
        assert (a.watches, b.watches) == (2, 3) and b.calls == 2
        invokers[0].invoke()  # a, from another agent's wait: its watch may have changed
        _cycle(composite)
        assert (a.watches, b.watches) == (3, 3)
    finally:
        for sock in sockets:
            sock.close()


def test_a_composite_inside_another_is_asked_for_its_watch_before_every_cycle():
    """Its own choice of agents rests on the snapshot of the watch built before the cycle: one named again from an
    earlier cycle would show none of the changes since (a member's driver parts, its receiver's work missed)."""
    a = CompleteWordAgent("a")
    inner = WatchedCompositeAgent(a, nano_time=ManualClock())
    invoked = InvokedAgent(AgentInvoker(inner))
    assert invoked.invocations is None
    outer = WatchedCompositeAgent(invoked, WordAgent("other"), nano_time=ManualClock())
    outer.on_start()
    for _ in range(3):
        _cycle(outer)
    calls = a.calls
    a.word[0] = 1
    _cycle(outer)
    assert a.calls == calls + 1


class HandingAgent(CompleteWordAgent):
    """Its work moves the words of the agents it hands to, as a consensus module's append moves the log a network
    cycle sends and an archive records."""

    def __init__(self, name, *to):
        super().__init__(name)
        self.to = to

    def do_work(self):
        work = super().do_work()
        if work:
            for agent in self.to:
                agent.word[0] += 1
        return work


def test_work_handed_to_an_agent_not_run_yet_runs_it_in_the_same_cycle_and_not_again_in_the_next():
    before, after = CompleteWordAgent("before"), CompleteWordAgent("after")
    producer = HandingAgent("producer", before, after)
    composite = WatchedCompositeAgent(before, producer, after, nano_time=ManualClock())
    _cycle(composite)
    _cycle(composite)
    calls = (before.calls, producer.calls, after.calls)
    producer.word[0] = 1
    assert _cycle(composite)[0] == 3  # after in the same pass, before in a second one
    assert (before.calls, producer.calls, after.calls) == tuple(c + 1 for c in calls)
    assert (before.seen, after.seen) == (1, 1)
    assert _cycle(composite)[0] == 0  # what they saw as they ran is no change for them in the next cycle
    assert (before.calls, producer.calls, after.calls) == tuple(c + 1 for c in calls)
    # Inside a composite of its own, the agent handed to runs too: its words read as the composite starts.
    consumer = CompleteWordAgent("consumer")
    inner = WatchedCompositeAgent(consumer, nano_time=ManualClock())
    handing = HandingAgent("handing", consumer)
    outer = WatchedCompositeAgent(InvokedAgent(AgentInvoker(inner)), handing, nano_time=ManualClock())
    outer.on_start()
    for _ in range(3):
        _cycle(outer)
    calls = consumer.calls
    handing.word[0] = 1
    assert _cycle(outer)[0] == 2 and consumer.calls == calls + 1 and consumer.seen == 1
    assert _cycle(outer)[0] == 0 and consumer.calls == calls + 1


def test_an_agent_that_names_a_later_time_at_each_watch_still_runs_by_the_first_it_named():
    clock = ManualClock()
    ticking = WordAgent("ticking", deadline=lambda: clock.now + 10)  # "10 from now", every time it is asked
    woken = WordAgent("woken")
    woken.do_work = lambda: woken.__dict__.__setitem__("calls", woken.calls + 1) or 0  # wakes, never has work
    composite = WatchedCompositeAgent(woken, ticking, nano_time=clock)
    _cycle(composite)  # everyone runs, at 1000
    _, watch = _cycle(composite)  # nobody; the ticking agent named 1010 right after it ran
    assert watch.deadline_ns == 1_010 and ticking.calls == 1
    for now in (1_004, 1_008):  # the other agent's wakes: the ticking one is not due, and its time does not move
        clock.now = now
        woken.word[0] += 1
        _, watch = _cycle(composite)
        assert watch.deadline_ns == 1_010
        assert ticking.calls == 1
    assert woken.calls == 3
    clock.now = 1_010
    _cycle(composite)
    assert ticking.calls == 2


def test_a_readable_socket_runs_its_agent():
    import socket

    class SocketAgent(WordAgent):
        def __init__(self, name, sock):
            super().__init__(name)
            self.sock = sock

        def add_idle_watch(self, watch):
            watch.watch_socket(self.sock.fileno())
            return super().add_idle_watch(watch)

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        receiver.bind(("127.0.0.1", 0))
        net, other = SocketAgent("net", receiver), WordAgent("other")
        composite = WatchedCompositeAgent(net, other, nano_time=ManualClock())
        _cycle(composite)
        _cycle(composite)
        assert (net.calls, other.calls) == (1, 1)
        sender.sendto(b"x", receiver.getsockname())
        await_condition(lambda: select.select([receiver], [], [], 0)[0], 5.0, "the datagram readable")
        _cycle(composite)
        assert (net.calls, other.calls) == (2, 1)
    finally:
        receiver.close()
        sender.close()


def test_a_composite_offers_a_watch_only_when_every_agent_does():
    composite = WatchedCompositeAgent(WordAgent("watched"), ScriptedAgent("plain", then=0))
    assert composite.add_idle_watch(IdleWatch()) is False
    composite.do_work()
    composite.do_work()
    assert composite.cycles == [2, 2]


class ThresholdAgent(WordAgent):
    """Has work only once its word reaches ``trip``, which its work moves on (a publication limit's trip)."""

    def __init__(self, name, trip):
        super().__init__(name)
        self.trip = trip

    def add_idle_watch(self, watch):
        watch.watch_word_reaching(self.word, self.word.ctypes.data, self.trip)
        return True

    def do_work(self):
        self.calls += 1
        if self.word[0] >= self.trip:
            self.trip = int(self.word[0]) + 100
            return 1
        return 0


def test_an_agent_watching_for_a_value_runs_only_once_its_word_reaches_it():
    limit, other = ThresholdAgent("limit", trip=100), WordAgent("other")
    composite = WatchedCompositeAgent(limit, other, nano_time=ManualClock())
    _cycle(composite)  # the first cycle runs everyone
    for position in (10, 50, 99):  # the word moves, short of the value: a change the agent does not wait for
        limit.word[0] = position
        _cycle(composite)
    assert limit.calls == 1
    limit.word[0] = 130
    assert _cycle(composite)[0] == 1  # reached: it runs and names the next value, 230
    assert (limit.calls, limit.trip) == (2, 230)
    _cycle(composite)  # after its work it runs again (it may have more), then not until 230
    limit.word[0] = 229
    _cycle(composite)
    assert limit.calls == 3
    limit.word[0] = 230
    _cycle(composite)
    assert (limit.calls, other.calls) == (4, 1)


class UnwatchableAgent(ScriptedAgent):
    """Can never name its work (a clock that is not the system's)."""

    def add_idle_watch(self, watch):
        return False


def test_a_nested_composite_runs_everyone_when_its_parent_could_not_watch_and_no_snapshot_was_taken(monkeypatch):
    """A composite inside another names its words into the parent's watch; when an agent after it cannot, the
    runner takes no snapshot, and the words' values were never read: comparing them would read past the arrays."""
    from aeron_numba.agent import invoked_agents

    compared = []

    def checked_changed_agents(previous_addresses, previous_values, previous_ranges, addresses, values, ranges,
                               changed):
        assert ranges.max(initial=0) <= addresses.shape[0] and previous_ranges.max(initial=0) <= \
            previous_addresses.shape[0], "ranges past the watched words"
        compared.append(1)
        changed_agents(previous_addresses, previous_values, previous_ranges, addresses, values, ranges, changed)

    monkeypatch.setattr(invoked_agents, "changed_agents", checked_changed_agents)
    a, b = WordAgent("a"), WordAgent("b")
    inner = WatchedCompositeAgent(a, b, nano_time=ManualClock())
    refusing = UnwatchableAgent("refusing", then=0)
    outer = WatchedCompositeAgent(inner, nano_time=ManualClock())
    _cycle(outer)
    _cycle(outer)
    assert compared  # watched cycles compare as usual
    parent = WatchedCompositeAgent(inner, refusing, nano_time=ManualClock())
    watch = IdleWatch()
    assert not parent.add_idle_watch(watch)  # inner named its words, then refusing could not: no snapshot
    calls = (a.calls, b.calls)
    parent.do_work()
    assert (a.calls, b.calls) == (calls[0] + 1, calls[1] + 1)  # everyone ran, nothing compared against no snapshot
