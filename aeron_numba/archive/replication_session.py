"""One replication (spec/archive.md §6.2, Aeron's ReplicationSession): a recording of another archive copied into
this one, the source replaying it to this archive's replication channel and this archive recording that replay.

A state machine the archive conductor runs once per duty cycle; no step waits:

CONNECT: a control session on the source archive (``AsyncConnect``); not made: ERROR
REPLICATION_CONNECTION_FAILURE. REPLICATE_DESCRIPTOR: ListRecording of the source recording; unknown: ERROR
UNKNOWN_RECORDING. A new destination recording (``dst_recording_id`` NULL) is added to the catalog as the
source's descriptor, empty at the source's start position, with the REPLICATE signal; a given one is extended from
its stop position. A source recording that is empty, or that stopped where the destination stops, is in SYNC at
once. EXTEND: the conductor records the replication channel (``session-id`` the replay's, ``rejoin=false``) as an
extension of the destination, auto-stopped, its subscription added without waiting on the driver; the EXTEND
signal comes when the image joins. REPLAY: once the driver has made that subscription, a replay of the source
from the destination's position (to ``stop_position`` if given, else to the end) to the resolved
replication channel. AWAIT_IMAGE: the replay's image on the recording subscription. REPLICATE: until the recorded
image reaches the source's stop position (SYNC), the requested stop position, the end of the replay, or the image
goes (the source died: no SYNC). DONE, then ``close``: the recording subscription stops, a replay still running
at the source is stopped, the source session is closed, and REPLICATE_END goes out; the recording's STOP follows
when its session has ended (Aeron's order).

With a ``liveDestination`` (the source recording must be active) the replication then follows the live stream, as
Aeron's does: SRC_RECORDING_POSITION asks the source how far it has recorded; EXTEND records a multi-destination
subscription (``control-mode=manual``, ``tags=<channel tag>,<subscription tag>``, no endpoint) and, once the
driver has made it, adds the replication channel's endpoint to it as the replay destination; the replay (``linger=0|eos=false``, the recording's
own session id) goes there. CATCHUP: until the image reaches that recorded position. ATTEMPT_LIVE_JOIN: asks the
source's recorded position again each round (three timeouts in a row end it); within a quarter term (at most
``LIVE_ADD_MAX_WINDOW``) of it, the live destination is added to the subscription; once the image is at the
source's position with two transports feeding it, the replay destination is removed, MERGE is signalled, and the
replication is DONE with the recording still following the live stream (close stops only the source's replay).

As Aeron: signals and errors carry the replication id as their correlation id; each step waiting on the source has
the archive client's message timeout (an ERROR GENERIC when it passes), and an ERROR from the source ends the
replication with an ERROR GENERIC carrying its message. The replay token steps of Aeron's session are not here.
A tagged replication (a channel or subscription tag; a NULL one takes the replication id) records through the same
multi-destination subscription, tagged ``tags=<channelTagId>,<subscriptionTagId>``, as Aeron's does, so that the
channel tag names its receive endpoint in this archive's driver.
"""

from __future__ import annotations

import enum
import time

from aeron_numba.codecs.channel_uri import ENDPOINT_PARAM, TAGS_PARAM, ChannelUri
from aeron_numba.errors import AeronError
from aeron_numba.layout import archive as A

_ERROR = A.CONTROL_RESPONSE_CODES["ERROR"]
_RECORDING_UNKNOWN = A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"]
LIVE_ADD_MAX_WINDOW = 32 * 1024 * 1024  # Aeron's ReplayMerge.LIVE_ADD_MAX_WINDOW
REPLAY_REMOVE_THRESHOLD = 0
RETRY_ATTEMPTS = 3  # recorded-position requests that may time out in a row while attempting the live join


class ReplicationState(enum.Enum):
    CONNECT = "connect"
    REPLICATE_DESCRIPTOR = "replicate descriptor"
    SRC_RECORDING_POSITION = "src recording position"
    EXTEND = "extend"
    REPLAY = "replay"
    AWAIT_IMAGE = "await image"
    REPLICATE = "replicate"
    CATCHUP = "catchup"
    ATTEMPT_LIVE_JOIN = "attempt live join"
    DONE = "done"


class ReplicationError(AeronError):
    """A replication step failed; ``error_code`` is the archive error code its ERROR response carries."""

    def __init__(self, message: str, error_code: str = "GENERIC"):
        super().__init__(message)
        self.error_code = error_code


class ReplicationSession:
    def __init__(self, *, replication_id: int, src_recording_id: int, dst_recording_id: int, stop_position: int,
                 replication_channel: str, file_io_max_length: int, replication_session_id: int, control_session,
                 conductor, catalog, connect, next_correlation_id, message_timeout_ns: int,
                 nano_clock=time.monotonic_ns, on_error=None, live_destination: str = "",
                 channel_tag_id: int = A.NULL_VALUE, subscription_tag_id: int = A.NULL_VALUE):
        """``connect()`` starts the ``AsyncConnect`` to the source archive. ``conductor`` records for the session:
        ``extend_for_replication(control_session, replication_id, recording_id, stream_id, channel)`` returns
        the recording subscription (or None, the error already sent) and ``stop_recording_subscription(id)``
        ends it. ``on_error(text)`` records what went wrong in the archive's error log."""
        self.replication_id = replication_id
        self.src_recording_id = src_recording_id
        self.dst_recording_id = dst_recording_id
        self.dst_stop_position = stop_position
        self.replication_channel = replication_channel
        self.is_tagged = channel_tag_id != A.NULL_VALUE or subscription_tag_id != A.NULL_VALUE
        self.channel_tag_id = replication_id if channel_tag_id == A.NULL_VALUE else channel_tag_id
        self.subscription_tag_id = replication_id if subscription_tag_id == A.NULL_VALUE else subscription_tag_id
        self.file_io_max_length = file_io_max_length
        self.replication_session_id = replication_session_id
        self.live_destination = live_destination or None
        self.is_mds = self.is_tagged or self.live_destination is not None  # Aeron's: an MDS recording subscription
        self.replay_destination: str | None = None
        self.is_live_added = False
        self.retry_attempts = RETRY_ATTEMPTS
        self.src_recording_position = A.NULL_POSITION
        self.control_session = control_session
        self.conductor = conductor
        self.catalog = catalog
        self._connect = connect
        self.next_correlation_id = next_correlation_id  # the archive's Aeron client's
        self.message_timeout_ns = message_timeout_ns
        self.nano_clock = nano_clock
        self.on_error = on_error or (lambda text: None)
        self.state = ReplicationState.CONNECT
        self.reason = ""
        self.async_connect = None
        self.source = None  # ArchiveConnection once connected
        self.recording_subscription_id = A.NULL_VALUE  # known at once; the subscription once the driver made it
        self.recording_subscription = None
        self.image = None
        self.replay_position = A.NULL_POSITION
        self.src_stop_position = A.NULL_POSITION
        self.replay_stream_id = 0
        self.replay_session_id = 0
        self.src_replay_session_id = A.NULL_VALUE
        self._active_correlation_id = A.NULL_VALUE
        self._action_deadline_ns = nano_clock() + message_timeout_ns
        if dst_recording_id != A.NULL_VALUE:
            self.replay_position = catalog.stop_position(dst_recording_id)

    @property
    def is_done(self) -> bool:
        return self.state is ReplicationState.DONE

    def abort(self, reason: str) -> None:
        """StopReplication, or the archive closing: done at once (``close`` tidies up)."""
        self._state(ReplicationState.DONE, reason)

    # ---------------------------------------------------------------------------------------- duty cycle
    def do_work(self) -> int:
        if self.state is ReplicationState.DONE:
            return 0
        if self.recording_subscription is not None and self.recording_subscription.is_closed:
            self._state(ReplicationState.DONE, "recording subscription closed")
            return 1
        try:
            return self._STEPS[self.state](self)
        except ReplicationError as exc:
            self._fail(str(exc), exc.error_code)
        except (AeronError, OSError, ValueError) as exc:  # the source's driver or channel refused something
            self._fail(str(exc), "GENERIC")
        except Exception as exc:  # a bug: as Aeron, the client hears of it and the conductor's runner counts it
            self._fail(str(exc), "GENERIC")
            raise
        return 1

    def _connect_step(self) -> int:
        if self.async_connect is None:
            self.async_connect = self._connect()
            return 1
        step = self.async_connect.step
        try:
            connection = self.async_connect.poll()
        except AeronError as exc:  # as Aeron: whatever ends the connect (timeout, refusal, challenge) is this code
            raise ReplicationError(f"Replication connection failed={exc}", "REPLICATION_CONNECTION_FAILURE") from exc
        if connection is None:
            return int(self.async_connect.step is not step)
        self.source = connection
        self.async_connect = None
        self._state(ReplicationState.REPLICATE_DESCRIPTOR, "connected to the source archive")
        return 1

    def _replicate_descriptor(self) -> int:
        source = self.source
        if self._active_correlation_id == A.NULL_VALUE:
            return self._send("list the source recording descriptor", source.proxy.list_recording_request,
                              recording_id=self.src_recording_id)
        work = source.poller.poll()
        descriptors = source.poller.descriptors.pop(self._active_correlation_id, None)
        if descriptors:
            self._on_recording_descriptor(descriptors[0])
            return 1
        response = self._response()
        if response is not None and response.code == _RECORDING_UNKNOWN:
            raise ReplicationError(f"unknown src recording id {self.src_recording_id}", "UNKNOWN_RECORDING")
        self._check_timeout("failed to fetch remote recording descriptor", work)
        return work

    def _on_recording_descriptor(self, d) -> None:
        self.src_stop_position = d.stop_position
        self.replay_stream_id = d.stream_id
        # Merging with the live stream needs the recording's own session: the live publication's.
        self.replay_session_id = d.session_id if self.live_destination or \
            self.replication_session_id == A.NULL_VALUE else self.replication_session_id
        if self.file_io_max_length != A.NULL_VALUE and self.file_io_max_length < d.mtu_length:
            raise ReplicationError(f"Replication fileIoMaxLength ({self.file_io_max_length}) is less than than the "
                                   f"recording mtuLength ({d.mtu_length})")
        if self.dst_recording_id == A.NULL_VALUE:
            self.replay_position = d.start_position
            self.dst_recording_id = self.catalog.add_recording(
                start_position=d.start_position, stop_position=d.start_position, start_timestamp=d.start_timestamp,
                stop_timestamp=d.start_timestamp, initial_term_id=d.initial_term_id,
                segment_file_length=d.segment_file_length, term_buffer_length=d.term_buffer_length,
                mtu_length=d.mtu_length, session_id=d.session_id, stream_id=d.stream_id,
                stripped_channel=d.stripped_channel, original_channel=d.original_channel,
                source_identity=d.source_identity)
            self._signal(d.start_position, "REPLICATE")
        next_state, reason = ReplicationState.EXTEND, ""
        if self.live_destination:
            if d.stop_position != A.NULL_POSITION:
                raise ReplicationError("cannot live merge without active source recording")
            next_state, reason = ReplicationState.SRC_RECORDING_POSITION, f"liveDestination={self.live_destination}"
        if d.start_position == d.stop_position or d.stop_position == self.catalog.stop_position(self.dst_recording_id):
            self._signal(d.stop_position, "SYNC")
            next_state, reason = ReplicationState.DONE, "in sync"
        self._state(next_state, reason)

    def _src_recording_position(self) -> int:
        if self._active_correlation_id == A.NULL_VALUE:
            return self._send("send recording position request", self.source.proxy.recording_position_request,
                              recording_id=self.src_recording_id)
        work = self.source.poller.poll()
        response = self._response()
        if response is not None:
            self.src_recording_position = response.relevant_id
            if self.src_recording_position == A.NULL_POSITION:
                raise ReplicationError("cannot live merge without active source recording")
            self._state(ReplicationState.EXTEND, "")
            return 1
        self._check_timeout("failed to get recording position", work)
        return work

    def _extend(self) -> int:
        uri = ChannelUri.parse(self.replication_channel)
        params = dict(uri.params)
        endpoint = params.get(ENDPOINT_PARAM)
        params["rejoin"] = "false"
        params["session-id"] = str(self.replay_session_id)
        if self.is_mds:  # one image fed by the replay (then by the live stream too)
            params.pop(ENDPOINT_PARAM, None)
            params[TAGS_PARAM] = f"{self.channel_tag_id},{self.subscription_tag_id}"
            params["control-mode"] = "manual"
        channel = str(ChannelUri(uri.media, params, uri.prefix))
        registration_id = self.conductor.extend_for_replication(self.control_session, self.replication_id,
                                                               self.dst_recording_id, self.replay_stream_id, channel)
        if registration_id is None:
            self._state(ReplicationState.DONE, "the destination recording cannot be extended")
            return 1
        self.recording_subscription_id = registration_id
        if self.is_mds:  # added to the subscription once the driver has made it
            self.replay_destination = _destination_uri(uri, endpoint)
        self._state(ReplicationState.REPLAY, "")
        return 1

    def _recording_subscription_made(self) -> bool:
        """Whether the driver has made the recording subscription (added without waiting on it)."""
        owner = self.conductor.recording_subscription(self.recording_subscription_id)
        if owner is None:  # refused by the driver: the conductor has sent the error
            self._state(ReplicationState.DONE, "the recording subscription could not be added")
            return False
        if owner.subscription is None:
            self._check_timeout(f"failed to add the recording subscription: channel={owner.original_channel}", 0)
            return False
        self.recording_subscription = owner.subscription
        if self.is_mds:
            owner.subscription.async_add_destination(self.replay_destination)
        return True

    def _replay(self) -> int:
        source = self.source
        if self.recording_subscription is None and not self._recording_subscription_made():
            return int(self.state is ReplicationState.DONE)
        if self._active_correlation_id == A.NULL_VALUE:
            uri = self._resolved_replay_channel()
            if uri is None:
                self._check_timeout("failed to resolve subscription endpoint: channel="
                                    f"{self.recording_subscription.channel}", 0)
                return 0
            params = {k: v for k, v in uri.params.items() if k != "rejoin"}
            params["session-id"] = str(self.replay_session_id)
            if self.live_destination:  # the replay must not end the stream the live publication carries on
                params["linger"] = "0"
                params["eos"] = "false"
            length = A.NULL_LENGTH if self.dst_stop_position == A.NULL_POSITION \
                else self.dst_stop_position - self.replay_position
            return self._send("send replay request", source.proxy.replay_request,
                              recording_id=self.src_recording_id, position=self.replay_position, length=length,
                              replay_stream_id=self.replay_stream_id, file_io_max_length=self.file_io_max_length,
                              replay_token=A.NULL_VALUE, replay_channel=str(ChannelUri(uri.media, params, uri.prefix)))
        work = source.poller.poll()
        response = self._response()
        if response is not None:
            self.src_replay_session_id = response.relevant_id
            self._state(ReplicationState.AWAIT_IMAGE, f"srcReplaySessionId={self.src_replay_session_id}")
            return 1
        self._check_timeout(f"failed get acknowledgement of replay request to: {self.replication_channel}", work)
        return work

    def _resolved_replay_channel(self) -> ChannelUri | None:
        """Where the source replays to: the replication channel with the port this archive's driver bound for its
        endpoint (MDS: for the replay destination); None until that is known."""
        subscription = self.recording_subscription
        if not self.is_mds:
            resolved = subscription.try_resolve_channel_endpoint_port()
            return None if resolved is None else ChannelUri.parse(resolved)
        bound = subscription.resolved_endpoint
        if bound is None:
            return None
        uri = ChannelUri.parse(self.replication_channel)
        return uri.replace_endpoint_wildcard_port(bound) if uri.get(ENDPOINT_PARAM) is not None else uri

    def _await_image(self) -> int:
        image = self.recording_subscription.image_by_session_id(self.replay_session_id)
        if image is None:
            self._check_timeout(f"failed get replay image for sessionId {self.replay_session_id} on channel "
                                f"{self.recording_subscription.channel}", 0)
            return 0
        self.image = image
        self._state(ReplicationState.CATCHUP if self.live_destination else ReplicationState.REPLICATE,
                    f"image joined at {image.join_position}")
        return 1

    def _replicate(self) -> int:
        image = self.image
        is_closed, is_end_of_stream, position = image.is_closed, image.is_end_of_stream, image.position
        synced = self.src_stop_position != A.NULL_POSITION and position >= self.src_stop_position
        if synced or (self.dst_stop_position != A.NULL_POSITION and position >= self.dst_stop_position) or \
                is_end_of_stream or is_closed:
            if synced:
                self._signal(position, "SYNC")
            self.src_replay_session_id = A.NULL_VALUE  # the replay ended on its own: nothing to stop
            self._state(ReplicationState.DONE, "sync" if synced else "done")
            return 1
        return 0

    def _catchup(self) -> int:
        image = self.image
        if image.position >= self.src_recording_position:
            self._state(ReplicationState.ATTEMPT_LIVE_JOIN, f"image position ({image.position}) >= "
                                                            f"srcRecordingPosition ({self.src_recording_position})")
            return 1
        if image.is_closed:
            raise ReplicationError("replication image closed unexpectedly")
        return 0

    def _attempt_live_join(self) -> int:
        source = self.source
        if self._active_correlation_id == A.NULL_VALUE:
            return self._send("send recording position request", source.proxy.recording_position_request,
                              recording_id=self.src_recording_id)
        work = source.poller.poll()
        response = self._response()
        if response is not None:
            self._track(A.NULL_VALUE)  # ask again next round
            self.retry_attempts = RETRY_ATTEMPTS
            self.src_recording_position = response.relevant_id
            if self.src_recording_position == A.NULL_POSITION:
                raise ReplicationError("cannot live merge without active source recording")
            position = self.image.position
            if self._should_add_live_destination(position):
                self.recording_subscription.async_add_destination(self.live_destination)
                self.is_live_added = True
            elif self._should_stop_replay(position):
                self.recording_subscription.async_remove_destination(self.replay_destination)
                self.replay_destination = None
                # The recording goes on with the live stream: close must not stop it (and MERGE names no
                # subscription, as Aeron's).
                self.recording_subscription, self.recording_subscription_id = None, A.NULL_VALUE
                self._signal(position, "MERGE")
                self._state(ReplicationState.DONE, "merge")
            return 1
        if self.image.is_closed:
            raise ReplicationError("replication image closed unexpectedly")
        if work == 0 and self.nano_clock() >= self._action_deadline_ns:
            self.retry_attempts -= 1
            if self.retry_attempts == 0:
                raise ReplicationError("failed to get recording position")
            self._track(A.NULL_VALUE)
        return work

    def _should_add_live_destination(self, position: int) -> bool:
        window = min(self.image.term_buffer_length >> 2, LIVE_ADD_MAX_WINDOW)
        return not self.is_live_added and self.src_recording_position - position <= window

    def _should_stop_replay(self, position: int) -> bool:
        return self.is_live_added and self.src_recording_position - position <= REPLAY_REMOVE_THRESHOLD and \
            self.image.active_transport_count >= 2

    _STEPS = {
        ReplicationState.CONNECT: _connect_step,
        ReplicationState.REPLICATE_DESCRIPTOR: _replicate_descriptor,
        ReplicationState.SRC_RECORDING_POSITION: _src_recording_position,
        ReplicationState.EXTEND: _extend,
        ReplicationState.REPLAY: _replay,
        ReplicationState.AWAIT_IMAGE: _await_image,
        ReplicationState.REPLICATE: _replicate,
        ReplicationState.CATCHUP: _catchup,
        ReplicationState.ATTEMPT_LIVE_JOIN: _attempt_live_join,
    }

    # ------------------------------------------------------------------------------------------- helpers
    def _send(self, what: str, send_method, **fields) -> int:
        correlation_id = self.next_correlation_id()
        if send_method(control_session_id=self.source.control_session_id, correlation_id=correlation_id, **fields):
            self._track(correlation_id)
            return 1
        self._check_timeout(f"failed to {what}", 0)
        return 0

    def _response(self):
        """The source's answer to the request in flight; an ERROR ends the replication with its message."""
        response = self.source.poller.responses.pop(self._active_correlation_id, None)
        if response is not None and response.code == _ERROR:
            raise ReplicationError(response.error_message)
        return response

    def _track(self, correlation_id: int) -> None:
        """The request in flight (NULL_VALUE: none) and the deadline for its answer."""
        self._active_correlation_id = correlation_id
        self._action_deadline_ns = self.nano_clock() + self.message_timeout_ns

    def _check_timeout(self, what: str, work: int) -> None:
        if work == 0 and self.nano_clock() >= self._action_deadline_ns:
            raise ReplicationError(what)

    def _state(self, state: ReplicationState, reason: str) -> None:
        self.state = state
        self.reason = reason
        self._active_correlation_id = A.NULL_VALUE
        self._action_deadline_ns = self.nano_clock() + self.message_timeout_ns

    def _fail(self, message: str, error_code: str) -> None:
        self._state(ReplicationState.DONE, message)
        self.on_error(f"replication id={self.replication_id}: {message}")
        self.control_session.error(self.replication_id, error_code, message)

    def _signal(self, position: int, signal: str) -> None:
        self.control_session.signal(self.replication_id, self.dst_recording_id, self.recording_subscription_id,
                                    position, signal)

    # ------------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop the recording and the source's replay, leave the source archive, and signal REPLICATE_END."""
        if self.recording_subscription_id != A.NULL_VALUE:  # made or still being added
            self.conductor.stop_recording_subscription(self.recording_subscription_id)
            self.recording_subscription_id = A.NULL_VALUE
            self.recording_subscription = None
        source = self.source
        try:
            if self.src_replay_session_id != A.NULL_VALUE and source is not None:
                source.proxy.stop_replay_request(source.control_session_id, self.next_correlation_id(),
                                                 self.src_replay_session_id)
                self.src_replay_session_id = A.NULL_VALUE
            if self.async_connect is not None:
                self.async_connect.close()
            if source is not None:
                source.close()
        except (AeronError, OSError) as exc:  # the source's side is already gone: nothing more to tidy there
            self.on_error(f"replication id={self.replication_id} closing: {exc}")
        self._signal(A.NULL_POSITION, "REPLICATE_END")


def _destination_uri(replication_channel: ChannelUri, endpoint: str | None) -> str:
    """The replay destination: the replication channel's endpoint (and interface), as Aeron's createDestinationUri."""
    uri = f"aeron:{replication_channel.media}?{ENDPOINT_PARAM}={endpoint}"
    interface = replication_channel.get("interface")
    return uri if interface is None else f"{uri}|interface={interface}"
