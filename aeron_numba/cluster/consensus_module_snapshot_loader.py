"""Loading the consensus module's snapshot from the local archive (Aeron's ``ConsensusModuleAgent.loadSnapshot``
around its ``ConsensusModuleSnapshotAdapter``): replay the snapshot recording from its start on the replay channel
and stream, reassemble its messages and feed them to ``consensus_module_snapshot.ConsensusModuleSnapshotAdapter``,
which calls the listener's ``on_load_*`` methods, until the END marker.

The listener is the consensus module agent, with Aeron's ``ConsensusModuleSnapshotListener`` methods in
snake_case: ``on_load_begin_snapshot(app_version, time_unit)``, ``on_load_consensus_module_state(next_session_id,
next_service_session_id, log_service_session_id, pending_message_capacity)``, ``on_load_cluster_session(
cluster_session_id, correlation_id, opened_log_position, time_of_last_activity, close_reason, response_stream_id,
response_channel)``, ``on_load_timer(correlation_id, deadline)``, ``on_load_pending_message_tracker(
next_service_session_id, log_service_session_id, pending_message_capacity, service_id)``,
``on_load_pending_message(cluster_session_id, buffer, offset, length)`` (the whole message: SessionMessageHeader and
payload, to append to the service's pending message tracker as it was) and ``on_load_end_snapshot()``.
The adapter on main hands ``on_load_pending_message`` only the length; this loader stands between them and adds the
message's bytes, so that a pending message survives a restart.

``load()`` polls until done (Aeron blocks the same way, at start-up); ``poll()`` / ``is_done()`` let a caller drive
it from its own loop. The replay image closing before the END marker is ``ClusterError("snapshot ended
unexpectedly")``; so is no replay image within the timeout.
"""

from __future__ import annotations

import time

from aeron_numba.agent.idle_strategy import idle_strategy_from_name
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotAdapter
from aeron_numba.cluster.context import DEFAULT_IDLE_STRATEGY
from aeron_numba.cluster.log_replay import add_session_id, replay_session_id_to_session_id
from aeron_numba.layout import archive as A

FRAGMENT_LIMIT = 10


class ConsensusModuleSnapshotLoader:
    """Replays ``recording_id`` from ``archive`` and loads it into ``listener`` (see the module docstring)."""

    def __init__(self, archive, recording_id: int, replay_channel: str, replay_stream_id: int, listener,
                 idle_strategy=None, poll_archive_events=None):
        self.archive = archive
        self.recording_id = recording_id
        self.listener = listener
        self.idle_strategy = idle_strategy or idle_strategy_from_name(DEFAULT_IDLE_STRATEGY)
        self._poll_archive_events = poll_archive_events
        self.adapter = ConsensusModuleSnapshotAdapter(self)
        self._assembler = FragmentAssembler(self._on_fragment)
        replay_session_id = archive.start_replay(recording_id, 0, A.NULL_LENGTH, replay_channel, replay_stream_id)
        self.session_id = replay_session_id_to_session_id(replay_session_id)
        self.subscription = archive.aeron.add_subscription(add_session_id(replay_channel, self.session_id),
                                                           replay_stream_id)
        self.image = None

    # ------------------------------------------------------------------------------------------ driving
    def poll(self) -> int:
        """Read what the replay has delivered; returns the fragments read."""
        if self.image is None:
            self.image = self.subscription.image_by_session_id(self.session_id)
            if self.image is None:
                return 0
        return self.image.poll(self._assembler, FRAGMENT_LIMIT)

    def is_done(self) -> bool:
        return self.adapter.is_done

    def load(self, timeout_ns: int | None = None) -> None:
        """Poll until the END marker (idling while nothing comes); then close."""
        timeout_ns = self.archive.context.message_timeout_ns if timeout_ns is None else timeout_ns
        image_deadline_ns = time.monotonic_ns() + timeout_ns
        invoker = self.archive.aeron.conductor_agent_invoker
        try:
            self.idle_strategy.reset()
            while True:
                fragments = self.poll()
                if self.is_done():
                    return
                if fragments == 0:
                    if self._poll_archive_events is not None:
                        self._poll_archive_events()
                    if self.image is None:
                        if time.monotonic_ns() > image_deadline_ns:
                            raise ClusterError(f"no replay of snapshot recording {self.recording_id} within "
                                               f"{timeout_ns / 1e9:.1f}s")
                    elif self.image.is_closed:
                        raise ClusterError(f"snapshot ended unexpectedly: recording {self.recording_id} at "
                                           f"position {self.image.position}")
                    if invoker is not None:
                        invoker.invoke()
                self.idle_strategy.idle(fragments)
        finally:
            self.close()

    def close(self) -> None:
        self.subscription.close()

    # --------------------------------------------------------------------------- between replay and adapter
    def _on_fragment(self, buffer, offset: int, length: int, header) -> None:
        self._buffer, self._offset = buffer, offset
        self.adapter.on_message(buffer, offset, length)

    def on_load_begin_snapshot(self, app_version, time_unit):
        self.listener.on_load_begin_snapshot(app_version, time_unit)

    def on_load_consensus_module_state(self, next_session_id, next_service_session_id, log_service_session_id,
                                       pending_message_capacity):
        self.listener.on_load_consensus_module_state(next_session_id, next_service_session_id,
                                                     log_service_session_id, pending_message_capacity)

    def on_load_cluster_session(self, cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
                                close_reason, response_stream_id, response_channel):
        self.listener.on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position,
                                              time_of_last_activity, close_reason, response_stream_id,
                                              response_channel)

    def on_load_timer(self, correlation_id, deadline):
        self.listener.on_load_timer(correlation_id, deadline)

    def on_load_pending_message_tracker(self, next_service_session_id, log_service_session_id,
                                        pending_message_capacity, service_id):
        self.listener.on_load_pending_message_tracker(next_service_session_id, log_service_session_id,
                                                      pending_message_capacity, service_id)

    def on_load_pending_message(self, cluster_session_id, length):
        self.listener.on_load_pending_message(cluster_session_id, self._buffer, self._offset, length)

    def on_load_end_snapshot(self):
        self.listener.on_load_end_snapshot()
