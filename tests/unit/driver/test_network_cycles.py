"""NetworkCycles' tables of sockets and publications: built once, rebuilt on every change to the sender's or
receiver's lists, so a closed socket's fd never stays in them and a new stream is served from its first cycle."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from aeron_numba.driver.network_cycles import NetworkCycles
from aeron_numba.driver.receiver import Receiver
from aeron_numba.driver.sender import Sender


def _transport(fd: int):
    loss = SimpleNamespace(state=np.zeros(4, np.int64), gap_dropped=np.zeros(2, np.int64))
    return SimpleNamespace(fd=fd, local_port=40000 + fd, loss=loss, loss_control=None,
                           last_datagram_ns=np.zeros(1, np.int64))


def _send_endpoint(fd: int):
    sockaddr = np.zeros(16, np.uint8)
    return SimpleNamespace(transport=_transport(fd), remote_sockaddr=sockaddr,
                           send_addresses=lambda: (sockaddr.ctypes.data, 0))


def _publication(endpoint):
    return SimpleNamespace(endpoint=endpoint, row=np.zeros(32, np.int64))


def _receive_endpoint(fd: int, endpoint_id: int):
    destination = SimpleNamespace(transport=_transport(fd))
    return SimpleNamespace(endpoint_id=endpoint_id, destinations=[destination])


def _fds(table: np.ndarray) -> list[int]:
    return [int(fd) for fd in table[:, 0]]


def test_tables_are_reused_until_the_sender_or_receiver_changes_then_rebuilt():
    sender, receiver = Sender(), Receiver()
    cycles = NetworkCycles(np.zeros(1024, np.uint8), sender, receiver)
    first = _send_endpoint(7)
    sender.add_endpoint(first)
    sender.add_publication(_publication(first))
    receiver.add_endpoint(_receive_endpoint(9, 1))
    tables = cycles._tables()
    assert cycles._tables() is tables  # nothing changed: not rebuilt
    control_sockets, control_endpoints, publications, receive_sockets, sources = tables
    assert _fds(control_sockets) == [7] and control_endpoints == [first] and len(publications) == 1
    assert sender.publications[0].data_sent_compiled  # its kernel sends the data: the Python send may skip it
    assert _fds(receive_sockets) == [9]

    # a stream closes and another opens on a new socket (the old fd may be reused by the kernel)
    second = _send_endpoint(11)
    sender.remove_publication(sender.publications[0])
    sender.remove_endpoint(first)
    sender.add_endpoint(second)
    sender.add_publication(_publication(second))
    receiver.remove_endpoint(receiver.endpoints[0])
    control_sockets, control_endpoints, publications, receive_sockets, sources = cycles._tables()
    assert _fds(control_sockets) == [11] and control_endpoints == [second]
    assert int(publications[0, 1]) == 11  # the publication's socket
    assert len(receive_sockets) == 0 and sources == []
