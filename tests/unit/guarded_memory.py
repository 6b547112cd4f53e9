"""Memory for garbage tests: arrays that end where an inaccessible page begins, so an over-read crashes."""

import ctypes
import mmap

import numpy as np

_GUARDS = []  # keep guard mappings alive for the whole session
_libc = ctypes.CDLL(None, use_errno=True)


def guarded(size: int, at_end: bool = True) -> np.ndarray:
    """A zeroed uint8 array between PROT_NONE pages, flush against the one after it (``at_end``) or the
    one before it: an access one byte outside that end segfaults."""
    page = mmap.PAGESIZE
    body = max((size + page - 1) // page * page, page)
    mm = mmap.mmap(-1, body + 2 * page)
    raw = (ctypes.c_char * len(mm)).from_buffer(mm)
    base = ctypes.addressof(raw)
    for guard in (base, base + page + body):
        assert _libc.mprotect(ctypes.c_void_p(guard), ctypes.c_size_t(page), 0) == 0
    _GUARDS.append((mm, raw))
    start = page + body - size if at_end else page
    return np.frombuffer(mm, dtype=np.uint8, count=size, offset=start)


def u8(data: bytes) -> np.ndarray:
    """A writable uint8 copy of ``data``."""
    return np.frombuffer(bytearray(data), dtype=np.uint8)
