"""The hot state of a network image and a network publication, as int64 words the compiled UDP path reads and writes.

Ours, not Aeron's (nothing outside the driver's process sees it). Each ``PublicationImage`` and
``NetworkPublication`` owns one row (``np.zeros(*_ROW_LENGTH, np.int64)``); the receiver and sender hand the
kernels the rows' addresses, and the Python objects read the same words through properties, so a field has one
home whichever side moves it. Rows are written by the agent that owns the entity's data path (the receiver for an
image, the sender for a publication) and read by the conductor for its timeouts: int64-aligned words, read whole.

A position field with no value holds ``NO_POSITION``.
"""

from __future__ import annotations

NO_POSITION = -1


def row_field(column: int) -> property:
    """A Python int attribute kept in word ``column`` of the object's ``row``."""

    def get(self) -> int:
        return int(self.row[column])

    def set(self, value: int) -> None:
        self.row[column] = value

    return property(get, set)

# ------------------------------------------------------------------------------------------------ image row
IMAGE_SESSION_ID = 0
IMAGE_STREAM_ID = 1
IMAGE_ENDPOINT_ID = 2  # the receive endpoint it belongs to (the receiver's id for it)
IMAGE_IS_ACTIVE = 3  # 1 while ACTIVE: data is taken only then
IMAGE_LOG_ADDRESS = 4  # the mapped log file: terms, then metadata
IMAGE_LOG_LENGTH = 5
IMAGE_METADATA_OFFSET = 6
IMAGE_TERM_LENGTH = 7
IMAGE_POSITION_BITS = 8
IMAGE_INITIAL_TERM_ID = 9
IMAGE_HWM_POSITION = 10  # highest position received
IMAGE_REBUILD_POSITION = 11  # the log is complete up to here
IMAGE_LAST_SM_POSITION = 12  # the window granted by the last status message starts here ...
IMAGE_LAST_SM_WINDOW = 13  # ... and is this long
IMAGE_TIME_OF_LAST_SM_NS = 14
IMAGE_TIME_OF_LAST_PACKET_NS = 15
IMAGE_END_OF_STREAM_POSITION = 16  # NO_POSITION until a heartbeat flagged end of stream
IMAGE_RCV_HWM_COUNTER_ID = 17
IMAGE_RCV_POS_COUNTER_ID = 18
# The image's own status messages and loss detection in compiled code (kernels/image_receiver.receiver_work), for an
# image whose receiver work Python has nothing to decide in: one connection that knows where to answer.
IMAGE_COMPILED_WORK = 19  # 1: receiver_work may run it
IMAGE_CONTROL_FD = 20  # the socket its status messages and NAKs leave by ...
IMAGE_CONTROL_SOCKADDR_ADDRESS = 21  # ... and where they go (a sockaddr_in's address)
IMAGE_LOSS_STATE_ADDRESS = 22  # its loss detector's state (kernels/loss_detector.py)
IMAGE_NAK_DELAY_NS = 23
IMAGE_NAK_RETRY_DELAY_NS = 24
IMAGE_STATUS_MESSAGE_TIMEOUT_NS = 25
IMAGE_RECEIVER_WINDOW = 26
IMAGE_RECEIVER_ID = 27
IMAGE_IMAGE_LIVENESS_TIMEOUT_NS = 28
IMAGE_ACTIVE_TRANSPORT_COUNT = 29  # as last written to the log's metadata
IMAGE_SUBSCRIBER_COUNT = 30  # its subscribers' sub-pos counters: how many ...
IMAGE_SUBSCRIBER_IDS_ADDRESS = 31  # ... and the address of their ids (an int64 array)
# Which receive socket's data the compiled dispatcher may insert: ANY_SOCKET (an ordinary endpoint's image), the fd
# of the one connection of a multi-destination image, or NO_SOCKET (several connections: Python tracks each).
IMAGE_DATA_FD = 32
# A multi-destination image's connection is answered only while it delivered a frame this recently (0: always).
IMAGE_CONNECTION_TIMEOUT_NS = 33
# Group semantics: each NAK delay is a fresh random backoff below the max (kernels/feedback_delay.py), drawn from
# the image's own generator state; a group size of 0: the static NAK delays above.
IMAGE_NAK_GROUP_SIZE = 34
IMAGE_NAK_MAX_BACKOFF_NS = 35
IMAGE_NAK_RANDOM_STATE = 36
IMAGE_ROW_LENGTH = 40
ANY_SOCKET = -1
NO_SOCKET = -2

# ---------------------------------------------------------------------------------------------- publication row
PUBLICATION_SESSION_ID = 0
PUBLICATION_STREAM_ID = 1
PUBLICATION_LOG_ADDRESS = 2
PUBLICATION_LOG_LENGTH = 3
PUBLICATION_TERM_LENGTH = 4
PUBLICATION_POSITION_BITS = 5
PUBLICATION_INITIAL_TERM_ID = 6
PUBLICATION_MTU = 7
PUBLICATION_SENDER_POSITION = 8  # sent up to here (snd-pos)
PUBLICATION_SENDER_LIMIT = 9  # flow control lets it send up to here (snd-lmt)
PUBLICATION_SND_POS_COUNTER_ID = 10
PUBLICATION_SND_BPE_COUNTER_ID = 11
PUBLICATION_HAS_RECEIVERS = 12  # 1 once a receiver's status message arrived: data goes out only then
PUBLICATION_TIME_OF_LAST_SEND_OR_HEARTBEAT_NS = 13
PUBLICATION_SND_LMT_COUNTER_ID = 14
PUBLICATION_UNICAST_FLOW_CONTROL = 15  # 1: the sender limit is the one receiver's (the compiled path may move it)
PUBLICATION_TIME_OF_LAST_SM_NS = 16
PUBLICATION_SM_RECEIVER_ID = 17  # the receiver whose status messages the compiled path takes ...
PUBLICATION_SM_POSITION = 18  # ... the consumption position its last one reported ...
PUBLICATION_SM_RECEIVED_NS = 19  # ... and when (0: none yet)
PUBLICATION_ROW_LENGTH = 24

# --------------------------------------------------------------------------- a transport's loss generator
# driver/loss_generator.py fills these from loss-control.dat; kernels/loss_generator.py decides with them.
LOSS_IS_ACTIVE = 0  # 1: some datagram may be dropped (else nothing is checked)
LOSS_RECEIVE_DATA_PPM = 1
LOSS_RECEIVE_CONTROL_PPM = 2
LOSS_SEND_DATA_PPM = 3
LOSS_SEND_CONTROL_PPM = 4
LOSS_RANDOM_STATE = 5  # the random generator's state (kernels/loss_generator.py)
LOSS_GAP_TERM_ID = 6
LOSS_GAP_TERM_OFFSET = 7
LOSS_GAP_LENGTH = 8
LOSS_DROPPED = 9  # datagrams dropped so far
LOSS_BLOCKED_PORT_COUNT = 10
LOSS_BLOCKED_PORTS = 11  # LOSS_MAX_BLOCKED of them
LOSS_MAX_BLOCKED = 16
LOSS_BLOCKED_HOST_COUNT = LOSS_BLOCKED_PORTS + LOSS_MAX_BLOCKED
LOSS_BLOCKED_HOSTS = LOSS_BLOCKED_HOST_COUNT + 1  # IPv4 addresses as the int32 of their 4 network-order bytes
LOSS_STATE_LENGTH = LOSS_BLOCKED_HOSTS + LOSS_MAX_BLOCKED
