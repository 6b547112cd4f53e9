"""A single-member consensus module process (``cm_worker``) beside a media driver and an archive, with this test
as its clustered service (the generated ServiceProxy/ConsensusModuleProxy streams 104/105) and as a client (the
generated IngressProxy and an egress subscription): it waits for the service's start ack, elects itself, records
the log and sends JoinLog; a client's connect is opened in the log before the client hears OK; the client's
message follows it in the log under the leader's term; the commit position counter reaches the end of the log;
recording.log holds the term; a second consensus module on the same cluster dir is refused while the first lives;
SIGTERM stops it cleanly (exit 0, activity timestamp -1)."""

from __future__ import annotations

import signal
import time

import pytest

from aeron_numba.client import Aeron, Context
from aeron_numba.client.fragment_assembler import FragmentAssembler
from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import ConsensusModuleProxy, IngressProxy
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS, udp_settings_for_tests
from tests.integration.driver_processes import start_driver
from tests.integration.test_udp_pubsub import free_udp_port

pytestmark = pytest.mark.slow  # a driver, an archive and a consensus module loading their kernels on two cores

DRIVER_ENV = dict(udp_settings_for_tests(term_buffer_length="64k", liveness_timeout="3s"), **LENIENT_CLIENT_TIMEOUTS)
START_S = 180.0
WAIT_S = 60.0
CONTROL = "aeron:ipc?term-length=128k"


def decoded(subscription, into: list, limit: int = 10) -> int:
    assembler = FragmentAssembler(lambda buffer, offset, length, header: into.append(
        CLUSTER.decode(buffer, offset, length)))
    return subscription.poll(assembler.on_fragment, limit)


def counter_value(aeron, type_id: int) -> int | None:
    for info in aeron.counters_reader.for_each():
        if info.type_id == type_id:
            return info.value
    return None


def test_a_single_member_consensus_module_serves_a_client_and_its_service(process_manager, aeron_dir, tmp_path):
    start_driver(process_manager, aeron_dir, name="driver", timeout_s=START_S, **DRIVER_ENV)[1].close()
    archive = process_manager.spawn_module(
        "archive", "aeron_numba.archive", "--archive-dir", str(tmp_path / "archive"),
        env={"AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "64k",
             "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k", "AERON_ARCHIVE_IDLE_STRATEGY": "backoff"})
    archive.await_output("aeron-numba archive", START_S)
    ports = [free_udp_port() for _ in range(5)]
    cluster_dir = tmp_path / "cluster"
    cm_env = {"AERON_DIR": str(aeron_dir), "AERON_CLUSTER_DIR": str(cluster_dir),
              "AERON_CLUSTER_MEMBERS": "0," + ",".join(f"127.0.0.1:{p}" for p in ports),
              "AERON_CLUSTER_INGRESS_CHANNEL": "aeron:udp?term-length=64k",
              "AERON_CLUSTER_LOG_CHANNEL": "aeron:udp?term-length=64k",
              "AERON_CLUSTER_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0",
              "AERON_CLUSTER_IDLE_STRATEGY": "backoff", "AERON_CLUSTER_SESSION_TIMEOUT": "30s"}
    cm = process_manager.spawn_module("cm", "tests.integration.cluster.cm_worker", env=cm_env)
    cm.await_output("consensus module ready", START_S)
    aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
    try:
        # ------------------------------------------------------------------ the service's side
        to_service = aeron.add_subscription(CONTROL, 104)
        to_cm = aeron.add_exclusive_publication(CONTROL, 105)
        service = ConsensusModuleProxy(to_cm)
        await_condition(lambda: to_cm.is_connected, WAIT_S, "the consensus module's stream 105", processes=[cm])
        # a service starts once the recovery state is published (its ack before would be of an unknown position)
        await_condition(lambda: counter_value(aeron, C.RECOVERY_STATE_TYPE_ID) is not None, WAIT_S,
                        "the recovery state counter", processes=[cm])
        assert service.service_ack(0, 0, 0, aeron.client_id, 0)
        from_cm: list = []
        await_condition(lambda: decoded(to_service, from_cm) or from_cm, WAIT_S, "JoinLog", processes=[cm])
        join = from_cm[0]
        assert type(join).__name__ == "JoinLog"
        assert (join.log_position, join.role, join.is_startup, join.member_id) == (0, 2, 1, 0)
        assert join.log_channel.startswith("aeron-spy:aeron:udp?tags=")
        log = aeron.add_subscription(join.log_channel, join.log_stream_id)
        assert service.service_ack(join.log_position, 0, 1, aeron.client_id, 0)
        await_condition(lambda: counter_value(aeron, C.ELECTION_STATE_TYPE_ID) == int(C.ElectionState.CLOSED),
                        WAIT_S, "the election to close", processes=[cm])
        assert counter_value(aeron, C.NODE_ROLE_TYPE_ID) == int(C.ClusterRole.LEADER)
        assert counter_value(aeron, C.CONSENSUS_MODULE_STATE_TYPE_ID) == int(C.ConsensusModuleState.ACTIVE)

        # ------------------------------------------------------------------ a client
        egress_channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
        egress = aeron.add_subscription(egress_channel, 102)
        ingress = aeron.add_exclusive_publication(f"aeron:udp?endpoint=127.0.0.1:{ports[0]}|term-length=64k", 101)
        await_condition(lambda: ingress.is_connected, WAIT_S, "ingress", processes=[cm])
        client = IngressProxy(ingress)
        assert client.session_connect_request(77, 102, C.CLIENT_PROTOCOL_SEMANTIC_VERSION, egress_channel, b"")
        events: list = []
        await_condition(lambda: decoded(egress, events) or events, WAIT_S, "SessionEvent", processes=[cm])
        opened = events[0]
        assert (type(opened).__name__, opened.code, opened.correlation_id, opened.leader_member_id) == \
            ("SessionEvent", 0, 77, 0)
        assert client.session_message_header(opened.leadership_term_id, opened.cluster_session_id, 0, b"hello")
        logged: list = []
        await_condition(lambda: decoded(log, logged) and len(logged) >= 3, WAIT_S, "the log", processes=[cm])
        assert [type(m).__name__ for m in logged] == ["NewLeadershipTermEvent", "SessionOpenEvent",
                                                      "SessionMessageHeader"]
        assert logged[1].cluster_session_id == opened.cluster_session_id and logged[1].correlation_id == 77
        message = logged[2]
        assert (message.leadership_term_id, message.cluster_session_id, bytes(message.payload)) == \
            (opened.leadership_term_id, opened.cluster_session_id, b"hello")
        assert abs(message.timestamp - time.time() * 1000) < 60_000  # cluster time in ms
        await_condition(lambda: counter_value(aeron, C.COMMIT_POSITION_TYPE_ID) == log.images[0].position,
                        WAIT_S, "the commit position at the end of the log", processes=[cm])
        with RecordingLog(cluster_dir, read_only=True) as recording_log:
            term = recording_log.find_term_entry(opened.leadership_term_id)
            assert term is not None and term.term_base_log_position == 0

        # ------------------------------------------------------------------ one consensus module per cluster dir
        second = process_manager.spawn_module("cm-2", "tests.integration.cluster.cm_worker", env=cm_env)
        assert second.wait(START_S) != 0
        assert "active mark file detected" in second.stderr()
    finally:
        aeron.close()
    cm.send_signal(signal.SIGTERM, group=False)
    assert cm.wait(WAIT_S) == 0
    with ClusterMarkFile.open(cluster_dir / C.MARK_FILE) as mark_file:
        assert mark_file.activity_timestamp == -1
