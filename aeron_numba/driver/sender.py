"""The sender agent: transmits every network publication and reads what receivers send back.

Each duty cycle gives every publication one ``send`` (SETUP, data up to the sender limit, heartbeat,
retransmits), starting from a rotating index so no publication always goes first, except those whose data the
compiled network cycles send and which have nothing else due (``NetworkPublication.needs_python_send``); then,
when nothing was sent or every ``send_to_status_poll_ratio`` cycles (Aeron's default 6), it polls the send
endpoints for status messages, NAKs and RTT measurements. In SHARED mode it runs beside the conductor in one ``CompositeAgent``.
"""

from __future__ import annotations

import time

from aeron_numba.driver.receiver import (RECEIVE_BATCH_LENGTH, RECEIVE_SLOT_LENGTH, run_periodic_check_by,
                                        run_timer_by)
from aeron_numba.kernels.udp_socket import ReceiveBatch, SendBatch

DEFAULT_SEND_TO_STATUS_POLL_RATIO = 6
#: Datagrams one publication may send per duty cycle, in one ``sendmmsg``.
SEND_BATCH_LENGTH = 16


class Sender:
    #: Data past a send batch is at the sender position its watch names; status messages wait on its sockets.
    names_work_left = True

    def __init__(self, *, nano_clock=time.monotonic_ns, send_to_status_poll_ratio: int = DEFAULT_SEND_TO_STATUS_POLL_RATIO):
        self.nano_clock = nano_clock
        self.send_to_status_poll_ratio = send_to_status_poll_ratio
        self.publications: list = []
        self.endpoints: list = []
        self.version = 0  # bumped by every change to the two lists: NetworkCycles rebuilds its tables on a change
        # Set by a duty cycle that runs NetworkCycles as an agent of its own, which names the compiled data path's
        # sockets and streams itself (WatchedCompositeAgent): this watch then names only Python's work.
        self.served_by_cycles = False
        self._round_robin = 0
        self._cycles_since_poll = 0
        self.control_batch = ReceiveBatch(RECEIVE_BATCH_LENGTH, RECEIVE_SLOT_LENGTH)  # what receivers send back
        self.send_batch = SendBatch(SEND_BATCH_LENGTH)  # one publication's datagrams of a duty cycle

    def role_name(self) -> str:
        return "sender"

    def on_start(self) -> None:
        pass

    def add_publication(self, publication) -> None:
        self.publications.append(publication)
        self.version += 1

    def remove_publication(self, publication) -> None:
        self.publications.remove(publication)
        self.version += 1

    def add_endpoint(self, endpoint) -> None:
        self.endpoints.append(endpoint)
        self.version += 1

    def remove_endpoint(self, endpoint) -> None:
        self.endpoints.remove(endpoint)
        self.version += 1

    def do_work(self) -> int:
        now_ns = self.nano_clock()
        publications = self.publications
        bytes_sent = 0
        count = len(publications)
        if count:
            start = self._round_robin % count
            self._round_robin = start + 1
            for index in range(count):
                publication = publications[(start + index) % count]
                if publication.needs_python_send(now_ns):
                    bytes_sent += publication.send(now_ns, self.send_batch)
        self._cycles_since_poll += 1
        received = 0
        if bytes_sent == 0 or self._cycles_since_poll >= self.send_to_status_poll_ratio:
            self._cycles_since_poll = 0
            for endpoint in self.endpoints:
                received += endpoint.poll(now_ns, self.control_batch)
        return bytes_sent + received

    def add_idle_watch(self, watch) -> bool:
        """What its next cycle needs: what receivers send back to a send socket, a publisher adding to a
        publication (``NetworkPublication.add_idle_watch``), and each publication's next timer
        (``NetworkPublication.next_timer_ns``). Under ``served_by_cycles`` it leaves out the sockets the compiled
        cycles read and the publications whose only Python work is timed: the cycles name those for their own
        calls. False when its clock is not the monotonic clock a compiled wait reads."""
        if not (self.publications or self.endpoints):
            return True
        if self.nano_clock is not time.monotonic_ns:
            return False
        served = self.served_by_cycles
        for endpoint in self.endpoints:
            if not (served and endpoint.read_compiled):
                watch.watch_socket(endpoint.transport.fd)
        now_ns = self.nano_clock()
        for publication in self.publications:
            if not (served and publication.python_send_is_only_timed()):
                publication.add_idle_watch(watch)
            run_timer_by(watch, publication.next_timer_ns(), now_ns)
        run_periodic_check_by(watch, now_ns)
        return True

    def on_close(self) -> None:
        pass
