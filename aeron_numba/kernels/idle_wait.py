"""A compiled idle wait: park in a loop without returning to Python until a watched word changes.

An agent under the backoff idle strategy that has backed off to its maximum park wakes every
``max_park_period_ns`` (1 ms by default) and runs a duty cycle that finds nothing to do. In Python that
cycle costs several microseconds of interpreter work a wake-up (cold caches after the sleep), as much as
the wake-up itself. When the agent can name the memory words its next cycle depends on (a ring buffer's
tail, a log's tail counters, subscriber position counters) and the time by which it must run anyway (its
next timer), the parks can be taken here instead: park ``park_ns``, reload the words, and return once one
differs from its snapshot or the deadline has passed. Each loop is exactly a park followed by a cycle that
would have found no work, so the idle strategy's behaviour (park length, wake-up rate) is unchanged.

Words are watched by address (``ndarray.ctypes.data + offset``, 8-byte aligned int64s in mapped files or
numpy arrays): the caller keeps every array they point into alive while waiting and never unmaps one from
another thread meanwhile. ``nanosleep`` and ``clock_gettime`` are libc's, called as external symbols.
"""

from __future__ import annotations

import ctypes
import os
import time

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel

CLOCK_MONOTONIC = 1  # Linux's clockid_t; time.monotonic_ns reads the same clock

#: Why ``park_until_changed`` returned (its second result).
WOKEN_BY_CHANGE, WOKEN_BY_DEADLINE, WOKEN_BY_SIGNAL = 1, 2, 3


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


def _timespec_call(builder, name, first_arg, ns_value, with_clock):
    """Build ``struct timespec ts = {ns / 1e9, ns % 1e9}`` on the stack and call libc's ``name`` with it."""
    i32, i64 = ir.IntType(32), ir.IntType(64)
    timespec = ir.LiteralStructType([i64, i64])
    ts = cgutils.alloca_once(builder, timespec)
    if ns_value is not None:
        billion = i64(1_000_000_000)
        builder.store(builder.sdiv(ns_value, billion), cgutils.gep_inbounds(builder, ts, 0, 0))
        builder.store(builder.srem(ns_value, billion), cgutils.gep_inbounds(builder, ts, 0, 1))
    ts_ptr_type = timespec.as_pointer()
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
def _sched_yield(typingctx):
    """libc ``sched_yield``: give the core to another runnable thread, if there is one."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


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
def park_until_changed(addresses, values, park_ns, deadline_ns, result):
    """Park ``park_ns`` at a time until a watched word differs from ``values`` or ``deadline_ns`` has passed.

    Parameters
    ----------
    addresses : int64[::1]
        Addresses of 8-byte aligned int64 words.
    values : int64[::1]
        Their snapshot (``snapshot_words``), taken before the agent's last duty cycle read them.
    park_ns : int64
        One park (the idle strategy's maximum park period), > 0.
    deadline_ns : int64
        ``CLOCK_MONOTONIC`` time by which the agent must run again (its next timer).
    result : int64[::1]
        Length >= 2: ``result[0]`` = parks taken (>= 1; each stands for an idle cycle that found no work),
        ``result[1]`` = why it returned: WOKEN_BY_CHANGE, WOKEN_BY_DEADLINE or WOKEN_BY_SIGNAL (a signal cut
        a park short: return so that Python runs its handler).
    """
    parks = 0
    while True:
        interrupted = _nanosleep(park_ns) != 0
        parks += 1
        if first_changed_word(addresses, values) >= 0:
            reason = WOKEN_BY_CHANGE
            break
        if interrupted:
            reason = WOKEN_BY_SIGNAL
            break
        if _monotonic_ns() >= deadline_ns:
            reason = WOKEN_BY_DEADLINE
            break
    result[0] = parks
    result[1] = reason


@kernel
def monotonic_ns():
    """``CLOCK_MONOTONIC`` as the wait reads it (for tests: it must agree with ``time.monotonic_ns``)."""
    return _monotonic_ns()


@kernel
def yield_cpu():
    """``sched_yield`` from compiled code (for loops that spin and must let others run on a shared core)."""
    _sched_yield()
