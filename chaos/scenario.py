"""A chaos scenario: a topology to start, a fault schedule, the invariants checked afterwards.

``run_scenario(scenario, seed, quick, out_root)`` gives the scenario a ``RunContext`` (a fresh aeron dir,
a ``ProcessManager``, the timeline, a seeded ``random.Random``), starts the media driver, calls
``scenario.run(ctx)`` (start workers, inject faults, wait for publishers), then does what every run does:
wait until each live subscriber has everything acknowledged, stop the subscribers cleanly, wait for the
driver to reclaim every client resource, snapshot the counters, read the error log, stop the driver, and
check the invariants (delivery, counter deltas, error log allow-list, exit codes, no leftover process or
file). The run folder keeps ``timeline.jsonl``, ``errors.txt``, ``result.json`` and every process's logs.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.layout import counters as cl
from aeron_numba.tools.error_stat import error_stat_lines
from chaos import invariants
from chaos.timeline import CONTROLLER_FILE, WORKERS_DIR, Tail, Timeline, merge_timeline, read_events
from harness.aeron_dirs import AeronCounters, await_cnc_ready, new_aeron_dir, remove_aeron_dir
from harness.awaiting import ConditionTimeout, await_condition
from harness.driver_settings import (CLIENT_LIVENESS_TIMEOUT_S, PUBLICATION_UNBLOCK_TIMEOUT_S, driver_env_for_tests,
                                     udp_settings_for_tests)
from harness.process_manager import ManagedProcess, ProcessManager, pid_alive

STREAM = 1001
WORKLOAD = "chaos.workload"
CLIENT_TIMEOUTS = "Client liveness timeouts"
UNBLOCKED = "Unblocked Publications"
ERRORS = "Errors"
CHECKED_COUNTERS = (CLIENT_TIMEOUTS, UNBLOCKED, ERRORS)

LIVENESS_TIMEOUT_S = CLIENT_LIVENESS_TIMEOUT_S
UNBLOCK_TIMEOUT_S = PUBLICATION_UNBLOCK_TIMEOUT_S
# The test drivers' settings: short timeouts (liveness 2 s, unblock 3 s, timer 100 ms), small buffers, backoff.
DRIVER_ENV = driver_env_for_tests()
# UDP scenarios: terms roll over quickly (256 KiB); a quiet image goes, and a publication without status
# messages becomes unconnected, after 3 s.
UDP_DRIVER_ENV = udp_settings_for_tests(term_buffer_length="256k", liveness_timeout="3s")
IMAGE_LIVENESS_TIMEOUT_S = 3.0
PROCESS_START_TIMEOUT_S = 60.0
DELIVERY_TIMEOUT_S = 30.0
RECLAIM_TIMEOUT_S = 15.0


class Worker:
    """A workload process and its event log."""

    def __init__(self, name: str, role: str, process: ManagedProcess, log_path: Path, pub: int | None = None):
        self.name, self.role, self.process, self.log_path, self.pub = name, role, process, log_path, pub
        self._tail = Tail(log_path)

    def events(self) -> list[dict]:
        self._tail.poll()
        return self._tail.events

    def count(self, event: str) -> int:
        return sum(1 for e in self.events() if e["event"] == event)

    def await_ready(self, timeout_s: float = PROCESS_START_TIMEOUT_S) -> None:
        self.process.await_output("ready", timeout_s)


@dataclass
class PeerDriver:
    """The second media driver of a UDP scenario (its own aeron dir): the subscribers' side of the network."""

    aeron_dir: Path
    process: ManagedProcess | None = None
    counters: AeronCounters | None = None

    def close_counters(self) -> None:
        if self.counters is not None:
            self.counters.close()
            self.counters = None


@dataclass
class RunContext:
    scenario: str
    seed: int
    iteration: int
    quick: bool
    run_dir: Path
    aeron_dir: Path
    pm: ProcessManager
    timeline: Timeline
    rng: random.Random
    driver: ManagedProcess | None = None
    counters: AeronCounters | None = None
    workers: dict[str, Worker] = field(default_factory=dict)
    faulted: set[str] = field(default_factory=set)
    recovery_s: list[float] = field(default_factory=list)
    expected_exits: dict[str, object] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    metrics: dict[str, object] = field(default_factory=dict)
    # (pub, seq) of messages a fault corrupted in the log: they must arrive flagged bad, the rest intact.
    corrupted: set[tuple[int, int]] = field(default_factory=set)
    # Counters are per driver: a scenario that restarts the driver sets this to a snapshot of the new one.
    counters_baseline: dict[str, int] | None = None
    driver_env: dict[str, str] = field(default_factory=dict)  # the scenario's settings for every driver
    peer: PeerDriver | None = None  # UDP scenarios: the second driver
    # Sessions whose log a publisher-side fault destroyed (its driver killed): what was acknowledged on them
    # but never received is lost to that fault, not owed.
    excused_sessions: set[int] = field(default_factory=set)
    peer_allowed_errors: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------------------------------ driver
    def _spawn_driver(self, name: str, aeron_dir: Path, extra_env: dict[str, str] | None):
        env = dict(DRIVER_ENV, **self.driver_env, AERON_DIR=str(aeron_dir), **(extra_env or {}))
        process = self.pm.spawn_module(name, "aeron_numba.driver", env=env)
        cnc_file = await_cnc_ready(aeron_dir, PROCESS_START_TIMEOUT_S, pid=process.pid, processes=[process])
        self.timeline.event("process_start", name=process.name, role="driver", pid=process.pid, aeron_dir=str(aeron_dir))
        return process, AeronCounters(cnc_file, owns_cnc=True)

    def start_driver(self, name: str = "driver", extra_env: dict[str, str] | None = None) -> ManagedProcess:
        self.driver, self.counters = self._spawn_driver(name, self.aeron_dir, extra_env)
        return self.driver

    def start_peer_driver(self, name: str = "driver-b") -> ManagedProcess:
        """Start (or, after a fault, restart over the same dir) the second driver of a UDP scenario."""
        if self.peer is None:
            self.peer = PeerDriver(new_aeron_dir(f"chaos-{self.scenario}-b"))
        self.peer.process, self.peer.counters = self._spawn_driver(name, self.peer.aeron_dir, None)
        return self.peer.process

    def close_counters(self) -> None:
        if self.counters is not None:
            self.counters.close()
            self.counters = None

    def system_counters(self) -> dict[str, int]:
        # Keyed by the §9.5 name of the system id (= counter id): the driver suffixes some labels
        # ("Errors: version=... commit=..."), so the raw label would never match "Errors".
        names = dict(cl.SYSTEM_COUNTERS)
        return {names.get(info.counter_id, info.label): info.value
                for info in self.counters.find_all(type_id=cl.SYSTEM_COUNTER_TYPE_ID)}

    def counter_snapshot(self, tag: str) -> dict[str, int]:
        """Log the system counters and how many of each per-resource counter exist; return the system ones."""
        values = self.system_counters()
        per_type: dict[str, int] = {}
        for type_id, key in ((cl.CLIENT_HEARTBEAT_TYPE_ID, "client_heartbeats"),
                             (cl.PUBLISHER_LIMIT_TYPE_ID, "publisher_limits"),
                             (cl.SUBSCRIBER_POSITION_TYPE_ID, "subscriber_positions")):
            per_type[key] = len(self.counters.find_all(type_id=type_id))
        self.timeline.event("counters", tag=tag, system={k: values[k] for k in CHECKED_COUNTERS if k in values},
                            resources=per_type,
                            publisher_limits=[i.value for i in self.counters.find_all(type_id=cl.PUBLISHER_LIMIT_TYPE_ID)])
        return values

    def await_counter(self, label: str, predicate, timeout_s: float, description: str) -> int:
        """Wait for a system counter to satisfy ``predicate``; returns the ts_ns at which it was seen."""
        self.counters.await_value(predicate, timeout_s, label=label, description=description)
        return self.timeline.event("observed", what=description)["ts_ns"]

    def record_recovery(self, fault_ts_ns: int, recovered_ts_ns: int, what: str) -> None:
        seconds = (recovered_ts_ns - fault_ts_ns) / 1e9
        self.recovery_s.append(seconds)
        self.timeline.event("recovery", what=what, seconds=seconds)

    # ----------------------------------------------------------------------------------------- workers
    def _spawn(self, name: str, role: str, args: list[str], pub: int | None = None, on_peer: bool = False) -> Worker:
        log_path = self.run_dir / WORKERS_DIR / f"{name}.jsonl"
        aeron_dir = self.peer.aeron_dir if on_peer else self.aeron_dir
        process = self.pm.spawn_module(name, WORKLOAD, role, "--dir", str(aeron_dir), "--name", name,
                                       "--log", str(log_path), "--stream", str(STREAM), *args)
        worker = Worker(name, role, process, log_path, pub)
        self.workers[name] = worker
        self.timeline.event("process_start", name=name, role=role, pid=process.pid, argv=list(process.argv[3:]))
        return worker

    def start_subscriber(self, name: str, *, reconnect: bool = False, poll_sleep_us: float = 0,
                         fragment_limit: int = 256, channel: str | None = None, on_peer: bool = False) -> Worker:
        """A subscriber process; ``on_peer``: connected to the second driver (UDP scenarios)."""
        args = ["--poll-sleep-us", str(poll_sleep_us), "--fragment-limit", str(fragment_limit)]
        args += ["--channel", channel] if channel else []
        return self._spawn(name, "subscribe", args + (["--reconnect"] if reconnect else []), on_peer=on_peer)

    def start_publisher(self, name: str, pub: int, count: int, *, interval_us: float = 200, reconnect: bool = False,
                        exit_without_close: bool = False, max_length: int = 1000, huge_every: int = 0,
                        retry_add: bool = False, exclusive: bool = False, channel: str | None = None,
                        on_peer: bool = False) -> Worker:
        """A publisher process; ``on_peer``: connected to the second driver."""
        args = ["--pub", str(pub), "--count", str(count), "--seed", str(self.seed), "--interval-us",
                str(interval_us), "--max-length", str(max_length), "--huge-every", str(huge_every)]
        args += ["--channel", channel] if channel else []
        args += ["--reconnect"] if reconnect else []
        args += ["--retry-add"] if retry_add else []
        args += ["--exclusive"] if exclusive else []
        args += ["--exit-without-close"] if exit_without_close else []
        return self._spawn(name, "publish", args, pub=pub, on_peer=on_peer)

    def start_claimer(self, name: str) -> Worker:
        return self._spawn(name, "claim-and-die", [])

    def start_garbage(self, name: str, duration_s: float, *, interval_us: float = 500, raw_every: int = 50) -> Worker:
        """A rogue process writing garbage commands into the to-driver buffer for ``duration_s``."""
        return self._spawn(name, "garbage", ["--seed", str(self.seed), "--duration-s", str(duration_s),
                                             "--interval-us", str(interval_us), "--raw-every", str(raw_every)])

    def stop_worker(self, worker: Worker, timeout_s: float = 30.0) -> None:
        """SIGTERM an unbounded worker (it finishes cleanly and exits 0)."""
        worker.process.send_signal(signal.SIGTERM, group=False)
        worker.process.wait(timeout_s)
        self.timeline.event("process_exit", name=worker.name, pid=worker.process.pid,
                            exit_code=worker.process.exit_code)

    def await_counter_count(self, type_id: int, count: int, timeout_s: float, description: str) -> int:
        """Wait until exactly ``count`` counters of ``type_id`` are allocated; returns ts_ns when seen."""
        await_condition(lambda: len(self.counters.find_all(type_id=type_id)) == count, timeout_s, description)
        return self.timeline.event("observed", what=description)["ts_ns"]

    def publishers(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.role == "publish"]

    def subscribers(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.role == "subscribe"]

    def await_publishers_done(self, timeout_s: float = 120.0) -> None:
        for worker in self.publishers():
            if worker.process.exit_code is None:
                try:
                    worker.process.wait(timeout_s)
                except ConditionTimeout:
                    self.failures.append(f"{worker.name} did not finish within {timeout_s}s")
                    worker.process.kill()
            self.timeline.event("process_exit", name=worker.name, pid=worker.process.pid,
                                exit_code=worker.process.exit_code)


class Scenario:
    """Subclass with ``name``, ``summary``, ``counter_deltas``, ``allowed_errors`` and ``run(ctx)``."""

    name = ""
    summary = ""
    counter_deltas: dict[str, int] = {}
    allowed_errors: list[str] = []
    driver_env: dict[str, str] = {}  # settings added to DRIVER_ENV for every driver of the run

    def run(self, ctx: RunContext) -> None:
        raise NotImplementedError

    def check(self, ctx: RunContext, before: dict[str, int], after: dict[str, int]) -> list[str]:
        """Scenario-specific checks after the common ones (override)."""
        return []


@dataclass
class RunResult:
    scenario: str
    seed: int
    iteration: int
    passed: bool
    failures: list[str]
    recovery_s: list[float]
    messages_checked: int
    duration_s: float
    run_dir: str
    metrics: dict


def _faulted_publisher_ids(ctx: RunContext) -> set[int]:
    return {w.pub for w in ctx.publishers() if w.name in ctx.faulted and w.pub is not None}


def _live_subscribers(ctx: RunContext) -> list[Worker]:
    return [w for w in ctx.subscribers() if w.process.exit_code is None]


def _await_delivery(ctx: RunContext) -> None:
    """Wait until every live subscriber's latest incarnation holds every acknowledged message it should."""
    live = _live_subscribers(ctx)

    def delivered():
        workers = {name: list(w.events()) for name, w in ctx.workers.items()}
        for w in live:  # pretend the latest incarnation ended cleanly now
            incs = [e.get("incarnation", 0) for e in workers[w.name] if e["event"] == "connected"]
            workers[w.name].append({"event": "done", "incarnation": max(incs, default=0), "ts_ns": 0})
        failures, _ = invariants.check_delivery(workers, [w.name for w in live], _faulted_publisher_ids(ctx),
                                                frozenset(ctx.corrupted), frozenset(ctx.excused_sessions))
        missing = [f for f in failures if "never received" in f]  # others will not heal by waiting
        return True if not missing else invariants_not_yet(missing)

    try:
        await_condition(delivered, DELIVERY_TIMEOUT_S, "live subscribers to receive every acknowledged message")
    except ConditionTimeout as exc:
        ctx.timeline.event("delivery_timeout", detail=str(exc)[:2000])


def invariants_not_yet(failures):
    from harness.awaiting import NotYet

    return NotYet("; ".join(failures)[:500])


def _stop_subscribers(ctx: RunContext) -> None:
    for w in _live_subscribers(ctx):
        w.process.send_signal(signal.SIGTERM, group=False)
    for w in ctx.subscribers():
        if w.name not in ctx.faulted or w.process.exit_code is None:
            try:
                w.process.wait(30)
            except ConditionTimeout:
                ctx.failures.append(f"{w.name} did not stop on SIGTERM")
                w.process.kill()
            ctx.timeline.event("process_exit", name=w.name, pid=w.process.pid, exit_code=w.process.exit_code)


def _await_reclaimed(ctx: RunContext, counters: AeronCounters | None = None, aeron_dir: Path | None = None,
                     driver: str = "driver") -> None:
    """Every client is gone: the driver must free their counters and delete every publication and image log."""
    counters = counters or ctx.counters
    aeron_dir = aeron_dir or ctx.aeron_dir

    def reclaimed():
        left = {key: len(counters.find_all(type_id=t)) for key, t in (
            ("client heartbeats", cl.CLIENT_HEARTBEAT_TYPE_ID), ("publisher limits", cl.PUBLISHER_LIMIT_TYPE_ID),
            ("subscriber positions", cl.SUBSCRIBER_POSITION_TYPE_ID), ("receiver positions", cl.RECEIVER_POSITION_TYPE_ID),
            ("sender positions", cl.SENDER_POSITION_TYPE_ID))}
        files = sorted(p.name for sub in ("publications", "images") for p in (aeron_dir / sub).glob("*"))
        if any(left.values()) or files:
            return invariants_not_yet(f"left: {left}, files: {files}")
        return True

    try:
        await_condition(reclaimed, RECLAIM_TIMEOUT_S, f"{driver} to reclaim every client resource")
    except ConditionTimeout as exc:
        ctx.failures.append(f"leftover {driver} resources: {exc.last_value}")


def _read_error_log(ctx: RunContext, counters: AeronCounters | None = None, file_name: str = "errors.txt") -> list[dict]:
    observations = ErrorLogReader.read((counters or ctx.counters).cnc_file.error_log_buffer)
    (ctx.run_dir / file_name).write_text("\n".join(error_stat_lines(observations)) + "\n")
    result = []
    for obs in observations:
        record = {"error": obs.encoded_exception, "count": obs.observation_count,
                  "first_ms": obs.first_observation_timestamp_ms, "last_ms": obs.last_observation_timestamp_ms}
        ctx.timeline.event("error_log", driver=file_name.removesuffix(".txt"), **record)
        result.append(record)
    return result


def _finish_peer(ctx: RunContext) -> None:
    """The second driver of a UDP scenario: resources reclaimed, error log allow-listed, clean SIGTERM exit."""
    peer = ctx.peer
    if peer is None or peer.process is None:
        return
    if peer.counters is None:
        ctx.failures.append("no peer driver at the end of the scenario")
        return
    _await_reclaimed(ctx, peer.counters, peer.aeron_dir, "driver-b")
    ctx.failures += [f"driver-b: {f}" for f in invariants.check_error_log(
        _read_error_log(ctx, peer.counters, "errors-driver-b.txt"), ctx.peer_allowed_errors)]
    peer.close_counters()
    code = peer.process.terminate(10)
    ctx.timeline.event("process_exit", name=peer.process.name, pid=peer.process.pid, exit_code=code)
    if code != 0:
        ctx.failures.append(f"driver-b exit code {code} on SIGTERM, expected 0")


def run_scenario(scenario: Scenario, seed: int, *, quick: bool = True, iteration: int = 0,
                 out_root: str | os.PathLike = "chaos-runs") -> RunResult:
    started = time.monotonic()
    run_dir = Path(out_root) / f"{scenario.name}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{iteration}"
    run_dir.mkdir(parents=True, exist_ok=False)
    aeron_dir = new_aeron_dir(f"chaos-{scenario.name}")
    timeline = Timeline(run_dir / CONTROLLER_FILE, "chaos")
    pm = ProcessManager(run_dir / "processes")
    ctx = RunContext(scenario.name, seed, iteration, quick, run_dir, aeron_dir, pm, timeline, random.Random(seed))
    timeline.event("run_start", scenario=scenario.name, seed=seed, iteration=iteration, quick=quick,
                   aeron_dir=str(aeron_dir), format_version=1,
                   replay=f"python -m chaos run {scenario.name} --seed {seed}{' --quick' if quick else ''}")
    ctx.driver_env = dict(scenario.driver_env)
    ctx.peer_allowed_errors = list(scenario.allowed_errors)
    messages_checked = 0
    try:
        ctx.start_driver()
        before = ctx.counter_snapshot("before")
        scenario.run(ctx)
        before = ctx.counters_baseline if ctx.counters_baseline is not None else before
        ctx.await_publishers_done()
        _await_delivery(ctx)
        _stop_subscribers(ctx)
        if ctx.counters is None:
            ctx.failures.append("no driver at the end of the scenario")
            raise RuntimeError("no driver")
        _await_reclaimed(ctx)
        _finish_peer(ctx)
        after = ctx.counter_snapshot("after")
        errors = _read_error_log(ctx)
        workers = {name: read_events(w.log_path) for name, w in ctx.workers.items()}
        failures, messages_checked = invariants.check_delivery(
            workers, [w.name for w in ctx.subscribers()], _faulted_publisher_ids(ctx), frozenset(ctx.corrupted),
            frozenset(ctx.excused_sessions))
        ctx.failures += failures
        ctx.failures += invariants.check_counter_deltas(before, after, {**{k: 0 for k in CHECKED_COUNTERS},
                                                                        **scenario.counter_deltas})
        ctx.failures += invariants.check_error_log(errors, scenario.allowed_errors)
        exits = {name: w.process.exit_code for name, w in ctx.workers.items()}
        expected = {name: 0 for name, w in ctx.workers.items() if name not in ctx.faulted}
        expected.update(ctx.expected_exits)
        ctx.failures += invariants.check_exits(exits, expected)
        ctx.failures += scenario.check(ctx, before, after)
        driver = ctx.driver
        ctx.close_counters()
        code = driver.terminate(10)
        timeline.event("process_exit", name=driver.name, pid=driver.pid, exit_code=code)
        if code != 0:
            ctx.failures.append(f"driver exit code {code} on SIGTERM, expected 0")
    except Exception as exc:  # noqa: BLE001 - a run that breaks is a failed run with its traceback
        ctx.failures.append(f"run error: {type(exc).__name__}: {exc}")
        timeline.event("run_error", error=traceback.format_exc()[-4000:])
    finally:
        ctx.close_counters()
        if ctx.peer is not None:
            ctx.peer.close_counters()
        alive = [p.name for p in pm.processes if p.exit_code is None]
        pm.close()
        if alive:
            ctx.failures.append(f"processes still running at the end: {alive}")
        leftovers = [p.name for p in pm.processes if pid_alive(p.pid)]
        if leftovers:
            ctx.failures.append(f"processes alive after kill: {leftovers}")
        for path in [aeron_dir] + ([ctx.peer.aeron_dir] if ctx.peer is not None else []):
            remove_aeron_dir(path)
            if path.exists():
                ctx.failures.append(f"aeron dir {path} could not be removed")
    duration = time.monotonic() - started
    passed = not ctx.failures
    timeline.event("run_end", passed=passed, failures=ctx.failures, recovery_s=ctx.recovery_s,
                   messages_checked=messages_checked, duration_s=duration, metrics=ctx.metrics)
    timeline.close()
    merge_timeline(run_dir)
    result = RunResult(scenario.name, seed, iteration, passed, ctx.failures, ctx.recovery_s, messages_checked,
                       duration, str(run_dir), ctx.metrics)
    (run_dir / "result.json").write_text(json.dumps(result.__dict__, indent=2))
    return result
