"""The consensus module -> service protocol, read by a service container (Aeron's ``ServiceAdapter``).

An ``SbeAdapter`` over ``codecs.cluster_messages.TO_SERVICE`` on the control channel's service stream (104): JoinLog,
ServiceTerminationPosition and requestServiceAck go to the agent's ``on_join_log``, ``on_service_termination_position``
and ``on_request_service_ack``; the members responses (the answers to ClusterTool's ClusterMembersQuery, which
listens on the same stream) are passed over. One fragment per poll, as Aeron's (the agent acts on a JoinLog before
it reads the next message). Where Aeron throws on another schema's message, we count it and go on.
"""

from __future__ import annotations

from aeron_numba.client.fragment_assembler import FragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER, TO_SERVICE
from aeron_numba.codecs.sbe_adapter import SbeAdapter

#: Fragments read per poll (Aeron's ServiceAdapter.FRAGMENT_LIMIT).
FRAGMENT_LIMIT = 1


class ServiceAdapter:
    """Polls ``subscription`` and hands the consensus module's requests to ``agent``."""

    def __init__(self, subscription, agent, on_error=None):
        self.subscription = subscription
        self.agent = agent
        self._adapter = SbeAdapter(CLUSTER, self, TO_SERVICE, on_error=on_error, name="ServiceAdapter")
        self._assembler = FragmentAssembler(self._adapter.on_fragment)

    @property
    def malformed_count(self) -> int:
        return self._adapter.malformed_count

    def poll(self) -> int:
        return self.subscription.poll(self._assembler.on_fragment, FRAGMENT_LIMIT)

    def close(self) -> None:
        self.subscription.close()

    # ------------------------------------------------------------------------------------------ handlers
    def on_join_log(self, log_position, max_log_position, member_id, log_session_id, log_stream_id, is_startup, role,
                    log_channel) -> None:
        self.agent.on_join_log(log_position, max_log_position, member_id, log_session_id, log_stream_id,
                               is_startup == 1, role, log_channel)

    def on_service_termination_position(self, log_position) -> None:
        self.agent.on_service_termination_position(log_position)

    def on_request_service_ack(self, log_position) -> None:
        self.agent.on_request_service_ack(log_position)

    def on_cluster_members_response(self, correlation_id, leader_member_id, active_members,
                                    passive_followers) -> None:
        pass  # ClusterTool's answer on the shared stream

    def on_cluster_members_extended_response(self, correlation_id, current_time_ns, leader_member_id, member_id,
                                             active_members, passive_members) -> None:
        pass  # ClusterTool's answer on the shared stream
