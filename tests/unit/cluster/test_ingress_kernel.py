"""The leader's compiled ingress path (``kernels/cluster_ingress.py``) against a model of what the Python path
(IngressAdapter -> on_ingress_message -> LogPublisher) appends: over random ingress streams (session messages of
open and unknown sessions, of this and another term, keep-alives, fragmented messages) and logs filled to random
points (so appends cross a term's end), the kernel appends exactly the model's messages, byte for byte as the
log's codec writes them, stops before the first message the model leaves to Python or to back pressure, and moves
the ingress position past what it consumed only."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.kernels import cluster_ingress as K
from aeron_numba.kernels import term_appender as TA
from aeron_numba.layout import frame as F
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from tests.unit.log_support import Consumer, LimitCounter, new_pub_state, offer_until_done

TERM_LENGTH = 64 * 1024
MTU = 1408
TERM = 5  # the leadership term of the leader polling
OPEN_IDS = (11, 12)  # the sessions in the open table; 13 is not
TIMESTAMP, ACTIVITY_NS = 123_456, 987_654_321
_EXAMPLES = itertools.count()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

APPENDABLE = st.tuples(st.just("session"), st.sampled_from(OPEN_IDS), st.just(TERM), st.integers(0, 200))
STOPPER = st.one_of(  # what the Python path takes: the kernel must stop before it
    st.tuples(st.just("session"), st.just(13), st.just(TERM), st.integers(0, 200)),  # not an open session
    st.tuples(st.just("session"), st.sampled_from(OPEN_IDS), st.just(TERM - 1), st.integers(0, 200)),  # old term
    st.tuples(st.just("keep-alive"), st.sampled_from(OPEN_IDS), st.just(TERM), st.just(0)),
    st.tuples(st.just("fragmented"), st.sampled_from(OPEN_IDS), st.just(TERM), st.integers(MTU, 3 * MTU)),
)
# Mostly appendable, so that runs of appends reach a term's end and the limits.
MESSAGES = st.lists(st.one_of(*[APPENDABLE] * 7, STOPPER), min_size=1, max_size=40)


def _encode(kind, session_id, term, size, index):
    if kind == "keep-alive":
        return CLUSTER.encode(CLUSTER.SessionKeepAlive(leadership_term_id=term, cluster_session_id=session_id))
    payload = bytes((index + i) % 251 for i in range(size))
    return CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=term, cluster_session_id=session_id,
                                                       timestamp=0, payload=payload))


def _aligned(length: int) -> int:
    return (length + F.HEADER_LENGTH + F.FRAME_ALIGNMENT - 1) // F.FRAME_ALIGNMENT * F.FRAME_ALIGNMENT


def model(messages, log_position: int, limit_index: int | None, fragment_limit: int):
    """What the Python path appends: (appended (session id, payload) list, messages consumed, why it stopped,
    the log position before each claim), stopping where the kernel must."""
    appended, claims = [], []
    for index, (kind, session_id, term, size) in enumerate(messages):
        if len(appended) == fragment_limit:
            return appended, index, K.STOPPED_NOTHING_LEFT, claims
        if kind != "session" or term != TERM or session_id not in OPEN_IDS:
            return appended, index, K.STOPPED_AT_PYTHON, claims
        if limit_index is not None and len(appended) == limit_index:
            return appended, index, K.STOPPED_AT_BACK_PRESSURE, claims
        claims.append(log_position)
        encoded = _encode(kind, session_id, term, size, index)
        term_offset = log_position % TERM_LENGTH
        if term_offset + _aligned(len(encoded)) > TERM_LENGTH:
            log_position += TERM_LENGTH - term_offset  # padding to the term's end, then the next term
        log_position += _aligned(len(encoded))
        appended.append((session_id, encoded))
    return appended, len(messages), K.STOPPED_NOTHING_LEFT, claims


@SETTINGS
@example(messages=[("session", 11, TERM, 200)] * 20, prefill=255, limit_at=0, limited=False, fragment_limit=40)
@given(messages=MESSAGES, prefill=st.one_of(st.integers(0, TERM_LENGTH // 256 - 1),
                                            *[st.integers(TERM_LENGTH // 256 - 6, TERM_LENGTH // 256 - 1)] * 3),
       limit_at=st.integers(0, 40), limited=st.booleans(), fragment_limit=st.one_of(st.just(40), st.integers(1, 40)))
def test_the_kernel_appends_what_the_python_path_would_and_stops_where_it_must(shm_dir, messages, prefill, limit_at,
                                                                               limited, fragment_limit):
    example = next(_EXAMPLES)  # each example its own files: hypothesis runs many in one test's dir
    ingress = LogBuffers.create(shm_dir / f"ingress-{example}.logbuffer", term_length=TERM_LENGTH, mtu_length=MTU,
                                initial_term_id=3, session_id=1, stream_id=101).buffer
    log = LogBuffers.create(shm_dir / f"log-{example}.logbuffer", term_length=TERM_LENGTH, mtu_length=MTU,
                            initial_term_id=-7, session_id=2, stream_id=100).buffer
    ingress_state, log_state = new_pub_state(ingress, True), new_pub_state(log, True)
    no_limit, log_limit = LimitCounter(), LimitCounter()
    ends = []
    for index, message in enumerate(messages):
        data = np.frombuffer(_encode(*message, index), np.uint8).copy()
        ends.append(offer_until_done(ingress, ingress_state, no_limit, data, True))
    filler = np.zeros(256 - F.HEADER_LENGTH, np.uint8)  # fills the log to 256 * prefill bytes
    for _ in range(prefill):
        assert offer_until_done(log, log_state, no_limit, filler, True) > 0
    start = TA.producer_position(log)
    claims = model(messages, start, None, fragment_limit)[3]
    limit_index = limit_at if limited and limit_at < len(claims) else None
    if limit_index is not None:  # pub-lmt at the limit_at-th claim's position: that claim is back-pressured
        log_limit.set(claims[limit_index])
    expected, consumed, stopped, _ = model(messages, start, limit_index, fragment_limit)
    position_buf, closed_word = np.zeros(64, np.uint8), np.zeros(8, np.uint8)
    sessions = K.OpenSessionTable()
    for session_id in OPEN_IDS:
        sessions.add(session_id)
    result = np.zeros(K.RESULT_LENGTH, np.int64)
    claim = np.zeros(P.CLAIM_LENGTH, np.int64)

    count = K.ingress_to_log(ingress, position_buf, 0, closed_word, fragment_limit, log, log_state, log_limit.buffer,
                             claim, sessions.table, TERM, TIMESTAMP, ACTIVITY_NS, result)

    assert count == len(expected)
    assert int(result[K.RESULT_STOPPED]) == stopped
    assert int(position_buf[:8].view(np.int64)[0]) == (ends[consumed - 1] if consumed else 0)
    reader = Consumer(log, TERM_LENGTH)
    reader.drain()
    got = reader.messages[prefill:]
    want = [CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=TERM, cluster_session_id=session_id,
                                                        timestamp=TIMESTAMP, payload=encoded[32:]))
            for session_id, encoded in expected]
    assert got == want
    if expected:
        assert int(result[K.RESULT_APPENDED_POSITION]) == TA.producer_position(log)
    for session_id in OPEN_IDS:
        touched = any(s == session_id for s, _ in expected)
        assert sessions.activity_ns(session_id) == (ACTIVITY_NS if touched else 0)


def test_a_closed_image_is_not_read_and_the_table_keeps_only_open_sessions(shm_dir):
    ingress = LogBuffers.create(shm_dir / "ingress.logbuffer", term_length=TERM_LENGTH, mtu_length=MTU,
                                initial_term_id=0, session_id=1, stream_id=101).buffer
    log = LogBuffers.create(shm_dir / "log.logbuffer", term_length=TERM_LENGTH, mtu_length=MTU,
                            initial_term_id=0, session_id=2, stream_id=100).buffer
    ingress_state, log_state, limit = new_pub_state(ingress, True), new_pub_state(log, True), LimitCounter()
    data = np.frombuffer(_encode("session", 11, TERM, 8, 0), np.uint8).copy()
    offer_until_done(ingress, ingress_state, limit, data, True)
    sessions = K.OpenSessionTable(capacity=1)
    for session_id in (11, 12, 13):
        sessions.add(session_id)  # grows past its first capacity
    sessions.remove(12)
    sessions.add(11)
    assert len(sessions) == 2 and sessions.activity_ns(12) == 0
    position_buf, result, claim = np.zeros(64, np.uint8), np.zeros(K.RESULT_LENGTH, np.int64), np.zeros(2, np.int64)
    closed = np.ones(8, np.uint8)
    args = (log, log_state, limit.buffer, claim, sessions.table, TERM, TIMESTAMP, ACTIVITY_NS, result)
    assert K.ingress_to_log(ingress, position_buf, 0, closed, 10, *args) == 0
    assert int(position_buf[:8].view(np.int64)[0]) == 0
    sessions.remove(11)
    assert K.ingress_to_log(ingress, position_buf, 0, np.zeros(8, np.uint8), 10, *args) == 0
    assert int(result[K.RESULT_STOPPED]) == K.STOPPED_AT_PYTHON  # the session closed: Python decides
    sessions.add(11)
    assert K.ingress_to_log(ingress, position_buf, 0, np.zeros(8, np.uint8), 10, *args) == 1
