"""Archive frame checksums: algorithm ids, CRC parameters and the status codes of the frame-block kernels
(spec/archive.md §4.3 record/replay checksums, §6.3 replay rewrite).

A recorded DATA frame with a record checksum carries the checksum in its ``session_id`` field::

  frame offset
  +0   frame_length | version | flags | type          (unchanged)
  +8   term_offset                                     (unchanged)
  +12  session_id  <- checksum(frame + 32 .. frame + align(frame_length, 32)), i32
  +16  stream_id                                       (unchanged when recording)
  +20  term_id | +24 reserved_value                    (unchanged)
  +32  payload ... alignment gap                       (the checksummed bytes)

On replay the checksum is verified (if configured), then ``session_id`` and ``stream_id`` are overwritten with
the replay publication's. PAD frames are neither checksummed nor rewritten.

Out array of the frame-block kernels (``int64[REWRITE_OUT_LENGTH]``) when they return an error::

  [0] offset of the offending frame (or of the block for INVALID_ARGUMENT)
  [1] CHECKSUM_MISMATCH: computed checksum | MALFORMED/PAST_END: frame_length
  [2] CHECKSUM_MISMATCH: stored checksum   | MALFORMED/PAST_END: frame type
"""

from aeron_numba.errors import ConfigurationError

# Algorithm ids passed to kernels (an int, so kernels need no strings).
CHECKSUM_NONE = 0
CHECKSUM_CRC32 = 1
CHECKSUM_CRC32C = 2

# Reflected polynomials; both use init 0xFFFFFFFF and a final complement (§4.3).
CRC32_POLYNOMIAL = 0xEDB88320
CRC32C_POLYNOMIAL = 0x82F63B78
CRC_INITIAL_VALUE = 0xFFFFFFFF
CRC_MASK = 0xFFFFFFFF

#: Returned by the CRC kernels when ``offset``/``length`` do not lie inside the buffer: outside both the
#: signed (i32) and the unsigned (u32) value range, so it can never be mistaken for a checksum.
CRC_INVALID_RANGE = -(1 << 32)

# Status codes of the frame-block kernels (a success returns the bytes processed, >= 0).
CHECKSUM_MISMATCH = -1
MALFORMED_FRAME = -2  # frame_length < HEADER_LENGTH, or a type other than DATA/PAD
FRAME_PAST_END = -3  # align(frame_length) runs past the end of the block (truncated read or garbage)
INVALID_ARGUMENT = -4  # block outside the buffer, misaligned, unknown algorithm, out array too short

REWRITE_OUT_OFFSET_INDEX = 0
REWRITE_OUT_COMPUTED_INDEX = 1
REWRITE_OUT_STORED_INDEX = 2
REWRITE_OUT_FRAME_LENGTH_INDEX = 1
REWRITE_OUT_FRAME_TYPE_INDEX = 2
REWRITE_OUT_LENGTH = 3

_CRC32_NAMES = ("CRC-32", "io.aeron.archive.checksum.Crc32", "org.agrona.checksum.Crc32")
_CRC32C_NAMES = ("CRC-32C", "io.aeron.archive.checksum.Crc32c", "org.agrona.checksum.Crc32c")

CHECKSUM_ALGORITHMS = {name: CHECKSUM_CRC32 for name in _CRC32_NAMES}
CHECKSUM_ALGORITHMS.update({name: CHECKSUM_CRC32C for name in _CRC32C_NAMES})

CHECKSUM_NAMES = {CHECKSUM_NONE: "none", CHECKSUM_CRC32: "CRC-32", CHECKSUM_CRC32C: "CRC-32C"}


def checksum_algorithm(name: str | None) -> int:
    """Algorithm id for a checksum name or Aeron class name (§4.3); ``None`` or ``""`` means no checksum."""
    if name is None or name == "":
        return CHECKSUM_NONE
    try:
        return CHECKSUM_ALGORITHMS[name]
    except KeyError:
        raise ConfigurationError(
            f"checksum={name!r} is not one of {sorted(CHECKSUM_ALGORITHMS)}"
        ) from None


def check_checksum_algorithm(algorithm: int) -> int:
    """Validate an algorithm id (``CHECKSUM_NONE``, ``CHECKSUM_CRC32`` or ``CHECKSUM_CRC32C``)."""
    if algorithm not in CHECKSUM_NAMES:
        raise ConfigurationError(
            f"checksum_algorithm={algorithm} is not one of {sorted(CHECKSUM_NAMES)} ({CHECKSUM_NAMES})"
        )
    return algorithm
