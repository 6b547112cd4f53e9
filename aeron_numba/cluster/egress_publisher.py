"""What the consensus module sends a client on its session's response publication (Aeron's ``EgressPublisher``):
session events, the challenge of an authenticator, new-leader notices and admin responses, encoded by the
generated ``codecs.cluster_proxies.EgressPublisher`` on each session's own publication.

Each send returns False when the client's publication did not take the message (not connected, back-pressured
past the proxy's retries); the caller keeps the event pending and tries again, as Aeron's agent does.
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_session import ClusterSession
from aeron_numba.codecs.cluster_proxies import EgressPublisher as _EgressProxy
from aeron_numba.layout.cluster import CLIENT_PROTOCOL_SEMANTIC_VERSION


class EgressPublisher:
    """One reused encoder, pointed at the session's publication for each send."""

    def __init__(self):
        self._proxy = _EgressProxy(None)

    def _to(self, session: ClusterSession) -> _EgressProxy | None:
        publication = session.response_publication
        if publication is None:
            return None
        self._proxy.publication = publication
        return self._proxy

    def send_event(self, session: ClusterSession, leadership_term_id: int, leader_member_id: int, code: int,
                   detail: str) -> bool:
        proxy = self._to(session)
        return proxy is not None and proxy.session_event(session.id, session.correlation_id, leadership_term_id,
                                                         leader_member_id, code, CLIENT_PROTOCOL_SEMANTIC_VERSION, detail)

    def send_challenge(self, session: ClusterSession, encoded_challenge: bytes) -> bool:
        proxy = self._to(session)
        return proxy is not None and proxy.challenge(session.correlation_id, session.id, bytes(encoded_challenge))

    def new_leader(self, session: ClusterSession, leadership_term_id: int, leader_member_id: int,
                   ingress_endpoints: str) -> bool:
        proxy = self._to(session)
        return proxy is not None and proxy.new_leader_event(leadership_term_id, session.id, leader_member_id,
                                                            ingress_endpoints)

    def send_admin_response(self, session: ClusterSession, correlation_id: int, request_type: int,
                            response_code: int, message: str) -> bool:
        proxy = self._to(session)
        return proxy is not None and proxy.admin_response(session.id, correlation_id, request_type, response_code,
                                                          message, b"")
