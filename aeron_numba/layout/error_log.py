"""Distinct error log: last section of cnc.dat, also used by archive and cluster mark files (spec/transport.md §10).

```
 record (aligned to 8):
   0 length i32                       24 + text length (unaligned); 0 = end of log; written last (release)
   4 observation_count i32            atomically incremented per observation
   8 last_observation_timestamp i64   epoch ms, release-stored after the increment
  16 first_observation_timestamp i64  epoch ms
  24 encoded error text (UTF-8)
```
"""

from aeron_numba.errors import LayoutError

LENGTH_OFFSET = 0
OBSERVATION_COUNT_OFFSET = 4
LAST_OBSERVATION_TIMESTAMP_OFFSET = 8
FIRST_OBSERVATION_TIMESTAMP_OFFSET = 16
ENCODED_ERROR_OFFSET = 24
RECORD_ALIGNMENT = 8
LENGTH_FIELD_LENGTH = 4

# Kernel status codes (negative, so never a record offset).
ERROR_LOG_END = -1  # reader cursor: the walk reached a zero length or the end of the buffer
ERROR_LOG_CORRUPT = -2  # a record length < ENCODED_ERROR_OFFSET or past the end of the buffer
INSUFFICIENT_SPACE = -3  # record: a new distinct error does not fit (Agrona's DistinctErrorLog returns false)
INVALID_TEXT_LENGTH = -4  # record: text_length < 0 or > the text array

MIN_BUFFER_LENGTH = ENCODED_ERROR_OFFSET + RECORD_ALIGNMENT


def check_buffer_length(buffer_length: int) -> None:
    """The error log must hold at least one record header and be 8-byte aligned."""
    if buffer_length < MIN_BUFFER_LENGTH or buffer_length % RECORD_ALIGNMENT != 0:
        raise LayoutError(
            f"error log buffer_length={buffer_length} must be >= {MIN_BUFFER_LENGTH}"
            f" and a multiple of {RECORD_ALIGNMENT}"
        )
