"""The two benchmark worker processes: pinned, one case after another, each case's two roles in step.

The parent starts worker ``A`` (pinned to core 0) and worker ``B`` (core 1) with the same plan. For every
case each calls its role's function (``A``: ping / producer / the single-process floor; ``B``: pong /
consumer / idle) from the implementation modules' ``ROLES`` tables; the two meet at ``Control.sync``
barriers. Results go to ``out_path`` as JSON after every case, so a crash keeps what was measured.

Pinning is done first, before the Aeron client starts its conductor thread, so every thread of a worker
runs on its core (``os.sched_setaffinity`` applies to the calling thread and is inherited).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.control import CaseAborted, Control

_CONNECT_TIMEOUT_S = 30.0


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when the runner dies (even by SIGKILL), so no pinned
    spinner outlives it. A no-op elsewhere."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


#: ``python -c`` code that runs the media driver as a child that dies with the runner.
DRIVER_CODE = (
    "from benchmarks.worker import die_with_parent; die_with_parent(); "
    "import runpy, sys; sys.argv = ['aeron_numba.driver']; runpy.run_module('aeron_numba.driver', run_name='__main__')"
)


def pin_to_cpu(cpu: int | None) -> str:
    """Pin this process to ``cpu`` (None: leave it); returns what was done, for the report."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return "unpinned"
    os.sched_setaffinity(0, {cpu})
    return f"cpu {cpu}"


class WorkerEnv:
    """What a role function gets: the case's barrier, scratch page, ids, clock rate and the Aeron client."""

    def __init__(self, role: str, control: Control, tsc_hz: float, aeron_dir: str, run_root: str, pipes: dict,
                 case_timeout_s: float):
        self.role = role
        self.control = control
        self.tsc_hz = tsc_hz
        self.aeron_dir = aeron_dir
        self.run_root = Path(run_root)
        self.pipes = pipes
        self.case_timeout_s = case_timeout_s
        self.case_index = -1
        self.case: dict = {}
        self._aeron = None
        self._closers: list = []

    # ------------------------------------------------------------------------------------------ per case
    def start_case(self, index: int, case: dict) -> None:
        self.case_index = index
        self.case = case
        self.case_deadline = time.monotonic() + self.case_timeout_s

    def sync(self, step: int) -> None:
        """Barrier with the partner at ``step`` of this case."""
        self.control.sync(self.case_index, step, max(1.0, self.case_deadline - time.monotonic()))

    def remaining_s(self) -> float:
        return max(0.5, self.case_deadline - time.monotonic())

    def timeout_ticks(self) -> int:
        """The case's remaining time in TSC ticks (the compiled loops' deadline)."""
        return int(self.remaining_s() * self.tsc_hz)

    def check_deadline(self, what: str) -> None:
        if time.monotonic() > self.case_deadline:
            raise TimeoutError(f"{self.case['name']}: {what} not done within {self.case_timeout_s}s")

    def page(self):
        return self.control.page(self.case_index)

    def pipe(self):
        return self.pipes[self.case["name"]]

    def path(self, stem: str) -> str:
        return str(self.run_root / f"{stem}-{self.case_index}")

    def token(self) -> str:
        """A name unique to this run and case (services, sockets)."""
        return f"{self.run_root.name}-{self.case_index}"

    def stream_id(self, k: int) -> int:
        return 10_000 + 8 * self.case_index + k

    def on_case_end(self, closer) -> None:
        """Call ``closer()`` when the case ends, whatever happens (publications, sockets...)."""
        self._closers.append(closer)

    def end_case(self) -> None:
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            try:
                closer()
            except Exception:  # keep closing the rest
                traceback.print_exc()

    # ------------------------------------------------------------------------------------------- aeron
    def aeron(self):
        if self._aeron is None:
            from aeron_numba.client import Aeron, Context

            self._aeron = Aeron.connect(Context(aeron_dir=self.aeron_dir))
        return self._aeron

    def close(self) -> None:
        if self._aeron is not None:
            self._aeron.close()
            self._aeron = None


def involuntary_switches() -> int:
    """This process's involuntary context switches so far (how often a spinning loop was preempted)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of ``pid`` (0.0 if unknown)."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _write(out_path: str, payload: dict) -> None:
    tmp = f"{out_path}.tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, out_path)


def worker_main(role: str, plan: list[dict], control_path: str, out_path: str, cpu: int | None, tsc_hz: float,
                aeron_dir: str, run_root: str, pipes: dict, case_timeout_s: float, driver_pid: int | None = None) -> None:
    """Run ``role`` of every case in ``plan`` (the spawned process's target)."""
    die_with_parent()
    pinning = pin_to_cpu(cpu)
    from benchmarks.registry import role_function

    control = Control.open(control_path, role)
    env = WorkerEnv(role, control, tsc_hz, aeron_dir, run_root, pipes, case_timeout_s)
    payload: dict[str, Any] = {"role": role, "pid": os.getpid(), "pinning": pinning, "results": []}
    _write(out_path, payload)
    try:
        for index, case in enumerate(plan):
            env.start_case(index, case)
            started = time.monotonic()
            result: dict[str, Any] = {"name": case["name"]}
            try:
                env.sync(0)
                switches, driver_cpu = involuntary_switches(), cpu_seconds(driver_pid)
                result.update(role_function(case["impl"], role)(case, env) or {})
                result["preempted"] = involuntary_switches() - switches
                result["driver_cpu_s"] = round(cpu_seconds(driver_pid) - driver_cpu, 3)
                env.sync(250)  # both roles are done before either closes its end
                result["ok"] = True
            except BaseException as exc:  # report it and go on with the next case
                control.abort(index)
                result["ok"] = False
                result["error"] = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, CaseAborted):
                    result["traceback"] = traceback.format_exc()
                if isinstance(exc, KeyboardInterrupt):
                    raise
            finally:
                env.end_case()
            result["seconds"] = time.monotonic() - started
            payload["results"].append(result)
            _write(out_path, payload)
    finally:
        env.close()
        control.close()
        sys.stdout.flush()
