"""Decodes the driver's responses from the to-clients broadcast buffer and dispatches them to the
conductor (Aeron's client ``DriverEventsAdapter``, spec §8, §11.2).

Every client sees every response, so this is where they are filtered: replies to a command are only
acted on when their correlation id is the one this client is waiting for (or one of its asynchronous
commands); images only for this client's subscriptions (checked by the conductor); client timeouts only
for this client's id. One batch kernel call copies out up to ``MESSAGE_BATCH`` validated records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.errors import AeronError
from aeron_numba.kernels.broadcast import CopyBroadcastReceiver
from aeron_numba.layout import broadcast as broadcast_layout
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout.bits import NULL_VALUE

if TYPE_CHECKING:
    from aeron_numba.client.client_conductor import ClientConductor

MESSAGE_BATCH = 64


class DriverEventsAdapter:
    """Receive and dispatch; ``receive`` returns the number of records taken from the buffer."""

    def __init__(self, receiver: CopyBroadcastReceiver, client_id: int, conductor: "ClientConductor"):
        self.receiver = receiver
        self.client_id = client_id
        self.conductor = conductor
        self.active_correlation_id = NULL_VALUE
        self.received_correlation_id = NULL_VALUE
        self.async_command_ids: set[int] = set()
        self.pending_registrations: dict[int, int] = {}  # asynchronous adds awaiting their answer (the conductor's)

    def receive(self, active_correlation_id: int = NULL_VALUE) -> int:
        self.active_correlation_id = active_correlation_id
        self.received_correlation_id = NULL_VALUE
        messages = self.receiver.receive_messages(MESSAGE_BATCH)
        if isinstance(messages, int):
            if messages == broadcast_layout.LAPPED:
                self.conductor.handle_error(AeronError("unable to keep up with broadcast: responses from the driver were lost"))
            elif messages == broadcast_layout.CORRUPT_RECORD:
                self.conductor.handle_error(AeronError("corrupt record in the to-clients broadcast buffer skipped"))
            return 0
        for msg_type_id, body in messages:
            if self.conductor.is_closed:
                break  # a handler closed the client: the rest of the batch is moot
            try:
                self._on_message(msg_type_id, body)
            except (dc.MalformedCommandError, KeyError) as exc:
                self.conductor.handle_error(AeronError(f"bad driver response type {msg_type_id:#x}: {exc}"))
        return len(messages)

    def _is_ours(self, correlation_id: int) -> bool:
        """An answer to the command an API call awaits (noted as received) or to an asynchronous add."""
        if correlation_id == self.active_correlation_id:
            self.received_correlation_id = correlation_id
            return True
        return correlation_id in self.pending_registrations

    def _on_message(self, msg_type_id: int, body: bytes) -> None:
        conductor = self.conductor
        if msg_type_id in (cp.ON_PUBLICATION_READY, cp.ON_EXCLUSIVE_PUBLICATION_READY):
            msg = dc.PublicationBuffersReady.decode(body)
            if self._is_ours(msg.correlation_id):
                conductor.on_new_publication(msg, msg_type_id == cp.ON_EXCLUSIVE_PUBLICATION_READY)
        elif msg_type_id == cp.ON_SUBSCRIPTION_READY:
            msg = dc.SubscriptionReady.decode(body)
            if self._is_ours(msg.correlation_id):
                conductor.on_new_subscription(msg)
        elif msg_type_id == cp.ON_AVAILABLE_IMAGE:
            conductor.on_available_image(dc.ImageBuffersReady.decode(body))
        elif msg_type_id == cp.ON_UNAVAILABLE_IMAGE:
            conductor.on_unavailable_image(dc.ImageMessage.decode(body))
        elif msg_type_id == cp.ON_OPERATION_SUCCESS:
            msg = dc.OperationSucceeded.decode(body)
            if msg.correlation_id == self.active_correlation_id:
                self.received_correlation_id = msg.correlation_id
            else:
                self.async_command_ids.discard(msg.correlation_id)
        elif msg_type_id == cp.ON_COUNTER_READY:
            msg = dc.CounterUpdate.decode(body)
            if msg.correlation_id == self.active_correlation_id:
                self.received_correlation_id = msg.correlation_id
                conductor.on_new_counter(msg)
        elif msg_type_id == cp.ON_UNAVAILABLE_COUNTER:
            conductor.on_unavailable_counter(dc.CounterUpdate.decode(body))
        elif msg_type_id == cp.ON_ERROR:
            msg = dc.ErrorResponse.decode(body)
            if self._is_ours(msg.offending_command_correlation_id):
                conductor.on_error(msg)
            elif msg.offending_command_correlation_id in self.async_command_ids:
                self.async_command_ids.discard(msg.offending_command_correlation_id)
                conductor.on_async_error(msg)
        elif msg_type_id == cp.ON_CLIENT_TIMEOUT:
            msg = dc.ClientTimeout.decode(body)
            if msg.client_id == self.client_id:
                conductor.on_client_timeout()
        # ON_STATIC_COUNTER and ON_PUBLICATION_ERROR concern APIs this client does not offer yet.
