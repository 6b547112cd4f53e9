"""The driver conductor: decides client commands, owns publications, subscriptions, counters and client
sessions (spec/transport.md §7-§11, §15).

Each duty cycle: let the ``ClientCommandAdapter`` drain up to a batch of commands into the ``on_<command>``
methods below, move every IPC publication's limit, and on the timer (every ``timer_interval_ns``) heartbeat the
to-driver buffer (driver liveness, §6) and check client liveness, a blocked command buffer and publication
lifecycles. An idle cycle between timers counts no work, so the idle strategy backs off as Aeron's does (a
heartbeat counted as work every millisecond kept a backoff strategy spinning). Responses go out through the
``ClientProxy``. A decision that refuses a command raises ``ControlProtocolError`` (or the error of what failed);
the adapter answers it with ON_ERROR and records it, so the conductor never touches bytes.

Threads: the conductor runs on its own thread or shares one with the sender and receiver (the driver's threading
mode, ``media_driver.py``). Everything here is the conductor thread's; the UDP part talks to the sender and
receiver only through their proxies (``network_conductor.py``). ``_record_error`` is also the network runners'
error handler, so it writes the error log under a lock.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import ChannelParameterError, CountersFullError
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels.broadcast import BroadcastTransmitter
from aeron_numba.kernels.error_log import DistinctErrorLog
from aeron_numba.kernels.loss_report import LossReport
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.log_buffers import LogBuffers

from aeron_numba.driver.client_command_adapter import ClientCommandAdapter
from aeron_numba.driver.client_proxy import ClientProxy
from aeron_numba.driver.command_errors import ControlProtocolError
from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.ipc_publication import ImageChange, IpcPublication, State
from aeron_numba.driver.network_conductor import NetworkConductor
from aeron_numba.driver.publication_params import PublicationParams
from aeron_numba.driver.system_counters import SystemCounters
from aeron_numba.driver import uri_params as up
from aeron_numba.driver.udp_channel import UdpChannel

# What the driver does, for a user to follow (-v / AERON_LOG_LEVEL): commands and timeouts, never the data path.
log = logging.getLogger("aeron_numba.driver")

PUBLICATIONS_DIR = "publications"
IPC_SOURCE_IDENTITY = "aeron:ipc"
NULL_CHANNEL_STATUS_ID = -1
#: How often the conductor moves its IPC publications' limits while compiled network cycles hold its thread.
IPC_LIMIT_INTERVAL_NS = 100_000
# Settings of the endpoint, not of one destination: a destination naming them is refused (Aeron's list).
INVALID_DESTINATION_PARAMS = (cu.MTU_LENGTH_PARAM, "rcv-wnd", "so-rcvbuf", "so-sndbuf", "response-correlation-id")


@dataclass
class ClientSession:
    client_id: int
    heartbeat_counter_id: int
    time_of_last_keepalive_ms: int


@dataclass
class PublicationLink:
    """One client's reference to a publication (registration id = the add command's correlation id)."""

    registration_id: int
    client_id: int
    publication: IpcPublication


@dataclass
class SubscriptionLink:
    registration_id: int
    client_id: int
    stream_id: int
    channel: str
    images: dict[int, int] = field(default_factory=dict)  # publication registration id -> sub-pos counter id
    tether: bool = True  # untethered (tether=false) subscribers may be dropped when they fall behind (§15.2)
    untethered_window_limit_timeout_ns: int = 0
    untethered_resting_timeout_ns: int = 0
    endpoint: object = None  # the ReceiveChannelEndpoint of an aeron:udp subscription
    spy_channel: object = None  # the UdpChannel an aeron-spy: subscription spies on
    is_ipc: bool = False
    session_id: int | None = None  # session-id= on the channel: only that session's images

    def wants_session(self, session_id: int) -> bool:
        """No ``session-id`` on the channel, or this one: whose images the subscription gets (IPC and UDP alike)."""
        return self.session_id is None or self.session_id == session_id

    def matches_ipc_publication(self, publication: IpcPublication) -> bool:
        """Aeron's match: an ``aeron:ipc`` subscription on the stream, with no session id or the publication's."""
        return self.is_ipc and self.stream_id == publication.stream_id and self.wants_session(publication.session_id)

    def matches_network_publication(self, publication) -> bool:
        """Aeron's spy match: a spy on the publication's stream and either the channel tag of its endpoint (any
        session, as the C driver) or its channel (same canonical form) with no session id or the publication's."""
        if self.spy_channel is None or self.stream_id != publication.stream_id:
            return False
        if self.spy_channel.tag is not None and self.spy_channel.tag == publication.channel.tag:
            return True
        return self.wants_session(publication.session_id) and \
            self.spy_channel.canonical_form == publication.channel.canonical_form


@dataclass
class CounterLink:
    registration_id: int
    client_id: int
    counter_id: int


class DriverConductor:
    """Agent: ``do_work()`` returns the work done; ``on_close()`` releases every resource."""

    #: Commands past a batch are at the to-driver head its watch names; its timers are in its deadline.
    names_work_left = True

    def __init__(self, context: DriverContext, cnc_file: CncFile, *, nano_clock=time.monotonic_ns, epoch_clock=None,
                 loss_report: LossReport | None = None):
        self.ctx = context
        self.loss_report = loss_report  # loss-report.dat, written by the receiver's images
        self.cnc = cnc_file
        self.nano_clock = nano_clock
        self.epoch_clock = epoch_clock or (lambda: time.time_ns() // 1_000_000)
        self.to_driver = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        self.client_proxy = ClientProxy(BroadcastTransmitter(cnc_file.to_clients_buffer))
        self.counters = ck.CountersManager(
            cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer,
            free_to_reuse_timeout_ms=context.counter_free_to_reuse_timeout_ns // 1_000_000,
            epoch_clock=self.epoch_clock,
        )
        self.error_log = DistinctErrorLog(cnc_file.error_log_buffer, epoch_clock=self.epoch_clock)
        self.system_counters = SystemCounters(cnc_file.counters_values_buffer)
        self.doorbell_counter_id: int | None = None  # allocated by MediaDriver after the system counters
        self.doorbell_wake_fd = -1  # MediaDriver's wake socket for the doorbell (kernels/idle_wait.open_wake_socket)
        self.publications_dir = Path(context.aeron_dir) / PUBLICATIONS_DIR
        self.clients: dict[int, ClientSession] = {}
        self.publications: list[IpcPublication] = []
        self.publication_links: list[PublicationLink] = []
        self.subscriptions: list[SubscriptionLink] = []
        self.counter_links: list[CounterLink] = []
        self.next_session_id = random.randint(-(2**31), 2**31 - 1)
        self.now_ns = self.time_of_last_timer_ns = self.nano_clock()  # now_ns: this duty cycle's time
        self.terminate_requested = False
        self._error_lock = threading.Lock()
        self.network = NetworkConductor(self)  # aeron:udp: endpoints, network publications, images
        self.command_adapter = ClientCommandAdapter(
            self.to_driver, self, self.client_proxy, self._record_error, self.system_counters,
            blocked_timeout_ns=context.client_liveness_timeout_ns, now_ns=self.now_ns)

    # ------------------------------------------------------------------------------------ agent contract
    def role_name(self) -> str:
        return "driver-conductor"

    def on_start(self) -> None:
        self.publications_dir.mkdir(parents=True, exist_ok=True)
        self._heartbeat()

    def do_work(self) -> int:
        now_ns = self.now_ns = self.nano_clock()
        work = self.command_adapter.receive()
        for publication in self.publications:
            work += publication.update_pub_pos_and_pub_lmt()
        work += self.network.do_work()
        if now_ns - self.time_of_last_timer_ns >= self.ctx.timer_interval_ns:
            self.time_of_last_timer_ns = now_ns
            work += self.on_timer(now_ns)
        return work

    def add_idle_watch(self, watch) -> bool:
        """What the next idle cycle depends on (``agent/idle_watch.py``): a command arriving, an IPC publication's
        tail or subscriber positions moving, and the next timer. False while the network conductor has sockets
        to poll, or when the clock is not the monotonic clock a compiled wait reads."""
        if self.nano_clock is not time.monotonic_ns or not self.network.add_idle_watch(watch):
            return False
        if self.doorbell_counter_id is not None:  # the driver rings it too: its receiver feeds the node's images
            watch.use_doorbell(self.counters.values_buffer, self.doorbell_counter_id, self.doorbell_wake_fd)
        self.command_adapter.add_idle_watch(watch)
        for publication in self.publications:
            publication.add_idle_watch(watch)
        watch.run_by(self.time_of_last_timer_ns + self.ctx.timer_interval_ns)
        return True

    def add_work_watch(self, watch) -> None:
        """When the conductor must run while the compiled network cycles hold its thread (SHARED mode): a command
        arriving, its timer, and every ``IPC_LIMIT_INTERVAL_NS`` while it has IPC publications, whose limits move
        with their subscribers (watching their tails instead would hand the thread back for every message)."""
        self.command_adapter.add_idle_watch(watch)
        watch.run_by(self.time_of_last_timer_ns + self.ctx.timer_interval_ns)
        if self.publications:
            watch.run_by(self.nano_clock() + IPC_LIMIT_INTERVAL_NS)

    def on_close(self) -> None:
        for publication in list(self.publications):
            self._delete_publication(publication)
        self.network.on_close()

    # --------------------------------------------------------------------------------------- duty cycle
    def _heartbeat(self) -> None:
        """Clients take a heartbeat older than their driver_timeout_ms (10 s) for a dead driver: once per timer
        interval (1 s by default, Aeron's) is fresh enough, and is what Aeron writes."""
        self.to_driver.set_consumer_heartbeat_time(self.epoch_clock())

    def _record_error(self, error: BaseException | str) -> None:
        """Also the error handler of the sender's and receiver's runners, on their threads: one at a time."""
        with self._error_lock:
            self.error_log.record(error)
        self.system_counters.increment(cl.ERRORS)
        log.warning("error recorded in the error log: %s", error)

    # ------------------------------------------------------------------------------------------ clients
    def on_client_command(self, client_id: int) -> ClientSession:
        """Any command from a client proves it is alive; the first one allocates its heartbeat counter (§11.5)."""
        now_ms = self.epoch_clock()
        session = self.clients.get(client_id)
        if session is None:
            counter_id = self.counters.allocate(
                ck.heartbeat_counter_label(client_id), cl.CLIENT_HEARTBEAT_TYPE_ID,
                ck.heartbeat_counter_key(client_id), registration_id=client_id, owner_id=client_id,
            )
            session = ClientSession(client_id, counter_id, now_ms)
            self.clients[client_id] = session
        session.time_of_last_keepalive_ms = now_ms
        ck.set_counter_value(self.counters.values_buffer, session.heartbeat_counter_id, now_ms)
        return session

    def on_timer(self, now_ns: int) -> int:
        self._heartbeat()
        work = self._check_client_liveness() + self.command_adapter.check_for_blocked_commands(now_ns)
        work += self.network.on_timer(now_ns)
        for publication in list(self.publications):
            if publication.on_time_event(now_ns, self.system_counters):
                self._delete_publication(publication)
                work += 1
            elif publication.state is State.ACTIVE:
                for subscriber, change in publication.check_untethered_subscriptions(now_ns):
                    if change is ImageChange.UNAVAILABLE:
                        self._send_unavailable_image(publication, subscriber.subscription)
                    else:
                        self._send_available_image(publication, subscriber.subscription, subscriber.counter_id)
                    work += 1
            elif publication.state is State.LINGER:
                for subscriber in publication.subscribers:
                    self._send_unavailable_image(publication, subscriber.subscription)
        return work

    def _send_unavailable_image(self, publication: IpcPublication, link: SubscriptionLink) -> None:
        self.client_proxy.on_unavailable_image(
            correlation_id=publication.registration_id, subscription_registration_id=link.registration_id,
            stream_id=publication.stream_id, channel=link.channel)

    def _send_available_image(self, publication: IpcPublication, link: SubscriptionLink, counter_id: int) -> None:
        self.client_proxy.on_available_image(
            correlation_id=publication.registration_id, stream_id=publication.stream_id,
            session_id=publication.session_id, subscription_registration_id=link.registration_id,
            subscriber_position_id=counter_id, log_file_name=publication.log_file_name,
            source_identity=IPC_SOURCE_IDENTITY)

    def _check_client_liveness(self) -> int:
        now_ms = self.epoch_clock()
        timeout_ms = self.ctx.client_liveness_timeout_ns // 1_000_000
        work = 0
        for session in list(self.clients.values()):
            # The client writes epoch ms into its heartbeat counter every keepalive interval.
            heartbeat_ms = max(
                session.time_of_last_keepalive_ms,
                int(ck.get_counter_value(self.counters.values_buffer, session.heartbeat_counter_id)),
            )
            if now_ms > heartbeat_ms + timeout_ms:
                log.info("client %d timed out (no keepalive for %d ms): releasing its resources", session.client_id,
                         now_ms - heartbeat_ms)
                self.system_counters.increment(cl.CLIENT_TIMEOUTS)
                self.client_proxy.on_client_timeout(session.client_id)
                self._release_client(session.client_id)
                work += 1
        return work

    def _release_client(self, client_id: int) -> None:
        """Free everything a client owns (CLIENT_CLOSE or liveness timeout)."""
        for link in [link for link in self.publication_links if link.client_id == client_id]:
            self._unlink_publication(link)
        for link in [link for link in self.subscriptions if link.client_id == client_id]:
            self._remove_subscription_link(link)
        for link in [link for link in self.counter_links if link.client_id == client_id]:
            self.counter_links.remove(link)
            self.counters.free(link.counter_id)
            self.client_proxy.on_unavailable_counter(link.registration_id, link.counter_id)
        session = self.clients.pop(client_id, None)
        if session is not None:
            self.counters.free(session.heartbeat_counter_id)

    def on_client_keepalive(self, client_id: int, correlation_id: int) -> None:
        pass  # on_client_command already recorded the keepalive

    def on_client_close(self, client_id: int, correlation_id: int) -> None:
        log.info("client %d closed", client_id)
        self._release_client(client_id)

    # ------------------------------------------------------------------------------------- publications
    def _publication_channel(self, channel: str) -> cu.ChannelUri:
        uri = cu.ChannelUri.parse(channel)
        if uri.is_spy:
            raise ControlProtocolError(cp.INVALID_CHANNEL, f"invalid URI scheme or transport: {channel}"
                                                           f" ({cu.SPY_QUALIFIER}: is for subscriptions only)")
        return uri

    def _allocate_session_id(self) -> int:
        low, high = self.ctx.publication_reserved_session_id_low, self.ctx.publication_reserved_session_id_high
        session_id = self.next_session_id
        if low <= session_id <= high:
            session_id = high + 1
        self.next_session_id = ((session_id + 1 + 2**31) % 2**32) - 2**31
        return session_id

    def on_add_publication(self, client_id: int, correlation_id: int, stream_id: int, channel: str) -> None:
        self._add_publication(client_id, correlation_id, stream_id, channel, exclusive=False)
        log.info("publication %d added by client %d: %s stream %d", correlation_id, client_id, channel, stream_id)

    def on_add_exclusive_publication(self, client_id: int, correlation_id: int, stream_id: int, channel: str) -> None:
        self._add_publication(client_id, correlation_id, stream_id, channel, exclusive=True)
        log.info("exclusive publication %d added by client %d: %s stream %d", correlation_id, client_id, channel,
                 stream_id)

    def _add_publication(self, client_id: int, correlation_id: int, stream_id: int, channel: str,
                         exclusive: bool) -> None:
        uri = self._publication_channel(channel)
        if not uri.is_ipc:
            self._add_network_publication(client_id, correlation_id, stream_id, channel, exclusive)
            return
        params = PublicationParams.from_uri(uri, self.ctx, exclusive,
                                            find_publication_by_tag=self.network.find_publication_by_tag)
        same_stream = [p for p in self.publications
                       if p.stream_id == stream_id and p.state in (State.ACTIVE, State.DRAINING)]
        shared = next((p for p in same_stream if not p.exclusive and p.state is State.ACTIVE), None)
        publication = params.existing_publication(shared, {p.session_id for p in same_stream}, exclusive, channel,
                                                  stream_id)
        if publication is None:
            publication = self._new_publication(client_id, correlation_id, stream_id, channel, params, exclusive)
        else:
            publication.ref_count += 1
        link = PublicationLink(correlation_id, client_id, publication)
        self.publication_links.append(link)
        self._send_publication_ready(correlation_id, publication, NULL_CHANNEL_STATUS_ID, exclusive)
        if publication.ref_count == 1:
            for subscription in self.subscriptions:
                if subscription.matches_ipc_publication(publication):
                    self._link_image(subscription, publication)

    def _add_network_publication(self, client_id: int, correlation_id: int, stream_id: int, channel_uri: str,
                                 exclusive: bool) -> None:
        channel = UdpChannel.parse(channel_uri)
        params = PublicationParams.from_uri(channel.uri, self.ctx, exclusive, network=True,
                                            find_publication_by_tag=self.network.find_publication_by_tag)
        channel.check_for_publication()
        same_endpoint = self.network.publications_of(channel, stream_id)
        shared = next((p for p in same_endpoint if not p.exclusive and p.state is State.ACTIVE), None)
        publication = params.existing_publication(shared, {p.session_id for p in same_endpoint}, exclusive,
                                                  channel_uri, stream_id, network=True)
        if publication is not None:
            publication.ref_count += 1
        else:
            session_id = params.session_id if params.session_id is not None else self._allocate_session_id()
            path = self.publications_dir / f"{correlation_id}.logbuffer"
            self._check_storage_space(lb.compute_log_length(params.term_length, self.ctx.file_page_size))
            publication = self.network.new_publication(correlation_id, client_id, stream_id, channel, params,
                                                       exclusive, session_id, path, self.now_ns)
        self.publication_links.append(PublicationLink(correlation_id, client_id, publication))
        self._send_publication_ready(correlation_id, publication, publication.endpoint.status_counter_id, exclusive)
        if publication.ref_count == 1:
            self.network.link_spies(publication, self.subscriptions)

    def _send_publication_ready(self, correlation_id: int, publication, channel_status_indicator_id: int,
                                exclusive: bool) -> None:
        self.client_proxy.on_publication_ready(
            correlation_id=correlation_id, registration_id=publication.registration_id,
            stream_id=publication.stream_id, session_id=publication.session_id,
            log_file_name=publication.log_file_name, position_limit_counter_id=publication.pub_lmt_counter_id,
            channel_status_indicator_id=channel_status_indicator_id, is_exclusive=exclusive)

    def _check_storage_space(self, log_length: int) -> None:
        """Refuse a log the file system cannot hold, as Aeron does, instead of failing on first touch."""
        if not self.ctx.perform_storage_checks:
            return
        stats = os.statvfs(self.publications_dir)
        usable = stats.f_bavail * stats.f_frsize
        if usable < log_length:
            raise ControlProtocolError(
                cp.STORAGE_SPACE,
                f"insufficient usable storage for new log of length={log_length} usable={usable} in "
                f"{self.publications_dir}")

    def _new_publication(self, client_id: int, registration_id: int, stream_id: int, channel: str,
                         params: "PublicationParams", exclusive: bool) -> IpcPublication:
        session_id = params.session_id if params.session_id is not None else self._allocate_session_id()
        initial_term_id = params.initial_term_id if params.initial_term_id is not None else random.randint(-(2**31), 2**31 - 1)
        path = self.publications_dir / f"{registration_id}.logbuffer"
        self._check_storage_space(lb.compute_log_length(params.term_length, self.ctx.file_page_size))
        log = LogBuffers.create(
            path, term_length=params.term_length, initial_term_id=initial_term_id, session_id=session_id,
            stream_id=stream_id, correlation_id=registration_id, mtu_length=params.mtu_length,
            page_size=self.ctx.file_page_size, term_id=params.term_id, term_offset=params.term_offset,
            linger_timeout_ns=params.linger_ns, pre_touch=self.ctx.pre_touch_mapped_memory,
            entity_tag=params.log_entity_tag,
        )
        key = ck.stream_counter_key(registration_id, session_id, stream_id, channel)
        counter_ids = []
        try:
            # The C driver's order, pub-pos then pub-lmt; only pub-lmt names the client as its owner.
            for name, type_id, owner_id in ((cl.PUBLISHER_POS_NAME, cl.PUBLISHER_POS_TYPE_ID, cl.DEFAULT_OWNER_ID),
                                            (cl.PUBLISHER_LIMIT_NAME, cl.PUBLISHER_LIMIT_TYPE_ID, client_id)):
                label = ck.stream_counter_label(name, registration_id, session_id, stream_id, channel)
                counter_ids.append(self.counters.allocate(
                    label, type_id, key, registration_id=registration_id, owner_id=owner_id))
        except CountersFullError:
            for counter_id in counter_ids:
                self.counters.free(counter_id)
            log.close()
            path.unlink(missing_ok=True)
            raise
        window = params.term_window_length
        publication = IpcPublication(
            registration_id=registration_id, session_id=session_id, stream_id=stream_id,
            channel=channel, exclusive=exclusive, log=log, pub_pos_counter_id=counter_ids[0],
            pub_lmt_counter_id=counter_ids[1], term_window_length=window,
            unblock_timeout_ns=self.ctx.publication_unblock_timeout_ns,
            values_buffer=self.counters.values_buffer, now_ns=self.now_ns,
        )
        self.publications.append(publication)
        self.system_counters.increment(cl.BYTES_CURRENTLY_MAPPED, log.buffer.size)
        return publication

    def _link_image(self, subscription: SubscriptionLink, publication: IpcPublication) -> None:
        """A subscriber joins at the publication's join position (the slowest current subscriber's, as Aeron)."""
        join_position = publication.join_position()
        label = ck.subscriber_position_label(
            subscription.registration_id, publication.session_id, publication.stream_id, subscription.channel,
            join_position,
        )
        key = ck.stream_counter_key(
            subscription.registration_id, publication.session_id, publication.stream_id, subscription.channel
        )
        counter_id = self.counters.allocate(
            label, cl.SUBSCRIBER_POSITION_TYPE_ID, key, registration_id=subscription.registration_id,
            owner_id=subscription.client_id, reference_id=publication.registration_id,
        )
        publication.add_subscriber(subscription, counter_id, join_position, self.now_ns)
        subscription.images[publication.registration_id] = counter_id
        self._send_available_image(publication, subscription, counter_id)

    def on_remove_publication(self, client_id: int, correlation_id: int, registration_id: int) -> None:
        link = self._find_publication_link(client_id, registration_id)
        if link is None:
            raise ControlProtocolError(
                cp.UNKNOWN_PUBLICATION, f"unknown publication client_id={client_id} registration_id={registration_id}"
            )
        self._unlink_publication(link)
        self.client_proxy.on_operation_succeeded(correlation_id)
        log.info("publication %d removed by client %d", registration_id, client_id)

    def on_add_destination(self, client_id: int, correlation_id: int, registration_correlation_id: int,
                           channel: str) -> None:
        endpoint, address = self._manual_destination(client_id, registration_correlation_id, channel)
        self.network.add_send_destination(endpoint, address, self.now_ns)
        self.client_proxy.on_operation_succeeded(correlation_id)

    def on_remove_destination(self, client_id: int, correlation_id: int, registration_correlation_id: int,
                              channel: str) -> None:
        endpoint, address = self._manual_destination(client_id, registration_correlation_id, channel)
        if not self.network.remove_send_destination(endpoint, address):
            raise ControlProtocolError(cp.GENERIC_ERROR,
                                       f"destination {channel!r} was not added to publication"
                                       f" registration_id={registration_correlation_id}")
        self.client_proxy.on_operation_succeeded(correlation_id)

    def _manual_destination(self, client_id: int, registration_id: int, channel: str):
        """The send endpoint of a ``control-mode=manual`` publication, and the address a destination names."""
        link = self._find_publication_link(client_id, registration_id)
        if link is None:
            raise ControlProtocolError(
                cp.UNKNOWN_PUBLICATION, f"unknown publication client_id={client_id} registration_id={registration_id}")
        endpoint = getattr(link.publication, "endpoint", None)
        if endpoint is None or not endpoint.channel.is_manual_destination_control:
            raise ControlProtocolError(
                cp.INVALID_CHANNEL, f"publication registration_id={registration_id} channel"
                f" '{getattr(endpoint, 'channel', 'aeron:ipc')}' does not allow manual control of destinations"
                " (control-mode=manual)")
        destination = UdpChannel.parse(channel)
        if destination.remote_data is None:
            raise ControlProtocolError(cp.INVALID_CHANNEL, f"destination '{channel}' needs endpoint=host:port")
        if destination.remote_data[1] == 0:
            raise ChannelParameterError(f"{cu.ENDPOINT_PARAM} has port=0 for send destination: channel={channel}")
        return endpoint, destination.remote_data

    def _find_publication_link(self, client_id: int, registration_id: int) -> PublicationLink | None:
        # Clients may name their own add's correlation id or the (shared) publication registration id.
        for link in self.publication_links:
            if link.client_id == client_id and link.registration_id == registration_id:
                return link
        for link in self.publication_links:
            if link.client_id == client_id and link.publication.registration_id == registration_id:
                return link
        return None

    def _unlink_publication(self, link: PublicationLink) -> None:
        self.publication_links.remove(link)
        publication = link.publication
        publication.ref_count -= 1
        if publication.ref_count == 0 and publication.state is State.ACTIVE:
            publication.close_by_clients()

    def _delete_publication(self, publication: IpcPublication) -> None:
        """DONE: free the counters (sub-pos included), unmap and delete the log file (§15)."""
        for subscriber in list(publication.subscribers):
            subscriber.subscription.images.pop(publication.registration_id, None)
            self.counters.free(subscriber.counter_id)
        publication.subscribers.clear()
        for counter_id in (publication.pub_lmt_counter_id, publication.pub_pos_counter_id):
            self.counters.free(counter_id)
        self._close_log(publication.log)
        self.publications.remove(publication)

    def _close_log(self, log: LogBuffers) -> None:
        """Unmap and delete a publication's or image's log file."""
        path = log.path
        self.system_counters.increment(cl.BYTES_CURRENTLY_MAPPED, -log.buffer.size)
        try:
            log.close()
        except BufferError as exc:
            self._record_error(exc)
            self.system_counters.increment(cl.FAILED_FREE_LOG_BUFFERS)
        path.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------ subscriptions
    def on_add_subscription(self, client_id: int, correlation_id: int, registration_correlation_id: int,
                            stream_id: int, channel: str) -> None:
        uri = cu.ChannelUri.parse(channel)
        link = self._subscription_link(uri, correlation_id, client_id, stream_id, channel)
        if not uri.is_ipc and not uri.is_spy:
            endpoint = self.network.add_subscription(link, UdpChannel.parse(channel))
            self.subscriptions.append(link)
            self.client_proxy.on_subscription_ready(correlation_id, endpoint.status_counter_id)
            self.network.link_existing_images(link)
        else:
            self.subscriptions.append(link)
            self.client_proxy.on_subscription_ready(correlation_id, NULL_CHANNEL_STATUS_ID)
            self._link_local_images(link)
        log.info("subscription %d added by client %d: %s stream %d", correlation_id, client_id, channel, stream_id)

    def _subscription_link(self, uri: cu.ChannelUri, registration_id: int, client_id: int, stream_id: int,
                           channel: str) -> SubscriptionLink:
        link = SubscriptionLink(
            registration_id, client_id, stream_id, channel,
            tether=up.bool_param(uri, cu.TETHER_PARAM, True),
            untethered_window_limit_timeout_ns=_duration_param(
                uri, cu.UNTETHERED_WINDOW_LIMIT_TIMEOUT_PARAM, self.ctx.untethered_window_limit_timeout_ns),
            untethered_resting_timeout_ns=_duration_param(
                uri, cu.UNTETHERED_RESTING_TIMEOUT_PARAM, self.ctx.untethered_resting_timeout_ns),
            is_ipc=uri.is_ipc, session_id=up.int32_param(uri, cu.SESSION_ID_PARAM),
        )
        up.check_subscription_flags(uri)  # refused here, as Aeron does, not at the image's SETUP
        if uri.is_spy:
            link.spy_channel = self.network.spy_channel(channel)
        return link

    def _link_local_images(self, link: SubscriptionLink) -> None:
        """An image for an IPC subscription of every matching IPC publication, for a spy of every matching network
        publication."""
        if link.spy_channel is not None:
            self.network.link_spy(link)
            return
        for publication in self.publications:
            if publication.is_accepting_subscriptions() and link.matches_ipc_publication(publication):
                self._link_image(link, publication)

    def on_remove_subscription(self, client_id: int, correlation_id: int, registration_id: int) -> None:
        """Removes every link with the id: the subscription and, for an MDS one, its IPC and spy destinations."""
        links = [s for s in self.subscriptions if s.registration_id == registration_id and s.client_id == client_id]
        if not links:
            raise ControlProtocolError(
                cp.UNKNOWN_SUBSCRIPTION, f"unknown subscription client_id={client_id} registration_id={registration_id}"
            )
        for link in links:
            self._remove_subscription_link(link)
        self.client_proxy.on_operation_succeeded(correlation_id)
        log.info("subscription %d removed by client %d", registration_id, client_id)

    def _remove_subscription_link(self, link: SubscriptionLink) -> None:
        self.subscriptions.remove(link)
        if link.endpoint is not None or link.spy_channel is not None:
            self.network.remove_subscription(link)
            link.images.clear()
            return
        for publication in self.publications:
            subscriber = publication.remove_subscriber(link)
            if subscriber is not None:
                self.counters.free(subscriber.counter_id)
        link.images.clear()

    def on_add_rcv_destination(self, client_id: int, correlation_id: int, registration_correlation_id: int,
                               channel: str) -> None:
        """A multi-destination subscription (``control-mode=manual``) receives on one more socket too; an
        ``aeron:ipc`` or ``aeron-spy:`` destination links it to local publications as well, as Aeron's driver
        does (a link of its own, with the subscription's registration id and stream)."""
        uri = cu.ChannelUri.parse(channel)
        if uri.is_ipc or uri.is_spy:
            mds = self._mds_subscription(client_id, registration_correlation_id)
            link = self._subscription_link(uri, mds.registration_id, mds.client_id, mds.stream_id, channel)
            self.subscriptions.append(link)
            self.client_proxy.on_operation_succeeded(correlation_id)
            self._link_local_images(link)
            return
        destination = self._rcv_destination_channel(channel)
        link = self._mds_subscription(client_id, registration_correlation_id)
        _check_destination_params(destination.uri, channel)
        self.network.add_rcv_destination(link, destination)
        self.client_proxy.on_operation_succeeded(correlation_id)

    def on_remove_rcv_destination(self, client_id: int, correlation_id: int, registration_correlation_id: int,
                                  channel: str) -> None:
        """Stop receiving on a destination; a UDP one that was never added is not an error (Aeron answers OK too),
        an IPC or spy one is an unknown subscription."""
        uri = cu.ChannelUri.parse(channel)
        if uri.is_ipc or uri.is_spy:
            self._remove_local_destination(client_id, correlation_id, registration_correlation_id, channel)
            return
        destination = self._rcv_destination_channel(channel, to_add=False)
        link = self._mds_subscription(client_id, registration_correlation_id)
        self.network.remove_rcv_destination(link, destination)
        self.client_proxy.on_operation_succeeded(correlation_id)

    def _remove_local_destination(self, client_id: int, correlation_id: int, registration_id: int,
                                  channel: str) -> None:
        link = next((s for s in self.subscriptions if s.registration_id == registration_id and s.endpoint is None
                     and s.channel == channel), None)
        if link is None:
            raise ControlProtocolError(
                cp.UNKNOWN_SUBSCRIPTION, f"unknown subscription client_id={client_id} registration_id={registration_id}")
        images = list(link.images)  # the client keeps the subscription: each of these images goes from it
        self._remove_subscription_link(link)
        self.client_proxy.on_operation_succeeded(correlation_id)
        for image_correlation_id in images:
            self.client_proxy.on_unavailable_image(
                correlation_id=image_correlation_id, subscription_registration_id=registration_id,
                stream_id=link.stream_id, channel=channel)

    def _rcv_destination_channel(self, channel: str, to_add: bool = True) -> UdpChannel:
        destination = UdpChannel.parse(channel)
        if to_add and destination.remote_data is None:
            raise ControlProtocolError(
                cp.INVALID_CHANNEL, f"destination '{channel}' needs {cu.ENDPOINT_PARAM}=host:port to receive on")
        return destination

    def _mds_subscription(self, client_id: int, registration_id: int) -> SubscriptionLink:
        """The UDP subscription ``registration_id`` names (any client's, as Aeron finds it), if it is MDS."""
        link = next((s for s in self.subscriptions
                     if s.registration_id == registration_id and s.endpoint is not None), None)
        if link is None:
            raise ControlProtocolError(
                cp.UNKNOWN_SUBSCRIPTION, f"unknown subscription client_id={client_id} registration_id={registration_id}")
        if not link.endpoint.is_multi_destination:
            raise ControlProtocolError(cp.INVALID_CHANNEL, "channel does not allow manual control")
        return link

    # ----------------------------------------------------------------------------------------- counters
    def on_add_counter(self, client_id: int, correlation_id: int, type_id: int, key: bytes, label: str) -> None:
        counter_id = self.counters.allocate(label, type_id, key, registration_id=correlation_id, owner_id=client_id)
        self.counter_links.append(CounterLink(correlation_id, client_id, counter_id))
        self.client_proxy.on_counter_ready(correlation_id, counter_id)

    def on_remove_counter(self, client_id: int, correlation_id: int, registration_id: int) -> None:
        link = next((c for c in self.counter_links
                     if c.registration_id == registration_id and c.client_id == client_id), None)
        if link is None:
            raise ControlProtocolError(
                cp.UNKNOWN_COUNTER, f"unknown counter client_id={client_id} registration_id={registration_id}"
            )
        self.counter_links.remove(link)
        self.counters.free(link.counter_id)
        self.client_proxy.on_operation_succeeded(correlation_id)
        self.client_proxy.on_unavailable_counter(link.registration_id, link.counter_id)

    def on_terminate_driver(self, client_id: int, correlation_id: int, token: bytes) -> None:
        if not self.ctx.allow_terminate_driver:
            raise ControlProtocolError(
                cp.GENERIC_ERROR, "terminate driver refused: the termination validator denies it"
                " (set AERON_DRIVER_TERMINATION_VALIDATOR_ALLOW=true to allow)"
            )
        self.terminate_requested = True


def _check_destination_params(uri: cu.ChannelUri, channel: str) -> None:
    for name in INVALID_DESTINATION_PARAMS:
        if uri.get(name) is not None:
            raise ControlProtocolError(
                cp.INVALID_CHANNEL, f"destinations must not contain the key: {name} channel={channel}")


def _duration_param(uri: cu.ChannelUri, name: str, default_ns: int) -> int:
    """Any duration the C driver takes (0 included: the untethered state changes at the next timer)."""
    duration_ns = up.duration_param(uri, name)
    return default_ns if duration_ns is None else duration_ns
