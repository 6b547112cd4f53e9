"""Real child processes for integration and chaos tests: spawn, signal, capture output, always clean up.

Each child runs in its own session (``start_new_session=True``), so it leads a process group and a kill
reaches everything it started (a driver's helpers, a shell's children). ``own_session=False`` keeps a child in
the parent's session instead, where it is signalled alone: on Linux with autogroup scheduling each session is a
scheduling group of its own, and processes that hand a shared core to each other (``sched_yield``) must be in
one group for the hand-over to reach the other (benchmarks/runner.py). Its stdout and stderr go to
``<run_dir>/<name>.out`` and ``.err``, read back with ``output()``/``tail()`` and printed by the pytest
plugin when a test fails. ``ProcessManager.close()`` SIGKILLs every group still alive and reaps the
children, whatever state (running, paused) they are in; if the manager's process dies first (even by
SIGKILL) the kernel SIGKILLs each child (``with_parent_death_signal``), and each child's own children go the
same way when it does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from aeron_numba.child_processes import with_parent_death_signal
from harness.awaiting import ConditionTimeout, await_condition

_REAP_TIMEOUT_S = 10.0


class ProcessExitedError(AssertionError):
    """A child that should be alive has exited (raised while awaiting something from it)."""


def process_state(pid: int) -> str | None:
    """The state letter from ``/proc/<pid>/stat`` (R, S, T for stopped, Z for zombie...), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name in parentheses may hold spaces or ')': the state follows the last ')'.
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3].decode()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (a killed grandchild may linger as one until reaped)."""
    state = process_state(pid)
    return state is not None and state not in ("Z", "X")


def parent_pid(pid: int) -> int | None:
    """The parent's pid from ``/proc/<pid>/stat``, or None if ``pid`` is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def descendant_pids(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, their children...), read from ``/proc`` now.

    Take it before stopping ``pid``: once a parent is gone its children belong to another process.
    """
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (ppid := parent_pid(int(entry))) is not None:
            parents[int(entry)] = ppid
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return {p for p in found if pid_alive(p)}


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


class ManagedProcess:
    """One child process (and its process group) spawned by a ``ProcessManager``."""

    def __init__(self, name: str, argv: Sequence[str], popen: subprocess.Popen, stdout_path: Path, stderr_path: Path,
                 own_session: bool = True):
        self.name = name
        self.argv = tuple(argv)
        self._popen = popen
        self.own_session = own_session  # False: in its parent's process group, which a group signal must not hit
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def pgid(self) -> int:
        # A session leader's group id is its pid; a child kept in this session is in this process's group.
        return self._popen.pid if self.own_session else os.getpgrp()

    @property
    def is_alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        """None while running; negative ``-signum`` if a signal ended it (-9 after ``kill()``)."""
        return self._popen.poll()

    @property
    def state(self) -> str | None:
        """``/proc`` state letter while it exists (``T`` when paused), None once reaped."""
        return process_state(self.pid) if self._popen.returncode is None else None

    # ----------------------------------------------------------------------------------------- output
    def stdout(self) -> str:
        return _read_text(self.stdout_path)

    def stderr(self) -> str:
        return _read_text(self.stderr_path)

    def output(self) -> str:
        """stdout, then stderr under a marker line."""
        return f"{self.stdout()}--- {self.name} stderr ---\n{self.stderr()}"

    def tail(self, lines: int = 30) -> str:
        """The last lines of stdout and stderr, labelled, for failure messages."""
        return (
            f"--- {self.name} (pid {self.pid}, exit_code={self.exit_code}) stdout tail ---\n"
            f"{_tail(self.stdout(), lines)}\n"
            f"--- {self.name} stderr tail ---\n{_tail(self.stderr(), lines)}"
        )

    # ---------------------------------------------------------------------------------------- signals
    def _signal(self, signum: int, group: bool) -> None:
        try:
            if group and self.own_session:
                os.killpg(self.pgid, signum)
            elif self._popen.returncode is None:
                self._popen.send_signal(signum)
        except ProcessLookupError:
            pass  # the whole group is already gone

    def send_signal(self, signum: int, *, group: bool = True) -> None:
        self._signal(signum, group)

    def kill(self, *, group: bool = True) -> int:
        """SIGKILL (the whole group by default) and reap; returns the exit code (``-9`` if it was alive)."""
        self._signal(signal.SIGKILL, group)
        return self._popen.wait(_REAP_TIMEOUT_S)

    def pause(self, *, group: bool = True) -> None:
        """SIGSTOP: the process stays mapped but runs no code (a stalled driver or client)."""
        self._signal(signal.SIGSTOP, group)

    def resume(self, *, group: bool = True) -> None:
        """SIGCONT after ``pause()``."""
        self._signal(signal.SIGCONT, group)

    def terminate(self, timeout_s: float = 5.0, *, group: bool = True, work: Callable[[], int] | None = None) -> int:
        """SIGTERM (then SIGCONT, so a paused process can act on it); SIGKILL if still alive after ``timeout_s``.
        ``work`` runs while it waits (``await_condition``'s), e.g. a client's poll that must go on meanwhile."""
        self._signal(signal.SIGTERM, group)
        self._signal(signal.SIGCONT, group)
        try:
            self.wait(timeout_s, work=work)
        except ConditionTimeout:
            return self.kill(group=group)
        return self._popen.returncode

    # ------------------------------------------------------------------------------------------ waits
    def wait(self, timeout_s: float, *, work: Callable[[], int] | None = None) -> int:
        """Wait for exit and return the exit code; ``ConditionTimeout`` if still running at the deadline."""
        await_condition(
            lambda: self._popen.poll() is not None, timeout_s, f"process {self.name!r} (pid {self.pid}) to exit",
            work=work,
        )
        return self._popen.returncode

    def check_alive(self) -> None:
        """Raise ``ProcessExitedError`` (with the exit code and the log tail) if the process has exited."""
        if self._popen.poll() is not None:
            raise ProcessExitedError(f"process {self.name!r} exited with code {self._popen.returncode}\n{self.tail()}")

    def await_output(self, text: str, timeout_s: float, *, stream: str = "stdout",
                     work: Callable[[], int] | None = None) -> str:
        """Wait until ``text`` appears in the process's ``stdout`` or ``stderr`` log; fail at once if it exits first."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"stream={stream!r} must be 'stdout' or 'stderr'")
        read = self.stdout if stream == "stdout" else self.stderr

        def found():
            content = read()
            if text in content:
                return content
            self.check_alive()  # after the read: a process that printed, then exited, still counts
            return None

        return await_condition(found, timeout_s, f"{text!r} in {self.name}'s {stream}", work=work)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid}, exit_code={self.exit_code})"


class ProcessManager:
    """Spawns and owns child processes; ``close()`` (or leaving the ``with`` block) kills and reaps them all.

    Parameters
    ----------
    run_dir : path
        Where the ``<name>.out``/``<name>.err`` logs go (created if missing).
    base_env : mapping, optional
        Extra environment for every child (on top of ``os.environ``).
    """

    def __init__(self, run_dir: str | os.PathLike, base_env: Mapping[str, str] | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.base_env = dict(base_env or {})
        self.processes: list[ManagedProcess] = []
        self._closed = False

    def _unique_name(self, name: str) -> str:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"process name={name!r} must be a plain file name")
        taken = {p.name for p in self.processes}
        if name not in taken:
            return name
        n = 2
        while f"{name}.{n}" in taken:
            n += 1
        return f"{name}.{n}"

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        own_session: bool = True,
    ) -> ManagedProcess:
        """Start ``argv`` as a child in its own session (in this process's with ``own_session=False``: see the
        module's doc), logging to ``<run_dir>/<name>.out``/``.err``.

        A name used before gets a suffix (``driver.2``), so a restarted process keeps its own logs.
        The child sees ``os.environ`` + ``base_env`` + ``env`` and ``PYTHONUNBUFFERED=1``.
        """
        if self._closed:
            raise RuntimeError("ProcessManager is closed")
        if isinstance(argv, (str, bytes)) or not argv:
            raise ValueError(f"argv={argv!r} must be a non-empty sequence of arguments")
        name = self._unique_name(name)
        child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.base_env, **(env or {})}
        stdout_path = self.run_dir / f"{name}.out"
        stderr_path = self.run_dir / f"{name}.err"
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            popen = subprocess.Popen(
                # If this process dies without close() (SIGKILL, a crash), the kernel kills the child.
                with_parent_death_signal(argv, signal.SIGKILL),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=child_env,
                cwd=cwd,
                start_new_session=own_session,
                close_fds=True,
            )
        process = ManagedProcess(name, argv, popen, stdout_path, stderr_path, own_session)
        self.processes.append(process)
        return process

    def spawn_module(self, name: str, module: str, *args: str, **kwargs) -> ManagedProcess:
        """``python -m module args...`` with this interpreter."""
        return self.spawn(name, [sys.executable, "-m", module, *args], **kwargs)

    def spawn_python(self, name: str, code: str, *args: str, **kwargs) -> ManagedProcess:
        """``python -c code args...`` with this interpreter (``sys.argv[1:]`` are ``args``)."""
        return self.spawn(name, [sys.executable, "-c", code, *args], **kwargs)

    def __getitem__(self, name: str) -> ManagedProcess:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(f"no process named {name!r}; have {[p.name for p in self.processes]}")

    def tails(self, lines: int = 30) -> str:
        """Every child's log tails, for a failure report."""
        return "\n".join(p.tail(lines) for p in self.processes)

    def close(self) -> None:
        """SIGKILL every child's process group (even of children that already exited) and reap them all."""
        self._closed = True
        errors = []
        for process in self.processes:
            try:
                process.kill(group=True)
            except Exception as exc:  # keep killing the others
                errors.append(f"{process.name}: {exc!r}")
        if errors:
            raise RuntimeError(f"could not kill and reap: {errors}")

    def __enter__(self) -> "ProcessManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
