"""``AeronArchive``: an archive's control protocol from a client (spec/archive.md §6), on a connected ``Aeron``.

Each call sends one SBE request through the ``ArchiveProxy`` (``codecs/archive_proxies.py``) on the control
publication and waits (up to the message timeout) for the response with its correlation id, which the
``ControlResponsePoller`` keeps; an ERROR response raises ``ArchiveError`` with the archive's error code and
message. Recording signals that arrive meanwhile are kept for ``poll_for_recording_signals``. Not thread-safe:
one thread uses an ``AeronArchive``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from aeron_numba.archive.archive_error import ArchiveError, error_text
from aeron_numba.archive.async_connect import ArchiveConnection, AsyncConnect
from aeron_numba.archive.authentication import CredentialsSupplier, NullCredentialsSupplier
from aeron_numba.archive.control_response_poller import RecordingSignal
from aeron_numba.archive.recording_events_adapter import RecordingEventsAdapter
from aeron_numba.codecs.sbe import MalformedMessageError
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

__all__ = ["AeronArchive", "AeronArchiveContext", "ArchiveError", "RecordingEventsAdapter", "RecordingSignal"]


@dataclass
class AeronArchiveContext:
    """Where an ``AeronArchive`` sends its requests and listens for answers, with Aeron's defaults (the local
    control channel and streams) and the message timeout.
    """

    control_request_channel: str = A.DEFAULT_LOCAL_CONTROL_CHANNEL
    control_request_stream_id: int = A.DEFAULT_LOCAL_CONTROL_STREAM_ID
    control_response_channel: str = A.DEFAULT_LOCAL_CONTROL_CHANNEL
    control_response_stream_id: int = A.DEFAULT_RESPONSE_STREAM_ID
    message_timeout_ns: int = A.DEFAULT_MESSAGE_TIMEOUT_NS
    #: Credentials sent with the connect (AuthConnectRequest) and the answers to the archive's challenges.
    credentials_supplier: CredentialsSupplier = field(default_factory=NullCredentialsSupplier)
    #: What a wait for the archive runs instead of sleeping (an object with ``invoke()``): the agents of an archive
    #: and a driver that share this client's thread (``ClusteredMediaDriver``), which answer only when invoked.
    agent_invoker: object = field(default=None, repr=False)


def _idler(aeron, ctx: AeronArchiveContext, sleep_s: float):
    """One step of a wait for the archive: the client's conductor in invoker mode, then the context's agent invoker
    (the archive and driver of this thread) or, without one, a sleep of ``sleep_s``."""
    conductor = aeron.conductor_agent_invoker
    agents = ctx.agent_invoker
    if agents is None and conductor is None:
        return lambda: time.sleep(sleep_s)
    if agents is None:
        def idle() -> None:
            conductor.invoke()
            time.sleep(sleep_s)
    elif conductor is None:
        idle = agents.invoke
    else:
        def idle() -> None:
            conductor.invoke()
            agents.invoke()
    return idle


def _source_location(source_location) -> int:
    """Aeron's SourceLocation by its name, ``"LOCAL"`` or ``"REMOTE"``."""
    names = A.SOURCE_LOCATIONS
    if isinstance(source_location, str) and source_location in names:
        return names[source_location]
    raise ConfigurationError(f"source_location={source_location!r} must be one of {', '.join(map(repr, names))}")


def _encoded(send_method, fields: dict) -> bool:
    """``send_method(**fields)``, with an argument the request cannot carry (not an int, outside its field's
    type, not a str) refused as a ConfigurationError naming it, as the rest of the API does."""
    try:
        return send_method(**fields)
    except MalformedMessageError as exc:
        raise ConfigurationError(f"{send_method.__name__}: {exc}") from None


class AeronArchive:
    """A client of an archive (Aeron's ``AeronArchive``): record streams, list recordings, replay them, replicate.

    Made by ``AeronArchive.connect(aeron, context)``; each request waits for the archive's answer and raises
    ``ArchiveError`` (with the archive's error code) when it refuses.
    """

    def __init__(self, aeron, ctx: AeronArchiveContext, connection: ArchiveConnection):
        self.aeron = aeron
        self.context = ctx
        self._publication = connection.publication
        self._subscription = connection.subscription
        self._proxy = connection.proxy  # one try per offer: _send retries, with a pause, to its deadline
        self._poller = connection.poller
        self.archive_version = connection.archive_version
        self.archive_id = connection.archive_id
        self._idle = _idler(aeron, ctx, 0.0001)

    @property
    def control_session_id(self) -> int:
        """The id of this client's control session on the archive."""
        return self._poller.control_session_id

    # ------------------------------------------------------------------------------------------ connect
    @classmethod
    def connect(cls, aeron, context: AeronArchiveContext | None = None) -> "AeronArchive":
        """Connect to the archive of ``context`` (Aeron's ``AeronArchive.connect``): the ``AsyncConnect`` steps,
        polled until done, idling while a step waits; ``ArchiveConnectError`` (an ``ArchiveError``) when they
        cannot be done within the message timeout or the archive refuses."""
        ctx = context or AeronArchiveContext()
        async_connect = AsyncConnect(aeron, ctx)
        invoker = aeron.conductor_agent_invoker  # invoker mode: the client's conductor runs only when invoked
        agents = ctx.agent_invoker  # an archive and driver on this thread: they answer only when invoked
        try:
            step = async_connect.step
            while (connection := async_connect.poll()) is None:
                if invoker is not None:
                    invoker.invoke()
                if agents is not None:
                    agents.invoke()
                elif async_connect.step is step:
                    time.sleep(0.001)
                step = async_connect.step
        except BaseException:
            async_connect.close()
            raise
        return cls(aeron, ctx, connection)

    # ------------------------------------------------------------------------------------------ plumbing
    def _send(self, send_method, **fields) -> None:
        """Call an ``ArchiveProxy`` send method until the publication takes the request (or the message timeout)."""
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while not _encoded(send_method, fields):
            result = self._proxy.last_result
            if result not in (BACK_PRESSURED, ADMIN_ACTION, NOT_CONNECTED) or time.monotonic_ns() > deadline:
                raise ArchiveError(f"cannot send {send_method.__name__} to the archive (offer result {result})")
            self._idle()

    def _await(self, correlation_id: int):
        """The ControlResponse to ``correlation_id``; raises ``ArchiveError`` on ERROR or at the timeout."""
        poller = self._poller
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while correlation_id not in poller.responses:
            if poller.poll() == 0:
                if time.monotonic_ns() > deadline:
                    raise ArchiveError(f"no response from the archive to correlation id {correlation_id} within "
                                       f"{self.context.message_timeout_ns / 1e9:.1f}s", correlation_id=correlation_id)
                self._idle()
        response = poller.responses.pop(correlation_id)
        if response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
            raise ArchiveError(error_text(response), response.relevant_id, correlation_id)
        return response

    def _call(self, send_method, **fields) -> object:
        """Send a request of this session (its correlation id a new one) and await its response."""
        correlation_id = self.aeron.next_correlation_id()
        self._send(send_method, control_session_id=self.control_session_id, correlation_id=correlation_id, **fields)
        return self._await(correlation_id)

    def _relevant(self, send_method, **fields) -> int:
        return self._call(send_method, **fields).relevant_id

    def _listing(self, send_method, consumer: Callable | None, count: int, **fields) -> int:
        """Send a list request; deliver each descriptor to ``consumer``. The listing ends after ``count``
        descriptors, or at the archive's terminating response (RECORDING_UNKNOWN / SUBSCRIPTION_UNKNOWN: no
        more); returns how many came."""
        poller = self._poller
        correlation_id = self.aeron.next_correlation_id()
        self._send(send_method, control_session_id=self.control_session_id, correlation_id=correlation_id, **fields)
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while len(poller.descriptors.get(correlation_id, ())) < count and correlation_id not in poller.responses:
            if poller.poll() == 0:
                if time.monotonic_ns() > deadline:
                    raise ArchiveError(f"{send_method.__name__}: the listing did not end within the message "
                                       f"timeout", correlation_id=correlation_id)
                self._idle()
        response = poller.responses.pop(correlation_id, None)
        if response is not None and response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
            raise ArchiveError(error_text(response), response.relevant_id, correlation_id)
        descriptors = poller.descriptors.pop(correlation_id, [])
        if consumer is not None:
            for descriptor in descriptors:
                consumer(descriptor)
        return len(descriptors)

    # ------------------------------------------------------------------------------------------ recording
    def start_recording(self, channel: str, stream_id: int, source_location: str = "LOCAL",
                        auto_stop: bool = False) -> int:
        """Record ``channel``/``stream_id``; returns the recording subscription's registration id."""
        location = _source_location(source_location)
        if auto_stop:
            return self._relevant(self._proxy.start_recording_request2, stream_id=stream_id,
                                  source_location=location, auto_stop=A.BOOLEAN_TRUE, channel=channel)
        return self._relevant(self._proxy.start_recording_request, stream_id=stream_id, source_location=location,
                              channel=channel)

    def extend_recording(self, recording_id: int, channel: str, stream_id: int, source_location: str = "LOCAL",
                         auto_stop: bool = False) -> int:
        """Continue a stopped recording with the image that comes on ``channel``/``stream_id`` (it must join at the
        recording's stop position with its initial term id, term length and MTU); returns the subscription id."""
        location = _source_location(source_location)
        if auto_stop:
            return self._relevant(self._proxy.extend_recording_request2, recording_id=recording_id,
                                  stream_id=stream_id, source_location=location, auto_stop=A.BOOLEAN_TRUE,
                                  channel=channel)
        return self._relevant(self._proxy.extend_recording_request, recording_id=recording_id, stream_id=stream_id,
                              source_location=location, channel=channel)

    def stop_recording(self, channel: str, stream_id: int) -> None:
        """Stop the recording of ``channel`` and ``stream_id`` started by ``start_recording``; ``ArchiveError`` if there
        is none."""
        self._call(self._proxy.stop_recording_request, stream_id=stream_id, channel=channel)

    def add_idle_watch(self, watch) -> None:
        """The control response image's next frame (responses, recording signals, errors): for an agent that
        parks in compiled code (``agent/idle_watch.py``) between its polls of this client."""
        self._subscription.add_idle_watch(watch)

    @property
    def watch_key(self) -> tuple:
        """``Subscription.watch_key`` of what ``add_idle_watch`` names."""
        return self._subscription.watch_key

    def stop_recording_subscription(self, subscription_id: int) -> None:
        """Stop the recording subscription of ``subscription_id`` (what ``start_recording`` returned); ``ArchiveError``
        if there is none."""
        self._call(self._proxy.stop_recording_subscription_request, subscription_id=subscription_id)

    def stop_recording_by_identity(self, recording_id: int) -> bool:
        """True if the recording was active (and is now stopping)."""
        return self._relevant(self._proxy.stop_recording_by_identity_request, recording_id=recording_id) != 0

    def get_recording_position(self, recording_id: int) -> int:
        """The recorded position of an active recording, or -1 (NULL_POSITION) when it is not recording."""
        return self._relevant(self._proxy.recording_position_request, recording_id=recording_id)

    def get_start_position(self, recording_id: int) -> int:
        """The start position of a recording."""
        return self._relevant(self._proxy.start_position_request, recording_id=recording_id)

    def get_stop_position(self, recording_id: int) -> int:
        """The stop position, or -1 while the recording is active."""
        return self._relevant(self._proxy.stop_position_request, recording_id=recording_id)

    def get_max_recorded_position(self, recording_id: int) -> int:
        """The recorded position of an active recording, else its stop position."""
        return self._relevant(self._proxy.max_recorded_position_request, recording_id=recording_id)

    def truncate_recording(self, recording_id: int, position: int) -> int:
        """Cut the recording at ``position``; returns how many segment files the archive deleted."""
        return self._relevant(self._proxy.truncate_recording_request, recording_id=recording_id, position=position)

    def purge_recording(self, recording_id: int) -> int:
        """Delete the recording and its files; returns how many segment files the archive deleted."""
        return self._relevant(self._proxy.purge_recording_request, recording_id=recording_id)

    # ------------------------------------------------------------------------------------------ segments
    def detach_segments(self, recording_id: int, new_start_position: int) -> None:
        """Move the recording's start to ``new_start_position`` (a segment boundary): the segment files before it
        stay on disk, detached, until deleted or attached again."""
        self._call(self._proxy.detach_segments_request, recording_id=recording_id,
                   new_start_position=new_start_position)

    def delete_detached_segments(self, recording_id: int) -> int:
        """Delete the detached segment files; returns how many the archive deletes (a DELETE signal follows)."""
        return self._relevant(self._proxy.delete_detached_segments_request, recording_id=recording_id)

    def purge_segments(self, recording_id: int, new_start_position: int) -> int:
        """Detach up to ``new_start_position`` and delete what was detached; returns the files deleted."""
        return self._relevant(self._proxy.purge_segments_request, recording_id=recording_id,
                              new_start_position=new_start_position)

    def attach_segments(self, recording_id: int) -> int:
        """Attach the detached segment files still there back to the recording; returns how many."""
        return self._relevant(self._proxy.attach_segments_request, recording_id=recording_id)

    def migrate_segments(self, src_recording_id: int, dst_recording_id: int) -> int:
        """Move a stopped recording's segment files to the recording it adjoins; returns the files moved."""
        return self._relevant(self._proxy.migrate_segments_request, src_recording_id=src_recording_id,
                              dst_recording_id=dst_recording_id)

    def request_replay_token(self, recording_id: int) -> int:
        """A token naming this session and recording (for one connect timeout) for a replay request sent on a
        response channel (``control-mode=response``), as Aeron's client asks for one."""
        return self._relevant(self._proxy.replay_token_request, recording_id=recording_id)

    def find_last_matching_recording(self, min_recording_id: int, channel_fragment: str, stream_id: int,
                                     session_id: int = A.NULL_VALUE) -> int:
        """The id of the newest recording from ``min_recording_id`` on whose channel contains the fragment, or -1."""
        return self._relevant(self._proxy.find_last_matching_recording_request, min_recording_id=min_recording_id,
                              session_id=session_id, stream_id=stream_id, channel=channel_fragment)

    def get_archive_id(self) -> int:
        """The archive's id."""
        return self._relevant(self._proxy.archive_id_request)

    # ------------------------------------------------------------------------------------------ listing
    def list_recordings(self, from_recording_id: int, record_count: int, consumer: Callable | None = None) -> int:
        """Deliver up to ``record_count`` recording descriptors from ``from_recording_id`` on to ``consumer``; returns
        how many came."""
        return self._listing(self._proxy.list_recordings_request, consumer, record_count,
                             from_recording_id=from_recording_id, record_count=record_count)

    def list_recordings_for_uri(self, from_recording_id: int, record_count: int, channel_fragment: str,
                                stream_id: int, consumer: Callable | None = None) -> int:
        """As ``list_recordings``, only recordings of ``stream_id`` whose channel contains ``channel_fragment``."""
        return self._listing(self._proxy.list_recordings_for_uri_request, consumer, record_count,
                             from_recording_id=from_recording_id, record_count=record_count, stream_id=stream_id,
                             channel=channel_fragment)

    def list_recording(self, recording_id: int, consumer: Callable | None = None) -> int:
        """1 if the recording exists (its descriptor given to ``consumer``), else 0."""
        return self._listing(self._proxy.list_recording_request, consumer, 1, recording_id=recording_id)

    def list_recording_subscriptions(self, pseudo_index: int, subscription_count: int, channel_fragment: str,
                                     stream_id: int, apply_stream_id: bool,
                                     consumer: Callable | None = None) -> int:
        """Deliver up to ``subscription_count`` active recording subscriptions from ``pseudo_index`` on whose channel
        contains ``channel_fragment`` (and of ``stream_id`` when ``apply_stream_id``); returns how many came."""
        return self._listing(self._proxy.list_recording_subscriptions_request, consumer, subscription_count,
                             pseudo_index=pseudo_index, subscription_count=subscription_count,
                             apply_stream_id=A.BOOLEAN_TRUE if apply_stream_id else 0, stream_id=stream_id,
                             channel=channel_fragment)

    # ------------------------------------------------------------------------------------------- replay
    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int, file_io_max_length: int = 0) -> int:
        """Start a replay (``position`` -1: from the start; ``length`` -1: to the end or following a live
        recording); returns the replay session id (its low 32 bits are the replay image's session id)."""
        return self._relevant(self._proxy.replay_request, recording_id=recording_id, position=position,
                              length=length, replay_stream_id=replay_stream_id, file_io_max_length=file_io_max_length,
                              replay_token=A.NULL_VALUE, replay_channel=replay_channel)

    def start_bounded_replay(self, recording_id: int, position: int, length: int, limit_counter_id: int,
                             replay_channel: str, replay_stream_id: int, file_io_max_length: int = 0) -> int:
        """A replay that never reads past the value of counter ``limit_counter_id``."""
        return self._relevant(self._proxy.bounded_replay_request, recording_id=recording_id, position=position,
                              length=length, limit_counter_id=limit_counter_id, replay_stream_id=replay_stream_id,
                              file_io_max_length=file_io_max_length, replay_token=A.NULL_VALUE,
                              replay_channel=replay_channel)

    def replay(self, recording_id: int, position: int, length: int, replay_channel: str, replay_stream_id: int):
        """Start a replay and return a subscription to it (its channel restricted to the replay's session id)."""
        replay_session_id = self.start_replay(recording_id, position, length, replay_channel, replay_stream_id)
        session_id = replay_session_id & 0xFFFFFFFF
        session_id = session_id - (1 << 32) if session_id >= 1 << 31 else session_id
        separator = "|" if "?" in replay_channel else "?"
        return self.aeron.add_subscription(f"{replay_channel}{separator}session-id={session_id}", replay_stream_id)

    def stop_replay(self, replay_session_id: int) -> None:
        """Stop the replay of ``replay_session_id`` (what ``start_replay`` returned)."""
        self._call(self._proxy.stop_replay_request, replay_session_id=replay_session_id)

    def stop_all_replays(self, recording_id: int = A.NULL_VALUE) -> None:
        """Stop every replay of ``recording_id``, or every replay when it is the null value (-1)."""
        self._call(self._proxy.stop_all_replays_request, recording_id=recording_id)

    # ---------------------------------------------------------------------------------------- replication
    def replicate(self, src_recording_id: int, dst_recording_id: int, src_control_stream_id: int,
                  src_control_channel: str, live_destination: str | None = None, *,
                  stop_position: int = A.NULL_POSITION, replication_channel: str | None = None,
                  file_io_max_length: int = A.NULL_VALUE, replication_session_id: int = A.NULL_VALUE,
                  encoded_credentials: bytes = b"", src_response_channel: str | None = None,
                  channel_tag_id: int = A.NULL_VALUE, subscription_tag_id: int = A.NULL_VALUE) -> int:
        """Have this archive copy recording ``src_recording_id`` of the archive on ``src_control_channel`` /
        ``src_control_stream_id`` (``dst_recording_id`` NULL: into a new recording; else extending that one), to
        ``stop_position`` or the source's end, over ``replication_channel`` (None: the archive's). Returns the
        replication id: the recording signals (REPLICATE, EXTEND, SYNC, STOP, REPLICATE_END) and a later ERROR carry
        it as their correlation id. Sent as ReplicateRequest2, as Aeron's client sends every replicate; the keyword
        arguments are Aeron's ``ReplicationParams`` (``channel_tag_id``/``subscription_tag_id``: see
        ``tagged_replicate``)."""
        return self._replicate(src_recording_id, dst_recording_id, stop_position, channel_tag_id, subscription_tag_id,
                               src_control_stream_id, src_control_channel, live_destination, replication_channel,
                               file_io_max_length, replication_session_id, encoded_credentials, src_response_channel)

    def tagged_replicate(self, src_recording_id: int, dst_recording_id: int, channel_tag_id: int,
                         subscription_tag_id: int, src_control_stream_id: int, src_control_channel: str,
                         live_destination: str | None = None, *, stop_position: int = A.NULL_POSITION) -> int:
        """``replicate`` with the archive's recording subscription tagged
        ``tags=<channel_tag_id>,<subscription_tag_id>`` (a NULL_VALUE one: the replication id), so that a subscription
        on ``aeron:udp?tags=<channel_tag_id>`` in the destination's driver shares its receive endpoint (Aeron's
        ``taggedReplicate``). Returns the replication id."""
        return self._replicate(src_recording_id, dst_recording_id, stop_position, channel_tag_id, subscription_tag_id,
                               src_control_stream_id, src_control_channel, live_destination, None, A.NULL_VALUE,
                               A.NULL_VALUE, b"", None)

    def _replicate(self, src_recording_id, dst_recording_id, stop_position, channel_tag_id, subscription_tag_id,
                   src_control_stream_id, src_control_channel, live_destination, replication_channel,
                   file_io_max_length, replication_session_id, encoded_credentials, src_response_channel) -> int:
        if live_destination and replication_session_id != A.NULL_VALUE:
            raise ValueError("live_destination and replication_session_id can not be specified together")
        return self._relevant(self._proxy.replicate_request2, src_recording_id=src_recording_id,
                              dst_recording_id=dst_recording_id, stop_position=stop_position,
                              channel_tag_id=channel_tag_id, subscription_tag_id=subscription_tag_id,
                              src_control_stream_id=src_control_stream_id, file_io_max_length=file_io_max_length,
                              replication_session_id=replication_session_id, src_control_channel=src_control_channel,
                              live_destination=live_destination or "", replication_channel=replication_channel or "",
                              encoded_credentials=bytes(encoded_credentials),
                              src_response_channel=src_response_channel or "")

    def stop_replication(self, replication_id: int) -> None:
        """Stop a replication; ``ArchiveError`` UNKNOWN_REPLICATION when there is none with that id."""
        self._call(self._proxy.stop_replication_request, replication_id=replication_id)

    def try_stop_replication(self, replication_id: int) -> bool:
        """``stop_replication``, False instead of an error when there is no such replication (any longer)."""
        try:
            self.stop_replication(replication_id)
            return True
        except ArchiveError as exc:
            if exc.error_code == A.ARCHIVE_ERROR_CODES["UNKNOWN_REPLICATION"]:
                return False
            raise

    # -------------------------------------------------------------------------------------------- signals
    def poll_for_recording_signals(self, consumer: Callable[[RecordingSignal], None] | None = None) -> int:
        """Deliver the recording signals received so far (and any now waiting) to ``consumer``."""
        self._poller.poll()
        count = 0
        signals = self._poller.signals
        while signals:
            signal = signals.popleft()
            if consumer is not None:
                consumer(signal)
            count += 1
        return count

    def poll_for_error_response(self) -> str | None:
        """An ERROR the archive sent that no call was waiting for (an extension refused when its image came, a
        replay that failed after it started), as its message; None if there is none."""
        self._poller.poll()
        responses = self._poller.responses
        for correlation_id, response in list(responses.items()):
            if response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
                del responses[correlation_id]
                return error_text(response)
            if correlation_id == -1:
                del responses[correlation_id]  # the archive's liveness probe
        return None

    # -------------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Tell the archive the session is over (one try: a gone archive has nobody to tell) and close."""
        if self.control_session_id != A.NULL_VALUE and self._publication.is_connected:
            self._proxy.close_session_request(self.control_session_id)
        self._close_resources()

    def _close_resources(self) -> None:
        self._publication.close()
        self._subscription.close()

    def __enter__(self) -> "AeronArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
