"""The archive conductor driven through its ``on_<request>`` methods, as the ControlSessionAdapter calls them: no
request bytes are built; the responses are read back from the session's response publication."""

from __future__ import annotations

import struct

import pytest

from aeron_numba.archive.archive_conductor import ArchiveConductor
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.archive.control_session import ControlSessionState
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.layout import archive as A
from tests.unit.archive.archive_fakes import Aeron, MarkFile

OK, ERROR = A.CONTROL_RESPONSE_CODES["OK"], A.CONTROL_RESPONSE_CODES["ERROR"]


@pytest.fixture
def conductor(tmp_path):
    ctx = ArchiveContext(archive_dir=str(tmp_path)).conclude()
    with Catalog.open(tmp_path) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=lambda: 0, epoch_clock=lambda: 5)
        yield conductor
        conductor.on_close()


def add_recording(catalog, n):
    return catalog.add_recording(
        start_position=0, start_timestamp=100 + n, initial_term_id=n, segment_file_length=128 << 20,
        term_buffer_length=64 * 1024, mtu_length=1408, session_id=n, stream_id=1001, stripped_channel="aeron:ipc",
        original_channel=f"aeron:ipc?term-length=64k|n={n}", source_identity="aeron:ipc", stop_position=64 * n,
        stop_timestamp=200 + n)


def connected_session(conductor):
    """A session connected through ``on_auth_connect_request`` (the null authenticator lets it in)."""
    conductor.on_auth_connect_request((1, 42), correlation_id=10, response_stream_id=20,
                                      version=A.ARCHIVE_PROTOCOL_VERSION, response_channel="aeron:ipc",
                                      encoded_credentials=b"")
    [session] = conductor.control_sessions.values()
    conductor.do_work()
    assert session.state is ControlSessionState.ACTIVE and session.request_image == (1, 42)
    [ok] = session.publication.sent
    assert (ok.correlation_id, ok.code, ok.relevant_id) == (10, OK, session.control_session_id)
    session.publication.raw.clear()
    return session


def test_a_connect_then_an_archive_id_request(conductor):
    session = connected_session(conductor)
    conductor.on_archive_id_request(session, correlation_id=11, control_session_id=session.control_session_id)
    conductor.do_work()
    [response] = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (11, OK, 77)  # the client id


def test_listing_sends_each_descriptor_as_the_catalog_holds_it_then_recording_unknown(conductor):
    catalog = conductor.catalog
    ids = [add_recording(catalog, n) for n in range(3)]
    session = connected_session(conductor)
    conductor.on_list_recordings_request(session, correlation_id=12, from_recording_id=1, record_count=5)
    conductor.do_work()
    *descriptors, end = session.publication.sent
    assert [d.recording_id for d in descriptors] == ids[1:]
    assert all((d.control_session_id, d.correlation_id) == (session.control_session_id, 12) for d in descriptors)
    assert (end.correlation_id, end.code, end.relevant_id) == (12, A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"], 3)
    # The bytes are the catalog entry's whole body (alignment padding included) under a RecordingDescriptor
    # header, with the session's ids in its first two fields: what the archive always sent, and Aeron sends.
    for recording_id, raw in zip(ids[1:], session.publication.raw):
        body = catalog.descriptor_body(recording_id)
        assert len(body) > ARCHIVE.encoded_length(catalog.descriptor(recording_id)) - 8  # padding is there
        assert raw == struct.pack("<HHHH", 80, 22, 101, 10) + struct.pack("<qq", session.control_session_id, 12) + \
            body[16:]


def test_requests_about_what_is_not_there_get_the_archive_error_codes(conductor):
    add_recording(conductor.catalog, 0)
    session = connected_session(conductor)
    conductor.on_stop_replay_request(session, correlation_id=13, replay_session_id=99)
    conductor.on_truncate_recording_request(session, correlation_id=14, recording_id=0, position=33)
    conductor.on_stop_position_request(session, correlation_id=15, recording_id=5)
    conductor.on_stop_position_request(session, correlation_id=16, recording_id=0)
    conductor.do_work()
    replay, truncate, unknown, stop = session.publication.sent
    assert (replay.correlation_id, replay.code, replay.relevant_id) == \
        (13, ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_REPLAY"])
    assert (truncate.code, truncate.relevant_id) == (ERROR, A.ARCHIVE_ERROR_CODES["GENERIC"])
    assert "invalid truncate position=33" in truncate.error_message
    assert (unknown.code, unknown.relevant_id) == (ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_RECORDING"])
    assert (stop.correlation_id, stop.code, stop.relevant_id) == (16, OK, 0)


def test_close_session_ends_it(conductor):
    session = connected_session(conductor)
    conductor.on_close_session_request(session, control_session_id=session.control_session_id)
    conductor.do_work()
    assert conductor.control_sessions == {} and not session.publication.is_connected
