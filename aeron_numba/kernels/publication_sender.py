"""The sender's per-datagram work in compiled code: a network publication's new frames, batched into datagrams.

``collect_data`` walks the log from the sender position (``term_scanner``: whole frames, at most an MTU per
datagram, up to the sender limit flow control set) and writes each datagram into a ``SendBatch`` as a pointer
into the term and a length: no copy. ``send_data`` then hands the batch to the kernel in one ``sendmmsg`` (less
what the socket's loss generator drops) when the publication's endpoint sends to one unicast address, or in one
``sendmmsg`` per destination of a multi-destination-cast endpoint (its destination table: the scan is done once).

``take_status_messages`` handles what comes back in compiled code where Python has nothing to decide: a status
message from the receiver a unicast publication already knows (the one whose last status message Python saw,
``PUBLICATION_SM_RECEIVER_ID``) moves its sender limit as ``UnicastFlowControl`` does and records the receiver's
position and time. Anything else (a new receiver, a SETUP request, NAKs, RTT, errors, other flow control) is left
to Python.
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels import position as pos
from aeron_numba.kernels import term_scanner
from aeron_numba.kernels.loss_generator import drops_received, drops_sent
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.term_appender import producer_position
from aeron_numba.kernels.udp_frames import classify_datagram
from aeron_numba.kernels.udp_socket import (TRANSIENT_ERRORS, address_of, datagram_length, send_datagrams,
                                            set_send_entry)
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import linux_socket as ls
from aeron_numba.layout import network_state as ns
from aeron_numba.layout import udp_frames as ul

#: ``collect_data``'s second result, in ``result[COLLECTED]``: the batch entries it filled.
COLLECTED = 0
#: Columns of a sender's table of fast publications: its state row's address, its socket, where it sends (a
#: ``sockaddr_in``'s address, 0 for a multi-destination endpoint), which of the sender's control sockets (send
#: endpoints) it answers to, and a multi-destination endpoint's destination table (0 for one address).
TABLE_ROW, TABLE_FD, TABLE_SOCKADDR, TABLE_CONTROL, TABLE_DESTINATIONS = 0, 1, 2, 3, 4
TABLE_COLUMNS = 5
#: A multi-destination endpoint's destination table (``SendChannelEndpoint.destination_table``, int64): how many
#: destinations, then the address of each one's ``sockaddr_in``.
DESTINATION_COUNT = 0
FIRST_DESTINATION = 1


@kernel
def collect_data(row, log, msgs, iovecs, vlen, sockaddr_address, now_ns, values, result):
    """Fill up to ``vlen`` entries of a ``SendBatch`` with the datagrams due from the publication ``row`` and move
    its sender position past them. Returns the bytes collected; ``result[COLLECTED]`` = entries filled.

    Nothing is due when the window (sender limit - sender position) is closed: then a producer ahead of the
    sender is counted as back pressure (``snd-bpe``)."""
    result[COLLECTED] = 0
    sender_position = row[ns.PUBLICATION_SENDER_POSITION]
    window = row[ns.PUBLICATION_SENDER_LIMIT] - sender_position
    if window <= 0:
        if producer_position(log) > sender_position:
            ck.get_and_add_counter_value(values, row[ns.PUBLICATION_SND_BPE_COUNTER_ID], 1)
        return 0
    bits = row[ns.PUBLICATION_POSITION_BITS]
    term_length = row[ns.PUBLICATION_TERM_LENGTH]
    mtu = row[ns.PUBLICATION_MTU]
    log_address = row[ns.PUBLICATION_LOG_ADDRESS]
    term_offset = pos.compute_term_offset_from_position(sender_position, bits)
    collected = 0
    entries = 0
    while entries < vlen and window > 0:
        term_base = pos.index_by_position(sender_position, bits) * term_length
        packed = term_scanner.scan_for_availability(log, term_base, term_offset, min(window, mtu), term_length)
        available = term_scanner.available_of(packed)
        if available <= 0:
            break
        set_send_entry(msgs, iovecs, entries, log_address + term_base + term_offset, available, sockaddr_address)
        entries += 1
        step = available + term_scanner.padding_of(packed)
        collected += available
        sender_position += step
        window -= step
        term_offset += step
        if term_offset >= term_length:  # rotated into the next term
            term_offset = 0
    if entries:
        row[ns.PUBLICATION_SENDER_POSITION] = sender_position
        ck.set_counter_value(values, row[ns.PUBLICATION_SND_POS_COUNTER_ID], sender_position)
        row[ns.PUBLICATION_TIME_OF_LAST_SEND_OR_HEARTBEAT_NS] = now_ns
    result[COLLECTED] = entries
    return collected


@kernel
def send_batch(fd, msgs, iovecs, count, values, loss_state, sockaddr, local_port):
    """``sendmmsg`` the first ``count`` entries of a ``SendBatch``, all to ``sockaddr``, but those the socket's loss
    generator drops. A datagram the network refuses (a transient error: full buffer, port unreachable) is lost, as
    UDP loses it, and the rest still go. Returns 0, or ``-errno`` for an error of the socket itself."""
    if loss_state[ns.LOSS_IS_ACTIVE] != 0:  # keep the entries it lets through, in order
        kept = 0
        for i in range(count):
            address = atomics.get_int64(iovecs, i * ls.IOVEC_LENGTH + ls.IOVEC_BASE_OFFSET)
            length = atomics.get_int64(iovecs, i * ls.IOVEC_LENGTH + ls.IOVEC_LENGTH_OFFSET)
            if not drops_sent(loss_state, bytes_at(address, length), 0, length, sockaddr, local_port):
                set_send_entry(msgs, iovecs, kept, address, length, address_of(sockaddr))
                kept += 1
        count = kept
    first = 0
    while first < count:
        sent = send_datagrams(fd, msgs[first * ls.MMSGHDR_LENGTH:], count - first)
        if sent > 0:
            first += sent
            continue
        if sent == 0:
            break
        error = -sent
        transient = False
        for code in TRANSIENT_ERRORS:
            if error == code:
                transient = True
        if not transient:
            return sent
        first += 1  # this one is lost
    return 0


@kernel
def send_to_each(fd, msgs, iovecs, count, values, loss_state, destinations, local_port):
    """``send_batch`` of the first ``count`` entries of a ``SendBatch`` to every destination of a destination table
    (``DESTINATION_COUNT``, then ``sockaddr_in`` addresses), as Aeron's multi-destination-cast sends each datagram
    to each destination. Returns 0, or ``-errno`` for an error of the socket itself."""
    lossy = loss_state[ns.LOSS_IS_ACTIVE] != 0
    for d in range(destinations[DESTINATION_COUNT]):
        sockaddr_address = destinations[FIRST_DESTINATION + d]
        sockaddr = bytes_at(sockaddr_address, ls.SOCKADDR_IN_LENGTH)
        for i in range(count):
            set_send_entry(msgs, iovecs, i, atomics.get_int64(iovecs, i * ls.IOVEC_LENGTH + ls.IOVEC_BASE_OFFSET),
                           atomics.get_int64(iovecs, i * ls.IOVEC_LENGTH + ls.IOVEC_LENGTH_OFFSET), sockaddr_address)
        if not lossy:
            status = send_batch(fd, msgs, iovecs, count, values, loss_state, sockaddr, local_port)
            if status < 0:
                return status
            continue
        # Entry by entry: send_batch packs the kept entries over the dropped ones, and the next destination needs
        # every entry as collected.
        for i in range(count):
            status = send_batch(fd, msgs[i * ls.MMSGHDR_LENGTH:], iovecs[i * ls.IOVEC_LENGTH:], 1, values,
                                loss_state, sockaddr, local_port)
            if status < 0:
                return status
    return 0


@kernel
def _send_collected(fd, msgs, iovecs, count, values, loss_state, sockaddr_address, destinations_address,
                    local_port):
    """The collected entries to the one address, or to each destination of the table at ``destinations_address``
    when that is not 0."""
    if destinations_address != 0:
        destinations = int64s_at(destinations_address, FIRST_DESTINATION)
        return send_to_each(fd, msgs, iovecs, count, values, loss_state,
                            int64s_at(destinations_address, FIRST_DESTINATION + destinations[DESTINATION_COUNT]),
                            local_port)
    return send_batch(fd, msgs, iovecs, count, values, loss_state, bytes_at(sockaddr_address, ls.SOCKADDR_IN_LENGTH),
                      local_port)


@kernel
def send_data(row, msgs, iovecs, vlen, fd, sockaddr_address, destinations_address, now_ns, values,
              loss_state_address, local_port, result):
    """``collect_data`` and the sends in one call: to ``sockaddr_address``, or to each destination of the table at
    ``destinations_address`` when that is not 0. Returns the bytes collected (sent, or dropped by the loss
    generator), or ``-errno`` for an error of the socket itself."""
    log = bytes_at(row[ns.PUBLICATION_LOG_ADDRESS], row[ns.PUBLICATION_LOG_LENGTH])
    collected = collect_data(row, log, msgs, iovecs, vlen, sockaddr_address, now_ns, values, result)
    if collected > 0:
        status = _send_collected(fd, msgs, iovecs, result[COLLECTED], values,
                                 int64s_at(loss_state_address, ns.LOSS_STATE_LENGTH), sockaddr_address,
                                 destinations_address, local_port)
        if status < 0:
            return status
        ck.get_and_add_counter_value(values, cl.BYTES_SENT, collected)
    return collected


@kernel
def take_status_messages(msgs, names, buffer, slot_length, count, publications, publication_count, control_index,
                         now_ns, values, loss_state, gap_dropped, local_port, slow):
    """Sort the ``count`` datagrams control socket ``control_index`` (bound to ``local_port``) returned (a
    ``ReceiveBatch``): what its loss generator drops goes no further; status messages the compiled path may take
    (see the module docstring) for the publications of ``publications`` (a table of ``TABLE_COLUMNS``) that answer
    to that socket are taken; every other index goes to ``slow[1:]``, with its count in ``slow[0]``. Returns the
    messages taken."""
    taken = 0
    slow_count = 0
    for i in range(count):
        if drops_received(loss_state, gap_dropped, msgs, names, buffer, slot_length, i, local_port):
            continue
        offset = i * slot_length
        length = datagram_length(msgs, i)
        handled = False
        if length >= 0 and classify_datagram(buffer, offset, length) == frame.HDR_TYPE_SM and \
                atomics.get_int8(buffer, offset + frame.FLAGS_FIELD_OFFSET) & ul.SM_SEND_SETUP_FLAG == 0:
            session_id = atomics.get_int32(buffer, offset + ul.CONTROL_SESSION_ID_OFFSET)
            stream_id = atomics.get_int32(buffer, offset + ul.CONTROL_STREAM_ID_OFFSET)
            receiver_id = atomics.get_int64(buffer, offset + ul.SM_RECEIVER_ID_OFFSET)
            for p in range(publication_count):
                if publications[p, TABLE_CONTROL] != control_index:
                    continue
                row = int64s_at(publications[p, TABLE_ROW], ns.PUBLICATION_ROW_LENGTH)
                if row[ns.PUBLICATION_SESSION_ID] != session_id or row[ns.PUBLICATION_STREAM_ID] != stream_id:
                    continue
                if row[ns.PUBLICATION_UNICAST_FLOW_CONTROL] == 1 and row[ns.PUBLICATION_HAS_RECEIVERS] == 1 and \
                        row[ns.PUBLICATION_SM_RECEIVED_NS] != 0 and row[ns.PUBLICATION_SM_RECEIVER_ID] == receiver_id:
                    _on_status_message(row, buffer, offset, now_ns, values)
                    ck.get_and_add_counter_value(values, cl.BYTES_RECEIVED, length)
                    ck.get_and_add_counter_value(values, cl.STATUS_MESSAGES_RECEIVED, 1)
                    handled = True
                break
        if handled:
            taken += 1
        else:
            slow[1 + slow_count] = i
            slow_count += 1
    slow[0] = slow_count
    return taken


@kernel
def _on_status_message(row, buffer, offset, now_ns, values):
    position = pos.compute_position(atomics.get_int32(buffer, offset + ul.SM_CONSUMPTION_TERM_ID_OFFSET),
                                    atomics.get_int32(buffer, offset + ul.SM_CONSUMPTION_TERM_OFFSET_OFFSET),
                                    row[ns.PUBLICATION_POSITION_BITS], row[ns.PUBLICATION_INITIAL_TERM_ID])
    row[ns.PUBLICATION_SM_POSITION] = position
    row[ns.PUBLICATION_SM_RECEIVED_NS] = now_ns
    row[ns.PUBLICATION_TIME_OF_LAST_SM_NS] = now_ns
    limit = position + max(0, atomics.get_int32(buffer, offset + ul.SM_RECEIVER_WINDOW_OFFSET))
    if limit > row[ns.PUBLICATION_SENDER_LIMIT]:  # UnicastFlowControl: never backwards
        row[ns.PUBLICATION_SENDER_LIMIT] = limit
        ck.set_counter_value(values, row[ns.PUBLICATION_SND_LMT_COUNTER_ID], limit)


#: ``collect_resend``'s third result, in ``result[CONSUMED]``: bytes of the range it walked (frames and padding).
CONSUMED = 1


@kernel
def collect_resend(row, log, msgs, iovecs, vlen, sockaddr_address, term_id, term_offset, length, values, result):
    """Fill up to ``vlen`` entries of a ``SendBatch`` with the datagrams of a retransmit: the frames of the range
    ``length`` bytes from ``term_offset`` of term ``term_id`` (Aeron's ``RetransmitHandler`` resend), counted as
    retransmits. Returns the bytes collected; ``result[COLLECTED]`` = entries, ``result[CONSUMED]`` = bytes of the
    range walked (less than ``length`` when the batch filled up: call again from there)."""
    result[COLLECTED] = 0
    result[CONSUMED] = 0
    bits = row[ns.PUBLICATION_POSITION_BITS]
    term_length = row[ns.PUBLICATION_TERM_LENGTH]
    position = pos.compute_position(term_id, term_offset, bits, row[ns.PUBLICATION_INITIAL_TERM_ID])
    if position < row[ns.PUBLICATION_SENDER_POSITION] - term_length:
        return 0  # cleaned already
    term_base = pos.index_by_position(position, bits) * term_length
    mtu = row[ns.PUBLICATION_MTU]
    log_address = row[ns.PUBLICATION_LOG_ADDRESS]
    collected = 0
    entries = 0
    offset = term_offset
    remaining = length
    while remaining > 0 and entries < vlen:
        packed = term_scanner.scan_for_availability(log, term_base, offset, min(remaining, mtu), term_length)
        available = term_scanner.available_of(packed)
        if available <= 0:
            break
        set_send_entry(msgs, iovecs, entries, log_address + term_base + offset, available, sockaddr_address)
        entries += 1
        collected += available
        step = available + term_scanner.padding_of(packed)
        offset += step
        remaining -= step
    if entries:
        ck.get_and_add_counter_value(values, cl.RETRANSMITS_SENT, entries)
        ck.get_and_add_counter_value(values, cl.RETRANSMITTED_BYTES, collected)
    result[COLLECTED] = entries
    result[CONSUMED] = length - remaining if remaining > 0 else length
    return collected


@kernel
def resend(row, msgs, iovecs, vlen, fd, sockaddr_address, destinations_address, term_id, term_offset, length, values,
           loss_state_address, local_port, result):
    """A retransmit, in batches of ``sendmmsg`` (``collect_resend``, then the sends of ``send_data``: to one address
    or to each destination of a table). Returns the bytes sent, or ``-errno`` for an error of the socket itself."""
    log = bytes_at(row[ns.PUBLICATION_LOG_ADDRESS], row[ns.PUBLICATION_LOG_LENGTH])
    loss_state = int64s_at(loss_state_address, ns.LOSS_STATE_LENGTH)
    sent = 0
    while length > 0:
        collected = collect_resend(row, log, msgs, iovecs, vlen, sockaddr_address, term_id, term_offset, length,
                                   values, result)
        if collected <= 0:
            break
        status = _send_collected(fd, msgs, iovecs, result[COLLECTED], values, loss_state, sockaddr_address,
                                 destinations_address, local_port)
        if status < 0:
            return status
        ck.get_and_add_counter_value(values, cl.BYTES_SENT, collected)
        sent += collected
        term_offset += result[CONSUMED]
        length -= result[CONSUMED]
    return sent
