"""The consensus module's reading of the log (Aeron's ``LogAdapter``): on a follower it follows the live log image
up to the commit position; during an election's replay (``LogReplay``) it reads the replayed image. What it reads
keeps the follower's session table, timers and pending service messages as the leader's, through the agent's
``on_replay_*`` handlers.

Reading is bounded: a fragment ending past the bound (the commit position) is left in the image (ABORT) for a
later poll, before it reaches the fragment assembler, so a message is only acted on once the cluster committed
it. The log is decoded by an ``SbeAdapter`` over ``codecs.cluster_messages.LOG``; a message another version
wrote and this one does not read (MembershipChangeEvent) is counted and skipped.

Application messages, all but a few of a log's, are read in place by the service container's compiled log read
(``bounded_session_poll``) with ``kernels/cluster_log_activity.record_session_activity`` as its handler: the
sessions' last activity reaches the agent once per poll, not a codec message per message. At any other message
the compiled read stops and the codec path takes the rest of the poll.
"""

from __future__ import annotations

import numba
import numpy as np

from aeron_numba.client.fragment_assembler import ABORT, CONTINUE, ControlledFragmentAssembler
from aeron_numba.client.image import Image
from aeron_numba.codecs.cluster_messages import CLUSTER, LOG
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.jit import handler_address
from aeron_numba.kernels import cluster_log_activity as activity
from aeron_numba.kernels import cluster_service_log as K

NULL_POSITION = -1


class LogAdapter:
    def __init__(self, agent, fragment_limit: int, on_error=None):
        self._agent = agent
        self.fragment_limit = fragment_limit
        self.image = None
        self.subscription = None
        self.log_position = 0  # where the last image ended, once it is gone
        self._bound = 0
        self._sbe = SbeAdapter(CLUSTER, self, LOG, context=("header",), on_error=on_error, name="LogAdapter")
        self._assembler = ControlledFragmentAssembler(self._on_message)
        self._activity = activity.new_activity_table(fragment_limit)
        self._outbox = np.zeros(K.OUTBOX_HEADER_LENGTH, np.uint8)  # the compiled read's: nothing is replied
        self._result = np.zeros(K.RESULT_LENGTH, np.int64)
        self._poll = None  # kernels.cluster_service_log.BoundSessionPoll of the image, when it is read compiled
        self._handler = (handler_address(activity.record_session_activity, K.SessionMessageHandler)
                         if not numba.config.DISABLE_JIT else None)

    # ---------------------------------------------------------------------------------------- the image
    def set_image(self, image) -> None:
        if image is not None:
            self.subscription = image.subscription
            self.log_position = image.join_position
        self.image = image
        self._poll = None
        if isinstance(image, Image) and not image.is_closed and self._handler is not None:
            self._poll = K.BoundSessionPoll(image.compiled(), self._handler, self._activity, self._outbox, self._result)

    @property
    def compiled_handle(self):
        """The image's compiled handle the compiled read uses, or None (no JIT, no image)."""
        return self._poll.handle if self._poll is not None else None

    @property
    def position(self) -> int:
        image = self.image
        if image is None:
            return self.log_position
        return image.position

    @property
    def is_image_closed(self) -> bool:
        return self.image is None or self.image.is_closed

    @property
    def is_log_end_of_stream(self) -> bool:
        return self.image is not None and self.image.is_end_of_stream

    def disconnect(self, max_log_position: int | None = None) -> int:
        """Close the log subscription; returns its registration id (Aeron: the caller waits for its sockets)."""
        registration_id = -1
        if self.image is not None:
            self.log_position = self.image.position
            self.image = None
            self._poll = None  # lets go of the log's mapping
        if max_log_position is not None:
            self.log_position = min(self.log_position, max_log_position)
        if self.subscription is not None:
            registration_id = self.subscription.registration_id
            try:
                self.subscription.close()
            finally:
                self.subscription = None
        return registration_id

    def async_remove_destination(self, destination: str) -> None:
        if self.subscription is not None and not self.subscription.is_closed:
            self.subscription.async_remove_destination(destination)

    # ---------------------------------------------------------------------------------------- reading
    def poll(self, bound_position: int) -> int:
        image = self.image
        if image is None or image.is_closed:
            return 0
        self._bound = bound_position
        if self._poll is None:
            return image.controlled_poll(self._on_fragment, self.fragment_limit)
        result = self._result
        count = self._poll.poll(bound_position, self.fragment_limit)
        if count:
            agent = self._agent
            for cluster_session_id, timestamp in activity.take_rows(self._activity):
                agent.on_replay_session_message(cluster_session_id, timestamp)
        if result[K.RESULT_STOPPED_AT_OTHER] and count < self.fragment_limit:
            image.sync_position()  # the compiled read moved the position under the image's Python peek
            count += image.controlled_poll(self._on_fragment, self.fragment_limit - count)
        return count

    def _on_fragment(self, buffer, offset: int, length: int, header) -> int:
        if header.position > self._bound:
            return ABORT
        return self._assembler.on_fragment(buffer, offset, length, header)

    def _on_message(self, buffer, offset: int, length: int, header) -> int:
        message = self._sbe.decode(buffer, offset, length)
        if message is not None:
            self._sbe.dispatch(message, header)
        return CONTINUE

    # ---------------------------------------------------------------------------------------- listener
    def on_session_message_header(self, header, leadership_term_id, cluster_session_id, timestamp, payload):
        self._agent.on_replay_session_message(cluster_session_id, timestamp)

    def on_timer_event(self, header, leadership_term_id, correlation_id, timestamp):
        self._agent.on_replay_timer_event(correlation_id)

    def on_session_open_event(self, header, leadership_term_id, correlation_id, cluster_session_id, timestamp,
                              response_stream_id, response_channel, encoded_principal):
        self._agent.on_replay_session_open(header.position, correlation_id, cluster_session_id, timestamp,
                                           response_stream_id, response_channel)

    def on_session_close_event(self, header, leadership_term_id, cluster_session_id, timestamp, close_reason):
        self._agent.on_replay_session_close(cluster_session_id, close_reason)

    def on_cluster_action_request(self, header, leadership_term_id, log_position, timestamp, action, flags):
        self._agent.on_replay_cluster_action(leadership_term_id, log_position, timestamp, action, flags)

    def on_new_leadership_term_event(self, header, leadership_term_id, log_position, timestamp,
                                     term_base_log_position, leader_member_id, log_session_id, time_unit,
                                     app_version):
        self._agent.on_replay_new_leadership_term_event(leadership_term_id, log_position, timestamp,
                                                        term_base_log_position, time_unit, app_version)
