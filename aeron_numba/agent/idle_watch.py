"""What an idle agent's next duty cycle depends on, so that its backoff can run in compiled code.

An agent that implements ``add_idle_watch(watch) -> bool`` names, each time its runner is about to wait, every
shared-memory word whose change could give its next ``do_work`` something to do (``watch_int64``; or, when only a
value reached is work, ``watch_word_reaching``), every socket whose datagrams are its work (``watch_socket``),
and the monotonic time by which it must run anyway, its next timer (``run_by``). It returns False when it cannot
name all of its work (a clock that is not the system's): the runner then idles as usual.

The runner takes a snapshot of the words *before* the duty cycle that found no work, so a change that lands
while that cycle runs is not missed: the wait (``kernels/idle_wait.park_until_changed``) compares against the
snapshot and returns at once.

A runner waits only after a cycle without work, so a watch need not show what a working cycle left undone (a
batch limit, a retry). An agent whose watch shows that too says so with ``names_work_left = True``: a duty cycle
that runs only the agents a change concerns (``agent/invoked_agents.WatchedCompositeAgent``) then does not run
it again after every cycle in which it worked.
"""

from __future__ import annotations

import weakref

import numpy as np

from aeron_numba.kernels import idle_wait as iw
from aeron_numba.kernels.idle_wait import first_changed_word, snapshot_words, word_moved
from aeron_numba.layout.counters import COUNTER_LENGTH, COUNTER_VALUE_OFFSET, counter_offset

_WORD_LENGTH = 8

#: id(buffer) -> (weak reference, address, length) of every buffer watched so far. Agents name the same buffers at
#: every wait (a log, the counters), and ``ndarray.ctypes.data`` costs a microsecond or more each time; the weak
#: reference drops the entry when its buffer goes, before its id can be reused.
_BUFFERS: dict[int, tuple[weakref.ref, int, int]] = {}


def _address_and_length(buffer: np.ndarray) -> tuple[int, int]:
    key = id(buffer)
    known = _BUFFERS.get(key)
    if known is not None and known[0]() is buffer:
        return known[1], known[2]
    if not buffer.flags.c_contiguous:
        raise ValueError("buffer must be C-contiguous to be watched")
    address, length = buffer.ctypes.data, buffer.nbytes
    _BUFFERS[key] = (weakref.ref(buffer, lambda _, key=key: _BUFFERS.pop(key, None)), address, length)
    return address, length


class IdleWatch:
    """Addresses of int64 words and sockets to watch, and a deadline in ``time.monotonic_ns`` time (None: no
    deadline yet)."""

    def __init__(self):
        self.deadline_ns: int | None = None
        self._arrays: list[np.ndarray] = []  # keeps every watched buffer alive while its addresses are in use
        self._addresses: list[int] = []
        self._targets: list[tuple[int, int]] = []  # (index in _addresses, value) of the words watched for a value
        self._idle: list[tuple[int, int]] = []  # (index in _addresses, value) of the words with an idle value
        self.addresses = np.zeros(0, np.int64)
        self.values = np.zeros(0, np.int64)
        self.idle_known = np.zeros(0, np.int8)  # after ``snapshot``: 1 where a word has an idle value, held in
        self.idle_values = np.zeros(0, np.int64)  # ``idle_values`` (``watch_int64``)
        self._fds: list[int] = []
        self.pollfds = np.zeros(0, np.int32)
        self._result = np.zeros(iw.RESULT_LENGTH, np.int64)
        self.doorbell_address = 0  # the value of the driver's doorbell counter; 0: none (``use_doorbell``)
        self.doorbell_buffer: np.ndarray | None = None  # the counters values buffer it is in
        self.wake_fd = -1  # the driver's doorbell wake socket, parked on beside the watched sockets (-1: none)
        self.wake_index = -1  # its entry in ``pollfds`` once there (-1: not there)
        self.snapshot_taken = False  # the arrays above hold the named words only once ``snapshot`` ran

    def watch_int64(self, buffer: np.ndarray, offset: int, idle_value: int | None = None) -> None:
        """Watch the int64 at byte ``offset`` of ``buffer`` (a contiguous array; the word 8-byte aligned).
        ``idle_value``: what it holds while it gives no work (a frame slot not yet written: 0), so that a duty cycle
        of several agents (``WatchedCompositeAgent``) need not run the agent for a word it names anew that holds
        it."""
        base, length = _address_and_length(buffer)
        if offset < 0 or offset + _WORD_LENGTH > length:
            raise ValueError(f"offset={offset} + {_WORD_LENGTH} > buffer length={length}")
        address = base + offset
        if address % _WORD_LENGTH:
            raise ValueError(f"offset={offset} is not 8-byte aligned in its buffer (address {address:#x})")
        # Holding the view keeps the memory mapped: an mmap with a live export cannot be closed (MappedFile.close),
        # so another thread letting go of the log meanwhile (a client conductor's linger) cannot unmap it under us.
        self._arrays.append(buffer)
        if idle_value is not None:
            self._idle.append((len(self._addresses), idle_value))
        self._addresses.append(address)

    def watch_counter(self, values_buffer: np.ndarray, counter_id: int) -> None:
        """Watch the value of counter ``counter_id`` in a counters values buffer (``cnc.dat``'s)."""
        self.watch_int64(values_buffer, counter_offset(counter_id) + COUNTER_VALUE_OFFSET)

    def watch_words(self, buffers: tuple, addresses: list[int]) -> None:
        """Watch the int64s at ``addresses``, which the caller computed once from ``buffers`` and keeps valid while
        they are mapped (a publication's tail counters and subscriber positions, rebuilt when its subscribers
        change): the same words as ``watch_int64`` would name, without its per-word checks at every wait."""
        self._arrays.extend(buffers)
        self._addresses.extend(addresses)

    def watch_word_reaching(self, buffer: np.ndarray, address: int, value: int) -> None:
        """Wake once the int64 at ``address`` (in ``buffer``, which the caller computed it from and keeps mapped)
        is ``>= value``, not at every change: for a word that moves often where only a threshold is work (a
        publication's limit moves once its slowest reader is a step past the last move)."""
        if address <= 0 or address % _WORD_LENGTH:
            raise ValueError(f"address={address:#x} is not a positive 8-byte aligned address")
        self._arrays.append(buffer)
        self._targets.append((len(self._addresses), value))
        self._addresses.append(-address)

    def use_doorbell(self, values_buffer: np.ndarray, counter_id: int, wake_fd: int = -1) -> None:
        """Sleep on the driver's doorbell counter (``counter_id`` in ``values_buffer``) while parked, and ``ring``
        it after a working cycle: the node's processes then wake each other at once instead of at the end of a
        park. A watch with sockets parks in ``ppoll`` on them, and then also on ``wake_fd``, the driver's wake
        socket (``kernels/idle_wait.open_wake_socket``), to which a ring sends a datagram; without it, a ring
        cannot end such a park. Not used where the futex call is unknown."""
        if iw.SYS_FUTEX is None:
            return
        base, length = _address_and_length(values_buffer)
        offset = counter_offset(counter_id) + COUNTER_VALUE_OFFSET
        if counter_id < 0 or offset + COUNTER_LENGTH > length:
            raise ValueError(f"counter_id={counter_id} is outside the counters values buffer (length={length})")
        self._arrays.append(values_buffer)
        self.doorbell_buffer = values_buffer
        self.doorbell_address = base + offset
        self.wake_fd = wake_fd

    def mark(self) -> tuple:
        """Where the watch stands, for ``segment_since``."""
        return (len(self._arrays), len(self._addresses), len(self._targets), len(self._idle), len(self._fds),
                self.doorbell_address, self.doorbell_buffer, self.wake_fd)

    def segment_since(self, mark: tuple) -> tuple:
        """What was named since ``mark`` (words, values to reach, idle values, sockets, a doorbell), to name again in
        a later watch with ``add_segment`` while the agent that named it has not run (``WatchedCompositeAgent``).
        Not the deadline, which the caller reads."""
        arrays, words, targets, idle, fds, doorbell_address, doorbell_buffer, wake_fd = mark
        doorbell = None
        if (self.doorbell_address, self.wake_fd) != (doorbell_address, wake_fd) or \
                self.doorbell_buffer is not doorbell_buffer:
            doorbell = (self.doorbell_address, self.doorbell_buffer, self.wake_fd)
        return (self._arrays[arrays:], self._addresses[words:], [(k - words, v) for k, v in self._targets[targets:]],
                [(k - words, v) for k, v in self._idle[idle:]], self._fds[fds:], doorbell)

    def add_segment(self, segment: tuple) -> None:
        """Name again what ``segment_since`` returned (its buffers are still held by it, so still mapped)."""
        arrays, addresses, targets, idle, fds, doorbell = segment
        base = len(self._addresses)
        self._arrays.extend(arrays)
        self._addresses.extend(addresses)
        self._targets.extend((base + k, v) for k, v in targets)
        self._idle.extend((base + k, v) for k, v in idle)
        self._fds.extend(fds)
        if doorbell is not None:
            self.doorbell_address, self.doorbell_buffer, self.wake_fd = doorbell

    def watch_socket(self, fd: int) -> None:
        """Wake when socket ``fd`` has a datagram to read (the caller keeps it open while the watch is in use)."""
        if fd < 0:
            raise ValueError(f"fd={fd} is not an open socket")
        self._fds.append(fd)

    def run_by(self, deadline_ns: int) -> None:
        """The agent must run again by ``deadline_ns`` (``time.monotonic_ns`` time); the earliest one wins."""
        if self.deadline_ns is None or deadline_ns < self.deadline_ns:
            self.deadline_ns = deadline_ns

    @property
    def socket_fds(self) -> tuple[int, ...]:
        """The watched sockets, in the order they were named."""
        return tuple(self._fds)

    @property
    def word_count(self) -> int:
        return len(self._addresses)

    @property
    def socket_count(self) -> int:
        return len(self._fds)

    def snapshot(self) -> None:
        """Read every watched word now (before the duty cycle whose result decides whether to wait)."""
        self.addresses = np.array(self._addresses, np.int64)
        self.values = np.zeros(len(self._addresses), np.int64)
        for index, value in self._targets:
            self.values[index] = value
        snapshot_words(self.addresses, self.values)
        self.idle_known = np.zeros(len(self._addresses), np.int8)
        self.idle_values = np.zeros(len(self._addresses), np.int64)
        for index, value in self._idle:
            self.idle_known[index] = 1
            self.idle_values[index] = value
        fds = self._fds
        self.wake_index = -1
        if fds and self.wake_fd >= 0:  # parked in ppoll, a ring wakes it through the wake socket
            self.wake_index = len(fds)
            fds = [*fds, self.wake_fd]
        self.pollfds = np.zeros(len(fds) * iw.POLLFD_INT32S, np.int32)
        self.pollfds[0::iw.POLLFD_INT32S] = fds
        self.pollfds[1::iw.POLLFD_INT32S] = iw.POLLIN
        self.snapshot_taken = True

    def changed(self) -> bool:
        """True if a watched word differs from the snapshot (or reached the value it is watched for)."""
        return first_changed_word(self.addresses, self.values) >= 0

    def park_until_changed(self, park_ns: int, default_deadline_ns: int, *, spins: int = 0, yields: int = 0,
                           max_park_ns: int | None = None) -> tuple[int, int]:
        """Back off (``spins`` looks, ``yields`` yields, then parks of ``park_ns`` doubling to ``max_park_ns``,
        ``park_ns`` if None) until a word changes, a socket is readable or the deadline (``default_deadline_ns``
        if the agent named none) passes; returns (steps taken, reason: ``kernels.idle_wait.WOKEN_BY_*``).
        ``backoff_left`` then holds where the backoff stands."""
        deadline_ns = default_deadline_ns if self.deadline_ns is None else min(self.deadline_ns, default_deadline_ns)
        iw.park_until_changed(self.addresses, self.values, self.pollfds, self.doorbell_address, self.wake_index, spins,
                              yields, park_ns, park_ns if max_park_ns is None else max_park_ns, deadline_ns,
                              self._result)
        return int(self._result[iw.RESULT_STEPS]), int(self._result[iw.RESULT_REASON])

    @property
    def backoff_left(self) -> tuple[int, int, int]:
        """After ``park_until_changed``: the spins and yields left and the next park's length."""
        r = self._result
        return int(r[iw.RESULT_SPINS_LEFT]), int(r[iw.RESULT_YIELDS_LEFT]), int(r[iw.RESULT_PARK_NS])

    def __repr__(self) -> str:
        return f"IdleWatch(words={self.word_count}, sockets={self.socket_count}, deadline_ns={self.deadline_ns})"


class KeptWordToReach:
    """A word an agent watches for reaching a value (``IdleWatch.watch_word_reaching``), picked again only when
    ``key`` changes or the word has reached it: which of several readers is the slowest changes as they move, but
    the last pick stays a valid watch (a reader since moved ahead costs one cycle with nothing to do, and a new
    pick), so most watches only name the kept word again instead of reading every reader."""

    def __init__(self):
        self._kept = None  # (key, buffer, address, value)

    def add_to(self, watch: IdleWatch, key, pick) -> None:
        """Name the kept word in ``watch``; ``pick()`` returns a new ``(buffer, address, value)`` when due."""
        kept = self._kept
        if kept is None or kept[0] != key or word_moved(-kept[2], kept[3]):
            kept = self._kept = (key, *pick())
        watch.watch_word_reaching(kept[1], kept[2], kept[3])
