"""Archive settings: Aeron's defaults (spec/archive.md §7) under Aeron's environment variable names, validated by
``conclude()`` before a file is touched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aeron_numba.archive.authentication import AllowAllAuthorisationService, NullAuthenticator, load_supplier
from aeron_numba.codecs.channel_uri import ChannelUri
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import archive as A
from aeron_numba.layout.checksum import checksum_algorithm
from aeron_numba.settings import boolean, duration, from_env, integer, setting, size, text


def check_recording_events_channel(channel: str) -> None:
    """Raise ``ConfigurationError`` unless recording events can be published on ``channel`` through our driver."""
    use = "use aeron:ipc, or a unicast aeron:udp?endpoint=host:port that the listeners subscribe to"
    if not channel:
        raise ConfigurationError(f"recording_events_channel must be set when recording_events_enabled is true: {use}")
    uri = ChannelUri.parse(channel)  # InvalidChannelError (a ConfigurationError) names what is wrong
    if uri.get("control-mode") == "dynamic":
        # Aeron's suggested channel (A.DEFAULT_RECORDING_EVENTS_CHANNEL) is dynamic MDC; this media driver's
        # subscriptions do not elicit a SETUP through the control address, so no listener would ever connect.
        raise ConfigurationError(f"recording_events_channel={channel!r}: control-mode=dynamic (multi-destination-"
                                 f"cast) subscriptions are not served by the aeron-numba media driver; {use}")


def check_replication_channel(channel: str) -> None:
    """Raise ``ConfigurationError`` unless this archive can record replays from another archive on ``channel``."""
    uri = ChannelUri.parse(channel)  # InvalidChannelError (a ConfigurationError) names what is wrong
    if uri.get("control-mode") is not None:
        # Aeron's response channels (control-mode=response, replay tokens) and multi-destination subscriptions
        # are not served by this media driver.
        raise ConfigurationError(f"replication_channel={channel!r}: control-mode={uri.get('control-mode')} is not "
                                 f"supported by the aeron-numba archive; use aeron:udp?endpoint=host:port (port 0: "
                                 f"any free port)")


def derive_archive_client_response_channel(control_channel: str) -> str:
    """Aeron's derivation of the archive's own client response channel (replication): the control channel's
    host with any port; empty when there is no remote control channel to take it from."""
    if not control_channel:
        return ""
    endpoint = ChannelUri.parse(control_channel).get("endpoint")
    if endpoint is None or ":" not in endpoint:
        raise ConfigurationError(f"cannot derive archive_client_control_response_channel: control_channel="
                                 f"{control_channel!r} has no endpoint in the <host>:<port> format; set "
                                 f"AERON_ARCHIVE_CONTROL_RESPONSE_CHANNEL")
    return f"aeron:udp?endpoint={endpoint.rsplit(':', 1)[0]}:0"


@dataclass
class ArchiveContext:
    archive_dir: str = setting(A.DEFAULT_ARCHIVE_DIR, "AERON_ARCHIVE_DIR", text,
        doc="Directory of the catalog, mark file and segment files.")
    aeron_dir: str | None = setting(None, "AERON_DIR", text,
        doc="Aeron dir of the media driver the archive connects to; unset: the driver's default.")
    archive_id: int = setting(A.NULL_VALUE, "AERON_ARCHIVE_ID", integer,
        doc="Id of this archive; unset (-1): the archive's Aeron client id.")
    control_channel: str = setting("", "AERON_ARCHIVE_CONTROL_CHANNEL", text,
        doc="Channel of the remote control requests (e.g. aeron:udp?endpoint=host:8010); empty: local (IPC) "
            "control only.")
    control_stream_id: int = setting(A.DEFAULT_CONTROL_STREAM_ID, "AERON_ARCHIVE_CONTROL_STREAM_ID", integer,
        doc="Stream id of the remote control requests.")
    local_control_channel: str = setting(A.DEFAULT_LOCAL_CONTROL_CHANNEL, "AERON_ARCHIVE_LOCAL_CONTROL_CHANNEL", text,
        doc="Channel of control requests from clients on the same machine.")
    local_control_stream_id: int = setting(A.DEFAULT_LOCAL_CONTROL_STREAM_ID, "AERON_ARCHIVE_LOCAL_CONTROL_STREAM_ID",
                                           integer,
        doc="Stream id of the local control requests.")
    segment_file_length: int = setting(A.DEFAULT_SEGMENT_FILE_LENGTH, "AERON_ARCHIVE_SEGMENT_FILE_LENGTH", size,
        doc="Length of each segment file of a recording (a power of two, a multiple of the term length).")
    file_io_max_length: int = setting(A.DEFAULT_FILE_IO_MAX_LENGTH, "AERON_ARCHIVE_FILE_IO_MAX_LENGTH", size,
        doc="Largest single write or read of a segment file (4096 to the segment file length).")
    catalog_capacity: int = setting(A.DEFAULT_CATALOG_CAPACITY, "AERON_ARCHIVE_CATALOG_CAPACITY", size,
        doc="Length of archive.catalog when it is created.")
    max_concurrent_recordings: int = setting(A.DEFAULT_MAX_CONCURRENT_RECORDINGS,
                                             "AERON_ARCHIVE_MAX_CONCURRENT_RECORDINGS", integer,
        doc="Most recordings running at once; more are refused.")
    max_concurrent_replays: int = setting(A.DEFAULT_MAX_CONCURRENT_REPLAYS, "AERON_ARCHIVE_MAX_CONCURRENT_REPLAYS",
                                          integer,
        doc="Most replays running at once; more are refused.")
    connect_timeout_ns: int = setting(A.DEFAULT_CONNECT_TIMEOUT_NS, "AERON_ARCHIVE_CONNECT_TIMEOUT", duration,
        doc="How long a control session waits for its response publication to connect.")
    session_liveness_check_interval_ns: int = setting(A.DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_NS,
                                                      "AERON_ARCHIVE_SESSION_LIVENESS_CHECK_INTERVAL", duration,
        doc="Interval of checks that control sessions' clients are still alive.")
    record_checksum: str = setting("", "AERON_ARCHIVE_RECORD_CHECKSUM", text,
        doc="Checksum written into recorded frames (CRC-32, CRC-32C or Aeron's class names); empty: none.")
    replay_checksum: str = setting("", "AERON_ARCHIVE_REPLAY_CHECKSUM", text,
        doc="Checksum verified on replayed frames; empty: none.")
    error_buffer_length: int = setting(A.DEFAULT_ERROR_BUFFER_LENGTH, "AERON_ARCHIVE_ERROR_BUFFER_LENGTH", size,
        doc="Length of the distinct error log in the archive's mark file.")
    #: A recording is refused (STORAGE_SPACE) when the archive dir's file system has less free space than this;
    #: 0 means one segment file length (Aeron's default).
    low_storage_space_threshold: int = setting(0, "AERON_ARCHIVE_LOW_STORAGE_SPACE_THRESHOLD", size,
        doc="A recording is refused when the archive dir's file system has less free space; 0: one segment file "
            "length.")
    idle_strategy: str = setting("backoff", "AERON_ARCHIVE_IDLE_STRATEGY", text,
        doc="How the archive waits when it has no work: backoff, sleeping, yield, spin, noop (or an Agrona "
            "class name).")
    #: A conductor duty cycle longer than this counts in ``archive-conductor work cycle time exceeded count``.
    conductor_cycle_threshold_ns: int = setting(A.DEFAULT_CYCLE_THRESHOLD_NS, "AERON_ARCHIVE_CONDUCTOR_CYCLE_THRESHOLD",
                                                duration,
        doc="A conductor duty cycle longer than this is counted as exceeded.")
    #: ``"package.module:factory"`` of the control sessions' Authenticator / AuthorisationService
    #: (``authentication.py``); empty: authenticate everyone, allow everything (Aeron's defaults).
    authenticator_supplier: str = setting("", "AERON_AUTHENTICATOR_SUPPLIER", text,
        doc="package.module:factory of the control sessions' Authenticator; empty: everyone is authenticated.")
    authorisation_service_supplier: str = setting("", "AERON_ARCHIVE_AUTHORISATION_SERVICE_SUPPLIER", text,
        doc="package.module:factory of the AuthorisationService; empty: everything is allowed.")
    #: RecordingStarted / RecordingProgress / RecordingStopped published on an exclusive publication of this
    #: channel and stream (Aeron's recording events). Off by default; the channel has no default in the
    #: archive (Aeron 1.48's Archive.Context leaves it unset: it must be given when enabled).
    recording_events_enabled: bool = setting(False, "AERON_ARCHIVE_RECORDING_EVENTS_ENABLED", boolean,
        doc="Publish RecordingStarted / Progress / Stopped events.")
    recording_events_channel: str = setting("", "AERON_ARCHIVE_RECORDING_EVENTS_CHANNEL", text,
        doc="Channel of the recording events (required when they are enabled).")
    recording_events_stream_id: int = setting(A.DEFAULT_RECORDING_EVENTS_STREAM_ID,
                                              "AERON_ARCHIVE_RECORDING_EVENTS_STREAM_ID", integer,
        doc="Stream id of the recording events.")
    #: The channel replays from a source archive come in on (Aeron's replicationChannel, which has no default: a
    #: replication request that names none is refused when this is not set either).
    replication_channel: str = setting("", "AERON_ARCHIVE_REPLICATION_CHANNEL", text,
        doc="Channel replays from a source archive arrive on when replicating; empty: a request must name one.")
    #: The response channel of this archive's control sessions on a source archive (replication); empty: derived
    #: from control_channel as Aeron derives it (its host, port 0).
    archive_client_control_response_channel: str = setting("", "AERON_ARCHIVE_CONTROL_RESPONSE_CHANNEL", text,
        doc="Response channel of this archive's control sessions on a source archive; empty: derived from the "
            "control channel.")
    #: How long a replication waits for each answer of the source archive (the archive client's message timeout).
    archive_client_message_timeout_ns: int = setting(A.DEFAULT_MESSAGE_TIMEOUT_NS, "AERON_ARCHIVE_MESSAGE_TIMEOUT",
                                                     duration,
        doc="How long a replication waits for each answer of the source archive.")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> "ArchiveContext":
        """Defaults, then environment variables, then explicit ``overrides`` (highest priority)."""
        return from_env(cls, environ, **overrides)

    def conclude(self) -> "ArchiveContext":
        """Validate every setting; raises ``ConfigurationError`` naming the value and the limit."""
        from aeron_numba.agent import idle_strategy_from_name

        self.archive_dir = str(Path(self.archive_dir).resolve())
        try:
            A.check_segment_file_length(self.segment_file_length)
            A.check_catalog_capacity(self.catalog_capacity)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        if not 4096 <= self.file_io_max_length <= self.segment_file_length:
            raise ConfigurationError(f"file_io_max_length={self.file_io_max_length} must be in "
                                     f"[4096, segment_file_length={self.segment_file_length}]")
        for name in ("max_concurrent_recordings", "max_concurrent_replays", "connect_timeout_ns",
                     "session_liveness_check_interval_ns", "error_buffer_length", "conductor_cycle_threshold_ns",
                     "archive_client_message_timeout_ns"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name}={getattr(self, name)} must be > 0")
        self.record_checksum_algorithm = checksum_algorithm(self.record_checksum)
        self.replay_checksum_algorithm = checksum_algorithm(self.replay_checksum)
        if self.low_storage_space_threshold < 0:
            raise ConfigurationError(f"low_storage_space_threshold={self.low_storage_space_threshold} must be >= 0")
        if self.low_storage_space_threshold == 0:
            self.low_storage_space_threshold = self.segment_file_length
        if not self.local_control_channel:
            raise ConfigurationError("local_control_channel must not be empty")
        idle_strategy_from_name(self.idle_strategy)
        if self.recording_events_enabled:
            check_recording_events_channel(self.recording_events_channel)
        if self.replication_channel:
            check_replication_channel(self.replication_channel)
        if not self.archive_client_control_response_channel:
            self.archive_client_control_response_channel = derive_archive_client_response_channel(self.control_channel)
        self.authenticator_factory = load_supplier(self.authenticator_supplier, "authenticator_supplier",
                                                   NullAuthenticator)
        self.authorisation_service_factory = load_supplier(
            self.authorisation_service_supplier, "authorisation_service_supplier", AllowAllAuthorisationService)
        return self
