"""The driver's command line as a user runs it: ``python -m aeron_numba driver``, its log on stderr with ``-v``
or ``AERON_LOG_LEVEL``, and settings it does not honour named instead of ignored."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.aeron_dirs import await_cnc_ready
from harness.awaiting import await_condition
from harness.driver_settings import driver_env_for_tests


def test_verbose_driver_logs_its_start_and_names_variables_it_does_not_read(process_manager, aeron_dir):
    env = driver_env_for_tests(AERON_DIR=str(aeron_dir), AERON_SOCKET_MULTICAST_TTL="4")
    driver = process_manager.spawn_module("driver", "aeron_numba", "driver", "-v", env=env)
    cnc_file = await_cnc_ready(aeron_dir, 90, pid=driver.pid, processes=[driver])
    cnc_file.close()
    await_condition(lambda: "aeron_numba.driver: media driver 0.1.0 ready in" in driver.stderr(), 30, "ready logged",
                    processes=[driver])
    assert "WARNING aeron_numba.driver: AERON_SOCKET_MULTICAST_TTL='4' is not a setting aeron-numba reads: it has " \
           "no effect" in driver.stderr()
    driver.terminate(10)
    assert driver.exit_code == 0
    assert f"media driver in {aeron_dir} stopped" in driver.stderr()


# Run as the driver's command, with MediaDriver's constructor sending this process SIGTERM just after cnc.dat is
# ready: the moment a launcher that awaited readiness may stop it, before run() has started.
_SIGTERM_JUST_AFTER_READY = """\
import os, signal, sys
from aeron_numba.commands import driver as command
from aeron_numba.driver import media_driver
real_init = media_driver.MediaDriver.__init__
def init_then_sigterm(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
media_driver.MediaDriver.__init__ = init_then_sigterm
sys.exit(command.main([]))
"""


def test_a_driver_stopped_as_soon_as_it_is_ready_stops_cleanly_and_removes_its_dir(aeron_dir):
    env = {**os.environ, **driver_env_for_tests(AERON_DIR=str(aeron_dir), AERON_DIR_DELETE_ON_SHUTDOWN="true")}
    result = subprocess.run([sys.executable, "-c", _SIGTERM_JUST_AFTER_READY], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not aeron_dir.exists()


def test_a_bad_log_level_is_a_usage_error(aeron_dir):
    env = {**os.environ, **driver_env_for_tests(AERON_DIR=str(aeron_dir)), "AERON_LOG_LEVEL": "LOUD"}
    result = subprocess.run([sys.executable, "-m", "aeron_numba", "driver"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == ("python -m aeron_numba driver: error: AERON_LOG_LEVEL='LOUD' must be one "
                                              "of DEBUG, INFO, WARNING, ERROR, CRITICAL")


def test_a_threading_mode_the_driver_does_not_run_is_refused_before_it_starts(aeron_dir):
    env = {**os.environ, **driver_env_for_tests(AERON_DIR=str(aeron_dir)), "AERON_THREADING_MODE": "INVOKER"}
    result = subprocess.run([sys.executable, "-m", "aeron_numba", "driver"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert "threading_mode='INVOKER' (AERON_THREADING_MODE) is not supported" in result.stderr
    assert "no embedded driver invoker API" in result.stderr
    assert not (aeron_dir / "cnc.dat").exists()
