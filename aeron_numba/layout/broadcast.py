"""Broadcast buffer: the to-clients response buffer in cnc.dat (spec/transport.md §8).

```
 +-------------------------------+----------------------------------------------------------+
 | data area: capacity bytes     | trailer 128 B: 0 tail_intent | 8 tail | 16 latest | pad  |
 +-------------------------------+----------------------------------------------------------+
 record:  0 length i32 (header + body, unaligned) | 4 msg_type_id i32 | 8 body...   (aligned to 8)
```
One transmitter, many receivers; receivers can be lapped and must detect it.
"""

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import is_power_of_two

TAIL_INTENT_COUNTER_OFFSET = 0
TAIL_COUNTER_OFFSET = 8
LATEST_COUNTER_OFFSET = 16
TRAILER_LENGTH = 128

RECORD_LENGTH_OFFSET = 0
RECORD_TYPE_OFFSET = 4
RECORD_HEADER_LENGTH = 8
RECORD_ALIGNMENT = 8
PADDING_MSG_TYPE_ID = -1
MIN_CAPACITY = 8


def check_capacity(buffer_length: int) -> int:
    """Capacity = buffer length - 128-byte trailer; must be a power of two >= 8. Returns the capacity."""
    capacity = buffer_length - TRAILER_LENGTH
    if capacity < MIN_CAPACITY or not is_power_of_two(capacity):
        raise LayoutError(
            f"broadcast buffer capacity={capacity} (buffer_length={buffer_length} - TRAILER_LENGTH={TRAILER_LENGTH})"
            f" must be a power of 2 >= {MIN_CAPACITY}"
        )
    return capacity


def max_msg_length(capacity: int) -> int:
    """Largest message body: ``capacity / 8`` (§8)."""
    return capacity // 8
