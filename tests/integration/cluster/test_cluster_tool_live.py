"""cluster-tool's live commands against a real media driver, with the consensus module's side played by the test:
the counters of spec §10 allocated through an Aeron client, a cluster mark file naming the driver, and a stand-in
that answers ClusterMembersQuery on the service stream and puts the control toggle back to NEUTRAL as a consensus
module does once it has acted (what ClusterTool waits for)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aeron_numba.client import Aeron, Context
from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.codecs.cluster_messages import CLUSTER, TO_CONSENSUS_MODULE
from aeron_numba.codecs.cluster_proxies import ServiceProxy
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout import cluster as C
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS
from tests.integration.driver_processes import start_driver

ROOT = Path(__file__).resolve().parents[3]
CONTROL_CHANNEL = "aeron:ipc?term-length=128k"
CLUSTER_ID = 3
MEMBER_ID = 2
T = C.ClusterControlToggle


class StandInConsensusModule:
    """Answers members queries (as member ``MEMBER_ID``, leader ``leader_id``) and completes toggles."""

    def __init__(self, aeron, toggle, leader_id: int = MEMBER_ID, completes: tuple = (T.SNAPSHOT, T.RESUME)):
        self.leader_id = leader_id
        self.completes = completes
        self.toggle = toggle
        self.subscription = aeron.add_subscription(CONTROL_CHANNEL, C_STREAMS["consensus_module"])
        self.proxy = ServiceProxy(aeron.add_publication(CONTROL_CHANNEL, C_STREAMS["service"]))
        self.adapter = SbeAdapter(CLUSTER, self, TO_CONSENSUS_MODULE, name="stand-in")
        self.queries = 0
        self.pending = []

    def on_cluster_members_query(self, correlation_id, extended):
        self.queries += 1
        self.pending.append(correlation_id)

    def on_session_message_header(self, **fields):
        pass

    on_close_session = on_schedule_timer = on_cancel_timer = on_service_ack = on_session_message_header

    def do_work(self) -> None:
        self.subscription.poll(lambda b, o, n, h: self.adapter.on_fragment(b, o, n, h), 10)
        while self.pending and self.proxy.cluster_members_extended_response(
                self.pending[0], 123_456, self.leader_id, MEMBER_ID, tuple(_members(self.leader_id)), ()):
            self.pending.pop(0)
        if self.toggle.get() in self.completes:
            self.toggle.set(T.NEUTRAL)


C_STREAMS = {"service": 104, "consensus_module": 105}


def _members(leader_id):
    entry = CLUSTER.group_class("ClusterMembersExtendedResponse", "active_members")
    for member_id in range(3):
        host = f"127.0.0.{member_id + 1}"
        fields = dict(leadership_term_id=4, log_position=9952 if member_id else 9920, time_of_last_append_ns=77,
                      member_id=member_id, ingress_endpoint=f"{host}:20002", consensus_endpoint=f"{host}:20003",
                      log_endpoint=f"{host}:20004", catchup_endpoint=f"{host}:20005",
                      archive_endpoint=f"{host}:20001")
        yield entry(**fields)


@pytest.fixture
def node(process_manager, aeron_dir, tmp_path):
    # This test's client stalls while its first polls compile: Aeron's own liveness timeout, not the tests' 2 s.
    process, cnc_file = start_driver(process_manager, aeron_dir, **LENIENT_CLIENT_TIMEOUTS)
    cnc_file.close()
    cluster_dir = tmp_path / "cluster"
    cluster_dir.mkdir()
    mark = ClusterMarkFile.create(cluster_dir / C.MARK_FILE, component_type="CONSENSUS_MODULE", member_id=MEMBER_ID,
                                  service_id=-1, cluster_id=CLUSTER_ID, aeron_directory=str(aeron_dir),
                                  control_channel=CONTROL_CHANNEL)
    aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
    key = struct.pack("<i", CLUSTER_ID)
    counters = {name: aeron.add_counter(type_id, key, f"{name} - clusterId={CLUSTER_ID}")
                for name, type_id in (("state", C.CONSENSUS_MODULE_STATE_TYPE_ID), ("role", C.NODE_ROLE_TYPE_ID),
                                      ("toggle", C.CONTROL_TOGGLE_TYPE_ID), ("election", C.ELECTION_STATE_TYPE_ID))}
    # Another cluster's counters on the same driver must not be taken for ours.
    other = aeron.add_counter(C.NODE_ROLE_TYPE_ID, struct.pack("<i", CLUSTER_ID + 1), "Cluster node role - other")
    other.set(C.ClusterRole.LEADER)
    counters["state"].set(C.ConsensusModuleState.ACTIVE)
    counters["role"].set(C.ClusterRole.LEADER)
    counters["election"].set(C.ElectionState.CLOSED)
    counters["toggle"].set(T.NEUTRAL)
    try:
        yield cluster_dir, aeron, counters
    finally:
        aeron.close()
        mark.close()


def _tool(cluster_dir, command, stand_in=None, timeout_s=60.0):
    """Run ``cluster-tool <dir> <command>`` as a process, doing the stand-in's work while it runs."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    tool = subprocess.Popen([sys.executable, "-m", "aeron_numba.tools.cluster_tool", str(cluster_dir), command],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.monotonic() + timeout_s
    try:
        while tool.poll() is None and time.monotonic() < deadline:
            if stand_in is not None:
                stand_in.do_work()
            time.sleep(0.001)
    finally:
        if tool.poll() is None:
            tool.kill()
    out, err = tool.communicate()
    return tool.returncode, out, err


def test_is_leader_reads_the_role_and_election_counters_of_the_nodes_cluster(node):
    cluster_dir, aeron, counters = node
    assert _tool(cluster_dir, "is-leader") == (0, "", "")
    counters["election"].set(C.ElectionState.LEADER_READY)  # still electing: not yet the leader
    assert _tool(cluster_dir, "is-leader")[0] == 1
    counters["election"].set(C.ElectionState.CLOSED)
    counters["role"].set(C.ClusterRole.FOLLOWER)
    assert _tool(cluster_dir, "is-leader") == (1, "", "")


def test_snapshot_flips_the_toggle_waits_for_neutral_and_says_so(node):
    cluster_dir, aeron, counters = node
    stand_in = StandInConsensusModule(aeron, counters["toggle"])
    assert _tool(cluster_dir, "snapshot", stand_in) == (0, "Member [2]: SNAPSHOT applied successfully\n", "")
    assert stand_in.queries == 1 and counters["toggle"].get() == T.NEUTRAL


def test_suspend_then_resume_and_what_a_busy_toggle_or_a_wrong_state_says(node):
    cluster_dir, aeron, counters = node
    stand_in = StandInConsensusModule(aeron, counters["toggle"])
    assert _tool(cluster_dir, "suspend", stand_in) == (0, "Member [2]: SUSPEND applied successfully\n", "")
    assert counters["toggle"].get() == T.SUSPEND  # nothing waits for a suspend to be acted on
    assert _tool(cluster_dir, "abort", stand_in) == (
        1, "Member [2]: Failed to apply ABORT, current toggle value = SUSPEND\n", "")
    assert _tool(cluster_dir, "resume", stand_in) == (
        1, "Member [2]: Unable to RESUME as the state of the consensus module is ACTIVE, but needs to be "
           "SUSPENDED\n", "")
    counters["state"].set(C.ConsensusModuleState.SUSPENDED)  # what the consensus module does on SUSPEND
    assert _tool(cluster_dir, "resume", stand_in) == (0, "Member [2]: RESUME applied successfully\n", "")
    assert counters["toggle"].get() == T.NEUTRAL


def test_a_follower_is_refused_and_a_silent_node_times_out(node):
    cluster_dir, aeron, counters = node
    follower = StandInConsensusModule(aeron, counters["toggle"], leader_id=0)
    assert _tool(cluster_dir, "shutdown", follower) == (
        1, "Member [2]: Current node is not the leader (leaderMemberId = 0), unable to SHUTDOWN\n", "")
    assert counters["toggle"].get() == T.NEUTRAL
    assert _tool(cluster_dir, "snapshot") == (1, "Timed out querying cluster.\n", "")
    assert _tool(cluster_dir, "list-members") == (1, "timeout waiting for response from node\n", "")


@pytest.mark.slow  # ClusterTool's 30 s for a snapshot to complete
def test_a_snapshot_the_module_never_completes_times_out(node, monkeypatch):
    cluster_dir, aeron, counters = node
    stand_in = StandInConsensusModule(aeron, counters["toggle"], completes=())
    monkeypatch.setenv("AERON_CLUSTER_TOOL_TIMEOUT", "1s")  # the query's wait; the snapshot's own is 30 s
    code, out, err = _tool(cluster_dir, "snapshot", stand_in)
    assert (code, out, err) == (1, "Member [2]: Timed out after 30000ms waiting for SNAPSHOT to complete.\n", "")


def test_list_members_prints_what_the_consensus_module_answered(node):
    cluster_dir, aeron, counters = node
    stand_in = StandInConsensusModule(aeron, counters["toggle"])
    code, out, err = _tool(cluster_dir, "list-members", stand_in)
    assert (code, err) == (0, "")
    assert out.startswith("currentTimeNs=123456, leaderMemberId=2, memberId=2, activeMembers=[ClusterMember{id=0, "
                          "isBallotSent=false, isLeader=false, leadershipTermId=4, logPosition=9920, ")
    assert ("ClusterMember{id=2, isBallotSent=false, isLeader=true, leadershipTermId=4, logPosition=9952, "
            "candidateTermId=-1, catchupReplaySessionId=-1, correlationId=-1, timeOfLastAppendPositionNs=77, "
            "ingressEndpoint='127.0.0.3:20002', consensusEndpoint='127.0.0.3:20003', logEndpoint='127.0.0.3:20004', "
            "catchupEndpoint='127.0.0.3:20005', archiveEndpoint='127.0.0.3:20001', endpoints='127.0.0.3:20002,"
            "127.0.0.3:20003,127.0.0.3:20004,127.0.0.3:20005,127.0.0.3:20001', publication=null, vote=null}], "
            "passiveMembers=[]\n") in out
