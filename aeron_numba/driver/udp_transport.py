"""One non-blocking UDP socket of the driver, with its receive buffer and loss generator.

The sender and receiver agents poll these every duty cycle: ``receive_batch()`` reads every waiting datagram
up to a batch (``recvmmsg``, in compiled code: ``kernels/udp_socket.py``) and leaves the loss generator's
decisions (``loss``) to the endpoint's compiled dispatch; ``send()`` never blocks (a full socket buffer counts
as sent-and-lost, as UDP would). Socket errors from the network (ICMP port unreachable surfacing as
ECONNREFUSED, a peer gone) never propagate: they are counted and the datagram is treated as lost.

Bound to a multicast group (spec/transport.md §16), the socket is set up as Aeron's multicast transport:
SO_REUSEADDR (and SO_REUSEPORT) so several drivers on one host can share the group and port, membership of
the group on the channel's interface, IP_MULTICAST_IF = that interface, IP_MULTICAST_LOOP on (receivers on the
same host), IP_MULTICAST_TTL when the channel has ``ttl``. Aeron binds the wildcard address and lets its
dispatch ignore frames of the wrong kind; we bind the group address itself, which on Linux makes the kernel
deliver only datagrams sent to that group: a channel's data and control groups share a port, and a driver
running both ends would otherwise read its own data on the control socket and the other way round.
"""

from __future__ import annotations

import ipaddress
import os
import socket

import numpy as np

from aeron_numba.driver.loss_generator import LossControl, LossGenerator
from aeron_numba.kernels import udp_socket

# Errors the network hands back for a datagram (not for our socket): the datagram is lost, nothing else.
TRANSIENT_SEND_ERRORS = udp_socket.TRANSIENT_ERRORS


class UdpTransport:
    """A bound UDP socket (IPv4) with a receive buffer big enough for any datagram."""

    def __init__(self, bind_address: tuple[str, int], *, socket_rcvbuf: int = 0, socket_sndbuf: int = 0,
                 multicast_ttl: int | None = None, multicast_interface: str = "0.0.0.0",
                 loss_control: LossControl | None = None):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.is_multicast = ipaddress.ip_address(bind_address[0]).is_multicast
        try:
            if socket_rcvbuf > 0:
                self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, socket_rcvbuf)
            if socket_sndbuf > 0:
                self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_sndbuf)
            if multicast_ttl is not None:
                self.socket.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, multicast_ttl)
            if self.is_multicast:
                self._share_address()
            self.socket.bind(bind_address)
            if self.is_multicast:
                self._join(bind_address[0], multicast_interface)
            self.socket.setblocking(False)
        except OSError:
            self.socket.close()
            raise
        self.local_address: tuple[str, int] = self.socket.getsockname()
        self.fd = self.socket.fileno()
        self.last_datagram_ns = np.zeros(1, np.int64)  # when the compiled cycles last read a datagram from it
        self.loss_control = loss_control
        self.loss = LossGenerator()
        self.send_errors = 0
        self.closed = False

    def _share_address(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)

    def _join(self, group: str, interface: str) -> None:
        interface_address = socket.inet_aton(interface)
        self.socket.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                               socket.inet_aton(group) + interface_address)
        self.socket.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, interface_address)
        self.socket.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)

    @property
    def local_port(self) -> int:
        return self.local_address[1]

    def poll_loss_settings(self) -> None:
        self.loss.update(self.loss_control)

    def send(self, data: np.ndarray, address: tuple[str, int]) -> int:
        """Send one datagram (a uint8 view, not copied); returns its length even when it was lost on the way."""
        length = len(data)
        if self.loss_control is not None and self.loss.should_drop_send(data, length, address[1], self.local_port,
                                                                        address[0]):
            return length
        try:
            self.socket.sendto(data, address)
        except OSError as exc:
            if exc.errno not in TRANSIENT_SEND_ERRORS:
                raise
            self.send_errors += 1
        return length

    def receive_batch(self, batch: udp_socket.ReceiveBatch) -> int:
        """Read the waiting datagrams into ``batch`` (at most its ``vlen``); returns how many (0: none)."""
        count = udp_socket.receive_datagrams(self.fd, batch.msgs, batch.vlen)
        if count >= 0:
            return count
        if -count in TRANSIENT_SEND_ERRORS:  # e.g. ECONNREFUSED left over from an ICMP error: nothing to read
            return 0
        raise OSError(-count, os.strerror(-count))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.socket.close()
