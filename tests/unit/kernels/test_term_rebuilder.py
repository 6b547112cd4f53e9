"""TermRebuilder ``insert`` (spec/transport.md §5, §16) against the reference: random datagram sets delivered
dropped, duplicated and reordered, retransmits cut at other boundaries, bad blocks and garbage packets."""

from __future__ import annotations

import random
import struct

import numba
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aeron_numba.kernels import term_rebuilder as TB
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.layout import frame as F
from aeron_numba.layout import udp_frames as U
from tests.reference import udp_rebuild as ref
from tests.unit.guarded_memory import guarded, u8

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TERM_LENGTH = 4096
INITIAL_TERM_ID = -2  # term ids wrap through 0 in the streams below


def _messages(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes([i % 251]) * rng.randint(0, 500) for i in range(count)]


def streams():
    """Up to three 4 KiB terms of messages of 0..500 bytes (fragmented at the smaller MTUs)."""
    return st.builds(
        lambda mtu, seed, count: ref.SenderStream(TERM_LENGTH, mtu, INITIAL_TERM_ID, 5, 6, _messages(seed, count)),
        st.sampled_from([128, 256, 512]), st.integers(0, 2**32 - 1), st.integers(1, 60),
    )


def _partition(term_id: int) -> int:
    return ref.wrap32(term_id - INITIAL_TERM_ID) % 3


class Image:
    """The kernel's image (one array, three term views) beside the reference's (three bytearrays)."""

    def __init__(self):
        self.log = np.zeros(3 * TERM_LENGTH, np.uint8)
        self.terms = [self.log[i * TERM_LENGTH : (i + 1) * TERM_LENGTH] for i in range(3)]
        self.ref_terms = [bytearray(TERM_LENGTH) for _ in range(3)]

    def deliver(self, term_id: int, term_offset: int, datagram: bytes) -> int:
        packet = u8(b"\x77" * 5 + datagram + b"\x66" * 3)  # the block sits inside a larger receive buffer
        assert uf.classify_datagram(packet, 5, len(datagram)) in (F.HDR_TYPE_DATA, F.HDR_TYPE_PAD)
        p = _partition(term_id)
        got = TB.insert(self.terms[p], term_offset, packet, 5, len(datagram))
        assert got == ref.insert(self.ref_terms[p], term_offset, datagram)
        return got

    def same_as_reference(self) -> bool:
        return self.log.tobytes() == b"".join(bytes(t) for t in self.ref_terms)


@SETTINGS
@given(stream=streams(), cut=st.sampled_from([128, 256, 700, 2048]), seed=st.integers(0, 2**32 - 1),
       drop=st.floats(0, 0.5), dup=st.floats(0, 0.5))
def test_random_delivery_matches_reference_and_completes_the_stream(stream, cut, seed, drop, dup):
    rng = random.Random(seed)
    originals = stream.datagrams(0, stream.end_position, stream.mtu)
    retransmits = stream.datagrams(0, stream.end_position, cut)  # other boundaries, like resends of NAKed ranges
    schedule = [d for d in originals if rng.random() >= drop]
    schedule += [d for d in retransmits if rng.random() < dup]
    schedule += [d for d in schedule if rng.random() < dup]
    rng.shuffle(schedule)
    image = Image()
    results = [image.deliver(*d) for d in schedule]
    assert image.same_as_reference()
    assert sum(r > 0 for r in results) <= len(originals) + len(retransmits)
    # Everything arrives (again), then what is still missing is resent from each gap's start, as a NAK would ask
    # (a block is ignored whole when its first slot is filled, so a late original may leave a hole behind it).
    for d in originals:
        image.deliver(*d)
    repairs = 0
    position = 0
    while position < stream.end_position:
        count, offset = divmod(position, TERM_LENGTH)
        term = image.ref_terms[_partition(INITIAL_TERM_ID + count)]
        limit = min(TERM_LENGTH, stream.end_position - count * TERM_LENGTH)
        begin, gap_length, corrupt = ref.scan_for_gap(bytes(term), offset, limit)
        assert not corrupt
        if gap_length:
            gap_position = count * TERM_LENGTH + begin
            for d in stream.datagrams(gap_position, gap_position + gap_length, stream.mtu):
                assert image.deliver(*d) > 0
            repairs += 1
            assert repairs < 1000
        position = count * TERM_LENGTH + begin if gap_length else (count + 1) * TERM_LENGTH
    assert image.same_as_reference()
    event(f"repairs needed: {min(repairs, 3)}+, terms: {-(-stream.end_position // TERM_LENGTH)}")
    expected = b"".join(stream.term(c) for c in range(3))
    assert image.log.tobytes() == expected
    # A subscriber walking the rebuilt image gets every message's bytes in order.
    payloads = []
    for term_count in range(3):
        base = (term_count % 3) * TERM_LENGTH
        offset = 0
        while offset < TERM_LENGTH:
            length = struct.unpack_from("<i", expected, base + offset)[0]
            if length <= 0:
                break
            if struct.unpack_from("<H", expected, base + offset + 6)[0] == F.HDR_TYPE_DATA:
                payloads.append(image.log[base + offset + 32 : base + offset + length].tobytes())
            offset += ref.align(length, 32)
    assert b"".join(payloads) == b"".join(stream.messages[: stream.messages_sent])


def test_duplicate_is_ignored_and_only_the_first_slot_decides():
    stream = ref.SenderStream(TERM_LENGTH, 256, INITIAL_TERM_ID, 5, 6, [b"a" * 100, b"b" * 100, b"c" * 100])
    first, second, third = stream.datagrams(0, stream.end_position, 160)  # one frame each (132 -> 160 bytes)
    whole = stream.datagrams(0, stream.end_position, 1024)[0]
    image = Image()
    assert image.deliver(*second) == 160
    assert image.deliver(*second) == TB.ALREADY_PRESENT
    assert image.deliver(*first) == 160
    # A block whose first slot is filled changes nothing, even where it covers an empty slot (Aeron does the same;
    # the loss detector NAKs that slot on its own).
    assert image.deliver(*whole) == TB.ALREADY_PRESENT
    assert not image.terms[0][320:].any()
    assert image.deliver(*third) == 160
    assert image.log[:480].tobytes() == stream.term(0)[:480]


def test_invalid_blocks_are_refused_and_nothing_is_written():
    term = np.zeros(TERM_LENGTH, np.uint8)
    good = ref.data_frame(64, 1, 2, 3, b"x" * 40)  # 72 -> 96 bytes
    packet = u8(good)
    cases = [
        ((64, packet, 0, len(good) + 1), U.INVALID_BOUNDS),
        ((64, packet, -1, len(good)), U.INVALID_BOUNDS),
        ((64, packet, 1, len(good)), U.INVALID_BOUNDS),
        ((64, packet, 0, -1), U.INVALID_BOUNDS),
        ((64, packet, 0, 31), U.INVALID_FRAME_LENGTH),
        ((-32, packet, 0, len(good)), U.INVALID_TERM_OFFSET),
        ((48, packet, 0, len(good)), U.INVALID_TERM_OFFSET),
        ((TERM_LENGTH - 64, packet, 0, len(good)), U.INVALID_TERM_OFFSET),  # block passes the end of the term
        ((64, u8(ref.heartbeat(64, 1, 2, 3)), 0, 32), U.INVALID_FRAME_LENGTH),  # heartbeats are not inserted
        ((64, u8(ref.data_frame(64, 1, 2, 3, b"x", frame_length=20)), 0, 64), U.INVALID_FRAME_LENGTH),
        ((64, u8(good + bytes(16)), 0, len(good) + 16), U.INVALID_FRAME_LENGTH),  # partial trailing header
        ((64, u8(good[:64]), 0, 64), U.INVALID_FRAME_LENGTH),  # DATA payload cut short
        # A PAD header claiming padding past the end of the term.
        ((TERM_LENGTH - 64, u8(ref.data_frame(TERM_LENGTH - 64, 1, 2, 3, b"", frame_type=0, frame_length=96)), 0, 32),
         U.INVALID_FRAME_LENGTH),
        # A bare PAD header that is not the last thing in the block.
        ((64, u8(ref.data_frame(64, 1, 2, 3, b"", frame_type=0, frame_length=96) + good), 0, 32 + len(good)),
         U.INVALID_FRAME_LENGTH),
    ]
    for (term_offset, pkt, packet_offset, length), expected in cases:
        assert TB.insert(term, term_offset, pkt, packet_offset, length) == expected, (term_offset, length, expected)
        if length >= 0 and packet_offset >= 0 and packet_offset + length <= pkt.size:
            block = pkt[packet_offset : packet_offset + length].tobytes()
            assert ref.insert(bytearray(TERM_LENGTH), term_offset, block) == expected
        assert not term.any()
    # The bare PAD header at the end of the term that fits exactly, and a good block.
    pad = u8(ref.data_frame(TERM_LENGTH - 64, 1, 2, 3, b"", frame_type=0, frame_length=64)[:32])
    assert TB.insert(term, TERM_LENGTH - 64, pad, 0, 32) == 32
    assert TB.insert(term, 64, packet, 0, len(good)) == len(good)
    assert term[64 : 64 + len(good)].tobytes() == good


@numba.njit
def _insert_all(term, packets, offsets, lengths, term_offsets):
    """A compiled caller (as the receiver's duty cycle would be): insert a batch of blocks."""
    inserted = 0
    for i in range(offsets.size):
        if TB.insert(term, term_offsets[i], packets, offsets[i], lengths[i]) > 0:
            inserted += 1
    return inserted


def test_insert_from_compiled_code():
    stream = ref.SenderStream(TERM_LENGTH, 256, INITIAL_TERM_ID, 5, 6, [bytes([i]) * (i * 13) for i in range(20)])
    datagrams = [d for d in stream.datagrams(0, stream.end_position, 256) if d[0] == INITIAL_TERM_ID]
    packets = u8(b"".join(d[2] for d in datagrams))
    lengths = np.array([len(d[2]) for d in datagrams], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    term_offsets = np.array([d[1] for d in datagrams], np.int64)
    term = np.zeros(TERM_LENGTH, np.uint8)
    assert _insert_all(term, packets, offsets, lengths, term_offsets) == len(datagrams)
    assert _insert_all(term, packets, offsets, lengths, term_offsets) == 0
    assert term.tobytes() == stream.term(0)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=600), term_offset=st.integers(-64, TERM_LENGTH + 64).map(lambda x: x & ~31),
       at_end=st.booleans(), plausible=st.booleans())
def test_garbage_packets_never_escape_the_term(data, term_offset, at_end, plausible):
    data = bytearray(data)
    if plausible and len(data) >= 32:
        # A header whose length is within reach of the block, so the deeper checks run.
        data[:4] = struct.pack("<i", 32 + (data[4] % 8) * 40)
    packet = guarded(len(data), at_end=at_end)
    packet[:] = np.frombuffer(bytes(data), np.uint8)
    term = guarded(TERM_LENGTH, at_end=not at_end)
    result = TB.insert(term, term_offset, packet, 0, len(data))
    reference = bytearray(TERM_LENGTH)
    assert result == ref.insert(reference, term_offset, bytes(data))
    assert term.tobytes() == bytes(reference)
    if result > 0:
        # Every frame written lies within the term: a scan over it can never leave the term.
        offset = term_offset
        while offset < term_offset + result:
            length = int(term[offset : offset + 4].view(np.int32)[0])
            assert length >= 32 and offset + ref.align(length, 32) <= TERM_LENGTH
            offset += ref.align(length, 32)
