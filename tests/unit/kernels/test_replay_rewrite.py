"""Record-checksum and replay-rewrite kernels over frame blocks, against tests/reference/replay_rewrite.py."""

import struct

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import replay_rewrite as R
from aeron_numba.kernels.crc32 import Crc32
from aeron_numba.kernels.crc32c import Crc32c
from aeron_numba.layout import checksum as K
from aeron_numba.layout.mapped_file import MappedFile
from tests.reference import replay_rewrite as REF
from tests.reference.crc import crc32c_reference, to_int32

HYPOTHESIS = settings(max_examples=120, deadline=None)
I32 = st.integers(-(2**31), 2**31 - 1)
ALGORITHMS = st.sampled_from([K.CHECKSUM_NONE, K.CHECKSUM_CRC32, K.CHECKSUM_CRC32C])
GUARD = 0x5A


def test_status_codes_mirror_reference_and_are_distinct():
    codes = (K.CHECKSUM_MISMATCH, K.MALFORMED_FRAME, K.FRAME_PAST_END, K.INVALID_ARGUMENT)
    assert codes == (REF.CHECKSUM_MISMATCH, REF.MALFORMED_FRAME, REF.FRAME_PAST_END, REF.INVALID_ARGUMENT)
    assert len(set(codes)) == 4 and all(c < 0 for c in codes)
    assert K.REWRITE_OUT_LENGTH == 3


# --- block generation --------------------------------------------------------------------------------------


@st.composite
def frames(draw):
    is_data = draw(st.booleans()) or draw(st.booleans())
    if is_data:
        payload = draw(st.integers(0, 300))
        frame_type, frame_length = REF.DATA, 32 + payload
    else:
        frame_type, frame_length = REF.PAD, draw(st.integers(32, 600))
    aligned = REF.align32(frame_length)
    # Bytes after the header up to the aligned end: payload and alignment gap, anything at all.
    body = draw(st.binary(min_size=aligned - 32, max_size=aligned - 32))
    return REF.build_frame(
        frame_type,
        frame_length,
        flags=draw(st.sampled_from([0xC0, 0x80, 0x00, 0x40, 0xE0, draw(st.integers(0, 255))])),
        term_offset=draw(st.integers(0, 2**20)),
        session_id=draw(I32),
        stream_id=draw(I32),
        term_id=draw(I32),
        reserved=draw(st.integers(-(2**63), 2**63 - 1)),
        body=body,
    )


@st.composite
def blocks(draw, min_frames=0):
    """``(buffer, offset, length)``: a block of whole frames at a 32-aligned offset between guard bytes."""
    parts = draw(st.lists(frames(), min_size=min_frames, max_size=12))
    block = b"".join(parts)
    offset = 32 * draw(st.integers(0, 3))
    suffix = draw(st.integers(0, 64))
    raw = bytes([GUARD]) * offset + block + bytes([GUARD]) * suffix
    return np.frombuffer(bytearray(raw), dtype=np.uint8), offset, len(block)


def run_record(buf, offset, length, algorithm):
    out = np.full(K.REWRITE_OUT_LENGTH, -99, dtype=np.int64)
    status = R.record_checksums(buf, offset, length, algorithm, out)
    return int(status), out.tolist()


def run_replay(buf, offset, length, session_id, stream_id, algorithm):
    out = np.full(K.REWRITE_OUT_LENGTH, -99, dtype=np.int64)
    status = R.replay_rewrite(buf, offset, length, session_id, stream_id, algorithm, out)
    return int(status), out.tolist()


def changed_positions(before: bytes, after: np.ndarray):
    after = after.tobytes()
    return {i for i in range(len(before)) if before[i] != after[i]}


# --- property tests ----------------------------------------------------------------------------------------


@given(blocks(), ALGORITHMS)
@HYPOTHESIS
def test_record_checksums_matches_reference_and_touches_only_session_ids(block, algorithm):
    buf, offset, length = block
    original = buf.tobytes()
    expected = bytearray(original)
    got = run_record(buf, offset, length, algorithm)
    assert got == REF.record_checksums_reference(expected, offset, length, algorithm)
    assert buf.tobytes() == bytes(expected)
    allowed = set()
    for pos, frame_type, aligned in REF.frame_offsets(original, offset, length):
        if frame_type == REF.DATA and algorithm != K.CHECKSUM_NONE:
            allowed.update(range(pos + 12, pos + 16))
            stored = struct.unpack_from("<i", buf, pos + 12)[0]
            assert stored == R.new_checksum(algorithm).compute(buf, pos + 32, aligned - 32)
    assert changed_positions(original, buf) <= allowed


@given(blocks(), I32, I32)
@HYPOTHESIS
def test_replay_rewrite_without_checksum_changes_only_data_ids(block, session_id, stream_id):
    buf, offset, length = block
    original = buf.tobytes()
    expected = bytearray(original)
    got = run_replay(buf, offset, length, session_id, stream_id, K.CHECKSUM_NONE)
    assert got == REF.replay_rewrite_reference(expected, offset, length, session_id, stream_id, 0)
    assert got == (length, [offset + length, 0, 0])
    assert buf.tobytes() == bytes(expected)
    allowed = set()
    for pos, frame_type, aligned in REF.frame_offsets(original, offset, length):
        header = struct.unpack_from("<iBBHiiiiq", buf, pos)
        before = struct.unpack_from("<iBBHiiiiq", original, pos)
        if frame_type == REF.DATA:
            allowed.update(range(pos + 12, pos + 20))
            assert header[5:7] == (session_id, stream_id)
        else:
            assert header == before  # PAD frames stay as they are
        # frame_length, version, flags, type, term_offset, term_id and reserved value are preserved.
        assert header[:5] + header[7:] == before[:5] + before[7:]
    assert changed_positions(original, buf) <= allowed


@given(blocks(), ALGORITHMS, I32, I32)
@HYPOTHESIS
def test_record_then_replay_round_trip(block, algorithm, session_id, stream_id):
    buf, offset, length = block
    original = buf.tobytes()
    assert run_record(buf, offset, length, algorithm) == (length, [offset + length, 0, 0])
    assert run_replay(buf, offset, length, session_id, stream_id, algorithm) == (length, [offset + length, 0, 0])
    # After a round trip the block equals the original with the DATA frames' ids replaced.
    expected = bytearray(original)
    for pos, frame_type, _ in REF.frame_offsets(original, offset, length):
        if frame_type == REF.DATA:
            struct.pack_into("<ii", expected, pos + 12, session_id, stream_id)
    assert buf.tobytes() == bytes(expected)


@given(blocks(min_frames=1), st.sampled_from([K.CHECKSUM_CRC32, K.CHECKSUM_CRC32C]), st.data())
@HYPOTHESIS
def test_checksum_mismatch_is_reported_at_the_corrupted_frame(block, algorithm, data):
    buf, offset, length = block
    run_record(buf, offset, length, algorithm)
    layout = REF.frame_offsets(buf.tobytes(), offset, length)
    data_frames = [(pos, aligned) for pos, frame_type, aligned in layout if frame_type == REF.DATA]
    if not data_frames:  # an all-PAD block: any corruption of a PAD body goes unnoticed, by design
        pos, _, aligned = layout[0]
        if aligned > 32:
            buf[pos + 32] ^= 0xFF
        assert run_replay(buf, offset, length, 1, 2, algorithm)[0] == length
        return
    bad_pos, aligned = data.draw(st.sampled_from(data_frames))
    # Corrupt a checksummed byte (payload or alignment gap) or the stored checksum itself.
    target = data.draw(st.sampled_from(list(range(bad_pos + 32, bad_pos + aligned)) + [bad_pos + 12, bad_pos + 15]))
    buf[target] ^= 1 << data.draw(st.integers(0, 7))
    corrupted = buf.tobytes()
    expected = bytearray(corrupted)
    ref = REF.replay_rewrite_reference(expected, offset, length, 5, 6, algorithm)
    got = run_replay(buf, offset, length, 5, 6, algorithm)
    assert got == ref
    assert got[0] == K.CHECKSUM_MISMATCH and got[1][0] == bad_pos
    assert got[1][1] == R.new_checksum(algorithm).compute(buf, bad_pos + 32, aligned - 32)
    assert got[1][2] == struct.unpack_from("<i", corrupted, bad_pos + 12)[0]
    assert buf.tobytes() == bytes(expected)
    # Frames from the bad one on are untouched; frames before it were rewritten.
    assert buf.tobytes()[bad_pos:] == corrupted[bad_pos:]
    for pos, _ in data_frames:
        if pos < bad_pos:
            assert struct.unpack_from("<ii", buf, pos + 12) == (5, 6)


@st.composite
def garbled_blocks(draw):
    """A valid block with random bytes of random headers overwritten (lengths, types), or pure noise."""
    if draw(st.booleans()):
        buf, offset, length = draw(blocks())
        for _ in range(draw(st.integers(1, 4))):
            if buf.size == 0:
                break
            pos = 32 * draw(st.integers(0, max(0, buf.size // 32 - 1))) + draw(st.integers(0, 7))
            if pos < buf.size:
                buf[pos] = draw(st.integers(0, 255))
    else:
        raw = draw(st.binary(min_size=0, max_size=1024))
        buf = np.frombuffer(bytearray(raw), dtype=np.uint8)
        offset = draw(st.integers(-64, buf.size + 64))
        length = draw(st.integers(-64, buf.size + 64))
        if draw(st.booleans()):  # mostly aligned, so the frame walk actually runs
            offset, length = offset & ~31, length & ~31
    return buf, offset, length


@given(garbled_blocks(), st.integers(-1, 3), I32, I32)
@settings(max_examples=200, deadline=None)
def test_garbage_is_rejected_exactly_like_the_reference(block, algorithm, session_id, stream_id):
    buf, offset, length = block
    replay_buf, record_buf = buf.copy(), buf.copy()
    replay_expected, record_expected = bytearray(buf.tobytes()), bytearray(buf.tobytes())
    got = run_replay(replay_buf, offset, length, session_id, stream_id, algorithm)
    assert got == REF.replay_rewrite_reference(replay_expected, offset, length, session_id, stream_id, algorithm)
    assert replay_buf.tobytes() == bytes(replay_expected)
    got = run_record(record_buf, offset, length, algorithm)
    assert got == REF.record_checksums_reference(record_expected, offset, length, algorithm)
    assert record_buf.tobytes() == bytes(record_expected)


# --- explicit malformed cases ---------------------------------------------------------------------------------


def two_frame_block(second_length: int, second_type: int = REF.DATA) -> np.ndarray:
    """A 64-byte DATA frame then a header at 64 with the given length/type, in a 128-byte block."""
    first = REF.build_frame(REF.DATA, 50, session_id=1, stream_id=2, body=bytes(range(32)))
    second = struct.pack("<iBBHiiiiq", second_length, 0, 0xC0, second_type, 64, 1, 2, 3, 4) + bytes(32)
    return np.frombuffer(bytearray(first + second), dtype=np.uint8)


@pytest.mark.parametrize(
    "frame_length, frame_type, status",
    [
        (0, REF.DATA, K.MALFORMED_FRAME),
        (-1, REF.DATA, K.MALFORMED_FRAME),
        (-(2**31), REF.PAD, K.MALFORMED_FRAME),
        (31, REF.DATA, K.MALFORMED_FRAME),
        (64, 2, K.MALFORMED_FRAME),  # NAK: not a frame type of a term
        (64, 0xFFFF, K.MALFORMED_FRAME),
        (65, REF.DATA, K.FRAME_PAST_END),  # aligned 96 > 64 bytes left
        (65, REF.PAD, K.FRAME_PAST_END),
        (2**31 - 1, REF.DATA, K.FRAME_PAST_END),
        (64, REF.DATA, 128),
        (33, REF.PAD, 128),
    ],
)
@pytest.mark.parametrize("algorithm", [K.CHECKSUM_NONE, K.CHECKSUM_CRC32C])
def test_bad_second_frame(frame_length, frame_type, status, algorithm):
    buf = two_frame_block(frame_length, frame_type)
    # Recording stops at the same frame, after putting the first frame's checksum in place.
    recorded = run_record(buf, 0, 128, algorithm)
    assert recorded == ((128, [128, 0, 0]) if status > 0 else (status, [64, frame_length, frame_type]))
    got = run_replay(buf, 0, 128, 7, 8, algorithm)
    if status > 0:
        assert got == (128, [128, 0, 0])
        assert struct.unpack_from("<ii", buf, 12) == (7, 8)
    else:
        assert got == (status, [64, frame_length, frame_type])
        assert struct.unpack_from("<ii", buf, 12) == (7, 8)  # the good first frame was rewritten
        assert struct.unpack_from("<iBBH", buf, 64) == (frame_length, 0, 0xC0, frame_type)


def test_truncated_read_can_resume_at_the_cut_frame():
    """FRAME_PAST_END after the block start: the caller re-reads from out[0] with more bytes."""
    frames_ = [REF.build_frame(REF.DATA, 32 + n, body=bytes([n]) * n) for n in (10, 100, 40)]
    block = b"".join(frames_)
    buf = np.frombuffer(bytearray(block), dtype=np.uint8)
    cut = len(frames_[0]) + 64  # inside the second frame
    assert run_record(buf, 0, len(block), K.CHECKSUM_CRC32) == (len(block), [len(block), 0, 0])
    status, out = run_replay(buf, 0, cut, 3, 4, K.CHECKSUM_CRC32)
    assert (status, out[0]) == (K.FRAME_PAST_END, len(frames_[0]))
    status, out = run_replay(buf, out[0], len(block) - out[0], 3, 4, K.CHECKSUM_CRC32)
    assert status == len(block) - len(frames_[0])
    for pos in (0, len(frames_[0]), len(frames_[0]) + len(frames_[1])):
        assert struct.unpack_from("<ii", buf, pos + 12) == (3, 4)


@pytest.mark.parametrize(
    "offset, length, algorithm, out_length",
    [
        (1, 64, 0, 3),  # misaligned offset
        (0, 63, 0, 3),  # misaligned length
        (-32, 64, 0, 3),
        (0, 160, 0, 3),  # past the buffer
        (96, 64, 0, 3),
        (0, -32, 0, 3),
        (2**62, 2**62, 0, 3),
        (0, 128, 3, 3),  # unknown algorithm
        (0, 128, -1, 3),
        (0, 128, 0, 2),  # out array too short
    ],
)
def test_invalid_arguments_touch_nothing(offset, length, algorithm, out_length):
    buf = two_frame_block(64)
    before = buf.tobytes()
    for fn, args in (
        (R.replay_rewrite, (9, 9, algorithm)),
        (R.record_checksums, (algorithm,)),
    ):
        out = np.full(out_length, -99, dtype=np.int64)
        assert fn(buf, offset, length, *args, out) == K.INVALID_ARGUMENT
        if out_length >= K.REWRITE_OUT_LENGTH:
            assert out.tolist() == [offset, 0, 0]
        else:
            assert out.tolist() == [-99] * out_length
    assert buf.tobytes() == before


def test_empty_block_is_fine():
    buf = np.zeros(64, dtype=np.uint8)
    assert run_replay(buf, 32, 0, 1, 2, K.CHECKSUM_CRC32C) == (0, [32, 0, 0])
    assert run_record(buf, 64, 0, K.CHECKSUM_CRC32C) == (0, [64, 0, 0])


def test_pad_frames_are_not_checksummed():
    pad = REF.build_frame(REF.PAD, 96, session_id=123, stream_id=456, body=b"\x01" * 64)
    data = REF.build_frame(REF.DATA, 40, session_id=7, body=b"payload!")
    buf = np.frombuffer(bytearray(pad + data), dtype=np.uint8)
    assert run_record(buf, 0, buf.size, K.CHECKSUM_CRC32C)[0] == buf.size
    assert struct.unpack_from("<ii", buf, 12) == (123, 456)
    expected = to_int32(crc32c_reference(b"payload!" + bytes(24)))
    assert struct.unpack_from("<i", buf, 96 + 12)[0] == expected
    assert run_replay(buf, 0, buf.size, 1, 2, K.CHECKSUM_CRC32C)[0] == buf.size
    assert struct.unpack_from("<ii", buf, 12) == (123, 456)
    assert struct.unpack_from("<ii", buf, 96 + 12) == (1, 2)


def test_on_a_mapped_segment_file(shm_dir):
    block = b"".join(REF.build_frame(REF.DATA, 32 + n, session_id=n, body=bytes([n]) * n) for n in range(1, 60, 7))
    with MappedFile.create(shm_dir / "0-0.rec", 65536) as segment:
        segment.buffer[4096 : 4096 + len(block)] = np.frombuffer(block, dtype=np.uint8)
        rewriter = R.ReplayFrameRewriter(-17, 1001, K.CHECKSUM_CRC32C)
        assert R.RecordChecksumWriter(K.CHECKSUM_CRC32C).apply(segment.buffer, 4096, len(block)) == len(block)
        assert rewriter.rewrite(segment.buffer, 4096, len(block)) == len(block)
        for pos, _, _ in REF.frame_offsets(segment.buffer.tobytes(), 4096, len(block)):
            assert struct.unpack_from("<ii", segment.buffer, pos + 12) == (-17, 1001)


def py(fn):
    """The plain-Python body of a kernel (the kernel itself when NUMBA_DISABLE_JIT=1 made it a function)."""
    return getattr(fn, "py_func", fn)


# --- plain-Python variants ------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", [K.CHECKSUM_NONE, K.CHECKSUM_CRC32, K.CHECKSUM_CRC32C])
def test_py_func_variants_match_compiled(algorithm):
    block = b"".join(
        [
            REF.build_frame(REF.DATA, 77, flags=0x80, session_id=3, reserved=-5, body=bytes(range(45))),
            REF.build_frame(REF.PAD, 100, body=b"\x09" * 96),
            REF.build_frame(REF.DATA, 32, flags=0x40),
        ]
    )
    compiled = np.frombuffer(bytearray(block), dtype=np.uint8)
    python = compiled.copy()
    out_c, out_p = np.zeros(3, np.int64), np.zeros(3, np.int64)
    assert R.record_checksums(compiled, 0, len(block), algorithm, out_c) == len(block)
    assert py(R.record_checksums)(python, 0, len(block), algorithm, out_p) == len(block)
    assert compiled.tobytes() == python.tobytes()
    assert R.replay_rewrite(compiled, 0, len(block), -8, 9, algorithm, out_c) == len(block)
    assert py(R.replay_rewrite)(python, 0, len(block), -8, 9, algorithm, out_p) == len(block)
    assert compiled.tobytes() == python.tobytes()
    assert out_c.tolist() == out_p.tolist()
    # And the error path: a corrupted DATA payload.
    if algorithm != K.CHECKSUM_NONE:
        R.record_checksums(compiled, 0, len(block), algorithm, out_c)
        compiled[40] ^= 0x10
        python = compiled.copy()
        assert R.replay_rewrite(compiled, 0, len(block), 1, 1, algorithm, out_c) == K.CHECKSUM_MISMATCH
        assert py(R.replay_rewrite)(python, 0, len(block), 1, 1, algorithm, out_p) == K.CHECKSUM_MISMATCH
        assert out_c.tolist() == out_p.tolist() and out_c[0] == 0
    assert py(R.frame_checksum)(algorithm, compiled, 32, 64) == R.frame_checksum(algorithm, compiled, 32, 64)


# --- wrappers -------------------------------------------------------------------------------------------------


def test_wrappers_validate_with_typed_errors():
    with pytest.raises(ConfigurationError, match="session_id=2147483648"):
        R.ReplayFrameRewriter(2**31, 1)
    with pytest.raises(ConfigurationError, match="stream_id=-2147483649"):
        R.ReplayFrameRewriter(1, -(2**31) - 1)
    with pytest.raises(ConfigurationError, match="checksum_algorithm=5"):
        R.RecordChecksumWriter(5)
    rewriter = R.ReplayFrameRewriter(1, 2, K.checksum_algorithm("CRC-32"))
    buf = two_frame_block(64)
    with pytest.raises(ConfigurationError, match="multiples of FRAME_ALIGNMENT=32"):
        rewriter.rewrite(buf, 0, 100)
    with pytest.raises(ConfigurationError, match=r"offset=64 \+ length=128 outside buffer capacity=128"):
        rewriter.rewrite(buf, 64, 128)
    with pytest.raises(LayoutError, match="read-only"):
        rewriter.rewrite(bytes(128), 0, 128)
    with pytest.raises(LayoutError, match="read-only"):
        R.RecordChecksumWriter(K.CHECKSUM_CRC32C).apply(np.frombuffer(bytes(64), dtype=np.uint8), 0, 64)
    assert isinstance(R.new_checksum(K.CHECKSUM_CRC32), Crc32)
    assert isinstance(R.new_checksum(K.CHECKSUM_CRC32C), Crc32c)
    assert R.new_checksum(K.CHECKSUM_NONE) is None
    # No record checksum in place: the CRC-32 replay reports the first DATA frame.
    assert rewriter.rewrite(buf, 0, 128) == K.CHECKSUM_MISMATCH
    assert rewriter.error_offset == 0 and rewriter.stored_checksum == 1
    assert rewriter.computed_checksum == Crc32().compute(buf, 32, 32)


def test_kernels_refuse_read_only_buffers():
    """Writing through a pointer into a read-only mapping would fault: typing rejects it instead (and numpy
    refuses the store in plain Python)."""
    readonly = np.frombuffer(REF.build_frame(REF.DATA, 40), dtype=np.uint8)
    out = np.zeros(3, dtype=np.int64)
    expected = ValueError if numba.config.DISABLE_JIT else numba.core.errors.TypingError
    with pytest.raises(expected):
        R.replay_rewrite(readonly, 0, 64, 1, 2, 0, out)
    with pytest.raises(expected):
        R.record_checksums(readonly, 0, 64, K.CHECKSUM_CRC32C, out)
