"""A small scripted IPC media driver for client tests (no real driver needed).

It owns a ``cnc.dat`` made with ``CncFile.create``, reads commands from the to-driver ring buffer, answers on
the broadcast buffer with the codecs, allocates counters with ``CountersManager`` and creates log files with
``LogBuffers.create`` - just enough of spec/transport.md §11 and §15 to exercise the client:

* the client-heartbeat counter (type 11) on a client's first command (§11.5);
* ADD_PUBLICATION (concurrent publications on one channel+stream share a log and answer with the original
  registration id), ADD_EXCLUSIVE_PUBLICATION, ADD_SUBSCRIPTION, ON_AVAILABLE_IMAGE for every match, REMOVE_*
  (ON_UNAVAILABLE_IMAGE at once when a publication goes), ADD_COUNTER / REMOVE_COUNTER, CLIENT_CLOSE;
* ``pub-lmt`` = slowest ``sub-pos`` + term_length / 2 and ``is_connected`` on each duty cycle (§4.7), and
  whole terms behind the slowest subscriber are zeroed so long runs can lap the log;
* scripting: ``fail_next(command, code, text)`` answers the next such command with ON_ERROR,
  ``respond = False`` swallows commands, ``heartbeat = False`` stops the driver heartbeat,
  ``run_on_driver(fn)`` runs ``fn`` on the driver thread (the broadcast has one transmitter).

It runs on a thread of the test process; every wait in the tests polls with a deadline.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.codecs.channel_uri import TERM_LENGTH_PARAM, ChannelUri, parse_size
from aeron_numba.kernels import counters as counters_kernels
from aeron_numba.kernels import term_appender
from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int32_release, put_int64_release
from aeron_numba.kernels.broadcast import BroadcastTransmitter
from aeron_numba.kernels.counters import CountersManager
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.log_buffers import LogBuffers
from harness.awaiting import NotYet, await_condition

TERM_LENGTH = 64 * 1024
SMALL_CNC = dict(
    to_driver_buffer_length=64 * 1024 + 768,
    to_clients_buffer_length=64 * 1024 + 128,
    counters_values_buffer_length=64 * 1024,
    error_log_buffer_length=64 * 1024,
)


def epoch_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class FakePublication:
    registration_id: int
    channel: str
    stream_id: int
    session_id: int
    exclusive: bool
    log_buffers: LogBuffers
    limit_counter_id: int
    ref_count: int = 1
    client_ids: list = field(default_factory=list)
    cleaned_terms: int = 0
    # subscription registration id -> sub-pos counter id
    images: dict = field(default_factory=dict)


@dataclass
class FakeSubscription:
    registration_id: int
    client_id: int
    channel: str
    stream_id: int


class FakeDriver:
    """See the module docstring. ``close()`` stops the thread and unmaps everything."""

    def __init__(self, aeron_dir: Path, *, client_liveness_timeout_ns: int = 10_000_000_000, start: bool = True,
                 signal_ready: bool = True, term_length: int = TERM_LENGTH):
        self.aeron_dir = Path(aeron_dir)
        self.aeron_dir.mkdir(parents=True, exist_ok=True)
        (self.aeron_dir / "publications").mkdir(exist_ok=True)
        self.term_length = term_length
        self.cnc = CncFile.create(
            self.aeron_dir / "cnc.dat", client_liveness_timeout_ns=client_liveness_timeout_ns, signal_ready=False,
            **SMALL_CNC,
        )
        self.ring = ManyToOneRingBuffer(self.cnc.to_driver_buffer)
        self.transmitter = BroadcastTransmitter(self.cnc.to_clients_buffer)
        self.counters = CountersManager(self.cnc.counters_metadata_buffer, self.cnc.counters_values_buffer)
        self.values = self.cnc.counters_values_buffer
        self.ring.set_consumer_heartbeat_time(epoch_ms())
        self.heartbeat = True
        self.respond = True
        self.commands: list[tuple[int, object]] = []
        self.responses: list[tuple[int, object]] = []
        self.heartbeat_counter_by_client: dict[int, int] = {}
        self.publications: dict[int, FakePublication] = {}
        self.subscriptions: dict[int, FakeSubscription] = {}
        self.counter_ids: dict[int, int] = {}
        self.ended_logs: list[LogBuffers] = []
        self._errors: dict[int, tuple[int, str]] = {}
        self._next_session_id = 1001
        self._tasks: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-driver", daemon=True)
        self.errors: list[BaseException] = []
        if signal_ready:
            self.cnc.signal_ready()
        if start:
            self._thread.start()

    # ----------------------------------------------------------------------------------------- control
    def signal_ready(self) -> None:
        self.cnc.signal_ready()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for log_buffers in [p.log_buffers for p in self.publications.values()] + self.ended_logs:
            log_buffers.close()
        self.publications.clear()
        self.ended_logs.clear()
        self.ring = self.transmitter = self.counters = self.values = None
        self.cnc.close()

    def __enter__(self) -> "FakeDriver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fail_next(self, msg_type_id: int, error_code: int, text: str) -> None:
        self._errors[msg_type_id] = (error_code, text)

    def run_on_driver(self, fn) -> None:
        self._tasks.put(fn)

    def send_client_timeout(self, client_id: int) -> None:
        self.run_on_driver(lambda: self._transmit(cp.ON_CLIENT_TIMEOUT, dc.ClientTimeout(client_id)))

    def commands_of(self, msg_type_id: int) -> list:
        return [msg for type_id, msg in list(self.commands) if type_id == msg_type_id]

    def wait_for_command(self, msg_type_id: int, count: int = 1, timeout_s: float = 5.0) -> list:
        await_condition(lambda: len(self.commands_of(msg_type_id)) >= count, timeout_s, f"command {msg_type_id:#x}")
        return self.commands_of(msg_type_id)

    def counter_value(self, counter_id: int) -> int:
        return int(counters_kernels.get_counter_value(self.cnc.counters_values_buffer, counter_id))

    def sub_pos_counter(self, publication_registration_id: int, subscription_registration_id: int) -> int:
        return self.publications[publication_registration_id].images[subscription_registration_id]

    # -------------------------------------------------------------------------------------- duty cycle
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.do_work()
            except Exception as exc:  # noqa: BLE001 - surfaced through self.errors
                self.errors.append(exc)
            self._stop.wait(0.001)

    def do_work(self) -> None:
        if self.heartbeat:
            self.ring.set_consumer_heartbeat_time(epoch_ms())
        while not self._tasks.empty():
            self._tasks.get()()
        messages = self.ring.read_messages(64)
        assert not isinstance(messages, int), f"corrupt to-driver record: {messages}"
        for msg_type_id, body in messages:
            self._on_command(msg_type_id, body)
        self._update_publications()

    def _transmit(self, msg_type_id: int, message) -> None:
        self.responses.append((msg_type_id, message))
        self.transmitter.transmit(msg_type_id, message.encode())

    # ---------------------------------------------------------------------------------------- commands
    def _on_command(self, msg_type_id: int, body: bytes) -> None:
        msg = dc.decode_command(msg_type_id, body, 0, len(body))
        self.commands.append((msg_type_id, msg))
        if msg.client_id not in self.heartbeat_counter_by_client:
            self.heartbeat_counter_by_client[msg.client_id] = self.counters.allocate(
                counters_kernels.heartbeat_counter_label(msg.client_id), counters_layout.CLIENT_HEARTBEAT_TYPE_ID,
                counters_kernels.heartbeat_counter_key(msg.client_id),
                registration_id=msg.client_id, owner_id=msg.client_id,
            )
        if not self.respond or msg_type_id == cp.CLIENT_KEEPALIVE:
            return
        if msg_type_id in self._errors:
            code, text = self._errors.pop(msg_type_id)
            self._transmit(cp.ON_ERROR, dc.ErrorResponse(msg.correlation_id, code, text))
            return
        handler = {
            cp.ADD_PUBLICATION: self._on_add_publication,
            cp.ADD_EXCLUSIVE_PUBLICATION: self._on_add_publication,
            cp.REMOVE_PUBLICATION: self._on_remove_publication,
            cp.ADD_SUBSCRIPTION: self._on_add_subscription,
            cp.REMOVE_SUBSCRIPTION: self._on_remove_subscription,
            cp.ADD_COUNTER: self._on_add_counter,
            cp.REMOVE_COUNTER: self._on_remove_counter,
            cp.ADD_RCV_DESTINATION: self._on_destination,
            cp.REMOVE_RCV_DESTINATION: self._on_destination,
            cp.CLIENT_CLOSE: lambda t, m: None,
        }.get(msg_type_id)
        if handler is None:
            self._transmit(cp.ON_ERROR, dc.ErrorResponse(msg.correlation_id, cp.UNKNOWN_COMMAND_TYPE_ID, f"type {msg_type_id}"))
            return
        handler(msg_type_id, msg)

    def _on_add_publication(self, msg_type_id: int, msg) -> None:
        exclusive = msg_type_id == cp.ADD_EXCLUSIVE_PUBLICATION
        uri = ChannelUri.parse(msg.channel)
        if not uri.is_ipc:
            self._transmit(cp.ON_ERROR, dc.ErrorResponse(msg.correlation_id, cp.INVALID_CHANNEL, f"only IPC: {msg.channel}"))
            return
        ready_type = cp.ON_EXCLUSIVE_PUBLICATION_READY if exclusive else cp.ON_PUBLICATION_READY
        if not exclusive:
            for publication in self.publications.values():
                if not publication.exclusive and publication.channel == msg.channel and publication.stream_id == msg.stream_id:
                    publication.ref_count += 1
                    publication.client_ids.append((msg.correlation_id, msg.client_id))
                    self._transmit(ready_type, self._ready(msg.correlation_id, publication))
                    return
        term_length = self.term_length
        if uri.get(TERM_LENGTH_PARAM):
            term_length = parse_size(TERM_LENGTH_PARAM, uri.get(TERM_LENGTH_PARAM))
        session_id = self._next_session_id
        self._next_session_id += 1
        path = self.aeron_dir / "publications" / f"{msg.correlation_id}.logbuffer"
        log_buffers = LogBuffers.create(
            path, term_length=term_length, initial_term_id=(msg.correlation_id * 7919) % 100_000,
            session_id=session_id, stream_id=msg.stream_id, correlation_id=msg.correlation_id,
        )
        limit_id = self.counters.allocate(
            counters_kernels.stream_counter_label("pub-lmt", msg.correlation_id, session_id, msg.stream_id, msg.channel),
            counters_layout.PUBLISHER_LIMIT_TYPE_ID,
            counters_kernels.stream_counter_key(msg.correlation_id, session_id, msg.stream_id, msg.channel),
            registration_id=msg.correlation_id, owner_id=msg.client_id,
        )
        publication = FakePublication(
            msg.correlation_id, msg.channel, msg.stream_id, session_id, exclusive, log_buffers, limit_id,
            client_ids=[(msg.correlation_id, msg.client_id)],
        )
        self.publications[msg.correlation_id] = publication
        self._transmit(ready_type, self._ready(msg.correlation_id, publication))
        for subscription in self.subscriptions.values():
            if subscription.stream_id == publication.stream_id:
                self._link(publication, subscription)

    def _ready(self, correlation_id: int, publication: FakePublication):
        return dc.PublicationBuffersReady(
            correlation_id, publication.registration_id, publication.session_id, publication.stream_id,
            publication.limit_counter_id, -1, str(publication.log_buffers.path),
        )

    def _link(self, publication: FakePublication, subscription: FakeSubscription) -> None:
        join_position = int(term_appender.producer_position(publication.log_buffers.buffer))
        sub_pos_id = self.counters.allocate(
            counters_kernels.subscriber_position_label(
                subscription.registration_id, publication.session_id, publication.stream_id, subscription.channel,
                join_position,
            ),
            counters_layout.SUBSCRIBER_POSITION_TYPE_ID,
            counters_kernels.stream_counter_key(
                subscription.registration_id, publication.session_id, publication.stream_id, subscription.channel
            ),
            registration_id=subscription.registration_id, owner_id=subscription.client_id,
            reference_id=publication.registration_id,
        )
        counters_kernels.set_counter_value(self.values, sub_pos_id, join_position)
        publication.images[subscription.registration_id] = sub_pos_id
        self._transmit(
            cp.ON_AVAILABLE_IMAGE,
            dc.ImageBuffersReady(
                publication.registration_id, publication.session_id, publication.stream_id,
                subscription.registration_id, sub_pos_id, str(publication.log_buffers.path), "aeron:ipc",
            ),
        )

    def _end_publication(self, publication: FakePublication) -> None:
        """Last reference gone: end of stream at the producer position, images unavailable, counters freed."""
        log = publication.log_buffers.buffer
        meta = publication.log_buffers.metadata_offset
        put_int64_release(log, meta + lb.LOG_END_OF_STREAM_POSITION_OFFSET, int(term_appender.producer_position(log)))
        for subscription_id, sub_pos_id in list(publication.images.items()):
            subscription = self.subscriptions.get(subscription_id)
            self._transmit(
                cp.ON_UNAVAILABLE_IMAGE,
                dc.ImageMessage(publication.registration_id, subscription_id, publication.stream_id,
                                subscription.channel if subscription else "aeron:ipc"),
            )
            self.counters.free(sub_pos_id)
        publication.images.clear()
        self.counters.free(publication.limit_counter_id)
        del self.publications[publication.registration_id]
        self.ended_logs.append(publication.log_buffers)

    def _on_remove_publication(self, msg_type_id: int, msg) -> None:
        for publication in list(self.publications.values()):
            for entry in publication.client_ids:
                if entry[0] == msg.registration_id:
                    publication.client_ids.remove(entry)
                    publication.ref_count -= 1
                    self._transmit(cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(msg.correlation_id))
                    if publication.ref_count == 0:
                        self._end_publication(publication)
                    return
        self._transmit(
            cp.ON_ERROR,
            dc.ErrorResponse(msg.correlation_id, cp.UNKNOWN_PUBLICATION, f"unknown registration_id={msg.registration_id}"),
        )

    def _on_add_subscription(self, msg_type_id: int, msg) -> None:
        subscription = FakeSubscription(msg.correlation_id, msg.client_id, msg.channel, msg.stream_id)
        self.subscriptions[msg.correlation_id] = subscription
        self._transmit(cp.ON_SUBSCRIPTION_READY, dc.SubscriptionReady(msg.correlation_id, -1))
        for publication in list(self.publications.values()):
            if publication.stream_id == msg.stream_id:
                self._link(publication, subscription)

    def _on_remove_subscription(self, msg_type_id: int, msg) -> None:
        subscription = self.subscriptions.pop(msg.registration_id, None)
        if subscription is None:
            self._transmit(
                cp.ON_ERROR,
                dc.ErrorResponse(msg.correlation_id, cp.UNKNOWN_SUBSCRIPTION, f"unknown registration_id={msg.registration_id}"),
            )
            return
        for publication in self.publications.values():
            sub_pos_id = publication.images.pop(msg.registration_id, None)
            if sub_pos_id is not None:
                self.counters.free(sub_pos_id)
        self._transmit(cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(msg.correlation_id))

    def _on_add_counter(self, msg_type_id: int, msg) -> None:
        counter_id = self.counters.allocate(
            msg.label, msg.type_id, msg.key, registration_id=msg.correlation_id, owner_id=msg.client_id
        )
        self.counter_ids[msg.correlation_id] = counter_id
        self._transmit(cp.ON_COUNTER_READY, dc.CounterUpdate(msg.correlation_id, counter_id))

    def _on_destination(self, msg_type_id: int, msg) -> None:
        self._transmit(cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(msg.correlation_id))

    def _on_remove_counter(self, msg_type_id: int, msg) -> None:
        counter_id = self.counter_ids.pop(msg.registration_id, None)
        if counter_id is None:
            self._transmit(
                cp.ON_ERROR, dc.ErrorResponse(msg.correlation_id, cp.UNKNOWN_COUNTER, f"unknown {msg.registration_id}")
            )
            return
        self._transmit(cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(msg.correlation_id))
        self._transmit(cp.ON_UNAVAILABLE_COUNTER, dc.CounterUpdate(msg.registration_id, counter_id))
        self.counters.free(counter_id)

    # ------------------------------------------------------------------------------- limits, cleaning
    def _update_publications(self) -> None:
        for publication in self.publications.values():
            log = publication.log_buffers.buffer
            meta = publication.log_buffers.metadata_offset
            term_length = publication.log_buffers.term_length
            limit_offset = publication.limit_counter_id * counters_layout.COUNTER_LENGTH
            if not publication.images:
                put_int32_release(log, meta + lb.LOG_IS_CONNECTED_OFFSET, 0)
                continue
            positions = [int(get_int64_acquire(self.values, i * counters_layout.COUNTER_LENGTH)) for i in publication.images.values()]
            min_position = min(positions)
            put_int32_release(log, meta + lb.LOG_IS_CONNECTED_OFFSET, 1)
            proposed = min_position + term_length // 2
            if proposed > int(get_int64_acquire(self.values, limit_offset)):
                put_int64_release(self.values, limit_offset, proposed)
            # Zero whole terms every subscriber has left, so the log can be lapped (§4.7 cleaning).
            while (publication.cleaned_terms + 1) * term_length <= min_position:
                index = publication.cleaned_terms % lb.PARTITION_COUNT
                log[index * term_length : (index + 1) * term_length] = 0
                publication.cleaned_terms += 1


def connect(driver: FakeDriver, **context_kwargs):
    """Connect a client to ``driver``; returns ``(aeron, errors)`` where errors collects the error handler's."""
    from aeron_numba.client import Aeron, Context

    errors: list[BaseException] = []
    context_kwargs.setdefault("error_handler", errors.append)
    aeron = Aeron.connect(Context(aeron_dir=driver.aeron_dir, **context_kwargs))
    return aeron, errors


def poll_until(subscription_or_image, handler, count_fn, expected: int, timeout_s: float = 5.0, fragment_limit: int = 10) -> None:
    """Poll until ``count_fn() >= expected`` (deadline)."""
    await_condition(lambda: count_fn() >= expected or NotYet(f"polled {count_fn()} of {expected}"), timeout_s,
                    f"{expected} messages", work=lambda: subscription_or_image.poll(handler, fragment_limit))


def mapping_count(path) -> int:
    """How many mappings of ``path`` this process has (Linux ``/proc/self/maps``)."""
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if line.rstrip().endswith(str(path)))
