"""The ControlSessionAdapter between the control subscriptions and the conductor: requests arrive as bytes on a
stand-in control subscription; what is checked is who gets to the conductor and what the client is told."""

from __future__ import annotations

import pytest

from aeron_numba.archive.control_session_adapter import UNSUPPORTED_REQUESTS
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.layout import archive as A
from tests.unit.archive.test_archive_conductor import ERROR, connected_session, conductor  # noqa: F401 (fixture)


def deliver(conductor, message, session_id=42):
    """Put ``message`` on the local control subscription and run one duty cycle."""
    subscription = conductor.control_subscriptions[0]
    data = message if isinstance(message, bytes) else ARCHIVE.encode(message)
    subscription.fragments.append((data, session_id))
    conductor.do_work()


def test_a_connect_on_the_control_channel_makes_a_session_with_its_request_image(conductor):
    deliver(conductor, ARCHIVE.ConnectRequest(correlation_id=3, response_stream_id=20,
                                              version=A.ARCHIVE_PROTOCOL_VERSION, response_channel="aeron:ipc"),
            session_id=-8)
    [session] = conductor.control_sessions.values()
    assert session.request_image == (conductor.control_subscriptions[0].registration_id, -8)
    assert session.publication.channel == "aeron:ipc" and session.publication.stream_id == 20


def test_requests_of_unknown_sessions_and_unasked_challenge_responses_are_recorded_and_dropped(conductor):
    session = connected_session(conductor)
    errors = conductor.mark_file.error_log.errors
    deliver(conductor, ARCHIVE.ArchiveIdRequest(control_session_id=999, correlation_id=1))
    deliver(conductor, ARCHIVE.ChallengeResponse(control_session_id=session.control_session_id, correlation_id=2))
    assert errors == ["ArchiveIdRequest for unknown control session id=999",
                      f"ChallengeResponse for control session id={session.control_session_id}, which is active, "
                      "not challenged"]
    assert session.publication.raw == [] and conductor.counters.errors.get() == 2


def test_every_request_is_implemented_and_replication_requests_reach_the_conductor(conductor):
    assert UNSUPPORTED_REQUESTS == ()
    session = connected_session(conductor)
    sid = session.control_session_id
    deliver(conductor, ARCHIVE.StopReplicationRequest(control_session_id=sid, correlation_id=5, replication_id=77))
    deliver(conductor, ARCHIVE.ReplicateRequest(control_session_id=sid, correlation_id=6, src_recording_id=1,
                                                dst_recording_id=A.NULL_VALUE, src_control_stream_id=10,
                                                src_control_channel="aeron:udp?endpoint=localhost:8010",
                                                live_destination="aeron:udp?endpoint=localhost:9000"))
    unknown, refused = session.publication.sent
    assert (unknown.correlation_id, unknown.code, unknown.relevant_id, unknown.error_message) == \
        (5, ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_REPLICATION"], "unknown replication id 77")
    # The legacy request has no replication channel and this archive none configured: refused.
    assert (refused.correlation_id, refused.code, refused.error_message) == \
        (6, ERROR, "no replication channel: the request names none and the archive has no "
                   "AERON_ARCHIVE_REPLICATION_CHANNEL")


def test_segment_requests_and_replay_tokens_reach_the_conductor(conductor):
    session = connected_session(conductor)
    sid = session.control_session_id
    deliver(conductor, ARCHIVE.ReplayTokenRequest(control_session_id=sid, correlation_id=5, recording_id=0))
    deliver(conductor, ARCHIVE.AttachSegmentsRequest(control_session_id=sid, correlation_id=6, recording_id=0))
    [token, attach] = session.publication.sent
    assert (token.correlation_id, token.code) == (5, A.CONTROL_RESPONSE_CODES["OK"])
    assert list(conductor._replay_tokens) == [token.relevant_id]
    assert (attach.correlation_id, attach.relevant_id) == (6, A.ARCHIVE_ERROR_CODES["UNKNOWN_RECORDING"])
    # The replay request's token field (since schema version 10) is decoded and looked at.
    session.publication.raw.clear()
    deliver(conductor, ARCHIVE.ReplayRequest(control_session_id=sid, correlation_id=7, recording_id=0,
                                             position=-1, length=-1, replay_stream_id=9, file_io_max_length=0,
                                             replay_token=token.relevant_id + 1,
                                             replay_channel="aeron:udp?control-mode=response|control=h:1"))
    [refused] = session.publication.sent
    assert refused.error_message == f"Unknown session or token timeout for replayToken={token.relevant_id + 1}"


def test_an_unauthorised_request_is_refused_but_a_keep_alive_is_always_allowed(conductor):
    class OnlyKeepAlive:
        def is_authorised(self, protocol_id, action_id, type_, principal):
            return False

    session = connected_session(conductor)
    conductor.control_session_adapter.authorisation_service = OnlyKeepAlive()
    deliver(conductor, ARCHIVE.ArchiveIdRequest(control_session_id=session.control_session_id, correlation_id=6))
    deliver(conductor, ARCHIVE.KeepAliveRequest(control_session_id=session.control_session_id, correlation_id=7))
    [refused] = session.publication.sent
    assert (refused.correlation_id, refused.relevant_id) == (6, A.ARCHIVE_ERROR_CODES["UNAUTHORISED_ACTION"])


def test_a_request_the_conductor_cannot_do_is_answered_and_recorded(conductor):
    session = connected_session(conductor)
    deliver(conductor, ARCHIVE.StartRecordingRequest(control_session_id=session.control_session_id, correlation_id=8,
                                                     stream_id=1, channel="no-scheme"))
    [response] = session.publication.sent
    assert (response.correlation_id, response.code) == (8, ERROR)
    assert response.error_message.startswith("StartRecordingRequest: ")
    assert conductor.counters.errors.get() == 1


def test_garbage_on_the_control_channel_is_counted_and_recorded_and_the_archive_carries_on(conductor):
    session = connected_session(conductor)
    deliver(conductor, b"\x00" * 5)
    deliver(conductor, ARCHIVE.encode(ARCHIVE.ControlResponse(control_session_id=session.control_session_id)))
    adapter = conductor.control_session_adapter
    assert adapter.malformed_count == 2 and conductor.counters.errors.get() == 2
    assert all(e.startswith("ControlSessionAdapter: message dropped: ") for e in conductor.mark_file.error_log.errors)
    deliver(conductor, ARCHIVE.ArchiveIdRequest(control_session_id=session.control_session_id, correlation_id=9))
    [response] = session.publication.sent
    assert response.correlation_id == 9 and session.publication.raw


def test_a_response_that_cannot_be_encoded_answers_its_request_with_an_error(conductor, monkeypatch):
    """A handler whose response text is not ASCII (an OS error message in the user's language, say): the response
    cannot be encoded, so the client is told ERROR GENERIC with why, instead of waiting out its timeout."""
    session = connected_session(conductor)

    def answer_not_in_ascii(session, correlation_id, **_):
        session.respond(correlation_id, 0, 0, error_message="archivé")

    monkeypatch.setattr(conductor, "on_archive_id_request", answer_not_in_ascii)
    conductor.control_session_adapter = type(conductor.control_session_adapter)(  # bound to the new handler
        conductor, conductor.control_subscriptions, conductor.authorisation_service)
    deliver(conductor, ARCHIVE.ArchiveIdRequest(control_session_id=session.control_session_id, correlation_id=9))
    [response] = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == \
        (9, ERROR, A.ARCHIVE_ERROR_CODES["GENERIC"])
    assert response.error_message.startswith("ArchiveIdRequest: ") and "not ASCII" in response.error_message
    assert conductor.counters.errors.get() == 1
