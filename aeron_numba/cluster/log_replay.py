"""Replay of the local log recording into the consensus module and its services (Aeron's ``LogReplay``): the
election's ``LogReplay`` (``election_host.LogReplay``) in LEADER_REPLAY and FOLLOWER_REPLAY.

The constructor asks the local archive to replay ``recording_id`` from ``start_position`` to ``stop_position`` on
the consensus module's replay channel and stream (``ctx.replay_channel`` / ``ctx.replay_stream_id``, IPC 103 by
default) and subscribes to that replay's session alone. ``do_work`` waits for the replay image, checks it joined at
``start_position`` (anything else is a ``ClusterError``: the archive replayed something else), hands it to the log
adapter and tells the services to join the same replay (JoinLog, role FOLLOWER, ``max_log_position`` the stop);
from then on each call is the agent's ``replay_log_poll``, which consumes the log up to the stop position (the
agent applies session opens/closes, timers and cluster actions as it reads them and moves the commit position).
``is_done`` once the adapter has read to the stop position and no snapshot is in progress; ``close`` lets go of the
image and the subscription (the archive ends its replay when the subscriber goes).

What it needs from the consensus module (Aeron's ``LogAdapter`` and ``ConsensusModuleAgent``, snake_case):

``log_adapter`` (``log_adapter.LogAdapter``)
    ``image`` (None until set), ``set_image(image)``, ``position`` (how far the log has been read),
    ``disconnect()`` (let go of the image and its subscription) and ``consensus_module_agent`` (Aeron's
    ``LogAdapter.consensusModuleAgent()``; or give the agent as ``consensus_module_agent=``).
agent
    ``await_services_ready(log_channel, stream_id, log_session_id, log_position, max_log_position, is_startup,
    role)`` and ``replay_log_poll(log_adapter, stop_position) -> int`` (Aeron's agent methods of those names) and
    ``is_taking_snapshot()`` (the state is SNAPSHOT: Aeron's ``state() != SNAPSHOT`` test, named as
    ``ElectionHost`` names it).

As Aeron, the replay's length is ``stop_position - start_position`` (a bounded replay: the archive ends it there).
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.codecs.channel_uri import SESSION_ID_PARAM, ChannelUri
from aeron_numba.layout.cluster import ClusterRole


def replay_session_id_to_session_id(replay_session_id: int) -> int:
    """The image session id of a replay: the low 32 bits of the archive's replay session id, as a signed int."""
    session_id = replay_session_id & 0xFFFF_FFFF
    return session_id - (1 << 32) if session_id >= 1 << 31 else session_id


def add_session_id(channel: str, session_id: int) -> str:
    """``channel`` restricted to one session (Aeron's ``ChannelUri.addSessionId``)."""
    uri = ChannelUri.parse(channel)
    return str(ChannelUri(uri.media, {**uri.params, SESSION_ID_PARAM: str(session_id)}, uri.prefix))


class LogReplay:
    """Replay the local log recording between two positions into the consensus module and its services."""

    def __init__(self, archive, recording_id: int, start_position: int, stop_position: int, log_adapter, ctx,
                 consensus_module_agent=None):
        if stop_position < start_position:
            raise ClusterError(f"log replay stopPosition={stop_position} < startPosition={start_position}")
        self.start_position = start_position
        self.stop_position = stop_position
        self.log_adapter = log_adapter
        self.consensus_module_agent = consensus_module_agent or log_adapter.consensus_module_agent
        channel, stream_id = ctx.replay_channel, ctx.replay_stream_id
        replay_session_id = archive.start_replay(recording_id, start_position, stop_position - start_position,
                                                 channel, stream_id)
        self.log_session_id = replay_session_id_to_session_id(replay_session_id)
        self.log_subscription = archive.aeron.add_subscription(add_session_id(channel, self.log_session_id),
                                                               stream_id)

    def do_work(self) -> int:
        log_adapter = self.log_adapter
        if log_adapter.image is None:
            image = self.log_subscription.image_by_session_id(self.log_session_id)
            if image is None:
                return 0
            if image.join_position != self.start_position:
                raise ClusterError(f"joinPosition={image.join_position} expected startPosition={self.start_position}")
            log_adapter.set_image(image)
            subscription = self.log_subscription
            self.consensus_module_agent.await_services_ready(
                subscription.channel, subscription.stream_id, self.log_session_id, self.start_position,
                self.stop_position, True, ClusterRole.FOLLOWER)
            return 1
        return self.consensus_module_agent.replay_log_poll(log_adapter, self.stop_position)

    def is_done(self) -> bool:
        return (self.log_adapter.image is not None and self.log_adapter.position >= self.stop_position
                and not self.consensus_module_agent.is_taking_snapshot())

    def close(self) -> None:
        try:
            self.log_adapter.disconnect()
        finally:
            self.log_subscription.close()

    def __repr__(self) -> str:
        return (f"LogReplay{{startPosition={self.start_position}, stopPosition={self.stop_position}, "
                f"logSessionId={self.log_session_id}, logSubscription={self.log_subscription!r}}}")
