"""Encoding, validating and decoding the UDP frames of spec/transport.md §16 (layouts in ``layout/udp_frames.py``).

Encoders write one frame at ``buf[offset:]`` and return its length, or ``INSUFFICIENT_SPACE`` when it does
not fit (nothing is written then). ``classify_datagram`` is the one gate for everything read off a socket: it
returns the frame type only when every fixed field the decoders read lies inside the datagram, and for a
DATA/PAD datagram only when every frame in it is a frame the rebuilder can place in a term (``insert`` checks the
image's own term length); anything else is a
negative ``INVALID_*`` code and the caller counts an invalid packet. It never reads outside
``buf[offset:offset + length]``.

Decoders return a tuple whose first element is the frame length, or ``INVALID_BOUNDS`` when the type's fixed
part would run past ``buf`` (call them after ``classify_datagram`` accepted the datagram). All loads and stores
go through ``kernels.atomics`` (relaxed): send and receive buffers are process-local today, but a datagram ring
in shared memory may be written by another process.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import (
    CURRENT_VERSION,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    FRAME_LENGTH_FIELD_OFFSET,
    HDR_TYPE_DATA,
    HDR_TYPE_ERR,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_RES,
    HDR_TYPE_RSP_SETUP,
    HDR_TYPE_RTTM,
    HDR_TYPE_SETUP,
    HDR_TYPE_SM,
    HEADER_LENGTH,
    MAX_UDP_PAYLOAD_LENGTH,
    RESERVED_VALUE_OFFSET,
    SESSION_ID_FIELD_OFFSET,
    STREAM_ID_FIELD_OFFSET,
    TERM_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
    VERSION_FIELD_OFFSET,
)
from aeron_numba.layout.log_buffer_descriptor import TERM_MAX_LENGTH, TERM_MIN_LENGTH
from aeron_numba.layout.udp_frames import (
    COMMON_HEADER_LENGTH,
    CONTROL_SESSION_ID_OFFSET,
    CONTROL_STREAM_ID_OFFSET,
    ERR_ERROR_CODE_OFFSET,
    ERR_ERROR_LENGTH_OFFSET,
    ERR_ERROR_TEXT_OFFSET,
    ERR_GROUP_TAG_FLAG,
    ERR_GROUP_TAG_OFFSET,
    ERR_HEADER_LENGTH,
    ERR_MAX_TEXT_LENGTH,
    ERR_RECEIVER_ID_OFFSET,
    HEARTBEAT_EOS_FLAGS,
    HEARTBEAT_FLAGS,
    INSUFFICIENT_SPACE,
    INVALID_BOUNDS,
    INVALID_ERROR_LENGTH,
    INVALID_FRAME_LENGTH,
    INVALID_SETUP_MTU,
    INVALID_SETUP_TERM_LENGTH,
    INVALID_STREAM_MISMATCH,
    INVALID_TERM_OFFSET,
    INVALID_TOO_SHORT,
    INVALID_TYPE,
    INVALID_VERSION,
    NAK_FRAME_LENGTH,
    NAK_LENGTH_OFFSET,
    NAK_TERM_ID_OFFSET,
    NAK_TERM_OFFSET_OFFSET,
    RES_HEADER_LENGTH,
    RSP_SETUP_FRAME_LENGTH,
    RSP_SETUP_RESPONSE_SESSION_ID_OFFSET,
    RTTM_ECHO_TIMESTAMP_OFFSET,
    RTTM_FRAME_LENGTH,
    RTTM_RECEIVER_ID_OFFSET,
    RTTM_RECEPTION_DELTA_OFFSET,
    RTTM_REPLY_FLAG,
    SETUP_ACTIVE_TERM_ID_OFFSET,
    SETUP_FRAME_LENGTH,
    SETUP_INITIAL_TERM_ID_OFFSET,
    SETUP_MTU_LENGTH_OFFSET,
    SETUP_SESSION_ID_OFFSET,
    SETUP_STREAM_ID_OFFSET,
    SETUP_TERM_LENGTH_OFFSET,
    SETUP_TERM_OFFSET_OFFSET,
    SETUP_TTL_OFFSET,
    SM_CONSUMPTION_TERM_ID_OFFSET,
    SM_CONSUMPTION_TERM_OFFSET_OFFSET,
    SM_FRAME_LENGTH,
    SM_GROUP_TAG_OFFSET,
    SM_RECEIVER_ID_OFFSET,
    SM_RECEIVER_WINDOW_OFFSET,
    SM_WITH_GROUP_TAG_FRAME_LENGTH,
    check_error_text_length,
    check_frame_fits,
)

# --------------------------------------------------------------------------------------------------------
# Common header
# --------------------------------------------------------------------------------------------------------


@kernel(inline="always")
def _fits(buf, offset, length):
    return offset >= 0 and length >= 0 and offset <= buf.size - length


@kernel(inline="always")
def _put_common_header(buf, offset, frame_length, flags, frame_type):
    atomics.put_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET, frame_length)
    atomics.put_int8(buf, offset + VERSION_FIELD_OFFSET, CURRENT_VERSION)
    atomics.put_int8(buf, offset + FLAGS_FIELD_OFFSET, flags)
    atomics.put_int16(buf, offset + TYPE_FIELD_OFFSET, frame_type)


@kernel(inline="always")
def _frame_type(buf, offset):
    return atomics.get_int16(buf, offset + TYPE_FIELD_OFFSET) & 0xFFFF


@kernel(inline="always")
def _flags(buf, offset):
    return atomics.get_int8(buf, offset + FLAGS_FIELD_OFFSET) & 0xFF


# --------------------------------------------------------------------------------------------------------
# Encoders
# --------------------------------------------------------------------------------------------------------


@kernel
def encode_setup(
    buf, offset, term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length, mtu, ttl, flags=0
):
    """Write a SETUP frame (40 bytes, §16). ``flags``: ``SETUP_SEND_RESPONSE_SETUP_FLAG``, ``SETUP_GROUP_FLAG``.

    Returns
    -------
    int
        ``SETUP_FRAME_LENGTH``, or ``INSUFFICIENT_SPACE``.
    """
    if not _fits(buf, offset, SETUP_FRAME_LENGTH):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, SETUP_FRAME_LENGTH, flags, HDR_TYPE_SETUP)
    atomics.put_int32(buf, offset + SETUP_TERM_OFFSET_OFFSET, term_offset)
    atomics.put_int32(buf, offset + SETUP_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + SETUP_STREAM_ID_OFFSET, stream_id)
    atomics.put_int32(buf, offset + SETUP_INITIAL_TERM_ID_OFFSET, initial_term_id)
    atomics.put_int32(buf, offset + SETUP_ACTIVE_TERM_ID_OFFSET, active_term_id)
    atomics.put_int32(buf, offset + SETUP_TERM_LENGTH_OFFSET, term_length)
    atomics.put_int32(buf, offset + SETUP_MTU_LENGTH_OFFSET, mtu)
    atomics.put_int32(buf, offset + SETUP_TTL_OFFSET, ttl)
    return SETUP_FRAME_LENGTH


@kernel
def encode_status_message(
    buf, offset, session_id, stream_id, consumption_term_id, consumption_term_offset, receiver_window, receiver_id,
    group_tag, has_group_tag, flags,
):
    """Write a status message (36 bytes, or 44 with ``has_group_tag``, §16).

    ``flags``: ``SM_SEND_SETUP_FLAG``, ``SM_EOS_FLAG``. Returns the frame length or ``INSUFFICIENT_SPACE``.
    """
    frame_length = SM_WITH_GROUP_TAG_FRAME_LENGTH if has_group_tag else SM_FRAME_LENGTH
    if not _fits(buf, offset, frame_length):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, frame_length, flags, HDR_TYPE_SM)
    atomics.put_int32(buf, offset + CONTROL_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + CONTROL_STREAM_ID_OFFSET, stream_id)
    atomics.put_int32(buf, offset + SM_CONSUMPTION_TERM_ID_OFFSET, consumption_term_id)
    atomics.put_int32(buf, offset + SM_CONSUMPTION_TERM_OFFSET_OFFSET, consumption_term_offset)
    atomics.put_int32(buf, offset + SM_RECEIVER_WINDOW_OFFSET, receiver_window)
    atomics.put_int64(buf, offset + SM_RECEIVER_ID_OFFSET, receiver_id)
    if has_group_tag:
        atomics.put_int64(buf, offset + SM_GROUP_TAG_OFFSET, group_tag)
    return frame_length


@kernel
def encode_nak(buf, offset, session_id, stream_id, term_id, term_offset, length):
    """Write a NAK (28 bytes, §16) asking for ``length`` bytes from ``term_offset`` of ``term_id``.

    Returns ``NAK_FRAME_LENGTH`` or ``INSUFFICIENT_SPACE``.
    """
    if not _fits(buf, offset, NAK_FRAME_LENGTH):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, NAK_FRAME_LENGTH, 0, HDR_TYPE_NAK)
    atomics.put_int32(buf, offset + CONTROL_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + CONTROL_STREAM_ID_OFFSET, stream_id)
    atomics.put_int32(buf, offset + NAK_TERM_ID_OFFSET, term_id)
    atomics.put_int32(buf, offset + NAK_TERM_OFFSET_OFFSET, term_offset)
    atomics.put_int32(buf, offset + NAK_LENGTH_OFFSET, length)
    return NAK_FRAME_LENGTH


@kernel
def encode_rttm(buf, offset, session_id, stream_id, echo_timestamp_ns, reception_delta_ns, receiver_id, is_reply):
    """Write an RTT measurement (40 bytes, §16); ``is_reply`` sets ``RTTM_REPLY_FLAG``.

    Returns ``RTTM_FRAME_LENGTH`` or ``INSUFFICIENT_SPACE``.
    """
    if not _fits(buf, offset, RTTM_FRAME_LENGTH):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, RTTM_FRAME_LENGTH, RTTM_REPLY_FLAG if is_reply else 0, HDR_TYPE_RTTM)
    atomics.put_int32(buf, offset + CONTROL_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + CONTROL_STREAM_ID_OFFSET, stream_id)
    atomics.put_int64(buf, offset + RTTM_ECHO_TIMESTAMP_OFFSET, echo_timestamp_ns)
    atomics.put_int64(buf, offset + RTTM_RECEPTION_DELTA_OFFSET, reception_delta_ns)
    atomics.put_int64(buf, offset + RTTM_RECEIVER_ID_OFFSET, receiver_id)
    return RTTM_FRAME_LENGTH


@kernel
def encode_heartbeat(buf, offset, term_offset, session_id, stream_id, term_id, eos):
    """Write a heartbeat: a 32-byte DATA header with ``frame_length`` 0, flags 0xC0 (0xE0 with ``eos``), §16.

    Returns ``HEADER_LENGTH`` (the datagram length to send) or ``INSUFFICIENT_SPACE``.
    """
    if not _fits(buf, offset, HEADER_LENGTH):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, 0, HEARTBEAT_EOS_FLAGS if eos else HEARTBEAT_FLAGS, HDR_TYPE_DATA)
    atomics.put_int32(buf, offset + TERM_OFFSET_FIELD_OFFSET, term_offset)
    atomics.put_int32(buf, offset + SESSION_ID_FIELD_OFFSET, session_id)
    atomics.put_int32(buf, offset + STREAM_ID_FIELD_OFFSET, stream_id)
    atomics.put_int32(buf, offset + TERM_ID_FIELD_OFFSET, term_id)
    atomics.put_int64(buf, offset + RESERVED_VALUE_OFFSET, 0)
    return HEADER_LENGTH


@kernel
def encode_err(
    buf, offset, session_id, stream_id, receiver_id, group_tag, has_group_tag, error_code, text, text_length
):
    """Write an error frame: 40 bytes plus ``text[:text_length]`` (at most 1023 bytes), §16.

    ``has_group_tag`` sets ``ERR_GROUP_TAG_FLAG`` (the tag field is written either way, 0 when absent).

    Returns
    -------
    int
        The frame length ``40 + text_length``, ``INVALID_ERROR_LENGTH`` (text_length < 0, > 1023 or longer than
        ``text``) or ``INSUFFICIENT_SPACE``.
    """
    if text_length < 0 or text_length > ERR_MAX_TEXT_LENGTH or text_length > text.size:
        return INVALID_ERROR_LENGTH
    frame_length = ERR_HEADER_LENGTH + text_length
    if not _fits(buf, offset, frame_length):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, frame_length, ERR_GROUP_TAG_FLAG if has_group_tag else 0, HDR_TYPE_ERR)
    atomics.put_int32(buf, offset + CONTROL_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + CONTROL_STREAM_ID_OFFSET, stream_id)
    atomics.put_int64(buf, offset + ERR_RECEIVER_ID_OFFSET, receiver_id)
    atomics.put_int64(buf, offset + ERR_GROUP_TAG_OFFSET, group_tag if has_group_tag else 0)
    atomics.put_int32(buf, offset + ERR_ERROR_CODE_OFFSET, error_code)
    atomics.put_int32(buf, offset + ERR_ERROR_LENGTH_OFFSET, text_length)
    start = offset + ERR_ERROR_TEXT_OFFSET
    copy_bytes(buf, start, text, 0, text_length)
    return frame_length


@kernel
def encode_rsp_setup(buf, offset, session_id, stream_id, response_session_id):
    """Write a response setup (20 bytes, §16). Returns ``RSP_SETUP_FRAME_LENGTH`` or ``INSUFFICIENT_SPACE``."""
    if not _fits(buf, offset, RSP_SETUP_FRAME_LENGTH):
        return INSUFFICIENT_SPACE
    _put_common_header(buf, offset, RSP_SETUP_FRAME_LENGTH, 0, HDR_TYPE_RSP_SETUP)
    atomics.put_int32(buf, offset + CONTROL_SESSION_ID_OFFSET, session_id)
    atomics.put_int32(buf, offset + CONTROL_STREAM_ID_OFFSET, stream_id)
    atomics.put_int32(buf, offset + RSP_SETUP_RESPONSE_SESSION_ID_OFFSET, response_session_id)
    return RSP_SETUP_FRAME_LENGTH


# --------------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------------


@kernel(inline="always")
def _control_min_length(frame_type):
    """Fixed size of a non-data frame type, or -1 for a type the driver does not know."""
    if frame_type == HDR_TYPE_NAK:
        return NAK_FRAME_LENGTH
    if frame_type == HDR_TYPE_SM:
        return SM_FRAME_LENGTH
    if frame_type == HDR_TYPE_ERR:
        return ERR_HEADER_LENGTH
    if frame_type == HDR_TYPE_SETUP:
        return SETUP_FRAME_LENGTH
    if frame_type == HDR_TYPE_RTTM:
        return RTTM_FRAME_LENGTH
    if frame_type == HDR_TYPE_RES:
        return RES_HEADER_LENGTH
    if frame_type == HDR_TYPE_RSP_SETUP:
        return RSP_SETUP_FRAME_LENGTH
    return -1


@kernel(inline="always")
def _classify_data(buf, offset, length, first_type):
    """Walk the frames of a DATA/PAD datagram (``length >= 8``, version and type of the first already checked)."""
    if length < HEADER_LENGTH:
        return INVALID_FRAME_LENGTH
    first_term_offset = atomics.get_int32(buf, offset + TERM_OFFSET_FIELD_OFFSET)
    if first_term_offset < 0 or first_term_offset % FRAME_ALIGNMENT != 0 or first_term_offset >= TERM_MAX_LENGTH:
        return INVALID_TERM_OFFSET
    if atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET) == 0:
        # A heartbeat is exactly one empty DATA header (§16); an empty PAD or trailing bytes are not.
        if first_type == HDR_TYPE_DATA and length == HEADER_LENGTH:
            return HDR_TYPE_DATA
        return INVALID_FRAME_LENGTH
    session_id = atomics.get_int32(buf, offset + SESSION_ID_FIELD_OFFSET)
    stream_id = atomics.get_int32(buf, offset + STREAM_ID_FIELD_OFFSET)
    term_id = atomics.get_int32(buf, offset + TERM_ID_FIELD_OFFSET)
    o = 0
    while True:
        frame = offset + o
        frame_type = _frame_type(buf, frame)
        if o > 0:
            if atomics.get_int8(buf, frame + VERSION_FIELD_OFFSET) != CURRENT_VERSION:
                return INVALID_VERSION
            if frame_type != HDR_TYPE_DATA and frame_type != HDR_TYPE_PAD:
                return INVALID_TYPE
            if atomics.get_int32(buf, frame + TERM_OFFSET_FIELD_OFFSET) != first_term_offset + o:
                return INVALID_TERM_OFFSET
            if (
                atomics.get_int32(buf, frame + SESSION_ID_FIELD_OFFSET) != session_id
                or atomics.get_int32(buf, frame + STREAM_ID_FIELD_OFFSET) != stream_id
                or atomics.get_int32(buf, frame + TERM_ID_FIELD_OFFSET) != term_id
            ):
                return INVALID_STREAM_MISMATCH
        frame_length = atomics.get_int32(buf, frame + FRAME_LENGTH_FIELD_OFFSET)
        if frame_length < HEADER_LENGTH:
            return INVALID_FRAME_LENGTH  # also a 0-length frame after the first: only a lone heartbeat is empty
        aligned_length = align(frame_length, FRAME_ALIGNMENT)
        if first_term_offset + o + aligned_length > TERM_MAX_LENGTH:
            return INVALID_FRAME_LENGTH  # ends past the end of any term
        if frame_length > length - o:
            # Only a PAD header may stand for more bytes than were sent, and then it ends the datagram.
            if frame_type == HDR_TYPE_PAD and o + HEADER_LENGTH == length:
                return first_type
            return INVALID_FRAME_LENGTH
        o += aligned_length
        if o >= length:
            return first_type
        if length - o < HEADER_LENGTH:
            return INVALID_FRAME_LENGTH  # trailing bytes too short for another header


@kernel
def classify_datagram(buf, offset, length):
    """Validate the datagram ``buf[offset:offset + length]`` and return its frame type.

    Parameters
    ----------
    buf : uint8[::1]
        Receive buffer.
    offset, length : int
        Where the datagram starts and how many bytes were received.

    Returns
    -------
    int
        ``HDR_TYPE_*`` of the (first) frame, or a negative code: ``INVALID_BOUNDS`` (offset/length outside
        ``buf``), ``INVALID_TOO_SHORT`` (< 8 bytes), ``INVALID_VERSION``, ``INVALID_TYPE`` (unknown, ATS, EXT),
        ``INVALID_FRAME_LENGTH`` (frame_length past the datagram or below the type's fixed size),
        ``INVALID_ERROR_LENGTH``, and for DATA/PAD datagrams ``INVALID_TERM_OFFSET`` and
        ``INVALID_STREAM_MISMATCH``.

    Notes
    -----
    DATA/PAD: every frame must be ``>= 32`` bytes and inside the datagram (a PAD header that is the datagram's
    last 32 bytes may claim more), at 32-aligned places, with ``term_offset`` = first ``term_offset`` + its
    place, the first's session/stream/term id, and end within ``TERM_MAX_LENGTH``. A lone 32-byte DATA header
    with ``frame_length`` 0 is a heartbeat and valid (returns ``HDR_TYPE_DATA``). Other types: one frame whose
    ``frame_length`` is at least the fixed size and at most ``length`` (trailing bytes are ignored); a status
    message carries a group tag iff its ``frame_length`` is 44. RES entries are not parsed.
    """
    if not _fits(buf, offset, length):
        return INVALID_BOUNDS
    if length < COMMON_HEADER_LENGTH:
        return INVALID_TOO_SHORT
    if atomics.get_int8(buf, offset + VERSION_FIELD_OFFSET) != CURRENT_VERSION:
        return INVALID_VERSION
    frame_type = _frame_type(buf, offset)
    if frame_type == HDR_TYPE_DATA or frame_type == HDR_TYPE_PAD:
        return _classify_data(buf, offset, length, frame_type)
    min_length = _control_min_length(frame_type)
    if min_length < 0:
        return INVALID_TYPE
    frame_length = atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET)
    if frame_length < min_length or frame_length > length:
        return INVALID_FRAME_LENGTH
    if frame_type == HDR_TYPE_ERR:
        text_length = atomics.get_int32(buf, offset + ERR_ERROR_LENGTH_OFFSET)
        if text_length < 0 or text_length > ERR_MAX_TEXT_LENGTH or text_length > frame_length - ERR_HEADER_LENGTH:
            return INVALID_ERROR_LENGTH
    return frame_type


@kernel
def validate_setup(buf, offset):
    """Check the values of a SETUP frame ``classify_datagram`` accepted before an image is made from it.

    Returns 0, ``INVALID_BOUNDS``, ``INVALID_SETUP_TERM_LENGTH`` (not a power of two in [64 KiB, 1 GiB]),
    ``INVALID_SETUP_MTU`` (not a multiple of 32 in (32, 65504]) or ``INVALID_TERM_OFFSET`` (not a multiple
    of 32 in [0, term_length)).
    """
    if not _fits(buf, offset, SETUP_FRAME_LENGTH):
        return INVALID_BOUNDS
    term_length = atomics.get_int32(buf, offset + SETUP_TERM_LENGTH_OFFSET)
    if term_length < TERM_MIN_LENGTH or term_length > TERM_MAX_LENGTH or term_length & (term_length - 1) != 0:
        return INVALID_SETUP_TERM_LENGTH
    mtu = atomics.get_int32(buf, offset + SETUP_MTU_LENGTH_OFFSET)
    if mtu <= HEADER_LENGTH or mtu > MAX_UDP_PAYLOAD_LENGTH or mtu % FRAME_ALIGNMENT != 0:
        return INVALID_SETUP_MTU
    term_offset = atomics.get_int32(buf, offset + SETUP_TERM_OFFSET_OFFSET)
    if term_offset < 0 or term_offset >= term_length or term_offset % FRAME_ALIGNMENT != 0:
        return INVALID_TERM_OFFSET
    return 0


# --------------------------------------------------------------------------------------------------------
# Decoders (one per layout; the first element is the frame length or INVALID_BOUNDS)
# --------------------------------------------------------------------------------------------------------


@kernel
def decode_data_header(buf, offset):
    """``(frame_length, flags, frame_type, term_offset, session_id, stream_id, term_id)`` of a data header."""
    if not _fits(buf, offset, HEADER_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0, 0
    return (
        atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET),
        _flags(buf, offset),
        _frame_type(buf, offset),
        atomics.get_int32(buf, offset + TERM_OFFSET_FIELD_OFFSET),
        atomics.get_int32(buf, offset + SESSION_ID_FIELD_OFFSET),
        atomics.get_int32(buf, offset + STREAM_ID_FIELD_OFFSET),
        atomics.get_int32(buf, offset + TERM_ID_FIELD_OFFSET),
    )


@kernel
def decode_setup(buf, offset):
    """``(frame_length, flags, term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length,
    mtu, ttl)``."""
    if not _fits(buf, offset, SETUP_FRAME_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return (
        atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET),
        _flags(buf, offset),
        atomics.get_int32(buf, offset + SETUP_TERM_OFFSET_OFFSET),
        atomics.get_int32(buf, offset + SETUP_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + SETUP_STREAM_ID_OFFSET),
        atomics.get_int32(buf, offset + SETUP_INITIAL_TERM_ID_OFFSET),
        atomics.get_int32(buf, offset + SETUP_ACTIVE_TERM_ID_OFFSET),
        atomics.get_int32(buf, offset + SETUP_TERM_LENGTH_OFFSET),
        atomics.get_int32(buf, offset + SETUP_MTU_LENGTH_OFFSET),
        atomics.get_int32(buf, offset + SETUP_TTL_OFFSET),
    )


@kernel
def decode_status_message(buf, offset):
    """``(frame_length, flags, session_id, stream_id, consumption_term_id, consumption_term_offset,
    receiver_window, receiver_id, has_group_tag, group_tag)``; ``has_group_tag`` is 1 iff frame_length == 44
    (``group_tag`` is 0 otherwise)."""
    if not _fits(buf, offset, SM_FRAME_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0, 0, 0, 0, 0
    frame_length = atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET)
    has_group_tag = 0
    group_tag = 0
    if frame_length == SM_WITH_GROUP_TAG_FRAME_LENGTH and _fits(buf, offset, SM_WITH_GROUP_TAG_FRAME_LENGTH):
        has_group_tag = 1
        group_tag = atomics.get_int64(buf, offset + SM_GROUP_TAG_OFFSET)
    return (
        frame_length,
        _flags(buf, offset),
        atomics.get_int32(buf, offset + CONTROL_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_STREAM_ID_OFFSET),
        atomics.get_int32(buf, offset + SM_CONSUMPTION_TERM_ID_OFFSET),
        atomics.get_int32(buf, offset + SM_CONSUMPTION_TERM_OFFSET_OFFSET),
        atomics.get_int32(buf, offset + SM_RECEIVER_WINDOW_OFFSET),
        atomics.get_int64(buf, offset + SM_RECEIVER_ID_OFFSET),
        has_group_tag,
        group_tag,
    )


@kernel
def decode_nak(buf, offset):
    """``(frame_length, session_id, stream_id, term_id, term_offset, length)``."""
    if not _fits(buf, offset, NAK_FRAME_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0
    return (
        atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_STREAM_ID_OFFSET),
        atomics.get_int32(buf, offset + NAK_TERM_ID_OFFSET),
        atomics.get_int32(buf, offset + NAK_TERM_OFFSET_OFFSET),
        atomics.get_int32(buf, offset + NAK_LENGTH_OFFSET),
    )


@kernel
def decode_rttm(buf, offset):
    """``(frame_length, flags, session_id, stream_id, echo_timestamp_ns, reception_delta_ns, receiver_id)``."""
    if not _fits(buf, offset, RTTM_FRAME_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0, 0
    return (
        atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET),
        _flags(buf, offset),
        atomics.get_int32(buf, offset + CONTROL_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_STREAM_ID_OFFSET),
        atomics.get_int64(buf, offset + RTTM_ECHO_TIMESTAMP_OFFSET),
        atomics.get_int64(buf, offset + RTTM_RECEPTION_DELTA_OFFSET),
        atomics.get_int64(buf, offset + RTTM_RECEIVER_ID_OFFSET),
    )


@kernel
def decode_err(buf, offset):
    """``(frame_length, flags, session_id, stream_id, receiver_id, group_tag, error_code, text_offset,
    text_length)``: the text is ``buf[text_offset:text_offset + text_length]``, clamped to the frame and ``buf``."""
    if not _fits(buf, offset, ERR_HEADER_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0, 0, 0, 0, 0, 0
    frame_length = atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET)
    text_length = atomics.get_int32(buf, offset + ERR_ERROR_LENGTH_OFFSET)
    room = buf.size - offset - ERR_HEADER_LENGTH
    if frame_length - ERR_HEADER_LENGTH < room:
        room = frame_length - ERR_HEADER_LENGTH
    if text_length > room:
        text_length = room
    if text_length < 0:
        text_length = 0
    return (
        frame_length,
        _flags(buf, offset),
        atomics.get_int32(buf, offset + CONTROL_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_STREAM_ID_OFFSET),
        atomics.get_int64(buf, offset + ERR_RECEIVER_ID_OFFSET),
        atomics.get_int64(buf, offset + ERR_GROUP_TAG_OFFSET),
        atomics.get_int32(buf, offset + ERR_ERROR_CODE_OFFSET),
        offset + ERR_ERROR_TEXT_OFFSET,
        text_length,
    )


@kernel
def decode_rsp_setup(buf, offset):
    """``(frame_length, session_id, stream_id, response_session_id)``."""
    if not _fits(buf, offset, RSP_SETUP_FRAME_LENGTH):
        return INVALID_BOUNDS, 0, 0, 0
    return (
        atomics.get_int32(buf, offset + FRAME_LENGTH_FIELD_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_SESSION_ID_OFFSET),
        atomics.get_int32(buf, offset + CONTROL_STREAM_ID_OFFSET),
        atomics.get_int32(buf, offset + RSP_SETUP_RESPONSE_SESSION_ID_OFFSET),
    )


# --------------------------------------------------------------------------------------------------------
# Python side
# --------------------------------------------------------------------------------------------------------


def encode_error_frame(
    buf, offset: int, session_id: int, stream_id: int, receiver_id: int, group_tag: int | None, error_code: int,
    message: str,
) -> int:
    """Encode an ERR frame with ``message`` as its text (ASCII, '?' for anything else); returns the frame length.

    Raises ``LayoutError`` naming the value and the limit when the text is longer than 1023 bytes or the frame
    does not fit in ``buf`` at ``offset``. ``group_tag=None`` leaves the group tag flag clear.
    """
    text = np.frombuffer(bytearray(message.encode("ascii", errors="replace")), dtype=np.uint8)
    check_error_text_length(text.size)
    check_frame_fits(buf.size, offset, ERR_HEADER_LENGTH + text.size)
    return int(
        encode_err(buf, offset, session_id, stream_id, receiver_id, group_tag or 0, group_tag is not None, error_code,
                   text, text.size)
    )
