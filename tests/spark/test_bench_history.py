"""The benchmark history end to end: a real ``python -m benchmarks run --tiny`` appends its run, then the
``bench-history`` job judges histories built from that run's rows.

How the histories are built: the recorded run's rows (real cases and ratios, real samples and histograms) are
copied into 14 synthetic runs, each with its own run id, time (an hour apart) and commit, and every figure of
a series multiplied by that run's factor: seeded noise of 2 % (what a ratio shows from run to run here), times
1.15 from run 8 on for the series given a slowdown. The tiny run measures no Aeron case (they need the client
and a driver: too slow and too flaky under a loaded 2-core CI), so no ratio has a value in it; the ratio
``rtt p50 aeron-python / floor-python`` is given 1.5 in every synthetic run so that ratios have series to
judge and draw.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from aeron_numba.spark import history_table
from aeron_numba.spark.jobs import bench_history

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LATENCY_CASE = "rtt.floor-python.32B"
THROUGHPUT_CASE = "tp.memcpy.1MiB"
RATIO = "rtt p50 aeron-python / floor-python"
RUNS, STEP_AT, NOISE = 14, 8, 0.02
_LATENCY_FIGURES = ("value", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """One real tiny run (a latency and a throughput case) appended to a history folder of its own."""
    root = tmp_path_factory.mktemp("bench-history")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--tiny", "--only", "rtt.floor-python",
                           "tp.memcpy", "--out", str(root / "run"), "--history", str(root / "history")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (run_file,) = sorted((root / "history").iterdir())
    return {"root": root, "run_dir": root / "run", "file": run_file}


def test_a_run_appends_one_parquet_file_with_its_cases_ratios_commit_and_histograms(recorded):
    run_dir, run_file = recorded["run_dir"], recorded["file"]
    summary = json.loads((run_dir / "summary.json").read_text())
    meta = summary["meta"]
    assert run_file.name == f"run-{meta['run_id']}.parquet"
    table = pq.read_table(run_file)
    assert table.schema == history_table.arrow_schema()
    rows = table.to_pylist()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert {(r["run_id"], r["commit"], r["profile"]) for r in rows} == {(meta["run_id"], head, "tiny")}
    assert meta["commit"] == head and isinstance(meta["commit_dirty"], bool)
    cases = {r["name"]: r for r in rows if r["kind"] == "case"}
    ratios = {r["name"]: r for r in rows if r["kind"] == "ratio"}
    assert set(cases) == set(summary["cases"]) and set(ratios) == set(summary["ratios"])

    latency, figures = cases[LATENCY_CASE], summary["cases"][LATENCY_CASE]["figures_ns"]
    assert (latency["metric"], latency["unit"], latency["better"], latency["value"]) == ("p50", "ns", "lower",
                                                                                         figures["p50"])
    assert latency["p99_ns"] == figures["p99"] and latency["ok"]
    histograms = json.loads((run_dir / "histograms.json").read_text())["histograms"]
    assert latency["hdr_histogram"] == histograms[LATENCY_CASE] and latency["hdr_histogram"].startswith("HISTF")
    pyperf = json.loads((run_dir / "results.pyperf.json").read_text())
    samples = {b["metadata"]["name"]: [v for run in b["runs"] for v in run.get("values", [])]
               for b in pyperf["benchmarks"]}
    assert latency["samples"] == samples[LATENCY_CASE] and latency["samples_unit"] == "second"

    throughput = cases[THROUGHPUT_CASE]
    assert (throughput["metric"], throughput["better"], throughput["value"]) == (
        "msgs_per_s", "higher", summary["cases"][THROUGHPUT_CASE]["figures"]["msgs_per_s"])
    assert throughput["hdr_histogram"] is None
    ratio = ratios[RATIO]  # its numerator, aeron-python, was not run
    assert ratio["value"] is None and not ratio["ok"] and ratio["better"] == "lower" and ratio["target"] == 2.0


def _synthesise(recorded_file: Path, folder: Path, slowed: dict[str, float], seed: int = 7,
                noisy_run: tuple[str, int] | None = None) -> list[str]:
    """A history of ``RUNS`` runs made from the recorded run (see the module's doc); ``slowed`` maps a series to
    its step factor from run ``STEP_AT`` on, ``noisy_run`` makes one run of one series 40 % worse. Returns
    the runs' commits in order."""
    rows = pq.read_table(recorded_file).to_pylist()
    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    commits = []
    for i in range(RUNS):
        commit = hashlib.sha1(f"synthetic commit {i}".encode()).hexdigest()
        commits.append(commit)
        run_id = f"{i:02d}-synthetic"
        out = []
        for row in rows:
            row = {**row, "run_id": run_id, "run_time": start + dt.timedelta(hours=i), "commit": commit,
                   "commit_dirty": False}
            if row["name"] == RATIO:
                row.update(value=1.5, ok=True, error=None)
            if row["value"] is None:
                out.append(row)
                continue
            # A factor on time: latency figures and samples grow with it, a rate shrinks.
            factor = 1 + NOISE * rng.standard_normal()
            if i >= STEP_AT:
                factor *= slowed.get(row["name"], 1.0)
            if noisy_run == (row["name"], i):
                factor *= 1.4
            if row["kind"] == "ratio" or row["unit"] == "ns":
                row.update({k: row[k] * factor for k in _LATENCY_FIGURES if row[k] is not None})
            else:
                row.update(value=row["value"] / factor, msgs_per_s=row["msgs_per_s"] / factor,
                           mb_per_s=row["mb_per_s"] / factor)
            if row["samples"]:
                row["samples"] = [v * factor for v in row["samples"]]
            out.append(row)
        history_table.append_run(folder, run_id, out)
    return commits


def _job(history: Path, out: Path, capsys) -> tuple[int, str]:
    code = bench_history.main(["--history", str(history), "--out", str(out), "--master", "local[2]"])
    return code, capsys.readouterr().out


def _verdicts(spark, out: Path) -> dict:
    return {(r.kind, r.name): r for r in spark.read.parquet(str(out / "verdicts.parquet")).collect()}


def test_noise_one_noisy_run_and_a_5_percent_step_stay_clean(spark, recorded, tmp_path, capsys):
    _synthesise(recorded["file"], tmp_path / "history", slowed={THROUGHPUT_CASE: 1.05},
                noisy_run=(LATENCY_CASE, 6))
    code, output = _job(tmp_path / "history", tmp_path / "out", capsys)
    assert code == 0, output
    assert "\nno regression\n" in output
    verdicts = _verdicts(spark, tmp_path / "out")
    assert {key: v.status for key, v in verdicts.items()} == {
        ("case", LATENCY_CASE): "ok", ("case", "rtt.floor-python-entry.32B"): "ok",
        ("case", THROUGHPUT_CASE): "ok", ("ratio", RATIO): "ok"}
    assert all(v.runs == RUNS and not v.regression for v in verdicts.values())
    # The plots: one valid PNG per ratio with values.
    plots = sorted((tmp_path / "out" / "plots").iterdir())
    assert [p.name for p in plots] == [bench_history.plot_file_name(RATIO)]
    assert plots[0].read_bytes().startswith(PNG_MAGIC) and plots[0].stat().st_size > 10_000


def test_a_15_percent_slowdown_is_flagged_at_its_commit(spark, recorded, tmp_path, capsys):
    commits = _synthesise(recorded["file"], tmp_path / "history", slowed={LATENCY_CASE: 1.15, RATIO: 1.15})
    code, output = _job(tmp_path / "history", tmp_path / "out", capsys)
    assert code == 1, output
    verdicts = _verdicts(spark, tmp_path / "out")
    for key in (("case", LATENCY_CASE), ("ratio", RATIO)):
        v = verdicts[key]
        assert v.regression and v.status == "regression", v
        assert v.step_commit == commits[STEP_AT] and v.step_run_id == f"{STEP_AT:02d}-synthetic"
        assert 10 < v.worse_pct < 20 and v.p_value < 0.001 and v.after > v.before
    assert not verdicts[("case", THROUGHPUT_CASE)].regression
    lines = [line for line in output.splitlines() if line.startswith("REGRESSION ") and " series" not in line]
    assert len(lines) == 2 and all(commits[STEP_AT][:10] in line for line in lines), output
    assert any(LATENCY_CASE in line for line in lines) and any(RATIO in line for line in lines)
    assert "\nREGRESSION in 2 series\n" in output
    (plot,) = (tmp_path / "out" / "plots").iterdir()
    assert plot.read_bytes().startswith(PNG_MAGIC)

