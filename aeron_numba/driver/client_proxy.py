"""The driver's responses to its clients (spec/transport.md §11.2), encoded and broadcast (Aeron's ``ClientProxy``).

One typed method per response the driver sends, named as Aeron's. Each encodes with the one schema in
``codecs/driver_commands.py`` into a buffer reused for every message and transmits it on the to-clients
broadcast buffer, which never back-pressures: a client too slow to keep up is lapped and notices.
The driver answers ADD_STATIC_COUNTER and REJECT_IMAGE as unsupported and sends no publication error frames, so
ON_STATIC_COUNTER and ON_PUBLICATION_ERROR have no method here.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.kernels.broadcast import BroadcastTransmitter
from aeron_numba.layout import control_protocol as cp


class ClientProxy:
    def __init__(self, transmitter: BroadcastTransmitter):
        self._transmitter = transmitter
        self._buffer = np.zeros(transmitter.max_msg_length, dtype=np.uint8)

    def _transmit(self, msg_type_id: int, message: dc.Message) -> None:
        length = message.encode_into(self._buffer)
        self._transmitter.transmit(msg_type_id, self._buffer, 0, length)

    def on_error(self, correlation_id: int, error_code: int, error_message: str) -> None:
        """ON_ERROR: the command ``correlation_id`` failed with a §11.4 code."""
        self._transmit(cp.ON_ERROR, dc.ErrorResponse(correlation_id, error_code, error_message))

    def on_available_image(self, *, correlation_id: int, stream_id: int, session_id: int,
                           subscription_registration_id: int, subscriber_position_id: int, log_file_name: str,
                           source_identity: str) -> None:
        """ON_AVAILABLE_IMAGE: ``correlation_id`` is the image's (the publication's registration id for IPC)."""
        self._transmit(cp.ON_AVAILABLE_IMAGE, dc.ImageBuffersReady(
            correlation_id, session_id, stream_id, subscription_registration_id, subscriber_position_id,
            log_file_name, source_identity))

    def on_publication_ready(self, *, correlation_id: int, registration_id: int, stream_id: int, session_id: int,
                             log_file_name: str, position_limit_counter_id: int, channel_status_indicator_id: int,
                             is_exclusive: bool) -> None:
        """ON_PUBLICATION_READY, or ON_EXCLUSIVE_PUBLICATION_READY for an exclusive publication."""
        msg_type_id = cp.ON_EXCLUSIVE_PUBLICATION_READY if is_exclusive else cp.ON_PUBLICATION_READY
        self._transmit(msg_type_id, dc.PublicationBuffersReady(
            correlation_id, registration_id, session_id, stream_id, position_limit_counter_id,
            channel_status_indicator_id, log_file_name))

    def on_subscription_ready(self, correlation_id: int, channel_status_indicator_id: int) -> None:
        self._transmit(cp.ON_SUBSCRIPTION_READY, dc.SubscriptionReady(correlation_id, channel_status_indicator_id))

    def on_operation_succeeded(self, correlation_id: int) -> None:
        self._transmit(cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(correlation_id))

    def on_unavailable_image(self, *, correlation_id: int, subscription_registration_id: int, stream_id: int,
                             channel: str) -> None:
        self._transmit(cp.ON_UNAVAILABLE_IMAGE, dc.ImageMessage(
            correlation_id, subscription_registration_id, stream_id, channel))

    def on_counter_ready(self, correlation_id: int, counter_id: int) -> None:
        self._transmit(cp.ON_COUNTER_READY, dc.CounterUpdate(correlation_id, counter_id))

    def on_unavailable_counter(self, registration_id: int, counter_id: int) -> None:
        self._transmit(cp.ON_UNAVAILABLE_COUNTER, dc.CounterUpdate(registration_id, counter_id))

    def on_client_timeout(self, client_id: int) -> None:
        self._transmit(cp.ON_CLIENT_TIMEOUT, dc.ClientTimeout(client_id))
