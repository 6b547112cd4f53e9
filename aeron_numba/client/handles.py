"""Handles for ``@njit`` callers: a publication or an image as a Numba structref with Aeron's methods.

``Publication.compiled()`` and ``Image.compiled()`` build them; a compiled caller then writes
``pub.offer(buf, 0, n)``, ``pub.try_claim(n)`` and ``image.poll(handler, ctx, limit)`` instead of passing the
internal arrays to kernels itself. ``offer`` and ``poll`` are inlined into the caller, as the kernels they call
are (``term_appender.concurrent_offer`` says why), so a handle costs nothing over those arrays.

Closing. A handle holds references to the mapped arrays (the log, the counters values of ``cnc.dat``), and a
mapping is never unmapped while an array over it lives (``MappedFile.close``): so however late a handle is
used, from whatever thread, it touches mapped memory only. Closing the Python object also sets a word the
handle checks on every call: a publication's ``pub_state`` closed slot (its offers return CLOSED) and an
image's closed word (its polls return 0 without reading the log). Drop the handle to let the mapping go.

Types for explicit signatures: ``publication_handle_type``, ``image_handle_type``, ``buffer_claim_handle_type``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref
from numba.extending import overload_method

from aeron_numba.kernels import atomics, term_appender, term_reader
from aeron_numba.kernels.atomics_for_python import put_int64_release
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.frame import HEADER_LENGTH
from aeron_numba.layout.publication_status import (
    CLAIM_FRAME_LENGTH,
    CLAIM_FRAME_OFFSET,
    CLAIM_LENGTH,
    CLOSED,
    ERROR,
    PUB_STATE_CLOSED,
    PUB_STATE_TERM_BEGIN_POSITION,
    PUB_STATE_TERM_OFFSET,
)

#: Byte length of an image handle's closed word (an int64 the Python side sets to 1 on close).
IMAGE_STATE_LENGTH = 8


# --------------------------------------------------------------------------------------------------- types
@structref.register
class BufferClaimHandleType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class PublicationHandleType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class ImageHandleType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


buffer_claim_handle_type = BufferClaimHandleType([
    ("buffer", types.uint8[::1]),  # the log: write the payload at buffer[offset:offset + length]
    ("frame", types.int64[::1]),  # CLAIM_FRAME_OFFSET, CLAIM_FRAME_LENGTH as the kernels fill them
    ("offset", types.int64),
    ("length", types.int64),
    ("position", types.int64),  # what try_claim returned: the new position, or a status
    ("is_open", types.boolean),
])

publication_handle_type = PublicationHandleType([
    ("log", types.uint8[::1]),
    ("pub_state", types.int64[::1]),
    ("limit_buffer", types.uint8[::1]),
    ("is_exclusive", types.boolean),
    ("session_id", types.int64),
    ("stream_id", types.int64),
    ("max_payload_length", types.int64),
    ("max_message_length", types.int64),
    ("claim", buffer_claim_handle_type),  # the claim try_claim(length) fills and returns
])

image_handle_type = ImageHandleType([
    ("log", types.uint8[::1]),
    ("position_buffer", types.uint8[::1]),
    ("position_offset", types.int64),
    ("state", types.uint8[::1]),  # the closed word
    ("session_id", types.int64),
    ("stream_id", types.int64),
])


class BufferClaimHandle(structref.StructRefProxy):
    """A claim a compiled caller writes into (``buffer[offset:offset + length]``) and then commits or aborts.

    Made by ``PublicationHandle.try_claim(length)`` (each handle has its own, reused) or ``new_buffer_claim()``
    for ``try_claim(length, claim)``.
    """

    @property
    def position(self) -> int:
        return _claim_position(self)

    @property
    def is_open(self) -> bool:
        return _claim_is_open(self)


class PublicationHandle(structref.StructRefProxy):
    """What ``Publication.compiled()`` returns: pass it to ``@njit`` code and call ``offer`` / ``try_claim``."""

    @property
    def is_closed(self) -> bool:
        return _publication_is_closed(self)


class ImageHandle(structref.StructRefProxy):
    """What ``Image.compiled()`` returns: pass it to ``@njit`` code and call ``poll(handler, ctx, limit)``."""

    @property
    def is_closed(self) -> bool:
        return _image_is_closed(self)


structref.define_boxing(BufferClaimHandleType, BufferClaimHandle)
structref.define_boxing(PublicationHandleType, PublicationHandle)
structref.define_boxing(ImageHandleType, ImageHandle)


# ------------------------------------------------------------------------------------------- construction
@njit(buffer_claim_handle_type(types.uint8[::1]), cache=True)
def _new_buffer_claim(buffer):
    claim = structref.new(buffer_claim_handle_type)
    claim.buffer = buffer
    claim.frame = np.zeros(CLAIM_LENGTH, dtype=np.int64)
    claim.offset = 0
    claim.length = 0
    claim.position = 0
    claim.is_open = False
    return claim


_EMPTY_BUFFER = np.zeros(0, dtype=np.uint8)


def new_buffer_claim() -> BufferClaimHandle:
    """A claim to pass to ``PublicationHandle.try_claim(length, claim)`` (one per writing thread)."""
    return _new_buffer_claim(_EMPTY_BUFFER)


@njit(publication_handle_type(types.uint8[::1], types.int64[::1], types.uint8[::1], types.boolean, types.int64,
                              types.int64, types.int64, types.int64), cache=True)
def _new_publication_handle(log, pub_state, limit_buffer, is_exclusive, session_id, stream_id, max_payload_length,
                            max_message_length):
    handle = structref.new(publication_handle_type)
    handle.log = log
    handle.pub_state = pub_state
    handle.limit_buffer = limit_buffer
    handle.is_exclusive = is_exclusive
    handle.session_id = session_id
    handle.stream_id = stream_id
    handle.max_payload_length = max_payload_length
    handle.max_message_length = max_message_length
    handle.claim = _new_buffer_claim(log)
    return handle


def new_publication_handle(log: np.ndarray, pub_state: np.ndarray, limit_buffer: np.ndarray, is_exclusive: bool,
                           session_id: int, stream_id: int, max_payload_length: int,
                           max_message_length: int) -> PublicationHandle:
    return _new_publication_handle(log, pub_state, limit_buffer, is_exclusive, session_id, stream_id,
                                   max_payload_length, max_message_length)


@njit(image_handle_type(types.uint8[::1], types.uint8[::1], types.int64, types.uint8[::1], types.int64, types.int64),
      cache=True)
def _new_image_handle(log, position_buffer, position_offset, state, session_id, stream_id):
    handle = structref.new(image_handle_type)
    handle.log = log
    handle.position_buffer = position_buffer
    handle.position_offset = position_offset
    handle.state = state
    handle.session_id = session_id
    handle.stream_id = stream_id
    return handle


def new_image_handle(log: np.ndarray, position_buffer: np.ndarray, position_offset: int, state: np.ndarray,
                     session_id: int, stream_id: int) -> ImageHandle:
    return _new_image_handle(log, position_buffer, position_offset, state, session_id, stream_id)


def new_image_state() -> np.ndarray:
    """An image's closed word, zero (open)."""
    return np.zeros(IMAGE_STATE_LENGTH, dtype=np.uint8)


def mark_image_closed(state: np.ndarray) -> None:
    """Set the closed word (release: a poll that sees it sees everything the closing thread did before)."""
    put_int64_release(state, 0, 1)


# ------------------------------------------------------------------------------------------- publication
def _is_omitted(typ) -> bool:
    return typ is None or isinstance(typ, (types.Omitted, types.NoneType))


@overload_method(PublicationHandleType, "offer", inline="always")
def _publication_offer(handle, buffer, offset=0, length=None, reserved_value=0):
    """``offer(buffer, offset=0, length=len(buffer) - offset, reserved_value=0)``: the new position, or
    NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION, CLOSED, MAX_POSITION_EXCEEDED; ERROR for a range outside
    ``buffer`` or a message over ``max_message_length`` (nothing appended)."""
    if not (isinstance(buffer, types.Array) and buffer.dtype == types.uint8 and buffer.ndim == 1
            and buffer.layout == "C"):
        return None
    whole = _is_omitted(length)

    def impl(handle, buffer, offset=0, length=None, reserved_value=0):
        at = offset
        n = buffer.shape[0] - at if whole else length
        if at < 0 or n < 0 or at > buffer.shape[0] - n:
            return ERROR
        if handle.is_exclusive:
            return term_appender.exclusive_offer(handle.log, handle.pub_state, handle.limit_buffer, buffer, at, n,
                                                 reserved_value)
        return term_appender.concurrent_offer(handle.log, handle.pub_state, handle.limit_buffer, buffer, at, n,
                                              reserved_value)

    return impl


@njit(inline="always")
def _try_claim_into(handle, length, claim):
    if handle.is_exclusive:
        result = term_appender.exclusive_try_claim(handle.log, handle.pub_state, handle.limit_buffer, length,
                                                   claim.frame)
    else:
        result = term_appender.concurrent_try_claim(handle.log, handle.pub_state, handle.limit_buffer, length,
                                                    claim.frame)
    claim.position = result
    if result > 0:
        claim.buffer = handle.log
        claim.offset = claim.frame[CLAIM_FRAME_OFFSET] + HEADER_LENGTH
        claim.length = length
        claim.is_open = True
    return result


# try_claim, commit and abort are not inlined at Numba IR level (inline="always"): with any of them inlined, a
# caller's writes through ``claim.buffer[i] = v`` between try_claim and commit were lost (numba 0.63, seen in
# tests/unit/client/test_handles.py). LLVM still inlines them where it pays.
@overload_method(PublicationHandleType, "try_claim")
def _publication_try_claim(handle, length, claim=None):
    """``try_claim(length)`` returns the handle's own claim, its ``position`` the new position (> 0, the claim is
    open: write ``claim.buffer[claim.offset:claim.offset + length]``, then ``commit()`` or ``abort()``) or the
    status. ``try_claim(length, claim)`` fills ``claim`` and returns the position or status (Aeron's shape).
    ERROR for ``length`` outside ``[0, max_payload_length]``."""
    if _is_omitted(claim):
        def impl_own(handle, length, claim=None):
            own = handle.claim
            _try_claim_into(handle, length, own)
            return own
        return impl_own
    if isinstance(claim, BufferClaimHandleType):
        def impl(handle, length, claim=None):
            return _try_claim_into(handle, length, claim)
        return impl
    return None


@overload_method(PublicationHandleType, "is_closed", inline="always")
def _publication_is_closed_method(handle):
    def impl(handle):
        return atomics.get_int64_acquire(handle.pub_state.view(np.uint8), PUB_STATE_CLOSED * 8) != 0
    return impl


@overload_method(PublicationHandleType, "is_connected")
def _publication_is_connected(handle):
    """True while a subscriber is connected (the log's ``is_connected``) and the publication is open."""
    def impl(handle):
        if handle.is_closed():
            return False
        meta = term_appender.metadata_offset(handle.log)
        return atomics.get_int32_acquire(handle.log, meta + lb.LOG_IS_CONNECTED_OFFSET) == 1
    return impl


@overload_method(PublicationHandleType, "position")
def _publication_position(handle):
    """The position the next message would be written at, or CLOSED."""
    def impl(handle):
        if handle.is_closed():
            return CLOSED
        if handle.is_exclusive:
            return handle.pub_state[PUB_STATE_TERM_BEGIN_POSITION] + handle.pub_state[PUB_STATE_TERM_OFFSET]
        return term_appender.producer_position(handle.log)
    return impl


@overload_method(BufferClaimHandleType, "commit")
def _claim_commit(claim):
    """Publish the claimed frame; False (nothing done) if the claim is not open."""
    def impl(claim):
        if not claim.is_open:
            return False
        claim.is_open = False
        term_appender.commit_claim(claim.buffer, claim.frame)
        return True
    return impl


@overload_method(BufferClaimHandleType, "abort")
def _claim_abort(claim):
    """Turn the claimed frame into padding readers skip; False (nothing done) if the claim is not open."""
    def impl(claim):
        if not claim.is_open:
            return False
        claim.is_open = False
        term_appender.abort_claim(claim.buffer, claim.frame)
        return True
    return impl


# ------------------------------------------------------------------------------------------------- image
@overload_method(ImageHandleType, "is_closed", inline="always")
def _image_is_closed_method(handle):
    def impl(handle):
        return atomics.get_int64_acquire(handle.state, 0) != 0
    return impl


@overload_method(ImageHandleType, "poll", inline="always")
def _image_poll(handle, handler, ctx, fragment_limit):
    """``poll(handler, ctx, fragment_limit)``: deliver up to ``fragment_limit`` fragments to
    ``handler(ctx, buffer, offset, length)`` (``kernels.handlers.FRAGMENT_HANDLER_SIG``), reading the log in
    place; returns the fragments delivered. 0, without reading the log, once the image is closed."""
    def impl(handle, handler, ctx, fragment_limit):
        if atomics.get_int64_acquire(handle.state, 0) != 0:
            return 0
        return term_reader.image_poll(handle.log, handle.position_buffer, handle.position_offset, fragment_limit,
                                      handler, ctx)
    return impl


@overload_method(ImageHandleType, "position")
def _image_position(handle):
    """This subscriber's position (``sub-pos``)."""
    def impl(handle):
        return atomics.get_int64_acquire(handle.position_buffer, handle.position_offset)
    return impl


# ---------------------------------------------------------------------------- Python-side property readers
@njit(cache=True)
def _claim_position(claim):
    return claim.position


@njit(cache=True)
def _claim_is_open(claim):
    return claim.is_open


@njit(cache=True)
def _publication_is_closed(handle):
    return handle.is_closed()


@njit(cache=True)
def _image_is_closed(handle):
    return handle.is_closed()
