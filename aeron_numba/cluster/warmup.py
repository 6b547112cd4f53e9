"""Load (or, on a cold cache, compile) the kernels the consensus module calls beyond the client's, before its Aeron
client talks to the driver: compiling holds the GIL long enough to stall the client conductor thread past the
driver's client liveness timeout (see ``client/warmup.py``). The timer wheel, the distinct error log, the
consensus stream's compiled read and the stages (the follower's append and commit, the leader's commit, a compiled
service's log; with their C wrappers) are the ones."""

from __future__ import annotations

import numpy as np

from aeron_numba.cluster.cluster_time import ClusterTimeUnit
from aeron_numba.cluster.timer_service import TIMER_SERVICE_SUPPLIER_DEFAULT, new_timer_service
from aeron_numba.kernels import (cluster_append_position, cluster_consensus, cluster_follower_commit,
                                  cluster_leader_commit, cluster_service_stage)
from aeron_numba.kernels.network_stages import run_stages, stage_address
from aeron_numba.kernels.error_log import DistinctErrorLog

_done = False


def warm_up_cluster_kernels() -> None:
    global _done
    if _done:
        return
    timers = new_timer_service(TIMER_SERVICE_SUPPLIER_DEFAULT, lambda correlation_id: True, ClusterTimeUnit.MILLIS)
    timers.schedule_timer_for_correlation_id(1, 5)
    timers.schedule_timer_for_correlation_id(2, 10_000)
    timers.cancel_timer_by_correlation_id(2)
    timers.poll(1_000)
    timers.snapshot(lambda correlation_id, deadline: None)
    DistinctErrorLog(np.zeros(64 * 1024, dtype=np.uint8)).record(RuntimeError("warm-up"))
    closed = np.ones(8, np.uint8)  # an image closed: nothing is read, the types are the live calls'
    cluster_consensus.read_positions(np.zeros(64, np.uint8), np.zeros(64, np.uint8), 0, closed, 1,
                                     np.zeros((1, cluster_consensus.ROW_COLUMNS), np.int64),
                                     np.zeros(cluster_consensus.RESULT_LENGTH, np.int64))
    # The stages, off (they read and send nothing), with their C wrappers.
    for stage, state in ((cluster_append_position.append_position_stage, cluster_append_position.new_state()),
                         (cluster_leader_commit.leader_commit_stage, cluster_leader_commit.new_state()),
                         (cluster_follower_commit.follower_commit_stage, cluster_follower_commit.new_state()),
                         (cluster_service_stage.service_log_stage, cluster_service_stage.new_state())):
        run_stages(np.array([[stage_address(stage), state.ctypes.data]], np.int64), 1)
    message = np.zeros(64, np.uint8)
    cluster_append_position.encode_append_position(message, 0, 0, 0, 0, 0)
    _done = True
