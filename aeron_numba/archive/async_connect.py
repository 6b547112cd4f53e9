"""A control session with another archive, opened without blocking (Aeron's ``AeronArchive.AsyncConnect``): the
archive's replication sessions are clients of the source archive, and the archive's duty cycle must never wait.

``AsyncConnect.poll()`` takes one step each call: the control request publication connects, the response
subscription's endpoint is resolved (a wildcard port 0 replaced by the bound one, as the Java client sends it),
an ``AuthConnectRequest`` goes out with the given credentials, a ``Challenge`` is answered with them again, and
the connect's OK gives the control session id: then ``poll()`` returns the ``ArchiveConnection``. A step not done
within the message timeout, or an ERROR answer, raises ``ArchiveConnectError``. Requests then go out through the
connection's generated ``ArchiveProxy`` and answers come in on its ``ControlResponsePoller``.
"""

from __future__ import annotations

import enum
import time

from aeron_numba.archive.control_response_poller import ControlResponsePoller
from aeron_numba.codecs.archive_proxies import ArchiveProxy
from aeron_numba.errors import AeronError
from aeron_numba.layout import archive as A


class ArchiveConnectError(AeronError):
    """The other archive could not be connected to (not there, refused, or too slow)."""


class ArchiveConnection:
    """An open control session on another archive."""

    def __init__(self, publication, subscription, proxy: ArchiveProxy, poller: ControlResponsePoller):
        self.publication = publication
        self.subscription = subscription
        self.proxy = proxy
        self.poller = poller

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
    AWAIT_PUBLICATION_CONNECTED = "await publication connected"
    RESOLVE_RESPONSE_CHANNEL = "resolve response channel"
    SEND_CONNECT = "send connect request"
    AWAIT_RESPONSE = "await connect response"
    DONE = "done"


class AsyncConnect:
    def __init__(self, aeron, *, control_request_channel: str, control_request_stream_id: int,
                 control_response_channel: str, control_response_stream_id: int = A.DEFAULT_RESPONSE_STREAM_ID,
                 encoded_credentials: bytes = b"", message_timeout_ns: int = A.DEFAULT_MESSAGE_TIMEOUT_NS,
                 nano_clock=time.monotonic_ns):
        self.aeron = aeron
        self.control_request_channel = control_request_channel
        self.control_request_stream_id = control_request_stream_id
        self.control_response_stream_id = control_response_stream_id
        self.encoded_credentials = bytes(encoded_credentials)
        self.message_timeout_ns = message_timeout_ns
        self.nano_clock = nano_clock
        self.deadline_ns = nano_clock() + message_timeout_ns
        self.subscription = aeron.add_subscription(control_response_channel, control_response_stream_id)
        try:
            self.publication = aeron.add_exclusive_publication(control_request_channel, control_request_stream_id)
        except BaseException:
            self.subscription.close()
            raise
        self.proxy = ArchiveProxy(self.publication, retry_attempts=1)  # the duty cycle comes back: no spinning
        self.poller = ControlResponsePoller(self.subscription)
        self.step = ConnectStep.AWAIT_PUBLICATION_CONNECTED
        self.correlation_id = A.NULL_VALUE
        self._response_channel = ""

    def poll(self) -> ArchiveConnection | None:
        """One step of the connect; the connection once it is made (then this object is spent)."""
        step = self.step
        if step is ConnectStep.AWAIT_PUBLICATION_CONNECTED:
            if self.publication.is_connected:
                self.step = ConnectStep.RESOLVE_RESPONSE_CHANNEL
            else:
                self._check_deadline(f"no archive on {self.control_request_channel} stream "
                                     f"{self.control_request_stream_id}")
        elif step is ConnectStep.RESOLVE_RESPONSE_CHANNEL:
            resolved = self.subscription.try_resolve_channel_endpoint_port()
            if resolved is not None:
                self._response_channel = resolved
                self.step = ConnectStep.SEND_CONNECT
            else:
                self._check_deadline(f"response channel {self.subscription.channel} did not become active")
        elif step is ConnectStep.SEND_CONNECT:
            if self.correlation_id == A.NULL_VALUE:
                self.correlation_id = self.aeron.next_correlation_id()
            if self.proxy.auth_connect_request(self.correlation_id, self.control_response_stream_id,
                                               A.ARCHIVE_PROTOCOL_VERSION, self._response_channel,
                                               self.encoded_credentials):
                self.step = ConnectStep.AWAIT_RESPONSE
            else:
                self._check_deadline("the connect request could not be sent")
        elif step is ConnectStep.AWAIT_RESPONSE:
            return self._await_response()
        return None

    def _await_response(self) -> ArchiveConnection | None:
        poller = self.poller
        poller.poll()
        challenge = poller.challenges.pop(self.correlation_id, None)
        if challenge is not None:  # the replication's credentials answer the challenge too (Aeron's supplier)
            self.proxy.challenge_response(challenge.control_session_id, self.correlation_id, self.encoded_credentials)
            return None
        response = poller.responses.pop(self.correlation_id, None)
        if response is None:
            self._check_deadline("no answer to the connect request")
            return None
        if response.code != A.CONTROL_RESPONSE_CODES["OK"]:
            raise ArchiveConnectError(f"archive on {self.control_request_channel} refused the connect: "
                                      f"{response.error_message}")
        poller.control_session_id = response.control_session_id
        self.step = ConnectStep.DONE
        return ArchiveConnection(self.publication, self.subscription, self.proxy, poller)

    def _check_deadline(self, what: str) -> None:
        if self.nano_clock() > self.deadline_ns:
            raise ArchiveConnectError(f"{what} within the message timeout of "
                                      f"{self.message_timeout_ns / 1e9:g}s (step: {self.step.value})")

    def close(self) -> None:
        """Give up a connect not yet made."""
        if self.step is not ConnectStep.DONE:
            self.publication.close()
            self.subscription.close()
