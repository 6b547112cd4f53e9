"""Authentication and authorisation hooks of the archive's control sessions (spec/archive.md §6.1), in the shape
of Aeron's ``io.aeron.security``.

A connect (``AuthConnectRequest``, or ``ConnectRequest`` with no credentials) gives its credentials to the
archive's ``Authenticator``; once the session's response publication is connected the authenticator decides
through a ``SessionProxy``: ``authenticate(principal)`` (the connect OK goes out), ``challenge(data)`` (a
``Challenge`` goes to the client, whose ``ChallengeResponse`` credentials come back to the authenticator), or
``reject()`` (an ERROR response with AUTHENTICATION_REJECTED, then the session closes). A session the
authenticator leaves undecided for the connect timeout is rejected. Every later request is checked by the
``AuthorisationService`` against the session's principal (UNAUTHORISED_ACTION when refused). The client's side
is a ``CredentialsSupplier`` in its ``AeronArchiveContext``.

The archive loads them by name, as Aeron does by class name: ``"package.module:factory"`` in
``AERON_AUTHENTICATOR_SUPPLIER`` / ``AERON_ARCHIVE_AUTHORISATION_SERVICE_SUPPLIER``, the factory called with
no arguments once per archive. The defaults authenticate everyone and allow everything.
"""

from __future__ import annotations

import importlib
from typing import Callable, Protocol

from aeron_numba.archive.archive_error import ArchiveError
from aeron_numba.errors import ConfigurationError


class SessionProxy(Protocol):
    """What an authenticator may do with a connecting session (the archive's control session implements it)."""

    @property
    def session_id(self) -> int: ...

    def challenge(self, encoded_challenge: bytes) -> bool: ...

    def authenticate(self, encoded_principal: bytes) -> bool: ...

    def reject(self) -> None: ...


class Authenticator(Protocol):
    def on_connect_request(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None: ...

    def on_challenge_response(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None: ...

    def on_connected_session(self, session: SessionProxy, now_ms: int) -> None: ...

    def on_challenged_session(self, session: SessionProxy, now_ms: int) -> None: ...


class AuthorisationService(Protocol):
    def is_authorised(self, protocol_id: int, action_id: int, action_type, encoded_principal: bytes) -> bool: ...


class NullAuthenticator:
    """Aeron's default: every session is authenticated as soon as it is connected, with an empty principal."""

    def on_connect_request(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        pass

    def on_challenge_response(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        pass

    def on_connected_session(self, session: SessionProxy, now_ms: int) -> None:
        session.authenticate(b"")

    def on_challenged_session(self, session: SessionProxy, now_ms: int) -> None:
        session.authenticate(b"")


class CredentialsSupplier(Protocol):
    """The client side: credentials for the connect, and the answer to a Challenge."""

    def encoded_credentials(self) -> bytes: ...

    def on_challenge(self, encoded_challenge: bytes) -> bytes: ...


class NullCredentialsSupplier:
    def encoded_credentials(self) -> bytes:
        return b""

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        return b""


class ReplicationCredentialsSupplier:
    """A replication's credentials (its request's): sent with the connect to the source archive; a challenge
    cannot be answered with them (Aeron's words)."""

    def __init__(self, encoded_credentials: bytes):
        self._encoded_credentials = bytes(encoded_credentials)

    def encoded_credentials(self) -> bytes:
        return self._encoded_credentials

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        raise ArchiveError("Replication does not support challenge/response authentication")


class AllowAllAuthorisationService:
    def is_authorised(self, protocol_id: int, action_id: int, action_type, encoded_principal: bytes) -> bool:
        return True


class DenyAllAuthorisationService:
    def is_authorised(self, protocol_id: int, action_id: int, action_type, encoded_principal: bytes) -> bool:
        return False


def load_supplier(spec: str, setting_name: str, default: Callable[[], object]) -> Callable[[], object]:
    """The factory named ``"package.module:attribute"`` (``""``: ``default``); ``ConfigurationError`` naming the
    setting and the value when it cannot be imported or is not callable."""
    if not spec:
        return default
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"{setting_name}={spec!r} must be 'package.module:factory'")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{setting_name}={spec!r} cannot be loaded: {exc}") from None
    if not callable(factory):
        raise ConfigurationError(f"{setting_name}={spec!r} is not callable")
    return factory
