"""The sockets a UDP channel's subscriptions receive on (spec/transport.md §16), and their packet dispatch.

One per canonical channel. An ordinary channel has one destination (``receive_destination.py``), bound to the
channel's ``endpoint`` (for multicast: bound to and a member of the data group, answering to the control
group). A multi-destination subscription (``control-mode=manual``, one endpoint per subscription, as in Aeron)
has only the destinations its clients add: frames from any of them feed the same images, and each image
tracks which destinations have seen it (its connections) so its SMs and NAKs go back through each of them.
Every datagram is validated first: anything malformed is dropped and counted as an invalid packet (the driver
never dies on network input). Each poll reads the waiting datagrams in batches (``recvmmsg``); the loss generator's
drops and data of a session with an image on an ordinary endpoint are dealt with in compiled code
(``kernels/image_receiver.dispatch_batch``), without a Python call per datagram, and the rest comes back here one
by one. Then:

* DATA / PAD for a (session, stream) with an image: rebuilt into that image (MDS: its connection noted).
* DATA for a subscribed stream but an unknown session (we joined late, or lost the SETUP): answered with a
  status message flagged "send SETUP", at most once per status message timeout per session; not for a
  session whose stream ended here a moment ago (cooling down: its publication's last heartbeats).
* SETUP for a subscribed stream and a new session: the conductor creates the image (``on_setup`` callback);
  for a session with an image, on another destination of an MDS endpoint: a new connection of that image.
* RTTM requests: answered straight away (the sender measures its round trip).
* Everything else (status messages, NAKs, ...) is not for a receiver: ignored.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.driver.receive_destination import ReceiveDestination
from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.kernels import image_receiver
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels import udp_socket
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import udp_frames as ul

MAX_DATAGRAMS_PER_POLL = 64  # per destination and duty cycle, as batches of the receiver's ReceiveBatch
SETUP_ELICIT_INTERVAL_NS = 200_000_000
MAX_ELICITED_SESSIONS = 1024  # forget sessions asked for a SETUP longer ago than the interval past this many


def _i32(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 4].view(np.int32)[0])


def _i64(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 8].view(np.int64)[0])


class ReceiveChannelEndpoint:
    def __init__(self, channel: UdpChannel, destinations: list[ReceiveDestination], system_counters,
                 status_counter_id: int, receiver_id: int, on_setup, cool_down_ns: int = 10_000_000_000,
                 endpoint_id: int = 0):
        self.channel = channel
        self.endpoint_id = endpoint_id  # how its images' state rows name it to the compiled dispatcher
        self.key = channel.canonical_form  # the conductor's key for it (an MDS endpoint's is unique)
        self.destinations = list(destinations)
        # Multi-destination subscription: frames may come through several sockets, so images track connections.
        self.is_multi_destination = channel.is_manual_destination_control
        self.system_counters = system_counters
        self.status_counter_id = status_counter_id
        self.receiver_id = receiver_id
        self.on_setup = on_setup  # (endpoint, destination, setup fields dict, source address) -> None
        self.stream_refs: dict[int, int] = {}  # subscribed stream id -> subscription count
        self.images: dict[tuple[int, int], object] = {}  # (session id, stream id) -> PublicationImage
        self.pending_setups: set[tuple[int, int]] = set()  # image being created by the conductor
        self.setup_elicited_ns: dict[tuple[int, int], int] = {}
        # Sessions whose stream ended (end of stream consumed, image gone): their last heartbeats are ignored,
        # not answered with a SETUP request, for ``cool_down_ns`` (Aeron's image cool-down).
        self.cool_down_ns = cool_down_ns
        self.cooling_down: dict[tuple[int, int], int] = {}
        self.control = np.zeros(64, dtype=np.uint8)

    @property
    def local_address(self) -> tuple[str, int] | None:
        """The bound address of the first destination (None for an MDS endpoint with none yet)."""
        return self.destinations[0].local_address if self.destinations else None

    # ------------------------------------------------------------------------------- destinations
    def add_destination(self, destination: ReceiveDestination, now_ns: int) -> None:
        self.destinations.append(destination)
        for image in self.images.values():
            image.add_destination(destination, now_ns)

    def remove_destination(self, channel: UdpChannel) -> ReceiveDestination | None:
        """The destination named by ``channel``, no longer read nor answered through (None: there is none)."""
        for destination in self.destinations:
            if destination.matches(channel):
                self.destinations.remove(destination)
                for image in self.images.values():
                    image.remove_destination(destination)
                return destination
        return None

    # ------------------------------------------------------------------------------- subscriptions
    def add_subscription(self, stream_id: int) -> None:
        self.stream_refs[stream_id] = self.stream_refs.get(stream_id, 0) + 1

    def remove_subscription(self, stream_id: int) -> None:
        count = self.stream_refs.get(stream_id, 0) - 1
        if count <= 0:
            self.stream_refs.pop(stream_id, None)
        else:
            self.stream_refs[stream_id] = count

    @property
    def has_subscriptions(self) -> bool:
        return bool(self.stream_refs)

    def add_image(self, image) -> None:
        key = (image.session_id, image.stream_id)
        self.images[key] = image
        self.pending_setups.discard(key)
        self.setup_elicited_ns.pop(key, None)

    def remove_image(self, image, now_ns: int) -> None:
        key = (image.session_id, image.stream_id)
        if self.images.get(key) is image:
            del self.images[key]
            if image.is_end_of_stream_consumed():
                self.cooling_down[key] = now_ns

    def _is_cooling_down(self, key: tuple[int, int], now_ns: int) -> bool:
        started = self.cooling_down.get(key)
        if started is None:
            return False
        if now_ns - started < self.cool_down_ns:
            return True
        del self.cooling_down[key]
        return False

    def setup_failed(self, session_id: int, stream_id: int) -> None:
        self.pending_setups.discard((session_id, stream_id))

    # ------------------------------------------------------------------------------------- sending
    def send_to(self, data: np.ndarray, address: tuple[str, int], destination: ReceiveDestination) -> None:
        """Through ``destination``'s socket: the sender sees the answer come from where it sends."""
        destination.transport.send(data, address)
        self.system_counters.increment(cl.BYTES_SENT, len(data))

    @staticmethod
    def control_address(destination: ReceiveDestination, source: tuple[str, int]) -> tuple[str, int]:
        """Status messages and NAKs go to the sender, or to the destination's control address: MDC's
        ``control=``, a multicast channel's control group."""
        return destination.control_address if destination.control_address is not None else source

    # ------------------------------------------------------------------------------------- receiving
    def poll(self, now_ns: int, batch, images) -> int:
        """Read and dispatch what waits on every destination; returns the datagrams read. ``batch``: the
        receiver's ``ReceiveBatch``; ``images``: its ``ImageRows`` (the images the compiled path can find)."""
        received = 0
        values = self.system_counters.values_buffer
        slow = images.slow
        for destination in self.destinations:
            transport = destination.transport
            transport.poll_loss_settings()
            if destination.read_compiled:
                continue
            read = 0
            while read < MAX_DATAGRAMS_PER_POLL:
                count = transport.receive_batch(batch)
                if count == 0:
                    break
                read += count
                loss = transport.loss
                image_receiver.dispatch_batch(batch.msgs, batch.names, batch.buffer, batch.slot_length, count,
                                              self.endpoint_id, transport.fd, images.addresses, images.count, values,
                                              now_ns, loss.state, loss.gap_dropped, transport.local_port, slow)
                self.on_slow_datagrams(destination, batch, slow, now_ns)
                if count < batch.vlen:
                    break
            received += read
        return received

    def on_slow_datagrams(self, destination: ReceiveDestination, batch, slow: np.ndarray, now_ns: int) -> None:
        """The datagrams of ``batch`` (read from ``destination``) the compiled dispatcher left: ``slow[1:]``."""
        for index in slow[1:1 + slow[image_receiver.SLOW_COUNT]]:
            length = udp_socket.datagram_length(batch.msgs, index)
            if length < 0:
                self.system_counters.increment(cl.INVALID_PACKETS)
                continue
            self._on_datagram(destination, batch.datagram(index, length), length, batch.source(index), now_ns)

    def _on_datagram(self, destination: ReceiveDestination, buf: np.ndarray, length: int, source: tuple[str, int],
                     now_ns: int) -> None:
        frame_type = uf.classify_datagram(buf, 0, length)
        if frame_type < 0:
            self.system_counters.increment(cl.INVALID_PACKETS)
            return
        self.system_counters.increment(cl.BYTES_RECEIVED, length)
        if frame_type in (frame.HDR_TYPE_DATA, frame.HDR_TYPE_PAD):
            key = (_i32(buf, frame.SESSION_ID_FIELD_OFFSET), _i32(buf, frame.STREAM_ID_FIELD_OFFSET))
            image = self.images.get(key)
            if image is not None:
                if self.is_multi_destination:
                    image.insert_packet(buf, length, now_ns, image.connection_for(destination, source, now_ns))
                else:
                    image.insert_packet(buf, length, now_ns)
            elif key[1] in self.stream_refs and key not in self.pending_setups and \
                    not self._is_cooling_down(key, now_ns):
                self._elicit_setup(destination, key, source, now_ns)
        elif frame_type == frame.HDR_TYPE_SETUP:
            if uf.validate_setup(buf, 0) != 0:  # bad term length, MTU or term offset: never made into an image
                self.system_counters.increment(cl.INVALID_PACKETS)
                return
            (_, flags, term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length, mtu,
             ttl) = uf.decode_setup(buf, 0)
            key = (session_id, stream_id)
            image = self.images.get(key)
            if image is not None and self.is_multi_destination:  # the session through one more destination
                image.connection_for(destination, source, now_ns)
            elif stream_id in self.stream_refs and image is None and key not in self.pending_setups and \
                    not self._is_cooling_down(key, now_ns):
                self.pending_setups.add(key)
                setup = {
                    "session_id": session_id, "stream_id": stream_id, "term_offset": term_offset,
                    "initial_term_id": initial_term_id, "active_term_id": active_term_id,
                    "term_length": term_length, "mtu": mtu, "ttl": ttl, "flags": flags,
                }
                self.on_setup(self, destination, setup, source)
        elif frame_type == frame.HDR_TYPE_RTTM:
            if not buf[frame.FLAGS_FIELD_OFFSET] & ul.RTTM_REPLY_FLAG:
                size = uf.encode_rttm(self.control, 0, _i32(buf, ul.CONTROL_SESSION_ID_OFFSET),
                                      _i32(buf, ul.CONTROL_STREAM_ID_OFFSET), _i64(buf, ul.RTTM_ECHO_TIMESTAMP_OFFSET),
                                      0, self.receiver_id, True)
                self.send_to(self.control[:size], self.control_address(destination, source), destination)

    def _elicit_setup(self, destination: ReceiveDestination, key: tuple[int, int], source: tuple[str, int],
                      now_ns: int) -> None:
        last = self.setup_elicited_ns.get(key)
        if last is not None and now_ns - last < SETUP_ELICIT_INTERVAL_NS:
            return
        if len(self.setup_elicited_ns) >= MAX_ELICITED_SESSIONS:  # sessions that never set up (or garbage)
            self.setup_elicited_ns = {k: t for k, t in self.setup_elicited_ns.items()
                                      if now_ns - t < SETUP_ELICIT_INTERVAL_NS}
        self.setup_elicited_ns[key] = now_ns
        size = uf.encode_status_message(self.control, 0, key[0], key[1], 0, 0, 0, self.receiver_id, 0, False,
                                        ul.SM_SEND_SETUP_FLAG)
        self.send_to(self.control[:size], self.control_address(destination, source), destination)
        self.system_counters.increment(cl.STATUS_MESSAGES_SENT)
