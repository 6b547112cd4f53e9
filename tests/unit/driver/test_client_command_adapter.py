"""ClientCommandAdapter: decode by type id, dispatch to the conductor's on_<command>(**fields), and answer,
record and count every command that cannot be decided (spec/transport.md §11.1, §11.4)."""

from __future__ import annotations

import struct
from dataclasses import asdict

import numpy as np
import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.client_command_adapter import (
    COMMAND_BATCH_LIMIT, HANDLERS, UNSUPPORTED, ClientCommandAdapter, check_handlers,
)
from aeron_numba.driver.client_proxy import ClientProxy
from aeron_numba.driver.command_errors import ControlProtocolError
from aeron_numba.driver.system_counters import SystemCounters
from aeron_numba.errors import ConfigurationError, CountersFullError
from aeron_numba.kernels.broadcast import BroadcastReceiver, BroadcastTransmitter, CopyBroadcastReceiver
from aeron_numba.kernels.error_log import DistinctErrorLog, ErrorLogReader
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import broadcast as bl
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import ring_buffer as rl
from tests.unit.driver_support import Harness

CLIENT_ID = 7


class RecordingConductor:
    """Records the decisions it is asked for; ``fail`` makes one of them raise."""

    def __init__(self, fail: dict[str, Exception] | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.fail = fail or {}

    def on_client_command(self, client_id):
        self.calls.append(("on_client_command", {"client_id": client_id}))


def _decision(name):
    def decide(self, **fields):
        self.calls.append((name, fields))
        if name in self.fail:
            raise self.fail[name]
    decide.__name__ = name
    return decide


for _name in HANDLERS.values():
    setattr(RecordingConductor, _name, _decision(_name))


class Rig:
    """An adapter over plain buffers: the to-driver ring, the to-clients broadcast, an error log, counters."""

    def __init__(self, conductor=None):
        self.ring = ManyToOneRingBuffer(np.zeros(64 * 1024 + rl.TRAILER_LENGTH, np.uint8))
        broadcast = np.zeros(64 * 1024 + bl.TRAILER_LENGTH, np.uint8)
        self.receiver = CopyBroadcastReceiver(BroadcastReceiver(broadcast))
        self.error_buffer = np.zeros(64 * 1024, np.uint8)
        self.system_counters = SystemCounters(np.zeros(64 * cl.COUNTER_LENGTH, np.uint8))
        self.conductor = conductor or RecordingConductor()
        error_log = DistinctErrorLog(self.error_buffer, epoch_clock=lambda: 1_700_000_000_000)

        def record_error(error):  # as the driver conductor records one
            error_log.record(error)
            self.system_counters.increment(cl.ERRORS)

        self.adapter = ClientCommandAdapter(
            self.ring, self.conductor, ClientProxy(BroadcastTransmitter(broadcast)), record_error,
            self.system_counters, blocked_timeout_ns=1_000_000_000, now_ns=0)

    def responses(self) -> list[tuple[int, dc.Message]]:
        return [(t, dc.decode_response(t, body, 0, len(body))) for t, body in self.receiver.receive_messages(256)]

    def errors(self) -> list[str]:
        return [o.encoded_exception for o in ErrorLogReader.read(self.error_buffer)]


def _command(msg_type_id: int, correlation_id: int = 42) -> dc.Message:
    return dc.COMMANDS[msg_type_id](client_id=CLIENT_ID, correlation_id=correlation_id)


SAMPLE_VALUES = {dc.I16: -3, dc.U16: 3, dc.I32: 1001, dc.I64: 5, dc.STR: "aeron:ipc?term-length=64k", dc.BYTES: b"key"}


@pytest.mark.parametrize("msg_type_id", sorted(HANDLERS))
def test_each_command_reaches_its_decision_with_the_decoded_fields(msg_type_id):
    rig = Rig()
    message_class = dc.COMMANDS[msg_type_id]
    fields = {name: SAMPLE_VALUES[kind] for name, kind in message_class.SCHEMA}
    message = message_class(**{**fields, "client_id": CLIENT_ID, "correlation_id": 42})
    assert rig.ring.write(msg_type_id, message.encode())
    assert rig.adapter.receive() == 1
    assert rig.conductor.calls == [("on_client_command", {"client_id": CLIENT_ID}),
                                   (HANDLERS[msg_type_id], asdict(message))]
    assert rig.responses() == [] and rig.errors() == []  # answering is the decision's job
    assert rig.system_counters.get(cl.ERRORS) == 0


def test_a_malformed_command_is_answered_logged_and_counted_and_never_reaches_the_conductor():
    rig = Rig()
    body = struct.pack("<qqii", CLIENT_ID, 99, 1001, 0x01010101)  # channel length: past the end
    assert rig.ring.write(cp.ADD_PUBLICATION, body)
    rig.adapter.receive()
    assert rig.conductor.calls == []
    (response_type, error), = rig.responses()
    assert response_type == cp.ON_ERROR and error.error_code == cp.MALFORMED_COMMAND
    assert error.offending_command_correlation_id == 99
    assert "PublicationMessage" in error.error_message and "runs past the message end" in error.error_message
    (logged,) = rig.errors()
    assert "ControlProtocolError" in logged and error.error_message in logged
    assert rig.system_counters.get(cl.ERRORS) == 1


def test_a_command_too_short_for_a_correlation_id_is_answered_with_minus_one():
    rig = Rig()
    assert rig.ring.write(cp.REMOVE_COUNTER, b"\x05" * 10)
    rig.adapter.receive()
    (_, error), = rig.responses()
    assert (error.error_code, error.offending_command_correlation_id) == (cp.MALFORMED_COMMAND, -1)
    assert rig.conductor.calls == []


def test_an_unknown_type_id_is_answered_logged_and_counted():
    rig = Rig()
    assert rig.ring.write(0x77, struct.pack("<qq", CLIENT_ID, 5))
    rig.adapter.receive()
    (response_type, error), = rig.responses()
    assert response_type == cp.ON_ERROR and error.error_code == cp.UNKNOWN_COMMAND_TYPE_ID
    assert (error.offending_command_correlation_id, error.error_message) == (5, "command typeId=119 unknown")
    assert rig.conductor.calls == [] and len(rig.errors()) == 1 and rig.system_counters.get(cl.ERRORS) == 1


@pytest.mark.parametrize("msg_type_id", sorted(UNSUPPORTED))
def test_a_command_the_driver_does_not_implement_is_answered_not_supported(msg_type_id):
    rig = Rig()
    assert rig.ring.write(msg_type_id, _command(msg_type_id, correlation_id=8).encode())
    rig.adapter.receive()
    (response_type, error), = rig.responses()
    assert response_type == cp.ON_ERROR and error.error_code == cp.NOT_SUPPORTED
    assert error.error_message == f"command typeId={msg_type_id} not supported by this driver"
    assert error.offending_command_correlation_id == 8
    # It still proves its client alive (as before the split), and no decision is asked for.
    assert rig.conductor.calls == [("on_client_command", {"client_id": CLIENT_ID})]
    assert len(rig.errors()) == 1 and rig.system_counters.get(cl.ERRORS) == 1


@pytest.mark.parametrize("exc, code", [
    (ControlProtocolError(cp.UNKNOWN_PUBLICATION, "unknown publication client_id=7 registration_id=3"),
     cp.UNKNOWN_PUBLICATION),
    (CountersFullError("Max counter id (9) exceeded"), cp.GENERIC_ERROR),  # ENOMEM in Aeron's C driver
    (ConfigurationError("term-length=1000 is not a power of 2"), cp.INVALID_CHANNEL),
    (OSError(28, "No space left on device"), cp.STORAGE_SPACE),
    (OSError(13, "Permission denied"), cp.GENERIC_ERROR),  # only ENOSPC is STORAGE_SPACE, as in Aeron
    (RuntimeError("a bug"), cp.GENERIC_ERROR),
])
def test_a_decision_that_raises_is_answered_with_its_code_and_the_next_command_is_served(exc, code):
    rig = Rig(RecordingConductor(fail={"on_remove_publication": exc}))
    assert rig.ring.write(cp.REMOVE_PUBLICATION, dc.RemoveMessage(CLIENT_ID, 11, 3).encode())
    assert rig.ring.write(cp.CLIENT_KEEPALIVE, dc.CorrelatedMessage(CLIENT_ID, 12).encode())
    assert rig.adapter.receive() == 2
    (response_type, error), = rig.responses()
    assert (response_type, error.error_code, error.offending_command_correlation_id) == (cp.ON_ERROR, code, 11)
    assert error.error_message == str(exc)
    assert [name for name, _ in rig.conductor.calls] == [
        "on_client_command", "on_remove_publication", "on_client_command", "on_client_keepalive"]
    assert len(rig.errors()) == 1 and rig.system_counters.get(cl.ERRORS) == 1


def test_a_client_whose_first_command_cannot_get_a_heartbeat_counter_is_answered():
    class Full(RecordingConductor):
        def on_client_command(self, client_id):
            raise CountersFullError("counters full")

    rig = Rig(Full())
    assert rig.ring.write(cp.CLIENT_KEEPALIVE, dc.CorrelatedMessage(CLIENT_ID, 12).encode())
    rig.adapter.receive()
    (_, error), = rig.responses()
    assert error.error_code == cp.GENERIC_ERROR and rig.conductor.calls == []


def test_garbage_where_a_record_header_should_be_is_skipped_recorded_and_counted():
    rig = Rig()
    assert rig.ring.write(cp.CLIENT_KEEPALIVE, dc.CorrelatedMessage(CLIENT_ID, 1).encode())
    assert rig.ring.write(cp.CLIENT_CLOSE, dc.CorrelatedMessage(CLIENT_ID, 2).encode())
    rig.ring.buffer[0:4].view(np.int32)[0] = 3  # the first record's length: shorter than a header
    assert rig.adapter.receive() == 1
    assert rig.conductor.calls == []
    assert rig.system_counters.get(cl.UNBLOCKED_COMMANDS) == 1 and rig.system_counters.get(cl.ERRORS) == 1
    (logged,) = rig.errors()
    assert f"to-driver buffer: corrupt record header (status {rl.CORRUPT_RECORD}) at position 0;" \
           " skipped 24 bytes to the next record" in logged
    rig.adapter.receive()
    assert [name for name, _ in rig.conductor.calls] == ["on_client_command", "on_client_close"]
    assert rig.responses() == []


def test_a_receive_takes_at_most_a_batch():
    rig = Rig()
    for correlation_id in range(COMMAND_BATCH_LIMIT + 6):
        assert rig.ring.write(cp.CLIENT_KEEPALIVE, dc.CorrelatedMessage(CLIENT_ID, correlation_id).encode())
    assert rig.adapter.receive() == COMMAND_BATCH_LIMIT
    assert rig.adapter.receive() == 6
    assert rig.adapter.receive() == 0


# ------------------------------------------------------------------------------------ completeness check


def test_the_driver_conductor_decides_or_refuses_every_command_of_the_schema(shm_dir):
    harness = Harness(shm_dir / "aeron")  # constructing the conductor runs the check
    try:
        handlers = check_handlers(harness.conductor)
        assert set(handlers) | UNSUPPORTED == set(dc.COMMANDS) and not set(handlers) & UNSUPPORTED
        assert all(handler.__self__ is harness.conductor for handler in handlers.values())
    finally:
        harness.close()


def test_a_conductor_missing_a_decision_is_refused_at_construction():
    class Incomplete(RecordingConductor):
        on_remove_counter = None

    with pytest.raises(ConfigurationError, match="Incomplete has no method on_remove_counter for command typeId=10"):
        Rig(Incomplete())


def test_a_decision_that_does_not_take_the_decoded_fields_is_refused():
    class WrongSignature(RecordingConductor):
        def on_add_counter(self, client_id, correlation_id, label):  # type_id and key forgotten
            pass

    with pytest.raises(ConfigurationError, match=r"WrongSignature.on_add_counter does not take the fields of"
                                                 r" CounterMessage"):
        Rig(WrongSignature())


def test_a_command_neither_handled_nor_unsupported_is_refused():
    handlers = {k: v for k, v in HANDLERS.items() if k != cp.TERMINATE_DRIVER}
    with pytest.raises(ConfigurationError, match="command typeId=14 .TerminateDriverMessage. is neither handled"):
        check_handlers(RecordingConductor(), handlers, UNSUPPORTED)
    with pytest.raises(ConfigurationError, match=r"type ids \[15\] are both handled and unsupported"):
        check_handlers(RecordingConductor(), {**HANDLERS, cp.ADD_STATIC_COUNTER: "on_add_counter"}, UNSUPPORTED)
    with pytest.raises(ConfigurationError, match=r"type ids \[119\] are not commands"):
        check_handlers(RecordingConductor(), {**HANDLERS, 0x77: "on_add_counter"}, UNSUPPORTED)


@pytest.mark.parametrize("msg_type_id, decision", [(cp.ADD_RCV_DESTINATION, "on_add_rcv_destination"),
                                                   (cp.REMOVE_RCV_DESTINATION, "on_remove_rcv_destination")])
def test_receive_destination_commands_reach_their_decisions(msg_type_id, decision):
    rig = Rig()
    message = dc.DestinationMessage(client_id=CLIENT_ID, correlation_id=42, registration_correlation_id=9,
                                    channel="aeron:udp?endpoint=127.0.0.1:40123")
    assert rig.ring.write(msg_type_id, message.encode())
    rig.adapter.receive()
    assert rig.conductor.calls[1:] == [(decision, {
        "client_id": CLIENT_ID, "correlation_id": 42, "registration_correlation_id": 9,
        "channel": "aeron:udp?endpoint=127.0.0.1:40123"})]
    assert rig.responses() == [] and rig.errors() == []
