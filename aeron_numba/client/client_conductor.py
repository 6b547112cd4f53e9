"""The client's conductor: registrations, driver responses, keepalives and liveness (Aeron ``ClientConductor``).

It owns everything a client shares with the driver: the proxy that writes commands, the adapter that
reads responses, the mapped log buffers (one mapping per log file, reference counted, unmapped after the
resource linger) and the client heartbeat counter.

An Agent (Aeron's ``ClientConductor implements Agent``). ``do_work()`` is run by an ``AgentRunner`` on a
daemon thread (sleeping idle, 16 ms), or, with ``use_conductor_agent_invoker``, by the application through
``aeron.conductor_agent_invoker.invoke()``; in both modes an API call awaiting the driver's answer services
the conductor itself on the application thread. One re-entrant lock guards its state: API calls take it for
the whole command/response exchange, ``do_work`` only takes it when free (a busy lock means the application
thread is servicing the conductor itself). Handlers (image available / unavailable) run with the lock held
and may not call back into the client (as in Aeron).

Time. Every timer reads the context's clocks, never ``time`` directly: ``nano_clock`` for the keepalive
interval, the service timeout, the response deadline and the resource linger; ``epoch_clock`` for the
driver's heartbeat age and the client's own heartbeat. Tests inject cached clocks and call ``do_work()``.

Liveness (spec §6, §11.5). Every keepalive interval the conductor checks the driver's heartbeat in the
to-driver ring buffer (older than ``driver_timeout_ms`` → ``DriverTimeoutError``) and writes the epoch
time into its ``client-heartbeat`` counter (type 11, registration id = client id), which the driver
allocates when it sees this client's first command; until the counter exists the conductor sends
CLIENT_KEEPALIVE. ON_CLIENT_TIMEOUT for this client → ``ClientTimeoutError``. A conductor not serviced
within the client liveness timeout closes itself (``ConductorServiceTimeoutError``): the driver will
have dropped it. Each of these ends the client: resources are closed (offers return CLOSED), the error
goes to the error handler and is raised again by every later API call.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

import aeron_numba
from aeron_numba.agent.agent import AgentTerminationException
from aeron_numba.agent.clock import SystemNanoClock
from aeron_numba.client.context import Context
from aeron_numba.client.counter import Counter
from aeron_numba.client.driver_events_adapter import DriverEventsAdapter
from aeron_numba.client.driver_proxy import DriverProxy, command_name
from aeron_numba.client.image import Image
from aeron_numba.client.publication import ExclusivePublication, Publication
from aeron_numba.client.subscription import Subscription
from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.errors import (
    AeronError,
    ClientClosedError,
    ClientTimeoutError,
    ConductorServiceTimeoutError,
    ConfigurationError,
    DriverTimeoutError,
    LayoutError,
    RegistrationError,
)
from aeron_numba.kernels.atomics_for_python import get_int32_acquire, put_int32_release, put_int64_release
from aeron_numba.kernels.broadcast import BroadcastReceiver, CopyBroadcastReceiver
from aeron_numba.kernels.counters import CountersReader
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.broadcast import TAIL_COUNTER_OFFSET, TRAILER_LENGTH
from aeron_numba.layout.log_buffers import LogBuffers

#: How often at most the timers run (Aeron checks on each idle-sleep period).
TIMER_CHECK_INTERVAL_NS = 16_000_000


class ClientConductor:
    """See the module docstring. Created by ``Aeron.connect``; not used directly."""

    ROLE_NAME = "aeron-client-conductor"

    def __init__(self, context: Context, cnc_file: CncFile):
        self.context = context
        self.cnc = cnc_file
        self.nano_clock = context.nano_clock
        self.epoch_clock = context.epoch_clock
        self._lock = threading.RLock()
        self.to_driver = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        self.counters_reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
        self.counters_values_buffer = cnc_file.counters_values_buffer
        self.client_id = self.to_driver.next_correlation_id()
        self.driver_timeout_ns = context.driver_timeout_ns
        self.keepalive_interval_ns = context.keepalive_interval_ns
        liveness_ns = cnc_file.client_liveness_timeout_ns
        self.inter_service_timeout_ns = liveness_ns if liveness_ns > 0 else 10_000_000_000
        if self.keepalive_interval_ns >= self.inter_service_timeout_ns:
            raise ConfigurationError(
                f"keepalive_interval_ns={self.keepalive_interval_ns} >= the driver's client liveness timeout"
                f" {self.inter_service_timeout_ns} ns: the driver would time this client out"
            )
        self.driver_proxy = DriverProxy(self.to_driver, self.client_id, self.driver_timeout_ns, self.nano_clock)
        receiver = CopyBroadcastReceiver(BroadcastReceiver(cnc_file.to_clients_buffer))
        self.driver_events_adapter = DriverEventsAdapter(receiver, self.client_id, self)
        to_clients = cnc_file.to_clients_buffer
        self._events_tail_address = to_clients.ctypes.data + to_clients.shape[0] - TRAILER_LENGTH + TAIL_COUNTER_OFFSET

        now_ns = self.nano_clock.nano_time()
        self._time_of_last_service_ns = now_ns
        self._time_of_last_keepalive_ns = now_ns
        self._time_of_last_timer_check_ns = now_ns
        self.heartbeat_counter_id = counters_layout.NULL_COUNTER_ID

        self._resource_by_registration_id: dict[int, Publication | Subscription | Counter] = {}
        self._stashed: dict[int, tuple] = {}
        self._log_buffers: dict[str, list] = {}  # log file name -> [LogBuffers, reference count]
        self._lingering: list[list] = []  # [unmap deadline ns, LogBuffers]
        self._response_resource = None
        self._response_error: BaseException | None = None
        # Asynchronous adds (Aeron's asyncAdd*/get*): correlation id -> response deadline ns while the driver has
        # not answered (the adapter takes their responses too); then the driver's refusal, until asked for.
        self._pending_registrations: dict[int, int] = {}
        self._async_errors: dict[int, BaseException] = {}
        self.driver_events_adapter.pending_registrations = self._pending_registrations

        self._is_closed = False
        self._close_requested = False
        self._mappings_released = False
        # True during a duty cycle (under the lock). An error handler that closes the client from inside one
        # must not unmap what the cycle is still reading: the unmapping waits for the cycle's end.
        self._is_servicing = False
        self._is_release_deferred = False
        self.termination_cause: BaseException | None = None
        self._callback_thread: int | None = None
        # Set when the client ends, by close() or a termination: cuts the conductor thread's idle sleep short.
        self.stop_event = threading.Event()
        # Counts the duty cycles that did work (a driver event handled, a timer): an application thread waiting in
        # compiled code on state this thread changes (images added, handlers called) watches it (agent/idle_watch.py).
        self.work_generation = np.zeros(1, np.int64)

        # Tell the driver about this client at once so it allocates the heartbeat counter (§11.5).
        self.driver_proxy.client_keepalive()

    # ======================================================================================= agent / timers
    @property
    def is_closed(self) -> bool:
        return self._is_closed

    def role_name(self) -> str:
        return self.ROLE_NAME

    def on_start(self) -> None:
        """Nothing to start: the constructor already announced the client to the driver."""

    def do_work(self) -> int:
        """One duty cycle: skipped (0) while an API call holds the lock; ``AgentTerminationException`` once closed.

        Errors of the cycle go to the error handler and the conductor carries on (Aeron's).
        """
        if self._is_closed:  # checked before the lock too: a closed client must not spin while it is held
            raise AgentTerminationException(f"Aeron client client_id={self.client_id} is closed")
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            if self._is_closed:
                raise AgentTerminationException(f"Aeron client client_id={self.client_id} is closed")
            return self._service(NULL_VALUE)
        except AgentTerminationException:
            raise
        except Exception as exc:  # noqa: BLE001 - the conductor reports and keeps running
            self.handle_error(exc)
            return 0
        finally:
            self._lock.release()

    #: Its watch names the events a cycle's batch limit left unread too (``agent/idle_watch.py``).
    names_work_left = True

    def add_idle_watch(self, watch) -> bool:
        """What the conductor's next cycle depends on, for a thread that runs it in invoker mode among other agents
        (``agent/invoked_agents.py``): an event in the driver's to-clients broadcast past the ones received (its
        tail counter past the next record: one just sent, or one a cycle's batch left) and the next keepalive,
        which also unmaps lingering logs. False with an injected clock: its deadline is not the watch's time."""
        if self.nano_clock is not SystemNanoClock or self._is_closed:
            return False
        watch.watch_word_reaching(self.cnc.to_clients_buffer, self._events_tail_address,
                                  self.driver_events_adapter.receiver.receiver.next_record_position() + 1)
        watch.run_by(self._time_of_last_keepalive_ns + self.keepalive_interval_ns)
        return True

    def on_close(self) -> None:
        """The runner or invoker has stopped: unmap everything if the application closed the client.

        After a termination (driver or client timeout) they stay mapped until the application calls
        ``Aeron.close()``.
        """
        if self._close_requested:
            self.release_mappings()

    def _service(self, correlation_id: int) -> int:
        self._is_servicing = True
        try:
            work = self._check_timeouts(self.nano_clock.nano_time())
            if not self._is_closed:
                work += self.driver_events_adapter.receive(correlation_id)
            if work:
                self.work_generation[0] += 1  # one writer, this thread; after the changes it announces
            return work
        finally:
            self._is_servicing = False
            if self._is_release_deferred:
                self.release_mappings()

    def _check_timeouts(self, now_ns: int) -> int:
        if now_ns - self._time_of_last_timer_check_ns < TIMER_CHECK_INTERVAL_NS:
            return 0
        self._time_of_last_timer_check_ns = now_ns
        interval_ns = now_ns - self._time_of_last_service_ns
        self._time_of_last_service_ns = now_ns
        if interval_ns > self.inter_service_timeout_ns:
            self._terminate(
                ConductorServiceTimeoutError(
                    f"client conductor not serviced for {interval_ns // 1_000_000} ms > client liveness timeout"
                    f" {self.inter_service_timeout_ns // 1_000_000} ms: the driver has timed this client out"
                )
            )
            return 1
        if now_ns - self._time_of_last_keepalive_ns < self.keepalive_interval_ns:
            return 0
        self._time_of_last_keepalive_ns = now_ns
        if self._check_driver_liveness():
            self._heartbeat()
            self._close_lingering(now_ns)
        return 1

    def _check_driver_liveness(self) -> bool:
        last_ms = self.driver_proxy.time_of_last_driver_keepalive_ms()
        now = self.epoch_clock.time()
        timeout_ms = self.driver_timeout_ns // 1_000_000
        if now > last_ms + timeout_ms:
            if last_ms == NULL_VALUE:
                message = f"MediaDriver ({self.context.aeron_dir}) has been shut down"
            else:
                message = (
                    f"MediaDriver keepalive: age={now - last_ms}ms > driver_timeout_ms={timeout_ms}"
                    f" (aeron_dir={self.context.aeron_dir})"
                )
            self._terminate(DriverTimeoutError(message))
            return False
        return True

    def _heartbeat(self) -> None:
        now = self.epoch_clock.time()
        reader = self.counters_reader
        counter_id = self.heartbeat_counter_id
        if counter_id == counters_layout.NULL_COUNTER_ID:
            counter_id = reader.find_by_type_id_and_registration_id(counters_layout.CLIENT_HEARTBEAT_TYPE_ID, self.client_id)
            if counter_id == counters_layout.NULL_COUNTER_ID:
                self.driver_proxy.client_keepalive()
                return
            put_int64_release(self.counters_values_buffer, self._counter_value_offset(counter_id), now)
            self._append_to_heartbeat_label(counter_id)
            self.heartbeat_counter_id = counter_id
            return
        if not (
            reader.get_counter_state(counter_id) == counters_layout.RECORD_ALLOCATED
            and reader.get_counter_type_id(counter_id) == counters_layout.CLIENT_HEARTBEAT_TYPE_ID
            and reader.get_counter_registration_id(counter_id) == self.client_id
        ):
            self._terminate(
                ClientTimeoutError(
                    f"unexpected close of heartbeat counter id={counter_id} of client_id={self.client_id}:"
                    " the driver has dropped this client"
                )
            )
            return
        put_int64_release(self.counters_values_buffer, self._counter_value_offset(counter_id), now)

    @staticmethod
    def _counter_value_offset(counter_id: int) -> int:
        return counter_id * counters_layout.COUNTER_LENGTH + counters_layout.COUNTER_VALUE_OFFSET

    def _append_to_heartbeat_label(self, counter_id: int) -> None:
        """Add `` name=<client_name> version=<v>`` to the driver's ``client-heartbeat: id=<id>`` label (§9.4)."""
        metadata = self.counters_reader.metadata_buffer
        base = counter_id * counters_layout.METADATA_LENGTH
        length = int(get_int32_acquire(metadata, base + counters_layout.METADATA_LABEL_LENGTH_OFFSET))
        suffix = f" name={self.context.client_name} version={aeron_numba.__version__}".encode("ascii", "replace")
        count = min(len(suffix), counters_layout.MAX_LABEL_LENGTH - length)
        if length < 0 or count <= 0:
            return
        start = base + counters_layout.METADATA_LABEL_OFFSET + length
        metadata[start : start + count] = memoryview(suffix[:count])
        put_int32_release(metadata, base + counters_layout.METADATA_LABEL_LENGTH_OFFSET, length + count)

    # ======================================================================================= errors / end
    def handle_error(self, error: BaseException) -> None:
        try:
            self.context.error_handler(error)
        except Exception:  # noqa: BLE001 - a failing error handler must not kill the conductor
            pass

    def _terminate(self, cause: BaseException) -> None:
        """End the client because of ``cause``: close every resource, stop the thread, report."""
        if self._is_closed:
            return
        self.termination_cause = cause
        self._is_closed = True
        self._force_close_resources()
        self.stop_event.set()
        self.handle_error(cause)

    def _raise_if_closed(self) -> None:
        if self._is_closed:
            cause = self.termination_cause
            if cause is not None:
                raise type(cause)(str(cause)) from cause
            raise ClientClosedError(f"Aeron client client_id={self.client_id} is closed")

    def _ensure_not_reentrant(self) -> None:
        if self._callback_thread == threading.get_ident():
            raise AeronError("reentrant calls to the Aeron client are not permitted from its handlers")

    def _call_handler(self, handler: Callable, *args) -> None:
        self._callback_thread = threading.get_ident()
        try:
            handler(*args)
        except Exception as exc:  # noqa: BLE001 - a user handler's error goes to the error handler
            self.handle_error(exc)
        finally:
            self._callback_thread = None

    def close(self) -> None:
        """Close every resource and send CLIENT_CLOSE (unless the client already ended); stop the duty cycle.

        The mappings go in ``on_close`` (or ``release_mappings``), once nothing runs the duty cycle any more.
        """
        with self._lock:
            self._ensure_not_reentrant()
            self._close_requested = True
            if not self._is_closed:
                self._is_closed = True
                self._force_close_resources()
                try:
                    self.driver_proxy.client_close()
                except AeronError as exc:
                    self.handle_error(exc)
            self.stop_event.set()

    def release_mappings(self) -> None:
        """Unmap the log buffers and cnc.dat once the duty cycle no longer runs. Idempotent.

        Called from inside a duty cycle (an error handler closing the client) it waits for the cycle's end.
        Arrays a compiled caller still holds keep their mapping alive until they are dropped.
        """
        with self._lock:
            if self._mappings_released:
                return
            if self._is_servicing:
                self._is_release_deferred = True
                return
            self._is_release_deferred = False
            self._mappings_released = True
            for entry in self._log_buffers.values():
                self._lingering.append([0, entry[0]])
            self._log_buffers.clear()
            self._close_lingering(self.nano_clock.nano_time(), force=True)
            self.to_driver = self.driver_events_adapter = self.driver_proxy = None
            self.counters_reader = self.counters_values_buffer = None
            try:
                self.cnc.close()
            except BufferError:
                pass  # views held elsewhere; the mapping goes with the last of them
            except ValueError:
                pass  # already closed

    def _force_close_resources(self) -> None:
        resources = list(self._resource_by_registration_id.values())
        self._resource_by_registration_id.clear()
        for resource in resources:
            if isinstance(resource, Publication):
                resource._internal_close()
                self._release_log(resource.log_file_name)
            elif isinstance(resource, Subscription):
                for image in resource._internal_close():
                    self._close_image(resource, image)
            elif isinstance(resource, Counter):
                resource._internal_close()

    # ======================================================================================== log buffers
    def _map_log(self, log_file_name: str) -> LogBuffers:
        entry = self._log_buffers.get(log_file_name)
        if entry is not None:
            entry[1] += 1
            return entry[0]
        log_buffers = LogBuffers.open(log_file_name)
        self._log_buffers[log_file_name] = [log_buffers, 1]
        return log_buffers

    def _release_log(self, log_file_name: str) -> None:
        entry = self._log_buffers.get(log_file_name)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self._log_buffers[log_file_name]
            deadline = self.nano_clock.nano_time() + self.context.resource_linger_duration_ns
            self._lingering.append([deadline, entry[0]])

    def _close_lingering(self, now_ns: int, force: bool = False) -> None:
        if not self._lingering:
            return
        remaining = []
        for entry in self._lingering:
            deadline, log_buffers = entry
            if not force and now_ns < deadline:
                remaining.append(entry)
                continue
            try:
                log_buffers.close()
            except BufferError:
                # Someone (a compiled caller) still holds a view: try again one linger later. When
                # forced, the mapping goes when the last view does.
                if not force:
                    entry[0] = now_ns + self.context.resource_linger_duration_ns
                    remaining.append(entry)
        self._lingering = remaining

    @property
    def mapped_log_count(self) -> int:
        """Log files currently mapped for live resources (lingering ones not counted)."""
        return len(self._log_buffers)

    @property
    def lingering_log_count(self) -> int:
        return len(self._lingering)

    # ====================================================================================== API (app side)
    def _await_response(self, correlation_id: int, msg_type_id: int):
        """Service the conductor on this (application) thread until the driver answers ``correlation_id``."""
        nano_time = self.nano_clock.nano_time
        deadline_ns = nano_time() + self.driver_timeout_ns
        sleep_s = self.context.await_response_sleep_ns / 1e9
        driver_invoker = self.context.driver_agent_invoker  # a driver on this thread answers only when invoked
        self._response_resource = None
        self._response_error = None
        try:
            while True:
                if driver_invoker is None:
                    time.sleep(sleep_s)
                else:
                    driver_invoker.invoke()
                self._service(correlation_id)
                adapter = self.driver_events_adapter
                if adapter is not None and adapter.received_correlation_id == correlation_id:
                    if self._response_error is not None:
                        raise self._response_error
                    return self._response_resource
                self._raise_if_closed()
                if nano_time() > deadline_ns:
                    raise DriverTimeoutError(
                        f"no response from MediaDriver to {command_name(msg_type_id)} correlation_id={correlation_id}"
                        f" within driver_timeout_ms={self.driver_timeout_ns // 1_000_000}"
                    )
        finally:
            self._stashed.pop(correlation_id, None)
            self._response_resource = None
            self._response_error = None

    def add_publication(self, channel: str, stream_id: int, exclusive: bool = False) -> Publication:
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            correlation_id = self.driver_proxy.add_publication(channel, stream_id, exclusive)
            self._stashed[correlation_id] = (channel, stream_id)
            msg_type_id = cp.ADD_EXCLUSIVE_PUBLICATION if exclusive else cp.ADD_PUBLICATION
            return self._await_response(correlation_id, msg_type_id)

    def add_subscription(self, channel: str, stream_id: int, available_image_handler, unavailable_image_handler) -> Subscription:
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            correlation_id = self.driver_proxy.add_subscription(channel, stream_id)
            self._stashed[correlation_id] = (channel, stream_id, available_image_handler, unavailable_image_handler)
            return self._await_response(correlation_id, cp.ADD_SUBSCRIPTION)

    def async_add_publication(self, channel: str, stream_id: int, exclusive: bool = False) -> int:
        """Send ADD_(EXCLUSIVE_)PUBLICATION and return its registration id at once; ``get_publication`` gives the
        publication once the driver has answered (the conductor's duty cycle takes the answer)."""
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            correlation_id = self.driver_proxy.add_publication(channel, stream_id, exclusive)
            self._stashed[correlation_id] = (channel, stream_id)
            self._pending_registrations[correlation_id] = self.nano_clock.nano_time() + self.driver_timeout_ns
            return correlation_id

    def async_add_subscription(self, channel: str, stream_id: int, available_image_handler,
                               unavailable_image_handler) -> int:
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            correlation_id = self.driver_proxy.add_subscription(channel, stream_id)
            self._stashed[correlation_id] = (channel, stream_id, available_image_handler, unavailable_image_handler)
            self._pending_registrations[correlation_id] = self.nano_clock.nano_time() + self.driver_timeout_ns
            return correlation_id

    def get_resource(self, registration_id: int, kind: type):
        """The resource of an asynchronous add: None while the driver has not answered; raises the driver's
        ``RegistrationError`` (once), or ``DriverTimeoutError`` when it did not answer within the driver timeout."""
        with self._lock:
            self._raise_if_closed()
            error = self._async_errors.pop(registration_id, None)
            if error is not None:
                raise error
            deadline_ns = self._pending_registrations.get(registration_id)
            if deadline_ns is not None:
                if self.nano_clock.nano_time() <= deadline_ns:
                    return None
                del self._pending_registrations[registration_id]
                self._stashed.pop(registration_id, None)
                self.driver_events_adapter.async_command_ids.add(registration_id)  # a late refusal: error handler
                raise DriverTimeoutError(f"no response from MediaDriver to the add of registration_id="
                                         f"{registration_id} within driver_timeout_ms="
                                         f"{self.driver_timeout_ns // 1_000_000}")
            resource = self._resource_by_registration_id.get(registration_id)
            return resource if type(resource) is kind else None

    def async_remove(self, registration_id: int, remove: Callable[[int], int]) -> None:
        """Give up an asynchronous add: close what came, or tell the driver to remove what is still pending."""
        with self._lock:
            self._async_errors.pop(registration_id, None)
            resource = self._resource_by_registration_id.get(registration_id)
            if resource is not None:
                resource.close()
            elif self._pending_registrations.pop(registration_id, None) is not None and not self._is_closed:
                self._stashed.pop(registration_id, None)
                # The driver takes commands in order: the remove finds the add done (or refused: then its error).
                self.driver_events_adapter.async_command_ids.add(remove(registration_id))

    def add_counter(self, type_id: int, key: bytes, label: str) -> Counter:
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            correlation_id = self.driver_proxy.add_counter(type_id, key, label)
            return self._await_response(correlation_id, cp.ADD_COUNTER)

    def change_destination(self, publication: Publication, channel: str, add: bool, wait: bool = True) -> int:
        """ADD_/REMOVE_DESTINATION for a ``control-mode=manual`` publication; waits for the driver's answer, or
        with ``wait=False`` returns the command's correlation id (a refusal goes to the error handler)."""
        proxy = self.driver_proxy
        send, msg_type_id = (proxy.add_destination, cp.ADD_DESTINATION) if add else \
            (proxy.remove_destination, cp.REMOVE_DESTINATION)
        return self._change_destination(publication, "publication", send, msg_type_id, channel, wait)

    def change_rcv_destination(self, subscription: Subscription, channel: str, add: bool, wait: bool = True) -> int:
        """ADD_/REMOVE_RCV_DESTINATION for a ``control-mode=manual`` subscription; as ``change_destination``."""
        proxy = self.driver_proxy
        send, msg_type_id = (proxy.add_rcv_destination, cp.ADD_RCV_DESTINATION) if add else \
            (proxy.remove_rcv_destination, cp.REMOVE_RCV_DESTINATION)
        return self._change_destination(subscription, "subscription", send, msg_type_id, channel, wait)

    def _change_destination(self, resource, kind: str, send: Callable[[int, str], int], msg_type_id: int,
                            channel: str, wait: bool) -> int:
        with self._lock:
            self._ensure_not_reentrant()
            self._raise_if_closed()
            if resource.is_closed:
                raise AeronError(f"{kind} registration_id={resource.registration_id} is closed")
            correlation_id = send(resource.registration_id, channel)
            if wait:
                self._await_response(correlation_id, msg_type_id)
            else:  # its answer, if an error, goes to the error handler
                self.driver_events_adapter.async_command_ids.add(correlation_id)
            return correlation_id

    def _release(self, resource, remove: Callable[[int], int]) -> None:
        """Common part of closing a resource: forget it and send its REMOVE command asynchronously."""
        if self._resource_by_registration_id.pop(resource.registration_id, None) is None or self._is_closed:
            return
        correlation_id = remove(resource.registration_id)
        # Errors for it arrive later and go to the error handler.
        self.driver_events_adapter.async_command_ids.add(correlation_id)

    def release_publication(self, publication: Publication) -> None:
        with self._lock:
            if publication.is_closed:
                return
            self._ensure_not_reentrant()
            publication._internal_close()
            try:
                self._release(publication, self.driver_proxy.remove_publication)
            finally:
                self._release_log(publication.log_file_name)

    def release_subscription(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription.is_closed:
                return
            self._ensure_not_reentrant()
            images = subscription._internal_close()
            try:
                self._release(subscription, self.driver_proxy.remove_subscription)
            finally:
                for image in images:
                    self._close_image(subscription, image)

    def release_counter(self, counter: Counter) -> None:
        with self._lock:
            if counter.is_closed:
                return
            self._ensure_not_reentrant()
            counter._internal_close()
            self._release(counter, self.driver_proxy.remove_counter)

    def _close_image(self, subscription: Subscription, image: Image) -> None:
        image._internal_close()
        self._release_log(image.log_file_name)
        handler = subscription.unavailable_image_handler
        if handler is not None:
            self._call_handler(handler, image)

    # ============================================================================ driver events (adapter)
    def _check_counter_id(self, name: str, counter_id: int) -> None:
        if counter_id < 0 or counter_id > self.counters_reader.max_counter_id:
            raise LayoutError(f"{name}={counter_id} outside [0, max_counter_id={self.counters_reader.max_counter_id}]")

    def on_new_publication(self, msg: dc.PublicationBuffersReady, exclusive: bool) -> None:
        stashed = self._stashed.get(msg.correlation_id)
        if stashed is None:
            return
        channel, stream_id = stashed
        try:
            self._check_counter_id("position_limit_counter_id", msg.position_limit_counter_id)
            log_buffers = self._map_log(msg.log_file_name)
        except (OSError, AeronError) as exc:
            self._registered(msg.correlation_id, error=AeronError(
                f"could not map publication log {msg.log_file_name!r}: {exc}"))
            return
        publication_class = ExclusivePublication if exclusive else Publication
        try:
            publication = publication_class(
                self, channel, stream_id, msg.session_id, msg.correlation_id, msg.registration_id,
                msg.position_limit_counter_id, msg.channel_status_indicator_id, log_buffers,
                self.counters_values_buffer,
            )
        except Exception as exc:
            self._release_log(msg.log_file_name)
            self._registered(msg.correlation_id, error=exc)
            return
        self._resource_by_registration_id[msg.correlation_id] = publication
        self._registered(msg.correlation_id, publication)

    def on_new_subscription(self, msg: dc.SubscriptionReady) -> None:
        stashed = self._stashed.get(msg.correlation_id)
        if stashed is None:
            return
        channel, stream_id, available, unavailable = stashed
        subscription = Subscription(
            self, channel, stream_id, msg.correlation_id, msg.channel_status_indicator_id, available, unavailable
        )
        self._resource_by_registration_id[msg.correlation_id] = subscription
        self._registered(msg.correlation_id, subscription)

    def on_available_image(self, msg: dc.ImageBuffersReady) -> None:
        subscription = self._resource_by_registration_id.get(msg.subscription_registration_id)
        if not isinstance(subscription, Subscription) or subscription._has_image(msg.correlation_id):
            return
        try:
            self._check_counter_id("subscriber_position_id", msg.subscriber_position_id)
            log_buffers = self._map_log(msg.log_file_name)
        except (OSError, AeronError) as exc:
            self.handle_error(AeronError(f"could not map image log {msg.log_file_name!r}: {exc}"))
            return
        try:
            image = Image(
                subscription, msg.correlation_id, msg.session_id, msg.subscriber_position_id, log_buffers,
                self.counters_values_buffer, msg.source_identity, self.counters_reader.metadata_buffer,
            )
        except Exception as exc:  # noqa: BLE001
            self._release_log(msg.log_file_name)
            self.handle_error(exc)
            return
        subscription._add_image(image)
        if subscription.available_image_handler is not None:
            self._call_handler(subscription.available_image_handler, image)

    def on_unavailable_image(self, msg: dc.ImageMessage) -> None:
        subscription = self._resource_by_registration_id.get(msg.subscription_registration_id)
        if not isinstance(subscription, Subscription):
            return
        image = subscription._remove_image(msg.correlation_id)
        if image is not None:
            self._close_image(subscription, image)

    def on_new_counter(self, msg: dc.CounterUpdate) -> None:
        try:
            self._check_counter_id("counter_id", msg.counter_id)
        except LayoutError as exc:
            self._response_error = exc
            return
        counter = Counter(self, msg.correlation_id, msg.counter_id, self.counters_values_buffer)
        self._resource_by_registration_id[msg.correlation_id] = counter
        self._response_resource = counter

    def on_unavailable_counter(self, msg: dc.CounterUpdate) -> None:
        counter = self._resource_by_registration_id.get(msg.correlation_id)
        if isinstance(counter, Counter) and counter.id == msg.counter_id:
            del self._resource_by_registration_id[msg.correlation_id]
            counter._internal_close()

    def on_error(self, msg: dc.ErrorResponse) -> None:
        self._registered(msg.offending_command_correlation_id,
                         error=RegistrationError(msg.error_code, msg.error_message))

    def _registered(self, correlation_id: int, resource=None, error: BaseException | None = None) -> None:
        """The driver answered a registration: an awaited one's result goes to the waiting API call, an
        asynchronous one's error is kept for its ``get_*`` (its resource is already in the registry)."""
        if self._pending_registrations.pop(correlation_id, None) is None:
            self._response_resource, self._response_error = resource, error
            return
        self._stashed.pop(correlation_id, None)
        if error is not None:
            self._async_errors[correlation_id] = error

    def on_async_error(self, msg: dc.ErrorResponse) -> None:
        self.handle_error(RegistrationError(msg.error_code, msg.error_message))

    def on_client_timeout(self) -> None:
        self._terminate(
            ClientTimeoutError(
                f"client_id={self.client_id} timed out by the driver (ON_CLIENT_TIMEOUT): its keepalives stopped"
                f" for longer than the client liveness timeout; its resources are gone"
            )
        )
