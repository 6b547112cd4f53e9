"""A multi-destination-cast send endpoint's destination table: what the compiled send path reads to send each
datagram to each destination, kept in step with the endpoint's destinations."""

from __future__ import annotations

import ctypes
import socket
from types import SimpleNamespace

import numpy as np

from aeron_numba.driver import send_channel_endpoint as sce
from aeron_numba.driver.send_channel_endpoint import SendChannelEndpoint
from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.kernels import publication_sender as PS
from aeron_numba.layout import linux_socket as ls


def _endpoint(channel: str) -> SendChannelEndpoint:
    transport = SimpleNamespace(poll_loss_settings=lambda: None)
    endpoint = SendChannelEndpoint(UdpChannel.parse(channel), transport, system_counters=None, status_counter_id=0)
    endpoint.read_compiled = True  # the compiled cycles read its socket: poll only keeps the destinations
    return endpoint


def bytes_at(address: int, length: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_uint8 * length).from_address(address), np.uint8)


def _table_addresses(endpoint: SendChannelEndpoint) -> list[tuple[str, int]]:
    """The (host, port) of each sockaddr_in the table names, read back through the addresses it holds."""
    sockaddr_address, table_address = endpoint.send_addresses()
    assert sockaddr_address == 0 and table_address == endpoint.destination_table.ctypes.data
    table = endpoint.destination_table
    found = []
    for address in table[PS.FIRST_DESTINATION:PS.FIRST_DESTINATION + table[PS.DESTINATION_COUNT]]:
        raw = bytes_at(int(address), ls.SOCKADDR_IN_LENGTH)
        port = int.from_bytes(bytes(raw[ls.SOCKADDR_IN_PORT_OFFSET:ls.SOCKADDR_IN_PORT_OFFSET + 2]), "big")
        host = socket.inet_ntoa(bytes(raw[ls.SOCKADDR_IN_ADDRESS_OFFSET:ls.SOCKADDR_IN_ADDRESS_OFFSET + 4]))
        found.append((host, port))
    return found


def test_manual_destinations_added_and_removed_are_what_the_table_names():
    endpoint = _endpoint("aeron:udp?control-mode=manual")
    assert _table_addresses(endpoint) == []
    endpoint.add_destination(("127.0.0.2", 40001), 0)
    endpoint.add_destination(("127.0.0.3", 40002), 0)
    endpoint.add_destination(("127.0.0.2", 40001), 0)  # again: still one destination
    assert _table_addresses(endpoint) == [("127.0.0.2", 40001), ("127.0.0.3", 40002)]
    assert endpoint.remove_destination(("127.0.0.2", 40001))
    assert not endpoint.remove_destination(("127.0.0.9", 1))
    assert _table_addresses(endpoint) == [("127.0.0.3", 40002)]


def test_a_table_too_small_is_replaced_and_the_replacement_announced():
    endpoint = _endpoint("aeron:udp?control-mode=manual")
    replaced = SendChannelEndpoint.destination_tables_replaced
    wanted = [("127.0.0.1", 41000 + i) for i in range(sce.INITIAL_DESTINATION_CAPACITY + 3)]
    for address in wanted:
        endpoint.add_destination(address, 0)
    assert _table_addresses(endpoint) == wanted
    assert SendChannelEndpoint.destination_tables_replaced == replaced + 1  # NetworkCycles rebuilds its tables


def test_dynamic_destinations_come_from_status_messages_and_leave_when_silent():
    endpoint = _endpoint("aeron:udp?control=127.0.0.1:40500|control-mode=dynamic")
    endpoint._track_destination(("127.0.0.2", 40600), 0)
    endpoint._track_destination(("127.0.0.3", 40601), sce.DESTINATION_TIMEOUT_NS)
    assert _table_addresses(endpoint) == [("127.0.0.2", 40600), ("127.0.0.3", 40601)]
    endpoint.poll(sce.DESTINATION_TIMEOUT_NS + 1, batch=None)  # the first has been silent past the timeout
    assert _table_addresses(endpoint) == [("127.0.0.3", 40601)]


def test_a_unicast_endpoint_sends_to_its_one_address():
    endpoint = _endpoint("aeron:udp?endpoint=127.0.0.1:40700")
    sockaddr_address, table_address = endpoint.send_addresses()
    assert table_address == 0 and sockaddr_address == endpoint.remote_sockaddr.ctypes.data
    assert np.array_equal(endpoint.remote_sockaddr, bytes_at(sockaddr_address, ls.SOCKADDR_IN_LENGTH))
