"""Reading a consensus module snapshot (spec/cluster.md §9): the adapter of its messages.

A snapshot is an archive recording of schema 111 messages between a BEGIN and an END ``SnapshotMarker``:
``ConsensusModule`` (session id counters), one ``ClusterSession`` per open session, ``Timer`` per scheduled timer,
a ``PendingMessageTracker`` per service, and each pending service message behind a ``SessionMessageHeader``.
``ConsensusModuleSnapshotAdapter`` decodes whole messages (reassembled fragments) and calls its listener's
``on_load_*`` methods, as Aeron's ``ConsensusModuleSnapshotAdapter`` does; ClusterTool's
``describe-latest-cm-snapshot`` prints them, a restarting consensus module will load them.

A snapshot that breaks the marker rules or holds bytes that do not decode cannot be loaded: ``ClusterError``.
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster_schema import ENUMS

#: The snapshot marker's typeId of a consensus module snapshot (ConsensusModule.Configuration.SNAPSHOT_TYPE_ID).
SNAPSHOT_TYPE_ID = C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID
_MARK = ENUMS["SnapshotMark"]


class ConsensusModuleSnapshotAdapter:
    """Feed it the snapshot's messages in order (``on_message``); ``is_done`` once the END marker is read.

    The listener has ``on_load_begin_snapshot(app_version, time_unit)``, ``on_load_consensus_module_state(
    next_session_id, next_service_session_id, log_service_session_id, pending_message_capacity)``,
    ``on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
    close_reason, response_stream_id, response_channel)``, ``on_load_timer(correlation_id, deadline)``,
    ``on_load_pending_message(cluster_session_id, length)``, ``on_load_pending_message_tracker(
    next_service_session_id, log_service_session_id, pending_message_capacity, service_id)`` and
    ``on_load_end_snapshot()``. Enum fields (time unit, close reason) are passed as the schema's codes.
    """

    RECEIVES = ("SessionMessageHeader", "SnapshotMarker", "ClusterSession", "Timer", "ConsensusModule",
                "ClusterMembers", "PendingMessageTracker")

    def __init__(self, listener):
        self.listener = listener
        self.in_snapshot = False
        self.is_done = False
        self._length = 0
        self._adapter = SbeAdapter(CLUSTER, self, self.RECEIVES, on_error=self._on_malformed,
                                   name="ConsensusModuleSnapshotAdapter")

    @staticmethod
    def _on_malformed(text: str) -> None:
        raise ClusterError(f"consensus module snapshot: {text}")

    def on_message(self, buffer, offset: int, length: int) -> None:
        """One whole message (a reassembled fragment) of the snapshot."""
        if self.is_done:
            return
        self._length = length
        message = self._adapter.decode(buffer, offset, length)
        self._adapter.dispatch(message)

    # ------------------------------------------------------------------------------- decoded messages
    def on_snapshot_marker(self, type_id, log_position, leadership_term_id, index, mark, time_unit, app_version):
        if type_id != SNAPSHOT_TYPE_ID:
            raise ClusterError(f"unexpected snapshot type: {type_id}")
        if mark == _MARK["BEGIN"]:
            if self.in_snapshot:
                raise ClusterError("already in snapshot")
            self.in_snapshot = True
            self.listener.on_load_begin_snapshot(app_version, time_unit)
        elif mark == _MARK["END"]:
            if not self.in_snapshot:
                raise ClusterError("missing begin snapshot")
            self.listener.on_load_end_snapshot()
            self.is_done = True

    def on_consensus_module(self, next_session_id, next_service_session_id, log_service_session_id,
                            pending_message_capacity):
        self.listener.on_load_consensus_module_state(next_session_id, next_service_session_id,
                                                     log_service_session_id, pending_message_capacity)

    def on_cluster_session(self, cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
                           close_reason, response_stream_id, response_channel):
        self.listener.on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position,
                                              time_of_last_activity, close_reason, response_stream_id,
                                              response_channel)

    def on_timer(self, correlation_id, deadline):
        self.listener.on_load_timer(correlation_id, deadline)

    def on_session_message_header(self, leadership_term_id, cluster_session_id, timestamp, payload):
        self.listener.on_load_pending_message(cluster_session_id, self._length)

    def on_cluster_members(self, member_id, high_member_id, cluster_members):
        pass  # written by older versions; the members now come from configuration (Aeron ignores it too)

    def on_pending_message_tracker(self, next_service_session_id, log_service_session_id, pending_message_capacity,
                                   service_id):
        self.listener.on_load_pending_message_tracker(next_service_session_id, log_service_session_id,
                                                      pending_message_capacity, service_id)
