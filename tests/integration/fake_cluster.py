"""A scripted stand-in for a cluster's members, for the client's tests before a consensus module exists: each fake
member subscribes on its ingress endpoint (127.0.0.N) and answers on the client's response channel through the
generated ``EgressPublisher``, as a member's consensus module would.

A thread polls the members' ingress and records every message decoded (``received``); a member's
``on_connect_request`` (set by the test) decides its answer to a SessionConnectRequest or ChallengeResponse.
Answers are queued and offered until the egress publication takes them (it connects only once the client's
egress subscription has seen it), so a test never sleeps and hopes.
"""

from __future__ import annotations

import socket
import threading
import time

from aeron_numba.client import FragmentAssembler
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import EgressPublisher

INGRESS_STREAM_ID = 101
EGRESS_STREAM_ID = 102


def free_udp_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class FakeMember:
    def __init__(self, cluster: "FakeCluster", member_id: int, endpoint: str):
        self.cluster = cluster
        self.member_id = member_id
        self.endpoint = endpoint
        self.subscription = None
        self.received: list = []
        self.publishers: dict[str, EgressPublisher] = {}  # response channel -> publisher
        self.on_connect_request = None  # (member, message) -> None: the test's script
        self._assembler = FragmentAssembler(self._on_fragment)

    def listen(self) -> "FakeMember":
        """Subscribe on the member's ingress endpoint (a member not listening never connects a publication)."""
        self.subscription = self.cluster.aeron.add_subscription(f"aeron:udp?endpoint={self.endpoint}",
                                                                INGRESS_STREAM_ID)
        return self

    def poll(self) -> int:
        return 0 if self.subscription is None else self.subscription.poll(self._assembler, 10)

    def _on_fragment(self, buffer, offset, length, header) -> None:
        message = CLUSTER.decode(buffer, offset, length)
        self.received.append(message)
        if message.SPEC.name in ("SessionConnectRequest", "ChallengeResponse") and self.on_connect_request:
            self.on_connect_request(self, message)

    def messages(self, name: str) -> list:
        return [m for m in list(self.received) if m.SPEC.name == name]

    def publisher(self, response_channel: str) -> EgressPublisher:
        publisher = self.publishers.get(response_channel)
        if publisher is None:
            publication = self.cluster.aeron.add_exclusive_publication(response_channel, EGRESS_STREAM_ID)
            publisher = self.publishers[response_channel] = EgressPublisher(publication, retry_attempts=1)
        return publisher

    def send(self, response_channel: str, method: str, **fields) -> None:
        """Queue an egress message to the client on ``response_channel``; sent once the publication takes it."""
        self.cluster.queue(self, response_channel, method, fields)


class FakeCluster:
    def __init__(self, aeron, endpoints: dict[int, str]):
        self.aeron = aeron
        self.members = {member_id: FakeMember(self, member_id, endpoint) for member_id, endpoint in endpoints.items()}
        self.ingress_endpoints = ",".join(f"{m}={e}" for m, e in endpoints.items())
        self._pending: list = []
        self._lock = threading.RLock()  # a script answering inside do_work queues its answer
        self._stop = threading.Event()
        self.errors: list[BaseException] = []
        self.sent: list = []
        self._thread = threading.Thread(target=self._run, name="fake-cluster", daemon=True)

    @classmethod
    def on_loopback(cls, aeron, count: int = 3) -> "FakeCluster":
        """Members 0..count-1 on 127.0.0.1..count, each on a free port of its address."""
        hosts = [f"127.0.0.{i + 1}" for i in range(count)]
        return cls(aeron, {i: f"{host}:{free_udp_port(host)}" for i, host in enumerate(hosts)})

    def start(self) -> "FakeCluster":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def queue(self, member: FakeMember, channel: str, method: str, fields: dict) -> None:
        with self._lock:
            self._pending.append((member, channel, method, fields))

    def do_work(self) -> int:
        work = 0
        with self._lock:
            for member in self.members.values():
                work += member.poll()
            still = []
            for entry in self._pending:
                member, channel, method, fields = entry
                if getattr(member.publisher(channel), method)(**fields):
                    self.sent.append((member.member_id, method, fields))
                    work += 1
                else:
                    still.append(entry)
            self._pending = still
        return work

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.do_work() == 0:
                    time.sleep(0.001)
            except BaseException as exc:  # a test's script failing: kept for the test to show
                self.errors.append(exc)
                return
