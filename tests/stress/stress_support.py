"""Shared by the stress workers: a deterministic hash, so producers and checkers agree on each message."""

import numba


@numba.njit(cache=True)
def mix32(a, b):
    """A well-mixed 32-bit value of two integers (murmur-style finaliser), the same in every process."""
    x = (a * 0x9E3779B1 + b * 0x85EBCA77) & 0xFFFF_FFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFF_FFFF
    x ^= x >> 12
    return x
