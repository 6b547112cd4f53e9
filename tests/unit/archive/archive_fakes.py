"""Stand-ins for what the archive conductor is given (an Aeron client, a mark file): enough to drive its
``on_<request>`` methods and its control sessions without a media driver."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.layout.counters import COUNTER_LENGTH, COUNTER_VALUE_OFFSET


class Watched:
    """A memory word standing for what a real resource names in an idle watch (a log's word, a generation)."""

    def __init__(self):
        self.idle_word = np.zeros(1, np.int64)

    def add_idle_watch(self, watch):
        watch.watch_int64(self.idle_word, 0)


class Counter:
    """A counter whose value is a record of memory of its own, as a client's is of cnc.dat (compiled code counts into
    it by address: ``values_buffer`` and its ``id``, 0)."""

    def __init__(self, type_id=0, key=b"", label=""):
        self.type_id, self.key, self.label = type_id, key, label
        self.values_buffer = np.zeros(COUNTER_LENGTH, np.uint8)
        self.id = 0
        self.stores = 0  # set() calls
        self.is_closed = False

    @property
    def value(self):
        return int(self.values_buffer[COUNTER_VALUE_OFFSET:COUNTER_VALUE_OFFSET + 8].view(np.int64)[0])

    @value.setter
    def value(self, value):
        self.values_buffer[COUNTER_VALUE_OFFSET:COUNTER_VALUE_OFFSET + 8].view(np.int64)[0] = value

    def get(self):
        return self.value

    def set(self, value):
        self.value = value
        self.stores += 1

    def increment(self):
        self.value += 1

    def get_and_add(self, delta):
        self.value += delta
        return self.value - delta

    def close(self):
        self.is_closed = True


class Publication(Watched):
    """A connected response publication keeping each message it took, raw and decoded."""

    def __init__(self, channel="", stream_id=0, session_id=1):
        super().__init__()
        self.channel, self.stream_id, self.session_id = channel, stream_id, session_id
        self.is_connected = True
        self.raw: list[bytes] = []
        self.results: list[int] = []  # what the next offers answer instead of taking the message

    @property
    def sent(self):
        return [ARCHIVE.decode(data) for data in self.raw]

    def offer(self, buffer, offset=0, length=None):
        if self.results:
            return self.results.pop(0)
        self.raw.append(bytes(buffer[offset:offset + length]))
        return 64 * len(self.raw)

    def close(self):
        self.is_connected = False


@dataclass
class Fragment:
    """A whole message's header as a FragmentAssembler reads it."""

    session_id: int
    flags: int = 0xC0  # BEGIN | END
    next_term_offset: int = 0


class Subscription(Watched):
    """Delivers the fragments queued in ``fragments`` (bytes, request image session id)."""

    def __init__(self, registration_id, channel="", stream_id=0, handlers=None):
        super().__init__()
        self.registration_id, self.channel, self.stream_id = registration_id, channel, stream_id
        self.handlers = handlers or {}  # available_image_handler / unavailable_image_handler as given
        self.fragments: list[tuple[bytes, int]] = []
        self.is_closed = False

    def poll(self, handler, limit):
        count = 0
        while self.fragments and count < limit:
            data, session_id = self.fragments.pop(0)
            handler(data, 0, len(data), Fragment(session_id))
            count += 1
        return count

    def try_resolve_channel_endpoint_port(self):
        return self.channel

    def close(self):
        self.is_closed = True


class Aeron(Watched):
    client_id = 77
    conductor_agent_invoker = None  # the conductor runs on a thread of its own, as by default

    def __init__(self):
        super().__init__()
        self._ids = itertools.count(1000)
        self.subscriptions: list[Subscription] = []
        self.publications: list[Publication] = []
        self.counters: list[Counter] = []
        self.made: dict[int, object] = {}  # registration id -> what an asynchronous add made
        self.pending: set[int] = set()  # asynchronous adds the driver has not answered
        self.refused: dict[int, BaseException] = {}  # ... or answered with an error
        self.removed: list[int] = []  # asynchronous removes

    def next_correlation_id(self):
        return next(self._ids)

    def add_subscription(self, channel, stream_id, **handlers):
        subscription = Subscription(next(self._ids), channel, stream_id, handlers)
        self.subscriptions.append(subscription)
        return subscription

    def add_exclusive_publication(self, channel, stream_id):
        publication = Publication(channel, stream_id, session_id=len(self.publications) + 1)
        self.publications.append(publication)
        return publication

    # Asynchronous adds: made at once (the driver answered), unless the test holds them in ``pending``.
    def async_add_subscription(self, channel, stream_id, **handlers):
        subscription = self.add_subscription(channel, stream_id, **handlers)
        self.made[subscription.registration_id] = subscription
        return subscription.registration_id

    def async_add_exclusive_publication(self, channel, stream_id):
        publication = self.add_exclusive_publication(channel, stream_id)
        publication.registration_id = next(self._ids)
        self.made[publication.registration_id] = publication
        return publication.registration_id

    def get_subscription(self, registration_id):
        return None if registration_id in self.pending else self._made(registration_id, Subscription)

    def get_exclusive_publication(self, registration_id):
        return None if registration_id in self.pending else self._made(registration_id, Publication)

    def _made(self, registration_id, kind):
        error = self.refused.pop(registration_id, None)
        if error is not None:
            raise error
        resource = self.made.get(registration_id)
        return resource if isinstance(resource, kind) else None

    def async_remove_subscription(self, registration_id):
        self.removed.append(registration_id)

    def async_remove_publication(self, registration_id):
        self.removed.append(registration_id)

    def add_counter(self, type_id, key, label):
        counter = Counter(type_id, key, label)
        self.counters.append(counter)
        return counter


@dataclass
class ErrorLog:
    errors: list = field(default_factory=list)

    def record(self, error):
        self.errors.append(str(error))


@dataclass
class MarkFile:
    error_log: ErrorLog = field(default_factory=ErrorLog)
    activity_timestamps_ms: list = field(default_factory=list)

    def update_activity_timestamp(self, now_ms):
        self.activity_timestamps_ms.append(now_ms)
