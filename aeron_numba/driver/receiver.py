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

from aeron_numba.kernels.network_duty_cycle import image_deadline
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


#: An idle sender or receiver waiting in compiled code (``agent/idle_watch.py``) runs by its next timer (a
#: heartbeat, SETUP or status message due, a retransmit) and at least this often: for what has no deadline of its
#: own (the loss generator's settings, flow control's receiver timeouts), 10 ms late at most.
IDLE_TIMER_CHECK_NS = 10_000_000
#: ... and this often while an image has a gap (its NAK timers run from the receiver's cycle). Also the soonest
#: a timer that is already due is tried again: one the cycle could not run (a status message with no live
#: connection to go to) must not turn the wait into a loop of duty cycles.
SHORT_TIMER_CHECK_NS = 1_000_000


def run_periodic_check_by(watch, now_ns: int) -> None:
    """``watch.run_by`` the first multiple of half ``IDLE_TIMER_CHECK_NS`` at least that half from now: between
    half and all of it, never sooner than ``SHORT_TIMER_CHECK_NS``, and on instants the sender's and receiver's
    checks share, one wake for both where each runs as an agent of its own (``WatchedCompositeAgent``)."""
    half = IDLE_TIMER_CHECK_NS // 2
    watch.run_by(-(-(now_ns + half) // half) * half)


def run_timer_by(watch, due_ns: int, now_ns: int) -> None:
    """``watch.run_by(due_ns)``, but not sooner than ``SHORT_TIMER_CHECK_NS`` from ``now_ns``."""
    watch.run_by(max(due_ns, now_ns + SHORT_TIMER_CHECK_NS))


def add_image_watch(watch, image, now_ns: int) -> None:
    """An image's receiver work: its subscribers reading far enough on for a status message (which opens the
    window) and, while it is active, its next status message and its loss checks while it has a gap."""
    image.add_status_message_watch(watch)
    due = image_deadline(image.row, now_ns, SHORT_TIMER_CHECK_NS)
    if due >= 0:
        watch.run_by(int(due))


class Receiver:
    #: Datagrams past a batch wait on the sockets its watch names; its images' timers are in its deadline.
    names_work_left = True

    def __init__(self, *, nano_clock=time.monotonic_ns):
        self.nano_clock = nano_clock
        self.endpoints: list = []
        # Bumped by every change to ``endpoints`` and their destinations: NetworkCycles rebuilds its tables then.
        self.version = 0
        self.served_by_cycles = False  # as the sender's: the compiled data path names its own work
        self.images: list = []
        self.batch = ReceiveBatch(RECEIVE_BATCH_LENGTH, RECEIVE_SLOT_LENGTH)
        self.image_rows = ImageRows()

    def role_name(self) -> str:
        return "receiver"

    def on_start(self) -> None:
        pass

    def add_endpoint(self, endpoint) -> None:
        self.endpoints.append(endpoint)
        self.version += 1

    def remove_endpoint(self, endpoint) -> None:
        self.endpoints.remove(endpoint)
        self.version += 1

    def add_destination(self, endpoint, destination) -> None:
        """A multi-destination endpoint reads one more socket."""
        endpoint.add_destination(destination, self.nano_clock())
        self.version += 1

    def remove_destination(self, endpoint, channel):
        """The destination ``channel`` names is no longer read (returned; None when the endpoint has none)."""
        destination = endpoint.remove_destination(channel)
        self.version += 1
        return destination

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
        """What its next cycle needs: a datagram on a receive socket, a subscriber reading on (a status message
        opens the window), and its timers: each active image's next status message, its NAK timers while it has
        a gap. Under ``served_by_cycles`` it leaves out the sockets the compiled cycles read and the images whose
        work they do (``compiled_work``): the cycles name those. False when its clock is not the monotonic clock a
        compiled wait reads."""
        if not (self.endpoints or self.images):
            return True
        if self.nano_clock is not time.monotonic_ns:
            return False
        served = self.served_by_cycles
        for endpoint in self.endpoints:
            for destination in endpoint.destinations:
                if not (served and destination.read_compiled):
                    watch.watch_socket(destination.transport.fd)
        now_ns = self.nano_clock()
        for image in self.images:
            if not (served and image.compiled_work):
                add_image_watch(watch, image, now_ns)
        run_periodic_check_by(watch, now_ns)
        return True

    def on_close(self) -> None:
        pass
