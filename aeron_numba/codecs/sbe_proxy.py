"""The proxy side of an SBE protocol (DESIGN.md "Protocols: adapter, conductor, proxy"): encode one message into a
reused buffer and offer it through a publication, reporting back pressure as Aeron's proxies do.

The typed send methods, one per outgoing message with the message's fields as explicit parameters, are generated
from the schema description into checked-in modules (``codecs/archive_proxies.py``, ``codecs/cluster_proxies.py``,
by ``scripts/generate_sbe_schemas.py``) so that each can be found with grep and read; they all end in
``offer_message``. A send method returns True once the publication took the message, False if it did not: the
publication stayed BACK_PRESSURED / ADMIN_ACTION for ``retry_attempts`` offers (Aeron's ArchiveProxy retries 3
times), or refused it (NOT_CONNECTED, CLOSED, MAX_POSITION_EXCEEDED). ``last_result`` holds the publication's last
answer so that the caller decides what a refusal means (wait and retry, abort a session, raise).
"""

from __future__ import annotations

import numpy as np

from aeron_numba.codecs.sbe import SbeCodec, SbeMessageBase
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED

#: Offers of one message before a send method reports failure (Aeron's ArchiveProxy.DEFAULT_RETRY_ATTEMPTS).
DEFAULT_RETRY_ATTEMPTS = 3


class SbeProxy:
    """Encodes messages of ``codec``'s schema into one reused buffer and offers them on ``publication``, up to
    ``retry_attempts`` times in a row while it is back-pressured (a conductor's duty cycle never waits; a caller
    with a deadline of its own, as the archive client, passes 1 and keeps its own retry loop)."""

    def __init__(self, codec: SbeCodec, publication, *, retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
                 initial_capacity: int = 1024):
        if retry_attempts < 1:
            raise ValueError(f"retry_attempts={retry_attempts} < 1")
        self.codec = codec
        self.publication = publication
        self.retry_attempts = retry_attempts
        self.buffer = np.zeros(initial_capacity, dtype=np.uint8)
        self.length = 0  # of the message last encoded into ``buffer``
        self.last_result = 0

    def encode(self, message: SbeMessageBase) -> int:
        """Encode ``message`` at the start of the reused buffer (grown to the next power of two if it does not
        fit); returns its length."""
        self.ensure_capacity(self.codec.encoded_length(message))
        self.length = self.codec.encode_into(self.buffer, 0, message)
        return self.length

    def ensure_capacity(self, length: int) -> None:
        """Grow the reused buffer to the next power of two of ``length`` if it is shorter."""
        if length > self.buffer.size:
            self.buffer = np.zeros(1 << (length - 1).bit_length(), dtype=np.uint8)

    def offer_message(self, message: SbeMessageBase) -> bool:
        """Encode and offer ``message``; True once the publication took it (see the module docstring)."""
        return self.offer(self.encode(message))

    def offer(self, length: int) -> bool:
        """Offer the first ``length`` bytes of the buffer (the message last encoded), retrying back pressure."""
        attempts = self.retry_attempts
        while True:
            result = self.publication.offer(self.buffer, 0, length)
            self.last_result = result
            if result > 0:
                return True
            attempts -= 1
            if result not in (BACK_PRESSURED, ADMIN_ACTION) or attempts <= 0:
                return False
