"""A compiled service's log read in the driver's stretch (``kernels/cluster_service_stage``, ``ServiceLogStage``):
the committed session messages handed to the handler found by address, the replies offered in order to their
sessions (a leader) or dropped (a follower, a session without a publication), and the stage off, with what it
stopped before left for the container, at anything else: another log event, back pressure, the end of the log, the
commit counter gone."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.client import FragmentAssembler
from aeron_numba.client.fragment_assembler import CONTINUE
from aeron_numba.cluster.service.service_log_stage import ServiceLogStage
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import LogPublisher
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels import cluster_service_log as K
from aeron_numba.kernels import cluster_service_stage as ss
from aeron_numba.kernels.network_stages import run_stages
from harness.awaiting import await_condition
from tests.unit.cluster.service.test_service_log_kernels import _echo

CHANNEL = "aeron:ipc?term-length=64k"
LOG_CHANNEL = "aeron:ipc?term-length=256k"  # room for more than an egress stream's window
pytestmark = pytest.mark.requires_jit  # images' and publications' compiled handles: Numba overloads


class Service:
    """A log of session messages, its commit counter, two sessions' egress streams and the stage over them."""

    def __init__(self, aeron, *, is_leader=True, max_log_position=(1 << 63) - 1, sessions=(8, 9)):
        self.publication = aeron.add_exclusive_publication(LOG_CHANNEL, 100)
        subscription = aeron.add_subscription(LOG_CHANNEL, 100)
        self.egress = {s: aeron.add_publication(CHANNEL, 200 + s) for s in sessions}
        self.clients = {s: aeron.add_subscription(CHANNEL, 200 + s) for s in sessions}
        await_condition(lambda: subscription.images and self.publication.is_connected
                        and all(p.is_connected for p in self.egress.values()), 10, "the streams")
        self.image = subscription.images[0]
        self.log = LogPublisher(self.publication)
        self.commit = aeron.add_counter(203, b"", "commit-pos")
        self.state, self.outbox = np.zeros(2, np.uint8), K.new_outbox(1 << 16)
        self.stages = NetworkStages()
        self.stage = ServiceLogStage(self.stages)
        self.handle = self.image.compiled()
        self.sessions = [(s, p.compiled()) for s, p in self.egress.items()] + [(7, None)]  # 7: not connected
        assert self.run_for(is_leader=is_leader, max_log_position=max_log_position)

    def run_for(self, **kwargs) -> bool:
        commit = SimpleNamespace(values_buffer=self.commit.values_buffer, counter_id=self.commit.id,
                                 registration_id=self.commit.registration_id)
        options = dict(handle=self.handle, commit=commit, max_log_position=(1 << 63) - 1, handler=_echo,
                       service_state=self.state, outbox=self.outbox, is_leader=True, sessions=self.sessions,
                       fragment_limit=10, key=1)
        options.update(kwargs)
        return self.stage.run_for(**options)

    def message(self, session: int, payload: bytes, timestamp: int = 100) -> int:
        assert self.log.session_message_header(0, session, timestamp, payload)
        return self.publication.position

    def run(self) -> int:
        total = 0
        while (work := run_stages(self.stages.table, len(self.stages))) > 0:
            total += work
        return total

    def replies(self, session: int, count: int) -> list:
        got = []
        assembler = FragmentAssembler(lambda b, o, n, h: got.append(CLUSTER.decode(b, o, n)))
        await_condition(lambda: (self.clients[session].poll(assembler.on_fragment, 10), len(got) >= count)[1], 10,
                        f"{count} replies to session {session}")
        return [m.payload for m in got]


def test_committed_messages_reach_the_handler_and_the_leaders_replies_their_sessions_in_order(aeron):
    service = Service(aeron)
    ends = [service.message(8, b"a1"), service.message(9, b"b1"), service.message(7, b"c1"),
            service.message(8, b"a2", timestamp=104), service.message(5, b"d1")]  # 5: no such session
    assert service.run() == 0 and service.image.position == 0, "nothing is read past the commit position"
    service.commit.set(ends[3])
    assert service.run() == 4 and service.image.position == ends[3]
    assert service.stage.take() == (4, ends[3], 104) and service.stage.take() == (0, 0, 0)
    assert int(service.state[0]) == 4
    assert service.replies(8, 2) == [b"a1", b"a2"] and service.replies(9, 1) == [b"b1"]
    assert service.outbox[:16].view(np.int64).tolist() == [K.OUTBOX_HEADER_LENGTH, 0]  # sent or dropped: empty
    assert not service.stage.is_due()
    service.commit.set(ends[4])
    assert service.stage.is_due()  # a commit made outside the stretch: the stage's work
    assert service.run() == 1 and service.stage.is_running and not service.stage.is_due()


def test_a_follower_hands_the_log_over_and_drops_every_reply(aeron):
    service = Service(aeron, is_leader=False)
    service.commit.set(service.message(8, b"a1"))
    assert service.run() == 1 and int(service.state[0]) == 1
    assert service.outbox[:16].view(np.int64).tolist() == [K.OUTBOX_HEADER_LENGTH, 0]
    assert service.clients[8].poll(lambda *a: None, 10) == 0


def test_the_stage_stops_before_another_log_event_and_goes_on_when_turned_on_again(aeron):
    service = Service(aeron)
    first = service.message(8, b"a1")
    assert service.log.timer_event(0, 1, 2)
    timer_end = service.publication.position
    service.commit.set(service.message(8, b"a2"))
    assert service.run() == 1 and service.image.position == first
    assert not service.stage.is_running and service.stage.stopped == ss.STOPPED_AT_OTHER
    assert not service.stage.is_due(), "an off stage is not run again for the commit it has not read"
    service.image.sync_position()  # the container's Python path reads the timer event
    assert service.image.controlled_poll(lambda *a: CONTINUE, 1) == 1 and service.image.position == timer_end
    assert service.run_for()  # the same key: only turned back on
    assert service.run() == 1 and service.replies(8, 2) == [b"a1", b"a2"]


def test_replies_a_publication_cannot_take_now_stay_queued_in_order_with_the_stage_off(aeron):
    service = Service(aeron)
    payloads = [bytes([i]) * 1024 for i in range(48)]  # 48 KiB of replies: more than half the egress term
    for payload in payloads:
        end = service.message(8, payload)
    service.commit.set(end)
    service.run()
    assert not service.stage.is_running and service.stage.stopped == ss.STOPPED_AT_BACK_PRESSURE
    assert K.outbox_session_ids(service.outbox, np.zeros(4, np.int64)) == 1
    got = []
    assembler = FragmentAssembler(lambda b, o, n, h: got.append(CLUSTER.decode(b, o, n).payload))

    def client_reads_and_the_stage_goes_on() -> bool:
        service.clients[8].poll(assembler.on_fragment, 10)
        if not service.stage.is_running:
            service.run_for()  # the container's retry: the stage flushes the rest
        service.run()
        return len(got) == len(payloads)

    await_condition(client_reads_and_the_stage_goes_on, 10, "every reply")
    assert got == payloads and int(service.state[0]) == len(payloads)


def test_the_stage_stops_at_the_joins_max_position_a_closed_image_and_a_commit_counter_gone(aeron):
    service = Service(aeron)
    first = service.message(8, b"a1")
    service.commit.set(service.message(8, b"a2"))
    assert service.run_for(max_log_position=first, key=2)
    assert service.run() == 1 and service.image.position == first
    assert service.run() == 0 and service.stage.stopped == ss.STOPPED_AT_END and not service.stage.is_running
    reused = SimpleNamespace(values_buffer=service.commit.values_buffer, counter_id=service.commit.id,
                             registration_id=service.commit.registration_id + 1)  # freed and taken by another
    assert service.run_for(commit=reused, key=3)
    assert service.run() == 0 and service.stage.stopped == ss.STOPPED_COMMIT_GONE
    assert service.run_for(key=4)
    service.handle.state[:8].view(np.int64)[0] = 1  # the image's closed word, as the client sets it when it goes
    assert service.run() == 0 and service.stage.stopped == ss.STOPPED_AT_END
    assert service.image.position == first


def test_more_sessions_than_the_stage_holds_leave_the_log_to_the_container(aeron):
    service = Service(aeron)
    assert not service.run_for(sessions=[(s, None) for s in range(ss.MAX_SESSIONS + 1)], key=5)
    assert not service.stage.is_running and len(service.stages) == 0
