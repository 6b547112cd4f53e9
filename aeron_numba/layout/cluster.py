"""The cluster directory's own files (spec/cluster.md §1-§4): ``recording.log``, ``node-state.dat``, and the
mark files ``cluster-mark.dat`` / ``cluster-mark-service-<id>.dat``. The messages of schema 111 are in
``layout/cluster_schema.py``; these are the layouts of the files around them, written once here.

recording.log (§2): no file header, one entry per 64-byte aligned slot:

```
  0 recordingId i64 | 8 leadershipTermId i64 | 16 termBaseLogPosition i64 | 24 logPosition i64
 32 timestamp i64   | 40 serviceId i32       | 44 entryType i32 (bit 31 = invalid; -1 = removed)
 48 archiveEndpoint u32 length + ASCII (STANDBY_SNAPSHOT only) | zero up to the next 64-byte boundary
```

node-state.dat (§3, schema 112 whose message header is 16 bytes), 1 MiB:

```
  0 nodeStateHeader: version i32 (0.3.0) | padding i32           (no message header)
  8 header(blockLength 24, template 301, schema 112, version 10, frameLength 40, padding 0)
 24 candidateTermId i64 (stored last, release) | 32 timestamp i64 | 40 logPosition i64
 48 header(blockLength 0, template 304 nodeStateFooter, ..., frameLength 16) | zero
```

Mark files (§4, schema 110 version 2):

```
| SBE header (8) | MarkFileHeader block (128) | 6 var strings (u32 length + ASCII) | zero | error log @ 8192 |
```
"""

from __future__ import annotations

from enum import IntEnum

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import align, semantic_version
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH, VAR_LENGTH_PREFIX

# ------------------------------------------------------------------------------------------------ files
DEFAULT_CLUSTER_DIR = "aeron-cluster"
RECORDING_LOG_FILE = "recording.log"
RECORDING_LOG_BACKUP_SUFFIX = ".bak"
RECORDING_LOG_TEMP_SUFFIX = ".tmp"
NODE_STATE_FILE = "node-state.dat"
MARK_FILE = "cluster-mark.dat"
MARK_LINK_FILE = "cluster-mark.lnk"
SERVICE_MARK_FILE_PREFIX = "cluster-mark-service-"
MARK_FILE_EXTENSION = ".dat"
MARK_LINK_FILE_EXTENSION = ".lnk"


def service_mark_file(service_id: int) -> str:
    return f"{SERVICE_MARK_FILE_PREFIX}{service_id}{MARK_FILE_EXTENSION}"


#: The consensus module's service id in recording.log and the mark file (ConsensusModule.Configuration.SERVICE_ID).
CONSENSUS_MODULE_SERVICE_ID = -1

# ------------------------------------------------------------------------------------- recording.log
ENTRY_RECORDING_ID_OFFSET = 0
ENTRY_LEADERSHIP_TERM_ID_OFFSET = 8
ENTRY_TERM_BASE_LOG_POSITION_OFFSET = 16
ENTRY_LOG_POSITION_OFFSET = 24
ENTRY_TIMESTAMP_OFFSET = 32
ENTRY_SERVICE_ID_OFFSET = 40
ENTRY_TYPE_OFFSET = 44
ENTRY_ENDPOINT_OFFSET = 48
#: struct format of the fixed fields, offsets 0..47 (little-endian, packed).
ENTRY_FIELDS_FORMAT = "<qqqqqii"
ENTRY_RECORD_ALIGNMENT = 64
MAX_ENTRY_LENGTH = 4096
MAX_ENDPOINT_LENGTH = MAX_ENTRY_LENGTH - ENTRY_ENDPOINT_OFFSET - VAR_LENGTH_PREFIX

ENTRY_TYPE_TERM = 0
ENTRY_TYPE_SNAPSHOT = 1
ENTRY_TYPE_STANDBY_SNAPSHOT = 2
ENTRY_TYPE_NAMES = {ENTRY_TYPE_TERM: "TERM", ENTRY_TYPE_SNAPSHOT: "SNAPSHOT",
                    ENTRY_TYPE_STANDBY_SNAPSHOT: "STANDBY_SNAPSHOT"}
#: OR'ed into entryType: the entry must not be used (an invalidated snapshot, a truncated term).
ENTRY_TYPE_INVALID_FLAG = 1 << 31
#: entryType of a removed entry: skipped on reading, but it still takes an entry index.
ENTRY_TYPE_REMOVED = -1


def entry_length(entry_type: int, endpoint_length: int = 0) -> int:
    """Bytes an entry takes in the file: 64, or for STANDBY_SNAPSHOT the endpoint rounded up to 64."""
    unaligned = ENTRY_ENDPOINT_OFFSET
    if entry_type == ENTRY_TYPE_STANDBY_SNAPSHOT:
        unaligned += VAR_LENGTH_PREFIX + endpoint_length
    return align(unaligned, ENTRY_RECORD_ALIGNMENT)


def check_endpoint_length(length: int) -> None:
    if length > MAX_ENDPOINT_LENGTH:
        raise LayoutError(f"archiveEndpoint length={length} > MAX_ENDPOINT_LENGTH={MAX_ENDPOINT_LENGTH}")


# ------------------------------------------------------------------------------------ node-state.dat
NODE_STATE_SCHEMA_ID = 112
NODE_STATE_SCHEMA_VERSION = 10
NODE_STATE_FILE_LENGTH = 1 << 20
#: Schema 112's message header: blockLength u16, templateId u16, schemaId u16, version u16, frameLength i32,
#: padding i32.
NODE_STATE_MESSAGE_HEADER_LENGTH = 16
NODE_STATE_HEADER_FORMAT = "<HHHHii"
NODE_STATE_FRAME_LENGTH_OFFSET = 8
NODE_STATE_ALIGNMENT = 8
NODE_STATE_HEADER_TEMPLATE_ID = 300  # the block at offset 0, written without a message header
NODE_STATE_HEADER_BLOCK_LENGTH = 8
NODE_STATE_VERSION_OFFSET = 0
CANDIDATE_TERM_TEMPLATE_ID = 301
CANDIDATE_TERM_BLOCK_LENGTH = 24
CANDIDATE_TERM_ID_FIELD_OFFSET = 0  # within the candidateTerm block
CANDIDATE_TERM_TIMESTAMP_FIELD_OFFSET = 8
CANDIDATE_TERM_LOG_POSITION_FIELD_OFFSET = 16
CLUSTER_MEMBERS_TEMPLATE_ID = 303  # dynamic membership; not written by a static cluster
NODE_STATE_FOOTER_TEMPLATE_ID = 304
#: Where a fresh file puts the candidateTerm frame and the footer.
CANDIDATE_TERM_FRAME_OFFSET = NODE_STATE_HEADER_BLOCK_LENGTH
CANDIDATE_TERM_FRAME_LENGTH = NODE_STATE_MESSAGE_HEADER_LENGTH + CANDIDATE_TERM_BLOCK_LENGTH
NODE_STATE_FOOTER_FRAME_OFFSET = CANDIDATE_TERM_FRAME_OFFSET + align(CANDIDATE_TERM_FRAME_LENGTH, NODE_STATE_ALIGNMENT)

# ---------------------------------------------------------------------------------------- mark files
MARK_SCHEMA_ID = 110
MARK_SCHEMA_VERSION = 2
MARK_TEMPLATE_ID = 200
MARK_BLOCK_LENGTH = 128
#: Cluster mark-file (and node-state) semantic version 0.3.0; a reader checks only the major (0).
MARK_VERSION = semantic_version(0, 3, 0)
MARK_VERSION_FAILED = -1  # the component's previous start failed
MARK_HEADER_LENGTH = 8 * 1024
MIN_ERROR_BUFFER_LENGTH = 1024 * 1024
MAX_ERROR_BUFFER_LENGTH = 0x7FFF_FFFF - MARK_HEADER_LENGTH
DEFAULT_ERROR_BUFFER_LENGTH = MIN_ERROR_BUFFER_LENGTH
MARK_LIVENESS_TIMEOUT_MS = 10_000
MARK_ACTIVITY_UPDATE_INTERVAL_MS = 1_000

#: MarkFileHeader block fields in order: (name in the SBE text, block offset, struct format). File offset =
#: ``MESSAGE_HEADER_LENGTH`` + block offset. componentType decodes with ``COMPONENT_TYPES``.
MARK_FIELDS = (
    ("version", 0, "i"),
    ("componentType", 4, "i"),
    ("activityTimestamp", 8, "q"),
    ("startTimestamp", 16, "q"),
    ("pid", 24, "q"),
    ("candidateTermId", 32, "q"),
    ("archiveStreamId", 40, "i"),
    ("serviceStreamId", 44, "i"),
    ("consensusModuleStreamId", 48, "i"),
    ("ingressStreamId", 52, "i"),
    ("memberId", 56, "i"),
    ("serviceId", 60, "i"),
    ("headerLength", 64, "i"),
    ("errorBufferLength", 68, "i"),
    ("clusterId", 72, "i"),
)
_MARK_FIELD_OFFSETS = {name: MESSAGE_HEADER_LENGTH + offset for name, offset, _ in MARK_FIELDS}
MARK_VERSION_OFFSET = _MARK_FIELD_OFFSETS["version"]
MARK_COMPONENT_TYPE_OFFSET = _MARK_FIELD_OFFSETS["componentType"]
MARK_ACTIVITY_TIMESTAMP_OFFSET = _MARK_FIELD_OFFSETS["activityTimestamp"]
MARK_START_TIMESTAMP_OFFSET = _MARK_FIELD_OFFSETS["startTimestamp"]
MARK_PID_OFFSET = _MARK_FIELD_OFFSETS["pid"]
MARK_CANDIDATE_TERM_ID_OFFSET = _MARK_FIELD_OFFSETS["candidateTermId"]
MARK_MEMBER_ID_OFFSET = _MARK_FIELD_OFFSETS["memberId"]
MARK_SERVICE_ID_OFFSET = _MARK_FIELD_OFFSETS["serviceId"]
MARK_HEADER_LENGTH_OFFSET = _MARK_FIELD_OFFSETS["headerLength"]
MARK_ERROR_BUFFER_LENGTH_OFFSET = _MARK_FIELD_OFFSETS["errorBufferLength"]
MARK_CLUSTER_ID_OFFSET = _MARK_FIELD_OFFSETS["clusterId"]
MARK_STRINGS_OFFSET = MESSAGE_HEADER_LENGTH + MARK_BLOCK_LENGTH
#: The var strings after the block, in order; servicesClusterDir is there from schema version 1.
MARK_STRINGS = ("aeronDirectory", "controlChannel", "ingressChannel", "serviceName", "authenticator",
                "servicesClusterDir")
MARK_STRINGS_SINCE_VERSION = {"servicesClusterDir": 1}

COMPONENT_TYPES = {0: "UNKNOWN", 1: "CONSENSUS_MODULE", 2: "CONTAINER", 3: "BACKUP", 4: "STANDBY"}
COMPONENT_TYPE_IDS = {name: value for value, name in COMPONENT_TYPES.items()}


def mark_file_length(error_buffer_length: int) -> int:
    return MARK_HEADER_LENGTH + error_buffer_length


def check_error_buffer_length(error_buffer_length: int) -> None:
    if not MIN_ERROR_BUFFER_LENGTH <= error_buffer_length <= MAX_ERROR_BUFFER_LENGTH:
        raise LayoutError(f"errorBufferLength={error_buffer_length} outside [{MIN_ERROR_BUFFER_LENGTH}, "
                          f"{MAX_ERROR_BUFFER_LENGTH}]")


def check_mark_strings_fit(lengths: list[int]) -> None:
    """The strings must fit between the block and the error log."""
    end = MARK_STRINGS_OFFSET + sum(VAR_LENGTH_PREFIX + n for n in lengths)
    if end > MARK_HEADER_LENGTH:
        raise LayoutError(f"cluster mark file strings end at {end} > MARK_HEADER_LENGTH={MARK_HEADER_LENGTH}")


# ------------------------------------------------------------------------------------------------ election (§8, §10, §11)
class ElectionState(IntEnum):
    """Value of the election-state counter (type 207), spec §8.1."""
    INIT = 0
    CANVASS = 1
    NOMINATE = 2
    CANDIDATE_BALLOT = 3
    FOLLOWER_BALLOT = 4
    LEADER_LOG_REPLICATION = 5
    LEADER_REPLAY = 6
    LEADER_INIT = 7
    LEADER_READY = 8
    FOLLOWER_LOG_REPLICATION = 9
    FOLLOWER_REPLAY = 10
    FOLLOWER_CATCHUP_INIT = 11
    FOLLOWER_CATCHUP_AWAIT = 12
    FOLLOWER_CATCHUP = 13
    FOLLOWER_LOG_INIT = 14
    FOLLOWER_LOG_AWAIT = 15
    FOLLOWER_READY = 16
    CLOSED = 17


class ClusterRole(IntEnum):
    """Value of the node-role counter (type 201), spec §8.1."""
    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2


NODE_ROLE_TYPE_ID = 201
ELECTION_STATE_TYPE_ID = 207
ELECTION_COUNT_TYPE_ID = 238

APPEND_POSITION_FLAG_NONE = 0
APPEND_POSITION_FLAG_CATCHUP = 1
#: The consensus protocol's version members send in CanvassPosition and RequestVote: Aeron 1.48's
#: ConsensusModule.Configuration.PROTOCOL_SEMANTIC_VERSION is 1.0.0 (spec §11 gives 0.3.0, which is the client's).
CONSENSUS_PROTOCOL_SEMANTIC_VERSION = semantic_version(1, 0, 0)
#: The session protocol's version a client sends in its SessionConnectRequest (spec §5: 0.3.0, Aeron's
#: AeronCluster.Configuration.PROTOCOL_SEMANTIC_VERSION); a consensus module refuses another major version.
CLIENT_PROTOCOL_SEMANTIC_VERSION = semantic_version(0, 3, 0)

DEFAULT_ELECTION_TIMEOUT_NS = 1_000_000_000
DEFAULT_ELECTION_STATUS_INTERVAL_NS = 100_000_000
DEFAULT_LEADER_HEARTBEAT_TIMEOUT_NS = 10_000_000_000
DEFAULT_LEADER_HEARTBEAT_INTERVAL_NS = 200_000_000
DEFAULT_STARTUP_CANVASS_TIMEOUT_NS = 60_000_000_000
DEFAULT_APPOINTED_LEADER_ID = -1


# ------------------------------------------------------------------------------------------------ counters (§10)
# Type ids as Aeron 1.48's AeronCounters. The consensus module allocates them through its Aeron client with the
# 4-byte cluster id as key and the label ``<name> - clusterId=<id>`` (spec §10); the service container,
# ClusterTool and the harness find them by type id (and cluster id) in the node's cnc.dat.
CONSENSUS_MODULE_STATE_TYPE_ID = 200
# NODE_ROLE_TYPE_ID = 201 (above, with the election)
CONTROL_TOGGLE_TYPE_ID = 202
COMMIT_POSITION_TYPE_ID = 203
RECOVERY_STATE_TYPE_ID = 204
SNAPSHOT_COUNTER_TYPE_ID = 205
# ELECTION_STATE_TYPE_ID = 207 (above)
CONSENSUS_MODULE_ERROR_COUNT_TYPE_ID = 212
CLIENT_TIMEOUT_COUNT_TYPE_ID = 213
INVALID_REQUEST_COUNT_TYPE_ID = 214
CLUSTERED_SERVICE_ERROR_COUNT_TYPE_ID = 215
MAX_CYCLE_TIME_TYPE_ID = 216
CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID = 217
CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID = 218
CLUSTERED_SERVICE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID = 219
STANDBY_SNAPSHOT_COUNTER_TYPE_ID = 232
NODE_CONTROL_TOGGLE_TYPE_ID = 233
TOTAL_MAX_SNAPSHOT_DURATION_TYPE_ID = 234
TOTAL_SNAPSHOT_DURATION_THRESHOLD_EXCEEDED_TYPE_ID = 235
CLUSTERED_SERVICE_MAX_SNAPSHOT_DURATION_TYPE_ID = 236
CLUSTERED_SERVICE_SNAPSHOT_DURATION_THRESHOLD_EXCEEDED_TYPE_ID = 237
# ELECTION_COUNT_TYPE_ID = 238 (above)
LEADERSHIP_TERM_ID_TYPE_ID = 239

#: Generic cluster counters: key = cluster id (i32).
CLUSTER_ID_KEY_OFFSET = 0
CLUSTER_ID_KEY_LENGTH = 4

# Recovery state counter (type 204), Aeron's RecoveryState: the key says where a starting service recovers from.
#  0 leadershipTermId i64 | 8 logPosition i64 | 16 timestamp i64 | 24 clusterId i32 | 28 serviceCount i32
# 32 snapshotRecordingId i64 [serviceCount], indexed by service id
RECOVERY_STATE_LEADERSHIP_TERM_ID_OFFSET = 0
RECOVERY_STATE_LOG_POSITION_OFFSET = 8
RECOVERY_STATE_TIMESTAMP_OFFSET = 16
RECOVERY_STATE_CLUSTER_ID_OFFSET = 24
RECOVERY_STATE_SERVICE_COUNT_OFFSET = 28
RECOVERY_STATE_SNAPSHOT_RECORDING_IDS_OFFSET = 32
RECOVERY_STATE_LABEL_PREFIX = "Cluster recovery: "


class ConsensusModuleState(IntEnum):
    """Value of the consensus-module-state counter (type 200), spec §8.1."""
    INIT = 0
    ACTIVE = 1
    SUSPENDED = 2
    SNAPSHOT = 3
    QUITTING = 4
    TERMINATING = 5
    CLOSED = 6


class ClusterControlToggle(IntEnum):
    """Value of the control-toggle counter (type 202), spec §8.1, §12: a tool CASes NEUTRAL -> an action; the
    consensus module acts on it and sets it back to NEUTRAL."""
    INACTIVE = 0
    NEUTRAL = 1
    SUSPEND = 2
    RESUME = 3
    SNAPSHOT = 4
    SHUTDOWN = 5
    ABORT = 6
    STANDBY_SNAPSHOT = 7


# ------------------------------------------------------------------------------------------------ snapshots (§9)
CONSENSUS_MODULE_SNAPSHOT_TYPE_ID = 1  # SnapshotMarker.typeId of the consensus module's snapshot
SERVICE_SNAPSHOT_TYPE_ID = 2  # ... of a clustered service's snapshot
