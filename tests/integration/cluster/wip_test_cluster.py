"""WORK IN PROGRESS, not collected (its name does not match test_*.py): the tests of Aeron's ClusterTest list
(issue 19) that do not yet pass against the consensus module, service container and client of their branches.
Each is moved to ``test_cluster.py`` once it passes for real. Run them by naming the file:

    pytest -m slow tests/integration/cluster/wip_test_cluster.py -k <name>

Why they fail today (issue 19's notes): a snapshot taken through a running 3-member cluster fails in the service
("recording stopped unexpectedly"), which the snapshot and recovery tests need; a leader stopped and restarted
sometimes stays in FOLLOWER_REPLAY (seen once in four runs, cause not found yet), which the stop-leader and
multiple-terms tests need; a cut leaves the other two members in CANVASS.
"""

from __future__ import annotations

import pytest

from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
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
