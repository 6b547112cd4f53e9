"""The consensus module in a real 3-member cluster (the node command's processes, ``harness/cluster.py``, the
key-value service and the cluster client): the leader is killed; the followers notice its silence after the leader
heartbeat timeout, elect one of themselves in a later term, the client follows the new leader, and what it sees
acknowledged after the failover is applied once, in order, by both surviving members (``verify_members``).

NOT COLLECTED (wip_, as wip_test_cluster.py): seen on this machine (load 20+ on two cores) the re-election itself
works (the followers log "leader heartbeat timeout", one becomes LEADER in term 1 with the other its FOLLOWER, the
client moves its ingress to it on the NewLeaderEvent), but the client's first request after it was never answered
(cause not found yet); and in another run a member that started 6 s late stayed in FOLLOWER_CATCHUP_AWAIT: the
leader's archive started the catch-up replay to its catchup endpoint but no image came on its log subscription.
Rename to test_ once both work."""

from __future__ import annotations

import pytest

from harness.cluster_client import KeyValueClient, verify_members

pytestmark = pytest.mark.slow  # three nodes of four processes each on two cores

START_S = 180.0


def _members(cluster) -> str:
    return "; ".join(f"member {n.member_id}: role={n.role()} state={n.module_state()} "
                     f"term={n.leadership_term_id()} commit={n.commit_position()} service={n.service_state()}"
                     for n in cluster.running_nodes())


def test_the_followers_elect_a_new_leader_when_the_leader_dies_and_the_client_follows(cluster):
    cluster.start(timeout_s=START_S)
    leader = cluster.await_leader(START_S)
    cluster.await_followers(2, START_S)
    term = leader.leadership_term_id()
    client = KeyValueClient(cluster)
    try:
        assert [s.status for s in client.put_many(5)] == [0] * 5
        before = _members(cluster)
        cluster.kill(leader.member_id)
        new_leader = cluster.await_leader(START_S, exclude=[leader.member_id])
        assert new_leader.member_id != leader.member_id
        assert new_leader.leadership_term_id() > term
        cluster.await_followers(1, START_S)
        try:
            assert [s.status for s in client.put_many(5, timeout_s=START_S)] == [0] * 5
        except Exception as failure:  # what each member had reached, for the report
            client_state = (f"client {client.cluster.state} leader {client.cluster.leader_member_id} "
                            f"term {client.cluster.leadership_term_id}")
            raise AssertionError(f"{failure}; before: {before}; after: {_members(cluster)}; "
                                 f"{client_state}") from failure
        assert client.cluster.leader_member_id == new_leader.member_id
        states = verify_members(cluster, client)
        assert len(states) == 2 and {s.applied for s in states.values()} == {10}
    finally:
        client.close()
