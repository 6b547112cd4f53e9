"""Client <-> driver messages (spec/transport.md §11.3), encoded and decoded from one schema.

Each message is declared once below as a list of fields; ``encode``/``decode`` walk that list, so no
message has hand-written offsets. Field kinds:

* ``I16``, ``U16``, ``I32``, ``I64``: little-endian integers;
* ``FIXED16``: 16 raw bytes (an IPv4/IPv6 address);
* ``STR`` / ``BYTES``: an ``i32`` length then that many bytes (ASCII text or raw). When another field
  follows, it starts ``align(length, 4)`` after the data (§11.3); the last one ends the message.

Decoding never trusts the bytes: a length that is negative or runs past the message raises
``MalformedCommandError`` naming the message, the field, the value and the limit. The driver answers
such a command with ``MALFORMED_COMMAND`` and records it; it never reads outside the record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields
from typing import ClassVar

from aeron_numba.errors import AeronError
from aeron_numba.layout import control_protocol as cp

I16, U16, I32, I64, FIXED16, STR, BYTES = "h", "H", "i", "q", "16s", "str", "bytes"
_FIXED_SIZES = {I16: 2, U16: 2, I32: 4, I64: 8, FIXED16: 16}
_VARIABLE = (STR, BYTES)
VARIABLE_LENGTH_ALIGNMENT = 4


class MalformedCommandError(AeronError, ValueError):
    """A command or response does not fit its declared layout (truncated, bad length, not ASCII)."""


def _align4(value: int) -> int:
    return (value + VARIABLE_LENGTH_ALIGNMENT - 1) & ~(VARIABLE_LENGTH_ALIGNMENT - 1)


class Message:
    """Base of the generated message classes: ``SCHEMA`` lists ``(field name, kind)`` in wire order."""

    SCHEMA: ClassVar[tuple[tuple[str, str], ...]] = ()

    def encode(self) -> bytes:
        buffer = bytearray(self.encoded_length())
        self.encode_into(buffer)
        return bytes(buffer)

    def encoded_length(self) -> int:
        length = 0
        last = len(self.SCHEMA) - 1
        for index, (name, kind) in enumerate(self.SCHEMA):
            if kind in _VARIABLE:
                size = len(getattr(self, name))  # ASCII text: one byte per character
                length += 4 + (size if index == last else _align4(size))
            else:
                length += _FIXED_SIZES[kind]
        return length

    def encode_into(self, buffer, offset: int = 0) -> int:
        """Encode at ``buffer[offset:]`` (a writable bytearray or uint8 numpy array, e.g. a proxy's reused
        buffer) and return the length. Raises ``MalformedCommandError`` when it does not fit."""
        view = memoryview(buffer).cast("B")
        length = self.encoded_length()
        if offset < 0 or offset + length > len(view):
            raise MalformedCommandError(
                f"{type(self).__name__}: length={length} at offset={offset} does not fit a buffer of {len(view)} bytes"
            )
        at = offset
        last = len(self.SCHEMA) - 1
        for index, (name, kind) in enumerate(self.SCHEMA):
            value = getattr(self, name)
            if kind in _VARIABLE:
                data = value.encode("ascii") if kind == STR else bytes(value)
                size = len(data)
                struct.pack_into("<i", view, at, size)
                at += 4
                view[at : at + size] = data
                at += size
                if index != last:
                    pad = _align4(size) - size
                    view[at : at + pad] = bytes(pad)  # a reused buffer holds the last message's bytes
                    at += pad
            else:
                struct.pack_into("<" + kind, view, at, value)
                at += _FIXED_SIZES[kind]
        return at - offset

    @classmethod
    def decode(cls, buffer, offset: int = 0, length: int | None = None):
        """Decode from ``buffer[offset:offset+length]`` (bytes, memoryview or a uint8 numpy view)."""
        view = memoryview(buffer).cast("B") if not isinstance(buffer, (bytes, bytearray)) else memoryview(buffer)
        end = len(view) if length is None else offset + length
        if offset < 0 or length is not None and (length < 0 or end > len(view)):
            raise MalformedCommandError(
                f"{cls.__name__}: offset={offset} length={length} outside buffer of {len(view)} bytes"
            )
        values = {}
        at = offset
        last = len(cls.SCHEMA) - 1
        for index, (name, kind) in enumerate(cls.SCHEMA):
            if kind in _VARIABLE:
                if at + 4 > end:
                    raise MalformedCommandError(
                        f"{cls.__name__}: {name} length field at {at - offset} needs 4 bytes, message is {end - offset}"
                    )
                (size,) = struct.unpack_from("<i", view, at)
                at += 4
                if size < 0 or at + size > end:
                    raise MalformedCommandError(
                        f"{cls.__name__}: {name} length={size} runs past the message end"
                        f" (offset {at - offset}, message length {end - offset})"
                    )
                data = bytes(view[at : at + size])
                if kind == STR:
                    try:
                        values[name] = data.decode("ascii")
                    except UnicodeDecodeError as exc:
                        raise MalformedCommandError(f"{cls.__name__}: {name} is not ASCII ({exc})") from None
                else:
                    values[name] = data
                at += size if index == last else _align4(size)
            else:
                size = _FIXED_SIZES[kind]
                if at + size > end:
                    raise MalformedCommandError(
                        f"{cls.__name__}: {name} at {at - offset} needs {size} bytes, message is {end - offset}"
                    )
                (values[name],) = struct.unpack_from("<" + kind, view, at)
                at += size
        return cls(**values)


def _message(name: str, schema: tuple[tuple[str, str], ...], doc: str) -> type[Message]:
    """Generate a frozen dataclass with one attribute per schema field."""
    defaults = {I16: 0, U16: 0, I32: 0, I64: 0, FIXED16: bytes(16), STR: "", BYTES: b""}
    namespace = {
        "__doc__": doc,
        "__annotations__": {fname: object for fname, _ in schema},
        "SCHEMA": schema,
    }
    for fname, kind in schema:
        namespace[fname] = field(default=defaults[kind])
    return dataclass(frozen=True)(type(name, (Message,), namespace))


_CORRELATED = (("client_id", I64), ("correlation_id", I64))

# ---------------------------------------------------------------------------------------------- commands
CorrelatedMessage = _message("CorrelatedMessage", _CORRELATED, "CLIENT_KEEPALIVE, CLIENT_CLOSE (§11.3).")
PublicationMessage = _message(
    "PublicationMessage", _CORRELATED + (("stream_id", I32), ("channel", STR)),
    "ADD_PUBLICATION, ADD_EXCLUSIVE_PUBLICATION.",
)
SubscriptionMessage = _message(
    "SubscriptionMessage",
    _CORRELATED + (("registration_correlation_id", I64), ("stream_id", I32), ("channel", STR)),
    "ADD_SUBSCRIPTION (clients send registration_correlation_id = -1).",
)
RemoveMessage = _message(
    "RemoveMessage", _CORRELATED + (("registration_id", I64),), "REMOVE_PUBLICATION / _SUBSCRIPTION / _COUNTER."
)
DestinationMessage = _message(
    "DestinationMessage", _CORRELATED + (("registration_correlation_id", I64), ("channel", STR)),
    "ADD/REMOVE_DESTINATION, ADD/REMOVE_RCV_DESTINATION.",
)
DestinationByIdMessage = _message(
    "DestinationByIdMessage",
    _CORRELATED + (("resource_registration_id", I64), ("destination_registration_id", I64)),
    "REMOVE_DESTINATION_BY_ID.",
)
CounterMessage = _message(
    "CounterMessage", _CORRELATED + (("type_id", I32), ("key", BYTES), ("label", STR)), "ADD_COUNTER."
)
StaticCounterMessage = _message(
    "StaticCounterMessage",
    _CORRELATED + (("registration_id", I64), ("type_id", I32), ("key", BYTES), ("label", STR)),
    "ADD_STATIC_COUNTER.",
)
TerminateDriverMessage = _message("TerminateDriverMessage", _CORRELATED + (("token", BYTES),), "TERMINATE_DRIVER.")
RejectImageMessage = _message(
    "RejectImageMessage",
    _CORRELATED + (("image_correlation_id", I64), ("position", I64), ("reason", STR)),
    "REJECT_IMAGE.",
)

# --------------------------------------------------------------------------------------------- responses
PublicationBuffersReady = _message(
    "PublicationBuffersReady",
    (
        ("correlation_id", I64), ("registration_id", I64), ("session_id", I32), ("stream_id", I32),
        ("position_limit_counter_id", I32), ("channel_status_indicator_id", I32), ("log_file_name", STR),
    ),
    "ON_PUBLICATION_READY / ON_EXCLUSIVE_PUBLICATION_READY.",
)
ImageBuffersReady = _message(
    "ImageBuffersReady",
    (
        ("correlation_id", I64), ("session_id", I32), ("stream_id", I32), ("subscription_registration_id", I64),
        ("subscriber_position_id", I32), ("log_file_name", STR), ("source_identity", STR),
    ),
    "ON_AVAILABLE_IMAGE.",
)
OperationSucceeded = _message("OperationSucceeded", (("correlation_id", I64),), "ON_OPERATION_SUCCESS.")
SubscriptionReady = _message(
    "SubscriptionReady", (("correlation_id", I64), ("channel_status_indicator_id", I32)), "ON_SUBSCRIPTION_READY."
)
ImageMessage = _message(
    "ImageMessage",
    (("correlation_id", I64), ("subscription_registration_id", I64), ("stream_id", I32), ("channel", STR)),
    "ON_UNAVAILABLE_IMAGE.",
)
ErrorResponse = _message(
    "ErrorResponse",
    (("offending_command_correlation_id", I64), ("error_code", I32), ("error_message", STR)),
    "ON_ERROR.",
)
CounterUpdate = _message(
    "CounterUpdate", (("correlation_id", I64), ("counter_id", I32)), "ON_COUNTER_READY / ON_UNAVAILABLE_COUNTER."
)
StaticCounterResponse = _message(
    "StaticCounterResponse", (("correlation_id", I64), ("counter_id", I32)), "ON_STATIC_COUNTER."
)
ClientTimeout = _message("ClientTimeout", (("client_id", I64),), "ON_CLIENT_TIMEOUT.")
PublicationErrorFrame = _message(
    "PublicationErrorFrame",
    (
        ("registration_id", I64), ("destination_registration_id", I64), ("session_id", I32), ("stream_id", I32),
        ("receiver_id", I64), ("group_tag", I64), ("address_type", I16), ("source_port", U16),
        ("source_address", FIXED16), ("error_code", I32), ("error_message", STR),
    ),
    "ON_PUBLICATION_ERROR.",
)

#: Command type id -> message class (what the driver decodes).
COMMANDS: dict[int, type[Message]] = {
    cp.ADD_PUBLICATION: PublicationMessage,
    cp.REMOVE_PUBLICATION: RemoveMessage,
    cp.ADD_EXCLUSIVE_PUBLICATION: PublicationMessage,
    cp.ADD_SUBSCRIPTION: SubscriptionMessage,
    cp.REMOVE_SUBSCRIPTION: RemoveMessage,
    cp.CLIENT_KEEPALIVE: CorrelatedMessage,
    cp.ADD_DESTINATION: DestinationMessage,
    cp.REMOVE_DESTINATION: DestinationMessage,
    cp.ADD_COUNTER: CounterMessage,
    cp.REMOVE_COUNTER: RemoveMessage,
    cp.CLIENT_CLOSE: CorrelatedMessage,
    cp.ADD_RCV_DESTINATION: DestinationMessage,
    cp.REMOVE_RCV_DESTINATION: DestinationMessage,
    cp.TERMINATE_DRIVER: TerminateDriverMessage,
    cp.ADD_STATIC_COUNTER: StaticCounterMessage,
    cp.REJECT_IMAGE: RejectImageMessage,
    cp.REMOVE_DESTINATION_BY_ID: DestinationByIdMessage,
}

#: Response type id -> message class (what clients decode).
RESPONSES: dict[int, type[Message]] = {
    cp.ON_ERROR: ErrorResponse,
    cp.ON_AVAILABLE_IMAGE: ImageBuffersReady,
    cp.ON_PUBLICATION_READY: PublicationBuffersReady,
    cp.ON_OPERATION_SUCCESS: OperationSucceeded,
    cp.ON_UNAVAILABLE_IMAGE: ImageMessage,
    cp.ON_EXCLUSIVE_PUBLICATION_READY: PublicationBuffersReady,
    cp.ON_SUBSCRIPTION_READY: SubscriptionReady,
    cp.ON_COUNTER_READY: CounterUpdate,
    cp.ON_UNAVAILABLE_COUNTER: CounterUpdate,
    cp.ON_CLIENT_TIMEOUT: ClientTimeout,
    cp.ON_STATIC_COUNTER: StaticCounterResponse,
    cp.ON_PUBLICATION_ERROR: PublicationErrorFrame,
}


def decode_command(msg_type_id: int, buffer, offset: int, length: int) -> Message:
    """Decode a to-driver record; ``KeyError`` for an unknown command type, ``MalformedCommandError`` if bad."""
    return COMMANDS[msg_type_id].decode(buffer, offset, length)


def decode_response(msg_type_id: int, buffer, offset: int, length: int) -> Message:
    """Decode a to-clients record; ``KeyError`` for an unknown response type, ``MalformedCommandError`` if bad."""
    return RESPONSES[msg_type_id].decode(buffer, offset, length)


def message_fields(message_class: type[Message]) -> list[str]:
    return [f.name for f in fields(message_class)]
