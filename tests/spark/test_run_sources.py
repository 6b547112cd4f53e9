"""``aeron-chaos`` and ``aeron-bench`` read folders made in the test by the real tools (``python -m chaos run``
and ``python -m benchmarks run``, their smallest settings), and their DataFrames equal a plain ``json`` parse
of the same files. Running the tools (not checked-in copies) makes these tests fail when a tool's output
format drifts from what the sources read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.errors import PySparkException  # what Spark raises with the Python error's text in its message

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
TYPED_FIELDS = ("incarnation", "session", "pub", "seq", "position", "length")


def _run_tool(*argv: str, ok_codes=(0,)) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode in ok_codes, f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def chaos_runs(tmp_path_factory) -> Path:
    """Two run folders of a quick chaos scenario (two iterations: two partitions)."""
    out = tmp_path_factory.mktemp("chaos-runs")
    # Exit code 1 is a failed verdict (possible on a loaded machine): its run folder is as readable as a pass.
    _run_tool("chaos", "run", "huge-messages", "--quick", "--seed", "7", "--iterations", "2", "--out", str(out),
              ok_codes=(0, 1))
    return out


@pytest.fixture(scope="module")
def bench_runs(tmp_path_factory) -> Path:
    """One benchmark run folder (tiny profile, a latency and a throughput case) under a folder of runs."""
    out = tmp_path_factory.mktemp("bench-runs")
    _run_tool("benchmarks", "run", "--tiny", "--only", "rtt.floor-python", "tp.memcpy", "--out", str(out / "run1"))
    return out


def _run_dirs(root: Path, marker: str) -> list[Path]:
    return sorted(p.parent for p in root.rglob(marker))


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------------------------------------------- aeron-chaos
def test_chaos_events_equal_the_timeline_lines(spark, chaos_runs):
    df = spark.read.format("aeron-chaos").load(str(chaos_runs))
    run_dirs = _run_dirs(chaos_runs, "timeline.jsonl")
    assert len(run_dirs) == 2
    assert df.rdd.getNumPartitions() == 2  # one per run folder

    expected = []
    for run_dir in run_dirs:
        result = json.loads((run_dir / "result.json").read_text())
        for number, line in enumerate((run_dir / "timeline.jsonl").read_text().splitlines(), 1):
            event = json.loads(line)
            rest = {k: v for k, v in event.items() if k not in ("ts_ns", "source", "event")}
            expected.append((run_dir.name, result["scenario"], result["seed"], result["iteration"], number,
                             event["ts_ns"], event["source"], event["event"],
                             *(_int(event.get(name)) for name in TYPED_FIELDS), rest))
    got = [(*row[:-1], json.loads(row[-1])) for row in df.collect()]
    key = lambda r: (r[0], r[4])  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    # The delivery checks' columns are really filled: every sent message has its position and seq.
    sent = df.filter("event = 'sent'")
    assert sent.count() > 0 and sent.filter("position is null or seq is null or pub is null").count() == 0


def test_chaos_results_are_one_row_per_run(spark, chaos_runs):
    df = spark.read.format("aeron-chaos").option("rows", "results").load(str(chaos_runs))
    expected = []
    for run_dir in _run_dirs(chaos_runs, "result.json"):
        r = json.loads((run_dir / "result.json").read_text())
        expected.append((run_dir.name, r["scenario"], r["seed"], r["iteration"], r["passed"], r["failures"],
                         [float(s) for s in r["recovery_s"]], r["messages_checked"], r["duration_s"], r["metrics"],
                         str(run_dir)))
    got = [(*row[:9], json.loads(row.metrics), row.path) for row in df.collect()]
    assert sorted(got) == sorted(expected)
    assert len(got) == 2


def test_chaos_bad_input_names_the_folder_file_and_line(spark, chaos_runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PySparkException) as info:
        spark.read.format("aeron-chaos").load(str(empty)).collect()
    assert f"{empty}: no chaos run folders found" in str(info.value)

    broken = tmp_path / "broken"
    shutil.copytree(_run_dirs(chaos_runs, "timeline.jsonl")[0], broken / "run")
    timeline = broken / "run" / "timeline.jsonl"
    lines = timeline.read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]  # a cut line: not JSON
    timeline.write_text("\n".join(lines) + "\n")
    with pytest.raises(PySparkException) as info:
        spark.read.format("aeron-chaos").load(str(broken)).collect()
    assert f"{timeline}:3: not a JSON line" in str(info.value)

    with pytest.raises(PySparkException) as info:
        spark.read.format("aeron-chaos").option("rows", "verdicts").load(str(chaos_runs)).collect()
    assert "rows='verdicts' is not one of events, results" in str(info.value)


# ------------------------------------------------------------------------------------------- aeron-bench
def _pyperf_samples(path: Path) -> dict:
    suite = json.loads(path.read_text())
    samples = {}
    for bench in suite["benchmarks"]:
        runs = bench["runs"]
        samples[bench["metadata"]["name"]] = [v for run in runs for v in run.get("values", [])]
    return samples


def test_bench_cases_equal_the_summary_and_pyperf_samples(spark, bench_runs):
    df = spark.read.format("aeron-bench").load(str(bench_runs))
    (run_dir,) = _run_dirs(bench_runs, "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())
    samples = _pyperf_samples(run_dir / "results.pyperf.json")
    histograms = json.loads((run_dir / "histograms.json").read_text())["histograms"]
    meta = summary["meta"]
    rows = {row.case_name: row for row in df.collect()}
    assert set(rows) == set(summary["cases"]) and len(rows) >= 3
    for name, case in summary["cases"].items():
        row = rows[name]
        assert (row.run_id, row.date, row.profile, row.cpu_model, row.cpu_count, row.tsc_ghz) == (
            run_dir.name, meta["date"], "tiny", meta["cpu_model"], meta["cpu_count"], meta["tsc_ghz"])
        assert json.loads(row.meta) == meta
        assert (row.commit, row.commit_dirty) == (meta["commit"], meta["commit_dirty"]) and len(row.commit) == 40
        assert row.hdr_histogram == histograms.get(name)
        assert row.floor_python_p50_ns == summary["placement"]["floor_python_p50_ns"]
        assert (row.family, row.impl, row.size, row.ok, row.measured_count) == (
            case["family"], case["impl"], case["size"], case["ok"], case["count"])
        latency, rates = case.get("figures_ns", {}), case.get("figures", {})
        assert (row.p50_ns, row.p99_ns, row.p999_ns, row.max_ns) == tuple(
            latency.get(k) for k in ("p50", "p99", "p99.9", "max"))
        assert (row.msgs_per_s, row.mb_per_s) == (rates.get("msgs_per_s"), rates.get("mb_per_s"))
        assert row.figures == {**{f"{k}_ns": float(v) for k, v in latency.items()}, **rates}
        assert row.samples == samples[name] and len(row.samples) > 0
        assert row.samples_unit == "second"
    assert rows["tp.memcpy.1MiB"].family == "tp" and rows["tp.memcpy.1MiB"].p50_ns is None
    assert rows["tp.memcpy.1MiB"].hdr_histogram is None and rows["rtt.floor-python.32B"].hdr_histogram


def test_bench_ratios_and_targets_rows(spark, bench_runs):
    (run_dir,) = _run_dirs(bench_runs, "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())
    ratios = spark.read.format("aeron-bench").option("rows", "ratios").load(str(bench_runs)).collect()
    assert {r.ratio: (r.value, r.better, r.target, r.met, r.gate, [r.numerator_case, r.numerator_figure],
                      [r.denominator_case, r.denominator_figure], r.note) for r in ratios} == {
        name: (r["value"], r["better"], r["target"], r["met"], r["gate"], r["numerator"], r["denominator"], r["note"])
        for name, r in summary["ratios"].items()}
    targets = spark.read.format("aeron-bench").option("rows", "targets").load(str(bench_runs)).collect()
    assert {t.target_name: (t.value, t.target, t.unit, t.met) for t in targets} == {
        name: (t["value"], t["target"], t["unit"], t["met"]) for name, t in summary["targets"].items()}


def test_bench_bad_input_names_the_file(spark, bench_runs, tmp_path):
    with pytest.raises(PySparkException) as info:
        spark.read.format("aeron-bench").load(str(tmp_path)).collect()
    assert f"{tmp_path}: no benchmark run folders found" in str(info.value)

    broken = tmp_path / "broken"
    shutil.copytree(_run_dirs(bench_runs, "summary.json")[0], broken)
    summary = broken / "summary.json"
    summary.write_text(summary.read_text()[:100])  # a run cut short while writing
    with pytest.raises(PySparkException) as info:
        spark.read.format("aeron-bench").load(str(broken)).collect()
    assert f"{summary}: not valid JSON" in str(info.value)
