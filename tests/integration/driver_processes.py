"""Starting real media driver processes for integration tests (short timeouts, sleeping idle)."""

from __future__ import annotations

from harness.aeron_dirs import await_cnc_ready

# Settings for test drivers: small buffers and terms, short timeouts, an idle strategy that leaves the
# two cores to the clients.
TEST_DRIVER_ENV = {
    "AERON_CLIENT_LIVENESS_TIMEOUT": "2s",
    "AERON_PUBLICATION_UNBLOCK_TIMEOUT": "3s",
    "AERON_TIMER_INTERVAL": "100ms",
    "AERON_DRIVER_TIMEOUT": "2000",
    "AERON_IPC_TERM_BUFFER_LENGTH": "1m",
    "AERON_PUBLICATION_LINGER_TIMEOUT": "0",
    "AERON_CONDUCTOR_IDLE_STRATEGY": "backoff",
    "AERON_COUNTERS_BUFFER_LENGTH": "256k",
    "AERON_CONDUCTOR_BUFFER_LENGTH": str(256 * 1024 + 768),
    "AERON_CLIENTS_BUFFER_LENGTH": str(256 * 1024 + 128),
    "AERON_ERROR_BUFFER_LENGTH": "256k",
    "AERON_LOSS_REPORT_BUFFER_LENGTH": "64k",
}


def start_driver(process_manager, aeron_dir, name: str = "driver", timeout_s: float = 60.0, **env):
    """Spawn ``python -m aeron_numba.driver`` on ``aeron_dir`` and wait for its cnc.dat; returns
    ``(process, cnc_file)``."""
    driver_env = dict(TEST_DRIVER_ENV, AERON_DIR=str(aeron_dir))
    driver_env.update(env)
    process = process_manager.spawn_module(name, "aeron_numba.driver", env=driver_env)
    cnc_file = await_cnc_ready(aeron_dir, timeout_s, pid=process.pid, processes=[process])
    return process, cnc_file
