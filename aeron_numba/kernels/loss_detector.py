"""Gap scanning and loss detection for a network image (Aeron's ``TermGapScanner``, ``LossDetector`` and
``TermGapFiller``; spec/transport.md §1.5, §3, §14, §16).

The receiver rebuilds an image's terms from datagrams that may arrive late, twice, out of order or never
(``term_rebuilder.insert``). Two positions describe it: the *rebuild position*, up to which the image is
contiguous, and the *high-water mark* (hwm), the highest position any datagram or heartbeat reached. Between
them there may be gaps: runs of empty 32-byte slots.

``scan_for_gap`` walks the complete frames from the rebuild offset and reports the first gap: it begins where
the frames stop and runs to the next 32-aligned slot holding a non-zero frame length (or to the limit).

``loss_detector_scan`` does one scan per call and keeps the *active gap* in a small int64 state array. A gap
seen for the first time (a new term id or start offset) is activated with a deadline ``now + nak_delay_ns``;
once a scan sees the same gap at or past its deadline it asks the caller to NAK it and sets the next deadline
``now + nak_retry_delay_ns``. The NAK always carries the gap exactly as this scan saw it (a gap that shrank
from its end is NAKed shorter), and a gap that was filled is forgotten, so a filled gap is never NAKed. A gap
whose start moved is a new gap and waits a full delay again (as in Aeron). Scans stay within the term of the
rebuild position; when the hwm is in a later term the scan limit is the end of that term.

Frame lengths are acquire-loaded: another thread may be inserting while the scan runs. A length that cannot
be a frame of this term (shorter than a header, or running past the term) stops the scan and is reported as
``SCAN_CORRUPT``: the rebuild position will not pass it and no NAK is sent for it.

``fill_gap`` is ``reliable=false``'s answer to a gap it would otherwise NAK: a PAD frame over it, written only
if every slot of the gap is still empty (counting "Loss gap fills" is the caller's job).
"""

from __future__ import annotations

import numpy as np

from aeron_numba.errors import LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.term_appender import write_padding
from aeron_numba.kernels.bits import align
from aeron_numba.layout.frame import FRAME_ALIGNMENT, FRAME_LENGTH_FIELD_OFFSET, HEADER_LENGTH
from aeron_numba.kernels.position import to_int32
from aeron_numba.layout.udp_frames import (
    INVALID_BOUNDS,
    INVALID_POSITION,
    INVALID_TERM_LENGTH,
    INVALID_TERM_OFFSET,
    NAK_UNICAST_DELAY_NS,
    NAK_UNICAST_RETRY_DELAY_NS,
    check_nak_delays,
    check_receiver_term_length,
    status_name,
)

# ``scan_for_gap`` output slots (int64[GAP_OUT_LENGTH]).
GAP_TERM_ID = 0
GAP_TERM_OFFSET = 1
GAP_LENGTH = 2  # 0: no gap before the limit
GAP_CORRUPT = 3  # 1: the scan stopped at a frame length that cannot be a frame of this term
GAP_OUT_LENGTH = 4

# Loss detector state slots (int64[LOSS_STATE_LENGTH]); all zero is the initial state.
STATE_HAS_ACTIVE_GAP = 0
STATE_ACTIVE_TERM_ID = 1
STATE_ACTIVE_TERM_OFFSET = 2
STATE_ACTIVE_LENGTH = 3
STATE_DEADLINE_NS = 4  # when the active gap is next due a NAK
STATE_NAK_TERM_ID = 5  # the NAK requested by the last scan that returned SEND_NAK
STATE_NAK_TERM_OFFSET = 6
STATE_NAK_LENGTH = 7
STATE_GAPS_FOUND = 8  # statistics: gaps activated, NAKs requested
STATE_NAKS_REQUESTED = 9
LOSS_STATE_LENGTH = 16

# ``loss_detector_scan`` flags (second element of its result).
LOSS_FOUND = 1  # a new gap was activated by this scan
SEND_NAK = 2  # NAK (or, for reliable=false, fill) state[STATE_NAK_TERM_ID/OFFSET/LENGTH] now
SCAN_CORRUPT = 4  # the scan stopped at a frame length that cannot be a frame of this term

# ``fill_gap`` results.
GAP_NOT_FILLED = 0  # some slot of the gap is no longer empty: data arrived, nothing written
GAP_FILLED = 1


@kernel(inline="always")
def _is_valid_term_length(term_length):
    return term_length >= HEADER_LENGTH and (term_length & (term_length - 1)) == 0


@kernel(inline="always")
def _scan(term, term_offset, limit_offset):
    """``(gap_begin, gap_length, corrupt)`` from ``term_offset`` (a frame boundary) up to ``limit_offset``."""
    term_length = term.size
    offset = term_offset
    while offset < limit_offset:
        frame_length = atomics.get_int32_acquire(term, offset + FRAME_LENGTH_FIELD_OFFSET)
        if frame_length <= 0:
            break
        aligned_length = align(frame_length, FRAME_ALIGNMENT)
        if frame_length < HEADER_LENGTH or aligned_length > term_length - offset:
            return offset, 0, 1
        offset += aligned_length  # a PAD may take the offset past the limit (its header is all that was sent)
    if offset >= limit_offset:
        return offset, 0, 0
    # The gap runs to the next slot where a frame was received, or to the limit (rounded up to a slot).
    gap_end = align(limit_offset, FRAME_ALIGNMENT)
    slot = offset + FRAME_ALIGNMENT
    while slot < limit_offset:
        if atomics.get_int32_acquire(term, slot + FRAME_LENGTH_FIELD_OFFSET) != 0:
            gap_end = slot
            break
        slot += FRAME_ALIGNMENT
    return offset, gap_end - offset, 0


@kernel
def scan_for_gap(term, term_id, term_offset, limit_offset, out):
    """Find the first gap in ``term`` between ``term_offset`` and ``limit_offset`` (Aeron ``TermGapScanner``).

    Parameters
    ----------
    term : uint8[::1]
        One term of the image (``term.size`` = term length, a power of two).
    term_id : int
        Its term id (copied into ``out``).
    term_offset : int
        Where to start: the rebuild offset, a frame boundary (multiple of 32).
    limit_offset : int
        Where to stop: the hwm offset in this term, or the term length.
    out : int64[::1]
        ``GAP_OUT_LENGTH`` slots: ``GAP_TERM_ID``, ``GAP_TERM_OFFSET``, ``GAP_LENGTH`` (0 = none), ``GAP_CORRUPT``.

    Returns
    -------
    int
        The offset up to which complete frames are contiguous (the gap start when there is one; it may pass
        ``limit_offset`` by the padding of a PAD frame), or ``INVALID_TERM_LENGTH``, ``INVALID_TERM_OFFSET``
        (``term_offset`` negative, unaligned or past ``limit_offset``'s range), ``INVALID_BOUNDS`` (``out`` too
        short or ``limit_offset`` outside the term).
    """
    term_length = term.size
    if not _is_valid_term_length(term_length):
        return INVALID_TERM_LENGTH
    if out.size < GAP_OUT_LENGTH or limit_offset < 0 or limit_offset > term_length:
        return INVALID_BOUNDS
    if term_offset < 0 or term_offset >= term_length or term_offset % FRAME_ALIGNMENT != 0:
        return INVALID_TERM_OFFSET
    offset, gap_length, corrupt = _scan(term, term_offset, limit_offset)
    out[GAP_TERM_ID] = term_id
    out[GAP_TERM_OFFSET] = offset
    out[GAP_LENGTH] = gap_length
    out[GAP_CORRUPT] = corrupt
    return offset


@kernel
def loss_detector_scan(
    term, rebuild_position, hwm_position, now_ns, state, initial_term_id, nak_delay_ns, nak_retry_delay_ns
):
    """One loss detection pass for an image (Aeron ``LossDetector.scan``).

    Parameters
    ----------
    term : uint8[::1]
        The term of ``rebuild_position`` (partition ``index_by_position(rebuild_position)``).
    rebuild_position, hwm_position : int
        Contiguous-up-to and highest-received positions of the image.
    now_ns : int
        Monotonic clock.
    state : int64[::1]
        ``LOSS_STATE_LENGTH`` slots, zero-initialised, kept per image between calls.
    initial_term_id : int
        The image's initial term id.
    nak_delay_ns, nak_retry_delay_ns : int
        Delay before a new gap is first NAKed (unicast 100 µs; 0 = at once), and between NAKs of a gap
        that is still there (unicast 10 ms).

    Returns
    -------
    (int, int)
        ``(new_rebuild_position, flags)``: the position up to which the image is now contiguous (never less
        than ``rebuild_position``, at most the end of its term), and ``LOSS_FOUND | SEND_NAK | SCAN_CORRUPT``
        bits. With ``SEND_NAK`` the gap to NAK is in ``state[STATE_NAK_TERM_ID, STATE_NAK_TERM_OFFSET,
        STATE_NAK_LENGTH]``. Bad arguments give ``(INVALID_TERM_LENGTH | INVALID_POSITION | INVALID_BOUNDS, 0)``.
    """
    term_length = term.size
    if not _is_valid_term_length(term_length):
        return INVALID_TERM_LENGTH, 0
    if rebuild_position < 0 or hwm_position < 0:
        return INVALID_POSITION, 0
    if state.size < LOSS_STATE_LENGTH:
        return INVALID_BOUNDS, 0
    flags = 0
    if rebuild_position >= hwm_position:
        return rebuild_position, flags
    mask = term_length - 1
    shift = 0
    while (1 << shift) < term_length:
        shift += 1
    rebuild_offset = rebuild_position & mask
    term_begin_position = rebuild_position - rebuild_offset
    rebuild_term_count = rebuild_position >> shift
    limit_offset = hwm_position & mask if (hwm_position >> shift) == rebuild_term_count else term_length
    term_id = to_int32(initial_term_id + rebuild_term_count)

    if rebuild_offset % FRAME_ALIGNMENT != 0:
        return INVALID_POSITION, 0
    offset, gap_length, corrupt = _scan(term, rebuild_offset, limit_offset)
    if corrupt:
        flags |= SCAN_CORRUPT
    elif gap_length > 0:
        is_active = (
            state[STATE_HAS_ACTIVE_GAP] != 0
            and state[STATE_ACTIVE_TERM_ID] == term_id
            and state[STATE_ACTIVE_TERM_OFFSET] == offset
        )
        if not is_active:
            state[STATE_HAS_ACTIVE_GAP] = 1
            state[STATE_ACTIVE_TERM_ID] = term_id
            state[STATE_ACTIVE_TERM_OFFSET] = offset
            state[STATE_DEADLINE_NS] = now_ns + nak_delay_ns
            state[STATE_GAPS_FOUND] += 1
            flags |= LOSS_FOUND
        state[STATE_ACTIVE_LENGTH] = gap_length  # same start: it may have shrunk from its end, or grown with hwm
        if now_ns - state[STATE_DEADLINE_NS] >= 0:
            state[STATE_NAK_TERM_ID] = term_id
            state[STATE_NAK_TERM_OFFSET] = offset
            state[STATE_NAK_LENGTH] = gap_length
            state[STATE_DEADLINE_NS] = now_ns + nak_retry_delay_ns
            state[STATE_NAKS_REQUESTED] += 1
            flags |= SEND_NAK
    else:
        state[STATE_HAS_ACTIVE_GAP] = 0  # filled: a gap later found at the same place is a new one
    return term_begin_position + offset, flags


@kernel
def fill_gap(term, term_id, gap_offset, gap_length, session_id, stream_id):
    """Write a PAD frame over a gap, if it is still a gap (Aeron ``TermGapFiller``, for ``reliable=false``).

    Every 32-byte slot of ``[gap_offset, gap_offset + gap_length)`` must still hold a zero frame length;
    then the PAD header (type PAD, flags 0xC0, ``term_offset`` = ``gap_offset``, ``term_id``, session and
    stream) is written and its length release-stored last (§1.5).

    Returns
    -------
    int
        ``GAP_FILLED``, ``GAP_NOT_FILLED`` (data arrived in the gap meanwhile), ``INVALID_TERM_OFFSET``
        (``gap_offset`` negative or not a multiple of 32) or ``INVALID_BOUNDS`` (gap shorter than a header
        or running past the term).
    """
    term_length = term.size
    if gap_offset < 0 or gap_offset % FRAME_ALIGNMENT != 0:
        return INVALID_TERM_OFFSET
    if gap_length < HEADER_LENGTH or gap_offset >= term_length or gap_length > term_length - gap_offset:
        return INVALID_BOUNDS
    end = gap_offset + gap_length
    slot = gap_offset
    while slot < end:
        if atomics.get_int32_acquire(term, slot + FRAME_LENGTH_FIELD_OFFSET) != 0:
            return GAP_NOT_FILLED
        slot += FRAME_ALIGNMENT
    write_padding(term, gap_offset, gap_length, gap_offset, term_id, session_id, stream_id)
    return GAP_FILLED


# --------------------------------------------------------------------------------------------------------
# Python side
# --------------------------------------------------------------------------------------------------------


def new_loss_state() -> np.ndarray:
    """A fresh loss detector state array (no active gap)."""
    return np.zeros(LOSS_STATE_LENGTH, dtype=np.int64)


class LossDetector:
    """One image's loss detector (Aeron ``LossDetector``): state plus its NAK delays.

    Parameters
    ----------
    term_length, initial_term_id : int
        Of the image.
    nak_delay_ns, nak_retry_delay_ns : int
        Defaults are the unicast ones (§14): 100 µs, then 100 x that.
    """

    def __init__(
        self,
        term_length: int,
        initial_term_id: int,
        nak_delay_ns: int = NAK_UNICAST_DELAY_NS,
        nak_retry_delay_ns: int = NAK_UNICAST_RETRY_DELAY_NS,
    ):
        check_receiver_term_length(term_length)
        check_nak_delays(nak_delay_ns, nak_retry_delay_ns)
        self.term_length = int(term_length)
        self.initial_term_id = int(initial_term_id)
        self.nak_delay_ns = int(nak_delay_ns)
        self.nak_retry_delay_ns = int(nak_retry_delay_ns)
        self.state = new_loss_state()

    def scan(self, term: np.ndarray, rebuild_position: int, hwm_position: int, now_ns: int) -> tuple[int, int]:
        """``(new_rebuild_position, flags)``; see ``loss_detector_scan``. ``term`` is the rebuild position's term."""
        if term.size != self.term_length:
            raise LayoutError(f"term.size={term.size} != term_length={self.term_length}")
        position, flags = loss_detector_scan(
            term, rebuild_position, hwm_position, now_ns, self.state, self.initial_term_id,
            self.nak_delay_ns, self.nak_retry_delay_ns,
        )
        if position < 0:
            raise LayoutError(
                f"loss_detector_scan(rebuild_position={rebuild_position}, hwm_position={hwm_position}) failed: "
                f"{status_name(position)}"
            )
        return int(position), int(flags)

    @property
    def nak(self) -> tuple[int, int, int]:
        """``(term_id, term_offset, length)`` of the last NAK requested (valid after a scan returned SEND_NAK)."""
        s = self.state
        return int(s[STATE_NAK_TERM_ID]), int(s[STATE_NAK_TERM_OFFSET]), int(s[STATE_NAK_LENGTH])

    @property
    def gaps_found(self) -> int:
        return int(self.state[STATE_GAPS_FOUND])

    @property
    def naks_requested(self) -> int:
        return int(self.state[STATE_NAKS_REQUESTED])
