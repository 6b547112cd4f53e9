"""UDP control and data frames on the wire (spec/transport.md §16, with the common header of §1).

Every frame starts with the 8-byte common header (``frame_length`` i32, ``version`` i8, ``flags`` u8,
``type`` u16; offsets in ``layout/frame.py``). Offsets below are from the frame start; all little-endian.

```
 SETUP (0x05), 40 bytes                       STATUS MESSAGE SM (0x03), 36 bytes (44 with group tag)
   0 common header                              0 common header   flags 0x80 send-setup, 0x40 EOS
   8 term_offset i32                            8 session_id i32
  12 session_id i32                            12 stream_id i32
  16 stream_id i32                             16 consumption_term_id i32
  20 initial_term_id i32                       20 consumption_term_offset i32
  24 active_term_id i32                        24 receiver_window i32
  28 term_length i32                           28 receiver_id i64
  32 mtu i32                                   36 group_tag i64   present iff frame_length == 44
  36 ttl i32
  flags 0x80 send response setup, 0x40 group

 NAK (0x02), 28 bytes                         RTTM (0x06), 40 bytes   flags 0x80 reply
   8 session_id i32, 12 stream_id i32           8 session_id i32, 12 stream_id i32
  16 term_id i32                               16 echo_timestamp i64
  20 term_offset i32                           24 reception_delta i64
  24 length i32                                32 receiver_id i64

 ERR (0x04), 40 bytes + text (<= 1023)        RSP_SETUP (0x0B), 20 bytes
   8 session_id i32, 12 stream_id i32           8 session_id i32, 12 stream_id i32
  16 receiver_id i64                           16 response_session_id i32
  24 group_tag i64   valid iff flags & 0x08
  32 error_code i32                           HEARTBEAT: a 32-byte DATA header (§1) with frame_length 0,
  36 error_length i32                          flags 0xC0 (0xE0 with EOS), the sender's term_id/term_offset
  40 error text (error_length bytes)
```

A DATA/PAD datagram holds one or more data frames back to back, each starting at a multiple of 32 from the
first, all of one session, stream and term, with term offsets increasing exactly as their places in the
datagram. A PAD frame is sent as its 32-byte header only (the sender skips the padding bytes, §5 "term
scanner"), so its ``frame_length`` may run past the datagram; it is then the last frame.

The kernels that read and write these frames, and the receiver's term rebuilder and loss detector, return the
negative status codes defined here.
"""

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import is_power_of_two
from aeron_numba.layout.frame import (
    EOS_FLAG,
    FRAME_ALIGNMENT,
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
    UNFRAGMENTED,
)
from aeron_numba.layout.log_buffer_descriptor import TERM_MAX_LENGTH, TERM_MIN_LENGTH

#: §1: the header every frame type starts with.
COMMON_HEADER_LENGTH = 8

# §16 SETUP.
SETUP_TERM_OFFSET_OFFSET = 8
SETUP_SESSION_ID_OFFSET = 12
SETUP_STREAM_ID_OFFSET = 16
SETUP_INITIAL_TERM_ID_OFFSET = 20
SETUP_ACTIVE_TERM_ID_OFFSET = 24
SETUP_TERM_LENGTH_OFFSET = 28
SETUP_MTU_LENGTH_OFFSET = 32
SETUP_TTL_OFFSET = 36
SETUP_FRAME_LENGTH = 40
SETUP_SEND_RESPONSE_SETUP_FLAG = 0x80  # §1.2
SETUP_GROUP_FLAG = 0x40

# SM, NAK, RTTM, ERR and RSP_SETUP all carry session and stream id at 8 and 12 (SETUP and DATA at 12, 16).
CONTROL_SESSION_ID_OFFSET = 8
CONTROL_STREAM_ID_OFFSET = 12

# §16 status message.
SM_SESSION_ID_OFFSET = CONTROL_SESSION_ID_OFFSET
SM_STREAM_ID_OFFSET = CONTROL_STREAM_ID_OFFSET
SM_CONSUMPTION_TERM_ID_OFFSET = 16
SM_CONSUMPTION_TERM_OFFSET_OFFSET = 20
SM_RECEIVER_WINDOW_OFFSET = 24
SM_RECEIVER_ID_OFFSET = 28
SM_GROUP_TAG_OFFSET = 36
SM_FRAME_LENGTH = 36
SM_WITH_GROUP_TAG_FRAME_LENGTH = 44
SM_SEND_SETUP_FLAG = 0x80
SM_EOS_FLAG = 0x40

# §16 NAK.
NAK_SESSION_ID_OFFSET = CONTROL_SESSION_ID_OFFSET
NAK_STREAM_ID_OFFSET = CONTROL_STREAM_ID_OFFSET
NAK_TERM_ID_OFFSET = 16
NAK_TERM_OFFSET_OFFSET = 20
NAK_LENGTH_OFFSET = 24
NAK_FRAME_LENGTH = 28

# §16 RTT measurement.
RTTM_SESSION_ID_OFFSET = CONTROL_SESSION_ID_OFFSET
RTTM_STREAM_ID_OFFSET = CONTROL_STREAM_ID_OFFSET
RTTM_ECHO_TIMESTAMP_OFFSET = 16
RTTM_RECEPTION_DELTA_OFFSET = 24
RTTM_RECEIVER_ID_OFFSET = 32
RTTM_FRAME_LENGTH = 40
RTTM_REPLY_FLAG = 0x80

# §16 error frame.
ERR_SESSION_ID_OFFSET = CONTROL_SESSION_ID_OFFSET
ERR_STREAM_ID_OFFSET = CONTROL_STREAM_ID_OFFSET
ERR_RECEIVER_ID_OFFSET = 16
ERR_GROUP_TAG_OFFSET = 24
ERR_ERROR_CODE_OFFSET = 32
ERR_ERROR_LENGTH_OFFSET = 36
ERR_ERROR_TEXT_OFFSET = 40
ERR_HEADER_LENGTH = 40
ERR_MAX_TEXT_LENGTH = 1023
ERR_MAX_FRAME_LENGTH = ERR_HEADER_LENGTH + ERR_MAX_TEXT_LENGTH
ERR_GROUP_TAG_FLAG = 0x08

# §16 response setup.
RSP_SETUP_SESSION_ID_OFFSET = CONTROL_SESSION_ID_OFFSET
RSP_SETUP_STREAM_ID_OFFSET = CONTROL_STREAM_ID_OFFSET
RSP_SETUP_RESPONSE_SESSION_ID_OFFSET = 16
RSP_SETUP_FRAME_LENGTH = 20

#: §16 RES: only the common header is fixed; the entries after it are not parsed here.
RES_HEADER_LENGTH = COMMON_HEADER_LENGTH

# §16 heartbeat: a data header with frame_length 0, sent as a 32-byte datagram.
HEARTBEAT_DATAGRAM_LENGTH = HEADER_LENGTH
HEARTBEAT_FLAGS = UNFRAGMENTED
HEARTBEAT_EOS_FLAGS = UNFRAGMENTED | EOS_FLAG

#: Smallest ``frame_length`` of each known type (DATA/PAD: a header; a heartbeat is the 0-length exception).
MIN_FRAME_LENGTH_BY_TYPE = {
    HDR_TYPE_PAD: HEADER_LENGTH,
    HDR_TYPE_DATA: HEADER_LENGTH,
    HDR_TYPE_NAK: NAK_FRAME_LENGTH,
    HDR_TYPE_SM: SM_FRAME_LENGTH,
    HDR_TYPE_ERR: ERR_HEADER_LENGTH,
    HDR_TYPE_SETUP: SETUP_FRAME_LENGTH,
    HDR_TYPE_RTTM: RTTM_FRAME_LENGTH,
    HDR_TYPE_RES: RES_HEADER_LENGTH,
    HDR_TYPE_RSP_SETUP: RSP_SETUP_FRAME_LENGTH,
}

# §14 NAK timing for unicast: first NAK 100 µs after a gap is seen, then again every ratio x delay while the
# gap is still there.
NAK_UNICAST_DELAY_NS = 100_000
NAK_UNICAST_RETRY_DELAY_RATIO = 100
NAK_UNICAST_RETRY_DELAY_NS = NAK_UNICAST_DELAY_NS * NAK_UNICAST_RETRY_DELAY_RATIO

# §14 NAK timing with group semantics (multicast, or a SETUP flagged SETUP_GROUP_FLAG): every NAK, first or
# retry, waits a random backoff below the max, shaped by the expected group size so that one receiver of the
# group usually NAKs well before the others (Aeron's OptimalMulticastDelayGenerator, RFC 5401 §3.5).
NAK_MULTICAST_MAX_BACKOFF_NS = 10_000_000
NAK_MULTICAST_GROUP_SIZE = 10

# ------------------------------------------------------------------------------------------ status codes
# Negative, so they never collide with a frame type (0..0xFFFF), a length or a position.
INVALID_BOUNDS = -1  # offset/length outside the buffer the caller passed
INVALID_TOO_SHORT = -2  # datagram shorter than the 8-byte common header
INVALID_VERSION = -3  # version != 0
INVALID_TYPE = -4  # unknown type id (ATS 0x08-0x0A, EXT 0xFFFF, anything unassigned)
INVALID_FRAME_LENGTH = -5  # frame_length does not fit the datagram (or term) or is below the type's fixed size
INVALID_TERM_OFFSET = -6  # data frame term_offset negative, not a multiple of 32, or not where it must be
INVALID_STREAM_MISMATCH = -7  # a later frame of a data datagram names another session, stream or term
INVALID_ERROR_LENGTH = -8  # ERR error_length negative, > 1023 or past the frame
INVALID_SETUP_TERM_LENGTH = -9  # SETUP term_length not a power of two in [64 KiB, 1 GiB]
INVALID_SETUP_MTU = -10  # SETUP mtu not a multiple of 32 in (32, 65504]
INSUFFICIENT_SPACE = -11  # encoder: the frame does not fit in the buffer at that offset
INVALID_TERM_LENGTH = -12  # term view length not a power of two >= 32 (loss detector, gap scanner)
INVALID_POSITION = -13  # negative rebuild or high-water-mark position

STATUS_NAMES = {
    INVALID_BOUNDS: "INVALID_BOUNDS",
    INVALID_TOO_SHORT: "INVALID_TOO_SHORT",
    INVALID_VERSION: "INVALID_VERSION",
    INVALID_TYPE: "INVALID_TYPE",
    INVALID_FRAME_LENGTH: "INVALID_FRAME_LENGTH",
    INVALID_TERM_OFFSET: "INVALID_TERM_OFFSET",
    INVALID_STREAM_MISMATCH: "INVALID_STREAM_MISMATCH",
    INVALID_ERROR_LENGTH: "INVALID_ERROR_LENGTH",
    INVALID_SETUP_TERM_LENGTH: "INVALID_SETUP_TERM_LENGTH",
    INVALID_SETUP_MTU: "INVALID_SETUP_MTU",
    INSUFFICIENT_SPACE: "INSUFFICIENT_SPACE",
    INVALID_TERM_LENGTH: "INVALID_TERM_LENGTH",
    INVALID_POSITION: "INVALID_POSITION",
}


def status_name(code: int) -> str:
    """Name of a negative status code (for logs and error messages)."""
    return STATUS_NAMES.get(int(code), f"UNKNOWN_STATUS({int(code)})")


# ------------------------------------------------------------------------------------------ guards


def check_frame_fits(buffer_length: int, offset: int, frame_length: int) -> None:
    """A frame of ``frame_length`` bytes written at ``offset`` must lie inside the buffer."""
    if offset < 0:
        raise LayoutError(f"offset={offset} < 0")
    if offset + frame_length > buffer_length:
        raise LayoutError(f"offset={offset} + frame_length={frame_length} > buffer_length={buffer_length}")


def check_error_text_length(text_length: int) -> None:
    """ERR text is at most 1023 bytes (§16)."""
    if text_length < 0:
        raise LayoutError(f"error text_length={text_length} < 0")
    if text_length > ERR_MAX_TEXT_LENGTH:
        raise LayoutError(f"error text_length={text_length} > ERR_MAX_TEXT_LENGTH={ERR_MAX_TEXT_LENGTH}")


def check_datagram_length(length: int) -> None:
    """A datagram we send holds at least the common header and at most MAX_UDP_PAYLOAD_LENGTH bytes (§1.3)."""
    if length < COMMON_HEADER_LENGTH:
        raise LayoutError(f"datagram length={length} < COMMON_HEADER_LENGTH={COMMON_HEADER_LENGTH}")
    if length > MAX_UDP_PAYLOAD_LENGTH:
        raise LayoutError(f"datagram length={length} > MAX_UDP_PAYLOAD_LENGTH={MAX_UDP_PAYLOAD_LENGTH}")


def check_receiver_term_length(term_length: int) -> None:
    """A term view handed to the rebuilder or loss detector: a power of two in [64 KiB, 1 GiB] (§2)."""
    if term_length < TERM_MIN_LENGTH:
        raise LayoutError(f"term_length={term_length} < TERM_MIN_LENGTH={TERM_MIN_LENGTH}")
    if term_length > TERM_MAX_LENGTH:
        raise LayoutError(f"term_length={term_length} > TERM_MAX_LENGTH={TERM_MAX_LENGTH}")
    if not is_power_of_two(term_length):
        raise LayoutError(f"term_length={term_length} is not a power of 2")


def check_nak_delays(nak_delay_ns: int, nak_retry_delay_ns: int) -> None:
    """NAK delays are non-negative nanoseconds; a zero delay NAKs on the scan that finds the gap."""
    if nak_delay_ns < 0:
        raise LayoutError(f"nak_delay_ns={nak_delay_ns} < 0")
    if nak_retry_delay_ns < 0:
        raise LayoutError(f"nak_retry_delay_ns={nak_retry_delay_ns} < 0")


def check_gap(term_length: int, gap_offset: int, gap_length: int) -> None:
    """A gap to fill with padding: 32-aligned start, at least a header long, inside the term."""
    if gap_offset < 0 or gap_offset % FRAME_ALIGNMENT:
        raise LayoutError(f"gap_offset={gap_offset} must be >= 0 and a multiple of FRAME_ALIGNMENT={FRAME_ALIGNMENT}")
    if gap_length < HEADER_LENGTH:
        raise LayoutError(f"gap_length={gap_length} < HEADER_LENGTH={HEADER_LENGTH}")
    if gap_offset + gap_length > term_length:
        raise LayoutError(f"gap_offset={gap_offset} + gap_length={gap_length} > term_length={term_length}")
