"""Three consensus module agents, each with its own fakes (cm_fakes.py), wired together by a simulated network: each
member's consensus publications deliver to the member whose consensus endpoint they name, the leader's log
publication delivers to each follower's log subscription (and each member's archive records what its log has).
On one shared fake clock they elect a leader, commit what the leader appends as the followers record it, keep
the followers' session tables as the leader's, and elect a new leader after the leader dies."""

from __future__ import annotations

import re

from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster import ClusterRole, ConsensusModuleState
from tests.unit.cluster.cm_fakes import Clock, FakeImage, make_agent


class Network:
    def __init__(self, tmp_path, member_count: int = 3):
        self.clock = Clock()
        self.worlds = []
        for member_id in range(member_count):
            directory = tmp_path / f"member-{member_id}"
            directory.mkdir()
            self.worlds.append(make_agent(directory, member_count=member_count, member_id=member_id,
                                          service_count=0, clock=self.clock))
        self.alive = set(range(member_count))
        self.delivered: dict[int, int] = {}  # id(publication) -> messages delivered
        self.by_consensus_endpoint = {w.agent.this_member.consensus_endpoint: w for w in self.worlds}

    def start(self) -> None:
        for world in self.worlds:
            world.agent.on_start()

    def agent(self, member_id: int):
        return self.worlds[member_id].agent

    def cycle(self, step_ms: int = 10) -> None:
        self.clock.advance_ms(step_ms)
        for member_id in sorted(self.alive):
            self.worlds[member_id].agent.do_work()
        self.pump()

    def run_until(self, condition, max_ms: int, step_ms: int = 10) -> None:
        for _ in range(max_ms // step_ms):
            if condition():
                return
            self.cycle(step_ms)
        raise AssertionError(f"not reached within {max_ms} ms: " + "; ".join(repr(w.agent) for w in self.worlds))

    def pump(self) -> None:
        for member_id in sorted(self.alive):
            world = self.worlds[member_id]
            for publication in world.aeron.publications:
                if publication.closed:
                    continue
                if publication.stream_id == 108:
                    endpoint = re.search(r"endpoint=([^|]+)", publication.channel).group(1)
                    destination = self.by_consensus_endpoint[endpoint]
                    for message in self._new(publication):
                        if destination.agent.member_id in self.alive:
                            destination.aeron.subscription(108).feed(message)
                elif publication.stream_id == 100 and "alias=log" in publication.channel:
                    self._deliver_log(world, publication)

    def _new(self, publication) -> list:
        start = self.delivered.get(id(publication), 0)
        self.delivered[id(publication)] = len(publication.messages)
        return publication.messages[start:]

    def _deliver_log(self, leader, publication) -> None:
        self._record(leader, publication.session_id, publication.position)
        new = self._new(publication)
        for member_id in sorted(self.alive):
            follower = self.worlds[member_id]
            if follower is leader:
                continue
            for subscription in follower.aeron.subscriptions:
                if (subscription.stream_id == 100 and not subscription.closed
                        and f"session-id={publication.session_id}" in subscription.channel):
                    image = subscription.image_by_session_id(publication.session_id)
                    if image is None:
                        image = FakeImage(subscription, publication.session_id, publication.position)
                        subscription.images.append(image)
                    else:
                        image.pending.extend(CLUSTER.encode(m) for m in new)
                    self._record(follower, publication.session_id,
                                 image.position + sum((32 + len(p) + 31) & ~31 for p in image.pending))

    @staticmethod
    def _record(world, session_id: int, position: int) -> None:
        """The member's archive has recorded its log up to ``position``."""
        for recording_id, recording in world.archive.recordings.items():
            info = world.aeron.counters_reader.counters.get(100 + recording_id)
            if info is not None and recording["session_id"] == session_id:
                info.value = max(info.value, position)

    def leaders(self) -> list[int]:
        return [i for i in sorted(self.alive)
                if self.agent(i).role == ClusterRole.LEADER and self.agent(i).election is None]

    def settled(self) -> bool:
        return (all(self.agent(i).election is None for i in self.alive) and len(self.leaders()) == 1
                and all(self.agent(i).state == ConsensusModuleState.ACTIVE for i in self.alive))


def test_three_members_elect_a_leader_commit_its_log_and_elect_again_when_it_dies(tmp_path):
    network = Network(tmp_path)
    network.start()
    network.run_until(network.settled, 30_000)
    (leader_id,) = network.leaders()
    leader = network.agent(leader_id)
    followers = [i for i in range(3) if i != leader_id]
    term = leader.leadership_term_id
    assert all(network.agent(i).leadership_term_id == term for i in range(3))
    assert all(network.agent(i).role == ClusterRole.FOLLOWER for i in followers)
    assert [w.counters.election_count.value for w in network.worlds] == [1, 1, 1]
    for member_id in range(3):
        entry = network.agent(member_id).recording_log.find_term_entry(term)
        assert entry is not None and entry.term_base_log_position == 0

    # a client session opened on the leader is committed, and the followers learn of it from the log
    leader.on_session_connect(7, 102, C.CLIENT_PROTOCOL_SEMANTIC_VERSION, "aeron:udp?endpoint=127.0.0.9:40000", b"")
    network.run_until(lambda: all(1 in network.agent(i).session_by_id for i in followers), 5_000)
    leader.on_ingress_message(term, 1, b"replicated")
    log_end = network.worlds[leader_id].aeron.publication(100, "alias=log").position
    network.run_until(lambda: all(network.worlds[i].counters.commit_position.value == log_end for i in range(3)),
                      5_000)
    # the commit position doubles as the leader's heartbeat: the followers stay followers while it comes
    for cycle in range(1_200):  # 12 s > leader heartbeat timeout
        if cycle % 100 == 0:
            leader.on_session_keep_alive(term, 1)  # the client stays (its session timeout is 5 s)
        network.cycle()
    assert network.leaders() == [leader_id] and all(network.agent(i).election is None for i in followers)

    # the leader dies: after the heartbeat timeout the followers elect one of themselves in a later term
    network.alive.discard(leader_id)
    network.run_until(network.settled, 60_000)
    (new_leader_id,) = network.leaders()
    assert new_leader_id in followers
    new_term = network.agent(new_leader_id).leadership_term_id
    assert new_term > term
    assert all(network.agent(i).leadership_term_id == new_term for i in followers)
    assert any(str(e) == "leader heartbeat timeout" for i in followers for e in network.worlds[i].errors)
    # the session survives on the new leader, which tells the client of the new leader
    new_leader = network.agent(new_leader_id)
    assert 1 in new_leader.session_by_id
    network.run_until(lambda: any(p.of("NewLeaderEvent") for p in network.worlds[new_leader_id].aeron.publications
                                  if p.stream_id == 102), 5_000)
    event = [p for p in network.worlds[new_leader_id].aeron.publications if p.stream_id == 102][-1].of(
        "NewLeaderEvent")[0]
    assert (event.leader_member_id, event.leadership_term_id, event.cluster_session_id) == (new_leader_id, new_term,
                                                                                             1)
