"""An image: one publisher session as seen by one subscription (Aeron ``Image``, spec/transport.md §5).

The driver sends ON_AVAILABLE_IMAGE with the log file and the id of this subscriber's position counter
(``sub-pos``). Polling reads fragments from that position and release-stores the new position, which the
driver reads for flow control (``pub-lmt``) and cleaning.

Python callers: a ``poll`` first peeks at the length of the frame at its position (a plain read of the log;
zero means nothing yet, with no kernel call: what an idle subscriber spins on). Otherwise ``poll_and_copy``
describes up to ``fragment_limit`` fragments from the subscriber position (``term_reader.image_poll_batch``),
copies them (one contiguous run of the term) into the image's private buffer and then checks that our
``sub-pos`` counter is still allocated to this subscription. The handlers are called on the private copy. A
lone fragment is consumed by that same call (its position stored, so a poll that delivers one fragment is one
kernel call); a batch's position is stored once at its end (``store_position_if_owned``).

Why the copy: a Python process can be stopped anywhere (a GC pause, SIGSTOP, a slow handler). If it is stopped
past the client liveness timeout, the driver frees its counters and may then clean or reuse the log behind
the other subscribers. The driver frees the ``sub-pos`` counter *before* it reclaims anything, so a copy
followed by "still allocated" is a copy of data that was intact; handlers then read only that copy, however
long they are stopped. (Aeron's own client reads the log in place and gives no such guarantee to a client the
driver has declared dead.)

Compiled callers take a handle, ``image.compiled()``, and call ``handle.poll(handler, ctx, limit)``
(``client/handles.py``): they read the log in place, as Aeron does.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from aeron_numba.client.fragment_assembler import ABORT, ACTIONS, BREAK, COMMIT
from aeron_numba.client.arguments import as_int
from aeron_numba.client.handles import ImageHandle, mark_image_closed, new_image_handle, new_image_state
from aeron_numba.client.header import Header
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.jit import compiled_entry
from aeron_numba.kernels.atomics_for_python import get_int32_acquire, get_int64_acquire
from aeron_numba.kernels.copying_poll import (
    COPY_TOO_SMALL,
    RESULT_COUNTER_ID,
    RESULT_END,
    RESULT_LENGTH,
    RESULT_NEXT_FRAME,
    RESULT_REGISTRATION_ID,
    RESULT_START,
    RESULT_WANTED,
    block_poll_and_copy,
    poll_and_copy,
    store_position_if_owned,
)
from aeron_numba.kernels.term_reader import FRAGMENT_COLUMNS
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.bits import align
from aeron_numba.layout.log_buffers import LogBuffers

#: Most fragments one poll delivers (the descriptor array of an image grows up to this size).
MAX_FRAGMENTS_PER_POLL = 4096
#: The private copy's first size; a poll whose batch is larger grows it.
INITIAL_COPY_LENGTH = 64 * 1024

_HEADER_LENGTH = frame.HEADER_LENGTH
_FRAME_ALIGNMENT = frame.FRAME_ALIGNMENT
_NO_LIMIT_YET = object()
_NO_FRAME = memoryview(np.zeros(1, dtype=np.int32))  # a closed image's peek


def _check_fragment_limit(fragment_limit: int) -> int:
    fragment_limit = as_int("fragment_limit", fragment_limit)
    if fragment_limit < 1:
        raise ConfigurationError(f"fragment_limit={fragment_limit} must be >= 1")
    return min(fragment_limit, MAX_FRAGMENTS_PER_POLL)


class _LoneFragmentHeader(Header):
    """The header handed with a poll's only fragment: nothing is set per poll. Its frame is the first of the
    image's copy and its position is read from the image's descriptors when asked for."""

    __slots__ = ("_image",)

    def __init__(self, image: "Image"):
        self._image = image
        self.initial_term_id = image.initial_term_id
        self.position_bits_to_shift = image.position_bits_to_shift

    @property
    def buffer(self) -> np.ndarray:
        return self._image._scratch

    @property
    def offset(self) -> int:
        return 0

    @property
    def position(self) -> int:
        return self._image._rows[2]


class Image:
    """A publisher session's log as read by one subscription.

    Attributes
    ----------
    session_id, correlation_id, subscription_registration_id, source_identity : int, int, int, str
        From ON_AVAILABLE_IMAGE; ``correlation_id`` identifies the log.
    join_position : int
        Subscriber position when the image was created.
    log_buffer, position_buffer, position_offset : np.ndarray, np.ndarray, int
        What ``compiled()`` hands to ``@njit`` callers (``term_reader.image_poll``'s arguments); None/None once
        closed.
    """

    def __init__(
        self,
        subscription,
        correlation_id: int,
        session_id: int,
        subscriber_position_id: int,
        log_buffers: LogBuffers,
        position_buffer: np.ndarray,
        source_identity: str,
        counters_metadata_buffer: np.ndarray,
    ):
        self.subscription = subscription
        self.correlation_id = correlation_id
        self.session_id = session_id
        self.subscriber_position_id = subscriber_position_id
        self.subscription_registration_id = subscription.registration_id
        self.stream_id = subscription.stream_id
        self.source_identity = source_identity
        self.log_file_name = str(log_buffers.path)
        self.term_buffer_length = log_buffers.term_length
        self.mtu_length = log_buffers.mtu_length
        self.initial_term_id = log_buffers.initial_term_id
        self.position_bits_to_shift = log_buffers.position_bits_to_shift
        self._metadata_offset = log_buffers.metadata_offset
        self.log_buffer: np.ndarray | None = log_buffers.buffer
        self.position_buffer: np.ndarray | None = position_buffer
        self.position_offset = subscriber_position_id * counters_layout.COUNTER_LENGTH + counters_layout.COUNTER_VALUE_OFFSET
        self.join_position = int(get_int64_acquire(position_buffer, self.position_offset))
        self._metadata = counters_metadata_buffer
        self._scratch = np.zeros(INITIAL_COPY_LENGTH, dtype=np.uint8)  # the private copy handlers read (grows)
        self._result = np.zeros(RESULT_LENGTH, dtype=np.int64)  # poll_and_copy's RESULT_* slots
        self._result[RESULT_COUNTER_ID] = subscriber_position_id
        self._result[RESULT_REGISTRATION_ID] = self.subscription_registration_id
        self._result_slots = memoryview(self._result)  # read from Python without numpy's per-item cost
        self._header = Header(self.initial_term_id, self.position_bits_to_shift, self.log_buffer)
        self._single_header = _LoneFragmentHeader(self)
        self._descriptors = np.zeros((1, FRAGMENT_COLUMNS), dtype=np.int64)
        self._rows = memoryview(self._descriptors).cast("B").cast("q")  # the descriptors, flat
        self._out = self._descriptors
        self._out_limit = _NO_LIMIT_YET  # the fragment_limit self._out was made for (no value a caller passes)
        # poll's peek: the log as int32s and, in result[RESULT_NEXT_FRAME], the slot of the next frame's length.
        # Zero there means nothing to read yet, found without a kernel call (the loop every idle subscriber spins
        # in). The slot lives in the result array so that the kernel that consumes a lone fragment moves it
        # (one store fewer from Python per delivering poll).
        self._log_ints = memoryview(self.log_buffer).cast("i")
        self._result[RESULT_NEXT_FRAME] = self._frame_slot(self.join_position)
        self._is_closed = False
        self._handle_state = new_image_state()  # the closed word compiled handles check on every poll
        self._final_position = self.join_position
        self._is_eos = False
        self._poll_args = None  # poll_and_copy's arguments for poll (None once closed)
        # poll's kernel without per-call dispatch: its arguments are always these arrays (the descriptor rows
        # and the scratch buffer keep their types when they grow) and ints.
        self._poll_and_copy = compiled_entry(poll_and_copy, self.log_buffer, position_buffer, self._out, self._scratch,
                                             self._metadata, self._result, True)
        self._store_if_owned = compiled_entry(store_position_if_owned, self._metadata, position_buffer,
                                              self.subscriber_position_id, self.subscription_registration_id,
                                              self.join_position)

    # ------------------------------------------------------------------------------------------- polling
    def _descriptors_for(self, fragment_limit: int) -> np.ndarray:
        """The descriptor rows for a poll of ``fragment_limit`` (cached for the last limit asked for)."""
        limit = _check_fragment_limit(fragment_limit)
        if self._descriptors.shape[0] < limit:
            self._descriptors = np.zeros((limit, FRAGMENT_COLUMNS), dtype=np.int64)
            self._rows = memoryview(self._descriptors).cast("B").cast("q")
        self._out = self._descriptors[:limit]
        self._out_limit = fragment_limit
        self._bind_poll()
        return self._out

    def _bind_poll(self) -> None:
        log, position_buffer = self.log_buffer, self.position_buffer
        self._poll_args = None if log is None or position_buffer is None else (
            log, position_buffer, self._out, self._scratch, self._metadata, self._result, True)

    def _frame_slot(self, position: int) -> int:
        """``_frame_slot`` of the kernel: the int32 slot of the log holding the length of the frame at
        ``position``."""
        term_length = self.term_buffer_length
        term_base = ((position >> self.position_bits_to_shift) % lb.PARTITION_COUNT) * term_length
        return (term_base + (position & (term_length - 1))) >> 2

    def _poll_batch(self, log: np.ndarray, position_buffer: np.ndarray) -> int:
        """``poll_and_copy`` into this image's descriptor rows (already fitted to the poll's fragment limit) and
        private buffer (grown when a batch needs it), consuming nothing: the caller stores the position."""
        out = self._out
        count = self._poll_and_copy(log, position_buffer, out, self._scratch, self._metadata, self._result, False)
        if count == COPY_TOO_SMALL:
            self._grow_scratch()
            count = self._poll_and_copy(log, position_buffer, out, self._scratch, self._metadata, self._result, False)
        return count

    def _grow_scratch(self) -> None:
        self._scratch = np.zeros(max(self._result_slots[RESULT_WANTED], 2 * self._scratch.size), dtype=np.uint8)
        self._bind_poll()

    def _store_position(self, position_buffer: np.ndarray, position: int) -> None:
        # The caller passes the buffer it polled with: the conductor thread may close this image (and set
        # self.position_buffer to None) while a handler runs, e.g. after a client timeout.
        self._store_if_owned(self._metadata, position_buffer, self.subscriber_position_id,
                             self.subscription_registration_id, position)
        self._result_slots[RESULT_NEXT_FRAME] = self._frame_slot(position)

    def poll(self, handler: Callable, fragment_limit: int) -> int:
        """Deliver up to ``fragment_limit`` fragments to ``handler(buffer, offset, length, header)``.

        ``buffer`` is a private copy of the fragments (``np.uint8``, valid during the call only); the payload
        is ``buffer[offset:offset+length]``. Returns the number of fragments delivered. If the handler raises,
        the fragment it was given counts as consumed (as in Aeron) and the exception propagates.
        """
        if fragment_limit != self._out_limit:
            self._descriptors_for(fragment_limit)
        try:
            if self._log_ints[self._result_slots[RESULT_NEXT_FRAME]] == 0:
                return 0  # a hint (a plain load): only the kernel's acquire load decides there is a frame
        except IndexError:  # closed by the conductor thread between the two loads
            return 0
        return self._poll_found(handler)

    def _poll_found(self, handler: Callable) -> int:
        """``poll`` once its peek found a frame length there (``Subscription.poll`` has its own copy of this)."""
        args = self._poll_args
        if args is None:
            return 0
        count = self._poll_and_copy(*args)
        if count == 1:  # the kernel consumed it (and moved the peek's slot); its frame is the copy's first
            handler(args[3], _HEADER_LENGTH, self._rows[1], self._single_header)
            return 1
        return self._deliver_batch(handler, args, count)

    def _deliver_batch(self, handler: Callable, args: tuple, count: int) -> int:
        """The rest of ``poll``: a batch of several fragments (consumed once delivered), a padding frame skipped,
        a copy buffer to grow, or nothing."""
        if count <= 0:
            if count != COPY_TOO_SMALL:
                return 0  # nothing, or dropped by the driver: nothing of this batch can be trusted
            self._grow_scratch()
            args = self._poll_args
            if args is None:
                return 0
            count = self._poll_and_copy(*args)
            if count <= 0:
                return 0
        slots = self._result_slots
        buffer = args[3]  # the private copy
        if count == 1:
            handler(buffer, _HEADER_LENGTH, self._rows[1], self._single_header)
            return 1
        header = self._header
        header.buffer = buffer
        position_buffer = args[1]
        fragment_position = slots[RESULT_START]
        try:
            for offset, length, fragment_position in self._out[:count].tolist():
                header.offset = offset - _HEADER_LENGTH
                header.position = fragment_position
                handler(buffer, offset, length, header)
        except BaseException:
            self._store_position(position_buffer, fragment_position)
            raise
        self._store_position(position_buffer, slots[RESULT_END])
        return count

    def controlled_poll(self, handler: Callable, fragment_limit: int) -> int:
        """Like ``poll`` but ``handler`` returns an action: ABORT, BREAK, COMMIT or CONTINUE (Aeron semantics).

        ABORT leaves that fragment unconsumed (delivered again next time) and stops; BREAK consumes it and
        stops; COMMIT consumes it and stores the position at once; CONTINUE consumes it and goes on.
        Returns the number of fragments consumed.
        """
        log = self.log_buffer
        position_buffer = self.position_buffer
        if log is None or position_buffer is None:
            return 0
        if fragment_limit != self._out_limit:
            self._descriptors_for(fragment_limit)
        try:
            if self._log_ints[self._result_slots[RESULT_NEXT_FRAME]] == 0:
                return 0  # poll's peek: nothing there yet, no kernel call
        except IndexError:
            return 0
        count = self._poll_batch(log, position_buffer)
        if count <= 0:
            return 0
        resulting, position = self._result_slots[RESULT_END], self._result_slots[RESULT_START]
        committed = position
        fragments_read = 0
        header = self._header
        header.buffer = buffer = self._scratch
        fragment_position = position
        try:
            for offset, length, fragment_position in self._out[:count].tolist():
                header.offset = offset - _HEADER_LENGTH
                header.position = fragment_position
                action = handler(buffer, offset, length, header)
                if action == ABORT:
                    resulting = fragment_position - align(length + _HEADER_LENGTH, _FRAME_ALIGNMENT)
                    break
                fragments_read += 1
                if action == BREAK:
                    resulting = fragment_position
                    break
                if action == COMMIT:
                    self._store_position(position_buffer, fragment_position)
                    committed = fragment_position
                elif action not in ACTIONS:
                    raise ConfigurationError(
                        f"controlled fragment handler returned {action!r}; expected ABORT=1, BREAK=2,"
                        " COMMIT=3 or CONTINUE=4"
                    )
        except BaseException:
            self._store_position(position_buffer, max(fragment_position, committed))
            raise
        if resulting > committed:
            self._store_position(position_buffer, resulting)
        return fragments_read

    def block_poll(self, handler: Callable, block_length_limit: int) -> int:
        """Deliver whole frames as one block: ``handler(buffer, offset, length, session_id, term_id)`` (Aeron
        ``blockPoll``; what a recorder writes to its segment files). The block is at most
        ``block_length_limit`` bytes, never crosses a term end, and a PAD frame comes alone; ``buffer`` is a
        private copy as in ``poll``. Returns the bytes consumed."""
        log = self.log_buffer
        position_buffer = self.position_buffer
        if log is None or position_buffer is None:
            return 0
        block_length_limit = as_int("block_length_limit", block_length_limit)
        if block_length_limit < _FRAME_ALIGNMENT:
            raise ConfigurationError(f"block_length_limit={block_length_limit} must be >= {_FRAME_ALIGNMENT}")
        length = block_poll_and_copy(log, position_buffer, block_length_limit, self._scratch, self._metadata,
                                     self._result)
        if length == COPY_TOO_SMALL:
            self._grow_scratch()
            length = block_poll_and_copy(log, position_buffer, block_length_limit, self._scratch, self._metadata,
                                         self._result)
        if length <= 0:
            return 0
        end = int(self._result[RESULT_END])
        buffer = self._scratch
        session_id = int(buffer[frame.SESSION_ID_FIELD_OFFSET:frame.SESSION_ID_FIELD_OFFSET + 4].view(np.int32)[0])
        term_id = int(buffer[frame.TERM_ID_FIELD_OFFSET:frame.TERM_ID_FIELD_OFFSET + 4].view(np.int32)[0])
        try:
            handler(buffer, 0, length, session_id, term_id)
        finally:
            self._store_position(position_buffer, end)  # as Aeron: a block handed over is consumed
        return length

    def sync_position(self) -> None:
        """Re-aim the Python polls' peek at the subscriber position after a compiled handle of this image
        (``compiled()``) consumed fragments: the peek reads the frame at the last position a Python poll stored,
        which the driver may since have cleaned (zero: "nothing yet" forever). Call it before a Python poll that
        follows compiled polls of the same image."""
        if self.position_buffer is not None:
            self._result_slots[RESULT_NEXT_FRAME] = self._frame_slot(self.position)

    def compiled(self) -> ImageHandle:
        """A handle for ``@njit`` code: ``handle.poll(handler, ctx, fragment_limit)`` (``client/handles.py``).
        After the image closes its polls return 0 without reading the log; it keeps the log mapped until
        dropped. Raises ``AeronError`` if the image is already closed."""
        log, position_buffer = self.log_buffer, self.position_buffer
        if log is None or position_buffer is None:
            raise AeronError(f"{self!r} is closed: no compiled handle")
        return new_image_handle(log, position_buffer, self.position_offset, self._handle_state, self.session_id,
                                self.stream_id)

    # ---------------------------------------------------------------------------------------- properties
    @property
    def position(self) -> int:
        """This subscriber's position in the stream (the final one once closed)."""
        position_buffer = self.position_buffer
        if position_buffer is None:
            return self._final_position
        return int(get_int64_acquire(position_buffer, self.position_offset))

    @property
    def is_closed(self) -> bool:
        """True once the image went away (its publication closed or timed out, or its subscription closed)."""
        return self._is_closed

    @property
    def counters_metadata_buffer(self) -> np.ndarray:
        """The counters metadata the ownership checks read (is ``sub-pos`` still this image's?), for compiled
        callers that consume the log themselves, as the archive's recorder does."""
        return self._metadata

    @property
    def end_of_stream_position(self) -> int:
        """Position where the publication ended (``INT64_MAX`` while it is open)."""
        log = self.log_buffer
        if log is None:
            return self._final_position if self._is_eos else lb.END_OF_STREAM_OPEN
        return int(get_int64_acquire(log, self._metadata_offset + lb.LOG_END_OF_STREAM_POSITION_OFFSET))

    @property
    def is_end_of_stream(self) -> bool:
        """True once the publication closed and this subscriber consumed everything up to its end."""
        if self._is_closed:
            return self._is_eos
        return self.position >= self.end_of_stream_position

    @property
    def active_transport_count(self) -> int:
        """How many transports deliver to this image (1 for IPC; 0 once closed)."""
        log = self.log_buffer
        if log is None:
            return 0
        return int(get_int32_acquire(log, self._metadata_offset + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET))

    def add_idle_watch(self, watch) -> None:
        """The length word of the frame at this subscriber's position: a publisher (or the driver's receiver)
        committing a frame there gives ``poll`` something to read (``agent/idle_watch.py``)."""
        log, position_buffer = self.log_buffer, self.position_buffer
        if log is not None and position_buffer is not None:
            watch.watch_frame_at(log, lb.PARTITION_COUNT * self.term_buffer_length, position_buffer,
                                 self.position_offset)

    def _internal_close(self) -> None:
        """Record the final position and drop the views (called by the conductor under its lock)."""
        if self._is_closed:
            return
        self._final_position = self.position
        self._is_eos = self._final_position >= self.end_of_stream_position
        self._is_closed = True
        mark_image_closed(self._handle_state)
        self.log_buffer = None
        self.position_buffer = None
        self._poll_args = None
        self._log_ints = _NO_FRAME  # drops our view of the log (poll's peek reads zero from here on)
        self._header.buffer = None

    def __repr__(self) -> str:
        return (
            f"Image(session_id={self.session_id}, correlation_id={self.correlation_id},"
            f" stream_id={self.stream_id}, source_identity={self.source_identity!r}, closed={self._is_closed})"
        )
