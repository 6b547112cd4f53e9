"""An image: one publisher session as seen by one subscription (Aeron ``Image``, spec/transport.md §5).

The driver sends ON_AVAILABLE_IMAGE with the log file and the id of this subscriber's position counter
(``sub-pos``). Polling reads fragments from that position and release-stores the new position, which the
driver reads for flow control (``pub-lmt``) and cleaning.

Python callers: ``poll`` makes one kernel call per poll (``poll_descriptors``: ``term_reader.image_poll_batch``
from the subscriber position), which describes up to ``fragment_limit`` fragments in an int64 array, then
calls the Python handler for each and stores the position once. Compiled callers use ``log_buffer``,
``position_buffer`` and ``position_offset`` with
``term_reader.image_poll(log_buffer, position_buffer, position_offset, limit, handler, ctx)``.
"""

from __future__ import annotations

import time

from typing import Callable

import numpy as np

from aeron_numba.client.fragment_assembler import ABORT, ACTIONS, BREAK, COMMIT
from aeron_numba.client.header import Header
from aeron_numba.errors import ConfigurationError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.atomics_py import get_int32_acquire, get_int64_acquire, put_int64_release
from aeron_numba.kernels.term_reader import FRAGMENT_COLUMNS, image_poll_batch
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer as lb
from aeron_numba.layout.bits import align
from aeron_numba.layout.log_buffers import LogBuffers

#: Most fragments one poll delivers (the descriptor array of an image grows up to this size).
MAX_FRAGMENTS_PER_POLL = 4096

_HEADER_LENGTH = frame.HEADER_LENGTH
# A descriptor batch held longer than this (a slow handler, or the process was stopped) is re-checked
# fragment by fragment before delivery, so data the driver has since reclaimed is never handed out.
_REVALIDATE_AFTER_NS = 10_000_000
_FRAME_ALIGNMENT = frame.FRAME_ALIGNMENT


@kernel
def poll_descriptors(log, position_buffer, position_offset, out):
    """Describe up to ``len(out)`` fragments from this subscriber's position, in one call from Python.

    Returns ``(fragments, position, new_position)``. With no fragment but padding skipped, the new
    position is release-stored here; otherwise the caller stores it after its handlers ran.
    """
    position = atomics.get_int64_acquire(position_buffer, position_offset)
    fragments, new_position = image_poll_batch(log, position, out)
    if fragments == 0 and new_position > position:
        atomics.put_int64_release(position_buffer, position_offset, new_position)
    return fragments, position, new_position


def _check_fragment_limit(fragment_limit: int) -> int:
    fragment_limit = int(fragment_limit)
    if fragment_limit < 1:
        raise ConfigurationError(f"fragment_limit={fragment_limit} must be >= 1")
    return min(fragment_limit, MAX_FRAGMENTS_PER_POLL)


class Image:
    """A publisher session's log as read by one subscription.

    Attributes
    ----------
    session_id, correlation_id, subscription_registration_id, source_identity : int, int, int, str
        From ON_AVAILABLE_IMAGE; ``correlation_id`` identifies the log.
    join_position : int
        Subscriber position when the image was created.
    log_buffer, position_buffer, position_offset : np.ndarray, np.ndarray, int
        For compiled callers (``term_reader.image_poll``); None/None once closed.
    """

    def __init__(
        self,
        subscription,
        correlation_id: int,
        session_id: int,
        subscriber_position_id: int,
        log_buffers: LogBuffers,
        position_buffer: np.ndarray,
        source_identity: str,
    ):
        self.subscription = subscription
        self.correlation_id = correlation_id
        self.session_id = session_id
        self.subscriber_position_id = subscriber_position_id
        self.subscription_registration_id = subscription.registration_id
        self.stream_id = subscription.stream_id
        self.source_identity = source_identity
        self.log_file_name = str(log_buffers.path)
        self.term_buffer_length = log_buffers.term_length
        self.mtu_length = log_buffers.mtu_length
        self.initial_term_id = log_buffers.initial_term_id
        self.position_bits_to_shift = log_buffers.position_bits_to_shift
        self._metadata_offset = log_buffers.metadata_offset
        self.log_buffer: np.ndarray | None = log_buffers.buffer
        self.position_buffer: np.ndarray | None = position_buffer
        self.position_offset = subscriber_position_id * counters_layout.COUNTER_LENGTH + counters_layout.COUNTER_VALUE_OFFSET
        self.join_position = int(get_int64_acquire(position_buffer, self.position_offset))
        self._header = Header(self.initial_term_id, self.position_bits_to_shift, self.log_buffer)
        self._descriptors = np.zeros((0, FRAGMENT_COLUMNS), dtype=np.int64)
        self._out = self._descriptors
        self._out_limit = None  # the fragment_limit self._out was made for
        self._is_closed = False
        self._final_position = self.join_position
        self._is_eos = False

    # ------------------------------------------------------------------------------------------- polling
    def _descriptors_for(self, fragment_limit: int) -> np.ndarray:
        """The descriptor rows for a poll of ``fragment_limit`` (cached for the last limit asked for)."""
        limit = _check_fragment_limit(fragment_limit)
        if self._descriptors.shape[0] < limit:
            self._descriptors = np.zeros((limit, FRAGMENT_COLUMNS), dtype=np.int64)
        self._out = self._descriptors[:limit]
        self._out_limit = fragment_limit
        return self._out

    def _deliverable(self, log: np.ndarray, out: np.ndarray, count: int, reclaimed_from: list[int]):
        """The batch's ``(frame_offset, frame_length, end_position)`` rows, re-checked once the batch has been
        held for ``_REVALIDATE_AFTER_NS``; stops before the first fragment no longer in the log and puts its
        start position in ``reclaimed_from``."""
        checked_ns = time.monotonic_ns()
        for frame_offset, frame_length, end_position in out[:count].tolist():
            if time.monotonic_ns() - checked_ns > _REVALIDATE_AFTER_NS:
                if not self._fragment_still_there(log, frame_offset, frame_length, end_position):
                    reclaimed_from.append(end_position - align(frame_length, _FRAME_ALIGNMENT))
                    return
                checked_ns = time.monotonic_ns()
            yield frame_offset, frame_length, end_position

    def _fragment_still_there(self, log: np.ndarray, frame_offset: int, frame_length: int, end_position: int) -> bool:
        """Is the fragment a batch described still in the log? Checked when the batch has been held for a
        while (the process may have been stopped): a subscriber the driver timed out meanwhile is no longer
        waited for, so its terms may have been cleaned or reused by a later lap."""
        start = end_position - align(frame_length, _FRAME_ALIGNMENT)
        term_id = (((self.initial_term_id + (start >> self.position_bits_to_shift)) + 2**31) % 2**32) - 2**31
        return (
            int(get_int32_acquire(log, frame_offset)) == frame_length
            and int(get_int32_acquire(log, frame_offset + frame.TERM_ID_FIELD_OFFSET)) == term_id
        )

    def poll(self, handler: Callable, fragment_limit: int) -> int:
        """Deliver up to ``fragment_limit`` fragments to ``handler(buffer, offset, length, header)``.

        ``buffer`` is the log buffer (``np.uint8``); the payload is ``buffer[offset:offset+length]``.
        Returns the number of fragments delivered. If the handler raises, the fragment it was given
        counts as consumed (as in Aeron) and the exception propagates.
        """
        log = self.log_buffer
        position_buffer = self.position_buffer
        if log is None or position_buffer is None:
            return 0
        out = self._out if fragment_limit == self._out_limit else self._descriptors_for(fragment_limit)
        position_offset = self.position_offset
        count, position, new_position = poll_descriptors(log, position_buffer, position_offset, out)
        if count == 0:
            return 0
        header = self._header
        header.buffer = log
        fragment_position = position
        delivered = 0
        reclaimed_from: list[int] = []
        try:
            for frame_offset, frame_length, fragment_position in self._deliverable(log, out, count, reclaimed_from):
                header.offset = frame_offset
                header.position = fragment_position
                handler(log, frame_offset + _HEADER_LENGTH, frame_length - _HEADER_LENGTH, header)
                delivered += 1
        except BaseException:
            put_int64_release(position_buffer, position_offset, fragment_position)
            raise
        put_int64_release(position_buffer, position_offset, reclaimed_from[0] if reclaimed_from else new_position)
        return delivered

    def controlled_poll(self, handler: Callable, fragment_limit: int) -> int:
        """Like ``poll`` but ``handler`` returns an action: ABORT, BREAK, COMMIT or CONTINUE (Aeron semantics).

        ABORT leaves that fragment unconsumed (delivered again next time) and stops; BREAK consumes it and
        stops; COMMIT consumes it and stores the position at once; CONTINUE consumes it and goes on.
        Returns the number of fragments consumed.
        """
        log = self.log_buffer
        position_buffer = self.position_buffer
        if log is None or position_buffer is None:
            return 0
        out = self._out if fragment_limit == self._out_limit else self._descriptors_for(fragment_limit)
        position_offset = self.position_offset
        count, position, new_position = poll_descriptors(log, position_buffer, position_offset, out)
        if count == 0:
            return 0
        committed = position
        resulting = new_position
        fragments_read = 0
        header = self._header
        header.buffer = log
        fragment_position = position
        reclaimed_from: list[int] = []
        try:
            for frame_offset, frame_length, fragment_position in self._deliverable(log, out, count, reclaimed_from):
                header.offset = frame_offset
                header.position = fragment_position
                action = handler(log, frame_offset + _HEADER_LENGTH, frame_length - _HEADER_LENGTH, header)
                if action == ABORT:
                    resulting = fragment_position - align(frame_length, _FRAME_ALIGNMENT)
                    break
                fragments_read += 1
                if action == BREAK:
                    resulting = fragment_position
                    break
                if action == COMMIT:
                    put_int64_release(position_buffer, position_offset, fragment_position)
                    committed = fragment_position
                elif action not in ACTIONS:
                    raise ConfigurationError(
                        f"controlled fragment handler returned {action!r}; expected ABORT=1, BREAK=2,"
                        " COMMIT=3 or CONTINUE=4"
                    )
        except BaseException:
            put_int64_release(position_buffer, position_offset, max(fragment_position, committed))
            raise
        if reclaimed_from:
            resulting = reclaimed_from[0]
        if resulting > committed:
            put_int64_release(position_buffer, position_offset, resulting)
        return fragments_read

    # ---------------------------------------------------------------------------------------- properties
    @property
    def position(self) -> int:
        """This subscriber's position in the stream (the final one once closed)."""
        position_buffer = self.position_buffer
        if position_buffer is None:
            return self._final_position
        return int(get_int64_acquire(position_buffer, self.position_offset))

    @property
    def is_closed(self) -> bool:
        return self._is_closed

    @property
    def end_of_stream_position(self) -> int:
        """Position where the publication ended (``INT64_MAX`` while it is open)."""
        log = self.log_buffer
        if log is None:
            return self._final_position if self._is_eos else lb.END_OF_STREAM_OPEN
        return int(get_int64_acquire(log, self._metadata_offset + lb.LOG_END_OF_STREAM_POSITION_OFFSET))

    @property
    def is_end_of_stream(self) -> bool:
        """True once the publication closed and this subscriber consumed everything up to its end."""
        if self._is_closed:
            return self._is_eos
        return self.position >= self.end_of_stream_position

    @property
    def active_transport_count(self) -> int:
        log = self.log_buffer
        if log is None:
            return 0
        return int(get_int32_acquire(log, self._metadata_offset + lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET))

    def _internal_close(self) -> None:
        """Record the final position and drop the views (called by the conductor under its lock)."""
        if self._is_closed:
            return
        self._final_position = self.position
        self._is_eos = self._final_position >= self.end_of_stream_position
        self._is_closed = True
        self.log_buffer = None
        self.position_buffer = None
        self._header.buffer = None

    def __repr__(self) -> str:
        return (
            f"Image(session_id={self.session_id}, correlation_id={self.correlation_id},"
            f" stream_id={self.stream_id}, source_identity={self.source_identity!r}, closed={self._is_closed})"
        )
