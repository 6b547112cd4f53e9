"""Connecting a cluster client without blocking: Aeron's ``AeronCluster.AsyncConnect``, the one implementation of
the connect. ``AeronCluster.connect`` polls it until done, idling in between; a duty cycle polls it once a cycle
(``AeronCluster.async_connect``) and never waits.

Each ``poll()`` takes the steps that can be taken now, in Aeron's order (the step numbers are Aeron's):

CREATE_EGRESS_SUBSCRIPTION (-1): the egress subscription on the egress channel (its wildcard port 0, if any, is
resolved once the driver has bound it: the cluster could never answer port 0). CREATE_INGRESS_PUBLICATIONS (0): one
exclusive ingress publication per member of ``ingress_endpoints`` (the ingress channel with that member's endpoint
put in it), or one on the ingress channel itself when it names the endpoint; a member whose publication the driver
refuses is set aside, all refused is the driver's error. AWAIT_PUBLICATION_CONNECTED (1): the first member whose
publication connects (a member is listening there) is the one asked. SEND_MESSAGE (2): a SessionConnectRequest
(correlation id, the egress stream, protocol version 0.3.0, the resolved response channel, the credentials
supplier's credentials). POLL_RESPONSE (3): the answer to that correlation id (``EgressPoller``):

* Challenge: answered with ``credentials_supplier.on_challenge(challenge)`` as a ChallengeResponse under a new
  correlation id (back to SEND_MESSAGE);
* SessionEvent OK: the session id, leadership term and leader come with it; CONCLUDE_CONNECT (4) keeps the leader's
  publication, closes the other members' and makes the ``AeronCluster``: DONE (5);
* REDIRECT (a follower was asked): its detail lists the members' ingress endpoints ``id=host:port,...``; the
  leader's publication is kept if there is one, else one is added to the leader's endpoint; the other members'
  are closed and the connect request goes again, to the leader (back to AWAIT_PUBLICATION_CONNECTED);
* ERROR raises ``ClusterError`` and AUTHENTICATION_REJECTED ``AuthenticationError``, each with the cluster's detail.

The whole connect has the message timeout: past it, ``ClusterConnectTimeoutError`` names the step, the endpoints
tried, which of them a publication connected to, the response channel and the timeout. ``close()`` gives up a
connect not done (pending registrations included). Where we differ from Aeron: a REDIRECT's new publication is
added asynchronously (Aeron blocks on it), so a duty cycle polling this never waits on the driver; and a REDIRECT
when the ingress channel names one endpoint also moves to the leader's endpoint (Aeron would ask the same
endpoint again).
"""

from __future__ import annotations

import enum
import time

from aeron_numba.archive.authentication import NullCredentialsSupplier
from aeron_numba.cluster.client.egress_listener import EventCode
from aeron_numba.cluster.client.egress_poller import EgressPoller
from aeron_numba.cluster.client.errors import AuthenticationError, ClusterConnectTimeoutError
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.context import AeronClusterContext, parse_ingress_endpoints
from aeron_numba.codecs.channel_uri import ENDPOINT_PARAM, ChannelUri
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import IngressProxy
from aeron_numba.errors import ConfigurationError, RegistrationError
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.publication_status import CLOSED, NOT_CONNECTED

#: Egress fragments read in one poll (Aeron's AeronCluster.FRAGMENT_LIMIT).
FRAGMENT_LIMIT = 10


class ConnectState(enum.Enum):
    """Aeron's ``AsyncConnect.State``; ``step`` is its step number."""

    CREATE_EGRESS_SUBSCRIPTION = -1
    CREATE_INGRESS_PUBLICATIONS = 0
    AWAIT_PUBLICATION_CONNECTED = 1
    SEND_MESSAGE = 2
    POLL_RESPONSE = 3
    CONCLUDE_CONNECT = 4
    DONE = 5

    @property
    def step(self) -> int:
        return self.value


def ingress_channel_for(ctx: AeronClusterContext, endpoint: str) -> str:
    """The ingress channel with ``endpoint`` put in it (UDP); an IPC channel as it is."""
    uri = ChannelUri.parse(ctx.ingress_channel)
    if uri.is_ipc:
        return ctx.ingress_channel
    return str(ChannelUri(uri.media, {**uri.params, ENDPOINT_PARAM: endpoint}, uri.prefix))


class MemberIngress:
    """One member's ingress publication while connecting (Aeron's ``AeronCluster.MemberIngress``)."""

    def __init__(self, aeron, member_id: int, endpoint: str):
        self.aeron = aeron
        self.member_id = member_id
        self.endpoint = endpoint
        self.registration_id = NULL_VALUE
        self.publication = None
        self.publication_error: RegistrationError | None = None

    def close(self) -> None:
        if self.publication is not None:
            self.publication.close()
        elif self.registration_id != NULL_VALUE:
            self.aeron.async_remove_publication(self.registration_id)
        self.registration_id = NULL_VALUE
        self.publication = None

    def __repr__(self) -> str:
        return f"MemberIngress(member_id={self.member_id}, endpoint={self.endpoint!r}, publication={self.publication})"


class AsyncConnect:
    """The connect's steps; ``poll()`` returns the ``AeronCluster`` once connected, else None."""

    def __init__(self, ctx: AeronClusterContext, aeron=None, *, egress_listener=None, credentials_supplier=None,
                 nano_clock=time.monotonic_ns):
        """``ctx`` is concluded here; ``aeron`` None: a client of ``ctx.aeron_dir``'s driver is connected and owned
        (closed with the cluster client)."""
        ctx.conclude()
        self.ctx = ctx
        self.owns_aeron = aeron is None
        if aeron is None:
            from aeron_numba.client import Aeron, Context

            aeron = Aeron.connect(Context(aeron_dir=ctx.aeron_dir))
        self.aeron = aeron
        self.egress_listener = egress_listener
        self.credentials_supplier = credentials_supplier or NullCredentialsSupplier()
        self.nano_clock = nano_clock
        self.deadline_ns = nano_clock() + ctx.message_timeout_ns
        self.state = ConnectState.CREATE_EGRESS_SUBSCRIPTION
        self.correlation_id = NULL_VALUE
        self.cluster_session_id = NULL_VALUE
        self.leadership_term_id = NULL_VALUE
        self.leader_member_id = NULL_VALUE
        self.egress_image = None
        self.egress_subscription = None
        self.egress_poller: EgressPoller | None = None
        self._egress_registration_id = NULL_VALUE
        self.ingress_publication = None
        self._ingress_registration_id = NULL_VALUE
        self.members: dict[int, MemberIngress] = self._members_of(ctx.ingress_endpoint_map)
        self._message = None  # the SessionConnectRequest or ChallengeResponse to send
        self._proxy: IngressProxy | None = None

    def _members_of(self, endpoints: dict[int, str]) -> dict[int, MemberIngress]:
        return {member_id: MemberIngress(self.aeron, member_id, endpoint) for member_id, endpoint in endpoints.items()}

    @property
    def step(self) -> int:
        """Aeron's step number of the state reached."""
        return self.state.step

    # ---------------------------------------------------------------------------------------------- poll
    def poll(self):
        """Take the steps that can be taken now; the ``AeronCluster`` once connected (then this object is spent)."""
        self._check_deadline()
        while True:
            state = self.state
            if state is ConnectState.CREATE_EGRESS_SUBSCRIPTION:
                self._create_egress_subscription()
            elif state is ConnectState.CREATE_INGRESS_PUBLICATIONS:
                self._create_ingress_publications()
            elif state is ConnectState.AWAIT_PUBLICATION_CONNECTED:
                self._await_publication_connected()
            elif state is ConnectState.SEND_MESSAGE:
                self._send_message()
            elif state is ConnectState.POLL_RESPONSE:
                self._poll_response()
            elif state is ConnectState.CONCLUDE_CONNECT:
                return self._conclude_connect()
            else:
                return None
            if self.state is state:
                return None

    def _check_deadline(self) -> None:
        if self.nano_clock() - self.deadline_ns < 0:
            return
        subscription = self.egress_subscription
        response_channel = subscription.try_resolve_channel_endpoint_port() if subscription is not None else None
        endpoints = self.ctx.ingress_endpoints or f"(the ingress channel's) {self.ctx.ingress_channel}"
        connected = [str(m.member_id) for m in self.members.values()
                     if m.publication is not None and m.publication.is_connected]
        if not self.members:
            connected = ["yes" if self.ingress_publication is not None and self.ingress_publication.is_connected
                         else "no"]
        refused = "; ".join(f"member {m.member_id}: {m.publication_error}" for m in self.members.values()
                            if m.publication_error is not None)
        timeout_s = self.ctx.message_timeout_ns / 1e9
        raise ClusterConnectTimeoutError(
            f"cluster connect timeout: no leader answered within the message timeout of {timeout_s:g}s: "
            f"state={self.state.name} ingressEndpoints={endpoints} ingressChannel={self.ctx.ingress_channel} "
            f"connected={','.join(connected) or 'none'} egress.isConnected="
            f"{subscription is not None and subscription.is_connected} responseChannel={response_channel}"
            + (f" refused: {refused}" if refused else ""),
            self.state.name, endpoints, self.ctx.message_timeout_ns)

    # ---------------------------------------------------------------------------------------------- steps
    def _create_egress_subscription(self) -> None:
        if self._egress_registration_id == NULL_VALUE:
            self._egress_registration_id = self.aeron.async_add_subscription(self.ctx.egress_channel,
                                                                             self.ctx.egress_stream_id)
        subscription = self.aeron.get_subscription(self._egress_registration_id)
        if subscription is not None:
            self.egress_subscription = subscription
            self.egress_poller = EgressPoller(subscription, FRAGMENT_LIMIT)
            self._egress_registration_id = NULL_VALUE
            self.state = ConnectState.CREATE_INGRESS_PUBLICATIONS

    def _create_ingress_publications(self) -> None:
        ctx, aeron = self.ctx, self.aeron
        if not self.members:
            if self._ingress_registration_id == NULL_VALUE:
                self._ingress_registration_id = aeron.async_add_exclusive_publication(ctx.ingress_channel,
                                                                                      ctx.ingress_stream_id)
            publication = aeron.get_exclusive_publication(self._ingress_registration_id)
            if publication is not None:
                self.ingress_publication = publication
                self._ingress_registration_id = NULL_VALUE
                self.state = ConnectState.AWAIT_PUBLICATION_CONNECTED
            return
        made = refused = 0
        for member in self.members.values():
            if member.publication_error is not None:
                refused += 1
                continue
            try:
                if member.publication is None:
                    if member.registration_id == NULL_VALUE:
                        member.registration_id = aeron.async_add_exclusive_publication(
                            ingress_channel_for(ctx, member.endpoint), ctx.ingress_stream_id)
                    member.publication = aeron.get_exclusive_publication(member.registration_id)
                if member.publication is not None:
                    member.registration_id = NULL_VALUE
                    made += 1
            except RegistrationError as exc:
                member.publication_error = exc
                member.registration_id = NULL_VALUE
                refused += 1
        if made + refused == len(self.members):
            if made == 0:
                raise next(iter(self.members.values())).publication_error
            self.state = ConnectState.AWAIT_PUBLICATION_CONNECTED

    def _await_publication_connected(self) -> None:
        response_channel = self.egress_subscription.try_resolve_channel_endpoint_port()
        if response_channel is None:
            return
        if self.ingress_publication is None and self._ingress_registration_id != NULL_VALUE:
            publication = self.aeron.get_exclusive_publication(self._ingress_registration_id)  # after a REDIRECT
            if publication is None:
                return
            self._ingress_registration_id = NULL_VALUE
            self.ingress_publication = publication
        if self.ingress_publication is None:
            for member in self.members.values():
                if member.publication is not None and member.publication.is_connected:
                    self.ingress_publication = member.publication
                    self._prepare_connect_request(response_channel)
                    return
        elif self.ingress_publication.is_connected:
            self._prepare_connect_request(response_channel)

    def _prepare_connect_request(self, response_channel: str) -> None:
        self.correlation_id = self.aeron.next_correlation_id()
        self._message = CLUSTER.SessionConnectRequest(
            correlation_id=self.correlation_id, response_stream_id=self.ctx.egress_stream_id,
            version=C.CLIENT_PROTOCOL_SEMANTIC_VERSION, response_channel=response_channel,
            encoded_credentials=bytes(self.credentials_supplier.encoded_credentials()))
        self.state = ConnectState.SEND_MESSAGE

    def _send_message(self) -> None:
        proxy = self._proxy
        if proxy is None or proxy.publication is not self.ingress_publication:
            proxy = self._proxy = IngressProxy(self.ingress_publication, retry_attempts=1)  # poll() is the retry
        if proxy.offer_message(self._message):
            self.state = ConnectState.POLL_RESPONSE
        elif proxy.last_result in (CLOSED, NOT_CONNECTED):
            raise ClusterError(f"unexpected loss of connection to cluster: ingress publication "
                               f"{self.ingress_publication} answered {proxy.last_result}")

    def _poll_response(self) -> None:
        poller = self.egress_poller
        if not (poller.poll() > 0 and poller.is_poll_complete and poller.correlation_id == self.correlation_id):
            return
        if poller.is_challenged:
            self.cluster_session_id = poller.cluster_session_id
            answer = bytes(self.credentials_supplier.on_challenge(poller.encoded_challenge))
            self.correlation_id = self.aeron.next_correlation_id()
            self._message = CLUSTER.ChallengeResponse(correlation_id=self.correlation_id,
                                                      cluster_session_id=self.cluster_session_id,
                                                      encoded_credentials=answer)
            self.state = ConnectState.SEND_MESSAGE
            return
        code = poller.event_code
        if code == EventCode.OK:
            self.leadership_term_id = poller.leadership_term_id
            self.leader_member_id = poller.leader_member_id
            self.cluster_session_id = poller.cluster_session_id
            self.egress_image = poller.egress_image
            self.state = ConnectState.CONCLUDE_CONNECT
        elif code == EventCode.ERROR:
            raise ClusterError(poller.detail)
        elif code == EventCode.REDIRECT:
            self._update_members()
        elif code == EventCode.AUTHENTICATION_REJECTED:
            raise AuthenticationError(poller.detail)
        # CLOSED, or a code this client does not know: not an answer to the connect

    def _update_members(self) -> None:
        """A follower answered REDIRECT: move to the leader it names."""
        poller = self.egress_poller
        leader_member_id = poller.leader_member_id
        try:
            endpoints = parse_ingress_endpoints(poller.detail)
        except ConfigurationError as exc:
            raise ClusterError(f"REDIRECT from the cluster with ingress endpoints the client cannot read: {exc}") \
                from None
        if leader_member_id not in endpoints:
            raise ClusterError(f"REDIRECT to leader member {leader_member_id}, which its ingress endpoints "
                               f"{poller.detail!r} do not list")
        self.leader_member_id = leader_member_id
        asked = self.ingress_publication
        leader = self.members.get(leader_member_id)
        self.ingress_publication = None
        if leader is not None and leader.publication is not None:
            self.ingress_publication, leader.publication = leader.publication, None
        for member in self.members.values():
            member.close()  # the follower asked goes with them
        if asked is not None and asked is not self.ingress_publication and not asked.is_closed:
            asked.close()  # the ingress channel's own publication, when it named the endpoint
        self.members = self._members_of(endpoints)
        if self.ingress_publication is None:
            self._ingress_registration_id = self.aeron.async_add_exclusive_publication(
                ingress_channel_for(self.ctx, endpoints[leader_member_id]), self.ctx.ingress_stream_id)
        self.state = ConnectState.AWAIT_PUBLICATION_CONNECTED

    def _conclude_connect(self):
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster

        endpoints = {member_id: member.endpoint for member_id, member in self.members.items()
                     if member_id != self.leader_member_id}  # the other members, as Aeron's map keeps them
        for member in self.members.values():
            if member.publication is not self.ingress_publication:
                member.close()
        cluster = AeronCluster(self.ctx, self.aeron, self.ingress_publication, self.egress_subscription,
                               self.egress_image, endpoints, self.cluster_session_id, self.leadership_term_id,
                               self.leader_member_id, self.egress_listener, nano_clock=self.nano_clock,
                               owns_aeron=self.owns_aeron)
        self.ingress_publication = None
        self.state = ConnectState.DONE
        return cluster

    def close(self) -> None:
        """Give up a connect not done: its publications and subscription go, made or still pending."""
        if self.state is ConnectState.DONE:
            return
        aeron = self.aeron
        if self.ingress_publication is not None:
            self.ingress_publication.close()
        elif self._ingress_registration_id != NULL_VALUE:
            aeron.async_remove_publication(self._ingress_registration_id)
        for member in self.members.values():
            member.close()
        if self.egress_subscription is not None:
            self.egress_subscription.close()
        elif self._egress_registration_id != NULL_VALUE:
            aeron.async_remove_subscription(self._egress_registration_id)
        self.state = ConnectState.DONE
        if self.owns_aeron:
            aeron.close()
