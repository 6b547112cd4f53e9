"""Checks of the plain int arguments of the public API, raising ``ConfigurationError`` naming the argument (what
a user reads instead of ``int()``'s or numba's own message). Off the fast paths: only checked paths call them."""

from __future__ import annotations

import operator

from aeron_numba.errors import ConfigurationError

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def as_int(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int (numpy ints too), within ``[lo, hi]`` when given; a str, a float or a value outside is
    refused."""
    try:
        value = operator.index(value)
    except TypeError:
        raise ConfigurationError(f"{name}={value!r} must be an int") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigurationError(f"{name}={value} outside [{lo}, {hi}]")
    return value
