"""Slow, obvious CRC-32 / CRC-32C: one bit at a time, straight from the definition (spec/archive.md §4.3).

Reflected CRC with init 0xFFFFFFFF and final complement; ``crc`` continues a previous result like
``zlib.crc32(data, crc)``. Polynomials written out here on purpose, to pin the layout constants.
"""

CRC32_POLY = 0xEDB88320  # IEEE 802.3, reflected
CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
MASK = 0xFFFFFFFF


def crc_bitwise(poly: int, data: bytes, crc: int = 0) -> int:
    register = (crc & MASK) ^ MASK
    for byte in data:
        register ^= byte
        for _ in range(8):
            if register & 1:
                register = (register >> 1) ^ poly
            else:
                register >>= 1
    return register ^ MASK


def crc32_reference(data: bytes, crc: int = 0) -> int:
    return crc_bitwise(CRC32_POLY, data, crc)


def crc32c_reference(data: bytes, crc: int = 0) -> int:
    return crc_bitwise(CRC32C_POLY, data, crc)


def to_int32(value: int) -> int:
    value &= MASK
    return value - (1 << 32) if value >= 1 << 31 else value


def register_after_zeros(poly: int, register: int, count: int) -> int:
    """A raw register (no init/complement) advanced over ``count`` zero bytes."""
    for _ in range(count * 8):
        register = (register >> 1) ^ poly if register & 1 else register >> 1
    return register
