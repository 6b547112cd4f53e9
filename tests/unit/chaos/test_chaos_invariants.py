"""The chaos invariants catch what they claim to: each violation below, built by hand, is reported."""

from __future__ import annotations

import pytest

from chaos import invariants
from chaos.invariants import AtLeast

SESSION = 77
LENGTH = 100
FRAME = 160  # a 100-byte message in a frame: 32-byte header, aligned to 32


def _sent(seq, pub=0):
    return {"event": "sent", "pub": pub, "seq": seq, "position": (seq + 1) * FRAME, "session": SESSION,
            "length": LENGTH, "ts_ns": 1000 + seq, "incarnation": 0}


def _recv(seq, pub=0, **extra):
    return {"event": "recv", "pub": pub, "seq": seq, "position": (seq + 1) * FRAME, "session": SESSION,
            "length": LENGTH, "ts_ns": 2000 + seq, "incarnation": 0, **extra}


def _subscriber(receives, done=True):
    events = [{"event": "connected", "incarnation": 0, "ts_ns": 1},
              {"event": "subscription", "incarnation": 0, "ts_ns": 2},
              {"event": "image", "incarnation": 0, "session": SESSION, "join_position": 0, "ts_ns": 3}]
    events += receives
    if done:
        events.append({"event": "done", "incarnation": 0, "ts_ns": 9999})
    return events


def _check(receives, *, sent=range(5), done=True, faulted=frozenset(), corrupted=frozenset()):
    workers = {"pub0": [_sent(s) for s in sent], "subA": _subscriber(receives, done)}
    return invariants.check_delivery(workers, ["subA"], set(faulted), frozenset(corrupted))


def test_complete_in_order_delivery_holds_and_is_counted():
    failures, checked = _check([_recv(s) for s in range(5)])
    assert failures == [] and checked == 5


@pytest.mark.parametrize("receives, expected", [
    ([_recv(0), _recv(1), _recv(1), _recv(2), _recv(3), _recv(4)], "received twice"),
    ([_recv(0), _recv(2), _recv(1), _recv(3), _recv(4)], "out of order"),
    ([_recv(0), _recv(1), _recv(3), _recv(4)], "never received"),
    ([_recv(s, bad_payload=(s == 2)) for s in range(5)], "payload or reserved value corrupt"),
    ([_recv(s) for s in range(5)] + [_recv(5)], "received but never acknowledged"),
    ([dict(_recv(s), position=_recv(s)["position"] + (32 if s == 3 else 0)) for s in range(5)],
     "acknowledged at"),
])
def test_each_delivery_violation_is_reported(receives, expected):
    failures, _ = _check(receives)
    assert len(failures) == 1 and expected in failures[0], failures


def test_a_corrupted_message_must_arrive_flagged_and_only_it():
    flagged = [_recv(s, bad_payload=(s == 2)) for s in range(5)]
    assert _check(flagged, corrupted={(0, 2)})[0] == []
    failures, _ = _check([_recv(s) for s in range(5)], corrupted={(0, 2)})
    assert len(failures) == 1 and "corrupted but it arrived intact" in failures[0]


def test_an_incarnation_a_fault_ended_is_not_held_to_completeness():
    assert _check([_recv(0), _recv(1)], done=False)[0] == []
    assert "out of order" in _check([_recv(1), _recv(0)], done=False)[0][0]


def test_one_unlogged_message_past_a_killed_publishers_last_ack_is_tolerated():
    receives = [_recv(s) for s in range(6)]
    assert _check(receives, faulted={0})[0] == []
    assert "never acknowledged" in _check(receives + [_recv(6)], faulted={0})[0][0]


def test_counter_deltas_exact_at_least_and_sets():
    before, after = {"Errors": 3, "Unblocked Publications": 0}, {"Errors": 5, "Unblocked Publications": 1}
    assert invariants.check_counter_deltas(before, after, {"Errors": 2, "Unblocked Publications": {0, 1}}) == []
    assert invariants.check_counter_deltas(before, after, {"Errors": AtLeast(2)}) == []
    (failure,) = invariants.check_counter_deltas(before, after, {"Errors": AtLeast(3)})
    assert "'Errors' changed by 2, expected >= 3 (3 -> 5)" in failure
    assert len(invariants.check_counter_deltas(before, after, {"Errors": 0, "Unblocked Publications": 1})) == 1


def test_error_log_allow_list():
    observations = [{"error": "OSError: cannot create x.logbuffer of length=3: File too large\n\tat y", "count": 2}]
    assert invariants.check_error_log(observations, [r"cannot create \S+\.logbuffer"]) == []
    (failure,) = invariants.check_error_log(observations, [r"^AeronError"])
    assert failure == "unexpected error log entry (2x): OSError: cannot create x.logbuffer of length=3: File too large"


def test_exit_codes():
    assert invariants.check_exits({"a": 0, "b": -9}, {"a": 0, "b": {-9, 0}}) == []
    assert invariants.check_exits({"a": 1}, {"a": 0}) == ["a exit code 1, expected 0"]


def test_after_an_image_rejoins_only_what_follows_the_latest_join_is_owed():
    rejoin = {"event": "image", "incarnation": 0, "session": SESSION, "join_position": 3 * FRAME, "ts_ns": 2500}
    gone = {"event": "image_gone", "incarnation": 0, "session": SESSION, "ts_ns": 2400}
    receives = [_recv(0), gone, rejoin, _recv(3), _recv(4)]  # seqs 1 and 2 passed while it was dropped
    assert _check(receives)[0] == []
    failures, _ = _check([_recv(0), gone, rejoin, _recv(4)])
    assert len(failures) == 1 and "never received" in failures[0] and "(0, 3)" in failures[0]


def test_an_excused_session_owes_nothing_but_what_arrives_from_it_is_still_checked():
    workers = {"pub0": [_sent(s) for s in range(5)], "subA": _subscriber([_recv(0), _recv(1)])}
    assert invariants.check_delivery(workers, ["subA"], set(), frozenset(), frozenset({SESSION}))[0] == []
    assert "never received" in invariants.check_delivery(workers, ["subA"], set())[0][0]  # not excused: owed
    workers["subA"] = _subscriber([_recv(1), _recv(0)])
    failures, _ = invariants.check_delivery(workers, ["subA"], set(), frozenset(), frozenset({SESSION}))
    assert len(failures) == 1 and "out of order" in failures[0]


def test_a_message_begun_before_the_join_is_not_owed_but_one_starting_at_it_is():
    """A UDP SETUP carries the sender's position, which may fall between two fragments of a message."""
    assert invariants.message_start(4000, 2000, 1408) == 4000 - 1408 - 672  # 1376 + 624 payload bytes
    assert invariants.message_start(500, 100, 1408) == 500 - 160
    assert invariants.message_start(64, 0, 1408) == 32
    big = {"event": "sent", "pub": 0, "seq": 1, "position": 160 + 2080, "session": SESSION, "length": 2000,
           "ts_ns": 1001, "incarnation": 0}
    after = {"event": "sent", "pub": 0, "seq": 2, "position": 2240 + 160, "session": SESSION, "length": LENGTH,
             "ts_ns": 1002, "incarnation": 0}
    publication = {"event": "publication", "session": SESSION, "mtu": 1408, "incarnation": 0, "ts_ns": 1}
    join = {"event": "image", "incarnation": 0, "session": SESSION, "join_position": 160 + 1408, "ts_ns": 2500}
    received_after = {**after, "event": "recv", "ts_ns": 2600}
    workers = {"pub0": [publication, _sent(0), big, after], "subA": _subscriber([_recv(0), join, received_after])}
    assert invariants.check_delivery(workers, ["subA"], set()) == ([], 1)  # seq 2 owed and there; seq 1 not owed
    workers["subA"] = _subscriber([_recv(0), join])
    failures, _ = invariants.check_delivery(workers, ["subA"], set())
    assert len(failures) == 1 and "(0, 2)" in failures[0] and "(0, 1)" not in failures[0]
