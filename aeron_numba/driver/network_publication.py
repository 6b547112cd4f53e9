"""The driver's side of an ``aeron:udp`` publication (spec/transport.md §4.7, §15, §16).

Clients append to the log exactly as for IPC; the driver's sender reads it and transmits: SETUP frames until
a receiver answers with a status message (SM), and again when a receiver asks for one (an SM flagged
send-setup: a multicast receiver joining late), then data in MTU-sized datagrams of whole frames, up to the
sender limit flow control derives from the SMs (``snd-lmt``), heartbeats when idle, retransmits on NAKs,
and RTT replies. ``snd-pos`` is how far it has sent. The conductor side moves ``pub-lmt`` ahead of ``snd-pos``
by the term window while a receiver is connected, cleans the log a whole term behind ``snd-pos`` (retransmits
may still need the last term), and runs the lifecycle ACTIVE -> DRAINING -> LINGER -> DONE: on close the
end of stream is marked and the sender keeps going until everything is sent, then sends EOS heartbeats (and
answers NAKs) until every live receiver's status message reports the end: a tail lost on the way is
recovered before the log goes, even with linger 0.

Spies (``aeron-spy:`` subscriptions of this driver's clients) read the log itself: each has a ``sub-pos`` that
holds ``pub-lmt`` back like an IPC subscriber's (untethered ones may be dropped, §15.2, against ``snd-pos``),
but only while the publication is connected. A publication with receivers is connected; one with only spies is
connected only when it says spies simulate a connection (``ssc=true``, or the driver's
``AERON_SPIES_SIMULATE_CONNECTION``): then ``snd-pos`` follows the fastest spy, as in Aeron. Draining waits for
the spies to read up to the end of stream.

The sender's hot state (sender position and limit, the last status message of the receiver it knows) is a state
row (``layout/network_state.py``) that the compiled path (``kernels/publication_sender.py``) moves: data is scanned
and sent, and that receiver's status messages taken, without Python; the attributes naming those fields read the
row. SETUPs, heartbeats, retransmits, RTT replies, other receivers and flow control strategies stay here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from aeron_numba.agent.idle_watch import KeptWordToReach
from aeron_numba.driver.flow_control import UnicastFlowControl
from aeron_numba.driver.ipc_publication import (ImageChange, State, SubscriberPosition, UpdateInputs, check_untethered,
                                                tail_counter_addresses)
from aeron_numba.kernels import atomics_for_python
from aeron_numba.kernels import counters as counters_kernels
from aeron_numba.kernels.counters import counter_value_address
from aeron_numba.kernels import publication_sender
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels.log_buffer_unblocker import unblock
from aeron_numba.kernels.log_cleaner import clean_buffer_to
from aeron_numba.kernels.term_appender import producer_position
from aeron_numba.kernels.udp_socket import SendBatch

#: Datagrams of a retransmit per ``sendmmsg``.
RESEND_BATCH_LENGTH = 16
from aeron_numba.layout import counters as cl
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns
from aeron_numba.kernels import position as pos
from aeron_numba.layout import udp_frames as ul
from aeron_numba.layout.log_buffers import LogBuffers


@dataclass
class _Retransmit:
    expiry_ns: int
    linger_until_ns: int
    term_id: int
    term_offset: int
    length: int
    sent: bool = False


@dataclass
class NetworkPublication:
    registration_id: int
    session_id: int
    stream_id: int
    channel: object  # UdpChannel of its send endpoint
    endpoint: object  # SendChannelEndpoint
    exclusive: bool
    log: LogBuffers
    pub_pos_counter_id: int
    pub_lmt_counter_id: int
    snd_pos_counter_id: int
    snd_lmt_counter_id: int
    snd_bpe_counter_id: int
    term_window_length: int
    values_buffer: np.ndarray
    system_counters: object
    now_ns: int
    unblock_timeout_ns: int
    connection_timeout_ns: int
    linger_timeout_ns: int
    heartbeat_timeout_ns: int = 100_000_000
    signal_eos: bool = True  # the channel's eos: heartbeats flag the end of stream once drained
    setup_timeout_ns: int = 100_000_000
    retransmit_delay_ns: int = 0
    retransmit_linger_ns: int = 10_000_000
    max_resend: int = 16
    flow_control: object = field(default_factory=UnicastFlowControl)
    spies_simulate_connection: bool = False
    tag: int | None = None  # the publication tag of tags=<channel tag>,<publication tag>
    ref_count: int = 1
    state: State = State.ACTIVE
    owners: list[int] = field(default_factory=list)
    spies: list[SubscriberPosition] = field(default_factory=list)

    def __post_init__(self) -> None:
        log = self.log
        self.term_length = log.term_length
        self.mtu = log.mtu_length
        self.initial_term_id = log.initial_term_id
        self.bits = log.position_bits_to_shift
        start = self.start_position = self.producer_position()  # a concurrent publication joining must match it
        # The sender's hot state lives in one row the compiled path shares (layout/network_state.py).
        self.row = row = np.zeros(ns.PUBLICATION_ROW_LENGTH, np.int64)
        for column, value in ((ns.PUBLICATION_SESSION_ID, self.session_id), (ns.PUBLICATION_STREAM_ID, self.stream_id),
                              (ns.PUBLICATION_LOG_ADDRESS, log.buffer.ctypes.data),
                              (ns.PUBLICATION_LOG_LENGTH, log.buffer.size),
                              (ns.PUBLICATION_TERM_LENGTH, self.term_length),
                              (ns.PUBLICATION_POSITION_BITS, self.bits),
                              (ns.PUBLICATION_INITIAL_TERM_ID, self.initial_term_id), (ns.PUBLICATION_MTU, self.mtu),
                              (ns.PUBLICATION_SENDER_POSITION, start),
                              (ns.PUBLICATION_SENDER_LIMIT, self.flow_control.initial_limit(start)),
                              (ns.PUBLICATION_SND_POS_COUNTER_ID, self.snd_pos_counter_id),
                              (ns.PUBLICATION_SND_BPE_COUNTER_ID, self.snd_bpe_counter_id),
                              (ns.PUBLICATION_TIME_OF_LAST_SEND_OR_HEARTBEAT_NS, self.now_ns),
                              (ns.PUBLICATION_SND_LMT_COUNTER_ID, self.snd_lmt_counter_id),
                              (ns.PUBLICATION_UNICAST_FLOW_CONTROL,
                               1 if type(self.flow_control) is UnicastFlowControl else 0),
                              (ns.PUBLICATION_TIME_OF_LAST_SM_NS, self.now_ns)):
            row[column] = value
        self._collect_result = np.zeros(2, np.int64)
        self._resend_batch = SendBatch(RESEND_BATCH_LENGTH)
        self.clean_position = max(0, start - self.term_length)
        self.trip_limit = 0
        self.is_connected = False  # the log's is_connected: receivers, or spies simulating a connection
        self.is_setup_elicited = False  # a receiver asked for a SETUP (SM flagged send-setup)
        self.setup_flags = ul.SETUP_GROUP_FLAG if self.channel.has_group_semantics else 0
        self.time_of_last_setup_ns = self.now_ns - self.setup_timeout_ns
        # receiver id -> (consumption position, ns of its last SM): draining waits for these to reach the end.
        self.receiver_positions: dict[int, tuple[int, int]] = {}
        self.last_sender_position = start
        self.time_of_last_sender_position_change_ns = self.now_ns
        self.end_of_stream_position = None
        self.retransmits: dict[tuple[int, int], _Retransmit] = {}
        self.control = np.zeros(2 * ul.SETUP_FRAME_LENGTH, dtype=np.uint8)  # scratch for one control frame
        self.data_sent_compiled = False  # set by NetworkCycles when its kernel sends this publication's data
        self._slowest_reader = KeptWordToReach()  # add_conductor_watch's
        self._sender_position_address = self.row.ctypes.data + ns.PUBLICATION_SENDER_POSITION * self.row.itemsize
        # What add_idle_watch names of update_inputs' words (the tail counters; the spies if they simulate a
        # connection), and the inputs' version it was built for.
        self._watch_words, self._watch_words_version = [], -1
        self.update_inputs = UpdateInputs(lambda: tail_counter_addresses(self.log) + [
            self._sender_position_address] + [
            counter_value_address(self.values_buffer, spy.counter_id) for spy in self.spies])
        for counter_id in (self.pub_pos_counter_id, self.pub_lmt_counter_id, self.snd_pos_counter_id):
            self._set_counter(counter_id, start)
        self._set_counter(self.snd_lmt_counter_id, self.sender_limit)
        log.buffer[log.metadata_offset + lb.LOG_SPIES_SIMULATE_CONNECTION_OFFSET] = int(self.spies_simulate_connection)

    # ------------------------------------------------------------------------------ state kept in the row
    sender_position = ns.row_field(ns.PUBLICATION_SENDER_POSITION)
    sender_limit = ns.row_field(ns.PUBLICATION_SENDER_LIMIT)
    time_of_last_send_or_heartbeat_ns = ns.row_field(ns.PUBLICATION_TIME_OF_LAST_SEND_OR_HEARTBEAT_NS)
    time_of_last_sm_ns = ns.row_field(ns.PUBLICATION_TIME_OF_LAST_SM_NS)

    @property
    def has_receivers(self) -> bool:
        return bool(self.row[ns.PUBLICATION_HAS_RECEIVERS])

    # ------------------------------------------------------------------------------------------- helpers
    def _set_counter(self, counter_id: int, value: int) -> None:
        counters_kernels.set_counter_value(self.values_buffer, counter_id, value)

    def _get_counter(self, counter_id: int) -> int:
        return int(counters_kernels.get_counter_value(self.values_buffer, counter_id))

    def producer_position(self) -> int:
        return int(producer_position(self.log.buffer))

    @property
    def log_file_name(self) -> str:
        return str(self.log.path)

    def _set_has_receivers(self, has_receivers: bool) -> None:
        self.row[ns.PUBLICATION_HAS_RECEIVERS] = 1 if has_receivers else 0
        self._update_connected_status()

    def _update_connected_status(self) -> None:
        connected = self.has_receivers or (self.spies_simulate_connection and self.has_working_spies)
        if connected != self.is_connected:
            self.is_connected = connected
            self.update_inputs.invalidate()
            atomics_for_python.put_int32_release(
                self.log.buffer, self.log.metadata_offset + lb.LOG_IS_CONNECTED_OFFSET, 1 if connected else 0)

    # -------------------------------------------------------------------------------------------- spies
    @property
    def has_working_spies(self) -> bool:
        return any(spy.counts_for_flow_control for spy in self.spies)

    def spy_positions(self) -> list[int]:
        """``sub-pos`` of the spies that hold the publisher back (every one but the RESTING)."""
        return [self._get_counter(spy.counter_id) for spy in self.spies if spy.counts_for_flow_control]

    @property
    def join_position(self) -> int:
        """Where a spy joins: what has been sent (Aeron's network publication join position)."""
        return self.sender_position

    @property
    def is_accepting_spies(self) -> bool:
        """ACTIVE, or DRAINING with spies still reading data the sender has not sent (Aeron's rule)."""
        return self.state is State.ACTIVE or (
            self.state is State.DRAINING and self.has_working_spies and self.producer_position() > self.sender_position)

    def add_spy(self, subscription, counter_id: int, join_position: int, now_ns: int) -> None:
        self.spies.append(SubscriberPosition(subscription, counter_id, join_position, time_of_last_update_ns=now_ns))
        self.update_inputs.invalidate()
        self._set_counter(counter_id, join_position)
        self._update_connected_status()

    def remove_spy(self, subscription) -> SubscriberPosition | None:
        for index, spy in enumerate(self.spies):
            if spy.subscription is subscription:
                del self.spies[index]
                self.update_inputs.invalidate()
                self._update_connected_status()
                return spy
        return None

    def check_untethered_spies(self, now_ns: int) -> list[tuple[SubscriberPosition, ImageChange]]:
        """§15.2 for untethered spies while ACTIVE, against the sender position."""
        if self.state is not State.ACTIVE:
            return []
        if not all(spy.tethered for spy in self.spies):
            self.update_inputs.invalidate()  # a tether state may change, and with it who holds the limit back
        changes = check_untethered(self.spies, self.sender_position, self.term_window_length, now_ns,
                                   self.values_buffer)
        if changes:
            self._update_connected_status()
        return changes

    def add_idle_watch(self, watch) -> None:
        """What ``send`` waits for (``agent/idle_watch.py``): a publisher claiming (the tail counters) and
        committing (the frame at the sender position, which a claim made before the watch's snapshot commits
        after it), and the spies that set the pace when they simulate a connection. Status messages and NAKs come
        on the endpoint's socket, which the sender watches. Not the sender position, which ``update_inputs`` also
        lists: only the sender moves it, and watching it ran the sender again after every send for nothing; nor
        spies that do not simulate a connection (a recording of the stream), whose reads never move the sender."""
        buffer = self.log.buffer
        inputs = self.update_inputs
        if self._watch_words_version != inputs.version:
            self._watch_words = tail_counter_addresses(self.log) + (
                [counter_value_address(self.values_buffer, spy.counter_id) for spy in self.spies]
                if self.spies_simulate_connection else [])
            self._watch_words_version = inputs.version
        watch.watch_words((buffer, self.values_buffer), self._watch_words)
        # The slot of the frame at the sender position (terms in order): no frame yet is 0.
        watch.watch_frame_at(buffer, lb.PARTITION_COUNT * self.term_length, self.row,
                             ns.PUBLICATION_SENDER_POSITION * self.row.itemsize)

    def next_timer_ns(self) -> int:
        """When ``send`` next has timed work: a SETUP while no receiver has answered (or one asked), a heartbeat
        while connected and quiet, the connection timeout, a receiver's timeout in flow control, a retransmit's
        delay or linger."""
        due = []
        if not self.has_receivers or self.is_setup_elicited:
            due.append(self.time_of_last_setup_ns + self.setup_timeout_ns)
        if self.has_receivers:
            due.append(self.time_of_last_send_or_heartbeat_ns + self.heartbeat_timeout_ns)
            due.append(self.time_of_last_sm_ns + self.connection_timeout_ns + 1)
            flow_control_due_ns = self.flow_control.next_idle_ns()
            if flow_control_due_ns is not None:
                due.append(flow_control_due_ns)
        due.extend(action.linger_until_ns if action.sent else action.expiry_ns for action in self.retransmits.values())
        return min(due)  # never empty: a SETUP while unconnected, a heartbeat while connected

    def _send_control(self, length: int) -> None:
        self.endpoint.send(self.control[:length])

    # ------------------------------------------------------------------------------------ sender: duty
    def needs_python_send(self, now_ns: int) -> bool:
        """Whether ``send`` has anything to do now that the compiled network cycles do not. While they send this
        publication's data (``data_sent_compiled``), the rest of ``send`` is timed (the heartbeat, the connection
        timeout, a receiver's timeout in min or max flow control) or follows Python's own events (no receiver yet
        or a SETUP asked for, retransmits, draining): until one of those is due, skipping ``send`` changes nothing
        and saves its interpreter cost on every duty cycle."""
        if not self.python_send_is_only_timed():
            return True
        flow_control_due_ns = self.flow_control.next_idle_ns()
        return (now_ns - self.time_of_last_send_or_heartbeat_ns >= self.heartbeat_timeout_ns or
                now_ns - self.time_of_last_sm_ns > self.connection_timeout_ns or
                (flow_control_due_ns is not None and now_ns >= flow_control_due_ns))

    def python_send_is_only_timed(self) -> bool:
        """Whether all ``send`` has to do is timed (``next_timer_ns``): the compiled cycles send the data, and
        nothing of Python's own (a SETUP asked for, retransmits, draining) waits. Spies count only while there is
        no receiver (when they simulate a connection, they set the pace): with receivers, ``send`` never reads
        them (an archive recording a cluster's log through a spy of the leader's publication)."""
        return self.data_sent_compiled and self.state is State.ACTIVE and not self.retransmits and \
            self.has_receivers and not self.is_setup_elicited

    def send(self, now_ns: int, batch: SendBatch) -> int:
        """One sender duty cycle for this publication; returns the bytes sent. ``batch``: the sender's."""
        sender_position = self.sender_position
        term_id = pos.compute_term_id_from_position(sender_position, self.bits, self.initial_term_id)
        term_offset = pos.compute_term_offset_from_position(sender_position, self.bits)
        if (not self.has_receivers or self.is_setup_elicited) and \
                now_ns - self.time_of_last_setup_ns >= self.setup_timeout_ns:
            self._send_setup(now_ns, term_id, term_offset)
            if self.has_receivers:
                self.is_setup_elicited = False
        bytes_sent = self._send_data(now_ns, batch) if self.has_receivers else 0
        if bytes_sent == 0:
            bytes_sent = self._heartbeat_check(now_ns, term_id, term_offset)
            if self.spies_simulate_connection and not self.has_receivers and self.spies:
                # Nobody to send to: what the fastest spy has read counts as sent, so the spies set the pace.
                positions = self.spy_positions()
                if positions and max(positions) > sender_position:
                    self.sender_position = max(positions)
                    self._set_counter(self.snd_pos_counter_id, self.sender_position)
                self._update_sender_limit(self.flow_control.on_idle(now_ns, self.sender_position))
            else:
                self._update_sender_limit(self.flow_control.on_idle(now_ns, self.sender_limit))
        if self.has_receivers and now_ns - self.time_of_last_sm_ns > self.connection_timeout_ns:
            self._set_has_receivers(False)  # no receiver has spoken for the connection timeout: SETUPs again
        if self.retransmits:
            self._process_retransmits(now_ns)
        return bytes_sent

    def _send_setup(self, now_ns: int, term_id: int, term_offset: int) -> None:
        length = uf.encode_setup(self.control, 0, term_offset, self.session_id, self.stream_id,
                                 self.initial_term_id, term_id, self.term_length, self.mtu,
                                 self.channel.ttl or 0, self.setup_flags)
        self._send_control(length)
        self.time_of_last_setup_ns = now_ns

    def _heartbeat_check(self, now_ns: int, term_id: int, term_offset: int) -> int:
        if not self.has_receivers or now_ns - self.time_of_last_send_or_heartbeat_ns < self.heartbeat_timeout_ns:
            return 0
        eos = self.signal_eos and self.end_of_stream_position is not None and \
            self.sender_position >= self.end_of_stream_position
        length = uf.encode_heartbeat(self.control, 0, term_offset, self.session_id, self.stream_id, term_id, eos)
        self._send_control(length)
        self.system_counters.increment(cl.HEARTBEATS_SENT)
        self.time_of_last_send_or_heartbeat_ns = now_ns
        return length

    def _send_data(self, now_ns: int, batch: SendBatch) -> int:
        """Datagrams of whole frames up to the sender limit, at most a batch of them per duty cycle (Aeron sends one
        or two: ours returns to Python between cycles, so a batch keeps a stream from being capped by that).
        Compiled: one ``sendmmsg`` to the endpoint's address, or one to each of its destinations
        (``kernels/publication_sender.py``)."""
        transport = self.endpoint.transport
        sent = int(publication_sender.send_data(self.row, batch.msgs, batch.iovecs, batch.vlen, transport.fd,
                                                *self.endpoint.send_addresses(), now_ns, self.values_buffer,
                                                transport.loss.state.ctypes.data, transport.local_port,
                                                self._collect_result))
        if sent < 0:
            raise OSError(-sent, os.strerror(-sent))
        return sent

    def _update_sender_limit(self, limit: int) -> None:
        if limit != self.sender_limit:
            self.sender_limit = limit
            self._set_counter(self.snd_lmt_counter_id, limit)

    # ------------------------------------------------------------------------- sender: control frames
    def on_status_message(self, consumption_term_id: int, consumption_term_offset: int, receiver_window: int,
                          receiver_id: int, flags: int, now_ns: int) -> None:
        if flags & ul.SM_SEND_SETUP_FLAG:
            # A receiver that has data for us but no image (joined late, lost the SETUP): SETUP again, without
            # stopping the others' data. Its position fields are zero, not a consumption position, so they are
            # no input to flow control or liveness (Aeron's triggerSendSetupFrame).
            self.is_setup_elicited = True
            return
        position = pos.compute_position(consumption_term_id, consumption_term_offset, self.bits,
                                        self.initial_term_id)
        self.receiver_positions[receiver_id] = (position, now_ns)
        row = self.row  # the compiled path takes this receiver's next status messages (publication_sender)
        row[ns.PUBLICATION_SM_RECEIVER_ID], row[ns.PUBLICATION_SM_POSITION] = receiver_id, position
        row[ns.PUBLICATION_SM_RECEIVED_NS] = now_ns
        limit = position + max(0, receiver_window)
        self._update_sender_limit(self.flow_control.on_status_message(limit, receiver_id, self.sender_limit, now_ns))
        self.time_of_last_sm_ns = now_ns
        if not self.has_receivers:
            self._set_has_receivers(True)

    def on_nak(self, term_id: int, term_offset: int, length: int, now_ns: int) -> None:
        """Schedule a retransmit of a range still in the log (delay 0 for unicast), once per linger."""
        position = pos.compute_position(term_id, term_offset, self.bits, self.initial_term_id)
        if length <= 0 or not self.sender_position - self.term_length <= position < self.sender_position:
            return  # already cleaned, or never sent: nothing to resend
        if self.retransmits:
            # Lingers end here too: the compiled network cycles send the data, so the Python send that also ends
            # them may not run before the receiver NAKs again a gap whose retransmit was lost.
            self._process_retransmits(now_ns)
        key = (term_id, term_offset)
        if key in self.retransmits or len(self.retransmits) >= self.max_resend:
            return
        length = min(length, self.term_length - term_offset, self.sender_position - position)
        self.retransmits[key] = _Retransmit(now_ns + self.retransmit_delay_ns,
                                            now_ns + self.retransmit_delay_ns + self.retransmit_linger_ns,
                                            term_id, term_offset, length)
        self._process_retransmits(now_ns)

    def _process_retransmits(self, now_ns: int) -> None:
        for key, action in list(self.retransmits.items()):
            if not action.sent and now_ns >= action.expiry_ns:
                self._resend(action.term_id, action.term_offset, action.length)
                action.sent = True
            elif action.sent and now_ns >= action.linger_until_ns:
                del self.retransmits[key]

    def _resend(self, term_id: int, term_offset: int, length: int) -> None:
        """The frames of the range again (``kernels/publication_sender.resend``): in ``sendmmsg`` batches to the
        endpoint's address or to each of its destinations."""
        batch = self._resend_batch
        transport = self.endpoint.transport
        sent = int(publication_sender.resend(self.row, batch.msgs, batch.iovecs, batch.vlen, transport.fd,
                                             *self.endpoint.send_addresses(), term_id, term_offset, length,
                                             self.values_buffer, transport.loss.state.ctypes.data,
                                             transport.local_port, self._collect_result))
        if sent < 0:
            raise OSError(-sent, os.strerror(-sent))

    def on_rttm(self, echo_timestamp_ns: int, receiver_id: int, is_reply: bool, now_ns: int) -> None:
        """A receiver measuring the round trip: echo its timestamp straight back as a reply."""
        if is_reply:
            return
        length = uf.encode_rttm(self.control, 0, self.session_id, self.stream_id, echo_timestamp_ns, 0,
                                receiver_id, True)
        self._send_control(length)

    # ---------------------------------------------------------------------------------- conductor side
    def update_pub_pos_and_pub_lmt(self) -> int:
        """Every conductor cycle: publish ``pub-pos`` (the sampled producer position); ``pub-lmt`` = the slower of
        ``snd-pos`` and the spies + window while connected, else held at ``snd-pos``."""
        if self.state is not State.ACTIVE:
            return 0
        inputs = self.update_inputs  # skipped while nothing it reads has moved (see ``UpdateInputs``)
        if inputs.unchanged():
            return 0
        inputs.snapshot()
        self._set_counter(self.pub_pos_counter_id, self.producer_position())
        sender_position = self.sender_position
        work = 0
        if self.is_connected:
            min_position = min([sender_position, *self.spy_positions()]) if self.spies else sender_position
            proposed = min_position + self.term_window_length
            if proposed > self.trip_limit:
                self._set_counter(self.pub_lmt_counter_id, proposed)
                self.trip_limit = proposed + self.term_window_length // 8
                work = 1
            self.clean_position = int(clean_buffer_to(self.log.buffer, self.clean_position,
                                                      min_position - self.term_length))
        elif self._get_counter(self.pub_lmt_counter_id) > sender_position:
            self._set_counter(self.pub_lmt_counter_id, sender_position)
            self.trip_limit = sender_position
            work = 1
        return work

    def add_conductor_watch(self, watch) -> None:
        """What ``update_pub_pos_and_pub_lmt`` waits for (``agent/idle_watch.py``). While ACTIVE and connected the
        limit moves only once the slowest of the sender and the spies that hold it back passes ``trip_limit -
        term_window_length``: that one position is watched for reaching it, not every datagram sent or taken
        (``pub-pos``, which the update also samples, then moves at each trip and each conductor timer). Otherwise
        every position the update reads."""
        values = self.values_buffer
        if self.state is State.ACTIVE and self.is_connected:
            # Kept while the trip and the readers (the update's inputs) stay.
            self._slowest_reader.add_to(watch, (self.trip_limit, self.update_inputs.version), self._pick_slowest_reader)
            return
        watch.watch_counter(values, self.snd_pos_counter_id)
        for spy in self.spies:
            watch.watch_counter(values, spy.counter_id)

    def _pick_slowest_reader(self) -> tuple[np.ndarray, int, int]:
        """The slowest of the sender and the spies that hold the limit back, and where it must reach for a trip."""
        values = self.values_buffer
        slowest, buffer, address = self.sender_position, self.row, self._sender_position_address
        for spy in self.spies:
            if spy.counts_for_flow_control:
                position = self._get_counter(spy.counter_id)
                if position < slowest:
                    slowest, buffer, address = position, values, counter_value_address(values, spy.counter_id)
        return buffer, address, self.trip_limit - self.term_window_length + 1

    def on_time_event(self, now_ns: int) -> bool:
        """Timer tick: blocked-publisher check and the lifecycle. Returns True when DONE."""
        if self.state is State.ACTIVE:
            if not self.exclusive:
                self._check_for_blocked_publisher(now_ns)
        elif self.state is State.DRAINING:
            # Draining publishers may still complete claims made before the close: pub-pos keeps following.
            self._set_counter(self.pub_pos_counter_id, self.producer_position())
            if self._is_drained(now_ns):
                self.state = State.LINGER
                self.time_of_linger_ns = now_ns
            else:
                self._check_for_blocked_publisher(now_ns)
        elif self.state is State.LINGER:
            if now_ns - self.time_of_linger_ns >= self.linger_timeout_ns:
                self.state = State.DONE
        return self.state is State.DONE

    def _is_drained(self, now_ns: int) -> bool:
        """Everything sent and every live receiver's SM at the end (a lost tail is NAKed and resent before the
        log goes), or no receiver left to wait for; and every spy (but the resting) has read to the end."""
        end = self.producer_position()
        if self.has_receivers:
            if self.sender_position < end:
                return False
            live = [position for position, seen_ns in self._receiver_positions().values()
                    if now_ns - seen_ns <= self.connection_timeout_ns]
            if any(position < end for position in live):
                return False
        return all(position >= end for position in self.spy_positions())

    def _receiver_positions(self) -> dict[int, tuple[int, int]]:
        """Each receiver's last consumption position and when it came: what Python saw, updated by what the
        compiled path took since (``PUBLICATION_SM_*``)."""
        positions = dict(self.receiver_positions)
        row = self.row
        if row[ns.PUBLICATION_SM_RECEIVED_NS]:
            positions[int(row[ns.PUBLICATION_SM_RECEIVER_ID])] = (int(row[ns.PUBLICATION_SM_POSITION]),
                                                                  int(row[ns.PUBLICATION_SM_RECEIVED_NS]))
        return positions

    def _check_for_blocked_publisher(self, now_ns: int) -> None:
        """§15.1 with the sender position as the consumer: a publisher died mid-claim ahead of the sender."""
        sender_position = self.sender_position
        if sender_position != self.last_sender_position:
            self.last_sender_position = sender_position
            self.time_of_last_sender_position_change_ns = now_ns
            return
        if self.producer_position() > sender_position and \
                now_ns > self.time_of_last_sender_position_change_ns + self.unblock_timeout_ns:
            if unblock(self.log.buffer, sender_position):
                self.system_counters.increment(cl.UNBLOCKED_PUBLICATIONS)
            self.time_of_last_sender_position_change_ns = now_ns

    def close_by_clients(self) -> None:
        producer = self.producer_position()
        if self._get_counter(self.pub_lmt_counter_id) > producer:
            self._set_counter(self.pub_lmt_counter_id, producer)
        atomics_for_python.put_int64_release(
            self.log.buffer, self.log.metadata_offset + lb.LOG_END_OF_STREAM_POSITION_OFFSET, producer)
        self.end_of_stream_position = producer
        self.state = State.DRAINING
