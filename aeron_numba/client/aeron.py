"""``Aeron``: the client entry point (Aeron's ``Aeron``): connect to a media driver and register resources.

```python
from aeron_numba.client import Aeron, Context, FragmentAssembler

with Aeron.connect(Context(aeron_dir="/dev/shm/aeron-me")) as aeron:
    pub = aeron.add_publication("aeron:ipc", 1001)
    sub = aeron.add_subscription("aeron:ipc", 1001)
    pub.offer(b"hello")
    sub.poll(FragmentAssembler(lambda buf, off, length, header: print(bytes(buf[off:off + length]))), 10)
```

``connect`` waits (up to the driver timeout) for ``cnc.dat`` to exist and be ready and for the driver's
heartbeat to be fresh, takes a client id from the to-driver ring buffer, and starts the client conductor:
an ``AgentRunner`` on a daemon thread, or, with ``Context(use_conductor_agent_invoker=True)``, an
``AgentInvoker`` the application calls itself (``aeron.conductor_agent_invoker.invoke()`` in its own duty
cycle, often enough to keep the client alive; calls that await the driver service the conductor while they
wait). The client ends with ``close()`` (or the ``with`` block), or by itself when the driver
stops (``DriverTimeoutError``) or times it out (``ClientTimeoutError``); every later call raises that error.
"""

from __future__ import annotations

import os
import time
import weakref

from aeron_numba.agent.agent_runner import AgentInvoker, AgentRunner
from aeron_numba.agent.idle_strategy import SleepingIdleStrategy
from aeron_numba.client.client_conductor import ClientConductor
from aeron_numba.kernels.cnc_file import CncFile, CncNotReadyError, body_problem
from aeron_numba.client.context import Context
from aeron_numba.client.counter import Counter
from aeron_numba.client.publication import ExclusivePublication, Publication
from aeron_numba.client.subscription import Subscription
from aeron_numba.codecs.channel_uri import ChannelUri
from aeron_numba.errors import ConfigurationError, DriverTimeoutError, InvalidChannelError
from aeron_numba.client.warmup import warm_up_client_kernels
from aeron_numba.kernels.counters import CountersReader, counter_value_address
from aeron_numba.kernels.idle_wait import ring_doorbell, wake_socket_fd
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import cnc
from aeron_numba.layout import counters as counters_layout

_CNC_POLL_S = 0.016
_HEARTBEAT_POLL_S = 0.001
_STALE_CNC_RETRY_S = 0.1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _check_stream_id(stream_id) -> int:
    if isinstance(stream_id, bool) or not isinstance(stream_id, int):
        raise ConfigurationError(f"stream_id={stream_id!r} must be an int")
    if not _INT32_MIN <= stream_id <= _INT32_MAX:
        raise ConfigurationError(f"stream_id={stream_id} outside int32 [{_INT32_MIN}, {_INT32_MAX}]")
    return stream_id


def _check_channel(channel) -> str:
    ChannelUri.parse(channel)  # raises InvalidChannelError naming the problem
    if not channel.isascii():
        raise InvalidChannelError(f"channel {channel!r} must be ASCII (§11.3 strings are ASCII)")
    return channel


def connect_to_driver(context: Context) -> CncFile:
    """Map ``cnc.dat`` once the driver has created it, signalled ready, and is heartbeating (Aeron semantics).

    A ``cnc.dat`` whose heartbeat is older than the driver timeout is left behind by a dead driver: it is
    unmapped and looked at again (a new driver may be replacing it) until the deadline. The heartbeat's age
    is taken from ``context.epoch_clock``; the deadline is real time, since this waits by sleeping.
    Raises ``DriverTimeoutError`` at the deadline, saying which of the steps did not happen.
    """
    path = context.cnc_file_path
    timeout_ms = context.driver_timeout_ms
    deadline_ns = time.monotonic_ns() + context.driver_timeout_ns

    def past_deadline() -> bool:
        return time.monotonic_ns() > deadline_ns

    while True:
        try:
            if os.stat(path).st_size <= cnc.END_OF_METADATA_OFFSET:
                raise CncNotReadyError(f"{path} is still being created")
            cnc_file = CncFile.open(path)
        except FileNotFoundError:
            if past_deadline():
                raise DriverTimeoutError(
                    f"{path} not created within driver_timeout_ms={timeout_ms}: is a media driver running on"
                    f" aeron_dir={context.aeron_dir}?"
                ) from None
            time.sleep(_CNC_POLL_S)
            continue
        except CncNotReadyError as exc:
            if past_deadline():
                raise DriverTimeoutError(
                    f"{path} created but not initialised within driver_timeout_ms={timeout_ms}: {exc}"
                ) from None
            time.sleep(_HEARTBEAT_POLL_S)
            continue

        to_driver = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        try:
            while to_driver.consumer_heartbeat_time() == 0:
                if past_deadline():
                    raise DriverTimeoutError(f"no driver heartbeat detected in {path} within driver_timeout_ms={timeout_ms}")
                time.sleep(_HEARTBEAT_POLL_S)
            heartbeat_ms = to_driver.consumer_heartbeat_time()
            now_ms = context.epoch_clock.time()
            # A valid header over a garbage body is not a live driver (a new one may still replace the file).
            corrupt = body_problem(to_driver, now_ms, timeout_ms)
        except BaseException:
            del to_driver
            cnc_file.close()
            raise
        del to_driver
        age_ms = now_ms - heartbeat_ms
        if corrupt is None and age_ms <= timeout_ms:
            return cnc_file
        cnc_file.close()
        if past_deadline():
            if corrupt is not None:
                raise DriverTimeoutError(
                    f"{path} is corrupt ({corrupt}): no live driver there; start a driver on aeron_dir="
                    f"{context.aeron_dir} (AERON_DIR_DELETE_ON_START=true replaces the file)")
            raise DriverTimeoutError(
                f"no driver heartbeat detected: {path} heartbeat age={age_ms}ms > driver_timeout_ms={timeout_ms}"
                " (a driver that died left it behind?)"
            )
        time.sleep(_STALE_CNC_RETRY_S)


class Aeron:
    """A connected client. Create with ``Aeron.connect(context)``; thread-safe; close once."""

    def __init__(self, context: Context, conductor: ClientConductor):
        self.context = context
        self._conductor = conductor
        self._doorbell_counter_id: int | None = None  # the driver's doorbell (None: not looked up yet)
        self._doorbell: tuple[int, weakref.ref] | None = None  # its value's address and buffer, for ring_doorbell
        self._conductor_runner: AgentRunner | None = None
        self._conductor_invoker: AgentInvoker | None = None
        if context.use_conductor_agent_invoker:
            self._conductor_invoker = AgentInvoker(conductor, context.error_handler)
            self._conductor_invoker.start()
        else:
            stop = conductor.stop_event
            # Idle sleeps end early when the client ends, so close() need not wait out a sleep.
            idle = SleepingIdleStrategy(context.idle_sleep_duration_ns, parker=lambda ns: stop.wait(ns / 1e9))
            self._conductor_runner = AgentRunner(conductor, idle, context.error_handler)
            AgentRunner.start_on_thread(self._conductor_runner, f"{conductor.role_name()}-{conductor.client_id}")

    @classmethod
    def connect(cls, context: Context | None = None) -> "Aeron":
        """Connect to the media driver of ``context.aeron_dir`` (see the module docstring)."""
        context = (context if context is not None else Context()).conclude()
        warm_up_client_kernels()  # before the driver knows us: compiling later could stall keepalives
        cnc_file = connect_to_driver(context)
        try:
            conductor = ClientConductor(context, cnc_file)
        except BaseException:
            try:
                cnc_file.close()
            except BufferError:
                pass
            raise
        return cls(context, conductor)

    # ------------------------------------------------------------------------------------------- facts
    @property
    def client_id(self) -> int:
        """The id the driver knows this client by (its heartbeat counter's ``client-heartbeat: id=``)."""
        return self._conductor.client_id

    @property
    def conductor(self) -> ClientConductor:
        """The client conductor (keepalives, driver responses, resources): for tools and tests."""
        return self._conductor

    def add_idle_watch(self, watch) -> None:
        """What the client conductor changes under an application thread's feet: its ``work_generation``, which moves
        after every cycle that handled a driver event (new images, unavailable ones) or a timer. With an
        aeron-numba driver, the watch also sleeps on and rings its doorbell counter (``IdleWatch.use_doorbell``)."""
        watch.watch_int64(self._conductor.work_generation, 0)
        counter_id = self._doorbell_id()
        if counter_id != counters_layout.NULL_COUNTER_ID:
            watch.use_doorbell(self.counters_reader.values_buffer, counter_id)

    def _doorbell_id(self) -> int:
        """The driver's doorbell counter (NULL_COUNTER_ID: a driver without one, such as Aeron's), looked up once:
        the driver allocates it before clients connect."""
        if self._doorbell_counter_id is None:
            self._doorbell_counter_id = next((c.counter_id for c in self.counters_reader.for_each()
                                              if c.type_id == counters_layout.DOORBELL_COUNTER_TYPE_ID),
                                             counters_layout.NULL_COUNTER_ID)
        return self._doorbell_counter_id

    def ring_doorbell(self) -> None:
        """Ring the driver's doorbell after writing from an application thread, for which no agent runner rings
        (a cluster client's ingress offer): an aeron-numba driver parked in ``ppoll`` then sends the message at once
        instead of at the end of its park (up to a millisecond under a backoff or sleeping idle strategy). Nothing
        with a driver without a doorbell, or once the client is closed."""
        doorbell = self._doorbell
        if doorbell is None:
            counter_id = self._doorbell_id()
            if counter_id == counters_layout.NULL_COUNTER_ID or self.is_closed:
                return
            values = self.counters_reader.values_buffer
            doorbell = self._doorbell = (counter_value_address(values, counter_id), weakref.ref(values))
        values = doorbell[1]()  # held while ringing: the mapping cannot go meanwhile; gone once the client closed
        if values is not None:
            ring_doorbell(doorbell[0], wake_socket_fd())

    @property
    def conductor_agent_invoker(self) -> AgentInvoker | None:
        """The invoker to call in invoker mode (``use_conductor_agent_invoker``); None when a thread runs it."""
        return self._conductor_invoker

    @property
    def counters_reader(self) -> CountersReader:
        """A reader of the driver's counters (labels, values) in cnc.dat."""
        return self._conductor.counters_reader

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` ran, or the client was closed for a driver timeout."""
        return self._conductor.is_closed

    @property
    def cnc_file(self) -> CncFile:
        """The mapped cnc.dat of the driver this client is connected to."""
        return self._conductor.cnc

    def next_correlation_id(self) -> int:
        """A driver-wide unique id from the to-driver ring buffer's counter."""
        self._conductor._raise_if_closed()
        return self._conductor.to_driver.next_correlation_id()

    # ----------------------------------------------------------------------------------- registrations
    def add_publication(self, channel: str, stream_id: int) -> Publication:
        """Register a concurrent publication; shares the log of any on the same channel and stream.

        Raises ``InvalidChannelError`` before sending for a malformed channel, ``RegistrationError`` when the
        driver refuses (with its §11.4 code), ``DriverTimeoutError`` when it does not answer in time.
        """
        channel = _check_channel(channel)
        stream_id = _check_stream_id(stream_id)
        return self._conductor.add_publication(channel, stream_id, exclusive=False)

    def add_exclusive_publication(self, channel: str, stream_id: int) -> ExclusivePublication:
        """Register a publication with its own log and session, for one writer thread."""
        channel = _check_channel(channel)
        stream_id = _check_stream_id(stream_id)
        return self._conductor.add_publication(channel, stream_id, exclusive=True)

    def add_subscription(
        self, channel: str, stream_id: int, available_image_handler=None, unavailable_image_handler=None
    ) -> Subscription:
        """Register a subscription. ``available_image_handler(image)`` / ``unavailable_image_handler(image)``
        default to the context's; they run in the conductor's duty cycle (its thread, or the thread calling
        ``conductor_agent_invoker.invoke()``) and must not call the client."""
        channel = _check_channel(channel)
        stream_id = _check_stream_id(stream_id)
        handlers = (
            ("available_image_handler", available_image_handler),
            ("unavailable_image_handler", unavailable_image_handler),
        )
        for name, handler in handlers:
            if handler is not None and not callable(handler):
                raise ConfigurationError(f"{name}={handler!r} must be callable")
        if available_image_handler is None:
            available_image_handler = self.context.available_image_handler
        if unavailable_image_handler is None:
            unavailable_image_handler = self.context.unavailable_image_handler
        return self._conductor.add_subscription(channel, stream_id, available_image_handler, unavailable_image_handler)

    # ------------------------------------------------------------------ asynchronous registrations
    # Aeron's asyncAdd* / get*: the add returns its registration id at once and the caller polls for the resource,
    # so an agent's duty cycle (the archive's) never waits on the driver.
    def async_add_publication(self, channel: str, stream_id: int) -> int:
        """Send the add of a concurrent publication; ``get_publication(registration_id)`` gives it once made."""
        return self._conductor.async_add_publication(_check_channel(channel), _check_stream_id(stream_id))

    def async_add_exclusive_publication(self, channel: str, stream_id: int) -> int:
        """Send the add of an exclusive publication; ``get_exclusive_publication(registration_id)`` gives it once
        made."""
        return self._conductor.async_add_publication(_check_channel(channel), _check_stream_id(stream_id),
                                                     exclusive=True)

    def async_add_subscription(self, channel: str, stream_id: int, available_image_handler=None,
                               unavailable_image_handler=None) -> int:
        """Send the add of a subscription; ``get_subscription(registration_id)`` gives it once made. The image
        handlers are as for ``add_subscription``."""
        channel = _check_channel(channel)
        stream_id = _check_stream_id(stream_id)
        for name, handler in (("available_image_handler", available_image_handler),
                              ("unavailable_image_handler", unavailable_image_handler)):
            if handler is not None and not callable(handler):
                raise ConfigurationError(f"{name}={handler!r} must be callable")
        return self._conductor.async_add_subscription(
            channel, stream_id, available_image_handler or self.context.available_image_handler,
            unavailable_image_handler or self.context.unavailable_image_handler)

    def get_publication(self, registration_id: int) -> Publication | None:
        """The publication of ``async_add_publication``; None while the driver has not answered. Raises the
        driver's ``RegistrationError`` when it refused, ``DriverTimeoutError`` when it did not answer in time."""
        return self._conductor.get_resource(registration_id, Publication)

    def get_exclusive_publication(self, registration_id: int) -> ExclusivePublication | None:
        """The exclusive publication of ``async_add_exclusive_publication``; None while the driver has not answered.
        Raises the driver's ``RegistrationError`` when it refused, ``DriverTimeoutError`` when it did not answer in
        time."""
        return self._conductor.get_resource(registration_id, ExclusivePublication)

    def get_subscription(self, registration_id: int) -> Subscription | None:
        """The subscription of ``async_add_subscription``; None while the driver has not answered. Raises the driver's
        ``RegistrationError`` when it refused, ``DriverTimeoutError`` when it did not answer in time."""
        return self._conductor.get_resource(registration_id, Subscription)

    def async_remove_publication(self, registration_id: int) -> None:
        """Close an asynchronously added publication, made or still pending, without waiting on the driver."""
        self._conductor.async_remove(registration_id, self._conductor.driver_proxy.remove_publication)

    def async_remove_subscription(self, registration_id: int) -> None:
        """Close an asynchronously added subscription, made or still pending, without waiting on the driver."""
        self._conductor.async_remove(registration_id, self._conductor.driver_proxy.remove_subscription)

    def add_counter(self, type_id: int, key: bytes = b"", label: str = "") -> Counter:
        """Ask the driver to allocate a counter owned by this client (key <= 112 bytes, ASCII label <= 380)."""
        if isinstance(type_id, bool) or not isinstance(type_id, int) or not _INT32_MIN <= type_id <= _INT32_MAX:
            raise ConfigurationError(f"type_id={type_id!r} must be an int32")
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise ConfigurationError(f"key={key!r} must be bytes-like")
        key = bytes(key)
        if len(key) > counters_layout.MAX_KEY_LENGTH:
            raise ConfigurationError(f"key length={len(key)} > MAX_KEY_LENGTH={counters_layout.MAX_KEY_LENGTH}")
        if not isinstance(label, str) or not label.isascii():
            raise ConfigurationError(f"label={label!r} must be an ASCII str")
        if len(label) > counters_layout.MAX_LABEL_LENGTH:
            raise ConfigurationError(f"label length={len(label)} > MAX_LABEL_LENGTH={counters_layout.MAX_LABEL_LENGTH}")
        return self._conductor.add_counter(type_id, key, label)

    # -------------------------------------------------------------------------------------------- close
    def close(self) -> None:
        """Close every resource, tell the driver (CLIENT_CLOSE), stop the conductor's runner or invoker, unmap.

        Idempotent. Arrays a compiled caller still holds keep their mapping alive until they are dropped.
        """
        conductor = self._conductor
        conductor.close()
        if self._conductor_invoker is not None:
            self._conductor_invoker.close()
        else:
            self._conductor_runner.close(timeout_s=None)  # from the conductor thread itself: only requests
        # on_close has unmapped, unless the client had ended by itself before; from inside a duty cycle (the
        # error handler) the unmapping waits for the cycle's end.
        conductor.release_mappings()

    def __enter__(self) -> "Aeron":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Aeron(client_id={self.client_id}, aeron_dir={str(self.context.aeron_dir)!r}, closed={self.is_closed})"
