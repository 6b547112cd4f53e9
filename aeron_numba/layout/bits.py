"""Alignment and power-of-two arithmetic shared by all layouts (spec/transport.md conventions)."""

CACHE_LINE_LENGTH = 64
NULL_VALUE = -1
INT32_MAX = 0x7FFF_FFFF
INT64_MAX = 0x7FFF_FFFF_FFFF_FFFF


def align(value, alignment):
    """Round ``value`` up to a multiple of ``alignment`` (a power of two). Compiled callers use
    ``kernels.bits.align``, this function compiled."""
    return (value + (alignment - 1)) & ~(alignment - 1)


def is_power_of_two(value: int) -> bool:
    return value > 0 and (value & (value - 1)) == 0


def semantic_version(major: int, minor: int, patch: int) -> int:
    """Aeron's packed version: ``(major << 16) | (minor << 8) | patch`` (cnc, archive and cluster mark files)."""
    return (major << 16) | (minor << 8) | patch


def semantic_version_major(version: int) -> int:
    return (version >> 16) & 0xFF


def semantic_version_string(version: int) -> str:
    return f"{(version >> 16) & 0xFF}.{(version >> 8) & 0xFF}.{version & 0xFF}"
