"""Spies (``aeron-spy:aeron:udp?...``): subscriptions that read a local network publication's own log, linked as
Aeron's driver links them (spec/transport.md §12). One driver in the test process, driven by hand with cached
clocks; a raw client speaks the command protocol."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.kernels import term_appender as TA
from aeron_numba.kernels.term_reader import FRAGMENT_COLUMNS, image_poll_batch
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from tests.unit.driver.test_driver_udp import STREAM, free_udp_port
from tests.unit.driver_support import MS, Harness, RawClient, run

TERM_LENGTH = 64 * 1024


# SHARED: the proxies call directly. DEDICATED: every conductor<->sender/receiver change is a queued command the
# other agent applies on its next duty cycle (driven by hand here, in turn): the same behaviour must come out.
@pytest.fixture(params=["SHARED", "DEDICATED"])
def harness(shm_dir, request):
    h = Harness(shm_dir / "aeron", threading_mode=request.param, publication_connection_timeout_ns=1_000 * MS,
                image_liveness_timeout_ns=2_000 * MS)
    yield h
    h.close()


class Spied:
    """A client with a UDP publication to ``port`` and whatever subscriptions a test adds, by hand."""

    def __init__(self, harness, port: int):
        self.harness = harness
        self.client = RawClient(harness.cnc)
        self.port = port
        self.channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
        self.images: dict[int, dc.Message] = {}  # subscription id -> its latest ON_AVAILABLE_IMAGE
        self.unavailable: list[dc.Message] = []
        self.errors: list[dc.Message] = []
        self.log = None

    def subscribe(self, channel: str) -> int:
        sub_id = self.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                  stream_id=STREAM, channel=channel)
        self.cycle(2)
        return sub_id

    def publish(self, params: str = "") -> dc.Message:
        pub_id = self.client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=STREAM,
                                  channel=f"{self.channel}|term-length=64k{params}")
        ready = self.cycle(2)
        (pub,) = [m for t, m in ready if t == cp.ON_PUBLICATION_READY and m.correlation_id == pub_id]
        self.pub_id, self.pub = pub_id, pub
        self.log = LogBuffers.open(pub.log_file_name)
        self.state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        self.state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = pub.position_limit_counter_id * cl.COUNTER_LENGTH
        return pub

    def cycle(self, cycles: int, step_ms: int = 1) -> list:
        run(self.harness, self.client, cycles, step_ms)
        responses = self.client.responses()
        for t, m in responses:
            if t == cp.ON_AVAILABLE_IMAGE:
                self.images[m.subscription_registration_id] = m
            elif t == cp.ON_UNAVAILABLE_IMAGE:
                self.unavailable.append(m)
            elif t == cp.ON_ERROR:
                self.errors.append(m)
        return responses

    def offer(self, payload: bytes) -> int:
        data = np.frombuffer(payload, np.uint8)
        return TA.concurrent_offer(self.log.buffer, self.state, self.harness.cnc.counters_values_buffer, data, 0,
                                   data.size, 0)

    def counter(self, counter_id: int) -> int:
        return self.harness.reader.get_counter_value(counter_id)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


class Reader:
    """Polls an image's log as a client's Image does and stores its ``sub-pos``."""

    def __init__(self, harness, image: dc.Message):
        self.harness = harness
        self.image = image
        self.log = LogBuffers.open(image.log_file_name)
        self.position = harness.reader.get_counter_value(image.subscriber_position_id)
        self.messages: list[bytes] = []

    def poll(self) -> list[bytes]:
        out = np.zeros((1024, FRAGMENT_COLUMNS), np.int64)
        buf = self.log.buffer
        while True:
            count, new_position = image_poll_batch(buf, self.position, out)
            if new_position == self.position:
                return self.messages
            for offset, length, _ in out[:count].tolist():
                self.messages.append(bytes(buf[offset + frame.HEADER_LENGTH:offset + length]))
            self.position = new_position
            self.harness.conductor.counters.set_counter_value(self.image.subscriber_position_id, new_position)

    def close(self) -> None:
        self.log.close()


def _is_connected(log: LogBuffers) -> int:
    return int(log.buffer[log.metadata_offset + lb.LOG_IS_CONNECTED_OFFSET:][:4].view(np.int32)[0])


def test_a_spy_added_before_the_publication_gets_its_log_as_an_image_and_reads_what_is_sent(harness):
    port = free_udp_port()
    s = Spied(harness, port)
    receiver_id = s.subscribe(s.channel)
    spy_channel = f"aeron-spy:{s.channel}"
    spy_id = s.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                           stream_id=STREAM, channel=spy_channel)
    responses = s.cycle(2)
    (ready,) = [m for t, m in responses if t == cp.ON_SUBSCRIPTION_READY and m.correlation_id == spy_id]
    assert ready.channel_status_indicator_id == -1  # a spy has no endpoint of its own, as in Aeron
    assert spy_id not in s.images

    pub = s.publish()
    s.cycle(30)
    spy_image = s.images[spy_id]
    assert spy_image.log_file_name == pub.log_file_name  # the publication's own log, not a rebuilt copy
    assert spy_image.source_identity == "aeron:ipc"  # what Aeron's driver names as a spy image's source
    assert (spy_image.correlation_id, spy_image.session_id, spy_image.stream_id) == \
        (pub.registration_id, pub.session_id, STREAM)
    label = harness.reader.get_counter_label(spy_image.subscriber_position_id)
    assert label == f"sub-pos: {spy_id} {pub.session_id} {STREAM} {spy_channel} @0"
    assert s.images[receiver_id].source_identity.startswith("127.0.0.1:")  # the network image is still there

    spy = Reader(harness, spy_image)
    received = Reader(harness, s.images[receiver_id])
    payloads = [bytes([i]) * (i * 41 % 900 + 1) for i in range(60)]
    for payload in payloads:
        assert s.offer(payload) > 0
    for _ in range(20):
        s.cycle(5)
        spy.poll()
        received.poll()
    assert spy.messages == payloads and received.messages == payloads
    spy.close()
    received.close()
    s.close()


def test_a_spy_added_after_the_publication_joins_at_the_sender_position_and_a_slow_spy_holds_pub_lmt(harness):
    s = Spied(harness, free_udp_port())
    receiver_id = s.subscribe(s.channel)
    pub = s.publish()
    s.cycle(30)
    received = Reader(harness, s.images[receiver_id])
    for payload in [b"a" * 100] * 5:
        assert s.offer(payload) > 0
    for _ in range(5):
        s.cycle(5)
        received.poll()
    sent = harness.reader.find_by_type_id_and_registration_id(cl.SENDER_POSITION_TYPE_ID, pub.registration_id)
    join = s.counter(sent)
    assert join > 0

    spy_id = s.subscribe(f"aeron-spy:{s.channel}")
    spy_image = s.images[spy_id]
    assert s.counter(spy_image.subscriber_position_id) == join
    assert harness.reader.get_counter_label(spy_image.subscriber_position_id).endswith(f" @{join}")
    spy = Reader(harness, spy_image)

    window = TERM_LENGTH // 2
    offered = 0
    for _ in range(200):  # the receiver keeps up, the spy does not read: the publisher stops a window ahead
        if s.offer(b"b" * 992) < 0:
            break
        offered += 1
        s.cycle(1)
        received.poll()
    limit = s.counter(pub.position_limit_counter_id)
    assert offered < 200 and limit <= join + window + window // 8
    assert spy.poll()[:offered] == [b"b" * 992] * offered  # everything since it joined, nothing before
    spy.close()
    received.close()
    s.close()


def test_a_spy_on_another_channel_stream_or_session_gets_no_image(harness):
    s = Spied(harness, free_udp_port())
    other = s.subscribe(f"aeron-spy:aeron:udp?endpoint=127.0.0.1:{free_udp_port()}")
    wrong_session = s.subscribe(f"aeron-spy:{s.channel}|session-id=12345")
    pub = s.publish()
    right_session = s.subscribe(f"aeron-spy:{s.channel}|session-id={pub.session_id}")
    s.cycle(10)
    assert other not in s.images and wrong_session not in s.images
    assert s.images[right_session].session_id == pub.session_id
    s.close()


def test_spy_channels_are_refused_for_publications_and_for_ipc(harness):
    s = Spied(harness, free_udp_port())
    s.client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=STREAM, channel=f"aeron-spy:{s.channel}")
    s.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=STREAM,
                  channel="aeron-spy:aeron:ipc")
    s.cycle(2)
    assert [e.error_code for e in s.errors] == [cp.INVALID_CHANNEL, cp.INVALID_CHANNEL]
    assert "for subscriptions only" in s.errors[0].error_message
    assert "is not aeron:udp" in s.errors[1].error_message
    s.close()


def test_removing_a_spy_frees_its_counter_and_releases_the_publisher(harness):
    s = Spied(harness, free_udp_port())
    receiver_id = s.subscribe(s.channel)
    s.publish()
    spy_id = s.subscribe(f"aeron-spy:{s.channel}")
    s.cycle(30)
    spy_counter = s.images[spy_id].subscriber_position_id
    assert harness.reader.get_counter_label(spy_counter).startswith(f"sub-pos: {spy_id} ")
    received = Reader(harness, s.images[receiver_id])
    while s.offer(b"c" * 992) > 0:  # the spy never reads: back pressure
        s.cycle(1)
        received.poll()
    s.client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=spy_id)
    s.cycle(2)
    assert [c for c in harness.counters_by_type(cl.SUBSCRIBER_POSITION_TYPE_ID) if c.registration_id == spy_id] == []
    assert harness.conductor.network.publications[0].spies == []
    for _ in range(10):
        s.cycle(2)
        received.poll()
    assert s.offer(b"d" * 992) > 0  # only the receiver holds it now
    received.close()
    s.close()


def test_a_closed_publication_makes_the_spy_image_unavailable_once_the_spy_has_read_to_its_end(harness):
    s = Spied(harness, free_udp_port())
    receiver_id = s.subscribe(s.channel)
    pub = s.publish()
    spy_id = s.subscribe(f"aeron-spy:{s.channel}")
    s.cycle(30)
    spy = Reader(harness, s.images[spy_id])
    received = Reader(harness, s.images[receiver_id])
    for payload in [b"e" * 300] * 10:
        assert s.offer(payload) > 0
    s.client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=s.pub_id)
    for _ in range(30):
        s.cycle(5, step_ms=20)
        received.poll()
    assert not [m for m in s.unavailable if m.subscription_registration_id == spy_id]  # it has not read yet
    assert len(harness.conductor.network.publications) == 1
    assert spy.poll() == [b"e" * 300] * 10
    for _ in range(10):
        s.cycle(5, step_ms=20)
    (gone,) = [m for m in s.unavailable if m.subscription_registration_id == spy_id]
    assert gone.correlation_id == pub.registration_id
    assert [c for c in harness.counters_by_type(cl.SUBSCRIBER_POSITION_TYPE_ID) if c.registration_id == spy_id] == []
    assert harness.conductor.network.publications == []
    spy.close()
    received.close()
    s.close()


def test_a_publication_with_only_spies_is_connected_only_when_spies_simulate_a_connection(harness):
    quiet = Spied(harness, free_udp_port())
    spy_id = quiet.subscribe(f"aeron-spy:{quiet.channel}")
    quiet.publish()
    quiet.cycle(30)
    assert spy_id in quiet.images and _is_connected(quiet.log) == 0
    assert quiet.offer(b"x" * 100) == P.NOT_CONNECTED  # Aeron: spies alone do not connect a publication

    simulated = Spied(harness, free_udp_port())
    spy_id = simulated.subscribe(f"aeron-spy:{simulated.channel}")
    pub = simulated.publish("|ssc=true")
    simulated.cycle(30)
    assert _is_connected(simulated.log) == 1
    spy = Reader(harness, simulated.images[spy_id])
    sent = harness.reader.find_by_type_id_and_registration_id(cl.SENDER_POSITION_TYPE_ID, pub.registration_id)
    payloads = [bytes([i % 256]) * 500 for i in range(300)]  # several windows: the spy's reading sets the pace
    got = 0
    for payload in payloads:
        while simulated.offer(payload) < 0:
            simulated.cycle(2)
            spy.poll()
        got += 1
    for _ in range(5):
        simulated.cycle(2)
        spy.poll()
    assert spy.messages == payloads
    assert simulated.counter(sent) == spy.position  # snd-pos follows the spy
    spy.close()
    quiet.close()
    simulated.close()


def test_the_driver_setting_makes_spies_simulate_a_connection_unless_the_channel_says_not(shm_dir):
    harness = Harness(shm_dir / "aeron", spies_simulate_connection=True)
    try:
        s = Spied(harness, free_udp_port())
        s.subscribe(f"aeron-spy:{s.channel}")
        s.publish()
        s.cycle(10)
        assert _is_connected(s.log) == 1
        t = Spied(harness, free_udp_port())
        t.subscribe(f"aeron-spy:{t.channel}")
        t.publish("|ssc=false")
        t.cycle(10)
        assert _is_connected(t.log) == 0
        s.close()
        t.close()
    finally:
        harness.close()
