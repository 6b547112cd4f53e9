"""What the archive sends a control session (spec/archive.md §6): the generated typed send methods
(``codecs/archive_proxies.py``: ``control_response``, ``recording_subscription_descriptor``, ``challenge``,
``recording_signal_event``...) plus the catalog's descriptors, as Aeron's ControlResponseProxy.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from aeron_numba.codecs.archive_proxies import ControlResponseProxyBase
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH


class ControlResponseProxy(ControlResponseProxyBase):
    """One control session's response proxy over its response publication (one reused buffer a session)."""

    def catalog_recording_descriptor(self, control_session_id: int, correlation_id: int, catalog_body) -> bool:
        """A RecordingDescriptor from a catalog entry's body (``Catalog.descriptor_body``: a RecordingDescriptor
        body at this schema's blockLength and version with ids 0, then the entry's alignment padding).

        The descriptor is decoded from the body and encoded again through the codec with this session's ids; the
        body's padding follows it as stored, so the message is the whole entry body under its header, as Aeron's
        ControlResponseProxy.sendDescriptor copies it (a client sees the same bytes from either archive)."""
        descriptor = self.codec.decode_body("RecordingDescriptor", catalog_body)
        message = dataclasses.replace(descriptor, control_session_id=control_session_id,
                                      correlation_id=correlation_id)
        body_end = self.codec.encoded_length(message) - MESSAGE_HEADER_LENGTH
        total = MESSAGE_HEADER_LENGTH + max(len(catalog_body), body_end)
        if total > self.buffer.size:
            self.buffer = np.zeros(1 << (total - 1).bit_length(), dtype=np.uint8)
        length = self.encode(message)
        padding = np.frombuffer(catalog_body, dtype=np.uint8)[body_end:]
        self.buffer[length:length + padding.size] = padding
        return self.offer(length + padding.size)
