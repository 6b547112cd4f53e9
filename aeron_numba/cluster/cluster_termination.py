"""An orderly stop of the cluster led by the leader (Aeron's ``ClusterTermination``).

On ClusterTool ``shutdown`` (after its snapshot) or ``abort``, the leader sends every other member a
TerminationPosition, and the cluster may terminate once the services of this node have terminated and every
follower has acknowledged (TerminationAck), or the deadline (now + ``termination_timeout_ns``) has passed with the
services done. A conductor: no bytes, decisions only, driven by the agent with its clock.

Differs from Aeron in one place: Aeron marks a member's acknowledgement on the ``ClusterMember`` object
(``member.hasTerminated(true)``); here the termination keeps the acknowledged member ids itself
(``on_termination_ack(member_id)``), so ``ClusterMember`` stays a description of the member. The leader is the
member ``termination_position`` was sent from (Aeron's ``member.isLeader()``).
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from aeron_numba.cluster.cluster_error import ClusterError


class ClusterTermination:
    def __init__(self, deadline_ns: int, service_count: int):
        self.deadline_ns = deadline_ns
        self.have_services_terminated = service_count <= 0
        self.leader_member_id: int | None = None
        self.terminated_member_ids: set[int] = set()

    def can_terminate(self, members: Iterable, now_ns: int) -> bool:
        """The services are done, and every follower acknowledged or the deadline passed."""
        if not self.have_services_terminated:
            return False
        all_acked = all(m.id == self.leader_member_id or m.id in self.terminated_member_ids for m in members)
        return all_acked or now_ns >= self.deadline_ns

    def on_services_terminated(self) -> None:
        self.have_services_terminated = True

    def on_termination_ack(self, member_id: int) -> None:
        """A member acknowledged the termination position (Aeron's ``member.hasTerminated(true)``)."""
        self.terminated_member_ids.add(member_id)

    def termination_position(self, error_handler: Callable[[Exception], None] | None, publishers: Mapping,
                             members: Iterable, this_member, leadership_term_id: int, position: int) -> None:
        """Send TerminationPosition to every other member (through ``publishers[member.id]``, each a
        ``ConsensusPublisher``); a member it could not be sent to is reported and waited for until the deadline."""
        self.leader_member_id = this_member.id
        self.terminated_member_ids.clear()
        for member in members:
            if member.id == this_member.id:
                continue
            publisher = publishers.get(member.id)
            if publisher is None or not publisher.termination_position(leadership_term_id, position):
                if error_handler is not None:
                    error_handler(ClusterError(f"failed to send termination position to member={member.id}"))
