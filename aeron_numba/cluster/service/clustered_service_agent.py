"""The service container's conductor (Aeron's ``ClusteredServiceAgent``): it recovers the service, joins the logs
the consensus module names, hands the committed log to the service in order, takes snapshots, acks the consensus
module and answers the service's calls (it is the ``Cluster`` the service is given).

Start-up (``on_start``), as Aeron's: wait for the commit-position counter (type 203) and the recovery-state counter
(type 204) of the cluster id; if the recovery state names a leadership term, replay this service's snapshot
recording from the local archive (``ServiceSnapshotLoader`` up to the END marker, then ``service.on_start(cluster,
image)`` reads the service's own state from the rest); else ``service.on_start(cluster, None)``. Then ServiceAck
(logPosition and timestamp of the recovery state, ackId 0, relevantId = this Aeron client's id).

Duty cycle (``do_work``): every millisecond, poll the service adapter (JoinLog, ServiceTerminationPosition,
requestServiceAck), join a pending log once the previous one is done, act on a reached termination or ack
position, touch the mark file every second; poll the log up to the commit position (``BoundedLogAdapter``); run
the service's background work; flush the compiled path's replies. A compiled service on a driver's thread (a
``ClusteredMediaDriver``) has its session messages read, and their replies sent, in the driver's stretch between
these cycles (``use_network_stages``); a cycle then runs for the rest of the log and for its clocks.

Each log event is handled as Aeron handles it: sessions are opened (connected to their response channel only on the
leader) and closed by the log; ClusterActionRequest SNAPSHOT takes the snapshot (an exclusive IPC publication on the
snapshot channel and stream, recorded by the local archive; BEGIN, the sessions, END, then the service's
``on_take_snapshot``; waits until the archive has recorded it all) and acks with the recording id as relevantId;
NewLeadershipTermEvent sets the leadership term and time unit. The role comes from JoinLog (and is FOLLOWER once a
log closes), as in Aeron 1.48, whose container no longer reads the node-role counter.

Differences from Aeron, and why: waits (for a counter, an image, the archive, a publication) idle with the agent's
idle strategy as Aeron's do, but also end with ``AgentTerminationException`` when the container is asked to stop
(``request_termination``: a signal must not wait on a consensus module that never comes). An error in a service
callback or a malformed log entry is counted and recorded in the mark file's error log by the runner's error
handler and the log goes on from the next message (Aeron's runner does the same with the exception).
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

import numpy as np

from aeron_numba.agent import AgentTerminationException
from aeron_numba.agent.clock import SystemNanoClock
from aeron_numba.archive import recording_pos
from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.cluster_error import ClusterError, ClusterEvent
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.service.bounded_log_adapter import BoundedLogAdapter
from aeron_numba.cluster.service.client_session import ContainerClientSession
from aeron_numba.cluster.service.clustered_service import (MOCKED_OFFER, ClusteredServiceBase, CloseReason, Role,
                                                            check_service)
from aeron_numba.cluster.service.service_adapter import ServiceAdapter
from aeron_numba.cluster.service.service_log_stage import ServiceLogStage
from aeron_numba.cluster.service.service_snapshot import ServiceSnapshotLoader, ServiceSnapshotTaker
from aeron_numba.codecs.cluster_proxies import ConsensusModuleProxy
from aeron_numba.kernels import cluster_service_log as K
from aeron_numba.layout import cluster as C
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster_schema import ENUMS
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, CLOSED, MAX_POSITION_EXCEEDED, \
    NOT_CONNECTED

NULL_POSITION = -1
ONE_MILLISECOND_NS = 1_000_000
MARK_FILE_UPDATE_INTERVAL_MS = 1_000
#: Longest compiled idle wait (``add_idle_watch``): the clock-driven work it cannot watch runs at least this often.
IDLE_WATCH_MAX_WAIT_NS = 10_000_000
SNAPSHOT_ACTION = ENUMS["ClusterAction"]["SNAPSHOT"]
CLUSTER_ACTION_FLAGS_DEFAULT = 0
CLUSTER_ACTION_FLAGS_STANDBY_SNAPSHOT = 1
#: The offers of a ServiceAck at termination before giving up (Aeron's agent tries 5 times).
TERMINATION_ACK_ATTEMPTS = 5
_SESSION_HEADER = struct.Struct("<HHHHqqq")

LIFECYCLE_CALLBACK_NONE = 0
LIFECYCLE_CALLBACK_ON_START = 1
LIFECYCLE_CALLBACK_ON_TERMINATE = 2
LIFECYCLE_CALLBACK_ON_ROLE_CHANGE = 3
LIFECYCLE_CALLBACK_DO_BACKGROUND_WORK = 4
_LIFECYCLE_NAMES = {LIFECYCLE_CALLBACK_NONE: "none", LIFECYCLE_CALLBACK_ON_START: "onStart",
                    LIFECYCLE_CALLBACK_ON_TERMINATE: "onTerminate", LIFECYCLE_CALLBACK_ON_ROLE_CHANGE: "onRoleChange",
                    LIFECYCLE_CALLBACK_DO_BACKGROUND_WORK: "doBackgroundWork"}


class _CounterRef(NamedTuple):
    """A counter as the log stage finds it: its values buffer, id and registration id."""

    values_buffer: np.ndarray
    counter_id: int
    registration_id: int


class ClusterTerminationException(AgentTerminationException):
    """The service was told to terminate (Aeron's ``ClusterTerminationException``): ``is_expected`` when it
    reached exactly the termination position the consensus module gave."""

    def __init__(self, is_expected: bool):
        super().__init__(f"cluster termination (expected={is_expected})")
        self.is_expected = is_expected


class ActiveLogEvent:
    """A JoinLog not yet acted on (Aeron's ``ActiveLogEvent``)."""

    __slots__ = ("log_position", "max_log_position", "member_id", "session_id", "stream_id", "is_startup", "role",
                 "channel")

    def __init__(self, log_position, max_log_position, member_id, session_id, stream_id, is_startup, role, channel):
        self.log_position, self.max_log_position = log_position, max_log_position
        self.member_id, self.session_id, self.stream_id = member_id, session_id, stream_id
        self.is_startup, self.role, self.channel = is_startup, role, channel

    def __repr__(self) -> str:
        return (f"ActiveLogEvent(log_position={self.log_position}, max_log_position={self.max_log_position}, "
                f"member_id={self.member_id}, session_id={self.session_id}, stream_id={self.stream_id}, "
                f"is_startup={self.is_startup}, role={self.role!r}, channel={self.channel!r})")


def find_cluster_counter(counters_reader, type_id: int, cluster_id: int) -> int:
    """The id of the counter of ``type_id`` whose key starts with ``cluster_id``, or -1 (Aeron's
    ClusterCounters.find)."""
    for info in counters_reader.for_each():
        if info.type_id == type_id and len(info.key) >= C.CLUSTER_ID_KEY_LENGTH and \
                struct.unpack_from("<i", info.key, C.CLUSTER_ID_KEY_OFFSET)[0] == cluster_id:
            return info.counter_id
    return NULL_VALUE


class ClusteredServiceAgent:
    """See the module docstring. Built by ``ClusteredServiceContainer``; tests build it over a real or fake Aeron
    client with their own clocks and archive connector.

    Parameters
    ----------
    ctx : ClusteredServiceContext (concluded)
    service : ClusteredService
    aeron : Aeron
    error_handler : callable(exc)
        Counts and records an error (the container's: error counter + mark file error log).
    archive_connect : callable() -> AeronArchive
        Connects to the local archive (snapshots).
    idle_strategy : IdleStrategy
        Used by the agent's waits (the runner has its own).
    nano_clock, epoch_clock_ms : callable() -> int
    mark_file : ClusterMarkFile or None
    on_snapshot_duration : callable(duration_ns), optional
        Given how long each ``service.on_take_snapshot`` took (the container's snapshot duration counters).
    """

    #: Its watch names what a cycle leaves: the log's and the consensus module's next frames (its polls' limits),
    #: and its clocks; replies the egress cannot take yet are retried on its timer, as after an idle cycle.
    names_work_left = True

    def __init__(self, ctx, service, aeron, *, error_handler, archive_connect, idle_strategy, nano_clock,
                 epoch_clock_ms, mark_file=None, app_version: int = 0, on_snapshot_duration=None):
        check_service(service)
        self.ctx = ctx
        self.service = service
        self.aeron = aeron
        self.error_handler = error_handler
        self._archive_connect = archive_connect
        self.idle_strategy = idle_strategy
        self._nano_clock = nano_clock
        self._epoch_clock_ms = epoch_clock_ms
        self.mark_file = mark_file
        self.app_version = app_version
        self._on_snapshot_duration = on_snapshot_duration or (lambda duration_ns: None)
        self.service_id = ctx.service_id
        self._member_id = NULL_VALUE
        self._ack_id = 0
        self._termination_position = NULL_POSITION
        self._requested_ack_position = NULL_POSITION
        self._mark_file_update_deadline_ms = 0
        self._last_slow_tick_ns = 0
        self._cluster_time = 0
        self._log_position = NULL_POSITION
        self._leadership_term_id = NULL_VALUE
        self._role = Role.FOLLOWER
        self._time_unit = None
        self._active_log_event: ActiveLogEvent | None = None
        self._commit_position_counter_id = NULL_VALUE
        self._commit_position_registration_id = NULL_VALUE
        self._is_service_active = False
        self.is_started = False  # on_start completed (a container whose agent never started exits with an error)
        self._terminate_requested = False
        self.active_lifecycle_callback = LIFECYCLE_CALLBACK_NONE
        self._sessions: list[ContainerClientSession] = []  # ordered by id, as Aeron keeps them
        self._session_by_id: dict[int, ContainerClientSession] = {}
        self._message_buffer = np.zeros(1024, dtype=np.uint8)
        self._subscription_alias = f"log-sc-{ctx.service_id}"
        self._standby_snapshot_flags = (CLUSTER_ACTION_FLAGS_STANDBY_SNAPSHOT if ctx.standby_snapshot_enabled
                                        else CLUSTER_ACTION_FLAGS_DEFAULT)
        handler = getattr(service, "session_message_handler", None)
        handler = getattr(handler, "__func__", handler)  # a dispatcher found on the class comes bound
        self.log_adapter = BoundedLogAdapter(self, ctx.log_fragment_limit, session_message_handler=handler,
                                             state=getattr(service, "state", None), on_error=self._on_error_text)
        self._session_ids_scratch = np.zeros(64, dtype=np.int64)
        self._log_stage = ServiceLogStage()  # the compiled log read in a driver's stretch: use_network_stages
        self.consensus_module_proxy = ConsensusModuleProxy(
            aeron.add_publication(ctx.control_channel, ctx.consensus_module_stream_id), retry_attempts=1)
        self.service_adapter = ServiceAdapter(aeron.add_subscription(ctx.control_channel, ctx.service_stream_id), self,
                                              on_error=self._on_error_text)
        self.counters = aeron.counters_reader

    # ------------------------------------------------------------------------------------------ agent
    def role_name(self) -> str:
        return self.ctx.service_name

    def use_network_stages(self, stages) -> None:
        """Read the committed log with the compiled handler, and flush its replies, in the network cycles of the
        driver on this thread (``stages``, their ``NetworkStages``: a ``ClusteredMediaDriver``'s) between this
        agent's cycles, so a commit reaches the service, and its replies the egress, without a Python cycle of the
        container (``service_log_stage.py``). Only a compiled service; only while nothing is left for the Python
        path (the stage stops before any other log event, and at a reply its publication cannot take now)."""
        self._log_stage.stop()
        self._log_stage = ServiceLogStage(stages)

    @property
    def log_stage(self) -> ServiceLogStage:
        return self._log_stage

    def on_start(self) -> None:
        self._commit_position_counter_id = self._await_counter(C.COMMIT_POSITION_TYPE_ID, "commit-pos")
        self._commit_position_registration_id = self.counters.get_counter_registration_id(
            self._commit_position_counter_id)
        self._recover_state()
        self._is_service_active = True
        self.is_started = True

    def on_close(self) -> None:
        self._log_stage.stop()
        if self._is_service_active:
            self._is_service_active = False
            try:
                self.service.on_terminate(self)
            except Exception as exc:  # noqa: BLE001 - counted, the close goes on
                self.error_handler(exc)
        try:
            self.log_adapter.close()
        except Exception as exc:  # noqa: BLE001
            self.error_handler(exc)
        if not self.aeron.is_closed:
            for closeable in (self.service_adapter, self.consensus_module_proxy.publication):
                try:
                    closeable.close()
                except Exception as exc:  # noqa: BLE001
                    self.error_handler(exc)
            self._disconnect_egress()
        if self.mark_file is not None:
            self.mark_file.update_activity_timestamp(NULL_VALUE)

    def add_idle_watch(self, watch) -> bool:
        """What an idle cycle waits on (``agent/idle_watch.py``), so a backed-off container parks in compiled code
        rather than running a Python cycle a millisecond: the log's next frame and the commit position bounding it
        (or, while the log stage reads the log in the driver's stretch, the stage turning itself off), the
        consensus module's stream, a driver event; its clocks (mark file, commit-pos check, back-pressured
        replies) wait at most 10 ms. Not while a join, an ack or the termination is pending, and not for a service
        with its own ``do_background_work``, which Aeron calls every duty cycle."""
        if (self._nano_clock not in (time.monotonic_ns, SystemNanoClock.nano_time) or not self._is_service_active
                or self._active_log_event is not None or self._requested_ack_position != NULL_POSITION
                or self._termination_position != NULL_POSITION
                or getattr(type(self.service), "do_background_work", None)
                not in (None, ClusteredServiceBase.do_background_work)):
            return False
        self.aeron.add_idle_watch(watch)
        self.service_adapter.subscription.add_idle_watch(watch)
        image = self.log_adapter.image
        if self._log_stage.is_running:
            # The stage reads the log as it is committed: this agent's work there is what the stage stops before.
            self._log_stage.add_idle_watch(watch)
        elif image is not None:
            values, commit_id = self.counters.values_buffer, self._commit_position_counter_id
            # The log's next frame is work only below the commit position: a frame that arrives before it is
            # committed (the log reaches a member before its commit does) is read once the commit moves.
            if image.position < self.counters.get_counter_value(commit_id):
                image.add_idle_watch(watch)
            watch.watch_counter(values, commit_id)
        watch.run_by(time.monotonic_ns() + IDLE_WATCH_MAX_WAIT_NS)
        return True

    def do_work(self) -> int:
        # The log stage is off while this cycle runs: the service's Python callbacks and every wait inside them
        # (which run the driver's stretch) see no message handed over under them.
        self._log_stage.pause()
        self._take_log_stage()
        try:
            work_count = 0
            now_ns = self._nano_clock()
            if self._check_for_clock_tick(now_ns):
                work_count += self._poll_service_adapter()
            if self.log_adapter.image is not None:
                polled = self.log_adapter.poll(self.counters.get_counter_value(self._commit_position_counter_id))
                work_count += polled
                if polled == 0 and self.log_adapter.is_done():
                    self._close_log()
            work_count += self._invoke_background_work(now_ns)
            if self.log_adapter.is_compiled:
                work_count += self._flush_replies()
            return work_count
        finally:
            self._sync_log_stage()

    def _take_log_stage(self) -> None:
        """What the log stage handed the service since this agent last looked: its log position and cluster time."""
        taken, log_position, timestamp = self._log_stage.take()
        if taken:
            self.on_compiled_session_messages(log_position, timestamp, taken)

    def _sync_log_stage(self) -> None:
        """Turn the log stage on for what this cycle leaves (the log image, the role, the sessions), or keep it
        off while the Python path has work: a join, an ack or the termination pending, replies back-pressured."""
        stage, adapter = self._log_stage, self.log_adapter
        if stage.stages is None or not adapter.is_compiled:
            return
        image, handle = adapter.image, adapter.compiled_handle
        if not self._is_service_active or image is None or handle is None or image.is_closed or adapter.is_done():
            stage.stop()
            return
        outbox = adapter.outbox
        if (self._active_log_event is not None or self._requested_ack_position != NULL_POSITION
                or self._termination_position != NULL_POSITION or not isinstance(adapter.state, np.ndarray)
                or outbox[K.OUTBOX_COUNT_OFFSET:K.OUTBOX_COUNT_OFFSET + 8].view(np.int64)[0] != 0):
            return
        sessions = [(session.id, session.compiled_publication()) for session in self._sessions]
        key = (id(handle), self._role, adapter.max_log_position, self._commit_position_counter_id,
               self._commit_position_registration_id, tuple((i, id(p)) for i, p in sessions))
        commit = _CounterRef(self.counters.values_buffer, self._commit_position_counter_id,
                             self._commit_position_registration_id)
        stage.run_for(handle=handle, commit=commit, max_log_position=adapter.max_log_position,
                      handler=adapter.handler, service_state=adapter.state, outbox=outbox,
                      is_leader=self._role == Role.LEADER, sessions=sessions, fragment_limit=adapter.fragment_limit,
                      key=key)

    def request_termination(self) -> None:
        """Make the agent's waits end (a signal to the container): only sets a flag."""
        self._terminate_requested = True

    @property
    def is_termination_requested(self) -> bool:
        return self._terminate_requested

    # ---------------------------------------------------------------------------------------- Cluster API
    def member_id(self) -> int:
        return self._member_id

    def role(self) -> Role:
        return self._role

    def log_position(self) -> int:
        self._take_log_stage()
        return self._log_position

    def time(self) -> int:
        self._take_log_stage()
        return self._cluster_time

    def time_unit(self) -> ClusterTimeUnit | None:
        return self._time_unit

    def leadership_term_id(self) -> int:
        return self._leadership_term_id

    def context(self):
        return self.ctx

    def get_client_session(self, cluster_session_id: int) -> ContainerClientSession | None:
        return self._session_by_id.get(cluster_session_id)

    def client_sessions(self) -> list[ContainerClientSession]:
        return list(self._sessions)

    def for_each_client_session(self, action) -> None:
        for session in list(self._sessions):
            action(session)

    def close_client_session(self, cluster_session_id: int) -> bool:
        """Ask the consensus module to close a session (it closes when the close is in the log)."""
        self._check_for_valid_invocation()
        session = self._session_by_id.get(cluster_session_id)
        if session is None:
            raise ClusterError(f"unknown clusterSessionId: {cluster_session_id}")
        if session.is_closing:
            return True
        for _ in range(3):
            if self._send_to_consensus_module(lambda: self.consensus_module_proxy.close_session(cluster_session_id)):
                session.mark_closing()
                return True
            self.idle()
        return False

    def schedule_timer(self, correlation_id: int, deadline: int) -> bool:
        """Ask for a TimerEvent of ``correlation_id`` in the log at ``deadline`` (cluster time); replaces a timer of
        the same id. False if the consensus module's stream is back pressured."""
        self._check_for_valid_invocation()
        return self._send_to_consensus_module(
            lambda: self.consensus_module_proxy.schedule_timer(correlation_id, deadline))

    def cancel_timer(self, correlation_id: int) -> bool:
        self._check_for_valid_invocation()
        return self._send_to_consensus_module(lambda: self.consensus_module_proxy.cancel_timer(correlation_id))

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """A message from the service to the cluster (it comes back in the log as a session message of cluster
        session id = the service id): the publication's position or status."""
        self._check_for_valid_invocation()
        data, offset, length = _as_range(buffer, offset, length)
        message_length = self._encode_session_message(self.service_id, data, offset, length)
        result = self.consensus_module_proxy.publication.offer(self._message_buffer, 0, message_length)
        if result < 0:
            _check_consensus_module_result(result)
        return result

    def try_claim(self, length: int, buffer_claim=None):
        """Claim ``length`` bytes for a message to the cluster: the claim (the SessionMessageHeader already at
        its start; write at ``claim.offset + SESSION_HEADER_LENGTH``) or the publication's status."""
        self._check_for_valid_invocation()
        publication = self.consensus_module_proxy.publication
        result = publication.try_claim(K.SESSION_HEADER_LENGTH + length, buffer_claim)
        if isinstance(result, int):
            _check_consensus_module_result(result)
            return result
        self._write_session_header(result.buffer, result.offset, self.service_id)
        return result

    def idle(self, work_count: int = 0) -> None:
        """Idle as the agent does in its waits (for a service looping on back pressure)."""
        if self._terminate_requested:
            raise AgentTerminationException("container terminating")
        self.idle_strategy.idle(work_count)
        if work_count <= 0:
            now_ns = self._nano_clock()
            self._check_for_clock_tick(now_ns)
            if self._is_service_active:
                self._invoke_background_work(now_ns)

    # ----------------------------------------------------------------------------------- to the clients
    def offer_to_session(self, cluster_session_id: int, publication, buffer, offset: int, length: int | None) -> int:
        self._check_for_valid_invocation()
        if self._role != Role.LEADER:
            return MOCKED_OFFER
        if publication is None:
            return NOT_CONNECTED
        data, offset, length = _as_range(buffer, offset, length)
        message_length = self._encode_session_message(cluster_session_id, data, offset, length)
        return publication.offer(self._message_buffer, 0, message_length)

    def try_claim_to_session(self, cluster_session_id: int, publication, length: int, buffer_claim=None):
        self._check_for_valid_invocation()
        if self._role != Role.LEADER:
            return MOCKED_OFFER
        if publication is None:
            return NOT_CONNECTED
        result = publication.try_claim(K.SESSION_HEADER_LENGTH + length, buffer_claim)
        if not isinstance(result, int):
            self._write_session_header(result.buffer, result.offset, cluster_session_id)
        return result

    def _encode_session_message(self, cluster_session_id: int, data, offset: int, length: int) -> int:
        total = K.SESSION_HEADER_LENGTH + length
        if total > self._message_buffer.size:
            self._message_buffer = np.zeros(1 << (total - 1).bit_length(), dtype=np.uint8)
        self._write_session_header(self._message_buffer, 0, cluster_session_id)
        self._message_buffer[K.SESSION_HEADER_LENGTH:total] = data[offset:offset + length]
        return total

    def _write_session_header(self, buffer, offset: int, cluster_session_id: int) -> None:
        _SESSION_HEADER.pack_into(buffer, offset, K.SESSION_MESSAGE_BLOCK_LENGTH, K.SESSION_MESSAGE_TEMPLATE_ID,
                                  K.SCHEMA_ID, K.SCHEMA_VERSION, self._leadership_term_id, cluster_session_id,
                                  self._cluster_time)

    def _flush_replies(self) -> int:
        """Send the compiled path's queued replies (leader), or drop them (any other role: Aeron's MOCKED_OFFER)."""
        outbox = self.log_adapter.outbox
        if outbox[K.OUTBOX_COUNT_OFFSET:K.OUTBOX_COUNT_OFFSET + 8].view(np.int64)[0] == 0:
            return 0
        if self._role != Role.LEADER:
            K.clear_outbox(outbox)
            return 0
        pending = 0
        scratch = self._session_ids_scratch
        while True:
            count = K.outbox_session_ids(outbox, scratch)
            for session_id in scratch[:count].tolist():
                session = self._session_by_id.get(session_id)
                handle = session.compiled_publication() if session is not None else None
                if handle is None:
                    K.drop_replies(outbox, session_id)  # no such session, or not connected: as NOT_CONNECTED
                    continue
                result = K.offer_replies(outbox, session_id, handle.log, handle.pub_state, handle.limit_buffer)
                if result in (BACK_PRESSURED, ADMIN_ACTION):
                    pending += 1
                elif result < 0:
                    K.drop_replies(outbox, session_id)
            if count < scratch.size:
                break
        if pending == 0:
            K.clear_outbox(outbox)
        return 1

    # ------------------------------------------------------------------------------------------ start-up
    def _await_counter(self, type_id: int, name: str) -> int:
        self.idle_strategy.reset()
        counter_id = find_cluster_counter(self.counters, type_id, self.ctx.cluster_id)
        while counter_id == NULL_VALUE:
            self.idle()
            counter_id = find_cluster_counter(self.counters, type_id, self.ctx.cluster_id)
        return counter_id

    def _recover_state(self) -> None:
        self.idle_strategy.reset()
        state = recovery_state.find(self.counters, self.ctx.cluster_id)
        while state is None:
            self.idle()
            state = recovery_state.find(self.counters, self.ctx.cluster_id)
        self.recovery_state = state
        self._log_position = state.log_position
        self._cluster_time = state.timestamp
        self._set_leadership_term_id(state.leadership_term_id)
        self.active_lifecycle_callback = LIFECYCLE_CALLBACK_ON_START
        try:
            if state.leadership_term_id != NULL_VALUE and state.snapshot_recording_id(self.service_id) != NULL_VALUE:
                self._load_snapshot(state.snapshot_recording_id(self.service_id))
            else:
                self.service.on_start(self, None)
        finally:
            self.active_lifecycle_callback = LIFECYCLE_CALLBACK_NONE
        self._ack(self._log_position, self._cluster_time, self.aeron.client_id)

    def _load_snapshot(self, recording_id: int) -> None:
        archive = self._archive_connect()
        try:
            channel, stream_id = self.ctx.replay_channel, self.ctx.replay_stream_id
            replay_session_id = archive.start_replay(recording_id, 0, NULL_VALUE, channel, stream_id)
            session_id = _int32(replay_session_id)
            subscription = self.aeron.add_subscription(_with_session_id(channel, session_id), stream_id)
            try:
                image = self._await_image(session_id, subscription)
                loader = ServiceSnapshotLoader(image, self)
                while True:
                    fragments = loader.poll()
                    if loader.is_done:
                        break
                    if fragments == 0:
                        error = archive.poll_for_error_response()
                        if error is not None:
                            raise ClusterError(f"snapshot replay of recording {recording_id}: {error}")
                        if image.is_closed:
                            raise ClusterError(f"snapshot ended unexpectedly: {image!r}")
                    self.idle(fragments)
                if loader.app_version != self.app_version and (loader.app_version >> 16) != (self.app_version >> 16):
                    raise ClusterError(f"incompatible app version: {self.app_version} snapshot={loader.app_version}")
                self._time_unit = loader.time_unit
                self.service.on_start(self, image)
            finally:
                subscription.close()
        finally:
            archive.close()

    def _await_image(self, session_id: int, subscription):
        self.idle_strategy.reset()
        image = subscription.image_by_session_id(session_id)
        while image is None:
            self.idle()
            image = subscription.image_by_session_id(session_id)
        return image

    # ------------------------------------------------------------------------------------- service stream
    def on_join_log(self, log_position: int, max_log_position: int, member_id: int, log_session_id: int,
                    log_stream_id: int, is_startup: bool, role: int, log_channel: str) -> None:
        self.log_adapter.max_log_position = log_position
        try:
            role = Role(role)
        except ValueError:
            self.error_handler(ClusterError(f"JoinLog: invalid role code {role}"))
            return
        self._active_log_event = ActiveLogEvent(log_position, max_log_position, member_id, log_session_id,
                                                log_stream_id, is_startup, role, log_channel)

    def on_service_termination_position(self, log_position: int) -> None:
        self._termination_position = log_position

    def on_request_service_ack(self, log_position: int) -> None:
        self._requested_ack_position = log_position

    def _poll_service_adapter(self) -> int:
        work_count = self.service_adapter.poll()
        if self._active_log_event is not None and self.log_adapter.image is None:
            event, self._active_log_event = self._active_log_event, None
            self._join_active_log(event)
        if self._termination_position != NULL_POSITION and self._log_position >= self._termination_position:
            if self._log_position > self._termination_position:
                self.error_handler(ClusterEvent(f"service terminate: logPosition={self._log_position} > "
                                                f"terminationPosition={self._termination_position}"))
            self._terminate(self._log_position == self._termination_position)
        if self._requested_ack_position != NULL_POSITION and self._log_position >= self._requested_ack_position:
            if self._log_position > self._requested_ack_position:
                self.error_handler(ClusterEvent(f"invalid ack request: logPosition={self._log_position} > "
                                                f"requestedAckPosition={self._requested_ack_position}"))
            self._ack(self._log_position, self._cluster_time, NULL_VALUE)
            self._requested_ack_position = NULL_POSITION
        return work_count

    def _join_active_log(self, event: ActiveLogEvent) -> None:
        if event.role != Role.LEADER:
            self._disconnect_egress()
        channel = _with_alias(event.channel, self._subscription_alias)
        subscription = self.aeron.add_subscription(channel, event.stream_id)
        try:
            image = self._await_image(event.session_id, subscription)
            if image.join_position != self._log_position:
                raise ClusterError(f"Cluster log must be contiguous for joining image: expectedPosition="
                                   f"{self._log_position} joinPosition={image.join_position}")
            if event.log_position != self._log_position:
                raise ClusterError(f"Cluster log must be contiguous for active log event: expectedPosition="
                                   f"{self._log_position} eventPosition={event.log_position}")
            self.log_adapter.set_image(image)
            self.log_adapter.max_log_position = event.max_log_position
            subscription = None
            self._ack(event.log_position, self._cluster_time, NULL_VALUE)
        finally:
            if subscription is not None:
                subscription.close()
        self._member_id = event.member_id
        if event.role == Role.LEADER:
            for session in self._sessions:
                if self.ctx.is_respond_to_clients and not event.is_startup:
                    session.connect(self.aeron)
                session.reset_closing()
        self._set_role(event.role)

    def _close_log(self) -> None:
        self._log_position = max(self.log_adapter.image.position, self._log_position)
        self.log_adapter.close()
        self._disconnect_egress()
        self._set_role(Role.FOLLOWER)

    def _disconnect_egress(self) -> None:
        for session in self._sessions:
            session.disconnect(self.error_handler)

    def _set_role(self, new_role: Role) -> None:
        if new_role != self._role:
            self._role = new_role
            self.active_lifecycle_callback = LIFECYCLE_CALLBACK_ON_ROLE_CHANGE
            try:
                self.service.on_role_change(new_role)
            finally:
                self.active_lifecycle_callback = LIFECYCLE_CALLBACK_NONE

    def _terminate(self, is_expected: bool) -> None:
        self._is_service_active = False
        self.active_lifecycle_callback = LIFECYCLE_CALLBACK_ON_TERMINATE
        try:
            self.service.on_terminate(self)
        except Exception as exc:  # noqa: BLE001 - counted; the ack still goes
            self.error_handler(exc)
        finally:
            self.active_lifecycle_callback = LIFECYCLE_CALLBACK_NONE
        try:
            ack_id = self._ack_id
            self._ack_id += 1
            for attempt in range(TERMINATION_ACK_ATTEMPTS):
                if self._send_to_consensus_module(lambda: self.consensus_module_proxy.service_ack(
                        self._log_position, self._cluster_time, ack_id, NULL_VALUE, self.service_id)):
                    break
                if attempt + 1 < TERMINATION_ACK_ATTEMPTS:
                    self.idle_strategy.idle(0)
        except Exception as exc:  # noqa: BLE001
            self.error_handler(exc)
        self._termination_position = NULL_VALUE
        raise ClusterTerminationException(is_expected)

    # ---------------------------------------------------------------------------------------- log events
    def on_session_message(self, log_position: int, cluster_session_id: int, timestamp: int, buffer, offset: int,
                           length: int, header) -> None:
        self._log_position = log_position
        self._cluster_time = timestamp
        self.service.on_session_message(self._session_by_id.get(cluster_session_id), timestamp, buffer, offset,
                                        length, header)

    def on_compiled_session_messages(self, log_position: int, timestamp: int, count: int) -> None:
        """The compiled path handed ``count`` messages to the service; the last ended at ``log_position``."""
        self._log_position = log_position
        self._cluster_time = timestamp

    def on_timer_event(self, log_position: int, correlation_id: int, timestamp: int) -> None:
        self._log_position = log_position
        self._cluster_time = timestamp
        self.service.on_timer_event(correlation_id, timestamp)

    def on_session_open(self, leadership_term_id: int, log_position: int, cluster_session_id: int, timestamp: int,
                        response_stream_id: int, response_channel: str, encoded_principal: bytes) -> None:
        self._log_position = log_position
        self._cluster_time = timestamp
        if cluster_session_id in self._session_by_id:
            raise ClusterError(f"clashing open clusterSessionId={cluster_session_id} leadershipTermId="
                               f"{leadership_term_id} logPosition={log_position}")
        session = ContainerClientSession(cluster_session_id, response_stream_id, response_channel, encoded_principal,
                                         self)
        if self._role == Role.LEADER and self.ctx.is_respond_to_clients:
            session.connect(self.aeron)
        self._add_session(session)
        self.service.on_session_open(session, timestamp)

    def on_session_close(self, leadership_term_id: int, log_position: int, cluster_session_id: int, timestamp: int,
                         close_reason: int) -> None:
        self._log_position = log_position
        self._cluster_time = timestamp
        session = self._session_by_id.pop(cluster_session_id, None)
        if session is None:
            self.error_handler(ClusterEvent(f"unknown session close: clusterSessionId={cluster_session_id} "
                                            f"closeReason={close_reason} leadershipTermId={leadership_term_id} "
                                            f"logPosition={log_position}"))
            return
        self._sessions.remove(session)
        session.disconnect(self.error_handler)
        try:
            reason = CloseReason(close_reason)
        except ValueError:
            reason = close_reason
        self.service.on_session_close(session, timestamp, reason)

    def on_service_action(self, leadership_term_id: int, log_position: int, timestamp: int, action: int,
                          flags: int) -> None:
        self._log_position = log_position
        self._cluster_time = timestamp
        if action == SNAPSHOT_ACTION and self._should_snapshot(flags):
            recording_id, error = NULL_VALUE, None
            try:
                recording_id = self._on_take_snapshot(log_position, leadership_term_id)
            except AgentTerminationException:
                raise
            except Exception as exc:  # noqa: BLE001 - acked with no recording, then reported
                error = exc
            self._ack(log_position, self._cluster_time, recording_id)
            if error is not None:
                raise error

    def on_new_leadership_term_event(self, leadership_term_id: int, log_position: int, timestamp: int,
                                     term_base_log_position: int, leader_member_id: int, log_session_id: int,
                                     time_unit: int, app_version: int) -> None:
        self._set_leadership_term_id(leadership_term_id)
        self._log_position = log_position
        self._cluster_time = timestamp
        self._time_unit = ClusterTimeUnit.from_code(time_unit)
        callback = getattr(self.service, "on_new_leadership_term_event", None)
        if callback is not None:
            callback(leadership_term_id, log_position, timestamp, term_base_log_position, leader_member_id,
                     log_session_id, self._time_unit, app_version)

    def _set_leadership_term_id(self, leadership_term_id: int) -> None:
        """The term of the session headers of the service's messages (and of the compiled path's replies)."""
        self._leadership_term_id = leadership_term_id
        outbox = self.log_adapter.outbox
        if outbox is not None:
            outbox[K.OUTBOX_LEADERSHIP_TERM_ID_OFFSET:K.OUTBOX_LEADERSHIP_TERM_ID_OFFSET + 8].view(np.int64)[0] = \
                leadership_term_id

    def add_session(self, cluster_session_id: int, response_stream_id: int, response_channel: str,
                    encoded_principal: bytes) -> None:
        """A session restored from a snapshot (the loader calls it)."""
        self._add_session(ContainerClientSession(cluster_session_id, response_stream_id, response_channel,
                                                 encoded_principal, self))

    def _add_session(self, session: ContainerClientSession) -> None:
        self._session_by_id[session.id] = session
        index = len(self._sessions)
        while index > 0 and self._sessions[index - 1].id > session.id:
            index -= 1
        self._sessions.insert(index, session)

    # ------------------------------------------------------------------------------------------ snapshots
    def _should_snapshot(self, flags: int) -> bool:
        return flags == CLUSTER_ACTION_FLAGS_DEFAULT or (flags & self._standby_snapshot_flags) != 0

    def _on_take_snapshot(self, log_position: int, leadership_term_id: int) -> int:
        archive = self._archive_connect()
        try:
            publication = self.aeron.add_exclusive_publication(self.ctx.snapshot_channel, self.ctx.snapshot_stream_id)
            try:
                channel = _with_session_id(self.ctx.snapshot_channel, publication.session_id)
                archive.start_recording(channel, self.ctx.snapshot_stream_id, "LOCAL", auto_stop=True)
                counter_id, recording_id = self._await_recording_counter(publication.session_id, archive)
                time_unit = int(self._time_unit if self._time_unit is not None else ClusterTimeUnit.MILLIS)
                taker = ServiceSnapshotTaker(publication, self._snapshot_idle)
                taker.mark_begin(log_position, leadership_term_id, time_unit, self.app_version)
                for session in self._sessions:
                    taker.snapshot_session(session)
                taker.mark_end(log_position, leadership_term_id, time_unit, self.app_version)
                start_ns = self._nano_clock()
                self.service.on_take_snapshot(publication)
                self._on_snapshot_duration(self._nano_clock() - start_ns)
                self._await_recording_complete(recording_id, publication.position, counter_id, archive)
                return recording_id
            finally:
                publication.close()
        finally:
            archive.close()

    def _snapshot_idle(self) -> None:
        if self._terminate_requested:
            raise AgentTerminationException("container terminating")
        self.idle_strategy.idle(0)

    def _await_recording_counter(self, session_id: int, archive) -> tuple[int, int]:
        self.idle_strategy.reset()
        counter_id = recording_pos.find_counter_id_by_session(self.counters, session_id, archive.archive_id)
        while counter_id == recording_pos.NULL_COUNTER_ID:
            self.idle()
            error = archive.poll_for_error_response()
            if error is not None:
                raise ClusterError(f"snapshot recording refused by the archive: {error}")
            counter_id = recording_pos.find_counter_id_by_session(self.counters, session_id, archive.archive_id)
        return counter_id, recording_pos.get_recording_id(self.counters, counter_id)

    def _await_recording_complete(self, recording_id: int, position: int, counter_id: int, archive) -> None:
        self.idle_strategy.reset()
        while self.counters.get_counter_value(counter_id) < position:
            self.idle()
            error = archive.poll_for_error_response()
            if error is not None:
                raise ClusterError(f"snapshot recording {recording_id}: {error}")
            # The recording id is in the rec-pos counter's key; the archive leaves its reference id at the default.
            if not recording_pos.is_active(self.counters, counter_id, recording_id):
                raise ClusterError(f"recording stopped unexpectedly: {recording_id}")

    # ---------------------------------------------------------------------------------------------- misc
    def _ack(self, log_position: int, timestamp: int, relevant_id: int) -> None:
        ack_id = self._ack_id
        self._ack_id += 1
        while not self._send_to_consensus_module(lambda: self.consensus_module_proxy.service_ack(
                log_position, timestamp, ack_id, relevant_id, self.service_id)):
            self.idle()

    def _send_to_consensus_module(self, send) -> bool:
        if send():
            return True
        result = self.consensus_module_proxy.last_result
        if result in (CLOSED, MAX_POSITION_EXCEEDED):
            _check_consensus_module_result(result)
        return False  # back pressured, or the consensus module not there yet: the caller tries again

    def _check_for_clock_tick(self, now_ns: int) -> bool:
        if self.aeron.is_closed:
            raise AgentTerminationException("unexpected Aeron close")
        if self._terminate_requested:
            raise AgentTerminationException("container terminating")
        if now_ns - self._last_slow_tick_ns <= ONE_MILLISECOND_NS:
            return False
        self._last_slow_tick_ns = now_ns
        counter_id = self._commit_position_counter_id
        if counter_id != NULL_VALUE and (
                self.counters.get_counter_state(counter_id) != counters_layout.RECORD_ALLOCATED
                or self.counters.get_counter_registration_id(counter_id) != self._commit_position_registration_id):
            self.error_handler(ClusterEvent("commit-pos counter unexpectedly closed, terminating"))
            raise ClusterTerminationException(True)
        now_ms = self._epoch_clock_ms()
        if self.mark_file is not None and now_ms >= self._mark_file_update_deadline_ms:
            self._mark_file_update_deadline_ms = now_ms + MARK_FILE_UPDATE_INTERVAL_MS
            self.mark_file.update_activity_timestamp(now_ms)
        return True

    def _invoke_background_work(self, now_ns: int) -> int:
        do_background_work = getattr(self.service, "do_background_work", None)
        if do_background_work is None:
            return 0
        self.active_lifecycle_callback = LIFECYCLE_CALLBACK_DO_BACKGROUND_WORK
        try:
            return do_background_work(now_ns) or 0
        finally:
            self.active_lifecycle_callback = LIFECYCLE_CALLBACK_NONE

    def _check_for_valid_invocation(self) -> None:
        if self.active_lifecycle_callback != LIFECYCLE_CALLBACK_NONE:
            raise ClusterError("sending messages or scheduling timers is not allowed from "
                               + _LIFECYCLE_NAMES.get(self.active_lifecycle_callback, "unknown"))

    def handle_error(self, exc: BaseException) -> None:
        self.error_handler(exc)

    def _on_error_text(self, text: str) -> None:
        self.error_handler(ClusterError(text))


def _check_consensus_module_result(result: int) -> None:
    """Aeron's ConsensusModuleProxy.checkResult."""
    if result == NOT_CONNECTED:
        raise ClusterError("publication is not connected")
    if result == CLOSED:
        raise ClusterError("publication is closed")
    if result == MAX_POSITION_EXCEEDED:
        raise ClusterError("publication at max position")


def _as_range(buffer, offset: int, length: int | None):
    data = buffer if isinstance(buffer, np.ndarray) else np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)
    if length is None:
        length = data.size - offset
    if offset < 0 or length < 0 or offset + length > data.size:
        raise ClusterError(f"offset={offset} length={length} outside a buffer of {data.size} bytes")
    return data, offset, length


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _rebuild(channel: str, name: str, value) -> str:
    """``channel`` with parameter ``name`` set to ``value`` (replacing it if present)."""
    base, _, query = channel.partition("?")
    parts = [p for p in query.split("|") if p and not p.startswith(name + "=")]
    parts.append(f"{name}={value}")
    return base + "?" + "|".join(parts)


def _with_session_id(channel: str, session_id: int) -> str:
    """Aeron's ChannelUri.addSessionId."""
    return _rebuild(channel, "session-id", session_id)


def _with_alias(channel: str, alias: str) -> str:
    return _rebuild(channel, "alias", alias)
