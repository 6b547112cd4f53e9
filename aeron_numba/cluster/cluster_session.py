"""One client session as the consensus module sees it (Aeron's ``ClusterSession``): its state from the connect to
the close, its response publication to the client's egress, the activity time its timeout runs from, and the
log positions it was opened and closed at.

States, as Aeron's: INIT (connect request seen, response publication being added), CONNECTING, CONNECTED (the
publication reached the client: the authenticator may decide), CHALLENGED, AUTHENTICATED (to be opened in the
log), REJECTED (an error event to send before closing), OPEN, CLOSING (a close to append to the log), INVALID (its
response channel could not be used), CLOSED.

The session holds no bytes: the consensus module's egress publisher encodes what it sends on the session's
publication. ``ClusterSessionProxy`` is the ``SessionProxy`` an authenticator decides through.
"""

from __future__ import annotations

import enum

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster_schema import ENUMS

NULL_POSITION = -1
EVENT_CODES = ENUMS["EventCode"]
CLOSE_REASONS = ENUMS["CloseReason"]
CLOSE_REASON_NAMES = {code: name for name, code in CLOSE_REASONS.items()}
#: Aeron's ClusterSession texts for refused connects.
SESSION_LIMIT_MSG = "concurrent session limit"
SESSION_INVALID_VERSION_MSG = "invalid client version"
AUTHENTICATION_REJECTED_MSG = "Authentication rejected"


class State(enum.Enum):
    INIT = 0
    CONNECTING = 1
    CONNECTED = 2
    CHALLENGED = 3
    AUTHENTICATED = 4
    REJECTED = 5
    OPEN = 6
    CLOSING = 7
    INVALID = 8
    CLOSED = 9


class Action(enum.Enum):
    """What the session was opened for (only CLIENT sessions come through ingress)."""
    CLIENT = 0
    BACKUP = 1
    HEARTBEAT = 2
    STANDBY_SNAPSHOT = 3


class ClusterSession:
    def __init__(self, cluster_session_id: int, response_stream_id: int, response_channel: str,
                 action: Action = Action.CLIENT):
        self.id = cluster_session_id
        self.response_stream_id = response_stream_id
        self.response_channel = response_channel
        self.action = action
        self._open_table = None  # the consensus module's OpenSessionTable, once the session is one of its own
        self._state = State.INIT
        self.correlation_id = NULL_VALUE
        self.opened_log_position = NULL_POSITION
        self.closed_log_position = NULL_POSITION
        self._time_of_last_activity_ns = 0
        self.close_reason: int | None = None
        self.encoded_principal = b""
        self.event_code = EVENT_CODES["OK"]
        self.response_detail = ""
        self.has_open_event_pending = False
        self.has_new_leader_event_pending = False
        self._aeron = None
        self._registration_id = NULL_VALUE
        self.response_publication = None

    # --------------------------------------------------------------------- state seen by the compiled ingress path
    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, value: State) -> None:
        """Every change of state goes through here, so that the open session table (``kernels/cluster_ingress.py``)
        holds exactly the OPEN sessions: the compiled path appends only theirs."""
        previous, self._state = self._state, value
        table = self._open_table
        if table is not None and (previous is State.OPEN) != (value is State.OPEN):
            if value is State.OPEN:
                table.add(self.id)
            else:
                self._time_of_last_activity_ns = self._activity_in(previous)
                table.remove(self.id)

    def _activity_in(self, state: State) -> int:
        activity = self._time_of_last_activity_ns
        table = self._open_table
        if table is not None and state is State.OPEN:
            activity = max(activity, table.activity_ns(self.id))
        return activity

    @property
    def time_of_last_activity_ns(self) -> int:
        """The latest of what the Python paths set and, while OPEN, of the compiled ingress path's appends."""
        return self._activity_in(self._state)

    @time_of_last_activity_ns.setter
    def time_of_last_activity_ns(self, value: int) -> None:
        self._time_of_last_activity_ns = value

    def attach_open_table(self, table) -> None:
        """Keep ``table`` (an ``OpenSessionTable``) in step with this session's state from now on."""
        self._open_table = table
        if self._state is State.OPEN:
            table.add(self.id)

    def detach_open_table(self) -> None:
        table = self._open_table
        if table is not None:
            self._time_of_last_activity_ns = self.time_of_last_activity_ns
            table.remove(self.id)
            self._open_table = None

    def __repr__(self) -> str:
        return (f"ClusterSession{{id={self.id}, correlationId={self.correlation_id}, "
                f"openedLogPosition={self.opened_log_position}, closedLogPosition={self.closed_log_position}, "
                f"state={self.state.name}, responseStreamId={self.response_stream_id}, "
                f"responseChannel={self.response_channel}}}")

    # ------------------------------------------------------------------------------------------ publication
    def async_connect(self, aeron) -> None:
        """Start adding the response publication (Aeron's ``asyncConnect``): a bad channel makes the session
        INVALID, to be dropped, not an error of the consensus module."""
        self._aeron = aeron
        try:
            self._registration_id = aeron.async_add_publication(self.response_channel, self.response_stream_id)
        except Exception as exc:  # the client's channel: its fault, never ours
            self.state = State.INVALID
            self.response_detail = f"invalid response channel: {exc}"

    def connect(self, aeron) -> None:
        """Add the response publication again (a session restored from the log or a snapshot on a new leader)."""
        if self.response_publication is None and self._registration_id == NULL_VALUE:
            self.async_connect(aeron)

    def is_response_publication_connected(self, aeron=None) -> bool:
        if self.response_publication is None and self._registration_id != NULL_VALUE:
            aeron = aeron or self._aeron
            try:
                publication = aeron.get_publication(self._registration_id)
            except Exception as exc:
                self.state = State.INVALID
                self.response_detail = str(exc)
                self._registration_id = NULL_VALUE
                return False
            if publication is not None:
                self.response_publication = publication
                self._registration_id = NULL_VALUE
                if self.state == State.INIT:
                    self.state = State.CONNECTING
        return self.response_publication is not None and self.response_publication.is_connected

    def disconnect(self) -> None:
        """Close the response publication (the session itself lives on in the log)."""
        publication, self.response_publication = self.response_publication, None
        if publication is not None:
            try:
                publication.close()
            except Exception:
                pass
        if self._registration_id != NULL_VALUE and self._aeron is not None:
            try:
                self._aeron.async_remove_publication(self._registration_id)
            except Exception:
                pass
            self._registration_id = NULL_VALUE

    def close(self) -> None:
        self.disconnect()
        self.state = State.CLOSED

    # ------------------------------------------------------------------------------------------ life cycle
    def last_activity_ns(self, now_ns: int, correlation_id: int) -> None:
        self.time_of_last_activity_ns = now_ns
        self.correlation_id = correlation_id

    def authenticate(self, encoded_principal: bytes) -> None:
        self.encoded_principal = bytes(encoded_principal or b"")
        self.state = State.AUTHENTICATED

    def reject(self, event_code: int, detail: str) -> None:
        self.event_code = event_code
        self.response_detail = detail
        self.state = State.REJECTED

    def open(self, opened_log_position: int) -> None:
        self.opened_log_position = opened_log_position
        self.state = State.OPEN
        self.encoded_principal = b""

    def closing(self, close_reason: int) -> None:
        self.close_reason = close_reason
        self.state = State.CLOSING

    @property
    def is_open(self) -> bool:
        return self.state == State.OPEN

    def append_session_to_log_and_send_open(self, log_publisher, egress_publisher, leadership_term_id: int,
                                            member_id: int, now_ns: int, timestamp: int) -> bool:
        """Aeron's order: SessionOpenEvent in the log first, then SessionEvent OK to the client (which the caller
        retries through ``has_open_event_pending`` if the egress is back-pressured)."""
        if not self.response_publication.is_connected:
            return False
        position = log_publisher.append_session_open(self, leadership_term_id, timestamp)
        if position <= 0:
            return False
        self.open(position)
        self.time_of_last_activity_ns = now_ns
        self.has_open_event_pending = True
        self.send_session_open_event(egress_publisher, leadership_term_id, member_id)
        return True

    def send_session_open_event(self, egress_publisher, leadership_term_id: int, member_id: int) -> int:
        if egress_publisher.send_event(self, leadership_term_id, member_id, EVENT_CODES["OK"], ""):
            self.has_open_event_pending = False
            return 1
        return 0


class ClusterSessionProxy:
    """The ``SessionProxy`` an authenticator is handed for one pending session (Aeron's ``ClusterSessionProxy``)."""

    def __init__(self, egress_publisher):
        self._egress_publisher = egress_publisher
        self._session: ClusterSession | None = None

    def session(self, session: ClusterSession) -> "ClusterSessionProxy":
        self._session = session
        return self

    @property
    def session_id(self) -> int:
        return self._session.id

    def challenge(self, encoded_challenge: bytes) -> bool:
        if self._egress_publisher.send_challenge(self._session, encoded_challenge):
            self._session.state = State.CHALLENGED
            return True
        return False

    def authenticate(self, encoded_principal: bytes) -> bool:
        self._session.authenticate(encoded_principal)
        return True

    def reject(self) -> None:
        self._session.reject(EVENT_CODES["AUTHENTICATION_REJECTED"], AUTHENTICATION_REJECTED_MSG)


def close_reason_name(code: int) -> str:
    try:
        return CLOSE_REASON_NAMES[code]
    except KeyError:
        raise ClusterError(f"closeReason={code} is not one of {CLOSE_REASON_NAMES}") from None
