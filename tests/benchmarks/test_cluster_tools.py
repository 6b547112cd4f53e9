"""The cluster's diagnosis tools: the start-up timeline (``benchmarks.cluster.startup``) and member_profile's
command line. The timeline starts a real 3-member cluster; what it reports is checked, not its times."""

from __future__ import annotations

from aeron_numba.layout import cluster as C
from benchmarks.cluster import member_profile, startup
from benchmarks.cluster.aeron_system import COMPILED_SERVICE, NODE_ENV
from harness.cluster import ClusterHarness
from harness.process_manager import ProcessManager


def test_the_startup_timeline_follows_every_election_to_one_leader(tmp_path):
    harness = ClusterHarness(ProcessManager(tmp_path / "logs"), service=COMPILED_SERVICE, env=dict(NODE_ENV),
                             name="startup-test")
    try:
        result = startup.timeline(harness, timeout_s=90)
    finally:
        harness.close()
    members = result["members"]
    assert sorted(members) == [0, 1, 2]
    for member in members.values():
        states = [state for state, _ in member["states"]]
        assert states[-1] == C.ElectionState.CLOSED
        times = [at for _, at in member["states"]]
        assert times == sorted(times) and member["cnc_s"] <= times[0]
    leader_states = [state for state, _ in members[result["leader"]]["states"]]
    assert C.ElectionState.LEADER_READY in leader_states
    followers = [m for m in members if m != result["leader"]]
    assert all(C.ElectionState.LEADER_READY not in [s for s, _ in members[m]["states"]] for m in followers)
    text = startup.format_timeline(result)
    assert text.startswith(f"first leader: member {result['leader']}, ") and "LEADER_READY" in text


def test_the_tools_refuse_bad_arguments_with_one_line(capsys):
    assert startup.main(["--timeout", "0"]) == 2
    assert member_profile.main(["--puts", "0"]) == 2
    assert startup.main(["--env", "PATH=/tmp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "--timeout=0.0 must be > 0" in err[0] and "--puts=0 must be >= 1" in err[1]
    assert "--env 'PATH=/tmp' must be AERON_<NAME>=<value>" in err[2]


def test_a_failover_case_of_several_runs_reports_their_medians_and_everything_lost():
    from benchmarks.cluster.bench import compute_targets, failover_case

    def run(failover_s, new_leader_s, lost=0, failed=0):
        return {"failover_ns": int(failover_s * 1e9), "new_leader_event_ns": int(new_leader_s * 1e9),
                "lost_at_kill": lost, "failed_after_kill": failed}

    case = failover_case([run(3.5, 3.3), run(9.0, 8.8, lost=2), run(3.2, 3.1), run(3.4, 3.2, failed=1),
                          run(3.6, 3.4)], rate=1_000)
    assert case["figures"] == {"failover_s": 3.5, "new_leader_event_s": 3.3}  # one slow run does not move it
    assert case["lost_at_kill"] == 2 and case["failed_after_kill"] == 1 and len(case["runs"]) == 5
    targets = compute_targets({"aeron": {"cases": {"failover": {"ok": True, **case}}}})
    assert targets["aeron failover"]["value"] == 3.3 and targets["aeron failover"]["met"]


def test_member_profile_names_the_streams_a_put_moved_per_put():
    key = ("member 0 (leader)", "sub-pos: 57 -5 100 aeron-spy:aeron:udp?tags=52|alias=log @0")
    still = ("member 0 (leader)", "sub-pos: 39 -6 120 aeron:ipc?term-length=64k @0")
    before = {"streams": {key: 1000, still: 64}}
    after = {"streams": {key: 1000 + 160 * 50, still: 64}}
    moved = member_profile._streams_moved(before, after)
    assert moved == {key: 8000}  # the stream that did not move is left out
    idle = (1.0, {("member 0 (leader)", "node"): 0.05}, {})
    busy = (1.0, {("member 0 (leader)", "node"): 0.10}, {})
    datagrams = {("member 0 (leader)", counter): 0 for counter in member_profile.DATAGRAM_COUNTERS}
    datagrams[("member 0 (leader)", "STATUS_MESSAGES_SENT")] = 150
    text = member_profile.format_profile({"puts": 50, "idle": idle, "busy": busy, "streams": moved,
                                          "system_cpu": {("member 0 (leader)", "node"): 0.04},
                                          "datagrams": datagrams})
    assert "member 0 (leader):    160.0  sub-pos: 57 -5 100 aeron-spy:aeron:udp?tags=52|alias=log @0" in text
    assert "aeron:ipc" not in text
    assert "2.00 ms/put  (40 % in the kernel)" in text
    assert "member 0 (leader)" + " " * 17 + "     0.0     0.0     3.0     0.0" in text  # 3 status messages a put
