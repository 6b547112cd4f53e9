"""A client's session inside a service container (Aeron's ``ContainerClientSession``).

Every member knows every open session (they are opened and closed by the log), but only the leader's container
connects a response publication to the client's response channel and stream, and so only the leader's replies
reach the client; on another member ``offer`` answers ``MOCKED_OFFER`` without sending, as in Aeron. The agent
connects the sessions when it becomes leader and disconnects them when it stops being leader or the log closes.
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.errors import AeronError


class ContainerClientSession:
    """One session: its id, response channel and stream, the principal it authenticated as, and (on the leader)
    its response publication."""

    def __init__(self, cluster_session_id: int, response_stream_id: int, response_channel: str,
                 encoded_principal: bytes, agent):
        self._id = cluster_session_id
        self._response_stream_id = response_stream_id
        self._response_channel = response_channel
        self._encoded_principal = bytes(encoded_principal)
        self._agent = agent
        self.response_publication = None
        self._compiled = None  # the publication's compiled handle, for the compiled path's reply flush
        self._is_closing = False

    @property
    def id(self) -> int:
        return self._id

    @property
    def response_stream_id(self) -> int:
        return self._response_stream_id

    @property
    def response_channel(self) -> str:
        return self._response_channel

    @property
    def encoded_principal(self) -> bytes:
        return self._encoded_principal

    @property
    def is_closing(self) -> bool:
        return self._is_closing

    def close(self) -> None:
        """Ask the cluster to close this session (it closes once the close is in the log)."""
        if self._agent.get_client_session(self._id) is not None:
            self._agent.close_client_session(self._id)

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Send ``buffer[offset:offset+length]`` to the client behind a SessionMessageHeader: the publication's
        position or status; ``MOCKED_OFFER`` when this member is not the leader."""
        return self._agent.offer_to_session(self._id, self.response_publication, buffer, offset, length)

    def try_claim(self, length: int, buffer_claim=None):
        """Claim ``length`` bytes after a SessionMessageHeader (``(position, claim)`` as the publication's
        ``try_claim``; on a follower ``(MOCKED_OFFER, None)``)."""
        return self._agent.try_claim_to_session(self._id, self.response_publication, length, buffer_claim)

    # --------------------------------------------------------------------------------------- agent only
    def connect(self, aeron) -> None:
        """Add the response publication if there is none (a refusal is counted, not raised: Aeron's WARN)."""
        if self.response_publication is not None:
            return
        try:
            self.response_publication = aeron.add_publication(self._response_channel, self._response_stream_id)
        except AeronError as exc:
            self._agent.handle_error(ClusterError(
                f"failed to connect session response publication: clusterSessionId={self._id} "
                f"channel={self._response_channel!r}: {exc}"))

    def compiled_publication(self):
        """The response publication's compiled handle (made once), or None while it is not connected."""
        if self.response_publication is None:
            return None
        if self._compiled is None:
            self._compiled = self.response_publication.compiled()
        return self._compiled

    def mark_closing(self) -> None:
        self._is_closing = True

    def reset_closing(self) -> None:
        self._is_closing = False

    def disconnect(self, error_handler) -> None:
        publication, self.response_publication, self._compiled = self.response_publication, None, None
        if publication is not None:
            try:
                publication.close()
            except Exception as exc:  # noqa: BLE001 - a failed close is counted, the session goes on
                error_handler(exc)

    def __repr__(self) -> str:
        return (f"ClientSession(id={self._id}, response_stream_id={self._response_stream_id}, "
                f"response_channel={self._response_channel!r}, encoded_principal={self._encoded_principal!r})")
