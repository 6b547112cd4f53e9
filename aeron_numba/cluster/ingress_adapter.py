"""Client ingress into the consensus module (Aeron's ``IngressAdapter``): the ingress subscription (and the IPC one
when IPC ingress is allowed), reassembled by a ``ControlledFragmentAssembler`` and decoded by an ``SbeAdapter``
over ``codecs.cluster_messages.INGRESS``; each message becomes a call on the consensus module agent.

An application message that the log cannot take yet (back pressure) is left in the subscription (ABORT) and
delivered again next duty cycle, so ingress is never dropped for a full log. Malformed ingress is counted and
reported to the agent's error handler, never passed on.
"""

from __future__ import annotations

from aeron_numba.client.fragment_assembler import CONTINUE, ControlledFragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER, INGRESS
from aeron_numba.codecs.sbe_adapter import SbeAdapter

_SESSION_MESSAGE = CLUSTER.schema.message("SessionMessageHeader").template_id


class IngressAdapter:
    def __init__(self, agent, fragment_limit: int, on_error=None):
        self._agent = agent
        self.fragment_limit = fragment_limit
        self.subscription = None
        self.ipc_subscription = None
        self._sbe = SbeAdapter(CLUSTER, self, INGRESS, on_error=on_error, name="IngressAdapter")
        self._assembler = ControlledFragmentAssembler(self.on_fragment)

    def connect(self, subscription, ipc_subscription=None) -> None:
        self.subscription = subscription
        self.ipc_subscription = ipc_subscription

    def poll(self) -> int:
        work_count = 0
        if self.subscription is not None:
            work_count += self.subscription.controlled_poll(self._assembler.on_fragment, self.fragment_limit)
        if self.ipc_subscription is not None:
            work_count += self.ipc_subscription.controlled_poll(self._assembler.on_fragment, self.fragment_limit)
        return work_count

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
