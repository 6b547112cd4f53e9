"""Appending a run to the benchmark history: the run's rows in the table ``aeron_numba.spark.history_table``
defines (one Parquet file per run), read back by ``python -m benchmarks history``.

A case row's headline ``value`` is what its series is judged by: the p50 for latency (ns, lower is better)
and messages per second for throughput (higher is better). A ratio row's is the ratio (``RATIOS`` says which
way is better and whether it depends on the workers' placement).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

from aeron_numba.spark import history_table

from benchmarks import report

REPO = Path(__file__).resolve().parents[1]
_LATENCY = {"p50": "p50_ns", "p90": "p90_ns", "p99": "p99_ns", "p99.9": "p999_ns", "max": "max_ns",
            "mean": "mean_ns"}


def git_commit(repo: str | os.PathLike = REPO) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout the benchmarks run from; ``(None, None)`` outside a git checkout (an
    installed package, no git). Dirty means tracked files differ from the commit: the run measured code that
    the commit does not hold."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head.stdout.strip(), (bool(status.stdout.strip()) if status.returncode == 0 else None)


def _machine(meta: dict) -> str:
    return f"{meta.get('cpu_model')}, {meta.get('cpu_count')} cpus"


def run_rows(summary: dict, merged: list[dict], run_id: str, started_utc: dt.datetime, run_dir: str) -> list[dict]:
    """The history rows of one run: one per case, one per ratio."""
    meta, placement = summary["meta"], summary.get("placement") or {}
    run = {
        "run_id": run_id, "run_time": started_utc, "commit": meta.get("commit"),
        "commit_dirty": meta.get("commit_dirty"),
        "machine": _machine(meta), "cpu_model": meta.get("cpu_model"), "cpu_count": meta.get("cpu_count"),
        "python_version": meta.get("python"), "numba_version": meta.get("numba"), "profile": meta.get("profile"),
        "pinning": meta.get("pinning"), "floor_compiled_p50_ns": placement.get("floor_compiled_p50_ns"),
        "floor_python_p50_ns": placement.get("floor_python_p50_ns"), "load_avg_start": meta.get("load_avg_start"),
        "run_dir": str(run_dir),
    }
    results = {r["case"]["name"]: r for r in merged}
    rows = []
    for name, case in summary["cases"].items():
        result = results.get(name, {})
        latency, rates = case.get("figures_ns") or {}, case.get("figures") or {}
        is_latency = case.get("kind") == "latency" or (not rates and case.get("family") in ("rtt", "fixed"))
        metric, unit, better = ("p50", "ns", "lower") if is_latency else ("msgs_per_s", "msgs/s", "higher")
        value = latency.get("p50") if is_latency else rates.get("msgs_per_s")
        samples = [float(v) for run_ in result.get("runs") or [] for v in run_.get("values", [])]
        loops = [run_.get("loops") for run_ in result.get("runs") or []]
        rows.append({
            **run, "kind": "case", "name": name, "metric": metric, "unit": unit, "better": better,
            "placement_sensitive": True, "value": None if value is None else float(value),
            "ok": bool(case.get("ok")) and value is not None, "error": case.get("error"),
            **{column: None if latency.get(key) is None else float(latency[key]) for key, column in _LATENCY.items()},
            **{key: None if rates.get(key) is None else float(rates[key]) for key in ("msgs_per_s", "mb_per_s")},
            "samples": samples or None, "samples_unit": "second" if samples else None,
            "loops": loops[0] if loops else None, "hdr_histogram": result.get("hdr"),
        })
    specs = {spec.name: spec for spec in report.RATIOS}
    for name, ratio in summary["ratios"].items():
        spec = specs.get(name)
        value = ratio.get("value")
        rows.append({
            **run, "kind": "ratio", "name": name, "metric": "ratio", "unit": "x", "better": ratio.get("better"),
            "placement_sensitive": spec.placement_sensitive if spec else True,
            "value": None if value is None else float(value), "ok": value is not None,
            "error": None if value is not None else "not measured (a case behind it failed or was not run)",
            "target": ratio.get("target"), "gate": ratio.get("gate"),
            "numerator": ":".join(ratio.get("numerator") or []),
            "denominator": ":".join(ratio.get("denominator") or []),
        })
    return rows


def append(history_dir: str | os.PathLike, summary: dict, merged: list[dict], run_dir: str | os.PathLike) -> Path:
    """Append this run to the history under ``history_dir``; returns the file written."""
    meta = summary["meta"]
    started = dt.datetime.fromisoformat(meta["started_utc"])
    rows = run_rows(summary, merged, meta["run_id"], started, str(run_dir))
    return history_table.append_run(history_dir, meta["run_id"], rows)
