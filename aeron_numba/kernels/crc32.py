"""CRC-32 (IEEE 802.3 / zlib) over a byte range of a ``np.uint8`` array: Aeron Archive's ``Crc32`` checksum
(spec/archive.md §4.3), equal to Python's ``zlib.crc32``.

Table method: slicing tables (``table[k][b]`` = CRC register of byte ``b`` followed by ``k`` zero bytes)
fold 8 or 16 input bytes per step with independent lookups instead of a byte-long dependency chain. Long
inputs run in blocks of three 256-byte lanes, three independent chains whose table loads the CPU overlaps,
merged with "shift" tables (:func:`make_shift_tables`): about 1.6x the speed of one chain. The tables are
module-level numpy arrays, so numba freezes them into the compiled code as constants (20 KiB). The generic
pieces (:func:`make_crc_tables`, :func:`make_shift_tables`, :func:`crc_table_update`, :func:`crc_shift`,
:func:`crc_to_int32`) are shared with CRC-32C (``kernels/crc32c.py``), which passes its own tables.

Values: a running *register* is the CRC state before the final complement; the public kernels take and
return finished CRC values like zlib (``crc32_update(crc32_unsigned(a), b) == crc32_unsigned(a + b)``).
Aeron stores checksums as i32, hence :func:`crc32` returns the signed value.

Input words are read little-endian through an ``int64`` view of the byte range (every platform numba
targets here is little-endian, as is every Aeron format). The bytes read are payload: callers have made them
stable (acquired a position that covers them) before computing a checksum, so plain loads are fine.
All kernels also run as plain Python (``py_func`` / ``NUMBA_DISABLE_JIT=1``), only slowly.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.layout.checksum import CRC32_POLYNOMIAL, CRC_INITIAL_VALUE, CRC_INVALID_RANGE, CRC_MASK

SLICES = 16
#: Interleaving: inputs of at least one block run as three lanes of ``LANE_LENGTH`` bytes whose CRCs are
#: independent dependency chains (the CPU overlaps their table loads), merged with the shift tables.
LANE_WORDS = 32
LANE_LENGTH = LANE_WORDS * 8
BLOCK_WORDS = 3 * LANE_WORDS


def make_crc_tables(polynomial: int, slices: int = SLICES) -> np.ndarray:
    """``uint32[slices, 256]`` slicing tables for a reflected ``polynomial``: ``t[0]`` is the classic
    byte-at-a-time table, ``t[k][b] = (t[k-1][b] >> 8) ^ t[0][t[k-1][b] & 0xFF]``."""
    tables = np.zeros((slices, 256), dtype=np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ polynomial if c & 1 else c >> 1
        tables[0, b] = c
    for k in range(1, slices):
        for b in range(256):
            prev = int(tables[k - 1, b])
            tables[k, b] = (prev >> 8) ^ int(tables[0, prev & 0xFF])
    return tables


def make_shift_tables(tables: np.ndarray, shift_length: int = LANE_LENGTH) -> np.ndarray:
    """``uint32[4, 256]``: ``s[k][b]`` = the register ``b << 8k`` advanced over ``shift_length`` zero bytes.

    Advancing a register over zeros is linear over GF(2), so the image of any register is the XOR of the
    images of its four bytes; the 32 basis images are computed by running the byte table over the zeros.
    This is what merges lanes: ``crc(A|B) = shift(crc(A)) ^ crc_from_zero(B)`` for ``len(B) = shift_length``.
    """
    table0 = tables[0]
    basis = []
    for bit in range(32):
        register = 1 << bit
        for _ in range(shift_length):
            register = int(table0[register & 0xFF]) ^ (register >> 8)
        basis.append(register)
    shift = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for b in range(256):
            image = 0
            for bit in range(8):
                if (b >> bit) & 1:
                    image ^= basis[8 * k + bit]
            shift[k, b] = image
    return shift


CRC32_TABLES = make_crc_tables(CRC32_POLYNOMIAL)
CRC32_SHIFT_TABLES = make_shift_tables(CRC32_TABLES)


@kernel
def crc_to_int32(value):
    """The low 32 bits of ``value`` as a signed i32 (how Aeron stores a checksum)."""
    return ((value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


@kernel
def crc_range_is_valid(buf, offset, length):
    """True if ``buf[offset:offset+length]`` lies inside ``buf`` (no overflow for any int64 inputs)."""
    return offset >= 0 and length >= 0 and offset <= buf.size - length


@kernel
def crc_shift(shift_tables, register):
    """Advance ``register`` over ``LANE_LENGTH`` zero bytes (four lookups, see :func:`make_shift_tables`)."""
    s = shift_tables
    return np.int64(
        s[0, register & 0xFF] ^ s[1, (register >> 8) & 0xFF] ^ s[2, (register >> 16) & 0xFF]
        ^ s[3, (register >> 24) & 0xFF]
    )


@kernel
def _slice8(t, crc, word):
    """Fold one little-endian 8-byte word into the register: eight independent lookups."""
    # Arithmetic shifts of a negative word only bring sign bits above bit 56, which "& 0xFF" drops.
    w = crc ^ word
    return np.int64(
        t[7, w & 0xFF] ^ t[6, (w >> 8) & 0xFF] ^ t[5, (w >> 16) & 0xFF] ^ t[4, (w >> 24) & 0xFF]
        ^ t[3, (w >> 32) & 0xFF] ^ t[2, (w >> 40) & 0xFF] ^ t[1, (w >> 48) & 0xFF] ^ t[0, (w >> 56) & 0xFF]
    )


@kernel
def crc_table_update(tables, shift_tables, crc, buf, offset, length):
    """Advance a reflected CRC *register* over ``buf[offset:offset+length]`` with lookup tables.

    Whole blocks of three lanes run slicing-by-8 on three interleaved chains, the rest slicing-by-16, the
    last bytes one at a time.

    Parameters
    ----------
    tables : uint32[16, 256]
        Tables from :func:`make_crc_tables` (a frozen global when called from a kernel).
    shift_tables : uint32[4, 256]
        :func:`make_shift_tables` of ``tables``.
    crc : int64
        Register in ``[0, 2**32)`` (``0xFFFFFFFF`` to start; not complemented).
    buf : uint8[::1]
    offset, length : int64
        Range already checked by the caller (no bounds checks here).

    Returns
    -------
    int64
        The new register, in ``[0, 2**32)``.
    """
    t = tables
    crc = np.int64(crc)
    n8 = length >> 3
    words = buf[offset:offset + (n8 << 3)].view(np.int64)
    base = 0
    while n8 - base >= BLOCK_WORDS:
        a = crc
        b = np.int64(0)
        c = np.int64(0)
        for k in range(base, base + LANE_WORDS):
            a = _slice8(t, a, words[k])
            b = _slice8(t, b, words[k + LANE_WORDS])
            c = _slice8(t, c, words[k + 2 * LANE_WORDS])
        crc = crc_shift(shift_tables, crc_shift(shift_tables, a) ^ b) ^ c
        base += BLOCK_WORDS
    while n8 - base >= 2:
        w = crc ^ words[base]
        v = words[base + 1]
        crc = np.int64(
            t[15, w & 0xFF] ^ t[14, (w >> 8) & 0xFF] ^ t[13, (w >> 16) & 0xFF] ^ t[12, (w >> 24) & 0xFF]
            ^ t[11, (w >> 32) & 0xFF] ^ t[10, (w >> 40) & 0xFF] ^ t[9, (w >> 48) & 0xFF] ^ t[8, (w >> 56) & 0xFF]
            ^ t[7, v & 0xFF] ^ t[6, (v >> 8) & 0xFF] ^ t[5, (v >> 16) & 0xFF] ^ t[4, (v >> 24) & 0xFF]
            ^ t[3, (v >> 32) & 0xFF] ^ t[2, (v >> 40) & 0xFF] ^ t[1, (v >> 48) & 0xFF] ^ t[0, (v >> 56) & 0xFF]
        )
        base += 2
    if base < n8:
        crc = _slice8(t, crc, words[base])
    tail = buf[offset + (n8 << 3):offset + length]
    for k in range(tail.size):
        crc = np.int64(t[0, (crc ^ np.int64(tail[k])) & 0xFF]) ^ (crc >> 8)
    return crc


@kernel
def crc32_register(crc, buf, offset, length):
    """Advance a CRC-32 register (not complemented) over a checked range; for other kernels."""
    return crc_table_update(CRC32_TABLES, CRC32_SHIFT_TABLES, crc, buf, offset, length)


@kernel
def crc32_update(crc, buf, offset, length):
    """Continue a CRC-32 over ``buf[offset:offset+length]``, like ``zlib.crc32(data, crc)``.

    Parameters
    ----------
    crc : int64
        A previous CRC-32 value (signed or unsigned; its low 32 bits are used), 0 to start.
    buf : uint8[::1]
    offset, length : int64

    Returns
    -------
    int64
        The unsigned CRC in ``[0, 2**32)``, or ``CRC_INVALID_RANGE`` if the range is not inside ``buf``.
    """
    if not crc_range_is_valid(buf, offset, length):
        return CRC_INVALID_RANGE
    register = (np.int64(crc) & CRC_MASK) ^ CRC_INITIAL_VALUE
    return crc32_register(register, buf, offset, length) ^ CRC_INITIAL_VALUE


@kernel
def crc32_unsigned(buf, offset, length):
    """CRC-32 of ``buf[offset:offset+length]`` in ``[0, 2**32)`` (== ``zlib.crc32``), or ``CRC_INVALID_RANGE``."""
    return crc32_update(0, buf, offset, length)


@kernel
def crc32(buf, offset, length):
    """CRC-32 of ``buf[offset:offset+length]`` as Aeron stores it (signed i32), or ``CRC_INVALID_RANGE``."""
    if not crc_range_is_valid(buf, offset, length):
        return CRC_INVALID_RANGE
    return crc_to_int32(crc32_register(CRC_INITIAL_VALUE, buf, offset, length) ^ CRC_INITIAL_VALUE)


def as_byte_buffer(buffer) -> np.ndarray:
    """A 1-D C-contiguous ``np.uint8`` view of ``buffer`` (ndarray, bytes, bytearray, memoryview, mmap)."""
    if isinstance(buffer, np.ndarray):
        if buffer.dtype != np.uint8 or buffer.ndim != 1 or not buffer.flags.c_contiguous:
            raise LayoutError(
                f"buffer dtype={buffer.dtype} ndim={buffer.ndim} c_contiguous={buffer.flags.c_contiguous}"
                " must be a 1-D C-contiguous uint8 array"
            )
        return buffer
    return np.frombuffer(buffer, dtype=np.uint8)


def check_range(buf: np.ndarray, offset: int, length: int | None) -> int:
    """Validate ``[offset, offset+length)`` against ``buf`` and return ``length`` (default: to the end)."""
    if offset < 0 or offset > buf.size:
        raise ConfigurationError(f"offset={offset} outside buffer capacity={buf.size}")
    if length is None:
        length = buf.size - offset
    if length < 0 or offset + length > buf.size:
        raise ConfigurationError(f"offset={offset} + length={length} > buffer capacity={buf.size}")
    return length


class Crc32:
    """Aeron Archive's ``Crc32`` checksum (``io.aeron.archive.checksum.Crc32``) for Python callers."""

    name = "CRC-32"

    def compute(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Checksum as Aeron stores it (signed i32)."""
        buf = as_byte_buffer(buffer)
        return int(crc32(buf, offset, check_range(buf, offset, length)))

    def compute_unsigned(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Checksum in ``[0, 2**32)``, equal to ``zlib.crc32``."""
        buf = as_byte_buffer(buffer)
        return int(crc32_unsigned(buf, offset, check_range(buf, offset, length)))

    def update(self, crc: int, buffer, offset: int = 0, length: int | None = None) -> int:
        """Continue ``crc`` (a previous result) over more bytes, like ``zlib.crc32(data, crc)``."""
        buf = as_byte_buffer(buffer)
        return int(crc32_update(crc, buf, offset, check_range(buf, offset, length)))
