"""The driver's pseudo-random draws in compiled code: MINSTD (Lehmer), ``x' = x * 48271 mod (2^31 - 1)``.

Small and seedable, with products well inside an int64 (no overflow, compiled or not), so a draw kept in a state
word of a row (a loss generator's, an image's NAK backoff) gives the same sequence in both.
"""

from __future__ import annotations

from aeron_numba.jit import kernel

MODULUS = 2_147_483_647
MULTIPLIER = 48_271


def seed_state(seed: int) -> int:
    """A valid generator state (1 .. modulus - 1) from any seed."""
    return seed % (MODULUS - 1) + 1


@kernel
def next_state(x):
    """The state after ``x``: uniform in 1 .. modulus - 1."""
    return x * MULTIPLIER % MODULUS
