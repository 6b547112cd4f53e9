"""Starting real media driver processes for integration tests (short timeouts, sleeping idle)."""

from __future__ import annotations

from harness.aeron_dirs import await_cnc_ready
from harness.driver_settings import driver_env_for_tests

# Settings for test drivers: small buffers and terms, short timeouts, an idle strategy that leaves the
# two cores to the clients.
TEST_DRIVER_ENV = driver_env_for_tests()


def start_driver(process_manager, aeron_dir, name: str = "driver", timeout_s: float = 60.0, **env):
    """Spawn ``python -m aeron_numba.driver`` on ``aeron_dir`` and wait for its cnc.dat; returns
    ``(process, cnc_file)``."""
    driver_env = driver_env_for_tests(**{"AERON_DIR": str(aeron_dir), **env})
    process = process_manager.spawn_module(name, "aeron_numba.driver", env=driver_env)
    cnc_file = await_cnc_ready(aeron_dir, timeout_s, pid=process.pid, processes=[process])
    return process, cnc_file
