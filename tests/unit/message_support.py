"""Helpers shared by the ring buffer and broadcast tests: message bodies and a collecting handler."""

import numba
import numpy as np

from aeron_numba.kernels.handlers import MESSAGE_HANDLER_SIG


def body_of(seed: int, length: int) -> np.ndarray:
    return ((np.arange(length, dtype=np.int64) * 7 + seed * 13) & 0xFF).astype(np.uint8)


@numba.njit(MESSAGE_HANDLER_SIG)
def collect(ctx, msg_type_id, buffer, offset, length):
    """ctx = [count, next free slot, then per message: type, offset, length, body bytes...]."""
    pos = ctx[1]
    ctx[pos] = msg_type_id
    ctx[pos + 1] = offset
    ctx[pos + 2] = length
    for i in range(length):
        ctx[pos + 3 + i] = buffer[offset + i]
    ctx[1] = pos + 3 + length
    ctx[0] += 1


def new_ctx(capacity: int) -> np.ndarray:
    ctx = np.zeros(4 * capacity + 64, dtype=np.int64)
    ctx[1] = 2
    return ctx


def collected(ctx: np.ndarray) -> list[tuple[int, bytes]]:
    out, pos = [], 2
    for _ in range(ctx[0]):
        type_id, _, length = ctx[pos : pos + 3]
        out.append((int(type_id), bytes(ctx[pos + 3 : pos + 3 + length].astype(np.uint8))))
        pos += 3 + int(length)
    return out
