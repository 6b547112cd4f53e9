"""The consensus module's snapshot (spec/cluster.md §9): reading it (``ConsensusModuleSnapshotAdapter``), writing
it (``ConsensusModuleSnapshotTaker``, ``snapshot_state``, ``record_snapshot``) and loading it from the local
archive (``ConsensusModuleSnapshotLoader``), as Aeron's ConsensusModuleSnapshotAdapter, ConsensusModuleSnapshotTaker
(with its SnapshotTaker base) and ConsensusModuleAgent's takeSnapshot / snapshotState / loadSnapshot do.

A snapshot is an archive recording of schema 111 messages between a BEGIN and an END ``SnapshotMarker``:
``ConsensusModule`` (session id counters), one ``ClusterSession`` per open session, ``Timer`` per scheduled timer,
a ``PendingMessageTracker`` per service, and each pending service message behind a ``SessionMessageHeader``.
``ConsensusModuleSnapshotAdapter`` decodes whole messages (reassembled fragments) and calls its listener's
``on_load_*`` methods, as Aeron's ``ConsensusModuleSnapshotAdapter`` does; ClusterTool's
``describe-latest-cm-snapshot`` prints them, a restarting consensus module loads them. A snapshot that breaks the
marker rules or holds bytes that do not decode cannot be loaded: ``ClusterError``.

Writing: the taker encodes with the generated proxy (``codecs/cluster_proxies.ConsensusModuleSnapshotTaker``) and
offers to the snapshot's exclusive publication; while it is back-pressured (the archive records at its own pace)
the taker idles with its idle strategy, invoking the Aeron client's conductor when that runs in invoker mode;
NOT_CONNECTED, CLOSED and MAX_POSITION_EXCEEDED end the snapshot with a ``ClusterError`` as Aeron's ``checkResult``.
A snapshot is a control-rate stream (a handful of messages per session and timer), so it is written from Python.
What the taker reads of the consensus module's objects (Aeron's names in snake_case):

* a session: ``id``, ``correlation_id``, ``opened_log_position``, ``close_reason`` (a CloseReason code, or None
  for the schema's null value), ``response_stream_id``, ``response_channel`` (``cluster_session.ClusterSession``);
* a timer service: ``snapshot(taker)`` calling ``taker(correlation_id, deadline)`` per timer (``timer_service.py``);
* a pending service message tracker (``pending_service_message_tracker.PendingServiceMessageTracker``):
  ``next_service_session_id``, ``log_service_session_id``, ``service_id``, ``leadership_term_id``, ``size`` (the
  pending messages' length, what Aeron records as the capacity used: its ExpandableRingBuffer's ``size()``) and
  ``for_each(consumer(cluster_session_id, timestamp, payload))``; each pending message is written as Aeron keeps
  it, a SessionMessageHeader (timestamp: the append position, or Long.MAX_VALUE) with its payload.

``record_snapshot`` adds the publication on the snapshot channel and stream (107), has the local archive record it
(``start_recording`` LOCAL, auto-stop), finds the recording through its ``rec-pos`` counter, lets the caller write,
waits until every byte is recorded, closes the publication (which stops the recording) and returns the recording
id. Unlike Aeron's endless waits, these waits end at the archive client's message timeout with a ``ClusterError``.

Loading: ``ConsensusModuleSnapshotLoader`` replays the recording from its start on the consensus module's replay
channel and stream and feeds the adapter until the END marker; a replay image that closes first is ``ClusterError(
"snapshot ended unexpectedly")``, as is no replay image within the archive client's message timeout. Its listener
(the agent) has Aeron's ``ConsensusModuleSnapshotListener`` methods: ``on_load_consensus_module_state``,
``on_load_cluster_session``, ``on_load_timer``, ``on_load_pending_message_tracker`` as the adapter calls them,
``on_load_pending_message(cluster_session_id, timestamp, payload)`` (the loader decodes the message's header, so a
pending message is restored whole; the adapter gives only its length) and, when it has them,
``on_load_begin_snapshot(app_version, time_unit)`` (where Aeron checks the app version and the time unit) and
``on_load_end_snapshot()``.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from aeron_numba.agent.idle_strategy import idle_strategy_from_name
from aeron_numba.archive import recording_pos
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import SBE_INT32_NULL, ClusterTimeUnit
from aeron_numba.cluster.context import DEFAULT_IDLE_STRATEGY
from aeron_numba.cluster.log_replay import add_session_id, replay_session_id_to_session_id
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import ConsensusModuleSnapshotTaker as _SnapshotEncoder
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout import archive as A
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster_schema import ENUMS
from aeron_numba.layout.publication_status import CLOSED, MAX_POSITION_EXCEEDED, NOT_CONNECTED

#: The snapshot marker's typeId of a consensus module snapshot (ConsensusModule.Configuration.SNAPSHOT_TYPE_ID).
SNAPSHOT_TYPE_ID = C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID
_MARK = ENUMS["SnapshotMark"]


class ConsensusModuleSnapshotAdapter:
    """Feed it the snapshot's messages in order (``on_message``); ``is_done`` once the END marker is read.

    The listener has ``on_load_begin_snapshot(app_version, time_unit)``, ``on_load_consensus_module_state(
    next_session_id, next_service_session_id, log_service_session_id, pending_message_capacity)``,
    ``on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
    close_reason, response_stream_id, response_channel)``, ``on_load_timer(correlation_id, deadline)``,
    ``on_load_pending_message(cluster_session_id, length)``, ``on_load_pending_message_tracker(
    next_service_session_id, log_service_session_id, pending_message_capacity, service_id)`` and
    ``on_load_end_snapshot()``. Enum fields (time unit, close reason) are passed as the schema's codes.
    """

    RECEIVES = ("SessionMessageHeader", "SnapshotMarker", "ClusterSession", "Timer", "ConsensusModule",
                "ClusterMembers", "PendingMessageTracker")

    def __init__(self, listener):
        self.listener = listener
        self.in_snapshot = False
        self.is_done = False
        self._length = 0
        self._adapter = SbeAdapter(CLUSTER, self, self.RECEIVES, on_error=self._on_malformed,
                                   name="ConsensusModuleSnapshotAdapter")

    @staticmethod
    def _on_malformed(text: str) -> None:
        raise ClusterError(f"consensus module snapshot: {text}")

    def on_message(self, buffer, offset: int, length: int) -> None:
        """One whole message (a reassembled fragment) of the snapshot."""
        if self.is_done:
            return
        self._length = length
        message = self._adapter.decode(buffer, offset, length)
        self._adapter.dispatch(message)

    # ------------------------------------------------------------------------------- decoded messages
    def on_snapshot_marker(self, type_id, log_position, leadership_term_id, index, mark, time_unit, app_version):
        if type_id != SNAPSHOT_TYPE_ID:
            raise ClusterError(f"unexpected snapshot type: {type_id}")
        if mark == _MARK["BEGIN"]:
            if self.in_snapshot:
                raise ClusterError("already in snapshot")
            self.in_snapshot = True
            self.listener.on_load_begin_snapshot(app_version, time_unit)
        elif mark == _MARK["END"]:
            if not self.in_snapshot:
                raise ClusterError("missing begin snapshot")
            self.listener.on_load_end_snapshot()
            self.is_done = True

    def on_consensus_module(self, next_session_id, next_service_session_id, log_service_session_id,
                            pending_message_capacity):
        self.listener.on_load_consensus_module_state(next_session_id, next_service_session_id,
                                                     log_service_session_id, pending_message_capacity)

    def on_cluster_session(self, cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
                           close_reason, response_stream_id, response_channel):
        self.listener.on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position,
                                              time_of_last_activity, close_reason, response_stream_id,
                                              response_channel)

    def on_timer(self, correlation_id, deadline):
        self.listener.on_load_timer(correlation_id, deadline)

    def on_session_message_header(self, leadership_term_id, cluster_session_id, timestamp, payload):
        self.listener.on_load_pending_message(cluster_session_id, self._length)

    def on_cluster_members(self, member_id, high_member_id, cluster_members):
        pass  # written by older versions; the members now come from configuration (Aeron ignores it too)

    def on_pending_message_tracker(self, next_service_session_id, log_service_session_id, pending_message_capacity,
                                   service_id):
        self.listener.on_load_pending_message_tracker(next_service_session_id, log_service_session_id,
                                                      pending_message_capacity, service_id)


# ---------------------------------------------------------------------------------------------------- writing
def _code(value) -> int:
    """An enum field's wire code: an int, an IntEnum, or None for the schema's null value."""
    return SBE_INT32_NULL if value is None else int(value)


class SnapshotTaker:
    """Offers a snapshot's messages to ``publication``, idling while it is back-pressured (Aeron's
    ``service.SnapshotTaker``)."""

    def __init__(self, publication, idle_strategy=None, aeron_agent_invoker=None):
        self.publication = publication
        self.idle_strategy = idle_strategy or idle_strategy_from_name(DEFAULT_IDLE_STRATEGY)
        self.aeron_agent_invoker = aeron_agent_invoker
        self.encoder = _SnapshotEncoder(publication, retry_attempts=1)

    # ------------------------------------------------------------------------------------------ markers
    def mark_begin(self, snapshot_type_id: int, log_position: int, leadership_term_id: int, snapshot_index: int,
                   time_unit, app_version: int) -> None:
        self.mark_snapshot(snapshot_type_id, log_position, leadership_term_id, snapshot_index, _MARK["BEGIN"],
                           time_unit, app_version)

    def mark_end(self, snapshot_type_id: int, log_position: int, leadership_term_id: int, snapshot_index: int,
                 time_unit, app_version: int) -> None:
        self.mark_snapshot(snapshot_type_id, log_position, leadership_term_id, snapshot_index, _MARK["END"],
                           time_unit, app_version)

    def mark_snapshot(self, snapshot_type_id: int, log_position: int, leadership_term_id: int, snapshot_index: int,
                      snapshot_mark: int, time_unit, app_version: int) -> None:
        unit = ClusterTimeUnit(int(time_unit))
        self._send(lambda: self.encoder.snapshot_marker(snapshot_type_id, log_position, leadership_term_id,
                                                        snapshot_index, int(snapshot_mark), int(unit), app_version))

    # ---------------------------------------------------------------------------------------- plumbing
    def _send(self, send: Callable[[], bool]) -> None:
        self.idle_strategy.reset()
        while not send():
            self.check_result_and_idle(self.encoder.last_result)

    def offer(self, buffer, offset: int, length: int) -> None:
        """Offer bytes as they are (a pending service message), idling while back-pressured."""
        self.idle_strategy.reset()
        while True:
            result = self.publication.offer(buffer, offset, length)
            if result > 0:
                return
            self.check_result_and_idle(result)

    def check_result_and_idle(self, result: int) -> None:
        check_result(result, self.publication)
        if self.aeron_agent_invoker is not None:
            self.aeron_agent_invoker.invoke()
        self.idle_strategy.idle()


def check_result(position: int, publication) -> None:
    """Aeron's ``SnapshotTaker.checkResult``: the offer results a snapshot cannot wait out."""
    if position == NOT_CONNECTED:
        raise ClusterError("publication is not connected")
    if position == CLOSED:
        raise ClusterError("publication is closed")
    if position == MAX_POSITION_EXCEEDED:
        raise ClusterError(f"publication at max position: term-length={publication.term_buffer_length}")


class ConsensusModuleSnapshotTaker(SnapshotTaker):
    """The consensus module's snapshot messages (Aeron's ``ConsensusModuleSnapshotTaker``)."""

    def snapshot_consensus_module_state(self, next_session_id: int, next_service_session_id: int,
                                        log_service_session_id: int, pending_message_capacity: int) -> None:
        self._send(lambda: self.encoder.consensus_module(next_session_id, next_service_session_id,
                                                         log_service_session_id, pending_message_capacity))

    def snapshot_session(self, session) -> None:
        """One ClusterSession record; ``time_of_last_activity`` is written as the null value, as Aeron writes it
        (a loaded session's activity starts when it is loaded)."""
        self._send(lambda: self.encoder.cluster_session(
            session.id, session.correlation_id, session.opened_log_position, NULL_VALUE,
            _code(session.close_reason), session.response_stream_id, session.response_channel))

    def snapshot_timer(self, correlation_id: int, deadline: int) -> None:
        self._send(lambda: self.encoder.timer(correlation_id, deadline))

    __call__ = snapshot_timer  # the TimerSnapshotTaker that timer_service.snapshot calls

    def snapshot(self, tracker, error_handler: Callable[[Exception], None] | None = None) -> None:
        """A PendingMessageTracker record, then each pending message as Aeron keeps it: a SessionMessageHeader
        (the tracker's leadership term, the message's service session id, its append position as the timestamp)
        and the payload (Aeron's ``snapshot(tracker)``)."""
        messages: list[tuple] = []
        tracker.for_each(lambda cluster_session_id, timestamp, payload: messages.append(
            (cluster_session_id, timestamp, payload)))
        next_service_session_id = correct_next_service_session_id(tracker, bool(messages), error_handler)
        self._send(lambda: self.encoder.pending_message_tracker(
            next_service_session_id, tracker.log_service_session_id, tracker.size, tracker.service_id))
        for cluster_session_id, timestamp, payload in messages:
            self._send(lambda: self.encoder.session_message_header(tracker.leadership_term_id, cluster_session_id,
                                                                   timestamp, payload))

    def on_message(self, buffer, offset: int, length: int, head_offset: int = 0) -> bool:
        """A message already encoded, offered as it is (Aeron's MessageConsumer of the pending messages)."""
        self.offer(buffer, offset, length)
        return True


def correct_next_service_session_id(tracker, has_pending_messages: bool,
                                    error_handler: Callable[[Exception], None] | None) -> int:
    """With nothing pending the next service session id follows the last one in the log; a follower that is behind
    that missed service messages (its service is not deterministic): reported, as Aeron reports it."""
    next_id = tracker.next_service_session_id if has_pending_messages else tracker.log_service_session_id + 1
    missed = next_id - tracker.next_service_session_id
    if missed > 0 and error_handler is not None:
        error_handler(ClusterError(f"Follower has missed {missed} service message(s).  Please check service "
                                   f"(id={tracker.service_id}) determinism around the use of Cluster::offer"))
    return next_id


def snapshot_state(taker: ConsensusModuleSnapshotTaker, log_position: int, leadership_term_id: int, time_unit,
                   app_version: int, next_session_id: int, sessions: Iterable, timer_service,
                   pending_service_message_trackers: list, error_handler=None) -> None:
    """The whole consensus module snapshot in Aeron's order (``ConsensusModuleAgent.snapshotState``)."""
    taker.mark_begin(SNAPSHOT_TYPE_ID, log_position, leadership_term_id, 0, time_unit, app_version)
    if pending_service_message_trackers:
        first = pending_service_message_trackers[0]
        taker.snapshot_consensus_module_state(next_session_id, first.next_service_session_id,
                                              first.log_service_session_id, first.size)
    else:
        taker.snapshot_consensus_module_state(next_session_id, 0, 0, 0)
    for session in sessions:
        taker.snapshot_session(session)
    if timer_service is not None:
        timer_service.snapshot(taker.snapshot_timer)
    for tracker in pending_service_message_trackers:
        taker.snapshot(tracker, error_handler)
    taker.mark_end(SNAPSHOT_TYPE_ID, log_position, leadership_term_id, 0, time_unit, app_version)


def record_snapshot(aeron, archive, snapshot_channel: str, snapshot_stream_id: int, write: Callable,
                    idle_strategy=None, timeout_ns: int | None = None) -> int:
    """Record what ``write(publication)`` writes to a new exclusive publication on the snapshot channel through the
    local archive; returns the recording id once every byte is recorded (see the module docstring)."""
    idle = idle_strategy or idle_strategy_from_name(DEFAULT_IDLE_STRATEGY)
    invoker = aeron.conductor_agent_invoker
    timeout_ns = archive.context.message_timeout_ns if timeout_ns is None else timeout_ns
    counters = aeron.counters_reader
    publication = aeron.add_exclusive_publication(snapshot_channel, snapshot_stream_id)
    try:
        channel = add_session_id(snapshot_channel, publication.session_id)
        archive.start_recording(channel, snapshot_stream_id, "LOCAL", auto_stop=True)
        deadline_ns = time.monotonic_ns() + timeout_ns
        idle.reset()
        while (counter_id := recording_pos.find_counter_id_by_session(
                counters, publication.session_id, archive.archive_id)) == recording_pos.NULL_COUNTER_ID:
            if time.monotonic_ns() > deadline_ns:
                raise ClusterError(f"no recording of snapshot {channel} stream {snapshot_stream_id} within "
                                   f"{timeout_ns / 1e9:.1f}s")
            _idle(idle, invoker)
        recording_id = recording_pos.get_recording_id(counters, counter_id)
        write(publication)
        await_recording_complete(counters, counter_id, recording_id, publication.position, idle, invoker, timeout_ns)
    finally:
        publication.close()
    return recording_id


def await_recording_complete(counters, counter_id: int, recording_id: int, position: int, idle, invoker=None,
                             timeout_ns: int = 10_000_000_000) -> None:
    """Wait until the archive has recorded up to ``position``; the recording stopping first is an error."""
    deadline_ns = time.monotonic_ns() + timeout_ns
    idle.reset()
    while counters.get_counter_value(counter_id) < position:
        if not recording_pos.is_active(counters, counter_id, recording_id):
            raise ClusterError(f"recording has stopped unexpectedly: {recording_id}")
        if time.monotonic_ns() > deadline_ns:
            raise ClusterError(f"recording {recording_id} at {counters.get_counter_value(counter_id)} did not reach "
                               f"{position} within {timeout_ns / 1e9:.1f}s")
        _idle(idle, invoker)


def _idle(idle, invoker) -> None:
    if invoker is not None:
        invoker.invoke()
    idle.idle()


# ---------------------------------------------------------------------------------------------------- loading
FRAGMENT_LIMIT = 10


class ConsensusModuleSnapshotLoader:
    """Loads a snapshot recording of ``archive`` into ``listener`` (see the module docstring): ``load(snapshot)``
    at start-up, or ``start(recording_id)`` then ``poll()`` until ``is_done()`` and ``close()`` from a duty cycle.
    The replay goes to ``ctx.replay_channel`` / ``ctx.replay_stream_id`` through ``aeron``."""

    def __init__(self, listener, archive, aeron, ctx, idle_strategy=None, poll_archive_events=None):
        self.listener = listener
        self.archive = archive
        self.aeron = aeron
        self.replay_channel, self.replay_stream_id = ctx.replay_channel, ctx.replay_stream_id
        self.idle_strategy = idle_strategy or idle_strategy_from_name(DEFAULT_IDLE_STRATEGY)
        self._poll_archive_events = poll_archive_events
        self._assembler = FragmentAssembler(self._on_fragment)
        self.adapter: ConsensusModuleSnapshotAdapter | None = None
        self.recording_id = NULL_VALUE
        self.session_id = NULL_VALUE
        self.subscription = None
        self.image = None
        self._message = None

    # ------------------------------------------------------------------------------------------ driving
    def start(self, recording_id: int) -> None:
        """Replay ``recording_id`` from its start (to its end) to this loader."""
        self.recording_id = recording_id
        self.adapter = ConsensusModuleSnapshotAdapter(self)
        replay_session_id = self.archive.start_replay(recording_id, 0, A.NULL_LENGTH, self.replay_channel,
                                                      self.replay_stream_id)
        self.session_id = replay_session_id_to_session_id(replay_session_id)
        self.subscription = self.aeron.add_subscription(add_session_id(self.replay_channel, self.session_id),
                                                        self.replay_stream_id)
        self.image = None

    def poll(self) -> int:
        """Read what the replay has delivered; returns the fragments read."""
        if self.image is None:
            self.image = self.subscription.image_by_session_id(self.session_id)
            if self.image is None:
                return 0
        return self.image.poll(self._assembler, FRAGMENT_LIMIT)

    def is_done(self) -> bool:
        return self.adapter is not None and self.adapter.is_done

    def load(self, snapshot, timeout_ns: int | None = None) -> None:
        """Load ``snapshot`` (a ``recovery_plan.Snapshot``, or a recording id), polling until its END marker and
        idling while nothing comes; the replay is let go of in every case."""
        self.start(getattr(snapshot, "recording_id", snapshot))
        timeout_ns = self.archive.context.message_timeout_ns if timeout_ns is None else timeout_ns
        image_deadline_ns = time.monotonic_ns() + timeout_ns
        invoker = self.aeron.conductor_agent_invoker
        try:
            self.idle_strategy.reset()
            while True:
                fragments = self.poll()
                if self.is_done():
                    return
                if fragments == 0:
                    if self._poll_archive_events is not None:
                        self._poll_archive_events()
                    if self.image is None:
                        if time.monotonic_ns() > image_deadline_ns:
                            raise ClusterError(f"no replay of snapshot recording {self.recording_id} within "
                                               f"{timeout_ns / 1e9:.1f}s")
                    elif self.image.is_closed:
                        raise ClusterError(f"snapshot ended unexpectedly: recording {self.recording_id} at "
                                           f"position {self.image.position}")
                    if invoker is not None:
                        invoker.invoke()
                self.idle_strategy.idle(fragments)
        finally:
            self.close()

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None
        self.image = None

    # --------------------------------------------------------------------------- between replay and adapter
    def _on_fragment(self, buffer, offset: int, length: int, header) -> None:
        self._message = (buffer, offset, length)
        self.adapter.on_message(buffer, offset, length)

    def on_load_begin_snapshot(self, app_version, time_unit):
        handler = getattr(self.listener, "on_load_begin_snapshot", None)
        if handler is not None:
            handler(app_version, time_unit)

    def on_load_consensus_module_state(self, next_session_id, next_service_session_id, log_service_session_id,
                                       pending_message_capacity):
        self.listener.on_load_consensus_module_state(next_session_id, next_service_session_id,
                                                     log_service_session_id, pending_message_capacity)

    def on_load_cluster_session(self, cluster_session_id, correlation_id, opened_log_position, time_of_last_activity,
                                close_reason, response_stream_id, response_channel):
        self.listener.on_load_cluster_session(cluster_session_id, correlation_id, opened_log_position,
                                              time_of_last_activity, close_reason, response_stream_id,
                                              response_channel)

    def on_load_timer(self, correlation_id, deadline):
        self.listener.on_load_timer(correlation_id, deadline)

    def on_load_pending_message_tracker(self, next_service_session_id, log_service_session_id,
                                        pending_message_capacity, service_id):
        self.listener.on_load_pending_message_tracker(next_service_session_id, log_service_session_id,
                                                      pending_message_capacity, service_id)

    def on_load_pending_message(self, cluster_session_id, length):
        buffer, offset, _ = self._message
        message = CLUSTER.decode(buffer, offset, length)  # the adapter decoded it already: it is well formed
        self.listener.on_load_pending_message(cluster_session_id, message.timestamp, bytes(message.payload))

    def on_load_end_snapshot(self):
        handler = getattr(self.listener, "on_load_end_snapshot", None)
        if handler is not None:
            handler()
