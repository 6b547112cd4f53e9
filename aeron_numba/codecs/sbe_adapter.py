"""An adapter for any SBE schema (DESIGN.md "Protocols: adapter, conductor, proxy"): decode a fragment by template
id and call ``listener.on_<snake_case_message_name>(*context, **fields)``.

The archive's control requests (``archive/control_session_adapter.py``), the archive client's responses
(``archive/control_response_poller.py``) and Cluster's four protocols use it the same way: the adapter is given
the codec, the listener, the messages it receives and those it answers as unsupported. Construction proves the
two sets cover every received message: a received message needs a listener method that accepts the protocol's
context and every field of the message by name, or an explicit "unsupported" declaration (answered by the
protocol's ``on_unsupported``, e.g. the archive's ERROR GENERIC). A missing handler is a ``MissingHandlerError``
naming the message and the method, at startup rather than at the first such message.

Malformed input (shorter than a header, another schema's, a template this adapter does not receive, lengths past
the fragment, a string that is not ASCII) is counted in ``malformed_count`` and reported through ``on_error``;
it never reaches the listener. Control-protocol rates are what this is for; data never goes through it.
"""

from __future__ import annotations

from typing import Callable, Iterable

from aeron_numba.codecs.dispatch import call_mismatch
from aeron_numba.codecs.sbe import MalformedMessageError, SbeCodec, SbeMessageBase, UnknownMessageError
from aeron_numba.errors import AeronError
from aeron_numba.layout.sbe import snake_case


def handler_name(message_name: str) -> str:
    """``StartRecordingRequest`` -> ``on_start_recording_request`` (the listener method of a message)."""
    return "on_" + snake_case(message_name)


class MissingHandlerError(AeronError, TypeError):
    """A listener lacks the handler of a message its adapter receives (or cannot take the message's fields)."""


class SbeAdapter:
    """Decodes one SBE schema's messages and dispatches them to ``listener.on_<message>(*context, **fields)``.

    ``receives``: the message names (as the schema spells them) this adapter takes; ``unsupported``: those of
    them answered by ``on_unsupported(message, *context)`` instead of a listener method; ``context``: the names
    of the positional arguments each handler gets before the fields (the session, the fragment header...);
    ``on_error(text)``: where malformed input is reported (after it is counted).
    """

    def __init__(self, codec: SbeCodec, listener, receives: Iterable[str], *, unsupported: Iterable[str] = (),
                 on_unsupported: Callable | None = None, context: tuple[str, ...] = (),
                 on_error: Callable[[str], None] | None = None, name: str | None = None):
        self.codec = codec
        self.listener = listener
        self.name = name or type(self).__name__
        self.on_error = on_error or (lambda text: None)
        self.malformed_count = 0
        self._on_unsupported = on_unsupported
        self._context = tuple(context)
        received = tuple(receives)
        unsupported = frozenset(unsupported)
        schema = codec.schema
        for message_name in (*received, *unsupported):
            schema.message(message_name)  # KeyError naming it and the schema if it is not one of its messages
        if not unsupported <= set(received):
            raise ValueError(f"{self.name}: unsupported {sorted(unsupported - set(received))} are not received")
        if unsupported and on_unsupported is None:
            raise ValueError(f"{self.name}: {sorted(unsupported)} declared unsupported without an on_unsupported")
        self._handlers: dict[int, Callable | None] = {}  # template id -> handler (None: unsupported)
        for message_name in received:
            message = schema.message(message_name)
            method = handler_name(message_name)
            handler = getattr(listener, method, None)
            if message_name in unsupported:
                if handler is not None:
                    raise MissingHandlerError(f"{self.name}: {message_name} is declared unsupported but "
                                              f"{type(listener).__name__}.{method} handles it")
                self._handlers[message.template_id] = None
                continue
            if handler is None:
                raise MissingHandlerError(
                    f"{self.name}: {message_name} (templateId={message.template_id}) has no handler "
                    f"{type(listener).__name__}.{method} and is not declared unsupported")
            fields = codec.attribute_names(message_name)
            mismatch = call_mismatch(handler, fields, context)
            if mismatch is not None:
                raise MissingHandlerError(
                    f"{self.name}: {type(listener).__name__}.{method} cannot take {message_name}'s "
                    f"({', '.join(context)}; {', '.join(fields)}): {mismatch}")
            self._handlers[message.template_id] = handler

    @property
    def template_ids(self) -> frozenset[int]:
        """The template ids this adapter receives (handled or answered as unsupported)."""
        return frozenset(self._handlers)

    def decode(self, buffer, offset: int, length: int) -> SbeMessageBase | None:
        """The message in ``buffer[offset:offset+length]``, or None (counted and reported) if it is malformed,
        another schema's or not one this adapter receives."""
        try:
            message = self.codec.decode(buffer, offset, length)
        except (MalformedMessageError, UnknownMessageError) as exc:
            self._malformed(str(exc))
            return None
        if message.SPEC.template_id not in self._handlers:
            self._malformed(f"templateId={message.SPEC.template_id} ({message.SPEC.name}) is not a message "
                            f"{self.name} receives")
            return None
        return message

    def _malformed(self, text: str) -> None:
        self.malformed_count += 1
        self.on_error(f"{self.name}: message dropped: {text}")

    def dispatch(self, message: SbeMessageBase, *context) -> None:
        """Hand a decoded message to its handler (or to ``on_unsupported``)."""
        handler = self._handlers[message.SPEC.template_id]
        if handler is None:
            self._on_unsupported(message, *context)
        else:
            handler(*context, **message.__dict__)

    def on_fragment(self, buffer, offset: int, length: int, header) -> None:
        """A FragmentHandler: handlers get the fragment's header as their context if the adapter has one
        (``context=("header",)``), else the fields alone."""
        message = self.decode(buffer, offset, length)
        if message is not None:
            if self._context:
                self.dispatch(message, header)
            else:
                self.dispatch(message)
