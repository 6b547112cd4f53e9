"""A leader's commit from the driver's stretch (``kernels/cluster_leader_commit``, ``LeaderCommitStage``): the
followers' AppendPositions taken from the consensus images, the quorum as the module computes it, the commit
position and a CommitPosition to every follower when it moves, what it leaves to the module's Python path, and the
module turning it on only for a leader between elections."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.cluster import cluster_member as cm
from aeron_numba.cluster.leader_commit_stage import LeaderCommitStage
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels import cluster_leader_commit as lc
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster import ClusterRole
from harness.awaiting import await_condition
from tests.unit.cluster.test_consensus_module_agent import three_member_leader

CHANNEL = "aeron:ipc?term-length=64k"


def _messages(subscription, count: int) -> list:
    received = []
    await_condition(lambda: received.extend(_poll(subscription)) or len(received) >= count, 5, "the messages")
    return received


def _poll(subscription) -> list:
    out = []
    subscription.poll(lambda buffer, offset, length, header: out.append(
        CLUSTER.decode(bytes(buffer[offset:offset + length]))), 10)
    return out


def _offer(publication, message) -> None:
    assert publication.offer(np.frombuffer(CLUSTER.encode(message), np.uint8)) > 0


class Leader:
    """Leader 0 of three: the consensus images of followers 1 and 2, its recording and commit counters, and its
    publications to the followers (read back by their subscriptions)."""

    def __init__(self, aeron, for_python=(False, False)):
        self.consensus = aeron.add_subscription(CHANNEL, 108)
        self.from_followers = [aeron.add_exclusive_publication(CHANNEL, 108) for _ in range(2)]
        self.to_followers = [aeron.add_exclusive_publication(CHANNEL, 200 + k) for k in range(2)]
        self.at_followers = [aeron.add_subscription(CHANNEL, 200 + k) for k in range(2)]
        await_condition(lambda: len(self.consensus.images) == 2 and all(p.is_connected for p in
                        self.from_followers + self.to_followers), 10, "the streams")
        self.rec_pos = aeron.add_counter(100, b"", "rec-pos")
        self.commit = aeron.add_counter(203, b"", "commit-pos")
        self.stages = NetworkStages()
        self.stage = LeaderCommitStage(self.stages)
        self.handles = [image.compiled() for image in self.consensus.images]
        self.members = [SimpleNamespace(id=k, log_position=0) for k in (1, 2)]
        own = SimpleNamespace(values_buffer=self.rec_pos.values_buffer, counter_id=self.rec_pos.id,
                              registration_id=self.rec_pos.registration_id)
        followers = [(m, p, python) for m, p, python in zip(self.members, self.to_followers, for_python)]
        self.stage.run_for(leadership_term_id=3, member_id=0, quorum_threshold=2, own_position=own,
                           commit_counter=self.commit, images=self.handles, followers=followers, key=1)

    def append_position(self, follower: int, position: int, flags: int = C.APPEND_POSITION_FLAG_NONE,
                        term: int = 3) -> None:
        image_of = {image.session_id: image for image in self.consensus.images}
        publication = self.from_followers[follower - 1]
        assert publication.session_id in image_of
        _offer(publication, CLUSTER.AppendPosition(leadership_term_id=term, log_position=position,
                                                   follower_member_id=follower, flags=flags))

    def run(self) -> int:
        total = 0
        while (work := run_stages(self.stages.table, len(self.stages))) > 0:
            total += work
        return total


@pytest.mark.requires_jit  # the images' compiled handles: Numba overloads
def test_append_positions_move_the_commit_to_their_quorum_and_every_follower_hears_it(aeron):
    leader = Leader(aeron)
    leader.rec_pos.set(1024)
    leader.append_position(1, 512)
    leader.append_position(2, 256)
    await_condition(lambda: leader.run() > 0 or leader.commit.get() > 0, 5, "the commit")
    assert leader.commit.get() == 512  # the second highest of 1024, 512, 256
    moved, committed = leader.stage.take()
    assert sorted(moved) == [(1, 512), (2, 256)] and committed
    for subscription in leader.at_followers:
        assert _messages(subscription, 1) == [CLUSTER.CommitPosition(leadership_term_id=3, log_position=512,
                                                                     leader_member_id=0)]
    leader.append_position(2, 4096)  # ahead of the leader's own recording: the commit waits for it
    await_condition(lambda: leader.run() > 0, 5, "the AppendPosition taken")
    assert leader.commit.get() == 1024
    leader.rec_pos.set(2048)
    assert leader.run() == 1 and leader.commit.get() == 2048  # its own recording moved it
    assert leader.run() == 0 and leader.stage.take() == ([(2, 4096)], True)
    for subscription in leader.at_followers:
        assert [m.log_position for m in _messages(subscription, 2)] == [1024, 2048]


@pytest.mark.requires_jit
def test_what_the_module_must_decide_is_left_at_the_image_for_its_python_path(aeron):
    leader = Leader(aeron, for_python=(False, True))  # follower 2 catches up: the module's
    leader.rec_pos.set(8192)
    leader.append_position(2, 4096)
    leader.append_position(1, 1024, flags=C.APPEND_POSITION_FLAG_CATCHUP)
    leader.append_position(1, 2048, term=4)  # a later term: the module starts an election
    image_of = {image.session_id: image for image in leader.consensus.images}
    first, second = (image_of[p.session_id] for p in leader.from_followers)
    await_condition(lambda: leader.run() >= 0 and first.position == 0 and second.position == 0
                    and leader.commit.get() == 0, 5, "nothing taken")
    assert leader.stage.take() == ([], False)
    assert leader.commit.get() == 0 and first.position == 0 and second.position == 0


@given(positions=st.lists(st.integers(-1, 1 << 40), min_size=1, max_size=lc.MAX_MEMBERS + 1))
@settings(max_examples=200, deadline=None)
def test_the_stages_quorum_is_the_modules(positions):
    state = lc.new_state()
    own, others = positions[0], positions[1:]
    state[lc.STATE_MEMBER_COUNT] = len(others)
    state[lc.STATE_QUORUM_THRESHOLD] = cm.quorum_threshold(len(positions))
    for k, position in enumerate(others):
        state[lc.STATE_MEMBERS + k * lc.MEMBER_WORDS + lc.MEMBER_LOG_POSITION] = position
    members = [SimpleNamespace(log_position=p) for p in positions]
    assert lc.quorum_commit_position(state, own) == min(cm.quorum_position(members), own)


class _RecordedStage(LeaderCommitStage):
    def __init__(self):
        super().__init__(stages=NetworkStages())
        self.calls = []

    def run_for(self, **kwargs):
        self.calls.append(("run", kwargs["leadership_term_id"], [m.id for m, _, _ in kwargs["followers"]]))

    def stop(self):
        self.calls.append(("stop",))

    def pause(self):
        self.calls.append(("pause",))


def test_the_module_runs_it_for_a_leader_between_elections_and_stops_it_as_a_follower(tmp_path, monkeypatch):
    world = three_member_leader(tmp_path)
    agent = world.agent
    stage = agent._leader_stage = _RecordedStage()
    monkeypatch.setattr(agent.consensus_adapter, "compiled_images", lambda: [])
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("run", agent.leadership_term_id, [1, 2])
    agent.set_role(ClusterRole.FOLLOWER)
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("stop",)


def test_the_stage_is_off_while_the_modules_own_cycle_reads_the_consensus_stream(tmp_path, monkeypatch):
    # A wait inside the cycle (an election's archive request) runs the driver's stretch: the stage must not take
    # AppendPositions or move the commit under the module's Python path meanwhile.
    world = three_member_leader(tmp_path)
    agent = world.agent
    stage = agent._leader_stage = _RecordedStage()
    poll = agent.consensus_adapter.poll
    monkeypatch.setattr(agent.consensus_adapter, "compiled_images", lambda: [])
    monkeypatch.setattr(agent.consensus_adapter, "poll", lambda *a: stage.calls.append(("poll",)) or poll(*a))
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls == [("pause",), ("poll",), ("run", agent.leadership_term_id, [1, 2])]
