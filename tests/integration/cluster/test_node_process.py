"""The node command as processes, in both layouts: a one-member cluster node starts its media driver, archive and
service container (in one process, the first two are the node's own process), prints its start-up line, becomes
leader of its own; SIGTERM stops everything with exit 0; a child that dies stops the node with exit 1 naming it;
and nothing is left running either way."""

from __future__ import annotations

import os
import signal

import pytest

from harness.awaiting import await_condition
from harness.process_manager import pid_alive

pytestmark = pytest.mark.slow  # a node is four processes that load their kernels: ~10-30 s to start

START_S = 180.0


def _started_node(cluster_factory, layout="one-process"):
    cluster = cluster_factory(member_count=1, process_layout=layout)
    cluster.start(timeout_s=START_S)
    node = cluster.node(0)
    assert set(node.child_pids) == {"media driver", "archive", "service container"}
    assert node.pids() == {node.process.pid, *node.child_pids.values()}
    return cluster, node


@pytest.mark.parametrize("layout", ["one-process", "processes"])
def test_sigterm_stops_the_node_and_its_children_with_exit_0(cluster_factory, layout):
    cluster, node = _started_node(cluster_factory, layout)
    assert node.is_leader()  # a cluster of one elects itself
    pids = node.pids()
    aeron_dir = node.aeron_dir
    node.process.send_signal(signal.SIGTERM, group=False)
    assert node.process.wait(60) == 0
    await_condition(lambda: not [p for p in pids if pid_alive(p)], 30.0, "the node's children to stop")
    assert not aeron_dir.exists()  # its driver removed its dir
    assert "Traceback" not in node.process.stderr()


@pytest.mark.parametrize("layout, child", [("one-process", "service container"), ("processes", "archive"),
                                           ("processes", "service container"), ("processes", "media driver")])
def test_a_child_that_dies_stops_the_node_with_exit_1_naming_it(cluster_factory, layout, child):
    cluster, node = _started_node(cluster_factory, layout)
    pids = node.pids()
    victim = node.child_pids[child]
    cluster_pids = {p for p in pids if p != victim}
    os.kill(victim, signal.SIGKILL)
    assert node.process.wait(60) == 1
    assert f"stopped: the {child} (pid {victim}) exited with code -9" in node.process.stderr()
    await_condition(lambda: not [p for p in cluster_pids if pid_alive(p)], 30.0, "the node's other children to stop")
