"""A connected client's egress (Aeron's ``EgressAdapter``): decode each whole message (fragmented replies are
reassembled first) and hand the ones of this session to an ``EgressListener`` with Aeron's arguments.

Control messages (SessionEvent, NewLeaderEvent, AdminResponse) are decoded by an ``SbeAdapter`` over
``codecs.cluster_messages.EGRESS``; a Challenge after the connect is not the client's to answer and is dropped, as
Aeron's adapter drops it. A service's reply (SessionMessageHeader + payload) is the hot path: its 24-byte block is
read with a struct built from the schema's fields and the payload is passed as a view of the fragment
(``buffer, offset + 32, length - 32``), never copied, as Aeron passes it. Messages of other sessions sharing the
egress stream are skipped. Malformed input (another schema, a short message) is counted in ``malformed_count``
and skipped: Aeron raises a ``ClusterException`` there, but a client should not fail on another process's bytes.
"""

from __future__ import annotations

import struct

from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.client.egress_listener import AdminRequestType, AdminResponseCode, EventCode, _named
from aeron_numba.codecs.cluster_messages import CLUSTER, EGRESS, SESSION_HEADER_LENGTH
from aeron_numba.codecs.sbe import UnknownMessageError
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH, PRIMITIVES

_SESSION_MESSAGE = CLUSTER.schema.message("SessionMessageHeader")
_SESSION_MESSAGE_TEMPLATE_ID = _SESSION_MESSAGE.template_id
# The block's fields by offset (leadershipTermId, clusterSessionId, timestamp), as one struct.
_SESSION_FIELDS = sorted(_SESSION_MESSAGE.fields, key=lambda f: f.offset)
_SESSION_BLOCK = struct.Struct("<" + "".join(PRIMITIVES[f.primitive][0] for f in _SESSION_FIELDS))
assert _SESSION_BLOCK.size == _SESSION_MESSAGE.block_length == SESSION_HEADER_LENGTH - MESSAGE_HEADER_LENGTH
_SESSION_ID_INDEX = [f.name for f in _SESSION_FIELDS].index("cluster_session_id")
_TIMESTAMP_INDEX = [f.name for f in _SESSION_FIELDS].index("timestamp")


class EgressAdapter:
    """Polls ``subscription`` and delivers this session's egress to ``listener`` (an ``EgressListener``)."""

    def __init__(self, listener, cluster_session_id: int, subscription, fragment_limit: int = 10):
        self.listener = listener
        self.cluster_session_id = cluster_session_id
        self.subscription = subscription
        self.fragment_limit = fragment_limit
        self.adapter = SbeAdapter(CLUSTER, self, EGRESS, context=("header",), name="EgressAdapter")
        self.fragment_assembler = FragmentAssembler(self.on_fragment)
        #: The image this session's latest NewLeaderEvent came on: the new leader's egress to this client.
        self.egress_image = None

    @property
    def malformed_count(self) -> int:
        return self.adapter.malformed_count

    def poll(self) -> int:
        """Poll the egress once; returns the fragments read."""
        return self.subscription.poll(self.fragment_assembler, self.fragment_limit)

    def on_fragment(self, buffer, offset: int, length: int, header) -> None:
        """A whole egress message (the fragment assembler's delegate)."""
        try:
            is_session_message = (length >= SESSION_HEADER_LENGTH
                                  and CLUSTER.template_id(buffer, offset) == _SESSION_MESSAGE_TEMPLATE_ID)
        except UnknownMessageError:
            is_session_message = False  # another schema's: the adapter counts it below
        if is_session_message:
            block = _SESSION_BLOCK.unpack_from(buffer, offset + MESSAGE_HEADER_LENGTH)
            cluster_session_id = block[_SESSION_ID_INDEX]
            if cluster_session_id == self.cluster_session_id:
                self.listener.on_message(cluster_session_id, block[_TIMESTAMP_INDEX], buffer,
                                         offset + SESSION_HEADER_LENGTH, length - SESSION_HEADER_LENGTH, header)
            return
        self.adapter.on_fragment(buffer, offset, length, header)

    # ------------------------------------------------------------------------------- the schema's handlers
    def on_session_message_header(self, header, leadership_term_id: int, cluster_session_id: int, timestamp: int,
                                  payload: bytes) -> None:
        # Reached only for a SessionMessageHeader shorter than its 32 bytes, which the adapter refuses first.
        pass

    def on_session_event(self, header, cluster_session_id: int, correlation_id: int, leadership_term_id: int,
                         leader_member_id: int, code: int, version: int, detail: str) -> None:
        if cluster_session_id == self.cluster_session_id:
            self.listener.on_session_event(correlation_id, cluster_session_id, leadership_term_id, leader_member_id,
                                           _named(EventCode, code), detail)

    def on_new_leader_event(self, header, leadership_term_id: int, cluster_session_id: int, leader_member_id: int,
                            ingress_endpoints: str) -> None:
        if cluster_session_id == self.cluster_session_id:
            self.egress_image = self.subscription.image_by_session_id(header.session_id)
            self.listener.on_new_leader(cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints)

    def on_challenge(self, header, correlation_id: int, cluster_session_id: int, encoded_challenge: bytes) -> None:
        pass  # answered only while connecting (EgressPoller)

    def on_admin_response(self, header, cluster_session_id: int, correlation_id: int, request_type: int,
                          response_code: int, message: str, payload: bytes) -> None:
        if cluster_session_id == self.cluster_session_id:
            self.listener.on_admin_response(cluster_session_id, correlation_id, _named(AdminRequestType, request_type),
                                            _named(AdminResponseCode, response_code), message, payload, 0,
                                            len(payload))
