"""``AeronArchive``: an archive's control protocol from a client (spec/archive.md §6), on a connected ``Aeron``.

Each call sends one SBE request on the control publication and waits (up to the message timeout) for the
response with its correlation id on the response subscription; an ERROR response raises ``ArchiveError``
with the archive's error code and message. Recording signals that arrive meanwhile are kept for
``poll_for_recording_signals``. Not thread-safe: one thread uses an ``AeronArchive``.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Callable

from aeron_numba.archive.authentication import CredentialsSupplier, NullCredentialsSupplier
from aeron_numba.client import FragmentAssembler
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.sbe import MalformedMessageError, UnknownMessageError
from aeron_numba.errors import AeronError
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

_CODES = {code: name for name, code in A.CONTROL_RESPONSE_CODES.items()}
_ERROR_NAMES = {code: name for name, code in A.ARCHIVE_ERROR_CODES.items()}
_SIGNAL_NAMES = {code: name for name, code in A.RECORDING_SIGNALS.items()}


def _error_text(response) -> str:
    """An ERROR ControlResponse as text: its archive error code name and message."""
    return f"archive error {_ERROR_NAMES.get(response.relevant_id, response.relevant_id)}: {response.error_message}"


class ArchiveError(AeronError):
    """The archive refused a request: ``error_code`` is its archive error code (§6.2, e.g. UNKNOWN_RECORDING)."""

    def __init__(self, message: str, error_code: int = A.ARCHIVE_ERROR_CODES["GENERIC"], correlation_id: int = -1):
        super().__init__(message)
        self.error_code = error_code
        self.error_code_name = _ERROR_NAMES.get(error_code, str(error_code))
        self.correlation_id = correlation_id


@dataclass
class AeronArchiveContext:
    control_request_channel: str = A.DEFAULT_LOCAL_CONTROL_CHANNEL
    control_request_stream_id: int = A.DEFAULT_LOCAL_CONTROL_STREAM_ID
    control_response_channel: str = A.DEFAULT_LOCAL_CONTROL_CHANNEL
    control_response_stream_id: int = A.DEFAULT_RESPONSE_STREAM_ID
    message_timeout_ns: int = A.DEFAULT_MESSAGE_TIMEOUT_NS
    #: Credentials sent with the connect (AuthConnectRequest) and the answers to the archive's challenges.
    credentials_supplier: CredentialsSupplier = field(default_factory=NullCredentialsSupplier)


@dataclass(frozen=True)
class RecordingSignal:
    control_session_id: int
    correlation_id: int
    recording_id: int
    subscription_id: int
    position: int
    signal: str  # START, STOP, EXTEND, REPLICATE, MERGE, SYNC, DELETE, REPLICATE_END


class AeronArchive:
    def __init__(self, aeron, ctx: AeronArchiveContext, publication, subscription):
        self.aeron = aeron
        self.context = ctx
        self._publication = publication
        self._subscription = subscription
        self._assembler = FragmentAssembler(self._on_fragment)
        self.control_session_id = A.NULL_VALUE
        self._responses: dict[int, object] = {}  # correlation id -> ControlResponse
        self._descriptors: dict[int, list] = collections.defaultdict(list)
        self._signals: collections.deque[RecordingSignal] = collections.deque()
        self._challenges: dict[int, object] = {}  # connect correlation id -> Challenge
        self.archive_version = 0

    # ------------------------------------------------------------------------------------------ connect
    @classmethod
    def connect(cls, aeron, context: AeronArchiveContext | None = None) -> "AeronArchive":
        ctx = context or AeronArchiveContext()
        subscription = aeron.add_subscription(ctx.control_response_channel, ctx.control_response_stream_id)
        publication = aeron.add_exclusive_publication(ctx.control_request_channel, ctx.control_request_stream_id)
        archive = cls(aeron, ctx, publication, subscription)
        try:
            deadline = time.monotonic_ns() + ctx.message_timeout_ns
            while not publication.is_connected:
                if time.monotonic_ns() > deadline:
                    raise ArchiveError(f"no archive on {ctx.control_request_channel} stream "
                                       f"{ctx.control_request_stream_id} within the message timeout")
                time.sleep(0.001)
            correlation_id = aeron.next_correlation_id()
            archive._send(ARCHIVE.AuthConnectRequest(
                correlation_id=correlation_id, response_stream_id=ctx.control_response_stream_id,
                version=A.ARCHIVE_PROTOCOL_VERSION, response_channel=ctx.control_response_channel,
                encoded_credentials=bytes(ctx.credentials_supplier.encoded_credentials())))
            response = archive._await(correlation_id, any_session=True)
            archive.control_session_id = response.control_session_id
            archive.archive_version = response.version
            return archive
        except BaseException:
            archive._close_resources()
            raise

    # ------------------------------------------------------------------------------------------ plumbing
    def _send(self, message) -> None:
        data = ARCHIVE.encode(message)
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while True:
            result = self._publication.offer(data)
            if result > 0:
                return
            if result not in (BACK_PRESSURED, ADMIN_ACTION, NOT_CONNECTED) or time.monotonic_ns() > deadline:
                raise ArchiveError(f"cannot send {type(message).__name__} to the archive (offer result {result})")
            time.sleep(0.0001)

    def _on_fragment(self, buffer, offset, length, header) -> None:
        try:
            message = ARCHIVE.decode(buffer, offset, length)
        except (MalformedMessageError, UnknownMessageError):
            return  # not for an archive client
        name = type(message).__name__
        if name == "ControlResponse":
            if self.control_session_id in (A.NULL_VALUE, message.control_session_id):
                self._responses[message.correlation_id] = message
        elif name == "Challenge" and self.control_session_id == A.NULL_VALUE:
            self._challenges[message.correlation_id] = message
        elif name == "RecordingDescriptor" and message.control_session_id == self.control_session_id:
            self._descriptors[message.correlation_id].append(message)
        elif name == "RecordingSubscriptionDescriptor" and message.control_session_id == self.control_session_id:
            self._descriptors[message.correlation_id].append(message)
        elif name == "RecordingSignalEvent" and message.control_session_id == self.control_session_id:
            self._signals.append(RecordingSignal(message.control_session_id, message.correlation_id,
                                                 message.recording_id, message.subscription_id, message.position,
                                                 _SIGNAL_NAMES.get(message.signal, str(message.signal))))

    def _await(self, correlation_id: int, *, any_session: bool = False):
        """The ControlResponse to ``correlation_id``; raises ``ArchiveError`` on ERROR or at the timeout."""
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while correlation_id not in self._responses:
            challenge = self._challenges.pop(correlation_id, None)
            if challenge is not None:  # the archive wants more than the connect's credentials
                answer = self.context.credentials_supplier.on_challenge(bytes(challenge.encoded_challenge))
                self._send(ARCHIVE.ChallengeResponse(control_session_id=challenge.control_session_id,
                                                     correlation_id=correlation_id, encoded_credentials=bytes(answer)))
                deadline = time.monotonic_ns() + self.context.message_timeout_ns
                continue
            if self._subscription.poll(self._assembler, 16) == 0:
                if time.monotonic_ns() > deadline:
                    raise ArchiveError(f"no response from the archive to correlation id {correlation_id} within "
                                       f"{self.context.message_timeout_ns / 1e9:.1f}s", correlation_id=correlation_id)
                time.sleep(0.0001)
        response = self._responses.pop(correlation_id)
        if response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
            raise ArchiveError(_error_text(response), response.relevant_id, correlation_id)
        return response

    def _call(self, message_name: str, **fields) -> object:
        correlation_id = self.aeron.next_correlation_id()
        self._send(getattr(ARCHIVE, message_name)(control_session_id=self.control_session_id,
                                                  correlation_id=correlation_id, **fields))
        return self._await(correlation_id)

    def _relevant(self, message_name: str, **fields) -> int:
        return self._call(message_name, **fields).relevant_id

    def _listing(self, message_name: str, consumer: Callable | None, count: int, **fields) -> int:
        """Send a list request; deliver each descriptor to ``consumer``. The listing ends after ``count``
        descriptors, or at the archive's terminating response (RECORDING_UNKNOWN / SUBSCRIPTION_UNKNOWN: no
        more); returns how many came."""
        correlation_id = self.aeron.next_correlation_id()
        self._send(getattr(ARCHIVE, message_name)(control_session_id=self.control_session_id,
                                                  correlation_id=correlation_id, **fields))
        deadline = time.monotonic_ns() + self.context.message_timeout_ns
        while len(self._descriptors.get(correlation_id, ())) < count and correlation_id not in self._responses:
            if self._subscription.poll(self._assembler, 16) == 0:
                if time.monotonic_ns() > deadline:
                    raise ArchiveError(f"{message_name}: the listing did not end within the message timeout",
                                       correlation_id=correlation_id)
                time.sleep(0.0001)
        response = self._responses.pop(correlation_id, None)
        if response is not None and response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
            raise ArchiveError(_error_text(response), response.relevant_id, correlation_id)
        descriptors = self._descriptors.pop(correlation_id, [])
        if consumer is not None:
            for descriptor in descriptors:
                consumer(descriptor)
        return len(descriptors)

    # ------------------------------------------------------------------------------------------ recording
    def start_recording(self, channel: str, stream_id: int, source_location: str = "LOCAL",
                        auto_stop: bool = False) -> int:
        """Record ``channel``/``stream_id``; returns the recording subscription's registration id."""
        location = A.SOURCE_LOCATIONS[source_location]
        if auto_stop:
            return self._relevant("StartRecordingRequest2", stream_id=stream_id, source_location=location,
                                  auto_stop=A.BOOLEAN_TRUE, channel=channel)
        return self._relevant("StartRecordingRequest", stream_id=stream_id, source_location=location,
                              channel=channel)

    def extend_recording(self, recording_id: int, channel: str, stream_id: int, source_location: str = "LOCAL",
                         auto_stop: bool = False) -> int:
        """Continue a stopped recording with the image that comes on ``channel``/``stream_id`` (it must join at the
        recording's stop position with its initial term id, term length and MTU); returns the subscription id."""
        location = A.SOURCE_LOCATIONS[source_location]
        if auto_stop:
            return self._relevant("ExtendRecordingRequest2", recording_id=recording_id, stream_id=stream_id,
                                  source_location=location, auto_stop=A.BOOLEAN_TRUE, channel=channel)
        return self._relevant("ExtendRecordingRequest", recording_id=recording_id, stream_id=stream_id,
                              source_location=location, channel=channel)

    def stop_recording(self, channel: str, stream_id: int) -> None:
        self._call("StopRecordingRequest", stream_id=stream_id, channel=channel)

    def stop_recording_subscription(self, subscription_id: int) -> None:
        self._call("StopRecordingSubscriptionRequest", subscription_id=subscription_id)

    def stop_recording_by_identity(self, recording_id: int) -> bool:
        """True if the recording was active (and is now stopping)."""
        return self._relevant("StopRecordingByIdentityRequest", recording_id=recording_id) != 0

    def get_recording_position(self, recording_id: int) -> int:
        """The recorded position of an active recording, or -1 (NULL_POSITION) when it is not recording."""
        return self._relevant("RecordingPositionRequest", recording_id=recording_id)

    def get_start_position(self, recording_id: int) -> int:
        return self._relevant("StartPositionRequest", recording_id=recording_id)

    def get_stop_position(self, recording_id: int) -> int:
        """The stop position, or -1 while the recording is active."""
        return self._relevant("StopPositionRequest", recording_id=recording_id)

    def get_max_recorded_position(self, recording_id: int) -> int:
        return self._relevant("MaxRecordedPositionRequest", recording_id=recording_id)

    def truncate_recording(self, recording_id: int, position: int) -> None:
        self._call("TruncateRecordingRequest", recording_id=recording_id, position=position)

    def purge_recording(self, recording_id: int) -> None:
        self._call("PurgeRecordingRequest", recording_id=recording_id)

    def find_last_matching_recording(self, min_recording_id: int, channel_fragment: str, stream_id: int,
                                     session_id: int = A.NULL_VALUE) -> int:
        """The id of the newest recording from ``min_recording_id`` on whose channel contains the fragment, or -1."""
        return self._relevant("FindLastMatchingRecordingRequest", min_recording_id=min_recording_id,
                              session_id=session_id, stream_id=stream_id, channel=channel_fragment)

    def get_archive_id(self) -> int:
        return self._relevant("ArchiveIdRequest")

    # ------------------------------------------------------------------------------------------ listing
    def list_recordings(self, from_recording_id: int, record_count: int, consumer: Callable | None = None) -> int:
        return self._listing("ListRecordingsRequest", consumer, record_count, from_recording_id=from_recording_id,
                             record_count=record_count)

    def list_recordings_for_uri(self, from_recording_id: int, record_count: int, channel_fragment: str,
                                stream_id: int, consumer: Callable | None = None) -> int:
        return self._listing("ListRecordingsForUriRequest", consumer, record_count,
                             from_recording_id=from_recording_id, record_count=record_count, stream_id=stream_id,
                             channel=channel_fragment)

    def list_recording(self, recording_id: int, consumer: Callable | None = None) -> int:
        """1 if the recording exists (its descriptor given to ``consumer``), else 0."""
        return self._listing("ListRecordingRequest", consumer, 1, recording_id=recording_id)

    def list_recording_subscriptions(self, pseudo_index: int, subscription_count: int, channel_fragment: str,
                                     stream_id: int, apply_stream_id: bool,
                                     consumer: Callable | None = None) -> int:
        return self._listing("ListRecordingSubscriptionsRequest", consumer, subscription_count,
                             pseudo_index=pseudo_index, subscription_count=subscription_count,
                             apply_stream_id=A.BOOLEAN_TRUE if apply_stream_id else 0, stream_id=stream_id,
                             channel=channel_fragment)

    # ------------------------------------------------------------------------------------------- replay
    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int, file_io_max_length: int = 0) -> int:
        """Start a replay (``position`` -1: from the start; ``length`` -1: to the end or following a live
        recording); returns the replay session id (its low 32 bits are the replay image's session id)."""
        return self._relevant("ReplayRequest", recording_id=recording_id, position=position, length=length,
                              replay_stream_id=replay_stream_id, file_io_max_length=file_io_max_length,
                              replay_token=A.NULL_VALUE, replay_channel=replay_channel)

    def start_bounded_replay(self, recording_id: int, position: int, length: int, limit_counter_id: int,
                             replay_channel: str, replay_stream_id: int, file_io_max_length: int = 0) -> int:
        """A replay that never reads past the value of counter ``limit_counter_id``."""
        return self._relevant("BoundedReplayRequest", recording_id=recording_id, position=position, length=length,
                              limit_counter_id=limit_counter_id, replay_stream_id=replay_stream_id,
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
        self._call("StopReplayRequest", replay_session_id=replay_session_id)

    def stop_all_replays(self, recording_id: int = A.NULL_VALUE) -> None:
        self._call("StopAllReplaysRequest", recording_id=recording_id)

    # -------------------------------------------------------------------------------------------- signals
    def poll_for_recording_signals(self, consumer: Callable[[RecordingSignal], None] | None = None) -> int:
        """Deliver the recording signals received so far (and any now waiting) to ``consumer``."""
        self._subscription.poll(self._assembler, 16)
        count = 0
        while self._signals:
            signal = self._signals.popleft()
            if consumer is not None:
                consumer(signal)
            count += 1
        return count

    def poll_for_error_response(self) -> str | None:
        """An ERROR the archive sent that no call was waiting for (an extension refused when its image came, a
        replay that failed after it started), as its message; None if there is none."""
        self._subscription.poll(self._assembler, 16)
        for correlation_id, response in list(self._responses.items()):
            if response.code == A.CONTROL_RESPONSE_CODES["ERROR"]:
                del self._responses[correlation_id]
                return _error_text(response)
            if correlation_id == -1:
                del self._responses[correlation_id]  # the archive's liveness probe
        return None

    # -------------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Tell the archive the session is over (one try: a gone archive has nobody to tell) and close."""
        if self.control_session_id != A.NULL_VALUE and self._publication.is_connected:
            self._publication.offer(ARCHIVE.encode(ARCHIVE.CloseSessionRequest(
                control_session_id=self.control_session_id)))
        self._close_resources()

    def _close_resources(self) -> None:
        self._publication.close()
        self._subscription.close()

    def __enter__(self) -> "AeronArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
