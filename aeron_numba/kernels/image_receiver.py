"""The receiver's per-datagram work in compiled code: a batch read off a socket, sorted into its network images.

``dispatch_batch`` takes the datagrams ``udp_socket.receive_datagrams`` just read from one receive endpoint's
socket. What the socket's loss generator drops goes no further (``kernels/loss_generator.py``); each other one is
validated (``classify_datagram``: anything malformed is counted as an invalid packet and dropped, the driver never
dies on network input); DATA and PAD datagrams of a session with an active image of this endpoint go straight into
that image's log (``insert_packet``); the rest (SETUP, RTT measurements, data of a session the driver has no image
for yet, data of a multi-destination image through any but its one connection) is left for the Python dispatcher,
whose decisions are per image, not per message: the kernel lists their batch indices in ``slow``.

``insert_packet`` is the one implementation of Aeron's ``PublicationImage.insertPacket`` here: the Python path
calls it too. Images are found by the addresses of their state rows (``layout/network_state.py``), and their logs
by the addresses the rows hold.
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels import position as pos
from aeron_numba.kernels import loss_detector as ld
from aeron_numba.kernels import term_rebuilder
from aeron_numba.kernels.feedback_delay import next_image_nak_delay_ns
from aeron_numba.kernels.loss_generator import drops_received
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.udp_frames import classify_datagram, encode_status_message
from aeron_numba.kernels.udp_socket import address_of, datagram_length, send_datagram_to
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns

#: ``slow[0]`` after ``dispatch_batch``: how many batch indices follow it.
SLOW_COUNT = 0
#: ``receiver_work`` results: ``result[WORK_DONE]``, ``result[WORK_FLAGS]`` (``NAK_DUE``, ``SM_PENDING``) and
#: ``result[WORK_SM_LENGTH]`` (the status message left in ``scratch`` when ``SM_PENDING``).
WORK_DONE, WORK_FLAGS, WORK_SM_LENGTH = 0, 1, 2
WORK_RESULT_LENGTH = 3
NAK_DUE = 1  # the loss detector's NAK is due (its range in the image's loss state): the caller sends it
SM_PENDING = 2  # a status message is due and encoded in scratch: the caller sends it to every connection


@kernel
def _propose_hwm(row, values, position):
    if position > row[ns.IMAGE_HWM_POSITION]:
        row[ns.IMAGE_HWM_POSITION] = position
        ck.set_counter_value(values, row[ns.IMAGE_RCV_HWM_COUNTER_ID], position)


@kernel
def set_end_of_stream(row, log, position):
    """Once, as Aeron: the log's metadata tells the subscribers where the stream ends."""
    if row[ns.IMAGE_END_OF_STREAM_POSITION] == ns.NO_POSITION:
        row[ns.IMAGE_END_OF_STREAM_POSITION] = position
        atomics.put_int64_release(log, row[ns.IMAGE_METADATA_OFFSET] + lb.LOG_END_OF_STREAM_POSITION_OFFSET,
                                  position)


@kernel
def insert_packet(row, log, packet, packet_offset, length, now_ns, values, end_of_stream_ends_image):
    """A validated DATA/PAD datagram (one or more frames) of the image ``row`` at ``packet[packet_offset:]``.

    Data goes into the log only inside the window the last status message granted (before it: an under-run,
    past it: an over-run, each counted and dropped). A heartbeat (frame length 0) moves the high-water mark; one
    flagged end of stream ends the image's stream when ``end_of_stream_ends_image`` (an ordinary endpoint; a
    multi-destination image waits for every connection: its caller decides). Returns the bytes inserted.
    """
    if row[ns.IMAGE_IS_ACTIVE] == 0:
        return 0
    bits = row[ns.IMAGE_POSITION_BITS]
    term_id = atomics.get_int32(packet, packet_offset + frame.TERM_ID_FIELD_OFFSET)
    term_offset = atomics.get_int32(packet, packet_offset + frame.TERM_OFFSET_FIELD_OFFSET)
    position = pos.compute_position(term_id, term_offset, bits, row[ns.IMAGE_INITIAL_TERM_ID])
    row[ns.IMAGE_TIME_OF_LAST_PACKET_NS] = now_ns
    if atomics.get_int32(packet, packet_offset + frame.FRAME_LENGTH_FIELD_OFFSET) == 0:
        ck.get_and_add_counter_value(values, cl.HEARTBEATS_RECEIVED, 1)
        if end_of_stream_ends_image and atomics.get_int8(packet, packet_offset + frame.FLAGS_FIELD_OFFSET) & \
                frame.EOS_FLAG:
            set_end_of_stream(row, log, position)
        _propose_hwm(row, values, position)
        return 0
    window_start = row[ns.IMAGE_LAST_SM_POSITION]
    if position < window_start:  # before what we acknowledged: a late duplicate
        ck.get_and_add_counter_value(values, cl.FLOW_CONTROL_UNDER_RUNS, 1)
        return 0
    if position + length > window_start + row[ns.IMAGE_LAST_SM_WINDOW]:  # beyond the window we granted
        ck.get_and_add_counter_value(values, cl.FLOW_CONTROL_OVER_RUNS, 1)
        return 0
    term_length = row[ns.IMAGE_TERM_LENGTH]
    term_base = pos.index_by_position(position, bits) * term_length
    if term_rebuilder.insert(log[term_base:term_base + term_length], term_offset, packet, packet_offset,
                             length) < 0:
        ck.get_and_add_counter_value(values, cl.INVALID_PACKETS, 1)
        return 0
    _propose_hwm(row, values, position + length)
    return length


@kernel
def find_image(row_addresses, row_count, endpoint_id, session_id, stream_id):
    """Index in ``row_addresses`` of the image of ``(session_id, stream_id)`` on endpoint ``endpoint_id``, or -1."""
    for i in range(row_count):
        row = int64s_at(row_addresses[i], ns.IMAGE_ROW_LENGTH)
        if row[ns.IMAGE_SESSION_ID] == session_id and row[ns.IMAGE_STREAM_ID] == stream_id and \
                row[ns.IMAGE_ENDPOINT_ID] == endpoint_id:
            return i
    return -1


@kernel
def _takes_from(row, socket_fd, buffer, offset):
    """Whether the compiled dispatcher inserts this DATA/PAD datagram of image ``row`` read from ``socket_fd``:
    always on an ordinary endpoint; on a multi-destination one only through the image's one connection, and not an
    end of stream, which ends the image only once every connection has sent it (Python keeps each one's)."""
    data_fd = row[ns.IMAGE_DATA_FD]
    if data_fd == ns.ANY_SOCKET:
        return True
    if data_fd != socket_fd:
        return False
    return not (atomics.get_int32(buffer, offset + frame.FRAME_LENGTH_FIELD_OFFSET) == 0 and
                atomics.get_int8(buffer, offset + frame.FLAGS_FIELD_OFFSET) & frame.EOS_FLAG)


@kernel
def dispatch_batch(msgs, names, buffer, slot_length, count, endpoint_id, socket_fd, row_addresses, row_count, values,
                   now_ns, loss_state, gap_dropped, local_port, slow):
    """Sort the ``count`` datagrams of a ``ReceiveBatch`` (``msgs``, ``names``, ``buffer``, ``slot_length``) read
    from socket ``socket_fd`` of endpoint ``endpoint_id`` (bound to ``local_port``). What its loss generator
    (``loss_state``, ``gap_dropped``) drops goes no further; invalid ones are counted and dropped; data of an image
    in ``row_addresses[:row_count]`` is inserted when the image takes it from this socket (``_takes_from``); every
    other index goes to ``slow[1:]`` with its count in ``slow[0]``. Returns the bytes inserted."""
    inserted = 0
    slow_count = 0
    for i in range(count):
        if drops_received(loss_state, gap_dropped, msgs, names, buffer, slot_length, i, local_port):
            continue
        offset = i * slot_length
        length = datagram_length(msgs, i)
        frame_type = classify_datagram(buffer, offset, length) if length >= 0 else -1
        if frame_type < 0:
            ck.get_and_add_counter_value(values, cl.INVALID_PACKETS, 1)
            continue
        index = -1
        if frame_type == frame.HDR_TYPE_DATA or frame_type == frame.HDR_TYPE_PAD:
            index = find_image(row_addresses, row_count, endpoint_id,
                               atomics.get_int32(buffer, offset + frame.SESSION_ID_FIELD_OFFSET),
                               atomics.get_int32(buffer, offset + frame.STREAM_ID_FIELD_OFFSET))
        if index < 0:
            slow[1 + slow_count] = i
            slow_count += 1
            continue
        row = int64s_at(row_addresses[index], ns.IMAGE_ROW_LENGTH)
        if not _takes_from(row, socket_fd, buffer, offset):
            slow[1 + slow_count] = i
            slow_count += 1
            continue
        ck.get_and_add_counter_value(values, cl.BYTES_RECEIVED, length)
        log = bytes_at(row[ns.IMAGE_LOG_ADDRESS], row[ns.IMAGE_LOG_LENGTH])
        inserted += insert_packet(row, log, buffer, offset, length, now_ns, values, True)
    slow[SLOW_COUNT] = slow_count
    return inserted


@kernel
def _min_subscriber_position(row, values):
    """The slowest subscriber's position, or the rebuild position when there is none."""
    count = row[ns.IMAGE_SUBSCRIBER_COUNT]
    if count == 0:
        return row[ns.IMAGE_REBUILD_POSITION]
    ids = int64s_at(row[ns.IMAGE_SUBSCRIBER_IDS_ADDRESS], count)
    position = ck.get_counter_value(values, ids[0])
    for i in range(1, count):
        position = min(position, ck.get_counter_value(values, ids[i]))
    return position


@kernel
def receiver_work(row, log, values, now_ns, scratch, result):
    """The receiver's duty for one active image (Aeron's ``PublicationImage`` receiver side), after its data:

    * loss detection from the rebuild position to the high-water mark (``loss_detector_scan``): the rebuild
      position (``rcv-pos``) moves over what is complete; a NAK that falls due is left to the caller
      (``NAK_DUE``: it reports the loss, and NAKs or, for ``reliable=false``, fills the gap);
    * a status message when the slowest subscriber has consumed a quarter of the window since the last one, every
      status message timeout, when the stream's end has been consumed, or when the window changed. An image with
      ``IMAGE_COMPILED_WORK`` sends it here (and keeps the log's active transport count); any other gets it in
      ``scratch`` (``SM_PENDING``) for its connections.
    """
    result[WORK_DONE], result[WORK_FLAGS], result[WORK_SM_LENGTH] = 0, 0, 0
    work = 0
    flags = 0
    bits = row[ns.IMAGE_POSITION_BITS]
    initial_term_id = row[ns.IMAGE_INITIAL_TERM_ID]
    rebuild = row[ns.IMAGE_REBUILD_POSITION]
    if row[ns.IMAGE_HWM_POSITION] > rebuild:
        if row[ns.IMAGE_NAK_GROUP_SIZE] > 0:  # group semantics: a fresh backoff, used if the scan (re)arms a NAK
            row[ns.IMAGE_NAK_DELAY_NS] = row[ns.IMAGE_NAK_RETRY_DELAY_NS] = next_image_nak_delay_ns(row)
        term_length = row[ns.IMAGE_TERM_LENGTH]
        term_base = pos.index_by_position(rebuild, bits) * term_length
        loss_state = int64s_at(row[ns.IMAGE_LOSS_STATE_ADDRESS], ld.LOSS_STATE_LENGTH)
        scanned, scan_flags = ld.loss_detector_scan(log[term_base:term_base + term_length], rebuild,
                                                    row[ns.IMAGE_HWM_POSITION], now_ns, loss_state, initial_term_id,
                                                    row[ns.IMAGE_NAK_DELAY_NS], row[ns.IMAGE_NAK_RETRY_DELAY_NS])
        if scanned > rebuild:
            rebuild = scanned
            row[ns.IMAGE_REBUILD_POSITION] = rebuild
            ck.set_counter_value(values, row[ns.IMAGE_RCV_POS_COUNTER_ID], rebuild)
            work = 1
        if scan_flags & ld.SCAN_CORRUPT:
            ck.get_and_add_counter_value(values, cl.INVALID_PACKETS, 1)
        if scan_flags & ld.SEND_NAK:
            flags |= NAK_DUE
            work = 1
    position = min(_min_subscriber_position(row, values), rebuild)
    window = row[ns.IMAGE_RECEIVER_WINDOW]
    last_position = row[ns.IMAGE_LAST_SM_POSITION]
    end_of_stream = row[ns.IMAGE_END_OF_STREAM_POSITION]
    due = now_ns - row[ns.IMAGE_TIME_OF_LAST_SM_NS] >= row[ns.IMAGE_STATUS_MESSAGE_TIMEOUT_NS]
    moved = position - last_position >= window // 4
    # Consumed to the end of stream: tell the sender now, so its draining publication can go.
    at_end = end_of_stream != ns.NO_POSITION and position >= end_of_stream > last_position
    if due or moved or at_end or window != row[ns.IMAGE_LAST_SM_WINDOW]:
        length = encode_status_message(scratch, 0, row[ns.IMAGE_SESSION_ID], row[ns.IMAGE_STREAM_ID],
                                       pos.compute_term_id_from_position(position, bits, initial_term_id),
                                       pos.compute_term_offset_from_position(position, bits), window,
                                       row[ns.IMAGE_RECEIVER_ID], 0, False, 0)
        row[ns.IMAGE_LAST_SM_POSITION], row[ns.IMAGE_LAST_SM_WINDOW] = position, window
        row[ns.IMAGE_TIME_OF_LAST_SM_NS] = now_ns
        work += 1
        if row[ns.IMAGE_COMPILED_WORK] == 1:
            connection_timeout = row[ns.IMAGE_CONNECTION_TIMEOUT_NS]
            if connection_timeout == 0 or now_ns < row[ns.IMAGE_TIME_OF_LAST_PACKET_NS] + connection_timeout:
                # Lost if the network refuses it (a full buffer): the next one is due within the timeout anyway.
                send_datagram_to(row[ns.IMAGE_CONTROL_FD], address_of(scratch), length,
                                 row[ns.IMAGE_CONTROL_SOCKADDR_ADDRESS])
                ck.get_and_add_counter_value(values, cl.STATUS_MESSAGES_SENT, 1)
                ck.get_and_add_counter_value(values, cl.BYTES_SENT, length)
            alive = 1 if now_ns < row[ns.IMAGE_TIME_OF_LAST_PACKET_NS] + row[ns.IMAGE_IMAGE_LIVENESS_TIMEOUT_NS] else 0
            if alive != row[ns.IMAGE_ACTIVE_TRANSPORT_COUNT]:
                row[ns.IMAGE_ACTIVE_TRANSPORT_COUNT] = alive
                atomics.put_int32_release(log, row[ns.IMAGE_METADATA_OFFSET] + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET,
                                          alive)
        else:
            flags |= SM_PENDING
            result[WORK_SM_LENGTH] = length
    result[WORK_DONE], result[WORK_FLAGS] = work, flags
