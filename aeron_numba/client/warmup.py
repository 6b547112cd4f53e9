"""Load (or, on a cold cache, compile) every kernel the client calls, before it talks to a driver.

Compiling a kernel holds the GIL for a second or more. Done lazily, on the first ``offer`` or ``poll``,
it would stall the client conductor thread just after the client registered with the driver, and on a
cold cache with busy cores the keepalives could stop for longer than the client liveness timeout: the
driver would time the client out. So ``Aeron.connect`` runs this first, while no timer is running yet.
The calls use throwaway buffers with the same argument types as the real calls, so the specialisations
compiled here are the ones used later (and, with ``cache=True``, the ones loaded from disk next time).
"""

from __future__ import annotations

import threading

import numpy as np

from aeron_numba.kernels import atomics_for_python, idle_wait, term_appender
from aeron_numba.kernels.broadcast import BroadcastReceiver, CopyBroadcastReceiver
from aeron_numba.kernels.counters import CountersReader
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import broadcast, counters, log_buffer_descriptor as lb, publication_status, ring_buffer
from aeron_numba.layout.frame import DEFAULT_MTU_LENGTH, HEADER_LENGTH
from aeron_numba.layout.log_buffers import initial_raw_tails

_lock = threading.Lock()
_done = False


def _scratch_log() -> np.ndarray:
    log = np.zeros(lb.PARTITION_COUNT * lb.TERM_MIN_LENGTH + lb.LOG_META_DATA_LENGTH, np.uint8)
    meta = log.size - lb.LOG_META_DATA_LENGTH
    fields = [
        (lb.LOG_TERM_LENGTH_OFFSET, np.int32, lb.TERM_MIN_LENGTH),
        (lb.LOG_MTU_LENGTH_OFFSET, np.int32, DEFAULT_MTU_LENGTH),
        (lb.LOG_PAGE_SIZE_OFFSET, np.int32, lb.DEFAULT_FILE_PAGE_SIZE),
        (lb.LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET, np.int32, HEADER_LENGTH),
    ]
    tails, _ = initial_raw_tails(0)
    fields += [(lb.term_tail_counter_offset(i), np.int64, tail) for i, tail in enumerate(tails)]
    for offset, dtype, value in fields:
        log[meta + offset : meta + offset + np.dtype(dtype).itemsize].view(dtype)[0] = value
    return log


def warm_up_client_kernels() -> None:
    """Run each client kernel once (at most once per process)."""
    global _done
    with _lock:
        if _done:
            return
        from aeron_numba.kernels.copying_poll import RESULT_LENGTH, block_poll_and_copy, poll_and_copy, store_position_if_owned

        limit = np.zeros(counters.COUNTER_LENGTH, np.uint8)
        limit[:8].view(np.int64)[0] = 1 << 40
        message = np.zeros(64, np.uint8)
        claim = np.zeros(publication_status.CLAIM_LENGTH, np.int64)
        for exclusive in (False, True):
            log = _scratch_log()
            state = np.zeros(publication_status.PUB_STATE_LENGTH, np.int64)
            if exclusive:
                term_appender.exclusive_init_state(log, state)
                offer, try_claim = term_appender.exclusive_offer, term_appender.exclusive_try_claim
                offer_message = term_appender.exclusive_offer_message
                offer_range = term_appender.exclusive_offer_range
            else:
                offer, try_claim = term_appender.concurrent_offer, term_appender.concurrent_try_claim
                offer_message = term_appender.concurrent_offer_message
                offer_range = term_appender.concurrent_offer_range
            offer(log, state, limit, message, 0, message.size, 0)
            offer_message(log, state, limit, message[::2])  # Publication binds its fast kernels with layout "A"
            offer_range(log, state, limit, message[::2], 0, 8)
            # ... and with the example messages every new Publication binds its entries with (publication.py's
            # _ANY_BYTES and _ANY_BUFFER: one item each, which Numba types as layout "C"), or a cold cache compiles
            # them inside a connected client's duty cycle, past the driver's client liveness timeout
            for example in (np.zeros(2, np.uint8)[::2], memoryview(bytes(2))[::2]):
                offer_message(log, state, limit, example)
                offer_range(log, state, limit, example, 0, 0)
            try_claim(log, state, limit, 8, claim)
            term_appender.commit_claim(log, claim)
            try_claim(log, state, limit, 8, claim)
            term_appender.abort_claim(log, claim)
            term_appender.producer_position(log)
            position = np.zeros(counters.COUNTER_LENGTH, np.uint8)
            metadata = np.zeros(counters.METADATA_LENGTH, np.uint8)
            poll_and_copy(log, position, np.zeros((4, 3), np.int64), np.zeros(64, np.uint8), metadata,
                          np.zeros(RESULT_LENGTH, np.int64), True)
            store_position_if_owned(metadata, position, 0, 0, 0)
            block_poll_and_copy(log, position, 64, np.zeros(64, np.uint8), metadata, np.zeros(RESULT_LENGTH, np.int64))
            if exclusive:
                term_appender.exclusive_offer_block(log, state, limit, message, 0, 32)  # refused: not framed
                term_appender.exclusive_append_padding(log, state, limit, 0)

        to_driver = ManyToOneRingBuffer(np.zeros(1024 + ring_buffer.TRAILER_LENGTH, np.uint8))
        to_driver.next_correlation_id()
        to_driver.write(1, message, 0, 16)
        to_driver.consumer_heartbeat_time()
        to_clients = np.zeros(1024 + broadcast.TRAILER_LENGTH, np.uint8)
        CopyBroadcastReceiver(BroadcastReceiver(to_clients)).receive_messages(4)
        reader = CountersReader(np.zeros(4 * 1024, np.uint8), np.zeros(1024, np.uint8))
        reader.counters()
        reader.find_by_type_id_and_registration_id(counters.CLIENT_HEARTBEAT_TYPE_ID, 0)
        word = np.zeros(16, np.uint8)
        atomics_for_python.put_int64_release(word, 0, 1)
        atomics_for_python.get_int64_acquire(word, 0)
        atomics_for_python.put_int32_release(word, 8, 1)
        atomics_for_python.get_int32_acquire(word, 8)
        idle_wait.warm_up_ring_doorbell()
        _done = True
