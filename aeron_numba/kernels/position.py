"""Stream position arithmetic (spec/transport.md §3).

A position is ``term_count << position_bits_to_shift | term_offset`` where ``term_count`` is the
number of terms since ``initial_term_id``, computed in wrapping 32-bit arithmetic. These are numba
functions (inlined into kernels) that also work from Python.
"""

import numba
import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.layout.log_buffer_descriptor import PARTITION_COUNT

_ZERO_GUARD_BIT = 1 << 62  # above any term length: bounds position_bits_to_shift of a corrupt 0

if numba.config.DISABLE_JIT:  # plain Python (an intrinsic cannot run without the JIT)

    def _trailing_zeros(value):
        value = int(value)
        return (value & -value).bit_length() - 1

else:
    from numba.cpython.unsafe.numbers import trailing_zeros as _trailing_zeros


@kernel(inline="always", nogil=False)
def to_int32(value):
    """Wrap an integer to a signed 32-bit value (Java ``(int)`` cast)."""
    return ((value + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


@kernel(inline="always", nogil=False)
def position_bits_to_shift(term_length):
    """log2(term_length) for a power-of-two term length: its trailing zero bits, one instruction (every poll and
    append asks; a loop over the bits cost about 6 ns). A corrupt length of 0 gives 62, not a 64-bit shift."""
    return _trailing_zeros(np.int64(term_length) | _ZERO_GUARD_BIT)


@kernel(inline="always", nogil=False)
def compute_term_count(term_id, initial_term_id):
    return to_int32(term_id - initial_term_id)


@kernel(inline="always", nogil=False)
def compute_position(term_id, term_offset, bits_to_shift, initial_term_id):
    term_count = to_int32(term_id - initial_term_id)
    return (term_count << bits_to_shift) + term_offset


@kernel(inline="always", nogil=False)
def compute_term_begin_position(term_id, bits_to_shift, initial_term_id):
    return to_int32(term_id - initial_term_id) << bits_to_shift


@kernel(inline="always", nogil=False)
def compute_term_id_from_position(position, bits_to_shift, initial_term_id):
    return to_int32((position >> bits_to_shift) + initial_term_id)


@kernel(inline="always", nogil=False)
def compute_term_offset_from_position(position, bits_to_shift):
    return position & ((1 << bits_to_shift) - 1)


@kernel(inline="always", nogil=False)
def index_by_position(position, bits_to_shift):
    return (position >> bits_to_shift) % PARTITION_COUNT


@kernel(inline="always", nogil=False)
def index_by_term(initial_term_id, active_term_id):
    return to_int32(active_term_id - initial_term_id) % PARTITION_COUNT


@kernel(inline="always", nogil=False)
def index_by_term_count(term_count):
    return term_count % PARTITION_COUNT


@kernel(inline="always", nogil=False)
def raw_tail_term_id(raw_tail):
    return to_int32(raw_tail >> 32)


@kernel(inline="always", nogil=False)
def raw_tail_term_offset(raw_tail, term_length):
    """Tail offset clamped to the term length: concurrent appenders may push it past the end (§3)."""
    tail = raw_tail & 0xFFFF_FFFF
    return tail if tail < term_length else term_length


@kernel(inline="always", nogil=False)
def pack_tail(term_id, term_offset):
    return (term_id << 32) | (term_offset & 0xFFFF_FFFF)


@kernel(inline="always", nogil=False)
def max_possible_position(term_length):
    """2^31 terms: an append whose position would reach this fails with MAX_POSITION_EXCEEDED (§3)."""
    return term_length << 31
