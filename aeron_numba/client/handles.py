"""Handles for ``@njit`` callers: a publication or an image as a value with Aeron's methods.

``Publication.compiled()`` and ``Image.compiled()`` build them; a compiled caller then writes
``pub.offer(buf, 0, n)``, ``pub.try_claim(n)`` and ``image.poll(handler, ctx, limit)`` instead of passing the
internal arrays to kernels itself.

A handle is a named tuple of the arrays its kernels take (Numba passes it by value). ``offer`` and ``poll`` are
inlined into the caller, as the kernels they call are (``term_appender.concurrent_offer`` says why); the other
methods are functions of their own compiled with the kernels' flags (``jit.KERNEL_FLAGS``) and return scalars
only (an array returned by a function without reference counting to a caller with it would be released once too
often). Measured in one process, ``offer(32 B)`` + ``poll`` per message: the same 19-30 ns through a handle as
with the kernels called on the arrays, from a loop compiled as ``jit.kernel`` compiles (``_nrt=False``); a
handle passed whole to a method of its own cost 50-65 ns (its arrays are passed field by field). Compile hot
loops without Numba's reference counting (``aeron_numba.jit.kernel``, or ``@njit(_nrt=False)``): with it on (the
``@njit`` default, and what a structref would need) every array handed to a kernel is counted with atomic
instructions, and the same loop took 100-200 ns.

Closing. A handle holds the mapped arrays (the log, the counters values of ``cnc.dat``), and a mapping is never
unmapped while an array over it lives (``MappedFile.close``): so however late a handle is used, from whatever
thread, it touches mapped memory only. Closing the Python object also sets a word the handle checks on every
call: the publication's ``pub_state`` closed slot (offers and claims return CLOSED) and the image's closed word
(polls return 0 without reading the log). Drop the handle to let the mapping go.

Types for explicit signatures: ``publication_handle_type``, ``image_handle_type``, ``buffer_claim_type``.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.extending import overload_attribute, overload_method

from aeron_numba.errors import AeronError
from aeron_numba.jit import KERNEL_FLAGS
from aeron_numba.kernels import atomics, term_appender, term_reader
from aeron_numba.kernels.atomics_for_python import put_int64_release
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.frame import HEADER_LENGTH
from aeron_numba.layout.publication_status import (
    CLAIM_FRAME_LENGTH,
    CLAIM_FRAME_OFFSET,
    CLOSED,
    ERROR,
    PUB_STATE_CLOSED,
    PUB_STATE_TERM_BEGIN_POSITION,
    PUB_STATE_TERM_OFFSET,
)

# Slots of a claim's state (int64): the two the kernels fill (CLAIM_FRAME_OFFSET, CLAIM_FRAME_LENGTH), then the
# result of the try_claim that filled it and whether it is open.
CLAIM_POSITION = 2
CLAIM_IS_OPEN = 3
CLAIM_STATE_LENGTH = 4

#: Byte length of an image handle's closed word (an int64 the Python side sets to 1 on close).
IMAGE_STATE_LENGTH = 8

# The methods other than offer and poll: compiled on their own with the kernels' flags (the module docstring
# says why), nogil aside (they run inside their caller).
_METHOD_OPTIONS = dict(jit_options={k: v for k, v in KERNEL_FLAGS.items() if k != "nogil"})


class BufferClaimHandle(NamedTuple):
    """A claim ``@njit`` code writes into: ``buffer[claim.offset:claim.offset + claim.length]``, then
    ``claim.commit()`` or ``claim.abort()``; ``claim.is_open`` until then. (Its ``state`` also keeps what the
    last ``try_claim`` returned, at ``CLAIM_POSITION``.)"""

    buffer: np.ndarray  # the publication's log (uint8)
    state: np.ndarray  # int64[CLAIM_STATE_LENGTH]


class PublicationHandle(NamedTuple):
    """What ``Publication.compiled()`` returns: pass it to ``@njit`` code and call ``offer`` / ``try_claim``."""

    log: np.ndarray
    pub_state: np.ndarray
    limit_buffer: np.ndarray
    is_exclusive: bool
    session_id: int
    stream_id: int
    max_payload_length: int
    max_message_length: int
    claim: BufferClaimHandle  # the claim try_claim(length) fills


class ImageHandle(NamedTuple):
    """What ``Image.compiled()`` returns: pass it to ``@njit`` code and call ``poll(handler, ctx, limit)``."""

    log: np.ndarray
    position_buffer: np.ndarray
    position_offset: int
    state: np.ndarray  # the closed word (IMAGE_STATE_LENGTH bytes)
    session_id: int
    stream_id: int


def new_buffer_claim(publication: PublicationHandle) -> BufferClaimHandle:
    """A claim of ``publication`` (a handle) to pass to its ``try_claim(length, claim)``: one per writing thread."""
    return _new_claim(publication.log)


def _new_claim(log: np.ndarray) -> BufferClaimHandle:
    return BufferClaimHandle(log, np.zeros(CLAIM_STATE_LENGTH, dtype=np.int64))


def _require_jit() -> None:
    """The methods exist only as Numba overloads: with the JIT off a handle would have fields and no methods."""
    if numba.config.DISABLE_JIT:
        raise AeronError("compiled handles need Numba's JIT, and NUMBA_DISABLE_JIT=1 is set: call offer / try_claim "
                         "/ poll on the Publication and Subscription from Python instead")


def new_publication_handle(log: np.ndarray, pub_state: np.ndarray, limit_buffer: np.ndarray, is_exclusive: bool,
                           session_id: int, stream_id: int, max_payload_length: int,
                           max_message_length: int) -> PublicationHandle:
    _require_jit()
    return PublicationHandle(log, pub_state, limit_buffer, bool(is_exclusive), int(session_id), int(stream_id),
                             int(max_payload_length), int(max_message_length), _new_claim(log))


def new_image_state() -> np.ndarray:
    """An image's closed word, zero (open)."""
    return np.zeros(IMAGE_STATE_LENGTH, dtype=np.uint8)


def new_image_handle(log: np.ndarray, position_buffer: np.ndarray, position_offset: int, state: np.ndarray,
                     session_id: int, stream_id: int) -> ImageHandle:
    _require_jit()
    return ImageHandle(log, position_buffer, int(position_offset), state, int(session_id), int(stream_id))


class ImageHandles:
    """The compiled handles of a subscription's images (``Image.compiled``), made once per image for a Python caller
    that polls them through kernels (a cluster's ingress and consensus adapters), and let go of once their images
    closed: a handle keeps its image's log mapped."""

    def __init__(self):
        self._handles: dict[int, tuple] = {}  # id(image) -> (image, its handle)

    def of(self, image) -> ImageHandle | None:
        """``image``'s handle; None once it is closed."""
        entry = self._handles.get(id(image))
        if entry is None or entry[0] is not image:
            if image.is_closed:
                return None
            entry = self._handles[id(image)] = (image, image.compiled())
        return entry[1]

    def drop_closed(self) -> None:
        """Let go of the handles of the images closed since."""
        if any(image.is_closed for image, _ in self._handles.values()):
            self._handles = {key: entry for key, entry in self._handles.items() if not entry[0].is_closed}


def mark_image_closed(state: np.ndarray) -> None:
    """Set the closed word (release: a poll that sees it sees everything the closing thread did before)."""
    put_int64_release(state, 0, 1)


_U8 = np.zeros(1, dtype=np.uint8)
buffer_claim_type = numba.typeof(_new_claim(_U8))
publication_handle_type = numba.typeof(PublicationHandle(_U8, np.zeros(1, np.int64), _U8, False, 0, 0, 0, 0,
                                                        _new_claim(_U8)))
image_handle_type = numba.typeof(ImageHandle(_U8, _U8, 0, _U8, 0, 0))


def _is(typ, cls) -> bool:
    return isinstance(typ, types.BaseNamedTuple) and typ.instance_class is cls


def _is_omitted(typ) -> bool:
    return typ is None or isinstance(typ, (types.Omitted, types.NoneType))


# ------------------------------------------------------------------------------------------- publication
@overload_method(types.NamedTuple, "offer", inline="always")
def _publication_offer(handle, buffer, offset=0, length=None, reserved_value=0):
    """``offer(buffer, offset=0, length=len(buffer) - offset, reserved_value=0)``: the new position, or
    NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION, CLOSED, MAX_POSITION_EXCEEDED; ERROR for a range outside
    ``buffer`` or a message over ``max_message_length`` (nothing appended)."""
    if not _is(handle, PublicationHandle):
        return None
    if not (isinstance(buffer, types.Array) and buffer.dtype == types.uint8 and buffer.ndim == 1
            and buffer.layout == "C"):
        return None
    whole = _is_omitted(length)

    def impl(handle, buffer, offset=0, length=None, reserved_value=0):
        n = buffer.shape[0] - offset if whole else length
        if offset < 0 or n < 0 or offset > buffer.shape[0] - n:
            return ERROR
        if handle.is_exclusive:
            return term_appender.exclusive_offer(handle.log, handle.pub_state, handle.limit_buffer, buffer, offset,
                                                 n, reserved_value)
        return term_appender.concurrent_offer(handle.log, handle.pub_state, handle.limit_buffer, buffer, offset, n,
                                              reserved_value)

    return impl


@overload_method(types.NamedTuple, "try_claim", **_METHOD_OPTIONS)
def _publication_try_claim(handle, length, claim=None):
    """``try_claim(length[, claim])``: claim an unfragmented frame of ``length`` payload bytes in ``claim`` (by
    default the handle's own, ``handle.claim``). Returns the new position (the claim is open: write
    ``claim.buffer[claim.offset:claim.offset + length]``, then ``claim.commit()`` or ``claim.abort()``) or a
    status; ERROR for ``length`` outside ``[0, max_payload_length]``, a claim still open or another publication's."""
    if not _is(handle, PublicationHandle):
        return None
    own = _is_omitted(claim)
    if not own and not _is(claim, BufferClaimHandle):
        return None

    def impl(handle, length, claim=None):
        target = handle.claim if own else claim
        state = target.state
        if state[CLAIM_IS_OPEN] != 0 or target.buffer.ctypes.data != handle.log.ctypes.data:
            return ERROR  # still open, or another publication's claim (its commit would write to that log)
        if handle.is_exclusive:
            result = term_appender.exclusive_try_claim(handle.log, handle.pub_state, handle.limit_buffer, length,
                                                       state)
        else:
            result = term_appender.concurrent_try_claim(handle.log, handle.pub_state, handle.limit_buffer, length,
                                                        state)
        state[CLAIM_POSITION] = result
        if result > 0:
            state[CLAIM_IS_OPEN] = 1
        return result

    return impl


@overload_method(types.NamedTuple, "is_closed", **_METHOD_OPTIONS)
def _is_closed(handle):
    """True once the publication or image is closed (then the handle refuses: CLOSED, or 0 fragments)."""
    if _is(handle, PublicationHandle):
        def impl(handle):
            return atomics.get_int64_acquire(handle.pub_state.view(np.uint8), PUB_STATE_CLOSED * 8) != 0
        return impl
    if _is(handle, ImageHandle):
        def impl(handle):
            return atomics.get_int64_acquire(handle.state, 0) != 0
        return impl
    return None


@overload_method(types.NamedTuple, "is_connected", **_METHOD_OPTIONS)
def _publication_is_connected(handle):
    """True while a subscriber is connected (the log's ``is_connected``) and the publication is open."""
    if not _is(handle, PublicationHandle):
        return None

    def impl(handle):
        if atomics.get_int64_acquire(handle.pub_state.view(np.uint8), PUB_STATE_CLOSED * 8) != 0:
            return False
        meta = term_appender.metadata_offset(handle.log)
        return atomics.get_int32_acquire(handle.log, meta + lb.LOG_IS_CONNECTED_OFFSET) == 1

    return impl


@overload_method(types.NamedTuple, "position", **_METHOD_OPTIONS)
def _position(handle):
    """A publication's position (where the next message goes; CLOSED once closed) or an image's ``sub-pos``."""
    if _is(handle, PublicationHandle):
        def impl(handle):
            if atomics.get_int64_acquire(handle.pub_state.view(np.uint8), PUB_STATE_CLOSED * 8) != 0:
                return CLOSED
            if handle.is_exclusive:
                return handle.pub_state[PUB_STATE_TERM_BEGIN_POSITION] + handle.pub_state[PUB_STATE_TERM_OFFSET]
            return term_appender.producer_position(handle.log)
        return impl
    if _is(handle, ImageHandle):
        def impl(handle):
            return atomics.get_int64_acquire(handle.position_buffer, handle.position_offset)
        return impl
    return None


# ------------------------------------------------------------------------------------------------- claim
@overload_method(types.NamedTuple, "commit", **_METHOD_OPTIONS)
def _claim_commit(claim):
    """Publish the claimed frame; False (nothing done) if the claim is not open."""
    if not _is(claim, BufferClaimHandle):
        return None

    def impl(claim):
        state = claim.state
        if state[CLAIM_IS_OPEN] == 0:
            return False
        state[CLAIM_IS_OPEN] = 0
        term_appender.commit_claim(claim.buffer, state)
        return True

    return impl


@overload_method(types.NamedTuple, "abort", **_METHOD_OPTIONS)
def _claim_abort(claim):
    """Turn the claimed frame into padding readers skip; False (nothing done) if the claim is not open."""
    if not _is(claim, BufferClaimHandle):
        return None

    def impl(claim):
        state = claim.state
        if state[CLAIM_IS_OPEN] == 0:
            return False
        state[CLAIM_IS_OPEN] = 0
        term_appender.abort_claim(claim.buffer, state)
        return True

    return impl


@overload_attribute(types.NamedTuple, "offset")
def _claim_offset(claim):
    """Offset of the claimed payload in ``claim.buffer``."""
    if not _is(claim, BufferClaimHandle):
        return None

    def get(claim):
        return claim.state[CLAIM_FRAME_OFFSET] + HEADER_LENGTH

    return get


@overload_attribute(types.NamedTuple, "length")
def _claim_length(claim):
    """Payload length claimed."""
    if not _is(claim, BufferClaimHandle):
        return None

    def get(claim):
        return claim.state[CLAIM_FRAME_LENGTH] - HEADER_LENGTH

    return get


@overload_attribute(types.NamedTuple, "is_open")
def _claim_is_open(claim):
    """True from a successful ``try_claim`` to its ``commit`` or ``abort``."""
    if not _is(claim, BufferClaimHandle):
        return None

    def get(claim):
        return claim.state[CLAIM_IS_OPEN] != 0

    return get


# ------------------------------------------------------------------------------------------------- image
@overload_method(types.NamedTuple, "poll", inline="always")
def _image_poll(handle, handler, ctx, fragment_limit):
    """``poll(handler, ctx, fragment_limit)``: deliver up to ``fragment_limit`` fragments to
    ``handler(ctx, buffer, offset, length)`` (``kernels.handlers.FRAGMENT_HANDLER_SIG``), reading the log in
    place; returns the fragments delivered. 0, without reading the log, once the image is closed."""
    if not _is(handle, ImageHandle):
        return None

    def impl(handle, handler, ctx, fragment_limit):
        if atomics.get_int64_acquire(handle.state, 0) != 0:
            return 0
        return term_reader.image_poll(handle.log, handle.position_buffer, handle.position_offset, fragment_limit,
                                      handler, ctx)

    return impl
