"""Data frame header, frame types, flags and alignment (spec/transport.md §1).

```
  0                   1                   2                   3
  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 +---------------------------------------------------------------+
 |                 frame_length (written last)                   |   0
 +---------------+---------------+-------------------------------+
 |   version     |B|E|S| flags   |             type              |   4
 +---------------+---------------+-------------------------------+
 |                          term_offset                          |   8
 +---------------------------------------------------------------+
 |                          session_id                           |  12
 +---------------------------------------------------------------+
 |                          stream_id                            |  16
 +---------------------------------------------------------------+
 |                           term_id                             |  20
 +---------------------------------------------------------------+
 |                     reserved_value (i64)                      |  24
 +---------------------------------------------------------------+
 |                         payload ...                           |  32
```
"""

from aeron_numba.errors import ConfigurationError

# Common 8-byte header of every frame type.
FRAME_LENGTH_FIELD_OFFSET = 0
VERSION_FIELD_OFFSET = 4
FLAGS_FIELD_OFFSET = 5
TYPE_FIELD_OFFSET = 6
# Data header (DATA and PAD frames).
TERM_OFFSET_FIELD_OFFSET = 8
SESSION_ID_FIELD_OFFSET = 12
STREAM_ID_FIELD_OFFSET = 16
TERM_ID_FIELD_OFFSET = 20
RESERVED_VALUE_OFFSET = 24
HEADER_LENGTH = 32
DATA_OFFSET = HEADER_LENGTH

CURRENT_VERSION = 0

# §1.1 frame types.
HDR_TYPE_PAD = 0x00
HDR_TYPE_DATA = 0x01
HDR_TYPE_NAK = 0x02
HDR_TYPE_SM = 0x03
HDR_TYPE_ERR = 0x04
HDR_TYPE_SETUP = 0x05
HDR_TYPE_RTTM = 0x06
HDR_TYPE_RES = 0x07
HDR_TYPE_ATS_DATA = 0x08
HDR_TYPE_RSP_SETUP = 0x0B
HDR_TYPE_EXT = 0xFFFF

# §1.2 flags of DATA/PAD frames.
BEGIN_FRAG_FLAG = 0x80
END_FRAG_FLAG = 0x40
UNFRAGMENTED = BEGIN_FRAG_FLAG | END_FRAG_FLAG
EOS_FLAG = 0x20

# §1.3 alignment and limits.
FRAME_ALIGNMENT = 32
MAX_UDP_PAYLOAD_LENGTH = 65504
MAX_MESSAGE_LENGTH_LIMIT = 16 * 1024 * 1024
DEFAULT_MTU_LENGTH = 1408

# First 8 bytes of a data header as one little-endian i64, with frame_length = 0: lets writers store
# version, flags and type in one go with the (negative) length (§4.3 step 2).
# Bits: frame_length 0..31, version 32..39, flags 40..47, type 48..63.
VERSION_FLAGS_TYPE_SHIFT = 32


def check_mtu_length(mtu_length: int) -> None:
    """MTU must be > 32, a multiple of 32 and <= 65504 (§1.3)."""
    if mtu_length <= HEADER_LENGTH:
        raise ConfigurationError(f"mtu_length={mtu_length} must be > HEADER_LENGTH={HEADER_LENGTH}")
    if mtu_length > MAX_UDP_PAYLOAD_LENGTH:
        raise ConfigurationError(f"mtu_length={mtu_length} > MAX_UDP_PAYLOAD_LENGTH={MAX_UDP_PAYLOAD_LENGTH}")
    if mtu_length % FRAME_ALIGNMENT != 0:
        raise ConfigurationError(f"mtu_length={mtu_length} is not a multiple of FRAME_ALIGNMENT={FRAME_ALIGNMENT}")


def max_payload_length(mtu_length: int) -> int:
    """Payload bytes per fragment: ``mtu - 32`` (§1.3)."""
    return mtu_length - HEADER_LENGTH


def compute_max_message_length(term_length: int) -> int:
    """Largest message a publication accepts: ``min(term_length / 8, 16 MiB)`` (§1.3)."""
    return min(term_length // 8, MAX_MESSAGE_LENGTH_LIMIT)


def compute_fragmented_length(length: int, max_payload: int) -> int:
    """Term space claimed by a message of ``length`` bytes split into ``max_payload`` fragments (§1.4)."""
    full_fragments, remainder = divmod(length, max_payload)
    last = 0
    if remainder > 0:
        last = (remainder + HEADER_LENGTH + FRAME_ALIGNMENT - 1) & ~(FRAME_ALIGNMENT - 1)
    return full_fragments * (max_payload + HEADER_LENGTH) + last
