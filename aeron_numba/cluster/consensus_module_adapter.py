"""Services to the consensus module, stream 105 (Aeron's ``ConsensusModuleAdapter``): an ``SbeAdapter`` over
``codecs.cluster_messages.TO_CONSENSUS_MODULE`` on the control channel subscription; each message becomes a call
on the agent: service messages (behind a SessionMessageHeader), CloseSession, ScheduleTimer, CancelTimer,
ServiceAck and ClusterMembersQuery."""

from __future__ import annotations

from aeron_numba.client.fragment_assembler import FragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER, TO_CONSENSUS_MODULE
from aeron_numba.codecs.sbe_adapter import SbeAdapter

#: Aeron's ConsensusModuleAdapter fragment limit.
FRAGMENT_LIMIT = 25


class ConsensusModuleAdapter:
    def __init__(self, subscription, agent, on_error=None):
        self.subscription = subscription
        self._agent = agent
        self._sbe = SbeAdapter(CLUSTER, self, TO_CONSENSUS_MODULE, on_error=on_error, name="ConsensusModuleAdapter")
        self._assembler = FragmentAssembler(self._sbe.on_fragment)

    def poll(self) -> int:
        if self.subscription is None:
            return 0
        return self.subscription.poll(self._assembler.on_fragment, FRAGMENT_LIMIT)

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None

    def on_session_message_header(self, leadership_term_id, cluster_session_id, timestamp, payload):
        self._agent.on_service_message(cluster_session_id, payload)

    def on_close_session(self, cluster_session_id):
        self._agent.on_service_close_session(cluster_session_id)

    def on_schedule_timer(self, correlation_id, deadline):
        self._agent.on_schedule_timer(correlation_id, deadline)

    def on_cancel_timer(self, correlation_id):
        self._agent.on_cancel_timer(correlation_id)

    def on_service_ack(self, log_position, timestamp, ack_id, relevant_id, service_id):
        self._agent.on_service_ack(log_position, timestamp, ack_id, relevant_id, service_id)

    def on_cluster_members_query(self, correlation_id, extended):
        self._agent.on_cluster_members_query(correlation_id, bool(extended))
