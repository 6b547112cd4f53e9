"""Slow, obvious models of the UDP frames and the receiver's rebuild (spec/transport.md §1, §5, §16), on bytes.

Frames are built with ``struct`` from the spec's tables (offsets typed here, not imported), datagrams are
classified by listing their frames first and then checking each rule, and the receiver side (insert, gap scan,
loss detector, gap fill) is plain Python over ``bytearray`` terms. The status codes and type ids are the
project's names (``layout``), so results can be compared with the kernels one for one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from aeron_numba.layout import frame as F
from aeron_numba.layout import udp_frames as U
from tests.reference.log_buffer import ReferenceLog, align, scan_for_availability, wrap32

TERM_MAX = 1 << 30
HEADER = 32
SLOT = 32

CONTROL_FIXED_LENGTH = {0x02: 28, 0x03: 36, 0x04: 40, 0x05: 40, 0x06: 40, 0x07: 8, 0x0B: 20}


def i32(data, offset: int) -> int:
    return struct.unpack_from("<i", data, offset)[0]


# ------------------------------------------------------------------------------------------- encoders (§16)


def common(frame_length: int, flags: int, frame_type: int) -> bytes:
    return struct.pack("<iBBH", frame_length, 0, flags & 0xFF, frame_type & 0xFFFF)


def setup(term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length, mtu, ttl, flags=0) -> bytes:
    return common(40, flags, 0x05) + struct.pack(
        "<8i", term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length, mtu, ttl
    )


def status_message(session_id, stream_id, term_id, term_offset, window, receiver_id, group_tag=None, flags=0) -> bytes:
    body = struct.pack("<5iq", session_id, stream_id, term_id, term_offset, window, receiver_id)
    if group_tag is not None:
        body += struct.pack("<q", group_tag)
    return common(8 + len(body), flags, 0x03) + body


def nak(session_id, stream_id, term_id, term_offset, length) -> bytes:
    return common(28, 0, 0x02) + struct.pack("<5i", session_id, stream_id, term_id, term_offset, length)


def rttm(session_id, stream_id, echo_timestamp, reception_delta, receiver_id, is_reply) -> bytes:
    return common(40, 0x80 if is_reply else 0, 0x06) + struct.pack(
        "<2i3q", session_id, stream_id, echo_timestamp, reception_delta, receiver_id
    )


def heartbeat(term_offset, session_id, stream_id, term_id, eos=False) -> bytes:
    return common(0, 0xE0 if eos else 0xC0, 0x01) + struct.pack("<4iq", term_offset, session_id, stream_id, term_id, 0)


def err(session_id, stream_id, receiver_id, group_tag, error_code, text: bytes) -> bytes:
    flags = 0x08 if group_tag is not None else 0
    return (
        common(40 + len(text), flags, 0x04)
        + struct.pack("<2i2q2i", session_id, stream_id, receiver_id, group_tag or 0, error_code, len(text))
        + text
    )


def rsp_setup(session_id, stream_id, response_session_id) -> bytes:
    return common(20, 0, 0x0B) + struct.pack("<3i", session_id, stream_id, response_session_id)


def data_frame(term_offset, session_id, stream_id, term_id, payload: bytes, flags=0xC0, frame_type=0x01,
               frame_length=None) -> bytes:
    """A data/PAD frame, zero-padded to its 32-byte alignment (as it sits in a term or a datagram)."""
    length = HEADER + len(payload) if frame_length is None else frame_length
    raw = common(length, flags, frame_type) + struct.pack("<4iq", term_offset, session_id, stream_id, term_id, 0)
    raw += payload
    return raw + bytes(align(len(raw), SLOT) - len(raw))


# ------------------------------------------------------------------------------------------- classify


@dataclass
class _Frame:
    at: int
    frame_length: int
    version: int
    frame_type: int
    term_offset: int
    ids: tuple


def classify(d: bytes) -> int:
    """Frame type of a datagram, or the INVALID_* code the rules of ``classify_datagram`` give."""
    if len(d) < 8:
        return U.INVALID_TOO_SHORT
    frame_length, version, _flags, frame_type = struct.unpack_from("<iBBH", d)
    if version != 0:
        return U.INVALID_VERSION
    if frame_type in (F.HDR_TYPE_PAD, F.HDR_TYPE_DATA):
        return _classify_data(d, frame_type)
    if frame_type not in CONTROL_FIXED_LENGTH:
        return U.INVALID_TYPE
    if not CONTROL_FIXED_LENGTH[frame_type] <= frame_length <= len(d):
        return U.INVALID_FRAME_LENGTH
    if frame_type == F.HDR_TYPE_ERR:
        text_length = i32(d, 36)
        if not 0 <= text_length <= min(1023, frame_length - 40):
            return U.INVALID_ERROR_LENGTH
    return frame_type


def _header(d: bytes, at: int) -> _Frame:
    frame_length, version, _flags, frame_type, term_offset, session, stream, term_id = struct.unpack_from(
        "<iBBHiiii", d, at
    )
    return _Frame(at, frame_length, version, frame_type, term_offset, (session, stream, term_id))


def _classify_data(d: bytes, first_type: int) -> int:
    if len(d) < HEADER:
        return U.INVALID_FRAME_LENGTH
    first = _header(d, 0)
    if first.term_offset < 0 or first.term_offset % SLOT or first.term_offset >= TERM_MAX:
        return U.INVALID_TERM_OFFSET
    if first.frame_length == 0:
        return F.HDR_TYPE_DATA if first_type == F.HDR_TYPE_DATA and len(d) == HEADER else U.INVALID_FRAME_LENGTH
    at = 0
    while True:
        f = _header(d, at)
        if at > 0:
            if f.version != 0:
                return U.INVALID_VERSION
            if f.frame_type not in (F.HDR_TYPE_PAD, F.HDR_TYPE_DATA):
                return U.INVALID_TYPE
            if f.term_offset != first.term_offset + at:
                return U.INVALID_TERM_OFFSET
            if f.ids != first.ids:
                return U.INVALID_STREAM_MISMATCH
        if f.frame_length < HEADER or first.term_offset + at + align(f.frame_length, SLOT) > TERM_MAX:
            return U.INVALID_FRAME_LENGTH
        if at + f.frame_length > len(d):
            is_bare_pad = f.frame_type == F.HDR_TYPE_PAD and at + HEADER == len(d)
            return first_type if is_bare_pad else U.INVALID_FRAME_LENGTH
        at += align(f.frame_length, SLOT)
        if at >= len(d):
            return first_type
        if len(d) - at < HEADER:
            return U.INVALID_FRAME_LENGTH


# ------------------------------------------------------------------------------------------- receiver side


def insert(term: bytearray, term_offset: int, block: bytes) -> int:
    """TermRebuilder: copy the block in when its first slot is empty. Returns len(block), 0 or an INVALID_*."""
    if len(block) < HEADER:
        return U.INVALID_FRAME_LENGTH
    if term_offset < 0 or term_offset % SLOT or term_offset + len(block) > len(term):
        return U.INVALID_TERM_OFFSET
    at = 0
    while at < len(block):
        if len(block) - at < HEADER:
            return U.INVALID_FRAME_LENGTH
        f = _header(block, at)
        if f.frame_length < HEADER or term_offset + at + align(f.frame_length, SLOT) > len(term):
            return U.INVALID_FRAME_LENGTH
        if at + f.frame_length > len(block) and not (f.frame_type == F.HDR_TYPE_PAD and at + HEADER == len(block)):
            return U.INVALID_FRAME_LENGTH
        at += align(f.frame_length, SLOT)
    if i32(term, term_offset) != 0:
        return 0
    term[term_offset : term_offset + len(block)] = block
    return len(block)


def scan_for_gap(term: bytes, offset: int, limit: int) -> tuple[int, int, bool]:
    """``(contiguous_up_to, gap_length, corrupt)``: walk whole frames, then find where received data resumes."""
    while offset < limit:
        frame_length = i32(term, offset)
        if frame_length <= 0:
            break
        if frame_length < HEADER or offset + align(frame_length, SLOT) > len(term):
            return offset, 0, True
        offset += align(frame_length, SLOT)
    if offset >= limit:
        return offset, 0, False
    resumed = [slot for slot in range(offset + SLOT, limit, SLOT) if i32(term, slot) != 0]
    end = resumed[0] if resumed else align(limit, SLOT)
    return offset, end - offset, False


class RefLossDetector:
    """LossDetector: NAK a gap ``delay`` after it is first seen, then every ``retry`` while it is still there."""

    def __init__(self, term_length: int, initial_term_id: int, delay: int, retry: int):
        self.term_length, self.initial_term_id, self.delay, self.retry = term_length, initial_term_id, delay, retry
        self.active: tuple[int, int] | None = None
        self.deadline = 0
        self.naks: list[tuple[int, int, int]] = []

    def scan(self, term: bytes, rebuild: int, hwm: int, now: int) -> tuple[int, int, tuple | None]:
        if rebuild >= hwm:
            return rebuild, 0, None
        count, offset = divmod(rebuild, self.term_length)
        limit = hwm % self.term_length if hwm // self.term_length == count else self.term_length
        term_id = wrap32(self.initial_term_id + count)
        begin, gap_length, corrupt = scan_for_gap(term, offset, limit)
        flags, to_nak = 0, None
        if corrupt:
            flags |= 4
        elif gap_length:
            if self.active != (term_id, begin):
                self.active, self.deadline = (term_id, begin), now + self.delay
                flags |= 1
            if now >= self.deadline:
                to_nak, self.deadline = (term_id, begin, gap_length), now + self.retry
                self.naks.append(to_nak)
                flags |= 2
        else:
            self.active = None
        return count * self.term_length + begin, flags, to_nak


def fill_gap(term: bytearray, term_id: int, offset: int, length: int, session_id: int, stream_id: int) -> int:
    """TermGapFiller: a PAD over the gap if none of its slots received anything (1), else 0."""
    if any(i32(term, slot) != 0 for slot in range(offset, offset + length, SLOT)):
        return 0
    term[offset : offset + HEADER] = struct.pack(
        "<iBBHiiiiq", length, 0, 0xC0, F.HDR_TYPE_PAD, offset, session_id, stream_id, term_id, 0
    )
    return 1


# ------------------------------------------------------------------------------------------- a sender


@dataclass
class SenderStream:
    """A publication's log as a sender sees it, and how it cuts it into datagrams (§5 term scanner)."""

    term_length: int
    mtu: int
    initial_term_id: int
    session_id: int
    stream_id: int
    messages: list[bytes]
    log: ReferenceLog = field(init=False)
    end_position: int = field(init=False)
    messages_sent: int = field(init=False)

    def __post_init__(self):
        """Append the messages; stop at the first one that would start a fourth term (partitions never reused)."""
        self.log = ReferenceLog(self.term_length, self.mtu, self.initial_term_id, self.session_id, self.stream_id)
        self.messages_sent = 0
        for message in self.messages:
            result = self.log.offer(message)
            if result == -3:  # ADMIN_ACTION: the term was padded out and rotated
                if wrap32(self.log.term_id - self.initial_term_id) >= 3:
                    break
                result = self.log.offer(message)
            assert result >= 0, result
            self.messages_sent += 1
        self.end_position = self.log.position()
        assert self.end_position <= 3 * self.term_length

    @property
    def shift(self) -> int:
        return self.term_length.bit_length() - 1

    def term(self, term_count: int) -> bytes:
        index = term_count % 3
        return bytes(self.log.terms[index * self.term_length : (index + 1) * self.term_length])

    def datagrams(self, position: int, end: int, max_length: int) -> list[tuple[int, int, bytes]]:
        """``[(term_id, term_offset, datagram)]`` covering ``[position, end)`` in chunks of at most ``max_length``."""
        out = []
        while position < end:
            count, offset = divmod(position, self.term_length)
            term = self.term(count)
            limit = min(max_length, end - position)
            available, padding = scan_for_availability(term, offset, limit)
            if available <= 0:
                break
            out.append((wrap32(self.initial_term_id + count), offset, term[offset : offset + available]))
            position += available + padding
        return out
