"""Smoke test of the benchmarks: every benchmark runs with tiny counts and its results are well-formed.

One run of the ``tiny`` profile (driver, two pinned workers, every case), then checks that messages really
went through (counts on both sides, no wrong sequence number) and that the outputs (summary, pyperf JSON,
plots, table, gate) are complete. No timing assertion. It is one test, not a module fixture shared by
several, so that pytest-xdist cannot run the benchmarks twice at once on two workers.
"""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.requires_jit

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_every_benchmark_runs_with_tiny_counts(tmp_path):
    from benchmarks.runner import run_suite

    out_dir = tmp_path / "bench"
    lines: list[str] = []
    summary = run_suite("tiny", out_dir, echo=lines.append, history_dir=tmp_path / "history")
    tiny_run = (summary, out_dir, "\n".join(lines))
    check_every_planned_benchmark_ran_and_succeeded(tiny_run)
    check_messages_really_went_through(tiny_run)
    check_latency_results_are_well_formed(tiny_run)
    check_throughput_results_are_well_formed(tiny_run)
    check_pyperf_json_holds_every_benchmark(tiny_run)
    check_percentile_plots_are_pngs(tiny_run)
    check_summary_table_ratios_and_metadata(tiny_run)
    check_gate_passes_against_its_own_baseline_and_fails_a_worse_run(tiny_run, tmp_path)
    check_histograms_and_history_hold_every_case(tiny_run, tmp_path / "history")


def check_every_planned_benchmark_ran_and_succeeded(tiny_run):
    from benchmarks.plan import build_plan

    summary, _, output = tiny_run
    planned = [case["name"] for case in build_plan("tiny")]
    assert list(summary["cases"]) == planned
    failed = {name: case.get("error") for name, case in summary["cases"].items() if not case["ok"]}
    assert failed == {}, output
    families = {case["family"] for case in summary["cases"].values()}
    assert families == {"rtt", "fixed", "tp"}
    udp = [name for name in planned if "udp" in name]  # through a UDP driver of their own, and the raw floor
    assert {"rtt.aeron-compiled-udp.32B", "rtt.floor-udp.32B", "rtt.relay-floor-udp.32B",
            "tp.aeron-compiled-udp.exclusive.32B"} <= set(udp)


def check_messages_really_went_through(tiny_run):
    summary, _, _ = tiny_run
    for name, case in summary["cases"].items():
        assert case["errors"] == 0, name
        assert case["received"] == case["expected"] > 0, name
        partner = case.get("partner", {})
        if case["family"] in ("rtt", "fixed") and "echoed" in partner:
            assert partner["echoed"] == case["expected"], name
        if case["impl"] == "tp-floor-udp":  # raw datagrams until the receiver says stop; the kernel may drop some
            assert partner["sent"] >= case["received"] + case["dropped"], name
        elif case["family"] == "tp" and case["impl"] != "tp-memcpy":
            assert partner["sent"] == case["received"], name


def check_latency_results_are_well_formed(tiny_run):
    from benchmarks.plan import build_plan

    summary, _, _ = tiny_run
    plan = {case["name"]: case for case in build_plan("tiny")}
    for name, case in summary["cases"].items():
        if case["family"] not in ("rtt", "fixed"):
            continue
        f = case["figures_ns"]
        assert 0 < f["min"] <= f["p50"] <= f["p90"] <= f["p99"] <= f["p99.9"], (name, f)
        assert f["p99.9"] <= f["max"] * 1.001 + 1, (name, f)  # HdrHistogram values carry 3 significant digits
        assert f["min"] <= f["mean"] <= f["max"], (name, f)
        if case["family"] == "rtt":
            assert case["count"] == plan[name]["runs"] * plan[name]["n"], name
        else:
            assert case["sustained"] in (True, False) and case["behind_ns"] >= 0, name


def check_throughput_results_are_well_formed(tiny_run):
    summary, _, _ = tiny_run
    for name, case in summary["cases"].items():
        if case["family"] != "tp":
            continue
        f = case["figures"]
        assert f["worst_msgs_per_s"] <= f["msgs_per_s"] <= f["best_msgs_per_s"], (name, f)
        assert f["mb_per_s"] == pytest.approx(f["msgs_per_s"] * case["size"] / 1e6), name
        assert case["count"] > 0, name


def check_pyperf_json_holds_every_benchmark(tiny_run):
    import pyperf

    summary, out_dir, _ = tiny_run
    suite = pyperf.BenchmarkSuite.load(str(out_dir / "results.pyperf.json"))
    assert sorted(suite.get_benchmark_names()) == sorted(summary["cases"])
    for benchmark in suite.get_benchmarks():
        assert benchmark.get_unit() == "second"
        values = benchmark.get_values()
        assert values and all(v > 0 for v in values), benchmark.get_name()
        assert benchmark.get_metadata()["aeron_bench_profile"] == "tiny"


def check_percentile_plots_are_pngs(tiny_run):
    _, out_dir, _ = tiny_run
    for name in ("rtt_percentiles.png", "fixed_rate_percentiles.png"):
        data = (out_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, name


def check_summary_table_ratios_and_metadata(tiny_run):
    summary, out_dir, output = tiny_run
    assert json.loads((out_dir / "summary.json").read_text())["ratios"] == summary["ratios"]
    for name, ratio in summary["ratios"].items():
        assert ratio["value"] is not None and math.isfinite(ratio["value"]) and ratio["value"] > 0, name
    for target in summary["targets"].values():
        assert target["value"] is not None and target["met"] in (True, False)
    meta = summary["meta"]
    for key in ("cpu_model", "python", "numba", "pinning", "idle_strategies", "tsc_ghz"):
        assert meta[key], key
    for heading in ("Round trip, 32-byte", "Fixed-rate round trip", "Throughput, one producer", "Ratios (same run)"):
        assert heading in output
    for case in summary["cases"].values():
        assert case["label"] in output


def check_gate_passes_against_its_own_baseline_and_fails_a_worse_run(tiny_run, tmp_path):
    import copy

    from benchmarks import gate

    summary, _, _ = tiny_run
    baseline_path = tmp_path / "baseline.json"
    gate.update_baseline(baseline_path, summary)
    baseline = gate.load_baseline(baseline_path)
    assert gate.compare(summary, baseline)["passed"]

    worse = copy.deepcopy(summary)
    name = "rtt p50 aeron-compiled / floor-compiled"
    worse["ratios"][name]["value"] *= 3
    outcome = gate.compare(worse, baseline)
    assert not outcome["passed"]
    text = gate.format_outcome(outcome)
    assert f"FAIL: {name} went from" in text and "3.00x worse" in text


def check_histograms_and_history_hold_every_case(tiny_run, history_dir):
    import pyarrow.parquet as pq

    from benchmarks import stats

    summary, out_dir, output = tiny_run
    histograms = json.loads((out_dir / "histograms.json").read_text())["histograms"]
    latency = {name for name, case in summary["cases"].items() if case.get("kind") == "latency"}
    assert set(histograms) == latency
    for name in latency:  # the file's histogram is the one the percentiles came from
        decoded = stats.decode(histograms[name])
        assert decoded.get_total_count() == summary["cases"][name]["count"], name
        assert decoded.get_value_at_percentile(50.0) == summary["cases"][name]["figures_ns"]["p50"], name
    (run_file,) = history_dir.iterdir()
    assert f"history: appended {run_file}" in output
    rows = pq.read_table(run_file).to_pylist()
    assert sorted(r["name"] for r in rows if r["kind"] == "case") == sorted(summary["cases"])
    assert sorted(r["name"] for r in rows if r["kind"] == "ratio") == sorted(summary["ratios"])
    assert all(r["ok"] and r["value"] > 0 for r in rows)  # every case ran, so every ratio has a value
