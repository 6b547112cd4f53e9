"""Many-to-one ring buffer: the to-driver command buffer in cnc.dat (spec/transport.md §7).

```
 +-------------------------------+-------------------------------------------------+
 | data area: capacity bytes     | trailer: 768 bytes, each field in its own 128 B |
 +-------------------------------+-------------------------------------------------+
 trailer: 0 padding | 128 tail_position | 256 head_cache_position | 384 head_position
          | 512 correlation_counter | 640 consumer_heartbeat | 768 end

 record:  0 length i32 (header + body, negative while written) | 4 msg_type_id i32 | 8 body...
```
"""

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import is_power_of_two

TAIL_POSITION_OFFSET = 128
HEAD_CACHE_POSITION_OFFSET = 256
HEAD_POSITION_OFFSET = 384
CORRELATION_COUNTER_OFFSET = 512
CONSUMER_HEARTBEAT_OFFSET = 640
TRAILER_LENGTH = 768

RECORD_LENGTH_OFFSET = 0
RECORD_TYPE_OFFSET = 4
RECORD_HEADER_LENGTH = 8
RECORD_ALIGNMENT = 8
PADDING_MSG_TYPE_ID = -1
MIN_CAPACITY = 8
#: §7.2: the largest message body is ``capacity / MAX_MSG_LENGTH_DIVISOR``.
MAX_MSG_LENGTH_DIVISOR = 8

# Status codes of the kernels (negative ints; offsets and counts are >= 0).
INSUFFICIENT_CAPACITY = -1
INVALID_MSG_TYPE_ID = -2
MSG_TOO_LONG = -3
#: length < 0, or ``[src_offset, src_offset + length)`` outside the source array.
INVALID_LENGTH = -4
#: commit/abort index not a claimable body offset (``index - 8`` outside ``[0, capacity - 8]`` or unaligned).
INVALID_INDEX = -5
#: commit/abort of a claim whose length is not negative (already committed or aborted).
CLAIM_NOT_ACTIVE = -6
#: the record at head (or the trailer) holds values no producer could have written: the reader stops there.
CORRUPT_RECORD = -7
#: ``capacity`` not a power of two >= MIN_CAPACITY, or the array shorter than ``capacity + TRAILER_LENGTH``.
INVALID_CAPACITY = -8


def check_capacity(buffer_length: int) -> int:
    """Capacity = buffer length - trailer; it must be a power of two >= 8. Returns the capacity."""
    capacity = buffer_length - TRAILER_LENGTH
    if capacity < MIN_CAPACITY or not is_power_of_two(capacity):
        raise LayoutError(
            f"ring buffer capacity={capacity} (buffer_length={buffer_length} - TRAILER_LENGTH={TRAILER_LENGTH})"
            f" must be a power of 2 >= {MIN_CAPACITY}"
        )
    return capacity


def max_msg_length(capacity: int) -> int:
    """Largest message body: ``capacity / 8`` (§7.2)."""
    return capacity // MAX_MSG_LENGTH_DIVISOR
