"""Cluster settings: the consensus module's, a clustered service container's and the AeronCluster client's, with
Aeron 1.48's defaults (spec/cluster.md §11, §5) under Aeron's names (``aeron.cluster.x.y`` read as the variable
``AERON_CLUSTER_X_Y``), validated by ``conclude()`` before a file is touched.

Where the three read the same Aeron property (the cluster dir, the control channel, the snapshot channel...) they
read the same variable, as Aeron's contexts do; the snapshot stream id keeps each role's own default (107 for the
consensus module, 106 for a service), also as in Aeron.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aeron_numba.archive.authentication import NullAuthenticator, load_supplier
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_member import ClusterMember, parse_cluster_members
from aeron_numba.cluster.election import ElectionConfig
from aeron_numba.codecs.channel_uri import IPC_CHANNEL, ChannelUri
from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.settings import boolean, duration, from_env, integer, setting, size, text

# spec/cluster.md §11 and ConsensusModule.Configuration (aeron-cluster .../cluster/ConsensusModule.java)
DEFAULT_SESSION_TIMEOUT_NS = 10_000_000_000
DEFAULT_TERMINATION_TIMEOUT_NS = 10_000_000_000
DEFAULT_REPLICATION_PROGRESS_TIMEOUT_NS = 10_000_000_000
DEFAULT_CYCLE_THRESHOLD_NS = 1_000_000_000
DEFAULT_SNAPSHOT_DURATION_THRESHOLD_NS = 1_000_000_000
DEFAULT_WHEEL_TICK_RESOLUTION_NS = 8_000_000
DEFAULT_TICKS_PER_WHEEL = 128
DEFAULT_SERVICE_COUNT = 1
DEFAULT_MAX_CONCURRENT_SESSIONS = 10
DEFAULT_FRAGMENT_LIMIT = 50
DEFAULT_FILE_SYNC_LEVEL = 0
DEFAULT_CLUSTER_ID = 0
DEFAULT_MEMBER_ID = 0
DEFAULT_MESSAGE_TIMEOUT_NS = 5_000_000_000  # AeronCluster.Configuration.MESSAGE_TIMEOUT_DEFAULT_NS
#: How long a client waits for a new leader once its leader is gone. Aeron 1.48 has no such wait (its client stays
#: open until the application closes it); later Aerons default it to twice the leader heartbeat timeout: the
#: followers need one timeout to notice the leader is gone, the election and its announcement come after it.
DEFAULT_NEW_LEADER_TIMEOUT_NS = 2 * C.DEFAULT_LEADER_HEARTBEAT_TIMEOUT_NS
# spec/cluster.md §5 (streams and channels)
DEFAULT_LOG_CHANNEL = "aeron:udp?term-length=64m"
DEFAULT_LOG_STREAM_ID = 100
DEFAULT_INGRESS_STREAM_ID = 101
DEFAULT_EGRESS_STREAM_ID = 102
DEFAULT_REPLAY_CHANNEL = IPC_CHANNEL
DEFAULT_REPLAY_STREAM_ID = 103
DEFAULT_CONTROL_CHANNEL = "aeron:ipc?term-length=128k"
DEFAULT_SERVICE_STREAM_ID = 104
DEFAULT_CONSENSUS_MODULE_STREAM_ID = 105
DEFAULT_SNAPSHOT_CHANNEL = "aeron:ipc?alias=snapshot"
DEFAULT_SERVICE_SNAPSHOT_STREAM_ID = 106
DEFAULT_CONSENSUS_MODULE_SNAPSHOT_STREAM_ID = 107
DEFAULT_CONSENSUS_CHANNEL = "aeron:udp?term-length=64k"
DEFAULT_CONSENSUS_STREAM_ID = 108
DEFAULT_FOLLOWER_CATCHUP_CHANNEL = "aeron:udp"
DEFAULT_LEADER_ARCHIVE_CONTROL_CHANNEL = "aeron:udp?term-length=64k"
DEFAULT_SERVICE_NAME = "clustered-service"
DEFAULT_IDLE_STRATEGY = "backoff"  # Aeron's org.agrona.concurrent.BackoffIdleStrategy
#: A service id is one byte of the mark file's name space (ClusteredServiceContainer: "outside allowed range").
MAX_SERVICE_ID = 127
#: The archive client's control response stream id (AeronArchive.Configuration.CONTROL_RESPONSE_STREAM_ID_DEFAULT),
#: from which the consensus module derives its own so that nodes sharing a driver do not collide.
ARCHIVE_CONTROL_RESPONSE_STREAM_ID = 20
FILE_SYNC_LEVELS = (0, 1, 2)  # none, sync data, sync data and metadata


def _check_positive(ctx, names) -> None:
    for name in names:
        if getattr(ctx, name) <= 0:
            raise ConfigurationError(f"{name}={getattr(ctx, name)} must be > 0")


def _check_channels(ctx, names) -> None:
    for name in names:
        channel = getattr(ctx, name)
        if not channel:
            raise ConfigurationError(f"{name} must be set (an aeron:udp or aeron:ipc channel)")
        try:
            ChannelUri.parse(channel)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{name}={channel!r}: {exc}") from None


def _check_error_buffer_length(name: str, length: int) -> None:
    try:
        C.check_error_buffer_length(length)
    except LayoutError:
        raise ConfigurationError(f"{name}={length} must be in [{C.MIN_ERROR_BUFFER_LENGTH}, "
                                 f"{C.MAX_ERROR_BUFFER_LENGTH}]") from None


def _check_service_id(name: str, service_id: int) -> None:
    if not 0 <= service_id <= MAX_SERVICE_ID:
        raise ConfigurationError(f"{name}={service_id} is outside the allowed range [0, {MAX_SERVICE_ID}]")


def _conclude_directories(ctx) -> None:
    """Aeron's derivation (spec §1): absolute cluster dir; the mark file dir is the cluster dir unless set, and
    then a ``.lnk`` file in the cluster dir points at it."""
    ctx.cluster_dir = str(Path(ctx.cluster_dir).resolve())
    ctx.mark_file_dir = str(Path(ctx.mark_file_dir).resolve()) if ctx.mark_file_dir else ctx.cluster_dir


def _check_idle_strategy(name: str, value: str) -> None:
    from aeron_numba.agent import idle_strategy_from_name

    try:
        idle_strategy_from_name(value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}={value!r}: {exc}") from None


def parse_ingress_endpoints(value: str) -> dict[int, str]:
    """Aeron's ingress endpoints ``"0=host:port,1=host:port"`` as member id -> endpoint."""
    endpoints: dict[int, str] = {}
    for entry in value.split(","):
        member, separator, endpoint = entry.partition("=")
        try:
            member_id = int(member)
        except ValueError:
            member_id = None
        if not separator or member_id is None or ":" not in endpoint:
            raise ConfigurationError(f"ingress_endpoints={value!r}: entry {entry!r} is not <member id>=<host>:<port>")
        if member_id in endpoints:
            raise ConfigurationError(f"ingress_endpoints={value!r}: member id {member_id} appears twice")
        endpoints[member_id] = endpoint
    return endpoints


@dataclass
class ConsensusModuleContext:
    """The consensus module's settings (Aeron's ``ConsensusModule.Context``)."""

    cluster_dir: str = setting(C.DEFAULT_CLUSTER_DIR, "AERON_CLUSTER_DIR", text,
        doc="Directory of recording.log, node-state.dat and the cluster mark files.")
    cluster_services_dir: str = setting("", "AERON_CLUSTER_SERVICES_DIR", text,
        doc="Directory of the services' files, recorded in the mark file; empty: the cluster dir.")
    mark_file_dir: str = setting("", "AERON_CLUSTER_MARK_FILE_DIR", text,
        doc="Directory of cluster-mark.dat (a cluster-mark.lnk in the cluster dir points at it); empty: the "
            "cluster dir.")
    aeron_dir: str | None = setting(None, "AERON_DIR", text,
        doc="Aeron dir of the media driver the consensus module connects to; unset: the driver's default.")
    cluster_id: int = setting(DEFAULT_CLUSTER_ID, "AERON_CLUSTER_ID", integer,
        doc="Id of the cluster, in its counters' keys and its mark files.")
    cluster_member_id: int = setting(DEFAULT_MEMBER_ID, "AERON_CLUSTER_MEMBER_ID", integer,
        doc="Id of this member, one of the ids in the cluster members.")
    appointed_leader_id: int = setting(C.DEFAULT_APPOINTED_LEADER_ID, "AERON_CLUSTER_APPOINTED_LEADER_ID", integer,
        doc="Member that must be elected leader (for tests); -1: any member may be.")
    cluster_members: str = setting("", "AERON_CLUSTER_MEMBERS", text,
        doc="The members: id,ingress,consensus,log,catchup,archive endpoints for each, members separated by |.")
    ingress_channel: str = setting("", "AERON_CLUSTER_INGRESS_CHANNEL", text,
        doc="Channel the clients' ingress arrives on (e.g. aeron:udp?term-length=64k); each member's ingress "
            "endpoint is put in it.")
    ingress_stream_id: int = setting(DEFAULT_INGRESS_STREAM_ID, "AERON_CLUSTER_INGRESS_STREAM_ID", integer,
        doc="Stream id of the clients' ingress.")
    is_ipc_ingress_allowed: bool = setting(False, "AERON_CLUSTER_INGRESS_IPC_ALLOWED", boolean,
        doc="Also accept ingress on aeron:ipc from clients on the leader's machine.")
    ingress_fragment_limit: int = setting(DEFAULT_FRAGMENT_LIMIT, "AERON_CLUSTER_INGRESS_FRAGMENT_LIMIT", integer,
        doc="Most ingress fragments read in one duty cycle.")
    log_channel: str = setting(DEFAULT_LOG_CHANNEL, "AERON_CLUSTER_LOG_CHANNEL", text,
        doc="Channel of the replicated log (leader to followers, recorded by each member's archive).")
    log_stream_id: int = setting(DEFAULT_LOG_STREAM_ID, "AERON_CLUSTER_LOG_STREAM_ID", integer,
        doc="Stream id of the replicated log.")
    log_fragment_limit: int = setting(DEFAULT_FRAGMENT_LIMIT, "AERON_CLUSTER_LOG_FRAGMENT_LIMIT", integer,
        doc="Most log fragments read in one duty cycle.")
    replay_channel: str = setting(DEFAULT_REPLAY_CHANNEL, "AERON_CLUSTER_REPLAY_CHANNEL", text,
        doc="Channel the log is replayed to the services on.")
    replay_stream_id: int = setting(DEFAULT_REPLAY_STREAM_ID, "AERON_CLUSTER_REPLAY_STREAM_ID", integer,
        doc="Stream id of the log replayed to the services.")
    control_channel: str = setting(DEFAULT_CONTROL_CHANNEL, "AERON_CLUSTER_CONTROL_CHANNEL", text,
        doc="Channel between the consensus module and its services.")
    service_stream_id: int = setting(DEFAULT_SERVICE_STREAM_ID, "AERON_CLUSTER_SERVICE_STREAM_ID", integer,
        doc="Stream id of messages from the consensus module to the services.")
    consensus_module_stream_id: int = setting(DEFAULT_CONSENSUS_MODULE_STREAM_ID,
                                              "AERON_CLUSTER_CONSENSUS_MODULE_STREAM_ID", integer,
        doc="Stream id of messages from the services to the consensus module.")
    snapshot_channel: str = setting(DEFAULT_SNAPSHOT_CHANNEL, "AERON_CLUSTER_SNAPSHOT_CHANNEL", text,
        doc="Channel snapshots are recorded from.")
    snapshot_stream_id: int = setting(DEFAULT_CONSENSUS_MODULE_SNAPSHOT_STREAM_ID, "AERON_CLUSTER_SNAPSHOT_STREAM_ID",
                                      integer,
        doc="Stream id of the consensus module's snapshot.")
    consensus_channel: str = setting(DEFAULT_CONSENSUS_CHANNEL, "AERON_CLUSTER_CONSENSUS_CHANNEL", text,
        doc="Channel between the members (elections, append and commit positions); each member's consensus "
            "endpoint is put in it.")
    consensus_stream_id: int = setting(DEFAULT_CONSENSUS_STREAM_ID, "AERON_CLUSTER_CONSENSUS_STREAM_ID", integer,
        doc="Stream id of the consensus messages.")
    replication_channel: str = setting("", "AERON_CLUSTER_REPLICATION_CHANNEL", text,
        doc="Channel a member's archive receives replicated log and snapshots on (e.g. "
            "aeron:udp?endpoint=host:0); required.")
    follower_catchup_channel: str = setting(DEFAULT_FOLLOWER_CATCHUP_CHANNEL, "AERON_CLUSTER_FOLLOWER_CATCHUP_CHANNEL",
                                            text,
        doc="Channel a follower catches up on the leader's log on; its catchup endpoint is put in it.")
    leader_archive_control_channel: str = setting(DEFAULT_LEADER_ARCHIVE_CONTROL_CHANNEL,
                                                  "AERON_CLUSTER_LEADER_ARCHIVE_CONTROL_CHANNEL", text,
        doc="Channel of control requests to the leader's archive; its archive endpoint is put in it.")
    service_count: int = setting(DEFAULT_SERVICE_COUNT, "AERON_CLUSTER_SERVICE_COUNT", integer,
        doc="Number of clustered services (ids 0 to count - 1) the consensus module waits for.")
    max_concurrent_sessions: int = setting(DEFAULT_MAX_CONCURRENT_SESSIONS, "AERON_CLUSTER_MAX_SESSIONS", integer,
        doc="Most client sessions open at once; more are refused.")
    session_timeout_ns: int = setting(DEFAULT_SESSION_TIMEOUT_NS, "AERON_CLUSTER_SESSION_TIMEOUT", duration,
        doc="A client session without a keepalive or message for this long is closed.")
    leader_heartbeat_timeout_ns: int = setting(C.DEFAULT_LEADER_HEARTBEAT_TIMEOUT_NS,
                                               "AERON_CLUSTER_LEADER_HEARTBEAT_TIMEOUT", duration,
        doc="Followers start an election when the leader is silent this long.")
    leader_heartbeat_interval_ns: int = setting(C.DEFAULT_LEADER_HEARTBEAT_INTERVAL_NS,
                                                "AERON_CLUSTER_LEADER_HEARTBEAT_INTERVAL", duration,
        doc="Interval of the leader's heartbeats (commit positions) when the log is idle.")
    startup_canvass_timeout_ns: int = setting(C.DEFAULT_STARTUP_CANVASS_TIMEOUT_NS,
                                              "AERON_CLUSTER_STARTUP_CANVASS_TIMEOUT", duration,
        doc="How long a starting member canvasses for all members before settling for a quorum.")
    election_timeout_ns: int = setting(C.DEFAULT_ELECTION_TIMEOUT_NS, "AERON_CLUSTER_ELECTION_TIMEOUT", duration,
        doc="How long an election waits for votes or a new leader before trying again.")
    election_status_interval_ns: int = setting(C.DEFAULT_ELECTION_STATUS_INTERVAL_NS,
                                               "AERON_CLUSTER_ELECTION_STATUS_INTERVAL", duration,
        doc="Interval of the canvass and status messages during an election.")
    termination_timeout_ns: int = setting(DEFAULT_TERMINATION_TIMEOUT_NS, "AERON_CLUSTER_TERMINATION_TIMEOUT",
                                          duration,
        doc="How long a leader waits for its followers' termination acks on shutdown.")
    replication_progress_timeout_ns: int = setting(DEFAULT_REPLICATION_PROGRESS_TIMEOUT_NS,
                                                   "AERON_CLUSTER_REPLICATION_PROGRESS_TIMEOUT", duration,
        doc="A log or snapshot replication that makes no progress for this long has failed.")
    wheel_tick_resolution_ns: int = setting(DEFAULT_WHEEL_TICK_RESOLUTION_NS, "AERON_CLUSTER_WHEEL_TICK_RESOLUTION",
                                            duration,
        doc="Resolution of the services' timers; rounded up to a power of two in cluster time units, as Aeron does "
            "(timer_service.wheel_tick_resolution).")
    ticks_per_wheel: int = setting(DEFAULT_TICKS_PER_WHEEL, "AERON_CLUSTER_TICKS_PER_WHEEL", integer,
        doc="Ticks of the timer wheel (a power of two).")
    cycle_threshold_ns: int = setting(DEFAULT_CYCLE_THRESHOLD_NS, "AERON_CLUSTER_CYCLE_THRESHOLD", duration,
        doc="A consensus module duty cycle longer than this is counted as exceeded.")
    total_snapshot_duration_threshold_ns: int = setting(DEFAULT_SNAPSHOT_DURATION_THRESHOLD_NS,
                                                        "AERON_CLUSTER_TOTAL_SNAPSHOT_THRESHOLD", duration,
        doc="A snapshot of all services taking longer than this is counted as exceeded.")
    error_buffer_length: int = setting(C.DEFAULT_ERROR_BUFFER_LENGTH, "AERON_CLUSTER_ERROR_BUFFER_LENGTH", size,
        doc="Length of the distinct error log in cluster-mark.dat.")
    file_sync_level: int = setting(DEFAULT_FILE_SYNC_LEVEL, "AERON_CLUSTER_FILE_SYNC_LEVEL", integer,
        doc="Sync of recording.log and node-state.dat: 0 none, 1 data, 2 data and metadata.")
    accept_standby_snapshots: bool = setting(False, "AERON_CLUSTER_ACCEPT_STANDBY_SNAPSHOTS", boolean,
        doc="Accept snapshots taken by standby members.")
    authenticator_supplier: str = setting("", "AERON_CLUSTER_AUTHENTICATOR_SUPPLIER", text,
        doc="package.module:factory of the client sessions' Authenticator; empty: everyone is authenticated.")
    authorisation_service_supplier: str = setting("", "AERON_CLUSTER_AUTHORISATION_SERVICE_SUPPLIER", text,
        doc="package.module:factory of the AuthorisationService of admin requests; empty: only backup queries "
            "are allowed.")
    agent_role_name: str = setting("", "AERON_CLUSTER_CONSENSUS_MODULE_AGENT_ROLE_NAME", text,
        doc="Role name of the consensus module agent; empty: consensus-module-<clusterId>-<memberId>.")
    idle_strategy: str = setting(DEFAULT_IDLE_STRATEGY, "AERON_CLUSTER_IDLE_STRATEGY", text,
        doc="How the cluster's agents wait when they have no work: backoff, sleeping, yield, spin, noop (or an "
            "Agrona class name).")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> "ConsensusModuleContext":
        """Defaults, then environment variables, then explicit ``overrides`` (highest priority)."""
        return from_env(cls, environ, **overrides)

    def conclude(self) -> "ConsensusModuleContext":
        """Validate every setting and derive the rest; raises ``ConfigurationError`` naming the value and the
        limit, or both values when two settings disagree."""
        _conclude_directories(self)
        if not self.cluster_services_dir:
            self.cluster_services_dir = self.cluster_dir
        self.cluster_services_dir = str(Path(self.cluster_services_dir).resolve())
        self.members = self._conclude_members()
        _check_channels(self, ("ingress_channel", "log_channel", "replay_channel", "control_channel",
                               "snapshot_channel", "consensus_channel", "replication_channel",
                               "follower_catchup_channel", "leader_archive_control_channel"))
        _check_positive(self, ("ingress_fragment_limit", "log_fragment_limit", "max_concurrent_sessions",
                               "session_timeout_ns", "leader_heartbeat_timeout_ns", "leader_heartbeat_interval_ns",
                               "startup_canvass_timeout_ns", "election_timeout_ns", "election_status_interval_ns",
                               "termination_timeout_ns", "replication_progress_timeout_ns", "cycle_threshold_ns",
                               "total_snapshot_duration_threshold_ns", "ticks_per_wheel", "wheel_tick_resolution_ns"))
        if self.leader_heartbeat_interval_ns >= self.leader_heartbeat_timeout_ns:
            raise ConfigurationError(f"leader_heartbeat_interval_ns={self.leader_heartbeat_interval_ns} must be < "
                                     f"leader_heartbeat_timeout_ns={self.leader_heartbeat_timeout_ns}")
        if self.startup_canvass_timeout_ns // self.leader_heartbeat_timeout_ns < 2:
            # Aeron's rule: a starting member must canvass through at least two heartbeat timeouts.
            raise ConfigurationError(f"startup_canvass_timeout_ns={self.startup_canvass_timeout_ns} must be at least "
                                     f"2 x leader_heartbeat_timeout_ns={self.leader_heartbeat_timeout_ns}")
        if self.election_status_interval_ns >= self.election_timeout_ns:
            raise ConfigurationError(f"election_status_interval_ns={self.election_status_interval_ns} must be < "
                                     f"election_timeout_ns={self.election_timeout_ns}")
        if self.ticks_per_wheel & (self.ticks_per_wheel - 1):
            raise ConfigurationError(f"ticks_per_wheel={self.ticks_per_wheel} must be a power of two")
        if not 0 <= self.service_count <= MAX_SERVICE_ID + 1:
            raise ConfigurationError(f"service_count={self.service_count} must be in [0, {MAX_SERVICE_ID + 1}] "
                                     f"(service ids 0 to {MAX_SERVICE_ID})")
        if self.file_sync_level not in FILE_SYNC_LEVELS:
            raise ConfigurationError(f"file_sync_level={self.file_sync_level} must be one of {FILE_SYNC_LEVELS}")
        if self.cluster_id < 0:
            raise ConfigurationError(f"cluster_id={self.cluster_id} must be >= 0")
        _check_error_buffer_length("error_buffer_length", self.error_buffer_length)
        _check_idle_strategy("idle_strategy", self.idle_strategy)
        # ConsensusModule.Context: the local archive's responses come back on a stream of this cluster's own.
        self.archive_control_response_stream_id = self.cluster_id * 100 + 100 + ARCHIVE_CONTROL_RESPONSE_STREAM_ID
        self.authenticator_factory = load_supplier(self.authenticator_supplier, "authenticator_supplier",
                                                   NullAuthenticator)
        # None: Aeron's default service, which allows backup queries only.
        self.authorisation_service_factory = load_supplier(self.authorisation_service_supplier,
                                                           "authorisation_service_supplier", None)
        if not self.agent_role_name:
            self.agent_role_name = f"consensus-module-{self.cluster_id}-{self.cluster_member_id}"
        return self

    def election_config(self, app_version: int = 0) -> ElectionConfig:
        """The settings an election reads, from this (concluded) context."""
        return ElectionConfig(election_timeout_ns=self.election_timeout_ns,
                              election_status_interval_ns=self.election_status_interval_ns,
                              leader_heartbeat_timeout_ns=self.leader_heartbeat_timeout_ns,
                              leader_heartbeat_interval_ns=self.leader_heartbeat_interval_ns,
                              startup_canvass_timeout_ns=self.startup_canvass_timeout_ns,
                              appointed_leader_id=self.appointed_leader_id, app_version=app_version)

    def _conclude_members(self) -> list[ClusterMember]:
        if not self.cluster_members:
            raise ConfigurationError("cluster_members must be set (AERON_CLUSTER_MEMBERS: "
                                     "id,ingress,consensus,log,catchup,archive endpoints for each member, "
                                     "members separated by |)")
        try:
            members = parse_cluster_members(self.cluster_members)
        except ClusterError as exc:
            raise ConfigurationError(f"cluster_members={self.cluster_members!r}: {exc}") from None
        ids = [m.id for m in members]
        if self.cluster_member_id not in ids:
            raise ConfigurationError(f"cluster_member_id={self.cluster_member_id} is not a member id of "
                                     f"cluster_members (ids {ids})")
        if self.appointed_leader_id != NULL_VALUE and self.appointed_leader_id not in ids:
            raise ConfigurationError(f"appointed_leader_id={self.appointed_leader_id} is not a member id of "
                                     f"cluster_members (ids {ids}); -1 lets any member lead")
        return members


@dataclass
class ClusteredServiceContext:
    """A clustered service container's settings (Aeron's ``ClusteredServiceContainer.Context``)."""

    cluster_dir: str = setting(C.DEFAULT_CLUSTER_DIR, "AERON_CLUSTER_DIR", text,
        doc="Directory of the cluster, shared with the consensus module.")
    mark_file_dir: str = setting("", "AERON_CLUSTER_MARK_FILE_DIR", text,
        doc="Directory of cluster-mark-service-<id>.dat; empty: the cluster dir.")
    aeron_dir: str | None = setting(None, "AERON_DIR", text,
        doc="Aeron dir of the media driver the container connects to; unset: the driver's default.")
    cluster_id: int = setting(DEFAULT_CLUSTER_ID, "AERON_CLUSTER_ID", integer,
        doc="Id of the cluster, in its counters' keys and its mark files.")
    service_id: int = setting(0, "AERON_CLUSTER_SERVICE_ID", integer,
        doc="Id of this service (0 to 127; below the consensus module's service count).")
    service_name: str = setting(DEFAULT_SERVICE_NAME, "AERON_CLUSTER_SERVICE_NAME", text,
        doc="Name of the service, in its mark file and agent role name.")
    service_class_name: str = setting("", "AERON_CLUSTER_SERVICE_CLASS_NAME", text,
        doc="package.module:factory of the ClusteredService to run when none is given in code.")
    replay_channel: str = setting(DEFAULT_REPLAY_CHANNEL, "AERON_CLUSTER_REPLAY_CHANNEL", text,
        doc="Channel the log is replayed to the service on.")
    replay_stream_id: int = setting(DEFAULT_REPLAY_STREAM_ID, "AERON_CLUSTER_REPLAY_STREAM_ID", integer,
        doc="Stream id of the log replayed to the service.")
    control_channel: str = setting(DEFAULT_CONTROL_CHANNEL, "AERON_CLUSTER_CONTROL_CHANNEL", text,
        doc="Channel between the consensus module and its services.")
    service_stream_id: int = setting(DEFAULT_SERVICE_STREAM_ID, "AERON_CLUSTER_SERVICE_STREAM_ID", integer,
        doc="Stream id of messages from the consensus module to the services.")
    consensus_module_stream_id: int = setting(DEFAULT_CONSENSUS_MODULE_STREAM_ID,
                                              "AERON_CLUSTER_CONSENSUS_MODULE_STREAM_ID", integer,
        doc="Stream id of messages from the services to the consensus module.")
    snapshot_channel: str = setting(DEFAULT_SNAPSHOT_CHANNEL, "AERON_CLUSTER_SNAPSHOT_CHANNEL", text,
        doc="Channel snapshots are recorded from.")
    snapshot_stream_id: int = setting(DEFAULT_SERVICE_SNAPSHOT_STREAM_ID, "AERON_CLUSTER_SNAPSHOT_STREAM_ID", integer,
        doc="Stream id of the service's snapshot.")
    log_fragment_limit: int = setting(DEFAULT_FRAGMENT_LIMIT, "AERON_CLUSTER_LOG_FRAGMENT_LIMIT", integer,
        doc="Most log fragments read in one duty cycle.")
    is_respond_to_clients: bool = setting(True, "AERON_CLUSTER_SERVICE_RESPONDER", boolean,
        doc="The service answers clients on their egress (false: it never offers to sessions).")
    error_buffer_length: int = setting(C.DEFAULT_ERROR_BUFFER_LENGTH, "AERON_CLUSTER_SERVICE_ERROR_BUFFER_LENGTH",
                                       size,
        doc="Length of the distinct error log in the service's mark file.")
    cycle_threshold_ns: int = setting(DEFAULT_CYCLE_THRESHOLD_NS, "AERON_CLUSTER_SERVICE_CYCLE_THRESHOLD", duration,
        doc="A service duty cycle longer than this is counted as exceeded.")
    snapshot_duration_threshold_ns: int = setting(DEFAULT_SNAPSHOT_DURATION_THRESHOLD_NS,
                                                  "AERON_CLUSTER_SERVICE_SNAPSHOT_THRESHOLD", duration,
        doc="A service snapshot taking longer than this is counted as exceeded.")
    standby_snapshot_enabled: bool = setting(False, "AERON_CLUSTER_STANDBY_SNAPSHOT_ENABLED", boolean,
        doc="Take standby snapshots on this node.")
    idle_strategy: str = setting(DEFAULT_IDLE_STRATEGY, "AERON_CLUSTER_IDLE_STRATEGY", text,
        doc="How the cluster's agents wait when they have no work: backoff, sleeping, yield, spin, noop (or an "
            "Agrona class name).")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> "ClusteredServiceContext":
        """Defaults, then environment variables, then explicit ``overrides`` (highest priority)."""
        return from_env(cls, environ, **overrides)

    def conclude(self) -> "ClusteredServiceContext":
        """Validate every setting and derive the rest; raises ``ConfigurationError`` naming the value and the
        limit."""
        _check_service_id("service_id", self.service_id)
        _conclude_directories(self)
        self.mark_file_name = f"{C.SERVICE_MARK_FILE_PREFIX}{self.service_id}{C.MARK_FILE_EXTENSION}"
        _check_channels(self, ("replay_channel", "control_channel", "snapshot_channel"))
        _check_positive(self, ("log_fragment_limit", "cycle_threshold_ns", "snapshot_duration_threshold_ns"))
        if self.cluster_id < 0:
            raise ConfigurationError(f"cluster_id={self.cluster_id} must be >= 0")
        if not self.service_name:
            raise ConfigurationError("service_name must not be empty")
        _check_error_buffer_length("error_buffer_length", self.error_buffer_length)
        _check_idle_strategy("idle_strategy", self.idle_strategy)
        # None: the service is given in code, as Aeron's container takes one when no class name is set.
        self.service_factory = load_supplier(self.service_class_name, "service_class_name", None)
        return self


@dataclass
class AeronClusterContext:
    """The cluster client's settings (Aeron's ``AeronCluster.Context``)."""

    aeron_dir: str | None = setting(None, "AERON_DIR", text,
        doc="Aeron dir of the media driver the client connects to; unset: the driver's default.")
    message_timeout_ns: int = setting(DEFAULT_MESSAGE_TIMEOUT_NS, "AERON_CLUSTER_MESSAGE_TIMEOUT", duration,
        doc="How long the client waits to connect, for a leader, or to send a message before it fails.")
    ingress_endpoints: str = setting("", "AERON_CLUSTER_INGRESS_ENDPOINTS", text,
        doc="The members' ingress endpoints as <member id>=<host>:<port>, separated by commas; empty: the "
            "ingress channel names its endpoint.")
    ingress_channel: str = setting("", "AERON_CLUSTER_INGRESS_CHANNEL", text,
        doc="Channel of the client's messages to the cluster (e.g. aeron:udp?term-length=64k); required.")
    ingress_stream_id: int = setting(DEFAULT_INGRESS_STREAM_ID, "AERON_CLUSTER_INGRESS_STREAM_ID", integer,
        doc="Stream id of the client's messages to the cluster.")
    egress_channel: str = setting("", "AERON_CLUSTER_EGRESS_CHANNEL", text,
        doc="Channel the cluster answers the client on (e.g. aeron:udp?endpoint=localhost:0); required.")
    egress_stream_id: int = setting(DEFAULT_EGRESS_STREAM_ID, "AERON_CLUSTER_EGRESS_STREAM_ID", integer,
        doc="Stream id of the cluster's answers.")
    new_leader_timeout_ns: int = setting(DEFAULT_NEW_LEADER_TIMEOUT_NS, "AERON_CLUSTER_NEW_LEADER_TIMEOUT", duration,
        doc="How long a connected client waits for a new leader after losing its leader before it closes.")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> "AeronClusterContext":
        """Defaults, then environment variables, then explicit ``overrides`` (highest priority)."""
        return from_env(cls, environ, **overrides)

    def conclude(self) -> "AeronClusterContext":
        """Validate every setting; raises ``ConfigurationError`` naming the value and the limit."""
        _check_channels(self, ("ingress_channel", "egress_channel"))
        _check_positive(self, ("message_timeout_ns", "new_leader_timeout_ns"))
        self.ingress_endpoint_map = parse_ingress_endpoints(self.ingress_endpoints) if self.ingress_endpoints else {}
        if self.ingress_endpoint_map and self.ingress_channel.startswith(IPC_CHANNEL):
            raise ConfigurationError(f"ingress_endpoints={self.ingress_endpoints!r} must be empty when "
                                     f"ingress_channel={self.ingress_channel!r} is IPC")
        return self
