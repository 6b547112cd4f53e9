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
#: §8: the largest message body is ``capacity / MAX_MSG_LENGTH_DIVISOR``.
MAX_MSG_LENGTH_DIVISOR = 8

# Status codes of the kernels. Receive calls return a msg_type_id (>= 1) when they deliver a message.
#: receive: no new record.
NOTHING_RECEIVED = 0
#: transmit: msg_type_id < 1 (or not an i32).
INVALID_MSG_TYPE_ID = -2
#: transmit: length > max_msg_length.
MSG_TOO_LONG = -3
#: transmit: length < 0, or ``[src_offset, src_offset + length)`` outside the source array.
INVALID_LENGTH = -4
#: receive: the transmitter overwrote the receiver's position ("unable to keep up with broadcast"); the
#: receiver has rejoined at ``latest_counter`` and the lap is counted in its state.
LAPPED = -5
#: receive: the record body is longer than the scratch array (the record is skipped, as Agrona throws).
SCRATCH_TOO_SMALL = -6
#: receive: a record that passed validation holds an impossible length or type (garbage, not a lap).
CORRUPT_RECORD = -7
#: ``capacity`` not a power of two >= MIN_CAPACITY, or the array shorter than ``capacity + TRAILER_LENGTH``.
INVALID_CAPACITY = -8
#: transmit: ``tail_counter`` is negative or not 8-aligned (only a foreign writer could have put it there).
CORRUPT_TAIL = -9


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
    return capacity // MAX_MSG_LENGTH_DIVISOR
