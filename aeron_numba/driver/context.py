"""Media driver settings: Aeron's defaults (spec/transport.md §14), the same names as environment
variables, and ``conclude()`` validating everything before a file is touched.

Only this module reads the environment. Durations accept Aeron's suffixes (``10s``, ``500ms``, ``100us``,
plain = ns) and sizes ``k``/``m``/``g`` suffixes, as Aeron's system properties do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import cnc, frame, log_buffer_descriptor as lb, udp_frames
from aeron_numba.layout.counters import DEFAULT_FREE_TO_REUSE_TIMEOUT_MS
from aeron_numba.settings import boolean, duration, from_env, integer, setting, size, text

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
THREADING_MODE_SHARED = "SHARED"  # conductor, sender and receiver on one thread (our default)
THREADING_MODE_SHARED_NETWORK = "SHARED_NETWORK"  # the conductor on one thread, sender and receiver on another
THREADING_MODE_DEDICATED = "DEDICATED"  # a thread each (Aeron's default)
THREADING_MODE_INVOKER = "INVOKER"  # Aeron's embedded driver driven by the application: refused here
AERON_THREADING_MODES = (THREADING_MODE_DEDICATED, THREADING_MODE_SHARED_NETWORK, THREADING_MODE_SHARED,
                         THREADING_MODE_INVOKER)
#: The modes this driver runs (INVOKER needs an embedded driver the application invokes: there is no such API).
SUPPORTED_THREADING_MODES = (THREADING_MODE_SHARED, THREADING_MODE_SHARED_NETWORK, THREADING_MODE_DEDICATED)
#: Which idle strategy setting governs each agent thread of a mode (Aeron's rule, aeron_driver.c): in SHARED mode
#: the *shared* one, not the conductor's.
IDLE_STRATEGY_SETTINGS_BY_MODE = {
    THREADING_MODE_SHARED: (("[conductor,sender,receiver]", "shared_idle_strategy"),),
    THREADING_MODE_SHARED_NETWORK: (("conductor", "conductor_idle_strategy"),
                                    ("[sender,receiver]", "shared_network_idle_strategy")),
    THREADING_MODE_DEDICATED: (("conductor", "conductor_idle_strategy"), ("sender", "sender_idle_strategy"),
                               ("receiver", "receiver_idle_strategy")),
}
IDLE_STRATEGY_SETTINGS = ("conductor_idle_strategy", "sender_idle_strategy", "receiver_idle_strategy",
                          "shared_network_idle_strategy", "shared_idle_strategy")
IDLE_STRATEGY_ENV_VARS = ("AERON_CONDUCTOR_IDLE_STRATEGY", "AERON_SENDER_IDLE_STRATEGY", "AERON_RECEIVER_IDLE_STRATEGY",
                          "AERON_SHAREDNETWORK_IDLE_STRATEGY", "AERON_SHARED_IDLE_STRATEGY")


def idle_strategy_environment(name: str) -> dict[str, str]:
    """Every driver idle strategy variable set to ``name``: every agent thread of a driver waits this way, whatever
    its threading mode (setting only AERON_CONDUCTOR_IDLE_STRATEGY leaves a SHARED driver on the shared default)."""
    return dict.fromkeys(IDLE_STRATEGY_ENV_VARS, name)


@dataclass
class DriverContext:
    """``MediaDriver.Context``: every setting the IPC driver uses, with Aeron's defaults."""

    aeron_dir: str | None = setting(None, "AERON_DIR", text,
        doc="Directory of the driver's files (cnc.dat, log buffers, loss-report.dat); unset: "
            "/dev/shm/aeron-(user name) on Linux, else the temp dir.")
    dir_delete_on_start: bool = setting(False, "AERON_DIR_DELETE_ON_START", boolean,
        doc="Delete the aeron dir at start even if a driver's heartbeat there is still fresh.")
    dir_delete_on_shutdown: bool = setting(False, "AERON_DIR_DELETE_ON_SHUTDOWN", boolean,
        doc="Delete the aeron dir when the driver stops.")
    # §15.2: an untethered subscriber this far behind for this long is dropped, then rests before rejoining.
    untethered_window_limit_timeout_ns: int = setting(5 * NS_PER_S, "AERON_UNTETHERED_WINDOW_LIMIT_TIMEOUT", duration,
        doc="How long an untethered subscriber may stay a window behind before it is dropped.")
    untethered_resting_timeout_ns: int = setting(10 * NS_PER_S, "AERON_UNTETHERED_RESTING_TIMEOUT", duration,
        doc="How long a dropped untethered subscriber rests before it may rejoin.")
    # On: a network publication with spies but no receivers counts as connected (its spies set the pace); a
    # channel's ssc= overrides it (Aeron's aeron.spies.simulate.connection, off by default as there).
    spies_simulate_connection: bool = setting(False, "AERON_SPIES_SIMULATE_CONNECTION", boolean,
        doc="A network publication with spies but no receivers counts as connected (a channel's ssc= overrides "
            "it).")
    # Check usable space before creating a log buffer (tmpfs and sparse files would otherwise fail later).
    perform_storage_checks: bool = setting(True, "AERON_PERFORM_STORAGE_CHECKS", boolean,
        doc="Check for usable space before creating a log buffer, and refuse it when there is none.")
    # Touch every page of a new log buffer when creating it, so the first pass of a stream through its log takes
    # no page allocation faults (Aeron's aeron.pre.touch.mapped.memory; off by default, as there).
    pre_touch_mapped_memory: bool = setting(False, "AERON_PRE_TOUCH_MAPPED_MEMORY", boolean,
        doc="Touch every page of a new log buffer so its first pass takes no page faults.")
    client_liveness_timeout_ns: int = setting(10 * NS_PER_S, "AERON_CLIENT_LIVENESS_TIMEOUT", duration,
        doc="A client that sends no keepalive for this long is considered dead and its resources are released.")
    publication_unblock_timeout_ns: int = setting(15 * NS_PER_S, "AERON_PUBLICATION_UNBLOCK_TIMEOUT", duration,
        doc="A publication whose claimed space is not committed for this long is unblocked (padding written over "
            "it).")
    publication_linger_timeout_ns: int = setting(5 * NS_PER_S, "AERON_PUBLICATION_LINGER_TIMEOUT", duration,
        doc="How long a closed publication's log lingers so subscribers can drain it.")
    timer_interval_ns: int = setting(1 * NS_PER_S, "AERON_TIMER_INTERVAL", duration,
        doc="Interval of the conductor's timer checks (liveness, lingering resources, heartbeat).")
    driver_timeout_ms: int = setting(10_000, "AERON_DRIVER_TIMEOUT", integer,
        doc="Milliseconds without a driver heartbeat after which the driver counts as dead (clients; a new "
            "driver's start).")
    counter_free_to_reuse_timeout_ns: int = setting(
        DEFAULT_FREE_TO_REUSE_TIMEOUT_MS * NS_PER_MS, "AERON_COUNTERS_FREE_TO_REUSE_TIMEOUT", duration,
        doc="How long a freed counter slot waits before it is reused.")
    ipc_term_buffer_length: int = setting(64 * 1024 * 1024, "AERON_IPC_TERM_BUFFER_LENGTH", size,
        doc="Term length of aeron:ipc publications (a power of two, 64 KiB to 1 GiB).")
    ipc_mtu_length: int = setting(frame.DEFAULT_MTU_LENGTH, "AERON_IPC_MTU_LENGTH", size,
        doc="Largest frame of aeron:ipc publications; longer messages are fragmented.")
    ipc_publication_term_window_length: int = setting(0, "AERON_IPC_PUBLICATION_TERM_WINDOW_LENGTH", size,
        doc="How far an aeron:ipc publisher may run ahead of its slowest subscriber; 0: half a term.")
    # UDP (spec/transport.md §14, §16).
    term_buffer_length: int = setting(16 * 1024 * 1024, "AERON_TERM_BUFFER_LENGTH", size,
        doc="Term length of aeron:udp publications (a power of two, 64 KiB to 1 GiB).")
    mtu_length: int = setting(frame.DEFAULT_MTU_LENGTH, "AERON_MTU_LENGTH", size,
        doc="Largest datagram of aeron:udp publications; longer messages are fragmented.")
    publication_term_window_length: int = setting(0, "AERON_PUBLICATION_TERM_WINDOW_LENGTH", size,
        doc="How far an aeron:udp publisher may run ahead of its slowest receiver; 0: half a term.")
    initial_window_length: int = setting(128 * 1024, "AERON_RCV_INITIAL_WINDOW_LENGTH", size,
        doc="Receiver window a subscription advertises in its status messages.")
    socket_rcvbuf_length: int = setting(128 * 1024, "AERON_SOCKET_SO_RCVBUF", size,
        doc="SO_RCVBUF of UDP sockets; 0: the operating system's default.")
    socket_sndbuf_length: int = setting(0, "AERON_SOCKET_SO_SNDBUF", size,
        doc="SO_SNDBUF of UDP sockets; 0: the operating system's default.")
    image_liveness_timeout_ns: int = setting(10 * NS_PER_S, "AERON_IMAGE_LIVENESS_TIMEOUT", duration,
        doc="An image that receives nothing (not even heartbeats) for this long is removed.")
    publication_connection_timeout_ns: int = setting(5 * NS_PER_S, "AERON_PUBLICATION_CONNECTION_TIMEOUT", duration,
        doc="A network publication with no status message for this long counts as not connected.")
    publication_heartbeat_timeout_ns: int = setting(100 * NS_PER_MS, "AERON_PUBLICATION_HEARTBEAT_TIMEOUT", duration,
        doc="Interval of heartbeats a network publication sends while it has no data to send.")
    publication_setup_timeout_ns: int = setting(100 * NS_PER_MS, "AERON_PUBLICATION_SETUP_TIMEOUT", duration,
        doc="Interval of SETUP frames a network publication sends until a receiver answers.")
    status_message_timeout_ns: int = setting(200 * NS_PER_MS, "AERON_RCV_STATUS_MESSAGE_TIMEOUT", duration,
        doc="Longest interval between a receiver's status messages.")
    nak_unicast_delay_ns: int = setting(100_000, "AERON_NAK_UNICAST_DELAY", duration,
        doc="Delay before a receiver sends a NAK for a gap on a unicast stream.")
    nak_unicast_retry_delay_ratio: int = setting(100, "AERON_NAK_UNICAST_RETRY_DELAY_RATIO", integer,
        doc="A repeated NAK for the same gap waits this many times the NAK delay.")
    # Group semantics (multicast): each NAK waits a random backoff below the max, shaped by the group size.
    nak_multicast_max_backoff_ns: int = setting(udp_frames.NAK_MULTICAST_MAX_BACKOFF_NS,
                                                 "AERON_NAK_MULTICAST_MAX_BACKOFF", duration,
        doc="Longest random backoff before a NAK on a multicast stream.")
    nak_multicast_group_size: int = setting(udp_frames.NAK_MULTICAST_GROUP_SIZE, "AERON_NAK_MULTICAST_GROUP_SIZE",
                                             integer,
        doc="Expected receivers of a multicast stream, shaping the NAK backoff.")
    retransmit_unicast_delay_ns: int = setting(0, "AERON_RETRANSMIT_UNICAST_DELAY", duration,
        doc="Delay before a sender retransmits after a NAK on a unicast stream.")
    retransmit_unicast_linger_ns: int = setting(10 * NS_PER_MS, "AERON_RETRANSMIT_UNICAST_LINGER", duration,
        doc="How long a retransmitted range is not resent for another NAK.")
    max_resend: int = setting(16, "AERON_MAX_RESEND", integer,
        doc="Most retransmissions a sender keeps in flight per publication.")
    send_to_status_poll_ratio: int = setting(6, "AERON_SEND_TO_STATUS_POLL_RATIO", integer,
        doc="Sends per poll of the control (status message, NAK) sockets.")
    # Our test hook, like Aeron's debug channel endpoints: map loss-control.dat so tests can drop datagrams.
    loss_control_enabled: bool = setting(False, "AERON_DEBUG_LOSS_CONTROL", boolean,
        doc="aeron-numba test hook: map loss-control.dat so tests and chaos runs can drop UDP datagrams.")
    file_page_size: int = setting(lb.DEFAULT_FILE_PAGE_SIZE, "AERON_FILE_PAGE_SIZE", size,
        doc="Page size log buffer files are aligned to.")
    conductor_buffer_length: int = setting(cnc.DEFAULT_TO_DRIVER_BUFFER_LENGTH, "AERON_CONDUCTOR_BUFFER_LENGTH", size,
        doc="Length of the to-driver ring buffer in cnc.dat (commands from clients).")
    clients_buffer_length: int = setting(cnc.DEFAULT_TO_CLIENTS_BUFFER_LENGTH, "AERON_CLIENTS_BUFFER_LENGTH", size,
        doc="Length of the to-clients broadcast buffer in cnc.dat (responses and events).")
    counters_values_buffer_length: int = setting(
        cnc.DEFAULT_COUNTERS_VALUES_BUFFER_LENGTH, "AERON_COUNTERS_BUFFER_LENGTH", size,
        doc="Length of the counters values buffer in cnc.dat.")
    error_buffer_length: int = setting(cnc.DEFAULT_ERROR_LOG_BUFFER_LENGTH, "AERON_ERROR_BUFFER_LENGTH", size,
        doc="Length of the distinct error log in cnc.dat.")
    loss_report_buffer_length: int = setting(1024 * 1024, "AERON_LOSS_REPORT_BUFFER_LENGTH", size,
        doc="Length of loss-report.dat.")
    publication_reserved_session_id_low: int = setting(-1, "AERON_PUBLICATION_RESERVED_SESSION_ID_LOW", integer,
        doc="Lowest session id of the range the driver never assigns itself.")
    publication_reserved_session_id_high: int = setting(1000, "AERON_PUBLICATION_RESERVED_SESSION_ID_HIGH", integer,
        doc="Highest session id of the range the driver never assigns itself.")
    # Aeron's five idle strategy settings, each "backoff" by default; which ones a driver uses depends on its
    # threading mode (IDLE_STRATEGY_SETTINGS_BY_MODE): SHARED mode uses only the shared one, as aeronmd does.
    conductor_idle_strategy: str = setting("backoff", "AERON_CONDUCTOR_IDLE_STRATEGY", text,
        doc="How the conductor waits when it has no work, in DEDICATED and SHARED_NETWORK modes: backoff, "
            "sleeping, yield, spin, noop (or an Agrona class name). SHARED mode uses AERON_SHARED_IDLE_STRATEGY.")
    sender_idle_strategy: str = setting("backoff", "AERON_SENDER_IDLE_STRATEGY", text,
        doc="How the sender waits when it has no work, in DEDICATED mode (names as for the conductor).")
    receiver_idle_strategy: str = setting("backoff", "AERON_RECEIVER_IDLE_STRATEGY", text,
        doc="How the receiver waits when it has no work, in DEDICATED mode (names as for the conductor).")
    shared_network_idle_strategy: str = setting("backoff", "AERON_SHAREDNETWORK_IDLE_STRATEGY", text,
        doc="How the thread of the sender and receiver waits in SHARED_NETWORK mode (names as for the conductor).")
    shared_idle_strategy: str = setting("backoff", "AERON_SHARED_IDLE_STRATEGY", text,
        doc="How the one driver thread (conductor, sender, receiver) waits in SHARED mode (names as for the "
            "conductor).")
    # Aeron's *_IDLE_STRATEGY_INIT_ARGS: "sleep-ns" takes a duration, "backoff" spins-yields-minPark-maxPark.
    conductor_idle_strategy_init_args: str | None = setting(None, "AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS", text,
        doc="Arguments of the conductor's idle strategy: a duration for sleep-ns, spins-yields-minPark-maxPark for "
            "backoff.")
    sender_idle_strategy_init_args: str | None = setting(None, "AERON_SENDER_IDLE_STRATEGY_INIT_ARGS", text,
        doc="Arguments of the sender's idle strategy (as for the conductor's).")
    receiver_idle_strategy_init_args: str | None = setting(None, "AERON_RECEIVER_IDLE_STRATEGY_INIT_ARGS", text,
        doc="Arguments of the receiver's idle strategy (as for the conductor's).")
    shared_network_idle_strategy_init_args: str | None = setting(
        None, "AERON_SHAREDNETWORK_IDLE_STRATEGY_INIT_ARGS", text,
        doc="Arguments of the SHARED_NETWORK sender and receiver thread's idle strategy (as for the conductor's).")
    shared_idle_strategy_init_args: str | None = setting(None, "AERON_SHARED_IDLE_STRATEGY_INIT_ARGS", text,
        doc="Arguments of the SHARED mode thread's idle strategy (as for the conductor's).")
    conductor_cycle_threshold_ns: int = setting(1 * NS_PER_S, "AERON_DRIVER_CONDUCTOR_CYCLE_THRESHOLD", duration,
        doc="A conductor duty cycle longer than this is counted as exceeded.")
    sender_cycle_threshold_ns: int = setting(1 * NS_PER_S, "AERON_DRIVER_SENDER_CYCLE_THRESHOLD", duration,
        doc="A sender duty cycle longer than this is counted as exceeded.")
    receiver_cycle_threshold_ns: int = setting(1 * NS_PER_S, "AERON_DRIVER_RECEIVER_CYCLE_THRESHOLD", duration,
        doc="A receiver duty cycle longer than this is counted as exceeded.")
    # Shown in the "Resolution changes" counter's label (": driverName=<name>"), empty by default as in aeronmd.
    resolver_name: str = setting("", "AERON_DRIVER_RESOLVER_NAME", text,
        doc="Name shown in the Resolution changes counter's label.")
    allow_terminate_driver: bool = setting(False, "AERON_DRIVER_TERMINATION_VALIDATOR_ALLOW", boolean,
        doc="Allow a client's TERMINATE_DRIVER command to stop the driver.")
    # Aeron's default is DEDICATED (a thread per agent). Ours is SHARED: under the GIL the agents' Python duty cycles
    # cannot run in parallel, so more threads cost idle CPU and handoffs until the duty cycles release the GIL in
    # compiled code (DESIGN.md "Processes and agents", docs/driver-threading.md).
    threading_mode: str = setting(THREADING_MODE_SHARED, "AERON_THREADING_MODE", text,
        doc="How the driver's agents share threads: SHARED (conductor, sender and receiver on one thread), "
            "SHARED_NETWORK (the conductor on one, sender and receiver on another) or DEDICATED (a thread each). "
            "Aeron's INVOKER is refused: there is no embedded driver API to invoke.")
    driver_name: str = setting("", "AERON_DRIVER_NAME", text,
        doc="Name of this driver.")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> "DriverContext":
        """Defaults, then environment variables, then explicit ``overrides`` (highest priority)."""
        return from_env(cls, environ, **overrides)

    def conclude(self) -> "DriverContext":
        """Resolve the aeron dir and validate every setting; raises ``ConfigurationError`` naming value and limit."""
        from aeron_numba.aeron_dir import resolve_aeron_dir

        self.aeron_dir = str(resolve_aeron_dir(self.aeron_dir))
        lb.check_term_length(self.ipc_term_buffer_length)
        lb.check_term_length(self.term_buffer_length)
        frame.check_mtu_length(self.mtu_length)
        lb.check_page_size(self.file_page_size)
        frame.check_mtu_length(self.ipc_mtu_length)
        cnc.compute_sections(
            self.conductor_buffer_length, self.clients_buffer_length, self.counters_values_buffer_length,
            self.error_buffer_length,
        )
        positive = ("client_liveness_timeout_ns", "publication_unblock_timeout_ns", "timer_interval_ns",
                    "driver_timeout_ms", "loss_report_buffer_length", "untethered_window_limit_timeout_ns",
                    "untethered_resting_timeout_ns", "initial_window_length", "image_liveness_timeout_ns",
                    "publication_connection_timeout_ns", "publication_heartbeat_timeout_ns",
                    "publication_setup_timeout_ns", "status_message_timeout_ns", "nak_unicast_retry_delay_ratio",
                    "max_resend", "send_to_status_poll_ratio", "nak_multicast_max_backoff_ns",
                    "nak_multicast_group_size", "conductor_cycle_threshold_ns", "sender_cycle_threshold_ns",
                    "receiver_cycle_threshold_ns")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name}={getattr(self, name)} must be > 0")
        for name in ("publication_linger_timeout_ns", "counter_free_to_reuse_timeout_ns",
                     "ipc_publication_term_window_length", "publication_term_window_length", "socket_rcvbuf_length",
                     "socket_sndbuf_length", "nak_unicast_delay_ns", "retransmit_unicast_delay_ns",
                     "retransmit_unicast_linger_ns"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name}={getattr(self, name)} must be >= 0")
        if self.ipc_publication_term_window_length > self.ipc_term_buffer_length:
            raise ConfigurationError(
                f"ipc_publication_term_window_length={self.ipc_publication_term_window_length}"
                f" > ipc_term_buffer_length={self.ipc_term_buffer_length}"
            )
        if self.timer_interval_ns >= self.driver_timeout_ms * 1_000_000:
            # The to-driver heartbeat is written on the timer: a timer this slow lets clients think the driver dead.
            raise ConfigurationError(
                f"timer_interval_ns={self.timer_interval_ns} must be < driver_timeout_ms={self.driver_timeout_ms}"
                f" ({self.driver_timeout_ms * 1_000_000} ns)")
        if self.publication_unblock_timeout_ns <= self.client_liveness_timeout_ns:
            raise ConfigurationError(
                f"publication_unblock_timeout_ns={self.publication_unblock_timeout_ns} must be >"
                f" client_liveness_timeout_ns={self.client_liveness_timeout_ns}"
            )
        if self.publication_reserved_session_id_low > self.publication_reserved_session_id_high:
            raise ConfigurationError(
                f"publication_reserved_session_id_low={self.publication_reserved_session_id_low} >"
                f" publication_reserved_session_id_high={self.publication_reserved_session_id_high}"
            )
        mode = self.threading_mode.strip().upper() if isinstance(self.threading_mode, str) else self.threading_mode
        if mode not in AERON_THREADING_MODES:
            raise ConfigurationError(f"threading_mode={self.threading_mode!r} (AERON_THREADING_MODE) is not one of "
                                     f"{', '.join(SUPPORTED_THREADING_MODES)}")
        if mode == THREADING_MODE_INVOKER:
            raise ConfigurationError(
                f"threading_mode={self.threading_mode!r} (AERON_THREADING_MODE) is not supported: INVOKER runs an "
                f"embedded driver from the application's own loop, and aeron-numba has no embedded driver invoker "
                f"API (its driver is a process); use one of {', '.join(SUPPORTED_THREADING_MODES)}")
        self.threading_mode = mode
        for name in IDLE_STRATEGY_SETTINGS:
            try:
                self.idle_strategy(name)
            except (ConfigurationError, ValueError) as exc:
                env = next(f.metadata["env"] for f in fields(self) if f.name == name)
                init_args = getattr(self, f"{name}_init_args")
                where = env if init_args is None else f"{env}, {env}_INIT_ARGS={init_args!r}"
                raise ConfigurationError(f"{name} ({where}): {exc}") from None
        return self

    @property
    def cnc_path(self) -> Path:
        """``<aeron_dir>/cnc.dat``."""
        return Path(self.aeron_dir) / cnc.CNC_FILE

    def idle_strategy(self, name: str):
        """A new idle strategy for setting ``name`` (one of ``IDLE_STRATEGY_SETTINGS``) with its init args."""
        from aeron_numba.agent import idle_strategy_from_name

        return idle_strategy_from_name(getattr(self, name), getattr(self, f"{name}_init_args"))

    def agent_idle_strategies(self) -> tuple[tuple[str, str], ...]:
        """(agent thread, idle strategy name) for each thread of this context's threading mode, as Aeron picks."""
        mode = self.threading_mode.strip().upper()
        if mode not in IDLE_STRATEGY_SETTINGS_BY_MODE:
            raise ConfigurationError(f"threading_mode={self.threading_mode!r} (AERON_THREADING_MODE) is not one of "
                                     f"{', '.join(SUPPORTED_THREADING_MODES)}")
        return tuple((agents, getattr(self, name)) for agents, name in IDLE_STRATEGY_SETTINGS_BY_MODE[mode])

    def environment(self) -> dict[str, str]:
        """These settings as environment variables (for launching a driver process with the same context)."""
        env = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("env") and value is not None:
                env[f.metadata["env"]] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return env
