"""IdleWatch and the runner's compiled wait: an idle agent that names its work runs its backoff in compiled code
after its first idle cycle, a change to a watched word or a datagram on a watched socket wakes it, and an agent
that cannot name its work idles as before."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from aeron_numba.agent import AgentRunner, BackoffIdleStrategy, CompositeAgent, agent_runner
from aeron_numba.agent.idle_strategy import YieldingIdleStrategy
from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.kernels import idle_wait as iw
from aeron_numba.layout.counters import COUNTER_LENGTH, DOORBELL_POLL_WAITERS_OFFSET, DOORBELL_WAITERS_OFFSET
from harness.awaiting import assert_stays, await_condition

FAR_NS = 60_000_000_000


def backoff() -> BackoffIdleStrategy:
    """Backs off to a 1 ms park at once, with the real parker (a compiled wait needs it)."""
    return BackoffIdleStrategy(max_spins=0, max_yields=0, min_park_period_ns=1_000_000, max_park_period_ns=1_000_000)


class WatchingAgent:
    """Has work when its word moves past what it last saw; names that word and a far deadline when asked."""

    def __init__(self, *, can_watch: bool = True):
        self.word = np.zeros(1, np.int64)
        self.seen = 0
        self.cycles = 0
        self.watches = 0
        self.can_watch = can_watch

    def role_name(self) -> str:
        return "watching"

    def on_start(self) -> None:
        pass

    def on_close(self) -> None:
        pass

    def do_work(self) -> int:
        self.cycles += 1
        value = int(self.word[0])
        if value == self.seen:
            return 0
        self.seen = value
        return 1

    def add_idle_watch(self, watch: IdleWatch) -> bool:
        self.watches += 1
        if not self.can_watch:
            return False
        watch.watch_int64(self.word, 0)
        watch.run_by(time.monotonic_ns() + FAR_NS)
        return True


class PlainAgent(WatchingAgent):
    add_idle_watch = None  # no watch at all


def test_watch_snapshot_sees_a_change_made_after_it_and_the_wait_returns_at_once():
    buffer = np.zeros(2, np.int64)
    watch = IdleWatch()
    watch.watch_int64(buffer, 8)
    watch.snapshot()
    assert not watch.changed()
    buffer[1] = 3  # lands while the duty cycle after the snapshot runs
    assert watch.changed()
    assert watch.park_until_changed(100_000, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)


def test_watch_deadline_is_the_earliest_asked_and_the_callers_cap_applies():
    watch = IdleWatch()
    watch.run_by(5_000)
    watch.run_by(9_000)
    assert watch.deadline_ns == 5_000
    watch.snapshot()
    # both deadlines long past: one park, then the deadline
    assert watch.park_until_changed(100_000, 1) == (1, iw.WOKEN_BY_DEADLINE)


def test_watch_refuses_a_closed_socket_naming_the_fd():
    with pytest.raises(ValueError, match="fd=-1"):
        IdleWatch().watch_socket(-1)


@pytest.mark.parametrize("offset, match", [(4, "aligned"), (16, "buffer length"), (-8, "buffer length")])
def test_watch_refuses_a_word_it_cannot_read_naming_the_offset(offset, match):
    with pytest.raises(ValueError, match=match):
        IdleWatch().watch_int64(np.zeros(2, np.int64), offset)


def test_watch_addresses_follow_each_buffer_and_a_freed_buffer_is_forgotten():
    from aeron_numba.agent import idle_watch

    first, second = np.zeros(4, np.int64), np.zeros(4, np.int64)
    watch = IdleWatch()
    watch.watch_int64(first, 8)
    watch.watch_int64(second, 16)
    watch.watch_int64(first, 24)  # an address known already
    watch.snapshot()
    assert list(watch.addresses) == [first.ctypes.data + 8, second.ctypes.data + 16, first.ctypes.data + 24]
    key = id(first)
    del watch, first  # the watch held the buffer; now nothing does
    assert key not in idle_watch._BUFFERS  # a new buffer at this id is looked up afresh
    with pytest.raises(ValueError, match="C-contiguous"):
        IdleWatch().watch_int64(np.zeros((4, 4), np.int64)[:, 1], 0)


@pytest.mark.parametrize("span, match", [(0, "span=0"), (12, "span=12"), (64, "span=64")])
def test_watch_refuses_frame_slots_it_cannot_read_naming_the_span(span, match):
    with pytest.raises(ValueError, match=match):
        IdleWatch().watch_frame_at(np.zeros(4, np.int64), span, np.zeros(1, np.int64), 0)


def test_a_watch_of_a_readers_next_frame_follows_its_position_without_being_named_again():
    log, position = np.zeros(12, np.int64), np.zeros(1, np.int64)  # three "terms" of 32 bytes
    watch = IdleWatch()
    watch.watch_frame_at(log, log.nbytes, position, 0)
    for _ in range(4):  # the fourth frame is past the end of the terms: back at their start
        slot = (int(position[0]) % log.nbytes) // 8
        watch.snapshot()  # as a runner does before each cycle
        assert not watch.changed()
        log[slot] = -32  # claimed: not a frame to read yet
        assert not watch.changed()
        log[slot] = 32  # committed
        assert watch.changed()
        assert watch.park_until_changed(100_000, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)
        log[slot] = 0  # read (a log is cleaned behind its readers)
        position[0] += 32


def test_a_runner_reuses_the_arrays_of_a_watch_made_of_the_same_pieces():
    from aeron_numba.agent.idle_watch import WatchArrays

    words, other = np.zeros(2, np.int64), np.zeros(1, np.int64)
    arrays = WatchArrays()
    kept = IdleWatch.segment_of(lambda watch: watch.watch_int64(words, 0))

    def build(name_again=None):
        watch = IdleWatch(arrays)
        watch.add_segment(kept)
        mark = watch.mark()
        (name_again or (lambda w: w.watch_int64(words, 8)))(watch)
        piece = watch.segment_since(mark, build.last)
        build.last = piece
        watch.snapshot()
        return watch, piece

    build.last = None
    first, first_piece = build()
    second, second_piece = build()
    assert second_piece is first_piece  # named the same: the piece it named before
    assert second.addresses is first.addresses and second.values is not first.values  # arrays kept, values its own
    words[1] = 5
    assert first.changed() and second.changed()
    third, third_piece = build(lambda w: w.watch_int64(other, 0))  # named something else: arrays built anew
    assert third_piece is not first_piece and third.addresses is not first.addresses
    assert list(third.addresses) == [words.ctypes.data, other.ctypes.data] and list(third.values) == [0, 0]
    assert not third.changed()
    other[0] = 1
    assert third.changed()


def test_a_piece_named_again_brings_the_doorbell_it_was_named_with():
    """A composite names an agent's kept piece again while it has not run: the doorbell in it must still be slept on
    and rung (the agent's Aeron client named it once)."""
    values = np.zeros(COUNTER_LENGTH * 2, np.uint8)
    word = np.zeros(1, np.int64)
    first = IdleWatch()
    mark = first.mark()
    first.watch_int64(word, 0)
    first.use_doorbell(values, 1, wake_fd=7)
    piece = first.segment_since(mark)
    again = IdleWatch()
    again.watch_int64(word, 0)  # another agent's word before it
    mark = again.mark()
    again.add_segment(piece)
    assert again.segment_since(mark) is piece
    if iw.SYS_FUTEX is not None:  # a platform without the futex call names no doorbell
        assert (again.doorbell_address, again.wake_fd) == (values.ctypes.data + COUNTER_LENGTH, 7)
        assert again.doorbell_buffer is values
    assert again.word_count == 2


def test_a_kept_piece_is_named_again_while_its_key_is_the_same_and_afresh_once_it_changes():
    from aeron_numba.agent.idle_watch import KeptPiece

    words = np.zeros(2, np.int64)
    kept, named = KeptPiece(), []

    def name(offset):
        return lambda watch: named.append(offset) or watch.watch_int64(words, offset)

    def build(key, offset):
        watch = IdleWatch()
        mark = watch.mark()
        kept.add_to(watch, key, name(offset))
        return watch.segment_since(mark)

    images = ("image",)
    first = build(images, 0)
    assert build(images, 8) is first and named == [0]  # the same key: not named again
    moved = build(("image", "another"), 8)
    assert named == [0, 8] and moved is not first and moved.addresses == (words.ctypes.data + 8,)


def test_composite_agent_watches_only_if_every_agent_can():
    a, b = WatchingAgent(), WatchingAgent()
    watch = IdleWatch()
    assert CompositeAgent(a, b).add_idle_watch(watch)
    assert watch.word_count == 2
    assert not CompositeAgent(a, WatchingAgent(can_watch=False)).add_idle_watch(IdleWatch())
    assert not CompositeAgent(a, PlainAgent()).add_idle_watch(IdleWatch())


def run_on_thread(runner: AgentRunner) -> threading.Thread:
    return AgentRunner.start_on_thread(runner, "idle-watch-test")


@pytest.mark.parametrize("strategy", [backoff, YieldingIdleStrategy], ids=["backoff", "yield"])
def test_an_idle_agent_waits_in_compiled_code_and_a_watched_word_wakes_it(strategy):
    """Backing off, the wait parks between looks; yielding, it yields between them."""
    agent = WatchingAgent()
    runner = AgentRunner(agent, strategy(), None)
    run_on_thread(runner)
    try:
        # The runner asks for a watch once a cycle found no work, then waits: the deadline is a minute away, so from
        # here on only the word (or close) can bring the agent back to a duty cycle.
        await_condition(lambda: agent.watches >= 1, 10.0, "the idle runner asks for an idle watch")
        # One more cycle (the one the watch's snapshot precedes), then none: a runner idling in Python would run a
        # cycle after each park or yield. (compiled_parks is counted when a wait returns: asserted at the end.)
        cycles = agent.cycles
        assert_stays(lambda: agent.cycles <= cycles + 1, 0.05, "no duty cycle while the watched word stays")
        agent.word[0] = 1
        await_condition(lambda: agent.seen == 1, 10.0, "the change to the watched word wakes the agent")
        agent.word[0] = 2  # again, after the strategy has backed off from this work
        await_condition(lambda: agent.seen == 2, 10.0, "a second change wakes it again")
    finally:
        runner.close(timeout_s=10.0)
    assert runner.is_closed and runner.compiled_parks > 0  # both wakes ended a wait


class DoorbellAgent(WatchingAgent):
    """A WatchingAgent whose waits sleep on, and whose working cycles ring, the doorbell at counter id 0 of
    ``values`` (as an aeron-numba client's agents do with their driver's)."""

    def __init__(self, values: np.ndarray, socket_fd: int = -1, wake_fd: int = -1):
        super().__init__()
        self.values = values
        self.socket_fd = socket_fd  # a socket of its own, as the driver's (then it parks in ppoll)
        self.wake_fd = wake_fd

    def add_idle_watch(self, watch: IdleWatch) -> bool:
        watch.use_doorbell(self.values, 0, self.wake_fd)
        if self.socket_fd >= 0:
            watch.watch_socket(self.socket_fd)
        return super().add_idle_watch(watch)


@pytest.mark.parametrize("parked_in", ["futex", "ppoll"])
def test_an_agent_asleep_on_the_doorbell_wakes_when_another_agent_finishes_a_working_cycle(monkeypatch, parked_in):
    """Asleep on the doorbell's futex (a client's agent), or in ppoll on a socket of its own and the doorbell's
    wake socket (the driver's): a ring ends its park either way."""
    monkeypatch.setattr(agent_runner, "MAX_COMPILED_WAIT_NS", FAR_NS)
    values = np.zeros(2 * COUNTER_LENGTH // 8, np.int64)  # a counters values buffer, the doorbell at id 0
    waiters = lambda: int(values[DOORBELL_WAITERS_OFFSET // 8] + values[DOORBELL_POLL_WAITERS_OFFSET // 8])  # noqa
    quiet = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    quiet.bind(("127.0.0.1", 0))
    wake = iw.open_wake_socket(values.ctypes.data)
    if parked_in == "ppoll":
        sleeper = DoorbellAgent(values, quiet.fileno(), wake.fileno())
    else:
        sleeper = DoorbellAgent(values)
    worker = DoorbellAgent(values)
    # one spin (its first idle step, in Python), then parks of a minute (compiled, asleep on the doorbell)
    minute_parks = BackoffIdleStrategy(max_spins=1, max_yields=0, min_park_period_ns=FAR_NS,
                                       max_park_period_ns=FAR_NS)
    runners = [AgentRunner(sleeper, minute_parks, None), AgentRunner(worker, backoff(), None)]
    for runner in runners:
        run_on_thread(runner)
    try:
        # Both asleep at once: the sleeper is in a park a minute long that only a ring (or close) can end.
        await_condition(lambda: waiters() == 2, 10.0, "both agents asleep on the doorbell")
        sleeper.word[0] = 1  # written by no agent: no ring
        worker.word[0] = 1  # the worker sees it at the end of its next 1 ms park, works, then rings
        await_condition(lambda: worker.seen == 1, 10.0, "the worker's working cycle")
        await_condition(lambda: sleeper.seen == 1, 10.0, "the worker's ring to wake the sleeper")
        assert values[0] >= 1  # the rings are counted in the doorbell's value
    finally:
        for runner in runners:
            runner.close(timeout_s=10.0)
        quiet.close()
        wake.close()
    assert waiters() == 0


def test_a_sleeper_that_read_the_doorbell_before_a_close_does_not_sleep_through_its_wake():
    """The lost wakeup behind a close that waited out a minute-long park: the sleeper reads the doorbell's word
    and the close flag (not set yet), the closer sets the flag and wakes the doorbell's sleepers (none asleep
    yet), then the sleeper calls FUTEX_WAIT with the word it read. The wake moves the word, so that wait returns
    at once (EAGAIN) instead of sleeping for its timeout."""
    import ctypes
    import errno

    values = np.zeros(2 * COUNTER_LENGTH // 8, np.int64)
    address = values.ctypes.data
    read_by_the_sleeper = int(values[0])
    iw.wake_doorbell_sleepers(address)
    timeout = (ctypes.c_int64 * 2)(5, 0)  # five seconds: a wait that sleeps fails the assertion below
    started = time.monotonic()
    result = iw._futex_by_ctypes(address, iw.FUTEX_WAIT, read_by_the_sleeper, ctypes.addressof(timeout))
    assert result == -errno.EAGAIN and time.monotonic() - started < 1.0


def test_close_ends_a_compiled_wait(monkeypatch):
    monkeypatch.setattr(agent_runner, "MAX_COMPILED_WAIT_NS", FAR_NS)  # only the close flag can end this wait
    agent = WatchingAgent()
    runner = AgentRunner(agent, backoff(), None)
    run_on_thread(runner)
    await_condition(lambda: agent.watches >= 1, 10.0, "the runner waits in compiled code")
    runner.close(timeout_s=10.0)  # raises TimeoutError unless the wait watches the close flag
    assert runner.is_closed


@pytest.mark.parametrize("agent", [WatchingAgent(can_watch=False), PlainAgent()], ids=["cannot-watch", "no-watch"])
def test_an_agent_that_cannot_name_its_work_parks_one_cycle_at_a_time(agent):
    runner = AgentRunner(agent, backoff(), None)
    run_on_thread(runner)
    try:
        await_condition(lambda: agent.cycles >= 20, 10.0, "idle duty cycles")
    finally:
        runner.close(timeout_s=10.0)
    assert runner.compiled_parks == 0


def test_an_injected_parker_keeps_the_strategys_own_parks():
    """A test's parker (or any non-default one) decides the parks itself: no compiled wait behind its back."""
    parks = []
    strategy = BackoffIdleStrategy(0, 0, 1_000, 1_000, parker=parks.append)
    strategy.idle(0)
    assert parks == [1_000] and not strategy.can_wait_compiled
    assert backoff().can_wait_compiled is False  # no idle step yet: the last cycle may have had work
    real = backoff()
    real.idle(0)
    assert real.can_wait_compiled


def test_the_compiled_wait_carries_the_backoff_on_from_where_the_strategy_stands():
    """One spin taken in Python; the wait (its deadline passed) takes one more step, the second spin, and the
    strategy resumes from there: the same steps in the same order as idling one cycle at a time."""
    strategy = BackoffIdleStrategy(max_spins=2, max_yields=1, min_park_period_ns=1_000, max_park_period_ns=4_000)
    strategy.idle(0)
    watch = IdleWatch()
    watch.snapshot()
    assert strategy.park_until_changed(watch, 0) == 1
    assert (strategy.spins, strategy.yields, strategy.park_period_ns) == (2, 0, 1_000)
    assert strategy.park_until_changed(watch, 0) == 1  # the yield
    assert (strategy.spins, strategy.yields, strategy.state) == (2, 1, strategy.YIELDING)
    assert strategy.park_until_changed(watch, 0) == 1  # the first park
    assert (strategy.park_period_ns, strategy.state) == (2_000, strategy.PARKING)
    strategy.idle(1)  # work resets it, as ever
    assert (strategy.spins, strategy.yields, strategy.park_period_ns) == (0, 0, 1_000)


def test_a_yielding_strategy_waits_compiled_only_after_a_cycle_without_work():
    strategy = YieldingIdleStrategy()
    assert not strategy.can_wait_compiled
    strategy.idle(0)
    assert strategy.can_wait_compiled
    strategy.idle(3)
    assert not strategy.can_wait_compiled
    yields = []
    injected = YieldingIdleStrategy(yielder=lambda: yields.append(1))
    injected.idle(0)
    assert yields == [1] and not injected.can_wait_compiled  # a test's yielder decides its steps itself


class SocketAgent(WatchingAgent):
    """Its work is the datagrams of a UDP socket, which it names to its watch."""

    def __init__(self):
        super().__init__()
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.setblocking(False)
        self.received = []

    def do_work(self) -> int:
        self.cycles += 1
        try:
            self.received.append(self.socket.recv(64))
        except BlockingIOError:
            return 0
        return 1

    def add_idle_watch(self, watch: IdleWatch) -> bool:
        self.watches += 1
        watch.watch_socket(self.socket.fileno())
        watch.run_by(time.monotonic_ns() + FAR_NS)
        return True


def test_a_datagram_wakes_an_agent_waiting_on_its_socket_in_compiled_code():
    agent = SocketAgent()
    runner = AgentRunner(agent, BackoffIdleStrategy(), None)  # Agrona's defaults: 10 spins, 5 yields, 1 us-1 ms
    run_on_thread(runner)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            await_condition(lambda: agent.watches >= 1, 10.0, "the idle runner asks for a watch")
            cycles = agent.cycles
            assert_stays(lambda: agent.cycles <= cycles + 1, 0.05, "no duty cycle while the socket stays quiet")
            for n in range(3):
                sender.sendto(b"d%d" % n, agent.socket.getsockname())
                await_condition(lambda: len(agent.received) == n + 1, 10.0, f"datagram {n} wakes the agent")
    finally:
        runner.close(timeout_s=10.0)
        agent.socket.close()
    assert agent.received == [b"d0", b"d1", b"d2"]


def test_a_word_watched_for_a_value_wakes_the_wait_only_once_it_reaches_it():
    buffer = np.zeros(2, np.int64)
    watch = IdleWatch()
    watch.watch_int64(buffer, 0)
    watch.watch_word_reaching(buffer, buffer.ctypes.data + 8, 50)
    watch.snapshot()
    assert watch.values.tolist() == [0, 50]
    buffer[1] = 49
    assert not watch.changed()
    buffer[1] = 50
    assert watch.changed()
    assert watch.park_until_changed(1_000, time.monotonic_ns() + 60_000_000_000)[1] == iw.WOKEN_BY_CHANGE
    with pytest.raises(ValueError, match="address=0x3 is not a positive 8-byte aligned address"):
        watch.watch_word_reaching(buffer, 3, 1)
