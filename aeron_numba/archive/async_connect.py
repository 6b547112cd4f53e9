"""Connecting to an archive without blocking: Aeron's ``AeronArchive.AsyncConnect``, the one implementation of the
connect steps. ``AeronArchive.connect`` polls it until done (idling in between); the archive's replication sessions
poll it once per duty cycle, so the archive never waits on another archive or on the driver.

Each ``poll()`` takes what steps it can, in Aeron's order:

ADD_PUBLICATION: the control request publication and the control response subscription, both added through the
client's asynchronous adds, are made. AWAIT_PUBLICATION_CONNECTED: an archive listens on the request channel.
SEND_CONNECT_REQUEST: an ``AuthConnectRequest`` with the credentials supplier's ``encoded_credentials()`` and the
response channel as the driver bound it (a wildcard port 0 replaced by the real one: the archive could never
answer port 0). AWAIT_SUBSCRIPTION_CONNECTED: the archive's response publication has reached us.
AWAIT_CONNECT_RESPONSE: a ``Challenge`` is answered with the supplier's ``on_challenge(challenge)`` under a new
correlation id (SEND_CHALLENGE_RESPONSE, AWAIT_CHALLENGE_RESPONSE); the OK gives the control session id, then the
archive id is asked for (SEND_ARCHIVE_ID_REQUEST, AWAIT_ARCHIVE_ID_RESPONSE) when the archive's protocol has it,
and a keep-alive goes out: DONE, ``poll()`` returns the ``ArchiveConnection``.

The whole connect has the context's message timeout (``ArchiveConnectError`` naming the step). An ERROR answer
closes the session and raises ``ArchiveConnectError`` with the archive's error code; a supplier refusing to answer
a challenge raises its own error. ``close()`` gives up a connect not done, pending registrations included.
"""

from __future__ import annotations

import enum
import time

from aeron_numba.archive.archive_error import ArchiveError
from aeron_numba.archive.control_response_poller import ControlResponsePoller
from aeron_numba.codecs.archive_proxies import ArchiveProxy
from aeron_numba.layout import archive as A

_OK, _ERROR = A.CONTROL_RESPONSE_CODES["OK"], A.CONTROL_RESPONSE_CODES["ERROR"]
PROTOCOL_VERSION_WITH_ARCHIVE_ID = (1 << 16) | (11 << 8)  # 1.11.0: archives that answer ArchiveIdRequest


class ArchiveConnectError(ArchiveError):
    """The archive could not be connected to: not there, too slow, or it refused (``error_code`` says why)."""


class ArchiveConnection:
    """An open control session on an archive: its publication, subscription, proxy and response poller."""

    def __init__(self, publication, subscription, proxy: ArchiveProxy, poller: ControlResponsePoller,
                 archive_id: int = A.NULL_VALUE, archive_version: int = 0):
        self.publication = publication
        self.subscription = subscription
        self.proxy = proxy
        self.poller = poller
        self.archive_id = archive_id
        self.archive_version = archive_version

    @property
    def control_session_id(self) -> int:
        return self.poller.control_session_id

    def close(self) -> None:
        """Tell the archive the session is over (one try: a gone archive has nobody to tell), then close."""
        if self.publication.is_connected:
            self.proxy.close_session_request(self.control_session_id)
        self.publication.close()
        self.subscription.close()


class ConnectStep(enum.Enum):
    """Aeron's ``AsyncConnect.State``, with its step numbers."""

    ADD_PUBLICATION = 0
    AWAIT_PUBLICATION_CONNECTED = 1
    SEND_CONNECT_REQUEST = 2
    AWAIT_SUBSCRIPTION_CONNECTED = 3
    AWAIT_CONNECT_RESPONSE = 4
    SEND_ARCHIVE_ID_REQUEST = 5
    AWAIT_ARCHIVE_ID_RESPONSE = 6
    DONE = 7
    SEND_CHALLENGE_RESPONSE = 8
    AWAIT_CHALLENGE_RESPONSE = 9


class AsyncConnect:
    def __init__(self, aeron, ctx, nano_clock=time.monotonic_ns):
        """``ctx`` is an ``AeronArchiveContext`` (channels, stream ids, message timeout, credentials supplier)."""
        self.aeron = aeron
        self.ctx = ctx
        self.nano_clock = nano_clock
        self.deadline_ns = nano_clock() + ctx.message_timeout_ns
        self.step = ConnectStep.ADD_PUBLICATION
        self.correlation_id = A.NULL_VALUE
        self.control_session_id = A.NULL_VALUE
        self.subscription = self.publication = self.proxy = self.poller = None
        self._archive_version = 0
        self._challenge_answer = b""
        self._subscription_id = aeron.async_add_subscription(ctx.control_response_channel,
                                                             ctx.control_response_stream_id)
        try:
            self._publication_id = aeron.async_add_exclusive_publication(ctx.control_request_channel,
                                                                         ctx.control_request_stream_id)
        except BaseException:
            aeron.async_remove_subscription(self._subscription_id)
            raise

    def poll(self) -> ArchiveConnection | None:
        """Take the steps that can be taken now; the connection once made (then this object is spent)."""
        self._check_deadline()
        if self.step is ConnectStep.ADD_PUBLICATION:
            if not self._registrations_made():
                return None
            self.step = ConnectStep.AWAIT_PUBLICATION_CONNECTED
        if self.step is ConnectStep.AWAIT_PUBLICATION_CONNECTED:
            if not self.publication.is_connected:
                return None
            self.step = ConnectStep.SEND_CONNECT_REQUEST
        if self.step is ConnectStep.SEND_CONNECT_REQUEST:
            response_channel = self.subscription.try_resolve_channel_endpoint_port()
            if response_channel is None:
                return None
            if self.correlation_id == A.NULL_VALUE:
                self.correlation_id = self.aeron.next_correlation_id()
            if not self.proxy.auth_connect_request(self.correlation_id, self.ctx.control_response_stream_id,
                                                   A.ARCHIVE_PROTOCOL_VERSION, response_channel,
                                                   bytes(self.ctx.credentials_supplier.encoded_credentials())):
                return None
            self.step = ConnectStep.AWAIT_SUBSCRIPTION_CONNECTED
        if self.step is ConnectStep.AWAIT_SUBSCRIPTION_CONNECTED:
            if not self.subscription.is_connected:
                return None
            self.step = ConnectStep.AWAIT_CONNECT_RESPONSE
        if self.step is ConnectStep.SEND_ARCHIVE_ID_REQUEST:
            if not self.proxy.archive_id_request(self.control_session_id, self.correlation_id):
                return None
            self.step = ConnectStep.AWAIT_ARCHIVE_ID_RESPONSE
        if self.step is ConnectStep.SEND_CHALLENGE_RESPONSE:
            if not self.proxy.challenge_response(self.control_session_id, self.correlation_id,
                                                 self._challenge_answer):
                return None
            self.step = ConnectStep.AWAIT_CHALLENGE_RESPONSE
        return self._on_responses()

    def _registrations_made(self) -> bool:
        """Whether the driver has made both registrations (its refusal raises, as Aeron's ``get*``)."""
        if self.subscription is None:
            self.subscription = self.aeron.get_subscription(self._subscription_id)
        if self.publication is None:
            self.publication = self.aeron.get_exclusive_publication(self._publication_id)
        if self.subscription is None or self.publication is None:
            return False
        self.proxy = ArchiveProxy(self.publication, retry_attempts=1)  # the caller polls again: no spinning here
        self.poller = ControlResponsePoller(self.subscription)
        return True

    def _on_responses(self) -> ArchiveConnection | None:
        poller = self.poller
        poller.poll()
        challenge = poller.challenges.pop(self.correlation_id, None)
        if challenge is not None:  # Aeron: answered with what the supplier makes of it, under a new correlation id
            self.control_session_id = challenge.control_session_id
            answer = self.ctx.credentials_supplier.on_challenge(bytes(challenge.encoded_challenge))
            self._challenge_answer = bytes(answer)
            self.correlation_id = self.aeron.next_correlation_id()
            self.step = ConnectStep.SEND_CHALLENGE_RESPONSE
            return None
        response = poller.responses.pop(self.correlation_id, None)
        if response is None:
            return None
        self.control_session_id = response.control_session_id
        if response.code != _OK:
            self.proxy.close_session_request(self.control_session_id)
            if response.code == _ERROR:
                raise ArchiveConnectError(f"archive on {self.ctx.control_request_channel} refused the connect: "
                                          f"{response.error_message}", response.relevant_id, self.correlation_id)
            raise ArchiveConnectError(f"unexpected response to the connect: code={response.code}",
                                      correlation_id=self.correlation_id)
        if self.step is ConnectStep.AWAIT_ARCHIVE_ID_RESPONSE:
            return self._done(response.relevant_id)
        self._archive_version = response.version
        if response.version < PROTOCOL_VERSION_WITH_ARCHIVE_ID:
            return self._done(A.NULL_VALUE)
        poller.control_session_id = self.control_session_id  # from here on, only our session's answers
        self.correlation_id = self.aeron.next_correlation_id()
        self.step = ConnectStep.SEND_ARCHIVE_ID_REQUEST
        return None

    def _done(self, archive_id: int) -> ArchiveConnection:
        if not self.proxy.keep_alive_request(self.control_session_id, A.NULL_VALUE):
            self.proxy.close_session_request(self.control_session_id)
            raise ArchiveConnectError("failed to send keep alive after archive connect")
        self.poller.control_session_id = self.control_session_id
        self.step = ConnectStep.DONE
        return ArchiveConnection(self.publication, self.subscription, self.proxy, self.poller, archive_id,
                                 self._archive_version)

    def _check_deadline(self) -> None:
        if self.nano_clock() - self.deadline_ns > 0:
            uri = f"publication.uri={self.ctx.control_request_channel}" if self.step.value < 3 else \
                f"subscription.uri={self.ctx.control_response_channel}"
            raise ArchiveConnectError(f"Archive connect timeout: step={self.step.name} {uri} (message timeout "
                                      f"{self.ctx.message_timeout_ns / 1e9:g}s)")

    def close(self) -> None:
        """Give up a connect not done: its registrations go, made or still pending."""
        if self.step is ConnectStep.DONE:
            return
        if self.publication is not None:
            self.publication.close()
        else:
            self.aeron.async_remove_publication(self._publication_id)
        if self.subscription is not None:
            self.subscription.close()
        else:
            self.aeron.async_remove_subscription(self._subscription_id)
