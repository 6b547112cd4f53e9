"""A service's snapshot (spec/cluster.md §9): written by ``ServiceSnapshotTaker``, read back by
``ServiceSnapshotLoader`` (Aeron's classes of those names).

Layout of the recording, as Aeron's container writes it: a SnapshotMarker BEGIN (typeId 2, the log position and
leadership term of the snapshot, the cluster time unit and app version), one ClientSession per open session, a
SnapshotMarker END, and then whatever the service's ``on_take_snapshot`` offers. So the loader stops at the END
marker and the service's ``on_start(cluster, image)`` reads its own state from the rest of the image.

The taker offers each message until the publication takes it, idling between tries (a snapshot is taken
synchronously, as Aeron's is); NOT_CONNECTED, CLOSED and MAX_POSITION_EXCEEDED end it with a ``ClusterError``.
"""

from __future__ import annotations

from aeron_numba.client.fragment_assembler import BREAK, CONTINUE, ControlledFragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.codecs.cluster_messages import CLUSTER, SERVICE_SNAPSHOT
from aeron_numba.codecs.cluster_proxies import ServiceSnapshotTaker as ServiceSnapshotProxy
from aeron_numba.codecs.sbe import MalformedMessageError, UnknownMessageError
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster_schema import ENUMS
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, CLOSED, MAX_POSITION_EXCEEDED, \
    NOT_CONNECTED

MARK_BEGIN = ENUMS["SnapshotMark"]["BEGIN"]
MARK_END = ENUMS["SnapshotMark"]["END"]
#: Fragments read per loader poll (Aeron's ServiceSnapshotLoader.FRAGMENT_LIMIT).
FRAGMENT_LIMIT = 10


def check_offer_result(result: int, publication) -> None:
    """Aeron's SnapshotTaker.checkResult: a publication that cannot take the snapshot ends it."""
    if result == NOT_CONNECTED:
        raise ClusterError("publication is not connected")
    if result == CLOSED:
        raise ClusterError("publication is closed")
    if result == MAX_POSITION_EXCEEDED:
        term_length = getattr(publication, "term_buffer_length", "?")
        raise ClusterError(f"publication at max position: term-length={term_length}")


def offer_until_taken(publication, buffer, offset: int, length: int, idle) -> int:
    """Offer until the publication takes it; back pressure and admin action idle, a refusal raises."""
    while True:
        result = publication.offer(buffer, offset, length)
        if result > 0:
            return result
        if result not in (BACK_PRESSURED, ADMIN_ACTION):
            check_offer_result(result, publication)
        idle()


class ServiceSnapshotTaker:
    """Writes the container's part of a service snapshot to an exclusive publication."""

    def __init__(self, publication, idle):
        self.publication = publication
        self._proxy = ServiceSnapshotProxy(publication, retry_attempts=1)
        self._idle = idle

    def _until_taken(self, send) -> None:
        while not send():
            result = self._proxy.last_result
            if result not in (BACK_PRESSURED, ADMIN_ACTION):
                check_offer_result(result, self.publication)
            self._idle()

    def mark(self, mark: int, log_position: int, leadership_term_id: int, time_unit: int, app_version: int,
             type_id: int = C.SERVICE_SNAPSHOT_TYPE_ID, index: int = 0) -> None:
        self._until_taken(lambda: self._proxy.snapshot_marker(type_id, log_position, leadership_term_id, index, mark,
                                                              time_unit, app_version))

    def mark_begin(self, log_position: int, leadership_term_id: int, time_unit: int, app_version: int) -> None:
        self.mark(MARK_BEGIN, log_position, leadership_term_id, time_unit, app_version)

    def mark_end(self, log_position: int, leadership_term_id: int, time_unit: int, app_version: int) -> None:
        self.mark(MARK_END, log_position, leadership_term_id, time_unit, app_version)

    def snapshot_session(self, session) -> None:
        self._until_taken(lambda: self._proxy.client_session(session.id, session.response_stream_id,
                                                             session.response_channel, session.encoded_principal))


class ServiceSnapshotLoader:
    """Reads the container's part of a snapshot image up to its END marker, adding each session to ``agent``."""

    def __init__(self, image, agent):
        self.image = image
        self.agent = agent
        self.is_done = False
        self.in_snapshot = False
        self.app_version = 0
        self.time_unit = ClusterTimeUnit.MILLIS
        self._assembler = ControlledFragmentAssembler(self._on_message)
        self._templates = {CLUSTER.schema.message(name).template_id for name in SERVICE_SNAPSHOT}

    def poll(self) -> int:
        return self.image.controlled_poll(self._assembler.on_fragment, FRAGMENT_LIMIT)

    def _on_message(self, buffer, offset: int, length: int, header) -> int:
        try:
            message = CLUSTER.decode(buffer, offset, length)
        except UnknownMessageError as exc:
            raise ClusterError(f"snapshot: {exc}") from None
        except MalformedMessageError as exc:
            raise ClusterError(f"snapshot at position {header.position}: {exc}") from None
        name = message.SPEC.name
        if name == "SnapshotMarker":
            if message.type_id != C.SERVICE_SNAPSHOT_TYPE_ID:
                raise ClusterError(f"unexpected snapshot type: {message.type_id}")
            if message.mark == MARK_BEGIN:
                if self.in_snapshot:
                    raise ClusterError("already in snapshot")
                self.in_snapshot = True
                self.app_version = message.app_version
                self.time_unit = ClusterTimeUnit.from_code(message.time_unit)
            elif message.mark == MARK_END:
                if not self.in_snapshot:
                    raise ClusterError("missing begin snapshot")
                self.is_done = True
                return BREAK
        elif name == "ClientSession":
            self.agent.add_session(message.cluster_session_id, message.response_stream_id, message.response_channel,
                                   message.encoded_principal)
        return CONTINUE
