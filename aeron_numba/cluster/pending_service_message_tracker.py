"""Messages a service sends to the cluster (Aeron's ``PendingServiceMessageTracker``), one tracker per service: a
service message gets the next service session id of its service, waits here until the leader appends it to the
log, and stays until the commit position passes it, so a new leader can append again whatever the old one had
not committed. A follower drops its copies as it reads the leader's appends of them from the log.

Service session ids are ``(serviceId << 56) | sequence`` counted up from Long.MIN_VALUE, as Aeron's, so they never
meet client session ids and the log names the service a message came from.

Aeron keeps the messages in an ExpandableRingBuffer with the append position written over the header's timestamp;
here each pending message is a small list ``[cluster_session_id, append_position, payload]`` in a deque, with
``Long.MAX_VALUE`` as the append position of one not appended yet. The snapshot (``for_each``) gives the same
fields Aeron writes.
"""

from __future__ import annotations

from collections import deque

from aeron_numba.cluster.cluster_error import ClusterError

#: Aeron's SERVICE_MESSAGE_LIMIT: most appends per poll.
SERVICE_MESSAGE_LIMIT = 20
LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
#: Aeron's default capacity of the pending message buffer in the snapshot's PendingMessageTracker record.
DEFAULT_CAPACITY = 1 << 20


def _to_int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def service_session_id(service_id: int, session_id: int) -> int:
    return _to_int64((service_id << 56) | (session_id & ((1 << 64) - 1)))


def service_id_from_log_message(cluster_session_id: int) -> int:
    return ((cluster_session_id & ((1 << 64) - 1)) >> 56) & 0x7F


def service_id_from_service_message(cluster_session_id: int) -> int:
    """A service names itself in the cluster session id of a message it sends to the consensus module."""
    low = cluster_session_id & 0xFFFF_FFFF  # Aeron's (int) cast: the low 32 bits, signed
    return low - (1 << 32) if low >= 1 << 31 else low


class PendingServiceMessageTracker:
    def __init__(self, service_id: int, commit_position, log_publisher, cluster_clock):
        self.service_id = service_id
        self._commit_position = commit_position  # the commit-position counter (get())
        self._log_publisher = log_publisher
        self._cluster_clock = cluster_clock
        self.leadership_term_id = -1
        self.log_service_session_id = service_session_id(service_id, LONG_MIN)
        self.next_service_session_id = self.log_service_session_id + 1
        self.capacity = DEFAULT_CAPACITY
        self._pending: deque[list] = deque()
        self._head = 0  # index of the first message not appended yet
        self._limit_reached = False  # the last poll appended SERVICE_MESSAGE_LIMIT
        self._uncommitted = 0

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def size(self) -> int:
        """Bytes the pending messages take in Aeron's ring buffer (what its snapshot records as the capacity used)."""
        return sum(len(entry[2]) for entry in self._pending)

    def enqueue_message(self, payload) -> None:
        cluster_session_id = self.next_service_session_id
        self.next_service_session_id += 1
        if cluster_session_id > self.log_service_session_id:
            if self.size + len(payload) > self.capacity:
                raise ClusterError(f"pending service message buffer at capacity={self.capacity} for "
                                   f"serviceId={self.service_id}")
            self._pending.append([cluster_session_id, LONG_MAX, bytes(payload)])

    def append_message(self, cluster_session_id: int, append_position: int, payload) -> None:
        """A pending message from a snapshot (the snapshot loader's call)."""
        self._pending.append([cluster_session_id, append_position, bytes(payload)])

    def load_state(self, next_service_session_id: int, log_service_session_id: int, capacity: int) -> None:
        self.next_service_session_id = next_service_session_id
        self.log_service_session_id = log_service_session_id
        self.capacity = max(capacity, DEFAULT_CAPACITY)
        self._pending.clear()
        self._head = 0
        self._uncommitted = 0

    @property
    def has_more_to_append(self) -> bool:
        """The last poll stopped at its limit with messages left, not at one the log could not take."""
        return self._head < len(self._pending) and self._limit_reached

    def poll(self) -> int:
        """Append up to SERVICE_MESSAGE_LIMIT messages to the log; stops at the first the log cannot take."""
        appended = 0
        self._limit_reached = False
        while self._head < len(self._pending) and appended < SERVICE_MESSAGE_LIMIT:
            entry = self._pending[self._head]
            position = self._log_publisher.append_message(self.leadership_term_id, entry[0],
                                                          self._cluster_clock.time(), entry[2])
            if position <= 0:
                break
            entry[1] = position
            self._uncommitted += 1
            self._head += 1
            appended += 1
        self._limit_reached = appended == SERVICE_MESSAGE_LIMIT
        return appended

    def sweep_leader_messages(self) -> None:
        if self._uncommitted > 0:
            commit = self._commit_position.get()
            while self._pending and self._pending[0][1] != LONG_MAX and commit >= self._pending[0][1]:
                entry = self._pending.popleft()
                self.log_service_session_id = entry[0]
                self._uncommitted -= 1
                self._head = max(self._head - 1, 0)

    def sweep_follower_messages(self, cluster_session_id: int) -> None:
        self.log_service_session_id = cluster_session_id
        while self._pending and self._pending[0][0] <= cluster_session_id:
            self._pending.popleft()

    def restore_uncommitted_messages(self) -> None:
        """After losing leadership: what was appended but not committed goes back to waiting."""
        if self._uncommitted > 0:
            self.sweep_leader_messages()
            for entry in self._pending:
                entry[1] = LONG_MAX
            self._uncommitted = 0
            self._head = 0

    def reset(self) -> None:
        for entry in self._pending:
            entry[1] = LONG_MAX
        self._head = 0
        self._uncommitted = 0

    def for_each(self, consumer) -> None:
        """``consumer(cluster_session_id, timestamp, payload)`` per pending message, oldest first (the timestamp
        is the append position, or Long.MAX_VALUE, as Aeron's snapshot holds it)."""
        for cluster_session_id, append_position, payload in self._pending:
            consumer(cluster_session_id, append_position, payload)
