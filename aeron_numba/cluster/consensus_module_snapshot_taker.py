"""Writing the consensus module's snapshot (spec/cluster.md §9): Aeron's ``ConsensusModuleSnapshotTaker`` (with the
marker writing of its ``SnapshotTaker`` base), the order ``ConsensusModuleAgent.snapshotState`` writes the module's
state in (``snapshot_state``), and the recording of it by the local archive that ``ConsensusModuleAgent.takeSnapshot``
does (``record_snapshot``).

The messages are encoded by the generated proxy (``codecs/cluster_proxies.ConsensusModuleSnapshotTaker``) and offered
to the snapshot's exclusive publication; while the publication is back-pressured (the archive records at its own
pace) the taker idles with its idle strategy, invoking the Aeron client's conductor when it runs in invoker mode;
NOT_CONNECTED, CLOSED and MAX_POSITION_EXCEEDED end the snapshot with a ``ClusterError`` as Aeron's ``checkResult``.
A snapshot is a control-rate stream (a handful of messages per session and timer), so it is written from Python.

``snapshot_state`` takes what the agent keeps, by Aeron's names in snake_case:

``sessions``
    each with ``id``, ``correlation_id``, ``opened_log_position``, ``close_reason`` (a CloseReason code, an
    IntEnum, or None for the schema's null value), ``response_stream_id``, ``response_channel``; only OPEN and
    CLOSING sessions are given (the agent filters, as Aeron's does).
``timer_service``
    ``snapshot(taker)`` calling ``taker(correlation_id, deadline)`` per timer (``timer_service.py``).
``pending_service_message_trackers``
    each with ``next_service_session_id``, ``log_service_session_id``, ``service_id``, ``size()`` (the pending
    messages' buffer length, Aeron's ``ExpandableRingBuffer.size()``) and ``pending_messages()`` (each pending
    message's bytes: its SessionMessageHeader and payload, as appended to the log).

``record_snapshot`` adds the publication on the snapshot channel and stream (107 for the consensus module), has the
local archive record it (``start_recording`` LOCAL, auto-stop), finds the recording through its ``rec-pos`` counter,
lets the caller write, waits until the archive has recorded every byte, closes the publication (which stops the
recording) and returns the recording id for recording.log. Unlike Aeron's endless waits, the two waits end at the
archive client's message timeout with a ``ClusterError`` naming what did not happen.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from aeron_numba.agent.idle_strategy import idle_strategy_from_name
from aeron_numba.archive import recording_pos
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import SBE_INT32_NULL, ClusterTimeUnit
from aeron_numba.cluster.context import DEFAULT_IDLE_STRATEGY
from aeron_numba.cluster.log_replay import add_session_id
from aeron_numba.codecs.cluster_proxies import ConsensusModuleSnapshotTaker as _SnapshotEncoder
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster_schema import ENUMS
from aeron_numba.layout.publication_status import CLOSED, MAX_POSITION_EXCEEDED, NOT_CONNECTED

SNAPSHOT_TYPE_ID = C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID
_MARK = ENUMS["SnapshotMark"]


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
        """A PendingMessageTracker record, then each pending message as it is (Aeron's ``snapshot(tracker)``)."""
        messages = list(tracker.pending_messages())
        next_service_session_id = correct_next_service_session_id(tracker, bool(messages), error_handler)
        self._send(lambda: self.encoder.pending_message_tracker(
            next_service_session_id, tracker.log_service_session_id, tracker.size(), tracker.service_id))
        for message in messages:
            self.on_message(message, 0, len(message))

    def on_message(self, buffer, offset: int, length: int, head_offset: int = 0) -> bool:
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
                                              first.log_service_session_id, first.size())
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
