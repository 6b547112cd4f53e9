"""Archive replication for the consensus module (Aeron's ``RecordingReplication``, ``MultipleRecordingReplication``
and ``SnapshotReplication``).

``RecordingReplication`` is the election's ``LogReplication`` (``election_host.LogReplication``): it asks the local
archive to replicate a recording of another member's archive (``AeronArchive.replicate``, a ReplicateRequest2) up
to a stop position, then follows the replication through the recording signals the consensus module reads from its
archive client and hands to ``on_signal`` (the correlation id is the replication id): EXTEND finds the destination
recording's ``rec-pos`` counter, SYNC says the copy reached the source's end, REPLICATE_END that the replication is
over, STOP gives the destination's final position, DELETE is an error. ``poll(now_ns)`` reads the ``rec-pos`` counter
every progress interval; when the position has not moved for the progress timeout the replication is stopped
(``try_stop_replication``) and a ``ClusterError`` raised: "log replication has not progressed" while short of the
stop position, "log replication failed to stop" once there (the source archive died or the network went; the
election restarts). Signals may be given by name (``"EXTEND"``, as ``AeronArchive.poll_for_recording_signals``
delivers them) or by the schema's code.

``MultipleRecordingReplication`` replicates several recordings one after another (a snapshot set); one that ends
without SYNC is started again. ``SnapshotReplication`` uses it for ``RecordingLog`` snapshots and answers the
snapshots with the destination's recording ids.

``new_log_replication`` builds the replication as Aeron's ``ConsensusModuleAgent.newLogReplication`` does (the
leader's archive control channel with its archive endpoint, the replication channel or a response channel, a fresh
replication session id), so the agent only picks the leader and positions.

Differences from Aeron: the progress interval, when not given, is a tenth of the timeout (ClusterBackup's rule),
as there is no interval setting in ``ConsensusModuleContext``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from aeron_numba.archive import recording_pos
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.codecs.channel_uri import ENDPOINT_PARAM, ChannelUri
from aeron_numba.layout import archive as A
from aeron_numba.layout.bits import NULL_VALUE

NULL_POSITION = A.NULL_POSITION
NULL_COUNTER_ID = recording_pos.NULL_COUNTER_ID
_SIGNAL_NAMES = {code: name for name, code in A.RECORDING_SIGNALS.items()}
_MDC_CONTROL_PARAM = "control"
_MDC_CONTROL_MODE_PARAM = "control-mode"
_CONTROL_MODE_RESPONSE = "response"
_INTERFACE_PARAM = "interface"


def signal_name(signal) -> str:
    """A recording signal's name, from its name or its schema code; an unknown one is a ``ClusterError``."""
    if isinstance(signal, str):
        if signal in A.RECORDING_SIGNALS:
            return signal
    elif signal in _SIGNAL_NAMES:
        return _SIGNAL_NAMES[signal]
    raise ClusterError(f"unknown recording signal {signal!r} (known: {', '.join(A.RECORDING_SIGNALS)})")


def default_progress_interval_ns(progress_timeout_ns: int) -> int:
    return max(progress_timeout_ns // 10, 1)


@dataclass
class ReplicationParams:
    """Aeron's ``ReplicationParams``: how ``AeronArchive.replicate`` copies a recording."""

    dst_recording_id: int = NULL_VALUE
    stop_position: int = NULL_POSITION
    replication_channel: str | None = None
    src_response_channel: str | None = None
    replication_session_id: int = NULL_VALUE
    live_destination: str | None = None
    file_io_max_length: int = NULL_VALUE
    encoded_credentials: bytes = field(default=b"")
    #: a tagged replication (Aeron's taggedReplicate): the destination's recording subscription carries these tags
    channel_tag_id: int = NULL_VALUE
    subscription_tag_id: int = NULL_VALUE


def replicate(archive, src_recording_id: int, src_control_stream_id: int, src_control_channel: str,
              params: ReplicationParams) -> int:
    """``archive.replicate`` with ``params``; returns the replication id."""
    return archive.replicate(src_recording_id, params.dst_recording_id, src_control_stream_id, src_control_channel,
                             params.live_destination, stop_position=params.stop_position,
                             replication_channel=params.replication_channel,
                             file_io_max_length=params.file_io_max_length,
                             replication_session_id=params.replication_session_id,
                             encoded_credentials=params.encoded_credentials,
                             src_response_channel=params.src_response_channel,
                             channel_tag_id=params.channel_tag_id, subscription_tag_id=params.subscription_tag_id)


class RecordingReplication:
    """One recording copied from another archive up to ``params.stop_position`` (see the module docstring)."""

    def __init__(self, archive, src_recording_id: int, src_archive_channel: str, src_control_stream_id: int,
                 params: ReplicationParams, progress_check_timeout_ns: int, progress_check_interval_ns: int,
                 now_ns: int):
        self.archive = archive
        self.stop_position = params.stop_position
        self.progress_check_timeout_ns = progress_check_timeout_ns
        self.progress_check_interval_ns = progress_check_interval_ns
        self.progress_deadline_ns = now_ns + progress_check_timeout_ns
        self.progress_check_deadline_ns = now_ns + progress_check_interval_ns
        self.src_archive_channel = src_archive_channel
        self.recording_position_counter_id = NULL_COUNTER_ID
        self.recording_id = NULL_VALUE
        self.position = NULL_POSITION
        self.last_recording_signal: str | None = None
        self._has_replication_ended = False
        self._has_synced = False
        self._has_stopped = False
        self.replication_id = replicate(archive, src_recording_id, src_control_stream_id, src_archive_channel, params)

    @classmethod
    def for_log(cls, agent, leader, leader_recording_id: int, stop_position: int,
                now_ns: int) -> "RecordingReplication":
        """The election host's ``new_log_replication`` for an agent with ``archive``, ``ctx`` and
        ``log_recording_id()``: ``new_log_replication`` from ``leader``'s archive endpoints."""
        return new_log_replication(agent.archive, agent.ctx, leader.archive_endpoint,
                                   leader.archive_response_endpoint, leader_recording_id, agent.log_recording_id(),
                                   stop_position, now_ns)

    # ------------------------------------------------------------------------------------------- duty cycle
    def poll(self, now_ns: int) -> int:
        """Check progress (every interval) and the deadline; ``ClusterError`` (after stopping the replication)
        when it has not progressed for the timeout."""
        if self._has_replication_ended:
            return 0
        work_count = 0
        if now_ns >= self.progress_check_deadline_ns:
            self.progress_check_deadline_ns = now_ns + self.progress_check_interval_ns
            if self._poll_dst_recording_position():
                self.progress_deadline_ns = now_ns + self.progress_check_timeout_ns
            work_count += 1
        if now_ns >= self.progress_deadline_ns:
            if self.stop_position == NULL_POSITION or self.position < self.stop_position:
                error = ClusterError(f"log replication has not progressed: {self}")
            else:
                error = ClusterError(f"log replication failed to stop: {self}")
            try:
                self.close()
            except ClusterError as close_error:
                raise error from close_error
            raise error
        return work_count

    def _poll_dst_recording_position(self) -> bool:
        counter_id = self.recording_position_counter_id
        if counter_id == NULL_COUNTER_ID:
            return False
        counters = self.archive.aeron.counters_reader
        recording_position = counters.get_counter_value(counter_id)
        if recording_pos.is_active(counters, counter_id, self.recording_id) and recording_position > self.position:
            self.position = recording_position
            return True
        return False

    # -------------------------------------------------------------------------------------------- signals
    def on_signal(self, correlation_id: int, recording_id: int, position: int, signal) -> None:
        """A recording signal from the local archive; those of other requests are ignored."""
        if correlation_id != self.replication_id:
            return
        name = signal_name(signal)
        if name == "EXTEND":
            self.recording_position_counter_id = recording_pos.find_counter_id_by_recording(
                self.archive.aeron.counters_reader, recording_id, self.archive.archive_id)
        elif name == "SYNC":
            self._has_synced = True
        elif name == "REPLICATE_END":
            self._has_replication_ended = True
        elif name == "STOP":
            self._has_stopped = True
        elif name == "DELETE":
            raise ClusterError(f"recording was deleted during replication: {self}")
        self.last_recording_signal = name
        if recording_id != NULL_VALUE:
            self.recording_id = recording_id
        if position != NULL_POSITION:
            self.position = position

    # ------------------------------------------------------------------------------------------- queries
    def has_replication_ended(self) -> bool:
        return self._has_replication_ended

    def has_synced(self) -> bool:
        return self._has_synced

    def has_stopped(self) -> bool:
        return self._has_stopped

    def close(self) -> None:
        """Stop the replication if it has not ended (an archive that no longer knows it is fine)."""
        if not self._has_replication_ended:
            self._has_replication_ended = True
            try:
                self.archive.try_stop_replication(self.replication_id)
            except Exception as exc:  # the archive's answer, or its absence: the caller restarts the election
                raise ClusterError(f"failed to stop log replication: {exc}") from exc

    def __str__(self) -> str:
        return (f"RecordingReplication{{replicationId={self.replication_id}, stopPosition={self.stop_position}, "
                f"progressCheckTimeoutNs={self.progress_check_timeout_ns}, "
                f"progressCheckIntervalNs={self.progress_check_interval_ns}, "
                f"recordingPositionCounterId={self.recording_position_counter_id}, recordingId={self.recording_id}, "
                f"position={self.position}, progressDeadlineNs={self.progress_deadline_ns}, "
                f"progressCheckDeadlineNs={self.progress_check_deadline_ns}, "
                f"lastRecordingSignal={self.last_recording_signal or 'NULL_VAL'}, "
                f"hasReplicationEnded={str(self._has_replication_ended).lower()}, "
                f"hasSynced={str(self._has_synced).lower()}, hasStopped={str(self._has_stopped).lower()}}}")


def create_destination_uri(channel: str, endpoint: str) -> str:
    """``channel``'s media with only ``endpoint`` (and its ``interface``), as Aeron's
    ``ChannelUri.createDestinationUri``."""
    uri = ChannelUri.parse(channel)
    params = {ENDPOINT_PARAM: endpoint}
    if _INTERFACE_PARAM in uri.params:
        params[_INTERFACE_PARAM] = uri.params[_INTERFACE_PARAM]
    return str(ChannelUri(uri.media, params))


def new_log_replication(archive, ctx, leader_archive_endpoint: str, response_archive_endpoint: str | None,
                        leader_recording_id: int, dst_recording_id: int, stop_position: int,
                        now_ns: int) -> RecordingReplication:
    """The follower's log replication from the leader's archive (Aeron's ``ConsensusModuleAgent.newLogReplication``):
    into ``dst_recording_id`` (NULL_VALUE: a new recording) up to ``stop_position``, progress timeout the leader
    heartbeat timeout and interval the leader heartbeat interval."""
    replication_channel = ctx.replication_channel
    params = ReplicationParams(dst_recording_id=dst_recording_id, stop_position=stop_position,
                               replication_session_id=_int32(archive.aeron.next_correlation_id()))
    if response_archive_endpoint:
        uri = ChannelUri.parse(replication_channel)
        response_params = {k: v for k, v in uri.params.items() if k != ENDPOINT_PARAM}
        response_params[_MDC_CONTROL_PARAM] = response_archive_endpoint
        response_params[_MDC_CONTROL_MODE_PARAM] = _CONTROL_MODE_RESPONSE
        replication_channel = str(ChannelUri(uri.media, response_params, uri.prefix))
        params.src_response_channel = replication_channel
    params.replication_channel = replication_channel
    return RecordingReplication(
        archive, leader_recording_id,
        create_destination_uri(ctx.leader_archive_control_channel, leader_archive_endpoint),
        archive.context.control_request_stream_id, params, ctx.leader_heartbeat_timeout_ns,
        ctx.leader_heartbeat_interval_ns, now_ns)


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


# ------------------------------------------------------------------------------------------------ several
@dataclass(frozen=True)
class _RecordingInfo:
    src_recording_id: int
    dst_recording_id: int
    stop_position: int


class MultipleRecordingReplication:
    """Recordings of one source archive replicated one at a time, in the order added (Aeron's
    ``MultipleRecordingReplication``). ``event_listener(control_uri, src_recording_id, dst_recording_id, position,
    has_synced)`` hears each replication's end."""

    def __init__(self, archive, src_control_stream_id: int, src_control_channel: str, replication_channel: str,
                 replication_progress_timeout_ns: int, replication_progress_interval_ns: int | None = None,
                 src_response_channel: str | None = None):
        self.archive = archive
        self.src_control_stream_id = src_control_stream_id
        self.src_control_channel = src_control_channel
        self.replication_channel = replication_channel
        self.src_response_channel = src_response_channel
        self.progress_timeout_ns = replication_progress_timeout_ns
        self.progress_interval_ns = replication_progress_interval_ns or default_progress_interval_ns(
            replication_progress_timeout_ns)
        self._pending: list[_RecordingInfo] = []
        self._completed: dict[int, int] = {}
        self._cursor = 0
        self.recording_replication: RecordingReplication | None = None
        self.event_listener: Callable[[str, int, int, int, bool], None] | None = None

    def add_recording(self, src_recording_id: int, dst_recording_id: int, stop_position: int) -> None:
        self._pending.append(_RecordingInfo(src_recording_id, dst_recording_id, stop_position))

    def poll(self, now_ns: int) -> int:
        if self.is_complete():
            return 0
        replication = self.recording_replication
        if replication is None:
            self._replicate_current(now_ns)
            return 1
        replication.poll(now_ns)
        if not replication.has_replication_ended():
            return 0
        pending = self._pending[self._cursor]
        if self.event_listener is not None:
            self.event_listener(self.src_control_channel, pending.src_recording_id, replication.recording_id,
                                replication.position, replication.has_synced())
        self.recording_replication = None
        replication.close()
        if replication.has_synced():
            self._completed[pending.src_recording_id] = replication.recording_id
            self._cursor += 1
        else:
            self._replicate_current(now_ns)  # ended short of the source's end: again
        return 1

    def _replicate_current(self, now_ns: int) -> None:
        info = self._pending[self._cursor]
        params = ReplicationParams(dst_recording_id=info.dst_recording_id, stop_position=info.stop_position,
                                   replication_channel=self.replication_channel,
                                   src_response_channel=self.src_response_channel,
                                   replication_session_id=_int32(self.archive.aeron.next_correlation_id()))
        self.recording_replication = RecordingReplication(
            self.archive, info.src_recording_id, self.src_control_channel, self.src_control_stream_id, params,
            self.progress_timeout_ns, self.progress_interval_ns, now_ns)

    def completed_dst_recording_id(self, src_recording_id: int) -> int:
        return self._completed.get(src_recording_id, NULL_VALUE)

    def on_signal(self, correlation_id: int, recording_id: int, position: int, signal) -> None:
        if self.recording_replication is not None:
            self.recording_replication.on_signal(correlation_id, recording_id, position, signal)

    def is_complete(self) -> bool:
        return self._cursor >= len(self._pending)

    def close(self) -> None:
        replication, self.recording_replication = self.recording_replication, None
        if replication is not None:
            replication.close()


class SnapshotReplication:
    """A snapshot set (``recovery_plan.Snapshot``s) copied from another member's archive (Aeron's
    ``SnapshotReplication``); ``snapshots_retrieved()`` gives them back with this archive's recording ids."""

    DEFAULT_PROGRESS_TIMEOUT_NS = 10_000_000_000
    DEFAULT_PROGRESS_INTERVAL_NS = 1_000_000_000

    def __init__(self, archive, src_control_stream_id: int, src_control_channel: str, replication_channel: str,
                 replication_progress_timeout_ns: int = DEFAULT_PROGRESS_TIMEOUT_NS,
                 replication_progress_interval_ns: int = DEFAULT_PROGRESS_INTERVAL_NS):
        self._snapshots_pending: list = []
        self._replication = MultipleRecordingReplication(
            archive, src_control_stream_id, src_control_channel, replication_channel,
            replication_progress_timeout_ns, replication_progress_interval_ns)

    @classmethod
    def from_context(cls, archive, ctx, src_control_stream_id: int, src_control_channel: str) -> "SnapshotReplication":
        """With the consensus module's replication channel and ``replication_progress_timeout_ns`` (the interval a
        tenth of it)."""
        timeout_ns = ctx.replication_progress_timeout_ns
        return cls(archive, src_control_stream_id, src_control_channel, ctx.replication_channel, timeout_ns,
                   default_progress_interval_ns(timeout_ns))

    def add_snapshot(self, snapshot) -> None:
        self._snapshots_pending.append(snapshot)
        self._replication.add_recording(snapshot.recording_id, NULL_VALUE, NULL_POSITION)

    def poll(self, now_ns: int) -> int:
        return self._replication.poll(now_ns)

    def on_signal(self, correlation_id: int, recording_id: int, position: int, signal) -> None:
        self._replication.on_signal(correlation_id, recording_id, position, signal)

    def is_complete(self) -> bool:
        return self._replication.is_complete()

    def snapshots_retrieved(self) -> list:
        return [replace(s, recording_id=self._replication.completed_dst_recording_id(s.recording_id))
                for s in self._snapshots_pending]

    def close(self) -> None:
        self._replication.close()
