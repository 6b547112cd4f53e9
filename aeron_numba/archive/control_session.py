"""One archive client's control session (spec/archive.md §6.1): its response publication, the responses waiting
to be sent, and its liveness.

CONNECTING: the response publication was added. Once it has a subscriber the session is CONNECTED and the
archive's authenticator decides (``authentication.py``; the session is its ``SessionProxy``): authenticated, the
connect OK goes out (with the archive's protocol version) and the session is ACTIVE; challenged, a ``Challenge``
goes out and the session is CHALLENGED until the authenticator decides on the client's answer; rejected, or
undecided at the connect timeout, an AUTHENTICATION_REJECTED error goes out and the session is DONE. It is DONE
too when closed by the client, when the response publication does not connect within the connect timeout, when
a response stays unsendable (back-pressured) longer than the connect timeout, or when the response publication
loses its subscriber (the client is gone).

Responses go out through the session's ``ControlResponseProxy``: each is queued as a call of one of its typed send
methods (as Aeron's ControlSession queues its proxy calls) and made, in order, by ``do_work``; a call the
publication refused for back pressure is made again in the next duty cycle.
"""

from __future__ import annotations

import collections
import enum
import functools
import time
from typing import Callable

from aeron_numba.archive.authentication import Authenticator, NullAuthenticator
from aeron_numba.archive.control_response_proxy import ControlResponseProxy
from aeron_numba.codecs.sbe import MalformedMessageError
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED

OK = A.CONTROL_RESPONSE_CODES["OK"]
ERROR = A.CONTROL_RESPONSE_CODES["ERROR"]
RECORDING_UNKNOWN = A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"]
SUBSCRIPTION_UNKNOWN = A.CONTROL_RESPONSE_CODES["SUBSCRIPTION_UNKNOWN"]


class ControlSessionState(enum.Enum):
    CONNECTING = "connecting"  # the response publication has no subscriber yet
    CONNECTED = "connected"  # the authenticator has not decided yet
    CHALLENGED = "challenged"  # a Challenge went out; the authenticator decides on the answer
    AUTHENTICATED = "authenticated"  # the connect OK goes out next
    REJECTED = "rejected"  # AUTHENTICATION_REJECTED goes out, then DONE
    ACTIVE = "active"
    DONE = "done"


#: States in which the authenticator may still decide.
_DECIDING = (ControlSessionState.CONNECTED, ControlSessionState.CHALLENGED)


class ControlSession:
    def __init__(self, *, control_session_id: int, correlation_id: int, publication, connect_timeout_ns: int,
                 liveness_interval_ns: int, now_ns: int, authenticator: Authenticator | None = None,
                 epoch_clock_ms=None, on_error=None):
        """``authenticator`` decides the session (default: everyone); ``epoch_clock_ms()`` is the time it is given;
        ``on_error(exc)`` records a hook that raised (the session is then rejected)."""
        self.control_session_id = control_session_id
        self.connect_correlation_id = correlation_id
        self.publication = publication
        self.proxy = ControlResponseProxy(publication)
        self.connect_timeout_ns = connect_timeout_ns
        self.liveness_interval_ns = liveness_interval_ns
        self.state = ControlSessionState.CONNECTING
        self.deadline_ns = now_ns + connect_timeout_ns
        self.next_liveness_ns = now_ns + liveness_interval_ns
        self.reason = ""
        self.request_image: tuple[int, int] | None = None  # (control subscription id, session id) of its requests
        self._queue: collections.deque[Callable[[], bool]] = collections.deque()  # proxy calls not yet made
        self._blocked_since_ns: int | None = None
        self.authenticator = authenticator if authenticator is not None else NullAuthenticator()
        self.epoch_clock_ms = epoch_clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.on_error = on_error or (lambda exc: None)
        self.encoded_principal = b""
        self._rejection: tuple[str, str] | None = None  # (reason, error code) before the response stream was there

    # ------------------------------------------------------------------------------ SessionProxy (auth)
    @property
    def session_id(self) -> int:
        return self.control_session_id

    def challenge(self, encoded_challenge: bytes) -> bool:
        """Send the client a Challenge; its ChallengeResponse goes to the authenticator."""
        if self.state not in _DECIDING:
            return False
        self._send(self.proxy.challenge, self.control_session_id, self.connect_correlation_id,
                   A.ARCHIVE_PROTOCOL_VERSION, bytes(encoded_challenge))
        self.state = ControlSessionState.CHALLENGED
        return True

    def authenticate(self, encoded_principal: bytes) -> bool:
        if self.state not in _DECIDING:
            return False
        self.encoded_principal = bytes(encoded_principal)
        self.state = ControlSessionState.AUTHENTICATED
        return True

    def reject(self, reason: str = "authentication rejected", error_code: str = "AUTHENTICATION_REJECTED") -> None:
        """Refuse the connect: the client gets an ERROR with ``error_code``, then the session ends."""
        if self.state is ControlSessionState.CONNECTING:
            self._rejection = (reason, error_code)  # sent once the client's response subscription is there
        elif self.state in _DECIDING:
            self.error(self.connect_correlation_id, error_code, reason)
            self.reason = reason
            self.state = ControlSessionState.REJECTED

    def on_connect_request(self, encoded_credentials: bytes) -> None:
        """The connect's credentials (empty for a plain ConnectRequest) go to the authenticator."""
        self._call_authenticator(self.authenticator.on_connect_request, self.control_session_id,
                                 bytes(encoded_credentials))

    def on_challenge_response(self, encoded_credentials: bytes, correlation_id: int | None = None) -> bool:
        """The client answered the Challenge: hand the credentials to the authenticator. False if the session
        was not challenged (the answer is ignored). As Aeron's, the connect is answered under the correlation id
        of the ChallengeResponse (Aeron's client awaits its answer under that id)."""
        if self.state is not ControlSessionState.CHALLENGED:
            return False
        if correlation_id is not None:
            self.connect_correlation_id = correlation_id
        self._call_authenticator(self.authenticator.on_challenge_response, self.control_session_id,
                                 bytes(encoded_credentials))
        return True

    def _call_authenticator(self, hook, *args) -> None:
        """A hook that raises rejects the session (and is recorded): another party's bug must not stop the archive."""
        try:
            hook(*args, self.epoch_clock_ms())
        except Exception as exc:  # noqa: BLE001 - any failure of user code
            self.on_error(exc)
            self.reject(f"authentication failed: {type(exc).__name__}: {exc}")

    # ---------------------------------------------------------------------------------------- responses
    def respond(self, correlation_id: int, code: int = OK, relevant_id: int = 0, error_message: str = "") -> None:
        self._send(self.proxy.control_response, self.control_session_id, correlation_id, relevant_id, code,
                   A.ARCHIVE_PROTOCOL_VERSION, error_message)

    def error(self, correlation_id: int, error_code: str, message: str) -> None:
        """An ERROR response: ``relevantId`` carries the archive error code (§6.2)."""
        self.respond(correlation_id, ERROR, A.ARCHIVE_ERROR_CODES[error_code], message)

    def signal(self, correlation_id: int, recording_id: int, subscription_id: int, position: int, signal: str) -> None:
        self._send(self.proxy.recording_signal_event, self.control_session_id, correlation_id, recording_id,
                   subscription_id, position, A.RECORDING_SIGNALS[signal])

    def send_descriptor(self, correlation_id: int, catalog_body: bytes) -> None:
        """A RecordingDescriptor of a catalog entry (its body as ``Catalog.descriptor_body`` gives it)."""
        self._send(self.proxy.catalog_recording_descriptor, self.control_session_id, correlation_id, catalog_body)

    def send_subscription_descriptor(self, correlation_id: int, subscription_id: int, stream_id: int,
                                     stripped_channel: str) -> None:
        self._send(self.proxy.recording_subscription_descriptor, self.control_session_id, correlation_id,
                   subscription_id, stream_id, stripped_channel)

    def _send(self, send_method, *args) -> None:
        """Send through the proxy at once when the session is active and nothing waits before it (as Aeron's
        ControlSession does), else queue the call: queued calls are made in order as the response publication takes
        them. Sent at once, a response that cannot be encoded (a text that is not ASCII) raises to the handler
        that made it, whose request is then answered with an ERROR."""
        if self.state is ControlSessionState.DONE:
            return
        if self.state is ControlSessionState.ACTIVE and not self._queue and send_method(*args):
            return
        self._queue.append(functools.partial(send_method, *args))

    # ----------------------------------------------------------------------------------------- duty cycle
    def do_work(self, now_ns: int) -> int:
        if self.state is ControlSessionState.DONE:
            return 0
        if self.state is ControlSessionState.CONNECTING:
            if self.publication.is_connected:
                self.state = ControlSessionState.CONNECTED
                if self._rejection is not None:
                    self.reject(*self._rejection)
            elif now_ns > self.deadline_ns:
                return self.abort("response publication not connected within the connect timeout")
            else:
                return 0
        if not self.publication.is_connected:
            return self.abort("response publication disconnected (client gone)")
        if self.state is ControlSessionState.CONNECTED:
            self._call_authenticator(self.authenticator.on_connected_session, self)
        elif self.state is ControlSessionState.CHALLENGED:
            self._call_authenticator(self.authenticator.on_challenged_session, self)
        if self.state is ControlSessionState.AUTHENTICATED:
            self.state = ControlSessionState.ACTIVE
            self._queue.appendleft(functools.partial(
                self.proxy.control_response, self.control_session_id, self.connect_correlation_id,
                self.control_session_id, OK, A.ARCHIVE_PROTOCOL_VERSION, ""))
        elif self.state in _DECIDING and now_ns > self.deadline_ns:
            self.reject("authentication not decided within the connect timeout")
        if self.state is ControlSessionState.ACTIVE and now_ns >= self.next_liveness_ns:
            self.next_liveness_ns = now_ns + self.liveness_interval_ns
            if not self._queue:  # an OK with correlation -1 finds out a dead response publication
                self.respond(-1, OK, -1)
        work = 0
        while self._queue:
            try:
                sent = self._queue[0]()
            except MalformedMessageError as exc:  # a response that cannot be encoded (a text not ASCII): dropped
                self._queue.popleft()
                self.on_error(exc)
                continue
            if sent:
                self._queue.popleft()
                self._blocked_since_ns = None
                work += 1
                continue
            result = self.proxy.last_result
            if result in (BACK_PRESSURED, ADMIN_ACTION):
                if self._blocked_since_ns is None:
                    self._blocked_since_ns = now_ns
                elif now_ns - self._blocked_since_ns > self.connect_timeout_ns:
                    return self.abort("responses back-pressured for longer than the connect timeout")
                break
            return self.abort(f"response publication offer failed ({result})")
        if self.state is ControlSessionState.REJECTED and not self._queue:
            self.state = ControlSessionState.DONE  # the rejection went out
            work += 1
        return work

    def add_idle_watch(self, watch) -> bool:
        """An ACTIVE session with nothing queued waits for its response publication's connection to change and for
        its next liveness check (``agent/idle_watch.py``); one connecting, deciding or sending cannot wait."""
        if self.state is not ControlSessionState.ACTIVE or self._queue:
            return False
        self.publication.add_idle_watch(watch)
        watch.run_by(self.next_liveness_ns)
        return True

    def abort(self, reason: str) -> int:
        self.reason = reason
        self.state = ControlSessionState.DONE
        self._queue.clear()
        return 1

    def close(self) -> None:
        self.state = ControlSessionState.DONE
        self.publication.close()
