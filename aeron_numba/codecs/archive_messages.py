"""The archive control protocol's messages (schema 101, version 10): ``ARCHIVE.ControlResponse(...)``,
``ARCHIVE.encode(message)``, ``ARCHIVE.decode(buffer, offset, length)``; see ``codecs/sbe.py``. And who sends
which: the sets the adapters receive and the generated proxies (``codecs/archive_proxies.py``) send."""

import re

from aeron_numba.codecs.sbe import SbeCodec
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA

ARCHIVE = SbeCodec(ARCHIVE_SCHEMA)

#: What a client sends an archive on its control channel: every request (StartRecordingRequest2...) and the
#: answer to a challenge.
CONTROL_REQUESTS = tuple(m.name for m in ARCHIVE_SCHEMA.messages
                         if re.search(r"Request\d*$", m.name) or m.name == "ChallengeResponse")
#: What an archive sends a client on its control response channel.
CONTROL_RESPONSES = ("ControlResponse", "RecordingDescriptor", "RecordingSubscriptionDescriptor",
                     "RecordingSignalEvent", "Challenge")
#: What an archive publishes on its recording events channel.
RECORDING_EVENTS = ("RecordingStarted", "RecordingProgress", "RecordingStopped")
