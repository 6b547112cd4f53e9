"""What a clustered service implements (Aeron's ``ClusteredService``) and what it is given (Aeron's ``Cluster``,
``ClientSession``), as Python protocols.

A service is any object with the ``ClusteredService`` methods; ``ClusteredServiceBase`` gives the optional ones
(``on_new_leadership_term_event``, ``do_background_work``) Aeron's defaults and the others no-op bodies to
override. The container calls them from one thread, in log order, as Aeron's does.

The compiled path (where we go beyond Aeron's interface, which has no such thing): a service that sets (in its
``__init__``: a dispatcher set on the class would be bound as a method) ``session_message_handler`` to an
``@njit`` function compiled with
``kernels.cluster_service_log.SESSION_MESSAGE_HANDLER_SIG`` and ``state`` to a ``uint8`` array has its session
messages handed to that function from compiled code, ``handler(state, buffer, offset, length, cluster_session_id,
timestamp, outbox)``, with no Python per message; its replies go through ``reply_claim(outbox, ...)`` of the same
kernel module. Its other callbacks (sessions, timers, snapshots, roles) stay Python methods.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Protocol, runtime_checkable

from aeron_numba.layout.cluster import ClusterRole
from aeron_numba.layout.cluster_schema import ENUMS

#: Aeron's ``Cluster.Role`` (the node-role counter's values and JoinLog's role).
Role = ClusterRole

#: Aeron's ``ClientSession.MOCKED_OFFER``: what a session's offer answers on a member that is not the leader.
MOCKED_OFFER = 1


class CloseReason(IntEnum):
    """Why a client session closed (schema 111's CloseReason)."""
    CLIENT_ACTION = ENUMS["CloseReason"]["CLIENT_ACTION"]
    SERVICE_ACTION = ENUMS["CloseReason"]["SERVICE_ACTION"]
    TIMEOUT = ENUMS["CloseReason"]["TIMEOUT"]


@runtime_checkable
class ClientSession(Protocol):
    """A client's session as a service sees it (Aeron's ``ClientSession``)."""

    @property
    def id(self) -> int: ...

    @property
    def response_stream_id(self) -> int: ...

    @property
    def response_channel(self) -> str: ...

    @property
    def encoded_principal(self) -> bytes: ...

    def close(self) -> None: ...

    @property
    def is_closing(self) -> bool: ...

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int: ...

    def try_claim(self, length: int, buffer_claim=None) -> int: ...


@runtime_checkable
class Cluster(Protocol):
    """What a service is given to act on the cluster (Aeron's ``Cluster``; the container's agent is one)."""

    def member_id(self) -> int: ...

    def role(self) -> Role: ...

    def log_position(self) -> int: ...

    def time(self) -> int: ...

    def time_unit(self): ...

    def get_client_session(self, cluster_session_id: int) -> ClientSession | None: ...

    def client_sessions(self) -> list: ...

    def close_client_session(self, cluster_session_id: int) -> bool: ...

    def schedule_timer(self, correlation_id: int, deadline: int) -> bool: ...

    def cancel_timer(self, correlation_id: int) -> bool: ...

    def offer(self, buffer, offset: int = 0, length: int | None = None) -> int: ...

    def try_claim(self, length: int, buffer_claim=None) -> int: ...

    def idle(self, work_count: int = 0) -> None: ...


@runtime_checkable
class ClusteredService(Protocol):
    """A replicated state machine run by a clustered service container (Aeron's ``ClusteredService``)."""

    def on_start(self, cluster: Cluster, snapshot_image) -> None: ...

    def on_session_open(self, session: ClientSession, timestamp: int) -> None: ...

    def on_session_close(self, session: ClientSession, timestamp: int, close_reason: CloseReason) -> None: ...

    def on_session_message(self, session: ClientSession | None, timestamp: int, buffer, offset: int, length: int,
                           header) -> None: ...

    def on_timer_event(self, correlation_id: int, timestamp: int) -> None: ...

    def on_take_snapshot(self, snapshot_publication) -> None: ...

    def on_role_change(self, new_role: Role) -> None: ...

    def on_terminate(self, cluster: Cluster) -> None: ...


class ClusteredServiceBase:
    """Optional base of a service: no-op callbacks to override, Aeron's defaults for the optional two.

    Compiled path: set ``session_message_handler`` and ``state`` (see the module docstring)."""

    #: An ``@njit`` session message handler (``SESSION_MESSAGE_HANDLER_SIG``), or None for ``on_session_message``.
    session_message_handler: Any = None
    #: The compiled handler's state: a ``uint8`` array it owns.
    state: Any = None

    def on_start(self, cluster: Cluster, snapshot_image) -> None:
        pass

    def on_session_open(self, session: ClientSession, timestamp: int) -> None:
        pass

    def on_session_close(self, session: ClientSession, timestamp: int, close_reason: CloseReason) -> None:
        pass

    def on_session_message(self, session, timestamp: int, buffer, offset: int, length: int, header) -> None:
        pass

    def on_timer_event(self, correlation_id: int, timestamp: int) -> None:
        pass

    def on_take_snapshot(self, snapshot_publication) -> None:
        pass

    def on_role_change(self, new_role: Role) -> None:
        pass

    def on_terminate(self, cluster: Cluster) -> None:
        pass

    def on_new_leadership_term_event(self, leadership_term_id: int, log_position: int, timestamp: int,
                                     term_base_log_position: int, leader_member_id: int, log_session_id: int,
                                     time_unit, app_version: int) -> None:
        pass

    def do_background_work(self, now_ns: int) -> int:
        return 0


def check_service(service) -> None:
    """Refuse (TypeError naming what is missing) an object that is not a ClusteredService."""
    missing = [name for name in ("on_start", "on_session_open", "on_session_close", "on_session_message",
                                 "on_timer_event", "on_take_snapshot", "on_role_change", "on_terminate")
               if not callable(getattr(service, name, None))]
    if missing:
        raise TypeError(f"{type(service).__name__} is not a ClusteredService: it lacks {', '.join(missing)}")
    handler = getattr(service, "session_message_handler", None)
    if handler is not None and getattr(service, "state", None) is None:
        raise TypeError(f"{type(service).__name__}.session_message_handler is set but its state array is None")
