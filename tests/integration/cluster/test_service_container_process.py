"""The clustered service container as a process (``python -m aeron_numba.cluster.service``) beside a media driver
process and an archive process, with this test playing the consensus module through the generated proxies: the
recovery-state and commit-position counters, JoinLog on the service stream, the log appended with LogPublisher on
an IPC publication, the acks and requests read from the consensus module stream, the replies read from egress.

Checked: the recovery ack, the join ack, replies in log order and nothing applied past the commit position, a
fragmented request reassembled, a snapshot recorded by the archive (acked with its recording id) and loaded by a
fresh container with the same state hash, termination at the position given, timers asked for with ScheduleTimer
on the consensus module stream, and the command line's one-line errors."""

from __future__ import annotations

import signal
import sys

import pytest

from aeron_numba.archive import recording_pos
from aeron_numba.archive.client import AeronArchive
from aeron_numba.client import Aeron, Context, FragmentAssembler
from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.examples.key_value_service import (
    HASH,
    KeyValueService,
    decode_hash_value,
    decode_response,
    encode_get,
    encode_hash,
    encode_put,
)
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE, align
from aeron_numba.layout.cluster_schema import ENUMS
from aeron_numba.layout.frame import FRAME_ALIGNMENT, HEADER_LENGTH
from harness.awaiting import NotYet, assert_stays, await_condition
from tests.integration.driver_processes import start_driver
from tests.unit.cluster.service.support import CLUSTER_ID, ConsensusModuleStandIn

EGRESS_CHANNEL = "aeron:ipc?term-length=64k"
EGRESS_STREAM_ID = 102
SESSION_ID = 1
ARCHIVE_ENV = {"AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "128k", "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
               "AERON_ARCHIVE_IDLE_STRATEGY": "backoff", "AERON_ARCHIVE_CONNECT_TIMEOUT": "5s"}
KV = "aeron_numba.cluster.examples.key_value_service"


class Node:
    """Driver and archive processes, and this process's client playing the consensus module."""

    def __init__(self, process_manager, aeron_dir, tmp_path):
        self.process_manager, self.aeron_dir, self.tmp_path = process_manager, aeron_dir, tmp_path
        _, cnc = start_driver(process_manager, aeron_dir)
        cnc.close()
        archive = process_manager.spawn_module("archive", "aeron_numba.archive", "--archive-dir",
                                               str(tmp_path / "archive"),
                                               env={**ARCHIVE_ENV, "AERON_DIR": str(aeron_dir)})
        archive.await_output("aeron-numba archive", 120)
        self.aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
        self.cm = ConsensusModuleStandIn(self.aeron)
        self.egress = self.aeron.add_subscription(EGRESS_CHANNEL, EGRESS_STREAM_ID)
        self.responses: list = []
        self._assembler = FragmentAssembler(lambda b, o, n, h: self.responses.append(CLUSTER.decode(b, o, n)))
        self.processes: list = []

    def start_container(self, service: str):
        process = self.process_manager.spawn_module(
            "service", "aeron_numba.cluster.service", "--service", service,
            env={"AERON_DIR": str(self.aeron_dir), "AERON_CLUSTER_DIR": str(self.tmp_path / "cluster"),
                 "AERON_CLUSTER_IDLE_STRATEGY": "backoff"})
        process.await_output("aeron-numba clustered service", 120)
        self.processes.append(process)
        return process

    def acks(self, count: int, timeout_s: float = 60):
        def arrived():
            acks = self.cm.messages("ServiceAck")
            return acks if len(acks) >= count else NotYet(f"{len(acks)} of {count} acks")
        return await_condition(arrived, timeout_s, f"{count} ServiceAcks", processes=self.processes)

    def join(self, log_position: int, acks_before: int) -> None:
        await_condition(lambda: self.cm.service_proxy.join_log(
            log_position, (1 << 63) - 1, 0, self.cm.log_publication.session_id, 100, 0, 2,
            self.cm.log_publication.channel), 30, "JoinLog sent", processes=self.processes)
        ack = self.acks(acks_before + 1)[-1]
        assert (ack.log_position, ack.relevant_id) == (log_position, NULL_VALUE)

    def append(self, send) -> int:
        await_condition(send, 30, "appended to the log", processes=self.processes)
        return self.cm.log_publication.position

    def await_responses(self, count: int, timeout_s: float = 60) -> list:
        def arrived():
            self.egress.poll(self._assembler.on_fragment, 100)
            return len(self.responses) >= count or NotYet(f"{len(self.responses)} of {count} responses")
        try:
            await_condition(arrived, timeout_s, f"{count} responses", processes=self.processes)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the service's error log: {self.service_errors()}") from None
        return self.responses

    def await_kv_responses(self, count: int, timeout_s: float = 60) -> list:
        return [decode_response(r.payload) for r in self.await_responses(count, timeout_s)]

    def service_errors(self) -> list[str]:
        """The errors in the service container's mark file error log."""
        from aeron_numba.cluster.mark_file import ClusterMarkFile
        from aeron_numba.kernels.error_log import ErrorLogReader

        with ClusterMarkFile.open(self.tmp_path / "cluster" / "cluster-mark-service-0.dat") as mark_file:
            return [o.encoded_exception for o in ErrorLogReader.read(mark_file.error_log_buffer)]

    def record_log(self) -> int:
        """Have the archive record the stand-in's log, as the consensus module does; its recording id."""
        publication, counters = self.cm.log_publication, self.aeron.counters_reader
        archive = AeronArchive.connect(self.aeron)
        try:
            archive.start_recording(f"{publication.channel}|session-id={publication.session_id}",
                                    publication.stream_id, "LOCAL", auto_stop=True)

            def recorded():
                counter_id = recording_pos.find_counter_id_by_session(counters, publication.session_id,
                                                                      archive.archive_id)
                if counter_id == recording_pos.NULL_COUNTER_ID:
                    return NotYet("no rec-pos counter for the log")
                return (recording_pos.get_recording_id(counters, counter_id),)  # id 0 is a value, not "not yet"
            return await_condition(recorded, 30, "the log recorded")[0]
        finally:
            archive.close()

    def close(self):
        self.aeron.close()


@pytest.fixture
def node(process_manager, aeron_dir, tmp_path):
    n = Node(process_manager, aeron_dir, tmp_path)
    yield n
    n.close()


def action_position(position: int) -> int:
    """Where a ClusterActionRequest appended at ``position`` ends (what the consensus module writes in it)."""
    length = 8 + CLUSTER.schema.message("ClusterActionRequest").block_length
    return position + align(HEADER_LENGTH + length, FRAME_ALIGNMENT)


@pytest.mark.parametrize("variant", ["KeyValueService", "CompiledKeyValueService"])
def test_log_applied_up_to_commit_then_snapshot_loaded_by_a_fresh_container(node, variant):
    cm = node.cm
    # The log is the archive's first recording, as in a node, so the snapshot's is not recording 0 (which the
    # rec-pos counter's default reference id, 0, matched when the container checked that field instead of the key).
    log_recording_id = node.record_log()
    first = node.start_container(f"{KV}:{variant}")
    (ack,) = node.acks(1)
    assert (ack.log_position, ack.ack_id, ack.service_id) == (0, 0, 0)
    assert ack.relevant_id not in (NULL_VALUE, node.aeron.client_id)  # the container's own Aeron client id
    node.join(0, 1)
    reference = KeyValueService()
    requests = [encode_put(i, b"key-%d" % (i % 7), bytes([i]) * 64) for i in range(20)]
    requests += [encode_get(100, b"key-3"), encode_put(101, b"big", b"z" * 3000), encode_hash(102)]
    node.append(lambda: cm.log.session_open_event(0, 1, SESSION_ID, 1, EGRESS_STREAM_ID, EGRESS_CHANNEL, b""))
    positions = [node.append(lambda r=r: cm.log.session_message_header(0, SESSION_ID, 5, r)) for r in requests]
    cm.commit(positions[9])
    responses = node.await_kv_responses(10)
    assert_stays(lambda: node.egress.poll(node._assembler.on_fragment, 100) == 0 and len(node.responses) == 10, 1.0,
                 "nothing applied past the commit position")
    cm.commit()
    responses = node.await_kv_responses(len(requests))
    expected = [decode_response(reference.apply(r)) for r in requests]
    assert responses == expected, "responses differ from the reference model applying the same log"
    assert responses[-2][1] == 2  # the fragmented 3000-byte value is over the limit: INVALID, after reassembly
    hash_before, applied = decode_hash_value(responses[-1][3])
    assert applied == len(requests) - 1

    before_action = cm.log_publication.position
    snapshot_position = action_position(before_action)
    node.append(lambda: cm.log.cluster_action_request(0, snapshot_position, 6, ENUMS["ClusterAction"]["SNAPSHOT"], 0))
    assert cm.log_publication.position == snapshot_position
    cm.commit()
    ack = node.acks(3)[2]
    assert (ack.log_position, ack.ack_id, ack.timestamp) == (snapshot_position, 2, 6)
    recording_id = ack.relevant_id
    assert recording_id >= 0 and recording_id != log_recording_id
    durations = [node.aeron.counters_reader.get_counter_value(info.counter_id)
                 for info in node.aeron.counters_reader.for_each()
                 if info.type_id == C.CLUSTERED_SERVICE_MAX_SNAPSHOT_DURATION_TYPE_ID]
    assert len(durations) == 1 and durations[0] > 0, "the container's max snapshot duration counter"
    assert cm.service_proxy.service_termination_position(snapshot_position)
    assert first.wait(30) == 0, first.tail()
    node.processes.remove(first)
    assert node.acks(4)[3].log_position == snapshot_position

    cm.recovery.close()
    cm.recovery = recovery_state.allocate(node.aeron, 0, snapshot_position, 6, CLUSTER_ID, [recording_id])
    cm.received.clear()
    node.start_container(f"{KV}:{variant}")
    (ack,) = node.acks(1, 120)
    assert (ack.log_position, ack.timestamp, ack.ack_id) == (snapshot_position, 6, 0)
    node.join(snapshot_position, 1)
    node.responses.clear()
    node.append(lambda: cm.log.session_message_header(0, SESSION_ID, 7, encode_hash(200)))
    node.append(lambda: cm.log.session_message_header(0, SESSION_ID, 7, encode_get(201, b"key-6")))
    cm.commit()
    (op, status, request_id, value), get = node.await_kv_responses(2)
    assert (op, status, request_id) == (HASH, 0, 200)
    assert decode_hash_value(value) == (reference.state_hash, len(requests)), "state hash after the snapshot load"
    assert get == (2, 0, 201, bytes([13]) * 64)
    assert node.service_errors() == []


def test_timers_go_to_the_consensus_module_and_fire_from_the_log(node):
    cm = node.cm
    node.start_container("tests.integration.cluster.services:TimerService")
    node.acks(1)
    node.join(0, 1)
    node.append(lambda: cm.log.session_open_event(0, 1, SESSION_ID, 1, EGRESS_STREAM_ID, EGRESS_CHANNEL, b""))
    node.append(lambda: cm.log.session_message_header(0, SESSION_ID, 2, b"schedule:77:5000"))
    node.append(lambda: cm.log.session_message_header(0, SESSION_ID, 3, b"cancel:78"))
    cm.commit()

    def requested():
        timers, cancels = cm.messages("ScheduleTimer"), cm.messages("CancelTimer")
        return (timers and cancels) or NotYet(f"{len(timers)} ScheduleTimer, {len(cancels)} CancelTimer")
    await_condition(requested, 60, "the timer requests", processes=node.processes)
    (timer,), (cancel,) = cm.messages("ScheduleTimer"), cm.messages("CancelTimer")
    assert (timer.correlation_id, timer.deadline, cancel.correlation_id) == (77, 5000, 78)
    node.append(lambda: cm.log.timer_event(0, 77, 5001))
    cm.commit()
    node.await_responses(1)
    assert node.responses[0].payload == b"fired:77:5001" and node.responses[0].cluster_session_id == SESSION_ID


def test_command_line_errors_are_one_line_and_exit_2(process_manager):
    for args, text in (([], "no service"), (["--service", "no.such.module:X"], "cannot be loaded"),
                       (["--service", "collections:OrderedDict"], "is not a ClusteredService")):
        process = process_manager.spawn("cli", [sys.executable, "-m", "aeron_numba.cluster.service", *args],
                                        env={"AERON_CLUSTER_SERVICE_CLASS_NAME": ""})
        assert process.wait(120) == 2, process.tail()
        lines = process.stderr().strip().splitlines()
        assert len(lines) == 1 and text in lines[0], process.stderr()


def test_sigterm_while_waiting_for_the_consensus_module_is_a_clean_exit(process_manager, aeron_dir, tmp_path):
    _, cnc = start_driver(process_manager, aeron_dir)
    cnc.close()
    process = process_manager.spawn_module(
        "service", "aeron_numba.cluster.service", "--service", f"{KV}:KeyValueService",
        env={"AERON_DIR": str(aeron_dir), "AERON_CLUSTER_DIR": str(tmp_path / "cluster")})
    process.await_output("aeron-numba clustered service", 120)
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, process.tail()
    from aeron_numba.cluster.mark_file import ClusterMarkFile

    with ClusterMarkFile.open(tmp_path / "cluster" / "cluster-mark-service-0.dat") as mark_file:
        assert mark_file.activity_timestamp == -1 and mark_file.component_type == "CONTAINER"
