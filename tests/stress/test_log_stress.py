"""Several processes appending concurrently to one log while one consumer reads (spec §4.2, §5).

The consumer plays the driver's part too: it moves the publication limit (§4.7) and cleans the
term it left, so the producers lap the three partitions many times.
"""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.layout import frame as F
from aeron_numba.layout import log_buffer_descriptor as LB
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import NotYet, await_condition
from harness.processes import spawned
from tests.stress import workers_log as W
from tests.unit.log_support import Consumer

PRODUCERS = 3
MESSAGES_PER_PRODUCER = 15_000
TERM_LENGTH = 64 * 1024
TIMEOUT_S = 120
IDLE_S = 0.0001  # the consumer's back-off when a poll finds nothing


class CheckingConsumer(Consumer):
    """Checks each message as it arrives instead of keeping it: per producer in order, none missing."""

    def __init__(self, log, term_length):
        super().__init__(log, term_length, batch=256)
        self.next_seq = [0] * PRODUCERS
        self.expected = np.zeros(W.MAX_LENGTH, np.uint8)

    def _deliver(self, payload: bytes, frame_offset: int) -> None:
        producer_id = int.from_bytes(payload[0:4], "little")
        seq = int.from_bytes(payload[4:12], "little")
        assert 0 <= producer_id < PRODUCERS, f"torn or foreign message: producer id {producer_id}"
        assert seq == self.next_seq[producer_id], (
            f"producer {producer_id}: got seq {seq}, expected {self.next_seq[producer_id]}"
        )
        length = W.fill_message(self.expected, producer_id, seq)
        assert payload == self.expected[:length].tobytes(), f"producer {producer_id} seq {seq}: payload torn"
        reserved = int(self.log[frame_offset + F.RESERVED_VALUE_OFFSET : frame_offset + 32].view(np.int64)[0])
        assert reserved == seq
        self.next_seq[producer_id] += 1


@pytest.mark.stress
def test_concurrent_producers_lose_duplicate_tear_or_reorder_nothing(shm_dir):
    log_path, limit_path = shm_dir / "stress.logbuffer", shm_dir / "pub-lmt.dat"
    logbuf = LogBuffers.create(log_path, term_length=TERM_LENGTH, initial_term_id=-12345, session_id=9, stream_id=10)
    limit_file = MappedFile.create(limit_path, 4096)
    window = TERM_LENGTH // 2
    limit = limit_file.buffer[:8].view(np.int64)
    limit[0] = window
    log = logbuf.buffer
    log[logbuf.metadata_offset + LB.LOG_IS_CONNECTED_OFFSET] = 1
    consumer = CheckingConsumer(log, TERM_LENGTH)
    total = PRODUCERS * MESSAGES_PER_PRODUCER
    args = [(str(log_path), str(limit_path), p, MESSAGES_PER_PRODUCER, TIMEOUT_S) for p in range(PRODUCERS)]
    with spawned(W.producer, args) as procs:

        def consume() -> int:
            """One poll, then the limit moved on as the driver would; a producer that failed fails the test."""
            polled = consumer.poll()
            if polled == 0:
                failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not failed, f"producer failed: exit codes {failed}"
            limit[0] = consumer.position + window
            return polled

        # A producer that finished exits 0 while the others go on, so the exit codes are checked in consume().
        await_condition(lambda: sum(consumer.next_seq) >= total or NotYet(f"received {consumer.next_seq} of {total}"),
                        TIMEOUT_S, "every producer's messages", work=consume, poll_interval_s=IDLE_S,
                        max_poll_interval_s=IDLE_S)
        for proc in procs:
            proc.join(timeout=30)
        assert [proc.exitcode for proc in procs] == [0] * PRODUCERS
    assert consumer.next_seq == [MESSAGES_PER_PRODUCER] * PRODUCERS
    assert consumer.poll() == 0  # nothing after the last message
    assert consumer.position >= 3 * TERM_LENGTH  # the partitions were lapped
    del log, limit
