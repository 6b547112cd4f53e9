"""The consensus module's snapshot taker: the state node 2 of the golden cluster held at its first snapshot,
written through ``snapshot_state``, is the message sequence of Aeron's recording 2 byte for byte; timers, pending
service messages and the missed-message report; back pressure is waited out with the idle strategy, and the offer
results a snapshot cannot wait out end it with Aeron's errors."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.consensus_module_snapshot import (
    ConsensusModuleSnapshotAdapter, ConsensusModuleSnapshotTaker, snapshot_state)
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout.publication_status import BACK_PRESSURED, CLOSED, MAX_POSITION_EXCEEDED, NOT_CONNECTED

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node" / "node-2" / "archive"
INT64_MIN = -(1 << 63)
RESPONSE_CHANNEL = "aeron:udp?endpoint=127.0.0.1:19000|term-length=64k"


def golden_messages(name: str) -> list[bytes]:
    """The payloads of the frames of a golden snapshot segment, in order, up to the first empty frame."""
    data, offset, messages = (GOLDEN / name).read_bytes(), 0, []
    while (frame_length := struct.unpack_from("<i", data, offset)[0]) > 0:
        messages.append(data[offset + 32:offset + frame_length])
        offset += (frame_length + 31) & ~31
    return messages


class Publication:
    """Takes offers (after the scripted refusals) and keeps each message's bytes."""

    term_buffer_length = 65536

    def __init__(self, refusals=()):
        self.refusals = list(refusals)
        self.messages: list[bytes] = []
        self.position = 0

    def offer(self, buffer, offset=0, length=None):
        if self.refusals:
            return self.refusals.pop(0)
        data = bytes(np.asarray(buffer, dtype=np.uint8)[offset:offset + (len(buffer) if length is None else length)]
                     if not isinstance(buffer, (bytes, bytearray)) else buffer[offset:offset + length])
        self.messages.append(data)
        self.position += (len(data) + 32 + 31) & ~31
        return self.position


class Idle:
    def __init__(self):
        self.idles = self.resets = 0

    def idle(self, work_count=None):
        self.idles += 1

    def reset(self):
        self.resets += 1


class Tracker:
    """What the taker reads of a PendingServiceMessageTracker."""

    def __init__(self, next_id, log_id, service_id=0, messages=(), size=0, leadership_term_id=3):
        self.next_service_session_id, self.log_service_session_id = next_id, log_id
        self.service_id, self._messages, self.size = service_id, list(messages), size
        self.leadership_term_id = leadership_term_id

    def for_each(self, consumer):
        for message in self._messages:
            consumer(*message)


class Timers:
    def __init__(self, timers):
        self.timers = timers

    def snapshot(self, taker):
        for correlation_id, deadline in self.timers:
            taker(correlation_id, deadline)


SESSION = SimpleNamespace(id=1, correlation_id=6, opened_log_position=256, close_reason=None,
                          response_stream_id=102, response_channel=RESPONSE_CHANNEL)


def test_the_golden_first_snapshot_state_is_written_as_aerons_recording_2():
    publication = Publication()
    taker = ConsensusModuleSnapshotTaker(publication, Idle())
    snapshot_state(taker, 9952, 0, ClusterTimeUnit.MILLIS, 1, 2, [SESSION], Timers([]),
                   [Tracker(INT64_MIN + 1, INT64_MIN)])
    assert publication.messages == golden_messages("2-0.rec")
    second = Publication()
    snapshot_state(ConsensusModuleSnapshotTaker(second, Idle()), 29344, 1, ClusterTimeUnit.MILLIS, 1, 2, [SESSION],
                   None, [Tracker(INT64_MIN + 1, INT64_MIN)])
    assert second.messages == golden_messages("4-0.rec")


class Loaded:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name[len("on_load_"):], *args))


def test_timers_trackers_and_pending_messages_read_back_through_the_adapter():
    messages = [((1 << 56) | 8, 5, b"p" * 10), ((1 << 56) | 9, (1 << 63) - 1, b"q" * 3000)]
    pending = [CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=3, cluster_session_id=c, timestamp=t,
                                                           payload=p)) for c, t, p in messages]
    publication = Publication()
    errors = []
    snapshot_state(ConsensusModuleSnapshotTaker(publication, Idle()), 4096, 3, ClusterTimeUnit.NANOS, 7, 11,
                   [SESSION], Timers([(77, 1000), (78, 2000)]),
                   [Tracker(10, 7, 0, messages, size=3200), Tracker(5, 4, 1)], errors.append)
    assert publication.messages[-4:-2] == pending  # as Aeron keeps them, after their tracker
    loaded = Loaded()
    adapter = ConsensusModuleSnapshotAdapter(loaded)
    for message in publication.messages:
        adapter.on_message(message, 0, len(message))
    assert loaded.calls == [
        ("begin_snapshot", 7, int(ClusterTimeUnit.NANOS)),
        ("consensus_module_state", 11, 10, 7, 3200),
        ("cluster_session", 1, 6, 256, -1, -(1 << 31), 102, RESPONSE_CHANNEL),
        ("timer", 77, 1000), ("timer", 78, 2000),
        ("pending_message_tracker", 10, 7, 3200, 0),
        ("pending_message", (1 << 56) | 8, len(pending[0])), ("pending_message", (1 << 56) | 9, len(pending[1])),
        ("pending_message_tracker", 5, 4, 0, 1),
        ("end_snapshot",),
    ]
    assert errors == []


def test_a_follower_that_missed_service_messages_reports_it_and_snapshots_the_log_next_id():
    publication = Publication()
    errors = []
    taker = ConsensusModuleSnapshotTaker(publication, Idle())
    taker.snapshot(Tracker(next_id=5, log_id=8, service_id=2), errors.append)
    assert [str(e) for e in errors] == ["Follower has missed 4 service message(s).  Please check service (id=2) "
                                        "determinism around the use of Cluster::offer"]
    decoded = CLUSTER.decode(publication.messages[0], 0, len(publication.messages[0]))
    assert decoded.next_service_session_id == 9


def test_back_pressure_is_waited_out_with_the_idle_strategy():
    publication, idle = Publication([BACK_PRESSURED, BACK_PRESSURED]), Idle()
    invoked = []
    taker = ConsensusModuleSnapshotTaker(publication, idle, SimpleNamespace(invoke=lambda: invoked.append(1)))
    taker.snapshot_timer(1, 2)
    assert len(publication.messages) == 1 and idle.idles == 2 and len(invoked) == 2


@pytest.mark.parametrize("result,error", [
    (NOT_CONNECTED, "publication is not connected"),
    (CLOSED, "publication is closed"),
    (MAX_POSITION_EXCEEDED, "publication at max position: term-length=65536"),
])
def test_refusals_a_snapshot_cannot_wait_out_end_it(result, error):
    taker = ConsensusModuleSnapshotTaker(Publication([result]), Idle())
    with pytest.raises(ClusterError, match=error):
        taker.mark_begin(1, 0, 0, 0, ClusterTimeUnit.MILLIS, 0)


# --------------------------------------------------------------------------------------------- record_snapshot
class RecordingArchive:
    """An archive client whose recording of the snapshot appears as a rec-pos counter (or never does) and records
    up to ``recorded`` (or stops at ``stop_at``)."""

    def __init__(self, counters, appears=True, recorded_all=True, stop_early=False):
        from aeron_numba.archive.archive_counters import rec_pos_key
        from aeron_numba.layout import archive as A

        self.counters, self.archive_id = counters, 3
        self.context = SimpleNamespace(message_timeout_ns=50_000_000)
        self._key = lambda session_id: rec_pos_key(21, session_id, "aeron:ipc", 3)
        self._type_id = A.RECORDING_POSITION_TYPE_ID
        self.appears, self.recorded_all, self.stop_early = appears, recorded_all, stop_early
        self.started = []
        self.counter_id = None

    def start_recording(self, channel, stream_id, source_location, auto_stop=False):
        self.started.append((channel, stream_id, source_location, auto_stop))
        if self.appears:
            self.counter_id = self.counters.allocate("rec-pos: 21", self._type_id, self._key(-77))
        return 1

    def on_written(self, position):
        if self.stop_early:
            self.counters.free(self.counter_id)
        elif self.recorded_all:
            self.counters.set_counter_value(self.counter_id, position)


def record_with(archive_kwargs):
    import numpy as np

    from aeron_numba.cluster.consensus_module_snapshot import record_snapshot
    from aeron_numba.kernels.counters import CountersManager

    counters = CountersManager(np.zeros(64 * 1024, dtype=np.uint8), np.zeros(16 * 1024, dtype=np.uint8),
                               free_to_reuse_timeout_ms=0)
    archive = RecordingArchive(counters, **archive_kwargs)
    publication = Publication()
    publication.session_id, publication.closed = -77, False
    publication.close = lambda: setattr(publication, "closed", True)
    aeron = SimpleNamespace(counters_reader=counters, conductor_agent_invoker=None,
                            add_exclusive_publication=lambda channel, stream_id: publication)

    def write(pub):
        snapshot_state(ConsensusModuleSnapshotTaker(pub, Idle()), 0, 0, ClusterTimeUnit.MILLIS, 0, 1, [], None, [])
        archive.on_written(pub.position)

    return archive, publication, lambda: record_snapshot(aeron, archive, "aeron:ipc?alias=snapshot", 107, write,
                                                         Idle())


def test_record_snapshot_records_the_session_of_its_publication_and_returns_the_recording():
    archive, publication, record = record_with({})
    assert record() == 21
    assert archive.started == [("aeron:ipc?alias=snapshot|session-id=-77", 107, "LOCAL", True)]
    assert len(publication.messages) == 3 and publication.closed


@pytest.mark.parametrize("kwargs,error", [
    (dict(appears=False), r"no recording of snapshot aeron:ipc\?alias=snapshot\|session-id=-77 stream 107"),
    (dict(recorded_all=False), r"recording 21 at 0 did not reach 288"),
    (dict(stop_early=True), "recording has stopped unexpectedly: 21"),
])
def test_record_snapshot_fails_by_name_when_the_archive_does_not_record_it(kwargs, error):
    _, publication, record = record_with(kwargs)
    with pytest.raises(ClusterError, match=error):
        record()
    assert publication.closed
