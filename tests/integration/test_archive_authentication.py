"""The archive's connect with authentication (spec/archive.md §6.1) and per-request authorisation, against a real
archive process whose Authenticator and AuthorisationService are loaded by name
(``tests/integration/archive_auth_hooks.py``): authenticated at once, challenged and answered, rejected for bad
credentials or a bad answer or a hook that raised (recorded in the archive's error log, the archive goes on), and
an authenticated principal refused the requests it is not authorised for."""

from __future__ import annotations

import pytest

from aeron_numba.archive.client import AeronArchive, AeronArchiveContext, ArchiveError
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.client import Aeron, Context
from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.layout import archive as A
from tests.integration.archive_auth_hooks import CHALLENGE
from tests.integration.driver_processes import start_driver
from tests.integration.test_archive_process import ARCHIVE_ENV, RECORDED, STREAM

HOOKS = "tests.integration.archive_auth_hooks"


class Credentials:
    def __init__(self, credentials: bytes, answer: bytes = b""):
        self.credentials, self.answer, self.challenges = credentials, answer, []

    def encoded_credentials(self) -> bytes:
        return self.credentials

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        self.challenges.append(encoded_challenge)
        return self.answer


@pytest.fixture
def secured(process_manager, aeron_dir, tmp_path):
    """A driver, an archive with the test hooks, and a client; yields (aeron, archive dir)."""
    _, cnc = start_driver(process_manager, aeron_dir)
    cnc.close()
    archive_dir = tmp_path / "archive"
    process = process_manager.spawn_module(
        "archive", "aeron_numba.archive", "--archive-dir", str(archive_dir),
        env={**ARCHIVE_ENV, "AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_CONNECT_TIMEOUT": "2s",
             "AERON_AUTHENTICATOR_SUPPLIER": f"{HOOKS}:ChallengingAuthenticator",
             "AERON_ARCHIVE_AUTHORISATION_SERVICE_SUPPLIER": f"{HOOKS}:ReaderMayOnlyLook"})
    process.await_output("aeron-numba archive", 120)
    with Aeron.connect(Context(aeron_dir=str(aeron_dir))) as aeron:
        yield aeron, archive_dir


def connect(aeron, supplier) -> AeronArchive:
    return AeronArchive.connect(aeron, AeronArchiveContext(credentials_supplier=supplier, message_timeout_ns=5 * 10**9))


def rejected(aeron, supplier) -> ArchiveError:
    with pytest.raises(ArchiveError) as raised:
        connect(aeron, supplier).close()
    assert raised.value.error_code == A.ARCHIVE_ERROR_CODES["AUTHENTICATION_REJECTED"], raised.value
    return raised.value


def test_authenticated_challenged_and_authorised_sessions(secured):
    aeron, _ = secured
    with connect(aeron, Credentials(b"admin:secret")) as admin:
        subscription_id = admin.start_recording(RECORDED, STREAM)
        admin.stop_recording_subscription(subscription_id)
        archive_id = admin.get_archive_id()

    reader_credentials = Credentials(b"reader", b"answer:" + CHALLENGE)
    with connect(aeron, reader_credentials) as reader:
        assert reader_credentials.challenges == [CHALLENGE]
        assert reader.get_archive_id() == archive_id
        assert reader.list_recordings(0, 10, lambda descriptor: None) == 0
        with pytest.raises(ArchiveError) as refused:
            reader.start_recording(RECORDED, STREAM)
        assert refused.value.error_code == A.ARCHIVE_ERROR_CODES["UNAUTHORISED_ACTION"]
        assert "StartRecordingRequest" in str(refused.value)
        assert reader.get_archive_id() == archive_id  # a refused request leaves the session as it was


def test_bad_credentials_bad_answers_and_failing_hooks_are_rejected_and_the_archive_goes_on(secured):
    aeron, archive_dir = secured
    assert "authentication rejected" in str(rejected(aeron, Credentials(b"mallory")))
    wrong_answer = Credentials(b"reader", b"a guess")
    rejected(aeron, wrong_answer)
    assert wrong_answer.challenges == [CHALLENGE]
    failed = rejected(aeron, Credentials(b"boom"))
    assert "credentials store unavailable" in str(failed)
    with ArchiveMarkFile.open(archive_dir) as mark:
        errors = [e.encoded_exception for e in ErrorLogReader.read(mark.error_log_buffer)]
    assert any("credentials store unavailable" in e for e in errors), errors
    with connect(aeron, Credentials(b"admin:secret")) as admin:  # the archive is unaffected
        assert admin.get_archive_id() != A.NULL_VALUE
