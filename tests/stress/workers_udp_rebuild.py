"""UDP rebuild stress: a sender process and a receiver process joined by a lossy "network" in shared memory.

* The **sender** publishes messages into its own log with the exclusive appender, cuts MTU datagrams out of it
  with the term scanner and puts them on the network ring, dropping, duplicating and reordering some (and
  dropping everything when the ring is full, like a socket buffer). It answers NAKs by resending the range
  (lossy too), sends heartbeats when idle, and never sends past the last status message's position + window.
* The **receiver** takes datagrams off the ring, validates them with ``classify_datagram`` and puts data into the
  image with ``term_rebuilder.insert``; ``loss_detector_scan`` finds gaps and NAKs them back over a control ring
  (real NAK frames), status messages carry the subscriber position back, and it cleans the image a term behind
  the subscriber so partitions can be reused.
* The **subscriber** (the test process, ``subscribe``) polls the image with the term reader and checks every
  message, byte for byte and in order, while the rebuild is going on. Caught up, it spins on the frame length
  at its position and reads the new frame's last byte the moment the length appears (``frontier_check``): had
  the rebuilder published the header before the body, that byte would still be zero. The receiver and the
  subscriber are pinned to different CPUs so this really races.

Message ``i`` is fully determined by ``i`` (length and bytes from a hash), so the checker needs nothing else.
Control file (int64 slots): READY, GO, SUB_POS, ALL_DONE, then statistics.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

import numba
import numpy as np

from aeron_numba.kernels import atomics
from aeron_numba.kernels import loss_detector as LD
from aeron_numba.kernels import term_rebuilder as TB
from aeron_numba.kernels import term_scanner as TS
from aeron_numba.kernels import udp_frames as UF
from aeron_numba.kernels.log_cleaner import clean_buffer_to
from aeron_numba.kernels.term_appender import exclusive_init_state, exclusive_offer, producer_position
from aeron_numba.kernels.term_reader import FRAGMENT_FRAME_LENGTH, FRAGMENT_FRAME_OFFSET, image_poll_batch
from aeron_numba.layout import frame as F
from aeron_numba.layout import publication_status as P
from aeron_numba.layout import udp_frames as U
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.layout.mapped_file import MappedFile
from aeron_numba.kernels.position import compute_position, compute_term_id_from_position
from harness.awaiting import ConditionTimeout, await_condition
from tests.stress.stress_support import mix32

TERM_LENGTH = 64 * 1024
SHIFT = 16
MTU = 1408
INITIAL_TERM_ID = 0x7FFF_FFF0  # the term id wraps past INT32_MAX during the run
SESSION_ID = 4242
STREAM_ID = 1001
WINDOW = TERM_LENGTH // 2
MESSAGES = 50_000
MAX_MESSAGE = 3000

# Per mille of datagrams the network drops, duplicates, holds back behind the next one.
DROP = 50
DUPLICATE = 30
REORDER = 50

NAK_DELAY_NS = U.NAK_UNICAST_DELAY_NS
NAK_RETRY_DELAY_NS = 1_000_000  # shorter than unicast's 10 ms: a retransmit lost on the way costs less here
HEARTBEAT_NS = 1_000_000
SM_INTERVAL_NS = 1_000_000

# Rings: head (consumer) at 0, tail (producer) at 64, slots from 128; a slot is i32 length at 0, datagram at 8.
RING_HEAD = 0
RING_TAIL = 64
RING_SLOTS_AT = 128
NET_SLOTS = 256
NET_SLOT_SIZE = 8 + MTU
CTL_SLOTS = 64
CTL_SLOT_SIZE = 64
NET_LENGTH = RING_SLOTS_AT + NET_SLOTS * NET_SLOT_SIZE
CTL_LENGTH = RING_SLOTS_AT + CTL_SLOTS * CTL_SLOT_SIZE

# Control slots (int64).
READY, GO, SUB_POS, ALL_DONE = 0, 1, 2, 3
(S_DATAGRAMS, S_DROPPED, S_DUPLICATED, S_REORDERED, S_RETRANSMITTED, S_NAKS, S_HEARTBEATS, S_SMS, S_RING_FULL,
 S_FAILURES) = range(8, 18)
(R_DATAGRAMS, R_INSERTED, R_ALREADY_PRESENT, R_LATE, R_OVERRUN, R_INVALID, R_NAKS, R_GAPS, R_HEARTBEATS, R_FAILURES,
 R_FAIL_KIND, R_REBUILD, R_HWM, R_CTL_FULL, R_SMS) = range(24, 39)
CONTROL_SLOTS = 64
CONTROL_LENGTH = CONTROL_SLOTS * 8

# Sender state (process-local int64 array).
SS_SENDER_POSITION, SS_SM_POSITION, SS_NEXT_MESSAGE, SS_LAST_SEND_NS, SS_HELD_LENGTH, SS_RNG = range(6)
# Receiver state.
RS_REBUILD, RS_HWM, RS_CLEAN, RS_LAST_SM_POSITION, RS_LAST_SM_NS = range(5)

FAIL_INVALID, FAIL_INSERT, FAIL_CORRUPT, FAIL_SCAN = 1, 2, 3, 4


@numba.njit(cache=True)
def message_length(i):
    return mix32(i, 11) % (MAX_MESSAGE + 1)


@numba.njit(cache=True)
def message_byte(i, j):
    return (mix32(i, 12) + j * 31 + (j >> 8)) & 0xFF


@numba.njit(cache=True)
def _stat(control, slot, delta):
    atomics.get_and_add_int64(control, slot * 8, delta)


# ------------------------------------------------------------------------------------------- rings


@numba.njit(cache=True)
def ring_offer(ring, slots, slot_size, src, src_offset, length):
    """Copy a datagram into the next slot and publish it; False when the ring is full (the datagram is lost)."""
    tail = atomics.get_int64(ring, RING_TAIL)
    if tail - atomics.get_int64_acquire(ring, RING_HEAD) >= slots:
        return False
    slot = RING_SLOTS_AT + (tail % slots) * slot_size
    ring[slot + 8 : slot + 8 + length] = src[src_offset : src_offset + length]
    atomics.put_int32(ring, slot, length)
    atomics.put_int64_release(ring, RING_TAIL, tail + 1)
    return True


@numba.njit(cache=True)
def _next_random(sstate):
    # 63-bit LCG (int64 multiplication wraps in compiled code); the high bits are the random ones.
    x = (sstate[SS_RNG] * 6364136223846793005 + 1442695040888963407) & 0x7FFF_FFFF_FFFF_FFFF
    sstate[SS_RNG] = x
    return (x >> 31) % 1000


@numba.njit(cache=True)
def _put(net, control, src, src_offset, length):
    if not ring_offer(net, NET_SLOTS, NET_SLOT_SIZE, src, src_offset, length):
        _stat(control, S_RING_FULL, 1)


@numba.njit(cache=True)
def _flush_held(net, control, sstate, held):
    if sstate[SS_HELD_LENGTH] > 0:
        _put(net, control, held, 0, sstate[SS_HELD_LENGTH])
        sstate[SS_HELD_LENGTH] = 0


@numba.njit(cache=True)
def lossy_send(net, control, sstate, held, src, src_offset, length):
    """The network: drop, duplicate, or hold a datagram back until the next one has gone."""
    _stat(control, S_DATAGRAMS, 1)
    r = _next_random(sstate)
    if r < DROP:
        _stat(control, S_DROPPED, 1)
        return
    if r < DROP + REORDER and sstate[SS_HELD_LENGTH] == 0:
        held[:length] = src[src_offset : src_offset + length]
        sstate[SS_HELD_LENGTH] = length
        _stat(control, S_REORDERED, 1)
        return
    _put(net, control, src, src_offset, length)
    if r >= 1000 - DUPLICATE:
        _put(net, control, src, src_offset, length)
        _stat(control, S_DUPLICATED, 1)
    _flush_held(net, control, sstate, held)


# ------------------------------------------------------------------------------------------- sender


@numba.njit(cache=True)
def _send_range(log, net, control, sstate, held, position, end):
    """Datagrams of whole frames from ``position`` up to ``end`` (both in one term); returns the new position."""
    term_offset = position & (TERM_LENGTH - 1)
    term_base = ((position >> SHIFT) % 3) * TERM_LENGTH
    while position < end:
        limit = end - position
        if limit > MTU:
            limit = MTU
        packed = TS.scan_for_availability(log, term_base, term_offset, limit, TERM_LENGTH)
        available = TS.available_of(packed)
        if available <= 0:
            break
        lossy_send(net, control, sstate, held, log, term_base + term_offset, available)
        step = available + TS.padding_of(packed)
        term_offset += step
        position += step
    return position


@numba.njit(cache=True)
def sender_duty(log, pub_state, limit_buf, net, ctl, control, sstate, held, message, scratch, now_ns):
    """One sender cycle: status messages and NAKs in, messages published, new data out, heartbeat. Returns work."""
    work = 0
    # Control frames from the receiver.
    head = atomics.get_int64(ctl, RING_HEAD)
    tail = atomics.get_int64_acquire(ctl, RING_TAIL)
    while head < tail:
        slot = RING_SLOTS_AT + (head % CTL_SLOTS) * CTL_SLOT_SIZE
        length = atomics.get_int32(ctl, slot)
        kind = UF.classify_datagram(ctl, slot + 8, length)
        if kind == F.HDR_TYPE_SM:
            sm = UF.decode_status_message(ctl, slot + 8)
            position = compute_position(sm[4], sm[5], SHIFT, INITIAL_TERM_ID)
            if position > sstate[SS_SM_POSITION]:
                sstate[SS_SM_POSITION] = position
            _stat(control, S_SMS, 1)
        elif kind == F.HDR_TYPE_NAK:
            nak = UF.decode_nak(ctl, slot + 8)
            position = compute_position(nak[3], nak[4], SHIFT, INITIAL_TERM_ID)
            end = position + nak[5]
            sender_position = sstate[SS_SENDER_POSITION]
            if end > sender_position:
                end = sender_position
            # Only a range of one term that was sent and is still in the log (flow control keeps it there).
            in_log = position >= sender_position - 2 * TERM_LENGTH
            if in_log and position < end and (position >> SHIFT) == ((end - 1) >> SHIFT):
                before = atomics.get_int64(control, S_DATAGRAMS * 8)
                _send_range(log, net, control, sstate, held, position, end)
                _stat(control, S_RETRANSMITTED, atomics.get_int64(control, S_DATAGRAMS * 8) - before)
            _stat(control, S_NAKS, 1)
        else:
            _stat(control, S_FAILURES, 1)
        head += 1
        work += 1
    atomics.put_int64_release(ctl, RING_HEAD, head)

    # Publish while the window allows (the publication limit follows the receiver's status messages).
    limit = sstate[SS_SM_POSITION] + WINDOW
    atomics.put_int64(limit_buf, 0, limit)
    while sstate[SS_NEXT_MESSAGE] < MESSAGES:
        i = sstate[SS_NEXT_MESSAGE]
        length = message_length(i)
        for j in range(length):
            message[j] = message_byte(i, j)
        result = exclusive_offer(log, pub_state, limit_buf, message, 0, length, i)
        if result == P.ADMIN_ACTION:
            continue
        if result < 0:
            break
        sstate[SS_NEXT_MESSAGE] = i + 1
        work += 1

    # Send what is published, up to the sender limit, a term at a time.
    producer = producer_position(log)
    sender_position = sstate[SS_SENDER_POSITION]
    while sender_position < producer and sender_position < limit:
        end = producer if producer < limit else limit
        term_end = ((sender_position >> SHIFT) + 1) << SHIFT
        if end > term_end:
            end = term_end
        new_position = _send_range(log, net, control, sstate, held, sender_position, end)
        if new_position == sender_position:
            break
        sender_position = new_position
        sstate[SS_LAST_SEND_NS] = now_ns
        work += 1
    sstate[SS_SENDER_POSITION] = sender_position

    if now_ns - sstate[SS_LAST_SEND_NS] >= HEARTBEAT_NS:
        _flush_held(net, control, sstate, held)
        term_id = compute_term_id_from_position(sender_position, SHIFT, INITIAL_TERM_ID)
        n = UF.encode_heartbeat(scratch, 0, sender_position & (TERM_LENGTH - 1), SESSION_ID, STREAM_ID, term_id, False)
        lossy_send(net, control, sstate, held, scratch, 0, n)
        _stat(control, S_HEARTBEATS, 1)
        sstate[SS_LAST_SEND_NS] = now_ns
        work += 1
    return work


def sender(pub_path: str, net_path: str, ctl_path: str, control_path: str, seed: int, timeout_s: float) -> None:
    logbuf = LogBuffers.open(pub_path)
    files = [MappedFile.open(p) for p in (net_path, ctl_path, control_path)]
    log = logbuf.buffer
    net, ctl, control = (f.buffer for f in files)
    try:
        pub_state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        exclusive_init_state(log, pub_state)
        limit_buf = np.zeros(64, np.uint8)
        sstate = np.zeros(8, np.int64)
        sstate[SS_RNG] = seed | 1
        held = np.zeros(MTU, np.uint8)
        message = np.zeros(MAX_MESSAGE, np.uint8)
        scratch = np.zeros(64, np.uint8)
        duty = partial(sender_duty, log, pub_state, limit_buf, net, ctl, control, sstate, held, message, scratch)
        _serve(duty, control, timeout_s, "sender")
        del duty
    finally:
        del log, net, ctl, control
        logbuf.close()
        for f in files:
            f.close()


# ------------------------------------------------------------------------------------------- receiver


@numba.njit(cache=True)
def _fail(control, kind):
    if atomics.get_and_add_int64(control, R_FAILURES * 8, 1) == 0:
        atomics.put_int64(control, R_FAIL_KIND * 8, kind)


@numba.njit(cache=True)
def _send_control(ctl, control, scratch, length):
    if not ring_offer(ctl, CTL_SLOTS, CTL_SLOT_SIZE, scratch, 0, length):
        _stat(control, R_CTL_FULL, 1)
        return False
    return True


@numba.njit(cache=True)
def receiver_duty(image, net, ctl, control, rstate, loss_state, scratch, now_ns):
    """One receiver cycle: clean, rebuild from the ring, detect loss and NAK, status message. Returns work."""
    work = 0
    sub_pos = atomics.get_int64_acquire(control, SUB_POS * 8)
    # Clean a term behind the subscriber, before anything for the partition's next lap can be inserted.
    clean_to = sub_pos - TERM_LENGTH
    while rstate[RS_CLEAN] < clean_to:
        rstate[RS_CLEAN] = clean_buffer_to(image, rstate[RS_CLEAN], clean_to)
    window_limit = sub_pos + WINDOW

    head = atomics.get_int64(net, RING_HEAD)
    tail = atomics.get_int64_acquire(net, RING_TAIL)
    if tail - head > 64:
        tail = head + 64
    while head < tail:
        slot = RING_SLOTS_AT + (head % NET_SLOTS) * NET_SLOT_SIZE
        datagram = slot + 8
        length = atomics.get_int32(net, slot)
        head += 1
        work += 1
        _stat(control, R_DATAGRAMS, 1)
        kind = UF.classify_datagram(net, datagram, length)
        if kind != F.HDR_TYPE_DATA and kind != F.HDR_TYPE_PAD:
            _stat(control, R_INVALID, 1)
            _fail(control, FAIL_INVALID)
            continue
        header = UF.decode_data_header(net, datagram)
        frame_length, term_offset, term_id = header[0], header[3], header[6]
        position = compute_position(term_id, term_offset, SHIFT, INITIAL_TERM_ID)
        if frame_length == 0:
            _stat(control, R_HEARTBEATS, 1)
            if position > rstate[RS_HWM] and position <= window_limit:
                rstate[RS_HWM] = position
            continue
        if position < rstate[RS_REBUILD]:
            _stat(control, R_LATE, 1)  # already rebuilt (and maybe cleaned): a late duplicate
            continue
        if position + length > window_limit:
            _stat(control, R_OVERRUN, 1)
            continue
        index = (position >> SHIFT) % 3
        term = image[index * TERM_LENGTH : (index + 1) * TERM_LENGTH]
        result = TB.insert(term, term_offset, net, datagram, length)
        if result > 0:
            _stat(control, R_INSERTED, 1)
        elif result == TB.ALREADY_PRESENT:
            _stat(control, R_ALREADY_PRESENT, 1)
        else:
            _fail(control, FAIL_INSERT)
        if position + length > rstate[RS_HWM]:
            rstate[RS_HWM] = position + length
    atomics.put_int64_release(net, RING_HEAD, head)

    rebuild = rstate[RS_REBUILD]
    index = (rebuild >> SHIFT) % 3
    term = image[index * TERM_LENGTH : (index + 1) * TERM_LENGTH]
    new_rebuild, flags = LD.loss_detector_scan(
        term, rebuild, rstate[RS_HWM], now_ns, loss_state, INITIAL_TERM_ID, NAK_DELAY_NS, NAK_RETRY_DELAY_NS)
    if new_rebuild < 0:
        _fail(control, FAIL_SCAN)
    elif new_rebuild > rebuild:
        rstate[RS_REBUILD] = new_rebuild
        work += 1
    if flags & LD.SCAN_CORRUPT:
        _fail(control, FAIL_CORRUPT)
    if flags & LD.LOSS_FOUND:
        _stat(control, R_GAPS, 1)
    if flags & LD.SEND_NAK:
        n = UF.encode_nak(scratch, 0, SESSION_ID, STREAM_ID, loss_state[LD.STATE_NAK_TERM_ID],
                          loss_state[LD.STATE_NAK_TERM_OFFSET], loss_state[LD.STATE_NAK_LENGTH])
        if _send_control(ctl, control, scratch, n):
            _stat(control, R_NAKS, 1)
        work += 1

    # Status message: when the subscriber moved a quarter window, or every SM_INTERVAL_NS.
    if sub_pos - rstate[RS_LAST_SM_POSITION] >= WINDOW // 4 or now_ns - rstate[RS_LAST_SM_NS] >= SM_INTERVAL_NS:
        term_id = compute_term_id_from_position(sub_pos, SHIFT, INITIAL_TERM_ID)
        n = UF.encode_status_message(scratch, 0, SESSION_ID, STREAM_ID, term_id, sub_pos & (TERM_LENGTH - 1), WINDOW,
                                     77, 0, False, 0)
        if _send_control(ctl, control, scratch, n):
            rstate[RS_LAST_SM_POSITION] = sub_pos
            rstate[RS_LAST_SM_NS] = now_ns
            _stat(control, R_SMS, 1)
    atomics.put_int64(control, R_REBUILD * 8, rstate[RS_REBUILD])
    atomics.put_int64(control, R_HWM * 8, rstate[RS_HWM])
    return work


def receiver(image_path: str, net_path: str, ctl_path: str, control_path: str, timeout_s: float) -> None:
    logbuf = LogBuffers.open(image_path)
    files = [MappedFile.open(p) for p in (net_path, ctl_path, control_path)]
    image = logbuf.buffer
    net, ctl, control = (f.buffer for f in files)
    try:
        rstate = np.zeros(8, np.int64)
        loss_state = LD.new_loss_state()
        scratch = np.zeros(64, np.uint8)
        duty = partial(receiver_duty, image, net, ctl, control, rstate, loss_state, scratch)
        _serve(duty, control, timeout_s, "receiver")
        del duty
    finally:
        del image, net, ctl, control
        logbuf.close()
        for f in files:
            f.close()


# ------------------------------------------------------------------------------------------- both


def pin_to(cpu_index: int) -> None:
    """Pin this process to one of the CPUs it may use (the receiver and the subscriber on different ones, so the
    subscriber really reads while the receiver writes); no-op on a single CPU. Children inherit the mask: the
    parent pins itself only after spawning the workers."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[cpu_index % len(cpus)]})


def _serve(duty, control: np.ndarray, timeout_s: float, name: str) -> None:
    """Compile (or load), say READY, wait for GO, then run duty cycles until ALL_DONE or the deadline."""
    pin_to(0)
    duty(time.monotonic_ns())
    add(control, READY, 1)
    deadline = time.monotonic() + timeout_s
    # Both spin, yielding the CPU (a sleep of 0) only when there is nothing to do.
    try:
        await_condition(lambda: get(control, GO) != 0, timeout_s, f"{name}: GO", poll_interval_s=0.0,
                        max_poll_interval_s=0.0)
    except ConditionTimeout:
        print(f"{name}: no GO before the deadline", file=sys.stderr)
        sys.exit(2)
    try:
        await_condition(lambda: get(control, ALL_DONE) != 0, max(0.0, deadline - time.monotonic()),
                        f"{name}: ALL_DONE", work=lambda: duty(time.monotonic_ns()), poll_interval_s=0.0,
                        max_poll_interval_s=0.0)
    except ConditionTimeout:
        print(f"{name}: not done before the deadline; stats {control.view(np.int64).tolist()}", file=sys.stderr)
        sys.exit(3)


@numba.njit(cache=True)
def get(control, slot):
    return atomics.get_int64_acquire(control, slot * 8)


@numba.njit(cache=True)
def add(control, slot, delta):
    return atomics.get_and_add_int64(control, slot * 8, delta)


# ------------------------------------------------------------------------------------------- subscriber


# Checker state.
CK_MESSAGE, CK_OFFSET_IN_MESSAGE, CK_FAILURES, CK_FAIL_KIND, CK_FAIL_MESSAGE, CK_FRONTIER_READS, CK_POSITION = range(7)
BAD_HEADER, BAD_FLAGS, BAD_BYTES, BAD_RESERVED, BAD_EXTRA, BAD_TORN = range(1, 7)


@numba.njit(cache=True)
def _check_fail(cstate, kind):
    if cstate[CK_FAILURES] == 0:
        cstate[CK_FAIL_KIND] = kind
        cstate[CK_FAIL_MESSAGE] = cstate[CK_MESSAGE]
    cstate[CK_FAILURES] += 1


@numba.njit(cache=True)
def check_fragments(image, out, count, cstate):
    """Check ``count`` fragments described in ``out`` (term reader batch) continue the message sequence."""
    for k in range(count):
        frame = out[k, FRAGMENT_FRAME_OFFSET]
        frame_length = out[k, FRAGMENT_FRAME_LENGTH]
        header = UF.decode_data_header(image, frame)
        if header[2] != F.HDR_TYPE_DATA or header[4] != SESSION_ID or header[5] != STREAM_ID:
            _check_fail(cstate, BAD_HEADER)
            continue
        i = cstate[CK_MESSAGE]
        if i >= MESSAGES:
            _check_fail(cstate, BAD_EXTRA)
            continue
        if atomics.get_int64(image, frame + F.RESERVED_VALUE_OFFSET) != i:
            _check_fail(cstate, BAD_RESERVED)
        flags = header[1]
        at = cstate[CK_OFFSET_IN_MESSAGE]
        payload = frame_length - F.HEADER_LENGTH
        total = message_length(i)
        begins = (flags & F.BEGIN_FRAG_FLAG) != 0
        ends = (flags & F.END_FRAG_FLAG) != 0
        if begins != (at == 0) or ends != (at + payload == total) or at + payload > total:
            _check_fail(cstate, BAD_FLAGS)
            return
        for j in range(payload):
            if image[frame + F.HEADER_LENGTH + j] != message_byte(i, at + j):
                _check_fail(cstate, BAD_BYTES)
                return
        if ends:
            cstate[CK_MESSAGE] = i + 1
            cstate[CK_OFFSET_IN_MESSAGE] = 0
        else:
            cstate[CK_OFFSET_IN_MESSAGE] = at + payload


@numba.njit(cache=True)
def frontier_check(image, position, cstate, max_spins):
    """Spin on the frame length at ``position`` (the subscriber's, caught up) and, the moment it turns positive,
    read the frame's last payload byte: the rebuilder copies a block's body before it release-stores the header,
    so that byte must already be the message's. Returns 1 when a frame appeared, 0 after ``max_spins``."""
    frame = ((position >> SHIFT) % 3) * TERM_LENGTH + (position & (TERM_LENGTH - 1))
    for _ in range(max_spins):
        frame_length = atomics.get_int32_acquire(image, frame)
        if frame_length > 0:
            frame_type = atomics.get_int16(image, frame + F.TYPE_FIELD_OFFSET) & 0xFFFF
            payload = frame_length - F.HEADER_LENGTH
            if frame_type == F.HDR_TYPE_DATA and payload > 0 and payload <= MTU:
                last = atomics.get_int8(image, frame + frame_length - 1) & 0xFF
                i = cstate[CK_MESSAGE]
                if i < MESSAGES and last != message_byte(i, cstate[CK_OFFSET_IN_MESSAGE] + payload - 1):
                    _check_fail(cstate, BAD_TORN)
                cstate[CK_FRONTIER_READS] += 1
            return 1
    return 0


@numba.njit(cache=True)
def subscribe(image, control, out, cstate, max_idle_spins):
    """The subscriber in compiled code: poll the image from ``cstate[CK_POSITION]``, check what arrived, publish
    ``SUB_POS``, and when caught up spin at the frontier (``frontier_check``). Returns after ``max_idle_spins``
    spins without a new frame, on the first failure, or once every message has been checked."""
    idle = 0
    while cstate[CK_MESSAGE] < MESSAGES and cstate[CK_FAILURES] == 0 and idle < max_idle_spins:
        position = cstate[CK_POSITION]
        count, new_position = image_poll_batch(image, position, out)
        if new_position != position:
            check_fragments(image, out, count, cstate)
            cstate[CK_POSITION] = new_position
            atomics.put_int64_release(control, SUB_POS * 8, new_position)
            idle = 0
        elif frontier_check(image, position, cstate, 1000) == 0:
            idle += 1000
    return cstate[CK_MESSAGE]


def warm_up(directory) -> None:
    """Compile (or load from cache) every kernel the workers and the checker use, on throwaway files."""
    pub = LogBuffers.create(directory / "warm-pub.logbuffer", term_length=TERM_LENGTH, initial_term_id=INITIAL_TERM_ID,
                            session_id=SESSION_ID, stream_id=STREAM_ID, mtu_length=MTU)
    try:
        log = pub.buffer
        net, ctl = np.zeros(NET_LENGTH, np.uint8), np.zeros(CTL_LENGTH, np.uint8)
        control = np.zeros(CONTROL_LENGTH, np.uint8)
        pub_state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        exclusive_init_state(log, pub_state)
        sstate = np.zeros(8, np.int64)
        sstate[SS_RNG] = 1
        sender_duty(log, pub_state, np.zeros(64, np.uint8), net, ctl, control, sstate, np.zeros(MTU, np.uint8),
                    np.zeros(MAX_MESSAGE, np.uint8), np.zeros(64, np.uint8), 0)
        receiver_duty(log, net, ctl, control, np.zeros(8, np.int64), LD.new_loss_state(), np.zeros(64, np.uint8), 0)
        check_fragments(log, np.zeros((1, 3), np.int64), 0, np.zeros(8, np.int64))
        frontier_check(log, 0, np.zeros(8, np.int64), 1)
        subscribe(log, control, np.zeros((4, 3), np.int64), np.zeros(8, np.int64), 1)
        get(control, 0), add(control, 0, 0)
        del log
    finally:
        pub.close()
