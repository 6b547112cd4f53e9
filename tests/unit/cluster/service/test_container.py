"""The container around the agent, over the scripted IPC driver: its mark file (a CONTAINER of this service id and
cluster, touched while it runs, closed cleanly), its error counter and error log, the refusal of a second container
while the first lives, and of an object that is not a ClusteredService."""

from __future__ import annotations

import struct
import threading

import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.context import ClusteredServiceContext
from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.cluster.service.container import ClusteredServiceContainer
from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.layout import cluster as C
from harness.awaiting import await_condition
from tests.unit.cluster.service.support import ConsensusModuleStandIn, RecordingService


def _ctx(tmp_path, **overrides):
    settings = dict(cluster_dir=str(tmp_path / "cluster"), service_id=3, cluster_id=0, idle_strategy="sleeping")
    return ClusteredServiceContext(**{**settings, **overrides})


def test_mark_file_error_log_and_counters(tmp_path, aeron):
    container = ClusteredServiceContainer(_ctx(tmp_path), RecordingService(), aeron=aeron)
    try:
        path = tmp_path / "cluster" / "cluster-mark-service-3.dat"
        with ClusterMarkFile.open(path) as mark_file:
            assert (mark_file.component_type, mark_file.service_id, mark_file.cluster_id) == ("CONTAINER", 3, 0)
            assert mark_file.strings()["serviceName"] == "clustered-service"
        container.record_error(ClusterError("something went wrong"))
        assert container.error_count == 1
        (observation,) = ErrorLogReader.read(container.mark_file.error_log_buffer)
        assert "something went wrong" in observation.encoded_exception
        counters = {info.type_id: info for info in aeron.counters_reader.for_each()}
        error_counter = counters[C.CLUSTERED_SERVICE_ERROR_COUNT_TYPE_ID]
        assert struct.unpack("<ii", error_counter.key[:8]) == (0, 3)
        assert error_counter.label == "Cluster Container Errors - clusterId=0 serviceId=3"
        assert C.CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID in counters
        with pytest.raises(ClusterError, match="active mark file detected"):
            ClusteredServiceContainer(_ctx(tmp_path), RecordingService(), aeron=aeron)
    finally:
        container.close()
    with ClusterMarkFile.open(tmp_path / "cluster" / "cluster-mark-service-3.dat") as mark_file:
        assert mark_file.activity_timestamp == -1  # closed cleanly: a new container may take it
    ClusteredServiceContainer(_ctx(tmp_path), RecordingService(), aeron=aeron).close()


def test_runs_until_terminated_by_the_consensus_module(tmp_path, aeron):
    cm = ConsensusModuleStandIn(aeron)
    service = RecordingService()
    container = ClusteredServiceContainer(_ctx(tmp_path, service_id=0), service, aeron=aeron)
    runner = threading.Thread(target=container.runner.run)
    runner.start()
    try:
        await_condition(lambda: cm.messages("ServiceAck"), 20, "the recovery ack")
        assert cm.service_proxy.service_termination_position(0)
        runner.join(20)
        assert not runner.is_alive() and service.events[-1] == ("terminate",)
    finally:
        container.close()
        runner.join(5)


def test_an_object_that_is_not_a_service_is_refused(tmp_path, aeron):
    with pytest.raises(TypeError, match="dict is not a ClusteredService: it lacks on_start"):
        ClusteredServiceContainer(_ctx(tmp_path), {}, aeron=aeron)
