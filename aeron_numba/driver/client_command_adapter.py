"""Reads client commands from the to-driver ring buffer and hands them to the conductor (Aeron's
``ClientCommandAdapter``, spec/transport.md §7, §11.1).

Each record is decoded by its type id with the one schema in ``codecs/driver_commands.py`` and the conductor's
``on_<command>(**fields)`` is called with the decoded fields as keyword arguments, so each decision's signature
says what it uses, is found by grep, and a unit test calls it with plain values, without building bytes.

Every failure is answered here with ON_ERROR and Aeron's §11.4 code, recorded in the distinct error log and
counted in ERRORS: an unknown type id (UNKNOWN_COMMAND_TYPE_ID), a record that does not decode
(MALFORMED_COMMAND; it never reaches the conductor), a command this driver does not implement (NOT_SUPPORTED),
and a decision that raised (its code, see ``command_errors.error_code_of``). Unreadable bytes at the head of
the buffer are padded over by the ring buffer and recorded too; the adapter never stops for another process's
bad input.
"""

from __future__ import annotations

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.codecs.dispatch import call_mismatch
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels.ring_buffer import HeadRepair, ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl

from aeron_numba.driver.client_proxy import ClientProxy
from aeron_numba.driver.command_errors import ControlProtocolError, error_code_of

COMMAND_BATCH_LIMIT = 64

#: Command type id -> the conductor method that decides it.
HANDLERS: dict[int, str] = {
    cp.ADD_PUBLICATION: "on_add_publication",
    cp.ADD_EXCLUSIVE_PUBLICATION: "on_add_exclusive_publication",
    cp.REMOVE_PUBLICATION: "on_remove_publication",
    cp.ADD_SUBSCRIPTION: "on_add_subscription",
    cp.REMOVE_SUBSCRIPTION: "on_remove_subscription",
    cp.CLIENT_KEEPALIVE: "on_client_keepalive",
    cp.CLIENT_CLOSE: "on_client_close",
    cp.ADD_COUNTER: "on_add_counter",
    cp.REMOVE_COUNTER: "on_remove_counter",
    cp.ADD_DESTINATION: "on_add_destination",
    cp.REMOVE_DESTINATION: "on_remove_destination",
    cp.ADD_RCV_DESTINATION: "on_add_rcv_destination",
    cp.REMOVE_RCV_DESTINATION: "on_remove_rcv_destination",
    cp.TERMINATE_DRIVER: "on_terminate_driver",
}

#: Commands this driver answers with NOT_SUPPORTED (decoded first, so a malformed one is MALFORMED_COMMAND).
UNSUPPORTED: frozenset[int] = frozenset({
    cp.ADD_STATIC_COUNTER, cp.REJECT_IMAGE,
    cp.REMOVE_DESTINATION_BY_ID,
})


def check_handlers(conductor, handlers: dict[int, str] = HANDLERS,
                   unsupported: frozenset[int] = UNSUPPORTED) -> dict[int, object]:
    """Every command of the schema is either decided by a conductor method that takes its decoded fields, or
    answered as unsupported; returns type id -> bound method. Raises ``ConfigurationError`` naming what is
    missing, so a driver that would drop a command never starts."""
    problems = []
    both = set(handlers) & unsupported
    if both:
        problems.append(f"type ids {sorted(both)} are both handled and unsupported")
    unknown = (set(handlers) | unsupported) - set(dc.COMMANDS)
    if unknown:
        problems.append(f"type ids {sorted(unknown)} are not commands of codecs/driver_commands.COMMANDS")
    bound = {}
    for msg_type_id, message_class in dc.COMMANDS.items():
        if msg_type_id in unsupported:
            continue
        name = handlers.get(msg_type_id)
        if name is None:
            problems.append(f"command typeId={msg_type_id} ({message_class.__name__}) is neither handled nor"
                            " listed as unsupported")
            continue
        method = getattr(conductor, name, None)
        if not callable(method):
            problems.append(f"{type(conductor).__name__} has no method {name} for command typeId={msg_type_id}")
            continue
        mismatch = call_mismatch(method, dc.message_fields(message_class))
        if mismatch is not None:
            problems.append(f"{type(conductor).__name__}.{name} does not take the fields of"
                            f" {message_class.__name__} {dc.message_fields(message_class)}: {mismatch}")
            continue
        bound[msg_type_id] = method
    if problems:
        raise ConfigurationError("client command dispatch incomplete: " + "; ".join(problems))
    return bound


class ClientCommandAdapter:
    """``receive()`` drains up to a batch of commands and returns the work done; ``check_for_blocked_commands``
    (on the conductor's timer) repairs a head that stopped moving.

    ``conductor`` gets ``on_client_command(client_id)`` for every command that decodes (any command proves its
    client alive, §11.5), then the command's ``on_<command>(**fields)``. ``record_error(error)`` records a failure
    (the conductor's: distinct error log and ERRORS); ``system_counters.increment(UNBLOCKED_COMMANDS)`` counts a
    repaired head. A head that has not moved for ``blocked_timeout_ns`` while commands wait is repaired.
    """

    def __init__(self, to_driver: ManyToOneRingBuffer, conductor, client_proxy: ClientProxy, record_error,
                 system_counters, *, blocked_timeout_ns: int, now_ns: int):
        self._to_driver = to_driver
        self._conductor = conductor
        self._client_proxy = client_proxy
        self._record_error = record_error
        self._system_counters = system_counters
        self._handlers = check_handlers(conductor)
        self._blocked_timeout_ns = blocked_timeout_ns
        self._last_head = to_driver.consumer_position()
        self._time_of_last_head_change_ns = now_ns

    def receive(self) -> int:
        messages = self._to_driver.read_messages(COMMAND_BATCH_LIMIT)
        if isinstance(messages, int):  # negative status: garbage where a record header should be
            self._on_head_repaired(f"corrupt record header (status {messages})",
                                   self._to_driver.skip_unreadable_record())
            return 1
        for msg_type_id, body in messages:
            self.on_message(msg_type_id, body)
        return len(messages)

    def add_idle_watch(self, watch) -> None:
        """What ``receive`` waits for: a command claimed or committed at head (``agent/idle_watch.py``)."""
        to_driver = self._to_driver
        tail_offset, head_offset = to_driver.next_record_word_offsets()
        watch.watch_int64(to_driver.buffer, tail_offset)
        watch.watch_frame_at(to_driver.buffer, to_driver.capacity, to_driver.buffer, head_offset)

    def check_for_blocked_commands(self, now_ns: int) -> int:
        """A head that has not moved for the timeout while commands wait belongs to a dead or broken producer
        (Aeron's to-driver unblock): unblock it the Agrona way, else pad over the record."""
        head = self._to_driver.consumer_position()
        if head != self._last_head or self._to_driver.producer_position() <= head:
            self._last_head = head
            self._time_of_last_head_change_ns = now_ns
            return 0
        if now_ns - self._time_of_last_head_change_ns < self._blocked_timeout_ns:
            return 0
        self._time_of_last_head_change_ns = now_ns
        self._on_head_repaired("record blocked (length 0) with garbage in its header", self._to_driver.unblock_or_skip())
        return 1

    def _on_head_repaired(self, reason: str, repair: HeadRepair) -> None:
        """Count a repaired head; garbage padded over is recorded too (a dead producer's claim is not an error)."""
        if repair.skipped_length:
            self._record_error(AeronError(f"to-driver buffer: {reason} at position {repair.position};"
                                          f" skipped {repair.skipped_length} bytes to the next record"))
        if repair.repaired:
            self._system_counters.increment(cl.UNBLOCKED_COMMANDS)

    def on_message(self, msg_type_id: int, body: bytes) -> None:
        """Decode one command and dispatch it; every failure is answered, recorded and counted, never raised."""
        correlation_id = int.from_bytes(body[8:16], "little", signed=True) if len(body) >= 16 else -1
        try:
            message_class = dc.COMMANDS.get(msg_type_id)
            if message_class is None:
                raise ControlProtocolError(cp.UNKNOWN_COMMAND_TYPE_ID, f"command typeId={msg_type_id} unknown")
            try:
                message = message_class.decode(body, 0, len(body))
            except dc.MalformedCommandError as exc:
                raise ControlProtocolError(cp.MALFORMED_COMMAND, str(exc)) from None
            self._conductor.on_client_command(message.client_id)
            handler = self._handlers.get(msg_type_id)
            if handler is None:
                raise ControlProtocolError(cp.NOT_SUPPORTED, f"command typeId={msg_type_id} not supported by this driver")
            handler(**{name: getattr(message, name) for name, _ in message.SCHEMA})
        except Exception as exc:  # noqa: BLE001 - every failure is answered and recorded, never fatal
            self._record_error(exc)
            self._client_proxy.on_error(correlation_id, error_code_of(exc), str(exc))
