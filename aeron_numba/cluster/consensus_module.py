"""The consensus module of one node (Aeron's ``ConsensusModule``): it concludes the context, creates and owns
``cluster-mark.dat`` (refusing to start over a live one), ``node-state.dat`` and ``recording.log``, connects its
Aeron client to the node's media driver, allocates the counters of spec §10 with Aeron's labels
(``<name> - clusterId=<id>``), builds the ``ConsensusModuleAgent`` and runs it with an ``AgentRunner`` and the
context's idle strategy until SIGINT/SIGTERM or the cluster's termination.

What it needs (docs/cluster.md, "Processes of one node"): a running media driver on ``ctx.aeron_dir`` and the
node's archive serving that driver's local control channel (``aeron:ipc?term-length=64k``, stream 10, as every
aeron-numba archive does); the archive's answers come back on the context's
``archive_control_response_stream_id`` so that nodes sharing a driver do not collide. Pass ``archive_context``
to reach an archive elsewhere.

Errors of the agent go to the mark file's distinct error log and the ``Cluster Errors`` counter; the agent carries
on (Agrona's runner policy).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aeron_numba import __version__
from aeron_numba.agent import AgentRunner, DutyCycleTracker, close_on_signals, idle_strategy_from_name
from aeron_numba.agent.invoked_agents import InvokingIdleStrategy
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import ClusterClock
from aeron_numba.cluster.consensus_module_agent import ConsensusModuleAgent
from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.cluster.node_state_file import NodeStateFile
from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.cluster.warmup import warm_up_cluster_kernels
from aeron_numba.kernels.error_log import DistinctErrorLog
from aeron_numba.layout import archive as A
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster import ClusterControlToggle, ConsensusModuleState

log = logging.getLogger("aeron_numba.cluster")

#: The counters the consensus module allocates: attribute, type id, name (spec §10, Aeron's labels).
COUNTERS = (
    ("module_state", C.CONSENSUS_MODULE_STATE_TYPE_ID, "Consensus Module state"),
    ("election_state", C.ELECTION_STATE_TYPE_ID, "Cluster election state"),
    ("election_count", C.ELECTION_COUNT_TYPE_ID, "Cluster election count"),
    ("leadership_term_id", C.LEADERSHIP_TERM_ID_TYPE_ID, "Cluster leadership term id"),
    ("cluster_role", C.NODE_ROLE_TYPE_ID, "Cluster node role"),
    ("commit_position", C.COMMIT_POSITION_TYPE_ID, "Cluster commit-pos:"),
    ("control_toggle", C.CONTROL_TOGGLE_TYPE_ID, "Cluster control toggle"),
    ("snapshot_counter", C.SNAPSHOT_COUNTER_TYPE_ID, "Cluster snapshot count"),
    ("timed_out_client_counter", C.CLIENT_TIMEOUT_COUNT_TYPE_ID, "Cluster timed out client count"),
    ("max_cycle_time", C.MAX_CYCLE_TIME_TYPE_ID, "Cluster max cycle time in ns"),
)


@dataclass
class ConsensusModuleCounters:
    errors: object
    module_state: object
    election_state: object
    election_count: object
    leadership_term_id: object
    cluster_role: object
    commit_position: object
    control_toggle: object
    snapshot_counter: object
    timed_out_client_counter: object
    max_cycle_time: object
    cycle_time_threshold_exceeded: object

    @classmethod
    def allocate(cls, aeron, cluster_id: int, cycle_threshold_ns: int) -> "ConsensusModuleCounters":
        key = struct.pack("<i", cluster_id)
        suffix = f" - clusterId={cluster_id}"
        made = {name: aeron.add_counter(type_id, key, f"{label}{suffix}") for name, type_id, label in COUNTERS}
        made["errors"] = aeron.add_counter(C.CONSENSUS_MODULE_ERROR_COUNT_TYPE_ID, key,
                                           f"Cluster Errors{suffix} version={__version__} commit=aeron-numba")
        made["cycle_time_threshold_exceeded"] = aeron.add_counter(
            C.CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
            f"Cluster work cycle time exceeded count: threshold={cycle_threshold_ns}ns{suffix}")
        return cls(**made)

    def close(self) -> None:
        for value in vars(self).values():
            try:
                value.close()
            except Exception:
                pass


def _link_or_unlink(cluster_dir: str, mark_file_dir: str) -> None:
    link = Path(cluster_dir) / C.MARK_LINK_FILE
    if Path(mark_file_dir) != Path(cluster_dir):
        link.write_text(mark_file_dir, "ascii")
    else:
        link.unlink(missing_ok=True)


class ConsensusModule:
    """The node's consensus module. ``ConsensusModule(ctx).run()`` blocks until SIGINT/SIGTERM or termination;
    ``close()`` releases everything (also after a failed start). ``aeron``: an Aeron client to use instead of
    connecting one (it is then not closed here). ``co_agents``: the invoker of the agents that share this module's
    thread and that its waits depend on (``ClusteredMediaDriver``: its client's conductor, the archive, the driver);
    every wait inside the module's duty cycle invokes them (``agent/invoked_agents.py``)."""

    def __init__(self, ctx, aeron=None, *, archive_context=None, cluster_clock: ClusterClock | None = None,
                 app_version: int = 0, co_agents=None):
        from aeron_numba.archive.client import AeronArchive, AeronArchiveContext
        from aeron_numba.client import Aeron, Context

        self.ctx = ctx if hasattr(ctx, "members") else ctx.conclude()
        ctx = self.ctx
        self.mark_file = None
        self.recording_log = None
        self.node_state_file = None
        self.counters = None
        self.aeron = None
        self.runner = None
        self._owns_aeron = aeron is None
        self._stop_requested = False
        try:
            Path(ctx.cluster_dir).mkdir(parents=True, exist_ok=True)
            Path(ctx.mark_file_dir).mkdir(parents=True, exist_ok=True)
            mark_path = Path(ctx.mark_file_dir) / C.MARK_FILE
            if mark_path.exists():
                self._refuse_active_mark_file(mark_path)
            warm_up_cluster_kernels()  # before the client's keepalives start (see cluster/warmup.py)
            self.aeron = aeron if aeron is not None else Aeron.connect(Context(
                aeron_dir=ctx.aeron_dir, client_name=f"consensus-module-{ctx.cluster_id}-{ctx.cluster_member_id}"))
            self.mark_file = ClusterMarkFile.create(
                mark_path, component_type="CONSENSUS_MODULE", member_id=ctx.cluster_member_id,
                service_id=C.CONSENSUS_MODULE_SERVICE_ID, cluster_id=ctx.cluster_id,
                archive_stream_id=A.DEFAULT_LOCAL_CONTROL_STREAM_ID, service_stream_id=ctx.service_stream_id,
                consensus_module_stream_id=ctx.consensus_module_stream_id, ingress_stream_id=ctx.ingress_stream_id,
                aeron_directory=str(self.aeron.context.aeron_dir), control_channel=ctx.control_channel,
                ingress_channel=ctx.ingress_channel, authenticator=ctx.authenticator_supplier,
                services_cluster_dir=ctx.cluster_services_dir, error_buffer_length=ctx.error_buffer_length)
            _link_or_unlink(ctx.cluster_dir, ctx.mark_file_dir)
            self.error_log = DistinctErrorLog(self.mark_file.error_log_buffer)
            self.recording_log = RecordingLog(ctx.cluster_dir, create_new=True, file_sync_level=ctx.file_sync_level)
            self.node_state_file = NodeStateFile.open(ctx.cluster_dir, create_new=True)
            self.counters = ConsensusModuleCounters.allocate(self.aeron, ctx.cluster_id, ctx.cycle_threshold_ns)
            self.counters.module_state.set(int(ConsensusModuleState.INIT))
            self.counters.control_toggle.set(int(ClusterControlToggle.INACTIVE))
            self.counters.commit_position.set(0)
            self.archive_context = archive_context or AeronArchiveContext(
                control_response_stream_id=ctx.archive_control_response_stream_id)
            self.idle_strategy = idle_strategy_from_name(ctx.idle_strategy)
            waits = idle_strategy_from_name(ctx.idle_strategy)
            if co_agents is not None:
                waits = InvokingIdleStrategy(waits, co_agents)
            self.agent = ConsensusModuleAgent(
                ctx, self.aeron, archive_connect=lambda: AeronArchive.connect(self.aeron, self.archive_context),
                recording_log=self.recording_log, node_state_file=self.node_state_file, mark_file=self.mark_file,
                counters=self.counters, cluster_clock=cluster_clock or ClusterClock(),
                idle_strategy=waits, error_handler=self._counted_error,
                should_stop=self._should_stop, app_version=app_version)
        except BaseException:
            self.close()
            raise

    def _refuse_active_mark_file(self, mark_path: Path) -> None:
        try:
            existing = ClusterMarkFile.open(mark_path, read_only=True)
        except ClusterError:
            return  # a damaged file of a dead run is replaced
        try:
            if existing.is_active(time.time_ns() // 1_000_000):
                raise ClusterError(f"active mark file detected: {mark_path} (pid {existing.pid} updated it within "
                                   f"{C.MARK_LIVENESS_TIMEOUT_MS} ms); is another consensus module running on "
                                   f"{self.ctx.cluster_dir}?")
        finally:
            existing.close()

    # ---------------------------------------------------------------------------------------------- errors
    def _record_error(self, error: BaseException) -> None:
        if self.mark_file is not None:
            self.error_log.record(error)
        log.warning("consensus module error: %s", error)

    def _counted_error(self, error: BaseException) -> None:
        self._record_error(error)
        if self.counters is not None:
            self.counters.errors.increment()

    def _should_stop(self) -> bool:
        """The agent's waits inside a duty cycle end when the node is asked to stop."""
        return self._stop_requested

    def request_close(self) -> None:
        """Stop after the current duty cycle (safe in a signal handler: it only stores flags)."""
        self._stop_requested = True
        if self.runner is not None:
            self.runner.request_close()

    # ---------------------------------------------------------------------------------------------- running
    def duty_cycle_tracker(self) -> DutyCycleTracker:
        """A tracker of the agent's duty cycles into its max-cycle-time and threshold-exceeded counters."""
        counters = self.counters

        def propose_max(cycle_ns: int) -> None:  # the consensus module is the counter's only writer
            if cycle_ns > counters.max_cycle_time.get():
                counters.max_cycle_time.set(cycle_ns)

        return DutyCycleTracker(propose_max, counters.cycle_time_threshold_exceeded,
                                cycle_time_threshold_ns=self.ctx.cycle_threshold_ns)

    def record_error(self, error: BaseException) -> None:
        """What the module's runner does with an error of a duty cycle: counted, into the mark file's error log."""
        self._counted_error(error)

    def run(self) -> None:
        """Run the agent in this thread until SIGINT/SIGTERM or termination, then close."""
        self.runner = AgentRunner(self.agent, self.idle_strategy, self._record_error, self.counters.errors,
                                  duty_cycle_tracker=self.duty_cycle_tracker())
        if threading.current_thread() is threading.main_thread():
            close_on_signals(self.request_close)
        try:
            self.runner.run()
        finally:
            self.close()

    def close(self) -> None:
        if self.counters is not None:
            self.counters.close()
            self.counters = None
        if self.node_state_file is not None:
            self.node_state_file.close()
            self.node_state_file = None
        if self.recording_log is not None:
            self.recording_log.close()
            self.recording_log = None
        if self.mark_file is not None:
            self.mark_file.close()
            self.mark_file = None
        if self.aeron is not None and self._owns_aeron:
            self.aeron.close()
            self.aeron = None
        log.info("consensus module of %s closed", self.ctx.cluster_dir)
