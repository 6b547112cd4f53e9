"""The receiver's side of one remote publication (one session of a subscribed stream): a network image.

Created by the conductor when a SETUP frame for a subscribed stream arrives: a log in ``images/`` starting at
the sender's term id and offset (the join position), and the counters ``rcv-hwm`` (highest position
received), ``rcv-pos`` (how far the log is complete) and one ``sub-pos`` per subscription.

Receiver side (every duty cycle): data frames are rebuilt into the log at their term offsets, but only inside
the window the last status message (SM) granted (earlier = an under-run, later = an over-run: dropped and
counted); heartbeats move the high-water mark and may carry end of stream. The loss detector scans from the
rebuild position to the high-water mark and, once a gap has lasted the NAK delay, asks the sender for it (or,
for ``reliable=false``, pads over it). With group semantics (multicast) the delay is a random backoff, drawn
again for every NAK (``feedback_delay.py``), and NAKs go to the control group like the SMs. SMs go back to the
sender when the slowest subscriber has consumed a quarter of the window since the last one, or every status
message timeout (200 ms). SMs and NAKs go out through each live connection: the endpoint's one socket, or on a
multi-destination subscription every destination that has delivered this session lately (a replay and a live
stream of one session feed one image); end of stream then needs every connection to have reached it.

Conductor side (its duty cycle and timer): cleans the log behind the slowest subscriber, and runs the lifecycle
ACTIVE -> (no packet for the image liveness timeout, or end of stream consumed) DRAINING -> LINGER -> DONE.

The receiver side is compiled (``kernels/image_receiver.py``: ``insert_packet`` and ``receiver_work``) and works on
the image's state row (``layout/network_state.py``), which the compiled network cycles reach by address; the
attributes below that name those fields read and write the row. Python keeps what it decides: the NAK itself
(with its loss report), status messages to the several connections of a multi-destination image, the lifecycle.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

import numpy as np

from aeron_numba.agent.idle_watch import KeptWordToReach
from aeron_numba.kernels import atomics_for_python
from aeron_numba.kernels import counters as counters_kernels
from aeron_numba.kernels import image_receiver
from aeron_numba.kernels import udp_socket
from aeron_numba.kernels import loss_detector as ld
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels.log_cleaner import clean_buffer_to
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns
from aeron_numba.kernels import position as pos
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.driver.receive_destination import RECEIVE_DESTINATION_TIMEOUT_NS

DEFAULT_STATUS_MESSAGE_TIMEOUT_NS = 200_000_000
#: The log is cleaned in steps of at least this share of a term (a term behind the slowest subscriber): the
#: conductor then wakes once per step, not for every message its subscribers take. The receiver never writes within
#: two terms behind them (its window is at most half a term), so the lag is safe.
CLEAN_STEP_TERM_DIVISOR = 8


class ImageState(enum.Enum):
    ACTIVE = 1
    DRAINING = 2
    LINGER = 3
    DONE = 4


def _i32(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 4].view(np.int32)[0])


@dataclass
class ImageSubscriber:
    subscription: object  # driver_conductor.SubscriptionLink
    counter_id: int


@dataclass
class ImageConnection:
    """One destination (socket) through which the image's sender reaches us, and where to answer it."""

    destination: object  # ReceiveDestination
    control_address: tuple[str, int] | None  # None until the destination delivers a frame of this session
    # None: the only destination of an ordinary endpoint, alive as long as the image; else the time it last
    # delivered a frame of this session (MDS), which keeps it alive for RECEIVE_DESTINATION_TIMEOUT_NS.
    time_of_last_activity_ns: int | None = None
    time_of_last_frame_ns: int | None = None  # MDS: when the destination last delivered a frame of this session
    end_of_stream_position: int | None = None

    def is_alive(self, now_ns: int) -> bool:
        last = self.time_of_last_activity_ns
        return self.control_address is not None and (
            last is None or now_ns < last + RECEIVE_DESTINATION_TIMEOUT_NS)


@dataclass
class PublicationImage:
    correlation_id: int
    session_id: int
    stream_id: int
    channel: str
    source_identity: str  # "ip:port" of the sender, as clients see it
    connections: list[ImageConnection]  # where SMs and NAKs go, and through which socket
    endpoint: object  # ReceiveChannelEndpoint
    log: LogBuffers
    join_position: int
    rcv_hwm_counter_id: int
    rcv_pos_counter_id: int
    values_buffer: np.ndarray
    system_counters: object
    now_ns: int
    receiver_id: int
    receiver_window: int
    reliable: bool = True
    nak_delay_ns: int = 100_000
    nak_retry_delay_ns: int = 10_000_000
    feedback_delay: object = None  # group semantics: an OptimalMulticastFeedbackDelay; None: the two delays above
    status_message_timeout_ns: int = DEFAULT_STATUS_MESSAGE_TIMEOUT_NS
    image_liveness_timeout_ns: int = 10_000_000_000
    linger_timeout_ns: int = 5_000_000_000
    loss_report: object = None  # the driver's LossReport (loss-report.dat), None when it has none
    epoch_clock: object = None  # ms since the epoch, for loss report timestamps
    subscribers: list[ImageSubscriber] = field(default_factory=list)
    endpoint_id: int = 0  # the receiver's id of ``endpoint`` (the compiled dispatcher's key)

    def __post_init__(self) -> None:
        log = self.log
        self.term_length = log.term_length
        self.initial_term_id = log.initial_term_id
        self.bits = log.position_bits_to_shift
        # The receiver's hot state lives in one row the compiled path shares (layout/network_state.py).
        self.row = row = np.zeros(ns.IMAGE_ROW_LENGTH, np.int64)
        for column, value in ((ns.IMAGE_SESSION_ID, self.session_id), (ns.IMAGE_STREAM_ID, self.stream_id),
                              (ns.IMAGE_ENDPOINT_ID, self.endpoint_id), (ns.IMAGE_IS_ACTIVE, 1),
                              (ns.IMAGE_LOG_ADDRESS, log.buffer.ctypes.data), (ns.IMAGE_LOG_LENGTH, log.buffer.size),
                              (ns.IMAGE_METADATA_OFFSET, log.metadata_offset),
                              (ns.IMAGE_TERM_LENGTH, self.term_length), (ns.IMAGE_POSITION_BITS, self.bits),
                              (ns.IMAGE_INITIAL_TERM_ID, self.initial_term_id),
                              (ns.IMAGE_HWM_POSITION, self.join_position),
                              (ns.IMAGE_REBUILD_POSITION, self.join_position),
                              # the sender may send up to last_sm_position + window
                              (ns.IMAGE_LAST_SM_POSITION, self.join_position),
                              (ns.IMAGE_LAST_SM_WINDOW, self.receiver_window),
                              # send the first SM at once
                              (ns.IMAGE_TIME_OF_LAST_SM_NS, self.now_ns - self.status_message_timeout_ns),
                              (ns.IMAGE_TIME_OF_LAST_PACKET_NS, self.now_ns),
                              (ns.IMAGE_END_OF_STREAM_POSITION, ns.NO_POSITION),
                              (ns.IMAGE_RCV_HWM_COUNTER_ID, self.rcv_hwm_counter_id),
                              (ns.IMAGE_RCV_POS_COUNTER_ID, self.rcv_pos_counter_id),
                              (ns.IMAGE_NAK_DELAY_NS, self.nak_delay_ns),
                              (ns.IMAGE_NAK_RETRY_DELAY_NS, self.nak_retry_delay_ns),
                              (ns.IMAGE_STATUS_MESSAGE_TIMEOUT_NS, self.status_message_timeout_ns),
                              (ns.IMAGE_RECEIVER_WINDOW, self.receiver_window),
                              (ns.IMAGE_RECEIVER_ID, self.receiver_id),
                              (ns.IMAGE_IMAGE_LIVENESS_TIMEOUT_NS, self.image_liveness_timeout_ns)):
            row[column] = value
        self._state = ImageState.ACTIVE
        self.clean_position = self.join_position
        self.clean_step = self.term_length // CLEAN_STEP_TERM_DIVISOR
        self._slowest_subscriber = KeptWordToReach()  # add_conductor_watch's
        self._sm_subscriber = KeptWordToReach()  # add_status_message_watch's
        self.loss_state = np.zeros(ld.LOSS_STATE_LENGTH, dtype=np.int64)
        row[ns.IMAGE_LOSS_STATE_ADDRESS] = self.loss_state.ctypes.data
        self._work_result = np.zeros(image_receiver.WORK_RESULT_LENGTH, np.int64)
        self._control_sockaddr = None  # kept alive while the row points at it
        self._subscriber_ids = self._retired_subscriber_ids = np.zeros(0, np.int64)
        if self.feedback_delay is not None:
            row[ns.IMAGE_NAK_GROUP_SIZE] = self.feedback_delay.group_size
            row[ns.IMAGE_NAK_MAX_BACKOFF_NS] = self.feedback_delay.max_backoff_ns
            row[ns.IMAGE_NAK_RANDOM_STATE] = self.feedback_delay.image_random_state()
        self._refresh_lock = threading.Lock()
        self.refresh_compiled_work()
        self.loss_report_entry = None  # created at this image's first loss (§13.1), one per image
        self.control = np.zeros(64, dtype=np.uint8)
        for counter_id in (self.rcv_hwm_counter_id, self.rcv_pos_counter_id):
            self._set_counter(counter_id, self.join_position)

    # ------------------------------------------------------------------------ state kept in the row
    @property
    def state(self) -> ImageState:
        return self._state

    @state.setter
    def state(self, state: ImageState) -> None:
        self._state = state
        self.row[ns.IMAGE_IS_ACTIVE] = 1 if state is ImageState.ACTIVE else 0

    hwm_position = ns.row_field(ns.IMAGE_HWM_POSITION)
    rebuild_position = ns.row_field(ns.IMAGE_REBUILD_POSITION)
    last_sm_position = ns.row_field(ns.IMAGE_LAST_SM_POSITION)
    last_sm_window = ns.row_field(ns.IMAGE_LAST_SM_WINDOW)
    time_of_last_sm_ns = ns.row_field(ns.IMAGE_TIME_OF_LAST_SM_NS)
    time_of_last_packet_ns = ns.row_field(ns.IMAGE_TIME_OF_LAST_PACKET_NS)
    active_transport_count = ns.row_field(ns.IMAGE_ACTIVE_TRANSPORT_COUNT)  # as written in the log's metadata

    @property
    def end_of_stream_position(self) -> int | None:
        position = int(self.row[ns.IMAGE_END_OF_STREAM_POSITION])
        return None if position == ns.NO_POSITION else position

    def _set_counter(self, counter_id: int, value: int) -> None:
        counters_kernels.set_counter_value(self.values_buffer, counter_id, value)

    def _get_counter(self, counter_id: int) -> int:
        return int(counters_kernels.get_counter_value(self.values_buffer, counter_id))

    @property
    def log_file_name(self) -> str:
        return str(self.log.path)

    # --------------------------------------------------------------------------- receiver: connections
    def connection_for(self, destination, source: tuple[str, int], now_ns: int) -> ImageConnection:
        """MDS: the connection through ``destination`` (made on its first frame), marked active now; it answers
        to ``source`` unless the destination names a control address."""
        for connection in self.connections:
            if connection.destination is destination:
                break
        else:
            connection = ImageConnection(destination, destination.control_address)
            self.connections.append(connection)
        connection.time_of_last_activity_ns = connection.time_of_last_frame_ns = now_ns
        if connection.control_address is None:
            connection.control_address = source
            self.refresh_compiled_work()  # it may be the one connection, now with an address to answer
        return connection

    def add_destination(self, destination, now_ns: int) -> None:
        """A destination added to the endpoint: answered once it delivers a frame (or at once with a control
        address), as Aeron's image adds a connection for every new destination."""
        self._take_compiled_activity()
        self.connections.append(ImageConnection(destination, destination.control_address, now_ns))
        self.refresh_compiled_work()

    def remove_destination(self, destination) -> None:
        self._take_compiled_activity()
        self.connections = [c for c in self.connections if c.destination is not destination]
        self.refresh_compiled_work()

    def _take_compiled_activity(self) -> None:
        """While the compiled path feeds a multi-destination image's one connection (``IMAGE_DATA_FD``), the
        connection's last frame is the image's last packet: bring it up to date before Python reads it."""
        if self.row[ns.IMAGE_DATA_FD] >= 0 and len(self.connections) == 1:
            connection = self.connections[0]
            last = max(self.time_of_last_packet_ns, connection.time_of_last_frame_ns or 0)
            connection.time_of_last_activity_ns = connection.time_of_last_frame_ns = last

    # ------------------------------------------------------------------------------- receiver: packets
    def insert_packet(self, buf: np.ndarray, length: int, now_ns: int, connection: ImageConnection | None = None,
                      offset: int = 0) -> int:
        """A validated DATA/PAD datagram (one or more frames) for this image at ``buf[offset:]``; returns the bytes
        taken (``kernels/image_receiver.insert_packet``, as the compiled dispatcher does). ``connection``: the MDS
        connection it came through (None on an ordinary endpoint), whose end of stream is only one of several."""
        if connection is not None and self.state is ImageState.ACTIVE and \
                _i32(buf, offset + frame.FRAME_LENGTH_FIELD_OFFSET) == 0 and \
                buf[offset + frame.FLAGS_FIELD_OFFSET] & frame.EOS_FLAG:
            connection.end_of_stream_position = pos.compute_position(
                _i32(buf, offset + frame.TERM_ID_FIELD_OFFSET), _i32(buf, offset + frame.TERM_OFFSET_FIELD_OFFSET),
                self.bits, self.initial_term_id)
            ends = [c.end_of_stream_position for c in self.connections]
            if None not in ends:  # every connection has ended it: at the furthest end of stream seen, as Aeron
                image_receiver.set_end_of_stream(self.row, self.log.buffer, max(ends))
        return int(image_receiver.insert_packet(self.row, self.log.buffer, buf, offset, length, now_ns,
                                                self.values_buffer, connection is None))

    # -------------------------------------------------------------------------------- receiver: duty
    def do_receiver_work(self, now_ns: int) -> int:
        """Loss detection and status messages (``kernels/image_receiver.receiver_work``, which the compiled network
        cycles also run for an image with ``compiled_work``); what it leaves is done here: a due NAK, and the status
        message of an image with several connections."""
        if self.state is not ImageState.ACTIVE:
            return 0
        result = self._work_result
        image_receiver.receiver_work(self.row, self.log.buffer, self.values_buffer, now_ns, self.control, result)
        flags = int(result[image_receiver.WORK_FLAGS])
        if flags & image_receiver.NAK_DUE:
            self.on_nak_due(now_ns)
        if flags & image_receiver.SM_PENDING:
            self._send_to_connections(int(result[image_receiver.WORK_SM_LENGTH]), cl.STATUS_MESSAGES_SENT, now_ns)
            self._update_active_transport_count(now_ns)
        return int(result[image_receiver.WORK_DONE])

    def on_nak_due(self, now_ns: int) -> None:
        """The loss detector's scan asked for the gap in its state: reported to loss-report.dat, then NAKed, or
        for ``reliable=false`` filled with padding."""
        term_id, term_offset, length = (int(self.loss_state[i]) for i in (
            ld.STATE_NAK_TERM_ID, ld.STATE_NAK_TERM_OFFSET, ld.STATE_NAK_LENGTH))
        self._report_loss(length)
        if self.reliable:
            self._send_nak(term_id, term_offset, length, now_ns)
            return
        term = self.log.term(pos.index_by_position(pos.compute_position(term_id, term_offset, self.bits,
                                                                        self.initial_term_id), self.bits))
        if ld.fill_gap(term, term_id, term_offset, length, self.session_id, self.stream_id) == ld.GAP_FILLED:
            self.system_counters.increment(cl.LOSS_GAP_FILLS)

    def _report_loss(self, length: int) -> None:
        """Record a gap in loss-report.dat, as Aeron does each time a gap is NAKed or filled."""
        if self.loss_report is None:
            return
        now_ms = self.epoch_clock()
        if self.loss_report_entry is not None:
            self.loss_report_entry.record_observation(length, now_ms)
        else:  # None again when the report is full: later losses try again, like Aeron
            self.loss_report_entry = self.loss_report.create_entry(length, now_ms, self.session_id, self.stream_id,
                                                                   self.channel, self.source_identity)

    def _send_to_connections(self, size: int, counter_id: int, now_ns: int) -> None:
        """The control frame in ``self.control`` to every live connection, each counted, as Aeron counts them."""
        self._take_compiled_activity()
        for connection in self.connections:
            if connection.is_alive(now_ns):
                self.endpoint.send_to(self.control[:size], connection.control_address, connection.destination)
                self.system_counters.increment(counter_id)

    def _send_nak(self, term_id: int, term_offset: int, length: int, now_ns: int) -> None:
        size = uf.encode_nak(self.control, 0, self.session_id, self.stream_id, term_id, term_offset, length)
        self._send_to_connections(size, cl.NAK_MESSAGES_SENT, now_ns)

    # ------------------------------------------------------------------------------------- subscribers
    # The list is replaced, never changed in place: the receiver's thread may be reading the old one.
    def add_subscriber(self, subscriber: ImageSubscriber) -> None:
        self.subscribers = [*self.subscribers, subscriber]
        self.refresh_compiled_work()

    def remove_subscriber(self, subscriber: ImageSubscriber) -> None:
        self.subscribers = [s for s in self.subscribers if s is not subscriber]
        self.refresh_compiled_work()

    def refresh_compiled_work(self) -> None:
        """Tell ``receiver_work`` the subscribers' counters (a new array each time: a reader may still hold the
        last one, kept alive until the next change) and whether the compiled cycles may run it: one connection,
        with an address to answer. A multi-destination image with one such connection has its data inserted in
        compiled code too, from that connection's socket only (``IMAGE_DATA_FD``); with several, Python tracks
        each (their liveness, their ends of stream). Called by the conductor (subscribers) and the receiver
        (connections): the lock keeps one refresh from undoing a later one."""
        with self._refresh_lock:
            row = self.row
            row[ns.IMAGE_COMPILED_WORK] = 0
            multi_destination = self.endpoint.is_multi_destination
            row[ns.IMAGE_DATA_FD] = ns.NO_SOCKET if multi_destination else ns.ANY_SOCKET
            self._retired_subscriber_ids = self._subscriber_ids
            self._subscriber_ids = np.array([s.counter_id for s in self.subscribers], np.int64)
            row[ns.IMAGE_SUBSCRIBER_COUNT] = 0
            row[ns.IMAGE_SUBSCRIBER_IDS_ADDRESS] = self._subscriber_ids.ctypes.data
            row[ns.IMAGE_SUBSCRIBER_COUNT] = len(self._subscriber_ids)
            connections = self.connections
            if len(connections) == 1 and connections[0].control_address is not None:
                connection = connections[0]
                self._control_sockaddr = udp_socket.sockaddr_in(*connection.control_address)
                row[ns.IMAGE_CONTROL_FD] = connection.destination.transport.fd
                row[ns.IMAGE_CONTROL_SOCKADDR_ADDRESS] = self._control_sockaddr.ctypes.data
                row[ns.IMAGE_CONNECTION_TIMEOUT_NS] = RECEIVE_DESTINATION_TIMEOUT_NS if multi_destination else 0
                if multi_destination:  # its last frame is the image's last packet from here on
                    row[ns.IMAGE_DATA_FD] = connection.destination.transport.fd
                row[ns.IMAGE_COMPILED_WORK] = 1

    @property
    def compiled_work(self) -> bool:
        return bool(self.row[ns.IMAGE_COMPILED_WORK])

    def min_subscriber_position(self) -> int:
        positions = [self._get_counter(s.counter_id) for s in self.subscribers]
        return min(positions) if positions else self.rebuild_position

    def _update_active_transport_count(self, now_ns: int) -> None:
        """The log's active transport count (what a client's ``Image.active_transport_count`` reads): the
        connections that delivered a frame within the image liveness timeout, updated with each status message
        as Aeron does (archive replication waits for two before it lets go of the replay)."""
        count = 0
        for connection in self.connections:
            last = self.time_of_last_packet_ns if connection.time_of_last_activity_ns is None \
                else connection.time_of_last_frame_ns
            if last is not None and now_ns < last + self.image_liveness_timeout_ns:
                count += 1
        if count != self.active_transport_count:
            self.active_transport_count = count
            atomics_for_python.put_int32_release(self.log.buffer,
                                                 self.log.metadata_offset + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, count)

    # ---------------------------------------------------------------------------------- conductor side
    def add_conductor_watch(self, watch) -> None:
        """What ``clean`` waits for (``agent/idle_watch.py``): the slowest subscriber a term and a clean step past
        the clean position, watched for reaching it rather than at every message a subscriber takes."""
        if self.subscribers:  # kept while the clean position and the subscribers (a list replaced on change) stay
            self._slowest_subscriber.add_to(watch, (self.clean_position, self.subscribers),
                                            self._pick_slowest_subscriber)

    def _pick_slowest_subscriber(self) -> tuple[np.ndarray, int, int]:
        return self._slowest_subscriber_reaching(self.clean_position + self.term_length + self.clean_step)

    def _slowest_subscriber_reaching(self, position: int) -> tuple[np.ndarray, int, int]:
        values = self.values_buffer
        slowest = min(self.subscribers, key=lambda subscriber: self._get_counter(subscriber.counter_id))
        return values, counters_kernels.counter_value_address(values, slowest.counter_id), position

    def add_status_message_watch(self, watch) -> None:
        """What makes ``receiver_work`` send a status message before its timeout: the slowest subscriber a quarter
        window past the last one, or at the end of the stream (``agent/idle_watch.py``). Watched for reaching that
        point, not for every message a subscriber takes, each of which ran the receiver for nothing."""
        if not self.subscribers:
            return
        last = int(self.row[ns.IMAGE_LAST_SM_POSITION])
        due_at = last + int(self.row[ns.IMAGE_RECEIVER_WINDOW]) // 4
        end = self.end_of_stream_position
        if end is not None and end > last:
            due_at = min(due_at, end)
        self._sm_subscriber.add_to(watch, (due_at, self.subscribers),
                                   lambda: self._slowest_subscriber_reaching(due_at))

    def clean(self) -> int:
        """Zero the log a term behind the slowest subscriber, like Aeron, once that is a clean step on: the receiver
        never writes there, even for a packet it accepted just before the subscribers moved on."""
        target = self.min_subscriber_position() - self.term_length
        if target - self.clean_position < self.clean_step:
            return 0
        self.clean_position = int(clean_buffer_to(self.log.buffer, self.clean_position, target))
        return 1

    def is_end_of_stream_consumed(self) -> bool:
        eos = self.end_of_stream_position
        return eos is not None and self.rebuild_position >= eos and self.min_subscriber_position() >= eos

    def on_time_event(self, now_ns: int) -> bool:
        """Lifecycle on the conductor timer. Returns True when DONE (the conductor tells clients and frees it)."""
        if self.state is ImageState.ACTIVE:
            if self.is_end_of_stream_consumed() or now_ns - self.time_of_last_packet_ns > self.image_liveness_timeout_ns:
                self.state = ImageState.DRAINING
                self.time_of_state_change_ns = now_ns
        elif self.state is ImageState.DRAINING:
            self.state = ImageState.LINGER
            self.time_of_state_change_ns = now_ns
        elif self.state is ImageState.LINGER:
            if now_ns - self.time_of_state_change_ns >= self.linger_timeout_ns:
                self.state = ImageState.DONE
        return self.state is ImageState.DONE
