"""Log buffer files (``*.logbuffer``) and their metadata section (spec/transport.md §2).

```
 +----------------------------+
 |           term 0           |  offset 0
 +----------------------------+
 |           term 1           |  offset term_length
 +----------------------------+
 |           term 2           |  offset 2 * term_length
 +----------------------------+
 | (gap if page_size > 4 KiB) |
 +----------------------------+
 |     metadata (4096 bytes)  |  offset file_length - 4096, always the last 4 KiB
 +----------------------------+
```
Metadata fields, relative to the metadata section (padded into blocks against false sharing):
```
   0 term_tail_counter[0..2] i64 x3   raw tail: term_id << 32 | tail offset
  24 active_term_count i32            partition in use = active_term_count % 3
 128 end_of_stream_position i64       INT64_MAX while open
 136 is_connected i32, 140 active_transport_count i32
 256 correlation_id i64, 264 initial_term_id i32, 268 default_frame_header_length i32,
 272 mtu_length i32, 276 term_length i32, 280 page_size i32, 284..316 windows/socket sizes/max_resend i32
 320 default_header (128 bytes, first 32 used)
 448 entity_tag, 456 response_correlation_id, 464 linger_timeout_ns,
 472 untethered_window_limit_timeout_ns, 480 untethered_resting_timeout_ns (all i64)
 488 group, is_response, rejoin, reliable, sparse, signal_eos, spies_simulate_connection, tether (u8 each)
```
"""

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.layout.bits import INT64_MAX, is_power_of_two
from aeron_numba.layout.frame import HEADER_LENGTH

PARTITION_COUNT = 3

TERM_MIN_LENGTH = 64 * 1024
TERM_MAX_LENGTH = 1024 * 1024 * 1024
PAGE_MIN_SIZE = 4 * 1024
PAGE_MAX_SIZE = 1024 * 1024 * 1024
DEFAULT_FILE_PAGE_SIZE = 4096

LOG_META_DATA_LENGTH = 4096

# §2.1 offsets relative to the start of the metadata section.
TERM_TAIL_COUNTERS_OFFSET = 0
TERM_TAIL_COUNTER_LENGTH = 8
LOG_ACTIVE_TERM_COUNT_OFFSET = 24
LOG_END_OF_STREAM_POSITION_OFFSET = 128
LOG_IS_CONNECTED_OFFSET = 136
LOG_ACTIVE_TRANSPORT_COUNT_OFFSET = 140
LOG_CORRELATION_ID_OFFSET = 256
LOG_INITIAL_TERM_ID_OFFSET = 264
LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET = 268
LOG_MTU_LENGTH_OFFSET = 272
LOG_TERM_LENGTH_OFFSET = 276
LOG_PAGE_SIZE_OFFSET = 280
LOG_PUBLICATION_WINDOW_LENGTH_OFFSET = 284
LOG_RECEIVER_WINDOW_LENGTH_OFFSET = 288
LOG_SOCKET_SNDBUF_LENGTH_OFFSET = 292
LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET = 296
LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET = 300
LOG_SOCKET_RCVBUF_LENGTH_OFFSET = 304
LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET = 308
LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET = 312
LOG_MAX_RESEND_OFFSET = 316
LOG_DEFAULT_FRAME_HEADER_OFFSET = 320
LOG_DEFAULT_FRAME_HEADER_MAX_LENGTH = 128
LOG_ENTITY_TAG_OFFSET = 448
INVALID_TAG = -1  # entity tag of a log whose channel named no publication tag (Aeron's AERON_URI_INVALID_TAG)
LOG_RESPONSE_CORRELATION_ID_OFFSET = 456
LOG_LINGER_TIMEOUT_NS_OFFSET = 464
LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET = 472
LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET = 480
LOG_IS_GROUP_OFFSET = 488
LOG_IS_RESPONSE_OFFSET = 489
LOG_REJOIN_OFFSET = 490
LOG_RELIABLE_OFFSET = 491
LOG_SPARSE_OFFSET = 492
LOG_SIGNAL_EOS_OFFSET = 493
LOG_SPIES_SIMULATE_CONNECTION_OFFSET = 494
LOG_TETHER_OFFSET = 495

END_OF_STREAM_OPEN = INT64_MAX


def check_term_length(term_length: int) -> None:
    """Term length must be a power of two in [64 KiB, 1 GiB] (§2)."""
    if term_length < TERM_MIN_LENGTH:
        raise ConfigurationError(f"term_length={term_length} < TERM_MIN_LENGTH={TERM_MIN_LENGTH}")
    if term_length > TERM_MAX_LENGTH:
        raise ConfigurationError(f"term_length={term_length} > TERM_MAX_LENGTH={TERM_MAX_LENGTH}")
    if not is_power_of_two(term_length):
        raise ConfigurationError(f"term_length={term_length} is not a power of 2")


def check_page_size(page_size: int) -> None:
    """Page size must be a power of two in [4 KiB, 1 GiB] (§2)."""
    if page_size < PAGE_MIN_SIZE:
        raise ConfigurationError(f"page_size={page_size} < PAGE_MIN_SIZE={PAGE_MIN_SIZE}")
    if page_size > PAGE_MAX_SIZE:
        raise ConfigurationError(f"page_size={page_size} > PAGE_MAX_SIZE={PAGE_MAX_SIZE}")
    if not is_power_of_two(page_size):
        raise ConfigurationError(f"page_size={page_size} is not a power of 2")


def compute_log_length(term_length: int, page_size: int = DEFAULT_FILE_PAGE_SIZE) -> int:
    """File length: ``align(3 * term_length + 4096, page_size)`` (§2)."""
    check_term_length(term_length)
    check_page_size(page_size)
    raw = PARTITION_COUNT * term_length + LOG_META_DATA_LENGTH
    return (raw + page_size - 1) & ~(page_size - 1)


def metadata_offset(file_length: int) -> int:
    """The metadata section is always the last 4096 bytes of the file (§2)."""
    return file_length - LOG_META_DATA_LENGTH


def term_tail_counter_offset(partition_index: int) -> int:
    return TERM_TAIL_COUNTERS_OFFSET + partition_index * TERM_TAIL_COUNTER_LENGTH


def check_log_file(file_length: int, term_length: int, page_size: int) -> None:
    """Validate the metadata a reader found against the file it mapped (clients do this before use, §2)."""
    check_term_length(term_length)
    check_page_size(page_size)
    needed = PARTITION_COUNT * term_length + LOG_META_DATA_LENGTH
    if file_length < needed:
        raise LayoutError(
            f"log buffer file_length={file_length} < 3 * term_length + {LOG_META_DATA_LENGTH}={needed}"
        )


def check_default_header_length(length: int) -> None:
    if length != HEADER_LENGTH:
        raise LayoutError(f"default_frame_header_length={length} != HEADER_LENGTH={HEADER_LENGTH}")
