"""The cluster client's errors, in ``cluster_error.py``'s family (each is a ``ClusterError``).

A connect the cluster answers with ERROR raises ``ClusterError`` itself with the cluster's detail text (Aeron's
``ClusterException(detail)``); these name the other ways a connect or a session ends.
"""

from __future__ import annotations

from aeron_numba.cluster.cluster_error import ClusterError, ClusterTimeoutError


class AuthenticationError(ClusterError):
    """The cluster's authenticator rejected the client's credentials or its answer to a challenge (Aeron's
    ``AuthenticationException``, from a SessionEvent AUTHENTICATION_REJECTED); the message is the cluster's
    detail."""


class ClusterConnectTimeoutError(ClusterTimeoutError):
    """No leader answered the connect within the message timeout (Aeron's ``TimeoutException`` of
    ``AsyncConnect``). ``step`` is the connect step reached, ``endpoints`` what was tried, ``timeout_ns`` the
    message timeout."""

    def __init__(self, message: str, step: str, endpoints: str, timeout_ns: int):
        super().__init__(message)
        self.step = step
        self.endpoints = endpoints
        self.timeout_ns = timeout_ns


class ClusterClientClosedError(ClusterError):
    """An offer or send on a session that is closed: by the application, by the cluster (SessionEvent CLOSED,
    ``reason`` holds its detail), or because no new leader came within the new leader timeout."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason
