"""The compiled path's kernels (``kernels/cluster_service_log.py``) over a real IPC log of the scripted driver: the
bounded poll hands over session messages only, never a frame ending past the limit, and stops before anything
else; the outbox queues replies per session, refuses (and counts) what does not fit, and offers each session's
replies in order."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import LogPublisher
from aeron_numba.client import FragmentAssembler
from aeron_numba.kernels import cluster_service_log as K
from harness.awaiting import await_condition


@numba.njit(K.SESSION_MESSAGE_HANDLER_SIG, cache=True)
def _echo(state, buffer, offset, length, cluster_session_id, timestamp, outbox):
    """Counts messages in state[0], sums their first bytes in state[1] and echoes each to its session."""
    state[0] += 1
    if length > 0:
        state[1] += buffer[offset]
    at = K.reply_claim(outbox, cluster_session_id, length)
    if at >= 0:
        outbox[at:at + length] = buffer[offset:offset + length]


def _log(aeron):
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 100)
    subscription = aeron.add_subscription("aeron:ipc?term-length=64k", 100)
    await_condition(lambda: subscription.images and publication.is_connected, 10, "log image")
    return publication, subscription.images[0]


def _poll(image, limit, fragment_limit, state, outbox, result):
    handle = image.compiled()
    return K.bounded_session_poll(handle.log, handle.position_buffer, handle.position_offset, handle.state, limit,
                                  fragment_limit, _echo, state, outbox, result)


@pytest.mark.requires_jit  # polls through image.compiled(): Numba overloads, refused without the JIT
def test_bounded_poll_stops_at_the_limit_and_before_other_messages(aeron):
    publication, image = _log(aeron)
    log = LogPublisher(publication)
    ends = []
    for i in range(3):
        assert log.session_message_header(0, 10 + i, 100 + i, bytes([i + 1]) * 5)
        ends.append(publication.position)
    assert log.timer_event(0, 1, 2)
    assert log.session_message_header(0, 13, 200, b"\x09")
    state, outbox, result = np.zeros(2, np.uint8), K.new_outbox(4096), np.zeros(K.RESULT_LENGTH, np.int64)
    assert _poll(image, ends[1] - 1, 10, state, outbox, result) == 1  # the second message ends past the limit
    assert image.position == ends[0] and result[K.RESULT_LAST_POSITION] == ends[0]
    assert _poll(image, 1 << 40, 10, state, outbox, result) == 2
    assert image.position == ends[2] and result[K.RESULT_STOPPED_AT_OTHER] == 1, "stops before the TimerEvent"
    assert (int(state[0]), int(state[1]), int(result[K.RESULT_LAST_TIMESTAMP])) == (3, 1 + 2 + 3, 102)
    assert _poll(image, 1 << 40, 10, state, outbox, result) == 0 and image.position == ends[2]


@pytest.mark.requires_jit  # polls through image.compiled(): Numba overloads, refused without the JIT
def test_outbox_refuses_what_does_not_fit_and_offers_each_sessions_replies_in_order(aeron):
    outbox = K.new_outbox(256)
    outbox[K.OUTBOX_LEADERSHIP_TERM_ID_OFFSET:K.OUTBOX_LEADERSHIP_TERM_ID_OFFSET + 8].view(np.int64)[0] = 7
    outbox[K.OUTBOX_TIMESTAMP_OFFSET:K.OUTBOX_TIMESTAMP_OFFSET + 8].view(np.int64)[0] = 55  # the poll sets it
    state = np.zeros(2, np.uint8)
    for session_id, payload in ((1, b"a1"), (2, b"b1"), (1, b"a2")):
        data = np.frombuffer(payload, dtype=np.uint8).copy()
        _echo(state, data, 0, data.size, session_id, 55, outbox)
    big = np.zeros(200, dtype=np.uint8)
    _echo(state, big, 0, big.size, 3, 55, outbox)  # no room left: refused and counted
    header = outbox[:40].view(np.int64)
    assert header[K.OUTBOX_COUNT_OFFSET // 8] == 3 and header[K.OUTBOX_REFUSED_OFFSET // 8] == 1
    ids = np.zeros(4, np.int64)
    assert K.outbox_session_ids(outbox, ids) == 2 and list(ids[:2]) == [1, 2]
    first = K.OUTBOX_HEADER_LENGTH + K.RECORD_HEADER_LENGTH
    assert bytes(outbox[first:first + K.SESSION_HEADER_LENGTH + 2]) == CLUSTER.encode(
        CLUSTER.SessionMessageHeader(leadership_term_id=7, cluster_session_id=1, timestamp=55, payload=b"a1"))

    publication = aeron.add_publication("aeron:ipc?term-length=64k", 102)
    egress = aeron.add_subscription("aeron:ipc?term-length=64k", 102)
    await_condition(lambda: publication.is_connected, 10, "egress connected")
    handle = publication.compiled()
    assert K.offer_replies(outbox, 1, handle.log, handle.pub_state, handle.limit_buffer) == 2
    assert K.drop_replies(outbox, 2) == 1
    assert K.outbox_session_ids(outbox, ids) == 0
    got = []
    assembler = FragmentAssembler(lambda b, o, n, h: got.append(CLUSTER.decode(b, o, n)))
    await_condition(lambda: (egress.poll(assembler.on_fragment, 10), len(got) == 2)[1], 10, "two replies")
    assert [(m.leadership_term_id, m.cluster_session_id, m.timestamp, m.payload) for m in got] == \
        [(7, 1, 55, b"a1"), (7, 1, 55, b"a2")]
    K.clear_outbox(outbox)
    assert outbox[:16].view(np.int64).tolist() == [K.OUTBOX_HEADER_LENGTH, 0]


def test_new_outbox_refuses_a_length_too_short():
    with pytest.raises(ValueError, match="outbox length=10"):
        K.new_outbox(10)
