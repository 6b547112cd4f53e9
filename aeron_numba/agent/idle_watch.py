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

A watch is made of frozen pieces (``WatchSegment``): what each agent named, which a duty cycle of several agents
names again as is while the agent has not run, or while what it names anew is the same (a reader's next frame is
named by its position word, ``watch_frame_at``, so it stays the same as the reader moves). A runner that keeps a
``WatchArrays`` then builds the arrays its kernels read only when a piece changed: most busy cycles only read the
words again.
"""

from __future__ import annotations

import weakref
from typing import Callable

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


def _word_address(buffer: np.ndarray, offset: int) -> int:
    """The address of the int64 at byte ``offset`` of ``buffer``, checked: within it and 8-byte aligned."""
    base, length = _address_and_length(buffer)
    if offset < 0 or offset + _WORD_LENGTH > length:
        raise ValueError(f"offset={offset} + {_WORD_LENGTH} > buffer length={length}")
    address = base + offset
    if address % _WORD_LENGTH:
        raise ValueError(f"offset={offset} is not 8-byte aligned in its buffer (address {address:#x})")
    return address


class WatchSegment:
    """A frozen piece of a watch: the entries (``kernels/idle_wait``: words, words to reach, position entries, each
    address with its value) and sockets one agent named, the buffers they point into (held, so still mapped), and
    the doorbell it set (None: none). ``key`` compares two pieces by what they name."""

    __slots__ = ("buffers", "addresses", "values", "fds", "doorbell", "key")

    def __init__(self, buffers: tuple, addresses: tuple, values: tuple, fds: tuple, doorbell: tuple | None = None):
        self.buffers, self.addresses, self.values, self.fds, self.doorbell = buffers, addresses, values, fds, doorbell
        self.key = (addresses, values, fds, None if doorbell is None else (doorbell[0], doorbell[2]))

    def __repr__(self) -> str:
        return f"WatchSegment(words={len(self.addresses)}, sockets={len(self.fds)})"


_EMPTY_SEGMENT = WatchSegment((), (), (), ())
# A watch's arrays before its snapshot, shared (empty, so never written; kept writable so that kernels see the
# types they were compiled for): a busy composite builds a watch every duty cycle.
_NO_WORDS = np.zeros(0, np.int64)
_NO_SOCKETS = np.zeros(0, np.int32)


class WatchArrays:
    """The arrays last built from a watch's pieces, kept by its runner across cycles: a watch made of the same
    pieces (the same objects) takes them as they are."""

    def __init__(self):
        self.pieces: tuple = ()
        self.wake_fd = -1
        self.addresses = _NO_WORDS
        self.initial_values = _NO_WORDS  # what each entry's snapshot starts from: a value to reach, a span
        self.pollfds = _NO_SOCKETS
        self.wake_index = -1
        self.result = np.zeros(iw.RESULT_LENGTH, np.int64)  # a park's, read as soon as it returns


class IdleWatch:
    """Addresses of int64 words and sockets to watch, and a deadline in ``time.monotonic_ns`` time (None: no
    deadline yet). ``arrays``: the runner's ``WatchArrays``, reused while the pieces are the same."""

    def __init__(self, arrays: WatchArrays | None = None):
        self.deadline_ns: int | None = None
        self._pieces: list[WatchSegment] = []
        self._piece_words = 0  # entries and sockets in ``_pieces``
        self._piece_sockets = 0
        # What is being named, not yet a piece:
        self._buffers: list[np.ndarray] = []  # keeps every watched buffer alive while its addresses are in use
        self._addresses: list[int] = []
        self._values: list[int] = []
        self._fds: list[int] = []
        self._doorbell: tuple | None = None  # set by ``use_doorbell``, for the piece being named
        self._arrays = arrays if arrays is not None else WatchArrays()
        self.addresses = self.values = _NO_WORDS
        self.pollfds = _NO_SOCKETS
        self._result = self._arrays.result
        self.doorbell_address = 0  # the value of the driver's doorbell counter; 0: none (``use_doorbell``)
        self.doorbell_buffer: np.ndarray | None = None  # the counters values buffer it is in
        self.wake_fd = -1  # the driver's doorbell wake socket, parked on beside the watched sockets (-1: none)
        self.wake_index = -1  # its entry in ``pollfds`` once there (-1: not there)
        self.snapshot_taken = False  # the arrays above hold the named words only once ``snapshot`` ran

    def watch_int64(self, buffer: np.ndarray, offset: int) -> None:
        """Watch the int64 at byte ``offset`` of ``buffer`` (a contiguous array; the word 8-byte aligned)."""
        # Holding the view keeps the memory mapped: an mmap with a live export cannot be closed (MappedFile.close),
        # so another thread letting go of the log meanwhile (a client conductor's linger) cannot unmap it under us.
        self._buffers.append(buffer)
        self._addresses.append(_word_address(buffer, offset))
        self._values.append(0)

    def watch_frame_at(self, slots: np.ndarray, span: int, position_buffer: np.ndarray, position_offset: int) -> None:
        """Watch the slot a reader's position points at: the int64 at ``slots[position % span]`` (a log's three terms
        and their length times three, a ring buffer and its capacity), where position is the int64 at byte
        ``position_offset`` of ``position_buffer`` (a subscriber position counter, a ring buffer's head). A frame
        written there is work; once the reader took it and moved on, the slot at its new position is the one
        watched, with no new naming (``kernels/idle_wait``'s position entries)."""
        base, length = _address_and_length(slots)
        if span <= 0 or span % _WORD_LENGTH or span > length:
            raise ValueError(f"span={span} must be a positive multiple of {_WORD_LENGTH} within the slots' length "
                             f"{length}")
        if base % _WORD_LENGTH:
            raise ValueError(f"the slots start at {base:#x}, which is not 8-byte aligned")
        self._buffers.append(slots)
        self._buffers.append(position_buffer)
        self._addresses.append(_word_address(position_buffer, position_offset) + iw.POSITION_ENTRY_TAG)
        self._values.append(0)
        self._addresses.append(base + iw.SLOTS_TAG)
        self._values.append(span)

    def watch_counter(self, values_buffer: np.ndarray, counter_id: int) -> None:
        """Watch the value of counter ``counter_id`` in a counters values buffer (``cnc.dat``'s)."""
        self.watch_int64(values_buffer, counter_offset(counter_id) + COUNTER_VALUE_OFFSET)

    def watch_words(self, buffers: tuple, addresses: list[int]) -> None:
        """Watch the int64s at ``addresses``, which the caller computed once from ``buffers`` and keeps valid while
        they are mapped (a publication's tail counters and subscriber positions, rebuilt when its subscribers
        change): the same words as ``watch_int64`` would name, without its per-word checks at every wait."""
        self._buffers.extend(buffers)
        self._addresses.extend(addresses)
        self._values.extend([0] * len(addresses))

    def watch_word_reaching(self, buffer: np.ndarray, address: int, value: int) -> None:
        """Wake once the int64 at ``address`` (in ``buffer``, which the caller computed it from and keeps mapped)
        is ``>= value``, not at every change: for a word that moves often where only a threshold is work (a
        publication's limit moves once its slowest reader is a step past the last move)."""
        if address <= 0 or address % _WORD_LENGTH:
            raise ValueError(f"address={address:#x} is not a positive 8-byte aligned address")
        self._buffers.append(buffer)
        self._addresses.append(-address)
        self._values.append(value)

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
        self._buffers.append(values_buffer)
        self._doorbell = (base + offset, values_buffer, wake_fd)
        self._set_doorbell(self._doorbell)

    def _set_doorbell(self, doorbell: tuple) -> None:
        self.doorbell_address, self.doorbell_buffer, self.wake_fd = doorbell

    def _close_piece(self) -> None:
        """What was named since the last piece becomes one (with the doorbell, when it was set meanwhile)."""
        if self._buffers or self._fds:  # every word and doorbell named holds its buffer
            piece = WatchSegment(tuple(self._buffers), tuple(self._addresses), tuple(self._values), tuple(self._fds),
                                 self._doorbell)
            self._pieces.append(piece)
            self._piece_words += len(piece.addresses)
            self._piece_sockets += len(piece.fds)
            self._buffers, self._addresses, self._values, self._fds = [], [], [], []
            self._doorbell = None

    def mark(self) -> int:
        """Where the watch stands, for ``segment_since``."""
        self._close_piece()
        return len(self._pieces)

    def segment_since(self, mark: int, like: WatchSegment | None = None) -> WatchSegment:
        """What was named since ``mark`` (entries, sockets, a doorbell) as one piece, to name again in a later watch
        with ``add_segment`` while the agent that named it has not run (``WatchedCompositeAgent``); ``like`` (the
        piece it named before) when it names the same, so that the watch is made of the same pieces as before.
        Not the deadline, which the caller reads."""
        self._close_piece()
        pieces = self._pieces
        count = len(pieces) - mark
        if count == 1:
            segment = pieces[mark]
        elif count == 0:
            return _EMPTY_SEGMENT
        else:  # several (an agent that names others' kept pieces too): one of them all
            named = pieces[mark:]
            doorbell = next((p.doorbell for p in reversed(named) if p.doorbell is not None), None)
            segment = WatchSegment(tuple(b for p in named for b in p.buffers),
                                   tuple(a for p in named for a in p.addresses),
                                   tuple(v for p in named for v in p.values), tuple(f for p in named for f in p.fds),
                                   doorbell)
            del pieces[mark:]
            pieces.append(segment)
        if like is not None and like is not segment and like.key == segment.key:
            segment = pieces[-1] = like
        return segment

    @staticmethod
    def segment_of(name: Callable[["IdleWatch"], None]) -> WatchSegment:
        """The piece ``name(watch)`` names: what never changes (a runner's close flag) named once."""
        watch = IdleWatch()
        mark = watch.mark()
        name(watch)
        return watch.segment_since(mark)

    def add_segment(self, segment: WatchSegment) -> None:
        """Name again what ``segment_since`` returned (its buffers are still held by it, so still mapped)."""
        self._close_piece()
        if segment is _EMPTY_SEGMENT:
            return
        self._pieces.append(segment)
        self._piece_words += len(segment.addresses)
        self._piece_sockets += len(segment.fds)
        if segment.doorbell is not None:
            self._set_doorbell(segment.doorbell)

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
        return tuple(f for p in self._pieces for f in p.fds) + tuple(self._fds)

    @property
    def word_count(self) -> int:
        """Entries named so far (a position entry takes two)."""
        return self._piece_words + len(self._addresses)

    @property
    def socket_count(self) -> int:
        return self._piece_sockets + len(self._fds)

    def snapshot(self) -> None:
        """Read every watched word now (before the duty cycle whose result decides whether to wait)."""
        self._close_piece()
        pieces, arrays = tuple(self._pieces), self._arrays
        if pieces != arrays.pieces or self.wake_fd != arrays.wake_fd:  # elements compare by identity
            arrays.addresses = np.array([a for p in pieces for a in p.addresses], np.int64)
            arrays.initial_values = np.array([v for p in pieces for v in p.values], np.int64)
            fds = [f for p in pieces for f in p.fds]
            arrays.wake_index = -1
            if fds and self.wake_fd >= 0:  # parked in ppoll, a ring wakes it through the wake socket
                arrays.wake_index = len(fds)
                fds.append(self.wake_fd)
            arrays.pollfds = np.zeros(len(fds) * iw.POLLFD_INT32S, np.int32)
            arrays.pollfds[0::iw.POLLFD_INT32S] = fds
            arrays.pollfds[1::iw.POLLFD_INT32S] = iw.POLLIN
            arrays.pieces, arrays.wake_fd = pieces, self.wake_fd
        self.addresses = arrays.addresses  # never written: shared with the watches before, as is ``pollfds``
        self.values = arrays.initial_values.copy()
        snapshot_words(self.addresses, self.values)
        self.pollfds, self.wake_index = arrays.pollfds, arrays.wake_index
        self.snapshot_taken = True

    def changed(self) -> bool:
        """True if a watched entry moved against the snapshot (or reached the value it is watched for)."""
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


class KeptPiece:
    """What an agent names that follows from a few objects only (its subscriptions' images, a counter), named
    again as the piece it was while ``key`` (those objects) is the same: the agent's watch is then built without
    its naming, and a composite keeps the same piece (``IdleWatch.segment_since``)."""

    def __init__(self):
        self._kept = None  # (key, piece)

    def add_to(self, watch: IdleWatch, key, name: Callable[[IdleWatch], None]) -> None:
        """Name the kept piece in ``watch``, or ``name(watch)`` and keep what it named when ``key`` changed."""
        kept = self._kept
        if kept is not None and kept[0] == key:
            watch.add_segment(kept[1])
            return
        mark = watch.mark()
        name(watch)
        self._kept = (key, watch.segment_since(mark))
