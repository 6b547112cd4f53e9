"""Running a plan: driver, two pinned workers, a watchdog, and always killing and cleaning up everything.

``run_suite`` runs the plan's cases in groups, one per driver kind (IPC, then UDP, with a driver for each worker;
see ``UDP_DRIVER_ENV``). For
the IPC group it starts this project's media driver (``python -m aeron_numba.driver``, conductor idle strategy
``sleep-ms``, unpinned: it is not on the IPC data path, it only moves ``pub-lmt`` and cleans terms; with
``backoff`` its Python duty cycles took about half a core during a round-trip run, preempting the pinned
loops thousands of times a second, against under a tenth with ``sleep-ms``) on a
unique aeron dir under /dev/shm, creates the control file, and spawns worker A (core 0) and worker B
(core 1) with the plan. It watches them: a worker that crashes, or no case finishing within the case
timeout (a peer blocked in ``recv`` because its partner failed), ends the run with what was measured so far.
Whatever happens, every child is killed and reaped and the run directory is removed.

Measurement model (pyperf): the benchmark loops run in these spawned, pinned worker processes, not in
pyperf's own workers (a ping-pong needs two processes that start together and are pinned apart). Each
case's measured windows become pyperf ``Run`` values (seconds per round trip / per message) and the
results are dumped as a pyperf ``BenchmarkSuite``; runs of one case are consecutive repetitions in the
same process pair.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing as mp
import os
import platform
import shutil
import socket
import sys
import time
from pathlib import Path

from aeron_numba.driver.context import idle_strategy_environment
from harness.aeron_dirs import await_cnc_ready, new_aeron_dir, remove_aeron_dir
from harness.driver_settings import driver_env_for_benchmarks
from harness.process_manager import ProcessManager
from harness.processes import spawned

from benchmarks.control import Control
from benchmarks.plan import build_plan
from benchmarks.worker import DRIVER_CODE, worker_main

#: Where runs write their outputs unless ``--out`` says.
DEFAULT_OUT_ROOT = Path("/tmp/aeron-numba-bench")

#: The driver of a benchmark run: Aeron's defaults except a sleeping conductor, no linger, generous client
#: timeouts (a worker's conductor thread shares its core with a spinning loop) and log buffers pre-touched
#: (without, every page of a log's first pass cost a fault of about 36 us in the middle of the stream: one
#: round trip in 64 during the first 49 k of a 1 MiB-term ping-pong, which made the quick run's p99).
DRIVER_ENV = driver_env_for_benchmarks("sleep-ms", AERON_PRE_TOUCH_MAPPED_MEMORY="true",
                                       AERON_IPC_TERM_BUFFER_LENGTH="1m")
#: The UDP cases' driver: its sender and receiver share the conductor's thread (SHARED, unless
#: AERON_THREADING_MODE in the environment says otherwise), which has to turn round as soon as a datagram or a
#: message is there, so every driver thread yields instead of sleeping between duty cycles. Its sockets get 4 MiB
#: buffers (net.core.rmem_max here) and its images a 2 MiB receiver window, as an Aeron user tuning for throughput
#: would: with the jumbo cases' 64 KiB datagrams, Aeron's 128 KiB defaults hold two datagrams in flight.
UDP_DRIVER_ENV = {**DRIVER_ENV, **idle_strategy_environment("yield"), "AERON_SOCKET_SO_RCVBUF": "4m",
                  "AERON_SOCKET_SO_SNDBUF": "4m", "AERON_RCV_INITIAL_WINDOW_LENGTH": "2m"}
#: Cases of kind "none" (the raw UDP floors) run with no driver at all.
DRIVER_ENVS = {"ipc": DRIVER_ENV, "udp": UDP_DRIVER_ENV, "none": {}}
DRIVER_START_TIMEOUT_S = 180.0  # a cold Numba cache compiles the driver's kernels first
WATCHDOG_GRACE_S = 30.0
IDLE_STRATEGIES = (
    "benchmark loops (compiled and Python, ours and peers): busy spin, no idle strategy and no PAUSE hint; "
    "zmq and multiprocessing.Pipe receivers: blocking recv (their own waits); "
    "media driver conductor: sleep-ms (Agrona SleepingMillisIdleStrategy: 1 ms sleep after a cycle without work), "
    "unpinned; "
    "Aeron client conductor threads: sleep 16 ms between duty cycles, on their worker's core; "
    "UDP cases: a driver for each worker, in threading mode "
    f"{os.environ.get('AERON_THREADING_MODE', 'SHARED').strip().upper() or 'SHARED'} (SHARED: conductor, sender and "
    "receiver on one thread), every thread's idle strategy yield, unpinned, and compiled loops that sched_yield "
    "every 256 empty spins (the driver needs their cores)"
)


def choose_cpus() -> tuple[int | None, int | None]:
    """Cores for worker A and B: the first two this process may use, or None (unpinned) with fewer."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "not installed"


def environment(tsc_hz: float, cpus: tuple, profile: str) -> dict:
    import numba
    import numpy

    pinning = (f"worker A (ping/producer) on cpu {cpus[0]}, worker B (pong/consumer) on cpu {cpus[1]}"
               if cpus[0] is not None else "unpinned (fewer than 2 usable cores)")
    return {
        "profile": profile,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "numba": numba.__version__,
        "numpy": numpy.__version__,
        "pyzmq": _version("pyzmq"),
        "iceoryx2": _version("iceoryx2"),
        "pyperf": _version("pyperf"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "tsc_ghz": round(tsc_hz / 1e9, 4),
        "pinning": pinning,
        "idle_strategies": IDLE_STRATEGIES,
        "load_avg_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "autogroup": _autogroup(),
    }


def _autogroup() -> str | None:
    """This process's scheduling autogroup and its nice (``/proc/self/autogroup``), None where there is none: a
    run started from a niced session shares the cores differently with processes outside it."""
    try:
        return Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return None


RUN_DIR_PREFIX = "aeron-numba-bench"


def remove_stale_run_dirs() -> list[str]:
    """Remove run directories left by runners that were killed (their pid, in the name, is gone)."""
    from harness.aeron_dirs import SHM_ROOT
    from harness.process_manager import pid_alive

    removed = []
    for path in SHM_ROOT.glob(f"{RUN_DIR_PREFIX}-*-*"):
        try:
            pid = int(path.name[len(RUN_DIR_PREFIX) + 1 :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            remove_aeron_dir(path)
            removed.append(str(path))
    return removed


def _read_results(path: Path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {"results": []}


def _watch(procs, out_paths, drivers, case_timeout_s: float, echo) -> str | None:
    """Wait for both workers; returns why the run was cut short (None if both finished)."""
    progress = (0, 0)
    last_change = time.monotonic()
    finished_at = None
    while any(p.is_alive() for p in procs):
        counts = tuple(len(_read_results(path)["results"]) for path in out_paths)
        now = time.monotonic()
        if counts != progress:
            for role, before, after in zip("AB", progress, counts):
                if after > before and role == "A":
                    for result in _read_results(out_paths[0])["results"][before:after]:
                        status = "ok" if result.get("ok") else f"FAILED ({result.get('error')})"
                        echo(f"  {result['name']}: {status} [{result.get('seconds', 0):.1f}s]")
            progress, last_change = counts, now
        crashed = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
        if crashed:
            return f"worker pid {crashed[0].pid} exited with code {crashed[0].exitcode}"
        for driver in drivers:
            if not driver.is_alive:
                return f"the media driver exited with code {driver.exit_code}"
        if any(not p.is_alive() for p in procs):
            finished_at = finished_at or now
            if now - finished_at > case_timeout_s + WATCHDOG_GRACE_S:
                return "one worker finished, the other did not"
        if now - last_change > case_timeout_s + WATCHDOG_GRACE_S:
            return f"no case finished within {case_timeout_s + WATCHDOG_GRACE_S:.0f}s (a worker is stuck)"
        time.sleep(0.2)
    return None


def _merge(plan: list[dict], raw: dict[str, dict], cut_short: str | None) -> list[dict]:
    """One result per case: the measuring role's result, with the partner's status folded in."""
    by_role = {role: {r["name"]: r for r in raw[role].get("results", [])} for role in "AB"}
    merged = []
    for case in plan:
        measuring = "B" if case["family"] == "tp" and case["impl"] != "tp-memcpy" else "A"
        partner = "A" if measuring == "B" else "B"
        main = by_role[measuring].get(case["name"])
        other = by_role[partner].get(case["name"])
        result = {"case": case, "ok": False}
        if main is None or other is None:
            result["error"] = f"not run ({cut_short or 'worker ended early'})"
        else:
            result.update({k: v for k, v in main.items() if k != "name"})
            result["partner"] = {k: v for k, v in other.items() if k not in ("name", "traceback")}
            result["ok"] = bool(main.get("ok")) and bool(other.get("ok"))
            roles = {measuring: main, partner: other}
            result["preempted"] = {role: roles[role].get("preempted") for role in "AB"}
            result["driver_cpu_s"] = roles["A"].get("driver_cpu_s")
            if not result["ok"]:
                # The first to fail says why; the other one only saw the abort.
                first = other if main.get("ok") or "CaseAborted" in str(main.get("error")) else main
                result["error"] = f"{'partner: ' if first is other else ''}{first.get('error')}"
                result["traceback"] = first.get("traceback")
        merged.append(result)
    return merged


def default_out_dir(name: str) -> Path:
    """Where a run's outputs go unless told: ``<name>-<time>`` under ``DEFAULT_OUT_ROOT``."""
    return DEFAULT_OUT_ROOT / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_suite(profile: str = "quick", out_dir: str | os.PathLike | None = None, only: list[str] | None = None,
              echo=print, history_dir: str | os.PathLike | None = None) -> dict:
    """Run the ``profile``'s benchmarks (optionally ``only`` some), write the outputs to ``out_dir``, append the
    run to the history under ``history_dir`` (none when None) and return the summary (see
    ``report.build_summary``)."""
    from aeron_numba.spark.history_table import new_run_id

    from benchmarks import history, loops, report

    plan = build_plan(profile, only)
    started_utc = datetime.datetime.now(datetime.timezone.utc)
    out_dir = Path(out_dir) if out_dir else default_out_dir(profile)
    out_dir.mkdir(parents=True, exist_ok=True)
    tsc_hz = loops.calibrate_tsc()  # also compiles (or loads) every compiled loop before the workers start
    cpus = choose_cpus()
    meta = environment(tsc_hz, cpus, profile)
    meta["commit"], meta["commit_dirty"] = history.git_commit()
    meta["started_utc"] = started_utc.isoformat()
    meta["run_id"] = new_run_id(started_utc)
    case_timeout_s = _case_timeout(profile)
    echo(f"aeron-numba benchmarks, profile {profile}: {len(plan)} cases; {meta['pinning']}; output in {out_dir}")

    for stale in remove_stale_run_dirs():
        echo(f"removed {stale} (left by a killed run)")
    run_root = new_aeron_dir(RUN_DIR_PREFIX)
    processes = ProcessManager(run_root / "logs")
    raw: dict[str, dict] = {role: {"results": []} for role in "AB"}
    cut_short = None
    started = time.monotonic()
    try:
        for kind, cases in _by_driver(plan).items():
            env = {**DRIVER_ENVS[kind], **{k: os.environ[k] for k in DRIVER_ENVS[kind] if os.environ.get(k)}}
            if kind != "none":
                meta["driver_env" if kind == "ipc" else f"driver_env_{kind}"] = env
            if kind in ("udp", "none"):
                for case in cases:
                    case["udp_ports"] = reserve_udp_ports(2)
            group_raw, group_cut_short = _run_group(kind, cases, env, run_root, processes, cpus, tsc_hz,
                                                    case_timeout_s, echo)
            for role in "AB":
                raw[role]["results"] += group_raw[role].get("results", [])
                raw[role].setdefault("pinning", group_raw[role].get("pinning", "?"))
            cut_short = cut_short or group_cut_short
    finally:
        try:
            processes.close()
        finally:
            if (run_root / "logs").exists():
                shutil.copytree(run_root / "logs", out_dir / "logs", dirs_exist_ok=True)
            remove_aeron_dir(run_root)
    meta["load_avg_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    meta["seconds"] = round(time.monotonic() - started, 1)
    meta["workers"] = {role: raw[role].get("pinning", "?") for role in "AB"}
    if cut_short:
        meta["cut_short"] = cut_short
        echo(f"run cut short: {cut_short}")
    merged = _merge(plan, raw, cut_short)
    summary = report.build_summary(merged, meta)
    report.write_outputs(summary, merged, out_dir)
    echo(report.format_table(summary))
    echo(f"pyperf JSON: {out_dir / report.PYPERF_FILE}; summary: {out_dir / report.SUMMARY_FILE}; histograms: "
         f"{out_dir / report.HISTOGRAMS_FILE}; plots: {out_dir}/*.png")
    if history_dir is not None:
        try:
            echo(f"history: appended {history.append(history_dir, summary, merged, out_dir)}")
        except OSError as exc:  # the run's own outputs are written: say why the history is not, and carry on
            summary["history_error"] = str(exc)
            echo(f"history: NOT appended: {exc}")
    return summary


def _by_driver(plan: list[dict]) -> dict[str, list[dict]]:
    """The plan's cases grouped by the driver they run against, in plan order (IPC first, then UDP)."""
    groups: dict[str, list[dict]] = {}
    for case in plan:
        groups.setdefault(case["driver"], []).append(case)
    return groups


def reserve_udp_ports(count: int) -> list[int]:
    """``count`` distinct loopback UDP ports that were free a moment ago (bound to port 0, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _run_group(kind: str, cases: list[dict], driver_env: dict, run_root: Path, processes: ProcessManager, cpus,
               tsc_hz: float, case_timeout_s: float, echo) -> tuple[dict, str | None]:
    """Run ``cases`` against drivers of their own (``kind``): start them, run both workers over the cases, stop
    them. IPC cases share one driver; UDP cases have one per worker, so every message crosses from one driver to
    another as between two hosts; the raw-socket floors (kind "none") have none. Returns the workers' raw results and why the group was cut short (None if it
    was not)."""
    control_path = run_root / f"control-{kind}"
    out_paths = [run_root / f"worker-A-{kind}.json", run_root / f"worker-B-{kind}.json"]
    names = {"udp": ("A", "B"), "none": ()}.get(kind, ("",))
    aeron_dirs, drivers = [], []
    for name in names:
        aeron_dir = run_root / f"aeron-{kind}{name.lower()}"
        # In this session, as the workers are: where autogroup scheduling is on (Linux's default), each session is
        # a scheduling group, and a worker's sched_yield hands its core only to tasks of its own group. With the
        # drivers in sessions of their own, how the core was shared followed the weight of the session the run
        # was started from: started from a session niced to 3 the UDP round trip went from 20 to 31 us, niced
        # to 19 it never finished, and a CI run measured 1.41 ms.
        driver = processes.spawn_python(f"driver-{kind}{name.lower()}", DRIVER_CODE,
                                        env={**driver_env, "AERON_DIR": str(aeron_dir)}, own_session=False)
        await_cnc_ready(aeron_dir, DRIVER_START_TIMEOUT_S, pid=driver.pid, processes=[driver]).close()
        aeron_dirs.append(aeron_dir)
        drivers.append(driver)
    if not drivers:  # the raw-socket floors: no driver, no aeron dir of their own
        aeron_dirs, drivers = [run_root, run_root], [None, None]
    elif len(drivers) == 1:  # both workers on the one driver
        aeron_dirs, drivers = aeron_dirs * 2, drivers * 2
    Control.create(control_path, len(cases))
    pipe_ends: dict[str, dict] = {"A": {}, "B": {}}
    for case in cases:
        if case["needs_pipe"]:
            pipe_ends["A"][case["name"]], pipe_ends["B"][case["name"]] = mp.get_context("spawn").Pipe()
    args = [
        (role, cases, str(control_path), str(path), cpu, tsc_hz, str(aeron_dir), str(run_root), pipe_ends[role],
         case_timeout_s, driver.pid if driver is not None else None)
        for role, path, cpu, aeron_dir, driver in zip("AB", out_paths, cpus, aeron_dirs, drivers)
    ]
    with spawned(worker_main, args) as procs:
        cut_short = _watch(procs, out_paths, [d for d in dict.fromkeys(drivers) if d is not None], case_timeout_s,
                           echo)
    for ends in pipe_ends.values():
        for connection in ends.values():
            connection.close()
    for driver in (d for d in dict.fromkeys(drivers) if d is not None):
        driver.terminate(10)  # its idle strategy must not spin beside the next group's cases
    return {role: _read_results(path) for role, path in zip("AB", out_paths)}, cut_short


def _case_timeout(profile: str) -> float:
    from benchmarks.plan import PROFILES

    return PROFILES[profile]["case_timeout_s"]


if __name__ == "__main__":  # pragma: no cover - use ``python -m benchmarks``
    sys.exit("use: python -m benchmarks run [--quick]")
