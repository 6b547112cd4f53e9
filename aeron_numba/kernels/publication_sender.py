"""The sender's per-datagram work in compiled code: a network publication's new frames, batched into datagrams.

``collect_data`` walks the log from the sender position (``term_scanner``: whole frames, at most an MTU per
datagram, up to the sender limit flow control set) and writes each datagram into a ``SendBatch`` as a pointer
into the term and a length: no copy. ``send_data`` then hands the batch to the kernel in one ``sendmmsg`` when the
publication's endpoint sends to one unicast address and its loss generator is off; otherwise the Python endpoint
sends each entry (fan-out to several destinations, loss decisions). Either way the scan is this one.
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels import position as pos
from aeron_numba.kernels import term_scanner
from aeron_numba.kernels.memory import bytes_at
from aeron_numba.kernels.term_appender import producer_position
from aeron_numba.kernels.udp_socket import TRANSIENT_ERRORS, send_datagrams, set_send_entry
from aeron_numba.layout import counters as cl
from aeron_numba.layout import linux_socket as ls
from aeron_numba.layout import network_state as ns

#: ``collect_data``'s second result, in ``result[COLLECTED]``: the batch entries it filled.
COLLECTED = 0


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
def send_batch(fd, msgs, count, values):
    """``sendmmsg`` the first ``count`` entries of a ``SendBatch``. A datagram the network refuses (a transient
    error: full buffer, port unreachable) is lost, as UDP loses it, and the rest still go. Returns 0, or
    ``-errno`` for an error of the socket itself."""
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
def send_data(row, msgs, iovecs, vlen, fd, sockaddr_address, now_ns, values, result):
    """``collect_data`` and ``send_batch`` in one call, for a publication whose endpoint sends to one address with
    no loss generator. Returns the bytes sent, or ``-errno`` for an error of the socket itself."""
    log = bytes_at(row[ns.PUBLICATION_LOG_ADDRESS], row[ns.PUBLICATION_LOG_LENGTH])
    collected = collect_data(row, log, msgs, iovecs, vlen, sockaddr_address, now_ns, values, result)
    if collected > 0:
        status = send_batch(fd, msgs, result[COLLECTED], values)
        if status < 0:
            return status
        ck.get_and_add_counter_value(values, cl.BYTES_SENT, collected)
    return collected
