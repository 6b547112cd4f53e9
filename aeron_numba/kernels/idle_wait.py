"""A compiled idle wait: back off in a loop without returning to Python until a watched word changes or a
watched socket becomes readable.

An agent under the backoff idle strategy runs a duty cycle after every spin, yield and park (1 us doubling to
``max_park_period_ns``, 1 ms by default), each finding nothing to do. In Python such a cycle costs tens of
microseconds (a driver's, with its streams, a hundred), so a backoff after each bit of work cost more than the
work. When the agent can name what its next cycle depends on (a ring buffer's tail, a log's tail counters,
subscriber position counters, the sockets it reads) and the time by which it must run anyway (its next timer),
the backoff runs here instead: the same spins, yields and doubling parks, each followed by a reload of the
words, and a return once one differs from its snapshot, a socket is readable or the deadline has passed. A
park on sockets is ``ppoll`` on them, so a datagram ends it at once instead of at the end of the park. Each
step stands for one the strategy would have taken followed by a cycle that would have found no work, so the
strategy's behaviour (spins, yields, park lengths) is unchanged.

Words are watched by address (``ndarray.ctypes.data + offset``, 8-byte aligned int64s in mapped files or
numpy arrays): the caller keeps every array they point into alive while waiting and never unmaps one from
another thread meanwhile. A word can also be watched for reaching a value rather than for any change: its
address is stored negated and its "snapshot" is the value (a publication's limit moves only once its slowest
reader has gone a step past the last move, so a conductor need not wake for every message its readers take).

A word can also be one that a position word points at: the frame slot at a reader's position (an image's
subscriber, a sender, a ring buffer's head), which moves with every message read. Such an entry takes two places:
``addresses[i]`` is the position word's address with ``POSITION_ENTRY_TAG`` added, and ``addresses[i + 1]`` the
base address of the slots with ``SLOTS_TAG`` added, its ``values[i + 1]`` their span (the slot is at
``base + position % span``: three terms of a log, a ring buffer's capacity). Its snapshot is ``2 * position + 1``
when that slot holds a committed frame (a positive int32 length in the word's low half; a claim not yet committed
holds its negated length) and ``2 * position`` when it holds none, and it has moved when the slot at the position
now holds a frame it did not hold then (``entry_moved``): a reader that took everything, and so moved on to an
empty slot, has nothing new; one that left a frame it cannot take yet (a bound, back pressure) is not woken for
it again. The entry's words stay the same as the reader moves, so an agent's watch does too.
``nanosleep`` and ``clock_gettime`` are libc's, called as external symbols.
"""

from __future__ import annotations

import ctypes
import os
import platform
import socket
import sys
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel
from aeron_numba.kernels.udp_socket import send_datagram_to, sockaddr_in
from aeron_numba.layout import counters as cl
from aeron_numba.layout.linux_socket import SOCKADDR_IN_LENGTH

CLOCK_MONOTONIC = 1  # Linux's clockid_t; time.monotonic_ns reads the same clock
CLOCK_REALTIME = 0  # time.time_ns's

#: Why ``park_until_changed`` returned (its second result).
WOKEN_BY_CHANGE, WOKEN_BY_DEADLINE, WOKEN_BY_SIGNAL, WOKEN_BY_SOCKET = 1, 2, 3, 4
#: ``park_until_changed``'s results: steps taken, why it returned, and where the backoff stands (spins and yields
#: left, the next park's length).
(RESULT_STEPS, RESULT_REASON, RESULT_SPINS_LEFT, RESULT_YIELDS_LEFT, RESULT_PARK_NS) = range(5)
RESULT_LENGTH = 5
#: ``struct pollfd`` as two int32s: the fd, then ``events`` (low half) and ``revents`` (high half).
POLLFD_INT32S = 2
POLLIN = 0x001
#: Added to an 8-byte aligned address in ``addresses``: a position entry's position word, and the base of its slots
#: (the entry's second place, whose value is their span). A negated address (a word to reach) has neither.
POSITION_ENTRY_TAG = 1
SLOTS_TAG = 2


@intrinsic
def _load_acquire_int64_at(typingctx, address):
    """Acquire-load of the int64 at a raw address (another process may write it)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        ptr = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), i64.as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(address), codegen


_TIMESPEC = ir.LiteralStructType([ir.IntType(64), ir.IntType(64)])  # struct timespec {tv_sec, tv_nsec}


def _stack_timespec(builder, ns_value):
    """``struct timespec ts = {ns / 1e9, ns % 1e9}`` on the stack (left unset when ``ns_value`` is None); its
    pointer."""
    ts = cgutils.alloca_once(builder, _TIMESPEC)
    if ns_value is not None:
        billion = ir.IntType(64)(1_000_000_000)
        builder.store(builder.sdiv(ns_value, billion), cgutils.gep_inbounds(builder, ts, 0, 0))
        builder.store(builder.srem(ns_value, billion), cgutils.gep_inbounds(builder, ts, 0, 1))
    return ts


def _timespec_call(builder, name, first_arg, ns_value, with_clock):
    """Build ``struct timespec ts = {ns / 1e9, ns % 1e9}`` on the stack and call libc's ``name`` with it."""
    i32 = ir.IntType(32)
    ts = _stack_timespec(builder, ns_value)
    ts_ptr_type = _TIMESPEC.as_pointer()
    if with_clock:  # clock_gettime(clockid, &ts)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, ts_ptr_type]), name)
        result = builder.call(fn, [i32(first_arg), ts])
    else:  # nanosleep(&ts, NULL)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [ts_ptr_type, ts_ptr_type]), name)
        result = builder.call(fn, [ts, ir.Constant(ts_ptr_type, None)])
    return ts, result


@intrinsic
def _nanosleep(typingctx, duration_ns):
    """libc ``nanosleep``; returns its result (0, or -1 when a signal interrupted the sleep)."""
    if not isinstance(duration_ns, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ns = context.cast(builder, args[0], sig.args[0], types.int64)
        _, result = _timespec_call(builder, "nanosleep", None, ns, with_clock=False)
        return builder.sext(result, ir.IntType(64))

    return types.int64(duration_ns), codegen


def _clock_ns(clock_id: int):
    """An intrinsic ``clock()``: ``clock_gettime(clock_id)`` in nanoseconds."""

    @intrinsic
    def clock(typingctx):
        def codegen(context, builder, sig, args):
            ts, _ = _timespec_call(builder, "clock_gettime", clock_id, None, with_clock=True)
            seconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
            nanos = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
            return builder.add(builder.mul(seconds, ir.IntType(64)(1_000_000_000)), nanos)

        return types.int64(), codegen

    return clock


#: ``clock_gettime(CLOCK_MONOTONIC)``: the clock of ``time.monotonic_ns``.
_monotonic_ns = _clock_ns(CLOCK_MONOTONIC)
#: ``clock_gettime(CLOCK_REALTIME)``: the clock of ``time.time_ns`` (a cluster's epoch clock), for compiled callers.
epoch_ns = _clock_ns(CLOCK_REALTIME)


@intrinsic
def _ppoll(typingctx, pollfds_address, count, timeout_ns):
    """libc ``ppoll(fds, count, &timeout, NULL)``: how many fds have events (0 at the timeout), or -1 (a signal)."""
    if not all(isinstance(t, types.Integer) for t in (pollfds_address, count, timeout_ns)):
        return None

    def codegen(context, builder, sig, args):
        i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        ts = _stack_timespec(builder, context.cast(builder, args[2], sig.args[2], types.int64))
        fnty = ir.FunctionType(i32, [i8p, i64, _TIMESPEC.as_pointer(), i8p])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "ppoll")
        fds = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), i8p)
        count = context.cast(builder, args[1], sig.args[1], types.int64)
        return builder.sext(builder.call(fn, [fds, count, ts, ir.Constant(i8p, None)]), i64)

    return types.int64(pollfds_address, count, timeout_ns), codegen


@intrinsic
def _sched_yield(typingctx):
    """libc ``sched_yield``: give the core to another runnable thread, if there is one."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


MSG_DONTWAIT = 0x40


@intrinsic
def _recv_discard(typingctx, fd):
    """libc ``recv(fd, NULL, 0, MSG_DONTWAIT)``: takes one waiting datagram off the socket and drops it (0), or
    -1 when none waits."""
    if not isinstance(fd, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i32, i8p, i64, i32]), "recv")
        fd_ = builder.trunc(context.cast(builder, args[0], sig.args[0], types.int64), i32)
        return builder.call(fn, [fd_, ir.Constant(i8p, None), i64(0), i32(MSG_DONTWAIT)])

    return types.int64(fd), codegen


#: The futex system call's number on this machine (None: unknown here, and the doorbell is not used).
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine()) if sys.platform == "linux" else None
FUTEX_WAIT, FUTEX_WAKE = 0, 1  # shared (not FUTEX_PRIVATE_FLAG): the word is in a file other processes map
EINTR = 4


def _futex_call(builder, address, op, value, timeout_ns):
    """``syscall(SYS_futex, address, op, value, &timeout or NULL, NULL, 0)``; -errno on failure, else its result."""
    i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
    ts_arg = ir.Constant(_TIMESPEC.as_pointer(), None) if timeout_ns is None else _stack_timespec(builder, timeout_ns)
    syscall = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
    result = builder.call(syscall, [i64(SYS_FUTEX or -1), builder.inttoptr(address, i8p), i32(op), value,
                                    builder.bitcast(ts_arg, i8p), ir.Constant(i8p, None), i32(0)])
    errno_location = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32.as_pointer(), []),
                                                    "__errno_location")
    errno = builder.sext(builder.load(builder.call(errno_location, [])), i64)
    return builder.select(builder.icmp_signed("<", result, i64(0)), builder.neg(errno), result)


@intrinsic
def _futex_wait(typingctx, address, expected, timeout_ns):
    """Sleep while the int32 at ``address`` equals ``expected``, at most ``timeout_ns``: 0 when woken, -EAGAIN
    (it differed), -ETIMEDOUT, -EINTR (a signal)."""
    if not all(isinstance(t, types.Integer) for t in (address, expected, timeout_ns)):
        return None

    def codegen(context, builder, sig, args):
        address_ = context.cast(builder, args[0], sig.args[0], types.int64)
        expected_ = builder.trunc(context.cast(builder, args[1], sig.args[1], types.int64), ir.IntType(32))
        timeout = context.cast(builder, args[2], sig.args[2], types.int64)
        return _futex_call(builder, address_, FUTEX_WAIT, expected_, timeout)

    return types.int64(address, expected, timeout_ns), codegen


@intrinsic
def _futex_wake(typingctx, address):
    """Wake every thread sleeping on the int32 at ``address``; returns how many were woken (or -errno)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        address_ = context.cast(builder, args[0], sig.args[0], types.int64)
        return _futex_call(builder, address_, FUTEX_WAKE, ir.IntType(32)(0x7FFFFFFF), None)

    return types.int64(address), codegen


@intrinsic
def _get_and_add_int64_at(typingctx, address, delta):
    """Sequentially consistent fetch-and-add on the int64 at a raw address; returns the value before."""
    if not all(isinstance(t, types.Integer) for t in (address, delta)):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        ptr = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), i64.as_pointer())
        return builder.atomic_rmw("add", ptr, context.cast(builder, args[1], sig.args[1], types.int64), "seq_cst")

    return types.int64(address, delta), codegen


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _futex_by_ctypes(address, op, value, timeout_address):
    """The futex call through ctypes (no JIT): -errno on failure, else its result."""
    result = _libc.syscall(ctypes.c_long(SYS_FUTEX), ctypes.c_void_p(int(address)), ctypes.c_int(op),
                           ctypes.c_int(value), ctypes.c_void_p(timeout_address), None, ctypes.c_int(0))
    return -ctypes.get_errno() if result < 0 else result


if numba.config.DISABLE_JIT:  # plain Python for coverage/debug runs (see atomics.py)

    def _load_acquire_int64_at(address):  # noqa: F811
        return ctypes.c_int64.from_address(int(address)).value

    def _nanosleep(duration_ns):  # noqa: F811
        time.sleep(duration_ns / 1e9)
        return 0

    def _monotonic_ns():  # noqa: F811
        return time.monotonic_ns()

    def epoch_ns():  # noqa: F811
        return time.time_ns()

    def _sched_yield():  # noqa: F811
        os.sched_yield()

    _libc.ppoll.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p]

    def _futex_wait(address, expected, timeout_ns):  # noqa: F811
        timeout = (ctypes.c_int64 * 2)(timeout_ns // 1_000_000_000, timeout_ns % 1_000_000_000)
        return _futex_by_ctypes(address, FUTEX_WAIT, ctypes.c_int32(expected).value, ctypes.addressof(timeout))

    def _futex_wake(address):  # noqa: F811
        return _futex_by_ctypes(address, FUTEX_WAKE, 0x7FFFFFFF, None)

    def _get_and_add_int64_at(address, delta):  # noqa: F811 (one thread in a no-JIT run: not atomic)
        word = ctypes.c_int64.from_address(int(address))
        before = word.value
        word.value = before + delta
        return before

    def _ppoll(pollfds_address, count, timeout_ns):  # noqa: F811
        timeout = (ctypes.c_int64 * 2)(timeout_ns // 1_000_000_000, timeout_ns % 1_000_000_000)
        return _libc.ppoll(int(pollfds_address), int(count), ctypes.addressof(timeout), None)

    _libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _libc.recv.restype = ctypes.c_ssize_t

    def _recv_discard(fd):  # noqa: F811
        return _libc.recv(int(fd), None, 0, MSG_DONTWAIT)


@kernel
def _entry_now(addresses, values, i):
    """What entry ``i`` (a word, or a position entry's first place) holds now, as its snapshot stores it."""
    address = addresses[i]
    if address & POSITION_ENTRY_TAG == 0:
        return _load_acquire_int64_at(address)
    position = _load_acquire_int64_at(address - POSITION_ENTRY_TAG)
    slot = addresses[i + 1] - SLOTS_TAG + position % values[i + 1]
    length = _load_acquire_int64_at(slot) & 0xFFFFFFFF  # the low half: a frame's (or record's) int32 length
    return 2 * position + (1 if 0 < length < 0x80000000 else 0)


@kernel
def snapshot_range(addresses, values, start, end):
    """Read each entry of ``addresses[start:end]`` into ``values[start:end]`` (``_entry_now``); a word to reach
    (negated address) keeps its value, a position entry's second place its span. A range alone: one agent's words
    read again just before it runs."""
    for i in range(start, end):
        address = addresses[i]
        if address > 0 and address & SLOTS_TAG == 0:
            values[i] = _entry_now(addresses, values, i)


@kernel
def snapshot_words(addresses, values):
    """``snapshot_range`` of all of ``addresses`` (``values`` the same length)."""
    snapshot_range(addresses, values, 0, addresses.shape[0])


@kernel
def word_moved(address, value):
    """True if the word at ``address`` differs from ``value``, or, for a negated address, has reached it."""
    if address > 0:
        return _load_acquire_int64_at(address) != value
    return _load_acquire_int64_at(-address) >= value


@kernel
def _moved_from(address, before, now):
    """Whether an entry (not a word to reach) holding ``now`` moved from ``before``: a word that differs, a position
    entry whose slot holds a frame it did not hold then."""
    if address & POSITION_ENTRY_TAG == 0:
        return now != before
    return now & 1 == 1 and now != before


@kernel
def entry_moved(addresses, values, i):
    """Whether entry ``i`` moved against ``values[i]``: a word that differs, a word to reach that reached it, a
    position entry whose slot at the position now holds a frame it did not (never a position entry's second
    place)."""
    address = addresses[i]
    if address < 0:
        return _load_acquire_int64_at(-address) >= values[i]
    if address & SLOTS_TAG != 0:
        return False
    return _moved_from(address, values[i], _entry_now(addresses, values, i))


@kernel
def first_changed_word(addresses, values):
    """Index of the first entry of ``addresses`` that moved against ``values`` (``entry_moved``), or -1 if none
    did."""
    for i in range(addresses.shape[0]):
        if entry_moved(addresses, values, i):
            return i
    return -1


@kernel
def changed_agents(previous_addresses, previous_values, previous_ranges, addresses, values, ranges, changed):
    """For each agent of a composite whose entries are ``addresses[ranges[2i]:ranges[2i + 1]]`` (and were
    ``previous_addresses[previous_ranges[2i]:...]`` in the watch before): ``changed[i] = 1`` if one of its entries
    moved between the previous snapshot and this one (``_moved_from``), or one watched for reaching a value has
    reached it, or it names a word it did not name there (at that place of its range), or a position entry it did
    not name there whose slot holds a frame; else 0. A value to reach, or another word or value to reach, alone is
    not a change: the agent named them after it last ran."""
    for i in range(changed.shape[0]):
        p0, p1 = previous_ranges[2 * i], previous_ranges[2 * i + 1]
        c0, c1 = ranges[2 * i], ranges[2 * i + 1]
        same_layout = p1 - p0 == c1 - c0
        flag = 0
        for k in range(c1 - c0):
            address = addresses[c0 + k]
            if address < 0:
                # Which word holds the slowest position and what it must reach may differ from the last watch's:
                # only reaching it counts.
                flag = 1 if word_moved(address, values[c0 + k]) else 0
            elif address & SLOTS_TAG != 0:
                flag = 0
            elif same_layout and previous_addresses[p0 + k] == address:
                flag = 1 if _moved_from(address, previous_values[p0 + k], values[c0 + k]) else 0
            elif address & POSITION_ENTRY_TAG != 0:
                flag = 1 if values[c0 + k] & 1 == 1 else 0  # named anew: a frame waiting is work
            else:
                flag = 1
            if flag:
                break
        if not same_layout and c1 == c0 and p1 != p0:
            flag = 1  # it names nothing now where it named words: its work changed (nothing to compare)
        changed[i] = flag


@kernel
def changed_since_snapshot(addresses, values, ranges, ran, changed):
    """For each agent of a composite (``ranges`` as in ``changed_agents``) that has not run yet in this cycle
    (``ran[i] == 0``) and is not already marked: ``changed[i] = 1`` if one of its entries moved against the
    snapshot taken before the cycle (``entry_moved``): another agent's work in this cycle gave it some."""
    for i in range(changed.shape[0]):
        if ran[i] != 0 or changed[i] != 0:
            continue
        for k in range(ranges[2 * i], ranges[2 * i + 1]):
            if entry_moved(addresses, values, k):
                changed[i] = 1
                break


@kernel
def poll_sockets(pollfds, timeout_ns, wake_index):
    """``ppoll`` on ``pollfds`` for at most ``timeout_ns``: 1 when a watched socket has an event, 0 when none has
    (the timeout, or only the doorbell's wake socket, at ``wake_index`` (-1: none), whose datagrams it drops: they
    only end the park), -1 when a signal interrupted it."""
    ready = _ppoll(pollfds.ctypes.data, pollfds.shape[0] // POLLFD_INT32S, timeout_ns)
    if ready <= 0:
        return -1 if ready < 0 else 0
    if wake_index >= 0 and (pollfds[wake_index * POLLFD_INT32S + 1] >> 16) != 0:  # revents, the high half
        while _recv_discard(pollfds[wake_index * POLLFD_INT32S]) >= 0:
            pass
        ready -= 1
    return 1 if ready > 0 else 0


@kernel
def park_until_changed(addresses, values, pollfds, doorbell_address, wake_index, spins, yields, park_ns, max_park_ns,
                       deadline_ns, result):
    """Back off until a watched word moves (``entry_moved``), a watched socket is readable or ``deadline_ns`` has
    passed: ``spins`` steps that only look, then ``yields`` that ``sched_yield`` first, then parks of ``park_ns``
    doubling up to ``max_park_ns`` (``ppoll`` on the sockets when there are some, ``nanosleep`` otherwise).

    Parameters
    ----------
    addresses : int64[::1]
        Addresses of 8-byte aligned int64 words (negated: a word watched for reaching its value; tagged: a position
        entry, see the module's docstring).
    values : int64[::1]
        Their snapshot (``snapshot_words``), taken before the agent's last duty cycle read them, or the value a
        negated address's word is to reach.
    pollfds : int32[::1]
        ``struct pollfd`` entries (``POLLFD_INT32S`` int32s each, events ``POLLIN``) of the sockets whose
        datagrams are the agent's work; empty for none.
    doorbell_address : int64
        The value of the driver's doorbell counter (``ring_doorbell``), 0 for none: every process of the node that
        finishes a working duty cycle rings it, and a park ends at once instead of the word's change waiting for
        the end of the park. Without sockets a park sleeps on it (futex); with them it is counted as a ``ppoll``
        waiter, and a ring sends the empty datagram that ends the ``ppoll`` to the wake socket in ``pollfds``.
    wake_index : int64
        Which entry of ``pollfds`` is the doorbell's wake socket (the driver's own), -1 for none. Its datagrams end
        a park but are not work: the wait drops them, looks at the words, and parks again if none changed.
    spins, yields : int64
        Steps of each kind the strategy has left before it parks.
    park_ns, max_park_ns : int64
        The next park's length and the longest (> 0).
    deadline_ns : int64
        ``CLOCK_MONOTONIC`` time by which the agent must run again (its next timer).
    result : int64[::1]
        ``RESULT_LENGTH`` long: steps taken (>= 1; each stands for an idle step and a cycle that found no work),
        why it returned (WOKEN_BY_CHANGE, WOKEN_BY_SOCKET, WOKEN_BY_DEADLINE, or WOKEN_BY_SIGNAL: a signal cut a
        park short, return so that Python runs its handler), and the spins and yields left and the next park's
        length, for the strategy to carry on from.
    """
    has_sockets = pollfds.shape[0] > 0
    steps = 0
    while True:
        # 1: a watched socket has an event (readable, or in error: the next read says); -1: a signal cut the step
        # short (ppoll, futex or nanosleep); 0: neither
        polled = 0
        if spins > 0:
            spins -= 1
            if has_sockets:
                polled = poll_sockets(pollfds, 0, wake_index)
        elif yields > 0:
            yields -= 1
            _sched_yield()
            if has_sockets:
                polled = poll_sockets(pollfds, 0, wake_index)
        else:
            if has_sockets and doorbell_address != 0 and wake_index >= 0:
                # Counted as a waiter before the last look at the words: a ring after that look finds the count and
                # sends to the wake socket, whose datagram ends the ppoll however late it starts.
                waiters_address = doorbell_address + cl.DOORBELL_POLL_WAITERS_OFFSET
                _get_and_add_int64_at(waiters_address, 1)
                if first_changed_word(addresses, values) < 0:
                    polled = poll_sockets(pollfds, park_ns, wake_index)
                _get_and_add_int64_at(waiters_address, -1)
            elif has_sockets:
                polled = poll_sockets(pollfds, park_ns, wake_index)
            elif doorbell_address != 0:
                # Counted as a waiter before the last look at the words: a ring after that look finds the count
                # and wakes us, a ring before it changed the doorbell, so the futex does not sleep (-EAGAIN).
                rung = _load_acquire_int64_at(doorbell_address)
                waiters_address = doorbell_address + cl.DOORBELL_WAITERS_OFFSET
                _get_and_add_int64_at(waiters_address, 1)
                if first_changed_word(addresses, values) < 0:
                    polled = -1 if _futex_wait(doorbell_address, rung, park_ns) == -EINTR else 0
                _get_and_add_int64_at(waiters_address, -1)
            else:
                polled = -1 if _nanosleep(park_ns) != 0 else 0
            park_ns = min(park_ns * 2, max_park_ns)
        steps += 1
        if polled > 0:
            reason = WOKEN_BY_SOCKET
            break
        if first_changed_word(addresses, values) >= 0:
            reason = WOKEN_BY_CHANGE
            break
        if polled < 0:
            reason = WOKEN_BY_SIGNAL
            break
        if _monotonic_ns() >= deadline_ns:
            reason = WOKEN_BY_DEADLINE
            break
    result[RESULT_STEPS] = steps
    result[RESULT_REASON] = reason
    result[RESULT_SPINS_LEFT] = spins
    result[RESULT_YIELDS_LEFT] = yields
    result[RESULT_PARK_NS] = park_ns


@kernel
def ring_doorbell(doorbell_address, wake_fd):
    """After a duty cycle that did work (and so may have written what another process of the node waits for):
    count the ring in the doorbell counter, wake the processes asleep on it, if any are, and, if an agent is parked
    in ``ppoll`` (the driver), send an empty datagram from socket ``wake_fd`` (-1: none) to the wake socket whose
    ``sockaddr_in`` the doorbell holds. Returns how many threads it woke (a datagram sent counts as one)."""
    _get_and_add_int64_at(doorbell_address, 1)
    woken = 0
    if _load_acquire_int64_at(doorbell_address + cl.DOORBELL_WAITERS_OFFSET) > 0:
        woken = max(0, _futex_wake(doorbell_address))
    sockaddr_address = doorbell_address + cl.DOORBELL_WAKE_SOCKADDR_OFFSET
    if wake_fd >= 0 and _load_acquire_int64_at(doorbell_address + cl.DOORBELL_POLL_WAITERS_OFFSET) > 0 and \
            _load_acquire_int64_at(sockaddr_address) != 0:
        if send_datagram_to(wake_fd, sockaddr_address, 0, sockaddr_address) >= 0:  # an empty datagram
            woken += 1
    return woken


_libc.sendto.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                         ctypes.c_uint]
_libc.sendto.restype = ctypes.c_ssize_t


def wake_doorbell_sleepers(doorbell_address: int) -> None:
    """``FUTEX_WAKE`` everyone asleep on the doorbell and send the wake datagram if an agent is parked in
    ``ppoll``, through ctypes rather than kernels: safe in a signal handler, which may run in the middle of the JIT
    loading a kernel (calling one there re-enters the JIT: llvmlite aborts). The sleepers look at their words and
    sleep again unless one changed.

    The doorbell's value moves first, as a ring moves it: a sleeper that read it before the flag it waits on was
    set, and calls ``FUTEX_WAIT`` only after this wake, then returns at once instead of sleeping its whole park
    (a close that waited a minute-long park out). A plain store, not an atomic add (ctypes has none, and a signal
    handler must not enter the JIT): a ring racing it may lose one count, and the value still moves."""
    if SYS_FUTEX is None or not doorbell_address:
        return
    rings = ctypes.c_int64.from_address(doorbell_address)
    rings.value += 1
    _futex_by_ctypes(doorbell_address, FUTEX_WAKE, 0x7FFFFFFF, None)
    sockaddr_address = doorbell_address + cl.DOORBELL_WAKE_SOCKADDR_OFFSET
    if ctypes.c_int64.from_address(doorbell_address + cl.DOORBELL_POLL_WAITERS_OFFSET).value > 0 and \
            ctypes.c_int64.from_address(sockaddr_address).value != 0:
        _libc.sendto(wake_socket_fd(), sockaddr_address, 0, MSG_DONTWAIT, sockaddr_address, SOCKADDR_IN_LENGTH)


_wake_socket_lock = threading.Lock()
_wake_socket: socket.socket | None = None


def wake_socket_fd() -> int:
    """The socket this process sends doorbell wake datagrams from (``ring_doorbell``'s ``wake_fd``): made on first
    use and kept open for the life of the process, so that no runner ever holds a descriptor that was closed and
    reused for something else."""
    global _wake_socket
    if _wake_socket is None:
        with _wake_socket_lock:
            if _wake_socket is None:
                wake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                wake.setblocking(False)
                _wake_socket = wake
    return _wake_socket.fileno()


def open_wake_socket(doorbell_address: int) -> socket.socket:
    """The driver's side: a non-blocking UDP socket on an ephemeral 127.0.0.1 port whose ``sockaddr_in`` it writes
    into the doorbell (``DOORBELL_WAKE_SOCKADDR_OFFSET``), for its agents to park in ``ppoll`` on beside their
    sockets (``IdleWatch.use_doorbell``). The caller closes it after ``close_wake_socket``."""
    wake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        wake.bind(("127.0.0.1", 0))
        wake.setblocking(False)
        sockaddr = sockaddr_in(*wake.getsockname())
    except OSError:
        wake.close()
        raise
    ctypes.memmove(doorbell_address + cl.DOORBELL_WAKE_SOCKADDR_OFFSET, sockaddr.ctypes.data, SOCKADDR_IN_LENGTH)
    return wake


def close_wake_socket(doorbell_address: int) -> None:
    """Clear the wake socket's address from the doorbell (before the driver closes the socket): rings stop sending."""
    ctypes.memset(doorbell_address + cl.DOORBELL_WAKE_SOCKADDR_OFFSET, 0, SOCKADDR_IN_LENGTH)


def warm_up_ring_doorbell() -> None:
    """Load ``ring_doorbell`` (a process's warm-up): first called by a runner thread, never by a signal handler."""
    doorbell = np.zeros(cl.COUNTER_LENGTH // 8, np.int64)  # a slot with no waiters: the ring wakes no one
    ring_doorbell(doorbell.ctypes.data, wake_socket_fd())


@kernel
def monotonic_ns():
    """``CLOCK_MONOTONIC`` as the wait reads it (for tests: it must agree with ``time.monotonic_ns``)."""
    return _monotonic_ns()


@kernel
def yield_cpu():
    """``sched_yield`` from compiled code (for loops that spin and must let others run on a shared core)."""
    _sched_yield()
