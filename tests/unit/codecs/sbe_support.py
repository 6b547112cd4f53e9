"""Helpers shared by the SBE adapter and proxy tests of both schemas: a publication that records what it takes, a
listener with a handler per message, distinct in-range values for every attribute of a message, and the check of a
generated proxy class's send methods."""

from __future__ import annotations

import inspect

from aeron_numba.codecs.sbe import PAYLOAD, SbeCodec
from aeron_numba.codecs.sbe_adapter import handler_name
from aeron_numba.codecs.sbe_proxy import SbeProxy
from aeron_numba.layout import sbe as L


class Publication:
    """Takes offers (a copy of each) after answering ``refusals`` first."""

    def __init__(self, *refusals):
        self.refusals = list(refusals)
        self.offers = 0
        self.sent: list[bytes] = []

    def offer(self, buffer, offset=0, length=None):
        self.offers += 1
        if self.refusals:
            return self.refusals.pop(0)
        self.sent.append(bytes(buffer[offset:offset + length]))
        return 64 * len(self.sent)


def recording_listener(names, calls):
    """A listener with an ``on_<message>(*context, **fields)`` method per message of ``names``, each recording
    ``(message name, context, fields)`` in ``calls``."""
    def make(name):
        def handler(self, *args, **fields):
            calls.append((name, args, fields))
        handler.__name__ = handler_name(name)
        return handler
    return type("Listener", (), {handler_name(n): make(n) for n in names})()


def _block_values(fields, var_fields, seed: int) -> dict:
    """Min and max of each primitive, alternating and shifted by ``seed`` so that no two fields agree."""
    values = {}
    for i, f in enumerate(fields):
        fmt, size, _ = L.PRIMITIVES[f.primitive]
        low, high = (0, (1 << 8 * size) - 1) if fmt.isupper() else (-(1 << 8 * size - 1), (1 << 8 * size - 1) - 1)
        values[f.name] = (high - i - seed) if i % 2 else (low + i + seed)
    for v in var_fields:
        values[v.name] = (f"{v.name}:aeron:ipc:{seed}" if v.kind == L.VAR_ASCII
                          else bytes(range(seed, seed + len(v.name))))
    return values


def field_values(codec: SbeCodec, message_name: str) -> dict:
    """A value for every attribute of ``message_name``'s class, in ``codec.attribute_names`` order: fields, two
    entries per group, var fields, and a payload (with a zero byte and a 0xFF) if one follows the message."""
    message = codec.schema.message(message_name)
    block = _block_values(message.fields, message.var_fields, 0)
    values = {f.name: block[f.name] for f in message.fields}
    for group in message.groups:
        entry_class = codec.group_class(message_name, group.name)
        values[group.name] = tuple(entry_class(**_block_values(group.fields, group.var_fields, seed))
                                   for seed in (1, 2))
    values.update({v.name: block[v.name] for v in message.var_fields})
    if message_name in codec.payload_follows:
        values[PAYLOAD] = b"\x00application bytes\xff"
    assert tuple(values) == codec.attribute_names(message_name)
    return values


def check_send_methods(codec: SbeCodec, proxy_class: type, sends) -> None:
    """``proxy_class`` has one send method per message of ``sends`` and no other; each takes the message's
    attributes by name, and what it offers decodes back to the values sent and is the bytes ``codec.encode``
    makes, encoded in the proxy's one reused buffer."""
    own = {name for name, _ in inspect.getmembers(proxy_class, inspect.isfunction)
           if not name.startswith("_") and not hasattr(SbeProxy, name)}
    assert own == {handler_name(name)[3:] for name in sends}, proxy_class.__name__
    publication = Publication()
    proxy = proxy_class(publication)
    buffer = proxy.buffer
    for name in sends:
        method = getattr(proxy, handler_name(name)[3:])
        assert tuple(inspect.signature(method).parameters) == codec.attribute_names(name), name
        values = field_values(codec, name)
        assert method(**values) is True and proxy.last_result > 0
        sent = publication.sent[-1]
        decoded = codec.decode(sent)
        assert type(decoded).__name__ == name and decoded.__dict__ == values
        assert sent == codec.encode(getattr(codec, name)(**values))  # the bytes encode() always made
    assert proxy.buffer is buffer  # reused, not one per message
    assert len(publication.sent) == len(sends)
