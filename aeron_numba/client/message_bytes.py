"""A message's bytes as the client's kernels take them: a 1-D ``np.uint8`` view of whatever a user offers or puts.

Used where a message is checked (``Publication.offer``'s checked path, ``offer_block``, ``BufferClaim.put_bytes``);
``offer``'s fast paths hand bytes, bytearray, memoryview and 1-D arrays to the kernels without it.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.errors import ConfigurationError


def as_uint8(data) -> np.ndarray:
    """A 1-D C-contiguous ``np.uint8`` view of ``data`` without copying when its memory allows.

    bytes / bytearray / contiguous memoryview / C-contiguous ndarray of any dtype: a view. Anything else
    is copied once.
    """
    if isinstance(data, np.ndarray):
        if data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous:
            return data
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        return data.reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):  # BufferError: a memoryview that is not C-contiguous
        if isinstance(data, memoryview):
            return np.frombuffer(data.tobytes(), dtype=np.uint8)
        raise ConfigurationError(
            f"message of type {type(data).__name__} is not bytes-like (bytes, bytearray, memoryview, ndarray)"
        ) from None
