"""CRC-32C and CRC-32 kernels against bitwise references, published check values and zlib."""

import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import crc32 as Z
from aeron_numba.kernels import crc32c as C
from aeron_numba.layout import checksum as K
from tests.reference.crc import (
    CRC32_POLY,
    CRC32C_POLY,
    crc32_reference,
    crc32c_reference,
    register_after_zeros,
    to_int32,
)

HYPOTHESIS = settings(max_examples=150, deadline=None)

# RFC 3720 B.4 (iSCSI) CRC-32C examples, and the common "123456789" check values.
CRC32C_VECTORS = [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"", 0x00000000),
]
CRC32_VECTORS = [
    (b"123456789", 0xCBF43926),
    (b"The quick brown fox jumps over the lazy dog", 0x414FA339),
    (b"", 0x00000000),
]


def as_buf(data: bytes) -> np.ndarray:
    return np.frombuffer(bytearray(data), dtype=np.uint8)


def padded(data: bytes, prefix: int, suffix: int = 5) -> np.ndarray:
    """``data`` placed at ``prefix`` inside a buffer whose other bytes are 0xA5 (must not be read)."""
    return as_buf(b"\xa5" * prefix + data + b"\xa5" * suffix)


# --- layout pins -----------------------------------------------------------------------------------------


def test_layout_constants_pin_spec():
    assert (K.CHECKSUM_NONE, K.CHECKSUM_CRC32, K.CHECKSUM_CRC32C) == (0, 1, 2)
    assert K.CRC32C_POLYNOMIAL == CRC32C_POLY == 0x82F63B78
    assert K.CRC32_POLYNOMIAL == CRC32_POLY == 0xEDB88320
    assert K.checksum_algorithm("CRC-32") == K.checksum_algorithm("io.aeron.archive.checksum.Crc32") == 1
    assert K.checksum_algorithm("CRC-32C") == K.checksum_algorithm("org.agrona.checksum.Crc32c") == 2
    assert K.checksum_algorithm(None) == K.checksum_algorithm("") == 0
    with pytest.raises(ConfigurationError, match="checksum='crc64'"):
        K.checksum_algorithm("crc64")
    with pytest.raises(ConfigurationError, match="checksum_algorithm=3"):
        K.check_checksum_algorithm(3)
    # The invalid-range sentinel is neither a signed nor an unsigned 32-bit value.
    assert K.CRC_INVALID_RANGE < -(1 << 31)


def test_tables_pin_classic_values():
    assert int(Z.CRC32_TABLES[0, 1]) == 0x77073096
    assert int(Z.CRC32_TABLES[0, 255]) == 0x2D02EF8D
    assert int(C.CRC32C_TABLES[0, 1]) == 0xF26B8303
    assert int(C.CRC32C_TABLES[0, 255]) == 0xAD7D5351
    assert C.CRC32C_TABLES.shape == Z.CRC32_TABLES.shape == (16, 256)


@given(st.integers(0, 0xFFFFFFFF))
@settings(max_examples=30, deadline=None)
def test_shift_tables_advance_over_one_lane_of_zeros(register):
    assert Z.LANE_LENGTH == 256
    assert Z.crc_shift(C.CRC32C_SHIFT_TABLES, register) == register_after_zeros(CRC32C_POLY, register, 256)
    assert Z.crc_shift(Z.CRC32_SHIFT_TABLES, register) == register_after_zeros(CRC32_POLY, register, 256)


# --- check values ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, expected", CRC32C_VECTORS)
def test_crc32c_check_values(data, expected):
    buf = padded(data, 3)
    assert crc32c_reference(data) == expected
    assert C.crc32c_unsigned(buf, 3, len(data)) == expected
    assert C.crc32c(buf, 3, len(data)) == to_int32(expected)
    assert C.crc32c_update(0, buf, 3, len(data)) == expected
    register = C.crc32c_table_update(0xFFFFFFFF, buf, 3, len(data))
    assert register ^ 0xFFFFFFFF == expected
    assert C.Crc32c().compute(data) == to_int32(expected)
    assert C.Crc32c().compute_unsigned(data) == expected


def test_crc32c_123456789_is_negative_as_stored_by_aeron():
    assert C.crc32c(as_buf(b"123456789"), 0, 9) == 0xE3069283 - (1 << 32) == -486108541


@pytest.mark.parametrize("data, expected", CRC32_VECTORS)
def test_crc32_check_values(data, expected):
    buf = padded(data, 7)
    assert zlib.crc32(data) == crc32_reference(data) == expected
    assert Z.crc32_unsigned(buf, 7, len(data)) == expected
    assert Z.crc32(buf, 7, len(data)) == to_int32(expected)
    assert Z.Crc32().compute_unsigned(data) == expected


# --- property tests ----------------------------------------------------------------------------------------


@st.composite
def placed_bytes(draw, max_size=2500):
    data = draw(st.binary(min_size=0, max_size=max_size))
    prefix = draw(st.integers(0, 40))
    suffix = draw(st.integers(0, 9))
    return data, prefix, padded(data, prefix, suffix)


@given(placed_bytes())
@HYPOTHESIS
def test_crc32c_matches_bitwise_reference(case):
    data, offset, buf = case
    expected = crc32c_reference(data)
    assert C.crc32c_unsigned(buf, offset, len(data)) == expected
    assert C.crc32c(buf, offset, len(data)) == to_int32(expected)
    assert C.crc32c_table_update(0xFFFFFFFF, buf, offset, len(data)) ^ 0xFFFFFFFF == expected


@given(placed_bytes())
@HYPOTHESIS
def test_crc32_matches_bitwise_reference_and_zlib(case):
    data, offset, buf = case
    expected = crc32_reference(data)
    assert zlib.crc32(data) == expected
    assert Z.crc32_unsigned(buf, offset, len(data)) == expected
    assert Z.crc32(buf, offset, len(data)) == to_int32(expected)


@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=4), st.booleans())
@HYPOTHESIS
def test_running_crc_continues_over_chunks(data, cuts, signed_carry):
    buf = as_buf(data)
    points = [0] + sorted(min(c, len(data)) for c in cuts) + [len(data)]
    crc_c = 0
    crc_z = 0
    for start, stop in zip(points, points[1:]):
        if signed_carry:  # Aeron hands around the signed value; only the low 32 bits matter.
            crc_c, crc_z = to_int32(crc_c), to_int32(crc_z)
        crc_c = C.crc32c_update(crc_c, buf, start, stop - start)
        crc_z = Z.crc32_update(crc_z, buf, start, stop - start)
        assert crc_z == zlib.crc32(data[:stop])
    assert crc_c == crc32c_reference(data)
    assert crc_z == crc32_reference(data)


@given(st.integers(0, 40_000), st.integers(0, 15), st.integers(0, 0xFFFFFFFF), st.integers(0, 2**32 - 1))
@HYPOTHESIS
def test_hardware_and_table_crc32c_agree(length, offset, register, seed):
    """Lengths across many 768-byte interleaved blocks, all tails and start alignments."""
    buf = np.random.default_rng(seed).integers(0, 256, offset + length + 3, dtype=np.uint8)
    table = C.crc32c_table_update(register, buf, offset, length)
    if C.HAS_HW_CRC32C:
        assert C.crc32c_register is C.crc32c_hw_update
        assert C.crc32c_hw_update(register, buf, offset, length) == table
    else:
        assert C.crc32c_register is C.crc32c_table_update
    # A register r is the running state of the finished value r ^ 0xFFFFFFFF.
    assert C.crc32c_update(register ^ 0xFFFFFFFF, buf, offset, length) == table ^ 0xFFFFFFFF


def test_large_buffers():
    rng = np.random.default_rng(7)
    buf = rng.integers(0, 256, (1 << 20) + 64, dtype=np.uint8)
    for offset, length in [(0, 1 << 20), (13, (1 << 20) - 5), (32, 65536), (1, 768 * 3 + 7)]:
        data = buf[offset : offset + length].tobytes()
        assert Z.crc32_unsigned(buf, offset, length) == zlib.crc32(data)
        table = C.crc32c_table_update(0xFFFFFFFF, buf, offset, length) ^ 0xFFFFFFFF
        assert C.crc32c_unsigned(buf, offset, length) == table
    # 4 KiB through the bitwise reference ties the table (and hardware) path to the definition.
    assert C.crc32c_unsigned(buf, 5, 4096) == crc32c_reference(buf[5:4101].tobytes())


# --- ranges and wrappers -----------------------------------------------------------------------------------

BAD_RANGES = [(-1, 3), (0, -1), (0, 101), (100, 1), (101, 0), (2**62, 2**62), (2**63 - 1, 2**63 - 1), (-(2**63), 5)]


@pytest.mark.parametrize("offset, length", BAD_RANGES)
def test_ranges_outside_buffer_return_invalid_range(offset, length):
    buf = np.zeros(100, dtype=np.uint8)
    for fn in (C.crc32c, C.crc32c_unsigned, Z.crc32, Z.crc32_unsigned):
        assert fn(buf, offset, length) == K.CRC_INVALID_RANGE
    assert C.crc32c_update(0, buf, offset, length) == K.CRC_INVALID_RANGE
    assert Z.crc32_update(0, buf, offset, length) == K.CRC_INVALID_RANGE


def test_edge_ranges_are_valid():
    buf = as_buf(b"abc")
    assert C.crc32c_unsigned(buf, 3, 0) == 0
    assert Z.crc32_unsigned(buf, 0, 3) == zlib.crc32(b"abc")


def test_wrappers_validate_with_typed_errors():
    crc = C.Crc32c()
    with pytest.raises(ConfigurationError, match=r"offset=2 \+ length=5 > buffer capacity=4"):
        crc.compute(b"abcd", 2, 5)
    with pytest.raises(ConfigurationError, match="offset=-1"):
        Z.Crc32().compute(b"abcd", -1)
    with pytest.raises(LayoutError, match="dtype=int32"):
        crc.compute(np.zeros(4, dtype=np.int32))
    with pytest.raises(LayoutError, match="c_contiguous=False"):
        crc.compute(np.zeros(8, dtype=np.uint8)[::2])
    assert crc.update(crc.compute(b"1234"), b"56789") == 0xE3069283
    assert Z.Crc32().update(Z.Crc32().compute(b"1234"), b"56789") == 0xCBF43926
    assert crc.compute(bytearray(b"x123456789"), 1) == to_int32(0xE3069283)


# --- plain-Python variants (what NUMBA_DISABLE_JIT=1 runs) ----------------------------------------------------

def py(fn):
    """The plain-Python body of a kernel (the kernel itself when NUMBA_DISABLE_JIT=1 made it a function)."""
    return getattr(fn, "py_func", fn)


PY_INPUTS = [b"", b"1", b"123456789", bytes(range(33)), bytes(range(256)) * 3 + b"xyz", bytes(range(7, 250)) * 7]


@pytest.mark.parametrize("data", PY_INPUTS)
def test_py_func_variants_match_reference(data):
    buf = padded(data, 5)
    n = len(data)
    expected_c, expected_z = crc32c_reference(data), crc32_reference(data)
    assert py(C.crc32c_table_update)(0xFFFFFFFF, buf, 5, n) ^ 0xFFFFFFFF == expected_c
    c_tables = (C.CRC32C_TABLES, C.CRC32C_SHIFT_TABLES)
    assert py(Z.crc_table_update)(*c_tables, 0xFFFFFFFF, buf, 5, n) ^ 0xFFFFFFFF == expected_c
    z_tables = (Z.CRC32_TABLES, Z.CRC32_SHIFT_TABLES)
    assert py(Z.crc_table_update)(*z_tables, 0xFFFFFFFF, buf, 5, n) ^ 0xFFFFFFFF == expected_z
    assert py(C.crc32c)(buf, 5, n) == to_int32(expected_c)
    assert py(C.crc32c_unsigned)(buf, 5, n) == expected_c
    carried = crc32c_reference(b"ab")
    assert py(C.crc32c_update)(to_int32(carried), buf, 5, n) == crc32c_reference(data, carried)
    assert py(Z.crc32)(buf, 5, n) == to_int32(expected_z)
    assert py(Z.crc32_update)(7, buf, 5, n) == zlib.crc32(data, 7)
    assert py(C.crc32c)(buf, -1, n) == K.CRC_INVALID_RANGE


_DISABLED_JIT_SCRIPT = r"""
import json, struct, zlib
import numpy as np
from aeron_numba.kernels import crc32, crc32c, replay_rewrite
buf = np.frombuffer(bytearray(b"123456789" * 5), dtype=np.uint8)
block = np.zeros(96, dtype=np.uint8)
struct.pack_into("<iBBHiiiiq", block, 0, 45, 0, 0xC0, 1, 0, 11, 12, 13, 99)
block[32:45] = 7
struct.pack_into("<iBBHiiiiq", block, 64, 32, 0, 0, 0, 64, 11, 12, 13, 0)
out = np.zeros(3, dtype=np.int64)
recorded = int(replay_rewrite.record_checksums(block, 0, 96, 2, out))
stored = struct.unpack_from("<i", block, 12)[0]
replayed = int(replay_rewrite.replay_rewrite(block, 0, 96, -3, 44, 2, out))
print(json.dumps({
    "hw": crc32c.HAS_HW_CRC32C,
    "is_python": not hasattr(crc32c.crc32c, "signatures"),
    "crc32c": int(crc32c.crc32c_unsigned(buf, 0, 9)),
    "crc32c_45": int(crc32c.crc32c_unsigned(buf, 0, 45)),
    "crc32": int(crc32.crc32_unsigned(buf, 0, 45)),
    "recorded": recorded, "stored": stored, "replayed": replayed,
    "ids": list(struct.unpack_from("<ii", block, 12)),
}))
"""


def test_kernels_run_with_jit_disabled():
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    done = subprocess.run(
        [sys.executable, "-c", _DISABLED_JIT_SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["hw"] is False
    assert result["is_python"] is True
    assert result["crc32c"] == 0xE3069283
    assert result["crc32c_45"] == crc32c_reference(b"123456789" * 5)
    assert result["crc32"] == zlib.crc32(b"123456789" * 5)
    assert result["recorded"] == 96 and result["replayed"] == 96
    assert result["stored"] == to_int32(crc32c_reference(bytes([7] * 13) + bytes(19)))
    assert result["ids"] == [-3, 44]
