"""The driver's UDP path in one process: conductor, sender and receiver driven by hand with cached clocks,
talking to themselves over loopback (spec/transport.md §16). A raw client speaks the command protocol."""

from __future__ import annotations

import pathlib
import socket
import struct
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher as Dispatcher

from aeron_numba.agent.idle_strategy import BackoffIdleStrategy, YieldingIdleStrategy
from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.feedback_delay import OptimalMulticastFeedbackDelay
from aeron_numba.driver.flow_control import MaxFlowControl, UnicastFlowControl
from aeron_numba.driver.loss_generator import LossControl, LossSettings
from aeron_numba.driver.network_cycles import NetworkCycles
from aeron_numba.driver.publication_image import CLEAN_STEP_TERM_DIVISOR, ImageState
from aeron_numba.driver.warmup import warm_up_driver_kernels
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels import idle_wait as iw
from aeron_numba.kernels import network_duty_cycle as ndc
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels import term_appender as TA
from aeron_numba.kernels.loss_report import LossReportReader
from aeron_numba.kernels.term_reader import FRAGMENT_COLUMNS, image_poll_batch
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns
from aeron_numba.layout import publication_status as P
from aeron_numba.layout import udp_frames as ul
from aeron_numba.layout.log_buffers import LogBuffers
from harness.awaiting import await_condition
from tests.unit.driver_support import MS, Harness, RawClient, run

UDP_TERM_LENGTH = 64 * 1024
STREAM = 10
# Administratively scoped groups, joined on loopback only (interface=127.0.0.1): nothing leaves the host.
MULTICAST_GROUP = "239.255.90.1"
MULTICAST_CONTROL_GROUP = "239.255.90.2"


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("0.0.0.0", 0))
        return probe.getsockname()[1]


def multicast_channel(port: int) -> str:
    return f"aeron:udp?endpoint={MULTICAST_GROUP}:{port}|interface=127.0.0.1"


# SHARED: the proxies call directly. DEDICATED: every conductor<->sender/receiver change is a queued command the
# other agent applies on its next duty cycle (driven by hand here, in turn): the same behaviour must come out.
@pytest.fixture(params=["SHARED", "DEDICATED"])
def harness(shm_dir, request):
    h = Harness(shm_dir / "aeron", threading_mode=request.param, loss_control_enabled=True, publication_connection_timeout_ns=1_000 * MS,
                image_liveness_timeout_ns=2_000 * MS)
    yield h
    h.close()


class Stream:
    """A UDP subscription and a publication to its port, in one driver; with ``channel``, both on that channel
    (a multicast group: the driver talks to itself over loopback multicast)."""

    def __init__(self, harness, channel_params: str = "", channel: str | None = None, publication_params: str = "",
                 publication_channel: str | None = None):
        self.harness = harness
        self.client = client = RawClient(harness.cnc)
        self.sub_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                  stream_id=STREAM,
                                  channel=(channel or "aeron:udp?endpoint=127.0.0.1:0") + channel_params)
        harness.work()
        # A new broadcast receiver also sees the last response sent before it: only this subscription's counts.
        (ready,) = [m for t, m in client.responses()
                    if t == cp.ON_SUBSCRIPTION_READY and m.correlation_id == self.sub_id]
        self.receive_status_id = ready.channel_status_indicator_id
        (endpoint,) = harness.conductor.network.receive_endpoints.values()
        self.port = endpoint.local_address[1]
        self.pub_id = client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=STREAM,
                                  channel=(publication_channel or channel
                                           or f"aeron:udp?endpoint=127.0.0.1:{self.port}")
                                  + "|term-length=64k" + publication_params)
        harness.work()
        (t, self.pub), = client.responses()
        assert t == cp.ON_PUBLICATION_READY
        self.log = LogBuffers.open(self.pub.log_file_name)
        self.state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        self.state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = self.pub.position_limit_counter_id * cl.COUNTER_LENGTH
        run(harness, client, 20)
        images = [m for t, m in client.responses() if t == cp.ON_AVAILABLE_IMAGE]
        assert len(images) == 1
        self.image = images[0]
        self.image_log = LogBuffers.open(self.image.log_file_name)
        self.position = harness.reader.get_counter_value(self.image.subscriber_position_id)  # the join position
        self.messages: list[bytes] = []
        self._partial = b""

    def offer(self, payload: bytes) -> int:
        data = np.frombuffer(payload, np.uint8)
        return TA.concurrent_offer(self.log.buffer, self.state, self.harness.cnc.counters_values_buffer, data, 0,
                                   data.size, 0)

    def offer_all(self, payloads: list[bytes], step_ms: int = 1) -> None:
        for payload in payloads:
            while self.offer(payload) < 0:  # back pressured: let the stream move and consume
                run(self.harness, self.client, 5, step_ms)
                self.drain()

    def settle(self, cycles: int, step_ms: int = 1) -> list[bytes]:
        """Runs the driver while consuming, so the receiver window keeps opening; returns all received."""
        for _ in range(0, cycles, 5):
            run(self.harness, self.client, 5, step_ms)
            self.drain()
        return self.messages

    def drain(self) -> list[bytes]:
        """Reads what the image has, like a subscriber does, and stores its sub-pos so the window moves."""
        out = np.zeros((4096, FRAGMENT_COLUMNS), np.int64)
        buf = self.image_log.buffer
        while True:
            count, new_position = image_poll_batch(buf, self.position, out)
            if new_position == self.position:
                return self.messages
            for offset, length, _ in out[:count].tolist():  # reassemble fragmented messages by their flags
                flags = int(buf[offset + frame.FLAGS_FIELD_OFFSET])
                if flags & frame.BEGIN_FRAG_FLAG:
                    self._partial = b""
                self._partial += bytes(buf[offset + frame.HEADER_LENGTH:offset + length])
                if flags & frame.END_FRAG_FLAG:
                    self.messages.append(self._partial)
            self.position = new_position
            self.harness.conductor.counters.set_counter_value(self.image.subscriber_position_id, new_position)

    def close(self) -> None:
        self.log.close()
        self.image_log.close()


def test_a_stream_connects_flows_and_reports_its_counters(harness):
    stream = Stream(harness)
    reader = harness.reader
    assert stream.image.source_identity.startswith("127.0.0.1:")
    assert "/images/" in stream.image.log_file_name
    assert reader.get_counter_label(stream.receive_status_id) == \
        f"rcv-channel: aeron:udp?endpoint=127.0.0.1:0 127.0.0.1:{stream.port}"
    assert reader.get_counter_value(stream.receive_status_id) == cl.CHANNEL_STATUS_ACTIVE
    assert reader.get_counter_label(stream.pub.channel_status_indicator_id).startswith("snd-channel: aeron:udp?")
    labels = [c.label for c in reader.counters()]
    for prefix in ("snd-pos:", "snd-lmt:", "snd-bpe:", "rcv-hwm:", "rcv-pos:", "sub-pos:", "snd-local-sockaddr:",
                   "rcv-local-sockaddr:"):
        assert any(label.startswith(prefix) for label in labels), prefix
    payloads = [bytes([i]) * (i * 37 % 3000 + 1) for i in range(200)]  # many fragmented (mtu 1408)
    stream.offer_all(payloads)
    assert stream.settle(50) == payloads
    payload_bytes = sum(map(len, payloads))  # pad frames go out as headers only, so count payloads
    assert harness.system_counter(cl.STATUS_MESSAGES_SENT) > 0
    assert harness.system_counter(cl.BYTES_SENT) > payload_bytes and harness.system_counter(cl.BYTES_RECEIVED) > payload_bytes
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) == 0 and harness.system_counter(cl.INVALID_PACKETS) == 0
    log = stream.image_log  # one transport delivering, as the C driver writes it for a client's Image
    assert int(log.buffer[log.metadata_offset + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET:][:4].view(np.int32)[0]) == 1
    stream.close()


def test_a_publication_on_a_channel_tag_sends_through_the_endpoint_that_carried_the_tag(harness):
    """``aeron:udp?tags=1001`` names no address: its data goes where ``endpoint=...|tags=1001`` sends, from the
    same socket, and the subscriber there reads it."""
    port = free_udp_port()
    carrier = RawClient(harness.cnc)
    carrier.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=STREAM + 1,
                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001|term-length=64k")
    harness.work()
    (t, _), = carrier.responses()
    assert t == cp.ON_PUBLICATION_READY
    stream = Stream(harness, channel=f"aeron:udp?endpoint=127.0.0.1:{port}", publication_channel="aeron:udp?tags=1001")
    network = harness.conductor.network
    (endpoint,) = network.send_endpoints.values()
    assert [p.endpoint for p in network.publications] == [endpoint, endpoint]
    assert stream.pub.channel_status_indicator_id == endpoint.status_counter_id
    assert stream.image.source_identity == f"127.0.0.1:{endpoint.local_address[1]}"
    # The log's entity tag, as C writes it: no publication tag on this channel (-1); 0 in an image's log.
    assert [_entity_tag(log) for log in (stream.log, stream.image_log)] == [lb.INVALID_TAG, 0]
    payloads = [bytes([i]) * (i * 53 % 2000 + 1) for i in range(100)]
    stream.offer_all(payloads)
    assert stream.settle(50) == payloads
    stream.close()


def _entity_tag(log: LogBuffers) -> int:
    offset = lb.metadata_offset(log.buffer.size) + lb.LOG_ENTITY_TAG_OFFSET
    return int(log.buffer[offset:offset + 8].view(np.int64)[0])


def test_a_network_publication_has_a_sampled_pub_pos_freed_with_it(harness):
    """As the C and Java drivers: pub-pos (type 12) beside pub-lmt, snd-pos, snd-lmt and snd-bpe, labelled as
    the IPC one, holding the producer position, gone with the publication."""
    stream = Stream(harness)
    (pub_pos,) = harness.counters_by_type(cl.PUBLISHER_POS_TYPE_ID)
    channel = f"aeron:udp?endpoint=127.0.0.1:{stream.port}|term-length=64k"
    registration_id, session_id = stream.pub.registration_id, stream.pub.session_id
    assert pub_pos.label == f"pub-pos (sampled): {registration_id} {session_id} {STREAM} {channel} "
    key = ck.stream_counter_key(registration_id, session_id, STREAM, channel)
    assert pub_pos.key[:len(key)] == key
    assert pub_pos.registration_id == registration_id
    assert pub_pos.value == int(TA.producer_position(stream.log.buffer))
    stream.offer_all([b"x" * 100] * 3)
    run(harness, stream.client, 1)
    assert harness.reader.get_counter_value(pub_pos.counter_id) == int(TA.producer_position(stream.log.buffer)) > pub_pos.value
    stream.client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=stream.pub_id)
    stream.settle(100, step_ms=10)
    run(harness, stream.client, 20, step_ms=20)
    assert harness.conductor.network.publications == []
    assert harness.counters_by_type(cl.PUBLISHER_POS_TYPE_ID) == []
    stream.close()


def test_a_fixed_gap_is_naked_and_retransmitted(harness):
    stream = Stream(harness)
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    term_id = stream.log.initial_term_id
    control.write(LossSettings(gap_term_id=term_id, gap_term_offset=1024, gap_length=4096))
    payloads = [bytes([i]) * 200 for i in range(100)]
    stream.offer_all(payloads)
    assert stream.settle(100) == payloads
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) >= 1
    assert harness.system_counter(cl.NAK_MESSAGES_RECEIVED) >= 1
    assert harness.system_counter(cl.RETRANSMITS_SENT) >= 1
    (entry,) = LossReportReader.read(harness.driver.loss_report.buffer)  # one entry per image, §13.1
    assert (entry.session_id, entry.stream_id) == (stream.pub.session_id, STREAM)
    assert entry.observation_count == harness.system_counter(cl.NAK_MESSAGES_SENT)
    assert 0 < entry.total_bytes_lost <= 4096 + 1408 and entry.source == stream.image.source_identity
    assert entry.channel == "aeron:udp?endpoint=127.0.0.1:0"
    control.close()
    stream.close()


def test_a_nak_after_the_last_retransmit_lingered_is_answered_again_without_a_python_send_between(harness):
    """The compiled network cycles send the data, so the sender's Python ``send`` (which expires retransmits'
    lingers) may not run between two NAKs of a gap the first retransmit did not fill (its datagrams lost too): a
    NAK after the linger is answered, as Aeron's retransmit handler answers it, or the receiver is lapped."""
    stream = Stream(harness)
    payloads = [bytes([i]) * 200 for i in range(10)]
    stream.offer_all(payloads)
    assert stream.settle(100) == payloads
    (publication,) = harness.conductor.network.sender.publications
    term_id, now = stream.log.initial_term_id, harness.nano.nano_time()
    sent = harness.system_counter(cl.RETRANSMITS_SENT)
    publication.on_nak(term_id, 0, 256, now)
    assert harness.system_counter(cl.RETRANSMITS_SENT) == sent + 1
    publication.on_nak(term_id, 0, 256, now + publication.retransmit_linger_ns // 2)  # lingering: not again yet
    assert harness.system_counter(cl.RETRANSMITS_SENT) == sent + 1
    publication.on_nak(term_id, 0, 256, now + publication.retransmit_linger_ns + 1)
    assert harness.system_counter(cl.RETRANSMITS_SENT) == sent + 2
    stream.close()


def test_an_unreliable_stream_fills_a_gap_at_once_and_never_naks(harness):
    stream = Stream(harness, "|reliable=false")
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    control.write(LossSettings(gap_term_id=stream.log.initial_term_id, gap_term_offset=1024, gap_length=1024))
    payloads = [bytes([i]) * 224 for i in range(40)]  # one 256-byte frame each, several per datagram
    stream.offer_all(payloads)
    received = stream.settle(50)
    assert harness.system_counter(cl.LOSS_GAP_FILLS) == 1
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) == 0 and harness.system_counter(cl.RETRANSMITS_SENT) == 0
    (entry,) = LossReportReader.read(harness.driver.loss_report.buffer)
    lost = entry.total_bytes_lost // 256  # the frames of the datagrams that carried part of the gap, padded over
    assert entry.total_bytes_lost % 256 == 0 and lost >= 4
    missing = [i for i, p in enumerate(payloads) if p not in received]
    assert len(missing) == lost and missing == list(range(missing[0], missing[0] + lost))
    assert set(range(4, 8)) <= set(missing)  # the frames at term offsets 1024-2047, the gap's
    assert received == [p for i, p in enumerate(payloads) if i not in missing]  # the rest intact and in order
    control.close()
    stream.close()


def test_random_loss_of_a_fifth_of_the_data_is_recovered(harness):
    stream = Stream(harness)
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    control.write(LossSettings(receive_data_rate=0.2, seed=3))
    payloads = [bytes([i % 256]) * (i * 53 % 1500 + 1) for i in range(400)]
    stream.offer_all(payloads, step_ms=2)
    assert stream.settle(300, step_ms=2) == payloads
    assert harness.system_counter(cl.RETRANSMITS_SENT) >= 1
    control.close()
    stream.close()


def _setup(term_offset: int, term_length: int, mtu: int, flags: int = 0) -> bytes:
    """A SETUP frame (§12.2) for session 77 of the subscribed stream."""
    return struct.pack("<iBBhiiiiiiii", 40, 0, flags, frame.HDR_TYPE_SETUP, term_offset, 77, STREAM, 5, 5,
                       term_length, mtu, 0)


@pytest.mark.parametrize("garbage", [b"", b"\x01", b"\x00" * 7, b"\x20\x00\x00\x00\x07\xc0\x01\x00" + b"\x00" * 24,
                                     b"\x24\x00\x00\x00\x00\x00\x05\x00" + b"\x00" * 28, bytes(range(200)),
                                     _setup(0, 1000, 1408), _setup(3, 65536, 1408), _setup(0, 65536, 100)])
def test_malformed_datagrams_are_counted_and_dropped(harness, garbage):
    stream = Stream(harness)
    before = harness.system_counter(cl.INVALID_PACKETS)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rogue:
        rogue.sendto(garbage, ("127.0.0.1", stream.port))
    run(harness, stream.client, 5)
    assert harness.system_counter(cl.INVALID_PACKETS) == before + 1
    assert len(harness.conductor.network.images) == 1  # no image from a bad SETUP
    payload = b"still fine"
    assert stream.offer(payload) > 0
    run(harness, stream.client, 20)
    assert stream.drain() == [payload]
    stream.close()


def test_closing_drains_the_publication_and_the_image_goes_away_with_its_files(harness):
    stream = Stream(harness)
    assert stream.offer(b"last words") > 0
    stream.client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=stream.pub_id)
    assert stream.settle(100, step_ms=10) == [b"last words"]  # the subscriber reads up to the end of stream
    stream.close()
    run(harness, stream.client, 40, step_ms=20)  # linger 0; less than the 2 s cool-down of the ended session
    responses = stream.client.responses()
    assert (cp.ON_UNAVAILABLE_IMAGE, stream.image.correlation_id) in [
        (t, getattr(m, "correlation_id", None)) for t, m in responses]
    network = harness.conductor.network
    assert network.publications == [] and network.images == [] and network.send_endpoints == {}
    aeron_dir = harness.conductor.ctx.aeron_dir
    assert list(pathlib.Path(aeron_dir, "images").glob("*")) == []
    assert list(pathlib.Path(aeron_dir, "publications").glob("*")) == []
    kinds = {c.type_id for c in harness.reader.counters()}
    assert not kinds & {cl.SENDER_POSITION_TYPE_ID, cl.RECEIVER_HWM_TYPE_ID, cl.SEND_CHANNEL_STATUS_TYPE_ID}
    # A late heartbeat of the ended session is ignored (cooling down), not answered with a SETUP request.
    status_messages = harness.system_counter(cl.STATUS_MESSAGES_SENT)
    heartbeat = struct.pack("<iBBhiiiiq", 0, 0, 0xC0, frame.HDR_TYPE_DATA, 0, stream.pub.session_id, STREAM,
                            stream.log.initial_term_id, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as late:
        late.sendto(heartbeat, ("127.0.0.1", stream.port))
    run(harness, stream.client, 5)
    assert harness.system_counter(cl.HEARTBEATS_RECEIVED) > 0
    assert harness.system_counter(cl.STATUS_MESSAGES_SENT) == status_messages and network.images == []


@pytest.mark.parametrize("eos", [True, False])
def test_eos_false_closes_a_publication_without_ending_the_stream_at_its_subscribers(harness, eos):
    """Aeron's ``eos`` channel parameter: a replay the live stream takes over from must not end the stream."""
    stream = Stream(harness, publication_params="" if eos else "|eos=false")
    assert stream.offer(b"last words") > 0
    stream.client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=stream.pub_id)
    assert stream.settle(60, step_ms=10) == [b"last words"]
    images = harness.conductor.network.images
    if eos:  # the end of stream reached and consumed: the image went at once
        assert images == []
    else:  # still there, waiting for more (until the image liveness timeout)
        (image,) = images
        assert image.end_of_stream_position is None and image.state is ImageState.ACTIVE
    stream.close()


def test_a_lost_tail_is_recovered_before_a_closed_publication_goes_even_with_linger_0(harness):
    stream = Stream(harness)
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    stream.offer_all([b"first"])
    assert stream.settle(20) == [b"first"]
    control.write(LossSettings(receive_data_rate=1.0))  # the tail and its heartbeats' data never arrive
    stream.offer_all([b"tail"])
    run(harness, stream.client, 20)
    stream.client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=stream.pub_id)
    run(harness, stream.client, 50, step_ms=10)
    network = harness.conductor.network
    assert len(network.publications) == 1, "drained while a receiver still lacked the tail"
    control.write(LossSettings())
    assert stream.settle(100, step_ms=10) == [b"first", b"tail"]
    run(harness, stream.client, 100, step_ms=20)
    assert network.publications == []
    control.close()
    stream.close()


# ------------------------------------------------------------------------------------------------ multicast
def test_a_multicast_stream_sends_to_the_data_group_and_hears_back_on_the_control_group(harness):
    port = free_udp_port()
    stream = Stream(harness, channel=multicast_channel(port))
    network = harness.conductor.network
    (receive_endpoint,) = network.receive_endpoints.values()
    (send_endpoint,) = network.send_endpoints.values()
    assert receive_endpoint.local_address == (MULTICAST_GROUP, port)
    assert send_endpoint.local_address == (MULTICAST_CONTROL_GROUP, port)
    (publication,) = network.publications
    (image,) = network.images
    assert type(publication.flow_control) is MaxFlowControl  # the multicast default (§16)
    assert publication.setup_flags == ul.SETUP_GROUP_FLAG
    assert isinstance(image.feedback_delay, OptimalMulticastFeedbackDelay)
    assert [c.control_address for c in image.connections] == [(MULTICAST_CONTROL_GROUP, port)]  # SMs and NAKs go to the control group
    assert stream.image.source_identity == f"127.0.0.1:{port}"  # sent from the interface
    labels = [c.label for c in harness.reader.counters()]
    assert f"rcv-local-sockaddr: {stream.receive_status_id} {MULTICAST_GROUP}:{port}" in labels
    payloads = [bytes([i]) * (i * 37 % 3000 + 1) for i in range(200)]
    stream.offer_all(payloads)
    assert stream.settle(50) == payloads
    assert harness.system_counter(cl.STATUS_MESSAGES_SENT) > 0
    assert harness.system_counter(cl.STATUS_MESSAGES_RECEIVED) > 0
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) == 0 and harness.system_counter(cl.INVALID_PACKETS) == 0
    assert harness.system_counter(cl.FLOW_CONTROL_OVER_RUNS) == 0
    stream.close()


def test_a_fixed_gap_on_a_multicast_stream_is_naked_to_the_control_group_and_retransmitted(harness):
    stream = Stream(harness, channel=multicast_channel(free_udp_port()))
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    control.write(LossSettings(gap_term_id=stream.log.initial_term_id, gap_term_offset=1024, gap_length=4096))
    payloads = [bytes([i]) * 200 for i in range(100)]
    stream.offer_all(payloads)
    assert stream.settle(100) == payloads  # 1 ms steps: the random backoff is below 10 ms
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) >= 1
    assert harness.system_counter(cl.NAK_MESSAGES_RECEIVED) >= 1
    assert harness.system_counter(cl.RETRANSMITS_SENT) >= 1
    (entry,) = LossReportReader.read(harness.driver.loss_report.buffer)
    assert (entry.session_id, entry.stream_id) == (stream.pub.session_id, STREAM)
    assert 0 < entry.total_bytes_lost <= 4096 + 1408 and entry.channel == multicast_channel(stream.port)
    control.close()
    stream.close()


@pytest.mark.parametrize("group, multicast_backoff", [("", True), ("|group=false", False), ("|group=true", True)])
def test_a_setup_flagged_group_gives_a_unicast_image_the_multicast_backoff_unless_group_false(
        harness, group, multicast_backoff):
    stream = Stream(harness, group)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rogue:
        rogue.sendto(_setup(0, 65536, 1408, ul.SETUP_GROUP_FLAG), ("127.0.0.1", stream.port))
    run(harness, stream.client, 5)
    (flagged,) = [i for i in harness.conductor.network.images if i.session_id == 77]
    assert isinstance(flagged.feedback_delay, OptimalMulticastFeedbackDelay) is multicast_backoff
    (own,) = [i for i in harness.conductor.network.images if i.session_id != 77]  # unicast, no flag
    assert isinstance(own.feedback_delay, OptimalMulticastFeedbackDelay) is (group == "|group=true")
    assert type(harness.conductor.network.publications[0].flow_control) is UnicastFlowControl
    stream.close()


def test_a_status_message_asking_for_setup_gets_one_without_moving_the_sender_limit(harness):
    stream = Stream(harness)
    (publication,) = harness.conductor.network.publications
    (send_endpoint,) = harness.conductor.network.send_endpoints.values()
    limit = publication.sender_limit
    sm = np.zeros(64, np.uint8)  # a late joiner's SM: no image yet, so zero position and window
    length = uf.encode_status_message(sm, 0, stream.pub.session_id, STREAM, 0, 0, 0, 12345, 0, False,
                                      ul.SM_SEND_SETUP_FLAG)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rogue:
        rogue.sendto(sm[:length].tobytes(), ("127.0.0.1", send_endpoint.local_address[1]))
    network = harness.conductor.network
    for _ in range(10):
        harness.nano.advance(MS)
        network.sender.do_work()
        if publication.is_setup_elicited:
            break
    assert publication.is_setup_elicited and publication.sender_limit == limit
    run(harness, stream.client, 150)  # the next SETUP is due within the 100 ms setup timeout
    assert not publication.is_setup_elicited and publication.has_receivers
    assert stream.offer(b"still flowing") > 0
    run(harness, stream.client, 20)
    assert stream.drain() == [b"still flowing"]
    stream.close()


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp?endpoint=239.255.90.4:40456|interface=127.0.0.1", "Multicast data address must be odd"),
    ("aeron:udp?endpoint=239.255.90.1:40456|interface=198.51.100.77/32", "could not find matching interface"),
])
def test_a_bad_multicast_channel_is_refused(harness, channel, message):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=STREAM,
                channel=channel)
    harness.work()
    (response_type, error), = client.responses()
    assert response_type == cp.ON_ERROR and message in error.error_message
    assert error.error_code == cp.GENERIC_ERROR  # EINVAL in Aeron's C driver, both
    assert harness.conductor.network.receive_endpoints == {}


def _compiled_signatures() -> dict[str, int]:
    """How many compiled signatures each kernel of aeron_numba.kernels has in this process."""
    counts = {}
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("aeron_numba.kernels.") and module is not None:
            for name, value in vars(module).items():
                if isinstance(value, Dispatcher):
                    counts[f"{module_name}.{name}"] = len(value.signatures)
    return counts


@pytest.mark.requires_jit
def test_the_driver_warm_up_compiles_every_kernel_a_lossy_udp_stream_needs(harness):
    """A kernel first compiled inside the driver's duty cycle stops its heartbeat for seconds on a cold cache."""
    warm_up_driver_kernels()
    stream = Stream(harness)
    control = LossControl.open(harness.conductor.ctx.aeron_dir)
    control.write(LossSettings())
    stream.offer_all([b"first"])  # the test's own client-side kernels compile here, before the snapshot
    assert stream.settle(10) == [b"first"]
    before = _compiled_signatures()
    control.write(LossSettings(gap_term_id=stream.log.initial_term_id, gap_term_offset=1024, gap_length=4096))
    payloads = [bytes([i]) * 300 for i in range(60)]
    stream.offer_all(payloads)
    assert stream.settle(100) == [b"first"] + payloads
    after = _compiled_signatures()
    new = {name for name, count in after.items() if count != before.get(name, 0)}
    assert new == set(), f"compiled in the driver's duty cycle, not by the warm-up: {sorted(new)}"
    assert harness.system_counter(cl.NAK_MESSAGES_SENT) >= 1  # the NAK path and its loss report ran
    assert len(LossReportReader.read(harness.driver.loss_report.buffer)) == 1
    control.close()
    stream.close()


def test_session_id_on_a_udp_subscription_filters_its_images(harness):
    """As in Aeron, and as for IPC: two exclusive publications of one stream to one endpoint, each its own session-id;
    a subscription naming one session gets that session's image only, whether the image comes after it or was
    there before it; one naming none gets both (an archive replicating twice into one stream relies on this)."""
    client = RawClient(harness.cnc)
    channel = "aeron:udp?endpoint=127.0.0.1:0"
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=STREAM,
                channel=channel + "|session-id=7001")
    harness.work()
    (endpoint,) = harness.conductor.network.receive_endpoints.values()
    port = endpoint.local_address[1]
    for session_id in (7001, 7002):  # exclusive: a concurrent one would join the first (Aeron's rule)
        client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=STREAM,
                    channel=f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k|session-id={session_id}")
    run(harness, client, 30)
    late = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                       stream_id=STREAM, channel=channel + "|session-id=7002")
    every = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                        stream_id=STREAM, channel=channel)
    run(harness, client, 200)  # the unwanted session's SETUPs keep coming (it has no receiver yet)
    images = [m for t, m in client.responses() if t == cp.ON_AVAILABLE_IMAGE]
    by_subscription = {}
    for image in images:
        by_subscription.setdefault(image.subscription_registration_id, set()).add(image.session_id)
    first = min(by_subscription)
    assert by_subscription == {first: {7001}, late: {7002}, every: {7001, 7002}}


def test_a_late_subscriber_joins_an_image_at_its_slowest_subscriber_not_its_rebuild_position(harness):
    """Aeron's PublicationImage.joinPosition: a subscription added to an image that has subscribers starts at the
    lowest of their positions (capped by the rebuild position), so it sees everything they have still to read. A
    cluster follower relies on it: its service joins the catch-up image the consensus module has not read yet."""
    stream = Stream(harness, channel_params="|tags=9001")
    payloads = [bytes([i]) * 100 for i in range(20)]
    stream.offer_all(payloads)
    run(harness, stream.client, 30)  # delivered, not consumed: the first subscriber stays at its join position
    image = next(image for image in harness.conductor.network.images if image.session_id == stream.image.session_id)
    assert image.rebuild_position > stream.position
    late = stream.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                              stream_id=STREAM, channel="aeron:udp?tags=9001")
    run(harness, stream.client, 10)
    (joined,) = [m for t, m in stream.client.responses()
                 if t == cp.ON_AVAILABLE_IMAGE and m.subscription_registration_id == late]
    assert harness.reader.get_counter_value(joined.subscriber_position_id) == stream.position == 0
    assert stream.drain() == payloads  # and the image still holds all of it
    stream.close()


def test_a_publication_whose_data_the_compiled_cycles_send_gets_a_python_send_only_when_something_is_due(shm_dir):
    """NetworkCycles' kernel sends the data of a publication; the sender's Python ``send`` then has only timed work
    (the heartbeat, the connection timeout, a receiver's timeout in max flow control) and work of Python's own (a
    SETUP asked for, retransmits; spies only while there is no receiver). It is skipped until one of those is due, and still comes when one is."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        sender = h.conductor.network.sender
        (publication,) = sender.publications
        assert publication.has_receivers and publication.needs_python_send(h.nano.nano_time())  # not marked yet
        publication.data_sent_compiled = True  # as NetworkCycles marks it when it builds its tables
        now = h.nano.nano_time()
        publication.time_of_last_send_or_heartbeat_ns = now  # as the kernel's last send leaves it
        assert not publication.needs_python_send(now)
        sends = []
        send = publication.send
        publication.send = lambda now_ns, batch: sends.append(now_ns) or send(now_ns, batch)
        heartbeats = h.system_counter(cl.HEARTBEATS_SENT)
        sender.do_work()
        assert sends == [] and h.system_counter(cl.HEARTBEATS_SENT) == heartbeats  # skipped: nothing was due

        h.nano.advance(publication.heartbeat_timeout_ns)  # quiet for a heartbeat's interval
        assert publication.needs_python_send(h.nano.nano_time())
        sender.do_work()
        assert len(sends) == 1 and h.system_counter(cl.HEARTBEATS_SENT) == heartbeats + 1
        assert not publication.needs_python_send(h.nano.nano_time())  # the heartbeat reset its timer

        for due in (lambda: setattr(publication, "is_setup_elicited", True),
                    lambda: publication.retransmits.__setitem__((0, 0), object())):
            due()
            assert publication.needs_python_send(h.nano.nano_time())
            publication.is_setup_elicited = False
            publication.retransmits.clear()

        # A spy beside the receivers (an archive recording the stream) asks nothing of send: it is read only when
        # spies simulate a connection that has no receiver.
        publication.spies.append(SimpleNamespace(counts_for_flow_control=True, counter_id=0))
        assert publication.python_send_is_only_timed() and not publication.needs_python_send(h.nano.nano_time())
        publication.spies.clear()

        # Max flow control (a multi-destination publication's): its on_idle matters only when a receiver times out.
        flow_control, max_flow_control = publication.flow_control, MaxFlowControl()
        now = h.nano.nano_time()
        max_flow_control.on_status_message(publication.sender_limit, 7, publication.sender_limit, now)
        publication.flow_control = max_flow_control
        assert not publication.needs_python_send(now)
        max_flow_control.receivers[7].time_of_last_sm_ns = now - max_flow_control.receiver_timeout_ns - 1
        assert publication.needs_python_send(now) and publication.next_timer_ns() <= now
        publication.flow_control = flow_control
        stream.close()
    finally:
        h.close()


def test_a_network_publications_limit_update_is_skipped_while_nothing_it_reads_moves(shm_dir, monkeypatch):
    """As an IPC publication's: the conductor's update of pub-pos and pub-lmt runs again only when a tail counter,
    the sender position or a spy moved, or the connection changed; the limit still follows what was sent."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        (publication,) = h.conductor.network.sender.publications
        reads = []
        producer_position = type(publication).producer_position
        monkeypatch.setattr(publication, "producer_position",
                            lambda: reads.append(1) or producer_position(publication))
        h.work(3)
        assert reads == []  # connected and quiet: three conductor cycles, no update
        limit = h.reader.get_counter_value(stream.pub.position_limit_counter_id)
        stream.offer_all([b"x" * 1000] * 5)
        assert stream.settle(10) == [b"x" * 1000] * 5
        assert reads  # the tails and the sender position moved: updated
        assert h.reader.get_counter_value(stream.pub.position_limit_counter_id) > limit
        count = len(reads)
        h.work(3)
        assert len(reads) == count
        stream.close()
    finally:
        h.close()


def test_the_conductor_waits_for_a_publications_limit_trip_and_an_images_clean_point_not_every_message(shm_dir):
    """The conductor moves a network publication's limit only once its slowest reader is an eighth of a window past
    the last move, and cleans an image's log a term behind its slowest subscriber in steps: its idle watch wakes
    for those, not for every datagram sent and taken (a busy stream would otherwise cost a conductor cycle per
    message)."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        (publication,) = h.conductor.network.sender.publications
        (image,) = h.conductor.network.images
        watch = IdleWatch()
        assert h.conductor.network.add_idle_watch(watch)
        watch.snapshot()
        trip_gain = publication.term_window_length // 8
        assert sorted(watch.values.tolist()) == sorted(
            [publication.trip_limit - publication.term_window_length + 1,
             image.clean_position + image.term_length + image.term_length // CLEAN_STEP_TERM_DIVISOR])
        limit = h.reader.get_counter_value(stream.pub.position_limit_counter_id)
        stream.offer_all([b"x" * 100])
        assert stream.settle(10) == [b"x" * 100]  # sent, received and taken, short of the trip: no wake
        assert not watch.changed()
        stream.offer_all([b"y" * 1000] * (trip_gain // 1000 + 1))
        stream.settle(20)
        assert watch.changed()  # the sender passed the trip
        h.work(3)
        assert h.reader.get_counter_value(stream.pub.position_limit_counter_id) > limit
        step = image.term_length // CLEAN_STEP_TERM_DIVISOR
        payloads = [bytes([n % 251]) * 1000 for n in range(3 * image.term_length // 1000)]
        stream.offer_all(payloads)
        stream.settle(40)
        assert stream.messages[-len(payloads):] == payloads  # three terms through the cleaned log, intact
        taken = h.reader.get_counter_value(stream.image.subscriber_position_id)
        clean = image.clean_position
        assert taken - image.term_length - step < clean <= taken - image.term_length  # cleaned in steps, a term behind
        last_step = np.arange(clean - step, clean) % (lb.PARTITION_COUNT * image.term_length)
        assert not stream.image_log.buffer[last_step].any()  # the last step is zeroed
        stream.close()
    finally:
        h.close()


def test_loss_settings_written_while_the_compiled_cycles_run_are_the_ones_they_drop_by(shm_dir):
    """NetworkCycles keeps its socket tables from one duty cycle to the next. A loss generator taking new settings
    (a partition a chaos run writes at run time) hands the compiled path new arrays, and the tables follow them:
    what the settings drop is dropped by the compiled receive too, not only by the Python one."""
    h = Harness(shm_dir / "aeron", loss_control_enabled=True, publication_connection_timeout_ns=1_000 * MS)
    control = LossControl.open(h.conductor.ctx.aeron_dir)
    try:
        stream = Stream(h)
        network = h.conductor.network
        cycles = NetworkCycles(h.cnc.counters_values_buffer, network.sender, network.receiver)
        cycles.do_work()  # its tables, built under the settings of the start (nothing dropped)
        control.write(LossSettings(receive_data_rate=1.0))
        h.network_work()  # the receive endpoint's poll takes them
        (endpoint,) = network.receive_endpoints.values()
        loss = endpoint.destinations[0].transport.loss
        assert loss.settings.receive_data_rate == 1.0 and loss.dropped == 0
        assert stream.offer(b"dropped" * 10) > 0

        def dropped_by_the_compiled_cycles():
            cycles.do_work()  # sends the frame from the publication's socket and reads it on the image's
            return loss.dropped >= 1
        await_condition(dropped_by_the_compiled_cycles, 5, "the compiled cycles to drop the datagram")
        assert stream.drain() == []
        stream.close()
    finally:
        control.close()
        h.close()


@pytest.mark.parametrize("strategy, reason", [(YieldingIdleStrategy(), ndc.RETURN_BUDGET),
                                              (BackoffIdleStrategy(), ndc.RETURN_IDLE)])
def test_a_quiet_stream_keeps_the_compiled_cycles_polling_until_the_budget_unless_the_runner_would_back_off(
        shm_dir, strategy, reason):
    """Right after work, a yielding (or spinning) runner would only yield between passes, so the cycles poll on
    until the budget rather than hand the thread to the Python cycles; under a backoff strategy they hand it back
    after ``idle_ns``, for the runner to back off and park."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        network = h.conductor.network
        cycles = NetworkCycles(h.cnc.counters_values_buffer, network.sender, network.receiver,
                               idle_strategy=strategy, budget_ns=20 * MS, idle_ns=1 * MS)
        cycles.time_of_last_work_ns = cycles.nano_clock()  # a stream that was busy a moment ago
        cycles.do_work()  # nothing is sent or received: the stream is quiet
        assert int(cycles.result[ndc.RESULT_REASON]) == reason
        stream.close()
    finally:
        h.close()


def test_sockets_the_compiled_cycles_read_are_left_to_them_by_the_python_polls_which_still_take_loss_settings(
        shm_dir, monkeypatch):
    """Once NetworkCycles has a socket in its tables it reads it every pass and hands back what Python handles:
    the sender's and receiver's Python polls no longer read it (a system call and a dispatch per cycle for
    nothing), but they still take new loss settings for it."""
    h = Harness(shm_dir / "aeron", loss_control_enabled=True, publication_connection_timeout_ns=1_000 * MS)
    control = LossControl.open(h.conductor.ctx.aeron_dir)
    try:
        stream = Stream(h)
        network = h.conductor.network
        (send_endpoint,) = network.sender.endpoints
        (receive_endpoint,) = network.receive_endpoints.values()
        (destination,) = receive_endpoint.destinations
        reads = []
        for transport in (send_endpoint.transport, destination.transport):
            receive_batch = transport.receive_batch
            monkeypatch.setattr(transport, "receive_batch",
                                lambda batch, t=transport, read=receive_batch: reads.append(t) or read(batch))
        h.network_work()
        assert {id(t) for t in reads} == {id(send_endpoint.transport), id(destination.transport)}  # Python reads

        NetworkCycles(h.cnc.counters_values_buffer, network.sender, network.receiver)._tables()
        assert send_endpoint.read_compiled and destination.read_compiled
        reads.clear()
        control.write(LossSettings(receive_data_rate=0.5, seed=1))
        h.network_work()
        assert reads == []  # left to the compiled cycles
        assert destination.transport.loss.settings.receive_data_rate == 0.5
        assert send_endpoint.transport.loss.settings.receive_data_rate == 0.5
        stream.close()
    finally:
        control.close()
        h.close()


def test_loss_settings_written_during_a_compiled_stretch_end_it_so_the_endpoints_take_them_at_once(shm_dir):
    """A stretch of compiled cycles lasts up to its budget; loss settings are taken by the endpoints' Python polls.
    Written meanwhile (a test or chaos run switching a gap on), they end the stretch, or the stream could run past
    the gap before any poll took them."""
    h = Harness(shm_dir / "aeron", loss_control_enabled=True, publication_connection_timeout_ns=1_000 * MS)
    control = LossControl.open(h.conductor.ctx.aeron_dir)
    try:
        stream = Stream(h)
        network = h.conductor.network
        cycles = NetworkCycles(h.cnc.counters_values_buffer, network.sender, network.receiver,
                               add_watch=lambda watch: None, idle_strategy=YieldingIdleStrategy(),
                               budget_ns=60_000 * MS)
        cycles.do_work()  # builds the tables: the stretch now watches the loss-control file
        cycles.time_of_last_work_ns = cycles.nano_clock()  # a busy stream: poll on until the budget
        writer = threading.Timer(0.05, control.write, (LossSettings(receive_data_rate=0.5, seed=1),))
        writer.start()
        try:
            cycles.do_work()
        finally:
            writer.join()
        assert int(cycles.result[ndc.RESULT_REASON]) == ndc.RETURN_WATCH
        stream.close()
    finally:
        control.close()
        h.close()


def test_the_compiled_cycles_take_loss_settings_written_while_the_thread_waited_before_reading(shm_dir):
    """They run before the endpoints' Python polls on their thread and may read a whole burst: settings written
    while the driver waited (a gap switched on just before a stream starts) are taken first."""
    h = Harness(shm_dir / "aeron", loss_control_enabled=True, publication_connection_timeout_ns=1_000 * MS)
    control = LossControl.open(h.conductor.ctx.aeron_dir)
    try:
        stream = Stream(h)
        network = h.conductor.network
        cycles = NetworkCycles(h.cnc.counters_values_buffer, network.sender, network.receiver)
        cycles.do_work()
        (destination,) = next(iter(network.receive_endpoints.values())).destinations
        control.write(LossSettings(receive_data_rate=1.0))
        assert stream.offer(b"dropped" * 10) > 0
        loss = destination.transport.loss

        def dropped_by_the_compiled_cycles():
            cycles.do_work()  # no Python poll in between
            return loss.dropped >= 1
        await_condition(dropped_by_the_compiled_cycles, 5, "the compiled cycles to drop the datagram")
        assert loss.settings.receive_data_rate == 1.0 and stream.drain() == []
        stream.close()
    finally:
        control.close()
        h.close()


def test_network_cycles_run_as_an_agent_of_their_own_name_the_data_path_and_leave_python_only_its_own_work(
        shm_dir, monkeypatch):
    """In a duty cycle that runs only the agents a wake concerns (a cluster member's), the compiled data path's
    sockets and streams wake the network cycles, not the sender's and receiver's Python cycles: those then name
    only what Python does (timers, sockets and images the cycles leave to them)."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        network = h.conductor.network
        sender, receiver = network.sender, network.receiver
        for part in (sender, receiver):  # the harness's cached clock makes a watch impossible: the real one
            monkeypatch.setattr(part, "nano_clock", time.monotonic_ns)
        cycles = NetworkCycles(h.cnc.counters_values_buffer, sender, receiver, nano_clock=time.monotonic_ns)
        (send_endpoint,) = network.send_endpoints.values()
        (receive_endpoint,) = network.receive_endpoints.values()
        data_sockets = {send_endpoint.transport.fd, receive_endpoint.destinations[0].transport.fd}

        def named(agent) -> tuple[set[int], set[int]]:
            watch = IdleWatch()
            assert agent.add_idle_watch(watch)
            watch.snapshot()
            return set(watch.socket_fds), set(watch.addresses.tolist())

        assert named(cycles) == (set(), set())  # beside the sender and receiver in one composite: they name it all
        assert named(sender)[0] | named(receiver)[0] == data_sockets
        python_words = named(sender)[1] | named(receiver)[1]

        cycles.serve_as_own_agent()
        (publication,) = sender.publications
        (image,) = receiver.images
        cycle_sockets, cycle_words = named(cycles)  # its tables built: it sends the publication's data
        assert publication.python_send_is_only_timed() and image.compiled_work
        assert cycle_sockets == data_sockets and cycle_words == python_words
        for part in (sender, receiver):
            sockets, words = named(part)
            assert sockets == set() and not words & cycle_words

        publication.is_setup_elicited = True  # Python's own work: the sender watches the stream again
        assert named(sender)[1] & cycle_words
        publication.is_setup_elicited = False
        stream.close()
    finally:
        h.close()


def test_the_data_paths_watches_wake_for_a_status_message_due_not_for_each_message_read_nor_their_own_sends(shm_dir):
    """A cluster member runs only the agents whose watched words moved. The sender's watch of a publication names
    what publishers do (the frame at the sender position, the tail counters), not the sender position it moves
    itself; an image's names its slowest subscriber reaching the point where ``receiver_work`` sends a status
    message (a quarter window past the last one, or the end of the stream), not every message it reads."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        network = h.conductor.network
        (publication,) = network.sender.publications
        (image,) = network.receiver.images
        watch = IdleWatch()
        publication.add_idle_watch(watch)
        watch.snapshot()
        named = set(watch.addresses.tolist())
        log = publication.log
        sender_position_address = publication.row.ctypes.data + ns.PUBLICATION_SENDER_POSITION * 8
        assert sender_position_address not in named  # not as a word: each send would wake it
        # but as the position of the frame it watches for, in the log's terms
        assert {sender_position_address + iw.POSITION_ENTRY_TAG, log.buffer.ctypes.data + iw.SLOTS_TAG} <= named
        assert log.buffer.ctypes.data + log.metadata_offset + lb.term_tail_counter_offset(0) in named

        def status_message_watch() -> IdleWatch:
            watch = IdleWatch()
            image.add_status_message_watch(watch)
            watch.snapshot()
            return watch

        (subscriber,) = image.subscribers
        last = int(image.row[ns.IMAGE_LAST_SM_POSITION])
        due_at = last + int(image.row[ns.IMAGE_RECEIVER_WINDOW]) // 4
        watch = status_message_watch()
        h.conductor.counters.set_counter_value(subscriber.counter_id, due_at - 32)  # read on, not far enough
        assert not watch.changed()
        h.conductor.counters.set_counter_value(subscriber.counter_id, due_at)
        assert watch.changed()
        h.conductor.counters.set_counter_value(subscriber.counter_id, last)
        image.row[ns.IMAGE_END_OF_STREAM_POSITION] = last + 64  # the stream ends before that: its end is the point
        watch = status_message_watch()
        assert not watch.changed()
        h.conductor.counters.set_counter_value(subscriber.counter_id, last + 64)
        assert watch.changed()
        stream.close()
    finally:
        h.close()


def test_the_network_cycles_name_their_watch_afresh_only_once_a_word_it_follows_from_moved(shm_dir, monkeypatch):
    """Their own watch (a cluster member's duty cycle asks for it before every cycle) follows from their tables and
    a few words of each row: while none moved, what they named last is named again as is (a sender position that
    moved too: the frame they watch follows it); a subscriber at the point a status message is due has it named
    afresh."""
    h = Harness(shm_dir / "aeron", publication_connection_timeout_ns=1_000 * MS)
    try:
        stream = Stream(h)
        network = h.conductor.network
        sender, receiver = network.sender, network.receiver
        for part in (sender, receiver):
            monkeypatch.setattr(part, "nano_clock", time.monotonic_ns)
        cycles = NetworkCycles(h.cnc.counters_values_buffer, sender, receiver, nano_clock=time.monotonic_ns)
        cycles.serve_as_own_agent()
        (publication,) = sender.publications
        (image,) = receiver.images
        named_by = []
        for owner, method in ((publication, "add_idle_watch"), (image, "add_status_message_watch")):
            original = getattr(owner, method)
            monkeypatch.setattr(owner, method, lambda watch, f=original, m=method: named_by.append(m) or f(watch))

        def named() -> tuple[list[int], list[str]]:
            del named_by[:]
            watch = IdleWatch()
            assert cycles.add_idle_watch(watch)
            watch.snapshot()
            return watch.addresses.tolist(), list(named_by)

        first, by = named()
        assert by == ["add_idle_watch", "add_status_message_watch"]
        assert named() == (first, [])  # nothing moved: named again as is
        publication.sender_position = publication.sender_position + 64
        assert named() == (first, [])
        (subscriber,) = image.subscribers
        due_at = int(image.row[ns.IMAGE_LAST_SM_POSITION]) + int(image.row[ns.IMAGE_RECEIVER_WINDOW]) // 4
        h.conductor.counters.set_counter_value(subscriber.counter_id, due_at)
        assert named()[1] == ["add_idle_watch", "add_status_message_watch"]
        stream.close()
    finally:
        h.close()
