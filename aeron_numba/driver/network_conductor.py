"""The conductor's UDP half: channel endpoints, network publications and images, and their counters.

``DriverConductor`` keeps the command protocol, clients and links; for ``aeron:udp`` channels it asks this
object to create or find the resources, and this object hands them to the ``Sender`` and ``Receiver`` agents
through a ``SenderProxy`` and a ``ReceiverProxy``; they answer through a ``DriverConductorProxy`` (Aeron's three
proxies). In SHARED mode the proxies call directly (the three agents share one thread); in SHARED_NETWORK and
DEDICATED modes they queue commands the other thread applies at the start of its next duty cycle
(``command_queue.py``). Endpoints are shared per canonical channel and closed with their last user. Images are
created when a receive endpoint sees a SETUP for a subscribed stream (the receiver asks through
``DriverConductorProxy.create_publication_image``); a SETUP with impossible parameters (term length, MTU) is
counted as an invalid packet and ignored.

Threads (what each owns; see the proxies' docstrings for the agents' side): this object runs on the conductor's
thread and owns its lists (``publications``, ``images``, ``send_endpoints``, ``receive_endpoints``), every counter
allocation and free, every log mapping and every socket close. Removing a resource is two-phase, as in Aeron: the
conductor drops it from its lists and asks the sender or receiver to let go of it; only when that agent reports
it released (``on_*_released`` / ``on_*_closed``, via the ``DriverConductorProxy``) are its counters freed, its log
unmapped and its sockets closed. Until then it is "releasing" here and still counts as a user of its endpoint.
Shared between the threads as plain attributes, each read or written in one GIL-atomic step: a publication's and
an image's ``state`` and positions, an image's ``subscribers`` (changed only here, through ``add_subscriber`` /
``remove_subscriber``, which hand the compiled path a new array of counter ids each time; the receiver's Python scan
of the list may miss an entry changed during that scan, for that one cycle), an endpoint's ``stream_refs`` (written
only here), a publication's ``spies`` (changed only here, read by the sender: a spy removed during a sender cycle
is at worst skipped in that cycle). A counter freed here keeps its value until it is reused, after
``counter_free_to_reuse_timeout``, so a late read on the other thread sees the last value.

Multicast (spec/transport.md §16): a channel's send endpoint binds and joins the control group (status
messages and NAKs come back there) and sends to the data group; its receive endpoint binds and joins the data
group and answers to the control group. An image has group semantics when its channel is multicast or its
SETUP carries the group flag (``group=`` on the subscription overrides both, as in Aeron): its NAKs then wait
a random multicast backoff instead of the unicast NAK delay.

Spies (``aeron-spy:aeron:udp?...`` subscriptions) link to every local network publication of their stream and
channel (same canonical form, and session when they name one), as Aeron's driver links them: an image over the
publication's own log, joined at its sender position, with the source identity ``aeron:ipc`` and a ``sub-pos``
labelled with the spy's channel. They are told the image is unavailable when the publication has drained.
"""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.driver.command_queue import CommandQueue
from aeron_numba.driver.driver_conductor_proxy import DriverConductorProxy
from aeron_numba.driver.feedback_delay import OptimalMulticastFeedbackDelay
from aeron_numba.driver.flow_control import flow_control_for
from aeron_numba.driver.loss_generator import LossControl
from aeron_numba.driver.ipc_publication import ImageChange, State
from aeron_numba.driver.network_publication import NetworkPublication
from aeron_numba.driver.publication_image import ImageConnection, ImageState, ImageSubscriber, PublicationImage
from aeron_numba.driver.receive_channel_endpoint import ReceiveChannelEndpoint
from aeron_numba.driver.receive_destination import ReceiveDestination
from aeron_numba.driver.receiver import Receiver
from aeron_numba.driver.receiver_proxy import ReceiverProxy
from aeron_numba.driver.send_channel_endpoint import SendChannelEndpoint
from aeron_numba.driver.sender import Sender
from aeron_numba.driver.sender_proxy import SenderProxy
from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.driver.udp_transport import UdpTransport
from aeron_numba.errors import AeronError, ChannelParameterError, LayoutError
from aeron_numba.kernels import counters as ck
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.kernels import position as pos
from aeron_numba.layout import udp_frames as ul
from aeron_numba.layout.log_buffers import LogBuffers

IMAGES_DIR = "images"
SPY_SOURCE_IDENTITY = cu.IPC_CHANNEL  # what Aeron's driver names as the source of a spy's image


def _format(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


def _untagged_or_same_tag(endpoint, channel: UdpChannel):
    """An endpoint found by canonical form serves the channel unless both carry a tag and the tags differ."""
    if endpoint is not None and endpoint.channel.tag is not None and channel.tag is not None and \
            endpoint.channel.tag != channel.tag:
        return None
    return endpoint


def _endpoint_key(endpoints: dict, channel: UdpChannel) -> str:
    """Endpoints are found by canonical form; one of another tag at the same address is kept beside it."""
    key = channel.canonical_form
    return key if key not in endpoints else f"{key}#{channel.tag}"


def _remove_endpoint(endpoints: dict, endpoint) -> None:
    del endpoints[next(key for key, value in endpoints.items() if value is endpoint)]


class ChannelEndpointError(AeronError):
    """A UDP socket could not be opened or bound: GENERIC_ERROR to the client, as from Aeron's C and Java drivers
    (CHANNEL_ENDPOINT_ERROR is for an endpoint that fails after it was made)."""


class NetworkConductor:
    def __init__(self, conductor):
        self.conductor = conductor
        self.ctx = conductor.ctx
        self.counters = conductor.counters
        self.system_counters = conductor.system_counters
        self.sender = Sender(nano_clock=conductor.nano_clock, send_to_status_poll_ratio=self.ctx.send_to_status_poll_ratio)
        self.receiver = Receiver(nano_clock=conductor.nano_clock)
        # Direct calls (SHARED mode) until ``use_command_queues`` gives the sender and receiver threads of their own.
        self.conductor_proxy = DriverConductorProxy(self)
        self.sender_proxy = SenderProxy(self.sender, self.conductor_proxy)
        self.receiver_proxy = ReceiverProxy(self.receiver, self.conductor_proxy)
        # Released by the conductor, not yet by the sender/receiver: their logs, counters and sockets stay open.
        self.releasing_publications: list[NetworkPublication] = []
        self.releasing_images: list[PublicationImage] = []
        self.closing_endpoints: list = []  # send and receive endpoints the agents have not let go of yet
        # control-mode=manual destinations per send endpoint, as the conductor added them (the sender's own dict
        # is the sender's to iterate): REMOVE_DESTINATION answers from this.
        self.manual_destinations: dict[SendChannelEndpoint, set[tuple[str, int]]] = {}
        self.images_dir = Path(self.ctx.aeron_dir) / IMAGES_DIR
        self.send_endpoints: dict[str, SendChannelEndpoint] = {}
        self.receive_endpoints: dict[str, ReceiveChannelEndpoint] = {}
        self.publications: list[NetworkPublication] = []
        self.images: list[PublicationImage] = []
        self.receiver_id = random.getrandbits(63)
        self._endpoint_ids = itertools.count(1)
        self.loss_control = LossControl.create(self.ctx.aeron_dir) if self.ctx.loss_control_enabled else None

    # -------------------------------------------------------------------------------------- threads
    def use_command_queues(self) -> tuple[CommandQueue, CommandQueue]:
        """The sender and receiver get threads of their own (SHARED_NETWORK, DEDICATED): from now on the proxies
        queue commands. Returns the sender's and the receiver's queue, for their runners to drain."""
        sender_queue, receiver_queue = CommandQueue("sender"), CommandQueue("receiver")
        self.conductor_proxy.queue = CommandQueue("driver-conductor")
        self.sender_proxy.queue = sender_queue
        self.receiver_proxy.queue = receiver_queue
        return sender_queue, receiver_queue

    def run_proxies_directly(self) -> None:
        """The sender and receiver threads have stopped (the driver closes): apply what they left queued, in order,
        and call directly from now on, so closing releases everything on this thread."""
        self.sender_proxy.run_directly()
        self.receiver_proxy.run_directly()
        self.conductor_proxy.run_directly()

    def _await_endpoint_closes(self, timeout_ns: int = 1_000_000_000) -> None:
        """Before binding a new socket: let endpoints that are closing close first, so a channel closed and opened
        again at once finds its port free (unicast sockets are not shared). Only waits on another thread's next
        duty cycle, in SHARED_NETWORK/DEDICATED modes."""
        if not self.closing_endpoints or self.conductor_proxy.is_direct:
            return
        deadline = time.monotonic_ns() + timeout_ns
        while self.closing_endpoints and time.monotonic_ns() < deadline:
            if not self.conductor_proxy.drain():
                time.sleep(0.0001)

    # ------------------------------------------------------------------------------------- counters
    def _stream_counter(self, name: str, type_id: int, registration_id: int, session_id: int, stream_id: int,
                        channel: str, owner_id: int = 0, suffix: str = "") -> int:
        key = ck.stream_counter_key(registration_id, session_id, stream_id, channel)
        label = ck.stream_counter_label(name, registration_id, session_id, stream_id, channel, suffix)
        return self.counters.allocate(label, type_id, key, registration_id=registration_id, owner_id=owner_id)

    def _channel_status_counter(self, name: str, type_id: int, channel: str, bound: str, registration_id: int) -> int:
        """The endpoint's status counter, labelled with its bound address as the C driver labels it (an MDS
        endpoint, bound nowhere, has an empty one), ACTIVE."""
        status_id = self.counters.allocate(ck.channel_status_label(name, channel, bound), type_id,
                                           ck.channel_status_key(channel), registration_id=registration_id)
        ck.set_counter_value(self.counters.values_buffer, status_id, cl.CHANNEL_STATUS_ACTIVE)
        return status_id

    def _local_sockaddr_counter(self, name: str, status_id: int, bound: str, registration_id: int) -> int:
        """The local socket address counter naming the status counter of its endpoint, ACTIVE."""
        sockaddr_id = self.counters.allocate(ck.local_sockaddr_label(name, status_id, bound),
                                             cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID,
                                             ck.local_sockaddr_key(status_id, bound), registration_id=registration_id)
        ck.set_counter_value(self.counters.values_buffer, sockaddr_id, cl.CHANNEL_STATUS_ACTIVE)
        return sockaddr_id

    def _transport(self, bind_address: tuple[str, int], channel: UdpChannel) -> UdpTransport:
        self._await_endpoint_closes()
        try:
            return UdpTransport(bind_address, socket_rcvbuf=self.ctx.socket_rcvbuf_length,
                                socket_sndbuf=self.ctx.socket_sndbuf_length,
                                multicast_ttl=channel.ttl if channel.is_multicast else None,
                                multicast_interface=channel.multicast_interface,
                                loss_control=self.loss_control)
        except OSError as exc:
            where = f"{bind_address[0]}:{bind_address[1]}"
            if channel.is_multicast:
                where += f" (multicast group on interface {channel.multicast_interface})"
            # The C driver's words for a failed bind (its message names the socket's fd too).
            raise ChannelEndpointError(f"failed to bind({where}): ({exc.errno}) {exc.strerror}\n"
                                       f"channel={channel}") from None

    # ------------------------------------------------------------------------------- send endpoints
    def find_send_endpoint(self, channel: UdpChannel) -> SendChannelEndpoint | None:
        """The send endpoint a publication on ``channel`` uses, if there is one (Aeron's
        findExistingSendChannelEndpoint): the one its channel tag names, else the one of its canonical form unless
        that one carries another tag. A tagged channel that names no endpoint and has no address of its own (no
        endpoint, no control, not manual) is refused with C's words (GENERIC_ERROR)."""
        if channel.tag is not None:
            for endpoint in self.send_endpoints.values():
                if channel.matches_tag(endpoint.channel):
                    return endpoint
            if not channel.has_explicit_control and not channel.is_manual_destination_control and \
                    not channel.has_explicit_endpoint:
                raise ChannelParameterError("URI must have explicit control, endpoint, or be manual control-mode when"
                                            f" original: channel={channel}")
        return _untagged_or_same_tag(self.send_endpoints.get(channel.canonical_form), channel)

    def find_receive_endpoint(self, channel: UdpChannel) -> ReceiveChannelEndpoint | None:
        """The receive endpoint a subscription on ``channel`` joins, if there is one (Aeron's
        findExistingReceiveChannelEndpoint): the one its channel tag names, else the one of its canonical form
        unless that one carries another tag. (A tag that names none makes a new endpoint, as in Aeron.)"""
        if channel.tag is not None:
            for endpoint in self.receive_endpoints.values():
                if channel.matches_tag(endpoint.channel):
                    return endpoint
        return _untagged_or_same_tag(self.receive_endpoints.get(channel.canonical_form), channel)

    def _send_endpoint(self, channel: UdpChannel, registration_id: int) -> SendChannelEndpoint:
        endpoint = self.find_send_endpoint(channel)
        if endpoint is not None:
            return endpoint
        transport = self._transport(channel.send_bind_address(), channel)
        bound = _format(transport.local_address)
        status_id = self._channel_status_counter(cl.SEND_CHANNEL_STATUS_NAME, cl.SEND_CHANNEL_STATUS_TYPE_ID,
                                                 str(channel), bound, registration_id)
        sockaddr_id = self._local_sockaddr_counter(cl.SND_LOCAL_SOCKADDR_NAME, status_id, bound, registration_id)
        endpoint = SendChannelEndpoint(channel, transport, self.system_counters, status_id)
        endpoint.sockaddr_counter_id = sockaddr_id
        self.send_endpoints[_endpoint_key(self.send_endpoints, channel)] = endpoint
        self.sender_proxy.register_send_channel_endpoint(endpoint)
        return endpoint

    def _release_send_endpoint(self, endpoint: SendChannelEndpoint) -> None:
        """Close the endpoint when no publication uses it (a releasing one still does): the sender lets go of it
        first, then ``on_send_channel_endpoint_closed`` closes its socket. The conductor counts the users itself:
        the endpoint's own ``publications`` are the sender's."""
        if any(p.endpoint is endpoint for p in self.publications) or \
                any(p.endpoint is endpoint for p in self.releasing_publications) or endpoint not in self.send_endpoints.values():
            return
        _remove_endpoint(self.send_endpoints, endpoint)
        self.manual_destinations.pop(endpoint, None)
        self.closing_endpoints.append(endpoint)
        self.sender_proxy.close_send_channel_endpoint(endpoint)

    def on_send_channel_endpoint_closed(self, endpoint: SendChannelEndpoint) -> None:
        """The sender no longer polls or sends through ``endpoint``: free its counters and close its socket."""
        self.closing_endpoints.remove(endpoint)
        for counter_id in (endpoint.status_counter_id, endpoint.sockaddr_counter_id):
            self.counters.free(counter_id)
        endpoint.close()

    def add_send_destination(self, endpoint: SendChannelEndpoint, address: tuple[str, int], now_ns: int) -> None:
        """ADD_DESTINATION on a ``control-mode=manual`` publication: the sender sends there too."""
        self.manual_destinations.setdefault(endpoint, set()).add(address)
        self.sender_proxy.add_destination(endpoint, address, now_ns)

    def remove_send_destination(self, endpoint: SendChannelEndpoint, address: tuple[str, int]) -> bool:
        """REMOVE_DESTINATION: False when the endpoint has no such destination."""
        destinations = self.manual_destinations.get(endpoint, set())
        if address not in destinations:
            return False
        destinations.discard(address)
        self.sender_proxy.remove_destination(endpoint, address)
        return True

    # ------------------------------------------------------------------------------- publications
    def publications_of(self, channel: UdpChannel, stream_id: int) -> list[NetworkPublication]:
        """The stream's publications on the send endpoint ``channel`` uses (by address or tag), in any state
        (Aeron's session id check)."""
        endpoint = self.find_send_endpoint(channel)
        return [p for p in self.publications if p.stream_id == stream_id and p.endpoint is endpoint] \
            if endpoint is not None else []

    def find_publication_by_tag(self, tag: int) -> NetworkPublication | None:
        """The network publication whose ``tags=`` named this publication tag (``session-id=tag:<n>``)."""
        return next((p for p in self.publications if p.tag is not None and p.tag == tag), None)

    def new_publication(self, registration_id: int, client_id: int, stream_id: int, channel: UdpChannel, params,
                        exclusive: bool, session_id: int, log_path: Path, now_ns: int) -> NetworkPublication:
        endpoint = self._send_endpoint(channel, registration_id)
        initial_term_id = params.initial_term_id if params.initial_term_id is not None else \
            random.randint(-(2**31), 2**31 - 1)
        log = LogBuffers.create(
            log_path, term_length=params.term_length, initial_term_id=initial_term_id, session_id=session_id,
            stream_id=stream_id, correlation_id=registration_id, mtu_length=params.mtu_length,
            page_size=self.ctx.file_page_size, term_id=params.term_id, term_offset=params.term_offset,
            linger_timeout_ns=params.linger_ns, pre_touch=self.ctx.pre_touch_mapped_memory,
            entity_tag=params.log_entity_tag,
        )
        counter_ids = []
        try:
            # Aeron's order: pub-pos, pub-lmt, snd-pos, snd-lmt, snd-bpe; only pub-lmt names the client its owner.
            for name, type_id in ((cl.PUBLISHER_POS_NAME, cl.PUBLISHER_POS_TYPE_ID),
                                  (cl.PUBLISHER_LIMIT_NAME, cl.PUBLISHER_LIMIT_TYPE_ID),
                                  (cl.SENDER_POSITION_NAME, cl.SENDER_POSITION_TYPE_ID),
                                  (cl.SENDER_LIMIT_NAME, cl.SENDER_LIMIT_TYPE_ID),
                                  (cl.SENDER_BPE_NAME, cl.SENDER_BPE_TYPE_ID)):
                owner_id = client_id if type_id == cl.PUBLISHER_LIMIT_TYPE_ID else cl.DEFAULT_OWNER_ID
                counter_ids.append(self._stream_counter(name, type_id, registration_id, session_id,
                                                        stream_id, channel.original, owner_id))
            publication = NetworkPublication(
                registration_id=registration_id, session_id=session_id, stream_id=stream_id,
                channel=endpoint.channel, endpoint=endpoint, exclusive=exclusive, log=log,
                pub_pos_counter_id=counter_ids[0], pub_lmt_counter_id=counter_ids[1],
                snd_pos_counter_id=counter_ids[2], snd_lmt_counter_id=counter_ids[3],
                snd_bpe_counter_id=counter_ids[4],
                term_window_length=params.term_window_length, values_buffer=self.counters.values_buffer,
                system_counters=self.system_counters, now_ns=now_ns,
                unblock_timeout_ns=self.ctx.publication_unblock_timeout_ns,
                connection_timeout_ns=self.ctx.publication_connection_timeout_ns,
                linger_timeout_ns=params.linger_ns,
                heartbeat_timeout_ns=self.ctx.publication_heartbeat_timeout_ns,
                setup_timeout_ns=self.ctx.publication_setup_timeout_ns,
                retransmit_delay_ns=self.ctx.retransmit_unicast_delay_ns,
                retransmit_linger_ns=self.ctx.retransmit_unicast_linger_ns, max_resend=self.ctx.max_resend,
                # As Aeron: the endpoint's channel (a tagged channel may name no address of its own) decides flow
                # control and group semantics; the publication's own channel names its counters.
                flow_control=flow_control_for(endpoint.channel.uri,
                                              multi_receiver=endpoint.channel.has_group_semantics),
                spies_simulate_connection=params.spies_simulate_connection, tag=params.entity_tag,
                signal_eos=params.signal_eos,
            )
        except Exception:
            for counter_id in counter_ids:
                self.counters.free(counter_id)
            log.close()
            log_path.unlink(missing_ok=True)
            self._release_send_endpoint(endpoint)
            raise
        self.publications.append(publication)
        self.system_counters.increment(cl.BYTES_CURRENTLY_MAPPED, log.buffer.size)
        self.sender_proxy.new_network_publication(publication)
        return publication

    def delete_publication(self, publication: NetworkPublication) -> None:
        """DONE (or the driver closing): the sender lets go of it, then ``on_network_publication_released`` frees it."""
        self._unlink_spies(publication)
        self.publications.remove(publication)
        self.releasing_publications.append(publication)
        self.sender_proxy.remove_network_publication(publication)

    def on_network_publication_released(self, publication: NetworkPublication) -> None:
        """The sender no longer sends ``publication``: free its counters, unmap its log, release its endpoint."""
        self.releasing_publications.remove(publication)
        for counter_id in (publication.pub_pos_counter_id, publication.pub_lmt_counter_id,
                           publication.snd_pos_counter_id, publication.snd_lmt_counter_id,
                           publication.snd_bpe_counter_id):
            self.counters.free(counter_id)
        self.conductor._close_log(publication.log)
        self._release_send_endpoint(publication.endpoint)

    # ---------------------------------------------------------------------------- receive endpoints
    def add_subscription(self, link, channel: UdpChannel) -> ReceiveChannelEndpoint:
        channel.check_for_subscription()
        endpoint = self.find_receive_endpoint(channel)
        if endpoint is None:
            key = _endpoint_key(self.receive_endpoints, channel)
            if channel.is_manual_destination_control and channel.remote_data is None and \
                    channel.remote_control is None and channel.tag is None:
                key = f"{key}-{link.registration_id}"  # nothing to share by: an MDS endpoint per subscription, as C
            endpoint = self._new_receive_endpoint(link, channel, key)
        endpoint.add_subscription(link.stream_id)
        link.endpoint = endpoint
        return endpoint

    def _new_receive_endpoint(self, link, channel: UdpChannel, key: str) -> ReceiveChannelEndpoint:
        """An ordinary channel's endpoint binds its own destination; an MDS one (``control-mode=manual``) none, as
        the C driver: its destinations come with ADD_RCV_DESTINATION."""
        transport = None
        if not channel.is_manual_destination_control:
            transport = self._transport(channel.remote_data if channel.remote_data is not None else channel.local_data,
                                        channel)
        bound = "" if transport is None else _format(transport.local_address)
        status_id = self._channel_status_counter(cl.RECEIVE_CHANNEL_STATUS_NAME, cl.RECEIVE_CHANNEL_STATUS_TYPE_ID,
                                                 str(channel), bound, link.registration_id)
        destinations = []
        if transport is not None:
            sockaddr_id = self._local_sockaddr_counter(cl.RCV_LOCAL_SOCKADDR_NAME, status_id, bound,
                                                       link.registration_id)
            destinations.append(ReceiveDestination(channel, transport, sockaddr_id))
        endpoint = ReceiveChannelEndpoint(channel, destinations, self.system_counters, status_id, self.receiver_id,
                                          self.conductor_proxy.create_publication_image,
                                          cool_down_ns=self.ctx.image_liveness_timeout_ns,
                                          endpoint_id=next(self._endpoint_ids))
        endpoint.key = key
        self.receive_endpoints[key] = endpoint
        self.receiver_proxy.register_receive_channel_endpoint(endpoint)
        return endpoint

    def add_rcv_destination(self, link, channel: UdpChannel) -> None:
        """ADD_RCV_DESTINATION: one more socket for the MDS subscription's endpoint, with its rcv-local-sockaddr
        counter (the subscription's registration id, naming the endpoint's rcv-channel counter, as C)."""
        endpoint = link.endpoint
        transport = self._transport(channel.remote_data, channel)
        try:
            sockaddr_id = self._local_sockaddr_counter(cl.RCV_LOCAL_SOCKADDR_NAME, endpoint.status_counter_id,
                                                       _format(transport.local_address), link.registration_id)
        except Exception:
            transport.close()
            raise
        self.receiver_proxy.add_destination(endpoint, ReceiveDestination(channel, transport, sockaddr_id))

    def remove_rcv_destination(self, link, channel: UdpChannel) -> None:
        """REMOVE_RCV_DESTINATION: the receiver stops reading the destination ``channel`` names, if the endpoint has
        it (Aeron answers OK either way); ``on_receive_destination_removed`` then closes it. Its address counter says
        CLOSING at once, so a client that has the OK no longer lists it while the receiver lets go of it (the list is
        the receiver's: copied in one step, only read here)."""
        for destination in tuple(link.endpoint.destinations):
            if destination.matches(channel):
                ck.set_counter_value(self.counters.values_buffer, destination.sockaddr_counter_id,
                                     cl.CHANNEL_STATUS_CLOSING)
        self.receiver_proxy.remove_destination(link.endpoint, channel)

    def on_receive_destination_removed(self, destination: ReceiveDestination) -> None:
        self._close_destination(destination)

    def _close_destination(self, destination: ReceiveDestination) -> None:
        ck.set_counter_value(self.counters.values_buffer, destination.sockaddr_counter_id, cl.CHANNEL_STATUS_CLOSING)
        self.counters.free(destination.sockaddr_counter_id)
        destination.close()

    def link_existing_images(self, link) -> None:
        """After ON_SUBSCRIPTION_READY: a late joiner starts where the image's slowest subscriber is (its rebuild
        position when it has none), as Aeron's ``PublicationImage.joinPosition``: what the others have still to
        read is still in the image, and a cluster follower's service must join its log where the consensus module
        is, not where the catch-up replay has got to."""
        for image in self.images:
            if image.endpoint is link.endpoint and image.stream_id == link.stream_id and \
                    image.state is ImageState.ACTIVE and link.wants_session(image.session_id):
                self._link_subscriber(image, link, min(image.min_subscriber_position(), image.rebuild_position))

    # ------------------------------------------------------------------------------------------ spies
    def spy_channel(self, channel: str) -> UdpChannel:
        """The UDP channel an ``aeron-spy:`` subscription names (refused as any UDP channel would be)."""
        return UdpChannel.parse(channel[len(cu.SPY_QUALIFIER) + 1:])

    def link_spy(self, link) -> None:
        """A new spy: an image of every matching publication that still takes subscribers."""
        for publication in self.publications:
            if publication.is_accepting_spies and link.matches_network_publication(publication):
                self._link_spy(link, publication)

    def link_spies(self, publication: NetworkPublication, subscriptions) -> None:
        """A new publication: an image for every spy already waiting for it."""
        for link in subscriptions:
            if link.matches_network_publication(publication) and publication.registration_id not in link.images:
                self._link_spy(link, publication)

    def _link_spy(self, link, publication: NetworkPublication) -> None:
        join_position = publication.join_position
        label = ck.subscriber_position_label(link.registration_id, publication.session_id, publication.stream_id,
                                             link.channel, join_position)
        key = ck.stream_counter_key(link.registration_id, publication.session_id, publication.stream_id,
                                    link.channel)
        counter_id = self.counters.allocate(label, cl.SUBSCRIBER_POSITION_TYPE_ID, key,
                                            registration_id=link.registration_id, owner_id=link.client_id,
                                            reference_id=publication.registration_id)
        publication.add_spy(link, counter_id, join_position, self.conductor.nano_clock())
        link.images[publication.registration_id] = counter_id
        self._send_spy_image(publication, link, counter_id)

    def _send_spy_image(self, publication: NetworkPublication, link, counter_id: int) -> None:
        self.conductor.client_proxy.on_available_image(
            correlation_id=publication.registration_id, stream_id=publication.stream_id,
            session_id=publication.session_id, subscription_registration_id=link.registration_id,
            subscriber_position_id=counter_id, log_file_name=publication.log_file_name,
            source_identity=SPY_SOURCE_IDENTITY)

    def _send_unavailable_spy_image(self, publication: NetworkPublication, link) -> None:
        self.conductor.client_proxy.on_unavailable_image(
            correlation_id=publication.registration_id, subscription_registration_id=link.registration_id,
            stream_id=publication.stream_id, channel=link.channel)

    def _unlink_spies(self, publication: NetworkPublication) -> None:
        """The publication has drained (or goes): its spies' images are unavailable, their counters freed."""
        spies, publication.spies = publication.spies, []  # the sender may be scanning the old list: not cleared
        for spy in spies:
            self._send_unavailable_spy_image(publication, spy.subscription)
            spy.subscription.images.pop(publication.registration_id, None)
            self.counters.free(spy.counter_id)

    def _check_untethered_spies(self, publication: NetworkPublication, now_ns: int) -> int:
        changes = publication.check_untethered_spies(now_ns)
        for spy, change in changes:
            if change is ImageChange.UNAVAILABLE:
                self._send_unavailable_spy_image(publication, spy.subscription)
            else:
                self._send_spy_image(publication, spy.subscription, spy.counter_id)
        return len(changes)

    def remove_subscription(self, link) -> None:
        if link.spy_channel is not None:
            for publication in self.publications:
                spy = publication.remove_spy(link)
                if spy is not None:
                    self.counters.free(spy.counter_id)
            return
        endpoint = link.endpoint
        for image in self.images:
            for subscriber in [s for s in image.subscribers if s.subscription is link]:
                image.remove_subscriber(subscriber)
                self.counters.free(subscriber.counter_id)
        endpoint.remove_subscription(link.stream_id)
        if link.stream_id not in endpoint.stream_refs:
            for image in self.images:  # nobody wants this stream here any more
                if image.endpoint is endpoint and image.stream_id == link.stream_id and \
                        image.state is ImageState.ACTIVE:
                    image.state = ImageState.DRAINING
                    image.time_of_state_change_ns = self.conductor.nano_clock()
        if not endpoint.has_subscriptions and not any(i.endpoint is endpoint for i in self.images):
            self._close_receive_endpoint(endpoint)

    def _close_receive_endpoint(self, endpoint: ReceiveChannelEndpoint) -> None:
        """The receiver lets go of the endpoint; ``on_receive_channel_endpoint_closed`` then closes its sockets."""
        del self.receive_endpoints[endpoint.key]
        self.closing_endpoints.append(endpoint)
        self.receiver_proxy.close_receive_channel_endpoint(endpoint)

    def on_receive_channel_endpoint_closed(self, endpoint: ReceiveChannelEndpoint) -> None:
        """The receiver no longer reads ``endpoint`` (and applied every destination change before this): free its
        counters and close its destinations' sockets."""
        self.closing_endpoints.remove(endpoint)
        self.counters.free(endpoint.status_counter_id)
        for destination in endpoint.destinations:
            self._close_destination(destination)
        endpoint.destinations.clear()

    def _is_open(self, endpoint: ReceiveChannelEndpoint) -> bool:
        return self.receive_endpoints.get(endpoint.key) is endpoint

    # ----------------------------------------------------------------------------------------- images
    def on_create_publication_image(self, endpoint: ReceiveChannelEndpoint, destination: ReceiveDestination,
                                    setup: dict, source: tuple[str, int]) -> None:
        """A SETUP for a subscribed stream and a new session (from the receiver, through the DriverConductorProxy):
        create the image (or count a bogus SETUP). An endpoint or destination closed since the SETUP arrived gets
        none."""
        if not self._is_open(endpoint) or destination not in endpoint.destinations:
            self.receiver_proxy.remove_pending_setup(endpoint, setup["session_id"], setup["stream_id"])
            return
        try:
            lb.check_term_length(setup["term_length"])
            frame.check_mtu_length(setup["mtu"])
            self._create_image(endpoint, destination, setup, source)
        except LayoutError:
            self.system_counters.increment(cl.INVALID_PACKETS)
            self.receiver_proxy.remove_pending_setup(endpoint, setup["session_id"], setup["stream_id"])
        except Exception as exc:  # noqa: BLE001 - e.g. no space for the log: recorded, the SETUP comes again
            self.conductor._record_error(exc)
            self.receiver_proxy.remove_pending_setup(endpoint, setup["session_id"], setup["stream_id"])

    def _create_image(self, endpoint, destination: ReceiveDestination, setup: dict, source: tuple[str, int]) -> None:
        conductor = self.conductor
        links = [s for s in conductor.subscriptions if getattr(s, "endpoint", None) is endpoint
                 and s.stream_id == setup["stream_id"] and s.wants_session(setup["session_id"])]
        if not links:
            self.receiver_proxy.remove_pending_setup(endpoint, setup["session_id"], setup["stream_id"])
            return
        correlation_id = conductor.to_driver.next_correlation_id()
        term_length = setup["term_length"]
        self.images_dir.mkdir(parents=True, exist_ok=True)
        path = self.images_dir / f"{correlation_id}.logbuffer"
        conductor._check_storage_space(lb.compute_log_length(term_length, self.ctx.file_page_size))
        log = LogBuffers.create(
            path, term_length=term_length, initial_term_id=setup["initial_term_id"], session_id=setup["session_id"],
            stream_id=setup["stream_id"], correlation_id=correlation_id, mtu_length=setup["mtu"],
            page_size=self.ctx.file_page_size, term_id=setup["active_term_id"], term_offset=setup["term_offset"],
            pre_touch=self.ctx.pre_touch_mapped_memory,
        )
        bits = log.position_bits_to_shift
        join_position = pos.compute_position(setup["active_term_id"], setup["term_offset"], bits,
                                             setup["initial_term_id"])
        channel = str(endpoint.channel)
        # As the C driver: the image's counters name the channel of the first subscription that wants the stream.
        counter_ids = [self._stream_counter(name, type_id, correlation_id, setup["session_id"], setup["stream_id"],
                                            links[0].channel)
                       for name, type_id in ((cl.RECEIVER_HWM_NAME, cl.RECEIVER_HWM_TYPE_ID),
                                             (cl.RECEIVER_POSITION_NAME, cl.RECEIVER_POSITION_TYPE_ID))]
        reliable = cu.parse_bool(cu.RELIABLE_PARAM, endpoint.channel.get(cu.RELIABLE_PARAM, "true"))
        group = endpoint.channel.group_semantics
        if group is None:
            group = endpoint.channel.is_multicast or bool(setup["flags"] & ul.SETUP_GROUP_FLAG)
        feedback_delay = None
        if group and reliable:
            feedback_delay = OptimalMulticastFeedbackDelay(self.ctx.nak_multicast_max_backoff_ns,
                                                           self.ctx.nak_multicast_group_size)
        image = PublicationImage(
            correlation_id=correlation_id, session_id=setup["session_id"], stream_id=setup["stream_id"],
            endpoint_id=endpoint.endpoint_id, channel=channel, source_identity=f"{source[0]}:{source[1]}", connections=self._connections(
                endpoint, destination, source, conductor.nano_clock()),
            endpoint=endpoint, log=log, join_position=join_position, rcv_hwm_counter_id=counter_ids[0],
            rcv_pos_counter_id=counter_ids[1], values_buffer=self.counters.values_buffer,
            system_counters=self.system_counters, now_ns=conductor.nano_clock(), receiver_id=self.receiver_id,
            receiver_window=min(self.ctx.initial_window_length, term_length // 2), reliable=reliable,
            nak_delay_ns=self.ctx.nak_unicast_delay_ns,
            nak_retry_delay_ns=self.ctx.nak_unicast_delay_ns * self.ctx.nak_unicast_retry_delay_ratio,
            feedback_delay=feedback_delay,
            status_message_timeout_ns=self.ctx.status_message_timeout_ns,
            image_liveness_timeout_ns=self.ctx.image_liveness_timeout_ns,
            linger_timeout_ns=self.ctx.publication_linger_timeout_ns,
            loss_report=conductor.loss_report, epoch_clock=conductor.epoch_clock,
        )
        self.images.append(image)
        self.system_counters.increment(cl.BYTES_CURRENTLY_MAPPED, log.buffer.size)
        for link in links:
            self._link_subscriber(image, link, join_position)
        self.receiver_proxy.new_publication_image(endpoint, image)

    @staticmethod
    def _connections(endpoint: ReceiveChannelEndpoint, destination: ReceiveDestination, source: tuple[str, int],
                     now_ns: int) -> list[ImageConnection]:
        """A new image answers through the destination its SETUP came in on; on an MDS endpoint every other
        destination gets a connection too, answered once it delivers this session (Aeron's image)."""
        control_address = endpoint.control_address(destination, source)
        if not endpoint.is_multi_destination:
            return [ImageConnection(destination, control_address)]
        return [ImageConnection(d, control_address if d is destination else d.control_address, now_ns)
                for d in endpoint.destinations]

    def _link_subscriber(self, image: PublicationImage, link, join_position: int) -> None:
        label = ck.subscriber_position_label(link.registration_id, image.session_id, image.stream_id, link.channel,
                                             join_position)
        key = ck.stream_counter_key(link.registration_id, image.session_id, image.stream_id, link.channel)
        counter_id = self.counters.allocate(label, cl.SUBSCRIBER_POSITION_TYPE_ID, key,
                                            registration_id=link.registration_id, owner_id=link.client_id,
                                            reference_id=image.correlation_id)
        ck.set_counter_value(self.counters.values_buffer, counter_id, join_position)
        image.add_subscriber(ImageSubscriber(link, counter_id))
        link.images[image.correlation_id] = counter_id
        self.conductor.client_proxy.on_available_image(
            correlation_id=image.correlation_id, stream_id=image.stream_id, session_id=image.session_id,
            subscription_registration_id=link.registration_id, subscriber_position_id=counter_id,
            log_file_name=image.log_file_name, source_identity=image.source_identity)

    def _delete_image(self, image: PublicationImage) -> None:
        """DONE (or the driver closing): the receiver lets go of it, then ``on_publication_image_released`` frees
        it."""
        self.images.remove(image)
        self.releasing_images.append(image)
        self.receiver_proxy.remove_publication_image(image)

    def on_publication_image_released(self, image: PublicationImage) -> None:
        """The receiver no longer feeds ``image``: free its counters, unmap its log, close an endpoint left unused."""
        self.releasing_images.remove(image)
        for subscriber in image.subscribers:
            subscriber.subscription.images.pop(image.correlation_id, None)
            self.counters.free(subscriber.counter_id)
        image.subscribers = []
        for counter_id in (image.rcv_hwm_counter_id, image.rcv_pos_counter_id):
            self.counters.free(counter_id)
        self.conductor._close_log(image.log)
        endpoint = image.endpoint
        if self._is_open(endpoint) and not endpoint.has_subscriptions and \
                not any(i.endpoint is endpoint for i in self.images):
            self._close_receive_endpoint(endpoint)

    # ------------------------------------------------------------------------------------ duty cycle
    def do_work(self) -> int:
        work = self.conductor_proxy.drain()  # what the sender and receiver asked for or released
        for publication in self.publications:
            work += publication.update_pub_pos_and_pub_lmt()
        for image in self.images:
            work += image.clean()
        return work

    def add_idle_watch(self, watch) -> bool:
        """What the conductor's UDP half waits for (``agent/idle_watch.py``): a publication's slowest reader far
        enough on for its limit to move, an image's slowest subscriber far enough on for its log to be cleaned
        and, with the sender and receiver on threads of their own, a command from them; lifecycles run on the
        conductor's timer. In SHARED mode the sender and receiver on this thread name their own work (sockets,
        publishers, timers)."""
        if not self.conductor_proxy.is_direct:
            watch.watch_int64(self.conductor_proxy.queue.offers, 0)
        for publication in self.publications:
            publication.add_conductor_watch(watch)
        for image in self.images:
            image.add_conductor_watch(watch)
        return True

    def on_timer(self, now_ns: int) -> int:
        work = 0
        for publication in list(self.publications):
            if publication.on_time_event(now_ns):
                self.delete_publication(publication)
                work += 1
            elif publication.state is State.ACTIVE:
                work += self._check_untethered_spies(publication, now_ns)
            elif publication.state is State.LINGER and publication.spies:
                self._unlink_spies(publication)  # drained: every spy has read to the end of stream
                work += 1
        for image in list(self.images):
            before = image.state
            if image.on_time_event(now_ns):
                self._delete_image(image)
                work += 1
            elif before is ImageState.ACTIVE and image.state is not ImageState.ACTIVE:
                for subscriber in image.subscribers:  # the sender went quiet, or its stream ended
                    self.conductor.client_proxy.on_unavailable_image(
                        correlation_id=image.correlation_id,
                        subscription_registration_id=subscriber.subscription.registration_id,
                        stream_id=image.stream_id, channel=subscriber.subscription.channel)
                work += 1
        return work

    def on_close(self) -> None:
        """The driver closes (after the sender and receiver have stopped and ``run_proxies_directly``): release
        everything on this thread."""
        self.run_proxies_directly()
        for image in list(self.images):
            self._delete_image(image)
        for publication in list(self.publications):
            self.delete_publication(publication)
        for endpoint in list(self.receive_endpoints.values()):
            self._close_receive_endpoint(endpoint)
        if self.loss_control is not None:
            self.loss_control.close()
