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
from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotAdapter
from aeron_numba.cluster.consensus_module_snapshot_taker import ConsensusModuleSnapshotTaker, snapshot_state
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
    def __init__(self, next_id, log_id, service_id=0, messages=(), size=0):
        self.next_service_session_id, self.log_service_session_id = next_id, log_id
        self.service_id, self._messages, self._size = service_id, list(messages), size

    def pending_messages(self):
        return iter(self._messages)

    def size(self):
        return self._size


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
    pending = [CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=3, cluster_session_id=(1 << 56) | 8,
                                                           timestamp=5, payload=b"p" * n)) for n in (10, 3000)]
    publication = Publication()
    errors = []
    snapshot_state(ConsensusModuleSnapshotTaker(publication, Idle()), 4096, 3, ClusterTimeUnit.NANOS, 7, 11,
                   [SESSION], Timers([(77, 1000), (78, 2000)]),
                   [Tracker(10, 7, 0, pending, size=3200), Tracker(5, 4, 1)], errors.append)
    assert publication.messages[-4:-2] == pending  # offered as they were, after their tracker
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
        ("pending_message", (1 << 56) | 8, len(pending[0])), ("pending_message", (1 << 56) | 8, len(pending[1])),
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
