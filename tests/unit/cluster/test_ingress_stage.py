"""A leader's ingress from the driver's stretch (``kernels/cluster_ingress.ingress_stage``, ``IngressStage``): the
open sessions' messages of every ingress image appended to the log with the epoch clock's time in the cluster's
unit and their activity kept, the stage off (the frame left where the module's watch sees it) at what the Python
path must decide on, back pressure left for the next pass; and the module turning it on only for an ACTIVE
leader."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_time import ClusterClock, ClusterTimeUnit
from aeron_numba.cluster.ingress_stage import IngressStage
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels import cluster_ingress as ci
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.layout.cluster import ClusterRole
from harness.awaiting import await_condition
from tests.unit.cluster.test_consensus_module_agent import three_member_leader

CHANNEL = "aeron:ipc?term-length=64k"


class Leader:
    """Two clients' ingress publications (sessions 11 and 12 open), the log publication, its reader, the stage."""

    def __init__(self, aeron, ingress_channel=CHANNEL):
        self.ingress = aeron.add_subscription(ingress_channel, 101)
        self.clients = [aeron.add_exclusive_publication(ingress_channel, 101) for _ in range(2)]
        self.log = aeron.add_exclusive_publication(CHANNEL, 100)
        self.log_reader = aeron.add_subscription(CHANNEL, 100)
        await_condition(lambda: len(self.ingress.images) == 2 and self.log.is_connected
                        and all(c.is_connected for c in self.clients), 10, "the streams")
        self.sessions = ci.OpenSessionTable()
        for session in (11, 12):
            self.sessions.add(session)
        self.stages = NetworkStages()
        self.stage = IngressStage(self.stages)
        self.images = [image.compiled() for image in self.ingress.images]
        assert self.stage.run_for(leadership_term_id=5, ns_per_unit=ClusterTimeUnit.MILLIS.nanos_per_unit,
                                  publication=self.log, sessions=self.sessions, images=self.images, key=1)

    def send(self, client: int, message) -> None:
        data = np.frombuffer(CLUSTER.encode(message), np.uint8)
        assert self.clients[client].offer(data) > 0

    def run(self) -> int:
        total = 0
        while (work := run_stages(self.stages.table, len(self.stages))) > 0:
            total += work
        return total

    def logged(self, count: int) -> list:
        got = []
        assembler = FragmentAssembler(lambda b, o, n, h: got.append(CLUSTER.decode(b, o, n)))
        await_condition(lambda: (self.run(), self.log_reader.poll(assembler.on_fragment, 10), len(got) >= count)[2],
                        10, f"{count} log messages")
        return got


def _message(session: int, payload: bytes, term: int = 5):
    return CLUSTER.SessionMessageHeader(leadership_term_id=term, cluster_session_id=session, timestamp=0,
                                        payload=payload)


@pytest.mark.requires_jit  # the images' compiled handles: Numba overloads
def test_open_sessions_messages_reach_the_log_stamped_with_the_cluster_time(aeron):
    leader = Leader(aeron)
    before_ms = time.time_ns() // 1_000_000
    leader.send(0, _message(11, b"put-1"))
    leader.send(1, _message(12, b"put-2"))
    logged = leader.logged(2)
    after_ms = time.time_ns() // 1_000_000
    assert sorted((m.cluster_session_id, m.payload, m.leadership_term_id) for m in logged) == \
        [(11, b"put-1", 5), (12, b"put-2", 5)]
    assert all(before_ms <= m.timestamp <= after_ms for m in logged)
    for session in (11, 12):
        activity = leader.sessions.activity_ns(session)
        assert activity in {m.timestamp * 1_000_000 for m in logged}
    assert leader.stage.is_running and int(leader.stage.state[ci.STAGE_APPENDED]) == 2


@pytest.mark.requires_jit
def test_what_the_python_path_decides_on_turns_the_stage_off_with_the_frame_left(aeron):
    leader = Leader(aeron)
    leader.send(0, _message(11, b"first"))
    leader.send(0, CLUSTER.SessionKeepAlive(leadership_term_id=5, cluster_session_id=11))
    leader.send(0, _message(11, b"after"))
    assert [m.payload for m in leader.logged(1)] == [b"first"]
    assert not leader.stage.is_running
    image = next(i for i in leader.ingress.images if i.session_id == leader.clients[0].session_id)
    taken = []
    image.sync_position()
    image.poll(lambda b, o, n, h: taken.append(CLUSTER.decode(b, o, n)), 1)
    assert taken == [CLUSTER.SessionKeepAlive(leadership_term_id=5, cluster_session_id=11)]
    assert leader.stage.run_for(leadership_term_id=5, ns_per_unit=1_000_000, publication=leader.log,
                                sessions=leader.sessions, images=leader.images, key=1)  # the same key: on again
    assert [m.payload for m in leader.logged(1)] == [b"after"]
    leader.send(1, _message(13, b"unknown session"))
    leader.send(1, _message(12, b"old term", term=4))
    await_condition(lambda: leader.run() >= 0 and not leader.stage.is_running, 5, "the stage off")


@pytest.mark.requires_jit
def test_a_log_that_cannot_take_a_message_leaves_it_for_the_next_pass(aeron):
    leader = Leader(aeron, ingress_channel="aeron:ipc?term-length=256k")
    payloads = [bytes([i]) * 1000 for i in range(40)]  # 40 KB: more than the log's window of half a 64 KiB term
    for payload in payloads:
        leader.send(0, _message(11, payload))
    image = next(i for i in leader.ingress.images if i.session_id == leader.clients[0].session_id)
    leader.run()
    assert 0 < image.position < leader.clients[0].position and leader.stage.is_running  # back pressure: waits
    assert [m.payload for m in leader.logged(len(payloads))] == payloads  # read: the window opens, the rest goes


class _RecordedStage(IngressStage):
    def __init__(self):
        super().__init__(stages=NetworkStages())
        self.calls = []

    def run_for(self, **kwargs):
        self.calls.append(("run", kwargs["leadership_term_id"], kwargs["ns_per_unit"]))
        return True

    def stop(self):
        self.calls.append(("stop",))


def test_the_module_runs_it_for_an_active_leader_on_the_system_clock(tmp_path, monkeypatch):
    world = three_member_leader(tmp_path)
    agent = world.agent
    stage = agent._ingress_stage = _RecordedStage()
    monkeypatch.setattr(agent.ingress_adapter, "compiled_images", lambda: [])
    monkeypatch.setattr(agent, "_mapped_log_publication", lambda: SimpleNamespace(log_buffer=np.zeros(8, np.uint8)))
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("stop",)  # the test's clock is not the one compiled code reads
    monkeypatch.setattr(ClusterClock, "is_system_clock", property(lambda self: True))
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("run", agent.leadership_term_id, agent.cluster_clock.time_unit.nanos_per_unit)
    agent.set_role(ClusterRole.FOLLOWER)
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("stop",)
