"""Client ingress into the consensus module (Aeron's ``IngressAdapter``): the ingress subscription (and the IPC one
when IPC ingress is allowed), reassembled by a ``ControlledFragmentAssembler`` and decoded by an ``SbeAdapter``
over ``codecs.cluster_messages.INGRESS``; each message becomes a call on the consensus module agent.

On the leader, the messages that are most of ingress, an open session's application messages, go to the log in
compiled code instead (``kernels/cluster_ingress.py``): no message object, no dict, no copy but the one into the
log. The kernel stops before anything else, which takes the path above.

An application message that the log cannot take yet (back pressure) is left in the subscription (ABORT) and
delivered again next duty cycle, so ingress is never dropped for a full log. Malformed ingress is counted and
reported to the agent's error handler, never passed on.
"""

from __future__ import annotations

import numba
import numpy as np

from aeron_numba.client.handles import ImageHandles
from aeron_numba.client.subscription import Subscription
from aeron_numba.client.fragment_assembler import CONTINUE, ControlledFragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER, INGRESS
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.kernels.cluster_ingress import RESULT_LENGTH, RESULT_STOPPED, STOPPED_AT_PYTHON, ingress_to_log
from aeron_numba.layout.publication_status import CLAIM_LENGTH

_SESSION_MESSAGE = CLUSTER.schema.message("SessionMessageHeader").template_id


class IngressAdapter:
    def __init__(self, agent, fragment_limit: int, on_error=None):
        self._agent = agent
        self.fragment_limit = fragment_limit
        self.subscription = None
        self.ipc_subscription = None
        self._sbe = SbeAdapter(CLUSTER, self, INGRESS, on_error=on_error, name="IngressAdapter")
        self._assembler = ControlledFragmentAssembler(self.on_fragment)
        self._handles = ImageHandles()
        self._result = np.zeros(RESULT_LENGTH, np.int64)
        self._claim = np.zeros(CLAIM_LENGTH, np.int64)

    def connect(self, subscription, ipc_subscription=None) -> None:
        self.subscription = subscription
        self.ipc_subscription = ipc_subscription

    def poll(self, append=None) -> int:
        """Poll both subscriptions; ``append`` (the leader's: leadership term id, cluster time, its activity time in
        ns, the log publication, the open session table) sends their session messages through the compiled path
        (``_poll_compiled``)."""
        work_count = 0
        for subscription in (self.subscription, self.ipc_subscription):
            if subscription is None:
                continue
            if append is None:
                work_count += subscription.controlled_poll(self._assembler.on_fragment, self.fragment_limit)
            else:
                work_count += self._poll_compiled(subscription, append)
        return work_count

    def _poll_compiled(self, subscription, append) -> int:
        """Each image through ``kernels.cluster_ingress.ingress_to_log`` up to the fragment limit; where it stops
        before a frame Python must decide on, that one fragment goes through the codec path, then the kernel goes
        on. Back pressure ends the image's turn, leaving the message for the next poll."""
        leadership_term_id, timestamp, activity_ns, publication, sessions = append
        result, claim = self._result, self._claim
        work_count = 0
        for image in subscription.images:
            compiled = self._handles.of(image)
            if compiled is None:
                continue
            budget = self.fragment_limit
            while budget > 0:
                count = ingress_to_log(compiled.log, compiled.position_buffer, compiled.position_offset,
                                       compiled.state, budget, publication.log_buffer, publication.pub_state,
                                       publication.limit_buffer, claim, sessions.table, leadership_term_id,
                                       timestamp, activity_ns, result)
                budget -= count
                work_count += count
                if result[RESULT_STOPPED] != STOPPED_AT_PYTHON or budget <= 0:
                    break
                image.sync_position()  # the kernel moved the position under the image's Python peek
                taken = image.controlled_poll(self._assembler.on_fragment, 1)
                if taken == 0:  # ABORT: the log did not take it
                    break
                budget -= taken
                work_count += taken
        self._handles.drop_closed()
        return work_count

    def compiled_images(self) -> list | None:
        """The compiled handles of both subscriptions' open images (for the leader's ingress stage in the driver's
        stretch), or None where they cannot be had (no JIT, a subscription not a client's)."""
        if numba.config.DISABLE_JIT:
            return None
        handles = []
        for subscription in (self.subscription, self.ipc_subscription):
            if subscription is None:
                continue
            if not isinstance(subscription, Subscription):
                return None
            handles += [self._handles.of(image) for image in subscription.images]
        self._handles.drop_closed()
        return [handle for handle in handles if handle is not None]

    def close(self) -> None:
        for subscription in (self.subscription, self.ipc_subscription):
            if subscription is not None:
                subscription.close()
        self.subscription = self.ipc_subscription = None

    @property
    def malformed_count(self) -> int:
        return self._sbe.malformed_count

    def on_fragment(self, buffer, offset: int, length: int, header) -> int:
        message = self._sbe.decode(buffer, offset, length)
        if message is None:
            return CONTINUE
        if message.SPEC.template_id == _SESSION_MESSAGE:
            return self._agent.on_ingress_message(message.leadership_term_id, message.cluster_session_id,
                                                  message.payload)
        self._sbe.dispatch(message)
        return CONTINUE

    # -------------------------------------------------------------------------- the SbeAdapter's listener
    def on_session_message_header(self, leadership_term_id, cluster_session_id, timestamp, payload):
        self._agent.on_ingress_message(leadership_term_id, cluster_session_id, payload)

    def on_session_connect_request(self, correlation_id, response_stream_id, version, response_channel,
                                   encoded_credentials):
        self._agent.on_session_connect(correlation_id, response_stream_id, version, response_channel,
                                       encoded_credentials)

    def on_session_close_request(self, leadership_term_id, cluster_session_id):
        self._agent.on_session_close(leadership_term_id, cluster_session_id)

    def on_session_keep_alive(self, leadership_term_id, cluster_session_id):
        self._agent.on_session_keep_alive(leadership_term_id, cluster_session_id)

    def on_challenge_response(self, correlation_id, cluster_session_id, encoded_credentials):
        self._agent.on_ingress_challenge_response(correlation_id, cluster_session_id, encoded_credentials)

    def on_admin_request(self, leadership_term_id, cluster_session_id, correlation_id, request_type, payload):
        self._agent.on_admin_request(leadership_term_id, cluster_session_id, correlation_id, request_type, payload)
