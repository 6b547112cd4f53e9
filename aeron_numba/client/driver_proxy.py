"""Encodes client commands into the to-driver ring buffer (Aeron's client ``DriverProxy``, spec §7, §11.1).

Every command carries this client's id and a fresh correlation id from the ring buffer's correlation
counter (shared by all clients of the driver, so ids are unique driver-wide). A full ring buffer is
retried until the driver timeout: the driver drains it on every duty cycle, so staying full that long
means it is not running.
"""

from __future__ import annotations

import time

from aeron_numba.agent.clock import SystemNanoClock
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.errors import DriverTimeoutError, LayoutError
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp

_COMMAND_NAMES = {
    cp.ADD_PUBLICATION: "ADD_PUBLICATION",
    cp.REMOVE_PUBLICATION: "REMOVE_PUBLICATION",
    cp.ADD_EXCLUSIVE_PUBLICATION: "ADD_EXCLUSIVE_PUBLICATION",
    cp.ADD_SUBSCRIPTION: "ADD_SUBSCRIPTION",
    cp.REMOVE_SUBSCRIPTION: "REMOVE_SUBSCRIPTION",
    cp.CLIENT_KEEPALIVE: "CLIENT_KEEPALIVE",
    cp.ADD_COUNTER: "ADD_COUNTER",
    cp.REMOVE_COUNTER: "REMOVE_COUNTER",
    cp.CLIENT_CLOSE: "CLIENT_CLOSE",
    cp.ADD_DESTINATION: "ADD_DESTINATION",
    cp.REMOVE_DESTINATION: "REMOVE_DESTINATION",
    cp.ADD_RCV_DESTINATION: "ADD_RCV_DESTINATION",
    cp.REMOVE_RCV_DESTINATION: "REMOVE_RCV_DESTINATION",
}
_RETRY_SLEEP_S = 0.001


def command_name(msg_type_id: int) -> str:
    return _COMMAND_NAMES.get(msg_type_id, f"command {msg_type_id:#x}")


class DriverProxy:
    """Writes commands for one client. Not thread-safe on its own: the conductor's lock serialises use."""

    def __init__(
        self, to_driver: ManyToOneRingBuffer, client_id: int, driver_timeout_ns: int, nano_clock=SystemNanoClock
    ):
        self.to_driver = to_driver
        self.client_id = client_id
        self.driver_timeout_ns = driver_timeout_ns
        self.nano_clock = nano_clock

    def next_correlation_id(self) -> int:
        return self.to_driver.next_correlation_id()

    def time_of_last_driver_keepalive_ms(self) -> int:
        return self.to_driver.consumer_heartbeat_time()

    def _write(self, msg_type_id: int, message: dc.Message) -> None:
        try:
            self._write_until_deadline(msg_type_id, message.encode())
        except LayoutError as exc:  # garbage in cnc.dat's to-driver ring buffer: no driver will read this
            raise LayoutError(f"cannot write {command_name(msg_type_id)}: the to-driver {exc}; cnc.dat is "
                              "damaged, restart the driver (AERON_DIR_DELETE_ON_START=true)") from exc

    def _write_until_deadline(self, msg_type_id: int, data) -> None:
        if self.to_driver.write(msg_type_id, data):
            return
        nano_time = self.nano_clock.nano_time
        deadline = nano_time() + self.driver_timeout_ns
        while not self.to_driver.write(msg_type_id, data):
            if nano_time() > deadline:
                raise DriverTimeoutError(
                    f"could not write {command_name(msg_type_id)} to the to-driver ring buffer: still full after"
                    f" driver_timeout_ms={self.driver_timeout_ns // 1_000_000} (is the driver running?)"
                )
            time.sleep(_RETRY_SLEEP_S)

    def add_publication(self, channel: str, stream_id: int, exclusive: bool = False) -> int:
        correlation_id = self.next_correlation_id()
        msg_type_id = cp.ADD_EXCLUSIVE_PUBLICATION if exclusive else cp.ADD_PUBLICATION
        self._write(msg_type_id, dc.PublicationMessage(self.client_id, correlation_id, stream_id, channel))
        return correlation_id

    def remove_publication(self, registration_id: int) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.REMOVE_PUBLICATION, dc.RemoveMessage(self.client_id, correlation_id, registration_id))
        return correlation_id

    def add_subscription(self, channel: str, stream_id: int) -> int:
        correlation_id = self.next_correlation_id()
        # Clients send registration_correlation_id = -1 (§11.3).
        message = dc.SubscriptionMessage(self.client_id, correlation_id, -1, stream_id, channel)
        self._write(cp.ADD_SUBSCRIPTION, message)
        return correlation_id

    def remove_subscription(self, registration_id: int) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage(self.client_id, correlation_id, registration_id))
        return correlation_id

    def add_counter(self, type_id: int, key: bytes, label: str) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.ADD_COUNTER, dc.CounterMessage(self.client_id, correlation_id, type_id, key, label))
        return correlation_id

    def remove_counter(self, registration_id: int) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.REMOVE_COUNTER, dc.RemoveMessage(self.client_id, correlation_id, registration_id))
        return correlation_id

    def add_destination(self, registration_id: int, channel: str) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.ADD_DESTINATION, dc.DestinationMessage(self.client_id, correlation_id, registration_id, channel))
        return correlation_id

    def remove_destination(self, registration_id: int, channel: str) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.REMOVE_DESTINATION,
                    dc.DestinationMessage(self.client_id, correlation_id, registration_id, channel))
        return correlation_id

    def add_rcv_destination(self, registration_id: int, channel: str) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.ADD_RCV_DESTINATION,
                    dc.DestinationMessage(self.client_id, correlation_id, registration_id, channel))
        return correlation_id

    def remove_rcv_destination(self, registration_id: int, channel: str) -> int:
        correlation_id = self.next_correlation_id()
        self._write(cp.REMOVE_RCV_DESTINATION,
                    dc.DestinationMessage(self.client_id, correlation_id, registration_id, channel))
        return correlation_id

    def client_keepalive(self) -> None:
        # Correlation id 0, as Aeron does: a keepalive is never answered.
        self._write(cp.CLIENT_KEEPALIVE, dc.CorrelatedMessage(self.client_id, 0))

    def client_close(self) -> None:
        self._write(cp.CLIENT_CLOSE, dc.CorrelatedMessage(self.client_id, self.next_correlation_id()))
