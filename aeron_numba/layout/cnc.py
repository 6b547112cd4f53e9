"""``cnc.dat``, the driver's command-and-control file (spec/transport.md §6).

```
 +-----------------------------------------------------------------+
 | header (128 B): 0 cnc_version i32 (written last) | 4 to_driver_buffer_length i32
 |   8 to_clients_buffer_length | 12 counters_metadata_buffer_length | 16 counters_values_buffer_length
 |  20 error_log_buffer_length | 24 client_liveness_timeout_ns i64 | 32 start_timestamp_ms i64 | 40 pid i64
 +-----------------------------------------------------------------+
 | to-driver ring buffer (§7)                                      |  128
 | to-clients broadcast buffer (§8)                                |
 | counters metadata (§9)                                          |
 | counters values (§9)                                            |
 | distinct error log (§10)                                        |
 +-----------------------------------------------------------------+  aligned to the file page size
```
"""

from typing import NamedTuple

from aeron_numba.errors import LayoutError
from aeron_numba.layout import broadcast, counters, error_log, ring_buffer
from aeron_numba.layout.bits import semantic_version, semantic_version_major, semantic_version_string
from aeron_numba.layout.log_buffer_descriptor import DEFAULT_FILE_PAGE_SIZE

CNC_FILE = "cnc.dat"
CNC_VERSION = semantic_version(0, 2, 0)

CNC_VERSION_FIELD_OFFSET = 0
TO_DRIVER_BUFFER_LENGTH_FIELD_OFFSET = 4
TO_CLIENTS_BUFFER_LENGTH_FIELD_OFFSET = 8
COUNTERS_METADATA_BUFFER_LENGTH_FIELD_OFFSET = 12
COUNTERS_VALUES_BUFFER_LENGTH_FIELD_OFFSET = 16
ERROR_LOG_BUFFER_LENGTH_FIELD_OFFSET = 20
CLIENT_LIVENESS_TIMEOUT_FIELD_OFFSET = 24
START_TIMESTAMP_FIELD_OFFSET = 32
PID_FIELD_OFFSET = 40
META_DATA_LENGTH = 48
END_OF_METADATA_OFFSET = 128

# §6.2 / §14 defaults.
DEFAULT_TO_DRIVER_BUFFER_LENGTH = 1024 * 1024 + ring_buffer.TRAILER_LENGTH
DEFAULT_TO_CLIENTS_BUFFER_LENGTH = 1024 * 1024 + broadcast.TRAILER_LENGTH
DEFAULT_COUNTERS_VALUES_BUFFER_LENGTH = 1024 * 1024
MAX_COUNTERS_VALUES_BUFFER_LENGTH = 500 * 1024 * 1024
DEFAULT_ERROR_LOG_BUFFER_LENGTH = 1024 * 1024
DEFAULT_CLIENT_LIVENESS_TIMEOUT_NS = 10_000_000_000


class CncSections(NamedTuple):
    """Byte offset and length of each section of cnc.dat, in file order."""

    to_driver_offset: int
    to_driver_length: int
    to_clients_offset: int
    to_clients_length: int
    counters_metadata_offset: int
    counters_metadata_length: int
    counters_values_offset: int
    counters_values_length: int
    error_log_offset: int
    error_log_length: int
    file_length: int


def compute_sections(
    to_driver_length: int = DEFAULT_TO_DRIVER_BUFFER_LENGTH,
    to_clients_length: int = DEFAULT_TO_CLIENTS_BUFFER_LENGTH,
    counters_values_length: int = DEFAULT_COUNTERS_VALUES_BUFFER_LENGTH,
    error_log_length: int = DEFAULT_ERROR_LOG_BUFFER_LENGTH,
    counters_metadata_length: int | None = None,
    page_size: int = DEFAULT_FILE_PAGE_SIZE,
) -> CncSections:
    """Lay out the sections after the 128-byte header, validating every length (§6.2)."""
    ring_buffer.check_capacity(to_driver_length)
    broadcast.check_capacity(to_clients_length)
    if counters_values_length > MAX_COUNTERS_VALUES_BUFFER_LENGTH:
        raise LayoutError(
            f"counters_values_length={counters_values_length} > MAX={MAX_COUNTERS_VALUES_BUFFER_LENGTH}"
        )
    if counters_metadata_length is None:
        counters_metadata_length = counters_values_length * (counters.METADATA_LENGTH // counters.COUNTER_LENGTH)
    counters.check_counters_buffers(counters_metadata_length, counters_values_length)
    error_log.check_buffer_length(error_log_length)

    to_driver_offset = END_OF_METADATA_OFFSET
    to_clients_offset = to_driver_offset + to_driver_length
    metadata_offset = to_clients_offset + to_clients_length
    values_offset = metadata_offset + counters_metadata_length
    error_log_offset = values_offset + counters_values_length
    end = error_log_offset + error_log_length
    file_length = (end + page_size - 1) & ~(page_size - 1)
    return CncSections(
        to_driver_offset, to_driver_length,
        to_clients_offset, to_clients_length,
        metadata_offset, counters_metadata_length,
        values_offset, counters_values_length,
        error_log_offset, error_log_length,
        file_length,
    )


def check_version(cnc_version: int) -> None:
    """Reject a cnc.dat whose major version differs from ours (0 means the driver is not ready yet)."""
    if semantic_version_major(cnc_version) != semantic_version_major(CNC_VERSION):
        raise LayoutError(
            f"cnc.dat version {semantic_version_string(cnc_version)} is not compatible with"
            f" {semantic_version_string(CNC_VERSION)} (major versions differ)"
        )


def check_file_length(file_length: int, sections: CncSections) -> None:
    """A client checks the file really holds every section the header announces (§6)."""
    needed = sections.error_log_offset + sections.error_log_length
    if file_length < needed:
        raise LayoutError(f"cnc.dat file_length={file_length} < header + sections={needed}")
