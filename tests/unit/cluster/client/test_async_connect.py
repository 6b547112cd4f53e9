"""The connect's steps (``AsyncConnect``) with fakes and an injected clock: one publication per member, the
first connected one asked, the request's fields, REDIRECT (kept or new leader publication, unreadable detail),
a member the driver refuses, the timeout's text, and giving up a connect not done."""

from __future__ import annotations

import pytest

from aeron_numba.cluster.client import AsyncConnect, ClusterConnectTimeoutError, ClusterError, ConnectState, EventCode
from aeron_numba.cluster.client.egress_poller import EgressPoller
from aeron_numba.cluster.context import AeronClusterContext
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.errors import RegistrationError
from aeron_numba.layout import cluster as C
from tests.unit.cluster.client.fakes import RESPONSE_CHANNEL, Clock, FakeAeron

ENDPOINTS = "0=127.0.0.1:9000,1=127.0.0.2:9001,2=127.0.0.3:9002"
TIMEOUT_NS = 2_000_000_000


def make(endpoints: str = ENDPOINTS, connected=None, ingress_channel="aeron:udp?term-length=64k"):
    ctx = AeronClusterContext(ingress_channel=ingress_channel, ingress_endpoints=endpoints,
                              egress_channel="aeron:udp?endpoint=127.0.0.1:0", message_timeout_ns=TIMEOUT_NS)
    aeron, clock = FakeAeron(), Clock()
    aeron.connected_channels = connected
    return AsyncConnect(ctx, aeron, nano_clock=clock), aeron, clock


def channel(endpoint: str) -> str:
    return f"aeron:udp?term-length=64k|endpoint={endpoint}"


def event(code, correlation_id, leader=0, detail="", session_id=9, term=4):
    return CLUSTER.SessionEvent(cluster_session_id=session_id, correlation_id=correlation_id, leadership_term_id=term,
                                leader_member_id=leader, code=code, version=C.CLIENT_PROTOCOL_SEMANTIC_VERSION,
                                detail=detail)


def test_the_first_connected_member_gets_the_connect_request_and_the_ok_concludes():
    connect, aeron, _ = make(connected={channel("127.0.0.2:9001")})
    assert connect.poll() is None and connect.state is ConnectState.POLL_RESPONSE
    assert sorted(p.channel for p in aeron.publications) == [channel(e) for e in
                                                             ("127.0.0.1:9000", "127.0.0.2:9001", "127.0.0.3:9002")]
    asked = aeron.publication_to("127.0.0.2:9001")
    (request,) = asked.messages()
    assert request.SPEC.name == "SessionConnectRequest"
    assert (request.response_stream_id, request.version, request.response_channel) == (
        102, C.CLIENT_PROTOCOL_SEMANTIC_VERSION, RESPONSE_CHANNEL)
    aeron.subscription.deliver(event(EventCode.OK, request.correlation_id + 1))  # not ours: ignored
    assert connect.poll() is None
    aeron.subscription.deliver(event(EventCode.OK, request.correlation_id, leader=1), session_id=44)
    cluster = connect.poll()
    assert (cluster.cluster_session_id, cluster.leadership_term_id, cluster.leader_member_id) == (9, 4, 1)
    assert cluster.ingress_publication is asked and cluster.egress_image is aeron.subscription.images[44]
    assert connect.step == ConnectState.DONE.step == 5
    others = [p for p in aeron.publications if p is not asked]
    assert all(p.is_closed for p in others) and not asked.is_closed
    assert cluster.member_endpoints == {0: "127.0.0.1:9000", 2: "127.0.0.3:9002"}


def test_nothing_is_sent_before_the_response_channel_is_resolved():
    connect, aeron, _ = make()
    aeron.subscription.resolved_channel = None
    connect.poll()
    assert connect.state is ConnectState.AWAIT_PUBLICATION_CONNECTED
    assert all(not p.offered for p in aeron.publications)


def test_redirect_keeps_the_leaders_publication_and_asks_it():
    connect, aeron, _ = make(connected={channel("127.0.0.1:9000"), channel("127.0.0.3:9002")})
    connect.poll()
    follower = aeron.publication_to("127.0.0.1:9000")
    (request,) = follower.messages()
    aeron.subscription.deliver(event(EventCode.REDIRECT, request.correlation_id, leader=2, detail=ENDPOINTS))
    connect.poll()
    leader = [p for p in aeron.publications if p.channel == channel("127.0.0.3:9002")][0]
    assert follower.is_closed and not leader.is_closed
    (again,) = leader.messages()
    assert again.SPEC.name == "SessionConnectRequest" and again.correlation_id != request.correlation_id
    aeron.subscription.deliver(event(EventCode.OK, again.correlation_id, leader=2))
    assert connect.poll().ingress_publication is leader


def test_redirect_to_a_leader_without_a_publication_adds_one():
    connect, aeron, _ = make(endpoints="0=127.0.0.1:9000")
    connect.poll()
    (request,) = aeron.publication_to("127.0.0.1:9000").messages()
    aeron.subscription.deliver(event(EventCode.REDIRECT, request.correlation_id, leader=1,
                                     detail="0=127.0.0.1:9000,1=127.0.0.2:9001"))
    connect.poll()
    leader = aeron.publication_to("127.0.0.2:9001")
    assert leader.channel == channel("127.0.0.2:9001") and leader.messages()[0].SPEC.name == "SessionConnectRequest"


@pytest.mark.parametrize("detail, text", [("garbage", "cannot read"), ("0=127.0.0.1:9000", "do not list")])
def test_a_redirect_the_client_cannot_follow_is_a_cluster_error(detail, text):
    connect, aeron, _ = make()
    connect.poll()
    correlation_id = aeron.publication_to("127.0.0.1:9000").messages()[0].correlation_id
    aeron.subscription.deliver(event(EventCode.REDIRECT, correlation_id, leader=1, detail=detail))
    with pytest.raises(ClusterError, match=text):
        connect.poll()


def test_a_member_the_driver_refuses_is_set_aside_and_all_refused_is_the_drivers_error():
    connect, aeron, _ = make()
    aeron.refused = {channel("127.0.0.1:9000")}
    connect.poll()
    assert connect.state is ConnectState.POLL_RESPONSE
    assert aeron.publication_to("127.0.0.2:9001").messages()  # the next member was asked
    refused, aeron2, _ = make()
    aeron2.refused = {channel(e) for e in ("127.0.0.1:9000", "127.0.0.2:9001", "127.0.0.3:9002")}
    with pytest.raises(RegistrationError):
        refused.poll()


def test_the_timeout_names_the_step_the_endpoints_and_the_timeout():
    connect, aeron, clock = make(connected=set())
    connect.poll()
    clock.advance(TIMEOUT_NS - 1)
    assert connect.poll() is None
    clock.advance(1)
    with pytest.raises(ClusterConnectTimeoutError) as raised:
        connect.poll()
    error = raised.value
    assert (error.step, error.endpoints, error.timeout_ns) == ("AWAIT_PUBLICATION_CONNECTED", ENDPOINTS, TIMEOUT_NS)
    assert "within the message timeout of 2s" in str(error) and ENDPOINTS in str(error)
    assert "connected=none" in str(error)


def test_close_gives_up_a_connect_not_done():
    connect, aeron, _ = make()
    aeron.immediate = False
    connect.poll()  # the egress subscription's registration is pending
    connect.close()
    assert connect.state is ConnectState.DONE and aeron.removed
    connect2, aeron2, _ = make(connected=set())
    connect2.poll()
    connect2.close()
    assert all(p.is_closed for p in aeron2.publications) and aeron2.subscription.is_closed


def test_the_poller_takes_one_message_a_poll():
    connect, aeron, _ = make()
    poller = EgressPoller(aeron.subscription)
    aeron.subscription.deliver(event(EventCode.OK, 1), session_id=1)
    aeron.subscription.deliver(CLUSTER.Challenge(correlation_id=2, cluster_session_id=9, encoded_challenge=b"c"), 2)
    assert poller.poll() == 1 and poller.is_poll_complete and poller.correlation_id == 1
    assert poller.event_code == EventCode.OK and not poller.is_challenged
    assert poller.poll() == 1 and poller.is_challenged and poller.encoded_challenge == b"c"
    assert poller.event_code is None and poller.correlation_id == 2
