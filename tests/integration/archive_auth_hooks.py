"""Authenticator and authorisation service the archive process loads by name in the authentication tests
(``AERON_AUTHENTICATOR_SUPPLIER=tests.integration.archive_auth_hooks:ChallengingAuthenticator``).

Credentials: ``admin:secret`` is authenticated at once as principal ``admin``; ``reader`` is challenged with
``nonce-42`` and authenticated as ``reader`` when it answers ``answer:nonce-42`` (rejected on any other answer);
``boom`` makes the hook raise; anything else is rejected. A reader may only look (list, positions, archive id).
"""

from __future__ import annotations

from aeron_numba.layout.archive_schema import MESSAGES

CHALLENGE = b"nonce-42"
READER_ACTIONS = frozenset(m.template_id for m in MESSAGES if m.name in (
    "ListRecordingsRequest", "ListRecordingRequest", "RecordingPositionRequest", "StopPositionRequest",
    "ArchiveIdRequest"))


class ChallengingAuthenticator:
    def __init__(self):
        self.credentials: dict[int, bytes] = {}
        self.answers: dict[int, bytes] = {}

    def on_connect_request(self, session_id, encoded_credentials, now_ms):
        if encoded_credentials == b"boom":
            raise RuntimeError("credentials store unavailable")
        self.credentials[session_id] = encoded_credentials

    def on_challenge_response(self, session_id, encoded_credentials, now_ms):
        self.answers[session_id] = encoded_credentials

    def on_connected_session(self, session, now_ms):
        credentials = self.credentials.pop(session.session_id, b"")
        if credentials == b"admin:secret":
            session.authenticate(b"admin")
        elif credentials == b"reader":
            session.challenge(CHALLENGE)
        else:
            session.reject()

    def on_challenged_session(self, session, now_ms):
        answer = self.answers.pop(session.session_id, None)
        if answer == b"answer:" + CHALLENGE:
            session.authenticate(b"reader")
        elif answer is not None:
            session.reject()


class ReaderMayOnlyLook:
    def is_authorised(self, protocol_id, action_id, action_type, encoded_principal):
        return encoded_principal == b"admin" or action_id in READER_ACTIONS
