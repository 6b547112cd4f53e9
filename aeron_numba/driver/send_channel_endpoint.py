"""The socket a UDP channel's publications send from (spec/transport.md §16).

One per canonical channel, shared by every network publication on it. Data and SETUP/heartbeat frames go to
the channel's ``endpoint`` (unicast), or with ``control-mode=dynamic`` to every receiver whose status messages
reached the ``control`` address this endpoint binds (multi-destination-cast; a destination silent for the
receiver timeout is dropped), or with ``control-mode=manual`` to the destinations its clients added. Status messages, NAKs, RTT measurements and error frames coming back are
validated and handed to the publication they name by session and stream id; anything malformed is dropped
and counted as an invalid packet, anything for an unknown publication is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.driver.udp_transport import UdpTransport
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels import loss_generator
from aeron_numba.kernels import publication_sender
from aeron_numba.kernels import udp_socket
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame
from aeron_numba.layout import udp_frames as ul

MAX_DATAGRAMS_PER_POLL = 64
DESTINATION_TIMEOUT_NS = 5_000_000_000


def _i32(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 4].view(np.int32)[0])


def _i64(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 8].view(np.int64)[0])


@dataclass
class _Destination:
    address: tuple[str, int]
    time_of_last_activity_ns: int
    sockaddr: np.ndarray  # the address as a sockaddr_in, for the compiled send path's destination table


#: Destinations a table holds before it is replaced by a larger one.
INITIAL_DESTINATION_CAPACITY = 8
_NO_DESTINATIONS = np.zeros(1, np.int64)  # read only: a count of 0


class SendChannelEndpoint:
    #: Bumped whenever an endpoint replaces its destination table (grown): NetworkCycles' tables hold its address.
    destination_tables_replaced = 0

    def __init__(self, channel: UdpChannel, transport: UdpTransport, system_counters, status_counter_id: int):
        self.channel = channel
        self.transport = transport
        self.system_counters = system_counters
        self.status_counter_id = status_counter_id
        self.publications: dict[tuple[int, int], object] = {}  # (session id, stream id) -> NetworkPublication
        self.destinations: dict[tuple[str, int], _Destination] = {}
        self.ref_count = 0
        self._kept = np.zeros(1 + MAX_DATAGRAMS_PER_POLL, np.int64)  # a batch's datagrams the loss generator kept
        self.now_ns = 0
        # Where data goes when it goes to one address (the compiled send path's sockaddr_in); None: several.
        self.remote_sockaddr = None if channel.is_multi_destination or channel.remote_data is None else \
            udp_socket.sockaddr_in(*channel.remote_data)
        # A multi-destination endpoint's destinations for the compiled send path (publication_sender's destination
        # table): rewritten in place on the sender's thread, which is the one that sends, whenever they change.
        self.destination_table = np.zeros(publication_sender.FIRST_DESTINATION + INITIAL_DESTINATION_CAPACITY,
                                          np.int64) if channel.is_multi_destination else None
        # Set by NetworkCycles while its compiled cycles read this socket (and hand back what Python handles): the
        # sender's Python poll then only does the rest of its work.
        self.read_compiled = False

    @property
    def local_address(self) -> tuple[str, int]:
        return self.transport.local_address

    def add_publication(self, publication) -> None:
        self.publications[(publication.session_id, publication.stream_id)] = publication
        self.ref_count += 1

    def remove_publication(self, publication) -> None:
        self.publications.pop((publication.session_id, publication.stream_id), None)
        self.ref_count -= 1

    def send_addresses(self) -> tuple[int, int]:
        """(``sockaddr_in`` address, destination table address) for the compiled sends: one of them is 0. An
        endpoint with neither (a unicast channel with no ``endpoint``: nothing to send to) gets an empty table."""
        if self.remote_sockaddr is not None:
            return self.remote_sockaddr.ctypes.data, 0
        table = self.destination_table if self.destination_table is not None else _NO_DESTINATIONS
        return 0, table.ctypes.data

    def send(self, data: np.ndarray) -> None:
        if self.channel.is_multi_destination:
            for destination in self.destinations.values():
                self.transport.send(data, destination.address)
        else:
            self.transport.send(data, self.channel.remote_data)
        self.system_counters.increment(cl.BYTES_SENT, len(data))

    def poll(self, now_ns: int, batch) -> int:
        """Read and dispatch the control frames waiting on the socket (in batches: the sender's ``ReceiveBatch``);
        returns how many were read."""
        self.now_ns = now_ns
        self.transport.poll_loss_settings()
        received = 0
        while received < MAX_DATAGRAMS_PER_POLL and not self.read_compiled:
            count = self.transport.receive_batch(batch)
            loss = self.transport.loss
            loss_generator.keep_received(loss.state, loss.gap_dropped, batch.msgs, batch.names, batch.buffer,
                                         batch.slot_length, count, self.transport.local_port, self._kept)
            self.on_batch(batch, now_ns, self._kept)
            received += count
            if count < batch.vlen:
                break
        if self.channel.is_multi_destination and not self.channel.is_manual_destination_control and self.destinations:
            expired = [a for a, d in self.destinations.items()
                       if now_ns - d.time_of_last_activity_ns > DESTINATION_TIMEOUT_NS]
            for address in expired:
                del self.destinations[address]
            if expired:
                self._write_destination_table()
        return received

    def on_batch(self, batch, now_ns: int, indices: np.ndarray) -> None:
        """The datagrams of ``batch`` (read from this endpoint's socket, past its loss generator) at
        ``indices[1:1 + indices[0]]``."""
        for index in indices[1:1 + indices[0]]:
            length = udp_socket.datagram_length(batch.msgs, index)
            if length < 0:
                self.system_counters.increment(cl.INVALID_PACKETS)
                continue
            self._on_datagram(batch.datagram(index, length), length, batch.source(index), now_ns)

    def _on_datagram(self, buf: np.ndarray, length: int, source: tuple[str, int], now_ns: int) -> None:
        frame_type = uf.classify_datagram(buf, 0, length)
        if frame_type < 0:
            self.system_counters.increment(cl.INVALID_PACKETS)
            return
        self.system_counters.increment(cl.BYTES_RECEIVED, length)
        session_id = _i32(buf, ul.CONTROL_SESSION_ID_OFFSET)
        stream_id = _i32(buf, ul.CONTROL_STREAM_ID_OFFSET)
        publication = self.publications.get((session_id, stream_id))
        if frame_type == frame.HDR_TYPE_SM:
            self.system_counters.increment(cl.STATUS_MESSAGES_RECEIVED)
            if self.channel.is_multi_destination and not self.channel.is_manual_destination_control:
                self._track_destination(source, now_ns)
            if publication is not None:
                receiver_id = _i64(buf, ul.SM_RECEIVER_ID_OFFSET)
                publication.on_status_message(_i32(buf, ul.SM_CONSUMPTION_TERM_ID_OFFSET),
                                              _i32(buf, ul.SM_CONSUMPTION_TERM_OFFSET_OFFSET),
                                              _i32(buf, ul.SM_RECEIVER_WINDOW_OFFSET), receiver_id,
                                              int(buf[frame.FLAGS_FIELD_OFFSET]), now_ns)
        elif frame_type == frame.HDR_TYPE_NAK:
            self.system_counters.increment(cl.NAK_MESSAGES_RECEIVED)
            if publication is not None:
                publication.on_nak(_i32(buf, ul.NAK_TERM_ID_OFFSET), _i32(buf, ul.NAK_TERM_OFFSET_OFFSET),
                                   _i32(buf, ul.NAK_LENGTH_OFFSET), now_ns)
        elif frame_type == frame.HDR_TYPE_RTTM:
            if publication is not None:
                publication.on_rttm(_i64(buf, ul.RTTM_ECHO_TIMESTAMP_OFFSET), _i64(buf, ul.RTTM_RECEIVER_ID_OFFSET),
                                    bool(buf[frame.FLAGS_FIELD_OFFSET] & ul.RTTM_REPLY_FLAG), now_ns)
        elif frame_type == frame.HDR_TYPE_ERR:
            self.system_counters.increment(cl.ERROR_FRAMES_RECEIVED)
        # Anything else (DATA, SETUP, ...) is not for a sender: valid but ignored.

    def _track_destination(self, address: tuple[str, int], now_ns: int) -> None:
        destination = self.destinations.get(address)
        if destination is None:
            self._add(address, now_ns)
        else:
            destination.time_of_last_activity_ns = now_ns

    def _add(self, address: tuple[str, int], now_ns: int) -> None:
        self.destinations[address] = _Destination(address, now_ns, udp_socket.sockaddr_in(*address))
        self._write_destination_table()

    def _write_destination_table(self) -> None:
        """The destinations into ``destination_table``, count last: the compiled send on this thread reads it
        between duty cycles, never during this. A table too small is replaced (and NetworkCycles told)."""
        table = self.destination_table
        first = publication_sender.FIRST_DESTINATION
        if first + len(self.destinations) > len(table):
            table = np.zeros(first + 2 * len(self.destinations), np.int64)
            self.destination_table = table
            SendChannelEndpoint.destination_tables_replaced += 1
        table[publication_sender.DESTINATION_COUNT] = 0
        for index, destination in enumerate(self.destinations.values()):
            table[first + index] = destination.sockaddr.ctypes.data
        table[publication_sender.DESTINATION_COUNT] = len(self.destinations)

    # --------------------------------------------------------------------------- manual MDC destinations
    def add_destination(self, address: tuple[str, int], now_ns: int) -> None:
        """ADD_DESTINATION on a ``control-mode=manual`` channel: data goes there too until it is removed."""
        if address not in self.destinations:
            self._add(address, now_ns)

    def remove_destination(self, address: tuple[str, int]) -> bool:
        removed = self.destinations.pop(address, None) is not None
        if removed:
            self._write_destination_table()
        return removed

    def close(self) -> None:
        self.transport.close()
