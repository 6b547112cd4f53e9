"""Gap scanner, loss detector and gap filler (Aeron's TermGapScanner / LossDetector / TermGapFiller;
spec/transport.md §1.5, §14, §16) against the reference, with a simulated receiver over three small terms."""

from __future__ import annotations

import random
import struct

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import LayoutError
from aeron_numba.kernels import loss_detector as LD
from aeron_numba.kernels import term_rebuilder as TB
from aeron_numba.layout import frame as F
from aeron_numba.layout import udp_frames as U
from tests.reference import udp_rebuild as ref
from tests.unit.guarded_memory import guarded, u8

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TERM_LENGTH = 4096
SHIFT = 12
INITIAL_TERM_ID = 0x7FFF_FFFE  # term ids wrap past INT32_MAX within the three terms
SESSION_ID, STREAM_ID = 5, 6


def _messages(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes([1 + i % 250]) * rng.randint(0, 500) for i in range(count)]


def streams():
    """Up to three 4 KiB terms of messages of 0..500 bytes (fragmented at the smaller MTUs)."""
    return st.builds(
        lambda mtu, seed, count: ref.SenderStream(TERM_LENGTH, mtu, INITIAL_TERM_ID, SESSION_ID, STREAM_ID,
                                                  _messages(seed, count)),
        st.sampled_from([128, 256, 512]), st.integers(0, 2**32 - 1), st.integers(1, 60),
    )


def _term_id(term_count: int) -> int:
    return ref.wrap32(INITIAL_TERM_ID + term_count)


# ------------------------------------------------------------------------------------------- scan_for_gap


@SETTINGS
@given(stream=streams(), seed=st.integers(0, 2**32 - 1), missing=st.floats(0, 0.6), data=st.data())
def test_scan_for_gap_matches_reference(stream, seed, missing, data):
    """A sender's term with random datagrams never received, scanned from a frame boundary to a random limit."""
    rng = random.Random(seed)
    term = bytearray(TERM_LENGTH)
    starts = []
    for term_id, offset, datagram in stream.datagrams(0, min(stream.end_position, TERM_LENGTH), stream.mtu):
        starts.append(offset)
        if rng.random() >= missing:
            term[offset : offset + len(datagram)] = datagram
    start = data.draw(st.sampled_from(starts or [0]))
    limit = data.draw(st.integers(start, TERM_LENGTH))
    buf = u8(bytes(term))
    out = np.full(LD.GAP_OUT_LENGTH, -9, np.int64)
    result = LD.scan_for_gap(buf, 42, start, limit, out)
    begin, gap_length, corrupt = ref.scan_for_gap(term, start, limit)
    assert (result, int(out[LD.GAP_TERM_OFFSET]), int(out[LD.GAP_LENGTH]), int(out[LD.GAP_CORRUPT])) == (
        begin, begin, gap_length, int(corrupt))
    assert out[LD.GAP_TERM_ID] == 42 and not corrupt
    if gap_length:
        # The gap: empty slots from its start, ending where received data resumes or at the limit.
        assert all(struct.unpack_from("<i", term, s)[0] == 0 for s in range(begin, begin + gap_length, 32))
        end = begin + gap_length
        assert end == ref.align(limit, 32) or struct.unpack_from("<i", term, end)[0] > 0


def test_scan_for_gap_named_cases():
    term = np.zeros(TERM_LENGTH, np.uint8)
    out = np.zeros(LD.GAP_OUT_LENGTH, np.int64)
    frame = u8(ref.data_frame(0, 1, 2, 3, b"x" * 40))  # 72 -> 96 bytes
    term[0:96] = frame
    term[256 : 256 + 96] = u8(ref.data_frame(256, 1, 2, 3, b"x" * 40))
    assert LD.scan_for_gap(term, 3, 0, 1000, out) == 96 and list(out) == [3, 96, 160, 0]
    assert LD.scan_for_gap(term, 3, 0, 200, out) == 96 and list(out) == [3, 96, 128, 0]  # the gap stops at the limit
    assert LD.scan_for_gap(term, 3, 0, 90, out) == 96 and list(out) == [3, 96, 0, 0]  # frame passes the limit: no gap
    assert LD.scan_for_gap(term, 3, 0, 101, out) == 96 and list(out) == [3, 96, 32, 0]  # limit rounded up to a slot
    assert LD.scan_for_gap(term, 3, 256, 352, out) == 352 and out[LD.GAP_LENGTH] == 0
    # A bare PAD header at the end of the term takes the scan past a limit that stops at its header.
    pad_header = ref.data_frame(TERM_LENGTH - 512, 1, 2, 3, b"", frame_type=0, frame_length=512)[:32]
    term[TERM_LENGTH - 512 : TERM_LENGTH - 480] = u8(pad_header)
    assert LD.scan_for_gap(term, 3, TERM_LENGTH - 512, TERM_LENGTH - 480, out) == TERM_LENGTH
    # Lengths that cannot be a frame of this term stop the scan, reported as corrupt, with no gap.
    for bad in (1, 31, TERM_LENGTH):
        term[352:356] = u8(struct.pack("<i", bad))
        assert LD.scan_for_gap(term, 3, 256, TERM_LENGTH, out) == 352 and list(out[2:]) == [0, 1]
    # Bad arguments.
    assert LD.scan_for_gap(term, 3, 16, 100, out) == U.INVALID_TERM_OFFSET
    assert LD.scan_for_gap(term, 3, -32, 100, out) == U.INVALID_TERM_OFFSET
    assert LD.scan_for_gap(term, 3, TERM_LENGTH, TERM_LENGTH, out) == U.INVALID_TERM_OFFSET
    assert LD.scan_for_gap(term, 3, 0, TERM_LENGTH + 1, out) == U.INVALID_BOUNDS
    assert LD.scan_for_gap(term, 3, 0, 100, out[:3]) == U.INVALID_BOUNDS
    assert LD.scan_for_gap(term[:3000], 3, 0, 100, out) == U.INVALID_TERM_LENGTH


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), start=st.integers(0, TERM_LENGTH // 32 - 1),
       limit=st.integers(0, TERM_LENGTH), small=st.booleans())
def test_scan_over_garbage_stays_in_the_term(seed, start, limit, small):
    """Any bytes at all (as a broken writer might leave): no read outside the term, same answer as the reference."""
    data = bytearray(random.Random(seed).randbytes(TERM_LENGTH))
    if small:
        for at in range(0, TERM_LENGTH, 32):  # plausible lengths, so scans walk a while before stopping
            data[at : at + 4] = struct.pack("<i", (data[at] % 5) * 32 - (data[at + 1] % 2) * 7)
    term = guarded(TERM_LENGTH)
    term[:] = np.frombuffer(bytes(data), np.uint8)
    out = np.zeros(LD.GAP_OUT_LENGTH, np.int64)
    result = LD.scan_for_gap(term, 1, start * 32, limit, out)
    begin, gap_length, corrupt = ref.scan_for_gap(bytes(data), start * 32, limit)
    assert (result, int(out[LD.GAP_LENGTH]), int(out[LD.GAP_CORRUPT])) == (begin, gap_length, int(corrupt))
    assert result <= TERM_LENGTH and begin + gap_length <= TERM_LENGTH
    state = LD.new_loss_state()
    position, flags = LD.loss_detector_scan(term, start * 32, start * 32 + 3 * TERM_LENGTH, 0, state, 0, 0, 0)
    assert start * 32 <= position <= TERM_LENGTH
    if flags & LD.SEND_NAK:
        assert state[LD.STATE_NAK_TERM_OFFSET] + state[LD.STATE_NAK_LENGTH] <= TERM_LENGTH


# ------------------------------------------------------------------------------------------- loss detector


class Receiver:
    """A receiver's image fed by datagrams, run with the kernels and the reference side by side.

    Checks on every scan: same rebuild position, flags and NAK as the reference; a NAK only for slots that are
    all still empty; the first NAK of a gap no sooner than ``delay`` after the gap was first seen, later ones
    no sooner than ``retry`` after the previous; rebuild never goes back nor leaves its term.
    """

    def __init__(self, stream: ref.SenderStream, delay: int, retry: int, reliable: bool):
        self.stream, self.delay, self.retry, self.reliable = stream, delay, retry, reliable
        self.log = np.zeros(3 * TERM_LENGTH, np.uint8)
        self.terms = [self.log[i * TERM_LENGTH : (i + 1) * TERM_LENGTH] for i in range(3)]
        self.ref_terms = [bytearray(TERM_LENGTH) for _ in range(3)]
        self.state = LD.new_loss_state()
        self.detector = ref.RefLossDetector(TERM_LENGTH, INITIAL_TERM_ID, delay, retry)
        self.rebuild = self.hwm = self.now = 0
        self.pool = stream.datagrams(0, stream.end_position, stream.mtu)
        self.activated_at: dict[tuple[int, int], int] = {}
        self.last_nak_at: dict[tuple[int, int], int] = {}
        self.naks = self.fills = self.gaps = 0

    def deliver(self, term_id: int, term_offset: int, datagram: bytes) -> None:
        term_count = ref.wrap32(term_id - INITIAL_TERM_ID)
        position = term_count * TERM_LENGTH + term_offset
        p = term_count % 3
        got = TB.insert(self.terms[p], term_offset, u8(datagram), 0, len(datagram))
        assert got == ref.insert(self.ref_terms[p], term_offset, datagram)
        self.hwm = max(self.hwm, position + len(datagram))

    def heartbeat(self) -> None:
        self.hwm = max(self.hwm, self.stream.end_position)  # a heartbeat carries the sender's position

    def scan(self, dt: int) -> None:
        self.now += dt
        p = (self.rebuild >> SHIFT) % 3
        position, flags = LD.loss_detector_scan(
            self.terms[p], self.rebuild, self.hwm, self.now, self.state, INITIAL_TERM_ID, self.delay, self.retry)
        ref_position, ref_flags, ref_nak = self.detector.scan(
            bytes(self.ref_terms[p]), self.rebuild, self.hwm, self.now)
        assert (position, flags) == (ref_position, ref_flags)
        assert self.rebuild <= position <= ((self.rebuild >> SHIFT) + 1) << SHIFT
        assert not flags & LD.SCAN_CORRUPT
        if flags & LD.LOSS_FOUND:
            key = (int(self.state[LD.STATE_ACTIVE_TERM_ID]), int(self.state[LD.STATE_ACTIVE_TERM_OFFSET]))
            self.activated_at[key] = self.now
            self.gaps += 1
        if flags & LD.SEND_NAK:
            nak = (int(self.state[LD.STATE_NAK_TERM_ID]), int(self.state[LD.STATE_NAK_TERM_OFFSET]),
                   int(self.state[LD.STATE_NAK_LENGTH]))
            assert nak == ref_nak
            assert nak[1] == position & (TERM_LENGTH - 1)  # the gap starts where the contiguous data ends
            self._check_nak(p, *nak)
            self.naks += 1
            term_id, offset, length = nak
            if self.reliable:
                start = ref.wrap32(term_id - INITIAL_TERM_ID) * TERM_LENGTH + offset
                self.pool += self.stream.datagrams(start, start + length, self.stream.mtu)  # the retransmit
            else:
                filled = LD.fill_gap(self.terms[p], term_id, offset, length, SESSION_ID, STREAM_ID)
                assert filled == ref.fill_gap(self.ref_terms[p], term_id, offset, length, SESSION_ID, STREAM_ID)
                assert filled == LD.GAP_FILLED  # nothing arrives between the scan and the fill here
                self.fills += 1
        else:
            assert ref_nak is None
        self.rebuild = position

    def _check_nak(self, p: int, term_id: int, offset: int, length: int) -> None:
        term = self.ref_terms[p]
        assert term_id == _term_id(self.rebuild >> SHIFT)
        assert length > 0 and offset + length <= TERM_LENGTH
        assert all(struct.unpack_from("<i", term, s)[0] == 0 for s in range(offset, offset + length, 32))
        key = (term_id, offset)
        previous = self.last_nak_at.get(key)
        if previous is None or self.activated_at[key] > previous:
            assert self.now - self.activated_at[key] >= self.delay
        else:
            assert self.now - previous >= self.retry
        self.last_nak_at[key] = self.now

    def same_as_reference(self) -> bool:
        return self.log.tobytes() == b"".join(bytes(t) for t in self.ref_terms)


def _network(receiver: Receiver, seed: int, drop: float, dup: float, reorder: float) -> None:
    """Send the stream through a lossy network, then let NAKs (or fills) finish it.

    Originals go out in order but a fraction is dropped, delivered twice (the copy late), or swapped with the
    next; scans run in between with random clock steps. After a heartbeat (tail loss shows up only through it)
    the receiver keeps scanning; what it NAKs is resent and may be lost again. For ``reliable=False`` the
    receiver fills what it would NAK.
    """
    rng = random.Random(seed)
    originals, receiver.pool = receiver.pool, []  # from here on the pool collects retransmits
    for i in range(len(originals) - 1):
        if rng.random() < reorder:
            originals[i], originals[i + 1] = originals[i + 1], originals[i]
    late: list = []
    steps = [0, 1, 30, 100, 250, 1000, 5000]

    def resend_pending() -> None:
        pending, receiver.pool = receiver.pool, []
        for d in pending:
            if rng.random() >= drop:
                receiver.deliver(*d)

    for d in originals:
        if rng.random() >= drop:
            receiver.deliver(*d)
        if rng.random() < dup:
            late.append(d)
        if late and rng.random() < 0.2:
            receiver.deliver(*late.pop(0))
        if rng.random() < 0.4:
            receiver.scan(rng.choice(steps))
            resend_pending()
    receiver.heartbeat()
    for d in late:
        receiver.deliver(*d)
    for _ in range(3000):
        if receiver.rebuild >= receiver.stream.end_position:
            break
        receiver.scan(rng.choice(steps))
        resend_pending()
    assert receiver.rebuild == receiver.stream.end_position
    assert receiver.same_as_reference()


NETWORK = dict(seed=st.integers(0, 2**32 - 1), drop=st.sampled_from([0.0, 0.05, 0.2, 0.5]),
               dup=st.sampled_from([0.0, 0.1, 0.3]), reorder=st.sampled_from([0.0, 0.1, 0.3]))


@SETTINGS
@given(stream=streams(), delay=st.sampled_from([0, 100, 1000]), retry=st.sampled_from([0, 500, 5000]), **NETWORK)
def test_reliable_receiver_matches_reference_and_rebuilds_everything(stream, delay, retry, seed, drop, dup, reorder):
    receiver = Receiver(stream, delay, retry, reliable=True)
    _network(receiver, seed, drop, dup, reorder)
    event(f"naks: {min(receiver.naks, 5)}+, terms: {-(-stream.end_position // TERM_LENGTH)}")
    assert receiver.log.tobytes() == b"".join(stream.term(c) for c in range(3))


@SETTINGS
@given(stream=streams(), delay=st.sampled_from([0, 100, 1000]), **NETWORK)
def test_unreliable_receiver_pads_over_gaps_and_never_corrupts_data(stream, delay, seed, drop, dup, reorder):
    receiver = Receiver(stream, delay, 1000, reliable=False)
    _network(receiver, seed, drop, dup, reorder)
    event(f"fills: {min(receiver.fills, 5)}+")
    # Walking the image: whole frames to the end; every DATA frame is the sender's, byte for byte.
    sender = b"".join(stream.term(c) for c in range(3))
    image = receiver.log.tobytes()
    offset = 0
    while offset < stream.end_position:
        length, _, _, frame_type = struct.unpack_from("<iBBH", image, offset)
        assert length >= 32
        if frame_type == F.HDR_TYPE_DATA:
            assert image[offset : offset + length] == sender[offset : offset + length]
        else:
            assert frame_type == F.HDR_TYPE_PAD
        offset += ref.align(length, 32)
    assert offset >= stream.end_position


def _stream_of(n: int, size: int = 100) -> ref.SenderStream:
    return ref.SenderStream(TERM_LENGTH, 256, INITIAL_TERM_ID, SESSION_ID, STREAM_ID, [b"m" * size] * n)


def test_gap_timeline_delay_retry_shrink_move_and_fill():
    stream = _stream_of(10)  # frames of 132 -> 160 bytes, one per datagram
    d = stream.datagrams(0, stream.end_position, 160)
    r = Receiver(stream, delay=100, retry=1000, reliable=True)
    r.pool = []  # retransmits are recorded, not delivered, so the timeline is ours
    for i in (0, 4):
        r.deliver(*d[i])
    r.scan(0)
    assert r.rebuild == 160 and r.state[LD.STATE_ACTIVE_LENGTH] == 480 and r.gaps == 1 and r.naks == 0
    r.scan(99)
    assert r.naks == 0  # not yet due
    r.scan(1)
    assert r.naks == 1 and r.last_nak_at[(_term_id(0), 160)] == 100
    r.deliver(*d[3])  # the gap shrinks from its end: same gap, same deadline, shorter NAK
    r.scan(999)
    assert r.naks == 1 and r.state[LD.STATE_ACTIVE_LENGTH] == 320
    r.scan(1)
    assert r.naks == 2 and tuple(r.state[LD.STATE_NAK_TERM_ID : LD.STATE_NAK_LENGTH + 1]) == (_term_id(0), 160, 320)
    r.deliver(*d[1])  # the gap moves: a new gap, a full delay again
    r.scan(5000)
    assert r.gaps == 2 and r.naks == 2 and r.state[LD.STATE_ACTIVE_TERM_OFFSET] == 320
    r.scan(100)
    assert r.naks == 3
    r.deliver(*d[2])  # filled: no more NAKs, the rebuild position jumps over everything received
    r.scan(10_000)
    assert r.naks == 3 and r.rebuild == 800 and r.state[LD.STATE_HAS_ACTIVE_GAP] == 0
    r.scan(10_000)
    assert r.naks == 3  # rebuild == hwm: nothing to scan


def test_zero_delay_naks_on_the_scan_that_finds_the_gap():
    stream = _stream_of(3)
    d = stream.datagrams(0, stream.end_position, 160)
    r = Receiver(stream, delay=0, retry=0, reliable=True)
    r.deliver(*d[2])
    r.scan(0)
    assert r.gaps == 1 and r.naks == 1
    r.scan(0)
    assert r.naks == 2  # retry 0: every scan while it is there


def test_hwm_in_the_next_term_scans_to_the_end_of_this_one():
    stream = _stream_of(60, 300)  # crosses into term 1 (and 2)
    datagrams = stream.datagrams(0, stream.end_position, stream.mtu)
    r = Receiver(stream, delay=0, retry=10, reliable=True)
    for term_id, offset, datagram in datagrams:
        if term_id == _term_id(0) and offset < 1024:
            r.deliver(term_id, offset, datagram)
    next_term = [x for x in datagrams if x[0] == _term_id(1)]
    r.deliver(*next_term[0])
    r.scan(0)
    nak = tuple(int(v) for v in r.state[LD.STATE_NAK_TERM_ID : LD.STATE_NAK_LENGTH + 1])
    assert nak[0] == _term_id(0) and nak[1] + nak[2] == TERM_LENGTH  # the rest of term 0, not beyond
    for x in datagrams:
        if x[0] == _term_id(0):
            r.deliver(*x)
    r.scan(0)
    assert r.rebuild == TERM_LENGTH  # term 0 complete (its last frame is a PAD)
    r.scan(0)
    assert r.rebuild == TERM_LENGTH + len(next_term[0][2])  # continues in term 1
    assert r.gaps == 1 and r.naks == 1


def test_loss_detector_bad_arguments():
    term = np.zeros(TERM_LENGTH, np.uint8)
    state = LD.new_loss_state()
    assert LD.loss_detector_scan(term[:3000], 0, 64, 0, state, 0, 0, 0) == (U.INVALID_TERM_LENGTH, 0)
    assert LD.loss_detector_scan(term, -32, 64, 0, state, 0, 0, 0) == (U.INVALID_POSITION, 0)
    assert LD.loss_detector_scan(term, 0, -1, 0, state, 0, 0, 0) == (U.INVALID_POSITION, 0)
    assert LD.loss_detector_scan(term, 16, 64, 0, state, 0, 0, 0) == (U.INVALID_POSITION, 0)
    assert LD.loss_detector_scan(term, 0, 64, 0, state[:4], 0, 0, 0) == (U.INVALID_BOUNDS, 0)
    assert LD.loss_detector_scan(term, 96, 64, 0, state, 0, 0, 0) == (96, 0)  # rebuild >= hwm: nothing to do
    assert not state.any()


def test_corrupt_length_stops_rebuild_without_a_nak():
    term = np.zeros(TERM_LENGTH, np.uint8)
    term[0:96] = u8(ref.data_frame(0, 1, 2, 3, b"x" * 40))
    term[96:100] = u8(struct.pack("<i", 17))
    state = LD.new_loss_state()
    assert LD.loss_detector_scan(term, 0, 1024, 0, state, 0, 0, 0) == (96, LD.SCAN_CORRUPT)
    assert state[LD.STATE_NAKS_REQUESTED] == 0


def test_loss_detector_class():
    with pytest.raises(LayoutError, match="term_length=4096 < TERM_MIN_LENGTH=65536"):
        LD.LossDetector(4096, 0)
    with pytest.raises(LayoutError, match="nak_delay_ns=-1 < 0"):
        LD.LossDetector(65536, 0, nak_delay_ns=-1)
    detector = LD.LossDetector(65536, 10)
    assert (detector.nak_delay_ns, detector.nak_retry_delay_ns) == (100_000, 10_000_000)
    term = np.zeros(65536, np.uint8)
    term[128:160] = u8(ref.data_frame(128, 1, 2, 10, b""))
    assert detector.scan(term, 0, 160, 1_000) == (0, LD.LOSS_FOUND)
    assert detector.scan(term, 0, 160, 101_000) == (0, LD.SEND_NAK)
    assert detector.nak == (10, 0, 128) and detector.gaps_found == 1 and detector.naks_requested == 1
    with pytest.raises(LayoutError, match="term.size=4096 != term_length=65536"):
        detector.scan(term[:4096], 0, 160, 0)
    with pytest.raises(LayoutError, match="INVALID_POSITION"):
        detector.scan(term, -32, 160, 0)


# ------------------------------------------------------------------------------------------- gap filler


def test_fill_gap_writes_a_pad_only_over_a_still_empty_gap():
    term = np.zeros(TERM_LENGTH, np.uint8)
    term[256:260] = u8(struct.pack("<i", 64))  # something arrived inside [128, 384)
    assert LD.fill_gap(term, 9, 128, 256, 1, 2) == LD.GAP_NOT_FILLED
    assert term[128:256].sum() == 0
    assert LD.fill_gap(term, 9, 128, 128, 1, 2) == LD.GAP_FILLED
    assert term[128:160].tobytes() == ref.data_frame(128, 1, 2, 9, b"", frame_type=0, frame_length=128)[:32]
    assert LD.fill_gap(term, 9, 128, 128, 1, 2) == LD.GAP_NOT_FILLED  # already filled
    assert LD.fill_gap(term, 9, 16, 64, 1, 2) == U.INVALID_TERM_OFFSET
    assert LD.fill_gap(term, 9, -32, 64, 1, 2) == U.INVALID_TERM_OFFSET
    assert LD.fill_gap(term, 9, 512, 31, 1, 2) == U.INVALID_BOUNDS
    assert LD.fill_gap(term, 9, TERM_LENGTH - 32, 64, 1, 2) == U.INVALID_BOUNDS
    assert LD.fill_gap(term, 9, TERM_LENGTH, 32, 1, 2) == U.INVALID_BOUNDS
    assert LD.fill_gap(term, 9, TERM_LENGTH - 32, 32, 1, 2) == LD.GAP_FILLED
    bytearray_term = bytearray(TERM_LENGTH)
    bytearray_term[256:260] = struct.pack("<i", 64)
    ref.fill_gap(bytearray_term, 9, 128, 128, 1, 2)
    ref.fill_gap(bytearray_term, 9, TERM_LENGTH - 32, 32, 1, 2)
    assert term.tobytes() == bytes(bytearray_term)


@numba.njit
def _receiver_step(term, packet, length, term_offset, rebuild, hwm, now, state, initial_term_id):
    """A compiled receiver step: insert, then detect loss (what a receiver duty cycle would compile)."""
    TB.insert(term, term_offset, packet, 0, length)
    return LD.loss_detector_scan(term, rebuild, hwm, now, state, initial_term_id, 0, 100)


def test_kernels_compose_in_compiled_code():
    stream = _stream_of(3)
    d = stream.datagrams(0, stream.end_position, 160)
    term = np.zeros(TERM_LENGTH, np.uint8)
    state = LD.new_loss_state()
    _, offset, datagram = d[2]
    position, flags = _receiver_step(term, u8(datagram), len(datagram), offset, 0, 480, 0, state, INITIAL_TERM_ID)
    assert (position, flags) == (0, LD.LOSS_FOUND | LD.SEND_NAK)
    assert tuple(state[LD.STATE_NAK_TERM_ID : LD.STATE_NAK_LENGTH + 1]) == (INITIAL_TERM_ID, 0, 320)
