"""ClientProxy: each driver -> client response is broadcast as the schema encodes it (spec/transport.md §11.2)."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.client_proxy import ClientProxy
from aeron_numba.kernels.broadcast import BroadcastReceiver, BroadcastTransmitter, CopyBroadcastReceiver
from aeron_numba.layout import broadcast as bl
from aeron_numba.layout import control_protocol as cp

LOG = "/dev/shm/aeron-root/publications/42.logbuffer"

# (proxy method, keyword arguments, response type id, the message a client must decode)
RESPONSES = [
    ("on_error", dict(correlation_id=42, error_code=cp.INVALID_CHANNEL, error_message="channel 'x' is bad"),
     cp.ON_ERROR, dc.ErrorResponse(42, cp.INVALID_CHANNEL, "channel 'x' is bad")),
    ("on_available_image", dict(correlation_id=42, stream_id=1001, session_id=-7, subscription_registration_id=43,
                                subscriber_position_id=9, log_file_name=LOG, source_identity="127.0.0.1:40123"),
     cp.ON_AVAILABLE_IMAGE, dc.ImageBuffersReady(42, -7, 1001, 43, 9, LOG, "127.0.0.1:40123")),
    ("on_publication_ready", dict(correlation_id=44, registration_id=42, stream_id=1001, session_id=-7,
                                  log_file_name=LOG, position_limit_counter_id=3, channel_status_indicator_id=-1,
                                  is_exclusive=False),
     cp.ON_PUBLICATION_READY, dc.PublicationBuffersReady(44, 42, -7, 1001, 3, -1, LOG)),
    ("on_publication_ready", dict(correlation_id=42, registration_id=42, stream_id=1001, session_id=-7,
                                  log_file_name=LOG, position_limit_counter_id=3, channel_status_indicator_id=5,
                                  is_exclusive=True),
     cp.ON_EXCLUSIVE_PUBLICATION_READY, dc.PublicationBuffersReady(42, 42, -7, 1001, 3, 5, LOG)),
    ("on_subscription_ready", dict(correlation_id=45, channel_status_indicator_id=-1),
     cp.ON_SUBSCRIPTION_READY, dc.SubscriptionReady(45, -1)),
    ("on_operation_succeeded", dict(correlation_id=46), cp.ON_OPERATION_SUCCESS, dc.OperationSucceeded(46)),
    ("on_unavailable_image", dict(correlation_id=42, subscription_registration_id=43, stream_id=1001,
                                  channel="aeron:udp?endpoint=localhost:40123"),
     cp.ON_UNAVAILABLE_IMAGE, dc.ImageMessage(42, 43, 1001, "aeron:udp?endpoint=localhost:40123")),
    ("on_counter_ready", dict(correlation_id=47, counter_id=12), cp.ON_COUNTER_READY, dc.CounterUpdate(47, 12)),
    ("on_unavailable_counter", dict(registration_id=47, counter_id=12), cp.ON_UNAVAILABLE_COUNTER,
     dc.CounterUpdate(47, 12)),
    ("on_client_timeout", dict(client_id=-3), cp.ON_CLIENT_TIMEOUT, dc.ClientTimeout(-3)),
]


@pytest.fixture
def proxy_and_receiver():
    buffer = np.zeros(64 * 1024 + bl.TRAILER_LENGTH, np.uint8)
    return ClientProxy(BroadcastTransmitter(buffer)), CopyBroadcastReceiver(BroadcastReceiver(buffer))


@pytest.mark.parametrize("method, kwargs, msg_type_id, expected", RESPONSES, ids=[r[0] for r in RESPONSES])
def test_each_response_decodes_back_to_what_was_sent(proxy_and_receiver, method, kwargs, msg_type_id, expected):
    proxy, receiver = proxy_and_receiver
    getattr(proxy, method)(**kwargs)
    ((received_type, body),) = receiver.receive_messages(8)
    assert received_type == msg_type_id
    assert dc.decode_response(received_type, body, 0, len(body)) == expected
    assert body == expected.encode()  # byte for byte the schema's encoding (padding included)


def test_the_reused_buffer_never_leaks_a_longer_earlier_message(proxy_and_receiver):
    """Every response is written over the last one; padding after a shorter string must still be zero."""
    proxy, receiver = proxy_and_receiver
    for method, kwargs, _, _ in RESPONSES:
        getattr(proxy, method)(**{**kwargs, **({"log_file_name": "/" + "x" * 300} if "log_file_name" in kwargs else {})})
    for method, kwargs, _, _ in RESPONSES:
        getattr(proxy, method)(**kwargs)
    received = receiver.receive_messages(64)
    assert [body for _, body in received[len(RESPONSES):]] == [expected.encode() for *_, expected in RESPONSES]


def test_every_response_the_driver_sends_has_a_proxy_method():
    not_sent = {cp.ON_STATIC_COUNTER, cp.ON_PUBLICATION_ERROR}  # ADD_STATIC_COUNTER is unsupported; no error frames
    assert {msg_type_id for _, _, msg_type_id, _ in RESPONSES} == set(dc.RESPONSES) - not_sent
    methods = {name for name in vars(ClientProxy) if name.startswith("on_")}
    assert methods == {method for method, *_ in RESPONSES}
