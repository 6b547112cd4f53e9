"""A follower's AppendPosition from the driver's stretch (``kernels/cluster_append_position``, ``AppendPositionStage``):
one message for each move of the recorded position, decoded by the codec as Aeron's, nothing for a counter that is no
longer the recording's, and the consensus module turning it on only for a follower between elections."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from aeron_numba.cluster.append_position_stage import AppendPositionStage
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
from tests.unit.cluster.test_consensus_module_agent import follower

REC_POS_TYPE_ID = 100


def _messages(subscription) -> list:
    received = []
    subscription.poll(lambda buffer, offset, length, header: received.append(
        CLUSTER.decode(bytes(buffer[offset:offset + length]))), 10)
    return received


@pytest.fixture
def consensus(aeron):
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 108)
    subscription = aeron.add_subscription("aeron:ipc?term-length=64k", 108)
    await_condition(lambda: subscription.images and publication.is_connected, 10, "the consensus stream")
    counter = aeron.add_counter(REC_POS_TYPE_ID, b"", "rec-pos")
    rec_pos = SimpleNamespace(values_buffer=counter.values_buffer, counter_id=counter.id,
                              registration_id=counter.registration_id)
    return publication, subscription, counter, rec_pos


def test_each_move_of_the_recorded_position_sends_one_append_position(consensus):
    publication, subscription, counter, rec_pos = consensus
    stages = NetworkStages()
    stage = AppendPositionStage(stages)
    stage.last_append_position = 512
    stage.run_for(rec_pos, publication, 3, 1)
    stage.run_for(rec_pos, publication, 3, 1)  # the same again: one row
    assert len(stages) == 1 and stage.is_running
    counter.set(512)
    assert run_stages(stages.table, 1) == 0 and not stage.take_sends()  # not past the last one sent
    counter.set(1024)
    assert run_stages(stages.table, 1) == 1 and run_stages(stages.table, 1) == 0
    assert stage.take_sends() and not stage.take_sends() and stage.last_append_position == 1024
    counter.set(1536)
    assert run_stages(stages.table, 1) == 1
    received = []
    await_condition(lambda: received.extend(_messages(subscription)) or len(received) >= 2, 5, "the messages")
    assert received == [
        CLUSTER.AppendPosition(leadership_term_id=3, log_position=position, follower_member_id=1,
                               flags=C.APPEND_POSITION_FLAG_NONE) for position in (1024, 1536)]
    stage.stop()
    assert len(stages) == 0 and not stage.is_running
    counter.set(4096)
    assert run_stages(stages.table, len(stages)) == 0


def test_a_counter_no_longer_the_recordings_turns_the_stage_off_unsent(consensus):
    publication, subscription, counter, rec_pos = consensus
    stages = NetworkStages()
    stage = AppendPositionStage(stages)
    stage.run_for(SimpleNamespace(values_buffer=rec_pos.values_buffer, counter_id=rec_pos.counter_id,
                                  registration_id=rec_pos.registration_id + 1), publication, 3, 1)
    counter.set(2048)
    assert run_stages(stages.table, 1) == 0 and not stage.is_running and stage.last_append_position == 0
    assert publication.position == 0


def test_without_network_stages_nothing_runs_in_compiled_code(consensus):
    publication, _, _, rec_pos = consensus
    stage = AppendPositionStage()
    stage.run_for(rec_pos, publication, 3, 1)
    assert not stage.is_running


class _RecordedStage(AppendPositionStage):
    def __init__(self):
        super().__init__(stages=NetworkStages())
        self.calls = []

    def run_for(self, append_position, publication, leadership_term_id, member_id):
        self.calls.append(("run", append_position, publication, leadership_term_id, member_id))

    def stop(self):
        self.calls.append(("stop",))

    def pause(self):
        self.calls.append(("pause",))


def test_the_module_runs_the_stage_for_a_follower_between_elections_and_stops_it_for_an_election(tmp_path):
    world, _ = follower(tmp_path)
    agent = world.agent
    stage = agent._append_stage = _RecordedStage()
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls[-1] == ("run", agent.append_position, agent.publications[0], 3, 1)
    agent.on_commit_position(4, 0, 2)  # a later term: an election
    world.clock.advance_ms(20)
    agent.do_work()
    assert agent.election is not None and stage.calls[-1] == ("stop",)


def test_the_stage_is_off_while_the_modules_own_cycle_sends(tmp_path, monkeypatch):
    world, _ = follower(tmp_path)
    agent = world.agent
    stage = agent._append_stage = _RecordedStage()
    poll = agent.consensus_adapter.poll
    monkeypatch.setattr(agent.consensus_adapter, "poll", lambda *a: stage.calls.append(("poll",)) or poll(*a))
    world.clock.advance_ms(20)
    agent.do_work()
    assert stage.calls == [("pause",), ("poll",), ("run", agent.append_position, agent.publications[0], 3, 1)]


def test_a_paused_stage_comes_back_as_it_was_and_is_due_for_what_was_recorded_meanwhile(consensus):
    publication, subscription, counter, rec_pos = consensus
    stages = NetworkStages()
    stage = AppendPositionStage(stages)
    stage.run_for(rec_pos, publication, 3, 1)
    counter.set(1024)
    assert run_stages(stages.table, 1) == 1 and not stage.is_due()
    stage.pause()
    counter.set(2048)
    assert run_stages(stages.table, 1) == 0 and not stage.is_due()  # paused: neither sent nor due
    stage.run_for(rec_pos, publication, 3, 1)  # the same key: only back on
    assert len(stages) == 1 and stage.is_running and stage.is_due() and stages.any_due()
    assert run_stages(stages.table, 1) == 1 and stage.last_append_position == 2048 and not stage.is_due()
