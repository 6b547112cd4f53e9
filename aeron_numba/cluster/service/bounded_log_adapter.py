"""A service container's reading of the log, never past the commit position (Aeron's ``BoundedLogAdapter``).

``poll(limit)`` reads the log image up to ``limit`` (the commit-position counter's value) and hands each message to
the agent in log order: an application message (SessionMessageHeader + the application's bytes, reassembled when
it came in fragments) to ``on_session_message``, and TimerEvent, SessionOpenEvent, SessionCloseEvent,
ClusterActionRequest and NewLeadershipTermEvent to the agent's handler of that name; a MembershipChangeEvent of an
old log is skipped, as Aeron does.

Bounded: Aeron's ``boundedControlledPoll`` stops at the first frame that starts at or past the limit; we stop at
the first frame that would *end* past it (a commit position always falls on a frame boundary, so the two agree on
any log a consensus module writes, and ours can never hand over bytes the cluster has not committed).

Two paths:
- Python (every service): the image's ``controlled_poll`` over a private copy; a fragment ending past the limit is
  answered ABORT (left for the next poll); fragments are reassembled per Aeron (a gap in term offsets drops the
  partial message).
- Compiled (a service with ``session_message_handler``): ``kernels.cluster_service_log.bounded_session_poll`` reads
  the log in place and calls the handler for each unfragmented application message without Python; at any other
  frame it stops, the Python path takes that one message (and any fragmented application message, whose whole
  bytes it then passes to the compiled handler from Python) and the compiled poll goes on next time.

Where Aeron throws on a message of another schema, we count it in the error log and skip it: a malformed log entry
must not stop the service.
"""

from __future__ import annotations

import struct

import numpy as np

from aeron_numba.client.fragment_assembler import ABORT, BREAK, CONTINUE, ControlledFragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.jit import handler_address
from aeron_numba.kernels import cluster_service_log as K
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH

_HEADER = struct.Struct("<HHHH")
_SESSION_FIELDS = struct.Struct("<qq")  # clusterSessionId, timestamp

#: The log's messages other than application messages, as this adapter decodes them (MembershipChangeEvent:
#: written by versions before dynamic join was removed, skipped).
LOG_EVENTS = ("TimerEvent", "SessionOpenEvent", "SessionCloseEvent", "ClusterActionRequest", "NewLeadershipTermEvent",
              "MembershipChangeEvent")
#: ClusterActionRequest.flags of a log written before flags existed (Aeron's CLUSTER_ACTION_FLAGS_DEFAULT).
CLUSTER_ACTION_FLAGS_DEFAULT = 0
_INT32_NULL = -(1 << 31)


class BoundedLogAdapter:
    """Reads one log image for the agent (see the module docstring). ``image`` and ``max_log_position`` are set
    by the agent when it joins a log."""

    def __init__(self, agent, fragment_limit: int, *, session_message_handler=None, state=None, outbox=None,
                 on_error=None):
        self.agent = agent
        self.fragment_limit = fragment_limit
        self.image = None
        self.max_log_position = 0
        self._limit = 0
        self._handler = session_message_handler
        self._handler_arg = (handler_address(session_message_handler, K.SessionMessageHandler)
                             if session_message_handler is not None else None)
        self._state = state
        self.outbox = outbox if outbox is not None or session_message_handler is None else K.new_outbox()
        self._result = np.zeros(K.RESULT_LENGTH, dtype=np.int64)
        self._poll = None  # kernels.cluster_service_log.BoundSessionPoll of the image, compiled path only
        self._events = SbeAdapter(CLUSTER, self, LOG_EVENTS, context=("header_position",), on_error=on_error,
                                  name="BoundedLogAdapter")
        self._on_error = on_error or (lambda text: None)
        self._assembler = ControlledFragmentAssembler(self._on_message)
        self._python_break = False  # compiled service: the Python path stops after one message

    @property
    def is_compiled(self) -> bool:
        return self._handler is not None

    @property
    def handler(self):
        """The service's compiled session message handler (an ``@njit`` dispatcher), or None."""
        return self._handler

    @property
    def state(self):
        """The array the compiled handler is given (the service's ``state``)."""
        return self._state

    @property
    def compiled_handle(self):
        """The image's compiled handle the compiled path reads, or None."""
        return self._poll.handle if self._poll is not None else None

    @property
    def malformed_count(self) -> int:
        return self._events.malformed_count

    def set_image(self, image) -> None:
        self.image = image
        self._poll = None
        if image is not None and self._handler is not None:
            self._poll = K.BoundSessionPoll(image.compiled(), self._handler_arg, self._state, self.outbox, self._result)
        self._assembler.clear()

    def is_done(self) -> bool:
        """The log is read to its end for this join: the max log position, the end of stream, or closed."""
        image = self.image
        return image.position >= self.max_log_position or image.is_end_of_stream or image.is_closed

    def close(self) -> None:
        image, self.image, self._poll = self.image, None, None
        if image is not None:
            image.subscription.close()

    # --------------------------------------------------------------------------------------------- poll
    def poll(self, limit: int) -> int:
        """Hand over the messages up to ``limit``; returns the fragments consumed."""
        self._limit = limit
        if self._handler is None:
            return self.image.controlled_poll(self._on_fragment, self.fragment_limit)
        result = self._result
        count = self._poll.poll(limit, self.fragment_limit)
        if count > 0:
            self.agent.on_compiled_session_messages(int(result[K.RESULT_LAST_POSITION]),
                                                    int(result[K.RESULT_LAST_TIMESTAMP]), count)
        if result[K.RESULT_STOPPED_AT_OTHER] and count < self.fragment_limit:
            self._python_break = True
            self.image.sync_position()  # the compiled poll moved the position under the image's Python peek
            count += self.image.controlled_poll(self._on_fragment, self.fragment_limit - count)
        return count

    def _on_fragment(self, buffer, offset: int, length: int, header) -> int:
        if header.position > self._limit:
            return ABORT
        return self._assembler.on_fragment(buffer, offset, length, header)

    def _on_message(self, buffer, offset: int, length: int, header) -> int:
        if length < MESSAGE_HEADER_LENGTH:
            self._malformed(f"message of {length} bytes at log position {header.position}, shorter than its header")
            return CONTINUE
        _, template_id, schema_id, _ = _HEADER.unpack_from(buffer, offset)
        if schema_id != K.SCHEMA_ID:
            self._malformed(f"expected schemaId={K.SCHEMA_ID}, actual={schema_id} at log position {header.position}")
            return CONTINUE
        if template_id == K.SESSION_MESSAGE_TEMPLATE_ID:
            if length < K.SESSION_HEADER_LENGTH:
                self._malformed(f"session message of {length} bytes at log position {header.position}")
                return CONTINUE
            cluster_session_id, timestamp = _SESSION_FIELDS.unpack_from(buffer, offset + K.CLUSTER_SESSION_ID_OFFSET)
            payload, payload_length = offset + K.SESSION_HEADER_LENGTH, length - K.SESSION_HEADER_LENGTH
            if self._handler is None:
                self.agent.on_session_message(header.position, cluster_session_id, timestamp, buffer, payload,
                                              payload_length, header)
                return CONTINUE
            self.outbox[K.OUTBOX_TIMESTAMP_OFFSET:K.OUTBOX_TIMESTAMP_OFFSET + 8].view(np.int64)[0] = timestamp
            self._handler(self._state, buffer, payload, payload_length, cluster_session_id, timestamp, self.outbox)
            self.agent.on_compiled_session_messages(header.position, timestamp, 1)
        else:
            message = self._events.decode(buffer, offset, length)
            if message is not None:
                self._events.dispatch(message, header.position)
        return BREAK if self._python_break else CONTINUE

    def _malformed(self, text: str) -> None:
        self._on_error(f"BoundedLogAdapter: message dropped: {text}")

    # ------------------------------------------------------------------------------------ log events
    # ``header_position``: where the message ends in the log; ClusterActionRequest and NewLeadershipTermEvent carry
    # their own ``log_position``, which the agent is given instead, as Aeron's adapter does.
    def on_timer_event(self, header_position, leadership_term_id, correlation_id, timestamp) -> None:
        self.agent.on_timer_event(header_position, correlation_id, timestamp)

    def on_session_open_event(self, header_position, leadership_term_id, correlation_id, cluster_session_id,
                              timestamp, response_stream_id, response_channel, encoded_principal) -> None:
        self.agent.on_session_open(leadership_term_id, header_position, cluster_session_id, timestamp,
                                   response_stream_id, response_channel, encoded_principal)

    def on_session_close_event(self, header_position, leadership_term_id, cluster_session_id, timestamp,
                               close_reason) -> None:
        self.agent.on_session_close(leadership_term_id, header_position, cluster_session_id, timestamp, close_reason)

    def on_cluster_action_request(self, header_position, leadership_term_id, log_position, timestamp, action,
                                  flags) -> None:
        self.agent.on_service_action(leadership_term_id, log_position, timestamp, action,
                                     CLUSTER_ACTION_FLAGS_DEFAULT if flags == _INT32_NULL else flags)

    def on_new_leadership_term_event(self, header_position, leadership_term_id, log_position, timestamp,
                                     term_base_log_position, leader_member_id, log_session_id, time_unit,
                                     app_version) -> None:
        self.agent.on_new_leadership_term_event(leadership_term_id, log_position, timestamp, term_base_log_position,
                                                leader_member_id, log_session_id, time_unit, app_version)

    def on_membership_change_event(self, header_position, **_) -> None:
        pass  # dynamic join was removed; an old log's event is skipped


__all__ = ["BoundedLogAdapter", "ClusterError", "LOG_EVENTS"]
