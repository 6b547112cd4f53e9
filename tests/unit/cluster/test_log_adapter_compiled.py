"""A follower's consensus module reading the log (``LogAdapter``) through the compiled read over a real IPC log of
the scripted driver, against the codec path reading the same log: up to the same bounds, each session's last
activity, the service messages' ids in order and every other event (a session opened between the messages, a
fragmented message) reach the agent alike, and nothing past a bound is read."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.cluster.log_adapter import LogAdapter
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.kernels import cluster_log_activity as activity
from harness.awaiting import await_condition

TERM = 4


class ModuleState:
    """What the log's reading changes in the consensus module: each session's last activity, the service messages
    swept in order, and the events of other messages in order."""

    def __init__(self):
        self.last_activity: dict[int, int] = {}
        self.swept: list[int] = []
        self.events: list[tuple] = []

    def on_replay_session_message(self, cluster_session_id, timestamp):
        if cluster_session_id < 0:
            self.swept.append(cluster_session_id)
        else:
            self.last_activity[cluster_session_id] = timestamp

    def on_replay_session_open(self, log_position, correlation_id, cluster_session_id, timestamp, response_stream_id,
                               response_channel):
        self.events.append(("open", log_position, cluster_session_id, timestamp))

    def seen(self):
        return self.last_activity, self.swept, self.events


def _session_message(session_id, timestamp, payload=b"v" * 64):
    return CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=TERM, cluster_session_id=session_id,
                                                       timestamp=timestamp, payload=payload))


@pytest.mark.requires_jit  # the compiled read polls through image.compiled(): refused without the JIT
def test_the_compiled_read_leaves_the_module_as_the_codec_path_does_up_to_each_bound(aeron):
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 100)
    compiled_log = aeron.add_subscription("aeron:ipc?term-length=64k", 100)
    codec_log = aeron.add_subscription("aeron:ipc?term-length=64k", 100)
    await_condition(lambda: compiled_log.images and codec_log.images and publication.is_connected, 10, "the log")
    messages = [_session_message(7, 100), _session_message(8, 110), _session_message(7, 120),
                _session_message(-(1 << 56) - 1, 125),  # a service's message
                CLUSTER.encode(CLUSTER.SessionOpenEvent(leadership_term_id=TERM, correlation_id=3,
                                                        cluster_session_id=9, timestamp=130, response_stream_id=102,
                                                        response_channel="aeron:ipc", encoded_principal=b"")),
                _session_message(9, 140, bytes(range(256)) * 20),  # fragmented at the IPC MTU
                _session_message(9, 150), _session_message(8, 160)]
    ends = [publication.offer(np.frombuffer(m, np.uint8)) for m in messages]
    assert all(end > 0 for end in ends)
    compiled_state, codec_state = ModuleState(), ModuleState()
    compiled = LogAdapter(compiled_state, fragment_limit=10)
    compiled.set_image(compiled_log.images[0])
    codec = LogAdapter(codec_state, fragment_limit=10)
    codec.set_image(codec_log.images[0])
    codec._poll = None  # the codec path only, as without the JIT
    tables_read = []
    take_rows = activity.take_rows
    activity.take_rows = lambda table: tables_read.append(1) or take_rows(table)
    try:
        for bound in (ends[1], ends[2] + 16, ends[4], ends[-1]):  # on a frame's end, inside the next frame, ...
            while compiled.poll(bound) or codec.poll(bound):
                pass
            assert compiled_state.seen() == codec_state.seen()
            assert compiled.position == codec.position == max(end for end in ends if end <= bound)
    finally:
        activity.take_rows = take_rows
    assert compiled_state.seen() == ({7: 120, 8: 160, 9: 150}, [-(1 << 56) - 1], [("open", ends[4], 9, 130)])
    assert tables_read  # the session messages went through the compiled read


def test_the_activity_table_keeps_each_sessions_last_timestamp_in_first_seen_order_and_never_overflows():
    table, none = activity.new_activity_table(3), np.zeros(0, np.uint8)
    for session_id, timestamp in ((5, 1), (-3, 2), (5, 3), (6, 4), (7, 5), (6, 6)):  # 7: no room left
        activity.record_session_activity(table, none, 0, 0, session_id, timestamp, none)
    assert activity.take_rows(table) == [[5, 3], [-3, 2], [6, 6]]
    assert activity.take_rows(table) == []  # taken: the table is empty for the next poll
    with pytest.raises(ValueError, match="capacity=0"):
        activity.new_activity_table(0)
