"""``SenderProxy``: how the conductor hands the sender its work (Aeron's ``SenderProxy``).

Thread ownership: the sender's thread owns ``Sender.publications`` / ``Sender.endpoints`` and each send endpoint's
``publications`` and ``destinations`` dicts (it iterates them every duty cycle); only commands from this proxy
change them, applied on the sender's thread at the start of its duty cycle, in the order they were offered.
The conductor keeps its own lists (``NetworkConductor.publications`` / ``send_endpoints``) and its own count of
an endpoint's users, so it never reads what the sender is changing.

Removal is two-phase, as in Aeron (a publication is freed once the sender has released it): the sender drops the
publication or endpoint and then tells the conductor (``DriverConductorProxy``), which only then frees its
counters and unmaps its log or closes its socket; nothing is closed that the sender may still be using.

In SHARED mode (``queue=None``) every method calls the sender directly, on the one driver thread, exactly as
before the proxies existed.
"""

from __future__ import annotations

from aeron_numba.driver.command_queue import CommandProxy, CommandQueue


class SenderProxy(CommandProxy):
    def __init__(self, sender, conductor_proxy, queue: CommandQueue | None = None):
        super().__init__(queue)  # None: call the sender directly (SHARED mode, or the driver closing)
        self.sender = sender
        self.conductor_proxy = conductor_proxy


    # ------------------------------------------------------------------------------------ endpoints
    def register_send_channel_endpoint(self, endpoint) -> None:
        self._run(self.sender.add_endpoint, endpoint)

    def close_send_channel_endpoint(self, endpoint) -> None:
        """The sender stops polling ``endpoint``; then the conductor closes its socket."""
        self._run(self._on_close_send_channel_endpoint, endpoint)

    def _on_close_send_channel_endpoint(self, endpoint) -> None:
        self.sender.remove_endpoint(endpoint)
        self.conductor_proxy.on_send_channel_endpoint_closed(endpoint)

    # --------------------------------------------------------------------------------- publications
    def new_network_publication(self, publication) -> None:
        self._run(self._on_new_network_publication, publication)

    def _on_new_network_publication(self, publication) -> None:
        publication.endpoint.add_publication(publication)
        self.sender.add_publication(publication)

    def remove_network_publication(self, publication) -> None:
        """The sender stops sending ``publication``; then the conductor frees its counters and log."""
        self._run(self._on_remove_network_publication, publication)

    def _on_remove_network_publication(self, publication) -> None:
        self.sender.remove_publication(publication)
        publication.endpoint.remove_publication(publication)
        self.conductor_proxy.on_network_publication_released(publication)

    # ------------------------------------------------------------------ manual MDC destinations
    def add_destination(self, endpoint, address: tuple[str, int], now_ns: int) -> None:
        self._run(endpoint.add_destination, address, now_ns)

    def remove_destination(self, endpoint, address: tuple[str, int]) -> None:
        self._run(endpoint.remove_destination, address)
