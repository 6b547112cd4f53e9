"""The media driver as a real process: start-up, refusing a live dir, taking over a stale one, commands."""

from __future__ import annotations

import subprocess
import sys

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.media_driver import driver_heartbeat_age_ms
from aeron_numba.layout import control_protocol as cp
from harness.awaiting import await_condition
from tests.integration.driver_processes import TEST_DRIVER_ENV, start_driver
from tests.unit.driver_support import RawClient


def responses_until(client: RawClient, msg_type_id: int, timeout_s: float = 10.0):
    seen = []

    def arrived():
        seen.extend(client.responses())
        return any(t == msg_type_id for t, _ in seen)

    await_condition(arrived, timeout_s, f"response type {msg_type_id:#x}")
    return seen


def test_driver_serves_commands_refuses_a_live_dir_and_takes_over_a_stale_one(process_manager, aeron_dir):
    driver, cnc_file = start_driver(process_manager, aeron_dir)
    client = RawClient(cnc_file)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=10, channel="aeron:ipc?term-length=64k")
    (_, ready), = [r for r in responses_until(client, cp.ON_PUBLICATION_READY) if r[0] == cp.ON_PUBLICATION_READY]
    assert (aeron_dir / "publications" / f"{ready.registration_id}.logbuffer").exists()
    assert (aeron_dir / "loss-report.dat").stat().st_size == 64 * 1024

    # A second driver on the same dir sees the live heartbeat and refuses, naming the dir.
    env = dict(TEST_DRIVER_ENV, AERON_DIR=str(aeron_dir))
    second = subprocess.run([sys.executable, "-m", "aeron_numba.driver"], env={**__import__("os").environ, **env},
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    assert "active driver detected" in second.stderr and str(aeron_dir) in second.stderr

    # SIGKILL leaves a stale dir: once its heartbeat is older than the driver timeout, a new driver
    # takes it over and starts afresh.
    driver.kill()
    await_condition(lambda: not driver.is_alive, 10, "driver dead")
    cnc_file.close()
    del client
    await_condition(lambda: driver_heartbeat_age_ms(aeron_dir / "cnc.dat") > 2000, 10, "stale heartbeat")
    restarted, cnc_file = start_driver(process_manager, aeron_dir, name="driver-2", timeout_s=90)
    assert not (aeron_dir / "publications" / f"{ready.registration_id}.logbuffer").exists()
    client = RawClient(cnc_file)
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=10,
                channel="aeron:ipc")
    assert cp.ON_SUBSCRIPTION_READY in [t for t, _ in responses_until(client, cp.ON_SUBSCRIPTION_READY)]
    restarted.terminate(10)
    assert restarted.exit_code == 0


def test_media_driver_launch_from_python_and_close(aeron_dir, monkeypatch):
    """``MediaDriverProcess.launch`` starts a child driver on the context's dir; ``close`` stops it cleanly."""
    from aeron_numba import Aeron, Context, MediaDriverProcess
    from aeron_numba.driver import DriverContext

    for name, value in TEST_DRIVER_ENV.items():
        monkeypatch.setenv(name, value)
    with MediaDriverProcess.launch(DriverContext.from_env(aeron_dir=str(aeron_dir), dir_delete_on_shutdown=True)) as driver:
        with Aeron.connect(Context(aeron_dir=str(aeron_dir))) as aeron:
            publication = aeron.add_publication("aeron:ipc", 5)
            subscription = aeron.add_subscription("aeron:ipc", 5)
            await_condition(lambda: publication.is_connected and subscription.image_count == 1, 10, "connected")
            await_condition(lambda: publication.offer(b"hello") > 0, 10, "offer")
            received = []
            await_condition(lambda: subscription.poll(lambda b, o, n, h: received.append(bytes(b[o:o + n])), 1)
                            or received, 10, "poll")
            assert received == [b"hello"]
        assert driver.close() == 0
    await_condition(lambda: not aeron_dir.exists(), 10, "aeron dir deleted on shutdown")


def test_a_driver_that_cannot_write_its_files_says_so_in_one_line(aeron_dir):
    """No room, provoked without root: a child whose file size limit (RLIMIT_FSIZE) is below cnc.dat's length.
    (A 64 KiB tmpfs gives the same one line with "insufficient usable storage"; see tests/unit/driver.)"""
    import os
    import resource

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    env = {**os.environ, **TEST_DRIVER_ENV, "AERON_DIR": str(aeron_dir)}
    result = subprocess.run([sys.executable, "-m", "aeron_numba.driver"], env=env, capture_output=True, text=True,
                            timeout=120, preexec_fn=limit_file_size)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(aeron_dir) in result.stderr and "File too large" in result.stderr and "ulimit -f" in result.stderr
