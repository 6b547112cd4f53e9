"""Zeroing log buffer space behind the slowest consumer so terms can be reused (spec/transport.md §4.7)."""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import fill_bytes
from aeron_numba.kernels.term_appender import log_term_length
from aeron_numba.layout.log_buffer_descriptor import PARTITION_COUNT
from aeron_numba.kernels.position import position_bits_to_shift


@kernel
def clean_buffer_to(log, clean_position, position):
    """Zero ``[clean_position, position)``, at most up to the end of the term it starts in.

    Returns the new clean position (call again to continue into the next term). The first 8 bytes
    (the frame length word) are zeroed last with a release store, so a reader of a reused term never
    sees a stale positive length in front of zeroed data.
    """
    if position <= clean_position:
        return clean_position
    term_length = log_term_length(log)
    index = (clean_position >> position_bits_to_shift(term_length)) % PARTITION_COUNT
    term_offset = clean_position & (term_length - 1)
    length = min(position - clean_position, term_length - term_offset)
    start = index * term_length + term_offset
    if length > 8:
        fill_bytes(log, start + 8, length - 8, 0)
    if length >= 8:
        atomics.put_int64_release(log, start, 0)
    return clean_position + length
