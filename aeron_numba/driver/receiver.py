"""The receiver agent: reads data from the receive endpoints into the images, and talks back to the senders.

Each duty cycle polls every receive endpoint (DATA and PAD frames are rebuilt into their image's log, SETUP
frames for a subscribed stream become new images through the conductor), then lets every image detect loss
(NAKs after the NAK delay, or gap fills for ``reliable=false``), measure and answer RTT, and send the status
messages that move its sender's limit. In SHARED mode it runs beside the conductor in one ``CompositeAgent``.
"""

from __future__ import annotations

import time


class Receiver:
    def __init__(self, *, nano_clock=time.monotonic_ns):
        self.nano_clock = nano_clock
        self.endpoints: list = []
        self.images: list = []

    def role_name(self) -> str:
        return "receiver"

    def on_start(self) -> None:
        pass

    def add_endpoint(self, endpoint) -> None:
        self.endpoints.append(endpoint)

    def remove_endpoint(self, endpoint) -> None:
        self.endpoints.remove(endpoint)

    def add_image(self, image) -> None:
        self.images.append(image)

    def remove_image(self, image) -> None:
        self.images.remove(image)

    def do_work(self) -> int:
        now_ns = self.nano_clock()
        work = 0
        for endpoint in self.endpoints:
            work += endpoint.poll(now_ns)
        for image in self.images:
            work += image.do_receiver_work(now_ns)
        return work

    def add_idle_watch(self, watch) -> bool:
        """Nothing to watch when there is nothing to poll; sockets cannot be waited on in compiled code."""
        return not (self.endpoints or self.images)

    def on_close(self) -> None:
        pass
