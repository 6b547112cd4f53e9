"""A service snapshot written by ``ServiceSnapshotTaker`` and read back by ``ServiceSnapshotLoader`` over an IPC
stream of the scripted driver: markers and sessions as Aeron lays them out, the service's own bytes after the END
marker, and the loader's refusals of a snapshot that is not a service's or has no BEGIN."""

from __future__ import annotations

import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.service.client_session import ContainerClientSession
from aeron_numba.cluster.service.service_snapshot import MARK_BEGIN, MARK_END, ServiceSnapshotLoader, \
    ServiceSnapshotTaker
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
from tests.unit.client_support import FakeDriver, connect


class Sessions:
    def __init__(self):
        self.added = []

    def add_session(self, *fields):
        self.added.append(fields)


@pytest.fixture
def stream(tmp_path):
    driver = FakeDriver(tmp_path / "aeron")
    aeron, _ = connect(driver)
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 106)
    subscription = aeron.add_subscription("aeron:ipc?term-length=64k", 106)
    await_condition(lambda: subscription.images and publication.is_connected, 10, "snapshot image")
    yield publication, subscription.images[0]
    aeron.close()
    driver.close()


def _load(image, sink):
    loader = ServiceSnapshotLoader(image, sink)
    await_condition(lambda: loader.poll() >= 0 and loader.is_done, 10, "END marker")
    return loader


def test_markers_sessions_then_the_services_own_bytes(stream):
    publication, image = stream
    taker = ServiceSnapshotTaker(publication, idle=lambda: None)
    sessions = [ContainerClientSession(i, 102, f"aeron:udp?endpoint=localhost:{9000 + i}", b"p%d" % i, None)
                for i in (3, 8)]
    taker.mark_begin(4096, 2, int(ClusterTimeUnit.NANOS), 0x10203)
    for session in sessions:
        taker.snapshot_session(session)
    taker.mark_end(4096, 2, int(ClusterTimeUnit.NANOS), 0x10203)
    assert publication.offer(b"service state") > 0
    sink = Sessions()
    loader = _load(image, sink)
    assert sink.added == [(3, 102, "aeron:udp?endpoint=localhost:9003", b"p3"),
                          (8, 102, "aeron:udp?endpoint=localhost:9008", b"p8")]
    assert (loader.app_version, loader.time_unit) == (0x10203, ClusterTimeUnit.NANOS)
    rest = []
    await_condition(lambda: (image.poll(lambda b, o, n, h: rest.append(bytes(b[o:o + n])), 10), rest)[1], 10,
                    "the service's bytes")
    assert rest == [b"service state"], "the loader stops at the END marker"


def _marker(publication, type_id, mark):
    assert publication.offer(CLUSTER.encode(CLUSTER.SnapshotMarker(type_id=type_id, log_position=0,
                                                                    leadership_term_id=0, index=0, mark=mark,
                                                                    time_unit=0, app_version=0))) > 0


def test_a_consensus_module_snapshot_is_refused(stream):
    publication, image = stream
    _marker(publication, C.CONSENSUS_MODULE_SNAPSHOT_TYPE_ID, MARK_BEGIN)
    with pytest.raises(ClusterError, match="unexpected snapshot type: 1"):
        _load(image, Sessions())


def test_an_end_without_begin_is_refused(stream):
    publication, image = stream
    _marker(publication, C.SERVICE_SNAPSHOT_TYPE_ID, MARK_END)
    with pytest.raises(ClusterError, match="missing begin snapshot"):
        _load(image, Sessions())
