"""The agent that keeps the driver's UDP data path in compiled code between its Python duty cycles.

The sender's and receiver's own duty cycles (``sender.py``, ``receiver.py``) do everything once per cycle,
including the work only Python does (heartbeats, SETUPs, retransmits, timers, frames of no image), and cost tens
of microseconds of interpreter each. This agent, composed before them, hands the per-datagram part to
``kernels/network_duty_cycle.run_network_cycles``: it sends, receives, takes the status messages of known
receivers, detects loss and sends the images' status messages for as long as nothing needs Python, at most
``budget_ns`` at a time (less when Python serves some stream, or when the conductor's timer is due sooner), and
hands back what does (SETUPs and other frames of no image, other control frames, a NAK due) to the endpoints and
images that handle them. The sockets in its tables are marked ``read_compiled``: the sender's and receiver's Python
polls leave them to it. Every publication's data is sent here, to its endpoint's address or to each destination
of a multi-destination-cast endpoint; the sockets of ordinary receive endpoints are read here (multi-destination
subscriptions' stay with the Python cycles); the loss generator decides in compiled code too.

After a pass that found work it keeps polling in compiled code, since the next datagram of a busy stream is usually
microseconds away, waiting as the runner's idle strategy would (``compiled_idle``): until the budget under a
spinning or yielding strategy, for up to ``idle_ns`` under a backing-off one; once a stream has been quiet for
``recent_ns`` it takes one pass per duty cycle and leaves the waiting to the runner.

In SHARED mode it also watches what gives the conductor work (``add_watch``: its command queue, its IPC
publications' positions, its timer), so a client's command or an IPC stream does not wait for the budget to run
out.

Its ``stages`` (``network_stages.NetworkStages``) are other agents' compiled work on the same thread, run after each
pass's receiving: a cluster member's archive records the log the pass received in the same stretch.
"""

from __future__ import annotations

import os
import time

import numpy as np

from aeron_numba.agent.idle_watch import IdleWatch, WatchArrays
from aeron_numba.driver.ipc_publication import UpdateInputs
from aeron_numba.driver.loss_generator import LossGenerator
from aeron_numba.driver.receiver import RECEIVE_BATCH_LENGTH, SHORT_TIMER_CHECK_NS
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.driver.send_channel_endpoint import SendChannelEndpoint
from aeron_numba.kernels import image_receiver
from aeron_numba.kernels import network_duty_cycle as ndc
from aeron_numba.kernels import publication_sender

#: Longest compiled stretch before the Python cycles run again (heartbeats, SETUPs, timers) when the compiled path
#: serves every stream ...
DEFAULT_BUDGET_NS = 1_000_000
#: ... and when Python serves some (the data and status messages of multi-destination subscriptions' images, the
#: status messages of multicast images): their flow control waits for the Python cycles.
PYTHON_SERVED_BUDGET_NS = 100_000
#: After work, how long to keep polling in compiled code before handing the idle to the runner.
DEFAULT_IDLE_NS = 50_000
#: Work within this long counts as a busy stream (keep polling); after it, one pass per duty cycle.
DEFAULT_RECENT_NS = 10_000_000
#: ``yield_mask`` of a busy-spinning idle strategy: never yield.
NEVER_YIELD = (1 << 62) - 1


def compiled_idle(idle_strategy, idle_ns: int, budget_ns: int) -> tuple[int, int]:
    """How the cycles wait in compiled code under the runner's idle strategy: (how long to poll on after work,
    yield mask). Spinning strategies poll without yielding (a benchmark with cores to spare); yielding and
    backing-off ones yield after every empty pass (a pass makes two or more system calls already: yielding every
    256 passes measured 518 us round trips against 12.4 us yielding every pass).

    Spinning and yielding ones poll on until the budget: their runner would only spin or yield too, and a return
    costs a Python duty cycle (40-60 us in the UDP round-trip benchmark). Polling on for only 50 us, a driver whose
    peer was in such a cycle went idle, ran one of its own, and made the peer wait in turn: about 4,000 returns
    for 2,000 budgets in a round-trip run, and a p99 of 120-210 us. Backing-off ones poll on for ``idle_ns`` and
    then leave the runner to back off and park; sleeping ones do not poll on: the runner's sleep is what was
    asked for."""
    alias = getattr(idle_strategy, "alias", None)
    if alias in ("spin", "noop"):
        return budget_ns, NEVER_YIELD
    if alias == "yield":
        return budget_ns, 0
    if alias in ("backoff", "controllable"):
        return idle_ns, 0
    return 0, 0


class NetworkCycles:
    #: What a call leaves (datagrams past a batch or its budget, data past a send batch) stays on a watched socket or
    #: at a watched sender position (``agent/idle_watch.py``).
    names_work_left = True

    def __init__(self, values_buffer: np.ndarray, sender=None, receiver=None, *, add_watch=None, idle_strategy=None,
                 budget_ns: int = DEFAULT_BUDGET_NS, idle_ns: int = DEFAULT_IDLE_NS,
                 recent_ns: int = DEFAULT_RECENT_NS, nano_clock=time.monotonic_ns):
        if sender is None and receiver is None:
            raise ValueError("NetworkCycles needs a sender, a receiver or both")
        self.values_buffer = values_buffer  # cnc.dat's counters, which the kernels count into
        self.sender = sender
        self.receiver = receiver
        self.add_watch = add_watch  # names the words to watch, for each call (``add_idle_watch(watch)``)
        self.budget_ns = budget_ns
        self.idle_ns, self.yield_mask = compiled_idle(idle_strategy, idle_ns, budget_ns)
        self.recent_ns = recent_ns
        self.nano_clock = nano_clock
        self.own_agent = False  # see serve_as_own_agent
        # Calls that handed datagrams or a due NAK to the Python sender, receiver or conductor: between two of them
        # and while those do not run, the compiled path alone moved the driver on (``ClusteredMediaDriver``).
        self.python_returns = 0
        self.time_of_last_work_ns = 0
        self.result = np.zeros(ndc.RESULT_LENGTH, np.int64)
        self._collect_result = np.zeros(1, np.int64)
        self.slow = np.zeros(1 + RECEIVE_BATCH_LENGTH, np.int64)  # datagrams of a batch left to Python
        self._scratch = np.zeros(64, np.uint8)  # an image's status message on its way
        self._work_result = np.zeros(image_receiver.WORK_RESULT_LENGTH, np.int64)
        self._no_words = np.zeros(0, np.int64)
        self._tables_key = None  # (sender version, receiver version, loss settings taken) of the cached tables
        self._cached_tables = None
        self._loss_transports = []  # the tables' sockets with a loss-control file (the driver's, if enabled)
        self._loss_controls = []  # and their files
        self._kept_rows = np.zeros(0, np.int64)  # the row words its own watch was last named from
        self._own_watch = None  # (tables and inputs key, watch segment) of that watch
        self._watch_deadline = np.zeros(1, np.int64)
        self._stretch_arrays = WatchArrays()  # the watch that ends a compiled stretch, kept while it names the same
        self._stretch_piece = None
        # Other agents' compiled work on this thread, run after each pass (a member's archive recording its log).
        self.stages = NetworkStages()

    def role_name(self) -> str:
        return "network-cycles"

    def on_start(self) -> None:
        pass

    def on_close(self) -> None:
        pass

    def add_idle_watch(self, watch) -> bool:
        """Nothing of its own while the sender and receiver name everything (beside it in SHARED mode's composite
        agent, through ``_NetworkAgent`` on a network thread). Under ``serve_as_own_agent`` (a duty cycle that
        runs only the agents a wake concerns) it names what its calls serve: the sockets of its tables, a
        publisher adding to a publication whose data it sends, and the images whose work it does (their slowest
        subscriber reaching a status message's point, their status message timers and gaps); the sender and
        receiver then leave those out."""
        if not self.own_agent:
            return True
        if self.nano_clock is not time.monotonic_ns:
            return False
        _, control_endpoints, publications, _, sources = self._tables()
        sender, receiver = self.sender, self.receiver
        images = receiver.images if receiver is not None else ()
        rows = receiver.image_rows if receiver is not None else None
        # Its words and sockets follow from its tables, the publications' inputs and a few words of each row: while
        # none of those moved, what it named last is named again as is. Its deadline, the images' timers, is named
        # afresh each time: it follows the clock.
        key = (self._tables_key, UpdateInputs.invalidations)
        needed = ndc.kept_rows_length(len(publications), rows.count if rows is not None else 0)
        if self._kept_rows.shape[0] < needed:
            self._kept_rows = np.zeros(2 * needed, np.int64)
            self._own_watch = None
        deadline = self._watch_deadline
        unchanged = ndc.scan_watched_rows(publications, len(publications),
                                          rows.addresses if rows is not None else self._no_words,
                                          rows.count if rows is not None else 0, self.values_buffer,
                                          self.nano_clock(), SHORT_TIMER_CHECK_NS, self._kept_rows, deadline)
        if unchanged and self._own_watch is not None and self._own_watch[0] == key:
            watch.add_segment(self._own_watch[1])
        else:
            mark = watch.mark()
            for endpoint in control_endpoints:
                watch.watch_socket(endpoint.transport.fd)
            for _, destination in sources:
                watch.watch_socket(destination.transport.fd)
            if sender is not None:
                for publication in sender.publications:
                    if publication.data_sent_compiled:
                        publication.add_idle_watch(watch)
            for image in images:
                if image.compiled_work:
                    image.add_status_message_watch(watch)
            self._own_watch = (key, watch.segment_since(mark))
        if deadline[0] >= 0:
            watch.run_by(int(deadline[0]))
        return True

    def serve_as_own_agent(self) -> None:
        """Run as an agent of its own that a duty cycle runs only when its wake concerns it
        (``WatchedCompositeAgent``): it names the compiled data path's work, the sender and receiver only
        Python's."""
        self.own_agent = True
        for part in (self.sender, self.receiver):
            if part is not None:
                part.served_by_cycles = True

    # ------------------------------------------------------------------------------------------ tables
    @staticmethod
    def _socket_row(transport, endpoint_id: int = 0) -> tuple:
        loss = transport.loss
        return (transport.fd, endpoint_id, transport.local_port, loss.state.ctypes.data, loss.gap_dropped.ctypes.data,
                loss.gap_dropped.size, transport.last_datagram_ns.ctypes.data)

    def _control_sockets(self) -> tuple[np.ndarray, list]:
        endpoints = list(self.sender.endpoints) if self.sender is not None else []
        for endpoint in endpoints:
            endpoint.read_compiled = True
        table = np.array([self._socket_row(e.transport) for e in endpoints], np.int64)
        return table.reshape(len(endpoints), ndc.SOCKET_COLUMNS), endpoints

    def _publications(self, control_endpoints: list) -> np.ndarray:
        rows = []
        for publication in self.sender.publications if self.sender is not None else ():
            endpoint = publication.endpoint
            publication.data_sent_compiled = True
            sockaddr_address, destinations_address = endpoint.send_addresses()
            rows.append((publication.row.ctypes.data, endpoint.transport.fd, sockaddr_address,
                         control_endpoints.index(endpoint), destinations_address))
        return np.array(rows, np.int64).reshape(len(rows), publication_sender.TABLE_COLUMNS)

    def _receive_sockets(self) -> tuple[np.ndarray, list]:
        sources = []
        for endpoint in self.receiver.endpoints if self.receiver is not None else ():
            for destination in endpoint.destinations:  # each image says which socket's data it takes here
                destination.read_compiled = True
                sources.append((endpoint, destination))
        table = np.array([self._socket_row(d.transport, e.endpoint_id) for e, d in sources], np.int64)
        return table.reshape(len(sources), ndc.SOCKET_COLUMNS), sources

    def _tables(self) -> tuple:
        """(control sockets, their endpoints, publications, receive sockets, their sources), rebuilt only when the
        sender's or receiver's lists changed (a receive endpoint's destinations included) or a loss generator took
        new settings: every other field of a row (fds, ports, addresses of state rows, sockaddrs) is fixed for the
        life of its publication, endpoint or transport.
        A loss generator's update replaces its arrays: a row left with the old address would read freed memory
        and, at best, miss the new settings (a partition that drops nothing). Building the tables each cycle cost
        about a tenth of a busy driver's CPU."""
        key = (self.sender.version if self.sender is not None else -1,
               self.receiver.version if self.receiver is not None else -1, LossGenerator.settings_taken,
               SendChannelEndpoint.destination_tables_replaced)
        if key != self._tables_key:
            control_sockets, control_endpoints = self._control_sockets()
            publications = self._publications(control_endpoints)
            receive_sockets, sources = self._receive_sockets()
            self._cached_tables = (control_sockets, control_endpoints, publications, receive_sockets, sources)
            transports = [e.transport for e in control_endpoints] + [d.transport for _, d in sources]
            self._loss_transports = [t for t in transports if t.loss_control is not None]
            self._loss_controls = list({id(t.loss_control): t.loss_control for t in self._loss_transports}.values())
            self._tables_key = key
        return self._cached_tables

    def _python_serves_a_stream(self, fast_publications: int, fast_sockets: int) -> bool:
        sender, receiver = self.sender, self.receiver
        if sender is not None and fast_publications < len(sender.publications):
            return True
        if receiver is None:
            return False
        sockets = sum(len(endpoint.destinations) for endpoint in receiver.endpoints)
        return fast_sockets < sockets or not all(image.compiled_work for image in receiver.images)

    # -------------------------------------------------------------------------------------- duty cycle
    def do_work(self) -> int:
        control_sockets, control_endpoints, publications, receive_sockets, sources = self._tables()
        if self._loss_transports:
            # Settings written while the thread waited are taken before the first datagram is read: this call runs
            # before the endpoints' Python polls, which take them too, and may read a whole burst.
            taken = LossGenerator.settings_taken
            for transport in self._loss_transports:
                transport.poll_loss_settings()
            if LossGenerator.settings_taken != taken:
                control_sockets, control_endpoints, publications, receive_sockets, sources = self._tables()
        if not (len(publications) or len(sources) or len(control_endpoints) or len(self.stages)):
            return 0
        now_ns = self.nano_clock()
        idle_ns = self.idle_ns if now_ns - self.time_of_last_work_ns < self.recent_ns else 0
        watch = None
        budget_ns = self.budget_ns
        if self._python_serves_a_stream(len(publications), len(sources)):
            budget_ns = min(budget_ns, PYTHON_SERVED_BUDGET_NS)
        if self.add_watch is not None:
            watch = IdleWatch(self._stretch_arrays)
            mark = watch.mark()
            self.add_watch(watch)
            for control in self._loss_controls:  # new settings end the stretch: the endpoints' polls take them
                control.watch_version(watch)
            # Named as the last stretch's (a command queue's head is watched by its word): its arrays as they were.
            self._stretch_piece = watch.segment_since(mark, self._stretch_piece)
            watch.snapshot()
            if watch.deadline_ns is not None:
                budget_ns = max(0, min(budget_ns, watch.deadline_ns - now_ns))
        receiver, sender = self.receiver, self.sender
        batch = receiver.batch if receiver is not None else sender.control_batch
        images = receiver.image_rows if receiver is not None else None
        control_batch = sender.control_batch if sender is not None else batch
        send_batch = sender.send_batch if sender is not None else None
        result = self.result
        slow = self.slow
        ndc.run_network_cycles(
            publications, len(publications), receive_sockets, len(sources), control_sockets, len(control_endpoints),
            images.addresses if images is not None else self._no_words, images.count if images is not None else 0,
            batch.msgs, batch.names, batch.buffer, batch.slot_length, batch.vlen, control_batch.msgs,
            control_batch.names, control_batch.buffer, control_batch.vlen,
            send_batch.msgs if send_batch is not None else batch.msgs,
            send_batch.iovecs if send_batch is not None else batch.iovecs,
            send_batch.vlen if send_batch is not None else 0,
            watch.addresses if watch is not None else self._no_words,
            watch.values if watch is not None else self._no_words,
            self.values_buffer, budget_ns, idle_ns, self.yield_mask,
            slow, self._collect_result, self._scratch, self._work_result, self.stages.table, len(self.stages), result)
        work, reason, index = int(result[ndc.RESULT_WORK]), int(result[ndc.RESULT_REASON]), int(result[ndc.RESULT_INDEX])
        now_ns = self.nano_clock()
        if reason in (ndc.RETURN_SLOW_DATAGRAMS, ndc.RETURN_CONTROL_FRAMES, ndc.RETURN_NAK_DUE):
            self.python_returns += 1  # Python state of the sender, receiver or conductor may change here
        if reason == ndc.RETURN_SLOW_DATAGRAMS:
            endpoint, destination = sources[index]
            endpoint.on_slow_datagrams(destination, batch, slow, now_ns)
        elif reason == ndc.RETURN_CONTROL_FRAMES:
            control_endpoints[index].on_batch(control_batch, now_ns, slow)
        elif reason == ndc.RETURN_NAK_DUE:
            receiver.images[index].on_nak_due(now_ns)
        elif reason == ndc.RETURN_ERROR:
            raise OSError(-index, os.strerror(-index))
        if work:
            self.time_of_last_work_ns = now_ns
        return work

