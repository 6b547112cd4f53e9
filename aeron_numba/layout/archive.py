"""The archive's files (spec/archive.md §2-§5, §7): ``archive.catalog``, segment files, ``archive-mark.dat``,
the archive counters, and Aeron's defaults.

Catalog (§3), a sparse mapped file:

```
| CatalogHeader (32) | entry | entry | ... | zero up to the capacity |

CatalogHeader:  0 version i32 (3.1.0) | 4 length i32 = 32 | 8 nextRecordingId i64 | 16 alignment i32 (64) | 31 reserved
entry:          RecordingDescriptorHeader (32): 0 length i32 (aligned body length) | 4 state i32 | 8 checksum i32
                | 31 reserved i8;  then the RecordingDescriptor body (80-byte block + strippedChannel,
                originalChannel, sourceIdentity as u32 length + ASCII), zero-padded to the alignment
```

The header and entry field offsets are the SBE schema's (``layout/archive_schema.py``: CatalogHeader,
RecordingDescriptorHeader, RecordingDescriptor), read from there rather than typed again.

Segment files (§4): ``<recordingId>-<segmentBasePosition>.rec``, each ``segment_file_length`` long; a file
holds the terms of the recorded log byte for byte from the term base of the start position.
"""

from __future__ import annotations

from aeron_numba.errors import LayoutError
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA, ENUMS
from aeron_numba.layout.bits import align, is_power_of_two, semantic_version
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH, SbeMessage, VAR_LENGTH_PREFIX


def _offsets(message: SbeMessage) -> dict[str, int]:
    return {f.name: f.offset for f in message.fields}


_CATALOG_HEADER = ARCHIVE_SCHEMA.message("CatalogHeader")
_DESCRIPTOR_HEADER = ARCHIVE_SCHEMA.message("RecordingDescriptorHeader")
_DESCRIPTOR = ARCHIVE_SCHEMA.message("RecordingDescriptor")

# ------------------------------------------------------------------------------------------------ files
DEFAULT_ARCHIVE_DIR = "aeron-archive"
CATALOG_FILE = "archive.catalog"
MARK_FILE = "archive-mark.dat"
MARK_LINK_FILE = "archive-mark.lnk"
SEGMENT_FILE_SUFFIX = ".rec"
DELETE_SUFFIX = ".del"

# -------------------------------------------------------------------------------------------- catalog
#: Catalog and mark file format version (§3.1, §7): 3.1.0; only the major is checked on open.
CATALOG_VERSION = semantic_version(3, 1, 0)
CATALOG_HEADER_LENGTH = _CATALOG_HEADER.block_length
CATALOG_VERSION_OFFSET = _offsets(_CATALOG_HEADER)["version"]
CATALOG_LENGTH_OFFSET = _offsets(_CATALOG_HEADER)["length"]
CATALOG_NEXT_RECORDING_ID_OFFSET = _offsets(_CATALOG_HEADER)["next_recording_id"]
CATALOG_ALIGNMENT_OFFSET = _offsets(_CATALOG_HEADER)["alignment"]
DEFAULT_CATALOG_ALIGNMENT = 64
#: A catalog with alignment 0 is a legacy one: entries aligned to 1024, the first at offset 1024.
LEGACY_CATALOG_ALIGNMENT = 1024
DEFAULT_CATALOG_CAPACITY = 1024 * 1024
MIN_CATALOG_CAPACITY = CATALOG_HEADER_LENGTH
MAX_CATALOG_CAPACITY = (1 << 31) - 1
#: The capacity grows by this factor until a new entry fits (capped at ``MAX_CATALOG_CAPACITY``).
CATALOG_GROWTH_FACTOR = 1.5

DESCRIPTOR_HEADER_LENGTH = _DESCRIPTOR_HEADER.block_length
DESCRIPTOR_LENGTH_OFFSET = _offsets(_DESCRIPTOR_HEADER)["length"]
DESCRIPTOR_STATE_OFFSET = _offsets(_DESCRIPTOR_HEADER)["state"]
DESCRIPTOR_CHECKSUM_OFFSET = _offsets(_DESCRIPTOR_HEADER)["checksum"]
RECORDING_STATE_INVALID = ENUMS["RecordingState"]["INVALID"]
RECORDING_STATE_VALID = ENUMS["RecordingState"]["VALID"]
RECORDING_STATE_DELETED = ENUMS["RecordingState"]["DELETED"]

#: RecordingDescriptor body fields: offset within the body (the entry offset + ``DESCRIPTOR_HEADER_LENGTH``).
DESCRIPTOR_BODY_OFFSETS = _offsets(_DESCRIPTOR)
DESCRIPTOR_BLOCK_LENGTH = _DESCRIPTOR.block_length
#: The body's three strings, in order.
DESCRIPTOR_STRINGS = tuple(v.name for v in _DESCRIPTOR.var_fields)
NULL_POSITION = -1
NULL_TIMESTAMP = -1
NULL_LENGTH = -1
NULL_VALUE = -1


def descriptor_body_length(stripped_channel: int, original_channel: int, source_identity: int) -> int:
    """Unaligned body bytes for strings of these lengths: the block and three length-prefixed strings."""
    return (DESCRIPTOR_BLOCK_LENGTH + len(DESCRIPTOR_STRINGS) * VAR_LENGTH_PREFIX
            + stripped_channel + original_channel + source_identity)


def catalog_entry_length(stripped_channel: int, original_channel: int, source_identity: int,
                         alignment: int = DEFAULT_CATALOG_ALIGNMENT) -> int:
    """A whole entry, header included, aligned: ``align(32 + 92 + |stripped| + |original| + |source|, alignment)``."""
    return align(DESCRIPTOR_HEADER_LENGTH + descriptor_body_length(stripped_channel, original_channel, source_identity),
                 alignment)


def first_entry_offset(alignment: int) -> int:
    return LEGACY_CATALOG_ALIGNMENT if alignment == 0 else CATALOG_HEADER_LENGTH


def check_catalog_alignment(alignment: int) -> int:
    """The entry alignment a catalog header declares: a power of two >= 32, or 0 (legacy: 1024)."""
    if alignment == 0:
        return LEGACY_CATALOG_ALIGNMENT
    if alignment < DESCRIPTOR_HEADER_LENGTH or not is_power_of_two(alignment):
        raise LayoutError(f"catalog alignment={alignment} must be a power of two >= {DESCRIPTOR_HEADER_LENGTH}")
    return alignment


def check_catalog_capacity(capacity: int) -> None:
    if not MIN_CATALOG_CAPACITY <= capacity <= MAX_CATALOG_CAPACITY:
        raise LayoutError(
            f"catalog capacity={capacity} must be in [{MIN_CATALOG_CAPACITY}, {MAX_CATALOG_CAPACITY}]")


def grown_catalog_capacity(capacity: int, needed: int) -> int:
    """The capacity after growing ``capacity`` by 1.5x until ``needed`` bytes fit (§3.2); raises past the max."""
    if needed > MAX_CATALOG_CAPACITY:
        raise LayoutError(f"catalog needs {needed} bytes > MAX_CATALOG_CAPACITY={MAX_CATALOG_CAPACITY}")
    while capacity < needed:
        capacity = min(MAX_CATALOG_CAPACITY, int(capacity * CATALOG_GROWTH_FACTOR))
    return capacity


# ---------------------------------------------------------------------------------------- segment files
DEFAULT_SEGMENT_FILE_LENGTH = 128 * 1024 * 1024
MIN_SEGMENT_FILE_LENGTH = 64 * 1024
MAX_SEGMENT_FILE_LENGTH = 1024 * 1024 * 1024


def check_segment_file_length(length: int) -> None:
    if not (MIN_SEGMENT_FILE_LENGTH <= length <= MAX_SEGMENT_FILE_LENGTH and is_power_of_two(length)):
        raise LayoutError(f"segment file length={length} must be a power of two in "
                          f"[{MIN_SEGMENT_FILE_LENGTH}, {MAX_SEGMENT_FILE_LENGTH}]")


def recording_segment_file_length(segment_file_length: int, term_length: int) -> int:
    """A recording's segment length: the archive's, or the term length if that is larger (§4.1)."""
    return max(segment_file_length, term_length)


def segment_file_name(recording_id: int, segment_base_position: int) -> str:
    return f"{recording_id}-{segment_base_position}{SEGMENT_FILE_SUFFIX}"


def parse_segment_file_name(name: str) -> tuple[int, int] | None:
    """``(recording_id, segment_base_position)`` of a segment file name, or None for any other name."""
    if not name.endswith(SEGMENT_FILE_SUFFIX):
        return None
    stem = name[: -len(SEGMENT_FILE_SUFFIX)]
    recording, sep, base = stem.partition("-")
    if not sep or not recording.isdigit() or not base.isdigit():
        return None
    return int(recording), int(base)


def segment_file_base_position(start_position: int, position: int, term_length: int, segment_length: int) -> int:
    """Base position of the segment holding ``position`` of a recording that started at ``start_position``:
    segments start at the term base of the start position and are ``segment_length`` apart (§4.1)."""
    start_term_base = start_position - (start_position & (term_length - 1))
    length_from_base = position - start_term_base
    return start_term_base + (length_from_base - (length_from_base & (segment_length - 1)))


# ------------------------------------------------------------------------------------------- mark file
#: archive-mark.dat (§5): SBE header (schema 100, version 2, template 200, block 128), the MarkFileHeader
#: block, four var strings, the error log at ``MARK_HEADER_LENGTH``.
MARK_SCHEMA_ID = 100
MARK_SCHEMA_VERSION = 2
MARK_TEMPLATE_ID = 200
MARK_BLOCK_LENGTH = 128
MARK_VERSION = CATALOG_VERSION
MARK_HEADER_LENGTH = 8192
_MARK_BLOCK = MESSAGE_HEADER_LENGTH  # file offset of the MarkFileHeader block
MARK_VERSION_OFFSET = _MARK_BLOCK + 0
MARK_ACTIVITY_TIMESTAMP_OFFSET = _MARK_BLOCK + 8
MARK_START_TIMESTAMP_OFFSET = _MARK_BLOCK + 16
MARK_PID_OFFSET = _MARK_BLOCK + 24
MARK_CONTROL_STREAM_ID_OFFSET = _MARK_BLOCK + 32
MARK_LOCAL_CONTROL_STREAM_ID_OFFSET = _MARK_BLOCK + 36
MARK_EVENTS_STREAM_ID_OFFSET = _MARK_BLOCK + 40
MARK_HEADER_LENGTH_OFFSET = _MARK_BLOCK + 44
MARK_ERROR_BUFFER_LENGTH_OFFSET = _MARK_BLOCK + 48
MARK_ARCHIVE_ID_OFFSET = _MARK_BLOCK + 56
#: The var strings start after the block: controlChannel, localControlChannel, eventsChannel, aeronDirectory.
MARK_STRINGS_OFFSET = _MARK_BLOCK + MARK_BLOCK_LENGTH
MARK_STRINGS = ("control_channel", "local_control_channel", "events_channel", "aeron_directory")
#: Another archive treats the dir as in use while the activity timestamp is younger than this.
MARK_LIVENESS_TIMEOUT_MS = 10_000
MARK_ACTIVITY_UPDATE_INTERVAL_MS = 1_000
DEFAULT_ERROR_BUFFER_LENGTH = 1024 * 1024


def mark_file_length(error_buffer_length: int) -> int:
    return MARK_HEADER_LENGTH + error_buffer_length


def check_mark_strings_fit(lengths: list[int]) -> None:
    """The four strings must fit between the block and the error log."""
    end = MARK_STRINGS_OFFSET + sum(VAR_LENGTH_PREFIX + n for n in lengths)
    if end > MARK_HEADER_LENGTH:
        raise LayoutError(f"archive mark file strings end at {end} > MARK_HEADER_LENGTH={MARK_HEADER_LENGTH}")


# ---------------------------------------------------------------------------------------------- counters
RECORDING_POSITION_TYPE_ID = 100
ARCHIVE_ERROR_COUNT_TYPE_ID = 101
ARCHIVE_CONTROL_SESSIONS_TYPE_ID = 102
ARCHIVE_MAX_CYCLE_TIME_TYPE_ID = 103
ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID = 104
ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID = 105
ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID = 106
ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID = 107
ARCHIVE_REPLAYER_MAX_READ_TIME_TYPE_ID = 108
ARCHIVE_REPLAYER_TOTAL_READ_BYTES_TYPE_ID = 109
ARCHIVE_REPLAYER_TOTAL_READ_TIME_TYPE_ID = 110
ARCHIVE_RECORDING_SESSIONS_TYPE_ID = 111
ARCHIVE_REPLAY_SESSIONS_TYPE_ID = 112
#: rec-pos key (§4.4): recordingId i64 | sessionId i32 | source identity length i32 (S) | S bytes | archiveId i64.
REC_POS_RECORDING_ID_OFFSET = 0
REC_POS_SESSION_ID_OFFSET = 8
REC_POS_SOURCE_IDENTITY_LENGTH_OFFSET = 12
REC_POS_SOURCE_IDENTITY_OFFSET = 16
#: The source identity is truncated so the key (with the archive id after it) fits 112 bytes.
REC_POS_MAX_SOURCE_IDENTITY_LENGTH = 112 - REC_POS_SOURCE_IDENTITY_OFFSET - 8


def rec_pos_key_length(source_identity_length: int) -> int:
    return REC_POS_SOURCE_IDENTITY_OFFSET + min(source_identity_length, REC_POS_MAX_SOURCE_IDENTITY_LENGTH) + 8


# ---------------------------------------------------------------------------------------------- defaults
#: Control protocol (§6.1): the client's semantic version, sent in ConnectRequest; a different major is refused.
ARCHIVE_PROTOCOL_VERSION = semantic_version(1, 11, 0)
DEFAULT_CONTROL_STREAM_ID = 10
DEFAULT_LOCAL_CONTROL_STREAM_ID = 10
DEFAULT_LOCAL_CONTROL_CHANNEL = "aeron:ipc?term-length=64k"
DEFAULT_RESPONSE_STREAM_ID = 20
DEFAULT_RECORDING_EVENTS_STREAM_ID = 30
#: Aeron's AeronArchive.Configuration.RECORDING_EVENTS_CHANNEL_DEFAULT (dynamic MDC). Aeron's archive does not
#: fall back on it: its recording events channel is unset unless configured.
DEFAULT_RECORDING_EVENTS_CHANNEL = "aeron:udp?control-mode=dynamic|control=localhost:8030"
DEFAULT_FILE_IO_MAX_LENGTH = 1024 * 1024
DEFAULT_MAX_CONCURRENT_RECORDINGS = 20
DEFAULT_MAX_CONCURRENT_REPLAYS = 20
DEFAULT_CONNECT_TIMEOUT_NS = 5_000_000_000
DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_NS = 1_000_000_000
DEFAULT_REPLAY_LINGER_TIMEOUT_NS = 5_000_000_000
DEFAULT_MESSAGE_TIMEOUT_NS = 10_000_000_000
DEFAULT_CONTROL_TERM_BUFFER_LENGTH = 64 * 1024
DEFAULT_CONTROL_MTU_LENGTH = 1408
DEFAULT_CYCLE_THRESHOLD_NS = 1_000_000_000
#: List requests scan at most this many catalog entries per work cycle (§6.2).
MAX_SCANS_PER_WORK_CYCLE = 64

# ------------------------------------------------------------------------------------ control responses
CONTROL_RESPONSE_CODES = ENUMS["ControlResponseCode"]
#: ``relevantId`` of an ERROR ControlResponse (§6.2).
ARCHIVE_ERROR_CODES = {
    "GENERIC": 0, "ACTIVE_LISTING": 1, "ACTIVE_RECORDING": 2, "ACTIVE_SUBSCRIPTION": 3, "UNKNOWN_SUBSCRIPTION": 4,
    "UNKNOWN_RECORDING": 5, "UNKNOWN_REPLAY": 6, "MAX_REPLAYS": 7, "MAX_RECORDINGS": 8, "INVALID_EXTENSION": 9,
    "AUTHENTICATION_REJECTED": 10, "STORAGE_SPACE": 11, "UNKNOWN_REPLICATION": 12, "UNAUTHORISED_ACTION": 13,
    "REPLICATION_CONNECTION_FAILURE": 14,
}
RECORDING_SIGNALS = ENUMS["RecordingSignal"]
SOURCE_LOCATIONS = ENUMS["SourceLocation"]
BOOLEAN_TRUE = ENUMS["BooleanType"]["TRUE"]
