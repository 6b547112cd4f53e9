"""The archive's agent (spec/archive.md §6): control requests in, control sessions, recordings and replays.

One duty cycle polls the control subscriptions (the local IPC control channel, and the remote one if
configured), turns images that appeared on recording subscriptions into recording sessions, then runs every
control session, recording session, replay session and replication session once (Aeron's SHARED threading mode: conductor,
recorder and replayer on one thread). Requests come decoded from the ``ControlSessionAdapter`` (which checks
the session, its authentication and authorisation) as ``on_<request>(session, **fields)`` calls; every one gets
a ControlResponse on its session through the session's ``ControlResponseProxy`` (or, for listings, descriptors
then a terminating response), and a bad one an ERROR with the archive error code, never a crash. What cannot be
decoded is recorded in the mark file's error log and dropped by the adapter. The conductor never touches bytes:
the archive counters are ``ArchiveCounters``'s, channels are derived in ``recording_channels``, segment files
are cut and deleted in ``segment_files``, and with recording events enabled the recording sessions publish them
through the ``RecordingEventsProxy`` made here. A replication (``ReplicationSession``) is a client of another
archive recording that archive's replay here as an extension made through ``extend_for_replication``.
"""

from __future__ import annotations

import collections
import errno
import logging
import secrets
import shutil
import threading
import time
from dataclasses import dataclass

import numpy as np

from aeron_numba.archive.archive_counters import ArchiveCounters
from aeron_numba.archive.async_connect import AsyncConnect
from aeron_numba.archive.authentication import NullCredentialsSupplier, ReplicationCredentialsSupplier
from aeron_numba.archive.client import AeronArchiveContext
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.archive.control_session import (
    OK,
    RECORDING_UNKNOWN,
    SUBSCRIPTION_UNKNOWN,
    ControlSession,
    ControlSessionState,
)
from aeron_numba.archive.control_session_adapter import ControlSessionAdapter
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.archive.recording_channels import recording_subscription_channel, replay_channel, strip_channel
from aeron_numba.archive.recording_session import RecordingSession, RecordingState
from aeron_numba.archive.replay_session import ReplaySession, ReplayState, replay_position_error
from aeron_numba.archive.replication_session import ReplicationSession
from aeron_numba.archive.segment_files import (
    RecordingWriter,
    SegmentFileError,
    attach_start_positions,
    delete_segment_files,
    delete_segments,
    detached_segment_bases,
    lowest_segment_base,
    move_segments,
    truncate_segment_files,
)
from aeron_numba.codecs.archive_proxies import RecordingEventsProxy
from aeron_numba.codecs.channel_uri import ChannelUri
from aeron_numba.errors import AeronError
from aeron_numba.layout import archive as A

# What the archive does, for a user to follow (-v / AERON_LOG_LEVEL): sessions, recordings, replays, errors.
log = logging.getLogger("aeron_numba.archive")
LOCAL = A.SOURCE_LOCATIONS["LOCAL"]  # a start/extend request that does not say: the stream is published here
REMOTE = A.SOURCE_LOCATIONS["REMOTE"]  # a replication records the replay arriving from another archive


@dataclass
class RecordingSubscription:
    """A subscription the archive records: every image it gets becomes a recording."""

    subscription: object  # None while its asynchronous add (a replication's) is pending
    control_session_id: int
    correlation_id: int
    original_channel: str
    stripped_channel: str
    stream_id: int
    auto_stop: bool
    extend_recording_id: int = A.NULL_VALUE  # an ExtendRecording: the image continues this recording


def _migrate_error(src, dst) -> str | None:
    """Why ``src``'s segment files cannot go to ``dst`` (Aeron's words), or None: ``src`` must be stopped, both
    of one stream and geometry, adjoining at a position on a segment boundary of both."""
    if src.stop_position == A.NULL_POSITION:
        return f"recording {src.recording_id} is still active"
    for name, label in (("segment_file_length", "SegmentFileLength"), ("term_buffer_length", "TermBufferLength"),
                        ("initial_term_id", "InitialTermId"), ("stream_id", "StreamId"), ("mtu_length", "MtuLength")):
        if getattr(src, name) != getattr(dst, name):
            return f"invalid migrate: src{label}={getattr(src, name)} dst{label}={getattr(dst, name)}"
    if src.stop_position == dst.start_position:
        join_position = src.stop_position
    elif src.start_position == dst.stop_position:
        join_position = src.start_position
    else:
        return (f"invalid migrate: src and dst are not contiguous srcStartPosition={src.start_position} "
                f"srcStopPosition={src.stop_position} dstStartPosition={dst.start_position} "
                f"dstStopPosition={dst.stop_position}")
    for label, d in (("src", src), ("dst", dst)):
        if A.segment_file_base_position(d.start_position, join_position, d.term_buffer_length,
                                        d.segment_file_length) != join_position:
            return (f"invalid migrate: join position is not on segment boundary of {label} recording "
                    f"seamPosition={join_position} startPosition={d.start_position} "
                    f"stopPosition={d.stop_position} termBufferLength={d.term_buffer_length} "
                    f"segmentFileLength={d.segment_file_length}")
    return None


class ArchiveConductor:
    """Agent: ``do_work`` / ``role_name`` / ``on_close``."""

    #: Its watch names what a cycle leaves (requests and recorded frames past a poll's limit are the next frames
    #: of their images), or it offers no watch (replays, replications, sessions still answering).
    names_work_left = True

    def __init__(self, ctx: ArchiveContext, aeron, mark_file: ArchiveMarkFile, catalog: Catalog,
                 nano_clock=time.monotonic_ns, epoch_clock=lambda: time.time_ns() // 1_000_000):
        self.ctx = ctx
        self.authenticator = ctx.authenticator_factory()
        self.authorisation_service = ctx.authorisation_service_factory()
        self.aeron = aeron
        self.mark_file = mark_file
        self.catalog = catalog
        self.nano_clock = nano_clock
        self.epoch_clock = epoch_clock
        self.archive_id = ctx.archive_id if ctx.archive_id != A.NULL_VALUE else aeron.client_id
        # Recording sessions publish their events here (Aeron's RecordingEventsProxy); None: disabled.
        self.recording_events = RecordingEventsProxy(aeron.add_exclusive_publication(
            ctx.recording_events_channel, ctx.recording_events_stream_id)) if ctx.recording_events_enabled else None
        # A client's request publication going away (closed, or its client timed out by the driver) ends the control
        # sessions that came on it, even when another client's subscription keeps their response stream connected.
        self._gone_request_images: collections.deque = collections.deque()
        gone = self._gone_request_images.append
        self.control_subscriptions = [aeron.add_subscription(ctx.local_control_channel, ctx.local_control_stream_id,
                                                             unavailable_image_handler=gone)]
        if ctx.control_channel:
            self.control_subscriptions.append(aeron.add_subscription(ctx.control_channel, ctx.control_stream_id,
                                                                     unavailable_image_handler=gone))
        self.control_session_adapter = ControlSessionAdapter(self, self.control_subscriptions,
                                                             self.authorisation_service)
        self.control_sessions: dict[int, ControlSession] = {}
        self.recording_subscriptions: dict[int, RecordingSubscription] = {}
        self.recordings: dict[int, RecordingSession] = {}  # recording id -> active session
        self._recording_owner: dict[int, RecordingSubscription] = {}  # recording id -> what started it
        # Stopped by identity: no longer a recording subscription, kept open while another of its recordings runs.
        self._released_subscriptions: dict[int, RecordingSubscription] = {}
        self.replays: dict[int, ReplaySession] = {}
        self._replay_owner: dict[int, tuple[int, int]] = {}  # replay session id -> (control session, correlation)
        # Replay token -> (recording id, control session id, deadline ns): a replay request on a response channel
        # (from another request image) names its session by one, as Aeron's archive does.
        self._replay_tokens: dict[int, tuple[int, int, int]] = {}
        self._next_control_session_id = 1
        self._next_replay_id = 1
        self.replications: dict[int, ReplicationSession] = {}  # replication id -> session
        self._replication_owner: dict[int, int] = {}  # replication id -> control session id
        self._pending_subscriptions: set[int] = set()  # recording subscriptions added asynchronously, not yet made
        self._images: collections.deque = collections.deque()  # (recording subscription id, image) from the client
        self._lock = threading.Lock()
        self.replay_buffer = np.zeros(ctx.file_io_max_length, dtype=np.uint8)
        self._next_mark_update_ns = 0
        self.counters = ArchiveCounters(aeron, self.archive_id,  # §4.4, read by aeron-stat and tests
                                        conductor_cycle_threshold_ns=ctx.conductor_cycle_threshold_ns)
        # The stages of a driver whose network cycles run on this conductor's thread (a cluster member's:
        # ``ClusteredMediaDriver``), which recordings made from then on also run in (``RecordingSession``); None: none.
        self.recording_stages = None

    def role_name(self) -> str:
        return "archive-conductor"

    def on_start(self) -> None:
        pass

    # ---------------------------------------------------------------------------------------- duty cycle
    def do_work(self) -> int:
        now_ns = self.nano_clock()
        work = 0
        work += self.control_session_adapter.poll()
        if self._pending_subscriptions:
            work += self._on_pending_subscriptions()
        while self._images:
            subscription_id, image = self._images.popleft()
            if subscription_id in self._pending_subscriptions:  # made since: its OK goes before the EXTEND signal
                work += self._on_pending_subscriptions()
            work += self._start_recording_session(subscription_id, image)
        while self._gone_request_images:
            image = self._gone_request_images.popleft()
            for session in self.control_sessions.values():
                if session.request_image == (image.subscription_registration_id, image.session_id):
                    work += session.abort("its client's request publication is gone")
        for session_id, session in list(self.control_sessions.items()):
            work += session.do_work(now_ns)
            if session.state is ControlSessionState.DONE:
                self._close_control_session(session_id)
        for recording_id, recording in list(self.recordings.items()):
            work += recording.do_work()
            if recording.state is RecordingState.STOPPED:
                self._on_recording_stopped(recording_id, recording)
        for replay_session_id, replay in list(self.replays.items()):
            work += replay.do_work()
            if replay.state in (ReplayState.DONE, ReplayState.INACTIVE):
                self._end_replay(replay_session_id, replay)
        if self._replay_tokens:
            self._expire_replay_tokens(now_ns)
        for replication_id, replication in list(self.replications.items()):
            work += replication.do_work()
            if replication.is_done:
                self._end_replication(replication_id)
        self.counters.update_session_counts(len(self.control_sessions), len(self.recordings), len(self.replays))
        if now_ns >= self._next_mark_update_ns:
            self._next_mark_update_ns = now_ns + A.MARK_ACTIVITY_UPDATE_INTERVAL_MS * 1_000_000
            self.mark_file.update_activity_timestamp(self.epoch_clock())
        return work

    def add_idle_watch(self, watch) -> bool:
        """What the next idle cycle depends on (``agent/idle_watch.py``): a request arriving on a control image, a
        session's response publication connecting or not, the client conductor handling a driver event (new or
        gone images, on its own thread), a session's liveness check and the mark file's activity update, and each
        recording's next frame (a cluster member's log is recorded all its life). Replays and replications move
        data every cycle, and a subscription still being added awaits the driver's answer or its timeout: with any
        of them, or a clock other than the monotonic one a compiled wait reads, the archive idles a cycle at a
        time."""
        if self.nano_clock is not time.monotonic_ns or self.replays or self.replications or \
                self._replay_tokens or self._pending_subscriptions or self._images or self._gone_request_images:
            return False
        for session in self.control_sessions.values():
            if not session.add_idle_watch(watch):
                return False
        for recording in self.recordings.values():
            if not recording.add_idle_watch(watch):
                return False
        self.aeron.add_idle_watch(watch)
        for subscription in self.control_subscriptions:
            subscription.add_idle_watch(watch)
        watch.run_by(self._next_mark_update_ns)
        return True

    def record_error(self, error: BaseException | str) -> None:
        self.counters.on_error()
        self.mark_file.error_log.record(error)
        log.warning("error recorded in the error log: %s", error)

    # ------------------------------------------------------------------------------------------ requests
    def on_connect_request(self, request_image: tuple[int, int], correlation_id: int, response_stream_id: int,
                           version: int, response_channel: str) -> None:
        self._connect(request_image, correlation_id, response_stream_id, version, response_channel, b"")

    def on_auth_connect_request(self, request_image: tuple[int, int], correlation_id: int, response_stream_id: int,
                                version: int, response_channel: str, encoded_credentials: bytes) -> None:
        self._connect(request_image, correlation_id, response_stream_id, version, response_channel,
                      encoded_credentials)

    def _connect(self, request_image: tuple[int, int], correlation_id: int, response_stream_id: int, version: int,
                 response_channel: str, encoded_credentials: bytes) -> None:
        major = version >> 16
        now_ns = self.nano_clock()
        control_session_id = self._next_control_session_id
        self._next_control_session_id += 1
        try:
            publication = self.aeron.add_exclusive_publication(response_channel, response_stream_id)
        except AeronError as exc:
            self.record_error(f"connect from response channel {response_channel!r}: {exc}")
            return
        session = ControlSession(control_session_id=control_session_id, correlation_id=correlation_id,
                                 publication=publication, connect_timeout_ns=self.ctx.connect_timeout_ns,
                                 liveness_interval_ns=self.ctx.session_liveness_check_interval_ns, now_ns=now_ns,
                                 authenticator=self.authenticator, epoch_clock_ms=self.epoch_clock,
                                 on_error=self.record_error)
        session.request_image = request_image
        self.control_sessions[control_session_id] = session
        log.info("control session %d connecting (response channel %s stream %d)", control_session_id,
                 response_channel, response_stream_id)
        if major != A.ARCHIVE_PROTOCOL_VERSION >> 16:
            session.reject(f"client version {major}.x is not compatible with the archive's "
                           f"{A.ARCHIVE_PROTOCOL_VERSION >> 16}.x", "GENERIC")
            return
        session.on_connect_request(bytes(encoded_credentials))  # a plain ConnectRequest has none

    def on_challenge_response(self, session, correlation_id: int, encoded_credentials: bytes, **_) -> None:
        if not session.on_challenge_response(encoded_credentials, correlation_id):
            self.record_error(f"ChallengeResponse for control session id={session.control_session_id}, which "
                              f"is {session.state.value}, not challenged")

    def on_close_session_request(self, session, **_) -> None:
        session.state = ControlSessionState.DONE

    def on_keep_alive_request(self, session, **_) -> None:
        pass  # traffic on the session is all a keep-alive has to be

    def on_archive_id_request(self, session, correlation_id: int, **_) -> None:
        session.respond(correlation_id, OK, self.archive_id)

    # -------------------------------------------------------------------------------------- recording
    def _may_record(self, session, correlation_id: int, channel: str, stream_id: int) -> bool:
        """Whether a recording subscription may be added (room, storage, not already recorded); else the error."""
        if len(self.recordings) >= self.ctx.max_concurrent_recordings:
            session.error(correlation_id, "MAX_RECORDINGS",
                          f"max concurrent recordings reached: {self.ctx.max_concurrent_recordings}")
            return False
        free = shutil.disk_usage(self.ctx.archive_dir).free
        if free < self.ctx.low_storage_space_threshold:
            session.error(correlation_id, "STORAGE_SPACE",
                          f"insufficient usable storage for new recording: {free} bytes free < threshold "
                          f"{self.ctx.low_storage_space_threshold}")
            return False
        stripped = strip_channel(channel)
        for existing in self.recording_subscriptions.values():
            if existing.stripped_channel == stripped and existing.stream_id == stream_id:
                session.error(correlation_id, "ACTIVE_SUBSCRIPTION",
                              f"recording exists for streamId={stream_id} channel={stripped}")
                return False
        return True

    def _start_recording(self, session, correlation_id: int, channel: str, stream_id: int, auto_stop: bool,
                         source_location: int, extend_recording_id: int = A.NULL_VALUE) -> RecordingSubscription | None:
        """Subscribe to record ``channel``/``stream_id``; answers OK with the subscription id, or the error."""
        if not self._may_record(session, correlation_id, channel, stream_id):
            return None
        holder: list[int] = []

        def on_image(image):  # client conductor thread: hand over to the archive's
            with self._lock:
                self._images.append((holder[0] if holder else None, image))

        subscription = self.aeron.add_subscription(recording_subscription_channel(channel, source_location),
                                                   stream_id, available_image_handler=on_image)
        holder.append(subscription.registration_id)
        with self._lock:  # images that came before the id was known
            self._images = collections.deque((subscription.registration_id if s is None else s, i)
                                             for s, i in self._images)
        owner = RecordingSubscription(subscription, session.control_session_id, correlation_id, channel,
                                      strip_channel(channel), stream_id, auto_stop, extend_recording_id)
        self.recording_subscriptions[subscription.registration_id] = owner
        session.respond(correlation_id, OK, subscription.registration_id)
        return owner

    def _async_start_recording(self, session, correlation_id: int, channel: str, stream_id: int,
                               source_location: int, extend_recording_id: int) -> int | None:
        """``_start_recording`` (auto-stop) without waiting on the driver: the subscription's registration id, its
        owner kept with no subscription until ``_on_pending_subscriptions`` sees it made (then the OK goes out);
        None when refused (the error sent)."""
        if not self._may_record(session, correlation_id, channel, stream_id):
            return None

        def on_image(image):  # client conductor thread: hand over to the archive's
            with self._lock:
                self._images.append((image.subscription_registration_id, image))

        registration_id = self.aeron.async_add_subscription(recording_subscription_channel(channel, source_location),
                                                            stream_id, available_image_handler=on_image)
        self.recording_subscriptions[registration_id] = RecordingSubscription(
            None, session.control_session_id, correlation_id, channel, strip_channel(channel), stream_id, True,
            extend_recording_id)
        self._pending_subscriptions.add(registration_id)
        return registration_id

    def _on_pending_subscriptions(self) -> int:
        work = 0
        for registration_id in list(self._pending_subscriptions):
            owner = self.recording_subscriptions[registration_id]
            session = self.control_sessions.get(owner.control_session_id)
            try:
                subscription = self.aeron.get_subscription(registration_id)
            except AeronError as exc:  # refused by the driver, or no answer within the driver timeout
                self._pending_subscriptions.discard(registration_id)
                del self.recording_subscriptions[registration_id]
                message = (f"recording subscription for streamId={owner.stream_id} "
                           f"channel={owner.original_channel}: {exc}")
                self.record_error(message)
                if session is not None:
                    session.error(owner.correlation_id, "GENERIC", message)
                work += 1
                continue
            if subscription is not None:
                self._pending_subscriptions.discard(registration_id)
                owner.subscription = subscription
                if session is not None:
                    session.respond(owner.correlation_id, OK, registration_id)
                work += 1
        return work

    def recording_subscription(self, registration_id: int) -> RecordingSubscription | None:
        """A recording subscription's owner (its ``subscription`` None while being added); None when it is gone."""
        return self.recording_subscriptions.get(registration_id)

    def _close_subscription(self, registration_id: int, owner: RecordingSubscription) -> None:
        if owner.subscription is not None:
            owner.subscription.close()
        else:  # still being added: removed at the driver once made
            self._pending_subscriptions.discard(registration_id)
            self.aeron.async_remove_subscription(registration_id)

    def on_start_recording_request(self, session, correlation_id, stream_id, channel, source_location=LOCAL,
                                   **_) -> None:
        self._start_recording(session, correlation_id, channel, stream_id, False, source_location)

    def on_start_recording_request2(self, session, correlation_id, stream_id, auto_stop, channel,
                                    source_location=LOCAL, **_) -> None:
        self._start_recording(session, correlation_id, channel, stream_id, auto_stop == A.BOOLEAN_TRUE,
                              source_location)

    def _extension_error(self, recording_id: int, image) -> str | None:
        """Why ``image`` cannot continue recording ``recording_id``, or None."""
        d = self.catalog.descriptor(recording_id)
        for name, wanted, got in (("join position", d.stop_position, image.join_position),
                                  ("initial term id", d.initial_term_id, image.initial_term_id),
                                  ("term length", d.term_buffer_length, image.term_buffer_length),
                                  ("mtu", d.mtu_length, image.mtu_length)):
            if wanted != got:
                return f"cannot extend recording {recording_id}: image {name}={got}, the recording's is {wanted}"
        if recording_id in self.recordings:
            return f"cannot extend recording {recording_id}: it is being recorded"
        return None

    def _start_recording_session(self, subscription_id: int, image) -> int:
        owner = self.recording_subscriptions.get(subscription_id)
        if owner is None:
            return 0
        session = self.control_sessions.get(owner.control_session_id)
        recording_id = owner.extend_recording_id
        if recording_id != A.NULL_VALUE:
            error = self._extension_error(recording_id, image)
            if error is not None:
                if session is not None:
                    session.error(owner.correlation_id, "INVALID_EXTENSION", error)
                self.record_error(error)
                self._stop_subscription(subscription_id)
                return 1
            d = self.catalog.descriptor(recording_id)
            segment_length, start_position = d.segment_file_length, d.start_position
            self.catalog.update_stop_position(recording_id, A.NULL_POSITION, A.NULL_TIMESTAMP)  # active again
            signal = "EXTEND"
        else:
            segment_length = A.recording_segment_file_length(self.ctx.segment_file_length, image.term_buffer_length)
            start_position = image.join_position
            recording_id = self.catalog.add_recording(
                start_position=image.join_position, start_timestamp=self.epoch_clock(),
                initial_term_id=image.initial_term_id, segment_file_length=segment_length,
                term_buffer_length=image.term_buffer_length, mtu_length=image.mtu_length,
                session_id=image.session_id, stream_id=owner.stream_id, stripped_channel=owner.stripped_channel,
                original_channel=owner.original_channel, source_identity=image.source_identity)
            signal = "START"
        counter = self.counters.add_recording_position(recording_id, image.session_id, image.source_identity,
                                                       owner.stream_id, owner.stripped_channel)
        writer = RecordingWriter(self.ctx.archive_dir, recording_id, start_position, image.join_position,
                                 image.term_buffer_length, segment_length, self.ctx.record_checksum_algorithm)
        self.recordings[recording_id] = RecordingSession(
            catalog=self.catalog, recording_id=recording_id, image=image, writer=writer, position_counter=counter,
            file_io_max_length=self.ctx.file_io_max_length, epoch_clock=self.epoch_clock,
            subscription_id=subscription_id, on_write=self.counters.on_write, recording_events=self.recording_events,
            stream_id=owner.stream_id, original_channel=owner.original_channel, on_error=self.record_error,
            write_counters=self.counters.write_counters, stages=self.recording_stages)
        self._recording_owner[recording_id] = owner
        if session is not None:
            session.signal(owner.correlation_id, recording_id, subscription_id, image.join_position, signal)
        log.info("recording %d %s: %s stream %d session %d from position %d", recording_id,
                 "started" if signal == "START" else "extended", owner.original_channel, owner.stream_id,
                 image.session_id, image.join_position)
        return 1

    def _on_recording_stopped(self, recording_id: int, recording: RecordingSession) -> None:
        del self.recordings[recording_id]
        recording.close()
        log.info("recording %d stopped at position %d", recording_id, recording.position)
        owner = self._recording_owner.pop(recording_id, None)
        session = self.control_sessions.get(owner.control_session_id) if owner is not None else None
        if recording.error is not None:
            message = f"recording {recording_id} stopped at position {recording.position}: {recording.error}"
            self.record_error(message)
            if session is not None:  # the client that started it learns why (disk full, file size limit: STORAGE_SPACE)
                no_space = getattr(recording.error, "errno", None) in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
                session.error(owner.correlation_id, "STORAGE_SPACE" if no_space else "GENERIC", message)
        if owner is not None:
            if session is not None:
                session.signal(owner.correlation_id, recording_id, recording.subscription_id, recording.position,
                               "STOP")
            # A failed recording lets go of its image too: unpolled, it would hold the publisher back for good.
            if (owner.auto_stop or recording.error is not None) and \
                    recording.subscription_id in self.recording_subscriptions:
                self._stop_subscription(recording.subscription_id)
        self._close_released_subscription(recording.subscription_id)

    def _stop_subscription(self, subscription_id: int) -> bool:
        owner = self.recording_subscriptions.pop(subscription_id, None)
        if owner is None:
            return False
        for recording in self.recordings.values():
            if recording.subscription_id == subscription_id:
                recording.request_stop()
        self._close_subscription(subscription_id, owner)
        return True

    def on_extend_recording_request(self, session, correlation_id: int, recording_id: int, stream_id: int,
                                    channel: str, source_location: int = LOCAL, **_) -> None:
        self._extend(session, correlation_id, recording_id, stream_id, channel, False, source_location)

    def on_extend_recording_request2(self, session, correlation_id: int, recording_id: int, stream_id: int,
                                     auto_stop: int, channel: str, source_location: int = LOCAL, **_) -> None:
        self._extend(session, correlation_id, recording_id, stream_id, channel, auto_stop == A.BOOLEAN_TRUE,
                     source_location)

    def _extend(self, session, correlation_id: int, recording_id: int, stream_id: int, channel: str,
                auto_stop: bool, source_location: int) -> None:
        if not self._known(session, correlation_id, recording_id):
            return
        d = self.catalog.descriptor(recording_id)
        if recording_id in self.recordings or d.stop_position == A.NULL_POSITION:
            session.error(correlation_id, "ACTIVE_RECORDING",
                          f"cannot extend recording {recording_id}: it is being recorded")
            return
        if d.stream_id != stream_id:
            session.error(correlation_id, "INVALID_EXTENSION",
                          f"cannot extend recording {recording_id}: streamId={stream_id}, the recording's "
                          f"is {d.stream_id}")
            return
        self._start_recording(session, correlation_id, channel, stream_id, auto_stop, source_location, recording_id)

    def on_stop_recording_request(self, session, correlation_id, stream_id, channel, **_) -> None:
        stripped = strip_channel(channel)
        for subscription_id, owner in list(self.recording_subscriptions.items()):
            if owner.stripped_channel == stripped and owner.stream_id == stream_id:
                self._stop_subscription(subscription_id)
                session.respond(correlation_id, OK, 0)
                return
        session.error(correlation_id, "UNKNOWN_SUBSCRIPTION",
                      f"no recording found for streamId={stream_id} channel={stripped}")

    def on_stop_recording_subscription_request(self, session, correlation_id, subscription_id, **_) -> None:
        if self._stop_subscription(subscription_id):
            session.respond(correlation_id, OK, 0)
        else:
            session.error(correlation_id, "UNKNOWN_SUBSCRIPTION",
                          f"no recording subscription id={subscription_id}")

    def on_stop_recording_by_identity_request(self, session, correlation_id, recording_id, **_) -> None:
        if not self.catalog.has_recording(recording_id):
            session.error(correlation_id, "UNKNOWN_RECORDING", f"unknown recording id={recording_id}")
            return
        # As Aeron: the recording's subscription goes with it (the stream can be recorded again at once), closed
        # when no other image's recording still reads from it; OK answers 1 when a subscription was found.
        recording = self.recordings.get(recording_id)
        found = 0
        if recording is not None:
            recording.request_stop()
            owner = self.recording_subscriptions.pop(recording.subscription_id, None)
            if owner is not None:
                found = 1
                self._released_subscriptions[recording.subscription_id] = owner
                self._close_released_subscription(recording.subscription_id, stopping=recording_id)
        session.respond(correlation_id, OK, found)

    def _close_released_subscription(self, subscription_id: int, stopping: int = A.NULL_VALUE) -> None:
        """Close a subscription no longer recorded from once no recording (but ``stopping``) still reads it."""
        if subscription_id in self._released_subscriptions and not any(
                r.subscription_id == subscription_id and recording_id != stopping
                for recording_id, r in self.recordings.items()):
            self._released_subscriptions.pop(subscription_id).subscription.close()

    # ----------------------------------------------------------------------------------------- queries
    def _known(self, session, correlation_id: int, recording_id: int) -> bool:
        if self.catalog.has_recording(recording_id) and \
                self.catalog.state(recording_id) == A.RECORDING_STATE_VALID:
            return True
        session.error(correlation_id, "UNKNOWN_RECORDING", f"unknown recording id={recording_id}")
        return False

    def on_list_recordings_request(self, session, correlation_id, from_recording_id, record_count, **_) -> None:
        self._list(session, correlation_id, from_recording_id, record_count, lambda d: True)

    def on_list_recordings_for_uri_request(self, session, correlation_id, from_recording_id, record_count, stream_id,
                                           channel, **_) -> None:
        self._list(session, correlation_id, from_recording_id, record_count,
                   lambda d: d.stream_id == stream_id and channel in d.stripped_channel)

    def _list(self, session, correlation_id: int, from_recording_id: int, count: int, matches) -> None:
        sent, last = 0, from_recording_id - 1
        for recording_id in self.catalog.recording_ids():
            if recording_id < from_recording_id or sent >= count:
                continue
            last = recording_id
            if self.catalog.state(recording_id) != A.RECORDING_STATE_VALID:
                continue
            if matches(self.catalog.descriptor(recording_id)):
                session.send_descriptor(correlation_id, self.catalog.descriptor_body(recording_id))
                sent += 1
        if sent < count:
            session.respond(correlation_id, RECORDING_UNKNOWN, max(last + 1, from_recording_id))

    def on_list_recording_request(self, session, correlation_id, recording_id, **_) -> None:
        if self.catalog.has_recording(recording_id) and \
                self.catalog.state(recording_id) == A.RECORDING_STATE_VALID:
            session.send_descriptor(correlation_id, self.catalog.descriptor_body(recording_id))
        else:
            session.respond(correlation_id, RECORDING_UNKNOWN, recording_id)

    def on_recording_position_request(self, session, correlation_id, recording_id, **_) -> None:
        recording = self.recordings.get(recording_id)
        session.respond(correlation_id, OK, recording.position if recording is not None else A.NULL_POSITION)

    def on_stop_position_request(self, session, correlation_id, recording_id, **_) -> None:
        if self._known(session, correlation_id, recording_id):
            session.respond(correlation_id, OK, self.catalog.stop_position(recording_id))

    def on_start_position_request(self, session, correlation_id, recording_id, **_) -> None:
        if self._known(session, correlation_id, recording_id):
            session.respond(correlation_id, OK, self.catalog.descriptor(recording_id).start_position)

    def on_max_recorded_position_request(self, session, correlation_id, recording_id, **_) -> None:
        if self._known(session, correlation_id, recording_id):
            recording = self.recordings.get(recording_id)
            position = recording.position if recording is not None else self.catalog.stop_position(recording_id)
            session.respond(correlation_id, OK, position)

    def on_find_last_matching_recording_request(self, session, correlation_id, min_recording_id, session_id,
                                                stream_id, channel, **_) -> None:
        found = A.NULL_VALUE
        for recording_id in reversed(self.catalog.recording_ids()):
            if recording_id < min_recording_id:
                break
            if self.catalog.state(recording_id) != A.RECORDING_STATE_VALID:
                continue
            d = self.catalog.descriptor(recording_id)
            if d.stream_id == stream_id and channel in d.stripped_channel and \
                    (session_id == A.NULL_VALUE or d.session_id == session_id):
                found = recording_id
                break
        session.respond(correlation_id, OK, found)

    def on_list_recording_subscriptions_request(self, session, correlation_id, pseudo_index, subscription_count,
                                                apply_stream_id, stream_id, channel, **_) -> None:
        matching = [(sid, s) for sid, s in sorted(self.recording_subscriptions.items())
                    if (not apply_stream_id or s.stream_id == stream_id) and channel in s.stripped_channel]
        chosen = matching[pseudo_index:pseudo_index + subscription_count]
        for subscription_id, s in chosen:
            session.send_subscription_descriptor(correlation_id, subscription_id, s.stream_id, s.stripped_channel)
        if len(chosen) < subscription_count:
            session.respond(correlation_id, SUBSCRIPTION_UNKNOWN, pseudo_index + len(chosen))

    # ------------------------------------------------------------------------------- truncate / purge
    def on_truncate_recording_request(self, session, correlation_id, recording_id, position, **_) -> None:
        if not self._known(session, correlation_id, recording_id):
            return
        if recording_id in self.recordings:
            session.error(correlation_id, "ACTIVE_RECORDING",
                          f"cannot truncate recording id={recording_id}: it is being recorded")
            return
        d = self.catalog.descriptor(recording_id)
        if position % 32 or not d.start_position <= position <= d.stop_position:
            session.error(correlation_id, "GENERIC",
                          f"invalid truncate position={position}: must be a multiple of 32 in "
                          f"[start={d.start_position}, stop={d.stop_position}]")
            return
        if any(r.descriptor.recording_id == recording_id for r in self.replays.values()):
            session.error(correlation_id, "GENERIC",
                          f"cannot truncate recording id={recording_id}: it is being replayed")
            return
        self.catalog.update_stop_position(recording_id, position, self.epoch_clock())
        deleted = truncate_segment_files(self.ctx.archive_dir, recording_id, d.start_position, d.stop_position,
                                         position, d.term_buffer_length, d.segment_file_length)
        self._deleted(session, correlation_id, recording_id, deleted)

    def on_purge_recording_request(self, session, correlation_id, recording_id, **_) -> None:
        if not self._known(session, correlation_id, recording_id):
            return
        if recording_id in self.recordings or any(
                r.descriptor.recording_id == recording_id for r in self.replays.values()):
            session.error(correlation_id, "ACTIVE_RECORDING",
                          f"cannot purge recording id={recording_id}: it is being recorded or replayed")
            return
        self.catalog.change_state(recording_id, A.RECORDING_STATE_DELETED)
        self._deleted(session, correlation_id, recording_id, delete_segment_files(self.ctx.archive_dir, recording_id))

    # ------------------------------------------------------------------------------- segment operations
    def on_detach_segments_request(self, session, correlation_id, recording_id, new_start_position, **_) -> None:
        """Move the start position to a later segment boundary: the files before it stay, detached."""
        if self._known(session, correlation_id, recording_id) and \
                self._valid_detach(session, correlation_id, recording_id, new_start_position):
            self.catalog.update_start_position(recording_id, new_start_position)
            session.respond(correlation_id, OK, 0)

    def on_delete_detached_segments_request(self, session, correlation_id, recording_id, **_) -> None:
        """Delete the files before the start position, from the lowest there is."""
        if not self._known(session, correlation_id, recording_id):
            return
        lowest = lowest_segment_base(self.ctx.archive_dir, recording_id)
        d = self.catalog.descriptor(recording_id)
        bases = [] if lowest is None else detached_segment_bases(lowest, d.start_position, d.term_buffer_length,
                                                                 d.segment_file_length)
        self._delete_segments(session, correlation_id, recording_id, bases)

    def on_purge_segments_request(self, session, correlation_id, recording_id, new_start_position, **_) -> None:
        """A detach and the deletion of the files it left behind, at once."""
        if not (self._known(session, correlation_id, recording_id) and
                self._valid_detach(session, correlation_id, recording_id, new_start_position)):
            return
        d = self.catalog.descriptor(recording_id)
        self.catalog.update_start_position(recording_id, new_start_position)
        self._delete_segments(session, correlation_id, recording_id, detached_segment_bases(
            d.start_position, new_start_position, d.term_buffer_length, d.segment_file_length))

    def on_attach_segments_request(self, session, correlation_id, recording_id, **_) -> None:
        """Take back the detached files still there before the start position; OK answers how many."""
        if not self._known(session, correlation_id, recording_id):
            return
        d = self.catalog.descriptor(recording_id)
        count = 0
        try:
            for start_position in attach_start_positions(self.ctx.archive_dir, recording_id, d.start_position,
                                                         d.segment_file_length, d.term_buffer_length,
                                                         d.initial_term_id, d.stream_id):
                self.catalog.update_start_position(recording_id, start_position)  # each file as it is found good
                count += 1
        except SegmentFileError as exc:
            session.error(correlation_id, "GENERIC", str(exc))
            return
        session.respond(correlation_id, OK, count)

    def on_migrate_segments_request(self, session, correlation_id, src_recording_id, dst_recording_id, **_) -> None:
        """Give a stopped recording's files to the recording it adjoins (either end), on a segment boundary; the
        source is left empty (stop = start). OK answers the files moved."""
        if not (self._known(session, correlation_id, src_recording_id) and
                self._known(session, correlation_id, dst_recording_id)):
            return
        src, dst = self.catalog.descriptor(src_recording_id), self.catalog.descriptor(dst_recording_id)
        error = _migrate_error(src, dst)
        if error is not None:
            session.error(correlation_id, "GENERIC", error)
            return
        try:
            moved, empty = move_segments(self.ctx.archive_dir, src_recording_id, dst_recording_id, src.start_position,
                                         src.stop_position, src.term_buffer_length, src.segment_file_length)
        except SegmentFileError as exc:
            session.error(correlation_id, "GENERIC", str(exc))
            return
        if src.stop_position == dst.start_position:
            self.catalog.update_start_position(dst_recording_id, src.start_position)
        else:
            self.catalog.update_stop_position(dst_recording_id, src.stop_position, dst.stop_timestamp)
        self.catalog.update_stop_position(src_recording_id, src.start_position, src.stop_timestamp)
        session.respond(correlation_id, OK, moved)
        failed = delete_segments(self.ctx.archive_dir, src_recording_id, empty)
        self._delete_failed(session, correlation_id, failed)
        if moved > 0 or empty:  # as Aeron: nothing moved and nothing to delete, no signal
            session.signal(correlation_id, src_recording_id, A.NULL_VALUE, A.NULL_VALUE, "DELETE")

    def _valid_detach(self, session, correlation_id: int, recording_id: int, position: int) -> bool:
        """Aeron's rules for a new start position: on a segment boundary past the first segment, not past the
        segment being recorded (or the last one), nor past the segment a replay of the recording is reading."""
        d = self.catalog.descriptor(recording_id)
        start, term_length, segment_length = d.start_position, d.term_buffer_length, d.segment_file_length
        lower_bound = A.segment_file_base_position(start, start, term_length, segment_length) + segment_length
        if position != A.segment_file_base_position(start, position, term_length, segment_length):
            session.error(correlation_id, "GENERIC", f"invalid segment start: newStartPosition={position}")
            return False
        if position < lower_bound:
            session.error(correlation_id, "GENERIC",
                          f"invalid detach: newStartPosition={position} lowerBound={lower_bound}")
            return False
        end = self._recorded_position(recording_id)
        upper_bound = A.segment_file_base_position(start, end, term_length, segment_length)
        if position > upper_bound:
            session.error(correlation_id, "GENERIC",
                          f"invalid detach: in use, newStartPosition={position} upperBound={upper_bound}")
            return False
        reading = [(A.segment_file_base_position(r.descriptor.start_position, r.position, term_length,
                                                 segment_length), r) for r in self.replays.values()
                   if r.descriptor.recording_id == recording_id]
        reading = [(base, r) for base, r in reading if position > base]
        if reading:
            base, replay = min(reading, key=lambda item: item[0])
            publication = replay.publication
            session_id = publication.session_id - (1 << 32) if publication.session_id >= 1 << 31 else \
                publication.session_id
            session.error(correlation_id, "GENERIC",
                          f"invalid detach: replay in progress -  state={replay.state.name} "
                          f"newStartPosition={position} upperBound={base} sessionId={session_id} "
                          f"streamId={publication.stream_id} channel={publication.channel}")
            return False
        return True

    def _delete_segments(self, session, correlation_id: int, recording_id: int, bases: list[int]) -> None:
        """Answer with how many segment files go, delete them, then signal DELETE (Aeron's order: a file that
        could not be deleted is an ERROR between the two)."""
        session.respond(correlation_id, OK, len(bases))
        self._delete_failed(session, correlation_id, delete_segments(self.ctx.archive_dir, recording_id, bases))
        session.signal(correlation_id, recording_id, A.NULL_VALUE, A.NULL_VALUE, "DELETE")

    def _delete_failed(self, session, correlation_id: int, failed) -> None:
        for path in failed:
            message = f"unable to delete segment file: {path}"
            session.error(correlation_id, "GENERIC", message)
            self.record_error(message)

    @staticmethod
    def _deleted(session, correlation_id: int, recording_id: int, file_count: int) -> None:
        """Answer a truncate or purge as Aeron does: OK with the number of segment files deleted, then (the files
        gone) the DELETE signal, its subscription id and position null."""
        session.respond(correlation_id, OK, file_count)
        session.signal(correlation_id, recording_id, A.NULL_VALUE, A.NULL_VALUE, "DELETE")

    # ---------------------------------------------------------------------------------------- replay
    def on_replay_token_request(self, session, correlation_id: int, recording_id: int, **_) -> None:
        """A token, good for one connect timeout, by which a replay request on a response channel names this
        session and recording; OK answers it."""
        token = A.NULL_VALUE
        while token == A.NULL_VALUE or token in self._replay_tokens:
            token = secrets.randbits(64) - (1 << 63)
        self._replay_tokens[token] = (recording_id, session.control_session_id,
                                      self.nano_clock() + self.ctx.connect_timeout_ns)
        session.respond(correlation_id, OK, token)

    def _replay_session(self, session, correlation_id: int, recording_id: int, replay_token: int, channel: str):
        """The session a replay request is for: with a token on a response channel (control-mode=response), the
        one that was given the token for this recording within the connect timeout; else the request's own. None
        (the request answered with an ERROR, and recorded, where Aeron only records it) for a token unknown,
        expired or of another recording."""
        if replay_token == A.NULL_VALUE or ChannelUri.parse(channel).get("control-mode") != "response":
            return session
        recording, control_session_id, deadline_ns = self._replay_tokens.get(replay_token, (None, None, 0))
        owner = self.control_sessions.get(control_session_id)
        if recording != recording_id or self.nano_clock() >= deadline_ns or owner is None:
            message = f"Unknown session or token timeout for replayToken={replay_token}"
            session.error(correlation_id, "GENERIC", message)
            self.record_error(message)
            return None
        return owner

    def _expire_replay_tokens(self, now_ns: int) -> None:
        for token, (_, _, deadline_ns) in list(self._replay_tokens.items()):
            if deadline_ns <= now_ns:
                del self._replay_tokens[token]

    def on_replay_request(self, session, correlation_id: int, recording_id: int, position: int, length: int,
                          replay_stream_id: int, file_io_max_length: int, replay_channel: str,
                          replay_token: int = A.NULL_VALUE, **_) -> None:
        session = self._replay_session(session, correlation_id, recording_id, replay_token, replay_channel)
        if session is None:
            return
        self._start_replay(session, correlation_id, recording_id, position, length, replay_stream_id,
                           file_io_max_length, replay_channel, bound=None)

    def on_bounded_replay_request(self, session, correlation_id: int, recording_id: int, position: int, length: int,
                                  limit_counter_id: int, replay_stream_id: int, file_io_max_length: int,
                                  replay_channel: str, replay_token: int = A.NULL_VALUE, **_) -> None:
        session = self._replay_session(session, correlation_id, recording_id, replay_token, replay_channel)
        if session is None:
            return
        counters = self.aeron.counters_reader
        try:
            counters.get_counter_value(limit_counter_id)
        except (AeronError, ValueError):
            session.error(correlation_id, "GENERIC", f"limit counter id={limit_counter_id} is not a counter")
            return
        self._start_replay(session, correlation_id, recording_id, position, length, replay_stream_id,
                           file_io_max_length, replay_channel,
                           bound=lambda: counters.get_counter_value(limit_counter_id))

    def _start_replay(self, session, correlation_id: int, recording_id: int, position: int, length: int,
                      replay_stream_id: int, file_io_max_length: int, channel: str, bound) -> None:
        if not self._known(session, correlation_id, recording_id):
            return
        if len(self.replays) >= self.ctx.max_concurrent_replays:
            session.error(correlation_id, "MAX_REPLAYS",
                          f"max concurrent replays reached: {self.ctx.max_concurrent_replays}")
            return
        d = self.catalog.descriptor(recording_id)
        active = self.recordings.get(recording_id)
        error = replay_position_error(d, position, length, active.position if active is not None else None)
        if error is not None:
            session.error(correlation_id, "GENERIC", error)
            return
        if 0 < file_io_max_length < d.mtu_length:
            session.error(correlation_id, "GENERIC",
                          f"fileIoMaxLength={file_io_max_length} must be >= the recording's mtu={d.mtu_length}")
            return
        start = d.start_position if position == A.NULL_POSITION else position
        publication = self.aeron.add_exclusive_publication(replay_channel(channel, d, start),
                                                           replay_stream_id)
        replay_id = self._next_replay_id
        self._next_replay_id += 1
        replay_session_id = (replay_id << 32) | (publication.session_id & 0xFFFFFFFF)
        buffer = self.replay_buffer if file_io_max_length <= 0 else \
            self.replay_buffer[:min(file_io_max_length, self.replay_buffer.size)]
        self.replays[replay_session_id] = ReplaySession(
            replay_session_id=replay_session_id, descriptor=d, publication=publication,
            archive_dir=self.ctx.archive_dir, position=position, length=length,
            replay_buffer=buffer, stop_position=lambda: self.catalog.stop_position(recording_id),
            recorded_position=lambda: self._recorded_position(recording_id), bound=bound,
            checksum_algorithm=self.ctx.replay_checksum_algorithm, connect_timeout_ns=self.ctx.connect_timeout_ns,
            nano_clock=self.nano_clock, on_read=self.counters.on_read)
        self._replay_owner[replay_session_id] = (session.control_session_id, correlation_id)
        session.respond(correlation_id, OK, replay_session_id)
        log.info("replay %d of recording %d started from position %d on %s stream %d", replay_session_id,
                 recording_id, start, channel, replay_stream_id)

    def _recorded_position(self, recording_id: int) -> int:
        recording = self.recordings.get(recording_id)
        return recording.position if recording is not None else self.catalog.stop_position(recording_id)

    def on_stop_replay_request(self, session, correlation_id, replay_session_id, **_) -> None:
        replay = self.replays.get(replay_session_id)
        if replay is None:
            session.error(correlation_id, "UNKNOWN_REPLAY",
                          f"unknown replay session id={replay_session_id}")
            return
        replay.request_stop()
        session.respond(correlation_id, OK, 0)

    def on_stop_all_replays_request(self, session, correlation_id, recording_id, **_) -> None:
        for replay in self.replays.values():
            if recording_id == A.NULL_VALUE or replay.descriptor.recording_id == recording_id:
                replay.request_stop()
        session.respond(correlation_id, OK, 0)

    def _end_replay(self, replay_session_id: int, replay: ReplaySession) -> None:
        del self.replays[replay_session_id]
        log.info("replay %d ended (%s)", replay_session_id, replay.state.name)
        control_session_id, correlation_id = self._replay_owner.pop(replay_session_id, (None, -1))
        if replay.state is ReplayState.INACTIVE:
            self.record_error(f"replay session {replay_session_id}: {replay.error}")
            session = self.control_sessions.get(control_session_id)
            if session is not None:  # answers the replay request's correlation id a second time, as an ERROR
                session.error(correlation_id, "GENERIC", f"replay session {replay_session_id}: {replay.error}")
        replay.close()

    # ------------------------------------------------------------------------------------------- replication
    def on_replicate_request(self, session, correlation_id: int, src_recording_id: int, dst_recording_id: int,
                             src_control_stream_id: int, src_control_channel: str, live_destination: str,
                             **_) -> None:
        self._replicate(session, correlation_id, src_recording_id, dst_recording_id, A.NULL_POSITION, A.NULL_VALUE,
                        A.NULL_VALUE, src_control_stream_id, src_control_channel, live_destination, "",
                        A.NULL_VALUE, A.NULL_VALUE, b"", "")

    def on_tagged_replicate_request(self, session, correlation_id: int, src_recording_id: int, dst_recording_id: int,
                                    channel_tag_id: int, subscription_tag_id: int, src_control_stream_id: int,
                                    src_control_channel: str, live_destination: str, **_) -> None:
        self._replicate(session, correlation_id, src_recording_id, dst_recording_id, A.NULL_POSITION,
                        channel_tag_id, subscription_tag_id, src_control_stream_id, src_control_channel,
                        live_destination, "", A.NULL_VALUE, A.NULL_VALUE, b"", "")

    def on_replicate_request2(self, session, correlation_id: int, src_recording_id: int, dst_recording_id: int,
                              stop_position: int, channel_tag_id: int, subscription_tag_id: int,
                              src_control_stream_id: int, src_control_channel: str, live_destination: str,
                              replication_channel: str, file_io_max_length: int = A.NULL_VALUE,
                              replication_session_id: int = A.NULL_VALUE, encoded_credentials: bytes = b"",
                              src_response_channel: str = "", **_) -> None:
        self._replicate(session, correlation_id, src_recording_id, dst_recording_id, stop_position, channel_tag_id,
                        subscription_tag_id, src_control_stream_id, src_control_channel, live_destination,
                        replication_channel, file_io_max_length, replication_session_id, encoded_credentials,
                        src_response_channel)

    def _replicate(self, session, correlation_id: int, src_recording_id: int, dst_recording_id: int,
                   stop_position: int, channel_tag_id: int, subscription_tag_id: int, src_control_stream_id: int,
                   src_control_channel: str, live_destination: str, replication_channel: str,
                   file_io_max_length: int, replication_session_id: int, encoded_credentials: bytes,
                   src_response_channel: str) -> None:
        """Aeron's ArchiveConductor.replicate: check the request, start a ``ReplicationSession``, answer OK with its
        replication id (its signals and errors carry that id)."""
        channel = replication_channel or self.ctx.replication_channel
        if not channel:
            session.error(correlation_id, "GENERIC", "no replication channel: the request names none and the "
                                                     "archive has no AERON_ARCHIVE_REPLICATION_CHANNEL")
            return
        if ChannelUri.parse(channel).get("control-mode") is not None:
            session.error(correlation_id, "GENERIC", f"replication channel {channel!r}: control-mode (response "
                                                     f"channels, multi-destination) is not supported by this archive")
            return
        has_recording = self.catalog.has_recording(dst_recording_id)
        if dst_recording_id != A.NULL_VALUE and not has_recording:
            session.error(correlation_id, "UNKNOWN_RECORDING", f"unknown destination recording id {dst_recording_id}")
            return
        if has_recording and (self.catalog.stop_position(dst_recording_id) == A.NULL_POSITION
                              or dst_recording_id in self.recordings):
            session.error(correlation_id, "ACTIVE_RECORDING", f"cannot replicate to active recording {dst_recording_id}")
            return
        response_channel = src_response_channel or self.ctx.archive_client_control_response_channel
        if not response_channel:
            session.error(correlation_id, "GENERIC", "no response channel for the source archive: the request names "
                                                     "none, and the archive has no AERON_ARCHIVE_CONTROL_RESPONSE_"
                                                     "CHANNEL nor a control channel to derive it from")
            return
        replication_id = self._next_control_session_id  # Aeron's one session id sequence
        self._next_control_session_id += 1
        timeout_ns = self.ctx.archive_client_message_timeout_ns

        # As Aeron's: a request's own credentials cannot answer a challenge; without them, the archive client's.
        source = AeronArchiveContext(
            control_request_channel=src_control_channel, control_request_stream_id=src_control_stream_id,
            control_response_channel=response_channel, message_timeout_ns=timeout_ns,
            credentials_supplier=ReplicationCredentialsSupplier(encoded_credentials) if encoded_credentials
            else NullCredentialsSupplier())

        def connect():
            return AsyncConnect(self.aeron, source, self.nano_clock)

        self.replications[replication_id] = ReplicationSession(
            replication_id=replication_id, src_recording_id=src_recording_id, dst_recording_id=dst_recording_id,
            stop_position=stop_position, channel_tag_id=channel_tag_id, subscription_tag_id=subscription_tag_id,
            replication_channel=channel, file_io_max_length=file_io_max_length,
            replication_session_id=replication_session_id, control_session=session, conductor=self,
            catalog=self.catalog, connect=connect, next_correlation_id=self.aeron.next_correlation_id,
            message_timeout_ns=timeout_ns, nano_clock=self.nano_clock, on_error=self.record_error,
            live_destination=live_destination)
        self._replication_owner[replication_id] = session.control_session_id
        session.respond(correlation_id, OK, replication_id)

    def on_stop_replication_request(self, session, correlation_id: int, replication_id: int, **_) -> None:
        replication = self.replications.get(replication_id)
        if replication is None:
            session.error(correlation_id, "UNKNOWN_REPLICATION", f"unknown replication id {replication_id}")
            return
        # As Aeron's ArchiveConductor.stopReplication: the OK goes out first, the session's REPLICATE_END (and then
        # its recording's STOP) when it closes.
        replication.abort("stop replication")
        session.respond(correlation_id, OK, 0)
        self._end_replication(replication_id)

    def extend_for_replication(self, session, replication_id: int, recording_id: int, stream_id: int,
                               channel: str) -> int | None:
        """A replication's recording subscription (Aeron's extendRecording, REMOTE, auto-stop), added without
        waiting on the driver: its registration id (``recording_subscription`` gives it once made; then the OK goes
        out) or None when refused (the error sent). Its image extends ``recording_id``; answers and signals carry
        the replication id."""
        d = self.catalog.descriptor(recording_id)
        if stream_id != d.stream_id:
            session.error(replication_id, "UNKNOWN_RECORDING", f"cannot extend recording {recording_id} with "
                                                               f"streamId={stream_id} for existing streamId={d.stream_id}")
            return None
        if recording_id in self.recordings:
            session.error(replication_id, "ACTIVE_RECORDING", f"cannot extend active recording {recording_id}")
            return None
        return self._async_start_recording(session, replication_id, channel, stream_id, REMOTE, recording_id)

    def stop_recording_subscription(self, subscription_id: int) -> None:
        self._stop_subscription(subscription_id)

    def _end_replication(self, replication_id: int) -> None:
        replication = self.replications.pop(replication_id)
        self._replication_owner.pop(replication_id, None)
        replication.close()

    # ------------------------------------------------------------------------------------------ closing
    def _close_control_session(self, control_session_id: int) -> None:
        session = self.control_sessions.pop(control_session_id)
        log.info("control session %d closed", control_session_id)
        for token, (_, owner, _) in list(self._replay_tokens.items()):
            if owner == control_session_id:
                del self._replay_tokens[token]
        for replay_session_id, (owner, _) in list(self._replay_owner.items()):
            if owner == control_session_id:
                self.replays[replay_session_id].request_stop()
        for replication_id, owner in list(self._replication_owner.items()):
            if owner == control_session_id:  # nobody left to hear its signals
                self.replications[replication_id].abort("its control session closed")
                self._end_replication(replication_id)
        session.close()

    def on_close(self) -> None:
        for replication_id in list(self.replications):
            self.replications[replication_id].abort("archive closing")
            self._end_replication(replication_id)
        for replay in self.replays.values():
            replay.close()
        for recording in self.recordings.values():
            recording.close()
        for registration_id, owner in (*self.recording_subscriptions.items(), *self._released_subscriptions.items()):
            self._close_subscription(registration_id, owner)
        for session in self.control_sessions.values():
            session.close()
        for subscription in self.control_subscriptions:
            subscription.close()
        if self.recording_events is not None:
            self.recording_events.publication.close()
        self.counters.close()
