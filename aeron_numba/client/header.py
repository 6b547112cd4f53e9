"""The data header of the fragment being delivered to a handler (Aeron's ``Header`` flyweight, spec §1).

One ``Header`` per image is re-pointed at each fragment before the handler is called, so polling allocates
nothing per message. Fields are read from the log buffer only when asked for. A handler must not keep the
header (or the buffer) after it returns: both describe the fragment of the current call only.
"""

from __future__ import annotations

import struct

import numpy as np

from aeron_numba.layout import frame
from aeron_numba.layout.bits import align

_I8 = struct.Struct("<B")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


class Header:
    """Describes one fragment: ``buffer[offset:offset+32]`` is its data header.

    Attributes
    ----------
    buffer : np.ndarray
        The ``np.uint8`` buffer holding the header (the log buffer, or a private copy for a reassembled
        message).
    offset : int
        Offset of the frame header in ``buffer``.
    position : int
        Stream position just after this fragment (after the last fragment for a reassembled message).
    initial_term_id, position_bits_to_shift : int
        Of the image's log, for position arithmetic.
    """

    __slots__ = ("buffer", "offset", "position", "initial_term_id", "position_bits_to_shift")

    def __init__(self, initial_term_id: int = 0, position_bits_to_shift: int = 0, buffer: np.ndarray | None = None):
        self.buffer = buffer
        self.offset = 0
        self.position = 0
        self.initial_term_id = initial_term_id
        self.position_bits_to_shift = position_bits_to_shift

    @property
    def frame_length(self) -> int:
        """The frame's length in bytes, header included."""
        return _I32.unpack_from(self.buffer, self.offset + frame.FRAME_LENGTH_FIELD_OFFSET)[0]

    @property
    def version(self) -> int:
        """The frame header's version."""
        return _I8.unpack_from(self.buffer, self.offset + frame.VERSION_FIELD_OFFSET)[0]

    @property
    def flags(self) -> int:
        """The frame's flags (BEGIN, END fragment bits; both set for an unfragmented message)."""
        return _I8.unpack_from(self.buffer, self.offset + frame.FLAGS_FIELD_OFFSET)[0]

    @property
    def type(self) -> int:
        """The frame type (HDR_TYPE_DATA, HDR_TYPE_PAD, ...)."""
        return _I16.unpack_from(self.buffer, self.offset + frame.TYPE_FIELD_OFFSET)[0] & 0xFFFF

    @property
    def term_offset(self) -> int:
        """Where the frame starts in its term."""
        return _I32.unpack_from(self.buffer, self.offset + frame.TERM_OFFSET_FIELD_OFFSET)[0]

    @property
    def session_id(self) -> int:
        """The session id of the publication that wrote the frame."""
        return _I32.unpack_from(self.buffer, self.offset + frame.SESSION_ID_FIELD_OFFSET)[0]

    @property
    def stream_id(self) -> int:
        """The stream id of the frame."""
        return _I32.unpack_from(self.buffer, self.offset + frame.STREAM_ID_FIELD_OFFSET)[0]

    @property
    def term_id(self) -> int:
        """The term id the frame was written in."""
        return _I32.unpack_from(self.buffer, self.offset + frame.TERM_ID_FIELD_OFFSET)[0]

    @property
    def reserved_value(self) -> int:
        """The 8-byte reserved value of the frame (set by a publisher's reserved value supplier)."""
        return _I64.unpack_from(self.buffer, self.offset + frame.RESERVED_VALUE_OFFSET)[0]

    @property
    def next_term_offset(self) -> int:
        """Term offset of the frame after this one (``term_offset + align(frame_length, 32)``)."""
        return self.term_offset + align(self.frame_length, frame.FRAME_ALIGNMENT)

    @property
    def term_length(self) -> int:
        """The length of the log's terms."""
        return 1 << self.position_bits_to_shift

    def copy(self) -> "Header":
        """A detached copy (its own 32 bytes), which a handler may keep after it returns."""
        header_bytes = np.array(self.buffer[self.offset : self.offset + frame.HEADER_LENGTH])
        copied = Header(self.initial_term_id, self.position_bits_to_shift, header_bytes)
        copied.position = self.position
        return copied

    def __repr__(self) -> str:
        if self.buffer is None:
            return "Header(<unset>)"
        return (
            f"Header(frame_length={self.frame_length}, flags={self.flags:#04x}, type={self.type},"
            f" term_offset={self.term_offset}, session_id={self.session_id}, stream_id={self.stream_id},"
            f" term_id={self.term_id}, reserved_value={self.reserved_value}, position={self.position})"
        )
