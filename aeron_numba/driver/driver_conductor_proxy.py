"""``DriverConductorProxy``: how the sender and receiver hand work back to the conductor (Aeron's
``DriverConductorProxy``).

The receiver asks the conductor to create a publication image when a SETUP arrives for a subscribed stream
(``create_publication_image``), and both network agents report what they have released, so that the conductor
frees counters, unmaps logs and closes sockets only once no other thread uses them. The commands run on the
conductor's thread at the start of the network conductor's part of its duty cycle, in order.

Thread ownership: the conductor's thread owns every counter allocation and free, every log buffer mapping and
every socket close, and its own lists (``NetworkConductor.publications``, ``images``, ``send_endpoints``,
``receive_endpoints``).

In SHARED mode (``queue=None``) every method calls the conductor directly, on the one driver thread.
"""

from __future__ import annotations

from aeron_numba.driver.command_queue import CommandProxy, CommandQueue


class DriverConductorProxy(CommandProxy):
    def __init__(self, network_conductor, queue: CommandQueue | None = None):
        super().__init__(queue)  # None: call the conductor directly (SHARED mode)
        self.network_conductor = network_conductor

    def drain(self) -> int:
        """Apply the queued commands (on the conductor's thread); 0 in SHARED mode, where none are queued."""
        return 0 if self.queue is None else self.queue.drain()


    def create_publication_image(self, endpoint, destination, setup: dict, source: tuple[str, int]) -> None:
        """A SETUP for a subscribed stream and a session with no image: the conductor creates it (or refuses)."""
        self._run(self.network_conductor.on_create_publication_image, endpoint, destination, setup, source)

    def on_network_publication_released(self, publication) -> None:
        self._run(self.network_conductor.on_network_publication_released, publication)

    def on_send_channel_endpoint_closed(self, endpoint) -> None:
        self._run(self.network_conductor.on_send_channel_endpoint_closed, endpoint)

    def on_publication_image_released(self, image) -> None:
        self._run(self.network_conductor.on_publication_image_released, image)

    def on_receive_channel_endpoint_closed(self, endpoint) -> None:
        self._run(self.network_conductor.on_receive_channel_endpoint_closed, endpoint)

    def on_receive_destination_removed(self, destination) -> None:
        self._run(self.network_conductor.on_receive_destination_removed, destination)
