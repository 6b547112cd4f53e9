"""Several client processes publish through the Python client API while this process subscribes
(spec §4, §5, §11): concurrent publications sharing one log, an exclusive one, try_claim and fragmented
messages; nothing lost, duplicated, torn or reordered per publisher.

The driver is the scripted one of the client unit tests, running on a thread of this process; each
publisher is a spawned process with its own Aeron client.
"""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.client import Aeron, Context, FragmentAssembler
from harness.awaiting import NotYet, await_condition
from harness.processes import join_all, spawned
from tests.stress import workers_client as W
from tests.unit.client_support import FakeDriver

MODES = ("concurrent", "concurrent", "claim", "exclusive")
MESSAGES = 8_000
TIMEOUT_S = 120
IDLE_S = 0.0002  # the subscriber's back-off when a poll finds nothing


class Checker:
    def __init__(self):
        self.next_seq = [0] * len(MODES)
        self.sessions: dict[int, set] = {i: set() for i in range(len(MODES))}

    def __call__(self, buffer, offset, length, header):
        payload = buffer[offset : offset + length]
        publisher_id = int(payload[0:4].view(np.int32)[0])
        seq = int(payload[4:12].view(np.int64)[0])
        assert 0 <= publisher_id < len(MODES), f"torn or foreign message: publisher id {publisher_id}"
        assert seq == self.next_seq[publisher_id], f"publisher {publisher_id}: seq {seq}, expected {self.next_seq[publisher_id]}"
        assert np.array_equal(payload, W.message(publisher_id, seq)), f"publisher {publisher_id} seq {seq}: torn payload"
        assert header.reserved_value == seq
        self.sessions[publisher_id].add(header.session_id)
        self.next_seq[publisher_id] += 1


@pytest.mark.stress
def test_client_processes_publish_everything_in_order(shm_dir):
    with FakeDriver(shm_dir / "aeron") as driver:
        with Aeron.connect(Context(aeron_dir=driver.aeron_dir, driver_timeout_ms=20_000)) as aeron:
            subscription = aeron.add_subscription(W.CHANNEL, W.STREAM_ID)
            checker = Checker()
            assembler = FragmentAssembler(checker)
            args = [(str(driver.aeron_dir), i, MESSAGES, mode, TIMEOUT_S) for i, mode in enumerate(MODES)]
            with spawned(W.publisher_main, args) as procs:

                def consume() -> int:
                    polled = subscription.poll(assembler, 64)
                    if polled == 0:  # a publisher that finished exits 0 while the others go on
                        failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                        assert not failed, f"publisher failed: exit codes {failed}"
                    return polled

                def received_all():
                    return min(checker.next_seq) >= MESSAGES or NotYet(f"received {checker.next_seq} of {MESSAGES}")

                await_condition(received_all, TIMEOUT_S, "every publisher's messages", work=consume,
                                poll_interval_s=IDLE_S, max_poll_interval_s=IDLE_S)
                join_all(procs, timeout_s=30)
            assert checker.next_seq == [MESSAGES] * len(MODES)
            # The concurrent and claim publishers shared one log (one session); the exclusive one had its own.
            shared = checker.sessions[0] | checker.sessions[1] | checker.sessions[2]
            assert len(shared) == 1 and len(checker.sessions[3]) == 1 and not shared & checker.sessions[3]
        assert driver.errors == []
