"""One replay: a recording's frames from its segment files into an exclusive replay publication (spec/archive.md
§6.3), as the "Starting Replay" and "Replaying" seeds describe.

States: INIT (the replay publication was added, positioned at the recording's term id and offset so replayed
positions equal recorded ones; wait for its subscriber, up to the connect timeout) -> REPLAY -> DONE, or
INACTIVE with ``error`` set. Each REPLAY duty cycle is one ``replay_block`` call: whole frames from the replay
position up to the end of the term, the replay buffer length and the limit (the stop position of a stopped
recording, the live ``rec-pos`` of an active one, a bounded replay's limit counter, the requested length), record
checksums verified if configured, copied from the mapped segment file straight into the replay publication's log
with session and stream ids rewritten there (one copy: Aeron reads into the replay buffer, then offers it); a
block that ends inside a fragmented message is cut back to the last whole message, which comes next time. Back
pressure leaves the position where it was (nothing is read): the same bytes are tried again next cycle.
"""

from __future__ import annotations

import enum
import time

import numpy as np

from aeron_numba.archive.segment_files import RecordingReader
from aeron_numba.kernels.replay_rewrite import (
    REPLAY_CHECKSUM_MISMATCH,
    REPLAY_MALFORMED_FRAME,
    REPLAY_MISPLACED_BLOCK,
    replay_block,
)
from aeron_numba.layout import archive as A
from aeron_numba.layout import frame
from aeron_numba.layout.checksum import CHECKSUM_NONE, REWRITE_OUT_LENGTH
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, CLOSED, NOT_CONNECTED, STATUS_NAMES

#: The replayer's buffer, shared by its sessions (Aeron: 1 MiB, or the file IO max length).
DEFAULT_REPLAY_BUFFER_LENGTH = A.DEFAULT_FILE_IO_MAX_LENGTH


class ReplayState(enum.Enum):
    INIT = "init"
    REPLAY = "replay"
    INACTIVE = "inactive"  # failed: see ``error``
    DONE = "done"


def replay_position_error(descriptor, position: int, length: int, recorded_position: int | None = None) -> str | None:
    """Why a replay of ``descriptor`` from ``position`` (-1: its start) for ``length`` cannot start, or None.
    ``recorded_position``: how far an active recording has written (a replay may not start past it, as in Aeron)."""
    start, stop = descriptor.start_position, descriptor.stop_position
    if position == A.NULL_POSITION:
        position = start
    if position % frame.FRAME_ALIGNMENT:
        return f"requested replay start position={position} must be a multiple of {frame.FRAME_ALIGNMENT}"
    if position < start:
        return f"requested replay start position={position} is less than recording start position={start}"
    if stop != A.NULL_POSITION and position >= stop and not (position == stop == start):
        return f"requested replay start position={position} must be less than the stop position={stop}"
    if stop == A.NULL_POSITION and recorded_position is not None and position > recorded_position:
        return (f"requested replay start position={position} must be less than the highest recorded "
                f"position={recorded_position}")
    if length != A.NULL_LENGTH and length < 0:
        return f"requested replay length={length} must be -1 (to the end) or >= 0"
    return None


class ReplaySession:
    def __init__(self, *, replay_session_id: int, descriptor, publication, archive_dir, position: int, length: int,
                 replay_buffer: np.ndarray, stop_position, recorded_position, bound=None,
                 checksum_algorithm: int = CHECKSUM_NONE, connect_timeout_ns: int = A.DEFAULT_CONNECT_TIMEOUT_NS,
                 nano_clock=time.monotonic_ns, on_read=None):
        """``stop_position()``: the recording's stop position now (-1 while it records); ``recorded_position()``:
        how far an active recording has written (its ``rec-pos``); ``bound()``: a bounded replay's limit;
        ``on_read(bytes, ns)``: told of every block read and how long it took (replayer counters)."""
        self.replay_session_id = replay_session_id
        self.descriptor = descriptor
        self.publication = publication
        self.position = descriptor.start_position if position == A.NULL_POSITION else position
        self.end_position = None if length == A.NULL_LENGTH else self.position + length
        self.replay_buffer = replay_buffer
        self.stop_position = stop_position
        self.recorded_position = recorded_position
        self.bound = bound
        self.checksum_algorithm = checksum_algorithm
        self.on_read = on_read
        self.connect_deadline_ns = nano_clock() + connect_timeout_ns
        self.nano_clock = nano_clock
        self.reader = RecordingReader(archive_dir, descriptor.recording_id, descriptor.start_position,
                                      descriptor.term_buffer_length, descriptor.segment_file_length)
        self.state = ReplayState.INIT
        self.error: str | None = None
        self._out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)
        self._term_mask = descriptor.term_buffer_length - 1
        self._max_block_length = replay_buffer.size  # Aeron's bound: a block fits the replay buffer
        self._stop_requested = False

    def request_stop(self) -> None:
        self._stop_requested = True

    def _fail(self, error: str) -> int:
        self.error = error
        self.state = ReplayState.INACTIVE
        return 1

    def _limits(self) -> tuple[int, bool]:
        """How far the replay may read now, and whether reaching it ends the replay."""
        stop = self.stop_position()
        limit = stop if stop != A.NULL_POSITION else self.recorded_position()
        if self.bound is not None:
            limit = min(limit, self.bound())
        final = stop != A.NULL_POSITION and limit >= stop
        if self.end_position is not None and limit >= self.end_position:
            limit, final = self.end_position, True
        return limit, final

    def do_work(self) -> int:
        if self.state in (ReplayState.DONE, ReplayState.INACTIVE):
            return 0
        if self._stop_requested:
            self.state = ReplayState.DONE
            return 1
        if self.state is ReplayState.INIT:
            if self.publication.is_connected:
                self.state = ReplayState.REPLAY
                return 1
            if self.nano_clock() > self.connect_deadline_ns:
                return self._fail("no connection established for replay")
            return 0
        return self._replay()

    def _replay(self) -> int:
        limit, final = self._limits()
        position = self.position
        if position >= limit:
            if final:
                self.state = ReplayState.DONE
            return 0
        segment, term_base = self.reader.term_at(position)
        if segment is None:
            return 0  # its segment file is not written yet
        publication = self.publication
        log = publication.log_buffer
        if log is None:
            return self._on_replay_error(CLOSED, position)
        term_offset = position & self._term_mask
        limit_offset = term_offset + min(self._max_block_length, limit - position)
        started = time.perf_counter_ns()
        result = replay_block(segment, term_base, term_offset, limit_offset, log, publication.pub_state,
                              publication.limit_buffer, self.checksum_algorithm, self._out)
        if result > 0:
            if self.on_read is not None:  # counted once, when the block went out (a back-pressured one is not read)
                self.on_read(result - position, time.perf_counter_ns() - started)
            self.position = result
            return 1
        if result == 0 or result == BACK_PRESSURED or result == ADMIN_ACTION:
            return 0  # nothing recorded there yet, or the same position again next cycle
        return self._on_replay_error(result, position)

    def _on_replay_error(self, result: int, position: int) -> int:
        at = position + int(self._out[0]) - (self.reader.term_at(position)[1] + (position & self._term_mask))
        recording_id = self.descriptor.recording_id
        if result == REPLAY_CHECKSUM_MISMATCH:
            return self._fail(f"replay of recording {recording_id}: checksum mismatch at position {at} "
                              f"(computed {int(self._out[1])}, stored {int(self._out[2])})")
        if result == REPLAY_MALFORMED_FRAME:
            return self._fail(f"replay of recording {recording_id}: malformed frame at position {at} "
                              f"(frame length {int(self._out[1])}, type {int(self._out[2])})")
        if result == REPLAY_MISPLACED_BLOCK:
            return self._fail(f"replay of recording {recording_id}: the frame at position {position} has term offset "
                              f"{int(self._out[1])} and term id {int(self._out[2])}, the replay publication is at "
                              f"{self.publication.position}")
        if result == NOT_CONNECTED:
            return self._fail("replay publication is not connected")
        return self._fail(f"replay publication offer failed: {STATUS_NAMES.get(result, result)}")

    def close(self) -> None:
        self.reader.close()
        self.publication.close()
