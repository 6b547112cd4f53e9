"""What the archive sends a control session (spec/archive.md §6): the generated typed send methods
(``codecs/archive_proxies.py``: ``control_response``, ``recording_subscription_descriptor``, ``challenge``,
``recording_signal_event``...) plus the catalog's descriptors, as Aeron's ControlResponseProxy.
"""

from __future__ import annotations

import struct

import numpy as np

from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.archive_proxies import ControlResponseProxyBase
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH, PRIMITIVES

_DESCRIPTOR_HEADER = np.frombuffer(ARCHIVE.header("RecordingDescriptor"), dtype=np.uint8)
#: Field name -> (offset in the message, struct format) of the session's ids in a descriptor (the schema's fields).
_DESCRIPTOR_IDS = {f.name: (MESSAGE_HEADER_LENGTH + f.offset, "<" + PRIMITIVES[f.primitive][0])
                   for f in ARCHIVE.schema.message("RecordingDescriptor").fields
                   if f.name in ("control_session_id", "correlation_id")}


class ControlResponseProxy(ControlResponseProxyBase):
    """One control session's response proxy over its response publication (one reused buffer a session)."""

    def catalog_recording_descriptor(self, control_session_id: int, correlation_id: int, catalog_body) -> bool:
        """A RecordingDescriptor of a catalog entry: its body (``Catalog.descriptor_body``: a RecordingDescriptor
        body at this schema's blockLength and version, ids 0, then the entry's alignment padding) under the
        message header, with this session's ids written over the body's.

        The body goes out as stored, as Aeron's ControlResponseProxy.sendDescriptor copies it: a client sees the
        same bytes from either archive, whatever the catalog holds."""
        length = MESSAGE_HEADER_LENGTH + len(catalog_body)
        self.ensure_capacity(length)
        buffer = self.buffer
        buffer[:MESSAGE_HEADER_LENGTH] = _DESCRIPTOR_HEADER
        buffer[MESSAGE_HEADER_LENGTH:length] = np.frombuffer(catalog_body, dtype=np.uint8)
        for name, value in (("control_session_id", control_session_id), ("correlation_id", correlation_id)):
            offset, fmt = _DESCRIPTOR_IDS[name]
            struct.pack_into(fmt, buffer, offset, value)
        return self.offer(length)
