"""Running a clustered service (Aeron's ``ClusteredServiceContainer``): ``python -m aeron_numba.cluster.service
--service package.module:ClassName``, or ``ClusteredServiceContainer(ctx, service).run()`` in a process of one's own.

Start-up: validate the context; take the service's mark file ``cluster-mark-service-<id>.dat`` (refusing one a live
container holds; its error log records every error of this container); connect the Aeron client to the node's
driver; allocate the container's counters (errors, max cycle time, cycle time threshold exceeded, max snapshot
duration, snapshot duration threshold exceeded; keyed by cluster id and service id as Aeron's
``ClusterCounters.allocateServiceCounter``); then run the ``ClusteredServiceAgent`` on an
``AgentRunner`` with the cluster's idle strategy until SIGINT/SIGTERM or the consensus module's termination.

Snapshots are recorded by, and loaded from, the node's local archive over its local control channel; the archive
client's response stream is derived from the cluster and service ids, as Aeron's container derives it, so that the
consensus module and each service of a node have their own.
"""

from __future__ import annotations

import logging
import struct
import time
from pathlib import Path

from aeron_numba.agent import AgentRunner, DutyCycleTracker, SystemNanoClock, idle_strategy_from_name
from aeron_numba.agent.agent_runner import close_on_signals
from aeron_numba.agent.invoked_agents import InvokingIdleStrategy
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.context import ARCHIVE_CONTROL_RESPONSE_STREAM_ID, ClusteredServiceContext
from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.cluster.service.clustered_service import check_service
from aeron_numba.cluster.service.clustered_service_agent import ClusteredServiceAgent
from aeron_numba.kernels.error_log import DistinctErrorLog
from aeron_numba.layout import cluster as C

log = logging.getLogger("aeron_numba.cluster.service")


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def archive_context(ctx: ClusteredServiceContext, agent_invoker=None):
    """The local archive's client settings of a container (Aeron's default archive context of a container);
    ``agent_invoker``: what its waits for the archive invoke, when the archive runs on the container's thread."""
    from aeron_numba.archive.client import AeronArchiveContext

    return AeronArchiveContext(control_response_stream_id=ctx.cluster_id * 100 + 100
                               + ARCHIVE_CONTROL_RESPONSE_STREAM_ID + ctx.service_id + 1,
                               agent_invoker=agent_invoker)


def service_counter_key(cluster_id: int, service_id: int) -> bytes:
    return struct.pack("<ii", cluster_id, service_id)


def service_counter_label(name: str, cluster_id: int, service_id: int) -> str:
    return f"{name} - clusterId={cluster_id} serviceId={service_id}"


class ClusteredServiceContainer:
    """A service and its agent, runner, Aeron client, mark file and counters (see the module docstring).

    ``service``: the ClusteredService to run; None makes one with ``ctx.service_class_name``
    (AERON_CLUSTER_SERVICE_CLASS_NAME).
    ``aeron``: an Aeron client to use (not closed by the container); None connects one to ``ctx.aeron_dir``.
    ``wait_invoker``: for a container whose agent is invoked on the thread of its consensus module, archive and
    driver (``ClusteredMediaDriver``): every wait of the agent (its idle strategy, its archive client's) invokes it
    first, since nothing else runs them while the agent waits."""

    def __init__(self, ctx: ClusteredServiceContext, service=None, *, aeron=None, nano_clock=None,
                 epoch_clock_ms=_epoch_ms, wait_invoker=None):
        from aeron_numba.client import Aeron, Context

        self.ctx = ctx.conclude()
        if service is None:
            if ctx.service_factory is None:
                raise ClusterError("either an instance or a class name (service_class_name, "
                                   "AERON_CLUSTER_SERVICE_CLASS_NAME) of the service must be provided")
            service = ctx.service_factory()
        check_service(service)
        self.service = service
        self._epoch_clock_ms = epoch_clock_ms
        mark_dir = Path(self.ctx.mark_file_dir)
        mark_dir.mkdir(parents=True, exist_ok=True)
        self.mark_file = self._take_mark_file(mark_dir / self.ctx.mark_file_name)
        self.error_log = DistinctErrorLog(self.mark_file.error_log_buffer, epoch_clock=epoch_clock_ms)
        self._owns_aeron = aeron is None
        self._wait_invoker = wait_invoker
        try:
            self.aeron = aeron if aeron is not None else Aeron.connect(Context(
                aeron_dir=self.ctx.aeron_dir, client_name=f"cluster-service-{ctx.cluster_id}-{ctx.service_id}"))
            key = service_counter_key(ctx.cluster_id, ctx.service_id)
            self.error_counter = self.aeron.add_counter(
                C.CLUSTERED_SERVICE_ERROR_COUNT_TYPE_ID, key,
                service_counter_label("Cluster Container Errors", ctx.cluster_id, ctx.service_id))
            self.max_cycle_time_counter = self.aeron.add_counter(
                C.CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID, key,
                service_counter_label("Cluster container max cycle time in ns", ctx.cluster_id, ctx.service_id))
            self.cycle_time_threshold_exceeded_counter = self.aeron.add_counter(
                C.CLUSTERED_SERVICE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
                service_counter_label(f"Cluster container work cycle time exceeded count: threshold="
                                      f"{ctx.cycle_threshold_ns}ns", ctx.cluster_id, ctx.service_id))
            self.max_snapshot_duration_counter = self.aeron.add_counter(
                C.CLUSTERED_SERVICE_MAX_SNAPSHOT_DURATION_TYPE_ID, key,
                service_counter_label("Clustered service max snapshot duration in ns", ctx.cluster_id,
                                      ctx.service_id))
            self.snapshot_duration_threshold_exceeded_counter = self.aeron.add_counter(
                C.CLUSTERED_SERVICE_SNAPSHOT_DURATION_THRESHOLD_EXCEEDED_TYPE_ID, key,
                service_counter_label(f"Clustered service max snapshot duration exceeded count: threshold="
                                      f"{ctx.snapshot_duration_threshold_ns}", ctx.cluster_id, ctx.service_id))
            clock = nano_clock or SystemNanoClock.nano_time
            waits = idle_strategy_from_name(self.ctx.idle_strategy)
            if wait_invoker is not None:
                waits = InvokingIdleStrategy(waits, wait_invoker)
            self.agent = ClusteredServiceAgent(
                self.ctx, service, self.aeron, error_handler=self.record_error,
                archive_connect=self._connect_archive, idle_strategy=waits,
                nano_clock=clock, epoch_clock_ms=epoch_clock_ms, mark_file=self.mark_file,
                on_snapshot_duration=self._on_snapshot_duration)
            self.runner = AgentRunner(
                self.agent, idle_strategy_from_name(self.ctx.idle_strategy), self.record_error,
                duty_cycle_tracker=DutyCycleTracker(self._propose_max_cycle_time,
                                                    self.cycle_time_threshold_exceeded_counter.increment,
                                                    cycle_time_threshold_ns=self.ctx.cycle_threshold_ns))
        except BaseException:
            self._close_resources()
            raise

    def _take_mark_file(self, path: Path) -> ClusterMarkFile:
        if path.exists():
            try:
                with ClusterMarkFile.open(path) as existing:
                    if existing.is_active(self._epoch_clock_ms()):
                        raise ClusterError(f"active mark file detected: {path} (pid {existing.pid}): another "
                                           f"container runs service {self.ctx.service_id} in this cluster dir")
            except ClusterError as exc:
                if "active mark file" in str(exc):
                    raise
                # an unreadable old file is replaced
        return ClusterMarkFile.create(
            path, component_type="CONTAINER", member_id=-1, service_id=self.ctx.service_id,
            cluster_id=self.ctx.cluster_id, archive_stream_id=archive_context(self.ctx).control_request_stream_id,
            service_stream_id=self.ctx.service_stream_id,
            consensus_module_stream_id=self.ctx.consensus_module_stream_id,
            aeron_directory=str(self.ctx.aeron_dir or ""), control_channel=self.ctx.control_channel,
            service_name=self.ctx.service_name, services_cluster_dir=self.ctx.cluster_dir,
            error_buffer_length=self.ctx.error_buffer_length, epoch_clock=self._epoch_clock_ms)

    def _connect_archive(self):
        from aeron_numba.archive.client import AeronArchive

        return AeronArchive.connect(self.aeron, archive_context(self.ctx, self._wait_invoker))

    def _on_snapshot_duration(self, duration_ns: int) -> None:
        """Aeron's SnapshotDurationTracker: the longest service snapshot, and how many took over the threshold."""
        if duration_ns > self.max_snapshot_duration_counter.get_weak():
            self.max_snapshot_duration_counter.set(duration_ns)
        if duration_ns > self.ctx.snapshot_duration_threshold_ns:
            self.snapshot_duration_threshold_exceeded_counter.increment()

    def _propose_max_cycle_time(self, cycle_ns: int) -> None:
        if cycle_ns > self.max_cycle_time_counter.get_weak():
            self.max_cycle_time_counter.set(cycle_ns)

    def record_error(self, error: BaseException | str) -> None:
        """Count an error and record it in the mark file's error log (never raises)."""
        try:
            self.error_counter.increment()
        except Exception:  # noqa: BLE001 - the counter may be gone with the client; the log still records it
            pass
        self.error_log.record(error)
        log.warning("error recorded in the error log: %s", error)

    @property
    def error_count(self) -> int:
        return self.error_counter.get()

    def run(self) -> None:
        """Run the agent until SIGINT/SIGTERM or the cluster's termination, then close."""
        def stop() -> None:
            self.agent.request_termination()
            self.runner.request_close()

        close_on_signals(stop)
        try:
            self.runner.run()
        finally:
            self.close()

    def close(self) -> None:
        if not self.runner.is_closed and self.runner.is_running:
            self.agent.request_termination()
            self.runner.close()
        self._close_resources()

    def _close_resources(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        aeron = getattr(self, "aeron", None)
        if aeron is not None and self._owns_aeron and not aeron.is_closed:
            aeron.close()
        if getattr(self, "mark_file", None) is not None:
            self.mark_file.close()

    def __enter__(self) -> "ClusteredServiceContainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
