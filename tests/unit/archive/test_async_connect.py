"""AsyncConnect (Aeron's AeronArchive.AsyncConnect) step by step: the client's asynchronous adds, the requests it
sends (decoded from a stand-in publication), the archive's answers fed back through a stand-in subscription, a
challenge answered with the credentials supplier's ``on_challenge``, and the message timeout on an injected clock."""

from __future__ import annotations

import pytest

from aeron_numba.archive.archive_error import ArchiveError
from aeron_numba.archive.async_connect import ArchiveConnectError, AsyncConnect, ConnectStep
from aeron_numba.archive.authentication import ReplicationCredentialsSupplier
from aeron_numba.archive.client import AeronArchiveContext
from aeron_numba.codecs.archive_proxies import ControlResponseProxyBase
from aeron_numba.errors import RegistrationError
from aeron_numba.layout import archive as A
from tests.unit.archive.archive_fakes import Aeron, Publication

OK, ERROR = A.CONTROL_RESPONSE_CODES["OK"], A.CONTROL_RESPONSE_CODES["ERROR"]
TIMEOUT_NS = 1_000_000_000
SESSION = 17


class Clock:
    now = 0

    def __call__(self):
        return self.now


class Supplier:
    """Credentials for the connect; a challenge is answered with what it was asked, reversed."""

    def __init__(self):
        self.challenges = []

    def encoded_credentials(self):
        return b"user:pw"

    def on_challenge(self, encoded_challenge):
        self.challenges.append(encoded_challenge)
        return encoded_challenge[::-1]


class Archive:
    """The archive's side: what it answers arrives on the connect's response subscription."""

    def __init__(self, connect):
        self.connect = connect
        self.publication = Publication()
        self.proxy = ControlResponseProxyBase(self.publication)

    def deliver(self):
        self.connect.subscription.fragments += [(data, 5) for data in self.publication.raw]
        self.publication.raw.clear()

    def respond(self, correlation_id, relevant_id=SESSION, code=OK, version=A.ARCHIVE_PROTOCOL_VERSION, message=""):
        self.proxy.control_response(control_session_id=SESSION, correlation_id=correlation_id,
                                    relevant_id=relevant_id, code=code, version=version, error_message=message)
        self.deliver()

    def challenge(self, correlation_id, encoded_challenge):
        self.proxy.challenge(control_session_id=SESSION, correlation_id=correlation_id,
                             version=A.ARCHIVE_PROTOCOL_VERSION, encoded_challenge=encoded_challenge)
        self.deliver()


def start(supplier=None, response_channel="aeron:udp?endpoint=localhost:0"):
    aeron, clock = Aeron(), Clock()
    ctx = AeronArchiveContext(control_request_channel="aeron:udp?endpoint=archive:8010",
                              control_response_channel=response_channel, message_timeout_ns=TIMEOUT_NS,
                              credentials_supplier=supplier or Supplier())
    connect = AsyncConnect(aeron, ctx, clock)
    connect.clock, connect.fake_aeron = clock, aeron
    return connect


def connected_to_archive(connect):
    """Up to the connect request sent: the registrations made, the archive there, our response image joined."""
    subscription = connect.fake_aeron.subscriptions[0]
    subscription.is_connected = True
    subscription.try_resolve_channel_endpoint_port = lambda: "aeron:udp?endpoint=localhost:40500"
    assert connect.poll() is None and connect.step is ConnectStep.AWAIT_CONNECT_RESPONSE
    return Archive(connect)


def sent(connect):
    return connect.publication.sent


def test_the_registrations_are_added_without_waiting_and_the_connect_waits_for_them():
    connect = start()
    aeron = connect.fake_aeron
    subscription, publication = aeron.subscriptions[0], aeron.publications[0]
    assert (subscription.channel, subscription.stream_id) == ("aeron:udp?endpoint=localhost:0",
                                                              A.DEFAULT_RESPONSE_STREAM_ID)
    assert (publication.channel, publication.stream_id) == ("aeron:udp?endpoint=archive:8010",
                                                            A.DEFAULT_LOCAL_CONTROL_STREAM_ID)
    aeron.pending.add(publication.registration_id)  # the driver has not answered the publication's add yet
    assert connect.poll() is None and connect.step is ConnectStep.ADD_PUBLICATION
    aeron.pending.clear()
    publication.is_connected = False  # no archive listening yet
    assert connect.poll() is None and connect.step is ConnectStep.AWAIT_PUBLICATION_CONNECTED
    publication.is_connected = True
    subscription.is_connected = False
    subscription.try_resolve_channel_endpoint_port = lambda: None  # the driver has not bound the port yet
    assert connect.poll() is None and connect.step is ConnectStep.SEND_CONNECT_REQUEST
    subscription.try_resolve_channel_endpoint_port = lambda: "aeron:udp?endpoint=localhost:40500"
    assert connect.poll() is None and connect.step is ConnectStep.AWAIT_SUBSCRIPTION_CONNECTED
    [request] = sent(connect)
    # The bound port, not 0, and the supplier's credentials, as Aeron's client sends them.
    assert (type(request).__name__, request.response_channel, request.response_stream_id, request.version,
            bytes(request.encoded_credentials)) == ("AuthConnectRequest", "aeron:udp?endpoint=localhost:40500",
                                                    A.DEFAULT_RESPONSE_STREAM_ID, A.ARCHIVE_PROTOCOL_VERSION,
                                                    b"user:pw")
    subscription.is_connected = True
    assert connect.poll() is None and connect.step is ConnectStep.AWAIT_CONNECT_RESPONSE


def test_an_ok_then_the_archive_id_make_the_connection_and_a_keep_alive_goes_out():
    connect = start()
    archive = connected_to_archive(connect)
    [request] = sent(connect)
    archive.respond(request.correlation_id)
    assert connect.poll() is None and connect.step is ConnectStep.SEND_ARCHIVE_ID_REQUEST  # sent on the next poll
    assert connect.poll() is None and connect.step is ConnectStep.AWAIT_ARCHIVE_ID_RESPONSE
    archive_id_request = sent(connect)[-1]
    assert (type(archive_id_request).__name__, archive_id_request.control_session_id) == ("ArchiveIdRequest", SESSION)
    assert archive_id_request.correlation_id != request.correlation_id
    archive.respond(archive_id_request.correlation_id, relevant_id=4242)
    connection = connect.poll()
    assert (connection.control_session_id, connection.archive_id, connection.archive_version) == \
        (SESSION, 4242, A.ARCHIVE_PROTOCOL_VERSION)
    keep_alive = sent(connect)[-1]
    assert (type(keep_alive).__name__, keep_alive.control_session_id) == ("KeepAliveRequest", SESSION)
    assert connect.step is ConnectStep.DONE
    connect.close()  # spent: the connection keeps its publication and subscription
    assert not connection.subscription.is_closed and connect.fake_aeron.removed == []


def test_an_archive_older_than_archive_id_is_connected_without_asking_it():
    connect = start()
    archive = connected_to_archive(connect)
    archive.respond(sent(connect)[0].correlation_id, version=(1 << 16) | (10 << 8))
    connection = connect.poll()
    assert connection.archive_id == A.NULL_VALUE
    assert [type(m).__name__ for m in sent(connect)] == ["AuthConnectRequest", "KeepAliveRequest"]


def test_a_challenge_is_answered_with_the_suppliers_on_challenge_under_a_new_correlation_id():
    supplier = Supplier()
    connect = start(supplier)
    archive = connected_to_archive(connect)
    [request] = sent(connect)
    archive.challenge(request.correlation_id, b"nonce-123")
    assert connect.poll() is None and connect.step is ConnectStep.SEND_CHALLENGE_RESPONSE
    assert supplier.challenges == [b"nonce-123"]
    assert connect.poll() is None
    answer = sent(connect)[-1]
    assert (type(answer).__name__, answer.control_session_id, bytes(answer.encoded_credentials)) == \
        ("ChallengeResponse", SESSION, b"321-ecnon")
    assert answer.correlation_id != request.correlation_id
    assert connect.step is ConnectStep.AWAIT_CHALLENGE_RESPONSE
    archive.respond(answer.correlation_id)  # the archive answers the connect under the answer's correlation id
    assert connect.poll() is None and connect.step is ConnectStep.SEND_ARCHIVE_ID_REQUEST


def test_a_replication_cannot_answer_a_challenge_with_its_requests_credentials():
    connect = start(ReplicationCredentialsSupplier(b"secret"))
    archive = connected_to_archive(connect)
    assert bytes(sent(connect)[0].encoded_credentials) == b"secret"
    archive.challenge(sent(connect)[0].correlation_id, b"nonce")
    with pytest.raises(ArchiveError, match="Replication does not support challenge/response authentication"):
        connect.poll()


def test_an_error_answer_closes_the_session_and_raises_with_the_archives_code():
    connect = start()
    archive = connected_to_archive(connect)
    archive.respond(sent(connect)[0].correlation_id, relevant_id=A.ARCHIVE_ERROR_CODES["AUTHENTICATION_REJECTED"],
                    code=ERROR, message="authentication rejected")
    with pytest.raises(ArchiveConnectError, match="refused the connect: authentication rejected") as caught:
        connect.poll()
    assert caught.value.error_code_name == "AUTHENTICATION_REJECTED"
    close = sent(connect)[-1]
    assert (type(close).__name__, close.control_session_id) == ("CloseSessionRequest", SESSION)


def test_a_connect_not_done_within_the_message_timeout_names_its_step():
    connect = start()
    connected_to_archive(connect)
    connect.clock.now = TIMEOUT_NS
    assert connect.poll() is None  # at the deadline: still waiting
    connect.clock.now = TIMEOUT_NS + 1
    with pytest.raises(ArchiveConnectError, match="Archive connect timeout: step=AWAIT_CONNECT_RESPONSE "
                                                  "subscription.uri=aeron:udp"):
        connect.poll()


def test_a_registration_the_driver_refuses_ends_the_connect_and_close_gives_up_the_other():
    connect = start()
    aeron = connect.fake_aeron
    publication_id = aeron.publications[0].registration_id
    subscription_id = aeron.subscriptions[0].registration_id
    aeron.pending.add(subscription_id)
    aeron.refused[publication_id] = RegistrationError(11, "endpoint port 0 for a publication")
    with pytest.raises(RegistrationError):
        connect.poll()
    connect.close()
    assert sorted(aeron.removed) == sorted([publication_id, subscription_id])  # neither was made: both removed
