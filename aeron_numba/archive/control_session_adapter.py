"""The archive's control requests in (spec/archive.md §6.1), as Aeron's ControlSessionAdapter: poll the control
subscriptions, decode each request, find its control session, apply the authentication and authorisation checks,
and call the conductor's ``on_<request>(session, **fields)``.

A connect (ConnectRequest, AuthConnectRequest) has no session yet: its handler gets the request image (control
subscription id, publication session id) instead. Every other request names its control session: one unknown or
closed is recorded and dropped; a ChallengeResponse goes to its (challenged) session; anything else needs an
ACTIVE session, and then the authorisation service's yes (CloseSessionRequest and KeepAliveRequest are always
allowed), else the client gets UNAUTHORISED_ACTION. Requests this archive does not implement are answered with
ERROR GENERIC "not supported". A request the conductor cannot do (its handler raised an archive, OS or value
error) is answered with ERROR GENERIC and recorded, never a crash. Malformed input is counted and recorded by
``SbeAdapter``.
"""

from __future__ import annotations

import functools

from aeron_numba.archive.control_session import ControlSessionState
from aeron_numba.client import FragmentAssembler
from aeron_numba.codecs.archive_messages import ARCHIVE, CONTROL_REQUESTS
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.errors import AeronError
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA_ID

#: Requests this archive answers with ERROR GENERIC "not supported": none now (every request of the schema is
#: implemented); kept for a schema version that adds one.
UNSUPPORTED_REQUESTS: tuple[str, ...] = ()
_CONNECTS = frozenset(ARCHIVE.schema.message(name).template_id for name in ("ConnectRequest", "AuthConnectRequest"))
_CHALLENGE_RESPONSE = ARCHIVE.schema.message("ChallengeResponse").template_id
#: Requests an authenticated session may always make: ending or keeping alive its own session.
_ALWAYS_AUTHORISED = frozenset(ARCHIVE.schema.message(name).template_id
                               for name in ("CloseSessionRequest", "KeepAliveRequest"))


class ControlSessionAdapter(SbeAdapter):
    """Polls ``subscriptions`` (the control channels) and hands each request to ``conductor``.

    ``conductor`` has the ``on_<request>`` handlers, ``control_sessions`` (id -> ControlSession) and
    ``record_error``; ``authorisation_service.is_authorised(schema_id, template_id, type, principal)`` decides
    what an active session may ask."""

    def __init__(self, conductor, subscriptions, authorisation_service):
        super().__init__(ARCHIVE, conductor, CONTROL_REQUESTS, unsupported=UNSUPPORTED_REQUESTS,
                         on_unsupported=self._on_unsupported, context=("session",), on_error=conductor.record_error)
        self.conductor = conductor
        self.authorisation_service = authorisation_service
        self.subscriptions = list(subscriptions)
        self._assemblers = [FragmentAssembler(functools.partial(self._on_request, subscription.registration_id))
                            for subscription in self.subscriptions]

    def poll(self, fragment_limit: int = 16) -> int:
        work = 0
        for subscription, assembler in zip(self.subscriptions, self._assemblers):
            work += subscription.poll(assembler, fragment_limit)
        return work

    def _on_request(self, subscription_id: int, buffer, offset, length, header) -> None:
        request = self.decode(buffer, offset, length)
        if request is None:
            return
        template_id = request.SPEC.template_id
        if template_id in _CONNECTS:  # no session yet: the handler gets where the request came from
            self.dispatch(request, (subscription_id, header.session_id))
            return
        name = request.SPEC.name
        conductor = self.conductor
        session = conductor.control_sessions.get(request.control_session_id)
        if session is None or session.state is ControlSessionState.DONE:
            conductor.record_error(f"{name} for unknown control session id={request.control_session_id}")
            return
        if template_id == _CHALLENGE_RESPONSE:  # the one request of a session not yet authenticated
            self.dispatch(request, session)
            return
        if session.state is not ControlSessionState.ACTIVE:
            conductor.record_error(f"{name} for control session id={session.control_session_id} before it was "
                                   f"authenticated (state {session.state.value}): ignored")
            return
        correlation_id = getattr(request, "correlation_id", -1)
        if template_id not in _ALWAYS_AUTHORISED and not self.authorisation_service.is_authorised(
                ARCHIVE_SCHEMA_ID, template_id, None, session.encoded_principal):
            session.error(correlation_id, "UNAUTHORISED_ACTION",
                          f"{name} (templateId={template_id}) is not authorised for control session "
                          f"id={session.control_session_id}")
            return
        try:
            self.dispatch(request, session)
        except (AeronError, OSError, ValueError) as exc:  # a request the archive cannot do: the client gets why
            session.error(correlation_id, "GENERIC", f"{name}: {exc}")
            conductor.record_error(exc)

    @staticmethod
    def _on_unsupported(request, session) -> None:
        session.error(request.correlation_id, "GENERIC", f"request {request.SPEC.name} "
                      f"(templateId={request.SPEC.template_id}) is not supported by this archive")
