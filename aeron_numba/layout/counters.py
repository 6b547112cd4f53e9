"""Counters: the metadata and values sections of cnc.dat (spec/transport.md §9).

Counter ``id`` has a 128-byte value record at ``id * 128`` and a 512-byte metadata record at ``id * 512``.
```
 value record (128 B)                      metadata record (512 B)
   0 counter_value i64                       0 state i32 (0 UNUSED, 1 ALLOCATED, -1 RECLAIMED)
   8 registration_id i64                     4 type_id i32
  16 owner_id i64                            8 free_for_reuse_deadline_ms i64 (INT64_MAX while allocated)
  24 reference_id i64                       16 key (112 B)
  32 padding (96 B)                        128 label_length i32
                                           132 label (380 B, ASCII)
```
"""

from aeron_numba.errors import LayoutError
from aeron_numba.layout.bits import INT64_MAX

# §9.1 value record.
COUNTER_LENGTH = 128
COUNTER_VALUE_OFFSET = 0
COUNTER_REGISTRATION_ID_OFFSET = 8
COUNTER_OWNER_ID_OFFSET = 16
COUNTER_REFERENCE_ID_OFFSET = 24
DEFAULT_REGISTRATION_ID = 0
DEFAULT_OWNER_ID = 0
DEFAULT_REFERENCE_ID = 0

# §9.2 metadata record.
METADATA_LENGTH = 512
METADATA_STATE_OFFSET = 0
METADATA_TYPE_ID_OFFSET = 4
METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET = 8
METADATA_KEY_OFFSET = 16
MAX_KEY_LENGTH = 112
METADATA_LABEL_LENGTH_OFFSET = 128
METADATA_LABEL_OFFSET = 132
MAX_LABEL_LENGTH = 380

RECORD_UNUSED = 0
RECORD_ALLOCATED = 1
RECORD_RECLAIMED = -1
NOT_FREE_TO_REUSE = INT64_MAX
NULL_COUNTER_ID = -1
DEFAULT_FREE_TO_REUSE_TIMEOUT_MS = 1000

# Kernel status codes (negative, so never a counter id). Agrona throws in these cases; kernels return them.
COUNTERS_FULL = -2  # allocate: no UNUSED id left and no RECLAIMED id past its reuse deadline
COUNTER_ID_INVALID = -3  # id < 0 or > max counter id (values_length / 128 - 1, §9)
COUNTER_NOT_ALLOCATED = -4  # free of a record whose state is not ALLOCATED

# §9.3 driver counter type ids.
SYSTEM_COUNTER_TYPE_ID = 0
PUBLISHER_LIMIT_TYPE_ID = 1
SENDER_POSITION_TYPE_ID = 2
RECEIVER_HWM_TYPE_ID = 3
SUBSCRIBER_POSITION_TYPE_ID = 4
RECEIVER_POSITION_TYPE_ID = 5
SEND_CHANNEL_STATUS_TYPE_ID = 6
RECEIVE_CHANNEL_STATUS_TYPE_ID = 7
SENDER_LIMIT_TYPE_ID = 9
PER_IMAGE_TYPE_ID = 10
CLIENT_HEARTBEAT_TYPE_ID = 11
PUBLISHER_POS_TYPE_ID = 12
SENDER_BPE_TYPE_ID = 13
LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID = 14
NAME_RESOLVER_NEIGHBORS_COUNTER_TYPE_ID = 15
NAME_RESOLVER_CACHE_ENTRIES_COUNTER_TYPE_ID = 16
FLOW_CONTROL_RECEIVERS_COUNTER_TYPE_ID = 17
MDC_DESTINATIONS_COUNTER_TYPE_ID = 18

# aeron-numba's own (not Aeron's): the driver's doorbell. Its value counts the rings of the node's agents after a
# working duty cycle; its low 32 bits are the futex word that parked agents sleep on. Three int64s in the padding of
# its value slot (Aeron's layout leaves it unused): the agents asleep on the futex, and the agents parked in ppoll on
# sockets (the driver's), which cannot sleep on a futex; then, 16 bytes, the sockaddr_in (127.0.0.1) of the driver's
# wake socket, to which a ring sends an empty datagram so that such a park ends too (zeros: none)
# (kernels/idle_wait.py).
DOORBELL_COUNTER_TYPE_ID = 1_000_001
DOORBELL_NAME = "aeron-numba doorbell: rings after working duty cycles"
DOORBELL_WAITERS_OFFSET = 64
DOORBELL_POLL_WAITERS_OFFSET = 72
DOORBELL_WAKE_SOCKADDR_OFFSET = 80
# aeron-numba's own: how many duty cycles one agent of a thread of several ran (a ClusteredMediaDriver's driver,
# archive, consensus module and their clients), so a profile of an idle or busy member is read from its cnc.dat.
AGENT_CYCLES_COUNTER_TYPE_ID = 1_000_002
AGENT_CYCLES_LABEL = "aeron-numba agent cycles: {role}"

# Label prefixes of the per-stream counters.
PUBLISHER_LIMIT_NAME = "pub-lmt"
SENDER_POSITION_NAME = "snd-pos"
RECEIVER_HWM_NAME = "rcv-hwm"
SUBSCRIBER_POSITION_NAME = "sub-pos"
RECEIVER_POSITION_NAME = "rcv-pos"
SEND_CHANNEL_STATUS_NAME = "snd-channel"
RECEIVE_CHANNEL_STATUS_NAME = "rcv-channel"
SENDER_LIMIT_NAME = "snd-lmt"
CLIENT_HEARTBEAT_NAME = "client-heartbeat"
PUBLISHER_POS_NAME = "pub-pos (sampled)"
SENDER_BPE_NAME = "snd-bpe"
SND_LOCAL_SOCKADDR_NAME = "snd-local-sockaddr"
RCV_LOCAL_SOCKADDR_NAME = "rcv-local-sockaddr"

# §9.4 stream position key (types 1, 2, 3, 4, 5, 9, 12, 13).
STREAM_KEY_REGISTRATION_ID_OFFSET = 0
STREAM_KEY_SESSION_ID_OFFSET = 8
STREAM_KEY_STREAM_ID_OFFSET = 12
STREAM_KEY_CHANNEL_LENGTH_OFFSET = 16
STREAM_KEY_CHANNEL_OFFSET = 20
STREAM_KEY_MAX_CHANNEL_LENGTH = MAX_KEY_LENGTH - STREAM_KEY_CHANNEL_OFFSET  # 92

# Channel status key (types 6, 7).
CHANNEL_KEY_CHANNEL_LENGTH_OFFSET = 0
CHANNEL_KEY_CHANNEL_OFFSET = 4
CHANNEL_KEY_MAX_CHANNEL_LENGTH = MAX_KEY_LENGTH - CHANNEL_KEY_CHANNEL_OFFSET  # 108

# Local socket address key (type 14, ``snd-local-sockaddr`` / ``rcv-local-sockaddr``): the channel status counter
# it belongs to, then the bound address as ``host:port`` (the port resolved when the channel asked for 0).
LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET = 0
LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET = 4
LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET = 8
# The C driver keeps a NUL after the address inside the key: at most 103 characters.
LOCAL_SOCKADDR_KEY_MAX_ADDRESS_LENGTH = MAX_KEY_LENGTH - LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET - 1

# Client heartbeat key (type 11).
HEARTBEAT_KEY_CLIENT_ID_OFFSET = 0

# Channel status values.
CHANNEL_STATUS_INITIALIZING = 0
CHANNEL_STATUS_ACTIVE = 1
CHANNEL_STATUS_CLOSING = 2
CHANNEL_STATUS_ERRORED = -1

# §9.5 system counters: (id, label). Allocated at driver start in this order, so counter id = system id.
SYSTEM_COUNTERS = (
    (0, "Bytes sent"),
    (1, "Bytes received"),
    (2, "Failed offers to ReceiverProxy"),
    (3, "Failed offers to SenderProxy"),
    (4, "Failed offers to DriverConductorProxy"),
    (5, "NAKs sent"),
    (6, "NAKs received"),
    (7, "Status Messages sent"),
    (8, "Status Messages received"),
    (9, "Heartbeats sent"),
    (10, "Heartbeats received"),
    (11, "Retransmits sent"),
    (12, "Flow control under runs"),
    (13, "Flow control over runs"),
    (14, "Invalid packets"),
    (15, "Errors"),
    (16, "Short sends"),
    (17, "Failed attempts to free log buffers"),
    (18, "Sender flow control limits, i.e. back-pressure events"),
    (19, "Unblocked Publications"),
    (20, "Unblocked Control Commands"),
    (21, "Possible TTL Asymmetry"),
    (22, "ControllableIdleStrategy status"),
    (23, "Loss gap fills"),
    (24, "Client liveness timeouts"),
    (25, "Resolution changes"),
    (26, "Conductor max cycle time doing its work in ns"),
    (27, "Conductor work cycle exceeded threshold count"),
    (28, "Sender max cycle time doing its work in ns"),
    (29, "Sender work cycle exceeded threshold count"),
    (30, "Receiver max cycle time doing its work in ns"),
    (31, "Receiver work cycle exceeded threshold count"),
    (32, "NameResolver max time in ns"),
    (33, "NameResolver exceeded threshold count"),
    (34, "Aeron software"),
    (35, "Bytes currently mapped"),
    (36, "Retransmitted bytes"),
    (37, "Retransmit Pool Overflow count"),
    (38, "Error Frames received"),
    (39, "Error Frames sent"),
)

# Named system counter ids for the code that updates them.
BYTES_SENT = 0
BYTES_RECEIVED = 1
NAK_MESSAGES_SENT = 5
NAK_MESSAGES_RECEIVED = 6
STATUS_MESSAGES_SENT = 7
STATUS_MESSAGES_RECEIVED = 8
HEARTBEATS_SENT = 9
HEARTBEATS_RECEIVED = 10
RETRANSMITS_SENT = 11
FLOW_CONTROL_UNDER_RUNS = 12
FLOW_CONTROL_OVER_RUNS = 13
INVALID_PACKETS = 14
ERRORS = 15
SHORT_SENDS = 16
FAILED_FREE_LOG_BUFFERS = 17
SENDER_FLOW_CONTROL_LIMITS = 18
UNBLOCKED_PUBLICATIONS = 19
UNBLOCKED_COMMANDS = 20
LOSS_GAP_FILLS = 23
CLIENT_TIMEOUTS = 24
RESOLUTION_CHANGES = 25
CONDUCTOR_MAX_CYCLE_TIME = 26
CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED = 27
SENDER_MAX_CYCLE_TIME = 28
SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED = 29
RECEIVER_MAX_CYCLE_TIME = 30
RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED = 31
AERON_VERSION = 34
BYTES_CURRENTLY_MAPPED = 35
RETRANSMITTED_BYTES = 36
RETRANSMIT_OVERFLOW = 37
ERROR_FRAMES_RECEIVED = 38
ERROR_FRAMES_SENT = 39


def check_counters_buffers(metadata_length: int, values_length: int) -> int:
    """Values must hold whole 128-byte records and metadata be 4x values (§6.2). Returns the max counter count."""
    if values_length <= 0 or values_length % COUNTER_LENGTH != 0:
        raise LayoutError(
            f"counters values_length={values_length} must be a positive multiple of COUNTER_LENGTH={COUNTER_LENGTH}"
        )
    expected = values_length * (METADATA_LENGTH // COUNTER_LENGTH)
    if metadata_length < expected:
        raise LayoutError(
            f"counters metadata_length={metadata_length} < 4 * values_length={expected}"
        )
    return values_length // COUNTER_LENGTH


def counter_offset(counter_id: int) -> int:
    return counter_id * COUNTER_LENGTH


def metadata_offset(counter_id: int) -> int:
    return counter_id * METADATA_LENGTH
