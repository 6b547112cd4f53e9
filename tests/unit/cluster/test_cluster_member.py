"""Member-list parsing and the quorum arithmetic an election decides with."""

import pytest

from aeron_numba.cluster import cluster_member as cm
from aeron_numba.cluster.cluster_error import ClusterError

MEMBERS = ("0,h0:20000,h0:20001,h0:20002,h0:0,h0:8010|"
           "1,h1:20000,h1:20001,h1:20002,h1:0,h1:8010|"
           "2,h2:20000,h2:20001,h2:20002,h2:0,h2:8010,h2:8011,h2:8012")


def members_with_logs(*logs):
    members = cm.parse_cluster_members("|".join(f"{i},a,b,c,d,e" for i in range(len(logs))))
    for member, (term, position) in zip(members, logs):
        member.leadership_term_id, member.log_position = term, position
    return members


def test_parses_aeron_cluster_members_string():
    members = cm.parse_cluster_members(MEMBERS)
    assert [m.id for m in members] == [0, 1, 2]
    assert members[1].consensus_endpoint == "h1:20001"
    assert members[1].catchup_endpoint == "h1:0"
    assert members[1].archive_response_endpoint is None
    assert members[2].archive_response_endpoint == "h2:8011"
    assert members[2].egress_response_endpoint == "h2:8012"
    assert cm.encode_cluster_members(members) == MEMBERS
    assert cm.parse_cluster_members("") == []


@pytest.mark.parametrize("value, words", [
    ("0,a,b,c,d", "invalid member value: 0,a,b,c,d"),
    ("x,a,b,c,d,e", "must be an integer value: 'x'"),
    ("0,a,b,c,d,e|0,f,g,h,i,j", "duplicate cluster member id 0"),
])
def test_rejects_bad_members_string_naming_the_bad_part(value, words):
    with pytest.raises(ClusterError, match=words):
        cm.parse_cluster_members(value)


@pytest.mark.parametrize("count, threshold", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)])
def test_quorum_threshold_is_a_majority(count, threshold):
    assert cm.quorum_threshold(count) == threshold


def test_quorum_position_is_what_a_majority_reached():
    assert cm.quorum_position(members_with_logs((0, 300), (0, 100), (0, 200))) == 200
    assert cm.quorum_position(members_with_logs((0, 300), (0, -1), (0, -1))) == 0
    assert cm.quorum_position(members_with_logs((0, 5), (0, 4), (0, 3), (0, 2), (0, 1))) == 3


def test_compare_log_orders_by_term_then_position():
    assert cm.compare_log(2, 0, 1, 1000) > 0
    assert cm.compare_log(1, 1000, 2, 0) < 0
    assert cm.compare_log(1, 64, 1, 32) > 0
    assert cm.compare_log(1, 64, 1, 64) == 0


def test_unanimous_candidate_needs_every_member_heard_and_none_ahead():
    members = members_with_logs((1, 100), (1, 100), (1, 50))
    assert cm.is_unanimous_candidate(members, members[0])
    assert not cm.is_unanimous_candidate(members, members[2])
    members[1].log_position = cm.NULL_POSITION  # not heard from
    assert not cm.is_unanimous_candidate(members, members[0])
    assert cm.is_unanimous_candidate(members, members[0], graceful_closed_leader_id=1)
    assert cm.is_quorum_candidate(members, members[0])


def test_quorum_candidate_needs_a_majority_not_ahead():
    members = members_with_logs((1, 50), (2, 10), (1, 100))
    assert not cm.is_quorum_candidate(members, members[0])
    assert cm.is_quorum_candidate(members, members[1])


def test_votes_make_unanimous_or_quorum_leader_and_a_no_blocks_quorum():
    members = members_with_logs((1, 0), (1, 0), (1, 0))
    cm.become_candidate(members, 5, 0)
    assert [m.vote for m in members] == [True, None, None]
    assert not cm.is_quorum_leader(members, 5)
    members[1].candidate_term_id, members[1].vote = 5, True
    assert cm.is_quorum_leader(members, 5) and not cm.is_unanimous_leader(members, 5)
    members[2].candidate_term_id, members[2].vote = 5, False
    assert not cm.is_quorum_leader(members, 5)
    members[2].vote = True
    assert cm.is_unanimous_leader(members, 5)
    assert not cm.is_unanimous_leader(members, 6)


def test_voters_and_quorum_at_position():
    members = members_with_logs((3, 100), (3, 100), (2, 40))
    for member in members:
        member.vote = True
    assert not cm.has_voters_at_position(members, 100, 3)
    assert cm.has_quorum_at_position(members, 100, 3)
    members[2].vote = None  # did not vote: not waited for
    assert cm.has_voters_at_position(members, 100, 3)
