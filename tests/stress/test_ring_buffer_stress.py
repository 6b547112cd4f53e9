"""Three producer processes writing one many-to-one ring buffer at once while one consumer reads (§7).

Every message names its producer and sequence and carries a payload regenerated from those fields, so
the consumer detects any loss, duplicate, tear or per-producer reordering; correlation ids drawn with
``next_correlation_id`` by all producers must each appear exactly once.
"""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.kernels import ring_buffer as RB
from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.layout import ring_buffer as L
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import NotYet, await_condition
from harness.processes import join_all, spawned, watched
from tests.stress import workers_ring_buffer as W

MESSAGES_PER_PRODUCER = 30_000
TOTAL = W.PRODUCERS * MESSAGES_PER_PRODUCER
TIMEOUT_S = 60


def create_files(shm_dir):
    rb_path, control_path = shm_dir / "to-driver.rb", shm_dir / "control.dat"
    rb_file = MappedFile.create(rb_path, W.CAPACITY + L.TRAILER_LENGTH)
    control_file = MappedFile.create(control_path, W.CONTROL_LENGTH)
    return rb_path, control_path, rb_file, control_file


@pytest.fixture(scope="module", autouse=True)
def warm_up():
    """Compile what the workers run here first, so the spawned processes only load it from the cache."""
    W.warm_up()


def start(control: np.ndarray, workers: int, procs: list) -> None:
    """Wait (with a deadline) until every worker has loaded its code, then give the start signal."""
    await_condition(lambda: all(get_int64_acquire(control, W.READY + 8 * w) for w in range(workers)), TIMEOUT_S,
                    "every worker ready", processes=watched(procs))
    put_int64_release(control, W.GO, 1)


class Checker:
    """The test process as the consumer, on the Python batch path (descriptors, then consume)."""

    def __init__(self):
        self.next_seq = [0] * W.PRODUCERS
        self.ids: set[int] = set()
        self.expected = np.zeros(W.MAX_LENGTH, np.uint8)
        self.descriptors = np.zeros((256, RB.DESCRIPTOR_FIELDS), np.int64)
        self.received = 0

    def poll(self, rb: np.ndarray) -> int:
        count, bytes_read = RB.read_descriptors(rb, W.CAPACITY, self.descriptors, 256)
        assert count >= 0, f"reader reported status {count}"
        for offset, length, type_id in self.descriptors[:count].tolist():
            body = rb[offset : offset + length].tobytes()
            producer_id = int.from_bytes(body[0:4], "little", signed=True)
            assert 0 <= producer_id < W.PRODUCERS, f"torn or foreign message: producer id {producer_id}"
            assert type_id == W.MSG_TYPE_BASE + producer_id
            seq = int.from_bytes(body[8:16], "little")
            expected = self.next_seq[producer_id]
            assert seq == expected, f"producer {producer_id}: seq {seq}, expected {expected}"
            correlation_id = int.from_bytes(body[16:24], "little")
            n = W.fill_message(self.expected, producer_id, seq, correlation_id)
            assert body == self.expected[:n].tobytes(), f"producer {producer_id} seq {seq}: torn payload"
            assert correlation_id not in self.ids, f"correlation id {correlation_id} used twice"
            self.ids.add(correlation_id)
            self.next_seq[producer_id] += 1
        self.received += count
        assert RB.consume(rb, W.CAPACITY, bytes_read) == 0
        return count


@pytest.mark.stress
def test_producers_in_three_processes_lose_duplicate_tear_or_reorder_nothing(shm_dir):
    rb_path, control_path, rb_file, control_file = create_files(shm_dir)
    rb, control = rb_file.buffer, control_file.buffer
    checker = Checker()
    args = [(str(rb_path), str(control_path), p, MESSAGES_PER_PRODUCER, TIMEOUT_S) for p in range(W.PRODUCERS)]
    with spawned(W.producer, args) as procs:
        start(control, W.PRODUCERS, procs)

        def consume() -> int:
            polled = checker.poll(rb)
            if polled == 0:  # a producer that finished exits 0 while the others go on
                failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not failed, f"producer failed: exit codes {failed}"
            return polled

        await_condition(lambda: checker.received >= TOTAL or NotYet(f"received {checker.next_seq} of {TOTAL}"),
                        TIMEOUT_S, "every producer's messages", work=consume, poll_interval_s=W.IDLE_S,
                        max_poll_interval_s=W.IDLE_S)
        join_all(procs, 30)
    assert checker.next_seq == [MESSAGES_PER_PRODUCER] * W.PRODUCERS
    assert checker.ids == set(range(TOTAL))  # every id handed out once, every one delivered
    assert checker.poll(rb) == 0 and RB.size(rb, W.CAPACITY) == 0
    assert RB.producer_position(rb, W.CAPACITY) > 20 * W.CAPACITY  # the buffer wrapped many times
    assert [get_int64_acquire(control, W.PRODUCER_STATUS + 8 * p) for p in range(W.PRODUCERS)] == [1] * W.PRODUCERS
    del rb, control
    rb_file.close()
    control_file.close()


@pytest.mark.stress
def test_compiled_handler_consumer_process_sees_every_message_once_in_order(shm_dir):
    rb_path, control_path, rb_file, control_file = create_files(shm_dir)
    rb, control = rb_file.buffer, control_file.buffer
    producer_args = [(str(rb_path), str(control_path), p, MESSAGES_PER_PRODUCER, TIMEOUT_S) for p in range(W.PRODUCERS)]
    with spawned(W.consumer, [(str(rb_path), str(control_path), TOTAL, TIMEOUT_S)]) as consumers, spawned(
        W.producer, producer_args
    ) as producers:
        start(control, W.PRODUCERS + 1, producers + consumers)
        join_all(consumers, TIMEOUT_S)
        results = {
            name: get_int64_acquire(control, slot)
            for name, slot in [
                ("received", W.CONSUMER_RECEIVED), ("errors", W.CONSUMER_ERRORS),
                ("first_error", W.CONSUMER_FIRST_ERROR), ("duplicate_ids", W.CONSUMER_DUPLICATE_IDS),
                ("corrupt", W.CONSUMER_CORRUPT),
            ]
        }
        # first_error = check code * 1e9 + producer id * 1e8 + expected sequence.
        assert results == {"received": TOTAL, "errors": 0, "first_error": 0, "duplicate_ids": 0, "corrupt": 0}
        join_all(producers, 10)
    assert RB.size(rb, W.CAPACITY) == 0
    assert RB.next_correlation_id(rb, W.CAPACITY) == TOTAL  # no id drawn and dropped
    assert RB.consumer_heartbeat_time(rb, W.CAPACITY) > 0
    del rb, control
    rb_file.close()
    control_file.close()
