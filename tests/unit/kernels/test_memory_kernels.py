"""kernels/memory.py: byte copies, fills and the write prefetch the concurrent appends issue."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from aeron_numba.kernels.memory import copy_bytes, fill_bytes, prefetch_for_write
from tests.unit.guarded_memory import guarded


@numba.njit(cache=False)
def _prefetch_each(buf, offsets):
    for offset in offsets:
        prefetch_for_write(buf, offset)


@numba.njit(cache=False)
def _copy(dst, dst_offset, src, src_offset, length):
    copy_bytes(dst, dst_offset, src, src_offset, length)


@numba.njit(cache=False)
def _fill(buf, offset, length, value):
    fill_bytes(buf, offset, length, value)


@pytest.mark.requires_jit
def test_a_write_prefetch_changes_nothing_and_never_faults_even_past_the_end():
    """A concurrent append prefetches beyond its frame, which at a term's end can be past the mapping: the
    prefetch must stay a hint (a fault here would kill the test process)."""
    buf = guarded(4096)  # a PROT_NONE page right after it
    buf[:] = np.arange(4096) % 251
    before = buf.copy()
    _prefetch_each(buf, np.array([0, 63, 64, 4095, 4096, 4096 + 192, 8191], dtype=np.int64))
    assert np.array_equal(buf, before)


def test_copy_bytes_moves_overlapping_ranges_as_memmove_and_fill_bytes_sets_a_range():
    buf = np.arange(64, dtype=np.uint8)
    _copy(buf, 8, buf, 0, 32)  # forward overlap
    assert np.array_equal(buf[8:40], np.arange(32, dtype=np.uint8))
    assert np.array_equal(buf[:8], np.arange(8, dtype=np.uint8))
    _copy(buf, 0, buf, 8, 32)  # backward overlap
    assert np.array_equal(buf[:32], np.arange(32, dtype=np.uint8))
    _fill(buf, 10, 5, 0xAB)
    assert list(buf[9:16]) == [9, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 15]


@pytest.mark.parametrize("length", range(0, 131))
def test_copy_bytes_of_every_small_length_matches_memmove_at_every_overlap(length):
    """Copies up to SMALL_COPY_LIMIT bytes are inline moves (two overlapping chunks): every length around the
    chunk widths, into a separate buffer and within one buffer shifted either way, leaves exactly what a
    memmove would."""
    rng = np.random.default_rng(length)
    source = rng.integers(0, 256, 256, dtype=np.uint8)
    for src_offset, dst_offset in [(0, 0), (3, 5), (61, 7), (0, 100)]:
        dst = rng.integers(0, 256, 256, dtype=np.uint8)
        expected = dst.copy()
        expected[dst_offset : dst_offset + length] = source[src_offset : src_offset + length]
        _copy(dst, dst_offset, source, src_offset, length)
        assert np.array_equal(dst, expected), (src_offset, dst_offset)
    for shift in (-33, -17, -8, -1, 1, 2, 9, 31, 40):
        buf = rng.integers(0, 256, 256, dtype=np.uint8)
        expected = buf.copy()
        src_offset = 64
        expected[src_offset + shift : src_offset + shift + length] = buf[src_offset : src_offset + length].copy()
        _copy(buf, src_offset + shift, buf, src_offset, length)
        assert np.array_equal(buf, expected), shift


@pytest.mark.parametrize("make_source",
                         [bytes, bytearray, lambda b: memoryview(b), lambda b: memoryview(bytearray(b))[4:]],
                         ids=["bytes", "bytearray", "memoryview", "sliced-memoryview"])
def test_copy_bytes_reads_bytes_bytearray_and_memoryview_sources(make_source):
    """The client's offer passes these straight to the appenders: a copy reads them as it reads a uint8 array."""
    content = bytes(range(100, 200))
    source = make_source(content)
    data = bytes(source)
    for length in (0, 5, 33, 70):  # inline moves and a memmove
        dst = np.zeros(80, np.uint8)
        _copy(dst, 3, source, 2, length)
        assert dst[3:3 + length].tobytes() == data[2:2 + length]
        assert not dst[:3].any() and not dst[3 + length:].any()
