"""A key-value client of a ``ClusterHarness`` cluster for tests, and the check every cluster test ends with.

``KeyValueClient`` is an ``AeronCluster`` session on the harness's client driver that sends the example service's
requests (``aeron_numba.cluster.examples.key_value_service``) one at a time and keeps what happened to each: the
requests the cluster acknowledged (answered), in order, and those whose fate is unknown (sent, then the leader
died before it answered: the request may or may not be in the log). It never sends a request twice, so a member
applies each at most once if the cluster is right.

``verify_members(cluster, client)`` is the invariant of the cluster suite: every running member applied the same
requests in the same order, namely every acknowledged one exactly once, in the order sent, plus some of the
unknown ones, and nothing else. It models the store (a ``KeyValueService`` applying the requests in the test
process) for each choice of the unknown ones, and waits until each member's applied count and state hash (a CRC
chained over every applied request and its status) equal one model's, the same for all members, at the same log
position.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from aeron_numba.cluster.client.aeron_cluster import State
from aeron_numba.cluster.examples.key_value_service import (KeyValueService, decode_response, encode_put)
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED
from harness.awaiting import NotYet, await_condition

#: Most unknown requests ``verify_members`` enumerates the choices of (2**n models).
MAX_UNKNOWN = 8


@dataclass
class SentRequest:
    request_id: int
    request: bytes
    acknowledged: bool = False
    status: int | None = None
    value: bytes = b""
    sent_at: float = 0.0


@dataclass
class ClientEvents:
    new_leaders: list = field(default_factory=list)  # (time, leader member id, leadership term id)
    session_events: list = field(default_factory=list)  # (code, detail)
    admin_responses: list = field(default_factory=list)  # (correlation id, request type, response code, message)


class KeyValueClient:
    """A cluster session sending key-value requests one at a time (see the module docstring)."""

    def __init__(self, cluster, **context_overrides):
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster
        from aeron_numba.cluster.client.egress_listener import EgressListener

        self.events = ClientEvents()
        self.sent: list[SentRequest] = []
        self._by_id: dict[int, SentRequest] = {}
        self._next_id = 1
        client = self

        class Listener(EgressListener):
            def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
                client._on_response(bytes(buffer[offset:offset + length]))

            def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints):
                client.events.new_leaders.append((time.monotonic(), leader_member_id, leadership_term_id))

            def on_session_event(self, correlation_id, cluster_session_id, leadership_term_id, leader_member_id,
                                 code, detail):
                client.events.session_events.append((code, detail))

            def on_admin_response(self, cluster_session_id, correlation_id, request_type, response_code, message,
                                  payload, payload_offset, payload_length):
                client.events.admin_responses.append((correlation_id, request_type, response_code, message))

        self._connect = lambda: AeronCluster.connect(cluster.client_context(**context_overrides),
                                                     egress_listener=Listener())
        self.cluster = self._connect()
        self._last_keep_alive = time.monotonic()
        self._harness = cluster
        cluster.add_background_work(self.poll)  # the session stays alive while the harness stops or starts members

    # ------------------------------------------------------------------------------------------ requests
    def _on_response(self, data: bytes) -> None:
        _, status, request_id, value = decode_response(data)
        sent = self._by_id.get(request_id)
        if sent is not None and not sent.acknowledged:
            sent.acknowledged, sent.status, sent.value = True, status, value

    def poll(self) -> int:
        """Poll the egress (responses, new leader, session events) and keep the session alive; nothing once the
        session is closed."""
        if self.cluster.is_closed:
            return 0
        work = self.cluster.poll_egress()
        if self.cluster.state is State.CONNECTED and time.monotonic() - self._last_keep_alive > 1.0:
            if self.cluster.send_keep_alive():
                self._last_keep_alive = time.monotonic()
        return work

    def send(self, request: bytes, timeout_s: float = 30.0) -> SentRequest:
        """Offer one request (retrying while back pressured or between leaders); it then counts as sent. The egress
        is polled first, so a NewLeaderEvent already sent moves the session to the new leader before the offer."""
        request_id = self._next_id
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            result = self.cluster.offer(request)
            if result > 0:
                break
            if result not in (BACK_PRESSURED, ADMIN_ACTION, NOT_CONNECTED) or time.monotonic() > deadline:
                raise AssertionError(f"request {request_id} not taken by the ingress: offer answered {result} "
                                     f"(session state {self.cluster.state})")
            time.sleep(0.001)
        self._next_id += 1
        sent = SentRequest(request_id, request, sent_at=time.monotonic())
        self.sent.append(sent)
        self._by_id[request_id] = sent
        return sent

    def await_new_leader(self, leader_member_id: int, timeout_s: float = 30.0) -> None:
        """Poll until the session heard a NewLeaderEvent naming ``leader_member_id`` (Aeron's
        ``awaitNewLeadershipEvent``): before it, a request may still go to the dead leader's publication."""
        await_condition(lambda: self.poll() >= 0 and self.cluster.leader_member_id == leader_member_id and
                        any(event[1] == leader_member_id for event in self.events.new_leaders)
                        or NotYet(f"leader {self.cluster.leader_member_id}, events {self.events.new_leaders}"),
                        timeout_s, f"a NewLeaderEvent naming member {leader_member_id}")

    def await_acknowledged(self, sent: SentRequest, timeout_s: float = 30.0) -> SentRequest:
        def answered():
            self.poll()
            return sent.acknowledged or NotYet(f"request {sent.request_id} unanswered; session "
                                               f"{self.cluster.state}")

        await_condition(answered, timeout_s, f"the answer to request {sent.request_id}")
        return sent

    def put(self, key: bytes, value: bytes, timeout_s: float = 30.0) -> SentRequest:
        """PUT ``key`` = ``value`` and wait for the answer."""
        return self.await_acknowledged(self.send(encode_put(self._next_id, key, value), timeout_s), timeout_s)

    def put_many(self, count: int, prefix: str = "key", timeout_s: float = 60.0) -> list[SentRequest]:
        """``count`` PUTs one after another, each answered before the next is sent."""
        start = len(self.sent)
        return [self.put(f"{prefix}-{start + i}".encode(), f"value-{start + i}".encode(), timeout_s)
                for i in range(count)]

    def try_put(self, key: bytes, value: bytes, answer_within_s: float) -> SentRequest:
        """PUT and wait at most ``answer_within_s`` for the answer; unanswered, the request stays unknown (the
        leader may have died with it)."""
        sent = self.send(encode_put(self._next_id, key, value))
        deadline = time.monotonic() + answer_within_s
        while not sent.acknowledged and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.001)
        return sent

    @property
    def acknowledged(self) -> list[SentRequest]:
        return [s for s in self.sent if s.acknowledged]

    @property
    def unknown(self) -> list[SentRequest]:
        return [s for s in self.sent if not s.acknowledged]

    def reconnect(self) -> None:
        """A new session in place of this one (Aeron's ``reconnectClient``: after the cluster closed it, e.g. no
        leader within the new leader timeout). Requests keep their ids; those unanswered stay unknown."""
        if not self.cluster.is_closed:
            self.cluster.close()
        self.cluster = self._connect()
        self._last_keep_alive = time.monotonic()

    def close(self) -> None:
        self._harness.remove_background_work(self.poll)
        self.cluster.close()


# ------------------------------------------------------------------------------------------------- verify
def expected_states(sent: list[SentRequest]) -> dict[tuple[int, int], tuple[int, ...]]:
    """(applied count, state hash) of the store after every acknowledged request and each choice of the unknown
    ones, in the order sent -> the request ids applied."""
    unknown = [s for s in sent if not s.acknowledged]
    if len(unknown) > MAX_UNKNOWN:
        raise AssertionError(f"{len(unknown)} requests of unknown fate: more than {MAX_UNKNOWN} to check")
    states = {}
    for chosen in itertools.product((False, True), repeat=len(unknown)):
        included = {s.request_id for s, take in zip(unknown, chosen) if take}
        model = KeyValueService()
        applied = []
        for s in sent:
            if s.acknowledged or s.request_id in included:
                model.apply(s.request)
                applied.append(s.request_id)
        states[(model.applied, model.state_hash)] = tuple(applied)
    return states


def verify_members(cluster, client: KeyValueClient, timeout_s: float = 60.0, member_ids=None) -> dict:
    """Wait until every running member (or ``member_ids``) applied exactly the acknowledged requests, in order,
    plus a choice of the unknown ones, all members the same and at the same log position; returns the states."""
    expected = expected_states(client.sent)

    def agreed():
        client.poll()
        nodes = cluster.running_nodes() if member_ids is None else [cluster.node(i) for i in member_ids]
        states = {node.member_id: node.service_state() for node in nodes}
        if any(state is None for state in states.values()):
            return NotYet(f"members' service states {states}")
        keys = {(s.applied, s.state_hash) for s in states.values()}
        positions = {s.log_position for s in states.values()}
        if len(keys) == 1 and len(positions) == 1 and next(iter(keys)) in expected:
            return states
        return NotYet(f"members {states}; expected one of {sorted(expected)}")

    return await_condition(agreed, timeout_s, "every member to have applied exactly the acknowledged requests",
                           processes=cluster.processes())
