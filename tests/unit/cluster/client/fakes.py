"""Fakes of the Aeron client objects a cluster client uses (publications, a subscription with images, the Aeron
client's asynchronous adds), and a clock a test moves: the client's state machine driven step by step."""

from __future__ import annotations

import collections

import numpy as np

from aeron_numba.client import ABORT, BREAK
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.errors import RegistrationError
from aeron_numba.layout import frame

RESPONSE_CHANNEL = "aeron:udp?endpoint=127.0.0.1:40123"


class Clock:
    def __init__(self, now_ns: int = 1_000_000_000):
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, ns: int) -> None:
        self.now_ns += ns


class FakePublication:
    def __init__(self, channel: str = "aeron:udp?endpoint=127.0.0.1:9000", connected: bool = True):
        self.channel = channel
        self.is_connected = connected
        self.is_closed = False
        self.results: collections.deque[int] = collections.deque()  # next offers' answers (else a position)
        self.position = 0
        self.offered: list[bytes] = []

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int:
        if self.is_closed:
            return -4
        if self.results:
            return self.results.popleft()
        data = bytes(np.asarray(buffer, dtype=np.uint8)[offset:offset + (len(buffer) - offset if length is None
                                                                           else length)])
        self.offered.append(data)
        self.position += len(data)
        return self.position

    def messages(self) -> list:
        return [CLUSTER.decode(data) for data in self.offered]

    def close(self) -> None:
        self.is_closed = True

    def __repr__(self) -> str:
        return f"FakePublication({self.channel})"


class FakeImage:
    def __init__(self, session_id: int):
        self.session_id = session_id
        self.is_closed = False


class FakeHeader:
    def __init__(self, session_id: int):
        self.session_id = session_id
        self.flags = frame.UNFRAGMENTED


class FakeSubscription:
    """Delivers queued messages, each an unfragmented fragment of the image of its session id."""

    def __init__(self):
        self.queued: collections.deque[tuple[bytes, int]] = collections.deque()
        self.images: dict[int, FakeImage] = {}
        self.is_connected = True
        self.is_closed = False
        self.resolved_channel: str | None = RESPONSE_CHANNEL

    def deliver(self, message, session_id: int = 11) -> None:
        """Queue ``message`` (an SBE message, or raw bytes) as coming on image ``session_id``."""
        data = message if isinstance(message, (bytes, bytearray)) else CLUSTER.encode(message)
        self.images.setdefault(session_id, FakeImage(session_id))
        self.queued.append((bytes(data), session_id))

    def image_by_session_id(self, session_id: int):
        return self.images.get(session_id)

    def poll(self, handler, fragment_limit: int) -> int:
        count = 0
        while self.queued and count < fragment_limit:
            data, session_id = self.queued.popleft()
            handler(np.frombuffer(data, dtype=np.uint8), 0, len(data), FakeHeader(session_id))
            count += 1
        return count

    def controlled_poll(self, handler, fragment_limit: int) -> int:
        count = 0
        while self.queued and count < fragment_limit:
            data, session_id = self.queued[0]
            action = handler(np.frombuffer(data, dtype=np.uint8), 0, len(data), FakeHeader(session_id))
            if action == ABORT:
                break
            self.queued.popleft()
            count += 1
            if action == BREAK:
                break
        return count

    def try_resolve_channel_endpoint_port(self) -> str | None:
        return self.resolved_channel

    def close(self) -> None:
        self.is_closed = True


class FakeAeron:
    """The Aeron client's asynchronous adds: a registration is made when the test says (``make``), or at once
    when ``immediate``; a channel in ``refused`` is refused as the driver would."""

    conductor_agent_invoker = None

    def __init__(self, immediate: bool = True):
        self.immediate = immediate
        self.next_id = 100
        self.pending: dict[int, tuple[str, str, int]] = {}  # id -> (kind, channel, stream)
        self.made: dict[int, object] = {}
        self.removed: list[int] = []
        self.refused: set[str] = set()
        self.doorbell_rings = 0
        self.connected_channels: set[str] | None = None  # None: every publication connects
        self.publications: list[FakePublication] = []
        self.subscription = FakeSubscription()
        self.correlation_id = 0
        self.is_closed = False

    def ring_doorbell(self) -> None:
        self.doorbell_rings += 1

    def next_correlation_id(self) -> int:
        self.correlation_id += 1
        return self.correlation_id

    def _add(self, kind: str, channel: str, stream_id: int) -> int:
        self.next_id += 1
        self.pending[self.next_id] = (kind, channel, stream_id)
        if self.immediate:
            self.make(self.next_id)
        return self.next_id

    def make(self, registration_id: int) -> None:
        kind, channel, _ = self.pending[registration_id]
        if kind == "subscription":
            self.made[registration_id] = self.subscription
        elif channel in self.refused:
            self.made[registration_id] = RegistrationError(1, f"refused {channel}")
        else:
            connected = self.connected_channels is None or channel in self.connected_channels
            publication = FakePublication(channel, connected)
            self.publications.append(publication)
            self.made[registration_id] = publication

    def make_all(self) -> None:
        for registration_id in list(self.pending):
            if registration_id not in self.made:
                self.make(registration_id)

    def _get(self, registration_id: int):
        made = self.made.get(registration_id)
        if isinstance(made, RegistrationError):
            raise made
        return made

    def async_add_exclusive_publication(self, channel: str, stream_id: int) -> int:
        return self._add("publication", channel, stream_id)

    def async_add_subscription(self, channel: str, stream_id: int) -> int:
        return self._add("subscription", channel, stream_id)

    get_exclusive_publication = _get
    get_subscription = _get

    def async_remove_publication(self, registration_id: int) -> None:
        self.removed.append(registration_id)

    def async_remove_subscription(self, registration_id: int) -> None:
        self.removed.append(registration_id)

    def publication_to(self, endpoint: str) -> FakePublication:
        (publication,) = [p for p in self.publications if endpoint in p.channel and not p.is_closed]
        return publication

    def close(self) -> None:
        self.is_closed = True
