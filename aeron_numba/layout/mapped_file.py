"""Map a file once and hand out ``np.uint8`` views of it (``np.frombuffer``, never ``np.memmap``).

One object owns the mapping: numpy views keep the mmap exported, and ``mmap.close()`` raises ``BufferError``
while any is alive (NOTES-numba.md pitfall 4), so ``close()`` unmaps at once when it can and otherwise
leaves the unmapping to the moment the last view is released.
"""

from __future__ import annotations

import gc
import mmap
import os
from pathlib import Path

import numpy as np

from aeron_numba.errors import LayoutError


class MappedFile:
    """A shared, read-write memory mapping of a whole file and its ``np.uint8`` view ``buffer``."""

    def __init__(self, path: str | os.PathLike, mm: mmap.mmap):
        self.path = Path(path)
        self._mmap = mm
        self._length = len(mm)
        self.buffer: np.ndarray | None = np.frombuffer(mm, dtype=np.uint8)

    @classmethod
    def create(cls, path: str | os.PathLike, length: int, *, exist_ok: bool = False) -> "MappedFile":
        """Create (zero-filled, sparse) and map a file of ``length`` bytes."""
        if length <= 0:
            raise LayoutError(f"cannot map {path}: length={length} must be > 0")
        existed = exist_ok and os.path.exists(path)
        flags = os.O_RDWR | os.O_CREAT | (0 if exist_ok else os.O_EXCL)
        fd = os.open(path, flags, 0o644)
        try:
            os.ftruncate(fd, length)
            mm = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            # No half-made file left behind (a full disk or a file size limit must not leak files).
            if not existed:
                os.unlink(path)
            raise OSError(exc.errno, f"cannot create {path} of length={length}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        return cls(path, mm)

    @classmethod
    def open(cls, path: str | os.PathLike, min_length: int = 1, *, read_only: bool = False) -> "MappedFile":
        """Map an existing file read-write (or ``read_only``: its ``buffer`` then refuses writes); it must be at
        least ``min_length`` bytes long."""
        fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            length = os.fstat(fd).st_size
            if length < min_length:
                raise LayoutError(f"{path}: file length={length} < required {min_length}")
            protection = mmap.PROT_READ if read_only else mmap.PROT_READ | mmap.PROT_WRITE
            mm = mmap.mmap(fd, length, mmap.MAP_SHARED, protection)
        finally:
            os.close(fd)
        return cls(path, mm)

    @property
    def length(self) -> int:
        return self._length

    def view(self, offset: int, length: int) -> np.ndarray:
        """A ``np.uint8`` view of ``[offset, offset + length)``; it must lie inside the file."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise LayoutError(f"{self.path}: view [{offset}, {offset + length}) outside file length={self.length}")
        return self.buffer[offset : offset + length]

    def close(self) -> None:
        """Drop our view and unmap now if nobody else holds a view of the mapping.

        Views handed out (to ring buffer, counters and log wrappers) keep the mapping alive; if some are
        still referenced, the mapping is released when the last of them goes instead (Python unmaps an
        mmap once its last export is gone). The file itself can be deleted either way.
        """
        if self._mmap is None or self._mmap.closed:
            return
        self.buffer = None
        try:
            self._mmap.close()
        except BufferError:
            # Views caught in reference cycles (numba's first compile for new argument types leaves
            # some) only go with a collection; what is still referenced after it unmaps later.
            gc.collect()
            try:
                self._mmap.close()
            except BufferError:
                pass
        self._mmap = None

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
