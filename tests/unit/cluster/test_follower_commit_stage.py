"""A follower's commit from the driver's stretch (``kernels/cluster_follower_commit``, ``FollowerCommitStage``): its
leader's CommitPositions taken from the consensus images, the log read up to them and to what was recorded, the
commit position moved there and the sessions' activity kept for the module; what it leaves to the module's Python
path; and the module turning it on only for a follower between elections."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.cluster.follower_commit_stage import FollowerCommitStage
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import LogPublisher
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels import cluster_follower_commit as fc
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.layout.cluster import ClusterRole
from harness.awaiting import await_condition
from tests.unit.cluster.test_consensus_module_agent import follower

CHANNEL = "aeron:ipc?term-length=64k"
LOG_CHANNEL = "aeron:ipc?term-length=256k"


class Follower:
    """Follower 1 of leader 0 in term 3: the consensus images of the leader and of follower 2, the log, its
    recording and commit counters."""

    def __init__(self, aeron):
        self.consensus = aeron.add_subscription(CHANNEL, 108)
        self.from_leader, self.from_other = (aeron.add_exclusive_publication(CHANNEL, 108) for _ in range(2))
        self.log_publication = aeron.add_exclusive_publication(LOG_CHANNEL, 100)
        log_subscription = aeron.add_subscription(LOG_CHANNEL, 100)
        await_condition(lambda: len(self.consensus.images) == 2 and log_subscription.images
                        and self.log_publication.is_connected, 10, "the streams")
        self.log_image = log_subscription.images[0]
        self.log = LogPublisher(self.log_publication)
        self.rec_pos = aeron.add_counter(100, b"", "rec-pos")
        self.commit = aeron.add_counter(203, b"", "commit-pos")
        self.stages = NetworkStages()
        self.stage = FollowerCommitStage(self.stages)
        self.images = [image.compiled() for image in self.consensus.images]
        self.log_handle = self.log_image.compiled()
        assert self.run_for()

    def run_for(self, registration_offset: int = 0, key=1) -> bool:
        own = SimpleNamespace(values_buffer=self.rec_pos.values_buffer, counter_id=self.rec_pos.id,
                              registration_id=self.rec_pos.registration_id + registration_offset)
        return self.stage.run_for(leadership_term_id=3, leader_member_id=0, append_position=own,
                                  commit_counter=self.commit, log=self.log_handle, images=self.images, key=key)

    def commit_position(self, position: int, term: int = 3, leader: int = 0, publication=None) -> None:
        data = np.frombuffer(CLUSTER.encode(CLUSTER.CommitPosition(leadership_term_id=term, log_position=position,
                                                                   leader_member_id=leader)), np.uint8)
        assert (publication or self.from_leader).offer(data) > 0

    def message(self, session: int, timestamp: int = 100) -> int:
        assert self.log.session_message_header(3, session, timestamp, b"put")
        return self.log_publication.position

    def image_of(self, publication):
        return next(i for i in self.consensus.images if i.session_id == publication.session_id)

    def run(self) -> int:
        total = 0
        while (work := run_stages(self.stages.table, len(self.stages))) > 0:
            total += work
        return total


@pytest.mark.requires_jit  # the images' compiled handles: Numba overloads
def test_the_leaders_commit_moves_the_commit_position_as_far_as_the_log_is_recorded(aeron):
    node = Follower(aeron)
    ends = [node.message(8, 100), node.message(9, 101), node.message(8, 102)]
    node.rec_pos.set(ends[1])  # the archive recorded two of the three
    node.commit_position(ends[2])
    await_condition(lambda: node.run() > 0, 5, "the CommitPosition")
    assert node.stage.notified_commit_position == ends[2]
    assert node.log_image.position == ends[1] and node.commit.get() == ends[1]
    assert node.stage.take() == (True, [[8, 100], [9, 101]])
    node.rec_pos.set(ends[2])  # recorded: the stage reads on without another CommitPosition
    assert node.run() > 0 and node.commit.get() == ends[2]
    assert node.stage.take() == (False, [[8, 102]])
    assert node.run() == 0 and node.stage.is_running


@pytest.mark.requires_jit
def test_what_the_module_must_decide_is_left_for_its_python_path(aeron):
    node = Follower(aeron)
    node.rec_pos.set(1 << 20)
    node.commit_position(4096, term=4)  # a later term: the module starts an election
    node.commit_position(4096, leader=2, publication=node.from_other)  # not from its leader
    first = node.message(8)
    assert node.log.timer_event(3, 1, 2)
    end = node.message(8)
    await_condition(lambda: node.run() >= 0 and all(i.position == 0 for i in node.consensus.images)
                    and node.commit.get() == 0, 5, "nothing taken")
    node.stage.notified_commit_position = end  # as the module sets it from a CommitPosition it read
    node.run()
    assert node.log_image.position == first and node.commit.get() == first  # before the timer event
    assert not node.stage.is_running and node.stage.stopped == fc.STOPPED_AT_OTHER
    assert all(i.position == 0 for i in node.consensus.images)


@pytest.mark.requires_jit
def test_a_full_activity_table_a_closed_log_and_a_recording_gone_turn_it_off(aeron):
    node = Follower(aeron)
    end = 0
    for session in range(fc.ACTIVITY_ROWS + 1):  # one session more than the table holds
        end = node.message(1000 + session)
    node.rec_pos.set(end)
    node.stage.notified_commit_position = end
    node.run()
    assert not node.stage.is_running and node.stage.stopped == fc.STOPPED_TABLE_FULL
    took, rows = node.stage.take()
    assert [r[0] for r in rows] == list(range(1000, 1000 + fc.ACTIVITY_ROWS))
    assert node.run_for()  # the module applied the rows: the stage goes on
    assert node.run() > 0 and node.log_image.position == end and node.stage.take()[1] == [[1000 + 64, 100]]
    assert node.run_for(registration_offset=1, key=2)  # the counter freed and taken by another
    assert node.run() == 0 and node.stage.stopped == fc.STOPPED_RECORDING_GONE
    assert node.run_for(key=3)
    node.log_handle.state[:8].view(np.int64)[0] = 1  # the log image's closed word
    assert node.run() == 0 and node.stage.stopped == fc.STOPPED_LOG_CLOSED


class _RecordedStage(FollowerCommitStage):
    def __init__(self):
        super().__init__(stages=NetworkStages())
        self.calls = []

    def run_for(self, **kwargs):
        self.calls.append(("run", kwargs["leadership_term_id"], kwargs["leader_member_id"]))
        return True

    def stop(self):
        self.calls.append(("stop",))


def test_the_module_runs_it_for_a_follower_between_elections_and_applies_what_it_did(tmp_path, monkeypatch):
    world, _ = follower(tmp_path)
    agent = world.agent
    stage = agent._follower_stage = _RecordedStage()
    monkeypatch.setattr(agent.consensus_adapter, "compiled_images", lambda: [])
    monkeypatch.setattr(type(agent.log_adapter), "compiled_handle", SimpleNamespace(log=np.zeros(8, np.uint8)))
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("run", 3, 0)
    agent.on_replay_session_open(0, 1, 11, 5, 102, "aeron:ipc")
    stage.notified_commit_position = 4096
    stage.state[fc.STATE_COMMITS] += 1
    stage.activity[:24].view(np.int64)[:] = [1, 11, 7_000]  # one row: session 11 at 7000 (the cluster's ms)
    world.clock.advance_ms(20)
    agent.do_work()
    assert agent.notified_commit_position == 4096 and agent.time_of_last_log_update_ns == world.clock.now_ns
    assert agent.session_by_id[11].time_of_last_activity_ns == agent.cluster_clock.convert_to_nanos(7_000)
    agent.set_role(ClusterRole.LEADER)
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("stop",)
