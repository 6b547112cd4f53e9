"""The session header in front of an application's message on ingress (Aeron's ``IngressSessionDecorator``).

Every message a client sends the cluster is the 32-byte SessionMessageHeader (SBE header, leadershipTermId,
clusterSessionId, timestamp; spec §6) followed by the application's bytes, in one Aeron message. The header is
encoded once, by the schema's codec, and again only when the session or term changes.

Aeron offers the two pieces as a gathered offer (header buffer + payload buffer); our ``Publication.offer`` takes
one range, so the payload is copied behind the header into one reused buffer (grown to the next power of two when
a longer message comes) and that range is offered: one memcpy per message, no allocation.
``try_claim`` (``AeronCluster.try_claim``) avoids even that copy for messages that fit in one frame.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.client.message_bytes import as_uint8
from aeron_numba.codecs.cluster_messages import CLUSTER, SESSION_HEADER_LENGTH
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout.bits import NULL_VALUE

_INITIAL_CAPACITY = 4096


class IngressSessionDecorator:
    """Offers messages with this session's header in front. ``timestamp`` is Aeron's NULL_VALUE: the leader
    stamps the message with cluster time when it appends it to the log."""

    HEADER_LENGTH = SESSION_HEADER_LENGTH

    def __init__(self, cluster_session_id: int = NULL_VALUE, leadership_term_id: int = NULL_VALUE,
                 timestamp: int = NULL_VALUE):
        self._message = np.zeros(_INITIAL_CAPACITY, dtype=np.uint8)
        self._cluster_session_id = cluster_session_id
        self._leadership_term_id = leadership_term_id
        self._timestamp = timestamp
        self._encode_header()

    def _encode_header(self) -> None:
        CLUSTER.encode_into(self._message, 0, CLUSTER.SessionMessageHeader(
            leadership_term_id=self._leadership_term_id, cluster_session_id=self._cluster_session_id,
            timestamp=self._timestamp, payload=b""))

    @property
    def header(self) -> np.ndarray:
        """The encoded header (a view of its 32 bytes)."""
        return self._message[:SESSION_HEADER_LENGTH]

    @property
    def cluster_session_id(self) -> int:
        return self._cluster_session_id

    @cluster_session_id.setter
    def cluster_session_id(self, value: int) -> None:
        self._cluster_session_id = value
        self._encode_header()

    @property
    def leadership_term_id(self) -> int:
        return self._leadership_term_id

    @leadership_term_id.setter
    def leadership_term_id(self, value: int) -> None:
        self._leadership_term_id = value
        self._encode_header()

    def offer(self, publication, buffer, offset: int = 0, length: int | None = None) -> int:
        """Offer the header and ``buffer[offset:offset+length]`` (bytes-like; ``length`` None: to its end) as one
        message on ``publication``; returns what the publication returns (the new position, or a negative
        status: NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION, CLOSED, MAX_POSITION_EXCEEDED)."""
        src = as_uint8(buffer)
        if length is None:
            length = len(src) - offset
        if offset < 0 or length < 0 or offset + length > len(src):
            raise ConfigurationError(f"offset={offset} length={length} outside the message of length={len(src)}")
        total = SESSION_HEADER_LENGTH + length
        message = self._message
        if total > len(message):
            grown = np.zeros(1 << (total - 1).bit_length(), dtype=np.uint8)
            grown[:SESSION_HEADER_LENGTH] = message[:SESSION_HEADER_LENGTH]
            message = self._message = grown
        message[SESSION_HEADER_LENGTH:total] = src[offset:offset + length]
        return publication.offer(message, 0, total)
