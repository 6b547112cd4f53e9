"""Load (or, on a cold cache, compile) every kernel the driver conductor calls, before clients can connect.

A kernel compiled lazily inside the first command would stop the duty cycle, and with it the driver's
heartbeat, for seconds on a cold cache: connecting clients could decide the driver is dead. So the driver
first runs its own conductor over a scratch directory with a fake client and fake clocks (publication,
subscription, a bad command, data, a dead claim, removal, timer ticks; then a UDP subscription and
publication over loopback: SETUP, image, status message, data, a gap NAKed and a gap filled, a loss report
entry), then throws it all away.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np

from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.kernels import idle_wait, loss_detector, publication_sender, term_appender, term_rebuilder, udp_frames
from aeron_numba.kernels.log_buffer_unblocker import unblock
from aeron_numba.kernels.loss_report import LossReport
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.errors import AeronError
from aeron_numba.layout import cnc
from aeron_numba.layout import frame
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import publication_status
from aeron_numba.layout.counters import COUNTER_LENGTH

from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.driver_conductor import DriverConductor
from aeron_numba.driver.network_cycles import NetworkCycles

_MS = 1_000_000


class _Clock:
    def __init__(self):
        self.ns = 1_000_000 * _MS

    def nano_time(self) -> int:
        return self.ns

    def epoch_ms(self) -> int:
        return 1_700_000_000_000 + self.ns // _MS


_SCRATCH_TERM_LENGTH = 64 * 1024
_SCRATCH_LOGS = 3  # the IPC publication, the UDP publication and its image


def _scratch_context(aeron_dir: str) -> DriverContext:
    return DriverContext(
        aeron_dir=aeron_dir, ipc_term_buffer_length=_SCRATCH_TERM_LENGTH, timer_interval_ns=10 * _MS,
        client_liveness_timeout_ns=1_000 * _MS, publication_unblock_timeout_ns=2_000 * _MS,
        conductor_buffer_length=64 * 1024 + 768, clients_buffer_length=64 * 1024 + 128,
        counters_values_buffer_length=16 * 1024, error_buffer_length=16 * 1024, publication_linger_timeout_ns=0,
        counter_free_to_reuse_timeout_ns=0,
    ).conclude()


def warm_up_storage_length() -> int:
    """Bytes the warm-up's scratch files take at most: its cnc.dat and its log buffers."""
    ctx = _scratch_context("scratch")
    sections = cnc.compute_sections(ctx.conductor_buffer_length, ctx.clients_buffer_length,
                                    ctx.counters_values_buffer_length, ctx.error_buffer_length)
    return sections.file_length + _SCRATCH_LOGS * lb.compute_log_length(_SCRATCH_TERM_LENGTH, ctx.file_page_size)


def warm_up_driver_kernels(scratch_parent: str | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="aeron-numba-warmup-", dir=scratch_parent))
    # The scratch conductor's commands and deliberate errors are not the driver's: kept out of its log.
    logger = logging.getLogger("aeron_numba.driver")
    was_disabled, logger.disabled = logger.disabled, True
    try:
        ctx = _scratch_context(str(root / "aeron"))
        Path(ctx.aeron_dir).mkdir(parents=True)
        cnc_file = CncFile.create(
            ctx.cnc_path, to_driver_buffer_length=ctx.conductor_buffer_length,
            to_clients_buffer_length=ctx.clients_buffer_length,
            counters_values_buffer_length=ctx.counters_values_buffer_length,
            error_log_buffer_length=ctx.error_buffer_length,
        )
        clock = _Clock()
        # A scratch loss report: the first NAK of a real image writes one (create_entry, then record_observation).
        loss_report = LossReport(np.zeros(4096, np.uint8))
        conductor = DriverConductor(ctx, cnc_file, nano_clock=clock.nano_time, epoch_clock=clock.epoch_ms,
                                    loss_report=loss_report)
        conductor.counters.allocate_system_counters()
        conductor.on_start()
        _exercise(conductor, ManyToOneRingBuffer(cnc_file.to_driver_buffer), cnc_file, clock)
        idle_wait.warm_up_ring_doorbell()
        word = np.zeros(1, np.int64)  # the conductor's watch asks it of a kept slowest reader, from Python
        idle_wait.word_moved(-word.ctypes.data, 1)
        conductor.on_close()
        cnc_file.close()
    finally:
        logger.disabled = was_disabled
        shutil.rmtree(root, ignore_errors=True)


def _last_error(cnc_file: CncFile) -> str:
    observations = ErrorLogReader.read(cnc_file.error_log_buffer)
    if not observations:
        return "no error recorded"
    latest = max(observations, key=lambda o: o.last_observation_timestamp_ms)
    return latest.encoded_exception.splitlines()[0]


def _exercise(conductor: DriverConductor, ring: ManyToOneRingBuffer, cnc_file: CncFile, clock: _Clock) -> None:
    client_id = ring.next_correlation_id()

    def send(msg_type_id: int, message_class, **fields) -> int:
        correlation_id = ring.next_correlation_id()
        ring.write(msg_type_id, message_class(client_id=client_id, correlation_id=correlation_id, **fields).encode())
        return correlation_id

    def tick(times: int = 1) -> None:
        for _ in range(times):
            clock.ns += 20 * _MS
            conductor.do_work()

    publication_id = send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1, channel="aeron:ipc")
    send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=1,
         channel="aeron:ipc")
    counter_id = send(cp.ADD_COUNTER, dc.CounterMessage, type_id=1001, key=b"", label="warm-up")
    ring.write(0x77, bytes(16))  # an unknown command: the error path
    tick()
    if not conductor.publications:  # the conductor refused it and logged why (no room, most likely)
        raise AeronError(f"driver warm-up could not add an IPC publication in {conductor.ctx.aeron_dir}: "
                         f"{_last_error(cnc_file)}")
    publication = conductor.publications[0]
    state = np.zeros(publication_status.PUB_STATE_LENGTH, np.int64)
    state[publication_status.PUB_STATE_LIMIT_COUNTER_OFFSET] = publication.pub_lmt_counter_id * COUNTER_LENGTH
    log = publication.log.buffer
    term_appender.concurrent_offer(log, state, cnc_file.counters_values_buffer, np.zeros(64, np.uint8), 0, 64, 0)
    for subscriber in publication.subscribers:  # the subscriber reads it: limit and cleaning move
        conductor.counters.set_counter_value(subscriber.counter_id, publication.producer_position())
    tick(2)
    unblock(log, publication.producer_position())
    send(cp.REMOVE_COUNTER, dc.RemoveMessage, registration_id=counter_id)
    send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=publication_id)
    tick(2)
    _exercise_udp(conductor, send, tick, cnc_file)
    send(cp.CLIENT_CLOSE, dc.CorrelatedMessage)
    tick(5)
    ring.unblock()


def _exercise_udp(conductor: DriverConductor, send, tick, cnc_file: CncFile) -> None:
    """A loopback UDP stream through the sender and receiver agents and their compiled cycles, plus the paths
    Python takes with a loss generator on (each datagram sent and inserted from Python, retransmits, NAKs)."""
    network = conductor.network
    cycles = NetworkCycles(conductor.counters.values_buffer, network.sender, network.receiver,
                           add_watch=conductor.command_adapter.add_idle_watch, idle_ns=0)

    def tick_all(times: int) -> None:
        for _ in range(times):
            tick()
            network.sender.do_work()
            network.receiver.do_work()
            cycles.do_work()

    send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=2,
         channel="aeron:udp?endpoint=127.0.0.1:0")
    tick()
    (endpoint,) = network.receive_endpoints.values()
    port = endpoint.local_address[1]
    send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=2,
         channel=f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k")
    tick_all(10)  # SETUP -> image -> status message -> connected
    publication = network.publications[0]
    state = np.zeros(publication_status.PUB_STATE_LENGTH, np.int64)
    state[publication_status.PUB_STATE_LIMIT_COUNTER_OFFSET] = publication.pub_lmt_counter_id * COUNTER_LENGTH
    term_appender.concurrent_offer(publication.log.buffer, state, cnc_file.counters_values_buffer,
                                   np.zeros(64, np.uint8), 0, 64, 0)
    tick_all(10)
    _exercise_python_udp_paths(network, publication, cnc_file)
    term = np.zeros(64 * 1024, np.uint8)  # the loss paths: a gap NAKed, a gap filled
    loss_state = loss_detector.new_loss_state()
    term_rebuilder.insert(term, 64, np.zeros(64, np.uint8), 0, 64)
    loss_detector.loss_detector_scan(term, 0, 128, 0, loss_state, 0, 0, 0)
    loss_detector.fill_gap(term, 0, 0, 64, 1, 2)
    udp_frames.encode_nak(term, 0, 1, 2, 0, 0, 64)
    udp_frames.classify_datagram(term, 0, 64)
    entry = conductor.loss_report.create_entry(64, 0, 1, 2, "aeron:udp?endpoint=127.0.0.1:0", "127.0.0.1:1")
    entry.record_observation(64, 1)
    publication.close_by_clients()


def _exercise_python_udp_paths(network, publication, cnc_file: CncFile) -> None:
    """What runs from Python when a loss generator is on: the log scanned for the endpoint to send each datagram,
    a datagram inserted from Python, a retransmit, a NAK falling due."""
    values = cnc_file.counters_values_buffer
    batch = network.sender.send_batch
    publication_sender.collect_data(publication.row, publication.log.buffer, batch.msgs, batch.iovecs, batch.vlen, 0,
                                    0, values, np.zeros(1, np.int64))
    publication._resend(publication.initial_term_id, 0, publication.mtu)
    (image,) = network.images
    heartbeat = network.receiver.batch.datagram(0, frame.HEADER_LENGTH)  # a heartbeat is a bare data header
    udp_frames.encode_heartbeat(heartbeat, 0, 0, image.session_id, image.stream_id, image.initial_term_id, False)
    image.insert_packet(heartbeat, len(heartbeat), 0)
    image.loss_state[loss_detector.STATE_NAK_LENGTH] = 64
    image.on_nak_due(0)
