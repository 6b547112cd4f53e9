"""The UDP data path in each of Aeron's driver threading modes (SHARED, SHARED_NETWORK, DEDICATED), between two
driver processes: a lossy stream is recovered by NAK and retransmit, each driver names its mode in its counters
and its start log line; and a DEDICATED driver stopped by SIGTERM exits cleanly with its threads and its dir
gone."""

from __future__ import annotations

import os
import signal

import pytest

from aeron_numba.driver.context import idle_strategy_environment
from aeron_numba.driver.loss_generator import LossControl, LossSettings
from aeron_numba.layout import counters as cl
from harness.aeron_dirs import AeronCounters, new_aeron_dir, remove_aeron_dir
from harness.awaiting import await_condition
from tests.integration.driver_processes import start_driver
from tests.integration.test_udp_pubsub import UDP_DRIVER_ENV, exchange, free_udp_port

MODES = ["SHARED", "SHARED_NETWORK", "DEDICATED"]


def _env(mode: str) -> dict[str, str]:
    # Every agent thread backs off when idle (the test drivers' setting), whichever variable its mode reads.
    return {**UDP_DRIVER_ENV, **idle_strategy_environment("backoff"), "AERON_THREADING_MODE": mode,
            "AERON_LOG_LEVEL": "INFO"}


class ModeDrivers:
    def __init__(self, process_manager, dir_a, dir_b, mode: str):
        self.dir_a, self.dir_b = dir_a, dir_b
        self.driver_a, cnc_a = start_driver(process_manager, dir_a, name="driver-a", **_env(mode))
        self.driver_b, cnc_b = start_driver(process_manager, dir_b, name="driver-b", **_env(mode))
        self.counters_a = AeronCounters(cnc_a, owns_cnc=True)
        self.counters_b = AeronCounters(cnc_b, owns_cnc=True)
        self.channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
        self.loss_b = LossControl.open(dir_b)

    def close(self) -> None:
        self.loss_b.close()
        self.counters_a.close()
        self.counters_b.close()


@pytest.fixture(params=MODES)
def mode_drivers(request, process_manager, aeron_dir):
    dir_b = new_aeron_dir("aeron-udp-mode-b")
    try:
        pair = ModeDrivers(process_manager, aeron_dir, dir_b, request.param)
        pair.mode = request.param
        yield pair
        pair.close()
    finally:
        process_manager.close()
        remove_aeron_dir(dir_b)


def test_a_lossy_udp_stream_is_recovered_in_every_threading_mode(mode_drivers, process_manager, tmp_path):
    drivers, mode = mode_drivers, mode_drivers.mode
    threads = {"SHARED": "[conductor,sender,receiver]=backoff",
               "SHARED_NETWORK": "conductor=backoff, [sender,receiver]=backoff",
               "DEDICATED": "conductor=backoff, sender=backoff, receiver=backoff"}[mode]
    drivers.driver_b.await_output(f"threading mode {mode}, idle strategies {threads})", 30, stream="stderr")
    label = drivers.counters_b.reader.get_counter_label(cl.RECEIVER_MAX_CYCLE_TIME)
    assert label.endswith(f": {mode}"), label
    drivers.loss_b.write(LossSettings(receive_data_rate=0.1, seed=7))
    exchange(drivers, process_manager, tmp_path, count=2_000, max_length=4 * 1024)
    assert drivers.counters_b.value(cl.NAK_MESSAGES_SENT) > 0
    assert drivers.counters_a.value(cl.RETRANSMITS_SENT) > 0
    for counters in (drivers.counters_a, drivers.counters_b):
        assert counters.value(cl.ERRORS) == 0
        # Each agent's own cycle counter moved: the sender's on A, the receiver's on B, the conductor's on both.
        assert counters.value(cl.CONDUCTOR_MAX_CYCLE_TIME) > 0
    assert drivers.counters_a.value(cl.SENDER_MAX_CYCLE_TIME) > 0
    assert drivers.counters_b.value(cl.RECEIVER_MAX_CYCLE_TIME) > 0


def _task_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_dedicated_driver_stopped_by_sigterm_exits_cleanly_and_removes_its_dir(process_manager, aeron_dir):
    shared_dir = new_aeron_dir("aeron-shared-threads")
    try:
        shared, cnc = start_driver(process_manager, shared_dir, name="shared", **_env("SHARED"),
                                   AERON_DIR_DELETE_ON_SHUTDOWN="true")
        cnc.close()
        dedicated, cnc = start_driver(process_manager, aeron_dir, name="dedicated", **_env("DEDICATED"),
                                      AERON_DIR_DELETE_ON_SHUTDOWN="true")
        cnc.close()
        # Two threads more than a SHARED driver: the sender's and the receiver's.
        await_condition(lambda: _task_count(dedicated.pid) == _task_count(shared.pid) + 2, 30,
                        "the DEDICATED driver's sender and receiver threads", processes=[shared, dedicated])
        dedicated.send_signal(signal.SIGTERM, group=False)
        assert dedicated.wait(30) == 0, dedicated.tail()
        assert "Traceback" not in dedicated.stderr(), dedicated.tail()
        assert "media driver in" in dedicated.stderr() and "stopped and its aeron dir deleted" in dedicated.stderr()
        assert not aeron_dir.exists()
        assert shared.terminate(30) == 0
    finally:
        process_manager.close()
        remove_aeron_dir(shared_dir)
