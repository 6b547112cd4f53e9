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
another thread meanwhile. ``nanosleep`` and ``clock_gettime`` are libc's, called as external symbols.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel
from aeron_numba.layout import counters as cl

CLOCK_MONOTONIC = 1  # Linux's clockid_t; time.monotonic_ns reads the same clock

#: Why ``park_until_changed`` returned (its second result).
WOKEN_BY_CHANGE, WOKEN_BY_DEADLINE, WOKEN_BY_SIGNAL, WOKEN_BY_SOCKET = 1, 2, 3, 4
#: ``park_until_changed``'s results: steps taken, why it returned, and where the backoff stands (spins and yields
#: left, the next park's length).
(RESULT_STEPS, RESULT_REASON, RESULT_SPINS_LEFT, RESULT_YIELDS_LEFT, RESULT_PARK_NS) = range(5)
RESULT_LENGTH = 5
#: ``struct pollfd`` as two int32s: the fd, then ``events`` (low half) and ``revents`` (high half).
POLLFD_INT32S = 2
POLLIN = 0x001


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


@intrinsic
def _monotonic_ns(typingctx):
    """``clock_gettime(CLOCK_MONOTONIC)`` in nanoseconds: the clock of ``time.monotonic_ns``."""

    def codegen(context, builder, sig, args):
        ts, _ = _timespec_call(builder, "clock_gettime", CLOCK_MONOTONIC, None, with_clock=True)
        seconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nanos = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(seconds, ir.IntType(64)(1_000_000_000)), nanos)

    return types.int64(), codegen


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


@kernel
def snapshot_words(addresses, values):
    """Load the int64 at each of ``addresses`` into ``values`` (same length)."""
    for i in range(addresses.shape[0]):
        values[i] = _load_acquire_int64_at(addresses[i])


@kernel
def first_changed_word(addresses, values):
    """Index of the first word at ``addresses`` that differs from ``values``, or -1 if none does."""
    for i in range(addresses.shape[0]):
        if _load_acquire_int64_at(addresses[i]) != values[i]:
            return i
    return -1


@kernel
def park_until_changed(addresses, values, pollfds, doorbell_address, spins, yields, park_ns, max_park_ns, deadline_ns,
                       result):
    """Back off until a watched word differs from ``values``, a watched socket is readable or ``deadline_ns`` has
    passed: ``spins`` steps that only look, then ``yields`` that ``sched_yield`` first, then parks of ``park_ns``
    doubling up to ``max_park_ns`` (``ppoll`` on the sockets when there are some, ``nanosleep`` otherwise).

    Parameters
    ----------
    addresses : int64[::1]
        Addresses of 8-byte aligned int64 words.
    values : int64[::1]
        Their snapshot (``snapshot_words``), taken before the agent's last duty cycle read them.
    pollfds : int32[::1]
        ``struct pollfd`` entries (``POLLFD_INT32S`` int32s each, events ``POLLIN``) of the sockets whose
        datagrams are the agent's work; empty for none.
    doorbell_address : int64
        The value of the driver's doorbell counter (``ring_doorbell``), 0 for none: without sockets, a park then
        sleeps on it (futex) and every process of the node that finishes a working duty cycle ends the park at
        once, instead of the word's change waiting for the end of the park.
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
    poll_count = pollfds.shape[0] // POLLFD_INT32S
    pollfds_address = pollfds.ctypes.data
    steps = 0
    while True:
        interrupted = False
        socket_ready = False  # ppoll counts the sockets with events (readable, or in error: the next read says)
        if spins > 0:
            spins -= 1
            if poll_count > 0:
                socket_ready = _ppoll(pollfds_address, poll_count, 0) > 0
        elif yields > 0:
            yields -= 1
            _sched_yield()
            if poll_count > 0:
                socket_ready = _ppoll(pollfds_address, poll_count, 0) > 0
        else:
            if poll_count > 0:
                ready = _ppoll(pollfds_address, poll_count, park_ns)
                interrupted = ready < 0
                socket_ready = ready > 0
            elif doorbell_address != 0:
                # Counted as a waiter before the last look at the words: a ring after that look finds the count
                # and wakes us, a ring before it changed the doorbell, so the futex does not sleep (-EAGAIN).
                rung = _load_acquire_int64_at(doorbell_address)
                waiters_address = doorbell_address + cl.DOORBELL_WAITERS_OFFSET
                _get_and_add_int64_at(waiters_address, 1)
                if first_changed_word(addresses, values) < 0:
                    interrupted = _futex_wait(doorbell_address, rung, park_ns) == -EINTR
                _get_and_add_int64_at(waiters_address, -1)
            else:
                interrupted = _nanosleep(park_ns) != 0
            park_ns = min(park_ns * 2, max_park_ns)
        steps += 1
        if socket_ready:
            reason = WOKEN_BY_SOCKET
            break
        if first_changed_word(addresses, values) >= 0:
            reason = WOKEN_BY_CHANGE
            break
        if interrupted:
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
def ring_doorbell(doorbell_address):
    """After a duty cycle that did work (and so may have written what another process of the node waits for):
    count the ring in the doorbell counter, and wake the processes parked on it, if any are. Returns how many
    threads it woke."""
    _get_and_add_int64_at(doorbell_address, 1)
    if _load_acquire_int64_at(doorbell_address + cl.DOORBELL_WAITERS_OFFSET) > 0:
        return max(0, _futex_wake(doorbell_address))
    return 0


def wake_doorbell_sleepers(doorbell_address: int) -> None:
    """``FUTEX_WAKE`` everyone asleep on the doorbell, through ctypes rather than a kernel: safe in a signal
    handler, which may run in the middle of the JIT loading a kernel (calling one there re-enters the JIT: llvmlite
    aborts). The sleepers look at their words and sleep again unless one changed."""
    if SYS_FUTEX is not None and doorbell_address:
        _futex_by_ctypes(doorbell_address, FUTEX_WAKE, 0x7FFFFFFF, None)


def warm_up_ring_doorbell() -> None:
    """Load ``ring_doorbell`` (a process's warm-up): first called by a runner thread, never by a signal handler."""
    doorbell = np.zeros(cl.COUNTER_LENGTH // 8, np.int64)  # a slot with no waiters: the ring wakes no one
    ring_doorbell(doorbell.ctypes.data)


@kernel
def monotonic_ns():
    """``CLOCK_MONOTONIC`` as the wait reads it (for tests: it must agree with ``time.monotonic_ns``)."""
    return _monotonic_ns()


@kernel
def yield_cpu():
    """``sched_yield`` from compiled code (for loops that spin and must let others run on a shared core)."""
    _sched_yield()
