"""The compiled UDP data path over real loopback sockets: a publication's log sent with ``sendmmsg``
(``publication_sender``), read with ``recvmmsg`` and rebuilt into an image's log (``image_receiver``), with no
driver around them: what the sender and receiver agents do per datagram."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from aeron_numba.kernels import image_receiver as IR
from aeron_numba.kernels import network_duty_cycle as NDC
from aeron_numba.kernels import publication_sender as PS
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels import udp_socket as us
from aeron_numba.jit import kernel
from aeron_numba.kernels.counters import get_counter_value
from aeron_numba.kernels.memory import int64s_at
from aeron_numba.kernels.network_stages import stage_address
from aeron_numba.driver.loss_generator import LossControl, LossGenerator, LossSettings
from aeron_numba.layout import counters as cl
from aeron_numba.layout import frame as F
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import network_state as ns
from aeron_numba.layout.log_buffers import LogBuffers
from tests.unit.log_support import Consumer, LimitCounter, new_pub_state, offer_until_done

TERM_LENGTH = 64 * 1024
MTU = 1408
SESSION_ID, STREAM_ID, INITIAL_TERM_ID = 77, 1001, 5
ENDPOINT_ID = 3
SND_POS_ID, SND_BPE_ID, RCV_HWM_ID = 40, 41, 42  # counter ids past the system counters


@pytest.fixture
def sockets():
    pair = []
    for _ in range(2):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        pair.append(sock)
    yield pair
    for sock in pair:
        sock.close()


def _log(tmp_path, name: str) -> LogBuffers:
    return LogBuffers.create(tmp_path / name, term_length=TERM_LENGTH, initial_term_id=INITIAL_TERM_ID,
                             session_id=SESSION_ID, stream_id=STREAM_ID, mtu_length=MTU)


def _publication_row(log: LogBuffers, sender_limit: int) -> np.ndarray:
    row = np.zeros(ns.PUBLICATION_ROW_LENGTH, np.int64)
    row[ns.PUBLICATION_SESSION_ID], row[ns.PUBLICATION_STREAM_ID] = SESSION_ID, STREAM_ID
    row[ns.PUBLICATION_LOG_ADDRESS], row[ns.PUBLICATION_LOG_LENGTH] = log.buffer.ctypes.data, log.buffer.size
    row[ns.PUBLICATION_TERM_LENGTH], row[ns.PUBLICATION_POSITION_BITS] = TERM_LENGTH, log.position_bits_to_shift
    row[ns.PUBLICATION_INITIAL_TERM_ID], row[ns.PUBLICATION_MTU] = INITIAL_TERM_ID, MTU
    row[ns.PUBLICATION_SENDER_LIMIT] = sender_limit
    row[ns.PUBLICATION_SND_POS_COUNTER_ID], row[ns.PUBLICATION_SND_BPE_COUNTER_ID] = SND_POS_ID, SND_BPE_ID
    row[ns.PUBLICATION_HAS_RECEIVERS] = 1
    return row


def _image_row(log: LogBuffers, window: int) -> np.ndarray:
    row = np.zeros(ns.IMAGE_ROW_LENGTH, np.int64)
    row[ns.IMAGE_SESSION_ID], row[ns.IMAGE_STREAM_ID], row[ns.IMAGE_ENDPOINT_ID] = SESSION_ID, STREAM_ID, ENDPOINT_ID
    row[ns.IMAGE_IS_ACTIVE] = 1
    row[ns.IMAGE_LOG_ADDRESS], row[ns.IMAGE_LOG_LENGTH] = log.buffer.ctypes.data, log.buffer.size
    row[ns.IMAGE_METADATA_OFFSET] = log.metadata_offset
    row[ns.IMAGE_TERM_LENGTH], row[ns.IMAGE_POSITION_BITS] = TERM_LENGTH, log.position_bits_to_shift
    row[ns.IMAGE_INITIAL_TERM_ID] = INITIAL_TERM_ID
    row[ns.IMAGE_LAST_SM_WINDOW] = window
    row[ns.IMAGE_END_OF_STREAM_POSITION] = ns.NO_POSITION
    row[ns.IMAGE_RCV_HWM_COUNTER_ID] = RCV_HWM_ID
    row[ns.IMAGE_DATA_FD] = ns.ANY_SOCKET
    return row


class Link:
    """A publication log sending to an image log over two loopback sockets, through the compiled kernels."""

    def __init__(self, tmp_path, sockets, sender_limit: int, window: int):
        self.sender, self.receiver = sockets
        self.pub_log, self.image_log = _log(tmp_path, "pub.logbuffer"), _log(tmp_path, "image.logbuffer")
        self.pub_row, self.image_row = _publication_row(self.pub_log, sender_limit), _image_row(self.image_log, window)
        self.values = np.zeros(64 * cl.COUNTER_LENGTH, np.uint8)
        self.send_batch = us.SendBatch(8)
        self.receive_batch = us.ReceiveBatch(8, 65536)
        self.destination = us.sockaddr_in(*self.receiver.getsockname())
        self.rows = np.array([self.image_row.ctypes.data], np.int64)
        self.slow = np.zeros(9, np.int64)
        self.result = np.zeros(1, np.int64)
        self.state = new_pub_state(self.pub_log.buffer, True)
        self.send_loss, self.receive_loss = LossGenerator(), LossGenerator()  # off until a test turns one on
        self.limit = LimitCounter()

    def offer(self, message: bytes) -> None:
        assert offer_until_done(self.pub_log.buffer, self.state, self.limit, np.frombuffer(message, np.uint8),
                                True) > 0

    def send(self) -> int:
        return PS.send_data(self.pub_row, self.send_batch.msgs, self.send_batch.iovecs, self.send_batch.vlen,
                            self.sender.fileno(), self.destination.ctypes.data, 0, 1, self.values,
                            self.send_loss.state.ctypes.data, self.sender.getsockname()[1], self.result)

    def receive(self) -> tuple[int, int]:
        """One batch: (datagrams read, bytes inserted)."""
        count = us.receive_datagrams(self.receiver.fileno(), self.receive_batch.msgs, self.receive_batch.vlen)
        assert count >= 0
        inserted = IR.dispatch_batch(self.receive_batch.msgs, self.receive_batch.names, self.receive_batch.buffer,
                                     self.receive_batch.slot_length, count, ENDPOINT_ID, self.receiver.fileno(),
                                     self.rows, 1, self.values, 2, self.receive_loss.state,
                                     self.receive_loss.gap_dropped, self.receiver.getsockname()[1], self.slow)
        return count, inserted

    def counter(self, counter_id: int) -> int:
        return int(get_counter_value(self.values, counter_id))

    def slow_indices(self) -> list[int]:
        return [int(i) for i in self.slow[1:1 + self.slow[IR.SLOW_COUNT]]]


def _received_messages(link: Link) -> list[bytes]:
    consumer = Consumer(link.image_log.buffer, TERM_LENGTH)
    consumer.drain()
    return consumer.messages


def test_messages_sent_in_batches_arrive_whole_and_in_order_in_the_image(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    messages = [bytes([i % 251]) * (i * 37 % 3000) for i in range(120)]  # some fragmented across datagrams
    sent = 0
    for message in messages:
        link.offer(message)
    while link.pub_row[ns.PUBLICATION_SENDER_POSITION] < link.pub_row[ns.PUBLICATION_SENDER_LIMIT]:
        sent_now = link.send()
        assert sent_now >= 0
        if sent_now == 0:
            break
        sent += sent_now
        while link.receive()[0]:
            pass
    assert _received_messages(link) == messages
    position = int(link.pub_row[ns.PUBLICATION_SENDER_POSITION])
    assert link.counter(SND_POS_ID) == position == link.image_row[ns.IMAGE_HWM_POSITION] == link.counter(RCV_HWM_ID)
    assert link.counter(cl.BYTES_SENT) == sent == link.counter(cl.BYTES_RECEIVED)


def test_the_sender_stops_at_its_limit_and_counts_back_pressure(tmp_path, sockets):
    frame_length = 1024 + F.HEADER_LENGTH  # a 1000-byte message's frame, aligned
    link = Link(tmp_path, sockets, sender_limit=3 * frame_length, window=1 << 40)
    for _ in range(10):
        link.offer(b"x" * 1000)
    assert link.send() == 3 * frame_length  # three datagrams of one aligned frame each (MTU 1408)
    assert link.pub_row[ns.PUBLICATION_SENDER_POSITION] == 3 * frame_length == link.counter(SND_POS_ID)
    assert link.counter(SND_BPE_ID) == 0
    assert link.send() == 0
    assert link.counter(SND_BPE_ID) == 1  # the window is shut and the producer is ahead
    link.pub_row[ns.PUBLICATION_SENDER_LIMIT] += frame_length
    assert link.send() == frame_length


def test_data_past_the_granted_window_is_an_over_run_and_not_inserted(tmp_path, sockets):
    frame_length = 1024 + F.HEADER_LENGTH
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=2 * frame_length)
    for _ in range(4):
        link.offer(b"y" * 1000)  # the third frame ends past the window
    while link.send() > 0:
        pass
    received = 0
    while (count := link.receive()[0]):
        received += count
    assert link.counter(cl.FLOW_CONTROL_OVER_RUNS) >= 1
    assert link.image_row[ns.IMAGE_HWM_POSITION] == 2 * frame_length
    assert _received_messages(link) == [b"y" * 1000] * 2


def test_what_the_kernel_cannot_place_is_left_to_python_and_garbage_is_counted(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    sender, receiver = sockets
    setup = np.zeros(64, np.uint8)
    length = uf.encode_setup(setup, 0, 0, SESSION_ID, STREAM_ID, INITIAL_TERM_ID, INITIAL_TERM_ID, TERM_LENGTH, MTU,
                             0, 0)
    other_session = np.zeros(64, np.uint8)
    uf.encode_heartbeat(other_session, 0, 0, SESSION_ID + 1, STREAM_ID, INITIAL_TERM_ID, False)
    for datagram in (setup[:length].tobytes(), b"\x00garbage", other_session[:32].tobytes()):
        sender.sendto(datagram, receiver.getsockname())
    count, inserted = link.receive()
    assert (count, inserted) == (3, 0)
    assert link.slow_indices() == [0, 2]  # the SETUP and the unknown session; the garbage counted and dropped
    assert link.counter(cl.INVALID_PACKETS) == 1
    assert link.receive_batch.source(0) == sender.getsockname()


def test_a_multi_destination_image_takes_data_in_compiled_code_only_through_its_one_connection(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    sender, receiver = sockets
    heartbeat = np.zeros(32, np.uint8)
    uf.encode_heartbeat(heartbeat, 0, 0, SESSION_ID, STREAM_ID, INITIAL_TERM_ID, False)
    eos = np.zeros(32, np.uint8)
    uf.encode_heartbeat(eos, 0, 0, SESSION_ID, STREAM_ID, INITIAL_TERM_ID, True)
    link.offer(b"m" * 100)
    link.image_row[ns.IMAGE_DATA_FD] = ns.NO_SOCKET  # several connections: Python tracks each
    assert link.send() > 0 and link.receive() == (1, 0) and link.slow_indices() == [0]
    link.image_row[ns.IMAGE_DATA_FD] = sender.fileno()  # its one connection is another socket of the endpoint
    sender.sendto(heartbeat.tobytes(), receiver.getsockname())
    assert link.receive() == (1, 0) and link.slow_indices() == [0]
    link.image_row[ns.IMAGE_DATA_FD] = receiver.fileno()  # through its connection: data and heartbeats go in ...
    link.image_row[ns.IMAGE_LAST_SM_POSITION] = 0
    link.pub_row[ns.PUBLICATION_SENDER_POSITION] = 0
    assert link.send() > 0 and link.receive()[1] > 0 and link.slow_indices() == []
    sender.sendto(heartbeat.tobytes(), receiver.getsockname())
    assert link.receive() == (1, 0) and link.slow_indices() == []
    sender.sendto(eos.tobytes(), receiver.getsockname())  # ... but not an end of stream, which is the connection's
    assert link.receive() == (1, 0) and link.slow_indices() == [0]
    assert link.image_row[ns.IMAGE_END_OF_STREAM_POSITION] == ns.NO_POSITION
    assert _received_messages(link) == [b"m" * 100]


def test_an_end_of_stream_heartbeat_marks_the_image_log_once(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    sender, receiver = sockets
    heartbeat = np.zeros(32, np.uint8)
    for term_offset in (512, 1024):
        uf.encode_heartbeat(heartbeat, 0, term_offset, SESSION_ID, STREAM_ID, INITIAL_TERM_ID, True)
        sender.sendto(heartbeat.tobytes(), receiver.getsockname())
    assert link.receive() == (2, 0)
    metadata = link.image_log.metadata_offset
    eos = int(link.image_log.buffer[metadata + lb.LOG_END_OF_STREAM_POSITION_OFFSET:][:8].view(np.int64)[0])
    assert eos == 512 == link.image_row[ns.IMAGE_END_OF_STREAM_POSITION]
    assert link.image_row[ns.IMAGE_HWM_POSITION] == 1024
    assert link.counter(cl.HEARTBEATS_RECEIVED) == 2


def test_socket_errors_come_back_as_negative_errno(sockets):
    batch = us.ReceiveBatch(2, 2048)
    closed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fd = closed.fileno()
    closed.close()
    assert us.receive_datagrams(fd, batch.msgs, batch.vlen) == -9  # EBADF
    assert us.receive_datagrams(sockets[1].fileno(), batch.msgs, batch.vlen) == 0  # nothing waiting


# ------------------------------------------------------------------------------ the compiled duty cycles
def _socket_row(sock, loss: LossGenerator, last_datagram_ns: np.ndarray, endpoint_id: int = 0) -> list[int]:
    return [sock.fileno(), endpoint_id, sock.getsockname()[1], loss.state.ctypes.data, loss.gap_dropped.ctypes.data,
            loss.gap_dropped.size, last_datagram_ns.ctypes.data]


class Cycles:
    """``run_network_cycles`` over a Link: the publication sends from socket A to the image's socket B, the image
    answers from B to A, A is the sender's control socket."""

    def __init__(self, link: Link):
        self.link = link
        sender, receiver = link.sender, link.receiver
        link.image_row[ns.IMAGE_COMPILED_WORK] = 1
        link.image_row[ns.IMAGE_CONTROL_FD] = receiver.fileno()
        self.answer_to = us.sockaddr_in(*sender.getsockname())
        link.image_row[ns.IMAGE_CONTROL_SOCKADDR_ADDRESS] = self.answer_to.ctypes.data
        link.image_row[ns.IMAGE_STATUS_MESSAGE_TIMEOUT_NS] = 200_000_000
        link.image_row[ns.IMAGE_RECEIVER_WINDOW] = link.image_row[ns.IMAGE_LAST_SM_WINDOW]
        link.image_row[ns.IMAGE_RECEIVER_ID] = 99
        self.loss_state = np.zeros(16, np.int64)
        link.image_row[ns.IMAGE_LOSS_STATE_ADDRESS] = self.loss_state.ctypes.data
        link.image_row[ns.IMAGE_TIME_OF_LAST_SM_NS] = -(1 << 40)  # the first one is due at once
        link.pub_row[ns.PUBLICATION_UNICAST_FLOW_CONTROL] = 1
        self.publications = np.array([[link.pub_row.ctypes.data, sender.fileno(), link.destination.ctypes.data, 0, 0]],
                                     np.int64)
        self.last_datagram_ns = [np.zeros(1, np.int64), np.zeros(1, np.int64)]
        self.control_sockets = np.array([_socket_row(sender, link.send_loss, self.last_datagram_ns[0])], np.int64)
        self.receive_sockets = np.array([_socket_row(receiver, link.receive_loss, self.last_datagram_ns[1],
                                                     ENDPOINT_ID)], np.int64)
        self.control_batch = us.ReceiveBatch(8, 65536)
        self.slow = np.zeros(9, np.int64)
        self.result = np.zeros(NDC.RESULT_LENGTH, np.int64)
        self.no_words = np.zeros(0, np.int64)

    def run(self, budget_ns: int = 50_000_000, idle_ns: int = 5_000_000, stages=None) -> int:
        link = self.link
        stages = np.zeros((0, 2), np.int64) if stages is None else stages
        NDC.run_network_cycles(self.publications, 1, self.receive_sockets, 1, self.control_sockets, 1, link.rows, 1,
                               link.receive_batch.msgs, link.receive_batch.names, link.receive_batch.buffer,
                               link.receive_batch.slot_length, link.receive_batch.vlen, self.control_batch.msgs,
                               self.control_batch.names, self.control_batch.buffer, self.control_batch.vlen, link.send_batch.msgs, link.send_batch.iovecs,
                               link.send_batch.vlen, self.no_words, self.no_words, link.values, budget_ns, idle_ns, 0,
                               self.slow, link.result, np.zeros(64, np.uint8), np.zeros(3, np.int64), stages,
                               stages.shape[0], self.result)
        return int(self.result[NDC.RESULT_REASON])


def test_the_cycles_move_a_stream_through_its_window_with_status_messages_alone(tmp_path, sockets):
    window = 4096
    link = Link(tmp_path, sockets, sender_limit=window, window=window)
    cycles = Cycles(link)
    messages = [bytes([i]) * 200 for i in range(100)]  # 25 KiB of frames: the window must move six times
    for message in messages:
        link.offer(message)
    # The first status message comes from a receiver the publication does not know yet: Python's to take. It
    # reaches the quiet control socket after that socket's read in the first pass; however soon the call goes
    # idle (here after 1 ns), it reads every socket once more first.
    assert cycles.run(idle_ns=1) == NDC.RETURN_CONTROL_FRAMES and cycles.slow[IR.SLOW_COUNT] == 1
    assert uf.classify_datagram(cycles.control_batch.buffer, 0, us.datagram_length(cycles.control_batch.msgs, 0)) \
        == F.HDR_TYPE_SM
    link.pub_row[ns.PUBLICATION_SM_RECEIVER_ID] = 99  # what NetworkPublication.on_status_message records
    link.pub_row[ns.PUBLICATION_SM_RECEIVED_NS] = 1
    link.pub_row[ns.PUBLICATION_HAS_RECEIVERS] = 1
    # From here the window moves in compiled code: the image's status messages, taken by the sender.
    consumer = Consumer(link.image_log.buffer, TERM_LENGTH)  # no subscriber counters: the image answers for
    end = len(messages) * 256  # its rebuild position
    while link.image_row[ns.IMAGE_REBUILD_POSITION] < end:
        reason = cycles.run(idle_ns=1_000_000)
        assert reason in (NDC.RETURN_IDLE, NDC.RETURN_BUDGET), reason
        consumer.drain()
    consumer.drain()
    assert consumer.messages == messages
    assert link.counter(cl.STATUS_MESSAGES_RECEIVED) >= end // window  # each moved the window at most once over
    assert link.pub_row[ns.PUBLICATION_SENDER_LIMIT] >= end


def test_the_cycles_hand_python_the_datagrams_it_cannot_place(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=0, window=1 << 20)
    cycles = Cycles(link)
    link.image_row[ns.IMAGE_TIME_OF_LAST_SM_NS] = 1 << 62  # no status message due
    setup = np.zeros(64, np.uint8)
    length = uf.encode_setup(setup, 0, 0, SESSION_ID + 1, STREAM_ID, 0, 0, TERM_LENGTH, MTU, 0, 0)
    link.sender.sendto(setup[:length].tobytes(), link.receiver.getsockname())
    assert cycles.run() == NDC.RETURN_SLOW_DATAGRAMS
    assert cycles.result[NDC.RESULT_INDEX] == 0 and list(cycles.slow[:2]) == [1, 0]  # socket 0, datagram 0
    assert cycles.run(idle_ns=0) == NDC.RETURN_IDLE


@kernel
def _watching_stage(state_address):
    """A stage that keeps what the image's rebuild position is at each call (its row at ``state[2]``) and says it
    did work the first time it sees it past ``state[3]``."""
    state = int64s_at(state_address, 4)
    state[0] += 1
    state[1] = int64s_at(state[2], ns.IMAGE_ROW_LENGTH)[ns.IMAGE_REBUILD_POSITION]
    if state[1] >= state[3] > 0:
        state[3] = 0
        return 1
    return 0


def test_a_stage_runs_after_the_receiving_of_every_pass_and_its_work_keeps_the_call_going(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    cycles = Cycles(link)
    link.pub_row[ns.PUBLICATION_SM_RECEIVER_ID], link.pub_row[ns.PUBLICATION_SM_RECEIVED_NS] = 99, 1
    link.image_row[ns.IMAGE_TIME_OF_LAST_SM_NS] = 1 << 62  # no status message due
    messages = [bytes([i]) * 200 for i in range(20)]
    for message in messages:
        link.offer(message)
    end = len(messages) * 256
    state = np.array([0, 0, link.image_row.ctypes.data, end], np.int64)
    stages = np.array([[stage_address(_watching_stage), state.ctypes.data]], np.int64)
    while link.image_row[ns.IMAGE_REBUILD_POSITION] < end:
        assert cycles.run(idle_ns=0, stages=stages) in (NDC.RETURN_IDLE, NDC.RETURN_BUDGET)
    # It ran in the pass that took the last datagram: it saw the whole stream in the same call.
    assert state[1] == end and state[3] == 0
    assert state[0] >= 2  # and once more after its work: a pass with work is followed by another
    calls = int(state[0])
    assert cycles.run(idle_ns=0, stages=stages) == NDC.RETURN_IDLE
    assert state[0] == calls + 1 and cycles.result[NDC.RESULT_WORK] == 0  # nothing new: one pass, no work


def _loss(tmp_path, generator: LossGenerator, settings: LossSettings) -> None:
    control = LossControl.create(tmp_path)
    control.write(settings)
    generator.update(control)
    control.close()


def test_the_compiled_receive_path_drops_a_fixed_gap_once_and_takes_the_retransmit(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    frame_length = 1024 + F.HEADER_LENGTH
    _loss(tmp_path, link.receive_loss, LossSettings(gap_term_id=INITIAL_TERM_ID, gap_term_offset=frame_length,
                                                    gap_length=frame_length))
    for _ in range(3):
        link.offer(b"z" * 1000)
    assert link.send() == 3 * frame_length
    assert link.receive()[1] == 2 * frame_length  # the second frame was dropped
    assert link.image_row[ns.IMAGE_HWM_POSITION] == 3 * frame_length and link.receive_loss.dropped == 1
    link.pub_row[ns.PUBLICATION_SENDER_POSITION] = frame_length  # resend the second frame, as a retransmit would
    assert link.send() == 2 * frame_length and link.receive()[0] == 2  # the gap's frame passes this time
    assert _received_messages(link) == [b"z" * 1000] * 3


def test_the_compiled_send_path_drops_what_goes_to_a_blocked_host(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    _loss(tmp_path, link.send_loss, LossSettings(blocked_hosts=("127.0.0.1",)))
    link.offer(b"q" * 100)
    assert link.send() > 0  # taken from the log and counted as sent, as UDP loses a datagram
    assert link.receive() == (0, 0) and link.send_loss.dropped == 1
    _loss(tmp_path, link.send_loss, LossSettings())
    link.offer(b"r" * 100)
    link.send()
    assert link.receive()[0] == 1


def test_a_retransmit_resends_the_frames_of_the_naked_range_in_one_batch(tmp_path, sockets):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    frame_length = 1024 + F.HEADER_LENGTH
    _loss(tmp_path, link.receive_loss, LossSettings(gap_term_id=INITIAL_TERM_ID, gap_term_offset=frame_length,
                                                    gap_length=2 * frame_length))
    for _ in range(4):
        link.offer(b"n" * 1000)
    link.send()
    link.receive()
    assert link.receive_loss.dropped == 2
    result = np.zeros(2, np.int64)
    sent = PS.resend(link.pub_row, link.send_batch.msgs, link.send_batch.iovecs, link.send_batch.vlen,
                     link.sender.fileno(), link.destination.ctypes.data, 0, INITIAL_TERM_ID, frame_length,
                     2 * frame_length, link.values, link.send_loss.state.ctypes.data, link.sender.getsockname()[1],
                     result)
    assert sent == 2 * frame_length
    assert link.counter(cl.RETRANSMITS_SENT) == 2 and link.counter(cl.RETRANSMITTED_BYTES) == 2 * frame_length
    assert link.receive()[0] == 2
    assert _received_messages(link) == [b"n" * 1000] * 4


def _destination_table(*socks) -> tuple[np.ndarray, list]:
    """A multi-destination endpoint's table (``SendChannelEndpoint.destination_table``) of ``socks``' addresses."""
    addresses = [us.sockaddr_in(*s.getsockname()) for s in socks]
    table = np.array([len(addresses)] + [a.ctypes.data for a in addresses], np.int64)
    return table, addresses  # the addresses must outlive the table's use


def _datagrams(sock) -> list[bytes]:
    got = []
    while True:
        try:
            got.append(sock.recv(65536))
        except BlockingIOError:
            return got


def _send_to_each(link: Link, table: np.ndarray) -> int:
    return PS.send_data(link.pub_row, link.send_batch.msgs, link.send_batch.iovecs, link.send_batch.vlen,
                        link.sender.fileno(), 0, table.ctypes.data, 1, link.values, link.send_loss.state.ctypes.data,
                        link.sender.getsockname()[1], link.result)


@pytest.fixture
def third_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def test_a_multi_destination_publication_sends_each_datagram_to_each_destination_from_one_scan(
        tmp_path, sockets, third_socket):
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    table, _addresses = _destination_table(link.receiver, third_socket)
    for i in range(40):
        link.offer(bytes([i]) * 300)  # 40 frames of 352 bytes: several datagrams of up to an MTU, several batches
    total = 0
    while (sent := _send_to_each(link, table)) > 0:
        total += sent
    assert total == 40 * 352 and link.pub_row[ns.PUBLICATION_SENDER_POSITION] == 40 * 352
    assert link.counter(cl.BYTES_SENT) == total  # counted once, as Aeron counts a send to every destination
    first, second = _datagrams(link.receiver), _datagrams(third_socket)
    assert first == second and b"".join(first) == link.pub_log.buffer[:total].tobytes()

    table[PS.DESTINATION_COUNT] = 1  # the second destination removed: the next data goes to the first only
    link.offer(b"z" * 100)
    assert _send_to_each(link, table) > 0
    assert len(_datagrams(link.receiver)) == 1 and _datagrams(third_socket) == []


def test_a_multi_destination_send_under_loss_gives_each_destination_whole_datagrams_in_order(
        tmp_path, sockets, third_socket):
    """Each destination's datagrams are dropped on their own draw; what one destination loses never costs
    another its datagrams or their order (the lossy send packs kept entries over dropped ones)."""
    link = Link(tmp_path, sockets, sender_limit=1 << 40, window=1 << 40)
    _loss(tmp_path, link.send_loss, LossSettings(send_data_rate=0.5, seed=11))
    table, _addresses = _destination_table(link.receiver, third_socket)
    for i in range(40):
        link.offer(bytes([i]) * 1300)  # one frame per datagram, all in the first term
    while _send_to_each(link, table) > 0:
        pass
    log = link.pub_log.buffer
    received = []
    for sock in (link.receiver, third_socket):
        offsets = []
        for datagram in _datagrams(sock):
            offset = int(np.frombuffer(datagram[F.TERM_OFFSET_FIELD_OFFSET:F.TERM_OFFSET_FIELD_OFFSET + 4],
                                       np.int32)[0])
            assert datagram == log[offset:offset + len(datagram)].tobytes()
            offsets.append(offset)
        assert offsets == sorted(set(offsets))
        received.append(offsets)
    assert len(received[0]) + len(received[1]) + link.send_loss.dropped == 2 * 40
    assert 0 < link.send_loss.dropped < 2 * 40 and received[0] != received[1]
