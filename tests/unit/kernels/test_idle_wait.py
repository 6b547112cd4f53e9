"""The compiled idle wait: it returns when a watched word changes, a watched socket is readable, at its deadline,
or on a signal; never by a fixed time (no timing assertions: a deadline in the past or far away decides which way
it must return). It takes the backoff's steps in order and says where it left off."""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import threading
import time

import numpy as np
import pytest

from aeron_numba.kernels import idle_wait as iw
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout.counters import COUNTER_LENGTH, DOORBELL_POLL_WAITERS_OFFSET, DOORBELL_WAITERS_OFFSET
from aeron_numba.layout.ring_buffer import TRAILER_LENGTH
from harness.awaiting import await_condition

PARK_NS = 100_000
FAR_NS = 60_000_000_000  # a deadline no test reaches: only a change can end the wait


def words(buffer: np.ndarray, *offsets: int) -> np.ndarray:
    return np.array([buffer.ctypes.data + offset for offset in offsets], np.int64)


NO_SOCKETS = np.zeros(0, np.int32)


def wait(addresses, values, deadline_ns, pollfds=NO_SOCKETS, spins=0, yields=0, park_ns=PARK_NS, max_park_ns=PARK_NS,
         doorbell_address=0, wake_index=-1):
    result = np.zeros(iw.RESULT_LENGTH, np.int64)
    iw.park_until_changed(addresses, values, pollfds, doorbell_address, wake_index, spins, yields, park_ns, max_park_ns,
                          deadline_ns, result)
    return int(result[iw.RESULT_STEPS]), int(result[iw.RESULT_REASON]), tuple(
        int(v) for v in result[iw.RESULT_SPINS_LEFT:iw.RESULT_PARK_NS + 1])


def wait_reason(addresses, values, deadline_ns, **kwargs):
    steps, reason, _ = wait(addresses, values, deadline_ns, **kwargs)
    return steps, reason


def pollfds(*socks: socket.socket) -> np.ndarray:
    fds = np.zeros(len(socks) * iw.POLLFD_INT32S, np.int32)
    fds[0::iw.POLLFD_INT32S] = [s.fileno() for s in socks]
    fds[1::iw.POLLFD_INT32S] = iw.POLLIN
    return fds


def udp_pair():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return receiver, sender


def test_snapshot_reads_every_word_and_first_changed_word_finds_the_first_difference():
    buffer = np.arange(4, dtype=np.int64) * 10
    addresses = words(buffer, 8, 24)
    values = np.zeros(2, np.int64)
    iw.snapshot_words(addresses, values)
    assert values.tolist() == [10, 30]
    assert iw.first_changed_word(addresses, values) == -1
    buffer[3] = 31
    assert iw.first_changed_word(addresses, values) == 1
    buffer[1] = 11
    assert iw.first_changed_word(addresses, values) == 0


def test_a_word_watched_for_a_value_moves_only_once_it_reaches_it_and_its_snapshot_is_that_value():
    buffer = np.zeros(2, np.int64)
    addresses = np.array([buffer.ctypes.data, -(buffer.ctypes.data + 8)], np.int64)  # the second: reach 100
    values = np.array([0, 100], np.int64)
    iw.snapshot_words(addresses, values)
    assert values.tolist() == [0, 100]
    buffer[1] = 99
    assert iw.first_changed_word(addresses, values) == -1
    assert wait_reason(addresses, values, time.monotonic_ns() + 2 * PARK_NS)[1] == iw.WOKEN_BY_DEADLINE
    buffer[1] = 100
    assert iw.first_changed_word(addresses, values) == 1
    assert wait_reason(addresses, values, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)
    buffer[1] = 5000
    assert iw.word_moved(addresses[1], values[1]) and not iw.word_moved(addresses[0], values[0])


def test_changed_agents_flags_a_word_named_anew_or_one_that_moved_since_the_previous_snapshot():
    buffer = np.zeros(8, np.int64)
    ranges = np.array([0, 1, 1, 2], np.int64)  # two agents, one word each
    previous_addresses = words(buffer, 0, 8)
    previous_values = np.zeros(2, np.int64)
    changed = np.zeros(2, np.int64)

    def flags(addresses, values, agent_ranges=ranges):
        iw.changed_agents(previous_addresses, previous_values, ranges, np.array(addresses, np.int64),
                          np.array(values, np.int64), agent_ranges, changed)
        return list(changed)

    assert flags(previous_addresses, [0, 3]) == [0, 1]  # the same words: only a change since counts
    assert flags([previous_addresses[0], buffer.ctypes.data + 24], [0, 0]) == [0, 1]  # another word: nothing to compare
    fewer = np.array([0, 1, 1, 1], np.int64)  # the second agent names nothing now
    assert flags([previous_addresses[0]], [0], fewer) == [0, 1]


def position_entry(slots: np.ndarray, position: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """The two places of a watch entry for the slot at ``position[0] % span`` of ``slots``, before a snapshot."""
    addresses = np.array([position.ctypes.data + iw.POSITION_ENTRY_TAG, slots.ctypes.data + iw.SLOTS_TAG], np.int64)
    return addresses, np.array([0, span], np.int64)


def test_a_position_entry_moves_when_a_frame_lands_at_the_position_not_for_one_left_there():
    slots, position = np.zeros(8, np.int64), np.zeros(1, np.int64)
    addresses, values = position_entry(slots, position, slots.nbytes)
    iw.snapshot_words(addresses, values)
    assert values.tolist() == [0, 64]  # position 0, its slot empty; the span kept
    assert iw.first_changed_word(addresses, values) == -1
    assert wait_reason(addresses, values, time.monotonic_ns() + 2 * PARK_NS)[1] == iw.WOKEN_BY_DEADLINE
    slots[0] = 32  # a frame written at the position
    assert iw.first_changed_word(addresses, values) == 0
    assert wait_reason(addresses, values, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)
    iw.snapshot_words(addresses, values)
    assert values[0] == 1  # 2 * position + a frame there
    assert iw.first_changed_word(addresses, values) == -1  # a frame the reader left there (a bound) is not new
    slots[0] = 0
    position[0] = 32  # read and moved on: the slot at the new position is watched, with no new naming
    assert iw.first_changed_word(addresses, values) == -1
    slots[4] = 16
    assert iw.first_changed_word(addresses, values) == 0
    slots[4], position[0] = 0, 64  # past the end of the span: back at its start
    slots[0] = 8
    assert iw.first_changed_word(addresses, values) == 0


def test_changed_agents_takes_a_frame_at_a_readers_position_as_work_and_an_empty_slot_as_none():
    slots, position = np.zeros(8, np.int64), np.zeros(1, np.int64)
    addresses, previous_values = position_entry(slots, position, slots.nbytes)
    ranges = np.array([0, 2], np.int64)
    changed = np.zeros(1, np.int64)

    def flagged(named_addresses=addresses):
        values = np.array([0, slots.nbytes], np.int64)
        iw.snapshot_words(named_addresses, values)
        iw.changed_agents(addresses, previous_values, ranges, named_addresses, values, ranges, changed)
        return int(changed[0])

    slots[0] = 32
    iw.snapshot_words(addresses, previous_values)  # the reader about to run, with a frame at its position
    slots[0], position[0] = 0, 32
    assert flagged() == 0  # it read everything: an empty slot at its new position
    slots[4] = 32
    assert flagged() == 1  # a frame there since
    position[0] = 0
    slots[0] = 32
    assert flagged() == 0  # the frame it left at its position, as before: no work it could do then
    other = np.zeros(1, np.int64)
    anew, _ = position_entry(slots, other, slots.nbytes)
    assert flagged(anew) == 1  # another reader's entry, with a frame waiting at its position
    slots[0] = 0
    assert flagged(anew) == 0  # and with none


def test_changed_agents_flags_a_value_to_reach_only_when_it_is_reached():
    buffer = np.zeros(1, np.int64)
    address = -buffer.ctypes.data
    previous_addresses, previous_values = np.array([address], np.int64), np.array([10], np.int64)
    ranges = np.array([0, 1], np.int64)
    changed = np.ones(1, np.int64)

    def flagged(value_to_reach, addresses=(address,)):
        iw.changed_agents(previous_addresses, previous_values, ranges, np.array(addresses, np.int64),
                          np.array([value_to_reach], np.int64), ranges, changed)
        return int(changed[0])

    buffer[0] = 15
    assert flagged(20) == 0  # a new value named by the agent after it ran: not a change
    assert flagged(15) == 1  # reached
    other = np.full(1, 7, np.int64)  # the agent's slowest reader is another word now: only reaching counts
    assert flagged(8, (-other.ctypes.data,)) == 0
    other[0] = 8
    assert flagged(8, (-other.ctypes.data,)) == 1
    assert flagged(15, (buffer.ctypes.data,)) == 1  # the agent watches another kind of word now


def test_a_word_already_changed_since_the_snapshot_ends_the_wait_after_one_park():
    buffer = np.zeros(2, np.int64)
    addresses, values = words(buffer, 0, 8), np.zeros(2, np.int64)
    iw.snapshot_words(addresses, values)
    buffer[1] = 5  # landed while the agent's last cycle ran, after the snapshot
    assert wait_reason(addresses, values, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)


def test_a_deadline_already_passed_ends_the_wait_after_one_park():
    buffer = np.zeros(1, np.int64)
    addresses, values = words(buffer, 0), np.zeros(1, np.int64)
    iw.snapshot_words(addresses, values)
    assert wait_reason(addresses, values, time.monotonic_ns()) == (1, iw.WOKEN_BY_DEADLINE)


def test_no_words_waits_for_the_deadline():
    empty = np.zeros(0, np.int64)
    assert wait_reason(empty, empty, 0) == (1, iw.WOKEN_BY_DEADLINE)


def test_the_wait_reads_the_monotonic_clock_of_time_monotonic_ns():
    before = time.monotonic_ns()
    now = iw.monotonic_ns()
    assert before <= now <= time.monotonic_ns()


def test_a_record_written_to_a_ring_buffer_by_another_thread_ends_the_wait():
    ring = ManyToOneRingBuffer(np.zeros(1024 + TRAILER_LENGTH, np.uint8))
    addresses = words(ring.buffer, *ring.next_record_word_offsets())
    values = np.zeros(2, np.int64)
    iw.snapshot_words(addresses, values)
    writer = threading.Thread(target=ring.write, args=(7, np.ones(16, np.uint8)))
    writer.start()  # the wait releases the GIL: the writer runs while it parks
    parks, reason = wait_reason(addresses, values, time.monotonic_ns() + FAR_NS)
    writer.join()
    assert reason == iw.WOKEN_BY_CHANGE and parks >= 1
    assert ring.read_messages() == [(7, b"\x01" * 16)]


def test_a_record_claimed_before_the_snapshot_and_committed_after_it_ends_the_wait():
    """The tail moved before the snapshot (the agent's cycle found the record not yet committed); only the commit,
    the record header at head, changes afterwards: that word is watched too."""
    ring = ManyToOneRingBuffer(np.zeros(1024 + TRAILER_LENGTH, np.uint8))
    tail_offset, head_offset = ring.next_record_word_offsets()
    record_at_head, values_at_head = position_entry(ring.buffer, ring.buffer[head_offset:], ring.capacity)
    addresses = np.concatenate([words(ring.buffer, tail_offset), record_at_head])
    index = ring.try_claim(7, 16)
    assert index > 0
    values = np.concatenate([np.zeros(1, np.int64), values_at_head])
    iw.snapshot_words(addresses, values)
    assert ring.read_messages() == []  # claimed, not committed: nothing to read yet
    committer = threading.Thread(target=ring.commit, args=(index,))
    committer.start()
    _, reason = wait_reason(addresses, values, time.monotonic_ns() + FAR_NS)
    committer.join()
    assert reason == iw.WOKEN_BY_CHANGE
    assert [type_id for type_id, _ in ring.read_messages()] == [7]


@pytest.mark.parametrize("on_doorbell", [False, True], ids=["sleeping", "on-doorbell"])
def test_a_signal_ends_the_wait_so_that_python_runs_its_handler(on_doorbell):
    """Compiled, the wait returns on EINTR (Python runs handlers only between bytecodes); as plain Python
    (NUMBA_DISABLE_JIT) the handler runs inside the sleep and its change to a watched word ends the wait. Either
    way a handler that requests close (a watched flag, as AgentRunner's) is not left waiting for the deadline."""
    flag = np.zeros(1, np.int64)
    addresses, values = words(flag, 0), np.zeros(1, np.int64)
    iw.snapshot_words(addresses, values)
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: flag.__setitem__(0, 1))
    main = threading.get_ident()

    def interrupt():  # until the handler has run: a signal sent before the wait starts is not lost
        while flag[0] == 0:
            signal.pthread_kill(main, signal.SIGUSR1)

    try:
        sender = threading.Thread(target=interrupt)
        sender.start()
        slot = np.zeros(COUNTER_LENGTH // 8, np.int64)
        _, reason = wait_reason(addresses, values, time.monotonic_ns() + FAR_NS,
                                doorbell_address=slot.ctypes.data if on_doorbell else 0)
        sender.join()
        assert reason in (iw.WOKEN_BY_SIGNAL, iw.WOKEN_BY_CHANGE)
    finally:
        signal.signal(signal.SIGUSR1, previous)


class Doorbell:
    """A doorbell counter's value slot (value, then the waiter counts at ``DOORBELL_WAITERS_OFFSET`` and
    ``DOORBELL_POLL_WAITERS_OFFSET``, then the wake socket's address)."""

    def __init__(self):
        self.slot = np.zeros(COUNTER_LENGTH // 8, np.int64)
        self.address = self.slot.ctypes.data

    @property
    def rings(self) -> int:
        return int(self.slot[0])

    @property
    def waiters(self) -> int:
        return int(self.slot[DOORBELL_WAITERS_OFFSET // 8])

    @property
    def poll_waiters(self) -> int:
        return int(self.slot[DOORBELL_POLL_WAITERS_OFFSET // 8])

    def ring(self) -> int:
        return iw.ring_doorbell(self.address, iw.wake_socket_fd())


@contextlib.contextmanager
def waiting_in_thread(doorbell: Doorbell, pollfds=NO_SOCKETS, wake_index=-1):
    """A wait on one word and on ``doorbell`` (and on ``pollfds``, if given), with a park longer than any test
    (only a ring can end it early), in a thread; yields (the word, the wait's outcome once it returned). On exit
    the word changes and a ring ends the wait if it is still parked."""
    word = np.zeros(1, np.int64)
    addresses, values = words(word, 0), np.zeros(1, np.int64)
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(wait(addresses, values, time.monotonic_ns() + FAR_NS,
                                                                 pollfds, park_ns=FAR_NS, max_park_ns=FAR_NS,
                                                                 doorbell_address=doorbell.address,
                                                                 wake_index=wake_index)))
    thread.start()  # the wait releases the GIL
    try:
        yield word, outcome
    finally:
        word[0] = 1
        doorbell.ring()
        thread.join()


@contextlib.contextmanager
def waiting_in_ppoll(doorbell: Doorbell):
    """``waiting_in_thread`` as the driver waits: in ``ppoll`` on a socket of its own (which stays quiet) and on the
    doorbell's wake socket (``open_wake_socket``); yields (the word, the outcome, the wake socket)."""
    quiet = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    quiet.bind(("127.0.0.1", 0))
    wake = iw.open_wake_socket(doorbell.address)
    with quiet, wake:
        with waiting_in_thread(doorbell, pollfds(quiet, wake), wake_index=1) as (word, outcome):
            yield word, outcome, wake


def has_datagram(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def test_a_ring_after_a_change_ends_a_park_on_the_doorbell_at_once():
    doorbell = Doorbell()
    with waiting_in_thread(doorbell) as (word, outcome):
        await_condition(lambda: doorbell.waiters == 1, 10.0, "the wait to sleep on the doorbell")
        word[0] = 1
        doorbell.ring()
        await_condition(lambda: outcome, 10.0, "the ring to end the park (a minute long)")
    steps, reason, _ = outcome[0]
    assert (steps, reason) == (1, iw.WOKEN_BY_CHANGE)
    assert doorbell.waiters == 0 and doorbell.rings >= 1


def test_a_ring_without_a_change_wakes_the_park_which_sleeps_on_until_one():
    doorbell = Doorbell()
    with waiting_in_thread(doorbell) as (word, outcome):
        # someone else's work: each ring wakes the waiter, which looks, finds nothing and sleeps again
        for time_asleep in ("first", "second"):
            await_condition(lambda: doorbell.ring() == 1, 10.0,
                            f"a ring to wake the wait asleep on the doorbell a {time_asleep} time")
        assert not outcome
        word[0] = 1
        doorbell.ring()
        await_condition(lambda: outcome, 10.0, "the second ring to end the park")
    steps, reason, _ = outcome[0]
    assert reason == iw.WOKEN_BY_CHANGE and steps >= 2  # a park per ring
    assert doorbell.waiters == 0


def test_a_ring_after_a_change_ends_a_park_in_ppoll_through_the_wake_socket():
    """The driver parks in ppoll on its sockets, where no futex can wake it: the ring's datagram does."""
    doorbell = Doorbell()
    with waiting_in_ppoll(doorbell) as (word, outcome, wake):
        await_condition(lambda: doorbell.poll_waiters == 1, 10.0, "the wait to park in ppoll")
        word[0] = 1
        assert doorbell.ring() == 1  # the datagram went
        await_condition(lambda: outcome, 10.0, "the ring to end the park (a minute long)")
        assert not has_datagram(wake)  # dropped by the wait: a ring is not work
    steps, reason, _ = outcome[0]
    assert (steps, reason) == (1, iw.WOKEN_BY_CHANGE)
    assert doorbell.poll_waiters == 0 and doorbell.waiters == 0


def test_a_ring_without_a_change_ends_the_ppoll_which_drops_the_datagram_and_parks_again():
    doorbell = Doorbell()
    with waiting_in_ppoll(doorbell) as (word, outcome, wake):
        await_condition(lambda: doorbell.poll_waiters == 1, 10.0, "the wait to park in ppoll")
        assert doorbell.ring() == 1
        await_condition(lambda: not has_datagram(wake), 10.0, "the wait to drop the ring's datagram")
        await_condition(lambda: doorbell.poll_waiters == 1, 10.0, "the wait to park again")
        assert not outcome  # someone else's work: not a socket of the agent's, no word changed
        word[0] = 1
        doorbell.ring()
        await_condition(lambda: outcome, 10.0, "the second ring to end the park")
    steps, reason, _ = outcome[0]
    assert reason == iw.WOKEN_BY_CHANGE and steps >= 2


def test_a_stale_wake_datagram_is_dropped_and_not_taken_for_a_datagram_of_the_agents():
    doorbell = Doorbell()
    quiet = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    quiet.bind(("127.0.0.1", 0))
    wake = iw.open_wake_socket(doorbell.address)
    with quiet, wake:
        for _ in range(3):  # rings that came while the driver was busy, not parked
            quiet.sendto(b"", wake.getsockname())
        await_condition(lambda: has_datagram(wake), 10.0, "the rings' datagrams to arrive")
        empty = np.zeros(0, np.int64)
        assert wait(empty, empty, 0, pollfds(quiet, wake), spins=1, doorbell_address=doorbell.address,
                    wake_index=1)[:2] == (1, iw.WOKEN_BY_DEADLINE)
        assert not has_datagram(wake)


def test_a_ring_sends_no_datagram_while_nothing_is_parked_in_ppoll_or_once_the_wake_socket_is_closed():
    doorbell = Doorbell()
    wake = iw.open_wake_socket(doorbell.address)
    with wake:
        assert doorbell.ring() == 0 and doorbell.rings == 1
        doorbell.slot[DOORBELL_POLL_WAITERS_OFFSET // 8] = 1  # as if the driver were parked ...
        iw.close_wake_socket(doorbell.address)  # ... as it closes
        assert doorbell.ring() == 0 and doorbell.rings == 2
        assert not has_datagram(wake)


def test_the_steps_come_in_the_backoffs_order_and_the_wait_says_where_it_left_off():
    """A deadline already passed ends the wait after one step: a spin while spins are left, then a yield, then a
    park, whose successor is twice as long up to the max."""
    empty = np.zeros(0, np.int64)
    assert wait(empty, empty, 0, spins=3, yields=2, park_ns=1_000, max_park_ns=4_000) == (
        1, iw.WOKEN_BY_DEADLINE, (2, 2, 1_000))
    assert wait(empty, empty, 0, spins=0, yields=2, park_ns=1_000, max_park_ns=4_000) == (
        1, iw.WOKEN_BY_DEADLINE, (0, 1, 1_000))
    assert wait(empty, empty, 0, spins=0, yields=0, park_ns=1_000, max_park_ns=4_000) == (
        1, iw.WOKEN_BY_DEADLINE, (0, 0, 2_000))
    assert wait(empty, empty, 0, spins=0, yields=0, park_ns=4_000, max_park_ns=4_000)[2] == (0, 0, 4_000)


def test_a_datagram_already_waiting_on_a_watched_socket_ends_the_wait_at_its_first_step():
    receiver, sender = udp_pair()
    with receiver, sender:
        empty = np.zeros(0, np.int64)
        sender.sendto(b"x", receiver.getsockname())
        # the datagram is queued once sendto returns on loopback; a spin's zero-timeout ppoll sees it
        assert wait(empty, empty, time.monotonic_ns() + FAR_NS, pollfds(receiver), spins=1)[:2] == (
            1, iw.WOKEN_BY_SOCKET)
        assert receiver.recv(16) == b"x"  # the wait only looks: the datagram is still there for the agent


@pytest.mark.parametrize("spins, yields", [(0, 0), (10, 5)], ids=["parking", "from-the-first-spin"])
def test_a_datagram_sent_by_another_thread_ends_a_wait_on_its_socket(spins, yields):
    receiver, quiet = udp_pair()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with receiver, quiet, sender:
        quiet.bind(("127.0.0.1", 0))
        empty = np.zeros(0, np.int64)
        thread = threading.Thread(target=sender.sendto, args=(b"y", receiver.getsockname()))
        thread.start()  # the wait releases the GIL: the sender runs while it waits
        steps, reason, _ = wait(empty, empty, time.monotonic_ns() + FAR_NS, pollfds(quiet, receiver), spins=spins,
                                yields=yields, park_ns=1_000, max_park_ns=PARK_NS)
        thread.join()
        assert reason == iw.WOKEN_BY_SOCKET and steps >= 1
        assert receiver.recv(16) == b"y"
