"""Producer processes for the concurrent log stress test: each appends a numbered, verifiable stream."""

from __future__ import annotations

import os
import time

import numba
import numpy as np

from aeron_numba.kernels import term_appender as TA
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.mapped_file import MappedFile
from tests.stress.stress_support import mix32

MIN_LENGTH = 12  # producer id (4) + sequence (8)
MAX_LENGTH = 3000  # above mtu 1408 - 32, so some messages are fragmented


@numba.njit(cache=True)
def message_length(producer_id, seq):
    """Deterministic pseudo-random length in [MIN_LENGTH, MAX_LENGTH], same for producer and checker."""
    x = mix32(producer_id, seq)
    return MIN_LENGTH + x % (MAX_LENGTH - MIN_LENGTH + 1)


@numba.njit(cache=True)
def fill_message(buf, producer_id, seq):
    """Layout: i32 producer id, i64 sequence, then bytes (producer_id * 31 + seq + i) & 0xFF."""
    length = message_length(producer_id, seq)
    buf[0:4].view(np.int32)[0] = producer_id
    buf[4:12].view(np.int64)[0] = seq
    for i in range(12, length):
        buf[i] = (producer_id * 31 + seq + i) & 0xFF
    return length


@numba.njit(cache=True)
def produce(log, pub_state, limit_buf, producer_id, seq, end_seq, scratch):
    """Offer messages ``seq..end_seq`` until back pressure; returns the next sequence to send."""
    while seq < end_seq:
        length = fill_message(scratch, producer_id, seq)
        result = TA.concurrent_offer(log, pub_state, limit_buf, scratch, 0, length, seq)
        if result > 0:
            seq += 1
        elif result != P.ADMIN_ACTION:
            return seq  # back pressured: let the caller idle
    return seq


def producer(log_path: str, limit_path: str, producer_id: int, count: int, timeout_s: float) -> None:
    with MappedFile.open(log_path) as log_file, MappedFile.open(limit_path) as limit_file:
        log, limit_buf = log_file.buffer, limit_file.buffer
        state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        scratch = np.zeros(MAX_LENGTH, np.uint8)
        deadline = time.monotonic() + timeout_s
        seq = 0
        idle = 0
        while seq < count:
            new_seq = produce(log, state, limit_buf, producer_id, seq, count, scratch)
            if new_seq == seq:
                idle += 1
                if idle < 10:
                    os.sched_yield()
                else:
                    time.sleep(0.0002)  # back-off idle strategy: 2 cores, 3 producers and a consumer
                if time.monotonic() > deadline:
                    raise SystemExit(f"producer {producer_id} stuck at seq {seq}")
            else:
                idle = 0
            seq = new_seq
        del log, limit_buf
