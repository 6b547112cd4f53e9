"""An orderly stop of the cluster led by the leader (Aeron's ``ClusterTermination``).

On ClusterTool ``shutdown`` (after its snapshot) or ``abort``, the leader sends every other member a
TerminationPosition (``termination_position``), and the cluster may terminate (``can_terminate``) once the services
of this node have terminated (``on_services_terminated``) and every follower has acknowledged, or the deadline
(now + ``termination_timeout_ns``, moved by the agent after the termination snapshot) has passed with the services
done. A conductor: no bytes, decisions only, driven by the agent with its clock.

As in Aeron, a follower's acknowledgement is kept on its member: the agent sets ``member.has_terminated = True`` on
a TerminationAck at or past the termination position, and ``termination_position`` clears it on every member. The
leader is the member the termination position was sent from (Aeron asks ``member.isLeader()``), so the members
need no leader flag.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from aeron_numba.cluster.cluster_error import ClusterError


class ClusterTermination:
    def __init__(self, deadline_ns: int, service_count: int):
        self.deadline_ns = deadline_ns
        self.have_services_terminated = service_count <= 0
        self.leader_member_id: int | None = None

    def can_terminate(self, members: Iterable, now_ns: int) -> bool:
        """The services are done, and every follower acknowledged or the deadline passed."""
        if not self.have_services_terminated:
            return False
        all_acked = all(m.id == self.leader_member_id or getattr(m, "has_terminated", False) for m in members)
        return all_acked or now_ns >= self.deadline_ns

    def on_services_terminated(self) -> None:
        self.have_services_terminated = True

    def termination_position(self, error_handler: Callable[[Exception], None] | None, publishers: Mapping,
                             members: Iterable, this_member, leadership_term_id: int, position: int) -> None:
        """Send TerminationPosition to every other member (through ``publishers[member.id]``, each a
        ``ConsensusPublisher``); a member it could not be sent to is reported and waited for until the deadline."""
        self.leader_member_id = this_member.id
        for member in members:
            member.has_terminated = False
            if member.id == this_member.id:
                continue
            publisher = publishers.get(member.id)
            if publisher is None or not publisher.termination_position(leadership_term_id, position):
                if error_handler is not None:
                    error_handler(ClusterError(f"failed to send termination position to member={member.id}"))
