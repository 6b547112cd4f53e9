"""LogReplay and ConsensusModuleSnapshotLoader against fakes of the archive client, the subscription and its image,
the log adapter and the agent: the replay asked for (range, channel restricted to the replay's session), the
services told to join it, polling to the stop position, a wrong join position, snapshot state holding ``is_done``;
the loader's replay from the start, its listener calls with a pending message's bytes, and a snapshot whose
replay ends before its END marker."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotLoader
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.cluster.log_replay import LogReplay, add_session_id, replay_session_id_to_session_id
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout.cluster import ClusterRole

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node" / "node-2" / "archive"
REPLAY_SESSION_ID = (5 << 32) | 0xFFFF_FFF0  # the image's session id is the low 32 bits: -16


class Image:
    def __init__(self, join_position, fragments=()):
        self.join_position = self.position = join_position
        self.fragments = list(fragments)
        self.is_closed = False

    def poll(self, handler, limit):
        count = 0
        while self.fragments and count < limit:
            data = self.fragments.pop(0)
            handler(np.frombuffer(data, dtype=np.uint8), 0, len(data), SimpleNamespace(flags=0xC0, session_id=-16))
            count += 1
        return count


class Subscription:
    def __init__(self, channel, stream_id):
        self.channel, self.stream_id = channel, stream_id
        self.image = None
        self.closed = False

    def image_by_session_id(self, session_id):
        return self.image if self.image is not None and session_id == -16 else None

    def close(self):
        self.closed = True


class Archive:
    def __init__(self):
        self.replays, self.subscriptions = [], []
        self.aeron = SimpleNamespace(add_subscription=self._add_subscription, conductor_agent_invoker=None)
        self.ctx = ConsensusModuleContext(replay_channel="aeron:ipc", replay_stream_id=103)
        self.next_image = None  # the image a new subscription will find
        self.context = SimpleNamespace(message_timeout_ns=1_000_000_000)

    def start_replay(self, recording_id, position, length, channel, stream_id):
        self.replays.append((recording_id, position, length, channel, stream_id))
        return REPLAY_SESSION_ID

    def _add_subscription(self, channel, stream_id):
        self.subscriptions.append(Subscription(channel, stream_id))
        self.subscriptions[-1].image = self.next_image
        return self.subscriptions[-1]


class Agent:
    def __init__(self):
        self.joins, self.polls = [], []
        self.taking_snapshot = False

    def await_services_ready(self, *args):
        self.joins.append(args)

    def replay_log_poll(self, log_adapter, stop_position):
        self.polls.append(stop_position)
        log_adapter.read_to = min(stop_position, log_adapter.read_to + 1000)
        return 1

    def is_taking_snapshot(self):
        return self.taking_snapshot


class LogAdapter:
    """What LogReplay uses of ``log_adapter.LogAdapter``."""

    def __init__(self):
        self.consensus_module_agent = Agent()
        self.image = None
        self.read_to = 0
        self.disconnected = 0

    def set_image(self, image):
        self.image = image

    @property
    def position(self):
        return self.read_to

    def disconnect(self):
        self.disconnected += 1
        self.image = None


def test_the_log_is_replayed_between_the_positions_and_the_services_join_the_same_replay():
    archive, log_adapter = Archive(), LogAdapter()
    ctx = ConsensusModuleContext(replay_channel="aeron:ipc?term-length=64k", replay_stream_id=103)
    replay = LogReplay(archive, 0, 9952, 12_000, log_adapter, ctx)
    assert archive.replays == [(0, 9952, 12_000 - 9952, "aeron:ipc?term-length=64k", 103)]
    (subscription,) = archive.subscriptions
    assert (subscription.channel, subscription.stream_id) == ("aeron:ipc?term-length=64k|session-id=-16", 103)
    assert replay.do_work() == 0 and not replay.is_done()  # no image yet
    subscription.image = Image(9952)
    assert replay.do_work() == 1 and log_adapter.image is subscription.image
    agent = log_adapter.consensus_module_agent
    assert agent.joins == [("aeron:ipc?term-length=64k|session-id=-16", 103, -16, 9952, 12_000, True,
                            ClusterRole.FOLLOWER)]
    log_adapter.read_to = 9952
    while not replay.is_done():
        replay.do_work()
    assert log_adapter.position == 12_000 and set(agent.polls) == {12_000}
    replay.close()
    assert log_adapter.disconnected == 1 and subscription.closed


def test_a_snapshot_in_progress_holds_the_replay_open():
    archive, log_adapter = Archive(), LogAdapter()
    replay = LogReplay(archive, 0, 0, 100, log_adapter, ConsensusModuleContext())
    archive.subscriptions[0].image = Image(0)
    replay.do_work()
    log_adapter.read_to = 100
    log_adapter.consensus_module_agent.taking_snapshot = True
    assert not replay.is_done()
    log_adapter.consensus_module_agent.taking_snapshot = False
    assert replay.is_done()


def test_an_image_joined_elsewhere_is_refused_and_a_reversed_range_never_starts():
    archive, log_adapter = Archive(), LogAdapter()
    replay = LogReplay(archive, 0, 4096, 8192, log_adapter, ConsensusModuleContext())
    archive.subscriptions[0].image = Image(0)
    with pytest.raises(ClusterError, match="joinPosition=0 expected startPosition=4096"):
        replay.do_work()
    with pytest.raises(ClusterError, match="stopPosition=10 < startPosition=20"):
        LogReplay(archive, 0, 20, 10, log_adapter, ConsensusModuleContext())
    assert len(archive.replays) == 1


def test_session_ids_and_channels():
    assert replay_session_id_to_session_id(REPLAY_SESSION_ID) == -16
    assert replay_session_id_to_session_id((1 << 40) | 7) == 7
    assert add_session_id("aeron:ipc", 5) == "aeron:ipc?session-id=5"
    assert add_session_id("aeron:ipc?alias=snapshot", -2) == "aeron:ipc?alias=snapshot|session-id=-2"


def golden_frames(name: str) -> list[bytes]:
    data, offset, messages = (GOLDEN / name).read_bytes(), 0, []
    while (frame_length := struct.unpack_from("<i", data, offset)[0]) > 0:
        messages.append(data[offset + 32:offset + frame_length])
        offset += (frame_length + 31) & ~31
    return messages


class Listener:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name[len("on_load_"):], *args))


def test_the_loader_replays_the_recording_from_its_start_and_loads_aerons_snapshot():
    archive, listener = Archive(), Listener()
    archive.next_image = Image(0, golden_frames("2-0.rec"))
    ConsensusModuleSnapshotLoader(listener, archive, archive.aeron, archive.ctx).load(SimpleNamespace(recording_id=2))
    assert archive.replays == [(2, 0, -1, "aeron:ipc", 103)]
    assert archive.subscriptions[0].channel == "aeron:ipc?session-id=-16"
    assert [c[0] for c in listener.calls] == ["begin_snapshot", "consensus_module_state", "cluster_session",
                                             "pending_message_tracker", "end_snapshot"]
    assert listener.calls[2] == ("cluster_session", 1, 6, 256, -1, -(1 << 31), 102,
                                 "aeron:udp?endpoint=127.0.0.1:19000|term-length=64k")
    assert archive.subscriptions[0].closed


def test_a_pending_message_reaches_the_listener_with_its_bytes():
    pending = CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=1, cluster_session_id=9, timestamp=2,
                                                          payload=b"abc"))
    frames = golden_frames("2-0.rec")
    frames.insert(-1, pending)
    archive, listener = Archive(), Listener()
    archive.next_image = Image(0, frames)
    ConsensusModuleSnapshotLoader(listener, archive, archive.aeron, archive.ctx).load(2)
    assert [c for c in listener.calls if c[0] == "pending_message"] == [("pending_message", 9, 2, b"abc")]


def test_a_replay_that_ends_before_the_end_marker_cannot_be_loaded():
    archive = Archive()
    loader = ConsensusModuleSnapshotLoader(Listener(), archive, archive.aeron, archive.ctx)
    image = Image(0, golden_frames("2-0.rec")[:-1])
    archive.next_image = image
    original_poll = image.poll

    def poll_then_close(handler, limit):
        count = original_poll(handler, limit)
        image.is_closed = not image.fragments
        return count

    image.poll = poll_then_close
    with pytest.raises(ClusterError, match="snapshot ended unexpectedly: recording 2"):
        loader.load(2)


def test_no_replay_image_within_the_timeout_is_an_error():
    archive = Archive()
    loader = ConsensusModuleSnapshotLoader(Listener(), archive, archive.aeron, archive.ctx)
    with pytest.raises(ClusterError, match="no replay of snapshot recording 2 within 0.0s"):
        loader.load(2, timeout_ns=1)
    assert archive.subscriptions[0].closed  # let go of even when it fails


def test_a_loader_driven_from_a_duty_cycle_polls_to_the_end_marker():
    archive, listener = Archive(), Listener()
    loader = ConsensusModuleSnapshotLoader(listener, archive, archive.aeron, archive.ctx)
    assert not loader.is_done()
    loader.start(4)
    assert loader.poll() == 0  # no image yet
    archive.subscriptions[0].image = Image(0, golden_frames("4-0.rec"))
    while not loader.is_done():
        loader.poll()
    loader.close()
    assert archive.replays == [(4, 0, -1, "aeron:ipc", 103)] and archive.subscriptions[0].closed
    assert listener.calls[-1] == ("end_snapshot",)


def test_pending_service_messages_survive_a_snapshot_written_and_loaded_with_the_consensus_modules_tracker():
    """The consensus module's own PendingServiceMessageTracker through the taker, the snapshot bytes and the
    loader: its ids, capacity and each pending message (service session id, append position, payload) come back."""
    from aeron_numba.cluster.cluster_time import ClusterTimeUnit
    from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotTaker, snapshot_state
    from aeron_numba.cluster.pending_service_message_tracker import PendingServiceMessageTracker
    from tests.unit.cluster.test_consensus_module_snapshot_taker import Idle, Publication

    tracker = PendingServiceMessageTracker(1, None, None, None)
    for payload in (b"first", b"second" * 100):
        tracker.enqueue_message(payload)
    publication = Publication()
    snapshot_state(ConsensusModuleSnapshotTaker(publication, Idle()), 4096, 2, ClusterTimeUnit.MILLIS, 0, 3, [],
                   None, [PendingServiceMessageTracker(0, None, None, None), tracker])

    restored = [PendingServiceMessageTracker(0, None, None, None), PendingServiceMessageTracker(1, None, None, None)]

    class Agent:
        def on_load_consensus_module_state(self, *args):
            pass

        def on_load_pending_message_tracker(self, next_id, log_id, capacity, service_id):
            restored[service_id].load_state(next_id, log_id, capacity)

        def on_load_pending_message(self, cluster_session_id, timestamp, payload):
            restored[1].append_message(cluster_session_id, timestamp, payload)

        def on_load_cluster_session(self, *args):
            raise AssertionError("no sessions were written")

        def on_load_timer(self, *args):
            raise AssertionError("no timers were written")

    archive = Archive()
    archive.next_image = Image(0, publication.messages)
    ConsensusModuleSnapshotLoader(Agent(), archive, archive.aeron, archive.ctx).load(7)
    original, loaded = [], []
    tracker.for_each(lambda *m: original.append(m))
    restored[1].for_each(lambda *m: loaded.append(m))
    assert loaded == original and len(loaded) == 2
    assert (restored[1].next_service_session_id, restored[1].log_service_session_id) == \
        (tracker.next_service_session_id, tracker.log_service_session_id)
