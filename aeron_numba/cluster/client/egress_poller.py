"""The egress while a client connects (Aeron's ``EgressPoller``): one whole message per ``poll()``, its fields kept
until the next ``poll()`` for ``AsyncConnect`` to read.

Decoding is the schema's (an ``SbeAdapter`` over ``codecs.cluster_messages.EGRESS``, fragmented messages
reassembled); a controlled poll stops at the first whole message (BREAK) and leaves the rest on the stream
(ABORT), so a second message in the same poll, from another member's image, does not overwrite the first. The
image a SessionEvent or a NewLeaderEvent came on is kept (``egress_image``): it is the leader's, the one the
connected client watches. Malformed input is counted (``malformed_count``) and skipped, never raised: another
process's garbage must not fail a connect.
"""

from __future__ import annotations

from aeron_numba.client import ABORT, BREAK, CONTINUE, ControlledFragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER, EGRESS
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout.bits import NULL_VALUE

_CHALLENGE_TEMPLATE_ID = CLUSTER.schema.message("Challenge").template_id


class EgressPoller:
    def __init__(self, subscription, fragment_limit: int = 10):
        self.subscription = subscription
        self.fragment_limit = fragment_limit
        self.adapter = SbeAdapter(CLUSTER, self, EGRESS, context=("header",), name="EgressPoller")
        self._assembler = ControlledFragmentAssembler(self.on_fragment)
        self.egress_image = None
        self._reset()

    def _reset(self) -> None:
        self.is_poll_complete = False
        self.cluster_session_id = NULL_VALUE
        self.correlation_id = NULL_VALUE
        self.leadership_term_id = NULL_VALUE
        self.leader_member_id = NULL_VALUE
        self.template_id = NULL_VALUE
        self.version = 0
        self.event_code: int | None = None
        self.detail = ""
        self.encoded_challenge: bytes | None = None

    @property
    def malformed_count(self) -> int:
        return self.adapter.malformed_count

    @property
    def is_challenged(self) -> bool:
        """Whether the message of this poll is a Challenge."""
        return self.template_id == _CHALLENGE_TEMPLATE_ID

    def poll(self) -> int:
        """Forget the last message and poll for the next; returns the fragments read."""
        if self.is_poll_complete:
            self._reset()
        return self.subscription.controlled_poll(self._assembler, self.fragment_limit)

    def on_fragment(self, buffer, offset: int, length: int, header) -> int:
        if self.is_poll_complete:
            return ABORT  # one message a poll: this one waits for the next
        message = self.adapter.decode(buffer, offset, length)
        if message is None:
            return CONTINUE
        self.adapter.dispatch(message, header)
        if self.is_poll_complete:
            self.template_id = message.SPEC.template_id
            return BREAK
        return CONTINUE

    def _image_of(self, header):
        return self.subscription.image_by_session_id(header.session_id)

    # ------------------------------------------------------------------------------- the schema's handlers
    def on_session_message_header(self, header, leadership_term_id: int, cluster_session_id: int, timestamp: int,
                                  payload: bytes) -> None:
        self.leadership_term_id = leadership_term_id
        self.cluster_session_id = cluster_session_id
        self.is_poll_complete = True

    def on_session_event(self, header, cluster_session_id: int, correlation_id: int, leadership_term_id: int,
                         leader_member_id: int, code: int, version: int, detail: str) -> None:
        self.cluster_session_id = cluster_session_id
        self.correlation_id = correlation_id
        self.leadership_term_id = leadership_term_id
        self.leader_member_id = leader_member_id
        self.event_code = code
        self.version = version
        self.detail = detail
        self.egress_image = self._image_of(header)
        self.is_poll_complete = True

    def on_new_leader_event(self, header, leadership_term_id: int, cluster_session_id: int, leader_member_id: int,
                            ingress_endpoints: str) -> None:
        self.cluster_session_id = cluster_session_id
        self.leadership_term_id = leadership_term_id
        self.leader_member_id = leader_member_id
        self.detail = ingress_endpoints
        self.egress_image = self._image_of(header)
        self.is_poll_complete = True

    def on_challenge(self, header, correlation_id: int, cluster_session_id: int, encoded_challenge: bytes) -> None:
        self.cluster_session_id = cluster_session_id
        self.correlation_id = correlation_id
        self.encoded_challenge = bytes(encoded_challenge)
        self.is_poll_complete = True

    def on_admin_response(self, header, cluster_session_id: int, correlation_id: int, request_type: int,
                          response_code: int, message: str, payload: bytes) -> None:
        pass  # not a connect's answer: Aeron's poller reads past it too
