"""``python -m benchmarks cluster [--quick|--tiny] [--only SYSTEM ...] [--out DIR]``: the cluster benchmark,
every system in one run, the table with the ratios of that run.

For each system (``SYSTEMS``; ``--only`` picks some), three nodes start on loopback and, with 64-byte values
over ``KEY_COUNT`` keys, the same key-value puts are measured:

* ``sync``: closed loop, one put at a time (what a caller blocked on each put sees), p50/p90/p99/p99.9, and for
  aeron-numba the CPU its members' processes used per put (``cpu.py``);
* ``idle``: for aeron-numba, the CPU its members use with nothing sent, in cores;
* ``fixed.1k``, ``fixed.10k``: open loop at 1 k and 10 k puts/s, latency from each put's scheduled send time
  (``load.py``: coordinated omission is not hidden), and whether the rate was sustained;
* ``sustained``: the highest sustained rate by the rate ladder (``load.find_sustained_rate``; the decision and
  its thresholds are documented in ``load.py``), with every trial;
* ``failover``: the leader's process group SIGKILLed under a 1 k/s open loop, to the first acknowledgement of a
  put sent after the kill and to the client's NewLeaderEvent (systems with ``failover`` timeouts comparable to the
  Aeron golden run's: 200 ms heartbeats, 2 s before the followers give up on a silent leader); ``failover_runs``
  times where the system can restart the killed node (it rejoins and catches up before the next), the medians
  reported.

Before each case and each ladder trial one synchronous put must be acknowledged (``settle``): a log-ordered
system answers it only after whatever an overloaded run left queued, which would otherwise be charged to the next.

The run prints the table and writes ``cluster_summary.json`` (figures, verdicts, trials, ratios, targets, the
machine's load average at start and end) and ``cluster_histograms.json`` (each latency case's HdrHistogram,
the format of ``benchmarks/report.py``) to ``--out``. Ratios compare aeron-numba with the peers of the same run
(``RATIOS``); the issue's targets are reported, not asserted. A system that is not installed (etcd) is skipped
with a printed note; one that fails is reported as failed with its error and the run goes on to the next.

The cluster cases are not in ``python -m benchmarks run`` (its two pinned workers and one media driver are a
different harness, and its ``--quick`` profile is the CI gate's, which must stay short): this command has its
own ``full``/``quick``/``tiny`` profiles (``PROFILES``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import stats
from benchmarks.cluster import load as L
from benchmarks.cluster.cpu import cpu_snapshot, cpu_used_s
from benchmarks.runner import default_out_dir

DESCRIPTION = ("3-node clusters on loopback, aeron-numba's beside PySyncObj and etcd: synchronous put latency, "
               "open-loop latency at 1 k and 10 k puts/s from the scheduled send time, the highest sustained rate, "
               "failover")
SUMMARY_FILE = "cluster_summary.json"
HISTOGRAMS_FILE = "cluster_histograms.json"
FIXED_RATES = (1_000, 10_000)
#: The Aeron golden run's client saw the new leader 3.0-3.4 s after the leader was killed.
GOLDEN_FAILOVER_S = (3.0, 3.4)
#: Issue 28's targets for the one-process member (``aeron``), against the peers of the same run.
P50_TARGET_NS = 1_000_000  # open loop at 1 k/s
SUSTAINED_TARGET = 3.0  # highest sustained rate / the best peer's
SYNC_P50_TARGET = 1.0  # synchronous put p50 / the lowest peer synchronous p50
SYNC_P99_TARGET = 2.0  # synchronous put p99 / the lowest peer synchronous p99
CPU_PER_PUT_TARGET_NS = 1_000_000  # CPU of the three members per synchronous put
IDLE_CPU_TARGET = 0.10  # CPU of an idle 3-member cluster, in cores
AERON_PROCESSES = "aeron-processes"
AERON_COMPILED = "aeron-compiled"
AERON = "aeron"

PROFILES: dict[str, dict] = {
    "full": {"sync_count": 5_000, "sync_seconds": 10.0, "fixed_seconds": 5.0, "ladder_start": 1_000,
             "ladder_factor": 2.0, "ladder_max": 256_000, "ladder_seconds": 3.0, "ladder_refine": 2,
             "ladder_retry": True, "failover_rate": 1_000, "failover_kill_after_s": 2.0, "failover_timeout_s": 20.0,
             "failover_runs": 5, "start_timeout_s": 120.0, "idle_seconds": 5.0},
    "quick": {"sync_count": 1_000, "sync_seconds": 3.0, "fixed_seconds": 2.0, "ladder_start": 1_000,
              "ladder_factor": 2.0, "ladder_max": 128_000, "ladder_seconds": 1.5, "ladder_refine": 1,
              "ladder_retry": True, "failover_rate": 1_000, "failover_kill_after_s": 1.0,
              "failover_timeout_s": 15.0, "failover_runs": 5, "start_timeout_s": 120.0, "idle_seconds": 3.0},
    "tiny": {"sync_count": 50, "sync_seconds": 1.0, "fixed_seconds": 0.2, "ladder_start": 500,
             "ladder_factor": 2.0, "ladder_max": 1_000, "ladder_seconds": 0.3, "ladder_refine": 0,
             "ladder_retry": False, "failover_rate": 200, "failover_kill_after_s": 0.5, "failover_timeout_s": 15.0,
             "failover_runs": 1, "start_timeout_s": 120.0, "idle_seconds": 1.0},
}
WARMUP_FRACTION = 0.1
SETTLE_TIMEOUT_S = 60.0
WINDOWS = 5


def _aeron():
    from benchmarks.cluster.aeron_system import AeronClusterSystem

    return AeronClusterSystem()


def _aeron_processes():
    from benchmarks.cluster.aeron_system import AeronClusterSystem

    return AeronClusterSystem(process_layout="processes")


def _aeron_compiled():
    from benchmarks.cluster.aeron_system import AeronClusterSystem

    return AeronClusterSystem(compiled_service=True)


def _pysyncobj():
    from benchmarks.cluster.pysyncobj_system import PySyncObjSystem

    return PySyncObjSystem(batch=False)


def _pysyncobj_batch():
    from benchmarks.cluster.pysyncobj_system import PySyncObjSystem

    return PySyncObjSystem(batch=True)


def _etcd():
    from benchmarks.cluster.etcd_system import EtcdSystem

    return EtcdSystem()


@dataclass(frozen=True)
class SystemEntry:
    name: str
    make: object  # () -> KvSystem
    peer: bool
    failover: bool


#: The systems of a run, in run order. ``pysyncobj-batch`` keeps PySyncObj's default timeouts (its batch period
#: is its heartbeat period), so its failover is not comparable and is not measured.
SYSTEMS: dict[str, SystemEntry] = {
    AERON: SystemEntry(AERON, _aeron, False, True),
    AERON_PROCESSES: SystemEntry(AERON_PROCESSES, _aeron_processes, False, True),
    AERON_COMPILED: SystemEntry(AERON_COMPILED, _aeron_compiled, False, True),
    "pysyncobj": SystemEntry("pysyncobj", _pysyncobj, True, True),
    "pysyncobj-batch": SystemEntry("pysyncobj-batch", _pysyncobj_batch, True, False),
    "etcd": SystemEntry("etcd", _etcd, True, True),
}


def system_names() -> list[str]:
    return list(SYSTEMS)


def select_systems(only: list[str] | None) -> list[str]:
    """The systems to run, in run order; ``only`` names some (an unknown name is a ``ValueError`` naming the
    known ones)."""
    if not only:
        return system_names()
    unknown = [name for name in only if name not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system {', '.join(unknown)} in --only; known: {', '.join(SYSTEMS)}")
    return [name for name in SYSTEMS if name in only]


# ------------------------------------------------------------------------------------------------ measuring
def _warmup(count: int) -> int:
    return min(count - 1, int(count * WARMUP_FRACTION))


def latency_case(result: L.LoadResult, **extra) -> dict:
    """A latency case (the figures of ``benchmarks/stats.py`` and its HdrHistogram) of the acknowledged measured
    operations, with how many were not acknowledged or failed."""
    m = result.measured()
    lat = result.latency_ns()
    good = (result.done_ns != L.NOT_DONE) & result.ok
    measured = lat[m][good[m]]
    warm = lat[: result.warmup][good[: result.warmup]]
    if measured.size == 0:
        raise RuntimeError(f"no operation of {result.count} was acknowledged")
    case = stats.latency_result([measured], warm, WINDOWS, rate=result.rate,
                                failed=int(np.count_nonzero((result.done_ns[m] != L.NOT_DONE) & ~result.ok[m])),
                                not_acknowledged=int(np.count_nonzero(result.done_ns[m] == L.NOT_DONE)),
                                back_pressured=int(result.back_pressured))
    case.pop("runs")
    case.update(extra)
    return case


def settle(system) -> None:
    """Wait until the system has worked off what an overloaded run left queued: one synchronous put, which a
    log-ordered system acknowledges only after everything before it (up to ``SETTLE_TIMEOUT_S``). Without it the
    backlog of one trial would be charged to the next."""
    result = system.run_load(L.LoadSpec(rate=None, count=1, drain_s=SETTLE_TIMEOUT_S))
    if not result.ok.all():
        raise RuntimeError(f"the system did not settle: a put was not acknowledged within {SETTLE_TIMEOUT_S:.0f}s")


def measure_system(system, entry: SystemEntry, profile: dict, root: Path, echo) -> dict[str, dict]:
    """Every case of one started system; a case that fails is recorded with its error and the next one runs."""
    cases: dict[str, dict] = {}

    def case(name: str, fn):
        started = time.monotonic()
        try:
            settle(system)
            cases[name] = {"ok": True, **fn()}
        except Exception as exc:  # the run goes on: the report names what failed and why
            cases[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()}
        cases[name]["seconds"] = round(time.monotonic() - started, 2)
        status = "ok" if cases[name]["ok"] else f"FAILED ({cases[name]['error'].splitlines()[0]})"
        echo(f"  {entry.name} {name}: {status} [{cases[name]['seconds']:.1f}s]")
        return cases[name]

    def sync():
        spec = L.LoadSpec(rate=None, count=profile["sync_count"], warmup=_warmup(profile["sync_count"]),
                          max_seconds=profile["sync_seconds"])
        pids = system.member_pids()
        before = cpu_snapshot(pids) if pids is not None else None
        result = system.run_load(spec)
        if before is None:
            return latency_case(result)
        done = int(np.count_nonzero((result.done_ns != L.NOT_DONE) & result.ok))
        cpu_s = cpu_used_s(before, cpu_snapshot(pids))
        return latency_case(result, cpu_s=cpu_s, cpu_per_put_ns=cpu_s * 1e9 / done if done else None)

    sync_case = case("sync", sync)

    if system.member_pids() is not None:
        def idle():
            pids = system.member_pids()
            before, started = cpu_snapshot(pids), time.monotonic()
            time.sleep(profile["idle_seconds"])  # a measurement window, not a wait for a condition
            cores = cpu_used_s(before, cpu_snapshot(pids)) / (time.monotonic() - started)
            return {"kind": "cpu", "figures": {"cores": cores}}
        case("idle", idle)
    bound = L.p99_bound_ns(sync_case.get("figures_ns", {}).get("p99") if sync_case["ok"] else None)

    for rate in FIXED_RATES:
        def fixed(rate=rate):
            count = max(10, int(rate * profile["fixed_seconds"]))
            result = system.run_load(L.LoadSpec(rate=rate, count=count, warmup=_warmup(count)))
            verdict = L.judge_sustained(result, bound)
            return latency_case(result, sustained=verdict.sustained, verdict=verdict.to_dict())
        case(f"fixed.{rate // 1000}k", fixed)

    def sustained():
        def trial(rate: float) -> L.Verdict:
            settle(system)
            count = max(10, int(rate * profile["ladder_seconds"]))
            verdict = L.judge_sustained(system.run_load(L.LoadSpec(rate=rate, count=count, warmup=_warmup(count))),
                                        bound)
            echo(f"    {entry.name} {rate:,.0f}/s: {'sustained' if verdict.sustained else '; '.join(verdict.reasons)}")
            return verdict
        best, trials = L.find_sustained_rate(trial, profile["ladder_start"], profile["ladder_factor"],
                                             profile["ladder_max"], profile["ladder_refine"], profile["ladder_retry"])
        top = best is not None and best >= max(L.ladder_rates(profile["ladder_start"], profile["ladder_factor"],
                                                              profile["ladder_max"]))
        return {"kind": "rate", "figures": {"msgs_per_s": best}, "at_ladder_top": top, "p99_bound_ns": bound,
                "trials": [t.to_dict() for t in trials]}

    case("sustained", sustained)

    if entry.failover:
        def one_failover() -> tuple[dict, object]:
            replicated_started = time.monotonic()
            system.await_replicated(SETTLE_TIMEOUT_S)
            replicated_s = round(time.monotonic() - replicated_started, 2)
            target = system.leader_kill_target()
            spec = L.FailoverSpec(rate=profile["failover_rate"], kill_target=target,
                                  kill_after_s=profile["failover_kill_after_s"],
                                  timeout_s=profile["failover_timeout_s"])
            try:
                result = system.run_failover(spec)
            except Exception as exc:  # the client gave up (a session closed for want of a leader): say where nodes are
                status = system.status_text()
                raise RuntimeError(f"{type(exc).__name__}: {exc}" + (f"; nodes: {status}" if status else "")) from exc
            figures = L.failover_figures(result)
            if figures["failover_ns"] is None:
                status = system.status_text()
                raise RuntimeError(f"no put sent after the kill was acknowledged within {spec.timeout_s:.0f}s "
                                   f"({figures['sent']} sent)" + (f"; nodes: {status}" if status else ""))
            return {**figures, "waited_for_replication_s": replicated_s}, target

        def failover():
            runs = []
            for number in range(profile["failover_runs"]):
                run, killed = one_failover()
                runs.append(run)
                if number + 1 < profile["failover_runs"] and \
                        not system.restart_killed(killed, profile["start_timeout_s"]):
                    break  # a system that cannot bring the node back: one run
            return failover_case(runs, profile["failover_rate"])
        case("failover", failover)
    return cases


def failover_case(runs: list[dict], rate: int) -> dict:
    """The failover case of several runs: the medians of the two figures, what was lost or failed in all of them,
    and each run as measured."""
    def median_of(key):
        values = [run[key] for run in runs if run.get(key) is not None]
        return int(np.median(values)) if values else None

    new_leader = median_of("new_leader_event_ns")
    figures = {"failover_s": median_of("failover_ns") / 1e9}
    if new_leader is not None:
        figures["new_leader_event_s"] = new_leader / 1e9
    return {"kind": "failover", "figures": figures, "runs": runs, "rate": rate, "new_leader_event_ns": new_leader,
            "lost_at_kill": sum(run["lost_at_kill"] for run in runs),
            "failed_after_kill": sum(run["failed_after_kill"] for run in runs)}


# ---------------------------------------------------------------------------------------------------- ratios
def _figure(systems: dict, system: str, case: str, key: str) -> float | None:
    c = ((systems.get(system) or {}).get("cases") or {}).get(case)
    if not c or not c.get("ok"):
        return None
    value = (c.get("figures_ns") or c.get("figures") or {}).get(key)
    return None if value is None else float(value)


def compute_ratios(systems: dict) -> dict:
    """aeron-numba against each peer of the same run and against the best peer (issue 28's targets), and the
    one-process member against the four-process one (``aeron-processes``) when both ran."""
    peers = [name for name, s in systems.items() if s.get("peer")]
    ratios = {}

    def ratio(name, num, den, better, target=None, note=""):
        value = num / den if num is not None and den else None
        met = None
        if value is not None and target is not None:
            met = value <= target if better == "lower" else value >= target
        ratios[name] = {"value": value, "better": better, "target": target, "met": met, "note": note}

    ours_rate = _figure(systems, AERON, "sustained", "msgs_per_s")
    ours_p99 = _figure(systems, AERON, "fixed.1k", "p99")
    ours_p50 = _figure(systems, AERON, "fixed.1k", "p50")
    ours_sync_p50 = _figure(systems, AERON, "sync", "p50")
    ours_sync_p99 = _figure(systems, AERON, "sync", "p99")
    peer_rates = {p: _figure(systems, p, "sustained", "msgs_per_s") for p in peers}
    peer_p50 = {p: _figure(systems, p, "sync", "p50") for p in peers}
    peer_p99 = {p: _figure(systems, p, "sync", "p99") for p in peers}
    best_rate = max((r for r in peer_rates.values() if r is not None), default=None)
    best_p50 = min((r for r in peer_p50.values() if r is not None), default=None)
    best_p99 = min((r for r in peer_p99.values() if r is not None), default=None)
    ratio("sync p50 aeron / lowest peer sync p50", ours_sync_p50, best_p50, "lower", SYNC_P50_TARGET,
          "synchronous put p50 vs the peers'")
    ratio("sync p99 aeron / lowest peer sync p99", ours_sync_p99, best_p99, "lower", SYNC_P99_TARGET,
          "synchronous put p99 vs the peers'")
    ratio("sustained rate aeron / best peer", ours_rate, best_rate, "higher", SUSTAINED_TARGET,
          "highest sustained put rate vs the best peer's")
    ratio("p99 at 1k/s aeron / lowest peer sync p99", ours_p99, best_p99, "lower", 1.0,
          "open-loop p99 at 1 k/s vs the peers' closed-loop (synchronous) put p99")
    for p in peers:
        ratio(f"sustained rate aeron / {p}", ours_rate, peer_rates[p], "higher")
        ratio(f"p99 at 1k/s aeron / {p} sync p99", ours_p99, peer_p99[p], "lower")
        ratio(f"p50 at 1k/s aeron / {p} sync p50", ours_p50, peer_p50[p], "lower")
    # The gain of the one-process member over the four-process one, while both layouts exist.
    if AERON_PROCESSES in systems:
        old = AERON_PROCESSES
        ratio(f"sync p50 {old} / aeron", _figure(systems, old, "sync", "p50"), ours_sync_p50, "higher")
        ratio(f"p99 at 1k/s {old} / aeron", _figure(systems, old, "fixed.1k", "p99"), ours_p99, "higher")
        ratio(f"sustained rate aeron / {old}", ours_rate, _figure(systems, old, "sustained", "msgs_per_s"), "higher")
        ratio(f"cpu per put {old} / aeron", _cpu_per_put(systems, old), _cpu_per_put(systems, AERON), "higher")
    # The compiled service on the member's thread against the Python one in a child process of the member.
    if AERON_COMPILED in systems:
        new = AERON_COMPILED
        ratio(f"sync p50 aeron / {new}", ours_sync_p50, _figure(systems, new, "sync", "p50"), "higher")
        ratio(f"p99 at 1k/s aeron / {new}", ours_p99, _figure(systems, new, "fixed.1k", "p99"), "higher")
        ratio(f"sustained rate {new} / aeron", _figure(systems, new, "sustained", "msgs_per_s"), ours_rate, "higher")
        ratio(f"cpu per put aeron / {new}", _cpu_per_put(systems, AERON), _cpu_per_put(systems, new), "higher")
        ratio(f"idle cpu aeron / {new}", _figure(systems, AERON, "idle", "cores"),
              _figure(systems, new, "idle", "cores"), "higher")
    return ratios


def _cpu_per_put(systems: dict, system: str) -> float | None:
    c = ((systems.get(system) or {}).get("cases") or {}).get("sync")
    return c.get("cpu_per_put_ns") if c and c.get("ok") else None


def compute_targets(systems: dict) -> dict:
    """Issue 28's absolute targets for the one-process member (``aeron``)."""
    def target(value, wanted, unit, note=""):
        return {"value": value, "target": wanted, "unit": unit, "better": "lower",
                "met": None if value is None else value <= wanted, "note": note}

    # The golden run timed the kill to the client's NewLeaderEvent; the first acknowledged put where there is none.
    failover = _figure(systems, AERON, "failover", "new_leader_event_s")
    if failover is None:
        failover = _figure(systems, AERON, "failover", "failover_s")
    return {
        "aeron p50 at 1k/s": target(_figure(systems, AERON, "fixed.1k", "p50"), P50_TARGET_NS, "ns"),
        "aeron cpu per sync put": target(_cpu_per_put(systems, AERON), CPU_PER_PUT_TARGET_NS, "ns",
                                         "user + system CPU of the three members' processes"),
        "aeron idle cpu": target(_figure(systems, AERON, "idle", "cores"), IDLE_CPU_TARGET, "cores",
                                 "the three members with nothing sent"),
        "aeron failover": target(failover, GOLDEN_FAILOVER_S[1], "s",
                                 f"kill to NewLeaderEvent, the median of the runs; Aeron 1.48's golden run: "
                                 f"{GOLDEN_FAILOVER_S[0]}-{GOLDEN_FAILOVER_S[1]} s"),
    }


# ----------------------------------------------------------------------------------------------------- table
def _ns(value) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e3:
        return f"{value / 1e3:.0f} us"
    return f"{value:.0f} ns"


def _rate(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.1f} k/s" if value >= 1e3 else f"{value:.0f}/s"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows])


def format_table(summary: dict) -> str:
    meta, systems = summary["meta"], summary["systems"]
    out = ["", f"== aeron-numba cluster benchmark ({meta['profile']}) {meta['date']} ==",
           f"CPU: {meta['cpu_model']} ({meta['cpu_count']} cores); Python {meta['python']}; 3 nodes per system on "
           f"loopback, {L.VALUE_SIZE}-byte values over {L.KEY_COUNT:,} keys",
           f"load average (1 min) at start {meta['load_avg_start']}, at end {meta['load_avg_end']} (other work on "
           "the machine makes every figure noisier; ratios of one run less so)"]
    for name, s in systems.items():
        if s.get("skipped"):
            out.append(f"{name}: SKIPPED: {s['skipped']}")
        else:
            settings = ", ".join(f"{k}={v}" for k, v in (s.get("describe") or {}).items())
            out.append(f"{name}: {settings}")

    def rows_of(case_name, fn):
        rows = []
        for name, s in systems.items():
            c = (s.get("cases") or {}).get(case_name)
            if c and c.get("ok"):
                rows.append([name, *fn(c)])
        return rows

    def lat(c):
        f = c["figures_ns"]
        return [_ns(f["p50"]), _ns(f["p90"]), _ns(f["p99"]), _ns(f["p99.9"]), _ns(f["max"]), str(c["count"])]

    rows = rows_of("sync", lambda c: [*lat(c), _ns(c.get("cpu_per_put_ns"))])
    if rows:
        out += ["", "Synchronous put (closed loop: each sent when the previous one is acknowledged; CPU: the members' "
                    "per put):", _table(["system", "p50", "p90", "p99", "p99.9", "max", "count", "CPU/put"], rows)]
    rows = rows_of("idle", lambda c: [f"{c['figures']['cores'] * 100:.1f} % of a core"])
    if rows:
        out += ["", "Idle: the members' CPU with nothing sent:", _table(["system", "CPU"], rows)]
    rows = []
    for rate in FIXED_RATES:
        rows += [[r[0], _rate(rate), *r[1:]] for r in rows_of(
            f"fixed.{rate // 1000}k", lambda c: [*lat(c), "yes" if c.get("sustained") else
                                                 f"NO ({L.short_reasons(L.Verdict(**c['verdict']))})"])]
    if rows:
        out += ["", "Open loop at a fixed rate, latency from each put's scheduled send time:",
                _table(["system", "rate", "p50", "p90", "p99", "p99.9", "max", "count", "sustained"], rows)]
    rows = rows_of("sustained", lambda c: [
        _rate(c["figures"]["msgs_per_s"]) + (" (ladder top)" if c.get("at_ladder_top") else ""),
        _ns(c["p99_bound_ns"]),
        ", ".join(f"{t['rate'] / 1e3:g}k {'ok' if t['sustained'] else 'no'}" for t in c["trials"])])
    if rows:
        out += ["", "Highest sustained rate (rate ladder; sustained: all acknowledged, backlog not growing, p99 under "
                    "the bound):", _table(["system", "rate", "p99 bound", "trials"], rows)]
    rows = rows_of("failover", lambda c: [f"{c['figures']['failover_s']:.2f} s",
                                          "-" if c.get("new_leader_event_ns") is None else
                                          f"{c['new_leader_event_ns'] / 1e9:.2f} s", str(len(c.get("runs", [c]))),
                                          str(c["lost_at_kill"]), str(c["failed_after_kill"]), _rate(c["rate"])])
    if rows:
        out += ["", "Failover: leader's processes SIGKILLed to the first acknowledged put sent after the kill, and to "
                    "the client's NewLeaderEvent (Aeron 1.48 golden run, to NewLeaderEvent: "
                    f"{GOLDEN_FAILOVER_S[0]}-{GOLDEN_FAILOVER_S[1]} s):",
                _table(["system", "failover", "NewLeaderEvent", "runs", "lost at kill", "failed after kill", "load"],
                       rows)]
    rows = []
    for name, r in summary["ratios"].items():
        target = "-" if r["target"] is None else (f"<= {r['target']}" if r["better"] == "lower" else
                                                  f">= {r['target']}")
        met = "-" if r["met"] is None else ("met" if r["met"] else "NOT MET")
        rows.append([name, "-" if r["value"] is None else f"{r['value']:.2f}x", f"{r['better']} is better", target,
                     met])
    out += ["", "Ratios (same run; '-': a side was not measured):",
            _table(["ratio", "value", "", "target", ""], rows)]
    rows = []
    for name, t in summary["targets"].items():
        value = _ns(t["value"]) if t["unit"] == "ns" else ("-" if t["value"] is None else
                                                           f"{t['value']:.2f} {t['unit']}")
        wanted = _ns(t["target"]) if t["unit"] == "ns" else f"{t['target']} {t['unit']}"
        met = "-" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        rows.append([name, value, f"<= {wanted}", met])
    out += ["", "Targets (this machine):", _table(["target", "value", "wanted", ""], rows)]
    failed = [(f"{name} {case}", c["error"]) for name, s in systems.items()
              for case, c in (s.get("cases") or {}).items() if not c.get("ok")]
    failed += [(name, s["error"]) for name, s in systems.items() if s.get("error")]
    if failed:
        out += ["", "FAILED:"] + [f"  {what}: {error}" for what, error in failed]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------------- run
def _cpu_model() -> str:
    from benchmarks.runner import _cpu_model as cpu_model

    return cpu_model()


def run(profile: str = "quick", only: list[str] | None = None, out_dir: str | os.PathLike | None = None,
        echo=print) -> dict:
    """Run the cluster benchmark; returns the summary (also written to ``out_dir``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} must be one of {sorted(PROFILES)}")
    names = select_systems(only)
    p = PROFILES[profile]
    out = Path(out_dir) if out_dir else default_out_dir(f"cluster-{profile}")
    out.mkdir(parents=True, exist_ok=True)
    meta = {"profile": profile, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "python": platform.python_version(),
            "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(), "load_avg_start": round(os.getloadavg()[0], 2),
            "settings": p, "value_size": L.VALUE_SIZE, "keys": L.KEY_COUNT,
            "sustained_rule": {"growth_factor": L.GROWTH_FACTOR, "growth_slack_ns": L.GROWTH_SLACK_NS,
                               "p99_factor": L.P99_FACTOR, "p99_floor_ns": L.P99_FLOOR_NS}}
    echo(f"aeron-numba cluster benchmark, profile {profile}: {', '.join(names)}; output in {out}")
    root = Path(tempfile.mkdtemp(prefix="aeron-numba-bench-cluster-"))
    systems: dict[str, dict] = {}
    started = time.monotonic()
    try:
        for name in names:
            entry = SYSTEMS[name]
            system = entry.make()
            record = systems[name] = {"peer": entry.peer, "label": system.label}
            reason = system.unavailable()
            if reason:
                record["skipped"] = reason
                echo(f"{name}: skipped: {reason}")
                continue
            record["describe"] = system.describe()
            echo(f"{name}: starting 3 nodes")
            try:
                system.start(root / name, p["start_timeout_s"])
                record["cases"] = measure_system(system, entry, p, root / name, echo)
            except Exception as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
                record["traceback"] = traceback.format_exc()
                echo(f"{name}: FAILED: {record['error']}")
            finally:
                system.stop()
                logs = root / name / "logs"
                if logs.exists():
                    shutil.copytree(logs, out / "logs" / name, dirs_exist_ok=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    meta["load_avg_end"] = round(os.getloadavg()[0], 2)
    meta["seconds"] = round(time.monotonic() - started, 1)
    histograms = {f"cluster.{name}.{case}": c.pop("hdr") for name, s in systems.items()
                  for case, c in (s.get("cases") or {}).items() if c.get("hdr")}
    summary = {"meta": meta, "systems": systems, "ratios": compute_ratios(systems),
               "targets": compute_targets(systems)}
    with open(out / SUMMARY_FILE, "w") as f:
        json.dump(summary, f, indent=1, default=_json_default)
    with open(out / HISTOGRAMS_FILE, "w") as f:
        json.dump({"format": "HdrHistogram V2 compressed, base64", "unit": "ns", "lowest_ns": stats.HDR_LOWEST_NS,
                   "highest_ns": stats.HDR_HIGHEST_NS, "significant_digits": stats.HDR_DIGITS,
                   "histograms": histograms}, f, indent=1)
    echo(format_table(summary))
    echo(f"summary: {out / SUMMARY_FILE}; histograms: {out / HISTOGRAMS_FILE}; logs: {out / 'logs'}")
    return summary


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def ok(summary: dict) -> bool:
    """Every system that ran measured every case (skipped systems do not count against a run)."""
    return all(not s.get("error") and all(c.get("ok") for c in (s.get("cases") or {}).values())
               for s in summary["systems"].values() if not s.get("skipped"))


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks cluster") -> int:
    import argparse

    from aeron_numba.cli import fail, user_error_line

    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="shorter runs (a few minutes a system)")
    size.add_argument("--tiny", action="store_true", help="smoke-test counts: checks that everything works")
    parser.add_argument("--only", nargs="+", metavar="SYSTEM", help=f"only these systems ({', '.join(SYSTEMS)})")
    parser.add_argument("--out", help="output directory (default /tmp/aeron-numba-bench/cluster-<profile>-<time>)")
    args = parser.parse_args(argv)
    profile = "tiny" if args.tiny else ("quick" if args.quick else "full")
    try:
        select_systems(args.only)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
    except ValueError as exc:
        return fail(prog, str(exc), 2)
    except OSError as exc:
        return fail(prog, user_error_line(exc, "--out directory"), 2)
    summary = run(profile, args.only, args.out)
    return 0 if ok(summary) else 1


if __name__ == "__main__":
    sys.exit(main())
