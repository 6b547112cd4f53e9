"""Control session authentication states (spec/archive.md §6.1) with a stand-in response publication, and the
archive context's loading of the hooks by name."""

from __future__ import annotations

import pytest

from aeron_numba.archive.authentication import NullAuthenticator
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.archive.control_session import ControlSession, ControlSessionState
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import archive as A

TIMEOUT_NS = 1_000_000_000


class Publication:
    def __init__(self):
        self.is_connected = False
        self.sent = []

    def offer(self, data, offset=0, length=None):
        self.sent.append(ARCHIVE.decode(data, offset, len(data) - offset if length is None else length))
        return len(self.sent) * 64

    def close(self):
        pass


class Undecided(NullAuthenticator):
    def on_connected_session(self, session, now_ms):
        pass


def session_with(authenticator, errors=None):
    publication = Publication()
    session = ControlSession(control_session_id=7, correlation_id=99, publication=publication,
                             connect_timeout_ns=TIMEOUT_NS, liveness_interval_ns=TIMEOUT_NS, now_ns=0,
                             authenticator=authenticator, epoch_clock_ms=lambda: 1234,
                             on_error=(errors.append if errors is not None else None))
    return session, publication


def test_the_null_authenticator_makes_a_connected_session_active_with_the_connect_ok():
    session, publication = session_with(NullAuthenticator())
    session.do_work(1)
    assert session.state is ControlSessionState.CONNECTING and not publication.sent
    publication.is_connected = True
    session.do_work(2)
    assert session.state is ControlSessionState.ACTIVE
    [ok] = publication.sent
    assert (ok.correlation_id, ok.relevant_id, ok.code) == (99, 7, A.CONTROL_RESPONSE_CODES["OK"])


def test_an_undecided_session_is_rejected_at_the_connect_timeout_then_done():
    session, publication = session_with(Undecided())
    publication.is_connected = True
    session.do_work(1)
    assert session.state is ControlSessionState.CONNECTED and not publication.sent
    session.do_work(TIMEOUT_NS + 1)
    assert session.state is ControlSessionState.DONE
    [error] = publication.sent
    assert error.code == A.CONTROL_RESPONSE_CODES["ERROR"]
    assert error.relevant_id == A.ARCHIVE_ERROR_CODES["AUTHENTICATION_REJECTED"]
    assert "connect timeout" in error.error_message


def test_a_challenge_response_goes_to_the_authenticator_only_when_challenged():
    answers = []

    class Challenging(NullAuthenticator):
        def on_connected_session(self, session, now_ms):
            session.challenge(b"prove it")

        def on_challenge_response(self, session_id, encoded_credentials, now_ms):
            answers.append((session_id, encoded_credentials, now_ms))

        def on_challenged_session(self, session, now_ms):
            if answers:
                session.authenticate(b"principal")

    session, publication = session_with(Challenging())
    assert not session.on_challenge_response(b"early")  # not challenged yet: ignored
    publication.is_connected = True
    session.do_work(1)
    assert session.state is ControlSessionState.CHALLENGED
    [challenge] = publication.sent
    assert (challenge.control_session_id, challenge.correlation_id, bytes(challenge.encoded_challenge)) == \
        (7, 99, b"prove it")
    session.do_work(2)
    assert session.state is ControlSessionState.CHALLENGED
    assert session.on_challenge_response(b"answer", correlation_id=120)
    session.do_work(3)
    assert session.state is ControlSessionState.ACTIVE and session.encoded_principal == b"principal"
    assert answers == [(7, b"answer", 1234)]
    ok = publication.sent[-1]
    # As Aeron's archive: the connect is answered under the ChallengeResponse's correlation id, which the client
    # awaits (the connect's own id was the challenge's).
    assert (ok.code, ok.correlation_id, ok.relevant_id) == (A.CONTROL_RESPONSE_CODES["OK"], 120, 7)


def test_a_hook_that_raises_rejects_the_session_once_its_client_can_hear_it_and_is_recorded():
    class Broken(NullAuthenticator):
        def on_connect_request(self, session_id, encoded_credentials, now_ms):
            raise KeyError("user table")

    errors = []
    session, publication = session_with(Broken(), errors)
    session.on_connect_request(b"creds")
    assert len(errors) == 1 and isinstance(errors[0], KeyError)
    session.do_work(1)
    assert not publication.sent  # nobody to tell yet
    publication.is_connected = True
    session.do_work(2)
    assert session.state is ControlSessionState.DONE
    [error] = publication.sent
    assert error.relevant_id == A.ARCHIVE_ERROR_CODES["AUTHENTICATION_REJECTED"]
    assert "KeyError" in error.error_message and "user table" in error.error_message


@pytest.mark.parametrize("spec, complaint", [
    ("no_colon_here", "must be 'package.module:factory'"),
    ("aeron_numba.nowhere:Factory", "cannot be loaded"),
    ("aeron_numba.archive.authentication:NoSuchClass", "cannot be loaded"),
    ("aeron_numba.layout.archive:NULL_VALUE", "is not callable"),
])
def test_a_bad_hook_name_is_a_configuration_error_naming_it(tmp_path, spec, complaint):
    ctx = ArchiveContext(archive_dir=str(tmp_path), authenticator_supplier=spec)
    with pytest.raises(ConfigurationError, match=complaint) as raised:
        ctx.conclude()
    assert spec in str(raised.value) and "authenticator_supplier" in str(raised.value)
