"""The compiled read of the consensus stream (``kernels/cluster_consensus.py``) against the codec: over random
streams of AppendPosition and CommitPosition messages with an election's messages, old-version and fragmented
ones among them, and logs filled to random points (so messages cross a term's end behind a padding frame), the
kernel yields exactly the fields the codec decodes, in order, stops before the first message the codec must take,
and moves the position past what it read only. The adapter then hands every message to the agent, the kernel's
and the codec's alike, in log order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aeron_numba.cluster.consensus_adapter import FRAGMENT_LIMIT, ConsensusAdapter
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.kernels import cluster_consensus as K
from aeron_numba.layout import frame as F
from aeron_numba.layout.log_buffers import LogBuffers
from harness.awaiting import await_condition
from tests.unit.log_support import LimitCounter, new_pub_state, offer_until_done

TERM_LENGTH = 64 * 1024
MTU = 1408
_EXAMPLES = itertools.count()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

POSITION = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 9), st.integers(0, 1 << 40), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("commit"), st.integers(0, 9), st.integers(0, 1 << 40), st.integers(0, 2), st.just(0)),
)
OTHER = st.one_of(  # what the codec takes: the kernel must stop before it
    st.tuples(st.just("canvass"), st.integers(0, 9), st.integers(0, 1 << 40), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("old-append"), st.integers(0, 9), st.integers(0, 1 << 40), st.integers(0, 2), st.just(0)),
)
MESSAGES = st.lists(st.one_of(*[POSITION] * 6, OTHER), min_size=1, max_size=30)


def _encode(kind, term, position, member, flags) -> bytes:
    if kind == "append":
        return CLUSTER.encode(CLUSTER.AppendPosition(leadership_term_id=term, log_position=position,
                                                     follower_member_id=member, flags=flags))
    if kind == "commit":
        return CLUSTER.encode(CLUSTER.CommitPosition(leadership_term_id=term, log_position=position,
                                                     leader_member_id=member))
    if kind == "canvass":
        return CLUSTER.encode(CLUSTER.CanvassPosition(log_leadership_term_id=term, log_position=position,
                                                      leadership_term_id=term, follower_member_id=member,
                                                      protocol_version=1))
    # An AppendPosition of a version before flags: block length 20, version 7 (the codec reads flags as null).
    encoded = bytearray(_encode("append", term, position, member, 0))
    encoded[0:2] = (20).to_bytes(2, "little")
    encoded[6:8] = (7).to_bytes(2, "little")
    return bytes(encoded[:-1])


def _decoded_row(message) -> list[int]:
    """The row the codec's decoding of ``message``'s bytes gives."""
    decoded = CLUSTER.decode(_encode(*message))
    if message[0] == "append":
        return [K.APPEND_POSITION_TEMPLATE_ID, decoded.leadership_term_id, decoded.log_position,
                decoded.follower_member_id, decoded.flags]
    return [K.COMMIT_POSITION_TEMPLATE_ID, decoded.leadership_term_id, decoded.log_position, decoded.leader_member_id,
            0]


def _log(shm_dir, messages, prefill):
    example = next(_EXAMPLES)  # each example its own files: hypothesis runs many in one test's dir
    log = LogBuffers.create(shm_dir / f"consensus-{example}.logbuffer", term_length=TERM_LENGTH, mtu_length=MTU,
                            initial_term_id=5, session_id=1, stream_id=108).buffer
    state, limit = new_pub_state(log, True), LimitCounter()
    filler = np.zeros(256 - F.HEADER_LENGTH, np.uint8)  # fills the log to 256 * prefill bytes before the messages
    for _ in range(prefill):
        assert offer_until_done(log, state, limit, filler, True) > 0
    ends = [offer_until_done(log, state, limit, np.frombuffer(_encode(*m), np.uint8).copy(), True)
            for m in messages]
    return log, ends, prefill * 256


@SETTINGS
@example(messages=[("append", 1, 64, 1, 0)] * 12, prefill=255, fragment_limit=10)
@given(messages=MESSAGES, prefill=st.one_of(st.integers(0, TERM_LENGTH // 256 - 1),
                                            *[st.integers(TERM_LENGTH // 256 - 3, TERM_LENGTH // 256 - 1)] * 3),
       fragment_limit=st.integers(1, FRAGMENT_LIMIT))
def test_the_kernel_reads_what_the_codec_decodes_and_stops_before_what_it_must_leave(shm_dir, messages, prefill,
                                                                                    fragment_limit):
    log, ends, start = _log(shm_dir, messages, prefill)
    position_buf, closed_word = np.zeros(64, np.uint8), np.zeros(8, np.uint8)
    position_buf[:8].view(np.int64)[0] = start
    rows, result = np.zeros((FRAGMENT_LIMIT, K.ROW_COLUMNS), np.int64), np.zeros(K.RESULT_LENGTH, np.int64)

    read = []
    while len(read) < fragment_limit:  # as the adapter calls it: a read ends at a term's end too
        count = K.read_positions(log, position_buf, 0, closed_word, fragment_limit - len(read), rows, result)
        read += rows[:count].tolist()
        if count == 0 or result[K.RESULT_STOPPED_AT_OTHER]:
            break
    count = len(read)

    readable = list(itertools.takewhile(lambda m: m[0] in ("append", "commit"), messages))
    expected = readable[:fragment_limit]
    assert read == [_decoded_row(m) for m in expected]
    stopped_at_other = len(expected) < fragment_limit and len(readable) < len(messages)
    assert int(result[K.RESULT_STOPPED_AT_OTHER]) == int(stopped_at_other)
    assert int(position_buf[:8].view(np.int64)[0]) == (ends[count - 1] if count else start)


def test_a_closed_image_is_not_read(shm_dir):
    log, _, start = _log(shm_dir, [("commit", 1, 640, 0, 0)], 0)
    position_buf, closed_word = np.zeros(64, np.uint8), np.ones(8, np.uint8)
    rows, result = np.zeros((FRAGMENT_LIMIT, K.ROW_COLUMNS), np.int64), np.zeros(K.RESULT_LENGTH, np.int64)
    assert K.read_positions(log, position_buf, 0, closed_word, FRAGMENT_LIMIT, rows, result) == 0
    assert int(position_buf[:8].view(np.int64)[0]) == start


class RecordingAgent:
    """What the adapter calls on the consensus module, recorded in order."""

    def __init__(self):
        self.calls = []

    def on_append_position(self, leadership_term_id, log_position, follower_member_id, flags):
        self.calls.append(("append", leadership_term_id, log_position, follower_member_id, flags))

    def on_commit_position(self, leadership_term_id, log_position, leader_member_id):
        self.calls.append(("commit", leadership_term_id, log_position, leader_member_id, 0))

    def on_canvass_position(self, log_leadership_term_id, log_position, leadership_term_id, follower_member_id,
                            protocol_version):
        self.calls.append(("canvass", leadership_term_id, log_position, follower_member_id, 0))


@pytest.mark.requires_jit  # polls through image.compiled(): Numba overloads, refused without the JIT
def test_the_adapter_hands_every_message_to_the_agent_in_log_order_compiled_or_not(aeron):
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 108)
    subscription = aeron.add_subscription("aeron:ipc?term-length=64k", 108)
    await_condition(lambda: subscription.images and publication.is_connected, 10, "the consensus stream")
    messages = [("append", 2, 640, 1, 0), ("commit", 2, 640, 0, 0), ("canvass", 2, 704, 2, 0),
                ("append", 2, 704, 2, 1)] + [("append", 2, 768 + 64 * i, 1, 0) for i in range(FRAGMENT_LIMIT + 2)]
    for message in messages:
        assert publication.offer(np.frombuffer(_encode(*message), np.uint8)) > 0
    agent = RecordingAgent()
    adapter = ConsensusAdapter(subscription, agent)
    decoded = []
    codec_on_fragment = adapter._sbe.on_fragment
    adapter._sbe.on_fragment = lambda *args: decoded.append(1) or codec_on_fragment(*args)
    assert adapter.poll() == FRAGMENT_LIMIT  # the codec's message counts against the same limit
    await_condition(lambda: adapter.poll() == 0 and subscription.images[0].position == publication.position, 10,
                    "the stream read")
    assert agent.calls == messages
    assert len(decoded) == 1  # the codec took the canvass only
