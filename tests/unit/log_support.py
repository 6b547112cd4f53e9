"""Helpers for tests that drive the appender kernels over a real log buffer file without a driver."""

from __future__ import annotations

import numpy as np

from aeron_numba.kernels import term_appender as TA
from aeron_numba.kernels import term_reader as TR
from aeron_numba.layout import frame as F
from aeron_numba.layout import publication_status as P

NO_LIMIT = 1 << 62


class LimitCounter:
    """Stands in for the driver's ``pub-lmt`` counter: one int64 in its own buffer."""

    def __init__(self, value: int = NO_LIMIT):
        self.buffer = np.zeros(128, dtype=np.uint8)
        self.set(value)

    def set(self, value: int) -> None:
        self.buffer[:8].view(np.int64)[0] = value


def new_pub_state(log: np.ndarray, exclusive: bool) -> np.ndarray:
    state = np.zeros(P.PUB_STATE_LENGTH, dtype=np.int64)
    state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = 0
    if exclusive:
        TA.exclusive_init_state(log, state)
    return state


def offer(log, state, limit: LimitCounter, message: np.ndarray, exclusive: bool, reserved: int = 0) -> int:
    fn = TA.exclusive_offer if exclusive else TA.concurrent_offer
    return fn(log, state, limit.buffer, message, 0, message.size, reserved)


def offer_until_done(log, state, limit, message, exclusive, reserved=0, max_attempts=4) -> int:
    """Retry ADMIN_ACTION (term rotation) as a publisher must; return the final result."""
    for _ in range(max_attempts):
        result = offer(log, state, limit, message, exclusive, reserved)
        if result != P.ADMIN_ACTION:
            return result
    raise AssertionError(f"offer still ADMIN_ACTION after {max_attempts} attempts")


class Consumer:
    """Reads the log like a subscriber and reassembles fragments, cleaning terms behind itself like the
    driver does (§4.7), so writers can keep lapping the three partitions."""

    def __init__(self, log: np.ndarray, term_length: int, batch: int = 64):
        self.log, self.term_length = log, term_length
        self.position = 0
        self.out = np.zeros((batch, TR.FRAGMENT_COLUMNS), dtype=np.int64)
        self.partial: bytearray | None = None
        self.messages: list[bytes] = []
        self.reserved: list[int] = []
        self.flags_seen: list[int] = []

    def poll(self) -> int:
        count, new_position = TR.image_poll_batch(self.log, self.position, self.out)
        for row in self.out[:count]:
            frame_offset, frame_length = int(row[0]), int(row[1])
            flags = int(self.log[frame_offset + F.FLAGS_FIELD_OFFSET])
            assert int.from_bytes(self.log[frame_offset + 6 : frame_offset + 8].tobytes(), "little") == F.HDR_TYPE_DATA
            self.flags_seen.append(flags)
            payload = self.log[frame_offset + F.HEADER_LENGTH : frame_offset + frame_length].tobytes()
            if flags & F.UNFRAGMENTED == F.UNFRAGMENTED:
                assert self.partial is None, "unfragmented message inside a fragmented one"
                self._deliver(payload, frame_offset)
            elif flags & F.BEGIN_FRAG_FLAG:
                assert self.partial is None, "BEGIN while a message is open"
                self.partial = bytearray(payload)
            else:
                assert self.partial is not None, "middle/END fragment without BEGIN"
                self.partial += payload
                if flags & F.END_FRAG_FLAG:
                    self._deliver(bytes(self.partial), frame_offset)
                    self.partial = None
        old_term = self.position // self.term_length
        self.position = new_position
        new_term = self.position // self.term_length
        for term_count in range(old_term, new_term):
            start = (term_count % 3) * self.term_length
            self.log[start : start + self.term_length] = 0
        return count

    def drain(self) -> int:
        """Poll until the position stops moving (a poll over padding alone reads 0 fragments but moves)."""
        total = 0
        while True:
            before = self.position
            total += self.poll()
            if self.position == before:
                return total

    def _deliver(self, payload: bytes, frame_offset: int) -> None:
        self.messages.append(payload)
        self.reserved.append(int(self.log[frame_offset + 24 : frame_offset + 32].view(np.int64)[0]))
