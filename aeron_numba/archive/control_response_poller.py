"""What an archive sends its client (spec/archive.md §6), as Aeron's ControlResponsePoller: poll the control
response subscription, decode each message through an ``SbeAdapter`` and keep what came, by correlation id, for
``AeronArchive`` to take.

Responses are kept for any session until the client knows its own (the connect), then only its session's;
challenges only before that. Descriptors and recording signals of other sessions sharing the response stream
are not ours and are dropped. Anything else on the stream (another schema, garbage) is counted in
``malformed_count`` and dropped.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from aeron_numba.client import FragmentAssembler
from aeron_numba.codecs.archive_messages import ARCHIVE, CONTROL_RESPONSES
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.layout import archive as A

_SIGNAL_NAMES = {code: name for name, code in A.RECORDING_SIGNALS.items()}


@dataclass(frozen=True)
class RecordingSignal:
    """What happened to a recording a control session asked for (Aeron's RecordingSignalEvent): ``signal`` names
    it, at ``position``; delivered by ``AeronArchive.poll_for_recording_signals``."""

    control_session_id: int
    correlation_id: int
    recording_id: int
    subscription_id: int
    position: int
    signal: str  # START, STOP, EXTEND, REPLICATE, MERGE, SYNC, DELETE, REPLICATE_END


class ControlResponsePoller:
    def __init__(self, subscription, fragment_limit: int = 16):
        self.subscription = subscription
        self.fragment_limit = fragment_limit
        self.control_session_id = A.NULL_VALUE  # ours, once the connect was answered
        self.responses: dict[int, object] = {}  # correlation id -> ControlResponse
        self.descriptors: dict[int, list] = collections.defaultdict(list)  # correlation id -> descriptors
        self.signals: collections.deque[RecordingSignal] = collections.deque()
        self.challenges: dict[int, object] = {}  # connect correlation id -> Challenge
        self.adapter = SbeAdapter(ARCHIVE, self, CONTROL_RESPONSES)
        self._assembler = FragmentAssembler(self.adapter.on_fragment)

    @property
    def malformed_count(self) -> int:
        return self.adapter.malformed_count

    def poll(self) -> int:
        """Poll the response subscription once; returns the fragments read."""
        return self.subscription.poll(self._assembler, self.fragment_limit)

    def on_control_response(self, **response) -> None:
        if self.control_session_id in (A.NULL_VALUE, response["control_session_id"]):
            self.responses[response["correlation_id"]] = ARCHIVE.ControlResponse(**response)

    def on_challenge(self, **challenge) -> None:
        if self.control_session_id == A.NULL_VALUE:
            self.challenges[challenge["correlation_id"]] = ARCHIVE.Challenge(**challenge)

    def on_recording_descriptor(self, **descriptor) -> None:
        if descriptor["control_session_id"] == self.control_session_id:
            self.descriptors[descriptor["correlation_id"]].append(ARCHIVE.RecordingDescriptor(**descriptor))

    def on_recording_subscription_descriptor(self, **descriptor) -> None:
        if descriptor["control_session_id"] == self.control_session_id:
            self.descriptors[descriptor["correlation_id"]].append(ARCHIVE.RecordingSubscriptionDescriptor(**descriptor))

    def on_recording_signal_event(self, control_session_id: int, correlation_id: int, recording_id: int,
                                  subscription_id: int, position: int, signal: int) -> None:
        if control_session_id == self.control_session_id:
            self.signals.append(RecordingSignal(control_session_id, correlation_id, recording_id, subscription_id,
                                                position, _SIGNAL_NAMES.get(signal, str(signal))))
