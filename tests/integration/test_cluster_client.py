"""The cluster client (``AeronCluster``) against a scripted fake cluster (``fake_cluster.py``) over a real media
driver: three members on 127.0.0.1-3, each a subscription on its ingress endpoint answering with the generated
EgressPublisher on the client's response channel. Connect (the request's fields, REDIRECT to the leader, a
challenge, a rejection, an error, nobody answering), the session header in front of offers and claims, egress
replies whole however fragmented, keep-alives, admin requests, a new leader followed without reconnecting, the
session closed by the cluster, and the close request."""

from __future__ import annotations

import time

import numba
import numpy as np
import pytest

from aeron_numba.client import Aeron, BufferClaim, Context, NOT_CONNECTED
from aeron_numba.cluster.client import (
    AeronCluster,
    AuthenticationError,
    ClusterClientClosedError,
    ClusterConnectTimeoutError,
    ClusterError,
    EgressListener,
    EventCode,
    State,
)
from aeron_numba.client.handles import new_publication_handle
from aeron_numba.cluster.client.ingress_handle import IngressHandle, ingress_offer, ingress_try_claim
from aeron_numba.cluster.context import AeronClusterContext
from aeron_numba.layout import cluster as C
from aeron_numba.layout.publication_status import CLOSED as CLOSED_CODE, PUB_STATE_CLOSED, PUB_STATE_LENGTH
from harness.aeron_dirs import new_aeron_dir, remove_aeron_dir
from harness.awaiting import await_condition
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS, udp_settings_for_tests
from harness.process_manager import ProcessManager
from tests.integration.driver_processes import start_driver
from tests.integration.fake_cluster import FakeCluster

# Two clients and the fake cluster's thread share two cores with the driver: Aeron's own client timeouts.
DRIVER_ENV = {**udp_settings_for_tests(term_buffer_length="64k", liveness_timeout="2s"), **LENIENT_CLIENT_TIMEOUTS}
OK, ERROR, REDIRECT, REJECTED, CLOSED = (EventCode.OK, EventCode.ERROR, EventCode.REDIRECT,
                                         EventCode.AUTHENTICATION_REJECTED, EventCode.CLOSED)
SESSION_ID, TERM = 7, 3
TIMEOUT_S = 30


class Recorder(EgressListener):
    def __init__(self):
        self.messages, self.events, self.new_leaders, self.admin = [], [], [], []

    def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
        self.messages.append((cluster_session_id, timestamp, bytes(buffer[offset:offset + length])))

    def on_session_event(self, correlation_id, cluster_session_id, leadership_term_id, leader_member_id, code, detail):
        self.events.append((correlation_id, cluster_session_id, code, detail))

    def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints):
        self.new_leaders.append((cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints))

    def on_admin_response(self, cluster_session_id, correlation_id, request_type, response_code, message, payload,
                          payload_offset, payload_length):
        self.admin.append((correlation_id, request_type, response_code, message))


class Credentials:
    def __init__(self):
        self.challenges = []

    def encoded_credentials(self) -> bytes:
        return b"user:alice"

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        self.challenges.append(encoded_challenge)
        return b"answer:" + encoded_challenge


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """One driver for the module's tests (each test has its own clients, members and ports): a driver's start is
    most of a test's time on a loaded machine. Killed at the end, pass or fail."""
    manager = ProcessManager(tmp_path_factory.mktemp("cluster-client-processes"))
    aeron_dir = new_aeron_dir("aeron-cluster-client")
    try:
        _, cnc = start_driver(manager, aeron_dir, timeout_s=180, **DRIVER_ENV)  # a loaded machine starts it slowly
        cnc.close()
        yield aeron_dir, manager
    finally:
        manager.close()
        remove_aeron_dir(aeron_dir)


@pytest.fixture
def setup(driver):
    """The fake cluster's Aeron client and members (started), and the client's Aeron client."""
    aeron_dir, manager = driver
    for process in manager.processes:
        process.check_alive()
    with Aeron.connect(Context(aeron_dir=str(aeron_dir))) as cluster_aeron, \
            Aeron.connect(Context(aeron_dir=str(aeron_dir))) as client_aeron:
        cluster = FakeCluster.on_loopback(cluster_aeron).start()
        try:
            yield cluster, client_aeron
        finally:
            cluster.stop()
        assert not cluster.errors, cluster.errors


def context(cluster: FakeCluster, message_timeout_s: float = 10) -> AeronClusterContext:
    return AeronClusterContext(ingress_channel="aeron:udp?term-length=64k", ingress_endpoints=cluster.ingress_endpoints,
                               egress_channel="aeron:udp?endpoint=127.0.0.1:0",
                               message_timeout_ns=int(message_timeout_s * 1e9))


def send_event(member, channel, correlation_id, code, detail="", leader=0, session_id=SESSION_ID, term=TERM):
    member.send(channel, "session_event", cluster_session_id=session_id, correlation_id=correlation_id,
                leadership_term_id=term, leader_member_id=leader, code=code,
                version=C.CLIENT_PROTOCOL_SEMANTIC_VERSION, detail=detail)


def answer(code, detail="", leader=0):
    """A member script: answer each connect request with a SessionEvent of ``code``."""
    def script(member, request):
        send_event(member, request.response_channel, request.correlation_id, code, detail, leader)
    return script


def connected(cluster, aeron, leader=0, listener=None) -> AeronCluster:
    member = cluster.members[leader]
    member.on_connect_request = answer(OK, leader=leader)
    member.listen()
    return AeronCluster.connect(context(cluster), aeron, egress_listener=listener)


def await_received(member, name: str, count: int = 1, work=None):
    return await_condition(lambda: len(member.messages(name)) >= count and member.messages(name), TIMEOUT_S,
                           f"{count} {name} at member {member.member_id}", work=work)


# ------------------------------------------------------------------------------------------------- connect
def test_connect_sends_the_session_connect_request_and_takes_the_leaders_answer(setup):
    cluster, aeron = setup
    client = connected(cluster, aeron, leader=0)
    try:
        (request,) = cluster.members[0].messages("SessionConnectRequest")
        assert request.response_stream_id == 102
        assert request.version == C.CLIENT_PROTOCOL_SEMANTIC_VERSION == (0 << 16) | (3 << 8) | 0
        assert request.response_channel.startswith("aeron:udp?endpoint=127.0.0.1:")
        assert not request.response_channel.endswith(":0")  # the driver's port, which the cluster can answer
        assert request.encoded_credentials == b""
        assert (client.cluster_session_id, client.leadership_term_id, client.leader_member_id) == (SESSION_ID, TERM, 0)
        assert client.state is State.CONNECTED and not client.is_closed
        assert cluster.members[0].endpoint in client.ingress_publication.channel
        assert client.egress_subscription.is_connected
    finally:
        client.close()
    assert client.is_closed


def test_a_follower_redirects_the_client_to_the_leader(setup):
    cluster, aeron = setup
    follower, leader = cluster.members[1], cluster.members[2]
    follower.on_connect_request = answer(REDIRECT, detail=cluster.ingress_endpoints, leader=2)
    leader.on_connect_request = answer(OK, leader=2)
    follower.listen()  # the leader listens only once the follower was asked: the client cannot have picked it

    original = follower.on_connect_request

    def redirect_then_let_the_leader_listen(member, request):
        original(member, request)
        leader.listen()
    follower.on_connect_request = redirect_then_let_the_leader_listen
    client = AeronCluster.connect(context(cluster), aeron)
    try:
        assert client.leader_member_id == 2
        assert leader.endpoint in client.ingress_publication.channel
        assert len(follower.messages("SessionConnectRequest")) == 1
        (request,) = leader.messages("SessionConnectRequest")
        assert request.response_channel == follower.messages("SessionConnectRequest")[0].response_channel
        client.offer(b"to the leader")
        (message,) = await_received(leader, "SessionMessageHeader")
        assert message.payload == b"to the leader"
    finally:
        client.close()


def test_a_challenge_is_answered_with_the_credentials_suppliers_answer(setup):
    cluster, aeron = setup
    member = cluster.members[0]

    response_channels = []

    def challenge_then_accept(member, message):
        if message.SPEC.name == "SessionConnectRequest":
            response_channels.append(message.response_channel)
            member.send(message.response_channel, "challenge", correlation_id=message.correlation_id,
                        cluster_session_id=SESSION_ID, encoded_challenge=b"nonce-1")
        elif message.encoded_credentials == b"answer:nonce-1":
            send_event(member, response_channels[0], message.correlation_id, OK)
        else:
            send_event(member, response_channels[0], message.correlation_id, REJECTED, "wrong answer")
    member.on_connect_request = challenge_then_accept
    member.listen()
    credentials = Credentials()
    client = AeronCluster.connect(context(cluster), aeron, credentials_supplier=credentials)
    try:
        (request,) = member.messages("SessionConnectRequest")
        (response,) = member.messages("ChallengeResponse")
        assert request.encoded_credentials == b"user:alice"
        assert credentials.challenges == [b"nonce-1"]
        assert response.cluster_session_id == SESSION_ID
        assert response.correlation_id != request.correlation_id
        assert client.cluster_session_id == SESSION_ID
    finally:
        client.close()


def test_authentication_rejected_is_a_typed_error_with_the_clusters_detail(setup):
    cluster, aeron = setup
    member = cluster.members[0]
    member.on_connect_request = answer(REJECTED, detail="bad credentials for alice")
    member.listen()
    with pytest.raises(AuthenticationError, match="bad credentials for alice"):
        AeronCluster.connect(context(cluster), aeron, credentials_supplier=Credentials())


def test_an_error_answer_is_a_cluster_error_with_the_detail(setup):
    cluster, aeron = setup
    member = cluster.members[0]
    member.on_connect_request = answer(ERROR, detail="concurrent session limit")
    member.listen()
    with pytest.raises(ClusterError, match="concurrent session limit") as raised:
        AeronCluster.connect(context(cluster), aeron)
    assert not isinstance(raised.value, AuthenticationError)


def test_no_member_answering_is_a_timeout_error_naming_the_endpoints_and_the_timeout(setup):
    cluster, aeron = setup
    cluster.members[1].listen()  # a member that listens but never answers, and two that do not listen
    started = time.monotonic()
    with pytest.raises(ClusterConnectTimeoutError) as raised:
        AeronCluster.connect(context(cluster, message_timeout_s=1.5), aeron)
    assert time.monotonic() - started >= 1.5
    text = str(raised.value)
    for member in cluster.members.values():
        assert member.endpoint in text
    assert "1.5s" in text and raised.value.timeout_ns == 1_500_000_000
    assert raised.value.step == "POLL_RESPONSE"  # the listening member was asked and never answered
    assert len(cluster.members[1].messages("SessionConnectRequest")) == 1


def test_async_connect_is_polled_from_a_duty_cycle(setup):
    cluster, aeron = setup
    member = cluster.members[0]
    member.on_connect_request = answer(OK)
    member.listen()
    async_connect = AeronCluster.async_connect(context(cluster), aeron)
    steps = []

    def step():
        result = async_connect.poll()
        steps.append(async_connect.step)
        return result
    client = await_condition(step, TIMEOUT_S, "async connect")
    try:
        assert steps[-1] == 5 and client.cluster_session_id == SESSION_ID  # DONE
        assert 3 in steps  # it returned to the caller while awaiting the answer (POLL_RESPONSE)
    finally:
        client.close()


# ------------------------------------------------------------------------------------------------- session
def test_offer_and_try_claim_put_the_session_header_in_front(setup):
    cluster, aeron = setup
    client = connected(cluster, aeron)
    member = cluster.members[0]
    try:
        payload = np.arange(100, dtype=np.uint8)
        assert await_condition(lambda: client.offer(payload, 10, 50) > 0, TIMEOUT_S, "offer")
        claim = await_condition(lambda: (c := client.try_claim(5, BufferClaim())) and not isinstance(c, int) and c,
                                TIMEOUT_S, "claim")
        claim.put_bytes(b"claim", AeronCluster.SESSION_HEADER_LENGTH)
        claim.commit()
        big = bytes(range(256)) * 20  # 5120 bytes: fragmented on the way, one message at the member
        assert await_condition(lambda: client.offer(big) > 0, TIMEOUT_S, "big offer")
        first, second, third = await_received(member, "SessionMessageHeader", 3)
        for message in (first, second, third):
            assert (message.cluster_session_id, message.leadership_term_id) == (SESSION_ID, TERM)
        assert first.payload == bytes(range(10, 60))
        assert second.payload == b"claim"
        assert third.payload == big
    finally:
        client.close()


def test_egress_messages_are_delivered_whole_and_only_this_sessions(setup):
    cluster, aeron = setup
    recorder = Recorder()
    client = connected(cluster, aeron, listener=recorder)
    member = cluster.members[0]
    try:
        channel = member.messages("SessionConnectRequest")[0].response_channel
        big = bytes(range(250)) * 32  # 8000 bytes (a 64k term takes 8k messages): six fragments at the MTU
        member.send(channel, "session_message_header", leadership_term_id=TERM, cluster_session_id=SESSION_ID + 1,
                    timestamp=1, payload=b"someone else's")
        member.send(channel, "session_message_header", leadership_term_id=TERM, cluster_session_id=SESSION_ID,
                    timestamp=2, payload=b"small")
        member.send(channel, "session_message_header", leadership_term_id=TERM, cluster_session_id=SESSION_ID,
                    timestamp=3, payload=big)
        await_condition(lambda: len(recorder.messages) >= 2, TIMEOUT_S, "two replies", work=client.poll_egress)
        assert recorder.messages == [(SESSION_ID, 2, b"small"), (SESSION_ID, 3, big)]
    finally:
        client.close()


def test_keep_alive_admin_request_and_close_reach_the_leader(setup):
    cluster, aeron = setup
    recorder = Recorder()
    client = connected(cluster, aeron, listener=recorder)
    member = cluster.members[0]
    assert await_condition(client.send_keep_alive, TIMEOUT_S, "keep-alive taken")
    (keep_alive,) = await_received(member, "SessionKeepAlive")
    assert (keep_alive.leadership_term_id, keep_alive.cluster_session_id) == (TERM, SESSION_ID)
    assert client.send_admin_request_to_take_a_snapshot(42)
    (request,) = await_received(member, "AdminRequest")
    assert (request.correlation_id, request.request_type, request.cluster_session_id) == (42, 0, SESSION_ID)
    channel = member.messages("SessionConnectRequest")[0].response_channel
    member.send(channel, "admin_response", cluster_session_id=SESSION_ID, correlation_id=42, request_type=0,
                response_code=0, message="snapshot taken", payload=b"")
    await_condition(lambda: recorder.admin, TIMEOUT_S, "admin response", work=client.poll_egress)
    assert recorder.admin == [(42, 0, 0, "snapshot taken")]
    client.close()
    (close,) = await_received(member, "SessionCloseRequest")
    assert (close.leadership_term_id, close.cluster_session_id) == (TERM, SESSION_ID)
    with pytest.raises(ClusterClientClosedError, match="closed by the application"):
        client.offer(b"late")


def test_a_new_leader_is_followed_without_reconnecting(setup):
    cluster, aeron = setup
    recorder = Recorder()
    client = connected(cluster, aeron, leader=0, listener=recorder)
    old, new = cluster.members[0], cluster.members[1]
    try:
        channel = old.messages("SessionConnectRequest")[0].response_channel
        new.listen()
        new.send(channel, "new_leader_event", leadership_term_id=TERM + 1, cluster_session_id=SESSION_ID,
                 leader_member_id=1, ingress_endpoints=cluster.ingress_endpoints)
        results = []

        def offer_meanwhile():
            work = client.poll_egress()
            results.append(client.offer(b"during"))  # never raises while the leader changes
            return work
        await_condition(lambda: client.state is State.CONNECTED and recorder.new_leaders, TIMEOUT_S,
                        "connected to the new leader", work=offer_meanwhile)
        assert recorder.new_leaders == [(SESSION_ID, TERM + 1, 1, cluster.ingress_endpoints)]
        assert (client.leader_member_id, client.leadership_term_id) == (1, TERM + 1)
        assert new.endpoint in client.ingress_publication.channel
        assert all(r > 0 or r == NOT_CONNECTED for r in results), results
        assert await_condition(lambda: client.offer(b"after") > 0, TIMEOUT_S, "offer to the new leader")
        messages = await_condition(lambda: [m for m in new.messages("SessionMessageHeader") if m.payload == b"after"],
                                   TIMEOUT_S, "message at the new leader")
        assert messages[0].leadership_term_id == TERM + 1
        assert all(m.leadership_term_id == TERM + 1 for m in new.messages("SessionMessageHeader"))
        assert client.send_keep_alive()
        assert await_received(new, "SessionKeepAlive")[0].leadership_term_id == TERM + 1
    finally:
        client.close()


def kill(member) -> None:
    """The member's process is gone: nobody reads its ingress endpoint, its egress publications stop."""
    with member.cluster._lock:
        member.subscription.close()
        member.subscription = None
        for publisher in member.publishers.values():
            publisher.publication.close()
        member.publishers.clear()


def test_a_dead_leader_is_noticed_and_a_new_one_followed(setup):
    cluster, aeron = setup
    recorder = Recorder()
    client = connected(cluster, aeron, leader=0, listener=recorder)
    old, new = cluster.members[0], cluster.members[2]
    channel = old.messages("SessionConnectRequest")[0].response_channel
    kill(old)
    results = []

    def offer_and_poll():
        results.append(client.offer(b"anyone?"))  # never raises while the leader is gone
        return client.poll_egress()
    await_condition(lambda: client.state is State.AWAIT_NEW_LEADER, TIMEOUT_S, "the dead leader noticed",
                    work=offer_and_poll)
    assert client.offer(b"x") == NOT_CONNECTED and all(r > 0 or r == NOT_CONNECTED for r in results)
    new.listen()
    new.send(channel, "new_leader_event", leadership_term_id=TERM + 1, cluster_session_id=SESSION_ID,
             leader_member_id=2, ingress_endpoints=cluster.ingress_endpoints)
    await_condition(lambda: client.state is State.CONNECTED, TIMEOUT_S, "connected to the new leader",
                    work=offer_and_poll)
    assert recorder.new_leaders == [(SESSION_ID, TERM + 1, 2, cluster.ingress_endpoints)]
    await_condition(lambda: [m for m in new.messages("SessionMessageHeader") if m.payload == b"anyone?"], TIMEOUT_S,
                    "a message at the new leader", work=offer_and_poll)
    client.close()


def test_a_dead_leader_without_a_successor_closes_the_session_after_the_new_leader_timeout(setup):
    cluster, aeron = setup
    member = cluster.members[0]
    member.on_connect_request = answer(OK)
    member.listen()
    ctx = context(cluster)
    ctx.new_leader_timeout_ns = 1_000_000_000
    client = AeronCluster.connect(ctx, aeron)
    kill(member)

    def offer_and_poll():
        client.offer(b"anyone?")
        return client.poll_egress()
    await_condition(lambda: client.state is not State.CONNECTED, TIMEOUT_S, "the dead leader noticed",
                    work=offer_and_poll)
    noticed = time.monotonic()
    await_condition(lambda: client.is_closed, TIMEOUT_S, "the session closed", work=client.poll_egress)
    assert time.monotonic() - noticed >= 0.9  # it waited for a new leader first
    with pytest.raises(ClusterClientClosedError, match="no new leader within the new leader timeout of 1s"):
        client.offer(b"late")


def test_connect_without_an_aeron_client_makes_one_and_closes_it(setup, driver):
    cluster, _ = setup
    aeron_dir, _ = driver
    member = cluster.members[0]
    member.on_connect_request = answer(OK)
    member.listen()
    ctx = context(cluster)
    ctx.aeron_dir = str(aeron_dir)
    client = AeronCluster.connect(ctx)
    own = client.aeron
    assert client.offer(b"x") > 0 or client.state is State.CONNECTED
    client.close()
    assert own.is_closed


def test_a_session_closed_by_the_cluster_ends_with_a_typed_error_on_the_next_offer(setup):
    cluster, aeron = setup
    recorder = Recorder()
    client = connected(cluster, aeron, listener=recorder)
    member = cluster.members[0]
    channel = member.messages("SessionConnectRequest")[0].response_channel
    member.send(channel, "session_event", cluster_session_id=SESSION_ID, correlation_id=-1, leadership_term_id=TERM,
                leader_member_id=0, code=CLOSED, version=C.CLIENT_PROTOCOL_SEMANTIC_VERSION, detail="TIMEOUT")
    await_condition(lambda: client.is_closed, TIMEOUT_S, "session closed", work=client.poll_egress)
    assert recorder.events == [(-1, SESSION_ID, CLOSED, "TIMEOUT")]
    with pytest.raises(ClusterClientClosedError, match="closed by the cluster: TIMEOUT") as raised:
        client.offer(b"too late")
    assert raised.value.reason == "closed by the cluster: TIMEOUT"
    with pytest.raises(ClusterClientClosedError):
        client.send_keep_alive()
    client.close()
    assert not member.messages("SessionCloseRequest")  # the cluster closed it: nothing to ask


@numba.njit
def compiled_offer(handle, payload):
    return ingress_offer(handle, payload, 1, 3)


@numba.njit
def compiled_claim(handle, payload):
    claimed = ingress_try_claim(handle, 4)
    if claimed > 0:
        claim = handle.publication.claim
        claim.buffer[claim.offset + 32:claim.offset + 36] = payload[:4]
        claim.commit()
    return claimed


@pytest.fixture
def compiled_senders():
    """The compiled callers, compiled before any Aeron client runs: a compile holds the GIL for seconds, which
    would starve the clients' conductor threads (the driver would drop them). Compiled on a closed handle."""
    pub_state = np.zeros(PUB_STATE_LENGTH, dtype=np.int64)
    pub_state[PUB_STATE_CLOSED] = 1
    log = np.zeros(64, dtype=np.uint8)
    closed = IngressHandle(new_publication_handle(log, pub_state, log, True, 0, 0, 1376, 8192), log)
    payload = np.zeros(8, dtype=np.uint8)
    assert compiled_offer(closed, payload) == compiled_claim(closed, payload) == CLOSED_CODE


def test_a_compiled_caller_offers_and_claims_behind_the_session_header(compiled_senders, setup):
    cluster, aeron = setup
    client = connected(cluster, aeron)
    member = cluster.members[0]
    handle = client.compiled()
    payload = np.frombuffer(bytearray(b"abcdef"), dtype=np.uint8)
    await_condition(lambda: compiled_offer(handle, payload) > 0, TIMEOUT_S, "compiled offer")  # back pressure: again
    await_condition(lambda: compiled_claim(handle, payload) > 0, TIMEOUT_S, "compiled claim")
    first, second = await_received(member, "SessionMessageHeader", 2)
    assert (first.cluster_session_id, first.leadership_term_id, first.payload) == (SESSION_ID, TERM, b"bcd")
    assert (second.cluster_session_id, second.leadership_term_id, second.payload) == (SESSION_ID, TERM, b"abcd")
    client.close()
    assert compiled_offer(handle, payload) == compiled_claim(handle, payload) == CLOSED_CODE  # harmless after close
