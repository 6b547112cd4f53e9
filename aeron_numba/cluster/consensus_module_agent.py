"""The consensus module's conductor (Aeron 1.48's ``ConsensusModuleAgent``): client sessions, the log, commit
positions, timers, service messages, the control toggle, snapshots and termination, and the host of the
``Election`` (it implements every method of ``election_host.ElectionHost`` as Aeron's agent does).

It decides; it never touches bytes. Messages arrive decoded through the adapters (``IngressAdapter``,
``ConsensusAdapter``, ``ConsensusModuleAdapter``, ``LogAdapter``) as ``on_<event>`` calls, and leave through the
proxies (``EgressPublisher``, ``LogPublisher``, the generated ``ConsensusPublisher`` per member and
``ServiceProxy``). Time comes from an injected ``ClusterClock`` and the Aeron client, the archive client and the
files are handed in, so a unit test drives it with fakes.

As in Aeron:
* ``on_start`` connects to the local archive, plans recovery from recording.log and the catalog, publishes the
  RecoveryState counter, waits for every service's first ServiceAck, then starts the first election.
* ``do_work`` runs a slow tick (mark file activity, archive events, redirects and rejections, the control toggle,
  pending sessions, session timeouts, the leader-heartbeat and follower-quorum checks) at most every 10 ms, then
  the consensus adapter, then either the election or the consensus work of its role (leader: timers, service
  messages, ingress, commit position; follower: the log up to the commit position, append positions).
* Waits that Aeron makes inside its duty cycle (the services' acks of a JoinLog, the log recording's counter)
  are made here too, with the agent's idle strategy, and end with the agent when it is asked to close.
* An error while an election runs restarts the election; any other error is counted in the error counter and
  the mark file's error log by the agent runner, and the agent carries on.

Where this differs from Aeron: no ConsensusModuleExtension, no cluster backup, standby snapshots or bootstrap
state (their queries are answered as unsupported, see ``consensus_adapter.py``); the ClusterMembersQuery
extended form is refused with an error (the basic one is answered). Log replay, log replication, the CM's
snapshot writer/loader and cluster termination are Aeron's LogReplay, RecordingReplication,
ConsensusModuleSnapshotTaker/Loader and ClusterTermination (log_replay.py, recording_replication.py,
consensus_module_snapshot.py, cluster_termination.py), called by their Aeron names.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass

from aeron_numba.agent.agent import AgentTerminationException
from aeron_numba.agent.idle_watch import KeptPiece
from aeron_numba.archive import recording_pos
from aeron_numba.client.fragment_assembler import ABORT, CONTINUE
from aeron_numba.cluster import cluster_member as cm
from aeron_numba.cluster.append_position_stage import AppendPositionStage
from aeron_numba.cluster.follower_commit_stage import FollowerCommitStage
from aeron_numba.cluster.ingress_stage import IngressStage
from aeron_numba.cluster.leader_commit_stage import LeaderCommitStage
from aeron_numba.cluster import pending_service_message_tracker as psmt
from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.cluster_error import ClusterError, ClusterEvent
from aeron_numba.cluster.cluster_member import NULL_POSITION, ClusterMember
from aeron_numba.cluster.cluster_session import (
    CLOSE_REASONS, EVENT_CODES, SESSION_INVALID_VERSION_MSG, SESSION_LIMIT_MSG, ClusterSession,
    ClusterSessionProxy, State, close_reason_name)
from aeron_numba.cluster.consensus_adapter import ConsensusAdapter
from aeron_numba.cluster.consensus_module_adapter import ConsensusModuleAdapter
from aeron_numba.cluster.egress_publisher import EgressPublisher
from aeron_numba.cluster.election import Election
from aeron_numba.cluster.ingress_adapter import IngressAdapter
from aeron_numba.cluster.log_adapter import LogAdapter
from aeron_numba.cluster.log_publisher import LogPublisher
from aeron_numba.cluster.pending_service_message_tracker import PendingServiceMessageTracker
from aeron_numba.cluster.recovery_plan import RecordingExtent
from aeron_numba.cluster.timer_service import TIMER_SERVICE_SUPPLIER_DEFAULT, new_timer_service
from aeron_numba.codecs.channel_uri import (
    AERON_SCHEME, ALIAS_PARAM, ENDPOINT_PARAM, INITIAL_TERM_ID_PARAM, IPC_CHANNEL, MTU_LENGTH_PARAM,
    SESSION_ID_PARAM, SPIES_SIMULATE_CONNECTION_PARAM, SPY_QUALIFIER, TAGS_PARAM, TERM_ID_PARAM, TERM_LENGTH_PARAM,
    TERM_OFFSET_PARAM, UDP_MEDIA, ChannelUri)
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import ConsensusPublisher, ServiceProxy
from aeron_numba.kernels.cluster_ingress import OpenSessionTable
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE, semantic_version_major, semantic_version_string
from aeron_numba.layout.cluster import ClusterControlToggle, ClusterRole, ConsensusModuleState, ElectionState
from aeron_numba.layout.cluster_schema import CLUSTER_SCHEMA, CLUSTER_SCHEMA_ID, ENUMS
from aeron_numba.layout.counters import CHANNEL_STATUS_ERRORED

log = logging.getLogger("aeron_numba.cluster")

LONG_MAX = (1 << 63) - 1
#: Aeron's ConsensusModuleAgent.SLOW_TICK_INTERVAL_NS and MARK_FILE_UPDATE_INTERVAL_NS.
SLOW_TICK_INTERVAL_NS = 10_000_000
MARK_FILE_UPDATE_INTERVAL_NS = C.MARK_ACTIVITY_UPDATE_INTERVAL_MS * 1_000_000
#: Aeron's LIVE_ADD_MAX_WINDOW: a catch-up this close to the live log adds the live destination.
LIVE_ADD_MAX_WINDOW = 32 * 1024 * 1024
CLUSTER_ACTION_FLAGS_DEFAULT = 0
CLUSTER_ACTIONS = ENUMS["ClusterAction"]
ADMIN_REQUEST_TYPES = ENUMS["AdminRequestType"]
ADMIN_RESPONSE_CODES = ENUMS["AdminResponseCode"]
ADMIN_REQUEST_TEMPLATE_ID = CLUSTER_SCHEMA.message("AdminRequest").template_id
UDP_CHANNEL = f"{AERON_SCHEME}:{UDP_MEDIA}"
SPY_PREFIX = f"{SPY_QUALIFIER}:"
SOURCE_LOCAL, SOURCE_REMOTE = "LOCAL", "REMOTE"


@dataclass
class ServiceAck:
    """A service's acknowledgement of a log position (Aeron's ``ServiceAck``): ``relevant_id`` is its Aeron client
    id on the first ack, the snapshot's recording id after a snapshot."""
    ack_id: int
    log_position: int
    relevant_id: int


#: Above any position: what a member that is a quorum alone can commit with its own.
_UNBOUNDED_POSITION = (1 << 63) - 1


def has_reached(log_position: int, ack_id: int, queues: list[deque]) -> bool:
    """Every service has acked ``log_position`` with ``ack_id`` (Aeron's ``ServiceAck.hasReached``); an ack for
    another position or out of sequence is a ``ClusterError``."""
    for queue in queues:
        if not queue:
            return False
        ack = queue[0]
        if ack.ack_id != ack_id or ack.log_position != log_position:
            raise ClusterError(f"ack out of sequence: expected [ackId={ack_id}, logPosition={log_position}] vs "
                               f"received [ackId={ack.ack_id}, logPosition={ack.log_position}]")
    return True


class ClusterTerminationException(AgentTerminationException):
    """The consensus module ends (Aeron's ``ClusterTerminationException``): ``is_expected`` after an orderly
    shutdown or abort, not after a fatal error."""

    def __init__(self, is_expected: bool):
        super().__init__("expected termination" if is_expected else "unexpected termination")
        self.is_expected = is_expected


class _ReadableCounter:
    """A counter another process owns (the archive's rec-pos), read while its registration id still matches."""

    def __init__(self, counters, registration_id: int, counter_id: int):
        self._counters = counters
        self.registration_id = registration_id
        self.counter_id = counter_id

    def get(self) -> int:
        return self._counters.get_counter_value(self.counter_id)

    @property
    def values_buffer(self):
        return self._counters.values_buffer

    def add_idle_watch(self, watch) -> None:
        watch.watch_counter(self._counters.values_buffer, self.counter_id)

    @property
    def is_closed(self) -> bool:
        return self._counters.get_counter_registration_id(self.counter_id) != self.registration_id


def _with_params(channel: str, **params) -> str:
    uri = ChannelUri.parse(channel)
    merged = dict(uri.params)
    for key, value in params.items():
        key = key.replace("_", "-")
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = str(value)
    return str(ChannelUri(uri.media, merged, uri.prefix))


def create_destination_uri(channel: str, endpoint: str) -> str:
    """Aeron's ``ChannelUri.createDestinationUri``: the channel's media with only this endpoint (and its interface)."""
    uri = ChannelUri.parse(channel)
    destination = f"aeron:{uri.media}?{ENDPOINT_PARAM}={endpoint}"
    interface = uri.get("interface")
    return destination + (f"|interface={interface}" if interface else "")


class ConsensusModuleAgent:
    """See the module docstring. ``counters`` has the §10 counters as attributes (``module_state``,
    ``cluster_role``, ``control_toggle``, ``commit_position``, ``election_state``, ``election_count``,
    ``leadership_term_id``, ``snapshot_counter``, ``timed_out_client_counter``); ``archive_connect()`` returns a
    connected ``AeronArchive`` to this node's archive; ``error_handler(exc)`` records an error (the mark file's
    error log and the error counter)."""

    #: Its watch names what a cycle leaves (``add_idle_watch``): the next frames of its images, a slow tick with
    #: more to do, service messages past one poll's limit.
    names_work_left = True

    def __init__(self, ctx, aeron, *, archive_connect, recording_log, node_state_file, mark_file, counters,
                 cluster_clock, idle_strategy, error_handler, should_stop=lambda: False, random=None,
                 app_version: int = 0):
        self.ctx = ctx
        self.aeron = aeron
        self._archive_connect = archive_connect
        self.archive = None
        # What add_idle_watch names, kept while its subscriptions are the same: one piece with the log, one without.
        self._kept_watches = (KeptPiece(), KeptPiece())
        self.archive_id = NULL_VALUE
        self.recording_log = recording_log
        self.node_state_file = node_state_file
        self.mark_file = mark_file
        self.counters = counters
        self.cluster_clock = cluster_clock
        self.cluster_time_unit = cluster_clock.time_unit
        self.idle_strategy = idle_strategy
        self._error_handler = error_handler
        self._should_stop = should_stop
        self._random = random
        self.app_version = app_version

        self.member_id = ctx.cluster_member_id
        self.service_count = ctx.service_count
        self.active_members: list[ClusterMember] = ctx.members
        self.member_by_id = {m.id: m for m in self.active_members}
        self.this_member = self.member_by_id[self.member_id]
        self.leader_member: ClusterMember | None = None
        self.publications: dict[int, object] = {}  # member id -> consensus exclusive publication
        self.consensus_publishers: dict[int, ConsensusPublisher] = {}
        self.ingress_endpoints = ",".join(f"{m.id}={m.ingress_endpoint}" for m in self.active_members)
        self.session_timeout_ns = ctx.session_timeout_ns
        self.leader_heartbeat_interval_ns = ctx.leader_heartbeat_interval_ns
        self.leader_heartbeat_timeout_ns = ctx.leader_heartbeat_timeout_ns
        self.is_log_mdc = (not ctx.log_channel.startswith(IPC_CHANNEL)
                           and ChannelUri.parse(ctx.log_channel).get(ENDPOINT_PARAM) is None)

        self.state = ConsensusModuleState.INIT
        self.role = ClusterRole.FOLLOWER
        self.leadership_term_id = NULL_VALUE
        self.election: Election | None = None
        self.recovery_plan = None
        self.expected_ack_position = 0
        self.service_ack_id = 0
        self.service_ack_queues: list[deque] = [deque() for _ in range(self.service_count)]
        self.service_client_ids = [NULL_VALUE] * self.service_count
        self.next_session_id = 1
        self.sessions: list[ClusterSession] = []
        self.session_by_id: dict[int, ClusterSession] = {}
        self.open_sessions = OpenSessionTable()  # the OPEN ones, for the compiled ingress path
        self.pending_user_sessions: list[ClusterSession] = []
        self.rejected_user_sessions: list[ClusterSession] = []
        self.redirect_user_sessions: list[ClusterSession] = []
        self.uncommitted_closed_sessions: deque[ClusterSession] = deque()
        self.uncommitted_timers: deque[tuple[int, int]] = deque()  # (append position, correlation id)
        self.expired_timer_count_by_correlation_id: dict[int, int] = {}
        self.termination_position = NULL_POSITION
        self.cluster_termination = None
        self.log_recording_stop_position = 0
        self._log_recording_id = NULL_VALUE
        self.log_subscription_id = NULL_VALUE
        self.append_position: _ReadableCounter | None = None
        # Its last_append_position, and a follower's AppendPositions sent from the driver's stretch when the driver
        # runs on this thread (``use_network_stages``).
        self._append_stage = AppendPositionStage()
        self._leader_stage = LeaderCommitStage()  # a leader's commit from the driver's stretch, likewise
        # Its notified_commit_position, and a follower's commit (and reading of the log) from the driver's stretch.
        self._follower_stage = FollowerCommitStage()
        self._ingress_stage = IngressStage()  # a leader's ingress to the log from the driver's stretch
        self.time_of_last_log_update_ns = 0
        self.time_of_last_append_position_update_ns = 0
        self.log_stalled_at_position = NULL_POSITION  # _is_log_stalled: where the recording was first seen behind
        self.log_stalled_since_ns = 0
        self.time_of_last_append_position_send_ns = 0
        self._time_of_last_leader_update_ns = 0
        self.slow_tick_deadline_ns = 0
        self._slow_tick_again = False  # the last slow tick had work: it runs again at once (its +1 ns deadline)
        self.mark_file_update_deadline_ns = 0
        self.log_publication_channel_tag = NULL_VALUE
        self.local_log_channel: str | None = None
        self.live_log_destination: str | None = None
        self.catchup_log_destination: str | None = None

        self.authenticator = ctx.authenticator_factory()
        factory = getattr(ctx, "authorisation_service_factory", None)
        self.authorisation_service = factory() if factory is not None else None
        self.egress_publisher = EgressPublisher()
        self.session_proxy = ClusterSessionProxy(self.egress_publisher)
        self.log_publisher = LogPublisher()
        self.log_adapter = LogAdapter(self, ctx.log_fragment_limit, on_error=self._on_decode_error)
        self.ingress_adapter = IngressAdapter(self, ctx.ingress_fragment_limit, on_error=self._on_decode_error)
        self.timer_service = new_timer_service(TIMER_SERVICE_SUPPLIER_DEFAULT, self.on_timer_event,
                                               self.cluster_time_unit, ctx.wheel_tick_resolution_ns,
                                               ctx.ticks_per_wheel)
        self.pending_service_message_trackers = [
            PendingServiceMessageTracker(i, counters.commit_position, self.log_publisher, cluster_clock)
            for i in range(self.service_count)]
        self.service_proxy = None
        self.consensus_module_adapter = None
        self.consensus_adapter = None

    # =========================================================================================== Agent
    def role_name(self) -> str:
        return self.ctx.agent_role_name

    def on_start(self) -> None:
        ctx = self.ctx
        # CM <-> services (stream 104/105) first: the services wait on them to ack the recovery position
        self.service_proxy = ServiceProxy(self.aeron.add_exclusive_publication(ctx.control_channel,
                                                                               ctx.service_stream_id))
        self.consensus_module_adapter = ConsensusModuleAdapter(
            self.aeron.add_subscription(ctx.control_channel, ctx.consensus_module_stream_id), self,
            on_error=self._on_decode_error)
        consensus_channel = _with_params(ctx.consensus_channel, endpoint=self.this_member.consensus_endpoint)
        self.consensus_adapter = ConsensusAdapter(self.aeron.add_subscription(consensus_channel,
                                                                              ctx.consensus_stream_id),
                                                  self, on_error=self._on_decode_error)
        self.archive = self._archive_connect()
        self.archive_id = self.archive.get_archive_id()

        last_term_recording_id = self.recording_log.find_last_term_recording_id()
        if last_term_recording_id != NULL_VALUE:
            self._try_stop_recording_by_identity(last_term_recording_id)

        self.recovery_plan = self._recover_from_snapshot_and_log()
        for member in self.active_members:
            if member is not self.this_member:
                self._add_consensus_publication(member)

        plan = self.recovery_plan
        commit_position = self.counters.commit_position.get()
        self._log_new_election(plan.last_leadership_term_id, commit_position, plan.appended_log_position,
                               "node started")
        self.election = self._new_election(True, NULL_VALUE, plan.last_leadership_term_id,
                                           plan.last_term_base_log_position, commit_position,
                                           plan.appended_log_position)
        self._election_do_work(self.cluster_clock.time_nanos())
        self.set_state(ConsensusModuleState.ACTIVE)

    def do_work(self) -> int:
        timestamp = self.cluster_clock.time()
        now_ns = self.cluster_clock.convert_to_nanos(timestamp)
        work_count = 0
        # Every stage is off while this cycle runs: it reads the log, the consensus images and the ingress itself,
        # and sends and commits itself, and an election it starts (and every wait of one, which runs the driver's
        # stretch) sees nothing move under it. What they did since the last cycle is taken first.
        self._leader_stage.pause()
        self._take_leader_stage(now_ns)
        self._follower_stage.pause()
        self._take_follower_stage(now_ns)
        self._ingress_stage.pause()
        self._append_stage.pause()
        try:
            if now_ns >= self.slow_tick_deadline_ns:
                slow = self._slow_tick_work(now_ns)
                work_count += slow
                self._slow_tick_again = slow > 0
                self.slow_tick_deadline_ns = now_ns + 1 if slow > 0 else now_ns + SLOW_TICK_INTERVAL_NS
            work_count += self.consensus_adapter.poll()
            if self.election is not None:
                work_count += self._election_do_work(now_ns)
            else:
                work_count += self._consensus_work(timestamp, now_ns)
        except AgentTerminationException:
            raise
        except Exception as error:
            if self.election is None:
                raise
            self.election.handle_error(now_ns, error)
            self._sync_election_counters()
        finally:
            self._sync_append_stage()
            self._sync_leader_stage()
            self._sync_follower_stage()
            self._sync_ingress_stage()
        return work_count

    def on_close(self) -> None:
        self._append_stage.stop()
        self._leader_stage.stop()
        self._follower_stage.stop()
        self._ingress_stage.stop()
        for action in (self.log_publisher.disconnect, lambda: self.log_adapter.disconnect(),
                       self._try_stop_log_recording, self.ingress_adapter.close):
            self._quietly(action)
        for adapter in (self.consensus_adapter, self.consensus_module_adapter):
            if adapter is not None:
                self._quietly(adapter.close)
        for publication in self.publications.values():
            self._quietly(publication.close)
        if self.service_proxy is not None:
            self._quietly(self.service_proxy.publication.close)
        for session in list(self.sessions) + self.pending_user_sessions + self.rejected_user_sessions:
            self._quietly(session.close)
        if self.archive is not None:
            self._quietly(self.archive.close)
        self.set_state(ConsensusModuleState.CLOSED)

    def _quietly(self, action) -> None:
        try:
            action()
        except Exception as error:
            self.on_error(error)

    # =========================================================================================== errors
    def on_error(self, error: Exception) -> None:
        """The counted error handler: the mark file's error log and the error counter (never raises)."""
        try:
            self._error_handler(error)
        except Exception:
            log.exception("error handler failed on %r", error)

    def _on_decode_error(self, text: str) -> None:
        self.on_error(ClusterError(text))

    # =========================================================================================== state
    def set_state(self, new_state: ConsensusModuleState) -> None:
        if new_state != self.state:
            log.debug("memberId=%d state %s -> %s", self.member_id, self.state.name, new_state.name)
            self.state = new_state
            self.counters.module_state.set(int(new_state))

    def set_role(self, new_role: ClusterRole) -> None:
        if new_role != self.role:
            log.debug("memberId=%d role %s -> %s", self.member_id, self.role.name, new_role.name)
            self.role = new_role
            self.counters.cluster_role.set(int(new_role))

    def set_leadership_term_id(self, leadership_term_id: int) -> None:
        self.leadership_term_id = leadership_term_id
        self.counters.leadership_term_id.set(leadership_term_id)
        for tracker in self.pending_service_message_trackers:
            tracker.leadership_term_id = leadership_term_id

    def _sync_election_counters(self) -> None:
        election = self.election
        if election is not None:
            self.counters.election_state.set(int(election.state))
            self.set_role(election.role)
        else:
            self.counters.election_state.set(int(ElectionState.CLOSED))

    def _election_do_work(self, now_ns: int) -> int:
        election = self.election
        work_count = election.do_work(now_ns)
        if self.election is election:
            self._sync_election_counters()
        return work_count

    def _new_election(self, is_startup: bool, graceful_closed_leader_id: int, leadership_term_id: int,
                      term_base_log_position: int, log_position: int, append_position: int) -> Election:
        self.counters.election_count.increment()
        self.counters.election_state.set(int(ElectionState.INIT))
        election = Election(is_node_startup=is_startup, this_member_id=self.member_id, members=self.active_members,
                            leadership_term_id=leadership_term_id, term_base_log_position=term_base_log_position,
                            log_position=log_position, append_position=append_position,
                            publishers=self.consensus_publishers, host=self, node_state_file=self.node_state_file,
                            recording_log=self.recording_log, now_ns=self.cluster_clock.time_nanos(),
                            config=self.ctx.election_config(self.app_version), random=self._random,
                            epoch_clock_ms=lambda: self.cluster_clock.time_nanos() // 1_000_000,
                            graceful_closed_leader_id=graceful_closed_leader_id)
        self.election = election
        self._sync_election_counters()
        return election

    def _log_new_election(self, leadership_term_id, commit_position, append_position, reason) -> None:
        log.info("memberId=%d new election: leadershipTermId=%d logPosition=%d appendPosition=%d reason=%s",
                 self.member_id, leadership_term_id, commit_position, append_position, reason)

    def enter_election(self, is_log_end_of_stream: bool, reason: str) -> None:
        if self.election is not None:
            raise ClusterError("election in progress")
        self.set_role(ClusterRole.FOLLOWER)
        term_entry = self.recording_log.find_term_entry(self.leadership_term_id)
        term_base_log_position = (term_entry.term_base_log_position if term_entry is not None
                                  else self.recovery_plan.last_term_base_log_position)
        appended_position = (self.append_position.get() if self.append_position is not None
                             else max(self.recovery_plan.appended_log_position, self.log_recording_stop_position))
        commit_position = self.counters.commit_position.get()
        self._log_new_election(self.leadership_term_id, commit_position, appended_position, reason)
        self.on_error(ClusterEvent(reason))
        graceful = self.leader_member.id if is_log_end_of_stream and self.leader_member is not None else NULL_VALUE
        self._new_election(False, graceful, self.leadership_term_id, term_base_log_position, commit_position,
                           appended_position)
        self._election_do_work(self.cluster_clock.time_nanos())

    # =========================================================================================== idle / waits
    def add_idle_watch(self, watch) -> bool:
        """What an idle cycle between elections waits on (``agent/idle_watch.py``), so a backed-off module parks in
        compiled code rather than running a Python cycle a millisecond: a fragment on ingress, consensus, the
        services' stream, the log (a follower) or the archive's responses; the local archive's recording position
        (the append position a leader commits from); a driver event. Everything else it does on a clock (slow
        tick, heartbeats, timers, session timeouts, retries of a back-pressured offer, the control toggle) waits at
        most one slow tick, 10 ms. An election runs on its own timers: no watch while one is in progress. A follower
        whose AppendPositions go from the driver's stretch (``use_network_stages``) names its log and recording
        position only while it has read less than the commit position it was told."""
        if self.election is not None or self.state is not ConsensusModuleState.ACTIVE:
            return False
        trackers = self.pending_service_message_trackers
        if self._slow_tick_again or any(tracker.has_more_to_append for tracker in trackers):
            watch.run_by(time.monotonic_ns())  # a cycle stopped short: the next one is due at once
        # A follower whose AppendPositions go from the driver's stretch has nothing to do with the log it receives
        # until a CommitPosition (on the consensus stream, watched) lets it read on: below that, the log's next
        # frame and its recorded position are not its work.
        log_quiet = self._follower_stage.is_running or (self._append_stage.is_running
                                                        and self.log_adapter.position >= self.notified_commit_position)
        adapters = self._watched_adapters[:-1] if log_quiet else self._watched_adapters
        subscriptions = tuple(adapter.subscription for adapter in adapters
                              if adapter is not None and adapter.subscription is not None)
        append_position = self.append_position
        # A leader's own recorded position moves its commit position only while below what the followers reached: a
        # leader that records its log as it sends it wakes for their AppendPositions, not for its recording.
        if log_quiet or (append_position is not None and self.role == ClusterRole.LEADER
                         and append_position.get() >= self._quorum_position_beyond_own()):
            append_position = None
        # What it names follows from these alone: named again as is while they are the same.
        key = (tuple(s.watch_key for s in subscriptions), subscriptions, self.archive,
               self.archive.watch_key if self.archive is not None else None, append_position)
        self._kept_watches[append_position is None].add_to(
            watch, key, lambda w: self._name_watch(w, subscriptions, append_position))
        if self._follower_stage.is_running:
            self._follower_stage.add_idle_watch(watch)
        watch.run_by(time.monotonic_ns() + SLOW_TICK_INTERVAL_NS)
        return True

    def _name_watch(self, watch, subscriptions, append_position) -> None:
        self.aeron.add_idle_watch(watch)
        for subscription in subscriptions:
            subscription.add_idle_watch(watch)
        if self.archive is not None:
            self.archive.add_idle_watch(watch)
        if append_position is not None:
            append_position.add_idle_watch(watch)

    @property
    def _watched_adapters(self) -> tuple:
        """The adapters whose streams it watches, the log's last."""
        return self.ingress_adapter, self.consensus_adapter, self.consensus_module_adapter, self.log_adapter

    def idle(self, work_count: int = 0) -> None:
        """Wait inside a duty cycle (Aeron's agent as its own idle strategy); ends when the agent must close."""
        if self._should_stop():
            raise AgentTerminationException("consensus module closing")
        if self.aeron.is_closed:
            raise AgentTerminationException("unexpected Aeron close")
        self.idle_strategy.idle(work_count)
        if work_count == 0:
            self.poll_archive_events()

    def poll_archive_events(self) -> int:
        if self.archive is None:
            return 0
        work_count = 0
        try:
            error = self.archive.poll_for_error_response()
            if error is not None:
                work_count += 1
                self.on_error(ClusterError(f"archive: {error}"))
            if self.election is not None:
                election = self.election
                work_count += self.archive.poll_for_recording_signals(
                    lambda s: election.on_recording_signal(s.correlation_id, s.recording_id, s.position, s.signal))
            else:
                work_count += self.archive.poll_for_recording_signals(None)
        except AgentTerminationException:
            raise
        except Exception as error:
            self.on_error(error)
        return work_count

    # =========================================================================================== recovery
    def _extent_of(self, recording_id: int) -> RecordingExtent | None:
        found: list = []
        self.archive.list_recording(recording_id, found.append)
        if not found:
            return None
        d = found[0]
        return RecordingExtent(d.start_position, d.stop_position, d.initial_term_id, d.term_buffer_length,
                               d.mtu_length, d.session_id)

    def _create_recovery_plan(self):
        return self.recording_log.create_recovery_plan(self.service_count, self._extent_of, self._log_recording_id)

    def _recover_from_snapshot_and_log(self):
        plan = self._create_recovery_plan()
        if plan.log is not None:
            self.update_log_recording_id(plan.log.recording_id)
        counter = self._add_recovery_state_counter(plan)
        try:
            if plan.snapshots:
                self._load_snapshot(plan.snapshots[0])
            while not has_reached(self.expected_ack_position, self.service_ack_id, self.service_ack_queues):
                self.idle(self.consensus_module_adapter.poll())
            self._capture_service_client_ids()
            self.service_ack_id += 1
        finally:
            counter.close()
        return plan

    def _add_recovery_state_counter(self, plan):
        if plan.snapshots:
            ids = [NULL_VALUE] * (len(plan.snapshots) - 1)
            for snapshot in plan.snapshots[1:]:
                ids[snapshot.service_id] = snapshot.recording_id
            first = plan.snapshots[0]
            return recovery_state.allocate(self.aeron, first.leadership_term_id, first.log_position,
                                           first.timestamp, self.ctx.cluster_id, ids)
        return recovery_state.allocate(self.aeron, self.leadership_term_id, 0, 0, self.ctx.cluster_id, [])

    def _load_snapshot(self, snapshot) -> None:
        """Restore sessions, timers and pending service messages from the CM's snapshot (Aeron's loadSnapshot):
        the log then counts as committed up to the snapshot's position, where the services are expected to ack."""
        from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotLoader
        loader = ConsensusModuleSnapshotLoader(self, self.archive, self.aeron, self.ctx,
                                               idle_strategy=self.idle_strategy,
                                               poll_archive_events=self.poll_archive_events)
        loader.load(snapshot)
        for tracker in self.pending_service_message_trackers:
            tracker.reset()
        self.timer_service.current_time(self.cluster_clock.time())
        self.counters.commit_position.set(snapshot.log_position)
        self.set_leadership_term_id(snapshot.leadership_term_id)
        self.expected_ack_position = snapshot.log_position

    def _capture_service_client_ids(self) -> None:
        for i, queue in enumerate(self.service_ack_queues):
            self.service_client_ids[i] = queue.popleft().relevant_id

    # snapshot loader call-backs (Aeron's onLoad*): the loader decodes, the agent restores its state
    def on_load_consensus_module_state(self, next_session_id: int, next_service_session_id: int,
                                       log_service_session_id: int, pending_message_capacity: int) -> None:
        self.next_session_id = next_session_id
        if self.pending_service_message_trackers:
            self.pending_service_message_trackers[0].load_state(next_service_session_id, log_service_session_id,
                                                                pending_message_capacity)

    def on_load_pending_message_tracker(self, next_service_session_id: int, log_service_session_id: int,
                                        pending_message_capacity: int, service_id: int) -> None:
        if not 0 <= service_id < self.service_count:
            raise ClusterError(f"serviceId={service_id} in snapshot is outside [0, {self.service_count})")
        self.pending_service_message_trackers[service_id].load_state(next_service_session_id,
                                                                     log_service_session_id,
                                                                     pending_message_capacity)

    def on_load_pending_message(self, cluster_session_id: int, timestamp: int, payload) -> None:
        service_id = psmt.service_id_from_log_message(cluster_session_id)
        self.pending_service_message_trackers[service_id].append_message(cluster_session_id, timestamp, payload)

    def on_load_cluster_session(self, cluster_session_id: int, correlation_id: int, opened_log_position: int,
                                time_of_last_activity: int, close_reason: int, response_stream_id: int,
                                response_channel: str) -> None:
        session = ClusterSession(cluster_session_id, response_stream_id, response_channel)
        session.open(opened_log_position)
        session.last_activity_ns(self.cluster_clock.time_nanos(), correlation_id)
        if close_reason in CLOSE_REASONS.values():  # the SBE null value: the session was open
            session.closing(close_reason)
        self._add_session(session)
        if cluster_session_id >= self.next_session_id:
            self.next_session_id = cluster_session_id + 1

    def on_load_timer(self, correlation_id: int, deadline: int) -> None:
        self.on_schedule_timer(correlation_id, deadline)

    # =========================================================================================== sessions
    def on_session_connect(self, correlation_id: int, response_stream_id: int, version: int,
                           response_channel: str, encoded_credentials: bytes) -> None:
        cluster_session_id = self.next_session_id if self.role == ClusterRole.LEADER else NULL_VALUE
        if self.role == ClusterRole.LEADER:
            self.next_session_id += 1
        session = ClusterSession(cluster_session_id, response_stream_id, response_channel)
        session.async_connect(self.aeron)
        now_ns = self.cluster_clock.time_nanos()
        session.last_activity_ns(now_ns, correlation_id)
        if self.role != ClusterRole.LEADER:
            self.redirect_user_sessions.append(session)
        elif semantic_version_major(version) != semantic_version_major(C.CLIENT_PROTOCOL_SEMANTIC_VERSION):
            detail = (f"{SESSION_INVALID_VERSION_MSG} {semantic_version_string(version)}, cluster is "
                      f"{semantic_version_string(C.CLIENT_PROTOCOL_SEMANTIC_VERSION)}")
            session.reject(EVENT_CODES["ERROR"], detail)
            self.on_error(ClusterError(f"clusterSessionId={cluster_session_id} {detail}"))
            self.rejected_user_sessions.append(session)
        elif len(self.pending_user_sessions) + len(self.sessions) >= self.ctx.max_concurrent_sessions:
            session.reject(EVENT_CODES["ERROR"], SESSION_LIMIT_MSG)
            self.on_error(ClusterError(f"clusterSessionId={cluster_session_id} {SESSION_LIMIT_MSG}"))
            self.rejected_user_sessions.append(session)
        else:
            self.authenticator.on_connect_request(session.id, bytes(encoded_credentials), now_ns // 1_000_000)
            self.pending_user_sessions.append(session)

    def on_session_close(self, leadership_term_id: int, cluster_session_id: int) -> None:
        if leadership_term_id == self.leadership_term_id and self.role == ClusterRole.LEADER:
            session = self.session_by_id.get(cluster_session_id)
            if session is not None and session.is_open:
                session.closing(CLOSE_REASONS["CLIENT_ACTION"])
                session.disconnect()
                if self.log_publisher.append_session_close(session, leadership_term_id, self.cluster_clock.time()):
                    session.closed_log_position = self.log_publisher.position
                    self.uncommitted_closed_sessions.append(session)
                    self._close_session(session)

    def on_admin_request(self, leadership_term_id: int, cluster_session_id: int, correlation_id: int,
                         request_type: int, payload) -> None:
        if self.role != ClusterRole.LEADER or leadership_term_id != self.leadership_term_id:
            return
        session = self.session_by_id.get(cluster_session_id)
        if session is None or session.state != State.OPEN:
            return
        service = self.authorisation_service
        # Aeron's default service allows only the backup protocol's queries: an admin request needs one set
        if service is None or not service.is_authorised(CLUSTER_SCHEMA_ID, ADMIN_REQUEST_TEMPLATE_ID, request_type,
                                                        session.encoded_principal):
            name = {v: k for k, v in ADMIN_REQUEST_TYPES.items()}.get(request_type, request_type)
            self.egress_publisher.send_admin_response(session, correlation_id, request_type,
                                                      ADMIN_RESPONSE_CODES["UNAUTHORISED_ACCESS"],
                                                      f"Execution of the {name} request was not authorised")
            return
        if request_type == ADMIN_REQUEST_TYPES["SNAPSHOT"]:
            if self._toggle(ClusterControlToggle.SNAPSHOT):
                self.egress_publisher.send_admin_response(session, correlation_id, request_type,
                                                          ADMIN_RESPONSE_CODES["OK"], "")
            else:
                self.egress_publisher.send_admin_response(
                    session, correlation_id, request_type, ADMIN_RESPONSE_CODES["ERROR"],
                    "Failed to switch ClusterControl to the ToggleState.SNAPSHOT state")
        else:
            self.egress_publisher.send_admin_response(session, correlation_id, request_type,
                                                      ADMIN_RESPONSE_CODES["ERROR"],
                                                      f"Unknown request type: {request_type}")

    def on_ingress_message(self, leadership_term_id: int, cluster_session_id: int, payload) -> int:
        """An application message from a client: into the log (ABORT to retry while the log is back-pressured)."""
        if leadership_term_id == self.leadership_term_id and self.role == ClusterRole.LEADER:
            session = self.session_by_id.get(cluster_session_id)
            if session is not None and session.is_open:
                timestamp = self.cluster_clock.time()
                if self.log_publisher.append_message(leadership_term_id, cluster_session_id, timestamp,
                                                     payload) > 0:
                    session.time_of_last_activity_ns = self.cluster_clock.convert_to_nanos(timestamp)
                else:
                    return ABORT
        return CONTINUE

    def on_session_keep_alive(self, leadership_term_id: int, cluster_session_id: int) -> None:
        if leadership_term_id == self.leadership_term_id and self.role == ClusterRole.LEADER:
            session = self.session_by_id.get(cluster_session_id)
            if session is not None and session.state == State.OPEN:
                session.time_of_last_activity_ns = self.cluster_clock.time_nanos()

    def on_ingress_challenge_response(self, correlation_id: int, cluster_session_id: int,
                                      encoded_credentials: bytes) -> None:
        if self.role == ClusterRole.LEADER:
            self._on_challenge_response_for_session(self.pending_user_sessions, correlation_id, cluster_session_id,
                                                    encoded_credentials)
        elif self.leader_member is not None and self.leader_member.id in self.consensus_publishers:
            self.consensus_publishers[self.leader_member.id].challenge_response(correlation_id, cluster_session_id,
                                                                                bytes(encoded_credentials))

    def on_consensus_challenge_response(self, correlation_id: int, cluster_session_id: int,
                                        encoded_credentials: bytes) -> None:
        # only backup/standby sessions are challenged over consensus, and they are not supported here
        self.on_error(ClusterError(f"ChallengeResponse over consensus for clusterSessionId={cluster_session_id}: "
                                   f"no backup session is pending"))

    def _on_challenge_response_for_session(self, pending, correlation_id, cluster_session_id, credentials) -> None:
        for session in reversed(pending):
            if session.id == cluster_session_id and session.state == State.CHALLENGED:
                now_ns = self.cluster_clock.time_nanos()
                session.last_activity_ns(now_ns, correlation_id)
                self.authenticator.on_challenge_response(cluster_session_id, bytes(credentials), now_ns // 1_000_000)
                break

    def _process_pending_sessions(self, pending: list, rejected: list, now_ns: int) -> int:
        work_count = 0
        for session in list(reversed(pending)):
            if session.state == State.INVALID:
                pending.remove(session)
                session.close()
                continue
            if now_ns > session.time_of_last_activity_ns + self.session_timeout_ns and session.state != State.INIT:
                pending.remove(session)
                session.close()
                self.counters.timed_out_client_counter.increment()
                continue
            if session.state in (State.INIT, State.CONNECTING, State.CONNECTED):
                if session.is_response_publication_connected(self.aeron):
                    session.state = State.CONNECTED
                    self.authenticator.on_connected_session(self.session_proxy.session(session),
                                                            self.cluster_clock.time_nanos() // 1_000_000)
            if session.state == State.CHALLENGED:
                if session.is_response_publication_connected(self.aeron):
                    self.authenticator.on_challenged_session(self.session_proxy.session(session),
                                                             self.cluster_clock.time_nanos() // 1_000_000)
            if session.state == State.AUTHENTICATED:
                if session.append_session_to_log_and_send_open(self.log_publisher, self.egress_publisher,
                                                               self.leadership_term_id, self.member_id, now_ns,
                                                               self.cluster_clock.time()):
                    pending.remove(session)
                    self._add_session(session)
                    work_count += 1
            elif session.state == State.REJECTED:
                pending.remove(session)
                rejected.append(session)
        return work_count

    def _send_rejections(self, rejected: list, now_ns: int) -> int:
        work_count = 0
        leader_id = self.leader_member.id if self.leader_member is not None else NULL_VALUE
        for session in list(reversed(rejected)):
            if ((session.is_response_publication_connected(self.aeron)
                 and self.egress_publisher.send_event(session, self.leadership_term_id, leader_id,
                                                      session.event_code, session.response_detail))
                    or (session.state != State.INIT
                        and now_ns > session.time_of_last_activity_ns + self.session_timeout_ns)
                    or session.state == State.INVALID):
                rejected.remove(session)
                session.close()
                work_count += 1
        return work_count

    def _send_redirects(self, redirects: list, now_ns: int) -> int:
        work_count = 0
        leader_id = self.leader_member.id if self.leader_member is not None else NULL_VALUE
        for session in list(reversed(redirects)):
            if ((session.is_response_publication_connected(self.aeron)
                 and self.egress_publisher.send_event(session, self.leadership_term_id, leader_id,
                                                      EVENT_CODES["REDIRECT"], self.ingress_endpoints))
                    or (session.state != State.INIT
                        and now_ns > session.time_of_last_activity_ns + self.session_timeout_ns)
                    or session.state == State.INVALID):
                redirects.remove(session)
                session.close()
                work_count += 1
        return work_count

    def _check_sessions(self, now_ns: int) -> int:
        work_count = 0
        for session in list(reversed(self.sessions)):
            if now_ns > session.time_of_last_activity_ns + self.session_timeout_ns:
                if session.state in (State.OPEN, State.CLOSING):
                    if session.state == State.OPEN:
                        session.closing(CLOSE_REASONS["TIMEOUT"])
                    if self.log_publisher.append_session_close(session, self.leadership_term_id,
                                                               self.cluster_clock.time()):
                        self.egress_publisher.send_event(session, self.leadership_term_id, self.member_id,
                                                         EVENT_CODES["CLOSED"],
                                                         close_reason_name(session.close_reason))
                        session.closed_log_position = self.log_publisher.position
                        self.uncommitted_closed_sessions.append(session)
                        if session.close_reason == CLOSE_REASONS["TIMEOUT"]:
                            self.counters.timed_out_client_counter.increment()
                        self._close_session(session)
                else:
                    self._close_session(session)
                work_count += 1
            elif session.has_open_event_pending:
                work_count += session.send_session_open_event(self.egress_publisher, self.leadership_term_id,
                                                              self.member_id)
            elif session.has_new_leader_event_pending:
                work_count += self._send_new_leader_event(session)
        return work_count

    def _send_new_leader_event(self, session: ClusterSession) -> int:
        # the session's publication was added again for this term (asynchronously): send once it is connected
        if session.is_response_publication_connected(self.aeron) and self.egress_publisher.new_leader(
                session, self.leadership_term_id, self.leader_member.id, self.ingress_endpoints):
            session.has_new_leader_event_pending = False
            return 1
        return 0

    def _ingress_to_log(self, timestamp: int):
        """What the compiled ingress path appends with (``IngressAdapter.poll``): the term, the cluster time and
        the activity time it stands for, the log publication and the open sessions; None (the codec path) while
        there is no mapped log publication to append to: none yet, closed, or one with no log of its own."""
        publication = self._mapped_log_publication()
        if publication is None:
            return None
        return (self.leadership_term_id, timestamp, self.cluster_clock.convert_to_nanos(timestamp), publication,
                self.open_sessions)

    def _mapped_log_publication(self):
        """The log publication when compiled code can append to it (mapped, with a limit of its own), else None."""
        publication = self.log_publisher.publication
        if getattr(publication, "log_buffer", None) is None or getattr(publication, "limit_buffer", None) is None:
            return None
        return publication

    def _add_session(self, session: ClusterSession) -> None:
        self.session_by_id[session.id] = session
        session.attach_open_table(self.open_sessions)
        index = len(self.sessions)
        while index > 0 and self.sessions[index - 1].id > session.id:
            index -= 1
        self.sessions.insert(index, session)

    def _close_session(self, session: ClusterSession) -> None:
        self.session_by_id.pop(session.id, None)
        session.detach_open_table()
        for i in range(len(self.sessions) - 1, -1, -1):
            if self.sessions[i].id == session.id:
                del self.sessions[i]
                break
        session.close()

    def _prepare_sessions_for_new_term(self, is_startup: bool) -> None:
        if is_startup:
            for session in self.sessions:
                if session.state == State.OPEN:
                    session.closing(CLOSE_REASONS["TIMEOUT"])
        else:
            now_ns = self.cluster_clock.time_nanos()
            for session in self.sessions:
                if session.state == State.OPEN:
                    session.connect(self.aeron)
                    session.time_of_last_activity_ns = now_ns
                    session.has_new_leader_event_pending = True

    def _clear_sessions_after(self, log_position: int) -> None:
        for session in list(reversed(self.sessions)):
            if session.opened_log_position > log_position:
                self.egress_publisher.send_event(session, self.leadership_term_id, self.member_id,
                                                 EVENT_CODES["CLOSED"], "election")
                self._close_session(session)
        for session in self.pending_user_sessions:
            self.egress_publisher.send_event(session, self.leadership_term_id, self.member_id,
                                             EVENT_CODES["CLOSED"], "election")
            session.close()
        self.pending_user_sessions.clear()

    # =========================================================================================== services
    def on_service_message(self, cluster_session_id: int, payload) -> None:
        service_id = psmt.service_id_from_service_message(cluster_session_id)
        if not 0 <= service_id < self.service_count:
            raise ClusterError(f"service message from serviceId={service_id}: outside [0, {self.service_count})")
        self.pending_service_message_trackers[service_id].enqueue_message(payload)

    def on_service_close_session(self, cluster_session_id: int) -> None:
        session = self.session_by_id.get(cluster_session_id)
        if session is not None:
            session.closing(CLOSE_REASONS["SERVICE_ACTION"])
            if self.role == ClusterRole.LEADER and self.state == ConsensusModuleState.ACTIVE:
                if self.log_publisher.append_session_close(session, self.leadership_term_id,
                                                           self.cluster_clock.time()):
                    self.egress_publisher.send_event(session, self.leadership_term_id, self.member_id,
                                                     EVENT_CODES["CLOSED"], "SERVICE_ACTION")
                    session.closed_log_position = self.log_publisher.position
                    self.uncommitted_closed_sessions.append(session)
                    self._close_session(session)

    def on_schedule_timer(self, correlation_id: int, deadline: int) -> None:
        expired = self.expired_timer_count_by_correlation_id.get(correlation_id, 0)
        if expired == 0:
            self.timer_service.schedule_timer_for_correlation_id(correlation_id, deadline)
        elif expired == 1:
            del self.expired_timer_count_by_correlation_id[correlation_id]
        else:
            self.expired_timer_count_by_correlation_id[correlation_id] = expired - 1

    def on_cancel_timer(self, correlation_id: int) -> None:
        self.timer_service.cancel_timer_by_correlation_id(correlation_id)

    def on_timer_event(self, correlation_id: int) -> bool:
        append_position = self.log_publisher.append_timer(correlation_id, self.leadership_term_id,
                                                          self.cluster_clock.time())
        if append_position > 0:
            self.uncommitted_timers.append((append_position, correlation_id))
            return True
        return False

    def on_service_ack(self, log_position: int, timestamp: int, ack_id: int, relevant_id: int,
                       service_id: int) -> None:
        if not 0 <= service_id < self.service_count:
            raise ClusterError(f"ServiceAck from serviceId={service_id}: outside [0, {self.service_count})")
        if ack_id == 0 and self.service_client_ids[service_id] != NULL_VALUE:
            raise ClusterError(f"initial ack already received from service: possible duplicate "
                               f"serviceId={service_id}")
        self.service_ack_queues[service_id].append(ServiceAck(ack_id, log_position, relevant_id))
        if has_reached(log_position, self.service_ack_id, self.service_ack_queues):
            if self.state == ConsensusModuleState.SNAPSHOT:
                self.service_ack_id += 1
                self._snapshot_on_service_ack(log_position, timestamp, self._poll_service_acks(log_position,
                                                                                               service_id))
            elif self.state == ConsensusModuleState.QUITTING:
                self._close_and_terminate()
            elif self.state == ConsensusModuleState.TERMINATING:
                self._terminate_on_service_ack(log_position)

    def _poll_service_acks(self, log_position: int, service_id: int) -> list[ServiceAck]:
        acks = []
        for queue in self.service_ack_queues:
            ack = queue.popleft() if queue else None
            if ack is None or ack.log_position != log_position:
                raise ClusterError(f"invalid ack for serviceId={service_id} logPosition={log_position} {ack}")
            acks.append(ack)
        return acks

    def on_cluster_members_query(self, correlation_id: int, is_extended: bool) -> None:
        """ClusterTool's members query (it always asks for the extended response, which its snapshot, suspend,
        resume and shutdown commands read first to find the leader)."""
        leader_id = self.leader_member.id if self.leader_member is not None else NULL_VALUE
        if is_extended:
            entry = CLUSTER.group_class("ClusterMembersExtendedResponse", "active_members")
            active = tuple(entry(leadership_term_id=m.leadership_term_id, log_position=m.log_position,
                                 time_of_last_append_ns=m.time_of_last_append_position_ns, member_id=m.id,
                                 ingress_endpoint=m.ingress_endpoint, consensus_endpoint=m.consensus_endpoint,
                                 log_endpoint=m.log_endpoint, catchup_endpoint=m.catchup_endpoint,
                                 archive_endpoint=m.archive_endpoint) for m in self.active_members)
            sent = self.service_proxy.cluster_members_extended_response(
                correlation_id, self.cluster_clock.time_nanos(), leader_id, self.member_id, active, ())
        else:
            sent = self.service_proxy.cluster_members_response(correlation_id, leader_id,
                                                               cm.encode_cluster_members(self.active_members), "")
        if not sent:  # the asker times out; the module carries on
            self.on_error(ClusterError(f"failed to send cluster members response: correlationId={correlation_id} "
                                       f"result={self.service_proxy.last_result}"))

    # =========================================================================================== the log, follower
    def on_replay_session_message(self, cluster_session_id: int, timestamp: int) -> None:
        session = self.session_by_id.get(cluster_session_id)
        if session is not None:
            session.time_of_last_activity_ns = self.cluster_clock.convert_to_nanos(timestamp)
        elif cluster_session_id < 0:
            service_id = psmt.service_id_from_log_message(cluster_session_id)
            if service_id < self.service_count:
                self.pending_service_message_trackers[service_id].sweep_follower_messages(cluster_session_id)

    def on_replay_timer_event(self, correlation_id: int) -> None:
        if not self.timer_service.cancel_timer_by_correlation_id(correlation_id):
            self.expired_timer_count_by_correlation_id[correlation_id] = \
                self.expired_timer_count_by_correlation_id.get(correlation_id, 0) + 1

    def on_replay_session_open(self, log_position: int, correlation_id: int, cluster_session_id: int,
                               timestamp: int, response_stream_id: int, response_channel: str) -> None:
        session = ClusterSession(cluster_session_id, response_stream_id, response_channel)
        session.open(log_position)
        session.last_activity_ns(self.cluster_clock.convert_to_nanos(timestamp), correlation_id)
        self._add_session(session)
        if cluster_session_id >= self.next_session_id:
            self.next_session_id = cluster_session_id + 1

    def on_replay_session_close(self, cluster_session_id: int, close_reason: int) -> None:
        session = self.session_by_id.get(cluster_session_id)
        if session is not None:
            session.closing(close_reason)
            self._close_session(session)

    def on_replay_cluster_action(self, leadership_term_id: int, log_position: int, timestamp: int, action: int,
                                 flags: int) -> None:
        if leadership_term_id == self.leadership_term_id:
            if action == CLUSTER_ACTIONS["SUSPEND"]:
                self.set_state(ConsensusModuleState.SUSPENDED)
            elif action == CLUSTER_ACTIONS["RESUME"]:
                self.set_state(ConsensusModuleState.ACTIVE)
            elif action == CLUSTER_ACTIONS["SNAPSHOT"] and flags == CLUSTER_ACTION_FLAGS_DEFAULT:
                self.set_state(ConsensusModuleState.SNAPSHOT)
                if self.service_count == 0:
                    self._snapshot_on_service_ack(log_position, timestamp, [])

    def on_replay_new_leadership_term_event(self, leadership_term_id: int, log_position: int, timestamp: int,
                                            term_base_log_position: int, time_unit: int, app_version: int) -> None:
        if time_unit != int(self.cluster_time_unit):
            self.on_error(ClusterError(f"incompatible timestamp units: {self.cluster_time_unit.name} "
                                       f"log={time_unit}"))
            self._unexpected_termination()
        if semantic_version_major(app_version) != semantic_version_major(self.app_version):
            self.on_error(ClusterError(f"incompatible version: {semantic_version_string(self.app_version)} "
                                       f"log={semantic_version_string(app_version)}"))
            self._unexpected_termination()
        self.set_leadership_term_id(leadership_term_id)
        if self.election is not None:
            self.election.on_replay_new_leadership_term_event(leadership_term_id, log_position, timestamp,
                                                              term_base_log_position)

    # =========================================================================================== consensus messages
    def _check_follower_for_consensus_publication(self, follower_member_id: int) -> None:
        member = self.member_by_id.get(follower_member_id)
        if member is not None and member is not self.this_member and member.id not in self.publications:
            self._add_consensus_publication(member)

    def _add_consensus_publication(self, member: ClusterMember) -> None:
        channel = _with_params(self.ctx.consensus_channel, endpoint=member.consensus_endpoint)
        try:
            publication = self.aeron.add_exclusive_publication(channel, self.ctx.consensus_stream_id)
        except Exception as error:  # one unreachable member must not stop the others
            self.on_error(ClusterError(f"consensus publication to memberId={member.id} ({channel}): {error}"))
            return
        self.publications[member.id] = publication
        self.consensus_publishers[member.id] = ConsensusPublisher(publication)

    def on_canvass_position(self, log_leadership_term_id: int, log_position: int, leadership_term_id: int,
                            follower_member_id: int, protocol_version: int) -> None:
        self._check_follower_for_consensus_publication(follower_member_id)
        if self.election is not None:
            self.election.on_canvass_position(log_leadership_term_id, log_position, leadership_term_id,
                                              follower_member_id, protocol_version)
            self._sync_election_counters()
        elif self.role == ClusterRole.LEADER:
            follower = self.member_by_id.get(follower_member_id)
            publisher = self.consensus_publishers.get(follower_member_id)
            if follower is not None and publisher is not None and log_leadership_term_id <= self.leadership_term_id:
                self._stop_existing_catchup_replay(follower)
                term_base_log_position = self.recording_log.get_term_entry(self.leadership_term_id)\
                    .term_base_log_position
                next_term_id, next_base, next_position = NULL_VALUE, NULL_POSITION, NULL_POSITION
                if log_leadership_term_id < self.leadership_term_id:
                    entry = self.recording_log.find_term_entry(log_leadership_term_id + 1)
                    next_term_id = entry.leadership_term_id if entry is not None else self.leadership_term_id
                    next_base = entry.term_base_log_position if entry is not None else term_base_log_position
                    next_position = entry.log_position if entry is not None else NULL_POSITION
                publisher.new_leadership_term(log_leadership_term_id, next_term_id, next_base, next_position,
                                              self.leadership_term_id, term_base_log_position,
                                              self.log_publisher.position, self._log_recording_id,
                                              self.cluster_clock.time(), self.member_id,
                                              self.log_publisher.session_id, self.app_version, 0)

    def on_request_vote(self, log_leadership_term_id: int, log_position: int, candidate_term_id: int,
                        candidate_member_id: int, protocol_version: int) -> None:
        self._check_follower_for_consensus_publication(candidate_member_id)
        if self.election is not None:
            self.election.on_request_vote(log_leadership_term_id, log_position, candidate_term_id,
                                          candidate_member_id, protocol_version)
            self._sync_election_counters()
        elif candidate_term_id > self.leadership_term_id:
            self.enter_election(False, "unexpected vote request")

    def on_vote(self, candidate_term_id: int, log_leadership_term_id: int, log_position: int,
                candidate_member_id: int, follower_member_id: int, vote: int) -> None:
        if self.election is not None:
            self.election.on_vote(candidate_term_id, log_leadership_term_id, log_position, candidate_member_id,
                                  follower_member_id, vote)
            self._sync_election_counters()

    def on_new_leadership_term(self, log_leadership_term_id: int, next_leadership_term_id: int,
                               next_term_base_log_position: int, next_log_position: int, leadership_term_id: int,
                               term_base_log_position: int, log_position: int, leader_recording_id: int,
                               timestamp: int, leader_member_id: int, log_session_id: int, app_version: int,
                               is_startup: int) -> None:
        if semantic_version_major(app_version) != semantic_version_major(self.app_version):
            self.on_error(ClusterError(f"incompatible version: {semantic_version_string(self.app_version)} "
                                       f"log={semantic_version_string(app_version)}"))
            self._unexpected_termination()
        now_ns = self.cluster_clock.time_nanos()
        if leadership_term_id >= self.leadership_term_id:
            self._time_of_last_leader_update_ns = now_ns
        if self.election is not None:
            self.election.on_new_leadership_term(log_leadership_term_id, next_leadership_term_id,
                                                 next_term_base_log_position, next_log_position,
                                                 leadership_term_id, term_base_log_position, log_position,
                                                 leader_recording_id, timestamp, leader_member_id, log_session_id,
                                                 app_version, is_startup)
            self._sync_election_counters()
        elif (self.role == ClusterRole.FOLLOWER and leadership_term_id == self.leadership_term_id
              and self.leader_member is not None and leader_member_id == self.leader_member.id):
            self.notified_commit_position = max(self.notified_commit_position, log_position)
            self.time_of_last_log_update_ns = now_ns
        elif leadership_term_id > self.leadership_term_id:
            self.enter_election(False, "unexpected new leadership term event")

    def on_append_position(self, leadership_term_id: int, log_position: int, follower_member_id: int,
                           flags: int) -> None:
        if self.election is not None:
            self.election.on_append_position(leadership_term_id, log_position, follower_member_id, flags)
            self._sync_election_counters()
        elif leadership_term_id <= self.leadership_term_id and self.role == ClusterRole.LEADER:
            follower = self.member_by_id.get(follower_member_id)
            if follower is not None:
                follower.log_position = log_position
                follower.time_of_last_append_position_ns = self.cluster_clock.time_nanos()
                self._leader_stage.set_position(follower_member_id, log_position)
                self.track_catchup_completion(follower, leadership_term_id, flags)

    def on_commit_position(self, leadership_term_id: int, log_position: int, leader_member_id: int) -> None:
        now_ns = self.cluster_clock.time_nanos()
        if leadership_term_id >= self.leadership_term_id:
            self._time_of_last_leader_update_ns = now_ns
        if self.election is not None:
            self.election.on_commit_position(leadership_term_id, log_position, leader_member_id)
            self._sync_election_counters()
        elif (leadership_term_id == self.leadership_term_id and self.leader_member is not None
              and leader_member_id == self.leader_member.id and self.role == ClusterRole.FOLLOWER):
            self.notified_commit_position = log_position
            self.time_of_last_log_update_ns = now_ns
        elif leadership_term_id > self.leadership_term_id:
            self.enter_election(False, "unexpected commit position from new leader")

    def on_catchup_position(self, leadership_term_id: int, log_position: int, follower_member_id: int,
                            catchup_endpoint: str) -> None:
        if leadership_term_id <= self.leadership_term_id and self.role == ClusterRole.LEADER:
            follower = self.member_by_id.get(follower_member_id)
            if follower is not None and getattr(follower, "catchup_replay_session_id", NULL_VALUE) == NULL_VALUE:
                channel = _with_params(self.ctx.follower_catchup_channel, endpoint=catchup_endpoint,
                                       session_id=self.log_publisher.session_id, linger=0, eos="false")
                follower.catchup_replay_session_id = self.archive.start_replay(
                    self._log_recording_id, log_position, LONG_MAX, channel, self.ctx.log_stream_id)
                follower.catchup_replay_correlation_id = follower.catchup_replay_session_id

    def on_stop_catchup(self, leadership_term_id: int, follower_member_id: int) -> None:
        if leadership_term_id == self.leadership_term_id and follower_member_id == self.member_id:
            if self.catchup_log_destination is not None:
                self.log_adapter.async_remove_destination(self.catchup_log_destination)
                self.catchup_log_destination = None

    def on_termination_position(self, leadership_term_id: int, log_position: int) -> None:
        if leadership_term_id == self.leadership_term_id and self.role == ClusterRole.FOLLOWER:
            self.termination_position = log_position
            self.time_of_last_log_update_ns = self.cluster_clock.time_nanos()

    def on_termination_ack(self, leadership_term_id: int, log_position: int, member_id: int) -> None:
        if (leadership_term_id == self.leadership_term_id and log_position >= self.termination_position
                and self.role == ClusterRole.LEADER):
            member = self.member_by_id.get(member_id)
            if member is not None and self.cluster_termination is not None:
                member.has_terminated = True
                if self.cluster_termination.can_terminate(self.active_members, self.cluster_clock.time_nanos()):
                    self.recording_log.commit_log_position(leadership_term_id, self.termination_position)
                    self._close_and_terminate()

    # =========================================================================================== duty cycle
    def _slow_tick_work(self, now_ns: int) -> int:
        work_count = 0
        if self.aeron.is_closed:
            raise AgentTerminationException("unexpected Aeron close")
        if self.state == ConsensusModuleState.CLOSED:
            self._unexpected_termination()
        if now_ns >= self.mark_file_update_deadline_ns:
            self.mark_file_update_deadline_ns = now_ns + MARK_FILE_UPDATE_INTERVAL_NS
            self.mark_file.update_activity_timestamp(now_ns // 1_000_000)
        work_count += self.poll_archive_events()
        work_count += self._send_redirects(self.redirect_user_sessions, now_ns)
        work_count += self._send_rejections(self.rejected_user_sessions, now_ns)
        if self.election is None:
            if self.role == ClusterRole.LEADER:
                work_count += self._check_cluster_control_toggle(now_ns)
                if self.state == ConsensusModuleState.ACTIVE:
                    work_count += self._process_pending_sessions(self.pending_user_sessions,
                                                                 self.rejected_user_sessions, now_ns)
                    work_count += self._check_sessions(now_ns)
                    if not self._has_active_quorum(now_ns):
                        self.enter_election(False, "inactive follower quorum")
                        work_count += 1
                elif self.state == ConsensusModuleState.TERMINATING:
                    if self.cluster_termination.can_terminate(self.active_members, now_ns):
                        self.recording_log.commit_log_position(self.leadership_term_id, self.termination_position)
                        self._close_and_terminate()
            elif self.state in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED):
                if (now_ns >= self.time_of_last_log_update_ns + self.leader_heartbeat_timeout_ns
                        and self.termination_position == NULL_POSITION):
                    self.enter_election(False, "leader heartbeat timeout")
                    work_count += 1
                elif self._is_log_stalled(now_ns):
                    self.enter_election(False, f"log stalled: appendPosition={self.log_stalled_at_position} "
                                               f"commitPosition={self.notified_commit_position}")
                    work_count += 1
        return work_count

    def _is_log_stalled(self, now_ns: int) -> bool:
        """A follower whose recorded log has not moved for a leader heartbeat timeout while the leader's commit
        position was past it. The log is multi-destination with Aeron's default (max) flow control: the leader sends
        at the pace of its fastest follower, so a follower whose subscribers fell more than a term behind is lapped,
        its NAKs land outside the leader's retransmit window and its image never fills the gap. Aeron waits for the
        next election; we start one at once, and the leader answers this follower's canvass with the term it leads,
        so the follower catches up from the leader's archive and rejoins the live log without a new term. The wait
        starts when the follower is first seen behind, not at its last append: an idle follower is not stalled the
        moment new data is committed."""
        if self.append_position is None or self.state != ConsensusModuleState.ACTIVE \
                or self.termination_position != NULL_POSITION:
            self.log_stalled_since_ns = now_ns
            return False
        appended = self.append_position.get()
        if appended != self.log_stalled_at_position or self.notified_commit_position <= appended:
            self.log_stalled_at_position = appended
            self.log_stalled_since_ns = now_ns
            return False
        return now_ns > self.log_stalled_since_ns + self.leader_heartbeat_timeout_ns

    def _has_active_quorum(self, now_ns: int) -> bool:
        threshold = cm.quorum_threshold(len(self.active_members))
        active = sum(1 for m in self.active_members
                     if m is self.this_member
                     or now_ns <= m.time_of_last_append_position_ns + self.leader_heartbeat_timeout_ns)
        return active >= threshold

    def _consensus_work(self, timestamp: int, now_ns: int) -> int:
        work_count = 0
        if self.role == ClusterRole.LEADER:
            if self.state == ConsensusModuleState.ACTIVE:
                work_count += self.timer_service.poll(timestamp)
                for tracker in self.pending_service_message_trackers:
                    work_count += tracker.poll()
                work_count += self.ingress_adapter.poll(self._ingress_to_log(timestamp))
            work_count += self._update_leader_position_now(now_ns)
        else:
            if self.state in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED):
                if (self.termination_position != NULL_POSITION
                        and self.log_adapter.position >= self.termination_position):
                    self.set_state(ConsensusModuleState.TERMINATING)
                    if self.service_count > 0:
                        self.service_proxy.service_termination_position(self.termination_position)
                    else:
                        self._terminate_on_service_ack(self.log_adapter.position)
                else:
                    limit = (self.append_position.get() if self.append_position is not None
                             else self.log_recording_stop_position)
                    count = self.log_adapter.poll(min(self.notified_commit_position, limit))
                    if count == 0 and self.log_adapter.is_image_closed:
                        is_eos = self.log_adapter.is_log_end_of_stream
                        self.enter_election(is_eos, f"log disconnected from leader: eos={str(is_eos).lower()}")
                        return 1
                    self._propose_max_commit_position(self.log_adapter.position)
                    work_count += self.ingress_adapter.poll()
                    work_count += count
            work_count += self._update_follower_position_now(now_ns)
        work_count += self.consensus_module_adapter.poll()
        return work_count

    def _propose_max_commit_position(self, position: int) -> None:
        if position > self.counters.commit_position.get():
            self.counters.commit_position.set(position)

    def _toggle(self, to: ClusterControlToggle) -> bool:
        return self.counters.control_toggle.compare_and_set(int(ClusterControlToggle.NEUTRAL), int(to))

    def _reset_toggle(self) -> None:
        self.counters.control_toggle.set(int(ClusterControlToggle.NEUTRAL))

    def _check_cluster_control_toggle(self, now_ns: int) -> int:
        toggle = self.counters.control_toggle.get()
        if self.state == ConsensusModuleState.ACTIVE:
            timestamp = self.cluster_clock.time()
            if toggle == ClusterControlToggle.SUSPEND:
                if self._append_action(CLUSTER_ACTIONS["SUSPEND"], timestamp):
                    self.set_state(ConsensusModuleState.SUSPENDED)
            elif toggle == ClusterControlToggle.SNAPSHOT:
                if self._append_action(CLUSTER_ACTIONS["SNAPSHOT"], timestamp):
                    self.set_state(ConsensusModuleState.SNAPSHOT)
                    if self.service_count == 0:
                        self._snapshot_on_service_ack(self.log_publisher.position, timestamp, [])
            elif toggle == ClusterControlToggle.SHUTDOWN:
                if self._append_action(CLUSTER_ACTIONS["SNAPSHOT"], timestamp):
                    position = self.log_publisher.position
                    self._begin_termination(now_ns, position)
                    self.set_state(ConsensusModuleState.SNAPSHOT)
                    if self.service_count == 0:
                        self._snapshot_on_service_ack(position, timestamp, [])
            elif toggle == ClusterControlToggle.ABORT:
                position = self.log_publisher.position
                self._begin_termination(now_ns, position)
                self.service_proxy.service_termination_position(position)
                self.set_state(ConsensusModuleState.TERMINATING)
            elif toggle == ClusterControlToggle.STANDBY_SNAPSHOT:
                self.on_error(ClusterError("STANDBY_SNAPSHOT toggle: standby snapshots are not supported"))
                self._reset_toggle()
            else:
                return 0
            return 1
        if self.state == ConsensusModuleState.SUSPENDED and toggle == ClusterControlToggle.RESUME:
            if self._append_action(CLUSTER_ACTIONS["RESUME"], self.cluster_clock.time()):
                self.set_state(ConsensusModuleState.ACTIVE)
                self._reset_toggle()
            return 1
        return 0

    def _append_action(self, action: int, timestamp: int) -> bool:
        return self.log_publisher.append_cluster_action(self.leadership_term_id, timestamp, action,
                                                        CLUSTER_ACTION_FLAGS_DEFAULT)

    # =========================================================================================== termination
    def _new_cluster_termination(self, deadline_ns: int):
        from aeron_numba.cluster.cluster_termination import ClusterTermination
        return ClusterTermination(deadline_ns, self.service_count)

    def _begin_termination(self, now_ns: int, position: int) -> None:
        self.cluster_termination = self._new_cluster_termination(now_ns + self.ctx.termination_timeout_ns)
        self.cluster_termination.termination_position(self.on_error, self.consensus_publishers,
                                                      self.active_members, self.this_member,
                                                      self.leadership_term_id, position)
        self.termination_position = position

    def _terminate_on_service_ack(self, log_position: int) -> None:
        if self.cluster_termination is None:
            publisher = self.consensus_publishers.get(self.leader_member.id) if self.leader_member else None
            if publisher is not None:
                publisher.termination_ack(self.leadership_term_id, log_position, self.member_id)
            self.recording_log.commit_log_position(self.leadership_term_id, log_position)
            self._close_and_terminate()
        else:
            self.cluster_termination.on_services_terminated()
            if self.cluster_termination.can_terminate(self.active_members, self.cluster_clock.time_nanos()):
                self.recording_log.commit_log_position(self.leadership_term_id, log_position)
                self._close_and_terminate()

    def _close_and_terminate(self) -> None:
        self._try_stop_log_recording()
        self.set_state(ConsensusModuleState.CLOSED)
        raise ClusterTerminationException(True)

    def _unexpected_termination(self) -> None:
        if self.service_count > 0 and self.service_proxy is not None:
            self.service_proxy.service_termination_position(0)
        self._try_stop_log_recording()
        self.set_state(ConsensusModuleState.CLOSED)
        raise ClusterTerminationException(False)

    # =========================================================================================== snapshots
    def _snapshot_on_service_ack(self, log_position: int, timestamp: int, service_acks: list[ServiceAck]) -> None:
        if self._is_snapshot_set_complete(service_acks):
            self._take_snapshot(timestamp, log_position, service_acks)
        now_ns = self.cluster_clock.time_nanos()
        for session in self.sessions:
            session.time_of_last_activity_ns = now_ns
        if self.cluster_termination is not None:
            self.service_proxy.service_termination_position(self.termination_position)
            self.cluster_termination.deadline_ns = now_ns + self.ctx.termination_timeout_ns
            self.set_state(ConsensusModuleState.TERMINATING)
        else:
            self.set_state(ConsensusModuleState.ACTIVE)
            if self.role == ClusterRole.LEADER:
                self._reset_toggle()

    def _is_snapshot_set_complete(self, service_acks: list[ServiceAck]) -> bool:
        complete = True
        for service_id in range(len(service_acks) - 1, -1, -1):
            if service_acks[service_id].relevant_id == NULL_VALUE:
                self.on_error(ClusterEvent(f"service={service_id} failed to take snapshot"))
                complete = False
        return complete

    def _take_snapshot(self, timestamp: int, log_position: int, service_acks: list[ServiceAck]) -> None:
        """Record the CM's snapshot, then the snapshot set in recording.log: services in descending id, the CM
        last (spec §2.2)."""
        from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotTaker
        publication = self.aeron.add_exclusive_publication(self.ctx.snapshot_channel, self.ctx.snapshot_stream_id)
        try:
            channel = _with_params(self.ctx.snapshot_channel, session_id=publication.session_id)
            self.archive.start_recording(channel, self.ctx.snapshot_stream_id, SOURCE_LOCAL, auto_stop=True)
            counters = self.aeron.counters_reader
            counter_id = self._await_recording_counter(counters, publication.session_id)
            recording_id = recording_pos.get_recording_id(counters, counter_id)
            taker = ConsensusModuleSnapshotTaker(publication, self.idle_strategy)
            self._snapshot_state(taker, log_position)
            self._await_recording_complete(recording_id, publication.position, counters, counter_id)
        finally:
            publication.close()
        term_base_log_position = self.recording_log.get_term_entry(self.leadership_term_id).term_base_log_position
        for service_id in range(len(service_acks) - 1, -1, -1):
            self.recording_log.append_snapshot(service_acks[service_id].relevant_id, self.leadership_term_id,
                                               term_base_log_position, log_position, timestamp, service_id)
        self.recording_log.append_snapshot(recording_id, self.leadership_term_id, term_base_log_position,
                                           log_position, timestamp, C.CONSENSUS_MODULE_SERVICE_ID)
        self.recording_log.force()
        self.recovery_plan = self.recording_log.create_recovery_plan(self.service_count, self._extent_of,
                                                                     NULL_VALUE)
        self.counters.snapshot_counter.increment()

    def _snapshot_state(self, taker, log_position: int) -> None:
        unit = int(self.cluster_time_unit)
        taker.mark_begin(C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID, log_position, self.leadership_term_id, 0, unit,
                         self.app_version)
        if self.pending_service_message_trackers:
            first = self.pending_service_message_trackers[0]
            taker.snapshot_consensus_module_state(self.next_session_id, first.next_service_session_id,
                                                  first.log_service_session_id, first.size)
        else:
            taker.snapshot_consensus_module_state(self.next_session_id, 0, 0, 0)
        for session in self.sessions:
            if session.state in (State.OPEN, State.CLOSING):
                taker.snapshot_session(session)
        self.timer_service.snapshot(taker.snapshot_timer)
        for tracker in self.pending_service_message_trackers:
            taker.snapshot(tracker, self.on_error)
        taker.mark_end(C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID, log_position, self.leadership_term_id, 0, unit,
                       self.app_version)

    def _await_recording_counter(self, counters, session_id: int) -> int:
        self.idle_strategy.reset()
        while True:
            counter_id = recording_pos.find_counter_id_by_session(counters, session_id, self.archive_id)
            if counter_id != recording_pos.NULL_COUNTER_ID:
                return counter_id
            self.idle()

    def _await_recording_complete(self, recording_id: int, position: int, counters, counter_id: int) -> None:
        self.idle_strategy.reset()
        while counters.get_counter_value(counter_id) < position:
            self.idle()
            if not recording_pos.is_active(counters, counter_id, recording_id):
                raise ClusterError(f"recording has stopped unexpectedly: {recording_id}")

    # =========================================================================================== log recording
    def _start_log_recording(self, channel: str, stream_id: int, source_location: str) -> None:
        recording_id = self.recording_log.find_last_term_recording_id()
        if recording_id == NULL_VALUE:
            self.log_subscription_id = self.archive.start_recording(channel, stream_id, source_location,
                                                                    auto_stop=True)
        else:
            self.log_subscription_id = self.archive.extend_recording(recording_id, channel, stream_id,
                                                                     source_location, auto_stop=True)

    def _try_stop_recording_by_identity(self, recording_id: int) -> None:
        try:
            self.archive.stop_recording_by_identity(recording_id)
        except Exception as error:
            self.on_error(ClusterError(f"stop recording {recording_id}: {error}"))

    def _try_stop_log_recording(self) -> None:
        self.append_position = None
        if self.archive is None:
            return
        if self.log_subscription_id != NULL_VALUE:
            try:
                self.archive.stop_recording_subscription(self.log_subscription_id)
            except Exception as error:
                self.on_error(ClusterError(f"stop log recording: {error}"))
            self.log_subscription_id = NULL_VALUE
        elif self._log_recording_id != NULL_VALUE:
            self._try_stop_recording_by_identity(self._log_recording_id)

    def _try_create_append_position(self, log_session_id: int) -> bool:
        counters = self.aeron.counters_reader
        counter_id = recording_pos.find_counter_id_by_session(counters, log_session_id, self.archive_id)
        if counter_id == recording_pos.NULL_COUNTER_ID:
            return False
        registration_id = counters.get_counter_registration_id(counter_id)
        if registration_id == 0:
            return False
        recording_id = recording_pos.get_recording_id(counters, counter_id)
        if recording_id == recording_pos.NULL_RECORDING_ID:
            return False
        self.update_log_recording_id(recording_id)
        self.append_position = _ReadableCounter(counters, registration_id, counter_id)
        return True

    def _get_last_appended_position(self) -> int:
        self.idle_strategy.reset()
        while True:
            position = self.archive.get_stop_position(self._log_recording_id)
            if position != NULL_POSITION:
                return position
            self.idle()

    def await_services_ready(self, log_channel: str, stream_id: int, log_session_id: int, log_position: int,
                              max_log_position: int, is_startup: bool, role: ClusterRole) -> None:
        if self.service_count > 0:
            self.idle_strategy.reset()
            while not self.service_proxy.join_log(log_position, max_log_position, self.member_id, log_session_id,
                                                  stream_id, int(is_startup), int(role), log_channel):
                self.idle()
            self.expected_ack_position = log_position
            while not has_reached(log_position, self.service_ack_id, self.service_ack_queues):
                self.idle(self.consensus_module_adapter.poll())
            for queue in self.service_ack_queues:
                queue.popleft()
            self.service_ack_id += 1

    def replay_log_poll(self, log_adapter, stop_position: int) -> int:
        """A LogReplay's duty: read the replayed log into the agent, committing as it goes (Aeron's
        replayLogPoll)."""
        work_count = 0
        if self.state in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED):
            log_adapter.poll(stop_position)
            position = log_adapter.position
            if self.counters.commit_position.get() < position:
                self.counters.commit_position.set(position)
                work_count += 1
            elif log_adapter.is_image_closed and position < stop_position:
                raise ClusterEvent(f"unexpected image close when replaying log: position={position}")
        work_count += self.consensus_module_adapter.poll()
        return work_count

    # =========================================================================================== positions
    @property
    def notified_commit_position(self) -> int:
        return self._follower_stage.notified_commit_position

    @notified_commit_position.setter
    def notified_commit_position(self, position: int) -> None:
        self._follower_stage.notified_commit_position = position

    @property
    def last_append_position(self) -> int:
        return self._append_stage.last_append_position

    @last_append_position.setter
    def last_append_position(self, position: int) -> None:
        self._append_stage.last_append_position = position

    def use_network_stages(self, stages) -> None:
        """Run a follower's AppendPositions and commit and a leader's ingress and commit as stages of the driver's
        network cycles (``stages``, a ``NetworkStages`` run on this module's thread): once the archive recorded more
        of the log, or a follower's AppendPosition, the leader's CommitPosition or a client's message came, in the
        same compiled stretch (``append_position_stage``, ``follower_commit_stage``, ``ingress_stage``,
        ``leader_commit_stage``), not in this module's next cycle."""
        self._append_stage.stages = stages
        self._leader_stage.stages = stages
        self._follower_stage.stages = stages
        self._ingress_stage.stages = stages

    def _sync_append_stage(self) -> None:
        """The compiled AppendPosition on for a follower between elections with its leader's publication and its log
        recording's counter, off otherwise (checked after every cycle: only a cycle of this module changes them)."""
        stage = self._append_stage
        if stage.stages is None:
            return
        leader = self.leader_member
        publication = self.publications.get(leader.id) if leader is not None else None
        if (self.election is None and self.role == ClusterRole.FOLLOWER and publication is not None
                and self.state in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED)
                and self.append_position is not None and not self.append_position.is_closed):
            stage.run_for(self.append_position, publication, self.leadership_term_id, self.member_id)
        else:
            stage.stop()

    def _sync_leader_stage(self) -> None:
        """The compiled commit on for a leader between elections (ACTIVE or SUSPENDED) with its log recording's
        counter and its consensus images' compiled handles, off otherwise; its tables follow the images, the
        members, their publications and which of them catch up (those stay with the Python path)."""
        stage = self._leader_stage
        if stage.stages is None:
            return
        images = self.consensus_adapter.compiled_images() if self.consensus_adapter is not None else None
        if (images is None or self.election is not None or self.role != ClusterRole.LEADER
                or self.state not in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED)
                or self.append_position is None or self.append_position.is_closed):
            stage.stop()
            return
        followers = [(m, self.publications.get(m.id),
                      getattr(m, "catchup_replay_session_id", NULL_VALUE) != NULL_VALUE)
                     for m in self.active_members if m is not self.this_member]
        key = (self.leadership_term_id, self.append_position, tuple(id(h.log) for h in images),
               tuple((m.id, publication, for_python) for m, publication, for_python in followers))
        stage.run_for(leadership_term_id=self.leadership_term_id, member_id=self.member_id,
                      quorum_threshold=cm.quorum_threshold(len(self.active_members)),
                      own_position=self.append_position, commit_counter=self.counters.commit_position,
                      images=images, followers=followers, key=key)

    def _sync_follower_stage(self) -> None:
        """The compiled commit on for a follower between elections (ACTIVE or SUSPENDED, no termination position
        given) with its leader, its log image and recording counter and its consensus images' compiled handles,
        off otherwise; its tables follow the term, the leader and the images."""
        stage = self._follower_stage
        if stage.stages is None:
            return
        leader = self.leader_member
        images = self.consensus_adapter.compiled_images() if self.consensus_adapter is not None else None
        log = self.log_adapter.compiled_handle
        if (images is None or log is None or leader is None or self.election is not None
                or self.role != ClusterRole.FOLLOWER
                or self.state not in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED)
                or self.termination_position != NULL_POSITION or self.log_adapter.is_image_closed
                or self.append_position is None or self.append_position.is_closed):
            stage.stop()
            return
        key = (self.leadership_term_id, leader.id, self.append_position, id(log.log),
               tuple(id(h.log) for h in images))
        stage.run_for(leadership_term_id=self.leadership_term_id, leader_member_id=leader.id,
                      append_position=self.append_position, commit_counter=self.counters.commit_position, log=log,
                      images=images, key=key)

    def _sync_ingress_stage(self) -> None:
        """The compiled ingress on for an ACTIVE leader between elections with a mapped log publication, the system
        clock and its ingress images' compiled handles, off otherwise; its tables follow the term, the
        publication, the open session table and the images."""
        stage = self._ingress_stage
        if stage.stages is None:
            return
        publication = self._mapped_log_publication()
        images = self.ingress_adapter.compiled_images() if publication is not None else None
        if (images is None or self.election is not None or self.role != ClusterRole.LEADER
                or self.state != ConsensusModuleState.ACTIVE or not self.cluster_clock.is_system_clock):
            stage.stop()
            return
        sessions = self.open_sessions
        ns_per_unit = self.cluster_clock.time_unit.nanos_per_unit
        key = (self.leadership_term_id, ns_per_unit, id(publication.log_buffer), id(sessions.table),
               tuple(id(h.log) for h in images))
        stage.run_for(leadership_term_id=self.leadership_term_id, ns_per_unit=ns_per_unit, publication=publication,
                      sessions=sessions, images=images, key=key)

    def _take_follower_stage(self, now_ns: int) -> None:
        """What the follower's compiled commit did since this module's last cycle, as if this cycle had done it: the
        sessions' activity it read from the log, the times of the leader's CommitPositions it took."""
        took, rows = self._follower_stage.take()
        for cluster_session_id, timestamp in rows:
            self.on_replay_session_message(cluster_session_id, timestamp)
        if took:
            self._time_of_last_leader_update_ns = self.time_of_last_log_update_ns = now_ns

    def _take_leader_stage(self, now_ns: int) -> None:
        """What the compiled commit did since this module's last cycle, as if this cycle had done it: the followers'
        positions and the times of their AppendPositions, the time of the last commit sent, the uncommitted entries
        swept."""
        moved, committed = self._leader_stage.take()
        for member_id, position in moved:
            follower = self.member_by_id.get(member_id)
            if follower is not None:
                follower.log_position = position
                follower.time_of_last_append_position_ns = now_ns
        if committed:
            self.time_of_last_log_update_ns = now_ns
            self._sweep_uncommitted_entries_to(self.counters.commit_position.get())

    def _update_leader_position_now(self, now_ns: int) -> int:
        if self.append_position is not None:
            return self.update_leader_position(now_ns, self.append_position.get())
        return 0

    def quorum_position(self) -> int:
        return cm.quorum_position(self.active_members)

    def _quorum_position_beyond_own(self) -> int:
        """The quorum position were this member's own position past everyone's: the most its own append position
        can commit (unbounded for a member that is a quorum alone)."""
        others = sorted((max(0, m.log_position) for m in self.active_members if m is not self.this_member),
                        reverse=True)
        needed = cm.quorum_threshold(len(self.active_members)) - 1  # the others besides this member
        return others[needed - 1] if 0 < needed <= len(others) else _UNBOUNDED_POSITION

    def _update_follower_position_now(self, now_ns: int) -> int:
        if self._append_stage.take_sends():  # sent from the driver's stretch since: as if sent now
            self.time_of_last_append_position_update_ns = self.time_of_last_append_position_send_ns = now_ns
        recorded = self.append_position.get() if self.append_position is not None else self.log_recording_stop_position
        publisher = self.consensus_publishers.get(self.leader_member.id) if self.leader_member else None
        return self._update_follower_position(publisher, now_ns, self.leadership_term_id, recorded,
                                              C.APPEND_POSITION_FLAG_NONE)

    def _update_follower_position(self, publisher, now_ns: int, leadership_term_id: int, append_position: int,
                                  flags: int) -> int:
        position = max(append_position, self.last_append_position)
        if publisher is not None and (position > self.last_append_position or
                                      now_ns >= self.time_of_last_append_position_send_ns
                                      + self.leader_heartbeat_interval_ns):
            if publisher.append_position(leadership_term_id, position, self.member_id, flags):
                if position > self.last_append_position:
                    self.last_append_position = position
                    self.time_of_last_append_position_update_ns = now_ns
                self.time_of_last_append_position_send_ns = now_ns
                return 1
        return 0

    def _sweep_uncommitted_entries_to(self, commit_position: int) -> None:
        for tracker in self.pending_service_message_trackers:
            tracker.sweep_leader_messages()
        while self.uncommitted_timers and self.uncommitted_timers[0][0] <= commit_position:
            self.uncommitted_timers.popleft()
        while self.uncommitted_closed_sessions and \
                self.uncommitted_closed_sessions[0].closed_log_position <= commit_position:
            self.uncommitted_closed_sessions.popleft()

    def _restore_uncommitted_entries(self, commit_position: int) -> None:
        for append_position, correlation_id in self.uncommitted_timers:
            if append_position > commit_position:
                self.timer_service.schedule_timer_for_correlation_id(correlation_id, 0)
        self.uncommitted_timers.clear()
        for tracker in self.pending_service_message_trackers:
            tracker.restore_uncommitted_messages()
        while self.uncommitted_closed_sessions:
            session = self.uncommitted_closed_sessions.popleft()
            if session.closed_log_position > commit_position:
                session.closed_log_position = NULL_POSITION
                session.state = State.CLOSING
                self._add_session(session)

    def _stop_existing_catchup_replay(self, follower: ClusterMember) -> None:
        replay_session_id = getattr(follower, "catchup_replay_session_id", NULL_VALUE)
        if replay_session_id != NULL_VALUE:
            try:
                self.archive.stop_replay(replay_session_id)
            except Exception as error:
                self.on_error(ClusterEvent(f"replay already stopped for catchup: {error}"))
            follower.catchup_replay_session_id = NULL_VALUE
            follower.catchup_replay_correlation_id = NULL_VALUE

    def _update_member_details(self, new_leader: ClusterMember) -> None:
        self.leader_member = new_leader
        for member in self.active_members:
            member.is_leader = member.id == new_leader.id
        self.ingress_endpoints = ",".join(f"{m.id}={m.ingress_endpoint}" for m in self.active_members)

    def _connect_ingress(self) -> None:
        ingress = ChannelUri.parse(self.ctx.ingress_channel)
        channel = self.ctx.ingress_channel
        if ingress.get(ENDPOINT_PARAM) is None and not ingress.is_ipc:
            channel = _with_params(channel, endpoint=self.this_member.ingress_endpoint)
        subscription = self.aeron.add_subscription(channel, self.ctx.ingress_stream_id)
        ipc_subscription = None
        if self.role == ClusterRole.LEADER and self.ctx.is_ipc_ingress_allowed and not ingress.is_ipc:
            ipc_subscription = self.aeron.add_subscription(IPC_CHANNEL, self.ctx.ingress_stream_id)
        self.ingress_adapter.connect(subscription, ipc_subscription)

    # =========================================================================================== ElectionHost
    def prepare_for_new_leadership(self, log_position: int, now_ns: int) -> int:
        self.set_role(ClusterRole.FOLLOWER)
        self.ingress_adapter.close()
        if self.catchup_log_destination is not None:
            self.log_adapter.async_remove_destination(self.catchup_log_destination)
            self.catchup_log_destination = None
        if self.live_log_destination is not None:
            self.log_adapter.async_remove_destination(self.live_log_destination)
            self.live_log_destination = None
        self.log_adapter.disconnect()
        self.log_publisher.disconnect()
        if self.counters.control_toggle.get() != ClusterControlToggle.INACTIVE:
            self.counters.control_toggle.set(int(ClusterControlToggle.INACTIVE))
        self._try_stop_log_recording()
        if self._log_recording_id != NULL_VALUE:
            counters = self.aeron.counters_reader
            while recording_pos.find_counter_id_by_recording(counters, self._log_recording_id,
                                                             self.archive_id) != recording_pos.NULL_COUNTER_ID:
                self.idle()
            self.last_append_position = self._get_last_appended_position()
            self.time_of_last_append_position_update_ns = now_ns
            self.recovery_plan = self._create_recovery_plan()
            self._clear_sessions_after(log_position)
            for session in self.sessions:
                session.disconnect()
            self.counters.commit_position.set(log_position)
            self._restore_uncommitted_entries(log_position)
        return self.last_append_position

    def time_of_last_leader_update_ns(self) -> int:
        return self._time_of_last_leader_update_ns

    def log_recording_id(self) -> int:
        return self._log_recording_id

    def update_log_recording_id(self, recording_id: int) -> None:
        if recording_id != NULL_VALUE:
            self._log_recording_id = recording_id

    def commit_position(self) -> int:
        return self.counters.commit_position.get()

    def add_log_publication(self, append_position: int) -> int:
        self.set_role(ClusterRole.LEADER)
        log_publication_tag = self.aeron.next_correlation_id()
        self.log_publication_channel_tag = self.aeron.next_correlation_id()
        uri = ChannelUri.parse(self.ctx.log_channel)
        params = dict(uri.params)
        params[ALIAS_PARAM] = "log"
        params[TAGS_PARAM] = f"{self.log_publication_channel_tag},{log_publication_tag}"
        if not uri.is_ipc:
            if self.is_log_mdc:
                params["control-mode"] = "manual"
            params[SPIES_SIMULATE_CONNECTION_PARAM] = "true" if len(self.active_members) == 1 else "false"
        plan_log = self.recovery_plan.log if self.recovery_plan is not None else None
        if plan_log is not None:
            bits = plan_log.term_buffer_length.bit_length() - 1
            params[INITIAL_TERM_ID_PARAM] = str(plan_log.initial_term_id)
            params[TERM_ID_PARAM] = str(plan_log.initial_term_id + (append_position >> bits))
            params[TERM_OFFSET_PARAM] = str(append_position & (plan_log.term_buffer_length - 1))
            params[TERM_LENGTH_PARAM] = str(plan_log.term_buffer_length)
            params[MTU_LENGTH_PARAM] = str(plan_log.mtu_length)
        else:
            params[INITIAL_TERM_ID_PARAM] = params[TERM_ID_PARAM] = params[TERM_OFFSET_PARAM] = "0"
        channel = str(ChannelUri(uri.media, params, uri.prefix))
        publication = self.aeron.add_exclusive_publication(channel, self.ctx.log_stream_id)
        self.log_publisher.set_publication(publication)
        if self.is_log_mdc:
            for member in self.active_members:
                if member is not self.this_member:
                    self.log_publisher.add_destination(create_destination_uri(self.ctx.log_channel,
                                                                              member.log_endpoint))
        return publication.session_id

    def publish_commit_position(self, position: int) -> None:
        for member_id, publisher in self.consensus_publishers.items():
            if member_id != self.member_id:
                publisher.commit_position(self.leadership_term_id, position, self.member_id)

    def new_log_replay(self, from_position: int, to_position: int):
        from aeron_numba.cluster.log_replay import LogReplay
        return LogReplay(self.archive, self._log_recording_id, from_position, to_position, self.log_adapter,
                         self.ctx, self)

    def join_log_as_leader(self, leadership_term_id: int, log_position: int, log_session_id: int,
                           is_startup: bool) -> None:
        is_ipc = self.ctx.log_channel.startswith(IPC_CHANNEL)
        channel = (f"{IPC_CHANNEL if is_ipc else UDP_CHANNEL}?tags={self.log_publication_channel_tag}"
                   f"|session-id={log_session_id}|alias=log")
        self.set_leadership_term_id(leadership_term_id)
        self._start_log_recording(channel, self.ctx.log_stream_id, SOURCE_LOCAL)
        self.idle_strategy.reset()
        while not self._try_create_append_position(log_session_id):
            self.idle()
        self.local_log_channel = channel if is_ipc else SPY_PREFIX + channel
        self.await_services_ready(self.local_log_channel, self.ctx.log_stream_id, log_session_id, log_position,
                                   LONG_MAX, is_startup, ClusterRole.LEADER)

    def update_leader_position(self, now_ns: int, position: int) -> int:
        self.this_member.log_position = position
        self.this_member.time_of_last_append_position_ns = now_ns
        commit_position = min(self.quorum_position(), position)
        if (commit_position > self.counters.commit_position.get()
                or now_ns >= self.time_of_last_log_update_ns + self.leader_heartbeat_interval_ns):
            self.publish_commit_position(commit_position)
            self.counters.commit_position.set(commit_position)
            self.time_of_last_log_update_ns = now_ns
            self._sweep_uncommitted_entries_to(commit_position)
            return 1
        return 0

    def append_new_leadership_term_event(self, now_ns: int) -> bool:
        timestamp = now_ns // self.cluster_time_unit.nanos_per_unit
        return self.log_publisher.append_new_leadership_term_event(
            self.leadership_term_id, timestamp, self.election.log_position, self.member_id,
            self.log_publisher.session_id, int(self.cluster_time_unit), self.app_version)

    def election_complete(self, now_ns: int) -> None:
        election = self.election
        self.set_leadership_term_id(election.leadership_term_id)
        self.set_role(election.role)
        if self.role == ClusterRole.LEADER:
            self.time_of_last_log_update_ns = now_ns - self.leader_heartbeat_interval_ns
            self.timer_service.current_time(now_ns // self.cluster_time_unit.nanos_per_unit)
            if self.counters.control_toggle.get() == ClusterControlToggle.INACTIVE:
                self.counters.control_toggle.set(int(ClusterControlToggle.NEUTRAL))
            self._prepare_sessions_for_new_term(election.is_leader_startup)
        else:
            self.time_of_last_log_update_ns = now_ns
            self.time_of_last_append_position_update_ns = now_ns
            self.time_of_last_append_position_send_ns = now_ns
            self.log_stalled_since_ns = now_ns
            self.local_log_channel = None
        self.recovery_plan = self._create_recovery_plan()
        log_position = election.log_position
        self.notified_commit_position = log_position
        self.counters.commit_position.set(log_position)
        self._update_member_details(election.leader_member)
        self._connect_ingress()
        self.election = None
        self.counters.election_state.set(int(ElectionState.CLOSED))
        log.info("memberId=%d election complete: %s leadershipTermId=%d logPosition=%d", self.member_id,
                 self.role.name, self.leadership_term_id, log_position)

    def truncate_log_entry(self, log_leadership_term_id: int, log_position: int) -> None:
        self.archive.stop_all_replays(self._log_recording_id)
        self.archive.truncate_recording(self._log_recording_id, log_position)
        if log_leadership_term_id != NULL_VALUE:
            self.recording_log.commit_log_position(log_leadership_term_id, log_position)
        self.log_adapter.disconnect(log_position)
        self.log_recording_stop_position = log_position

    def track_catchup_completion(self, follower: ClusterMember, leadership_term_id: int, flags: int) -> None:
        replay_session_id = getattr(follower, "catchup_replay_session_id", NULL_VALUE)
        if replay_session_id != NULL_VALUE or flags & C.APPEND_POSITION_FLAG_CATCHUP:
            if follower.log_position >= self.log_publisher.position:
                if getattr(follower, "catchup_replay_correlation_id", NULL_VALUE) != NULL_VALUE:
                    try:
                        self.archive.stop_replay(replay_session_id)
                    except Exception as error:
                        self.on_error(ClusterEvent(f"replay already stopped for catchup: {error}"))
                    follower.catchup_replay_correlation_id = NULL_VALUE
                publisher = self.consensus_publishers.get(follower.id)
                if publisher is not None and publisher.stop_catchup(leadership_term_id, follower.id):
                    follower.catchup_replay_session_id = NULL_VALUE

    def new_log_replication(self, leader: ClusterMember, leader_recording_id: int, stop_position: int,
                            now_ns: int):
        from aeron_numba.cluster.recording_replication import RecordingReplication
        return RecordingReplication.for_log(self, leader, leader_recording_id, stop_position, now_ns)

    def add_follower_log_subscription(self, log_session_id: int) -> None:
        uri = ChannelUri.parse(self.ctx.log_channel)
        params = {TAGS_PARAM: f"{self.aeron.next_correlation_id()},{self.aeron.next_correlation_id()}",
                  "control-mode": "manual", SESSION_ID_PARAM: str(log_session_id), "group": "true",
                  "rejoin": "false"}
        for name in ("so-rcvbuf", "rcv-wnd"):
            if uri.get(name) is not None:
                params[name] = uri.get(name)
        params[ALIAS_PARAM] = "log-cm"
        channel = str(ChannelUri("udp", params))
        subscription = self.aeron.add_subscription(channel, self.ctx.log_stream_id)
        self.log_adapter.subscription = subscription

    def log_subscription_resolved_endpoint(self) -> str | None:
        subscription = self.log_adapter.subscription
        return None if subscription is None else subscription.resolved_endpoint

    def add_catchup_log_destination(self, catchup_endpoint: str) -> None:
        destination = create_destination_uri(self.ctx.log_channel, catchup_endpoint)
        self.log_adapter.subscription.add_destination(destination)
        self.catchup_log_destination = destination

    def add_live_log_destination(self) -> None:
        destination = (create_destination_uri(self.ctx.log_channel, self.this_member.log_endpoint)
                       if self.is_log_mdc else self.ctx.log_channel)
        self.log_adapter.subscription.add_destination(destination)
        self.live_log_destination = destination

    def has_live_log_destination(self) -> bool:
        return self.live_log_destination is not None

    def has_catchup_log_destination(self) -> bool:
        return self.catchup_log_destination is not None

    def catchup_initiated(self, now_ns: int) -> None:
        self.time_of_last_append_position_update_ns = now_ns
        self.time_of_last_append_position_send_ns = now_ns

    def _log_image(self):
        subscription = self.log_adapter.subscription
        if subscription is None or self.election is None:
            return None
        return subscription.image_by_session_id(self.election.log_session_id)

    def log_image_join_position(self, log_session_id: int) -> int:
        subscription = self.log_adapter.subscription
        image = None if subscription is None else subscription.image_by_session_id(log_session_id)
        return NULL_POSITION if image is None else image.join_position

    def is_log_subscription_errored(self) -> bool:
        subscription = self.log_adapter.subscription
        return subscription is not None and subscription.channel_status == CHANNEL_STATUS_ERRORED

    def try_join_log_as_follower(self, is_leader_startup: bool, now_ns: int) -> bool:
        image = self._log_image()
        if image is None:
            return False
        subscription = image.subscription
        if self.log_subscription_id == NULL_VALUE:
            self._start_log_recording(subscription.channel, subscription.stream_id, SOURCE_REMOTE)
        if self._try_create_append_position(image.session_id):
            self.log_adapter.set_image(image)
            self.last_append_position = image.join_position
            self.time_of_last_append_position_update_ns = now_ns
            self.await_services_ready(subscription.channel, subscription.stream_id, image.session_id,
                                       image.join_position, LONG_MAX, is_leader_startup, ClusterRole.FOLLOWER)
            return True
        return False

    def catchup_poll(self, limit_position: int, now_ns: int) -> int:
        work_count = 0
        if self.state in (ConsensusModuleState.ACTIVE, ConsensusModuleState.SUSPENDED):
            append = self.append_position.get() if self.append_position is not None else 0
            fragments = self.log_adapter.poll(min(append, limit_position))
            work_count += fragments
            if fragments == 0 and self.log_adapter.is_image_closed:
                raise ClusterEvent(f"unexpected image close during catchup: position={self.log_adapter.position}")
            leader = self.election.leader_member
            work_count += self._update_follower_position(self.consensus_publishers.get(leader.id), now_ns,
                                                         self.leadership_term_id, append,
                                                         C.APPEND_POSITION_FLAG_CATCHUP)
            self._propose_max_commit_position(self.log_adapter.position)
        if (now_ns > self.time_of_last_append_position_update_ns + self.leader_heartbeat_timeout_ns
                and self.state == ConsensusModuleState.ACTIVE):
            raise ClusterEvent(f"no catchup progress commitPosition={self.counters.commit_position.get()} "
                               f"limitPosition={limit_position} lastAppendPosition={self.last_append_position} "
                               f"logPosition={self.election.log_position}")
        work_count += self.consensus_module_adapter.poll()
        return work_count

    def is_catchup_near_live(self, position: int) -> bool:
        image = self.log_adapter.image
        if image is not None:
            window = min(image.term_buffer_length >> 2, LIVE_ADD_MAX_WINDOW)
            return image.position >= position - window
        return False

    def is_taking_snapshot(self) -> bool:
        return self.state == ConsensusModuleState.SNAPSHOT

    def stop_all_catchups(self) -> None:
        for member in self.active_members:
            if getattr(member, "catchup_replay_session_id", NULL_VALUE) != NULL_VALUE:
                if getattr(member, "catchup_replay_correlation_id", NULL_VALUE) != NULL_VALUE:
                    try:
                        self.archive.stop_replay(member.catchup_replay_session_id)
                    except Exception:
                        self.on_error(ClusterEvent("replay already stopped for catchup"))
                member.catchup_replay_session_id = NULL_VALUE
                member.catchup_replay_correlation_id = NULL_VALUE
        if self.role != ClusterRole.LEADER and self.catchup_log_destination is not None:
            self.log_adapter.async_remove_destination(self.catchup_log_destination)
            self.catchup_log_destination = None

    def close_log_subscription(self) -> None:
        self.log_adapter.disconnect()
        self.live_log_destination = None
        self.catchup_log_destination = None

    def __repr__(self) -> str:
        return (f"ConsensusModuleAgent{{memberId={self.member_id}, state={self.state.name}, role={self.role.name}, "
                f"leadershipTermId={self.leadership_term_id}, commitPosition={self.counters.commit_position.get()}, "
                f"logRecordingId={self._log_recording_id}}}")
