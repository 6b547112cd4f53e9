"""A claimed frame in a publication's log, written in place then committed or aborted (Aeron ``BufferClaim``).

``Publication.try_claim(length)`` reserves an unfragmented frame whose header is already written with a
negative length (spec §4.3 steps 1-2). The caller writes the payload at ``buffer[offset:offset+length]``
and then must call exactly one of ``commit`` (release-store the positive length: readers see the frame) or
``abort`` (turn it into padding). Until then readers of the log stop at this frame, so claim, write and
commit quickly.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.client.message_bytes import as_uint8
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels.term_appender import abort_claim, commit_claim
from aeron_numba.layout import frame
from aeron_numba.layout.publication_status import CLAIM_FRAME_LENGTH, CLAIM_FRAME_OFFSET, CLAIM_LENGTH


class BufferClaim:
    """One claim; reusable: pass it back to ``try_claim(length, buffer_claim)`` to avoid an allocation.

    Attributes
    ----------
    buffer : np.ndarray or None
        The log buffer (``np.uint8``) while the claim is open, else None.
    position : int
        Stream position after the claimed frame (what ``try_claim`` returned).
    claim : np.ndarray
        ``int64[CLAIM_LENGTH]`` frame offset and frame length, as the term appender kernels fill it.
    """

    __slots__ = ("buffer", "position", "claim")

    def __init__(self):
        self.buffer: np.ndarray | None = None
        self.position = 0
        self.claim = np.zeros(CLAIM_LENGTH, dtype=np.int64)

    def _wrap(self, buffer: np.ndarray, position: int) -> None:
        self.buffer = buffer
        self.position = position

    def _check_open(self) -> np.ndarray:
        buffer = self.buffer
        if buffer is None:
            raise AeronError("BufferClaim is not open: already committed or aborted, or never claimed")
        return buffer

    @property
    def is_open(self) -> bool:
        """True between ``try_claim`` and ``commit()`` / ``abort()``."""
        return self.buffer is not None

    @property
    def offset(self) -> int:
        """Offset of the payload in ``buffer``."""
        return int(self.claim[CLAIM_FRAME_OFFSET]) + frame.HEADER_LENGTH

    @property
    def length(self) -> int:
        """Payload length claimed."""
        return int(self.claim[CLAIM_FRAME_LENGTH]) - frame.HEADER_LENGTH

    @property
    def payload(self) -> np.ndarray:
        """A view of the claimed payload bytes (drop it before ``commit``/``abort``)."""
        buffer = self._check_open()
        start = self.offset
        return buffer[start : start + self.length]

    def put_bytes(self, data, index: int = 0) -> "BufferClaim":
        """Copy ``data`` (bytes, bytearray, memoryview or array: its bytes, as ``offer`` takes them) into the payload
        at ``index``."""
        buffer = self._check_open()
        src = as_uint8(data)
        if index < 0 or index + src.shape[0] > self.length:
            raise ConfigurationError(f"index={index} + length={src.shape[0]} > claimed length={self.length}")
        start = self.offset + index
        buffer[start : start + src.shape[0]] = src
        return self

    @property
    def reserved_value(self) -> int:
        """The claimed frame's reserved value (8 bytes of the header the application may use)."""
        buffer = self._check_open()
        at = int(self.claim[CLAIM_FRAME_OFFSET]) + frame.RESERVED_VALUE_OFFSET
        return int(buffer[at : at + 8].view(np.int64)[0])

    @reserved_value.setter
    def reserved_value(self, value: int) -> None:
        # Plain store: the release-store of the length in commit() publishes it.
        buffer = self._check_open()
        at = int(self.claim[CLAIM_FRAME_OFFSET]) + frame.RESERVED_VALUE_OFFSET
        buffer[at : at + 8].view(np.int64)[0] = value

    @property
    def flags(self) -> int:
        """The claimed frame's header flags (BEGIN and END fragment bits)."""
        buffer = self._check_open()
        return int(buffer[int(self.claim[CLAIM_FRAME_OFFSET]) + frame.FLAGS_FIELD_OFFSET])

    @flags.setter
    def flags(self, value: int) -> None:
        buffer = self._check_open()
        buffer[int(self.claim[CLAIM_FRAME_OFFSET]) + frame.FLAGS_FIELD_OFFSET] = value & 0xFF

    def commit(self) -> None:
        """Publish the frame (release-store its positive length, §4.3 step 6)."""
        buffer = self._check_open()
        self.buffer = None
        commit_claim(buffer, self.claim)

    def abort(self) -> None:
        """Turn the frame into padding that readers skip (§4.3)."""
        buffer = self._check_open()
        self.buffer = None
        abort_claim(buffer, self.claim)

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"BufferClaim({state}, offset={self.offset}, length={self.length}, position={self.position})"
