"""The container's agent driven step by step: a test plays the consensus module over the scripted IPC driver
(``support.py``) and checks what a service and a consensus module depend on: recovery and its ack, joining the log,
callbacks in log order and never past the commit position, fragmented messages reassembled, the Cluster API's
messages on the consensus module stream, replies only from the leader, acks on request, termination, and errors
counted without stopping the service."""

from __future__ import annotations

import time

import numpy as np
import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.examples.key_value_service import (
    CompiledKeyValueService,
    KeyValueService,
    decode_response,
    encode_delete,
    encode_get,
    encode_put,
)
from aeron_numba.cluster.service.clustered_service import MOCKED_OFFER, CloseReason, Role
from aeron_numba.cluster.service.clustered_service_agent import ClusterTerminationException
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels.network_stages import run_stages
from harness.awaiting import await_condition
from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.kernels import idle_wait as iw
from aeron_numba.client import FragmentAssembler
from aeron_numba.layout.bits import NULL_VALUE
from tests.unit.client_support import FakeDriver, connect
from tests.unit.cluster.service.support import (
    SERVICE_ID,
    ConsensusModuleStandIn,
    RecordingService,
    make_agent,
    run_until,
)

EGRESS_CHANNEL = "aeron:ipc?term-length=64k"
EGRESS_STREAM_ID = 102


@pytest.fixture
def node(tmp_path):
    driver = FakeDriver(tmp_path / "aeron")
    aeron, client_errors = connect(driver)
    yield driver, aeron
    aeron.close()
    driver.close()
    assert not client_errors


def started(aeron, service, errors=None, **cm_options):
    cm = ConsensusModuleStandIn(aeron, **cm_options)
    agent = make_agent(aeron, service, errors=errors)
    agent.on_start()
    return cm, agent


def joined(aeron, service, role=Role.LEADER, errors=None):
    cm, agent = started(aeron, service, errors)
    cm.join_log(role=role)
    run_until(agent, lambda: len(cm.messages("ServiceAck")) == 2, "the join's ServiceAck")
    return cm, agent


def test_recovery_acks_with_the_recovery_state_and_the_aeron_client_id(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = started(aeron, service, log_position=0, timestamp=1234)
    assert service.events == [("start", None)]
    (ack,) = cm.messages("ServiceAck")
    assert (ack.log_position, ack.timestamp, ack.ack_id, ack.relevant_id, ack.service_id) == \
        (0, 1234, 0, aeron.client_id, SERVICE_ID)
    assert agent.time() == 1234 and agent.log_position() == 0 and agent.role() == Role.FOLLOWER


def test_join_log_acks_takes_the_role_and_hands_over_the_log_in_order_up_to_the_commit_position(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    acks = cm.messages("ServiceAck")
    assert (acks[1].log_position, acks[1].ack_id, acks[1].relevant_id) == (0, 1, NULL_VALUE)
    assert service.events[-1] == ("role", Role.LEADER) and agent.role() == Role.LEADER and agent.member_id() == 0
    log = cm.log
    assert log.new_leadership_term_event(7, 0, 10, 0, 0, cm.log_publication.session_id, int(ClusterTimeUnit.NANOS), 0)
    assert log.session_open_event(7, 99, 5, 11, EGRESS_STREAM_ID, EGRESS_CHANNEL, b"me")
    assert log.session_message_header(7, 5, 12, b"first")
    first_end = cm.log_publication.position
    assert log.timer_event(7, 42, 13)
    assert log.session_message_header(7, 5, 14, b"second")
    assert log.session_close_event(7, 5, 15, int(CloseReason.CLIENT_ACTION))
    del service.events[:]
    cm.commit(first_end)
    run_until(agent, lambda: len(service.events) >= 3, "three callbacks")
    for _ in range(20):
        agent.do_work()
    assert [e[0] for e in service.events] == ["new_term", "open", "message"], "read past the commit position"
    assert service.events[0] == ("new_term", 7, 0, 10, ClusterTimeUnit.NANOS)
    assert service.events[1] == ("open", 5, 11, EGRESS_CHANNEL, b"me")
    assert service.events[2] == ("message", 5, 12, b"first", first_end)
    assert agent.log_position() == first_end and agent.time() == 12
    cm.commit()
    run_until(agent, lambda: len(service.events) == 6, "the rest of the log")
    assert service.events[3:] == [("timer", 42, 13), ("message", 5, 14, b"second", service.events[4][4]),
                                  ("close", 5, 15, CloseReason.CLIENT_ACTION)]
    assert agent.log_position() == cm.log_publication.position and agent.time() == 15
    assert agent.client_sessions() == [] and agent.time_unit() == ClusterTimeUnit.NANOS


def test_an_idle_container_waits_on_the_logs_next_frame_only_below_the_commit_position(node, monkeypatch):
    """The log reaches a member before its commit does: a frame past the commit position is read once the commit
    moves, so it is no work, and a container woken for it would run a cycle for nothing."""
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    monkeypatch.setattr(agent, "_nano_clock", time.monotonic_ns)  # a watch needs the clock a compiled wait reads
    image = agent.log_adapter.image

    def named() -> set[int]:
        watch = IdleWatch()
        assert agent.add_idle_watch(watch)
        watch.snapshot()
        return set(watch.addresses.tolist())

    assert cm.log.session_message_header(7, 5, 12, b"uncommitted")
    next_frame = image.log_buffer.ctypes.data + iw.SLOTS_TAG  # the log's slots, watched at the image's position
    assert next_frame not in named()  # written, not committed: the commit position is what it waits on
    cm.commit()
    assert next_frame in named()  # committed, not read yet: the frame is work
    run_until(agent, lambda: agent.log_position() == cm.log_publication.position, "the committed message")
    assert service.events[-1][3] == b"uncommitted"


def test_fragmented_session_message_is_reassembled(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    payload = np.random.default_rng(3).integers(0, 256, 6_000, dtype=np.uint8).tobytes()
    assert cm.log.session_message_header(0, 77, 5, payload)
    assert cm.log.session_message_header(0, 77, 6, b"after")
    assert cm.log_publication.position > len(payload) + 2 * 32
    cm.commit()
    run_until(agent, lambda: len([e for e in service.events if e[0] == "message"]) == 2, "two messages")
    messages = [e for e in service.events if e[0] == "message"]
    assert messages[0][3] == payload and messages[1][3] == b"after"


def test_cluster_api_goes_to_the_consensus_module_stream(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    assert cm.log.session_open_event(0, 1, 9, 0, EGRESS_STREAM_ID, EGRESS_CHANNEL, b"")
    cm.commit()
    run_until(agent, lambda: agent.get_client_session(9) is not None, "session 9 open")
    assert agent.schedule_timer(1001, 5000)
    assert agent.cancel_timer(1002)
    assert agent.offer(b"to-the-cluster") > 0
    assert agent.close_client_session(9) and agent.get_client_session(9).is_closing
    assert agent.close_client_session(9)  # already closing: nothing more is sent
    with pytest.raises(ClusterError, match="unknown clusterSessionId: 404"):
        agent.close_client_session(404)
    run_until(agent, lambda: len(cm.messages("CloseSession")) == 1, "CloseSession")
    (timer,) = cm.messages("ScheduleTimer")
    (cancel,) = cm.messages("CancelTimer")
    (message,) = cm.messages("SessionMessageHeader")
    assert (timer.correlation_id, timer.deadline, cancel.correlation_id) == (1001, 5000, 1002)
    assert (message.cluster_session_id, message.payload) == (SERVICE_ID, b"to-the-cluster")
    assert len(cm.messages("CloseSession")) == 1 and cm.messages("CloseSession")[0].cluster_session_id == 9


def test_only_the_leader_replies_to_clients(node):
    _, aeron = node
    egress = aeron.add_subscription(EGRESS_CHANNEL, EGRESS_STREAM_ID)
    replies = []
    assembler = FragmentAssembler(lambda b, o, n, h: replies.append(CLUSTER.decode(b, o, n)))
    for role, expected in ((Role.FOLLOWER, MOCKED_OFFER), (Role.LEADER, None)):
        service = RecordingService()
        cm, agent = joined(aeron, service, role=role)
        assert cm.log.session_open_event(3, 1, 21, 0, EGRESS_STREAM_ID, EGRESS_CHANNEL, b"")
        cm.commit()
        run_until(agent, lambda: agent.get_client_session(21) is not None, "session open")
        session = agent.get_client_session(21)
        if expected is not None:
            assert session.offer(b"reply") == expected and session.response_publication is None
        else:
            run_until(agent, lambda: session.response_publication.is_connected, "egress connected")
            assert session.offer(b"reply") > 0
            run_until(agent, lambda: egress.poll(assembler.on_fragment, 10) or replies, "the reply")
            assert (replies[0].cluster_session_id, replies[0].payload) == (21, b"reply")
        agent.on_close()


def test_callbacks_may_not_send_from_on_role_change(node):
    _, aeron = node
    service = RecordingService()
    errors: list = []
    failures = []

    def try_send():
        try:
            service.cluster.schedule_timer(1, 1)
        except ClusterError as exc:
            failures.append(str(exc))

    service.on_role_change_action = try_send
    joined(aeron, service, errors=errors)
    assert failures == ["sending messages or scheduling timers is not allowed from onRoleChange"]


def test_requested_ack_and_termination(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    assert cm.log.session_message_header(0, 1, 1, b"x")
    end = cm.commit()
    assert cm.service_proxy.request_service_ack(end)
    run_until(agent, lambda: len(cm.messages("ServiceAck")) == 3, "the requested ack")
    ack = cm.messages("ServiceAck")[2]
    assert (ack.log_position, ack.ack_id, ack.relevant_id) == (end, 2, NULL_VALUE)
    assert cm.service_proxy.service_termination_position(end)
    with pytest.raises(ClusterTerminationException) as raised:
        run_until(agent, lambda: False, "termination")
    assert raised.value.is_expected and service.events[-1] == ("terminate",)
    final = cm.messages("ServiceAck")[-1]
    assert (final.log_position, final.ack_id) == (end, 3)


def test_a_malformed_log_entry_and_a_failing_callback_are_counted_and_the_log_goes_on(node):
    _, aeron = node
    errors: list = []

    class Failing(RecordingService):
        def on_timer_event(self, correlation_id, timestamp):
            raise RuntimeError("service bug")

    service = Failing()
    cm, agent = joined(aeron, service, errors=errors)
    assert cm.log_publication.offer(b"\x08\x00\x01\x00\x63\x00\x01\x00garbage!") > 0  # schema 99
    assert cm.log.timer_event(0, 5, 1)
    assert cm.log.session_message_header(0, 1, 2, b"still here")
    cm.commit()

    def step():
        try:
            return agent.do_work()
        except RuntimeError as exc:  # what the runner would count
            errors.append(exc)
            return 1

    from harness.awaiting import await_condition
    await_condition(lambda: any(e[0] == "message" for e in service.events), 10, "the message after", work=step)
    assert any("expected schemaId=111, actual=99" in str(e) for e in errors)
    assert any("service bug" in str(e) for e in errors)


def test_join_at_another_position_than_the_log_is_refused(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = started(aeron, service)
    aeron.add_subscription(cm.log_publication.channel, cm.log_publication.stream_id)  # as the archive's recording
    run_until(agent, lambda: cm.log_publication.is_connected, "log publication connected")
    assert cm.log.session_message_header(0, 1, 1, b"before the join")
    cm.join_log()
    with pytest.raises(ClusterError, match="Cluster log must be contiguous for joining image"):
        run_until(agent, lambda: False, "join")


# The compiled service polls through image.compiled(), whose methods are Numba overloads (no JIT, no handles).
@pytest.mark.parametrize("service_class", [KeyValueService,
                                           pytest.param(CompiledKeyValueService, marks=pytest.mark.requires_jit)])
def test_key_value_service_applies_the_log_and_the_leader_answers(node, service_class):
    _, aeron = node
    egress = aeron.add_subscription(EGRESS_CHANNEL, EGRESS_STREAM_ID)
    responses = []
    assembler = FragmentAssembler(lambda b, o, n, h: responses.append(CLUSTER.decode(b, o, n)))
    service = service_class(capacity=64)
    cm, agent = joined(aeron, service)
    assert agent.log_adapter.is_compiled == (service_class is CompiledKeyValueService)
    assert cm.log.session_open_event(0, 1, 8, 0, EGRESS_STREAM_ID, EGRESS_CHANNEL, b"")
    cm.commit()
    run_until(agent, lambda: agent.get_client_session(8) is not None, "session open")
    run_until(agent, lambda: agent.get_client_session(8).response_publication.is_connected, "egress connected")
    big = bytes(range(256))
    requests = [encode_put(1, b"k1", b"v" * 64), encode_get(2, b"k1"), encode_put(3, b"k2", big), encode_get(4, b"k2"),
                encode_delete(5, b"k1"), encode_get(6, b"k1"), encode_get(7, b"x" * 65),
                encode_put(8, b"big", b"z" * 3000)]  # fragmented in the log: the Python path, then the handler
    for request in requests:
        assert cm.log.session_message_header(0, 8, 100, request)
    cm.commit()
    def all_responses():
        egress.poll(assembler.on_fragment, 10)
        return len(responses) >= len(requests)

    run_until(agent, all_responses, "all responses")
    decoded = [decode_response(r.payload) for r in responses]
    assert [(op, status, request_id) for op, status, request_id, _ in decoded] == \
        [(1, 0, 1), (2, 0, 2), (1, 0, 3), (2, 0, 4), (3, 0, 5), (2, 1, 6), (2, 2, 7), (1, 2, 8)]
    assert decoded[1][3] == b"v" * 64 and decoded[3][3] == big
    assert all(r.cluster_session_id == 8 and r.timestamp == 100 for r in responses)
    reference = KeyValueService(capacity=64)
    for request in requests:
        reference.apply(request)
    assert service.state_hash == reference.state_hash and dict(service.entries()) == {b"k2": big}


@pytest.mark.requires_jit  # the stage reads through image.compiled()
def test_a_compiled_services_log_is_read_in_the_drivers_stretch_between_container_cycles(node, monkeypatch):
    """With the driver on its thread (``use_network_stages``), a commit reaches the handler and its replies the
    egress from the network cycles' stages alone; the container runs again only for what the stage stops
    before (a log event other than a session message), woken by the stage's on word."""
    _, aeron = node
    egress = aeron.add_subscription(EGRESS_CHANNEL, EGRESS_STREAM_ID)
    responses = []
    assembler = FragmentAssembler(lambda b, o, n, h: responses.append(CLUSTER.decode(b, o, n)))
    service = CompiledKeyValueService(capacity=64)
    stages = NetworkStages()
    cm, agent = started(aeron, service)
    agent.use_network_stages(stages)
    cm.join_log()
    run_until(agent, lambda: len(cm.messages("ServiceAck")) == 2, "the join's ServiceAck")
    assert cm.log.session_open_event(0, 1, 8, 0, EGRESS_STREAM_ID, EGRESS_CHANNEL, b"")
    cm.commit()
    run_until(agent, lambda: agent.get_client_session(8) is not None
              and agent.get_client_session(8).response_publication.is_connected, "egress connected")
    agent.do_work()
    assert agent.log_stage.is_running
    monkeypatch.setattr(agent, "_nano_clock", time.monotonic_ns)  # a watch needs the clock a compiled wait reads
    watch = IdleWatch()
    assert agent.add_idle_watch(watch)
    watch.snapshot()
    requests = [encode_put(1, b"k1", b"v" * 64), encode_get(2, b"k1")]
    for request in requests:
        assert cm.log.session_message_header(0, 8, 100, request)
    cm.commit()

    def stretch_answers(count: int):
        def answered() -> bool:
            run_stages(stages.table, len(stages))  # the driver's stretch only: no container cycle
            egress.poll(assembler.on_fragment, 10)
            return len(responses) >= count
        return answered

    await_condition(stretch_answers(2), 10, "the answers")
    assert [decode_response(r.payload)[:3] for r in responses] == [(1, 0, 1), (2, 0, 2)]
    assert not watch.changed(), "the container's watch did not fire: nothing was left for it"
    assert agent.log_position() == cm.log_publication.position and agent.time() == 100
    assert cm.log.timer_event(0, 42, 120)
    assert cm.log.session_message_header(0, 8, 130, encode_get(3, b"k1"))
    cm.commit()
    run_stages(stages.table, len(stages))
    assert not agent.log_stage.is_running and watch.changed()  # stopped before the timer: the container's
    agent.do_work()  # the timer event, then the stage on again for the message after it
    assert agent.log_stage.is_running and agent.time() == 120
    await_condition(stretch_answers(3), 10, "the third answer")
    assert decode_response(responses[2].payload)[:3] == (2, 0, 3) and agent.time() == 130


def test_try_claim_to_the_cluster_puts_the_session_header_first(node):
    _, aeron = node
    service = RecordingService()
    cm, agent = joined(aeron, service)
    claim = agent.try_claim(5)
    assert not isinstance(claim, int)
    claim.buffer[claim.offset + 32:claim.offset + 37] = np.frombuffer(b"hello", dtype=np.uint8)
    claim.commit()
    run_until(agent, lambda: cm.messages("SessionMessageHeader"), "the claimed message")
    (message,) = cm.messages("SessionMessageHeader")
    assert (message.cluster_session_id, message.payload) == (SERVICE_ID, b"hello")


class MarkFile:
    def __init__(self):
        self.touched = []

    def update_activity_timestamp(self, now_ms):
        self.touched.append(now_ms)


def test_mark_file_touched_once_a_second_and_a_closed_commit_counter_terminates(node):
    from aeron_numba.agent import NoOpIdleStrategy
    from aeron_numba.cluster.context import ClusteredServiceContext
    from aeron_numba.cluster.service.clustered_service_agent import ClusteredServiceAgent
    from tests.unit.cluster.service.support import Clock

    _, aeron = node
    cm = ConsensusModuleStandIn(aeron)
    now_ms = [5_000]
    mark_file, errors = MarkFile(), []
    agent = ClusteredServiceAgent(ClusteredServiceContext().conclude(), RecordingService(), aeron,
                                  error_handler=errors.append, archive_connect=lambda: None,
                                  idle_strategy=NoOpIdleStrategy(), nano_clock=Clock(),
                                  epoch_clock_ms=lambda: now_ms[0], mark_file=mark_file)
    agent.on_start()
    agent.do_work()
    touched = len(mark_file.touched)
    assert mark_file.touched[-1] == 5_000
    for step in (400, 400, 199):
        now_ms[0] += step
        agent.do_work()
    assert len(mark_file.touched) == touched, "touched again before a second passed"
    now_ms[0] += 1
    agent.do_work()
    assert mark_file.touched[-1] == 6_000
    cm.commit_position.close()
    with pytest.raises(ClusterTerminationException):
        run_until(agent, lambda: False, "termination on the commit counter's close")
    assert any("commit-pos counter unexpectedly closed" in str(e) for e in errors)
