"""The loss generator's decisions in compiled code: which datagrams a UDP endpoint drops on purpose.

The settings come from ``loss-control.dat`` through ``driver/loss_generator.LossGenerator``, which copies them into
a state array (``layout/network_state.py``, ``LOSS_*``) the compiled send and receive paths read per datagram, so
a stream with a loss generator on runs the same compiled path as one without. Random drops use a MINSTD
generator (``kernels/minstd.py``) seeded from the settings' seed; a fixed gap drops, once, each datagram that
carries any of its bytes, as Aeron's ``FixedLossGenerator`` does (the ``gap_dropped`` bitmap, one bit per 32-byte
frame slot of the gap where a dropped datagram's part of it begins), so the retransmit gets through.
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.minstd import next_state
from aeron_numba.kernels.udp_socket import datagram_length
from aeron_numba.layout import frame
from aeron_numba.layout import linux_socket as ls
from aeron_numba.layout import network_state as ns

PPM = 1_000_000


@kernel
def next_random_ppm(state):
    """A pseudo-random draw in [0, PPM) (``state[LOSS_RANDOM_STATE]`` moves on)."""
    x = next_state(state[ns.LOSS_RANDOM_STATE])
    state[ns.LOSS_RANDOM_STATE] = x
    return x % PPM


@kernel
def _blocked_port(state, port):
    for i in range(state[ns.LOSS_BLOCKED_PORT_COUNT]):
        if state[ns.LOSS_BLOCKED_PORTS + i] == port:
            return True
    return False


@kernel
def _is_data(buf, offset, length):
    if length < frame.HEADER_LENGTH:
        return False
    frame_type = atomics.get_int16(buf, offset + frame.TYPE_FIELD_OFFSET) & 0xFFFF
    return frame_type == frame.HDR_TYPE_DATA or frame_type == frame.HDR_TYPE_PAD


@kernel
def _in_gap(state, gap_dropped, buf, offset, length):
    """The first datagram of ``length`` bytes that carries a byte of the gap is dropped; later copies pass. One
    that begins before the gap counts too: with a gap shorter than a datagram, none may begin inside it."""
    gap_length = state[ns.LOSS_GAP_LENGTH]
    if gap_length <= 0 or atomics.get_int32(buf, offset + frame.TERM_ID_FIELD_OFFSET) != state[ns.LOSS_GAP_TERM_ID]:
        return False
    into_gap = atomics.get_int32(buf, offset + frame.TERM_OFFSET_FIELD_OFFSET) - state[ns.LOSS_GAP_TERM_OFFSET]
    if into_gap >= gap_length or into_gap + length <= 0:
        return False
    slot = max(into_gap, 0) // frame.FRAME_ALIGNMENT
    byte, bit = slot >> 3, 1 << (slot & 7)
    if byte >= gap_dropped.shape[0] or gap_dropped[byte] & bit:
        return False
    gap_dropped[byte] |= bit
    return True


@kernel
def should_drop_receive(state, gap_dropped, buf, offset, length, source_port, local_port):
    """Drop the datagram ``buf[offset:offset + length]`` just received on ``local_port`` from ``source_port``?"""
    if state[ns.LOSS_IS_ACTIVE] == 0:
        return False
    drop = _blocked_port(state, source_port) or _blocked_port(state, local_port)
    if not drop:
        if _is_data(buf, offset, length):
            rate = state[ns.LOSS_RECEIVE_DATA_PPM]
            drop = (rate > 0 and next_random_ppm(state) < rate) or _in_gap(state, gap_dropped, buf, offset, length)
        else:
            rate = state[ns.LOSS_RECEIVE_CONTROL_PPM]
            drop = rate > 0 and next_random_ppm(state) < rate
    if drop:
        state[ns.LOSS_DROPPED] += 1
    return drop


@kernel
def should_drop_send(state, buf, offset, length, destination_port, local_port, destination_host):
    """Drop the datagram about to go from ``local_port`` to ``destination_host`` (the int32 of its network-order
    bytes) : ``destination_port``? Only sends are checked against blocked hosts (see driver/loss_generator.py)."""
    if state[ns.LOSS_IS_ACTIVE] == 0:
        return False
    drop = _blocked_port(state, destination_port) or _blocked_port(state, local_port)
    if not drop:
        for i in range(state[ns.LOSS_BLOCKED_HOST_COUNT]):
            if state[ns.LOSS_BLOCKED_HOSTS + i] == destination_host:
                drop = True
    if not drop:
        rate = state[ns.LOSS_SEND_DATA_PPM] if _is_data(buf, offset, length) else state[ns.LOSS_SEND_CONTROL_PPM]
        drop = rate > 0 and next_random_ppm(state) < rate
    if drop:
        state[ns.LOSS_DROPPED] += 1
    return drop


@kernel
def drops_received(state, gap_dropped, msgs, names, buffer, slot_length, index, local_port):
    """``should_drop_receive`` for datagram ``index`` of a ``ReceiveBatch`` (its source port from ``names``)."""
    if state[ns.LOSS_IS_ACTIVE] == 0:
        return False
    name = index * ls.SOCKADDR_IN_LENGTH + ls.SOCKADDR_IN_PORT_OFFSET
    source_port = (names[name] << 8) | names[name + 1]
    return should_drop_receive(state, gap_dropped, buffer, index * slot_length, datagram_length(msgs, index),
                               source_port, local_port)


@kernel
def drops_sent(state, buf, offset, length, sockaddr, local_port):
    """``should_drop_send`` for a datagram to the ``sockaddr_in`` in ``sockaddr`` (16 bytes)."""
    if state[ns.LOSS_IS_ACTIVE] == 0:
        return False
    port = (sockaddr[ls.SOCKADDR_IN_PORT_OFFSET] << 8) | sockaddr[ls.SOCKADDR_IN_PORT_OFFSET + 1]
    return should_drop_send(state, buf, offset, length, port, local_port,
                            atomics.get_int32(sockaddr, ls.SOCKADDR_IN_ADDRESS_OFFSET))


@kernel
def keep_received(state, gap_dropped, msgs, names, buffer, slot_length, count, local_port, keep):
    """The indices of the ``count`` datagrams of a batch the loss generator lets through, in ``keep[1:]`` with
    their count in ``keep[0]``."""
    kept = 0
    for i in range(count):
        if not drops_received(state, gap_dropped, msgs, names, buffer, slot_length, i, local_port):
            keep[1 + kept] = i
            kept += 1
    keep[0] = kept
