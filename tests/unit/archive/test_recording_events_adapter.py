"""The client's RecordingEventsAdapter: events on the archive's recording events stream to a listener."""

from __future__ import annotations

import pytest

from aeron_numba.archive.client import RecordingEventsAdapter
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.sbe_adapter import MissingHandlerError
from tests.unit.archive.archive_fakes import Subscription


class Listener:
    def __init__(self):
        self.events = []

    def on_recording_started(self, recording_id, start_position, session_id, stream_id, channel, source_identity):
        self.events.append(("started", recording_id, start_position, session_id, stream_id, channel,
                            source_identity))

    def on_recording_progress(self, recording_id, start_position, position):
        self.events.append(("progress", recording_id, start_position, position))

    def on_recording_stopped(self, recording_id, start_position, stop_position):
        self.events.append(("stopped", recording_id, start_position, stop_position))


def test_each_event_reaches_its_listener_method_with_its_fields_and_garbage_is_counted():
    subscription, listener, errors = Subscription(1), Listener(), []
    adapter = RecordingEventsAdapter(listener, subscription, fragment_limit=3, on_error=errors.append)
    for message in (ARCHIVE.RecordingStarted(recording_id=4, start_position=64, session_id=-9, stream_id=1001,
                                             channel="aeron:ipc?alias=x", source_identity="aeron:ipc"),
                    ARCHIVE.RecordingProgress(recording_id=4, start_position=64, position=1088),
                    ARCHIVE.ControlResponse(control_session_id=1),  # not an event
                    ARCHIVE.RecordingStopped(recording_id=4, start_position=64, stop_position=2112)):
        subscription.fragments.append((ARCHIVE.encode(message), 5))
    subscription.fragments.append((b"\x01\x02", 5))
    assert adapter.poll() == 3 and adapter.poll() == 2 and adapter.poll() == 0
    assert listener.events == [("started", 4, 64, -9, 1001, "aeron:ipc?alias=x", "aeron:ipc"),
                               ("progress", 4, 64, 1088), ("stopped", 4, 64, 2112)]
    assert adapter.malformed_count == 2 and len(errors) == 2 and "ControlResponse" in errors[0]


def test_a_listener_missing_an_event_is_refused_when_the_adapter_is_made():
    class NoStop(Listener):
        on_recording_stopped = None

    with pytest.raises(MissingHandlerError, match="RecordingStopped .* has no handler NoStop.on_recording_stopped"):
        RecordingEventsAdapter(NoStop(), Subscription(1))

    class WrongFields(Listener):
        def on_recording_progress(self, recording_id, position):
            pass

    with pytest.raises(MissingHandlerError, match="WrongFields.on_recording_progress cannot take RecordingProgress"):
        RecordingEventsAdapter(WrongFields(), Subscription(1))
