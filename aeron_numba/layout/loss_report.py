"""``loss-report.dat``: the driver's per-stream record of data lost on receive (spec/transport.md §13.1).

```
 entry (starts at a multiple of 64):
   0 observation_count i64           release-stored 1 last when the entry is created; then get-and-add 1
   8 total_bytes_lost i64            get-and-add per observation
  16 first_observation_timestamp i64 epoch ms
  24 last_observation_timestamp i64  epoch ms
  32 session_id i32
  36 stream_id i32
  40 channel_length i32 (C)
  44 channel (C bytes, ASCII), zero padding up to align(C, 4)
  44 + align(C, 4)       source_length i32 (S)
  48 + align(C, 4)       source identity (S bytes, ASCII)
 next entry at align(48 + align(C, 4) + S, 64)
```
Readers stop at the first entry whose ``observation_count <= 0``.

Aeron itself disagrees with itself here, and this module follows the spec: the C driver's entry struct
swaps the two timestamps (last at 16, first at 24) and the Java writer puts the source length right after
the channel with no 4-byte alignment; the C reader steps to the next entry by ``48 + C + S`` rounded up,
which is not where its writer put it when the channel padding crosses a 64-byte boundary. Writer and reader
here both step by ``kernels.loss_report.entry_length`` (the C writer's rule).
"""

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import CACHE_LINE_LENGTH

LOSS_REPORT_FILE = "loss-report.dat"
#: §14: loss report buffer 1 MiB.
DEFAULT_LOSS_REPORT_BUFFER_LENGTH = 1024 * 1024

OBSERVATION_COUNT_OFFSET = 0
TOTAL_BYTES_LOST_OFFSET = 8
FIRST_OBSERVATION_TIMESTAMP_OFFSET = 16
LAST_OBSERVATION_TIMESTAMP_OFFSET = 24
SESSION_ID_OFFSET = 32
STREAM_ID_OFFSET = 36
CHANNEL_LENGTH_OFFSET = 40
CHANNEL_OFFSET = 44
#: Strings are i32-length-prefixed; the source's length field starts at the next 4-byte boundary.
STRING_LENGTH_FIELD_LENGTH = 4
STRING_ALIGNMENT = 4
ENTRY_ALIGNMENT = CACHE_LINE_LENGTH
#: Smallest entry: empty channel and source.
MIN_ENTRY_LENGTH = CHANNEL_OFFSET + STRING_LENGTH_FIELD_LENGTH

# Kernel status codes (negative, so never an entry offset or a count).
LOSS_REPORT_END = -1  # reader cursor: the walk reached an entry with observation_count <= 0 or the end
LOSS_REPORT_CORRUPT = -2  # an entry with a positive count whose lengths do not fit in the buffer
INSUFFICIENT_SPACE = -3  # create_entry: the entry does not fit (Aeron's createEntry returns null / -1)
INVALID_LENGTH = -4  # create_entry: a channel/source length < 0 or longer than its array
INVALID_ENTRY_OFFSET = -5  # record_observation: offset not the start of a created entry
INVALID_STATE = -6  # create_entry: the writer's next-entry offset is negative or not 64-aligned


def check_buffer_length(buffer_length: int) -> None:
    """A loss report the driver writes must hold at least one (empty-string) entry."""
    if buffer_length < MIN_ENTRY_LENGTH:
        raise LayoutError(f"loss report buffer_length={buffer_length} < MIN_ENTRY_LENGTH={MIN_ENTRY_LENGTH}")
