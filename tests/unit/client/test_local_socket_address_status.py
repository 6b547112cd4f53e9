"""Finding a channel endpoint's bound addresses in the counters, as the driver publishes them (type 14)."""

from __future__ import annotations

import struct

import numpy as np

from aeron_numba.client.local_socket_address_status import NO_ID_ALLOCATED, channel_status, local_socket_addresses
from aeron_numba.kernels.counters import CountersManager
from aeron_numba.layout import counters as cl


def sockaddr_key(channel_status_id: int, address: str) -> bytes:
    key = bytearray(cl.LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET + len(address))
    struct.pack_into("<i", key, cl.LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET, channel_status_id)
    struct.pack_into("<i", key, cl.LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET, len(address))
    key[cl.LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET:] = address.encode()
    return bytes(key)


def test_the_addresses_of_an_active_channel_are_found_by_its_status_counter_id():
    counters = CountersManager(np.zeros(64 * cl.METADATA_LENGTH, np.uint8), np.zeros(64 * cl.COUNTER_LENGTH, np.uint8))
    status = counters.allocate("rcv-channel: aeron:udp?endpoint=localhost:0", cl.RECEIVE_CHANNEL_STATUS_TYPE_ID)
    other = counters.allocate("rcv-channel: aeron:udp?endpoint=localhost:9", cl.RECEIVE_CHANNEL_STATUS_TYPE_ID)
    mine = counters.allocate("rcv-local-sockaddr", cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID,
                             sockaddr_key(status, "127.0.0.1:40123"))
    theirs = counters.allocate("rcv-local-sockaddr", cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID,
                               sockaddr_key(other, "127.0.0.1:9"))
    assert channel_status(counters, status) == cl.CHANNEL_STATUS_INITIALIZING
    assert local_socket_addresses(counters, status) == []  # not yet ACTIVE
    for counter_id in (status, other, mine, theirs):
        counters.set_counter_value(counter_id, cl.CHANNEL_STATUS_ACTIVE)
    assert local_socket_addresses(counters, status) == ["127.0.0.1:40123"]
    assert local_socket_addresses(counters, other) == ["127.0.0.1:9"]
    counters.set_counter_value(mine, cl.CHANNEL_STATUS_CLOSING)
    assert local_socket_addresses(counters, status) == []


def test_a_channel_without_a_status_counter_is_active_and_has_no_address():
    counters = CountersManager(np.zeros(8 * cl.METADATA_LENGTH, np.uint8), np.zeros(8 * cl.COUNTER_LENGTH, np.uint8))
    assert channel_status(counters, NO_ID_ALLOCATED) == cl.CHANNEL_STATUS_ACTIVE
    assert local_socket_addresses(counters, NO_ID_ALLOCATED) == []
