"""Compiled benchmark loops: a cycle counter, the shared-memory floor, and Aeron offer/poll loops.

Everything that runs per message in the compiled benchmarks lives here, in one module, so that Numba's
cache (which checks only the defining file, NOTES-numba.md pitfall 1) can never pair a loop with a stale
``rdtsc``. Every loop has an explicit signature: it compiles once (when this module is first imported, in
the parent, before the worker processes start) and the workers load it from the cache.

The Aeron loops work on the compiled handles the Python client gives, as ``examples/compiled_pub_sub.py`` does:
``publication.compiled()`` (``offer``) and ``image.compiled()`` (``poll`` with a compiled ``FragmentHandler``),
``client/handles.py``. Like the kernels, they are compiled without reference counting (the kernel flags): the
handles' module docstring says why that matters. Time is measured with the TSC (``rdtsc``, about 7 ns,
NOTES-numba.md); ``tsc_hz`` from ``calibrate_tsc`` converts ticks to nanoseconds.

Waits are plain busy spins, with no ``pause`` spin-wait hint: on this KVM guest a ``pause`` in the loop
(pause-loop exiting) took the cache-line floor from about 80 to 400 ns per round trip.

Every wait has a deadline in ticks, so a partner that died cannot hang a benchmark: the loops return
early and the caller reports how far they got. Status codes are the publication's (``ADMIN_ACTION``...)
plus ``TIMED_OUT``.

Context array (``ctx``, int64) slots shared by the handlers and loops are the ``CTX_*`` constants below.
"""

from __future__ import annotations

import time

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from aeron_numba.client.handles import image_handle_type, publication_handle_type
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.handlers import FRAGMENT_HANDLER_SIG, FragmentHandler
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

#: A loop gave up waiting (its partner is gone or stuck).
TIMED_OUT = -100

# ctx slots
CTX_RECEIVED = 0  # fragments handled
CTX_LAST_SEQ = 1  # sequence number of the last fragment
CTX_NEXT_SEQ = 2  # next sequence number expected (throughput)
CTX_ERRORS = 3  # out-of-order or unexpected sequence numbers
CTX_BYTES = 4  # payload bytes handled
CTX_PENDING_LENGTH = 5  # length of the payload copied to the scratch area (echo)
CTX_STATUS = 6  # last failing offer status
CTX_FR_BASE = 7  # fixed rate: sequence number of slot 0
CTX_FR_COUNT = 8  # fixed rate: number of slots
CTX_BACK_PRESSURED = 9  # offers that found the publication back-pressured (then retried)
CTX_HEADER_WORDS = 16  # fixed rate: sched[count] then latency[count] follow the header
CTX_SCRATCH_WORD = 16  # echo: payload bytes are copied from byte 8 * CTX_SCRATCH_WORD
SCRATCH_BYTES = 2048
# stream_publish counters
PUB_BACK_PRESSURED = 0
PUB_ADMIN_ACTIONS = 1
PUB_COUNTERS = 2
ECHO_CTX_WORDS = CTX_SCRATCH_WORD + SCRATCH_BYTES // 8

u8 = types.uint8[::1]
i64 = types.int64
i64a = types.int64[::1]
f64 = types.float64
pub_t = publication_handle_type
img_t = image_handle_type


# ------------------------------------------------------------------------------------------------ clock
@intrinsic
def rdtsc(typingctx):
    """The CPU's cycle counter (``rdtsc`` on x86-64 through ``llvm.readcyclecounter``)."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


# ------------------------------------------------------------------------------------------ libc calls
# External symbols resolved in the process (libc is always loaded), so the loops that use them still cache.
_I8P = ir.IntType(8).as_pointer()


@intrinsic
def sched_yield(typingctx):
    """libc ``sched_yield()``: give this core to another runnable process (the UDP benchmarks' media driver)."""

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        return builder.call(fn, [])

    return types.int32(), codegen


def _socket_call(name: str):
    """An intrinsic ``name(fd, buffer, offset, length, flags) -> int64`` for libc ``send``/``recv`` on a byte
    array at ``offset`` (returns the byte count, or -1 with errno set)."""

    @intrinsic
    def call(typingctx, fd, buffer, offset, length, flags):
        def codegen(context, builder, signature, args):
            fd_v, buffer_v, offset_v, length_v, flags_v = args
            data = context.make_array(signature.args[1])(context, builder, buffer_v).data
            pointer = builder.gep(builder.bitcast(data, _I8P), [offset_v])
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.IntType(64), [i32, _I8P, ir.IntType(64), i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, name)
            return builder.call(fn, [builder.trunc(fd_v, i32), pointer, length_v, builder.trunc(flags_v, i32)])

        return types.int64(types.int64, buffer, types.int64, types.int64, types.int64), codegen

    call.__name__ = f"c_{name}"
    return call


c_send = _socket_call("send")
c_recv = _socket_call("recv")
MSG_DONTWAIT = 0x40  # Linux


@kernel(inline="always")
def _idle(spins, yield_mask):
    """Spin-wait step: with ``yield_mask`` (2**k - 1) give the core away every ``yield_mask + 1`` empty spins
    (UDP cases: the media driver has to run on the two cores the loops are pinned to); 0 never yields."""
    if yield_mask != 0 and (spins & yield_mask) == 0:
        sched_yield()


@kernel(i64())
def read_tsc():
    """``rdtsc`` for Python callers (calibration)."""
    return rdtsc()


def calibrate_tsc(duration_s: float = 0.05, rounds: int = 3) -> float:
    """Ticks per second of ``rdtsc`` against ``time.perf_counter_ns`` (median of ``rounds``)."""
    rates = []
    for _ in range(rounds):
        t0, c0 = time.perf_counter_ns(), read_tsc()
        end = t0 + int(duration_s * 1e9)
        while time.perf_counter_ns() < end:
            pass
        t1, c1 = time.perf_counter_ns(), read_tsc()
        rates.append((c1 - c0) * 1e9 / (t1 - t0))
    rates.sort()
    hz = rates[len(rates) // 2]
    if not hz > 1e6:
        raise RuntimeError(f"cycle counter rate {hz:.0f} Hz: this CPU has no usable rdtsc for the compiled benchmarks")
    return hz


# ------------------------------------------------------------------------------------ shared-memory floor
@kernel(i64(u8, i64, i64, i64a, i64))
def floor_ping(line, base, n, lat, timeout_ticks):
    """Round trips over one cache line: store ``base+i+1`` at byte 0, spin until the partner echoes it at
    byte 8. ``lat[i]`` gets each round trip in ticks. Returns the round trips completed."""
    for i in range(n):
        value = base + i + 1
        t0 = rdtsc()
        atomics.put_int64_release(line, 0, value)
        spins = 0
        while atomics.get_int64_acquire(line, 8) != value:
            spins += 1
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                return i
        lat[i] = rdtsc() - t0
    return n


@kernel(i64(u8, i64, i64, i64))
def floor_pong(line, base, n, timeout_ticks):
    """The other end of ``floor_ping``: wait for each value at byte 0 and store it at byte 8."""
    for i in range(n):
        value = base + i + 1
        t0 = rdtsc()
        spins = 0
        while atomics.get_int64_acquire(line, 0) != value:
            spins += 1
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                return i
        atomics.put_int64_release(line, 8, value)
    return n


@kernel(i64(u8, u8, i64))
def memcpy_loop(dst, src, iterations):
    """Copy ``src`` into ``dst`` ``iterations`` times with one ``llvm.memmove`` each (``memory.copy_bytes``,
    what the term appender copies payloads with); returns a checksum so the copies are not optimised away."""
    check = 0
    length = min(dst.shape[0], src.shape[0])
    for i in range(iterations):
        src[0] = i & 0xFF
        copy_bytes(dst, 0, src, 0, length)
        check += dst[length - 1] + dst[0]
    return check


# ----------------------------------------------------------------------------------------- offer helpers
@kernel(inline="always")
def _offer_until_done(publication, src, src_offset, length, timeout_ticks, counters, back_pressured_slot, yield_mask):
    """Offer until accepted: retry on ADMIN_ACTION, BACK_PRESSURED and NOT_CONNECTED (the subscriber is
    known to be there), stop on anything else or after ``timeout_ticks``. An offer that found the log
    back-pressured counts in ``counters[back_pressured_slot]``. Returns the offer result."""
    result = publication.offer(src, src_offset, length)
    if result > 0:
        return result
    if result == BACK_PRESSURED:
        counters[back_pressured_slot] += 1
    t0 = rdtsc()
    spins = 0
    while True:
        if result != ADMIN_ACTION and result != BACK_PRESSURED and result != NOT_CONNECTED:
            return result
        if rdtsc() - t0 > timeout_ticks:
            return TIMED_OUT
        spins += 1
        _idle(spins, yield_mask)
        result = publication.offer(src, src_offset, length)
        if result > 0:
            return result


# -------------------------------------------------------------------------------------------- handlers
@kernel(FRAGMENT_HANDLER_SIG)
def on_echo(ctx, buffer, offset, length):
    """Ping side: count the echo and keep its sequence number (first 8 payload bytes)."""
    ctx[CTX_LAST_SEQ] = atomics.get_int64(buffer, offset)
    ctx[CTX_RECEIVED] += 1


@kernel(FRAGMENT_HANDLER_SIG)
def on_ping(ctx, buffer, offset, length):
    """Pong side: copy the payload into ctx's scratch bytes so the loop can offer it back."""
    if length > SCRATCH_BYTES:
        ctx[CTX_ERRORS] += 1
        length = SCRATCH_BYTES
    copy_bytes(ctx.view(np.uint8), CTX_SCRATCH_WORD * 8, buffer, offset, length)
    ctx[CTX_PENDING_LENGTH] = length
    ctx[CTX_RECEIVED] += 1


@kernel(FRAGMENT_HANDLER_SIG)
def on_stream_fragment(ctx, buffer, offset, length):
    """Throughput consumer: check the sequence numbers arrive in order, count messages and bytes."""
    seq = atomics.get_int64(buffer, offset)
    if seq != ctx[CTX_NEXT_SEQ]:
        ctx[CTX_ERRORS] += 1
    ctx[CTX_NEXT_SEQ] = seq + 1
    ctx[CTX_RECEIVED] += 1
    ctx[CTX_BYTES] += length


@kernel(FRAGMENT_HANDLER_SIG)
def on_fixed_rate_echo(ctx, buffer, offset, length):
    """Fixed-rate sender: latency of the echo from the message's *scheduled* send time (no coordinated
    omission); ``ctx`` holds ``sched[count]`` then ``latency[count]`` after the header words."""
    now = rdtsc()
    index = atomics.get_int64(buffer, offset) - ctx[CTX_FR_BASE]
    count = ctx[CTX_FR_COUNT]
    if 0 <= index < count:
        ctx[CTX_HEADER_WORDS + count + index] = now - ctx[CTX_HEADER_WORDS + index]
    else:
        ctx[CTX_ERRORS] += 1
    ctx[CTX_RECEIVED] += 1


# ------------------------------------------------------------------------------------------ aeron loops
@kernel(i64(pub_t, img_t, u8, i64, i64, i64, i64a, FragmentHandler, i64a, i64, i64))
def aeron_rtt_ping(publication, image, src, length, base, n, lat, handler, ctx, timeout_ticks, yield_mask):
    """``n`` round trips: offer ``src[:length]`` carrying sequence ``base+i``, poll the echo image until the
    echo arrives; ``lat[i]`` = ticks from before the offer to after the echo was handled.

    Returns the round trips completed (``ctx[CTX_STATUS]`` says why when fewer than ``n``); a wrong echoed
    sequence number counts in ``ctx[CTX_ERRORS]``.
    """
    for i in range(n):
        seq = base + i
        atomics.put_int64(src, 0, seq)
        want = ctx[CTX_RECEIVED] + 1
        t0 = rdtsc()
        result = _offer_until_done(publication, src, 0, length, timeout_ticks, ctx, CTX_BACK_PRESSURED, yield_mask)
        if result < 0:
            ctx[CTX_STATUS] = result
            return i
        spins = 0
        while ctx[CTX_RECEIVED] < want:
            image.poll(handler, ctx, 1)
            spins += 1
            _idle(spins, yield_mask)
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                ctx[CTX_STATUS] = TIMED_OUT
                return i
        lat[i] = rdtsc() - t0
        if ctx[CTX_LAST_SEQ] != seq:
            ctx[CTX_ERRORS] += 1
    return n


@kernel(i64(img_t, FragmentHandler, i64a, pub_t, i64, i64, i64))
def aeron_echo(image, handler, ctx, publication, n, timeout_ticks, yield_mask):
    """Pong: poll one message at a time (``handler`` copies it to ctx's scratch) and offer it back, ``n``
    times. Returns the messages echoed (``ctx[CTX_STATUS]`` says why when fewer)."""
    scratch = ctx.view(np.uint8)
    start = CTX_SCRATCH_WORD * 8
    for i in range(n):
        t0 = rdtsc()
        spins = 0
        while image.poll(handler, ctx, 1) == 0:
            spins += 1
            _idle(spins, yield_mask)
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                ctx[CTX_STATUS] = TIMED_OUT
                return i
        result = _offer_until_done(publication, scratch, start, ctx[CTX_PENDING_LENGTH], timeout_ticks, ctx,
                                   CTX_BACK_PRESSURED, yield_mask)
        if result < 0:
            ctx[CTX_STATUS] = result
            return i
    return n


@kernel(i64(pub_t, img_t, u8, i64, i64, f64, FragmentHandler, i64a, i64))
def aeron_fixed_rate_ping(publication, image, src, length, base, period_ticks, handler, ctx, timeout_ticks):
    """Open loop: send ``ctx[CTX_FR_COUNT]`` messages, message ``k`` scheduled at ``start + k*period_ticks``,
    while polling the echoes (``on_fixed_rate_echo`` records each latency from its scheduled time, so a
    stall delays every later message's figure, as in Aeron's load rigs). A late sender catches up by sending
    at once. Returns the echoes received; ``ctx[CTX_HEADER_WORDS - 1]`` gets the ticks by which the last
    send was behind its schedule."""
    count = ctx[CTX_FR_COUNT]
    sched_at = CTX_HEADER_WORDS
    start = rdtsc() + int(period_ticks)
    sent = 0
    while ctx[CTX_RECEIVED] < count:
        now = rdtsc()
        if sent < count:
            due = start + int(sent * period_ticks)
            if now >= due:
                atomics.put_int64(src, 0, base + sent)
                ctx[sched_at + sent] = due
                result = _offer_until_done(publication, src, 0, length, timeout_ticks, ctx, CTX_BACK_PRESSURED, 0)
                if result < 0:
                    ctx[CTX_STATUS] = result
                    return ctx[CTX_RECEIVED]
                if sent == count - 1:
                    ctx[CTX_HEADER_WORDS - 1] = rdtsc() - due
                sent += 1
        image.poll(handler, ctx, 16)
        if now - start > timeout_ticks:
            ctx[CTX_STATUS] = TIMED_OUT
            return ctx[CTX_RECEIVED]
    return ctx[CTX_RECEIVED]


@kernel(i64(pub_t, u8, i64, i64, i64, i64a, i64, i64))
def stream_publish(publication, src, length, first_seq, end_seq, counters, timeout_ticks, yield_mask):
    """Throughput producer: offer ``first_seq .. end_seq-1`` (sequence in the first 8 bytes) as fast as the
    log allows, spinning on back pressure. ``counters[PUB_BACK_PRESSURED]`` / ``[PUB_ADMIN_ACTIONS]`` count
    the offers that had to be retried. Returns the next sequence to send (``end_seq`` when done)."""
    seq = first_seq
    while seq < end_seq:
        atomics.put_int64(src, 0, seq)
        result = publication.offer(src, 0, length)
        if result < 0:
            if result == ADMIN_ACTION:
                counters[PUB_ADMIN_ACTIONS] += 1
            result = _offer_until_done(publication, src, 0, length, timeout_ticks, counters, PUB_BACK_PRESSURED,
                                       yield_mask)
            if result < 0:
                return seq
        seq += 1
    return seq


@kernel(i64(img_t, i64, FragmentHandler, i64a, i64, i64, i64))
def stream_subscribe(image, fragment_limit, handler, ctx, target, timeout_ticks, yield_mask):
    """Throughput consumer: poll until ``ctx[CTX_RECEIVED] >= target``; returns the fragments received so far
    (less than ``target`` only after ``timeout_ticks`` without a fragment)."""
    idle_spins = 0
    idle_since = 0
    while ctx[CTX_RECEIVED] < target:
        if image.poll(handler, ctx, fragment_limit) > 0:
            idle_spins = 0
            continue
        idle_spins += 1
        _idle(idle_spins, yield_mask)
        if idle_spins == 1:
            idle_since = rdtsc()
        elif (idle_spins & 0xFFF) == 0 and rdtsc() - idle_since > timeout_ticks:
            ctx[CTX_STATUS] = TIMED_OUT
            return ctx[CTX_RECEIVED]
    return ctx[CTX_RECEIVED]


# --------------------------------------------------------------------------------------- raw UDP floor
# Two compiled processes and two connected UDP sockets on loopback, no protocol: libc ``send`` and a spinning
# non-blocking ``recv``. Sequence numbers travel in the first 8 bytes of every datagram.
@kernel(i64(i64, u8, u8, i64, i64, i64, i64a, i64))
def udp_floor_ping(fd, src, dst, length, base, n, lat, timeout_ticks):
    """``n`` round trips: send ``src[:length]`` carrying ``base+i``, spin on ``recv`` until that sequence comes
    back; ``lat[i]`` in ticks. Returns the round trips completed (a send error or the deadline ends early)."""
    for i in range(n):
        seq = base + i
        atomics.put_int64(src, 0, seq)
        t0 = rdtsc()
        if c_send(fd, src, 0, length, 0) != length:
            return i
        spins = 0
        while True:
            got = c_recv(fd, dst, 0, dst.shape[0], MSG_DONTWAIT)
            if got >= 8 and atomics.get_int64(dst, 0) == seq:
                break
            spins += 1
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                return i
        lat[i] = rdtsc() - t0
    return n


@kernel(i64(i64, u8, i64, i64))
def udp_floor_pong(fd, buffer, n, timeout_ticks):
    """The other end of ``udp_floor_ping``: receive each datagram and send it straight back, ``n`` times."""
    for i in range(n):
        t0 = rdtsc()
        spins = 0
        got = c_recv(fd, buffer, 0, buffer.shape[0], MSG_DONTWAIT)
        while got <= 0:
            spins += 1
            if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
                return i
            got = c_recv(fd, buffer, 0, buffer.shape[0], MSG_DONTWAIT)
        if c_send(fd, buffer, 0, got, 0) != got:
            return i
    return n


@kernel(i64(i64, u8, i64, u8, i64))
def udp_floor_send(fd, src, length, stop_line, timeout_ticks):
    """Throughput sender: send ``length``-byte datagrams numbered from 0 as fast as ``send`` takes them until
    the receiver sets byte 0 of ``stop_line`` (a shared page) to 1. Returns the datagrams sent."""
    seq = 0
    t0 = rdtsc()
    while True:
        if (seq & 0x3F) == 0:
            if atomics.get_int64_acquire(stop_line, 0) != 0:
                return seq
            if rdtsc() - t0 > timeout_ticks:
                return -seq - 1
        atomics.put_int64(src, 0, seq)
        if c_send(fd, src, 0, length, 0) == length:
            seq += 1


@kernel(i64(i64, u8, i64a, i64, i64))
def udp_floor_receive(fd, buffer, ctx, target, timeout_ticks):
    """Throughput receiver: receive until ``ctx[CTX_RECEIVED] >= target`` datagrams; ``ctx[CTX_BYTES]`` counts
    payload bytes and ``ctx[CTX_ERRORS]`` the datagrams the kernel dropped (gaps in the sequence; a loopback
    socket drops when its receive buffer is full). Returns the datagrams received."""
    idle_since = rdtsc()
    spins = 0
    while ctx[CTX_RECEIVED] < target:
        got = c_recv(fd, buffer, 0, buffer.shape[0], MSG_DONTWAIT)
        if got <= 0:
            spins += 1
            if (spins & 0xFFF) == 0 and rdtsc() - idle_since > timeout_ticks:
                ctx[CTX_STATUS] = TIMED_OUT
                return ctx[CTX_RECEIVED]
            continue
        spins = 0
        idle_since = rdtsc()
        seq = atomics.get_int64(buffer, 0)
        if seq > ctx[CTX_NEXT_SEQ]:
            ctx[CTX_ERRORS] += seq - ctx[CTX_NEXT_SEQ]
        ctx[CTX_NEXT_SEQ] = seq + 1
        ctx[CTX_RECEIVED] += 1
        ctx[CTX_BYTES] += got
    return ctx[CTX_RECEIVED]


# ------------------------------------------------------------------------------------ relay floor (UDP)
# The least any driver does on the UDP round trip: a relay process beside each client that, every pass, looks at
# one word its client writes and does one non-blocking ``recv``, and yields its core after a pass that found
# nothing (the driver's ``yield`` idle strategy). Client and relay share one line (a file both map): the client's
# value out at RELAY_OUT, the relay's value in at RELAY_IN; the relay says it is ready (socket bound) at
# RELAY_READY and stops when the client sets RELAY_STOP.
RELAY_OUT, RELAY_IN, RELAY_READY, RELAY_STOP = 0, 8, 16, 24
#: ``udp_relay``'s return when a ``send`` failed (otherwise the datagrams it relayed both ways).
RELAY_SEND_FAILED = -1


@kernel(inline="always")
def _await_relayed(line, value, t0, timeout_ticks, yield_mask):
    """Spin (yielding as the Aeron loops do) until ``value`` is at RELAY_IN; False at the deadline."""
    spins = 0
    while atomics.get_int64_acquire(line, RELAY_IN) != value:
        spins += 1
        _idle(spins, yield_mask)
        if (spins & 0xFFF) == 0 and rdtsc() - t0 > timeout_ticks:
            return False
    return True


@kernel(i64(u8, i64, i64, i64a, i64, i64))
def relay_ping(line, base, n, lat, timeout_ticks, yield_mask):
    """``n`` round trips through the relays: store ``base+i+1`` at RELAY_OUT, spin until it comes back at
    RELAY_IN; ``lat[i]`` in ticks. Returns the round trips completed."""
    for i in range(n):
        value = base + i + 1
        t0 = rdtsc()
        atomics.put_int64_release(line, RELAY_OUT, value)
        if not _await_relayed(line, value, t0, timeout_ticks, yield_mask):
            return i
        lat[i] = rdtsc() - t0
    return n


@kernel(i64(u8, i64, i64, i64, i64))
def relay_pong(line, base, n, timeout_ticks, yield_mask):
    """The other end of ``relay_ping``: wait for each value at RELAY_IN and store it at RELAY_OUT."""
    for i in range(n):
        value = base + i + 1
        if not _await_relayed(line, value, rdtsc(), timeout_ticks, yield_mask):
            return i
        atomics.put_int64_release(line, RELAY_OUT, value)
    return n


@kernel(i64(i64, u8, u8, u8, i64, i64))
def udp_relay(fd, line, datagram, receive_buffer, length, timeout_ticks):
    """A relay's loop on its connected socket ``fd``: a new value at RELAY_OUT goes out as a ``length``-byte
    datagram carrying it, a datagram received puts its value at RELAY_IN. Runs until RELAY_STOP is set or
    ``timeout_ticks`` pass; returns the datagrams relayed both ways, or RELAY_SEND_FAILED."""
    last_out = atomics.get_int64_acquire(line, RELAY_OUT)
    atomics.put_int64_release(line, RELAY_READY, 1)
    t0 = rdtsc()
    relayed = 0
    passes = 0
    while True:
        passes += 1
        if (passes & 0xFFF) == 0 and (atomics.get_int64_acquire(line, RELAY_STOP) != 0
                                      or rdtsc() - t0 > timeout_ticks):
            return relayed
        work = 0
        out = atomics.get_int64_acquire(line, RELAY_OUT)
        if out != last_out:
            last_out = out
            atomics.put_int64(datagram, 0, out)
            if c_send(fd, datagram, 0, length, 0) != length:
                return RELAY_SEND_FAILED
            work += 1
        if c_recv(fd, receive_buffer, 0, receive_buffer.shape[0], MSG_DONTWAIT) >= 8:
            atomics.put_int64_release(line, RELAY_IN, atomics.get_int64(receive_buffer, 0))
            work += 1
        relayed += work
        if work == 0:
            sched_yield()
