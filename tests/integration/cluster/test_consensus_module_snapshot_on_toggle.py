"""A single-member consensus module process (``cm_worker``, no services) beside its media driver and archive: the
SNAPSHOT control toggle makes the agent take its snapshot through ``ConsensusModuleSnapshotTaker``; the recording it
indexes in recording.log plans as the latest snapshot and loads back through ``ConsensusModuleSnapshotLoader``; a
restarted module recovers from it (its election starts at the snapshot's log position) and leads again."""

from __future__ import annotations

from pathlib import Path

from aeron_numba.archive.client import AeronArchive
from aeron_numba.client import Aeron, Context
from aeron_numba.cluster.consensus_module_recovery import create_recovery_plan
from aeron_numba.cluster.consensus_module_snapshot import ConsensusModuleSnapshotLoader
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.kernels.counters import compare_and_set_counter_value
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster import ClusterControlToggle, ClusterRole, ConsensusModuleState
from aeron_numba.layout.counters import COUNTER_LENGTH
from harness.aeron_dirs import AeronCounters
from harness.awaiting import NotYet, await_condition
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS, udp_settings_for_tests
from tests.integration.driver_processes import start_driver
from tests.integration.test_udp_pubsub import free_udp_port

DRIVER_ENV = dict(udp_settings_for_tests(term_buffer_length="64k", liveness_timeout="3s"), **LENIENT_CLIENT_TIMEOUTS)


class Listener:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name[len("on_load_"):], *args))


def counter_value(counters: AeronCounters, type_id: int) -> int | None:
    info = counters.find(type_id=type_id)
    return None if info is None else counters.reader.get_counter_value(info.counter_id)


def test_a_snapshot_the_consensus_module_takes_on_the_toggle_is_indexed_and_loads_back(process_manager, aeron_dir,
                                                                                       tmp_path):
    start_driver(process_manager, aeron_dir, name="driver", **DRIVER_ENV)[1].close()
    archive_process = process_manager.spawn_module(
        "archive", "aeron_numba.archive", "--archive-dir", str(tmp_path / "archive"),
        env={"AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "64k",
             "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k", "AERON_ARCHIVE_IDLE_STRATEGY": "backoff"})
    archive_process.await_output("aeron-numba archive", 120)
    ports = [free_udp_port() for _ in range(5)]
    cluster_dir = tmp_path / "cluster"
    cm_env = {
        "AERON_DIR": str(aeron_dir), "AERON_CLUSTER_DIR": str(cluster_dir), "AERON_CLUSTER_SERVICE_COUNT": "0",
        "AERON_CLUSTER_MEMBERS": "0," + ",".join(f"127.0.0.1:{p}" for p in ports),
        "AERON_CLUSTER_INGRESS_CHANNEL": "aeron:udp?term-length=64k",
        "AERON_CLUSTER_LOG_CHANNEL": "aeron:udp?term-length=64k",
        "AERON_CLUSTER_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0",
        "AERON_CLUSTER_IDLE_STRATEGY": "backoff",
    }
    counters = AeronCounters.open(aeron_dir)
    try:
        cm = process_manager.spawn_module("cm", "tests.integration.cluster.cm_worker", env=cm_env)

        def leading():
            cm.check_alive()
            role, state = counter_value(counters, C.NODE_ROLE_TYPE_ID), counter_value(
                counters, C.CONSENSUS_MODULE_STATE_TYPE_ID)
            return (role == ClusterRole.LEADER and state == ConsensusModuleState.ACTIVE
                    and counter_value(counters, C.CONTROL_TOGGLE_TYPE_ID) == ClusterControlToggle.NEUTRAL) or NotYet(
                f"role {role}, state {state}")

        await_condition(leading, 120, "the single member leads")
        toggle = counters.find(type_id=C.CONTROL_TOGGLE_TYPE_ID)
        values = counters.cnc_file.counters_values_buffer
        assert compare_and_set_counter_value(values, toggle.counter_id, int(ClusterControlToggle.NEUTRAL),
                                             int(ClusterControlToggle.SNAPSHOT))
        await_condition(lambda: cm.check_alive() or counter_value(counters, C.SNAPSHOT_COUNTER_TYPE_ID) == 1 or NotYet(
            f"snapshots {counter_value(counters, C.SNAPSHOT_COUNTER_TYPE_ID)}, state "
            f"{counter_value(counters, C.CONSENSUS_MODULE_STATE_TYPE_ID)}"), 60, "the snapshot taken")
        await_condition(lambda: counter_value(counters, C.CONTROL_TOGGLE_TYPE_ID) == ClusterControlToggle.NEUTRAL,
                        30, "the toggle reset")

        with Aeron.connect(Context(aeron_dir=str(aeron_dir))) as aeron, AeronArchive.connect(aeron) as archive:
            with RecordingLog(cluster_dir, read_only=True) as recording_log:
                snapshots = [e for e in recording_log.entries if e.type == C.ENTRY_TYPE_SNAPSHOT]
                assert [e.service_id for e in snapshots] == [C.CONSENSUS_MODULE_SERVICE_ID]
                assert snapshots[0].log_position > 0  # after the term's NewLeadershipTermEvent and the action
                # the live node's log recording is still active: the plan's snapshots, not a start-up Recovery
                plan = create_recovery_plan(recording_log, archive, 0)
            assert [s.recording_id for s in plan.snapshots] == [snapshots[0].recording_id]
            listener = Listener()
            ConsensusModuleSnapshotLoader(listener, archive, aeron, ConsensusModuleContext()).load(plan.snapshots[0])
            kinds = [c[0] for c in listener.calls]
            assert kinds[0] == "begin_snapshot" and kinds[1] == "consensus_module_state" and kinds[-1] == \
                "end_snapshot"
            assert "cluster_session" not in kinds  # no client connected

        cm.terminate(20)
        cm = process_manager.spawn_module("cm-restarted", "tests.integration.cluster.cm_worker", env=cm_env)
        await_condition(lambda: cm.check_alive() or "new election" in cm.stdout() or NotYet(cm.tail(5)), 120,
                        "the restarted module's election")
        await_condition(leading, 120, "the restarted member leads again")
        started = next(line for line in cm.stdout().splitlines() if "new election" in line)
        assert f"logPosition={snapshots[0].log_position} " in started, started  # recovered from the snapshot
        assert "consensus module error" not in cm.stdout(), cm.tail(20)
        cm.terminate(20)
    finally:
        counters.close()
