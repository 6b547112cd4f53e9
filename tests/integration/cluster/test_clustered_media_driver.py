"""The one-process member (``ClusteredMediaDriver``) in this test's process: its duty cycle runs the driver's agent
(network cycles first), the archive with its client's conductor, then the consensus module with its client's
conductor, without a thread of its own for any of them; and a single member, its service container beside it, gets
through the consensus module's start-up waits (the archive connect, the recovery plan's queries, the service's
ack, its election) only because every wait invokes the agents below it on the same thread.

A client on the driver's own thread is answered because its waits invoke the driver: the same client without
``driver_agent_invoker`` times out, since nothing else runs the driver."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

import pytest

from aeron_numba.agent import AgentInvoker
from aeron_numba.client import Aeron, Context
from aeron_numba.cluster.clustered_media_driver import ClusteredMediaDriver
from aeron_numba.cluster.loopback_cluster import LoopbackCluster
from aeron_numba.commands.cluster import FLAGS, node_settings
from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.media_driver import MediaDriver
from aeron_numba.errors import DriverTimeoutError
from aeron_numba.layout import cluster as C
from harness.aeron_dirs import new_aeron_dir, remove_aeron_dir
from harness.awaiting import await_condition
from harness.cluster import allocate_base_port, cluster_env_for_tests
from harness.driver_settings import driver_env_for_tests

MEMBER_ORDER = ("[[network-cycles,driver-conductor,sender,receiver],aeron-client-conductor,archive-conductor,"
                "aeron-client-conductor,consensus-module-0-0]")


@pytest.fixture
def root_dir():
    root = new_aeron_dir("aeron-clustered-media-driver")
    yield root
    remove_aeron_dir(root)


def member_settings(root_dir):
    cluster = LoopbackCluster(root_dir, member_count=1, base_port=allocate_base_port(1),
                              extra_env=cluster_env_for_tests())
    args = argparse.Namespace(**{flag[2:].replace("-", "_"): None for flag in FLAGS})
    return node_settings(args, cluster.node_environment(0))


def test_a_client_on_the_drivers_thread_is_answered_by_invoking_the_driver(root_dir):
    ctx = DriverContext.from_env({**driver_env_for_tests(), "AERON_DIR": str(root_dir / "aeron")})
    driver = MediaDriver(ctx)
    invoker = AgentInvoker(driver.shared_agent, driver.record_error)
    invoker.start()
    threads = threading.active_count()
    try:
        with Aeron.connect(Context(aeron_dir=ctx.aeron_dir, use_conductor_agent_invoker=True,
                                   driver_agent_invoker=invoker)) as aeron:
            publication = aeron.add_publication("aeron:ipc", 1001)
            assert publication.registration_id >= 0
            assert threading.active_count() == threads  # no conductor thread, no driver thread
        with Aeron.connect(Context(aeron_dir=ctx.aeron_dir, use_conductor_agent_invoker=True,
                                   driver_timeout_ms=500)) as unanswered:
            with pytest.raises(DriverTimeoutError, match="MediaDriver"):
                unanswered.add_publication("aeron:ipc", 1002)
    finally:
        invoker.close()
        driver.close()


def test_the_member_runs_driver_archive_and_consensus_module_in_one_duty_cycle(root_dir):
    from aeron_numba.cluster.examples.key_value_service import KeyValueService
    from aeron_numba.cluster.service.container import ClusteredServiceContainer

    settings = member_settings(root_dir)
    threads = threading.active_count()
    member = ClusteredMediaDriver(settings.driver, settings.archive, settings.consensus_module)
    container = None
    thread = threading.Thread(target=member.run, name="member", daemon=True)
    try:
        assert member.role_name() == MEMBER_ORDER
        assert threading.active_count() == threads  # every part is invoked: nothing runs on a thread of its own
        assert member.driver.ctx.threading_mode == "SHARED"
        thread.start()
        container = ClusteredServiceContainer(settings.service, KeyValueService())
        container_thread = threading.Thread(target=container.runner.run, name="service", daemon=True)
        container_thread.start()
        counters = member.consensus_module.counters
        await_condition(lambda: counters.cluster_role.get() == C.ClusterRole.LEADER
                        and counters.module_state.get() == C.ConsensusModuleState.ACTIVE
                        and counters.election_state.get() == C.ElectionState.CLOSED,
                        60.0, "the single member to lead its first term")
        assert member.stopped_parts() == []
    finally:
        member.request_close()
        if thread.is_alive():
            thread.join(30.0)
        if container is not None:
            container.runner.close()
        member.close()
        assert not thread.is_alive()
    assert member.stopped == []  # asked to stop: no part ended by itself
    assert member.driver is None and member.archive is None and member.consensus_module is None
    assert not Path(settings.driver.aeron_dir).exists()  # the node's own driver deletes its dir on close


COMPILED_SERVICE = "aeron_numba.cluster.examples.key_value_service:CompiledKeyValueService"


def test_a_compiled_service_runs_on_the_members_thread_and_answers_every_put(cluster_factory):
    """The node command's default for a compiled service: no service container process, the service's client and
    agent after the consensus module in the member's duty cycle, and every put answered in order through it (a
    restart would need its state loaded from the snapshot and log: the cluster suite's business)."""
    from aeron_numba.cluster.examples.key_value_service import OK
    from harness.cluster_client import KeyValueClient

    cluster = cluster_factory(member_count=1, service=COMPILED_SERVICE)
    cluster.start(timeout_s=120.0)
    node = cluster.node(0)
    assert node.child_pids["service container"] == node.process.pid  # it runs in the node's own process
    assert node.pids() == {node.process.pid}
    client = KeyValueClient(cluster)
    try:
        answered = client.put_many(20)
        assert [s.status for s in answered] == [OK] * 20
        assert [s.request_id for s in answered] == sorted(s.request_id for s in answered)
    finally:
        client.close()
