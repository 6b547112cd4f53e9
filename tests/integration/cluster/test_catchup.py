"""A member that starts after the others (an empty log, the leader's log already at some position) catches up
from the leader's archive (Election FOLLOWER_CATCHUP_INIT/AWAIT/CATCHUP: the leader replays its log to the member's
catchup endpoint, the image joins the member's log subscription), then follows the live log, and applies exactly
what the others applied (same count, same state hash, same log position)."""

from __future__ import annotations

import pytest

from harness.awaiting import await_condition
from harness.cluster_client import KeyValueClient, verify_members

pytestmark = pytest.mark.slow

START_S = 180.0


def test_a_member_started_late_catches_up_and_applies_what_the_others_applied(cluster):
    cluster.start([0, 1], timeout_s=START_S)  # a quorum of two; member 2 starts later with nothing
    cluster.await_leader(START_S)
    client = KeyValueClient(cluster)
    try:
        client.put_many(5)
        # start_node blocks on the start-up line; the session (10 s timeout) must keep polling meanwhile
        cluster._spawn(2)
        await_condition(cluster.node(2).is_follower, START_S, "the late member to follow", work=client.poll,
                        processes=cluster.processes())
        cluster._await_started(2, START_S)  # its start-up line is out by now: records its children's pids
        client.put_many(5)
        states = verify_members(cluster, client)
        assert len(cluster.running_nodes()) == 3 and set(states) == {0, 1, 2}
    finally:
        client.close()
