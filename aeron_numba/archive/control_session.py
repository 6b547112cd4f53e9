"""One archive client's control session (spec/archive.md §6.1): its response publication, the responses waiting
to be sent, and its liveness.

CONNECTING: the response publication was added; once it has a subscriber the connect OK goes out (with the
archive's protocol version) and the session is ACTIVE. It is DONE when closed by the client, when the response
publication does not connect within the connect timeout, when a response stays unsendable (back-pressured)
longer than the connect timeout, or when the response publication loses its subscriber (the client is gone).
"""

from __future__ import annotations

import collections
import enum

from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication import ADMIN_ACTION, BACK_PRESSURED

OK = A.CONTROL_RESPONSE_CODES["OK"]
ERROR = A.CONTROL_RESPONSE_CODES["ERROR"]
RECORDING_UNKNOWN = A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"]
SUBSCRIPTION_UNKNOWN = A.CONTROL_RESPONSE_CODES["SUBSCRIPTION_UNKNOWN"]


class ControlSessionState(enum.Enum):
    CONNECTING = "connecting"
    ACTIVE = "active"
    DONE = "done"


class ControlSession:
    def __init__(self, *, control_session_id: int, correlation_id: int, publication, connect_timeout_ns: int,
                 liveness_interval_ns: int, now_ns: int):
        self.control_session_id = control_session_id
        self.connect_correlation_id = correlation_id
        self.publication = publication
        self.connect_timeout_ns = connect_timeout_ns
        self.liveness_interval_ns = liveness_interval_ns
        self.state = ControlSessionState.CONNECTING
        self.deadline_ns = now_ns + connect_timeout_ns
        self.next_liveness_ns = now_ns + liveness_interval_ns
        self.reason = ""
        self.request_image: tuple[int, int] | None = None  # (control subscription id, session id) of its requests
        self._queue: collections.deque[bytes] = collections.deque()
        self._blocked_since_ns: int | None = None

    # ---------------------------------------------------------------------------------------- responses
    def respond(self, correlation_id: int, code: int = OK, relevant_id: int = 0, error_message: str = "") -> None:
        self.send(ARCHIVE.encode(ARCHIVE.ControlResponse(
            control_session_id=self.control_session_id, correlation_id=correlation_id, relevant_id=relevant_id,
            code=code, version=A.ARCHIVE_PROTOCOL_VERSION, error_message=error_message)))

    def error(self, correlation_id: int, error_code: str, message: str) -> None:
        """An ERROR response: ``relevantId`` carries the archive error code (§6.2)."""
        self.respond(correlation_id, ERROR, A.ARCHIVE_ERROR_CODES[error_code], message)

    def send(self, message: bytes) -> None:
        """Queue an encoded message; it goes out in order as the response publication takes it."""
        if self.state is not ControlSessionState.DONE:
            self._queue.append(message)

    def signal(self, correlation_id: int, recording_id: int, subscription_id: int, position: int, signal: str) -> None:
        self.send(ARCHIVE.encode(ARCHIVE.RecordingSignalEvent(
            control_session_id=self.control_session_id, correlation_id=correlation_id, recording_id=recording_id,
            subscription_id=subscription_id, position=position, signal=A.RECORDING_SIGNALS[signal])))

    # ----------------------------------------------------------------------------------------- duty cycle
    def do_work(self, now_ns: int) -> int:
        if self.state is ControlSessionState.DONE:
            return 0
        if self.state is ControlSessionState.CONNECTING:
            if self.publication.is_connected:
                self.state = ControlSessionState.ACTIVE
                self._queue.appendleft(ARCHIVE.encode(ARCHIVE.ControlResponse(
                    control_session_id=self.control_session_id, correlation_id=self.connect_correlation_id,
                    relevant_id=self.control_session_id, code=OK, version=A.ARCHIVE_PROTOCOL_VERSION)))
            elif now_ns > self.deadline_ns:
                return self.abort("response publication not connected within the connect timeout")
            else:
                return 0
        if not self.publication.is_connected:
            return self.abort("response publication disconnected (client gone)")
        if now_ns >= self.next_liveness_ns:
            self.next_liveness_ns = now_ns + self.liveness_interval_ns
            if not self._queue:  # an OK with correlation -1 finds out a dead response publication
                self.respond(-1, OK, -1)
        work = 0
        while self._queue:
            result = self.publication.offer(self._queue[0])
            if result > 0:
                self._queue.popleft()
                self._blocked_since_ns = None
                work += 1
                continue
            if result in (BACK_PRESSURED, ADMIN_ACTION):
                if self._blocked_since_ns is None:
                    self._blocked_since_ns = now_ns
                elif now_ns - self._blocked_since_ns > self.connect_timeout_ns:
                    return self.abort("responses back-pressured for longer than the connect timeout")
                break
            return self.abort(f"response publication offer failed ({result})")
        return work

    def abort(self, reason: str) -> int:
        self.reason = reason
        self.state = ControlSessionState.DONE
        self._queue.clear()
        return 1

    def close(self) -> None:
        self.state = ControlSessionState.DONE
        self.publication.close()
