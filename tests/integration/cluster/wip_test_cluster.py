"""WORK IN PROGRESS, not collected (its name does not match test_*.py): the tests of Aeron's ClusterTest list
(issue 19) that do not yet pass against the consensus module, service container and client of their branches.
Each is moved to ``test_cluster.py`` once it passes for real. Run them by naming the file:

    pytest -m slow tests/integration/cluster/wip_test_cluster.py -k <name>

Why they fail today (issue 19's notes): a snapshot taken through a running 3-member cluster fails in the service
("recording stopped unexpectedly"), which the snapshot and recovery tests need; the stop/restart tests call blocking
harness methods without polling the client, whose session then times out; echo-then-continue and timers across a
failover failed in the last run for reasons not yet looked at; a cut leaves the other two members in CANVASS.
"""

from __future__ import annotations

import pytest

from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
from harness.cluster_client import KeyValueClient, verify_members
from tests.integration.cluster.test_cluster import MESSAGES, START_S, _follower, _start

pytestmark = pytest.mark.slow


def test_should_stop_follower_and_restart_follower(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        follower = _follower(cluster, leader)
        assert cluster.stop(follower.member_id) == 0
        client.put_many(MESSAGES)  # the leader and the other follower are a quorum
        cluster.restart(follower.member_id, START_S)
        await_condition(follower.is_follower, START_S, "the restarted follower to follow")
        client.put_many(MESSAGES)
        verify_members(cluster, client)
        assert cluster.leader() is leader
    finally:
        client.close()


def test_should_echo_messages_then_continue_on_new_leader(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        cluster.kill(leader.member_id)
        new_leader = cluster.await_leader(START_S, exclude=(leader.member_id,))
        client.put_many(MESSAGES, timeout_s=START_S)
        assert client.cluster.leader_member_id == new_leader.member_id
        states = verify_members(cluster, client)
        assert len(states) == 2 and {s.applied for s in states.values()} == {2 * MESSAGES}
    finally:
        client.close()


def test_should_stop_leader_and_restart_as_follower(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        assert cluster.stop(leader.member_id) == 0
        cluster.await_leader(START_S, exclude=(leader.member_id,))
        cluster.restart(leader.member_id, START_S)
        await_condition(leader.is_follower, START_S, "the old leader to follow")
        client.put_many(MESSAGES, timeout_s=START_S)
        verify_members(cluster, client)
    finally:
        client.close()




def test_should_catchup_from_empty_log(cluster):
    cluster.start([0, 1], timeout_s=START_S)  # a quorum of two; member 2 starts later with nothing
    cluster.await_leader(START_S)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        cluster.start_node(2, START_S)
        await_condition(cluster.node(2).is_follower, START_S, "the empty member to follow")
        verify_members(cluster, client)
    finally:
        client.close()


def test_should_recover_when_follower_is_multiple_terms_behind(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(5)
        behind = _follower(cluster, leader)
        cluster.stop(behind.member_id)
        # two more terms without it: the leader is stopped and restarted, twice
        for _ in range(2):
            current = cluster.await_leader(START_S)
            client.put_many(5, timeout_s=START_S)
            cluster.stop(current.member_id)
            cluster.restart(current.member_id, START_S)
            cluster.await_leader(START_S)
        cluster.restart(behind.member_id, START_S)
        await_condition(behind.is_follower, START_S, "the member terms behind to follow")
        client.put_many(5, timeout_s=START_S)
        verify_members(cluster, client)
    finally:
        client.close()


def test_should_take_a_snapshot_after_receiving_admin_request_of_type_snapshot(cluster_factory):
    # As Aeron's test: admin requests are refused (UNAUTHORISED_ACCESS) unless an authorisation service allows them.
    cluster = cluster_factory(env={"AERON_CLUSTER_AUTHORISATION_SERVICE_SUPPLIER":
                                   "aeron_numba.archive.authentication:AllowAllAuthorisationService"})
    _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        assert client.cluster.send_admin_request_to_take_a_snapshot(4242)
        await_condition(lambda: client.poll() >= 0 and client.events.admin_responses, 60.0, "the admin response")
        correlation_id, _, code, _ = client.events.admin_responses[0]
        assert correlation_id == 4242 and code == 0  # OK
        await_condition(lambda: all(n.counter(C.SNAPSHOT_COUNTER_TYPE_ID) == 1 for n in cluster.nodes), 60.0,
                        "a snapshot on every member")
        for node in cluster.nodes:
            with RecordingLog(node.cluster_dir, read_only=True) as log:
                assert log.get_latest_snapshot(C.CONSENSUS_MODULE_SERVICE_ID) is not None
        verify_members(cluster, client)
    finally:
        client.close()


def _snapshot(cluster, leader, client):
    from tests.integration.cluster.tools import run_cluster_tool

    # The client keeps polling (its keep-alives) while the tool runs, as a user's client would.
    code, out, _ = run_cluster_tool(leader.cluster_dir, "snapshot", work=client.poll)
    assert (code, out) == (0, f"Member [{leader.member_id}]: SNAPSHOT applied successfully\n")


def test_should_recover_from_snapshot_and_log(cluster):
    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        _snapshot(cluster, leader, client)
        client.put_many(MESSAGES)
        before = verify_members(cluster, client)
    finally:
        client.close()
    for node in cluster.nodes:
        cluster.stop(node.member_id)
    cluster.start(timeout_s=START_S)
    after = cluster.await_service_state(lambda s: s.applied >= 2 * MESSAGES, START_S)
    assert {(s.applied, s.state_hash) for s in after.values()} == {(s.applied, s.state_hash) for s in before.values()}


def test_should_recover_when_last_snapshot_is_marked_invalid(cluster):
    from tests.integration.cluster.tools import run_cluster_tool

    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put_many(MESSAGES)
        _snapshot(cluster, leader, client)
        client.put_many(MESSAGES)
        _snapshot(cluster, leader, client)
        client.put_many(MESSAGES)
        before = verify_members(cluster, client)
    finally:
        client.close()
    for node in cluster.nodes:
        cluster.stop(node.member_id)
        code, out, _ = run_cluster_tool(node.cluster_dir, "invalidate-latest-snapshot")
        assert (code, out) == (0, " invalidate latest snapshot: true\n")
    cluster.start(timeout_s=START_S)
    after = cluster.await_service_state(lambda s: s.applied >= 3 * MESSAGES, START_S)
    assert {(s.applied, s.state_hash) for s in after.values()} == {(s.applied, s.state_hash) for s in before.values()}



def test_should_schedule_and_cancel_timers_across_a_failover(cluster):
    from harness.cluster_services import TIMER_KEY, timer_command

    leader = _start(cluster)
    client = KeyValueClient(cluster)
    try:
        client.put(TIMER_KEY, timer_command("schedule", 1, 100))  # fires before the failover
        await_condition(lambda: all(n.timers_fired() == (1, 1) for n in cluster.nodes), 30.0, "timer 1 on all")
        client.put(TIMER_KEY, timer_command("schedule", 2, 60_000))  # cancelled after the failover
        client.put(TIMER_KEY, timer_command("schedule", 3, 8_000))  # fires on the new leader
        cluster.kill(leader.member_id)
        cluster.await_leader(START_S, exclude=(leader.member_id,))
        client.put(TIMER_KEY, timer_command("cancel", 2), timeout_s=START_S)
        await_condition(lambda: all(n.timers_fired() == (2, 4) for n in cluster.running_nodes()), 60.0,
                        "timer 3 on the members left, timer 2 never")
        verify_members(cluster, client)
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
