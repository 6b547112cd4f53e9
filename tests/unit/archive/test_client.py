"""AeronArchive refuses an argument its request cannot carry with a ConfigurationError naming it, before anything
is sent (it was a bare KeyError for a source location, struct's message for an out-of-range stream id)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.archive.client import AeronArchive, AeronArchiveContext
from aeron_numba.codecs.archive_proxies import ArchiveProxy
from aeron_numba.errors import ConfigurationError
from tests.unit.archive import archive_fakes as fakes


@pytest.fixture
def archive():
    publication = fakes.Publication()
    connection = SimpleNamespace(publication=publication, subscription=None,
                                 proxy=ArchiveProxy(publication, retry_attempts=1),
                                 poller=SimpleNamespace(control_session_id=7, responses={}),
                                 archive_version=0, archive_id=1)
    return AeronArchive(fakes.Aeron(), AeronArchiveContext(message_timeout_ns=1), connection), publication


@pytest.mark.parametrize("call, message", [
    (lambda a: a.start_recording("aeron:ipc", 1, source_location="local"),
     "source_location='local' must be one of 'LOCAL', 'REMOTE'"),
    (lambda a: a.extend_recording(1, "aeron:ipc", 1, source_location=0),
     "source_location=0 must be one of 'LOCAL', 'REMOTE'"),
    (lambda a: a.start_recording("aeron:ipc", 2**31),
     "start_recording_request: StartRecordingRequest.stream_id=2147483648 outside int32 [-2147483648, 2147483647]"),
    (lambda a: a.start_recording("aeron:ipc", "x"), "StartRecordingRequest.stream_id='x' must be an int"),
    (lambda a: a.start_recording(5, 1), "StartRecordingRequest.channel=5 must be a str"),
    (lambda a: a.stop_recording_by_identity(2**63), "recording_id=9223372036854775808 outside int64"),
    (lambda a: a.start_replay(1, 0, 2.5, "aeron:ipc", 2), "ReplayRequest.length=2.5 must be an int"),
    (lambda a: a.truncate_recording(np.int64(1), "end"), "TruncateRecordingRequest.position='end' must be an int"),
])
def test_a_bad_argument_is_a_configuration_error_naming_it_and_nothing_is_sent(archive, call, message):
    client, publication = archive
    with pytest.raises(ConfigurationError) as info:
        call(client)
    assert message in str(info.value)
    assert publication.sent == []
