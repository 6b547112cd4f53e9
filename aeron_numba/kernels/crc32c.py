"""CRC-32C (Castagnoli) over a byte range of a ``np.uint8`` array: Aeron Archive's ``Crc32c`` checksum
(spec/archive.md §4.3): reflected polynomial 0x82F63B78, init 0xFFFFFFFF, final complement.

Two implementations of the register update, identical in result:

* table: slicing-by-8/16 on three interleaved lanes (``kernels/crc32.py`` explains it), about 4 GB/s
  here; always available and the only one that runs as plain Python (``py_func``, ``NUMBA_DISABLE_JIT=1``).
* hardware: the SSE4.2 ``crc32`` instruction through the LLVM intrinsic ``llvm.x86.sse42.crc32.64.64``,
  8 bytes per instruction. The instruction has a 3-cycle latency but a throughput of one per cycle, so
  long inputs are cut into blocks of three 256-byte lanes whose CRCs run as three independent chains and
  are then merged: ``crc(A|B|C) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C)`` where ``shift`` advances a
  register over 256 zero bytes (linear, so four lookups in :data:`CRC32C_SHIFT_TABLES`, the same
  merge as the table method). About 24 GB/s on 1 MiB here versus 10 GB/s for one chain.

:data:`HAS_HW_CRC32C` selects the hardware version at import when the JIT is on, the machine is x86-64 and
the CPU features numba compiles for include SSE4.2; numba's on-disk cache is keyed by those features, so a
cached kernel never meets a CPU it was not built for.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel
from aeron_numba.kernels.crc32 import (
    BLOCK_WORDS,
    LANE_WORDS,
    as_byte_buffer,
    check_range,
    crc_range_is_valid,
    crc_shift,
    crc_table_update,
    crc_to_int32,
    make_crc_tables,
    make_shift_tables,
)
from aeron_numba.layout.checksum import CRC32C_POLYNOMIAL, CRC_INITIAL_VALUE, CRC_INVALID_RANGE, CRC_MASK

CRC32C_TABLES = make_crc_tables(CRC32C_POLYNOMIAL)
CRC32C_SHIFT_TABLES = make_shift_tables(CRC32C_TABLES)


def _numba_target_has_sse42() -> bool:
    """True if kernels are compiled (JIT on) for x86-64 with SSE4.2 among numba's target CPU features."""
    if numba.config.DISABLE_JIT:
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    from numba.core.codegen import get_host_cpu_features

    features = numba.config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return "+sse4.2" in str(features).split(",")


#: The hardware update is used by :func:`crc32c` and friends.
HAS_HW_CRC32C = _numba_target_has_sse42()


@intrinsic
def _sse42_crc32_u64(typingctx, crc, word):
    """``crc32q``: fold the 8 bytes of ``word`` (little-endian) into ``crc``; result < 2**32."""
    if not (isinstance(crc, types.Integer) and isinstance(word, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i64, [i64, i64]), "llvm.x86.sse42.crc32.64.64"
        )
        crc_value = context.cast(builder, args[0], sig.args[0], types.int64)
        word_value = context.cast(builder, args[1], sig.args[1], types.int64)
        return builder.call(fn, [crc_value, word_value])

    return types.int64(crc, word), codegen


@kernel
def crc32c_hw_update(crc, buf, offset, length):
    """Advance a CRC-32C *register* (not complemented) over ``buf[offset:offset+length]`` with SSE4.2.

    Only callable when :data:`HAS_HW_CRC32C`; the range must already be checked.

    Parameters
    ----------
    crc : int64
        Register in ``[0, 2**32)`` (``0xFFFFFFFF`` to start).
    buf : uint8[::1]
    offset, length : int64

    Returns
    -------
    int64
        The new register.
    """
    n8 = length >> 3
    words = buf[offset:offset + (n8 << 3)].view(np.int64)
    base = 0
    while n8 - base >= BLOCK_WORDS:
        # Three independent dependency chains keep the crc32 unit busy every cycle.
        a = np.int64(crc)
        b = np.int64(0)
        c = np.int64(0)
        for k in range(base, base + LANE_WORDS):
            a = _sse42_crc32_u64(a, words[k])
            b = _sse42_crc32_u64(b, words[k + LANE_WORDS])
            c = _sse42_crc32_u64(c, words[k + 2 * LANE_WORDS])
        crc = crc_shift(CRC32C_SHIFT_TABLES, crc_shift(CRC32C_SHIFT_TABLES, a) ^ b) ^ c
        base += BLOCK_WORDS
    for k in range(base, n8):
        crc = _sse42_crc32_u64(crc, words[k])
    # At most 7 bytes left: the byte table is as quick as a byte-wide crc32 instruction here.
    t = CRC32C_TABLES
    tail = buf[offset + (n8 << 3):offset + length]
    for k in range(tail.size):
        crc = np.int64(t[0, (crc ^ np.int64(tail[k])) & 0xFF]) ^ (crc >> 8)
    return crc


@kernel
def crc32c_table_update(crc, buf, offset, length):
    """Advance a CRC-32C register over a checked range with the tables (any CPU, plain Python too)."""
    return crc_table_update(CRC32C_TABLES, CRC32C_SHIFT_TABLES, crc, buf, offset, length)


#: Register update used by every CRC-32C kernel (``crc32c_register(crc, buf, offset, length)``).
crc32c_register = crc32c_hw_update if HAS_HW_CRC32C else crc32c_table_update


@kernel
def crc32c_update(crc, buf, offset, length):
    """Continue a CRC-32C over ``buf[offset:offset+length]`` (zlib style: pass a previous result, 0 to start).

    Parameters
    ----------
    crc : int64
        A previous CRC-32C value (signed or unsigned; its low 32 bits are used), 0 to start.
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
    return crc32c_register(register, buf, offset, length) ^ CRC_INITIAL_VALUE


@kernel
def crc32c_unsigned(buf, offset, length):
    """CRC-32C of ``buf[offset:offset+length]`` in ``[0, 2**32)``, or ``CRC_INVALID_RANGE``."""
    return crc32c_update(0, buf, offset, length)


@kernel
def crc32c(buf, offset, length):
    """CRC-32C of ``buf[offset:offset+length]`` as Aeron stores it (signed i32), or ``CRC_INVALID_RANGE``."""
    if not crc_range_is_valid(buf, offset, length):
        return CRC_INVALID_RANGE
    return crc_to_int32(crc32c_register(CRC_INITIAL_VALUE, buf, offset, length) ^ CRC_INITIAL_VALUE)


class Crc32c:
    """Aeron Archive's ``Crc32c`` checksum (``io.aeron.archive.checksum.Crc32c``) for Python callers."""

    name = "CRC-32C"

    def compute(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Checksum as Aeron stores it (signed i32)."""
        buf = as_byte_buffer(buffer)
        return int(crc32c(buf, offset, check_range(buf, offset, length)))

    def compute_unsigned(self, buffer, offset: int = 0, length: int | None = None) -> int:
        """Checksum in ``[0, 2**32)``."""
        buf = as_byte_buffer(buffer)
        return int(crc32c_unsigned(buf, offset, check_range(buf, offset, length)))

    def update(self, crc: int, buffer, offset: int = 0, length: int | None = None) -> int:
        """Continue ``crc`` (a previous result) over more bytes."""
        buf = as_byte_buffer(buffer)
        return int(crc32c_update(crc, buf, offset, check_range(buf, offset, length)))
