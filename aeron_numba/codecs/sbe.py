"""SBE encoding and decoding of every message of a schema description (``layout/sbe.py``; the archive and
cluster schemas are ``layout/archive_schema.py`` and ``layout/cluster_schema.py``).

``SbeCodec(schema)`` generates one frozen dataclass per message (attributes in snake_case, as the schema
lists them: fixed fields, then groups as tuples of entry dataclasses, then var-length fields as ``str``
(varAsciiEncoding) or ``bytes`` (varDataEncoding)) and encodes or decodes them with the message header.

Decoding never trusts the bytes: it honours the received blockLength and version (older messages get null
values for newer fields, unknown trailing block bytes are skipped) and raises ``MalformedMessageError``
naming the message, the field, the value and the limit when a length runs past the buffer, or
``UnknownMessageError`` for another schema or an unknown template. Control-protocol rates (thousands of
messages a second) are what this is for; data never goes through it.

A message named in ``payload_follows`` (Cluster's SessionMessageHeader) is a header for the application's bytes
that follow it in the same fragment, outside the schema: its class gets a last attribute ``payload`` (``bytes``),
written after the message by ``encode`` and taken by ``decode`` as everything up to the fragment's end (copied
both ways: Cluster's data path may write and read the two parts in place instead). For any other message, bytes
after its end are not its own and are left alone, as SBE decoders do.
"""

from __future__ import annotations

import numbers
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aeron_numba.errors import AeronError
from aeron_numba.layout import sbe as L

_HEADER = struct.Struct("<HHHH")
_GROUP_HEADER = struct.Struct("<HH")
_VAR_LENGTH = struct.Struct("<I")


class MalformedMessageError(AeronError, ValueError):
    """An SBE message does not fit its buffer (truncated, a length past the end, not ASCII)."""


class UnknownMessageError(AeronError, ValueError):
    """An SBE message of another schema, or a template id the schema does not have."""


class SbeMessageBase:
    """Base of the generated message and group-entry classes."""

    SPEC: ClassVar[Any]


def _field_problem(value, layout: "_Layout") -> str | None:
    """Which fixed field a block cannot pack, naming its value and its type's range (struct's own message
    names neither)."""
    for f in layout.fields:
        v = getattr(value, f.name)
        bits = 8 * f.size
        lo, hi = (0, (1 << bits) - 1) if f.primitive.startswith("u") else (-(1 << bits - 1), (1 << bits - 1) - 1)
        if not isinstance(v, numbers.Integral):
            return f"{f.name}={v!r} must be an int"
        if not lo <= v <= hi:
            return f"{f.name}={v} outside {f.primitive} [{lo}, {hi}]"
    return None


def _block_struct(fields: tuple[L.SbeField, ...], block_length: int) -> struct.Struct:
    """One struct for a whole block: the fields at their offsets, gaps as pad bytes."""
    parts, at = ["<"], 0
    for f in sorted(fields, key=lambda f: f.offset):
        if f.offset < at:
            raise ValueError(f"field {f.name} at {f.offset} overlaps the previous field (ends at {at})")
        parts.append(f"{f.offset - at}x" if f.offset > at else "")
        parts.append(L.PRIMITIVES[f.primitive][0])
        at = f.offset + f.size
    if at > block_length:
        raise ValueError(f"fields end at {at}, past blockLength={block_length}")
    parts.append(f"{block_length - at}x" if block_length > at else "")
    return struct.Struct("".join(parts))


@dataclass(frozen=True)
class _Layout:
    """A block's fields with their compiled struct (fields in offset order, as the struct reads them)."""

    fields: tuple[L.SbeField, ...]
    block_length: int
    block: struct.Struct
    var_fields: tuple[L.SbeVarField, ...]
    newest: int  # the highest "since" version of a fixed field

    @classmethod
    def of(cls, fields, block_length, var_fields) -> "_Layout":
        ordered = tuple(sorted(fields, key=lambda f: f.offset))
        return cls(ordered, block_length, _block_struct(ordered, block_length), tuple(var_fields),
                   max((f.since for f in ordered), default=0))


#: The attribute of a ``payload_follows`` message holding the application's bytes after it.
PAYLOAD = "payload"


def _generate(name: str, layout: _Layout, groups: dict[str, tuple[type, _Layout]], spec,
              payload: bool = False) -> type:
    defaults: dict[str, Any] = {f.name: f.null_value for f in layout.fields}
    for group_name in groups:
        defaults[group_name] = ()
    for v in layout.var_fields:
        defaults[v.name] = "" if v.kind == L.VAR_ASCII else b""
    if payload:
        defaults[PAYLOAD] = b""
    namespace: dict[str, Any] = {
        "__annotations__": {n: object for n in defaults},
        "__doc__": f"SBE {name}: {', '.join(defaults)}.",
        "SPEC": spec,
    }
    for attribute, value in defaults.items():
        namespace[attribute] = field(default=value)
    return dataclass(frozen=True)(type(name, (SbeMessageBase,), namespace))


class SbeCodec:
    """Encoder/decoder of one SBE schema; ``codec.<MessageName>`` is the generated class of that message.

    ``payload_follows``: the messages that head an application payload (see the module docstring)."""

    def __init__(self, schema: L.SbeSchema, *, payload_follows: tuple[str, ...] = ()):
        self.schema = schema
        self.payload_follows = frozenset(payload_follows)
        self._by_template: dict[int, tuple[type, _Layout, dict]] = {}
        self._by_class: dict[type, tuple[L.SbeMessage, _Layout, dict]] = {}
        for name in self.payload_follows:
            message = schema.message(name)  # KeyError naming it and the schema if it is not one of its messages
            if PAYLOAD in self._attribute_names(message):
                raise ValueError(f"{name} has a field named {PAYLOAD!r}: a payload cannot follow it")
        for message in schema.messages:
            groups = {}
            for group in message.groups:
                group_layout = _Layout.of(group.fields, group.block_length, group.var_fields)
                entry_class = _generate(f"{message.name}_{group.name}", group_layout, {}, group)
                groups[group.name] = (entry_class, group_layout)
            layout = _Layout.of(message.fields, message.block_length, message.var_fields)
            cls = _generate(message.name, layout, groups, message, message.name in self.payload_follows)
            if message.template_id in self._by_template:
                raise ValueError(f"template id {message.template_id} used twice in the {schema.name} schema")
            self._by_template[message.template_id] = (cls, layout, groups)
            self._by_class[cls] = (message, layout, groups)
            setattr(self, message.name, cls)

    @staticmethod
    def _attribute_names(message: L.SbeMessage) -> list[str]:
        return [f.name for f in message.fields] + [g.name for g in message.groups] + \
            [v.name for v in message.var_fields]

    def attribute_names(self, message_name: str) -> tuple[str, ...]:
        """The attributes of ``message_name``'s class in order: fixed fields, groups, var fields, then ``payload``
        if a payload follows it (the parameters of its handler and of its proxy's send method)."""
        names = self._attribute_names(self.schema.message(message_name))
        return tuple(names + [PAYLOAD] if message_name in self.payload_follows else names)

    def header(self, message_name: str) -> bytes:
        """The 8-byte message header of ``message_name`` at this schema's version (to send a stored body)."""
        spec = self.schema.message(message_name)
        return _HEADER.pack(spec.block_length, spec.template_id, self.schema.schema_id, self.schema.version)

    def group_class(self, message_name: str, group_name: str) -> type:
        """The generated class of one entry of ``message_name``'s group ``group_name``."""
        spec = self.schema.message(message_name)
        return self._by_template[spec.template_id][2][group_name][0]

    # ------------------------------------------------------------------------------------------ encode
    def encode(self, message: SbeMessageBase) -> bytes:
        """The message with its header, at this schema's version."""
        out = bytearray(self.encoded_length(message))
        self.encode_into(out, 0, message)
        return bytes(out)

    def encoded_length(self, message: SbeMessageBase) -> int:
        """How many bytes ``encode_into`` writes for ``message`` (its header included)."""
        spec, layout, groups = self._by_class[type(message)]
        length = L.MESSAGE_HEADER_LENGTH + self._block_length(message, layout)
        for group_name, (_, group_layout) in groups.items():
            length += L.GROUP_HEADER_LENGTH + sum(self._block_length(entry, group_layout)
                                                  for entry in getattr(message, group_name))
        if spec.name in self.payload_follows:
            length += memoryview(message.payload).nbytes
        return length

    @staticmethod
    def _block_length(value, layout: _Layout) -> int:
        # ASCII strings are one byte a character; a non-ASCII one is refused by encode_into, naming it
        length = layout.block_length
        for v in layout.var_fields:
            data = getattr(value, v.name)
            if v.kind == L.VAR_ASCII and not isinstance(data, str):
                raise MalformedMessageError(f"{type(value).__name__}.{v.name}={data!r} must be a str")
            length += L.VAR_LENGTH_PREFIX + len(data)
        return length

    def encode_into(self, buffer, offset: int, message: SbeMessageBase) -> int:
        """Write the message with its header at ``buffer[offset:]`` (a bytearray, memoryview or uint8 numpy
        array: nothing is allocated for the bytes); returns the length written. A message that does not fit the
        buffer raises ``MalformedMessageError`` naming the lengths (whatever was written before is garbage)."""
        spec, layout, groups = self._by_class[type(message)]
        view = memoryview(buffer).cast("B")
        end = len(view)
        if offset < 0 or offset + L.MESSAGE_HEADER_LENGTH > end:
            raise MalformedMessageError(f"{spec.name}: header at offset {offset} past a buffer of {end} bytes")
        _HEADER.pack_into(view, offset, layout.block_length, spec.template_id, self.schema.schema_id,
                          self.schema.version)
        at = self._encode_block(view, offset + L.MESSAGE_HEADER_LENGTH, end, message, layout, spec.name)
        for group_name, (entry_class, group_layout) in groups.items():
            where = f"{spec.name}.{group_name}"
            entries = getattr(message, group_name)
            if len(entries) > 0xFFFF:
                raise MalformedMessageError(f"{where}: {len(entries)} entries > 65535")
            if at + L.GROUP_HEADER_LENGTH > end:
                raise MalformedMessageError(f"{where}: group header at {at} past a buffer of {end} bytes")
            _GROUP_HEADER.pack_into(view, at, group_layout.block_length, len(entries))
            at += L.GROUP_HEADER_LENGTH
            for entry in entries:
                if not isinstance(entry, entry_class):
                    raise MalformedMessageError(f"{where}: entry {entry!r} is not a {entry_class.__name__}")
                at = self._encode_block(view, at, end, entry, group_layout, where)
        if spec.name in self.payload_follows:
            payload = memoryview(message.payload).cast("B")
            if at + len(payload) > end:
                raise MalformedMessageError(f"{spec.name}.{PAYLOAD}: length={len(payload)} at {at} past a buffer "
                                            f"of {end} bytes")
            view[at:at + len(payload)] = payload
            at += len(payload)
        return at - offset

    @staticmethod
    def _encode_block(view: memoryview, at: int, end: int, value, layout: _Layout, where: str) -> int:
        if at + layout.block_length > end:
            raise MalformedMessageError(f"{where}: blockLength={layout.block_length} at {at} past a buffer of "
                                        f"{end} bytes")
        try:
            layout.block.pack_into(view, at, *(getattr(value, f.name) for f in layout.fields))
        except struct.error as exc:
            raise MalformedMessageError(f"{where}.{_field_problem(value, layout) or exc}") from None
        at += layout.block_length
        for v in layout.var_fields:
            data = getattr(value, v.name)
            if v.kind == L.VAR_ASCII:
                try:
                    data = data.encode("ascii")
                except UnicodeEncodeError as exc:
                    raise MalformedMessageError(f"{where}.{v.name} is not ASCII ({exc})") from None
            if at + L.VAR_LENGTH_PREFIX + len(data) > end:
                raise MalformedMessageError(f"{where}.{v.name}: length={len(data)} at {at} past a buffer of "
                                            f"{end} bytes")
            _VAR_LENGTH.pack_into(view, at, len(data))
            at += L.VAR_LENGTH_PREFIX
            view[at:at + len(data)] = data
            at += len(data)
        return at

    # ------------------------------------------------------------------------------------------ decode
    def template_id(self, buffer, offset: int = 0) -> int:
        """The template id of the message at ``offset`` (after checking the header is this schema's)."""
        view = memoryview(buffer).cast("B")
        if offset < 0 or offset + L.MESSAGE_HEADER_LENGTH > len(view):
            raise MalformedMessageError(
                f"SBE header at offset {offset} needs {L.MESSAGE_HEADER_LENGTH} bytes, buffer has {len(view)}")
        _, template_id, schema_id, _ = _HEADER.unpack_from(view, offset)
        if schema_id != self.schema.schema_id:
            raise UnknownMessageError(
                f"schemaId={schema_id}, expected {self.schema.schema_id} ({self.schema.name})")
        return template_id

    def decode(self, buffer, offset: int = 0, length: int | None = None) -> SbeMessageBase:
        """Decode the message at ``buffer[offset:offset+length]`` (bytes, memoryview or a uint8 numpy view)."""
        view = memoryview(buffer).cast("B")
        end = len(view) if length is None else offset + length
        if offset < 0 or end > len(view) or end < offset:
            raise MalformedMessageError(f"offset={offset} length={length} outside a buffer of {len(view)} bytes")
        if end - offset < L.MESSAGE_HEADER_LENGTH:
            raise MalformedMessageError(
                f"SBE message of {end - offset} bytes, shorter than its {L.MESSAGE_HEADER_LENGTH}-byte header")
        block_length, template_id, schema_id, version = _HEADER.unpack_from(view, offset)
        if schema_id != self.schema.schema_id:
            raise UnknownMessageError(f"schemaId={schema_id}, expected {self.schema.schema_id} ({self.schema.name})")
        entry = self._by_template.get(template_id)
        if entry is None:
            raise UnknownMessageError(f"templateId={template_id} is not a message of the {self.schema.name} schema")
        return self._decode_body(view, offset + L.MESSAGE_HEADER_LENGTH, end, entry, block_length, version)

    def encode_body(self, message: SbeMessageBase) -> bytes:
        """The message without its header: root block, groups and var fields (a catalog entry's body)."""
        return self.encode(message)[L.MESSAGE_HEADER_LENGTH:]

    def decode_body(self, message_name: str, buffer, offset: int = 0, length: int | None = None) -> SbeMessageBase:
        """Decode a header-less body of ``message_name`` written at this schema's blockLength and version."""
        view = memoryview(buffer).cast("B")
        end = len(view) if length is None else offset + length
        if offset < 0 or end > len(view) or end < offset:
            raise MalformedMessageError(f"offset={offset} length={length} outside a buffer of {len(view)} bytes")
        entry = self._by_template[self.schema.message(message_name).template_id]
        return self._decode_body(view, offset, end, entry, entry[1].block_length, self.schema.version)

    def _decode_body(self, view, at: int, end: int, entry, block_length: int, version: int) -> SbeMessageBase:
        cls, layout, groups = entry
        offset = at
        values, at = self._decode_block(view, at, end, layout, block_length, version, cls.SPEC.name)
        for group_name, (entry_class, group_layout) in groups.items():
            where = f"{cls.SPEC.name}.{group_name}"
            if at + L.GROUP_HEADER_LENGTH > end:
                raise MalformedMessageError(f"{where}: group header at {at - offset} runs past the message end "
                                            f"({end - offset} bytes)")
            entry_length, count = _GROUP_HEADER.unpack_from(view, at)
            at += L.GROUP_HEADER_LENGTH
            entries = []
            for _ in range(count):
                entry_values, at = self._decode_block(view, at, end, group_layout, entry_length, version, where)
                entries.append(entry_class(**entry_values))
            values[group_name] = tuple(entries)
        if cls.SPEC.name in self.payload_follows:
            values[PAYLOAD] = bytes(view[at:end])  # a copy: the fragment's buffer is reused once the poll returns
        return cls(**values)

    @staticmethod
    def _decode_block(view, at: int, end: int, layout: _Layout, block_length: int, version: int,
                      where: str) -> tuple[dict, int]:
        if at + block_length > end:
            raise MalformedMessageError(
                f"{where}: blockLength={block_length} at {at} runs past the message end ({end})")
        if block_length == layout.block_length and layout.newest <= version:
            values = dict(zip((f.name for f in layout.fields), layout.block.unpack_from(view, at)))
        else:  # another version's block: what it has of ours, nulls for the rest
            values = {}
            for f in layout.fields:
                if f.since > version or f.offset + f.size > block_length:
                    values[f.name] = f.null_value
                else:
                    (values[f.name],) = struct.unpack_from("<" + L.PRIMITIVES[f.primitive][0], view, at + f.offset)
        at += block_length
        for v in layout.var_fields:
            if v.since > version:
                values[v.name] = "" if v.kind == L.VAR_ASCII else b""
                continue
            if at + L.VAR_LENGTH_PREFIX > end:
                raise MalformedMessageError(f"{where}.{v.name}: length prefix at {at} runs past the message end ({end})")
            (size,) = _VAR_LENGTH.unpack_from(view, at)
            at += L.VAR_LENGTH_PREFIX
            if at + size > end:
                raise MalformedMessageError(
                    f"{where}.{v.name}: length={size} runs past the message end ({end - at} bytes left)")
            data = bytes(view[at:at + size])
            at += size
            if v.kind == L.VAR_ASCII:
                try:
                    values[v.name] = data.decode("ascii")
                except UnicodeDecodeError as exc:
                    raise MalformedMessageError(f"{where}.{v.name} is not ASCII ({exc})") from None
            else:
                values[v.name] = data
        return values, at
