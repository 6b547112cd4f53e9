"""UDP frame layouts, encoders, decoders and the datagram classifier (spec/transport.md §1, §16).

Offsets are pinned with numbers typed from the spec; encoders are compared byte for byte with ``struct``-built
frames (tests/reference/udp_rebuild.py); the classifier is compared with the reference on valid, mutated and
random datagrams, the random ones in memory that ends at an inaccessible page.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import LayoutError
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.layout import frame as F
from aeron_numba.layout import udp_frames as U
from tests.reference import udp_rebuild as ref
from tests.unit.guarded_memory import guarded, u8

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
FLAGS = st.integers(0, 255)
SENTINEL = 0xA5


# ------------------------------------------------------------------------------------------- layout


def test_offsets_and_sizes_are_the_spec_tables():
    # §16 SETUP
    assert (U.SETUP_TERM_OFFSET_OFFSET, U.SETUP_SESSION_ID_OFFSET, U.SETUP_STREAM_ID_OFFSET,
            U.SETUP_INITIAL_TERM_ID_OFFSET, U.SETUP_ACTIVE_TERM_ID_OFFSET, U.SETUP_TERM_LENGTH_OFFSET,
            U.SETUP_MTU_LENGTH_OFFSET, U.SETUP_TTL_OFFSET, U.SETUP_FRAME_LENGTH) == (8, 12, 16, 20, 24, 28, 32, 36, 40)
    assert (U.SETUP_SEND_RESPONSE_SETUP_FLAG, U.SETUP_GROUP_FLAG) == (0x80, 0x40)
    # §16 SM
    assert (U.CONTROL_SESSION_ID_OFFSET, U.CONTROL_STREAM_ID_OFFSET) == (8, 12)
    assert (U.SM_SESSION_ID_OFFSET, U.SM_STREAM_ID_OFFSET, U.SM_CONSUMPTION_TERM_ID_OFFSET,
            U.SM_CONSUMPTION_TERM_OFFSET_OFFSET, U.SM_RECEIVER_WINDOW_OFFSET, U.SM_RECEIVER_ID_OFFSET,
            U.SM_GROUP_TAG_OFFSET) == (8, 12, 16, 20, 24, 28, 36)
    assert (U.SM_FRAME_LENGTH, U.SM_WITH_GROUP_TAG_FRAME_LENGTH, U.SM_SEND_SETUP_FLAG, U.SM_EOS_FLAG) == (
        36, 44, 0x80, 0x40)
    # §16 NAK
    assert (U.NAK_SESSION_ID_OFFSET, U.NAK_STREAM_ID_OFFSET, U.NAK_TERM_ID_OFFSET, U.NAK_TERM_OFFSET_OFFSET,
            U.NAK_LENGTH_OFFSET, U.NAK_FRAME_LENGTH) == (8, 12, 16, 20, 24, 28)
    # §16 RTTM
    assert (U.RTTM_SESSION_ID_OFFSET, U.RTTM_STREAM_ID_OFFSET, U.RTTM_ECHO_TIMESTAMP_OFFSET,
            U.RTTM_RECEPTION_DELTA_OFFSET, U.RTTM_RECEIVER_ID_OFFSET, U.RTTM_FRAME_LENGTH,
            U.RTTM_REPLY_FLAG) == (8, 12, 16, 24, 32, 40, 0x80)
    # §16 ERR
    assert (U.ERR_SESSION_ID_OFFSET, U.ERR_STREAM_ID_OFFSET, U.ERR_RECEIVER_ID_OFFSET, U.ERR_GROUP_TAG_OFFSET,
            U.ERR_ERROR_CODE_OFFSET, U.ERR_ERROR_LENGTH_OFFSET, U.ERR_ERROR_TEXT_OFFSET) == (8, 12, 16, 24, 32, 36, 40)
    assert (U.ERR_HEADER_LENGTH, U.ERR_MAX_TEXT_LENGTH, U.ERR_MAX_FRAME_LENGTH, U.ERR_GROUP_TAG_FLAG) == (
        40, 1023, 1063, 0x08)
    # §16 RSP_SETUP, RES, heartbeat
    assert (U.RSP_SETUP_SESSION_ID_OFFSET, U.RSP_SETUP_STREAM_ID_OFFSET, U.RSP_SETUP_RESPONSE_SESSION_ID_OFFSET,
            U.RSP_SETUP_FRAME_LENGTH) == (8, 12, 16, 20)
    assert (U.COMMON_HEADER_LENGTH, U.RES_HEADER_LENGTH) == (8, 8)
    assert (U.HEARTBEAT_DATAGRAM_LENGTH, U.HEARTBEAT_FLAGS, U.HEARTBEAT_EOS_FLAGS) == (32, 0xC0, 0xE0)
    # §14 NAK timing (unicast)
    assert (U.NAK_UNICAST_DELAY_NS, U.NAK_UNICAST_RETRY_DELAY_RATIO, U.NAK_UNICAST_RETRY_DELAY_NS) == (
        100_000, 100, 10_000_000)
    # §1.1 type ids come from layout/frame.py and are the fixed sizes' keys
    assert U.MIN_FRAME_LENGTH_BY_TYPE == {0x00: 32, 0x01: 32, 0x02: 28, 0x03: 36, 0x04: 40, 0x05: 40, 0x06: 40,
                                          0x07: 8, 0x0B: 20}


def test_status_codes_are_distinct_negative_and_named():
    codes = list(U.STATUS_NAMES)
    assert len(set(codes)) == len(codes) and all(code < 0 for code in codes)
    for code, name in U.STATUS_NAMES.items():
        assert getattr(U, name) == code and U.status_name(code) == name
    assert U.status_name(-999) == "UNKNOWN_STATUS(-999)"


def test_guards_name_the_value_and_the_limit():
    with pytest.raises(LayoutError, match=r"text_length=1024 > ERR_MAX_TEXT_LENGTH=1023"):
        U.check_error_text_length(1024)
    with pytest.raises(LayoutError, match=r"text_length=-1 < 0"):
        U.check_error_text_length(-1)
    U.check_error_text_length(1023)
    with pytest.raises(LayoutError, match=r"offset=60 \+ frame_length=44 > buffer_length=100"):
        U.check_frame_fits(100, 60, 44)
    with pytest.raises(LayoutError, match=r"offset=-1 < 0"):
        U.check_frame_fits(100, -1, 8)
    U.check_frame_fits(100, 56, 44)
    with pytest.raises(LayoutError, match=r"length=65505 > MAX_UDP_PAYLOAD_LENGTH=65504"):
        U.check_datagram_length(65505)
    with pytest.raises(LayoutError, match=r"length=7 < COMMON_HEADER_LENGTH=8"):
        U.check_datagram_length(7)
    with pytest.raises(LayoutError, match=r"term_length=32768 < TERM_MIN_LENGTH=65536"):
        U.check_receiver_term_length(32768)
    with pytest.raises(LayoutError, match=r"term_length=98304 is not a power of 2"):
        U.check_receiver_term_length(98304)
    with pytest.raises(LayoutError, match=r"nak_retry_delay_ns=-5 < 0"):
        U.check_nak_delays(0, -5)
    with pytest.raises(LayoutError, match=r"gap_offset=16 must be >= 0 and a multiple of FRAME_ALIGNMENT=32"):
        U.check_gap(65536, 16, 64)
    with pytest.raises(LayoutError, match=r"gap_length=16 < HEADER_LENGTH=32"):
        U.check_gap(65536, 0, 16)
    with pytest.raises(LayoutError, match=r"gap_offset=65504 \+ gap_length=64 > term_length=65536"):
        U.check_gap(65536, 65504, 64)


# ------------------------------------------------------------------------------------------- encoders


def _encode_into(encode, frame_length_hint: int, offset: int, *args):
    buf = np.full(offset + frame_length_hint + 16, SENTINEL, np.uint8)
    length = encode(buf, offset, *args)
    assert length > 0
    assert (buf[:offset] == SENTINEL).all() and (buf[offset + length :] == SENTINEL).all()
    return length, buf[offset : offset + length].tobytes()


@SETTINGS
@given(offset=st.integers(0, 40), values=st.tuples(I32, I32, I32, I32, I32, I32, I32, I32), flags=FLAGS)
def test_encode_setup_matches_reference(offset, values, flags):
    length, raw = _encode_into(uf.encode_setup, 40, offset, *values, flags)
    assert (length, raw) == (40, ref.setup(*values, flags=flags))
    assert uf.decode_setup(u8(raw), 0) == (40, flags, *values)


@SETTINGS
@given(offset=st.integers(0, 40), ids=st.tuples(I32, I32, I32, I32, I32), receiver_id=I64, group_tag=I64,
       has_tag=st.booleans(), flags=FLAGS)
def test_encode_status_message_matches_reference(offset, ids, receiver_id, group_tag, has_tag, flags):
    length, raw = _encode_into(uf.encode_status_message, 44, offset, *ids, receiver_id, group_tag, has_tag, flags)
    expected = ref.status_message(*ids, receiver_id, group_tag if has_tag else None, flags)
    assert (length, raw) == (len(expected), expected)
    assert length == (44 if has_tag else 36)
    decoded = uf.decode_status_message(u8(raw), 0)
    assert decoded == (length, flags, *ids, receiver_id, int(has_tag), group_tag if has_tag else 0)
    assert uf.classify_datagram(u8(raw), 0, length) == F.HDR_TYPE_SM


@SETTINGS
@given(offset=st.integers(0, 40), values=st.tuples(I32, I32, I32, I32, I32))
def test_encode_nak_matches_reference(offset, values):
    length, raw = _encode_into(uf.encode_nak, 28, offset, *values)
    assert (length, raw) == (28, ref.nak(*values))
    assert uf.decode_nak(u8(raw), 0) == (28, *values)
    assert uf.classify_datagram(u8(raw), 0, 28) == F.HDR_TYPE_NAK


@SETTINGS
@given(offset=st.integers(0, 40), ids=st.tuples(I32, I32), times=st.tuples(I64, I64, I64), reply=st.booleans())
def test_encode_rttm_matches_reference(offset, ids, times, reply):
    length, raw = _encode_into(uf.encode_rttm, 40, offset, *ids, *times, reply)
    assert (length, raw) == (40, ref.rttm(*ids, *times, reply))
    assert uf.decode_rttm(u8(raw), 0) == (40, 0x80 if reply else 0, *ids, *times)
    assert uf.classify_datagram(u8(raw), 0, 40) == F.HDR_TYPE_RTTM


@SETTINGS
@given(offset=st.integers(0, 40), term_offset=st.integers(0, 2**25 - 1).map(lambda x: x * 32),
       ids=st.tuples(I32, I32, I32), eos=st.booleans())
def test_encode_heartbeat_matches_reference(offset, term_offset, ids, eos):
    session_id, stream_id, term_id = ids
    length, raw = _encode_into(uf.encode_heartbeat, 32, offset, term_offset, session_id, stream_id, term_id, eos)
    assert (length, raw) == (32, ref.heartbeat(term_offset, session_id, stream_id, term_id, eos))
    assert uf.decode_data_header(u8(raw), 0) == (0, 0xE0 if eos else 0xC0, F.HDR_TYPE_DATA, term_offset, *ids)
    assert uf.classify_datagram(u8(raw), 0, 32) == F.HDR_TYPE_DATA


@SETTINGS
@given(offset=st.integers(0, 40), ids=st.tuples(I32, I32), receiver_id=I64, group_tag=st.none() | I64, code=I32,
       text=st.binary(max_size=1023))
def test_encode_err_matches_reference(offset, ids, receiver_id, group_tag, code, text):
    text_array = np.frombuffer(bytearray(text + b"tail-not-sent"), np.uint8)
    length, raw = _encode_into(uf.encode_err, 40 + len(text), offset, *ids, receiver_id, group_tag or 0,
                               group_tag is not None, code, text_array, len(text))
    expected = ref.err(*ids, receiver_id, group_tag, code, text)
    assert (length, raw) == (len(expected), expected)
    decoded = uf.decode_err(u8(raw), 0)
    assert decoded[:7] == (length, 0x08 if group_tag is not None else 0, *ids, receiver_id, group_tag or 0, code)
    assert raw[decoded[7] : decoded[7] + decoded[8]] == text
    assert uf.classify_datagram(u8(raw), 0, length) == F.HDR_TYPE_ERR


@SETTINGS
@given(offset=st.integers(0, 40), values=st.tuples(I32, I32, I32))
def test_encode_rsp_setup_matches_reference(offset, values):
    length, raw = _encode_into(uf.encode_rsp_setup, 20, offset, *values)
    assert (length, raw) == (20, ref.rsp_setup(*values))
    assert uf.decode_rsp_setup(u8(raw), 0) == (20, *values)
    assert uf.classify_datagram(u8(raw), 0, 20) == F.HDR_TYPE_RSP_SETUP


def test_encoders_refuse_what_does_not_fit_and_write_nothing():
    text = np.zeros(2000, np.uint8)
    calls = [
        (uf.encode_setup, (1, 2, 3, 4, 5, 65536, 1408, 0), 40),
        (uf.encode_status_message, (1, 2, 3, 4, 5, 6, 7, True, 0), 44),
        (uf.encode_status_message, (1, 2, 3, 4, 5, 6, 7, False, 0), 36),
        (uf.encode_nak, (1, 2, 3, 4, 5), 28),
        (uf.encode_rttm, (1, 2, 3, 4, 5, False), 40),
        (uf.encode_heartbeat, (0, 1, 2, 3, False), 32),
        (uf.encode_err, (1, 2, 3, 4, True, 5, text, 10), 50),
        (uf.encode_rsp_setup, (1, 2, 3), 20),
    ]
    for encode, args, size in calls:
        for buf_size, offset in ((size - 1, 0), (size + 5, 6), (size, -1), (size, size + 1)):
            buf = np.full(max(buf_size, 0), SENTINEL, np.uint8)
            assert encode(buf, offset, *args) == U.INSUFFICIENT_SPACE, (encode, buf_size, offset)
            assert (buf == SENTINEL).all()
        assert encode(np.zeros(size, np.uint8), 0, *args) == size
    buf = np.zeros(2000, np.uint8)
    for text_length in (-1, 1024, 2001):
        assert uf.encode_err(buf, 0, 1, 2, 3, 4, False, 5, text, text_length) == U.INVALID_ERROR_LENGTH
    assert uf.encode_err(buf, 0, 1, 2, 3, 4, False, 5, text[:3], 4) == U.INVALID_ERROR_LENGTH
    assert not buf.any()


def test_encode_error_frame_from_python_checks_its_sizes():
    buf = np.zeros(2000, np.uint8)
    length = uf.encode_error_frame(buf, 8, 1, 2, 3, None, 7, "no subscriber: \u00e9")
    expected = ref.err(1, 2, 3, None, 7, b"no subscriber: ?")
    assert buf[8 : 8 + length].tobytes() == expected
    assert uf.encode_error_frame(buf, 0, 1, 2, 3, -5, 7, "x" * 1023) == 1063
    assert uf.decode_err(buf, 0)[:7] == (1063, 0x08, 1, 2, 3, -5, 7)
    with pytest.raises(LayoutError, match=r"text_length=1024 > ERR_MAX_TEXT_LENGTH=1023"):
        uf.encode_error_frame(buf, 0, 1, 2, 3, None, 7, "x" * 1024)
    with pytest.raises(LayoutError, match=r"offset=1990 \+ frame_length=50 > buffer_length=2000"):
        uf.encode_error_frame(buf, 1990, 1, 2, 3, None, 7, "x" * 10)


def test_decoders_refuse_a_frame_past_the_buffer():
    buf = np.zeros(30, np.uint8)
    assert uf.decode_setup(buf, 0)[0] == U.INVALID_BOUNDS
    assert uf.decode_status_message(buf, 0)[0] == U.INVALID_BOUNDS
    assert uf.decode_nak(buf, 3)[0] == U.INVALID_BOUNDS
    assert uf.decode_nak(buf, -1)[0] == U.INVALID_BOUNDS
    assert uf.decode_rttm(buf, 0)[0] == U.INVALID_BOUNDS
    assert uf.decode_err(buf, 0)[0] == U.INVALID_BOUNDS
    assert uf.decode_rsp_setup(buf, 11)[0] == U.INVALID_BOUNDS
    assert uf.decode_data_header(buf, 0)[0] == U.INVALID_BOUNDS
    assert uf.decode_nak(buf, 2)[0] == 0  # fits: fields read as they are
    # An SM claiming a group tag it has no room for in the buffer: the tag is not read.
    sm = u8(ref.status_message(1, 2, 3, 4, 5, 6))
    sm[:4] = np.frombuffer(struct.pack("<i", 44), np.uint8)
    assert uf.decode_status_message(sm, 0)[-2:] == (0, 0)
    # ERR text clamped to the frame and the buffer.
    e = u8(ref.err(1, 2, 3, None, 4, b"abcdef"))
    e[36:40] = np.frombuffer(struct.pack("<i", 1000), np.uint8)
    assert uf.decode_err(e, 0)[7:] == (40, 6)


# ------------------------------------------------------------------------------------------- classify

TERM_LENGTH = 4096
STREAM = ref.SenderStream(TERM_LENGTH, 256, 7, 11, 22, [bytes([i % 251]) * (i * 37 % 500) for i in range(36)])
DATA_DATAGRAMS = STREAM.datagrams(0, STREAM.end_position, 256) + STREAM.datagrams(0, STREAM.end_position, 1024)


def test_sender_datagrams_all_classify_as_data_or_pad():
    kinds = set()
    for _, _, datagram in DATA_DATAGRAMS:
        kind = uf.classify_datagram(u8(datagram), 0, len(datagram))
        assert kind == ref.classify(datagram) and kind in (F.HDR_TYPE_DATA, F.HDR_TYPE_PAD)
        kinds.add(kind)
    assert kinds == {F.HDR_TYPE_DATA, F.HDR_TYPE_PAD}  # the stream crosses terms: bare PAD headers were sent


def _valid_datagrams():
    control = [
        ref.setup(0, 1, 2, 3, 4, 65536, 1408, 0),
        ref.status_message(1, 2, 3, 4, 5, 6),
        ref.status_message(1, 2, 3, 4, 5, 6, 77, flags=0x80),
        ref.nak(1, 2, 3, 4, 5),
        ref.rttm(1, 2, 3, 4, 5, True),
        ref.err(1, 2, 3, 9, 4, b"no such stream"),
        ref.rsp_setup(1, 2, 3),
        ref.common(8, 0, 0x07),
        ref.heartbeat(1024, 1, 2, 3, True),
    ]
    return control + [d for _, _, d in DATA_DATAGRAMS]


VALID = _valid_datagrams()


@pytest.mark.parametrize(
    "datagram, expected",
    [
        (b"\x08\x00\x00\x00\x00\x00\x02", U.INVALID_TOO_SHORT),
        (ref.nak(1, 2, 3, 4, 5)[:4] + b"\x01" + ref.nak(1, 2, 3, 4, 5)[5:], U.INVALID_VERSION),
        (ref.nak(1, 2, 3, 4, 5)[:27], U.INVALID_FRAME_LENGTH),  # frame length past the datagram
        (struct.pack("<i", 27) + ref.nak(1, 2, 3, 4, 5)[4:], U.INVALID_FRAME_LENGTH),  # below the fixed size
        (ref.status_message(1, 2, 3, 4, 5, 6)[:36] + bytes(8), F.HDR_TYPE_SM),  # trailing bytes ignored
        (ref.common(40, 0, 0x08) + bytes(32), U.INVALID_TYPE),  # ATS_DATA
        (ref.common(40, 0, 0x09) + bytes(32), U.INVALID_TYPE),
        (ref.common(40, 0, 0x0A) + bytes(32), U.INVALID_TYPE),
        (ref.common(40, 0, 0xFFFF) + bytes(32), U.INVALID_TYPE),  # EXT
        (ref.common(40, 0, 0x0C) + bytes(32), U.INVALID_TYPE),
        (ref.err(1, 2, 3, None, 4, b"abc")[:36] + struct.pack("<i", 4) + b"abc", U.INVALID_ERROR_LENGTH),
        (ref.err(1, 2, 3, None, 4, b"abc")[:36] + struct.pack("<i", -1) + b"abc", U.INVALID_ERROR_LENGTH),
        (ref.err(1, 2, 3, None, 4, b"x" * 1024), U.INVALID_ERROR_LENGTH),
        (ref.heartbeat(1024, 1, 2, 3) + bytes(32), U.INVALID_FRAME_LENGTH),  # a heartbeat is exactly 32 bytes
        (ref.data_frame(64, 1, 2, 3, b"", frame_type=0, frame_length=0), U.INVALID_FRAME_LENGTH),  # empty PAD
        (ref.data_frame(48, 1, 2, 3, b"abc"), U.INVALID_TERM_OFFSET),
        (ref.data_frame(-32, 1, 2, 3, b"abc"), U.INVALID_TERM_OFFSET),
        (ref.data_frame(1 << 30, 1, 2, 3, b"abc"), U.INVALID_TERM_OFFSET),
        (ref.data_frame((1 << 30) - 32, 1, 2, 3, b"a" * 40), U.INVALID_FRAME_LENGTH),  # ends past any term
        (ref.data_frame(64, 1, 2, 3, b"abc", frame_length=31), U.INVALID_FRAME_LENGTH),
        (ref.data_frame(64, 1, 2, 3, b"abc")[:34], U.INVALID_FRAME_LENGTH),  # payload cut short
        (ref.data_frame(64, 1, 2, 3, b"abc")[:20], U.INVALID_FRAME_LENGTH),  # not even a data header
        (ref.data_frame(64, 1, 2, 3, b"abc") + bytes(16), U.INVALID_FRAME_LENGTH),  # trailing partial header
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(128, 1, 2, 3, b"b"), F.HDR_TYPE_DATA),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(96, 1, 2, 3, b"b"), U.INVALID_TERM_OFFSET),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(128, 9, 2, 3, b"b"), U.INVALID_STREAM_MISMATCH),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(128, 1, 9, 3, b"b"), U.INVALID_STREAM_MISMATCH),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(128, 1, 2, 4, b"b"), U.INVALID_STREAM_MISMATCH),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.nak(1, 2, 3, 4, 5) + bytes(4), U.INVALID_TYPE),
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.heartbeat(128, 1, 2, 3), U.INVALID_FRAME_LENGTH),
        # A bare PAD header standing for 4000 bytes is fine as the last frame, not before another one.
        (ref.data_frame(64, 1, 2, 3, b"a") + ref.data_frame(128, 1, 2, 3, b"", frame_type=0, frame_length=4000),
         F.HDR_TYPE_DATA),
        (ref.data_frame(96, 1, 2, 3, b"", frame_type=0, frame_length=4000), F.HDR_TYPE_PAD),
        (ref.data_frame(96, 1, 2, 3, b"", frame_type=0, frame_length=4000) + ref.data_frame(128, 1, 2, 3, b"b"),
         U.INVALID_FRAME_LENGTH),
        (ref.data_frame(96, 1, 2, 3, b"", frame_type=1, frame_length=4000), U.INVALID_FRAME_LENGTH),  # DATA cannot
    ],
)
def test_classify_named_cases(datagram, expected):
    assert ref.classify(datagram) == expected
    assert uf.classify_datagram(u8(datagram), 0, len(datagram)) == expected
    # Same answer at an offset inside a larger receive buffer.
    buf = u8(b"\xff" * 13 + datagram + b"\xee" * 40)
    assert uf.classify_datagram(buf, 13, len(datagram)) == expected


def test_classify_refuses_ranges_outside_the_buffer():
    buf = u8(ref.nak(1, 2, 3, 4, 5))
    for offset, length in ((-1, 28), (0, 29), (1, 28), (0, -1), (29, 0)):
        assert uf.classify_datagram(buf, offset, length) == U.INVALID_BOUNDS
    assert uf.classify_datagram(buf, 28, 0) == U.INVALID_TOO_SHORT


def test_validate_setup():
    def check(**fields):
        values = dict(term_offset=0, session_id=1, stream_id=2, initial_term_id=3, active_term_id=4,
                      term_length=65536, mtu=1408, ttl=0)
        values.update(fields)
        return uf.validate_setup(u8(ref.setup(*values.values())), 0)

    assert check() == 0 and check(term_offset=65504, term_length=65536) == 0 and check(term_length=1 << 30) == 0
    for bad in (32768, 65536 * 3, -65536, 0):
        assert check(term_length=bad) == U.INVALID_SETUP_TERM_LENGTH
    for bad in (32, 1400, 65536, 0, -1408):
        assert check(mtu=bad) == U.INVALID_SETUP_MTU
    for bad in (-32, 16, 65536):
        assert check(term_offset=bad) == U.INVALID_TERM_OFFSET
    assert uf.validate_setup(u8(bytes(39)), 0) == U.INVALID_BOUNDS


_MUTATION = st.one_of(
    st.tuples(st.just("byte"), st.integers(0, 2000), st.integers(0, 255)),
    st.tuples(st.just("i32"), st.integers(0, 500), st.sampled_from([0, 1, 7, 8, 20, 28, 31, 32, 36, 44, 64, 1023,
                                                                       4000, -1, -32, 2**31 - 1, 1 << 30])),
    st.tuples(st.just("length"), st.integers(-40, 40), st.just(0)),
)


@settings(max_examples=400, deadline=None)
@given(index=st.integers(0, len(VALID) - 1), mutations=st.lists(_MUTATION, max_size=3))
def test_classify_mutated_datagrams_matches_reference(index, mutations):
    data = bytearray(VALID[index])
    for kind, where, value in mutations:
        if kind == "byte" and data:
            data[where % len(data)] = value
        elif kind == "i32" and len(data) >= 4:
            at = (where % len(data)) & ~3
            if at + 4 <= len(data):
                data[at : at + 4] = struct.pack("<i", value)
        elif kind == "length":
            data = data[: max(0, len(data) + where)] if where < 0 else data + bytes(where)
    expected = ref.classify(bytes(data))
    buf = guarded(len(data))
    buf[:] = np.frombuffer(bytes(data), np.uint8)
    assert uf.classify_datagram(buf, 0, len(data)) == expected


def _assert_accepted_frame_fits(buf: np.ndarray, length: int, kind: int) -> None:
    """What classify promises its callers: the type's fixed part (and the decoders' reads) lie in the datagram."""
    assert kind in U.MIN_FRAME_LENGTH_BY_TYPE
    frame_length = int(buf[:4].view(np.int32)[0])
    if kind in (F.HDR_TYPE_DATA, F.HDR_TYPE_PAD):
        assert length >= 32
        assert uf.decode_data_header(buf, 0)[0] == frame_length
    else:
        assert U.MIN_FRAME_LENGTH_BY_TYPE[kind] <= frame_length <= length


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=0, max_size=300), at_end=st.booleans(), header=st.none() | st.tuples(
    st.integers(-64, 400), st.sampled_from([0, 1]), FLAGS,
    st.sampled_from(sorted(U.MIN_FRAME_LENGTH_BY_TYPE) + [8, 0xFFFF])))
def test_classify_garbage_never_reads_outside_and_matches_reference(data, at_end, header):
    """Random bytes against a guard page (a read past either end would crash the test process)."""
    data = bytearray(data)
    if header is not None and len(data) >= 8:
        # Mostly-plausible headers reach the deeper checks more often than uniform bytes do.
        frame_length, version, flags, frame_type = header
        data[:8] = struct.pack("<iBBH", frame_length, version, flags, frame_type)
    buf = guarded(len(data), at_end=at_end)
    buf[:] = np.frombuffer(bytes(data), np.uint8)
    kind = uf.classify_datagram(buf, 0, len(data))
    assert kind == ref.classify(bytes(data))
    if kind >= 0:
        _assert_accepted_frame_fits(buf, len(data), kind)
    for offset, length in ((0, len(data) + 1), (len(data), 1), (-1, 1)):
        assert uf.classify_datagram(buf, offset, length) == U.INVALID_BOUNDS
