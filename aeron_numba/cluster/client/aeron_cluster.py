"""``AeronCluster``: a client's session with a cluster (Aeron's ``io.aeron.cluster.client.AeronCluster``).

Made by ``AeronCluster.connect(ctx)`` (``async_connect.py`` has the steps: find the leader, connect, answer a
challenge, follow a REDIRECT). Once connected:

* ``offer`` / ``try_claim`` put the 32-byte SessionMessageHeader (this session, the current leadership term) in
  front of the application's message on the ingress publication to the leader and return Aeron's publication
  status codes (``IngressSessionDecorator``);
* ``poll_egress`` reads the egress (``EgressAdapter``) and hands this session's replies, session events, new
  leader notices and admin responses to the ``EgressListener``; it also drives the session's state;
* ``send_keep_alive``, ``send_admin_request_to_take_a_snapshot`` and ``close`` (a SessionCloseRequest) send the
  session's control messages;
* ``compiled()`` gives ``@njit`` code an ``IngressHandle`` to offer with the header (``ingress_handle.py``).

Following the leader. Aeron 1.48's client closes and re-adds its ingress publication, blocking, inside the
NewLeaderEvent callback, and stays open forever when no leader comes. We follow later Aerons' state machine
instead, so that an election never blocks a duty cycle and a client whose cluster is gone ends:

* CONNECTED: offers go to the leader. An offer or keep-alive answered NOT_CONNECTED (nobody listens at the
  leader's endpoint any longer), or the leader's egress image closing, means the leader is gone:
  AWAIT_NEW_LEADER, for up to ``new_leader_timeout_ns``; the ingress publication is closed when the egress image
  goes (its leader is dead).
* A NewLeaderEvent (in any state but CLOSED): the term, leader and session header are updated, the old ingress
  publication closed and one to the new leader's endpoint added without waiting (its entry in the event's
  ingress endpoints, or the ingress channel when no endpoints are configured); the listener is told;
  AWAIT_NEW_LEADER_CONNECTION, for up to the message timeout. Once that publication is connected (or an offer
  on it succeeded): CONNECTED.
* Offers in the AWAIT states return NOT_CONNECTED (or what the new publication answers), never raise.
* A SessionEvent CLOSED (the cluster closed the session: timeout, a service's action), the ingress publication
  reaching MAX_POSITION_EXCEEDED, or a deadline of an AWAIT state passing: PENDING_CLOSE, and CLOSED at the end
  of that ``poll_egress`` (resources released there, not inside the egress callback). Any offer or send on a
  CLOSED (or PENDING_CLOSE) session raises ``ClusterClientClosedError`` naming why it closed.

Time comes from ``nano_clock`` (injectable), as every conductor's here. Not thread-safe: one thread uses an
``AeronCluster``, as in Aeron.
"""

from __future__ import annotations

import enum
import logging
import time

from aeron_numba.client import BufferClaim
from aeron_numba.cluster.client.async_connect import FRAGMENT_LIMIT, AsyncConnect, ingress_channel_for
from aeron_numba.cluster.client.egress_adapter import EgressAdapter
from aeron_numba.cluster.client.egress_listener import AdminRequestType, EgressListener, EventCode
from aeron_numba.cluster.client.errors import ClusterClientClosedError
from aeron_numba.cluster.client.ingress_session_decorator import IngressSessionDecorator
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.context import AeronClusterContext, parse_ingress_endpoints
from aeron_numba.codecs.cluster_messages import SESSION_HEADER_LENGTH
from aeron_numba.codecs.cluster_proxies import IngressProxy
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.publication_status import CLOSED, MAX_POSITION_EXCEEDED, NOT_CONNECTED

log = logging.getLogger(__name__)

#: Offers of a control message (keep-alive, admin request, close) before the send reports failure (Aeron's
#: AeronCluster.SEND_ATTEMPTS).
SEND_ATTEMPTS = 3
_CONNECT_IDLE_S = 0.001


class State(enum.Enum):
    """The session's state as the client sees it (later Aerons' ``AeronCluster.State``)."""

    CONNECTED = 0
    AWAIT_NEW_LEADER = 1
    AWAIT_NEW_LEADER_CONNECTION = 2
    PENDING_CLOSE = 3
    CLOSED = 4


class _EgressBridge(EgressListener):
    """Between the egress adapter and the application's listener: the session's own reactions first (a new
    leader, the session closed), then the application is told."""

    def __init__(self, cluster: "AeronCluster", listener):
        self.cluster = cluster
        self.listener = listener

    def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header) -> None:
        self.listener.on_message(cluster_session_id, timestamp, buffer, offset, length, header)

    def on_session_event(self, correlation_id, cluster_session_id, leadership_term_id, leader_member_id, code,
                         detail) -> None:
        if code == EventCode.CLOSED:
            self.cluster._pending_close(f"closed by the cluster: {detail or 'no reason given'}")
        self.listener.on_session_event(correlation_id, cluster_session_id, leadership_term_id, leader_member_id,
                                       code, detail)

    def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints) -> None:
        cluster = self.cluster
        cluster.egress_image = cluster._egress_adapter.egress_image
        cluster.on_new_leader(cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints)

    def on_admin_response(self, cluster_session_id, correlation_id, request_type, response_code, message, payload,
                          payload_offset, payload_length) -> None:
        self.listener.on_admin_response(cluster_session_id, correlation_id, request_type, response_code, message,
                                        payload, payload_offset, payload_length)


class AeronCluster:
    """A connected session with a cluster; see the module docstring."""

    SESSION_HEADER_LENGTH = SESSION_HEADER_LENGTH
    State = State

    def __init__(self, ctx: AeronClusterContext, aeron, publication, subscription, egress_image,
                 member_endpoints: dict[int, str], cluster_session_id: int, leadership_term_id: int,
                 leader_member_id: int, egress_listener=None, *, nano_clock=time.monotonic_ns,
                 owns_aeron: bool = False):
        self._ctx = ctx
        self._aeron = aeron
        self._publication = publication
        self._subscription = subscription
        self.egress_image = egress_image
        self.member_endpoints = dict(member_endpoints)  # the members other than the leader: id -> endpoint
        self._cluster_session_id = cluster_session_id
        self._leadership_term_id = leadership_term_id
        self._leader_member_id = leader_member_id
        self._nano_clock = nano_clock
        self._owns_aeron = owns_aeron
        self._listener = egress_listener if egress_listener is not None else EgressListener()
        self._decorator = IngressSessionDecorator(cluster_session_id, leadership_term_id, timestamp=0)
        self._proxy = IngressProxy(publication, retry_attempts=1)
        self._egress_adapter = EgressAdapter(_EgressBridge(self, self._listener), cluster_session_id, subscription,
                                             FRAGMENT_LIMIT)
        self._state = State.CONNECTED
        self._state_deadline_ns = 0
        self._pending_registration_id = NULL_VALUE  # the new leader's ingress publication, while being added
        self._close_reason = ""

    # ------------------------------------------------------------------------------------------- connect
    @classmethod
    def connect(cls, ctx: AeronClusterContext, aeron=None, *, egress_listener=None, credentials_supplier=None,
                nano_clock=time.monotonic_ns) -> "AeronCluster":
        """Connect to the cluster of ``ctx`` (Aeron's ``AeronCluster.connect``): the ``AsyncConnect`` steps polled
        until done, idling while a step waits. ``aeron`` None: a client of ``ctx.aeron_dir``'s driver is made and
        closed with the session. Raises ``ClusterConnectTimeoutError`` when no leader answers within the message
        timeout, ``AuthenticationError`` / ``ClusterError`` when the cluster refuses (with its detail)."""
        async_connect = AsyncConnect(ctx, aeron, egress_listener=egress_listener,
                                     credentials_supplier=credentials_supplier, nano_clock=nano_clock)
        invoker = async_connect.aeron.conductor_agent_invoker
        try:
            state = async_connect.state
            while (cluster := async_connect.poll()) is None:
                if invoker is not None:
                    invoker.invoke()
                if async_connect.state is state:
                    time.sleep(_CONNECT_IDLE_S)
                state = async_connect.state
        except BaseException:
            async_connect.close()
            raise
        return cluster

    @classmethod
    def async_connect(cls, ctx: AeronClusterContext, aeron=None, *, egress_listener=None, credentials_supplier=None,
                      nano_clock=time.monotonic_ns) -> AsyncConnect:
        """The connect as steps for a duty cycle: call ``poll()`` once a cycle until it returns the
        ``AeronCluster``; ``close()`` it to give up."""
        return AsyncConnect(ctx, aeron, egress_listener=egress_listener, credentials_supplier=credentials_supplier,
                            nano_clock=nano_clock)

    # ------------------------------------------------------------------------------------------- facts
    @property
    def context(self) -> AeronClusterContext:
        return self._ctx

    @property
    def aeron(self):
        return self._aeron

    @property
    def cluster_session_id(self) -> int:
        return self._cluster_session_id

    @property
    def leadership_term_id(self) -> int:
        return self._leadership_term_id

    @property
    def leader_member_id(self) -> int:
        return self._leader_member_id

    @property
    def state(self) -> State:
        return self._state

    @property
    def is_closed(self) -> bool:
        return self._state is State.CLOSED

    @property
    def close_reason(self) -> str:
        """Why the session closed ("" while open)."""
        return self._close_reason

    @property
    def ingress_publication(self):
        """The publication to the leader (None while the new leader's is being added)."""
        return self._publication

    @property
    def egress_subscription(self):
        return self._subscription

    @property
    def egress_listener(self):
        return self._listener

    # ------------------------------------------------------------------------------------------- ingress
    def _check_open(self) -> None:
        if self._state is State.CLOSED or self._state is State.PENDING_CLOSE:
            raise ClusterClientClosedError(f"cluster session {self._cluster_session_id} is closed: "
                                           f"{self._close_reason}", self._close_reason)

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Offer ``buffer[offset:offset+length]`` (bytes-like; ``length`` None: to its end) behind the session
        header; returns the new ingress position or Aeron's status (NOT_CONNECTED while a new leader is awaited,
        BACK_PRESSURED, ADMIN_ACTION: retry). Raises ``ClusterClientClosedError`` once the session is closed."""
        self._check_open()
        publication = self._publication
        if publication is None:
            return NOT_CONNECTED
        result = self._decorator.offer(publication, buffer, offset, length)
        self._track_ingress_result(result)
        if result > 0:
            self._aeron.ring_doorbell()  # a sleeping driver sends it now, not at the end of its park
        return result

    def try_claim(self, length: int, buffer_claim: BufferClaim | None = None):
        """Claim a frame for a message of ``length`` bytes behind the session header, which is already written
        at the claim's start: write the message at ``buffer_claim.offset + SESSION_HEADER_LENGTH`` (or
        ``buffer_claim.put_bytes(data, AeronCluster.SESSION_HEADER_LENGTH)``), then ``commit()``. Returns the
        claim, or Aeron's status code as ``offer`` does."""
        self._check_open()
        publication = self._publication
        if publication is None:
            return NOT_CONNECTED
        result = publication.try_claim(length + SESSION_HEADER_LENGTH, buffer_claim)
        if isinstance(result, BufferClaim):
            result.put_bytes(self._decorator.header, 0)
            self._track_ingress_result(result.position)
        else:
            self._track_ingress_result(result)
        return result

    def compiled(self):
        """An ``IngressHandle`` for ``@njit`` code: ``handle.offer(buf, offset, length)`` and
        ``handle.try_claim(length)`` with the session header in front (``ingress_handle.py``). Bound to the current
        leader's publication: after a leader change its offers return CLOSED and a new handle is needed.
        Raises ``ClusterError`` while there is no leader's publication (a new leader awaited)."""
        from aeron_numba.cluster.client.ingress_handle import new_ingress_handle

        self._check_open()
        if self._publication is None:
            raise ClusterError(f"no ingress publication while in {self._state.name}: poll_egress until CONNECTED, "
                               f"then take a handle")
        return new_ingress_handle(self._publication.compiled(), self._decorator.header)

    def send_keep_alive(self) -> bool:
        """Send a SessionKeepAlive (a session idle longer than the cluster's session timeout is closed); False if
        the ingress did not take it in ``SEND_ATTEMPTS`` offers."""
        return self._send(IngressProxy.session_keep_alive, self._leadership_term_id, self._cluster_session_id)

    def send_admin_request_to_take_a_snapshot(self, correlation_id: int) -> bool:
        """Ask the cluster to take a snapshot (AdminRequest SNAPSHOT); the AdminResponse with ``correlation_id``
        comes to ``on_admin_response``. False if the ingress did not take the request."""
        return self._send(IngressProxy.admin_request, self._leadership_term_id, self._cluster_session_id,
                          correlation_id, AdminRequestType.SNAPSHOT, b"")

    def _send(self, send_method, *fields) -> bool:
        self._check_open()
        publication = self._publication
        if publication is None:
            return False
        proxy = self._proxy
        proxy.publication = publication
        for _ in range(SEND_ATTEMPTS):
            if send_method(proxy, *fields):
                self._track_ingress_result(1)
                return True
            result = proxy.last_result
            self._track_ingress_result(result)
            if result in (NOT_CONNECTED, CLOSED, MAX_POSITION_EXCEEDED):
                break
        return False

    def _track_ingress_result(self, result: int) -> None:
        """What an ingress offer's result says of the leader (later Aerons' ``trackIngressPublicationResult``)."""
        state = self._state
        if result > 0:
            if state is State.AWAIT_NEW_LEADER_CONNECTION:
                self._set_state(State.CONNECTED)
        elif result == NOT_CONNECTED:
            if state is State.CONNECTED:
                self._set_state(State.AWAIT_NEW_LEADER, self._ctx.new_leader_timeout_ns)
        elif result == MAX_POSITION_EXCEEDED:
            self._pending_close(f"max position exceeded: the ingress publication {self._publication} is full")
            self._close_publication()
        elif result == CLOSED and state is not State.CLOSED:
            self._pending_close("the ingress publication was closed (is the Aeron client closed?)")

    # -------------------------------------------------------------------------------------------- egress
    def poll_egress(self) -> int:
        """Poll the egress for this session's messages and events, then move the session's state on; returns
        the work done (fragments read plus state changes). Call it often: it is what notices a new leader."""
        if self._state is State.CLOSED:
            return 0
        fragments = self._egress_adapter.poll()
        return fragments + self.poll_state_changes()

    def poll_state_changes(self) -> int:
        """Move the session's state on (deadlines, the new leader's publication, a pending close); 1 if it
        changed. ``poll_egress`` calls it; call it yourself only when polling the egress another way."""
        state = self._state
        if state is State.CLOSED:
            return 0
        if state is State.PENDING_CLOSE:
            self._close_resources()
            self._state = State.CLOSED
            return 1
        image = self.egress_image
        if image is not None and image.is_closed and state in (State.CONNECTED, State.AWAIT_NEW_LEADER_CONNECTION):
            self.egress_image = None
            self._close_publication()
            self._set_state(State.AWAIT_NEW_LEADER, self._ctx.new_leader_timeout_ns)
            return 1
        if state is State.AWAIT_NEW_LEADER_CONNECTION:
            if self._publication is None and self._pending_registration_id != NULL_VALUE:
                try:
                    self._publication = self._aeron.get_exclusive_publication(self._pending_registration_id)
                except AeronError as exc:  # the driver refused the new leader's channel
                    self._pending_registration_id = NULL_VALUE
                    self._pending_close(f"cannot add the ingress publication to leader member "
                                        f"{self._leader_member_id}: {exc}")
                    return 1
                if self._publication is not None:
                    self._pending_registration_id = NULL_VALUE
            if self._publication is not None and self._publication.is_connected:
                self._set_state(State.CONNECTED)
                return 1
        if state in (State.AWAIT_NEW_LEADER, State.AWAIT_NEW_LEADER_CONNECTION) and \
                self._nano_clock() - self._state_deadline_ns >= 0:
            if state is State.AWAIT_NEW_LEADER:
                self._pending_close(f"no new leader within the new leader timeout of "
                                    f"{self._ctx.new_leader_timeout_ns / 1e9:g}s")
            else:
                self._pending_close(f"no connection to new leader member {self._leader_member_id} within the "
                                    f"message timeout of {self._ctx.message_timeout_ns / 1e9:g}s")
            return 1
        return 0

    def on_new_leader(self, cluster_session_id: int, leadership_term_id: int, leader_member_id: int,
                      ingress_endpoints: str) -> None:
        """A NewLeaderEvent for this session (``poll_egress`` calls it; call it yourself when reading the egress
        with your own ``EgressAdapter``): move the ingress to the new leader and tell the listener."""
        if cluster_session_id != self._cluster_session_id:
            raise ClusterError(f"invalid clusterSessionId={cluster_session_id} expected={self._cluster_session_id}")
        if self._state is State.CLOSED or self._state is State.PENDING_CLOSE:
            return
        self._leadership_term_id = leadership_term_id
        self._leader_member_id = leader_member_id
        self._decorator.leadership_term_id = leadership_term_id
        self._close_publication()
        self._egress_adapter.fragment_assembler.clear()
        ctx = self._ctx
        channel = ctx.ingress_channel
        if ctx.ingress_endpoints:
            try:
                endpoints = parse_ingress_endpoints(ingress_endpoints)
                channel = ingress_channel_for(ctx, endpoints[leader_member_id])
            except (ConfigurationError, KeyError):
                # The cluster's notice cannot be followed: wait for another, or close at the timeout.
                log.error("NewLeaderEvent: leader member %d is not in ingress endpoints %r", leader_member_id,
                          ingress_endpoints)
                channel = None
            else:
                ctx.ingress_endpoints = ingress_endpoints
                ctx.ingress_endpoint_map = endpoints
                self.member_endpoints = {m: e for m, e in endpoints.items() if m != leader_member_id}
        if channel is None:
            self._set_state(State.AWAIT_NEW_LEADER, ctx.new_leader_timeout_ns)
        else:
            self._pending_registration_id = self._aeron.async_add_exclusive_publication(channel,
                                                                                        ctx.ingress_stream_id)
            self._set_state(State.AWAIT_NEW_LEADER_CONNECTION, ctx.message_timeout_ns)
        self._listener.on_new_leader(cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints)

    # --------------------------------------------------------------------------------------------- close
    def close(self) -> None:
        """Close the session: a SessionCloseRequest to the leader (a few tries; not when the cluster closed it),
        then the publication, the subscription and an Aeron client made by ``connect``. Idempotent."""
        if self._state is State.CLOSED:
            return
        publication = self._publication
        if self._state is not State.PENDING_CLOSE and publication is not None and publication.is_connected:
            self._proxy.publication = publication
            for _ in range(SEND_ATTEMPTS):
                if self._proxy.session_close_request(self._leadership_term_id, self._cluster_session_id):
                    break
        self._close_reason = self._close_reason or "closed by the application"
        self._close_resources()
        self._state = State.CLOSED

    def __enter__(self) -> "AeronCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------- helpers
    def _set_state(self, state: State, timeout_ns: int = 0) -> None:
        self._state = state
        self._state_deadline_ns = self._nano_clock() + timeout_ns

    def _pending_close(self, reason: str) -> None:
        if self._state is not State.CLOSED:
            self._close_reason = self._close_reason or reason
            self._state = State.PENDING_CLOSE

    def _close_publication(self) -> None:
        if self._publication is not None:
            self._publication.close()
            self._publication = None
        if self._pending_registration_id != NULL_VALUE:
            self._aeron.async_remove_publication(self._pending_registration_id)
            self._pending_registration_id = NULL_VALUE

    def _close_resources(self) -> None:
        self._close_publication()
        if self._subscription is not None:
            self._subscription.close()
        if self._owns_aeron:
            self._aeron.close()

    def __repr__(self) -> str:
        return (f"AeronCluster(cluster_session_id={self._cluster_session_id}, leadership_term_id="
                f"{self._leadership_term_id}, leader_member_id={self._leader_member_id}, state={self._state.name})")
