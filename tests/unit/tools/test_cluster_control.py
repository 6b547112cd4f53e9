"""The members query of cluster-tool (``tools/cluster_control.query_cluster_members``) against a fake Aeron client
and clock: what it sends, which answer it takes, and when it gives up."""

from __future__ import annotations

import pytest

import aeron_numba.client as client
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.tools import cluster_control

CHANNEL = "aeron:ipc?term-length=128k"


class Clock:
    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakePublication:
    is_connected = True

    def __init__(self):
        self.sent: list = []

    def offer(self, buffer, offset, length) -> int:
        self.sent.append(CLUSTER.decode(buffer, offset, length))
        return 64 * len(self.sent)


class FakeSubscription:
    """Hands out the consensus module's answers once the node has had ``answer_after_polls`` polls to answer."""

    is_connected = True

    def __init__(self, publication: FakePublication, answer_after_polls: int | None):
        self.publication, self.answer_after_polls, self.polls = publication, answer_after_polls, 0

    def poll(self, handler, limit: int) -> int:
        self.polls += 1
        if self.answer_after_polls is None or self.polls <= self.answer_after_polls or not self.publication.sent:
            return 0
        query = self.publication.sent[-1]
        for message in (CLUSTER.ClusterMembersResponse(correlation_id=query.correlation_id - 1, leader_member_id=9,
                                                       active_members="", passive_followers=""),
                        CLUSTER.ClusterMembersExtendedResponse(
                            correlation_id=query.correlation_id, current_time_ns=5, leader_member_id=1, member_id=2,
                            active_members=(), passive_members=())):
            data = CLUSTER.encode(message)
            handler(data, 0, len(data), None)
        self.answer_after_polls = None
        return 2


class FakeAeron:
    def __init__(self, clock: Clock, connect_s: float, answer_after_polls: int | None):
        clock.sleep(connect_s)  # a client's start: mapping the driver's files, loading its kernels
        self.publication = FakePublication()
        self.subscription = FakeSubscription(self.publication, answer_after_polls)
        self.streams: list = []

    def add_publication(self, channel, stream_id):
        self.streams.append(("publication", channel, stream_id))
        return self.publication

    def add_subscription(self, channel, stream_id):
        self.streams.append(("subscription", channel, stream_id))
        return self.subscription

    def next_correlation_id(self) -> int:
        return 42

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


@pytest.fixture
def fake(monkeypatch):
    clock, made = Clock(), []

    def use(connect_s: float = 0.0, answer_after_polls: int | None = 3):
        def connect(context):
            made.append(FakeAeron(clock, connect_s, answer_after_polls))
            return made[-1]
        monkeypatch.setattr(client.Aeron, "connect", staticmethod(connect))
        return made
    monkeypatch.setattr(cluster_control.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(cluster_control.time, "sleep", clock.sleep)
    return use


def test_the_query_asks_extended_on_the_consensus_module_stream_and_takes_only_its_own_answer(fake):
    made = fake()
    membership = cluster_control.query_cluster_members("/dev/shm/x", CHANNEL, 105, 104, 1000)
    assert made[0].streams == [("publication", CHANNEL, 105), ("subscription", CHANNEL, 104)]
    (query,) = made[0].publication.sent
    assert (type(query).__name__, query.correlation_id, query.extended) == ("ClusterMembersQuery", 42, 1)
    assert (membership.leader_member_id, membership.member_id, membership.current_time_ns) == (1, 2, 5)


def test_the_timeout_runs_from_when_the_client_and_its_streams_exist_as_aerons(fake):
    fake(connect_s=1.5)  # longer than the 1 s the toggle commands give the node to answer
    membership = cluster_control.query_cluster_members("/dev/shm/x", CHANNEL, 105, 104, 1000)
    assert membership is not None and membership.member_id == 2


def test_a_node_that_never_answers_is_none_after_the_timeout(fake):
    made = fake(answer_after_polls=None)
    assert cluster_control.query_cluster_members("/dev/shm/x", CHANNEL, 105, 104, 1000) is None
    assert len(made[0].publication.sent) == 1 and made[0].subscription.polls > 100
