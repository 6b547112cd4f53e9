"""What a cluster client's application is told of its egress (Aeron's ``EgressListener``).

Subclass ``EgressListener`` and override what you need: ``on_message`` must be overridden (Aeron's default
listener refuses messages too: an application that gets replies must say where they go); the others do nothing
by default, as Aeron's default methods. ``buffer[offset:offset + length]`` of ``on_message`` is the reply's
payload after its 32-byte session header, valid during the call only (the buffer is the subscription's).
"""

from __future__ import annotations

import enum

from aeron_numba.errors import ConfigurationError
from aeron_numba.layout.cluster_schema import ENUMS

#: SessionEvent codes (schema 111's EventCode): OK, ERROR, REDIRECT, AUTHENTICATION_REJECTED, CLOSED.
EventCode = enum.IntEnum("EventCode", ENUMS["EventCode"])
#: AdminRequest types (SNAPSHOT) and AdminResponse codes (OK, ERROR, UNAUTHORISED_ACCESS).
AdminRequestType = enum.IntEnum("AdminRequestType", ENUMS["AdminRequestType"])
AdminResponseCode = enum.IntEnum("AdminResponseCode", ENUMS["AdminResponseCode"])


def _named(enum_class, value: int):
    """The enum member of ``value``, or the int itself when the cluster sent a code this schema lacks."""
    try:
        return enum_class(value)
    except ValueError:
        return value


class EgressListener:
    """The application's side of a cluster session's egress."""

    def on_message(self, cluster_session_id: int, timestamp: int, buffer, offset: int, length: int, header) -> None:
        raise ConfigurationError("an egress_listener with on_message must be given to AeronCluster.connect to "
                                 "receive the cluster's replies")

    def on_session_event(self, correlation_id: int, cluster_session_id: int, leadership_term_id: int,
                         leader_member_id: int, code: int, detail: str) -> None:
        """A SessionEvent for this session (``code`` an ``EventCode``): CLOSED ends the session."""

    def on_new_leader(self, cluster_session_id: int, leadership_term_id: int, leader_member_id: int,
                      ingress_endpoints: str) -> None:
        """A new leader was elected; the client has already moved its ingress to it."""

    def on_admin_response(self, cluster_session_id: int, correlation_id: int, request_type: int, response_code: int,
                          message: str, payload: bytes, payload_offset: int, payload_length: int) -> None:
        """The answer to an admin request (e.g. ``send_admin_request_to_take_a_snapshot``)."""
