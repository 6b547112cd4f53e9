"""Invariants checked after a run, from the workers' events, counter snapshots and the driver's error log.

Each check returns a list of failure strings (empty = holds); ``check_delivery`` also counts the messages
it verified.
"""

from __future__ import annotations

import re
from collections import defaultdict

from aeron_numba.layout.bits import align
from aeron_numba.layout.frame import DEFAULT_MTU_LENGTH, FRAME_ALIGNMENT, HEADER_LENGTH

MAX_EXAMPLES = 5


def message_start(position: int, length: int, mtu: int) -> int:
    """Where a message acknowledged at ``position`` (its end) begins: its fragments are contiguous in one term,
    each ``mtu - header`` bytes of payload but the last, every frame aligned to 32."""
    payload = mtu - HEADER_LENGTH
    full, rest = divmod(length, payload)
    framed = full * align(mtu, FRAME_ALIGNMENT)
    if rest or length == 0:
        framed += align(rest + HEADER_LENGTH, FRAME_ALIGNMENT)
    return position - framed


def _mtus(workers: dict[str, list[dict]]) -> dict[int, int]:
    """session -> MTU of its publication (timelines written before the field existed: the default MTU)."""
    return {e["session"]: e["mtu"] for events in workers.values() for e in events
            if e["event"] == "publication" and "mtu" in e}


def _acked(workers: dict[str, list[dict]]) -> dict[tuple[int, int], dict]:
    acked = {}
    for events in workers.values():
        for e in events:
            if e["event"] == "sent":
                acked[(e["pub"], e["seq"])] = e
    return acked


def check_delivery(workers: dict[str, list[dict]], subscribers: list[str], faulted_publishers: set[int],
                   corrupted: frozenset[tuple[int, int]] = frozenset(),
                   excused_sessions: frozenset[int] = frozenset()) -> tuple[list[str], int]:
    """Every acknowledged message reaches every live subscriber incarnation exactly once, in order, intact.

    ``workers``: name -> events of every worker. ``subscribers``: the subscriber worker names.
    ``faulted_publishers``: pub ids of publishers a fault hit; for them one received message past the last
    logged acknowledgement is tolerated (acknowledged, then killed before it could log it).
    ``corrupted``: (pub, seq) of messages whose bytes a fault changed in the log: each must arrive flagged
    ``bad_payload`` (the corruption was detected), every other message intact.
    ``excused_sessions``: sessions whose log a publisher-side fault destroyed (the sending driver killed):
    their acknowledged messages are not owed, but what arrives from them is checked like the rest.

    A subscriber incarnation (one connection) that ended with ``done`` (stopped cleanly at the end) must
    have received every acknowledged message that begins at or after the (latest) join position of its image, and
    every message acknowledged after it subscribed on a session it never had an image for. An incarnation a
    fault ended is only checked for order, duplicates and integrity (a stopped and dropped client must still
    never deliver reclaimed data: the client re-checks a batch held across a stop).
    """
    failures: list[str] = []
    acked = _acked(workers)
    mtus = _mtus(workers)
    last_acked = defaultdict(lambda: -1)
    for pub, seq in acked:
        last_acked[pub] = max(last_acked[pub], seq)
    checked = 0
    for name in subscribers:
        events = workers.get(name, [])
        by_inc: dict[int, list[dict]] = defaultdict(list)
        for e in events:
            by_inc[e.get("incarnation", 0)].append(e)
        for inc, inc_events in sorted(by_inc.items()):
            where = f"{name}#{inc}"
            next_seq: dict[int, int] = {}
            last_position: dict[int, int] = {}
            received = set()
            problems: list[str] = []
            complete = any(e["event"] == "done" for e in inc_events)
            for e in inc_events:
                if e["event"] != "recv":
                    continue
                key = (e["pub"], e["seq"])
                if key in corrupted:
                    if not e.get("bad_payload"):
                        problems.append(f"pub {key[0]} seq {key[1]}: a byte was corrupted but it arrived intact")
                elif e.get("bad_payload"):
                    problems.append(f"pub {key[0]} seq {key[1]}: payload or reserved value corrupt")
                if key in received:
                    problems.append(f"pub {key[0]} seq {key[1]}: received twice")
                elif e["seq"] < next_seq.get(e["pub"], 0):
                    problems.append(f"pub {key[0]} seq {key[1]}: out of order (after seq {next_seq[e['pub']] - 1})")
                received.add(key)
                next_seq[e["pub"]] = max(next_seq.get(e["pub"], 0), e["seq"] + 1)
                if e["position"] <= last_position.get(e["session"], -1):
                    problems.append(f"session {e['session']}: position {e['position']} not after "
                                    f"{last_position[e['session']]}")
                last_position[e["session"]] = e["position"]
                sent = acked.get(key)
                if sent is None:
                    if not (key[0] in faulted_publishers and key[1] == last_acked[key[0]] + 1):
                        problems.append(f"pub {key[0]} seq {key[1]}: received but never acknowledged")
                elif (sent["session"], sent["position"]) != (e["session"], e["position"]):
                    problems.append(f"pub {key[0]} seq {key[1]}: received at session {e['session']} position "
                                    f"{e['position']}, acknowledged at {sent['session']} {sent['position']}")
            if complete:
                # Only what follows the latest join is owed: an untethered subscriber dropped and rejoined
                # (or any image that went and came back) legitimately misses what passed in between.
                joins: dict[int, int] = {}
                for e in inc_events:
                    if e["event"] == "image":
                        joins[e["session"]] = e["join_position"]
                subscribed = [e["ts_ns"] for e in inc_events if e["event"] == "subscription"]
                subscribed_ns = subscribed[0] if subscribed else None
                missing = []
                for key, sent in sorted(acked.items()):
                    if sent["session"] in excused_sessions:
                        continue
                    join = joins.get(sent["session"])
                    if join is not None:  # a message begun before the join (a UDP SETUP mid-message) is not owed
                        mtu = mtus.get(sent["session"], DEFAULT_MTU_LENGTH)
                        expected = message_start(sent["position"], sent["length"], mtu) >= join
                    else:
                        expected = subscribed_ns is not None and sent["ts_ns"] > subscribed_ns
                    if expected:
                        checked += 1
                        if key not in received:
                            missing.append(key)
                if missing:
                    problems.append(f"{len(missing)} acknowledged messages never received, first (pub, seq): "
                                    f"{missing[:MAX_EXAMPLES]}")
            if problems:
                failures.append(f"{where}: {len(problems)} problems: " + "; ".join(problems[:MAX_EXAMPLES]))
    return failures, checked


class AtLeast:
    """A counter delta that must be ``>= minimum`` (e.g. Errors under a garbage writer: one per bad record)."""

    def __init__(self, minimum: int):
        self.minimum = minimum

    def __eq__(self, actual) -> bool:
        return isinstance(actual, int) and actual >= self.minimum

    def __repr__(self) -> str:
        return f">= {self.minimum}"


def check_counter_deltas(before: dict[str, int], after: dict[str, int], expected: dict[str, object]) -> list[str]:
    """Each counter in ``expected`` (label -> delta) moved by exactly that much between the snapshots.

    A delta is an int (exact), an ``AtLeast(n)``, or a set of acceptable ints.
    """
    failures = []
    for label, delta in expected.items():
        actual = after.get(label, 0) - before.get(label, 0)
        ok = actual in delta if isinstance(delta, (set, frozenset)) else delta == actual
        if not ok:
            failures.append(f"counter {label!r} changed by {actual}, expected {delta} "
                            f"({before.get(label)} -> {after.get(label)})")
    return failures


def check_error_log(observations: list[dict], allowed: list[str]) -> list[str]:
    """Every distinct error in the driver's log matches one of the ``allowed`` regular expressions."""
    failures = []
    for obs in observations:
        text = obs["error"]
        if not any(re.search(pattern, text) for pattern in allowed):
            first_line = text.splitlines()[0] if text else ""
            failures.append(f"unexpected error log entry ({obs['count']}x): {first_line}")
    return failures


def check_exits(exits: dict[str, int | None], expected: dict[str, int | set]) -> list[str]:
    """Each worker ended with the expected exit code (an int or a set of acceptable codes)."""
    failures = []
    for name, want in expected.items():
        got = exits.get(name)
        ok = got in want if isinstance(want, (set, frozenset, tuple)) else got == want
        if not ok:
            failures.append(f"{name} exit code {got}, expected {want}")
    return failures
