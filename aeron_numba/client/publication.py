"""Publications: append messages to a driver-created log buffer (spec/transport.md §4).

``Publication`` (concurrent: many threads and processes share the log and its session id) and
``ExclusivePublication`` (one writer, its own session) are thin wrappers over the term appender kernels.
Each offer is one kernel call. Compiled callers take a handle, ``publication.compiled()``, and call its
``offer`` / ``try_claim`` in ``@njit`` code (``client/handles.py``). The handle holds the three arrays the
kernels need:

* ``log_buffer`` - ``np.uint8`` view of the whole log file;
* ``pub_state`` - ``int64[PUB_STATE_LENGTH]``: closed flag, byte offset of the ``pub-lmt`` counter value
  in ``limit_buffer`` and, for exclusive publications, the writer's position fields;
* ``limit_buffer`` - the counters values section of ``cnc.dat`` (holds ``pub-lmt``).

``term_appender.concurrent_offer(pub.log_buffer, pub.pub_state, pub.limit_buffer, src, off, len, rv)``
(``exclusive_offer`` for an exclusive publication) is exactly what ``offer`` does.

After ``close()`` (or when the client closes) ``pub_state`` is marked closed, so kernels (and handles) return
CLOSED, and the Python attributes drop their views so the log can be unmapped once no one (no handle) holds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

from aeron_numba.client.arguments import INT64_MAX, INT64_MIN, as_int
from aeron_numba.client.buffer_claim import BufferClaim
from aeron_numba.client.handles import PublicationHandle, new_publication_handle
from aeron_numba.client.message_bytes import as_uint8
from aeron_numba.errors import AeronError, ConfigurationError, MessageTooLongError
from aeron_numba.jit import compiled_entry
from aeron_numba.kernels import term_appender
from aeron_numba.kernels.atomics_for_python import get_int32_acquire, get_int64_acquire
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.layout.publication_status import (
    CLOSED,
    ERROR,
    PUB_STATE_CLOSED,
    PUB_STATE_LENGTH,
    PUB_STATE_LIMIT_COUNTER_OFFSET,
    PUB_STATE_TERM_BEGIN_POSITION,
    PUB_STATE_TERM_ID,
    PUB_STATE_TERM_OFFSET,
    STATUS_NAMES,
)

if TYPE_CHECKING:
    from aeron_numba.client.client_conductor import ClientConductor


_NDARRAY = np.ndarray
_NO_BYTES = np.zeros(0, dtype=np.uint8)  # a message's type, to bind offer's checked kernel
_ANY_BYTES = np.zeros(2, dtype=np.uint8)[::2]  # a 1-D uint8 array of layout "A", to bind its fast kernels
# A read-only 1-D byte memoryview of layout "A", to bind the same kernels for bytes, bytearray and memoryview: Numba
# reads all three through the buffer protocol, taking the itemsize, shape and strides the object reports.
_ANY_BUFFER = memoryview(bytes(2))[::2]


def _buffer_entry(kernel, *example_args):
    """``compiled_entry`` of an offer kernel for bytes, bytearray and 1-D memoryview messages. Under
    ``NUMBA_DISABLE_JIT`` the plain kernel, given numpy's view of the message: as Python it reads array attributes
    that bytes lack (a memoryview of wider items or not contiguous is refused with ERROR, as the compiled kernel
    refuses it)."""
    if not numba.config.DISABLE_JIT:
        return compiled_entry(kernel, *example_args)

    def plain_entry(log, state, limit_buffer, data, *message_range):
        if type(data) is memoryview and data.itemsize != 1:
            return ERROR
        try:
            view = np.frombuffer(data, dtype=np.uint8)
        except BufferError:
            return ERROR
        return kernel(log, state, limit_buffer, view, *message_range)

    return plain_entry


def status_name(code: int) -> str:
    """Name of an offer/try_claim result: the status name for negative codes, ``"position"`` otherwise."""
    return STATUS_NAMES.get(code, "position") if code < 0 else "position"


class Publication:
    """A concurrent publication (Aeron ``ConcurrentPublication``); thread-safe, shares its log.

    Created by ``Aeron.add_publication``. ``registration_id`` is the id of this registration (what
    ``close`` removes); ``original_registration_id`` is the id of the log, shared by every concurrent
    publication on the same channel and stream.
    """

    _offer_kernel = staticmethod(term_appender.concurrent_offer)
    _offer_message_kernel = staticmethod(term_appender.concurrent_offer_message)
    _offer_range_kernel = staticmethod(term_appender.concurrent_offer_range)
    _try_claim_kernel = staticmethod(term_appender.concurrent_try_claim)

    def __init__(
        self,
        conductor: "ClientConductor",
        channel: str,
        stream_id: int,
        session_id: int,
        registration_id: int,
        original_registration_id: int,
        position_limit_counter_id: int,
        channel_status_id: int,
        log_buffers: LogBuffers,
        limit_buffer: np.ndarray,
    ):
        self._conductor = conductor
        self.channel = channel
        self.stream_id = stream_id
        self.session_id = session_id
        self.registration_id = registration_id
        self.original_registration_id = original_registration_id
        self.position_limit_counter_id = position_limit_counter_id
        self.channel_status_id = channel_status_id
        self.log_file_name = str(log_buffers.path)
        self.term_buffer_length = log_buffers.term_length
        self.mtu_length = log_buffers.mtu_length
        self.initial_term_id = log_buffers.initial_term_id
        self.position_bits_to_shift = log_buffers.position_bits_to_shift
        self.max_message_length = log_buffers.max_message_length
        self.max_payload_length = log_buffers.max_payload_length
        self.max_possible_position = self.term_buffer_length << 31
        self._metadata_offset = log_buffers.metadata_offset
        self.log_buffer: np.ndarray | None = log_buffers.buffer
        self.limit_buffer: np.ndarray | None = limit_buffer
        self.pub_state = np.zeros(PUB_STATE_LENGTH, dtype=np.int64)
        self.pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET] = (
            position_limit_counter_id * counters_layout.COUNTER_LENGTH + counters_layout.COUNTER_VALUE_OFFSET
        )
        self._is_closed = False
        # offer's kernels without per-call dispatch. The checked one takes a 1-D C uint8 message only; the fast
        # ones any 1-D array with 1-byte items (layout "A"; Numba refuses other item sizes with a TypeError).
        self._offer_entry = compiled_entry(self._offer_kernel, self.log_buffer, self.pub_state, limit_buffer,
                                           _NO_BYTES, 0, 0, 0)
        self._offer_message_entry = compiled_entry(self._offer_message_kernel, self.log_buffer, self.pub_state,
                                                   limit_buffer, _ANY_BYTES)
        self._offer_range_entry = compiled_entry(self._offer_range_kernel, self.log_buffer, self.pub_state,
                                                 limit_buffer, _ANY_BYTES, 0, 0)
        self._offer_buffer_entry = _buffer_entry(self._offer_message_kernel, self.log_buffer, self.pub_state,
                                                 limit_buffer, _ANY_BUFFER)
        self._offer_buffer_range_entry = _buffer_entry(self._offer_range_kernel, self.log_buffer, self.pub_state,
                                                       limit_buffer, _ANY_BUFFER, 0, 0)
        self._offer_head = (self.log_buffer, self.pub_state, limit_buffer)  # offer's first arguments; None once closed
        # The last whole-message offer's arguments (it keeps that array alive until another is offered or close).
        self._message_args = self._offer_head + (_ANY_BYTES,)

    # -------------------------------------------------------------------------------------------- hot path
    def offer(self, data, offset: int = 0, length: int | None = None, reserved_value: int = 0) -> int:
        """Append ``data[offset:offset+length]`` as one message (fragmented above ``max_payload_length``).

        ``data`` is bytes, a bytearray, a memoryview or a numpy array; ``offset`` and ``length`` count its bytes.
        A 1-D one of contiguous bytes (a fragment handler's ``buffer`` or a slice of it among them) goes straight
        to the appender kernel; anything else is viewed as its bytes, or copied once when they are not contiguous.

        Returns the new stream position (> 0) or a negative status: NOT_CONNECTED, BACK_PRESSURED,
        ADMIN_ACTION (retry), CLOSED or MAX_POSITION_EXCEEDED. Raises ``MessageTooLongError`` above
        ``max_message_length``.
        """
        head = self._offer_head
        if head is None:
            return CLOSED
        # The fast paths: a 1-D array, whole or an int range of it, reserved value 0. Their kernels check that
        # the array's items are contiguous bytes and the range inside it; they refuse anything else with ERROR,
        # appending nothing, and the checked path below then finds out what was wrong.
        if type(data) is _NDARRAY and data.ndim == 1:
            try:
                if length is None:
                    if offset == 0 and reserved_value == 0:
                        # Senders mostly reuse one array: a call with a ready tuple of arguments is about 25 ns
                        # cheaper than one that builds it.
                        args = self._message_args
                        if args[3] is not data:
                            log, state, limit_buffer = head
                            args = self._message_args = (log, state, limit_buffer, data)
                        result = self._offer_message_entry(*args)
                        if result > ERROR:
                            return result
                elif type(offset) is int and type(length) is int and reserved_value == 0:
                    log, state, limit_buffer = head
                    result = self._offer_range_entry(log, state, limit_buffer, data, offset, length)
                    if result > ERROR:
                        return result
            except (TypeError, OverflowError):  # not 1-byte items, or a bound beyond int64
                pass
        elif (type(data) is bytes or type(data) is bytearray or (type(data) is memoryview and data.ndim == 1)) \
                and reserved_value == 0:
            # The same kernels through the buffer protocol; they refuse a memoryview whose items are not contiguous
            # bytes as they refuse such an array. Only 1-D: Numba would copy the shape and strides of a view of
            # more dimensions into its 1-D buffer structure, past its end.
            try:
                log, state, limit_buffer = head
                if length is None:
                    if offset == 0:
                        result = self._offer_buffer_entry(log, state, limit_buffer, data)
                        if result > ERROR:
                            return result
                elif type(offset) is int and type(length) is int:
                    result = self._offer_buffer_range_entry(log, state, limit_buffer, data, offset, length)
                    if result > ERROR:
                        return result
            except (OverflowError, BufferError):  # a bound beyond int64; an exporter that needs suboffsets
                pass
        return self._offer_checked(head, data, offset, length, reserved_value)

    def _offer_checked(self, head: tuple, data, offset, length, reserved_value) -> int:
        """``offer`` with every argument checked, raising the error that names a bad one."""
        src = as_uint8(data)
        if length is None and offset == 0:
            length = len(src)
        else:
            offset = as_int("offset", offset)
            length = len(src) - offset if length is None else as_int("length", length)
            if offset < 0 or length < 0 or offset + length > len(src):
                raise ConfigurationError(f"offset={offset} length={length} outside the message of length={len(src)}")
        reserved_value = as_int("reserved_value", reserved_value, INT64_MIN, INT64_MAX)  # the frame's int64 field
        result = self._offer_entry(*head, src, offset, length, reserved_value)
        if result == ERROR:  # the kernel refuses a message over the max message length
            raise MessageTooLongError(f"length={length} > max_message_length={self.max_message_length}")
        return result

    def try_claim(self, length: int, buffer_claim: BufferClaim | None = None):
        """Claim an unfragmented frame of ``length`` payload bytes to write in place.

        Returns the ``BufferClaim`` (its ``position`` is the new stream position) on success, or the
        negative status code (see ``offer``). ``length`` above ``max_payload_length`` raises
        ``MessageTooLongError``. The claim must be committed or aborted promptly.
        """
        log = self.log_buffer
        limit_buffer = self.limit_buffer
        if log is None or limit_buffer is None:
            return CLOSED
        length = as_int("length", length)
        if length < 0:
            raise ConfigurationError(f"length={length} must be >= 0")
        if length > self.max_payload_length:
            raise MessageTooLongError(f"length={length} > max_payload_length={self.max_payload_length}")
        claim = BufferClaim() if buffer_claim is None else buffer_claim
        if claim.is_open:
            raise ConfigurationError("buffer_claim is still open: commit or abort it before claiming again")
        result = self._try_claim_kernel(log, self.pub_state, limit_buffer, length, claim.claim)
        if result > 0:
            claim._wrap(log, result)
            return claim
        return result

    def compiled(self) -> PublicationHandle:
        """A handle for ``@njit`` code: ``handle.offer(buf, offset, length)``, ``handle.try_claim(length)``
        (``client/handles.py``). After ``close`` its offers return CLOSED; it keeps the log mapped until dropped.
        Raises ``AeronError`` if the publication is already closed."""
        head = self._offer_head
        if head is None:
            raise AeronError(f"{self!r} is closed: no compiled handle")
        log, state, limit_buffer = head
        return new_publication_handle(log, state, limit_buffer, isinstance(self, ExclusivePublication),
                                      self.session_id, self.stream_id, self.max_payload_length,
                                      self.max_message_length)

    # ------------------------------------------------------------------------------------------ properties
    @property
    def is_closed(self) -> bool:
        """True once ``close()`` ran, or the driver or client closed the publication."""
        return self._is_closed

    @property
    def position(self) -> int:
        """Position the next message would be written at (the producer position), or CLOSED."""
        log = self.log_buffer
        if log is None:
            return CLOSED
        return int(term_appender.producer_position(log))

    @property
    def position_limit(self) -> int:
        """Current ``pub-lmt``: offers at or beyond it are back-pressured. CLOSED once closed."""
        limit_buffer = self.limit_buffer
        if limit_buffer is None:
            return CLOSED
        return int(get_int64_acquire(limit_buffer, int(self.pub_state[PUB_STATE_LIMIT_COUNTER_OFFSET])))

    @property
    def available_window(self) -> int:
        """``position_limit - position``, or CLOSED."""
        limit = self.position_limit
        if limit == CLOSED:
            return CLOSED
        position = self.position
        return CLOSED if position == CLOSED else limit - position

    @property
    def is_connected(self) -> bool:
        """True when a subscriber is connected (log metadata ``is_connected == 1``) and not closed."""
        log = self.log_buffer
        if log is None:
            return False
        return int(get_int32_acquire(log, self._metadata_offset + lb.LOG_IS_CONNECTED_OFFSET)) == 1

    def add_idle_watch(self, watch) -> None:
        """The log metadata word holding ``is_connected`` (and the active transport count beside it), which the driver
        sets as subscribers come and go (``agent/idle_watch.py``)."""
        log = self.log_buffer
        if log is not None:
            watch.watch_int64(log, self._metadata_offset + lb.LOG_IS_CONNECTED_OFFSET)

    def add_destination(self, endpoint_channel: str) -> None:
        """Send to one more destination (``aeron:udp?endpoint=host:port``); the publication's channel must have
        ``control-mode=manual``. Raises ``RegistrationError`` with the driver's error code otherwise."""
        self._conductor.change_destination(self, endpoint_channel, add=True)

    def remove_destination(self, endpoint_channel: str) -> None:
        """Stop sending to a destination added with ``add_destination``."""
        self._conductor.change_destination(self, endpoint_channel, add=False)

    def async_add_destination(self, endpoint_channel: str) -> int:
        """``add_destination`` without waiting: returns the command's correlation id; a refusal goes to the
        context's error handler."""
        return self._conductor.change_destination(self, endpoint_channel, add=True, wait=False)

    def async_remove_destination(self, endpoint_channel: str) -> int:
        """``remove_destination`` without waiting, as ``async_add_destination``."""
        return self._conductor.change_destination(self, endpoint_channel, add=False, wait=False)

    def close(self) -> None:
        """Release this registration (REMOVE_PUBLICATION); later offers return CLOSED. Idempotent."""
        if not self._is_closed:
            self._conductor.release_publication(self)

    def _internal_close(self) -> None:
        """Mark closed for kernels and drop the views (called by the conductor under its lock)."""
        self._is_closed = True
        self.pub_state[PUB_STATE_CLOSED] = 1
        self._offer_head = None
        self._message_args = None  # an offer racing this close gets a TypeError from it: the checked path runs
        self.log_buffer = None
        self.limit_buffer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(channel={self.channel!r}, stream_id={self.stream_id},"
            f" session_id={self.session_id}, registration_id={self.registration_id},"
            f" closed={self._is_closed})"
        )


class ExclusivePublication(Publication):
    """A publication with a single writer and its own session (Aeron ``ExclusivePublication``).

    Not thread-safe: one thread offers. Its position lives in ``pub_state`` (``exclusive_init_state``).
    """

    _offer_kernel = staticmethod(term_appender.exclusive_offer)
    _offer_message_kernel = staticmethod(term_appender.exclusive_offer_message)
    _offer_range_kernel = staticmethod(term_appender.exclusive_offer_range)
    _try_claim_kernel = staticmethod(term_appender.exclusive_try_claim)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        term_appender.exclusive_init_state(self.log_buffer, self.pub_state)

    @property
    def position(self) -> int:
        """The position the next message will be written at, or CLOSED once closed."""
        if self.log_buffer is None:
            return CLOSED
        return int(self.pub_state[PUB_STATE_TERM_BEGIN_POSITION] + self.pub_state[PUB_STATE_TERM_OFFSET])

    @property
    def term_id(self) -> int:
        """The term id the publication is writing in."""
        return int(self.pub_state[PUB_STATE_TERM_ID])

    @property
    def term_offset(self) -> int:
        """The offset within the current term the next message will be written at."""
        return int(self.pub_state[PUB_STATE_TERM_OFFSET])

    def offer_block(self, data, offset: int = 0, length: int | None = None) -> int:
        """Append a block of whole frames framed for this publication (Aeron ``offerBlock``, used by replays).

        The block must start with a DATA frame whose term offset, session id, stream id and term id are this
        publication's current ones (``term_offset``, ``session_id``, ``stream_id``, ``term_id``), and fit in
        the rest of the term; a block that does not raises ``ConfigurationError`` saying which field is wrong.
        Returns the new position or a negative status (ADMIN_ACTION after a full term: retry).
        """
        log, limit_buffer = self.log_buffer, self.limit_buffer
        if log is None or limit_buffer is None:
            return CLOSED
        src = as_uint8(data)
        offset = as_int("offset", offset, INT64_MIN, INT64_MAX)
        length = src.shape[0] - offset if length is None else as_int("length", length, INT64_MIN, INT64_MAX)
        result = term_appender.exclusive_offer_block(log, self.pub_state, limit_buffer, src, offset, length)
        if result == ERROR:
            raise ConfigurationError(self._block_error_text(src, offset, length))
        return result

    def append_padding(self, length: int) -> int:
        """Append a PAD frame of ``length`` payload bytes (Aeron ``appendPadding``, a replayed padding frame)."""
        log, limit_buffer = self.log_buffer, self.limit_buffer
        if log is None or limit_buffer is None:
            return CLOSED
        length = as_int("length", length, INT64_MIN, INT64_MAX)
        result = term_appender.exclusive_append_padding(log, self.pub_state, limit_buffer, length)
        if result == ERROR:
            raise MessageTooLongError(f"padding length={length} must be in [0, {self.max_message_length}]")
        return result

    def _block_error_text(self, src: np.ndarray, offset: int, length: int) -> str:
        code = term_appender.block_error(self.log_buffer, self.pub_state, src, offset, length)
        if code == term_appender.BLOCK_BAD_LENGTH:
            return (f"block length={length} at offset={offset} must be a positive multiple of 32 inside the buffer "
                    f"({src.shape[0]} bytes) and fit the rest of the term ({self.term_buffer_length - self.term_offset})")
        field, expected, at = {
            term_appender.BLOCK_NOT_DATA: ("frame type", frame.HDR_TYPE_DATA, frame.TYPE_FIELD_OFFSET),
            term_appender.BLOCK_WRONG_TERM_OFFSET: ("term offset", self.term_offset, frame.TERM_OFFSET_FIELD_OFFSET),
            term_appender.BLOCK_WRONG_SESSION_ID: ("session id", self.session_id, frame.SESSION_ID_FIELD_OFFSET),
            term_appender.BLOCK_WRONG_STREAM_ID: ("stream id", self.stream_id, frame.STREAM_ID_FIELD_OFFSET),
            term_appender.BLOCK_WRONG_TERM_ID: ("term id", self.term_id, frame.TERM_ID_FIELD_OFFSET),
        }[code]
        size = 2 if code == term_appender.BLOCK_NOT_DATA else 4
        actual = int.from_bytes(src[offset + at:offset + at + size].tobytes(), "little", signed=size == 4)
        return f"improperly formatted block: first frame {field}={actual}, expected {expected}"
