"""The connected client's state machine (``AeronCluster``) driven step by step with fakes and an injected clock:
the session header on offers, following a new leader (CONNECTED -> AWAIT_NEW_LEADER_CONNECTION -> CONNECTED), a
lost leader (AWAIT_NEW_LEADER) and its timeouts, the session closed by the cluster, a full publication, and the
close request."""

from __future__ import annotations

import pytest

from aeron_numba.client import BACK_PRESSURED, MAX_POSITION_EXCEEDED, NOT_CONNECTED
from aeron_numba.cluster.client import (
    AeronCluster,
    ClusterClientClosedError,
    ClusterError,
    EgressListener,
    EventCode,
    State,
)
from aeron_numba.cluster.context import AeronClusterContext
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.errors import ConfigurationError
from tests.unit.cluster.client.fakes import Clock, FakeAeron, FakePublication

SESSION_ID, TERM, LEADER = 5, 2, 0
ENDPOINTS = "0=127.0.0.1:9000,1=127.0.0.2:9001,2=127.0.0.3:9002"
NEW_LEADER_TIMEOUT_NS = 4_000_000_000
MESSAGE_TIMEOUT_NS = 1_000_000_000
LEADER_IMAGE = 11


class Recorder(EgressListener):
    def __init__(self):
        self.calls = []

    def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
        self.calls.append(("message", cluster_session_id, timestamp, bytes(buffer[offset:offset + length])))

    def on_session_event(self, correlation_id, cluster_session_id, leadership_term_id, leader_member_id, code, detail):
        self.calls.append(("event", correlation_id, code, detail))

    def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints):
        self.calls.append(("new_leader", leadership_term_id, leader_member_id, ingress_endpoints))


def make(endpoints: str = ENDPOINTS, immediate: bool = False):
    ctx = AeronClusterContext(ingress_channel="aeron:udp?term-length=64k", ingress_endpoints=endpoints,
                              egress_channel="aeron:udp?endpoint=127.0.0.1:0", message_timeout_ns=MESSAGE_TIMEOUT_NS,
                              new_leader_timeout_ns=NEW_LEADER_TIMEOUT_NS).conclude()
    aeron, clock, listener = FakeAeron(immediate=immediate), Clock(), Recorder()
    publication = FakePublication("aeron:udp?term-length=64k|endpoint=127.0.0.1:9000")
    subscription = aeron.subscription
    subscription.deliver(b"", LEADER_IMAGE)  # the leader's image exists (its queued empty fragment is dropped)
    subscription.queued.clear()
    cluster = AeronCluster(ctx, aeron, publication, subscription, subscription.images[LEADER_IMAGE],
                           {1: "127.0.0.2:9001", 2: "127.0.0.3:9002"}, SESSION_ID, TERM, LEADER, listener,
                           nano_clock=clock)
    return cluster, aeron, clock, listener, publication


def new_leader_event(term=TERM + 1, leader=1, endpoints=ENDPOINTS, session_id=SESSION_ID):
    return CLUSTER.NewLeaderEvent(leadership_term_id=term, cluster_session_id=session_id, leader_member_id=leader,
                                  ingress_endpoints=endpoints)


def session_event(code, detail="", session_id=SESSION_ID):
    return CLUSTER.SessionEvent(cluster_session_id=session_id, correlation_id=-1, leadership_term_id=TERM,
                                leader_member_id=LEADER, code=code, version=0, detail=detail)


def test_offer_puts_the_session_header_in_front_of_the_message():
    cluster, _, _, _, publication = make()
    assert cluster.offer(b"0123456789", 2, 5) > 0
    assert cluster.offer(bytearray(b"x" * 5000)) > 0  # longer than the reused buffer's first size
    first, second = publication.messages()
    assert (first.cluster_session_id, first.leadership_term_id, first.payload) == (SESSION_ID, TERM, b"23456")
    assert second.payload == b"x" * 5000 and len(publication.offered[0]) == AeronCluster.SESSION_HEADER_LENGTH + 5


def test_back_pressure_is_returned_and_changes_nothing():
    cluster, aeron, _, _, publication = make()
    publication.results.append(BACK_PRESSURED)
    assert cluster.offer(b"m") == BACK_PRESSURED
    assert cluster.state is State.CONNECTED
    assert aeron.doorbell_rings == 0


def test_an_accepted_offer_rings_the_drivers_doorbell_so_that_a_parked_driver_sends_it_at_once():
    cluster, aeron, _, _, _ = make()
    assert cluster.offer(b"m") > 0
    assert aeron.doorbell_rings == 1


def test_a_new_leader_is_followed_through_await_new_leader_connection():
    cluster, aeron, clock, listener, old = make()
    aeron.subscription.deliver(new_leader_event(), session_id=22)
    assert cluster.poll_egress() >= 1
    assert cluster.state is State.AWAIT_NEW_LEADER_CONNECTION
    assert old.is_closed and cluster.ingress_publication is None
    assert listener.calls == [("new_leader", TERM + 1, 1, ENDPOINTS)]
    assert (cluster.leadership_term_id, cluster.leader_member_id) == (TERM + 1, 1)
    assert cluster.egress_image is aeron.subscription.images[22]  # the new leader's egress from now on
    ((_, channel, stream_id),) = aeron.pending.values()
    assert channel == "aeron:udp?term-length=64k|endpoint=127.0.0.2:9001" and stream_id == 101
    assert cluster.offer(b"meanwhile") == NOT_CONNECTED  # the new publication is not made yet: no raise
    assert not cluster.send_keep_alive()
    aeron.make_all()
    new = aeron.publication_to("127.0.0.2:9001")
    new.is_connected = False
    assert cluster.poll_egress() == 0 and cluster.state is State.AWAIT_NEW_LEADER_CONNECTION
    assert cluster.ingress_publication is new
    new.is_connected = True
    assert cluster.poll_egress() == 1 and cluster.state is State.CONNECTED
    assert cluster.offer(b"after") > 0
    (message,) = new.messages()
    assert (message.leadership_term_id, message.payload) == (TERM + 1, b"after")
    assert aeron.subscription.images[LEADER_IMAGE] is not cluster.egress_image
    assert cluster.context.ingress_endpoints == ENDPOINTS


def test_an_offer_before_the_new_leader_event_is_polled_goes_to_the_old_leader():
    # As Aeron's: the session only learns of a new leader by polling its egress; until then its offers go to the
    # old leader's publication, which stays connected for the driver's publication connection timeout after the
    # leader died (the failover test polls until the client follows before it sends again).
    cluster, aeron, _, _, old = make(immediate=True)
    aeron.subscription.deliver(new_leader_event(), session_id=22)  # waiting in the egress, not polled yet
    assert cluster.offer(b"lost") > 0
    assert [m.payload for m in old.messages()] == [b"lost"] and cluster.leader_member_id == LEADER
    cluster.poll_egress()
    assert cluster.offer(b"kept") > 0
    (message,) = aeron.publication_to("127.0.0.2:9001").messages()
    assert (message.leadership_term_id, message.payload) == (TERM + 1, b"kept")


def test_a_successful_offer_to_the_new_leader_also_ends_the_wait():
    cluster, aeron, _, _, _ = make(immediate=True)
    aeron.connected_channels = set()  # its connected flag lags: the first offer that goes through says it all
    aeron.subscription.deliver(new_leader_event(), session_id=22)
    cluster.poll_egress()
    publication = aeron.publication_to("127.0.0.2:9001")
    assert cluster.state is State.AWAIT_NEW_LEADER_CONNECTION and cluster.ingress_publication is publication
    assert cluster.offer(b"m") > 0
    assert cluster.state is State.CONNECTED


def test_no_connection_to_the_new_leader_within_the_message_timeout_closes_the_session():
    cluster, aeron, clock, _, _ = make()
    aeron.subscription.deliver(new_leader_event())
    cluster.poll_egress()
    clock.advance(MESSAGE_TIMEOUT_NS - 1)
    assert cluster.poll_egress() == 0 and cluster.state is State.AWAIT_NEW_LEADER_CONNECTION
    clock.advance(1)
    cluster.poll_egress()
    assert cluster.state is State.PENDING_CLOSE
    cluster.poll_egress()
    assert cluster.is_closed and aeron.subscription.is_closed
    assert pytest.raises(ClusterClientClosedError, cluster.offer, b"m").match("no connection to new leader member 1")
    assert aeron.removed  # the registration still pending went with it


def test_an_unconnected_leader_starts_the_new_leader_wait_and_its_timeout_closes():
    cluster, _, clock, _, publication = make()
    publication.results.append(NOT_CONNECTED)
    assert cluster.offer(b"m") == NOT_CONNECTED  # never raises while a leader is awaited
    assert cluster.state is State.AWAIT_NEW_LEADER
    clock.advance(NEW_LEADER_TIMEOUT_NS - 1)
    assert cluster.poll_egress() == 0 and not cluster.is_closed
    clock.advance(1)
    cluster.poll_egress()
    cluster.poll_egress()
    assert cluster.is_closed and publication.is_closed
    with pytest.raises(ClusterClientClosedError, match="no new leader within the new leader timeout of 4s"):
        cluster.offer(b"m")


def test_the_leaders_egress_image_closing_closes_the_ingress_and_awaits_a_new_leader():
    cluster, aeron, clock, listener, publication = make()
    aeron.subscription.images[LEADER_IMAGE].is_closed = True
    assert cluster.poll_egress() == 1
    assert cluster.state is State.AWAIT_NEW_LEADER and publication.is_closed
    assert cluster.offer(b"m") == NOT_CONNECTED
    clock.advance(NEW_LEADER_TIMEOUT_NS // 2)
    aeron.subscription.deliver(new_leader_event(term=TERM + 1, leader=2), session_id=33)
    cluster.poll_egress()
    assert cluster.state is State.AWAIT_NEW_LEADER_CONNECTION and cluster.leader_member_id == 2
    aeron.make_all()
    cluster.poll_egress()
    assert cluster.state is State.CONNECTED
    assert "127.0.0.3:9002" in cluster.ingress_publication.channel


def test_a_session_closed_by_the_cluster_is_closed_after_the_poll_and_refuses_offers():
    cluster, aeron, _, listener, publication = make()
    aeron.subscription.deliver(session_event(EventCode.CLOSED, "SERVICE_ACTION"))
    cluster.poll_egress()
    assert cluster.is_closed and publication.is_closed and aeron.subscription.is_closed
    assert listener.calls == [("event", -1, EventCode.CLOSED, "SERVICE_ACTION")]
    with pytest.raises(ClusterClientClosedError) as raised:
        cluster.offer(b"m")
    assert raised.value.reason == "closed by the cluster: SERVICE_ACTION"
    with pytest.raises(ClusterClientClosedError):
        cluster.try_claim(4)
    cluster.close()
    assert publication.offered == []  # no SessionCloseRequest to a cluster that closed the session
    assert cluster.poll_egress() == 0


def test_max_position_exceeded_closes_the_session():
    cluster, _, _, _, publication = make()
    publication.results.append(MAX_POSITION_EXCEEDED)
    assert cluster.offer(b"m") == MAX_POSITION_EXCEEDED
    assert publication.is_closed and cluster.state is State.PENDING_CLOSE
    assert cluster.poll_state_changes() == 1 and cluster.is_closed
    with pytest.raises(ClusterClientClosedError, match="max position exceeded"):
        cluster.offer(b"m")


def test_events_of_other_sessions_and_garbage_are_ignored():
    cluster, aeron, _, listener, publication = make()
    aeron.subscription.deliver(new_leader_event(session_id=SESSION_ID + 1))
    aeron.subscription.deliver(session_event(EventCode.CLOSED, session_id=SESSION_ID + 1))
    aeron.subscription.deliver(b"\x00" * 40)  # not schema 111
    aeron.subscription.deliver(CLUSTER.SessionMessageHeader(leadership_term_id=TERM, cluster_session_id=SESSION_ID,
                                                            timestamp=9, payload=b"reply"))
    cluster.poll_egress()
    assert cluster.state is State.CONNECTED and not publication.is_closed
    assert listener.calls == [("message", SESSION_ID, 9, b"reply")]
    assert cluster._egress_adapter.malformed_count == 1
    with pytest.raises(ClusterError, match="invalid clusterSessionId=6 expected=5"):
        cluster.on_new_leader(SESSION_ID + 1, TERM + 1, 1, ENDPOINTS)


def test_a_new_leader_missing_from_its_endpoints_is_awaited_again_until_the_timeout():
    cluster, aeron, clock, listener, _ = make()
    aeron.subscription.deliver(new_leader_event(leader=7))
    cluster.poll_egress()
    assert cluster.state is State.AWAIT_NEW_LEADER and not aeron.pending
    assert listener.calls[-1][0] == "new_leader"
    clock.advance(NEW_LEADER_TIMEOUT_NS)
    cluster.poll_egress()
    cluster.poll_egress()
    assert cluster.is_closed


def test_without_ingress_endpoints_the_new_leader_is_reached_on_the_ingress_channel():
    ctx = AeronClusterContext(ingress_channel="aeron:udp?endpoint=239.1.1.1:9000", egress_channel="aeron:ipc",
                              new_leader_timeout_ns=NEW_LEADER_TIMEOUT_NS).conclude()
    aeron, clock = FakeAeron(immediate=True), Clock()
    cluster = AeronCluster(ctx, aeron, FakePublication(), aeron.subscription, None, {}, SESSION_ID, TERM, 0,
                           Recorder(), nano_clock=clock)
    aeron.subscription.deliver(new_leader_event(endpoints=""))
    cluster.poll_egress()
    assert cluster.ingress_publication.channel == "aeron:udp?endpoint=239.1.1.1:9000"
    assert cluster.state is State.CONNECTED


def test_close_sends_a_session_close_request_and_releases_everything():
    cluster, aeron, _, _, publication = make()
    with cluster:
        assert cluster.send_admin_request_to_take_a_snapshot(77)
    (admin, close) = publication.messages()
    assert (admin.SPEC.name, admin.correlation_id, admin.request_type) == ("AdminRequest", 77, 0)
    assert (close.SPEC.name, close.cluster_session_id, close.leadership_term_id) == ("SessionCloseRequest",
                                                                                     SESSION_ID, TERM)
    assert cluster.is_closed and publication.is_closed and aeron.subscription.is_closed
    assert not aeron.is_closed  # the application's Aeron client stays open
    cluster.close()
    assert len(publication.offered) == 2


def test_the_default_listener_refuses_replies_with_a_configuration_error():
    ctx = AeronClusterContext(ingress_channel="aeron:ipc", egress_channel="aeron:ipc").conclude()
    aeron = FakeAeron()
    cluster = AeronCluster(ctx, aeron, FakePublication(), aeron.subscription, None, {}, SESSION_ID, TERM, 0)
    aeron.subscription.deliver(CLUSTER.SessionMessageHeader(leadership_term_id=TERM, cluster_session_id=SESSION_ID,
                                                            timestamp=0, payload=b"r"))
    with pytest.raises(ConfigurationError, match="egress_listener"):
        cluster.poll_egress()
