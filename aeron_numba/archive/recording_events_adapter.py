"""An archive's recording events from a client (Aeron's RecordingEventsAdapter): poll a subscription to the
archive's recording events channel (``ArchiveContext.recording_events_channel`` / ``_stream_id``, published
when ``recording_events_enabled``) and call the listener, as Aeron's RecordingEventsListener, with each event's
fields:

* ``on_recording_started(recording_id, start_position, session_id, stream_id, channel, source_identity)``;
* ``on_recording_progress(recording_id, start_position, position)``;
* ``on_recording_stopped(recording_id, start_position, stop_position)``.

``start_position`` is where the recorded image joined; ``channel`` the channel the recording was asked for. A
listener lacking one of the three (or unable to take its fields by name) is refused when the adapter is made.
Anything else on the stream is counted in ``malformed_count`` and dropped.
"""

from __future__ import annotations

from typing import Callable

from aeron_numba.client import FragmentAssembler
from aeron_numba.codecs.archive_messages import ARCHIVE, RECORDING_EVENTS
from aeron_numba.codecs.sbe_adapter import SbeAdapter

DEFAULT_FRAGMENT_LIMIT = 10  # events per poll; Aeron makes the caller choose


class RecordingEventsAdapter(SbeAdapter):
    """Decodes the recording events on ``subscription`` and hands them to ``listener``."""

    def __init__(self, listener, subscription, fragment_limit: int = DEFAULT_FRAGMENT_LIMIT,
                 on_error: Callable[[str], None] | None = None):
        super().__init__(ARCHIVE, listener, RECORDING_EVENTS, on_error=on_error)
        self.subscription = subscription
        self.fragment_limit = fragment_limit
        self._assembler = FragmentAssembler(self.on_fragment)

    def poll(self) -> int:
        """Poll the subscription once; returns the fragments read."""
        return self.subscription.poll(self._assembler, self.fragment_limit)
