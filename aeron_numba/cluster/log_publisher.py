"""The leader's appends to the log (Aeron's ``LogPublisher``): client and service messages behind a
SessionMessageHeader, session open and close events, timer events, cluster actions and the new leadership term
event, encoded by the generated ``codecs.cluster_proxies.LogPublisher`` on the term's exclusive log publication.

Every append returns the log position after it (> 0), or 0 when the publication did not take it (back pressure,
not connected, no publication): the caller keeps the work and tries again on a later duty cycle. The
ClusterActionRequest and NewLeadershipTermEvent carry the position *after* themselves, as Aeron writes them, so
the consensus module and the services act on them at the same point of the log.
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_session import ClusterSession
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import LogPublisher as _LogProxy
from aeron_numba.layout.bits import NULL_VALUE, align
from aeron_numba.layout.frame import FRAME_ALIGNMENT, HEADER_LENGTH

_ACTION_LENGTH = CLUSTER.encoded_length(CLUSTER.ClusterActionRequest(
    leadership_term_id=0, log_position=0, timestamp=0, action=0, flags=0))
_NEW_TERM_EVENT_LENGTH = CLUSTER.encoded_length(CLUSTER.NewLeadershipTermEvent(
    leadership_term_id=0, log_position=0, timestamp=0, term_base_log_position=0, leader_member_id=0,
    log_session_id=0, time_unit=0, app_version=0))


class LogPublisher:
    def __init__(self, publication=None):
        self._proxy = _LogProxy(publication)
        self.publication = publication

    def set_publication(self, publication) -> None:
        self.publication = publication
        self._proxy.publication = publication

    # ------------------------------------------------------------------------------------------------ state
    @property
    def position(self) -> int:
        return 0 if self.publication is None else self.publication.position

    @property
    def session_id(self) -> int:
        return NULL_VALUE if self.publication is None else self.publication.session_id

    @property
    def is_connected(self) -> bool:
        return self.publication is not None and self.publication.is_connected

    def add_destination(self, endpoint_channel: str) -> None:
        self.publication.async_add_destination(endpoint_channel)

    def remove_destination(self, endpoint_channel: str) -> None:
        if self.publication is not None:
            self.publication.async_remove_destination(endpoint_channel)

    def disconnect(self) -> None:
        publication, self.publication = self.publication, None
        self._proxy.publication = None
        if publication is not None:
            publication.close()

    def _appended(self, sent: bool) -> int:
        return self._proxy.last_result if sent else 0

    # ------------------------------------------------------------------------------------------------ appends
    def append_message(self, leadership_term_id: int, cluster_session_id: int, timestamp: int, payload) -> int:
        if self.publication is None:
            return 0
        return self._appended(self._proxy.session_message_header(leadership_term_id, cluster_session_id,
                                                                 timestamp, payload))

    def append_session_open(self, session: ClusterSession, leadership_term_id: int, timestamp: int) -> int:
        if self.publication is None:
            return 0
        return self._appended(self._proxy.session_open_event(
            leadership_term_id, session.correlation_id, session.id, timestamp, session.response_stream_id,
            session.response_channel, session.encoded_principal))

    def append_session_close(self, session: ClusterSession, leadership_term_id: int, timestamp: int) -> bool:
        return self.publication is not None and self._proxy.session_close_event(
            leadership_term_id, session.id, timestamp, session.close_reason)

    def append_timer(self, correlation_id: int, leadership_term_id: int, timestamp: int) -> int:
        if self.publication is None:
            return 0
        return self._appended(self._proxy.timer_event(leadership_term_id, correlation_id, timestamp))

    def append_cluster_action(self, leadership_term_id: int, timestamp: int, action: int, flags: int) -> bool:
        if self.publication is None:
            return False
        log_position = self.publication.position + align(HEADER_LENGTH + _ACTION_LENGTH, FRAME_ALIGNMENT)
        return self._proxy.cluster_action_request(leadership_term_id, log_position, timestamp, action, flags)

    def append_new_leadership_term_event(self, leadership_term_id: int, timestamp: int,
                                         term_base_log_position: int, leader_member_id: int, log_session_id: int,
                                         time_unit: int, app_version: int) -> bool:
        if self.publication is None:
            return False
        log_position = self.publication.position + align(HEADER_LENGTH + _NEW_TERM_EVENT_LENGTH, FRAME_ALIGNMENT)
        return self._proxy.new_leadership_term_event(leadership_term_id, log_position, timestamp,
                                                     term_base_log_position, leader_member_id, log_session_id,
                                                     time_unit, app_version)
