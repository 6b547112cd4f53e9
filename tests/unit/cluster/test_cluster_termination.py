"""ClusterTermination (Aeron's): the leader may terminate once its services are done and every follower acked the
termination position (``member.has_terminated``, as the agent sets it), or the deadline passed with the services
done; a member the position could not be sent to is reported."""

from __future__ import annotations

from aeron_numba.cluster.cluster_member import parse_cluster_members
from aeron_numba.cluster.cluster_termination import ClusterTermination

MEMBERS = parse_cluster_members("|".join(f"{i},h:1{i},h:2{i},h:3{i},h:4{i},h:5{i}" for i in range(3)))


class Publisher:
    def __init__(self, accepts=True):
        self.accepts, self.sent = accepts, []

    def termination_position(self, leadership_term_id, log_position):
        self.sent.append((leadership_term_id, log_position))
        return self.accepts


def started(service_count=1, deadline_ns=1_000, publishers=None):
    termination = ClusterTermination(deadline_ns, service_count)
    errors = []
    publishers = publishers if publishers is not None else {1: Publisher(), 2: Publisher()}
    termination.termination_position(errors.append, publishers, MEMBERS, MEMBERS[0], 5, 4096)
    return termination, publishers, errors


def test_the_position_goes_to_every_other_member_and_all_acks_with_services_done_terminate():
    termination, publishers, errors = started()
    assert publishers[1].sent == publishers[2].sent == [(5, 4096)] and errors == []
    MEMBERS[1].has_terminated = True
    MEMBERS[2].has_terminated = True
    assert not termination.can_terminate(MEMBERS, 0)  # services not yet terminated
    termination.on_services_terminated()
    assert termination.can_terminate(MEMBERS, 0)


def test_a_missing_ack_waits_for_the_deadline_and_a_moved_deadline_is_honoured():
    termination, _, _ = started()
    termination.on_services_terminated()
    MEMBERS[1].has_terminated = True
    assert not termination.can_terminate(MEMBERS, 999)
    assert termination.can_terminate(MEMBERS, 1_000)
    termination.deadline_ns = 5_000  # the agent moves it after the termination snapshot
    assert not termination.can_terminate(MEMBERS, 1_000)
    assert termination.can_terminate(MEMBERS, 5_000)


def test_services_not_terminated_hold_termination_even_past_the_deadline():
    termination, _, _ = started()
    assert not termination.can_terminate(MEMBERS, 10**12)


def test_without_services_the_acks_alone_decide():
    termination, _, _ = started(service_count=0)
    MEMBERS[1].has_terminated = True
    MEMBERS[2].has_terminated = True
    assert termination.can_terminate(MEMBERS, 0)


def test_a_refused_or_unknown_publisher_is_reported_with_the_member_id():
    termination, _, errors = started(publishers={1: Publisher(accepts=False)})
    assert [str(e) for e in errors] == ["failed to send termination position to member=1",
                                        "failed to send termination position to member=2"]


def test_a_new_termination_position_forgets_earlier_acks():
    termination, publishers, _ = started()
    MEMBERS[1].has_terminated = True
    MEMBERS[2].has_terminated = True
    termination.termination_position(None, publishers, MEMBERS, MEMBERS[0], 5, 8192)
    termination.on_services_terminated()
    assert not termination.can_terminate(MEMBERS, 0)
