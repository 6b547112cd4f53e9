"""The members of a static cluster and the quorum arithmetic an election decides with (Aeron's ClusterMember).

A member list comes from Aeron's ``cluster-members`` string:
``"0,ingress,consensus,log,catchup,archive|1,..."`` (optionally two more endpoints: archive response and egress
response). Each member also carries what this node has heard from it during an election: its log (term and
position), its vote and whether our ballot went out. Logs are ordered by (log leadership term id, position):
a later term wins whatever the positions, because a position is only comparable within one term's history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout.bits import NULL_VALUE

NULL_POSITION = -1


@dataclass(eq=False)
class ClusterMember:
    id: int
    ingress_endpoint: str
    consensus_endpoint: str
    log_endpoint: str
    catchup_endpoint: str
    archive_endpoint: str
    archive_response_endpoint: str | None = None
    egress_response_endpoint: str | None = None
    # what an election has heard from the member; reset() forgets it
    is_ballot_sent: bool = field(default=False)
    vote: bool | None = field(default=None)
    candidate_term_id: int = field(default=NULL_VALUE)
    leadership_term_id: int = field(default=NULL_VALUE)
    log_position: int = field(default=NULL_POSITION)
    time_of_last_append_position_ns: int = field(default=NULL_VALUE)

    @property
    def endpoints(self) -> str:
        parts = [self.ingress_endpoint, self.consensus_endpoint, self.log_endpoint, self.catchup_endpoint,
                 self.archive_endpoint]
        parts += [p for p in (self.archive_response_endpoint, self.egress_response_endpoint) if p is not None]
        return ",".join(parts)

    def reset(self) -> None:
        self.is_ballot_sent = False
        self.vote = None
        self.candidate_term_id = NULL_VALUE
        self.leadership_term_id = NULL_VALUE
        self.log_position = NULL_POSITION

    def __str__(self) -> str:
        return (f"ClusterMember{{id={self.id}, endpoints={self.endpoints}, vote={self.vote}, "
                f"candidateTermId={self.candidate_term_id}, leadershipTermId={self.leadership_term_id}, "
                f"logPosition={self.log_position}}}")


def parse_cluster_members(value: str | None) -> list[ClusterMember]:
    """Parse Aeron's ``cluster-members`` string; an empty string is no members."""
    if not value:
        return []
    members = []
    seen: set[int] = set()
    for member_value in value.split("|"):
        attributes = member_value.split(",")
        if not 6 <= len(attributes) <= 8:
            raise ClusterError(f"invalid member value: {member_value} within: {value} (expected id and 5 to 7 "
                               f"endpoints, got {len(attributes)} fields)")
        try:
            member_id = int(attributes[0])
        except ValueError:
            raise ClusterError(f"invalid cluster member id, must be an integer value: {attributes[0]!r} "
                               f"within: {value}") from None
        if member_id in seen:
            raise ClusterError(f"duplicate cluster member id {member_id} within: {value}")
        seen.add(member_id)
        extra = attributes[6:] + [None] * (8 - len(attributes))
        members.append(ClusterMember(member_id, *attributes[1:6], *extra))
    return members


def encode_cluster_members(members: Iterable[ClusterMember]) -> str:
    return "|".join(f"{m.id},{m.endpoints}" for m in members)


def find_member(members: Iterable[ClusterMember], member_id: int) -> ClusterMember | None:
    return next((m for m in members if m.id == member_id), None)


def quorum_threshold(member_count: int) -> int:
    """Members needed for a majority: 2 of 3, 3 of 5, 1 of 1."""
    return (member_count >> 1) + 1


def quorum_position(members: Sequence[ClusterMember]) -> int:
    """The highest position that a majority of members have reached (an unknown position counts as 0)."""
    ranked = sorted((max(0, m.log_position) for m in members), reverse=True)
    return ranked[quorum_threshold(len(members)) - 1] if ranked else 0


def compare_log(lhs_log_leadership_term_id: int, lhs_log_position: int,
                rhs_log_leadership_term_id: int, rhs_log_position: int) -> int:
    """Positive if lhs is the more recent log, 0 if equal, negative if rhs is."""
    lhs = (lhs_log_leadership_term_id, lhs_log_position)
    rhs = (rhs_log_leadership_term_id, rhs_log_position)
    return (lhs > rhs) - (lhs < rhs)


def compare_member_log(lhs: ClusterMember, rhs: ClusterMember) -> int:
    return compare_log(lhs.leadership_term_id, lhs.log_position, rhs.leadership_term_id, rhs.log_position)


def is_unanimous_candidate(members: Sequence[ClusterMember], candidate: ClusterMember,
                           graceful_closed_leader_id: int = NULL_VALUE) -> bool:
    """Every member has canvassed and none has a more recent log than the candidate (a leader that closed
    gracefully is not waited for, but still counts in the quorum size)."""
    possible_votes = 0
    for member in members:
        if member.id == graceful_closed_leader_id:
            continue
        if member.log_position == NULL_POSITION or compare_member_log(candidate, member) < 0:
            return False
        possible_votes += 1
    return possible_votes >= quorum_threshold(len(members))


def is_quorum_candidate(members: Sequence[ClusterMember], candidate: ClusterMember) -> bool:
    """A majority has canvassed with logs no more recent than the candidate's."""
    possible_votes = sum(1 for m in members
                         if m.log_position != NULL_POSITION and compare_member_log(candidate, m) >= 0)
    return possible_votes >= quorum_threshold(len(members))


def become_candidate(members: Sequence[ClusterMember], candidate_term_id: int, candidate_member_id: int) -> None:
    """Vote for ourselves and forget every other vote and ballot."""
    for member in members:
        is_self = member.id == candidate_member_id
        member.vote = True if is_self else None
        member.candidate_term_id = candidate_term_id if is_self else NULL_VALUE
        member.is_ballot_sent = is_self


def is_unanimous_leader(members: Sequence[ClusterMember], candidate_term_id: int,
                        graceful_closed_leader_id: int = NULL_VALUE) -> bool:
    votes = 0
    for member in members:
        if member.id == graceful_closed_leader_id:
            continue
        if member.candidate_term_id != candidate_term_id or member.vote is not True:
            return False
        votes += 1
    return votes >= quorum_threshold(len(members))


def is_quorum_leader(members: Sequence[ClusterMember], candidate_term_id: int) -> bool:
    """A majority voted yes for this term and nobody voted no (a no means a more recent log exists)."""
    votes = 0
    for member in members:
        if member.candidate_term_id == candidate_term_id:
            if member.vote is False:
                return False
            if member.vote is True:
                votes += 1
    return votes >= quorum_threshold(len(members))


def has_voters_at_position(members: Sequence[ClusterMember], position: int, leadership_term_id: int) -> bool:
    """Every member that voted has reached ``position`` in ``leadership_term_id``."""
    return all(m.vote is None or (m.log_position >= position and m.leadership_term_id == leadership_term_id)
               for m in members)


def has_quorum_at_position(members: Sequence[ClusterMember], position: int, leadership_term_id: int) -> bool:
    at_position = sum(1 for m in members if m.leadership_term_id == leadership_term_id and m.log_position >= position)
    return at_position >= quorum_threshold(len(members))


def reset_log_positions(members: Iterable[ClusterMember], log_position: int) -> None:
    for member in members:
        member.log_position = log_position
