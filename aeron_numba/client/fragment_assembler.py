"""Reassembling fragmented messages per session (Aeron's ``FragmentAssembler``, spec §1.4, §5).

A message longer than the max payload arrives as BEGIN, middle..., END fragments, consecutive in one term.
The assembler keeps one buffer per session id: BEGIN starts it, middle fragments append, END appends and
delivers the whole message. A fragment that does not continue exactly where the previous one of its
session ended (term offset), or that arrives without a BEGIN, drops the partial message: it cannot be
completed. Unfragmented messages (BEGIN|END) go straight through without a copy.

The reassembled message is delivered as ``handler(buffer, 0, length, header)`` where ``buffer`` is the
assembler's own ``np.uint8`` array (reused: copy what you keep) and ``header`` a private header: the first
fragment's header with ``frame_length = 32 + length`` and flags BEGIN|END, and ``position`` after the last
fragment.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from aeron_numba.client.header import Header
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import frame

_INITIAL_CAPACITY = 4096


class ControlledFragmentAction:
    """What a ``controlled_poll`` handler returns (Aeron's ``ControlledFragmentHandler.Action``, C values).

    ABORT: do not consume this fragment; it is delivered again by the next poll.
    BREAK: consume it and stop this poll.
    COMMIT: consume it and store the position now.
    CONTINUE: consume it and go on.
    """

    ABORT = 1
    BREAK = 2
    COMMIT = 3
    CONTINUE = 4


ABORT = ControlledFragmentAction.ABORT
BREAK = ControlledFragmentAction.BREAK
COMMIT = ControlledFragmentAction.COMMIT
CONTINUE = ControlledFragmentAction.CONTINUE
ACTIONS = frozenset((ABORT, BREAK, COMMIT, CONTINUE))


class BufferBuilder:
    """A growable byte buffer for one session's partial message, plus the first fragment's header."""

    __slots__ = ("buffer", "limit", "next_term_offset", "header_bytes")

    def __init__(self, initial_capacity: int = _INITIAL_CAPACITY):
        self.buffer = np.zeros(max(initial_capacity, frame.HEADER_LENGTH), dtype=np.uint8)
        self.limit = 0
        self.next_term_offset = -1
        self.header_bytes = np.zeros(frame.HEADER_LENGTH, dtype=np.uint8)

    def reset(self) -> "BufferBuilder":
        self.limit = 0
        self.next_term_offset = -1
        return self

    def append(self, src: np.ndarray, offset: int, length: int) -> None:
        required = self.limit + length
        if required > self.buffer.shape[0]:
            capacity = self.buffer.shape[0]
            while capacity < required:
                capacity *= 2
            grown = np.zeros(capacity, dtype=np.uint8)
            grown[: self.limit] = self.buffer[: self.limit]
            self.buffer = grown
        self.buffer[self.limit : required] = src[offset : offset + length]
        self.limit = required

    def capture_header(self, header: Header) -> None:
        self.header_bytes[:] = header.buffer[header.offset : header.offset + frame.HEADER_LENGTH]

    def complete_header(self, last: Header) -> Header:
        """The first fragment's header, rewritten to describe the whole message (BEGIN|END, full length)."""
        header_bytes = self.header_bytes.copy()
        header_bytes[: 4].view(np.int32)[0] = frame.HEADER_LENGTH + self.limit
        header_bytes[frame.FLAGS_FIELD_OFFSET] |= frame.UNFRAGMENTED
        complete = Header(last.initial_term_id, last.position_bits_to_shift, header_bytes)
        complete.position = last.position
        return complete


class _AssemblerBase:
    def __init__(self, delegate: Callable, initial_buffer_length: int = _INITIAL_CAPACITY):
        if not callable(delegate):
            raise ConfigurationError(f"delegate={delegate!r} must be callable")
        if initial_buffer_length < 0:
            raise ConfigurationError(f"initial_buffer_length={initial_buffer_length} must be >= 0")
        self.delegate = delegate
        self.initial_buffer_length = initial_buffer_length
        self._builders: dict[int, BufferBuilder] = {}

    def _builder_for_begin(self, session_id: int) -> BufferBuilder:
        builder = self._builders.get(session_id)
        if builder is None:
            builder = BufferBuilder(self.initial_buffer_length)
            self._builders[session_id] = builder
        return builder.reset()

    def _continuing_builder(self, header: Header) -> BufferBuilder | None:
        """The session's builder if this fragment continues its partial message, else None (dropped)."""
        builder = self._builders.get(header.session_id)
        if builder is None or builder.next_term_offset < 0:
            return None
        if header.term_offset != builder.next_term_offset:
            builder.reset()  # a gap: the partial message can never complete
            return None
        return builder

    def free_session_buffer(self, session_id: int) -> bool:
        """Forget a session's partial message and buffer (e.g. when its image goes away)."""
        return self._builders.pop(session_id, None) is not None

    def clear(self) -> None:
        """Drop every partial message."""
        for builder in self._builders.values():
            builder.reset()

    @property
    def session_ids(self) -> list[int]:
        return list(self._builders)


class FragmentAssembler(_AssemblerBase):
    """A fragment handler that reassembles messages and passes whole ones to ``delegate``.

    Use it as the handler of ``Subscription.poll``/``Image.poll``: ``sub.poll(FragmentAssembler(h), 10)``.
    """

    def on_fragment(self, buffer: np.ndarray, offset: int, length: int, header: Header) -> None:
        """The fragment handler to poll with: passes whole messages to the delegate, reassembling fragmented ones per
        session."""
        flags = header.flags
        if (flags & frame.UNFRAGMENTED) == frame.UNFRAGMENTED:
            self.delegate(buffer, offset, length, header)
            return
        if flags & frame.BEGIN_FRAG_FLAG:
            builder = self._builder_for_begin(header.session_id)
            builder.capture_header(header)
            builder.append(buffer, offset, length)
            builder.next_term_offset = header.next_term_offset
            return
        builder = self._continuing_builder(header)
        if builder is None:
            return
        builder.append(buffer, offset, length)
        if flags & frame.END_FRAG_FLAG:
            limit = builder.limit
            complete = builder.complete_header(header)
            builder.reset()
            self.delegate(builder.buffer, 0, limit, complete)
        else:
            builder.next_term_offset = header.next_term_offset

    __call__ = on_fragment


class ControlledFragmentAssembler(_AssemblerBase):
    """``FragmentAssembler`` for ``controlled_poll``: returns the delegate's action for whole messages.

    If the delegate answers ABORT for a reassembled message, the last fragment is taken off again so the
    next poll, which re-delivers that fragment, completes the message once more.
    """

    def on_fragment(self, buffer: np.ndarray, offset: int, length: int, header: Header) -> int:
        """The fragment handler to poll with: passes whole messages to the delegate, reassembling fragmented ones per
        session; returns the delegate's action (CONTINUE while a message is incomplete)."""
        flags = header.flags
        if (flags & frame.UNFRAGMENTED) == frame.UNFRAGMENTED:
            return self.delegate(buffer, offset, length, header)
        if flags & frame.BEGIN_FRAG_FLAG:
            builder = self._builder_for_begin(header.session_id)
            builder.capture_header(header)
            builder.append(buffer, offset, length)
            builder.next_term_offset = header.next_term_offset
            return CONTINUE
        builder = self._continuing_builder(header)
        if builder is None:
            return CONTINUE
        previous_limit = builder.limit
        builder.append(buffer, offset, length)
        if not flags & frame.END_FRAG_FLAG:
            builder.next_term_offset = header.next_term_offset
            return CONTINUE
        action = self.delegate(builder.buffer, 0, builder.limit, builder.complete_header(header))
        if action == ABORT:
            builder.limit = previous_limit
        else:
            builder.reset()
        return action

    __call__ = on_fragment
