"""Publication status codes and the private state array of a publication (spec/transport.md §4.5, §4.6).

``offer``/``try_claim`` return a new stream position (> 0) or one of these negative codes.
"""

NOT_CONNECTED = -1
BACK_PRESSURED = -2
ADMIN_ACTION = -3
CLOSED = -4
MAX_POSITION_EXCEEDED = -5
ERROR = -6  # C API: invalid argument or message too long (Java throws)

STATUS_NAMES = {
    NOT_CONNECTED: "NOT_CONNECTED",
    BACK_PRESSURED: "BACK_PRESSURED",
    ADMIN_ACTION: "ADMIN_ACTION",
    CLOSED: "CLOSED",
    MAX_POSITION_EXCEEDED: "MAX_POSITION_EXCEEDED",
    ERROR: "ERROR",
}

# Slots of the int64 state array a publication keeps in process memory (not a file format): the kernels
# read the limit from ``limit_buf[pub_state[LIMIT_COUNTER_OFFSET]]`` and, for exclusive publications, keep
# the writer-private position fields of §4.6 here.
PUB_STATE_CLOSED = 0
PUB_STATE_LIMIT_COUNTER_OFFSET = 1
PUB_STATE_TERM_ID = 2
PUB_STATE_TERM_OFFSET = 3
PUB_STATE_TERM_BEGIN_POSITION = 4
PUB_STATE_PARTITION_INDEX = 5
PUB_STATE_LENGTH = 8

# Slots of a buffer claim (``try_claim`` result): the absolute offset of the claimed frame in the log file
# and its frame length; the payload starts HEADER_LENGTH after the frame.
CLAIM_FRAME_OFFSET = 0
CLAIM_FRAME_LENGTH = 1
CLAIM_LENGTH = 2
