"""Processes that clean up after themselves (issue 17): a signal to the demo or to an archive with an embedded
driver stops every child and removes the aeron dir; a SIGKILLed parent leaves no driver or harness child
running; an archive with a bad setting starts nothing; the demo reassembles messages above the MTU and
keeps to its deadline."""

from __future__ import annotations

import os
import re
import signal

import pytest

from harness.awaiting import await_condition
from harness.process_manager import descendant_pids, pid_alive
from tests.integration.driver_processes import TEST_DRIVER_ENV, start_driver

START_TIMEOUT_S = 240  # a cold start compiles kernels; two cores are shared with other suites
EXIT_TIMEOUT_S = 60
ARCHIVE_ENV = {
    **TEST_DRIVER_ENV,
    "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "128k",
    "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
    "AERON_ARCHIVE_IDLE_STRATEGY": "backoff",
}
LAUNCHER = """
import signal, sys
from aeron_numba.driver import DriverContext, MediaDriverProcess
driver = MediaDriverProcess.launch(DriverContext.from_env(aeron_dir=sys.argv[1], dir_delete_on_shutdown=True))
print(f"driver pid {driver.process.pid}", flush=True)
signal.pause()
"""
MANAGER = """
import signal, sys
from harness.process_manager import ProcessManager
manager = ProcessManager(sys.argv[1])
child = manager.spawn_python("sleeper", "import signal; signal.pause()")
print(f"child pid {child.pid}", flush=True)
signal.pause()
"""


@pytest.fixture
def leftovers():
    """Pids a test expects to end; any still alive at teardown are SIGKILLed (they may not be in the
    process manager's groups: a driver runs in a session of its own)."""
    pids: set[int] = set()
    yield pids
    for pid in pids:
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _await_gone(pids, why: str) -> None:
    await_condition(lambda: not [p for p in pids if pid_alive(p)], EXIT_TIMEOUT_S,
                    f"{why}: processes {sorted(p for p in pids if pid_alive(p))} to exit")


def _start_demo(process_manager, leftovers, *args):
    """The demo with its driver, subscriber and publisher all running; returns (process, aeron dir, children)."""
    demo = process_manager.spawn_module("demo", "aeron_numba.demo", *args)
    text = demo.await_output("starting media driver in ", START_TIMEOUT_S)
    aeron_dir = re.search(r"starting media driver in (\S+)", text).group(1)

    def three_children():
        children = descendant_pids(demo.pid)
        leftovers.update(children)
        return children if len(children) >= 3 else None

    children = await_condition(three_children, START_TIMEOUT_S, "driver, subscriber and publisher running",
                               processes=[demo])
    return demo, aeron_dir, children


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_demo_stops_its_children_and_removes_its_dir(process_manager, leftovers, signum):
    demo, aeron_dir, children = _start_demo(process_manager, leftovers, "--messages", "1000000000", "--timeout", "900")

    demo.send_signal(signum, group=False)  # the demo alone, as `kill -TERM <pid>` or `timeout` does

    assert demo.wait(EXIT_TIMEOUT_S) == 128 + signum, demo.tail()
    _await_gone(children, "the demo's children after it was signalled")
    assert not os.path.exists(aeron_dir), f"{aeron_dir} left behind"


def test_a_killed_demo_leaves_no_child_running_and_no_dir(process_manager, leftovers):
    demo, aeron_dir, children = _start_demo(process_manager, leftovers, "--messages", "1000000000", "--timeout", "900")

    demo.kill(group=False)

    _await_gone(children, "the demo's children after it was SIGKILLed")
    await_condition(lambda: not os.path.exists(aeron_dir), EXIT_TIMEOUT_S, f"the driver to remove {aeron_dir}")


def test_the_demo_reassembles_messages_above_the_mtu(process_manager):
    demo = process_manager.spawn_module("demo", "aeron_numba.demo", "--messages", "2000", "--max-length", "5000",
                                        "--timeout", "600")

    assert demo.wait(START_TIMEOUT_S + 120) == 0, demo.tail()
    assert "received 2,000 messages" in demo.stdout() and "in order and intact" in demo.stdout(), demo.tail()


def test_the_demo_stops_everything_at_its_deadline(process_manager, leftovers):
    # One second cannot hold a cold driver start, let alone the run: the deadline ends it midway.
    demo = process_manager.spawn_module("demo", "aeron_numba.demo", "--timeout", "1")
    text = demo.await_output("starting media driver in ", START_TIMEOUT_S)
    aeron_dir = re.search(r"starting media driver in (\S+)", text).group(1)

    assert demo.wait(START_TIMEOUT_S) == 1, demo.tail()
    assert "did not finish within --timeout" in demo.stderr(), demo.tail()
    assert "Traceback" not in demo.stderr(), demo.tail()
    assert not os.path.exists(aeron_dir), f"{aeron_dir} left behind"


def test_a_demo_subscriber_gives_up_at_its_deadline(process_manager, aeron_dir):
    start_driver(process_manager, aeron_dir)[1].close()
    subscriber = process_manager.spawn_module("subscriber", "aeron_numba.demo", "subscriber", "--dir", str(aeron_dir),
                                              "--messages", "5", "--timeout", "2")

    assert subscriber.wait(START_TIMEOUT_S) == 1, subscriber.tail()
    assert "subscriber: 0 of 5 messages received, not done within --timeout=2 s" in subscriber.stderr()


def test_a_killed_parent_leaves_no_media_driver_process_running(process_manager, aeron_dir, leftovers):
    launcher = process_manager.spawn_python("launcher", LAUNCHER, str(aeron_dir))
    driver_pid = int(re.search(r"driver pid (\d+)", launcher.await_output("driver pid ", START_TIMEOUT_S)).group(1))
    leftovers.add(driver_pid)

    launcher.kill(group=False)  # the driver has a session of its own: only the kernel can tell it

    _await_gone([driver_pid], "the driver of a SIGKILLed launcher")
    assert not aeron_dir.exists(), "the driver did not remove its dir (dir_delete_on_shutdown)"


def test_a_killed_process_manager_leaves_no_child_running(process_manager, tmp_path, leftovers):
    owner = process_manager.spawn_python("owner", MANAGER, str(tmp_path / "inner"))
    child_pid = int(re.search(r"child pid (\d+)", owner.await_output("child pid ", START_TIMEOUT_S)).group(1))
    leftovers.add(child_pid)

    owner.kill(group=False)  # the child leads a group of its own: a kill of the owner's group misses it

    _await_gone([child_pid], "the child of a SIGKILLed ProcessManager")


def _spawn_archive(process_manager, aeron_dir, archive_dir, **env):
    return process_manager.spawn_module("archive", "aeron_numba.archive", "--embedded-driver", "--dir", str(aeron_dir),
                                        "--archive-dir", str(archive_dir), env={**ARCHIVE_ENV, **env})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_an_archive_with_an_embedded_driver_stops_the_driver_and_removes_its_dir(
        process_manager, aeron_dir, tmp_path, leftovers, signum):
    archive = _spawn_archive(process_manager, aeron_dir, tmp_path / "archive")
    archive.await_output("aeron-numba archive", START_TIMEOUT_S)
    children = descendant_pids(archive.pid)
    leftovers.update(children)
    assert len(children) == 1, f"expected the embedded driver alone, found {children}"

    archive.send_signal(signum, group=False)

    assert archive.wait(EXIT_TIMEOUT_S) == 0, archive.tail()
    _await_gone(children, "the embedded driver after the archive was signalled")
    assert not aeron_dir.exists(), f"{aeron_dir} left behind"
    assert (tmp_path / "archive" / "archive.catalog").exists(), "the archive's own data must stay"


def test_an_archive_with_a_bad_setting_starts_no_embedded_driver(process_manager, aeron_dir, tmp_path):
    # 128 KiB segments with the default 1 MiB file I/O length: refused by the archive context.
    archive = _spawn_archive(process_manager, aeron_dir, tmp_path / "archive",
                             AERON_ARCHIVE_SEGMENT_FILE_LENGTH="131072", AERON_ARCHIVE_FILE_IO_MAX_LENGTH="1m")

    assert archive.wait(START_TIMEOUT_S) == 1, archive.tail()
    assert "file_io_max_length=1048576 must be in [4096, segment_file_length=131072]" in archive.stderr()
    assert not (aeron_dir / "cnc.dat").exists(), "a media driver was started before the settings were checked"


def test_a_launch_refused_by_a_live_driver_leaves_that_drivers_dir_alone(process_manager, aeron_dir):
    from aeron_numba.driver import DriverContext, MediaDriverProcess
    from aeron_numba.errors import AeronError

    start_driver(process_manager, aeron_dir)[1].close()

    with pytest.raises(AeronError, match="exited with code"):
        MediaDriverProcess.launch(DriverContext.from_env(aeron_dir=str(aeron_dir), dir_delete_on_shutdown=True),
                                  timeout_s=START_TIMEOUT_S)

    assert (aeron_dir / "cnc.dat").exists(), "the live driver's dir was removed by a launch it refused"


def test_a_signal_while_the_archive_starts_leaves_no_driver_and_no_dir(process_manager, aeron_dir, tmp_path, leftovers):
    aeron_dir.rmdir()  # the driver makes it: one stopped while warming up must not leave it behind
    archive = _spawn_archive(process_manager, aeron_dir, tmp_path / "archive")

    def driver_started():
        children = descendant_pids(archive.pid)
        leftovers.update(children)
        return children

    children = await_condition(driver_started, START_TIMEOUT_S, "the embedded driver to be spawned",
                               processes=[archive])

    archive.send_signal(signal.SIGTERM, group=False)  # somewhere in start-up: the driver may or may not be ready

    assert archive.wait(EXIT_TIMEOUT_S) in (0, 128 + signal.SIGTERM), archive.tail()
    _await_gone(children, "the embedded driver of an archive signalled while starting")
    assert not aeron_dir.exists(), f"{aeron_dir} left behind"
