"""``ReceiverProxy``: how the conductor hands the receiver its work (Aeron's ``ReceiverProxy``).

Thread ownership: the receiver's thread owns ``Receiver.endpoints`` / ``Receiver.images`` and, on each receive
channel endpoint, ``images``, ``destinations``, ``pending_setups``, ``setup_elicited_ns`` and ``cooling_down``
(its packet dispatch reads and changes them every duty cycle), and each image's ``connections``. Only commands
from this proxy change them, applied on the receiver's thread at the start of its duty cycle, in order.

Left with the conductor, as plain attributes the receiver only reads (each read or write one GIL-atomic
operation): an endpoint's ``stream_refs`` (the conductor is its only writer; the receiver only tests membership,
as Aeron's receiver reads the subscription state its proxy set), an image's ``state`` (the conductor moves it
ACTIVE -> DRAINING -> LINGER -> DONE; the receiver stops feeding an image that is not ACTIVE) and an image's
``subscribers`` (the conductor changes it through ``add_subscriber`` / ``remove_subscriber``, which give the
compiled path a new array of counter ids each time; the receiver's Python scan of the list may miss an entry
changed during that scan, for one cycle, and never fails: CPython iterates a list by index; a counter freed
meanwhile keeps its value until it is reused, after ``counter_free_to_reuse_timeout``).

Removal is two-phase, as in Aeron (an image is freed once the receiver has released it): the receiver drops the
image, endpoint or destination and then tells the conductor (``DriverConductorProxy``), which only then frees
counters, unmaps the log or closes the sockets.

In SHARED mode (``queue=None``) every method calls the receiver directly on the one driver thread.
"""

from __future__ import annotations

from aeron_numba.driver.command_queue import CommandProxy, CommandQueue


class ReceiverProxy(CommandProxy):
    def __init__(self, receiver, conductor_proxy, queue: CommandQueue | None = None):
        super().__init__(queue)  # None: call the receiver directly (SHARED mode, or the driver closing)
        self.receiver = receiver
        self.conductor_proxy = conductor_proxy


    # ------------------------------------------------------------------------------------ endpoints
    def register_receive_channel_endpoint(self, endpoint) -> None:
        self._run(self.receiver.add_endpoint, endpoint)

    def close_receive_channel_endpoint(self, endpoint) -> None:
        """The receiver stops reading ``endpoint``; then the conductor closes its destinations' sockets."""
        self._run(self._on_close_receive_channel_endpoint, endpoint)

    def _on_close_receive_channel_endpoint(self, endpoint) -> None:
        self.receiver.remove_endpoint(endpoint)
        self.conductor_proxy.on_receive_channel_endpoint_closed(endpoint)

    def add_destination(self, endpoint, destination) -> None:
        """ADD_RCV_DESTINATION: the endpoint reads one more socket (every image gets a connection through it)."""
        self._run(self._on_add_destination, endpoint, destination)

    def _on_add_destination(self, endpoint, destination) -> None:
        self.receiver.add_destination(endpoint, destination)

    def remove_destination(self, endpoint, channel) -> None:
        """REMOVE_RCV_DESTINATION: the endpoint stops reading the destination ``channel`` names; then the conductor
        closes its socket (nothing happens when the endpoint has no such destination)."""
        self._run(self._on_remove_destination, endpoint, channel)

    def _on_remove_destination(self, endpoint, channel) -> None:
        destination = self.receiver.remove_destination(endpoint, channel)
        if destination is not None:
            self.conductor_proxy.on_receive_destination_removed(destination)

    # --------------------------------------------------------------------------------------- images
    def new_publication_image(self, endpoint, image) -> None:
        """The conductor made the image a SETUP asked for: the endpoint dispatches the session's frames to it."""
        self._run(self._on_new_publication_image, endpoint, image)

    def _on_new_publication_image(self, endpoint, image) -> None:
        endpoint.add_image(image)
        self.receiver.add_image(image)

    def remove_publication_image(self, image) -> None:
        """The image is DONE: the receiver lets go of it; then the conductor frees its counters and log."""
        self._run(self._on_remove_publication_image, image)

    def _on_remove_publication_image(self, image) -> None:
        self.receiver.remove_image(image)
        image.endpoint.remove_image(image, self.receiver.nano_clock())
        self.conductor_proxy.on_publication_image_released(image)

    def remove_pending_setup(self, endpoint, session_id: int, stream_id: int) -> None:
        """The conductor made no image of a SETUP (refused, or failed): the next SETUP of the session may try
        again."""
        self._run(endpoint.setup_failed, session_id, stream_id)
