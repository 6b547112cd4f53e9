"""WORK IN PROGRESS, not collected (its name does not match test_*.py): the tests of Aeron's ClusterTest list
(issue 19) that do not yet pass against the consensus module, service container and client of their branches.
Each is moved to ``test_cluster.py`` once it passes for real. Run them by naming the file:

    pytest -m slow tests/integration/cluster/wip_test_cluster.py -k <name>

Why they fail today (issue 19's notes): a leader stopped and restarted sometimes stays in FOLLOWER_REPLAY (seen
once in four runs, cause not confirmed; the driver then refused a subscription to a closed IPC publication that a
subscriber had not finished reading, which hung a service joining a bounded log replay after a full restart, fixed
since and not yet re-run with these), which the stop-leader and multiple-terms tests need; a cut leaves the other
two members in CANVASS.
"""
from __future__ import annotations

import pytest

from harness.cluster_client import KeyValueClient, verify_members
from tests.integration.cluster.test_cluster import MESSAGES, START_S, _follower, _start

pytestmark = pytest.mark.slow


def test_should_stop_leader_and_restart_as_follower(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        assert cluster.stop(leader.member_id) == 0
        cluster.await_leader(START_S, exclude=(leader.member_id,))
        cluster.restart(leader.member_id, START_S)
        cluster.await_follower(leader.member_id, START_S)
        client.put_many(MESSAGES, timeout_s=START_S)
        verify_members(cluster, client)
    finally:
        client.close()


def test_should_recover_when_follower_is_multiple_terms_behind(cluster):
    # As Aeron's: the original leader stops; the new one leads a term, stops and restarts (one more election);
    # then the original leader comes back two terms behind and must catch up.
    original = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        cluster.stop(original.member_id)
        new_leader = cluster.await_leader(START_S, exclude=(original.member_id,))
        client.await_new_leader(new_leader.member_id)
        client.put_many(MESSAGES, timeout_s=START_S)
        cluster.stop(new_leader.member_id)
        cluster.restart(new_leader.member_id, START_S)
        cluster.await_leader(START_S, exclude=(original.member_id,))
        client.reconnect()  # one member was left alone meanwhile: no leader within the client's timeout
        client.put_many(MESSAGES, timeout_s=START_S)
        cluster.restart(original.member_id, START_S)
        cluster.await_follower(original.member_id, START_S)
        assert original.leadership_term_id() >= 2
        states = verify_members(cluster, client)
        assert len(states) == 3
    finally:
        client.close()


def test_cutting_the_leader_off_makes_the_others_elect_a_new_one(cluster):
    """Fails: the cut works (both followers leave FOLLOWER for CANVASS), but the two stay in CANVASS."""
    cluster.start(timeout_s=START_S)
    leader = cluster.await_leader(START_S)
    cluster.await_followers(2, START_S)
    cluster.isolate(leader.member_id)  # its driver sends nothing to the others, theirs nothing to it
    assert leader.blocked_hosts == {node.host for node in cluster.nodes if node is not leader}
    new_leader = cluster.await_leader(START_S, exclude=(leader.member_id,))
    assert new_leader.leadership_term_id() > 0 and leader.is_running
    cluster.heal_all()
    assert not any(node.blocked_hosts for node in cluster.nodes)
