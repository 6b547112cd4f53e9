"""The process harness: real child processes, deadlines, aeron dirs, cnc.dat readiness, counters, fixtures."""

from __future__ import annotations

import itertools
import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.errors import LayoutError
from aeron_numba.kernels.atomics_for_python import put_int32_release
from aeron_numba.kernels.counters import CountersManager
from aeron_numba.layout import broadcast, cnc, ring_buffer
from aeron_numba.layout.bits import semantic_version
from harness.aeron_dirs import (
    SHM_ROOT,
    AeronCounters,
    await_cnc_ready,
    await_counter_value,
    cnc_path,
    new_aeron_dir,
    read_counter,
    remove_aeron_dir,
    try_open_cnc,
)
from harness.awaiting import ConditionTimeout, NotYet, assert_stays, await_condition
from harness.process_manager import ProcessExitedError, ProcessManager, pid_alive, process_state

pytest_plugins = ["pytester"]

TIMEOUT_S = 20.0

# A child that never ends by itself; each loop it appends one byte to the heartbeat file in argv[1].
HEARTBEAT = textwrap.dedent(
    """
    import os, sys, time
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    print("ready", flush=True)
    while True:
        os.write(fd, b"x")
        time.sleep(0.002)
    """
)

CNC_LENGTHS = dict(
    to_driver_buffer_length=64 * 1024 + ring_buffer.TRAILER_LENGTH,
    to_clients_buffer_length=64 * 1024 + broadcast.TRAILER_LENGTH,
    counters_values_buffer_length=64 * 1024,
    error_log_buffer_length=64 * 1024,
)


def create_cnc(aeron_dir: Path, **kwargs) -> CncFile:
    return CncFile.create(cnc_path(aeron_dir), **CNC_LENGTHS, **kwargs)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@pytest.fixture
def manager(tmp_path):
    with ProcessManager(tmp_path / "run") as pm:
        yield pm


# ----------------------------------------------------------------------------------------- awaiting
def test_await_condition_returns_the_first_truthy_value():
    values = iter([0, None, "", [], 7, 8])
    assert await_condition(lambda: next(values), 5.0, "a value") == 7


def test_await_condition_timeout_names_description_timeout_and_last_value():
    calls = []

    def never():
        calls.append(1)
        return NotYet(f"still {len(calls)}")

    started = time.monotonic()
    with pytest.raises(ConditionTimeout) as info:
        await_condition(never, 0.05, "the moon to turn blue")
    elapsed = time.monotonic() - started
    err = info.value
    assert 0.05 <= elapsed < 2.0
    assert err.description == "the moon to turn blue" and err.timeout_s == 0.05 and err.attempts == len(calls) >= 2
    assert str(err.last_value) == f"still {len(calls)}"
    assert str(err).startswith("timed out after 0.05s waiting for the moon to turn blue (last value: still ")
    assert isinstance(err, AssertionError)


def test_await_condition_with_zero_timeout_tries_once():
    with pytest.raises(ConditionTimeout, match="attempts=1"):
        await_condition(lambda: False, 0.0, "nothing")
    assert await_condition(lambda: "yes", 0.0, "something") == "yes"


def test_await_condition_ignores_listed_exceptions_only():
    attempts = iter([FileNotFoundError("not yet"), FileNotFoundError("still not"), "there"])

    def condition():
        value = next(attempts)
        if isinstance(value, Exception):
            raise value
        return value

    assert await_condition(condition, 5.0, "file", ignore=(FileNotFoundError,)) == "there"
    with pytest.raises(ConditionTimeout, match="last value: FileNotFoundError"):
        await_condition(lambda: open("/nonexistent/x"), 0.02, "file", ignore=(FileNotFoundError,))
    with pytest.raises(ZeroDivisionError):
        await_condition(lambda: 1 / 0, 5.0, "division", ignore=(FileNotFoundError,))


def test_await_condition_runs_work_between_checks_and_sleeps_only_when_idle(monkeypatch):
    import harness.awaiting as awaiting

    sleeps = []
    monkeypatch.setattr(awaiting.time, "sleep", sleeps.append)
    backlog, done = [1, 1, 1, 0, 1, 0], []

    def work() -> int:  # a poll: 1 while fragments wait, 0 when it found none
        done.append(backlog.pop(0))
        return done[-1]

    assert await_condition(lambda: len(done) == 6, 5.0, "six polls", work=work)
    assert len(sleeps) == 2  # after the two idle polls only
    busy = itertools.count(1)
    with pytest.raises(ConditionTimeout, match="never"):  # endless work still meets the deadline
        await_condition(lambda: False, 0.02, "never", work=lambda: next(busy))


def test_assert_stays_passes_and_fails_fast():
    assert_stays(lambda: True, 0.02, "truth")
    values = iter([1, 1, 0, 1])
    started = time.monotonic()
    with pytest.raises(AssertionError, match="the value stopped holding after 3 checks"):
        assert_stays(lambda: next(values), 10.0, "the value")
    assert time.monotonic() - started < 5.0


# ---------------------------------------------------------------------------------------- processes
def test_spawn_captures_stdout_stderr_and_exit_code(manager):
    code = "import sys; print('to out'); print('to err', file=sys.stderr); sys.exit(int(sys.argv[1]))"
    proc = manager.spawn_python("talker", code, "3")
    assert proc.wait(TIMEOUT_S) == 3
    assert proc.exit_code == 3 and not proc.is_alive and proc.state is None
    assert proc.stdout() == "to out\n" and proc.stderr() == "to err\n"
    assert proc.output() == "to out\n--- talker stderr ---\nto err\n"
    assert proc.stdout_path == manager.run_dir / "talker.out" and proc.stderr_path.name == "talker.err"
    assert "to err" in proc.tail() and "exit_code=3" in proc.tail()


def test_spawn_passes_env_and_argv_and_runs_a_module(manager):
    proc = manager.spawn_python("env", "import os, sys; print(os.environ['AERON_DIR'], sys.argv[1:])", "a", "b",
                                env={"AERON_DIR": "/dev/shm/x"})
    assert proc.wait(TIMEOUT_S) == 0
    assert proc.stdout() == "/dev/shm/x ['a', 'b']\n"
    mod = manager.spawn_module("mod", "json.tool", "--help")
    assert mod.wait(TIMEOUT_S) == 0 and "usage" in mod.stdout()


def test_repeated_names_get_their_own_logs(manager):
    first = manager.spawn_python("driver", "print('one')")
    second = manager.spawn_python("driver", "print('two')")
    assert (first.name, second.name) == ("driver", "driver.2")
    assert first.wait(TIMEOUT_S) == 0 and second.wait(TIMEOUT_S) == 0
    assert (first.stdout(), second.stdout()) == ("one\n", "two\n")
    assert manager["driver.2"] is second
    with pytest.raises(KeyError, match="no process named 'x'"):
        manager["x"]
    with pytest.raises(ValueError, match="plain file name"):
        manager.spawn("a/b", ["true"])
    with pytest.raises(ValueError, match="non-empty sequence"):
        manager.spawn("a", "true")


def test_kill_sigkills_a_running_process(manager, tmp_path):
    proc = manager.spawn_python("beat", HEARTBEAT, str(tmp_path / "hb"))
    proc.await_output("ready", TIMEOUT_S)
    assert proc.is_alive and proc.exit_code is None
    assert proc.kill() == -9
    assert not proc.is_alive and proc.exit_code == -9 and not pid_alive(proc.pid)


def test_pause_stops_the_heartbeat_and_resume_restarts_it(manager, tmp_path):
    heartbeat = tmp_path / "hb"
    proc = manager.spawn_python("beat", HEARTBEAT, str(heartbeat))
    await_condition(lambda: file_size(heartbeat) > 3, TIMEOUT_S, "heartbeats", processes=[proc])
    proc.pause()
    await_condition(lambda: proc.state == "T", TIMEOUT_S, "the process to be stopped")
    paused_size = file_size(heartbeat)
    # stopped means no code runs: the file must not grow at all while we watch (~100 beats' worth)
    assert_stays(lambda: file_size(heartbeat) == paused_size, 0.2, "the paused heartbeat")
    proc.resume()
    await_condition(lambda: file_size(heartbeat) > paused_size + 3, TIMEOUT_S, "heartbeats after resume")
    assert proc.state != "T" and proc.is_alive


def test_terminate_lets_a_process_exit_cleanly_even_when_paused(manager):
    code = textwrap.dedent(
        """
        import signal, sys, time
        def bye(signum, frame):
            print("bye", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
        """
    )
    proc = manager.spawn_python("polite", code)
    proc.await_output("ready", TIMEOUT_S)
    proc.pause()
    await_condition(lambda: proc.state == "T", TIMEOUT_S, "the process to be stopped")
    assert proc.terminate(TIMEOUT_S) == 0
    assert proc.stdout() == "ready\nbye\n"


def test_terminate_escalates_to_sigkill(manager):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    proc = manager.spawn_python("stubborn", code)
    proc.await_output("ready", TIMEOUT_S)
    assert proc.terminate(0.1) == -9


def test_wait_times_out_on_a_running_process(manager, tmp_path):
    proc = manager.spawn_python("beat", HEARTBEAT, str(tmp_path / "hb"))
    with pytest.raises(ConditionTimeout, match=r"process 'beat' \(pid \d+\) to exit"):
        proc.wait(0.05)


def test_awaiting_output_of_a_process_that_died_fails_at_once_with_its_tail(manager):
    proc = manager.spawn_python("crasher", "import sys; print('oh no', file=sys.stderr); sys.exit(7)")
    started = time.monotonic()
    with pytest.raises(ProcessExitedError) as info:
        proc.await_output("never printed", TIMEOUT_S)
    assert time.monotonic() - started < TIMEOUT_S / 2
    assert "process 'crasher' exited with code 7" in str(info.value) and "oh no" in str(info.value)
    with pytest.raises(ProcessExitedError, match="exited with code 7"):
        await_condition(lambda: False, TIMEOUT_S, "anything", processes=[proc])


def test_output_printed_just_before_exit_still_counts(manager):
    proc = manager.spawn_python("quick", "print('done')")
    assert proc.wait(TIMEOUT_S) == 0
    assert proc.await_output("done", TIMEOUT_S) == "done\n"
    with pytest.raises(ValueError, match="stream='both'"):
        proc.await_output("done", 1.0, stream="both")


def test_close_kills_children_and_grandchildren_in_their_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = textwrap.dedent(
        """
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(grandchild.pid))
        import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(120)
        """
    )
    pm = ProcessManager(tmp_path / "run")
    parent = pm.spawn_python("parent", code, str(pid_file))
    pm.spawn_python("beat", HEARTBEAT, str(tmp_path / "hb")).pause()  # a paused child must die too
    await_condition(pid_file.exists, TIMEOUT_S, "the grandchild's pid file", processes=[parent])
    grandchild = int(pid_file.read_text())
    assert pid_alive(grandchild)
    pm.close()
    assert all(not p.is_alive for p in pm.processes)
    assert [p.exit_code for p in pm.processes] == [-9, -9]
    await_condition(lambda: not pid_alive(grandchild), TIMEOUT_S, f"grandchild {grandchild} to die")
    with pytest.raises(RuntimeError, match="closed"):
        pm.spawn_python("late", "pass")


def test_a_child_kept_in_this_session_shares_its_group_and_is_signalled_alone(tmp_path):
    # The benchmark's drivers run in the runner's session (its scheduling group under autogroup): a kill or a
    # pause of such a child, "group" or not, must reach it alone, never the test process's own group.
    with ProcessManager(tmp_path / "run") as pm:
        own = pm.spawn_python("own", HEARTBEAT, str(tmp_path / "hb-own"))
        shared = pm.spawn_python("shared", HEARTBEAT, str(tmp_path / "hb-shared"), own_session=False)
        shared.await_output("ready", TIMEOUT_S)
        own.await_output("ready", TIMEOUT_S)
        assert os.getpgid(own.pid) == own.pid == own.pgid
        assert os.getpgid(shared.pid) == os.getpgrp() == shared.pgid
        assert os.getsid(shared.pid) == os.getsid(0) != os.getsid(own.pid)
        shared.pause()
        await_condition(lambda: shared.state == "T", TIMEOUT_S, "the shared-session child to stop")
        assert own.state != "T" and process_state(os.getpid()) != "T"
        shared.resume()
        assert shared.kill() == -9
        assert own.is_alive
    assert own.exit_code == -9


def test_close_after_children_exited_is_fine(tmp_path):
    with ProcessManager(tmp_path / "run") as pm:
        proc = pm.spawn_python("short", "pass")
        assert proc.wait(TIMEOUT_S) == 0
    assert proc.exit_code == 0
    pm.close()


def test_process_state_and_pid_alive():
    assert process_state(os.getpid()) in ("R", "S")
    assert pid_alive(os.getpid())
    assert process_state(2**22 + 12345) is None and not pid_alive(2**22 + 12345)


def test_agent_runner_in_a_child_closes_on_sigterm(manager):
    code = textwrap.dedent(
        """
        from aeron_numba.agent import AgentRunner, SleepingIdleStrategy, close_on_signals

        class Ticker:
            def __init__(self):
                self.ticks = 0
            def role_name(self):
                return "ticker"
            def on_start(self):
                print("started", flush=True)
            def do_work(self):
                self.ticks += 1
                if self.ticks == 1:
                    print("ticking", flush=True)
                return 0
            def on_close(self):
                print("closed after", "some" if self.ticks else "no", "ticks", flush=True)

        runner = AgentRunner(Ticker(), SleepingIdleStrategy(1_000_000), None)
        close_on_signals(runner)
        runner.run()
        """
    )
    proc = manager.spawn_python("agent", code)
    proc.await_output("ticking", TIMEOUT_S)  # a duty cycle has run (a SIGTERM right after on_start can beat it)
    assert proc.terminate(TIMEOUT_S) == 0
    assert proc.stdout() == "started\nticking\nclosed after some ticks\n"


# --------------------------------------------------------------------------------------- aeron dirs
def test_new_aeron_dir_is_unique_and_removable():
    a, b = new_aeron_dir("t"), new_aeron_dir("t")
    try:
        assert a != b and a.parent == SHM_ROOT and a.is_dir() and not any(a.iterdir())
        assert a.name.startswith(f"t-{os.getpid()}-")
        (a / "cnc.dat").write_bytes(b"x")
    finally:
        remove_aeron_dir(a)
        remove_aeron_dir(b)
    assert not a.exists() and not b.exists()
    remove_aeron_dir(a)  # already gone: fine
    with pytest.raises(ValueError, match="refusing"):
        remove_aeron_dir(SHM_ROOT)


def test_await_cnc_ready_times_out_on_missing_and_unready_files(shm_dir):
    with pytest.raises(ConditionTimeout, match="cnc.dat does not exist"):
        await_cnc_ready(shm_dir, 0.05)
    cnc_path(shm_dir).write_bytes(b"")  # created, not yet sized
    assert "file length=0" in str(try_open_cnc(shm_dir))
    cnc_path(shm_dir).unlink()
    with create_cnc(shm_dir, signal_ready=False):
        with pytest.raises(ConditionTimeout, match="cnc_version=0, the driver has not finished starting"):
            await_cnc_ready(shm_dir, 0.05)


def test_await_cnc_ready_waits_for_signal_ready_from_a_thread(shm_dir, monkeypatch):
    import harness.aeron_dirs as aeron_dirs

    driver_side = create_cnc(shm_dir, signal_ready=False)
    attempts = []
    real_try = aeron_dirs.try_open_cnc

    def counting_try(aeron_dir, pid=None):
        result = real_try(aeron_dir, pid)
        attempts.append(result)
        return result

    def signal_after_failed_attempts():
        await_condition(lambda: len(attempts) >= 2, TIMEOUT_S, "two failed attempts")
        driver_side.signal_ready()

    monkeypatch.setattr(aeron_dirs, "try_open_cnc", counting_try)
    thread = threading.Thread(target=signal_after_failed_attempts)
    thread.start()
    try:
        client_side = await_cnc_ready(shm_dir, TIMEOUT_S)
    finally:
        thread.join(TIMEOUT_S)
    try:
        assert len(attempts) >= 3 and all(isinstance(a, NotYet) for a in attempts[:-1])
        assert "cnc_version=0" in str(attempts[0])
        assert client_side.cnc_version == cnc.CNC_VERSION and client_side.pid == os.getpid()
        assert client_side.sections == driver_side.sections
    finally:
        client_side.close()
        driver_side.close()


CNC_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.layout import broadcast, ring_buffer
    from harness.awaiting import await_condition
    aeron_dir, go = Path(sys.argv[1]), Path(sys.argv[2])
    aeron_dir.mkdir(exist_ok=True)
    f = CncFile.create(aeron_dir / "cnc.dat", signal_ready=False,
                       to_driver_buffer_length=64 * 1024 + ring_buffer.TRAILER_LENGTH,
                       to_clients_buffer_length=64 * 1024 + broadcast.TRAILER_LENGTH,
                       counters_values_buffer_length=64 * 1024, error_log_buffer_length=64 * 1024)
    print("created", flush=True)
    await_condition(go.exists, 30, "the test's go file")
    f.signal_ready()
    print("ready", flush=True)
    time.sleep(120)
    """
)


def test_await_cnc_ready_from_another_process(manager, tmp_path):
    aeron_dir = new_aeron_dir("driver-dir")
    remove_aeron_dir(aeron_dir)  # the "driver" creates it, as Aeron's does
    go = tmp_path / "go"
    try:
        driver = manager.spawn_python("driver", CNC_CHILD, str(aeron_dir), str(go))

        def release_driver():
            await_condition(cnc_path(aeron_dir).exists, TIMEOUT_S, "cnc.dat to be created", processes=[driver])
            go.touch()

        thread = threading.Thread(target=release_driver)
        thread.start()
        try:
            with await_cnc_ready(aeron_dir, TIMEOUT_S, pid=driver.pid, processes=[driver]) as cnc_file:
                assert cnc_file.pid == driver.pid and cnc_file.cnc_version == cnc.CNC_VERSION
        finally:
            thread.join(TIMEOUT_S)
        assert "created\nready\n" == driver.stdout()
        assert isinstance(try_open_cnc(aeron_dir, pid=driver.pid + 1), NotYet)  # e.g. a previous driver's file
    finally:
        remove_aeron_dir(aeron_dir)


def test_await_cnc_ready_fails_at_once_if_the_driver_dies(manager, shm_dir):
    driver = manager.spawn_python("driver", "import sys; print('bad config', file=sys.stderr); sys.exit(2)")
    started = time.monotonic()
    with pytest.raises(ProcessExitedError, match="(?s)exited with code 2.*bad config"):
        await_cnc_ready(shm_dir, TIMEOUT_S, processes=[driver])
    assert time.monotonic() - started < TIMEOUT_S / 2


def test_await_cnc_ready_fails_at_once_on_another_major_version(shm_dir):
    with create_cnc(shm_dir, signal_ready=False) as f:
        put_int32_release(f.buffer, cnc.CNC_VERSION_FIELD_OFFSET, semantic_version(9, 0, 0))
        started = time.monotonic()
        with pytest.raises(LayoutError, match="major versions differ"):
            await_cnc_ready(shm_dir, TIMEOUT_S)
        assert time.monotonic() - started < TIMEOUT_S / 2


# ----------------------------------------------------------------------------------------- counters
COUNTER_CHILD = textwrap.dedent(
    """
    import sys, time
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels.counters import get_and_add_counter_value
    cnc = CncFile.open(sys.argv[1])
    counter_id, n = int(sys.argv[2]), int(sys.argv[3])
    for _ in range(n):
        get_and_add_counter_value(cnc.counters_values_buffer, counter_id, 1)
        time.sleep(0.0005)
    print("done", flush=True)
    """
)


def test_counters_read_and_await_across_processes(manager, shm_dir):
    with create_cnc(shm_dir) as driver_side:
        counters = CountersManager(driver_side.counters_metadata_buffer, driver_side.counters_values_buffer)
        counters.allocate("other counter", type_id=7)
        msgs = counters.allocate("messages sent: test", type_id=1001, registration_id=55)
        assert read_counter(shm_dir, label="messages sent: test").counter_id == msgs
        assert read_counter(shm_dir, lambda info: info.type_id == 7).label == "other counter"
        assert read_counter(shm_dir, type_id=12345) is None

        child = manager.spawn_python("incrementer", COUNTER_CHILD, str(cnc_path(shm_dir)), str(msgs), "200")
        value = await_counter_value(
            shm_dir, lambda v: v >= 200, TIMEOUT_S, label_contains="messages sent", type_id=1001
        )
        assert value == 200
        assert child.wait(TIMEOUT_S) == 0

        with AeronCounters.open(shm_dir, TIMEOUT_S) as watcher:
            assert watcher.value(msgs) == 200
            assert watcher.find(registration_id=55).counter_id == msgs
            assert [c.label for c in watcher.find_all()] == ["other counter", "messages sent: test"]
            assert watcher.await_value(lambda v: v == 0, TIMEOUT_S, type_id=7) == 0  # 0 is a valid answer
            with pytest.raises(ConditionTimeout, match=r"last value: counter \d+ 'messages sent: test' value=200"):
                watcher.await_value(lambda v: v > 200, 0.05, registration_id=55)
            with pytest.raises(ConditionTimeout, match="last value: no counter with type_id=4242"):
                watcher.await_counter(0.05, type_id=4242)
            late = counters.allocate("late counter", type_id=4242)
            assert watcher.await_counter(TIMEOUT_S, type_id=4242).counter_id == late
        del counters


# ----------------------------------------------------------------------------------- pytest plugin
PLUGIN_TESTS = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path

    RECORD = Path({record!r})

    def test_fixtures_work(aeron_dir, process_manager, tmp_path):
        assert aeron_dir.is_dir() and not any(aeron_dir.iterdir())
        assert process_manager.run_dir.parent == tmp_path
        RECORD.with_suffix(".dir").write_text(str(aeron_dir))

    def test_failure_shows_child_output(aeron_dir, process_manager):
        proc = process_manager.spawn_python(
            "noisy-driver",
            "import sys, time; print('driver-stdout-line'); print('driver-stderr-line', file=sys.stderr, flush=True); time.sleep(120)",
        )
        proc.await_output("driver-stderr-line", 20, stream="stderr")
        RECORD.write_text(f"{{proc.pid}} {{aeron_dir}}")
        assert False, "deliberate failure"
    """
)


def test_pytest_plugin_fixtures_clean_up_and_report_child_output(pytester, tmp_path):
    record = tmp_path / "record.txt"
    pytester.makepyfile(test_inner=PLUGIN_TESTS.format(record=str(record)))
    result = pytester.runpytest("-p", "harness.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*aeron child processes (stdout/stderr)*",
            "*noisy-driver (pid *) stdout tail*",
            "driver-stdout-line",
            "*noisy-driver stderr tail*",
            "driver-stderr-line",
        ]
    )
    pid_text, dir_text = record.read_text().split(" ", 1)
    await_condition(lambda: not pid_alive(int(pid_text)), TIMEOUT_S, "the failed test's child to be killed")
    assert not Path(dir_text).exists()
    assert not Path(record.with_suffix(".dir").read_text()).exists()
