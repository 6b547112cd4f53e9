"""Service messages waiting for the log (PendingServiceMessageTracker): service session ids, appends in order up
to the limit per poll, a log that refuses, sweeping by the commit position on a leader and by the log on a
follower, and restoring what was appended but not committed after leadership is lost."""

from __future__ import annotations

from aeron_numba.cluster.pending_service_message_tracker import (
    LONG_MAX, SERVICE_MESSAGE_LIMIT, PendingServiceMessageTracker, service_id_from_log_message,
    service_id_from_service_message, service_session_id)
from tests.unit.cluster.cm_fakes import FakeCounter


class Log:
    def __init__(self):
        self.appended, self.position, self.accept = [], 0, True

    def append_message(self, leadership_term_id, cluster_session_id, timestamp, payload):
        if not self.accept:
            return 0
        self.position += 64
        self.appended.append((leadership_term_id, cluster_session_id, bytes(payload)))
        return self.position


class Clock:
    def time(self):
        return 123


def tracker(service_id=1):
    commit, log = FakeCounter(), Log()
    t = PendingServiceMessageTracker(service_id, commit, log, Clock())
    t.leadership_term_id = 4
    return t, commit, log


def test_service_session_ids_name_the_service_and_never_meet_client_session_ids():
    first = service_session_id(1, -(1 << 63)) + 1
    assert first < 0 and service_id_from_log_message(first) == 1
    assert service_id_from_log_message(service_session_id(127, -(1 << 63))) == 127
    assert service_id_from_service_message(3) == 3


def test_messages_are_appended_in_order_with_consecutive_ids_and_swept_once_committed():
    t, commit, log = tracker()
    for i in range(3):
        t.enqueue_message(b"m%d" % i)
    assert t.poll() == 3
    ids = [cluster_session_id for _, cluster_session_id, _ in log.appended]
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2] and [p for _, _, p in log.appended] == [b"m0", b"m1", b"m2"]
    assert {term for term, _, _ in log.appended} == {4}
    commit.set(128)  # the first two are committed
    t.sweep_leader_messages()
    assert len(t) == 1 and t.log_service_session_id == ids[1]
    assert t.poll() == 0  # the third is appended already: not again


def test_a_poll_appends_at_most_the_limit_and_stops_at_a_refusal():
    t, commit, log = tracker()
    for i in range(SERVICE_MESSAGE_LIMIT + 5):
        t.enqueue_message(b"x")
    assert t.poll() == SERVICE_MESSAGE_LIMIT
    log.accept = False
    assert t.poll() == 0
    log.accept = True
    assert t.poll() == 5


def test_uncommitted_appends_are_appended_again_after_leadership_is_lost():
    t, commit, log = tracker()
    t.enqueue_message(b"a")
    t.enqueue_message(b"b")
    t.poll()
    commit.set(64)
    t.restore_uncommitted_messages()
    seen = []
    t.for_each(lambda cluster_session_id, timestamp, payload: seen.append((timestamp, payload)))
    assert seen == [(LONG_MAX, b"b")]
    log.appended.clear()
    assert t.poll() == 1 and log.appended[0][2] == b"b"


def test_a_follower_drops_what_the_leader_appended():
    t, commit, log = tracker()
    for payload in (b"a", b"b", b"c"):
        t.enqueue_message(payload)
    first = service_session_id(1, -(1 << 63)) + 1
    t.sweep_follower_messages(first + 1)
    assert len(t) == 1 and t.log_service_session_id == first + 1
