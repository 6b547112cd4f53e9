"""Multi-destination subscriptions (``aeron:udp?control-mode=manual`` + ADD_/REMOVE_RCV_DESTINATION): one driver
in the test process, driven by hand with cached clocks; two raw UDP sockets play two senders of ONE session (a
replay and a live stream of it), each reaching the subscription through its own destination."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.network_cycles import NetworkCycles
from aeron_numba.kernels import term_appender as TA
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from harness.awaiting import await_condition
from tests.unit.driver.test_driver_udp import STREAM, free_udp_port
from tests.unit.driver.test_network_conductor import Reader
from tests.unit.driver_support import MS, Harness, RawClient, run

SESSION = 77
TERM_ID = 5
TERM_LENGTH = 64 * 1024
MDS_CHANNEL = "aeron:udp?control-mode=manual"


# SHARED: the proxies call directly. DEDICATED: every conductor<->sender/receiver change is a queued command the
# other agent applies on its next duty cycle (driven by hand here, in turn): the same behaviour must come out.
@pytest.fixture(params=["SHARED", "DEDICATED"])
def harness(shm_dir, request):
    h = Harness(shm_dir / "aeron", threading_mode=request.param, publication_connection_timeout_ns=1_000 * MS,
                image_liveness_timeout_ns=2_000 * MS)
    yield h
    h.close()


def setup_frame(term_offset: int = 0) -> bytes:
    return struct.pack("<iBBhiiiiiiii", 40, 0, 0, frame.HDR_TYPE_SETUP, term_offset, SESSION, STREAM, TERM_ID,
                       TERM_ID, TERM_LENGTH, 1408, 0)


def data_frame(term_offset: int, payload: bytes, flags: int = frame.BEGIN_FRAG_FLAG | frame.END_FRAG_FLAG) -> bytes:
    """One unfragmented DATA frame; an empty payload makes it a heartbeat (frame length 0)."""
    length = frame.HEADER_LENGTH + len(payload) if payload else 0
    return struct.pack("<iBBhiiiiq", length, 0, flags, frame.HDR_TYPE_DATA, term_offset, SESSION, STREAM, TERM_ID,
                       0) + payload


class Sender:
    """A raw socket sending frames of the session to one destination port, collecting what comes back."""

    def __init__(self, port: int):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.setblocking(False)
        self.port = port

    def send(self, datagram: bytes) -> None:
        self.socket.sendto(datagram, ("127.0.0.1", self.port))

    def received(self) -> list[tuple[int, tuple, int]]:
        """(frame type, fields, source port) of every datagram waiting: SMs as (term id, term offset, window),
        NAKs as (term id, term offset, length)."""
        out = []
        while True:
            try:
                data, source = self.socket.recvfrom(2048)
            except BlockingIOError:
                return out
            frame_type = struct.unpack_from("<h", data, 6)[0]
            if frame_type in (frame.HDR_TYPE_SM, frame.HDR_TYPE_NAK):
                out.append((frame_type, struct.unpack_from("<iii", data, 16), source[1]))

    def close(self) -> None:
        self.socket.close()


class Mds:
    """A client with an MDS subscription and what the driver answered it."""

    def __init__(self, harness, channel: str = MDS_CHANNEL):
        self.harness = harness
        self.client = RawClient(harness.cnc)
        self.images: list[dc.Message] = []  # every ON_AVAILABLE_IMAGE
        self.sub_id = self.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                       stream_id=STREAM, channel=channel)
        (t, ready), = self.cycle(1)
        assert t == cp.ON_SUBSCRIPTION_READY
        self.status_id = ready.channel_status_indicator_id

    def destination(self, add: bool, channel: str, registration_id: int | None = None) -> tuple[int, dc.Message]:
        msg_type_id = cp.ADD_RCV_DESTINATION if add else cp.REMOVE_RCV_DESTINATION
        correlation_id = self.client.send(msg_type_id, dc.DestinationMessage, channel=channel,
                                          registration_correlation_id=registration_id or self.sub_id)
        (t, answer), = self.cycle(1)
        answered = answer.offending_command_correlation_id if t == cp.ON_ERROR else answer.correlation_id
        assert answered == correlation_id
        return t, answer

    def cycle(self, cycles: int, step_ms: int = 1) -> list:
        run(self.harness, self.client, cycles, step_ms)
        responses = self.client.responses()
        self.images += [m for t, m in responses if t == cp.ON_AVAILABLE_IMAGE]
        return responses

    def sockaddrs(self) -> list[str]:
        return sorted(c.label for c in self.harness.counters_by_type(cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID))


def active_transport_count(reader: Reader) -> int:
    log = reader.log
    return int(log.buffer[log.metadata_offset + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET:][:4].view(np.int32)[0])


def _port_channel(port: int) -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{port}"


def test_an_mds_endpoint_has_no_socket_until_destinations_are_added_each_with_its_sockaddr_counter(harness):
    mds = Mds(harness)
    (status,) = harness.counters_by_type(cl.RECEIVE_CHANNEL_STATUS_TYPE_ID)
    assert status.label == f"rcv-channel: {MDS_CHANNEL} "  # bound nowhere: the C driver's empty bind address
    assert mds.sockaddrs() == []
    ports = free_udp_port(), free_udp_port()
    for port in ports:
        t, _ = mds.destination(True, _port_channel(port))
        assert t == cp.ON_OPERATION_SUCCESS
    assert mds.sockaddrs() == sorted(f"rcv-local-sockaddr: {mds.status_id} 127.0.0.1:{port}" for port in ports)
    t, _ = mds.destination(False, _port_channel(ports[0]))
    assert t == cp.ON_OPERATION_SUCCESS
    # With threads the receiver lets go of the destination first; the conductor closes it on its next cycle.
    mds.cycle(1)
    assert mds.sockaddrs() == [f"rcv-local-sockaddr: {mds.status_id} 127.0.0.1:{ports[1]}"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # the removed destination's socket is closed
        probe.bind(("127.0.0.1", ports[0]))
    # Closing the subscription closes the rest, and the endpoint.
    mds.client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=mds.sub_id)
    mds.cycle(2)  # the receiver lets go of the endpoint, then the conductor closes it
    assert mds.sockaddrs() == [] and harness.counters_by_type(cl.RECEIVE_CHANNEL_STATUS_TYPE_ID) == []
    assert harness.conductor.network.receive_endpoints == {}


def test_two_mds_subscriptions_on_the_same_channel_get_an_endpoint_each(harness):
    mds = Mds(harness)
    mds.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                    stream_id=STREAM, channel=MDS_CHANNEL)
    (t, ready), = mds.cycle(1)
    assert t == cp.ON_SUBSCRIPTION_READY and ready.channel_status_indicator_id != mds.status_id
    assert len(harness.conductor.network.receive_endpoints) == 2
    port = free_udp_port()
    assert mds.destination(True, _port_channel(port))[0] == cp.ON_OPERATION_SUCCESS  # only the first's
    assert mds.sockaddrs() == [f"rcv-local-sockaddr: {mds.status_id} 127.0.0.1:{port}"]


def test_one_session_through_two_destinations_is_one_image_answered_through_each(harness):
    mds = Mds(harness)
    ports = free_udp_port(), free_udp_port()
    for port in ports:
        mds.destination(True, _port_channel(port))
    replay, live = Sender(ports[0]), Sender(ports[1])
    try:
        replay.send(setup_frame())
        mds.cycle(2)
        (image,) = mds.images
        assert image.session_id == SESSION
        # The image's first status message goes back to the replay, from the destination it sent to.
        assert (frame.HDR_TYPE_SM, (TERM_ID, 0, 32 * 1024), ports[0]) in replay.received()
        live.send(setup_frame())  # the same session through the other destination: no second image
        mds.cycle(250)  # a status message timeout (200 ms)
        assert len(mds.images) == 1 and len(harness.conductor.network.images) == 1
        assert any(t == frame.HDR_TYPE_SM and port == ports[1] for t, _, port in live.received())
        assert any(t == frame.HDR_TYPE_SM and port == ports[0] for t, _, port in replay.received())

        reader = Reader(harness, image)
        replay.send(data_frame(0, b"a" * 32))
        live.send(data_frame(64, b"b" * 32))
        replay.send(data_frame(64, b"b" * 32))  # the replay catching up with what live already sent: once
        live.send(data_frame(128, b"c" * 32))
        mds.cycle(250)  # and a status message timeout, after which the log shows both transports active
        assert reader.poll() == [b"a" * 32, b"b" * 32, b"c" * 32]
        assert active_transport_count(reader) == 2

        live.send(data_frame(256, b"e" * 32))  # a gap at 192: NAKed through both destinations
        replay.received(), live.received()
        mds.cycle(20)
        naks = [(t, fields, port) for sender in (replay, live) for t, fields, port in sender.received()
                if t == frame.HDR_TYPE_NAK]
        assert (frame.HDR_TYPE_NAK, (TERM_ID, 192, 64), ports[0]) in naks
        assert (frame.HDR_TYPE_NAK, (TERM_ID, 192, 64), ports[1]) in naks
        replay.send(data_frame(192, b"d" * 32))
        mds.cycle(2)
        assert reader.poll()[3:] == [b"d" * 32, b"e" * 32]

        # The replay goes: the live stream keeps the image fed alone, and only it is answered.
        assert mds.destination(False, _port_channel(ports[0]))[0] == cp.ON_OPERATION_SUCCESS
        replay.received(), live.received()
        live.send(data_frame(320, b"f" * 32))
        mds.cycle(250)
        assert reader.poll()[5:] == [b"f" * 32]
        assert active_transport_count(reader) == 1
        assert replay.received() == []
        assert any(t == frame.HDR_TYPE_SM and port == ports[1] for t, _, port in live.received())
        reader.close()
    finally:
        replay.close()
        live.close()


def test_the_stream_ends_only_when_every_destination_has_ended_it(harness):
    mds = Mds(harness)
    ports = free_udp_port(), free_udp_port()
    for port in ports:
        mds.destination(True, _port_channel(port))
    replay, live = Sender(ports[0]), Sender(ports[1])
    try:
        replay.send(setup_frame())
        live.send(setup_frame())
        mds.cycle(2)
        live.send(data_frame(0, b"x" * 32))
        mds.cycle(2)
        (image,) = harness.conductor.network.images
        replay.send(data_frame(64, b"", frame.BEGIN_FRAG_FLAG | frame.END_FRAG_FLAG | frame.EOS_FLAG))
        mds.cycle(2)
        assert image.end_of_stream_position is None  # the replay ended; the live stream has not
        live.send(data_frame(64, b"", frame.BEGIN_FRAG_FLAG | frame.END_FRAG_FLAG | frame.EOS_FLAG))
        mds.cycle(2)
        assert image.end_of_stream_position == 64
    finally:
        replay.close()
        live.close()


def _image_served_by_cycles(mds: Mds, sender: Sender) -> tuple:
    """The image a SETUP from ``sender`` makes, and network cycles serving the driver's streams (compiled on a cold
    cache here, before any deadline of the test runs)."""
    network = mds.harness.conductor.network
    sender.send(setup_frame())
    mds.cycle(2)
    (image,) = network.images
    cycles = NetworkCycles(mds.harness.cnc.counters_values_buffer, network.sender, network.receiver)
    cycles.do_work()
    return image, cycles


def test_an_mds_image_fed_through_one_destination_is_served_by_the_compiled_cycles_until_a_second_joins(harness):
    """A cluster follower's log: an MDS subscription with one destination. Its data and status messages go
    through the compiled network cycles with no return to Python; while a second destination feeds it too (a
    catch-up replay), Python tracks each connection; once that one goes, the compiled path takes it back."""
    mds = Mds(harness)
    ports = free_udp_port(), free_udp_port()
    mds.destination(True, _port_channel(ports[0]))
    network = harness.conductor.network
    live, replay = Sender(ports[0]), Sender(ports[1])
    try:
        image, cycles = _image_served_by_cycles(mds, live)
        (endpoint,) = network.receive_endpoints.values()
        live_fd = endpoint.destinations[0].transport.fd
        assert image.compiled_work and image.row[ns.IMAGE_DATA_FD] == live_fd
        reader = Reader(harness, mds.images[0])
        live.received()

        def cycled_to(position: int):
            return lambda: cycles.do_work() >= 0 and image.rebuild_position >= position

        returns = cycles.python_returns
        live.send(data_frame(0, b"a" * 32))
        live.send(data_frame(64, b"b" * 32))
        await_condition(cycled_to(128), 5, "the compiled cycles to take both frames")
        assert cycles.python_returns == returns  # nothing handed to Python
        assert reader.poll() == [b"a" * 32, b"b" * 32]
        await_condition(lambda: cycles.do_work() >= 0 and any(
            t == frame.HDR_TYPE_SM and fields[1] == 128 for t, fields, _ in live.received()), 5,
            "a status message from the compiled cycles for what the subscriber read")

        mds.destination(True, _port_channel(ports[1]))
        assert not image.compiled_work and image.row[ns.IMAGE_DATA_FD] == ns.NO_SOCKET
        replay_fd = endpoint.destinations[1].transport.fd
        live.send(data_frame(128, b"c" * 32))
        replay.send(data_frame(128, b"c" * 32))
        await_condition(lambda: cycles.do_work() >= 0 and cycles.python_returns >= returns + 2, 5,
                        "the cycles to read both destinations and hand their data to Python")
        assert {live_fd, replay_fd} <= set(cycles._tables()[3][:, 0].tolist())
        mds.cycle(2)  # the Python receiver's loss detection moves the image on
        assert image.rebuild_position == 192 and reader.poll()[2:] == [b"c" * 32]

        assert mds.destination(False, _port_channel(ports[1]))[0] == cp.ON_OPERATION_SUCCESS
        mds.cycle(1)
        assert image.compiled_work and image.row[ns.IMAGE_DATA_FD] == live_fd
        returns = cycles.python_returns
        live.send(data_frame(192, b"d" * 32))
        await_condition(cycled_to(256), 5, "the compiled cycles to take the live stream back")
        assert cycles.python_returns == returns
        assert reader.poll()[3:] == [b"d" * 32]
        reader.close()
    finally:
        live.close()
        replay.close()


def test_a_gap_in_an_mds_image_the_compiled_cycles_serve_is_naked_through_its_connection(harness):
    """A follower's log loses a datagram: the compiled cycles find the gap, wait the group backoff its row draws
    (``group=true``, as Aeron's follower log subscription), and Python sends the NAK through the one connection,
    whose activity the compiled path kept; the retransmit fills the gap without a return to Python."""
    mds = Mds(harness, channel=MDS_CHANNEL + "|group=true")
    port = free_udp_port()
    mds.destination(True, _port_channel(port))
    live = Sender(port)
    try:
        image, cycles = _image_served_by_cycles(mds, live)
        assert image.compiled_work and image.row[ns.IMAGE_NAK_GROUP_SIZE] > 0
        reader = Reader(harness, mds.images[0])
        live.send(data_frame(0, b"a" * 32))
        live.send(data_frame(128, b"c" * 32))  # the frame at 64 is lost
        naks = []

        def naked() -> bool:
            cycles.do_work()
            naks.extend(fields for t, fields, _ in live.received() if t == frame.HDR_TYPE_NAK)
            return bool(naks)
        await_condition(naked, 5, "a NAK for the gap")
        assert naks[0] == (TERM_ID, 64, 64)
        returns = cycles.python_returns
        live.send(data_frame(64, b"b" * 32))
        await_condition(lambda: cycles.do_work() >= 0 and image.rebuild_position >= 192, 5, "the gap filled")
        assert cycles.python_returns == returns
        assert reader.poll() == [b"a" * 32, b"b" * 32, b"c" * 32]
        reader.close()
    finally:
        live.close()


def test_a_destination_added_to_an_ordinary_subscription_is_refused(harness):
    mds = Mds(harness)
    sub_id = mds.client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                             stream_id=STREAM, channel="aeron:udp?endpoint=127.0.0.1:0")
    mds.cycle(1)
    t, error = mds.destination(True, _port_channel(free_udp_port()), registration_id=sub_id)
    assert (t, error.error_code, error.error_message) == (
        cp.ON_ERROR, cp.INVALID_CHANNEL, "channel does not allow manual control")


class ExclusivePublication:
    """An exclusive UDP publication of the shared session (fixed ``session-id`` and start position, the way a
    replay and the live stream of one recording share a session), offered to as a client would."""

    def __init__(self, mds: Mds, port: int, term_offset: int):
        self.mds = mds
        channel = (f"{_port_channel(port)}|term-length=64k|session-id={SESSION}|init-term-id={TERM_ID}"
                   f"|term-id={TERM_ID}|term-offset={term_offset}")
        pub_id = mds.client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=STREAM,
                                 channel=channel)
        (ready,) = [m for t, m in mds.cycle(1) if t == cp.ON_EXCLUSIVE_PUBLICATION_READY and m.correlation_id == pub_id]
        self.log = LogBuffers.open(ready.log_file_name)
        self.state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        self.state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = ready.position_limit_counter_id * cl.COUNTER_LENGTH
        TA.exclusive_init_state(self.log.buffer, self.state)

    def offer(self, payload: bytes) -> int:
        data = np.frombuffer(payload, np.uint8)
        return TA.exclusive_offer(self.log.buffer, self.state, self.mds.harness.cnc.counters_values_buffer, data, 0,
                                  data.size, 0)

    def close(self) -> None:
        self.log.close()


def _offer_all(mds: Mds, reader: Reader, publication: ExclusivePublication, payloads: list[bytes]) -> None:
    for payload in payloads:
        for _ in range(500):
            if publication.offer(payload) > 0:
                break
            mds.cycle(2)  # not connected yet, or back pressured: let the stream move
            reader.poll()
        else:
            raise AssertionError(f"offer of {payload!r} never accepted (not connected or back pressured)")


def _settle(mds: Mds, reader: Reader, count: int) -> list[bytes]:
    for _ in range(200):
        if len(reader.poll()) >= count:
            break
        mds.cycle(2)
    return reader.messages


def test_a_replay_and_the_live_stream_of_one_session_reach_one_image_through_two_destinations(harness):
    """The archive's replicate-then-follow-live: the replay's publication feeds the MDS subscription through one
    destination, the live publication joins where the replay is through another, the replay destination is
    removed, and the subscriber reads every message once, in order."""
    mds = Mds(harness)
    replay_port, live_port = free_udp_port(), free_udp_port()
    for port in (replay_port, live_port):
        assert mds.destination(True, _port_channel(port))[0] == cp.ON_OPERATION_SUCCESS
    messages = [f"message-{i:03d}-".encode() * 3 for i in range(90)]

    replay = ExclusivePublication(mds, replay_port, term_offset=0)
    mds.cycle(10)
    (image,) = mds.images
    reader = Reader(harness, image)
    _offer_all(mds, reader, replay, messages[:30])
    assert _settle(mds, reader, 30) == messages[:30]
    mds.cycle(250)  # a status message timeout: the log shows the one transport delivering
    assert active_transport_count(reader) == 1

    live = ExclusivePublication(mds, live_port, term_offset=int(TA.producer_position(replay.log.buffer)))
    _offer_all(mds, reader, live, messages[30:60])
    assert _settle(mds, reader, 60) == messages[:60]
    assert len(mds.images) == 1  # one session: one image, fed through both destinations
    mds.cycle(250)
    assert active_transport_count(reader) == 2

    assert mds.destination(False, _port_channel(replay_port))[0] == cp.ON_OPERATION_SUCCESS
    _offer_all(mds, reader, live, messages[60:])
    assert _settle(mds, reader, 90) == messages
    assert len(mds.images) == 1
    (network_image,) = harness.conductor.network.images
    assert [c.destination.local_address[1] for c in network_image.connections] == [live_port]
    reader.close()
    replay.close()
    live.close()
