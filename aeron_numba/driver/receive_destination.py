"""One socket a receive channel endpoint reads from (Aeron's receive destination).

An ordinary subscription channel has exactly one: the channel's own ``endpoint``. A multi-destination
subscription (``aeron:udp?control-mode=manual``) starts with none; each ADD_RCV_DESTINATION
(``aeron:udp?endpoint=host:port``) opens one more and REMOVE_RCV_DESTINATION closes it. Every destination
feeds the same images (same session id = same image), and answers each image's sender from its own socket,
so the sender sees status messages and NAKs come from the address it sends to.

Each destination owns its ``rcv-local-sockaddr`` counter (naming the endpoint's ``rcv-channel`` counter), as
the C driver's destinations do.
"""

from __future__ import annotations

from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.driver.udp_transport import UdpTransport

# A destination that has delivered nothing of an image for this long gets no more of its SMs and NAKs (Aeron's
# AERON_RECEIVE_DESTINATION_TIMEOUT_NS): a removed replay, a silent peer.
RECEIVE_DESTINATION_TIMEOUT_NS = 5_000_000_000


class ReceiveDestination:
    def __init__(self, channel: UdpChannel, transport: UdpTransport, sockaddr_counter_id: int):
        self.channel = channel
        self.transport = transport
        self.sockaddr_counter_id = sockaddr_counter_id
        # Where this destination's SMs and NAKs go when its channel names it (a multicast control group, or
        # control=); None: back to each image's sender, the source address of its frames.
        self.control_address = channel.remote_control
        # Set by NetworkCycles while its compiled cycles read this socket (and hand back what Python handles):
        # the receiver's Python poll then leaves it alone.
        self.read_compiled = False

    @property
    def local_address(self) -> tuple[str, int]:
        return self.transport.local_address

    def matches(self, channel: UdpChannel) -> bool:
        """REMOVE_RCV_DESTINATION names a destination by its channel: same sockets, same destination."""
        return self.channel.canonical_form == channel.canonical_form

    def close(self) -> None:
        self.transport.close()
