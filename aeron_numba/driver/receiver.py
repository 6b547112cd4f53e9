"""The receiver agent: reads data from the receive endpoints into the images, and talks back to the senders.

Each duty cycle polls every receive endpoint (DATA and PAD frames are rebuilt into their image's log, SETUP
frames for a subscribed stream become new images through the conductor), then lets every image detect loss
(NAKs after the NAK delay, or gap fills for ``reliable=false``), measure and answer RTT, and send the status
messages that move its sender's limit. In SHARED mode it runs beside the conductor in one ``CompositeAgent``.

The per-datagram work is compiled (``kernels/image_receiver.py``): the receiver owns one ``ReceiveBatch`` that
every endpoint reads into, and ``ImageRows``, the addresses of its images' state rows, by which the compiled
dispatcher finds an image for a datagram.
"""

from __future__ import annotations

import time

import numpy as np

from aeron_numba.kernels.udp_socket import ReceiveBatch
from aeron_numba.layout import frame

#: Datagrams one ``recvmmsg`` may return; each slot holds the largest UDP payload.
RECEIVE_BATCH_LENGTH = 16
RECEIVE_SLOT_LENGTH = (frame.MAX_UDP_PAYLOAD_LENGTH + 63) & ~63


class ImageRows:
    """The state-row addresses of the receiver's images (``layout/network_state.py``), for the compiled
    dispatcher; ``slow`` is its scratch list of datagrams it leaves to Python."""

    def __init__(self):
        self.addresses = np.zeros(0, np.int64)
        self.count = 0
        self.slow = np.zeros(1 + RECEIVE_BATCH_LENGTH, np.int64)

    def update(self, images: list) -> None:
        """Rebuilt whole on every change: a new array, so a dispatch in progress keeps reading the old one."""
        self.addresses = np.array([image.row.ctypes.data for image in images], np.int64)
        self.count = len(images)


class Receiver:
    def __init__(self, *, nano_clock=time.monotonic_ns):
        self.nano_clock = nano_clock
        self.endpoints: list = []
        self.images: list = []
        self.batch = ReceiveBatch(RECEIVE_BATCH_LENGTH, RECEIVE_SLOT_LENGTH)
        self.image_rows = ImageRows()

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
        self.image_rows.update(self.images)

    def remove_image(self, image) -> None:
        self.images.remove(image)
        self.image_rows.update(self.images)

    def do_work(self) -> int:
        now_ns = self.nano_clock()
        work = 0
        for endpoint in self.endpoints:
            work += endpoint.poll(now_ns, self.batch, self.image_rows)
        for image in self.images:
            work += image.do_receiver_work(now_ns)
        return work

    def add_idle_watch(self, watch) -> bool:
        """Nothing to watch when there is nothing to poll; sockets cannot be waited on in compiled code."""
        return not (self.endpoints or self.images)

    def on_close(self) -> None:
        pass
