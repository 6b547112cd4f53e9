"""The compiled idle wait: it returns when a watched word changes, at its deadline, or on a signal; never by a
fixed time (no timing assertions: a deadline in the past or far away decides which way it must return)."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np

from aeron_numba.kernels import idle_wait as iw
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout.ring_buffer import TRAILER_LENGTH

PARK_NS = 100_000
FAR_NS = 60_000_000_000  # a deadline no test reaches: only a change can end the wait


def words(buffer: np.ndarray, *offsets: int) -> np.ndarray:
    return np.array([buffer.ctypes.data + offset for offset in offsets], np.int64)


def wait(addresses, values, deadline_ns):
    result = np.zeros(2, np.int64)
    iw.park_until_changed(addresses, values, PARK_NS, deadline_ns, result)
    return int(result[0]), int(result[1])


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


def test_a_word_already_changed_since_the_snapshot_ends_the_wait_after_one_park():
    buffer = np.zeros(2, np.int64)
    addresses, values = words(buffer, 0, 8), np.zeros(2, np.int64)
    iw.snapshot_words(addresses, values)
    buffer[1] = 5  # landed while the agent's last cycle ran, after the snapshot
    assert wait(addresses, values, time.monotonic_ns() + FAR_NS) == (1, iw.WOKEN_BY_CHANGE)


def test_a_deadline_already_passed_ends_the_wait_after_one_park():
    buffer = np.zeros(1, np.int64)
    addresses, values = words(buffer, 0), np.zeros(1, np.int64)
    iw.snapshot_words(addresses, values)
    assert wait(addresses, values, time.monotonic_ns()) == (1, iw.WOKEN_BY_DEADLINE)


def test_no_words_waits_for_the_deadline():
    empty = np.zeros(0, np.int64)
    assert wait(empty, empty, 0) == (1, iw.WOKEN_BY_DEADLINE)


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
    parks, reason = wait(addresses, values, time.monotonic_ns() + FAR_NS)
    writer.join()
    assert reason == iw.WOKEN_BY_CHANGE and parks >= 1
    assert ring.read_messages() == [(7, b"\x01" * 16)]


def test_a_record_claimed_before_the_snapshot_and_committed_after_it_ends_the_wait():
    """The tail moved before the snapshot (the agent's cycle found the record not yet committed); only the commit,
    the record header at head, changes afterwards: that word is watched too."""
    ring = ManyToOneRingBuffer(np.zeros(1024 + TRAILER_LENGTH, np.uint8))
    addresses = words(ring.buffer, *ring.next_record_word_offsets())
    index = ring.try_claim(7, 16)
    assert index > 0
    values = np.zeros(2, np.int64)
    iw.snapshot_words(addresses, values)
    assert ring.read_messages() == []  # claimed, not committed: nothing to read yet
    committer = threading.Thread(target=ring.commit, args=(index,))
    committer.start()
    _, reason = wait(addresses, values, time.monotonic_ns() + FAR_NS)
    committer.join()
    assert reason == iw.WOKEN_BY_CHANGE
    assert [type_id for type_id, _ in ring.read_messages()] == [7]


def test_a_signal_ends_the_wait_so_that_python_runs_its_handler():
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
        _, reason = wait(addresses, values, time.monotonic_ns() + FAR_NS)
        sender.join()
        assert reason in (iw.WOKEN_BY_SIGNAL, iw.WOKEN_BY_CHANGE)
    finally:
        signal.signal(signal.SIGUSR1, previous)
