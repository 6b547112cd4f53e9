"""Outputs of a run: the summary (figures, ratios, targets), pyperf JSON, percentile plots and the table.

Ratios are what the run is judged by: each compares two figures measured in the same run (ours against
the floor or a peer), so they hold on a noisy machine where absolute figures do not. ``RATIOS`` says which
way is better, the target from the issue where there is one, and how much worse the gate lets it get.

``spark.read.format("aeron-bench")`` reads a run folder's summary.json, histograms.json and pyperf JSON directly
(schema in ``aeron_numba/spark/bench_source.py``), and ``benchmarks/history.py`` turns a run into the history's
rows: keep their keys stable, or change both.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from benchmarks import stats
from benchmarks.plan import MESSAGE_SIZES, RTT_SIZE

PYPERF_FILE = "results.pyperf.json"
SUMMARY_FILE = "summary.json"
#: Each latency case's whole distribution: ``{"format": ..., "unit": "ns", "histograms": {case: encoded}}``, the
#: encoding HdrHistogram's own (V2, compressed, base64), which every HdrHistogram library decodes.
HISTOGRAMS_FILE = "histograms.json"
RTT_PLOT = "rtt_percentiles.png"
FIXED_RATE_PLOT = "fixed_rate_percentiles.png"


@dataclass(frozen=True)
class Ratio:
    """``numerator / denominator`` of two figures (``(case name or prefix, figure)``)."""

    name: str
    numerator: tuple[str, str]
    denominator: tuple[str, str]
    better: str  # "lower" or "higher"
    target: float | None = None
    gate: float | None = None  # the gate fails when the ratio gets worse than baseline by more than this factor
    note: str = ""
    #: Depends on where the hypervisor put the two vCPUs (the floor moves 80 ns <-> 400 ns with it): judged
    #: by the gate only against a baseline taken with a similar floor.
    placement_sensitive: bool = True


def _rtt(impl: str) -> str:
    return f"rtt.{impl}.{RTT_SIZE}B"


def _ratios() -> tuple[Ratio, ...]:
    ratios = [
        Ratio("rtt p50 aeron-compiled / floor-compiled", (_rtt("aeron-compiled"), "p50"), (_rtt("floor-compiled"), "p50"),
              "lower", target=1.3, gate=2.0, note="compiled round trip vs one cache line ping-pong"),
        Ratio("rtt p50 aeron-python / floor-python", (_rtt("aeron-python"), "p50"), (_rtt("floor-python"), "p50"),
              "lower", target=2.0, gate=2.0, note="Python API round trip vs Python store+load per message"),
        Ratio("rtt p50 aeron-python / floor-python-entry", (_rtt("aeron-python"), "p50"),
              (_rtt("floor-python-entry"), "p50"), "lower",
              note="the same against the Python floor with the client's calling convention (entry points)"),
        Ratio("rtt p50 aeron-python-bytes / aeron-python", (_rtt("aeron-python-bytes"), "p50"),
              (_rtt("aeron-python"), "p50"), "lower", target=1.15, placement_sensitive=False,
              note="Python API round trip with bytes messages (echoed as bytes) vs with arrays"),
        Ratio("rtt p99 aeron-compiled / floor-compiled", (_rtt("aeron-compiled"), "p99"), (_rtt("floor-compiled"), "p99"),
              "lower"),
        Ratio("rtt p99 aeron-python / floor-python", (_rtt("aeron-python"), "p99"), (_rtt("floor-python"), "p99"), "lower"),
    ]
    for peer in ("zmq", "pipe", "iceoryx2"):
        ratios.append(Ratio(f"rtt p50 aeron-python / {peer}", (_rtt("aeron-python"), "p50"), (_rtt(peer), "p50"), "lower",
                            gate=3.0 if peer == "iceoryx2" else None, placement_sensitive=False))
    for peer in ("zmq", "pipe", "iceoryx2"):
        ratios.append(Ratio(f"rtt p50 aeron-compiled / {peer}", (_rtt("aeron-compiled"), "p50"), (_rtt(peer), "p50"),
                            "lower"))
    for kind in ("exclusive", "concurrent"):
        for size in (32, 1344):
            ratios.append(Ratio(
                f"tp MB/s aeron-compiled {kind} {size}B / memcpy", (f"tp.aeron-compiled.{kind}.{size}B", "mb_per_s"),
                ("tp.memcpy.", "mb_per_s"), "higher", gate=2.5 if kind == "exclusive" else None,
                note="payload bandwidth vs copying a term-sized block"))
    for size in MESSAGE_SIZES:
        for kind in ("exclusive", "concurrent"):
            ratios.append(Ratio(
                f"tp msgs/s aeron-python {kind} {size}B / zmq", (f"tp.aeron-python.{kind}.{size}B", "msgs_per_s"),
                (f"tp.zmq.{size}B", "msgs_per_s"), "higher", target=2.0 if size == 32 else None,
                gate=3.0 if size == 32 and kind == "exclusive" else None, placement_sensitive=False))
    for peer in ("pipe", "iceoryx2"):
        ratios.append(Ratio(
            f"tp msgs/s aeron-python exclusive 32B / {peer}", ("tp.aeron-python.exclusive.32B", "msgs_per_s"),
            (f"tp.{peer}.32B", "msgs_per_s"), "higher"))
    ratios.append(Ratio("rtt p50 aeron-compiled-udp / floor-udp", (_rtt("aeron-compiled-udp"), "p50"),
                        (_rtt("floor-udp"), "p50"), "lower", target=2.5, gate=2.0, placement_sensitive=False,
                        note="compiled round trip through the driver over UDP vs raw loopback sockets"))
    ratios.append(Ratio("rtt p50 aeron-compiled-udp / relay-floor-udp", (_rtt("aeron-compiled-udp"), "p50"),
                        (_rtt("relay-floor-udp"), "p50"), "lower", target=1.5, placement_sensitive=False,
                        note="the same vs relays that do the least a driver does, four processes on the cores"))
    ratios.append(Ratio("rtt p50 relay-floor-udp / floor-udp", (_rtt("relay-floor-udp"), "p50"),
                        (_rtt("floor-udp"), "p50"), "lower", placement_sensitive=False,
                        note="what the two extra hops and their scheduling cost any driver"))
    for size in (32, 1344):
        ratios.append(Ratio(
            f"tp MB/s aeron-compiled-udp exclusive {size}B / floor-udp",
            (f"tp.aeron-compiled-udp.exclusive.{size}B", "mb_per_s"), ("tp.floor-udp.", "mb_per_s"), "higher", gate=2.5,
            placement_sensitive=False,
            note="payload bandwidth through the driver over UDP vs raw MTU-sized datagrams"))
        ratios.append(Ratio(
            f"tp MB/s aeron-compiled-udp-jumbo exclusive {size}B / floor-udp-jumbo",
            (f"tp.aeron-compiled-udp-jumbo.exclusive.{size}B", "mb_per_s"), ("tp.floor-udp-jumbo.", "mb_per_s"),
            "higher", note="the same with the largest MTU vs raw datagrams of that size"))
    return tuple(ratios)


RATIOS = _ratios()

#: Absolute targets of the issue (machine-specific: reported, not gated).
TARGETS = (
    ("tp aeron-compiled exclusive 32B msgs/s", ("tp.aeron-compiled.exclusive.32B", "msgs_per_s"), 30e6, "msgs/s"),
    ("tp aeron-compiled concurrent 32B msgs/s", ("tp.aeron-compiled.concurrent.32B", "msgs_per_s"), 30e6, "msgs/s"),
    ("tp aeron-compiled exclusive 1344B MB/s", ("tp.aeron-compiled.exclusive.1344B", "mb_per_s"), 3000.0, "MB/s"),
    ("tp aeron-compiled concurrent 1344B MB/s", ("tp.aeron-compiled.concurrent.1344B", "mb_per_s"), 3000.0, "MB/s"),
    ("tp aeron-compiled-udp exclusive 32B msgs/s", ("tp.aeron-compiled-udp.exclusive.32B", "msgs_per_s"), 5e6,
     "msgs/s"),
    ("tp aeron-compiled-udp exclusive 1344B MB/s", ("tp.aeron-compiled-udp.exclusive.1344B", "mb_per_s"), 1000.0,
     "MB/s"),
    ("tp aeron-compiled-udp-jumbo exclusive 32B msgs/s", ("tp.aeron-compiled-udp-jumbo.exclusive.32B", "msgs_per_s"),
     5e6, "msgs/s"),
    ("tp aeron-compiled-udp-jumbo exclusive 1344B MB/s", ("tp.aeron-compiled-udp-jumbo.exclusive.1344B",
                                                          "mb_per_s"), 1000.0, "MB/s"),
)


# ---------------------------------------------------------------------------------------------- summary
def _case_summary(result: dict) -> dict:
    case = result["case"]
    out = {
        "label": case["label"], "family": case["family"], "impl": case["impl"], "size": case["size"],
        "ok": bool(result.get("ok")),
    }
    for key in ("rate", "exclusive"):
        if key in case:
            out[key] = case[key]
    if not result.get("ok"):
        out["error"] = result.get("error", "unknown error")
        return out
    for key in ("kind", "count", "received", "expected", "errors", "timing", "sustained", "behind_ns", "figures_ns",
                "figures", "preempted", "driver_cpu_s", "back_pressured", "dropped"):
        if key in result:
            out[key] = result[key]
    partner = {k: v for k, v in (result.get("partner") or {}).items()
               if k not in ("ok", "seconds", "preempted", "driver_cpu_s")}
    if partner:
        out["partner"] = partner
    return out


def _lookup(cases: dict, key: str) -> dict | None:
    if key in cases:
        return cases[key]
    for name, case in cases.items():
        if name.startswith(key):
            return case
    return None


def figure(cases: dict, ref: tuple[str, str]) -> float | None:
    """A figure of a case (``None`` if the case failed or is missing)."""
    case = _lookup(cases, ref[0])
    if case is None or not case.get("ok"):
        return None
    figures = case.get("figures_ns") or case.get("figures") or {}
    value = figures.get(ref[1])
    return float(value) if value is not None else None


def compute_ratios(cases: dict) -> dict:
    ratios = {}
    for ratio in RATIOS:
        num, den = figure(cases, ratio.numerator), figure(cases, ratio.denominator)
        value = num / den if num is not None and den else None
        met = None
        if value is not None and ratio.target is not None:
            met = value <= ratio.target if ratio.better == "lower" else value >= ratio.target
        ratios[ratio.name] = {
            "value": value, "better": ratio.better, "target": ratio.target, "met": met, "gate": ratio.gate,
            "numerator": list(ratio.numerator), "denominator": list(ratio.denominator), "note": ratio.note,
        }
    return ratios


def compute_targets(cases: dict) -> dict:
    targets = {}
    for name, ref, target, unit in TARGETS:
        value = figure(cases, ref)
        targets[name] = {"value": value, "target": target, "unit": unit,
                         "met": None if value is None else value >= target}
    return targets


def placement(cases: dict) -> dict:
    """The floors that reveal where the two workers' vCPUs sit (same physical core or not)."""
    return {
        "floor_compiled_p50_ns": figure(cases, (_rtt("floor-compiled"), "p50")),
        "floor_python_p50_ns": figure(cases, (_rtt("floor-python"), "p50")),
    }


def build_summary(merged: list[dict], meta: dict) -> dict:
    cases = {result["case"]["name"]: _case_summary(result) for result in merged}
    return {"meta": meta, "placement": placement(cases), "cases": cases, "ratios": compute_ratios(cases),
            "targets": compute_targets(cases)}


# ------------------------------------------------------------------------------------------------ pyperf
def pyperf_suite(merged: list[dict], meta: dict):
    import pyperf

    common = {
        "python_version": meta.get("python", ""), "cpu_model_name": meta.get("cpu_model", ""),
        "aeron_bench_profile": meta.get("profile", ""), "aeron_bench_pinning": meta.get("pinning", ""),
        "aeron_bench_idle_strategies": meta.get("idle_strategies", ""), "numba_version": meta.get("numba", ""),
        "aeron_bench_tsc_ghz": float(meta.get("tsc_ghz") or 0.0),
    }
    benchmarks = []
    for result in merged:
        if not result.get("ok") or not result.get("runs"):
            continue
        name = result["case"]["name"]
        extra = {}
        for key, value in (result.get("figures_ns") or {}).items():
            extra[f"aeron_bench_{key}_ns"] = float(value)
        for key, value in (result.get("figures") or {}).items():
            extra[f"aeron_bench_{key}"] = float(value)
        runs = []
        for run in result["runs"]:
            metadata = {"name": name, "unit": "second", "loops": max(1, int(run.get("loops", 1))), **common, **extra}
            warmups = [(max(1, int(n)), float(v)) for n, v in run.get("warmups", [])] or None
            runs.append(pyperf.Run([float(v) for v in run["values"]], warmups=warmups, metadata=metadata,
                                   collect_metadata=False))
        benchmarks.append(pyperf.Benchmark(runs))
    return pyperf.BenchmarkSuite(benchmarks) if benchmarks else None


# ------------------------------------------------------------------------------------------------- plots
def _percentile_series(encoded: str):
    histogram = stats.decode(encoded)
    total = histogram.get_total_count()
    top = min(5.0, math.log10(max(total, 10)))  # no percentile finer than the data supports
    xs, ys = [], []
    steps = 200
    for k in range(steps + 1):
        nines = top * k / steps
        percentile = 100.0 * (1.0 - 10.0 ** (-nines))
        xs.append(10.0**nines)
        ys.append(histogram.get_value_at_percentile(percentile) / 1000.0)
    return xs, ys


def plot_percentiles(merged: list[dict], family: str, path: Path, title: str) -> bool:
    """HdrHistogram-style percentile distribution (x: 1/(1-p), log; y: latency in us, log). False if no data."""
    series = [(r["case"]["name"], r["hdr"]) for r in merged
              if r["case"]["family"] == family and r.get("ok") and r.get("hdr")]
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6))
    for name, encoded in series:
        xs, ys = _percentile_series(encoded)
        ax.plot(xs, ys, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [1, 2, 10, 100, 1000, 10_000, 100_000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    ax.set_xlim(1, 100_000)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (us)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_outputs(summary: dict, merged: list[dict], out_dir: Path) -> dict:
    """pyperf JSON, summary JSON and the PNGs into ``out_dir``; returns the paths written."""
    out_dir = Path(out_dir)
    written = {}
    suite = pyperf_suite(merged, summary["meta"])
    if suite is not None:
        suite.dump(str(out_dir / PYPERF_FILE), replace=True)
        written["pyperf"] = str(out_dir / PYPERF_FILE)
    with open(out_dir / SUMMARY_FILE, "w") as f:
        json.dump(summary, f, indent=1)
    written["summary"] = str(out_dir / SUMMARY_FILE)
    histograms = {r["case"]["name"]: r["hdr"] for r in merged if r.get("ok") and r.get("hdr")}
    with open(out_dir / HISTOGRAMS_FILE, "w") as f:
        json.dump({"format": "HdrHistogram V2 compressed, base64", "unit": "ns",
                   "lowest_ns": stats.HDR_LOWEST_NS, "highest_ns": stats.HDR_HIGHEST_NS,
                   "significant_digits": stats.HDR_DIGITS, "histograms": histograms}, f, indent=1)
    written["histograms"] = str(out_dir / HISTOGRAMS_FILE)
    meta = summary["meta"]
    subtitle = f"{meta.get('cpu_model', '')}, {meta.get('pinning', '')}"
    if plot_percentiles(merged, "rtt", out_dir / RTT_PLOT, f"IPC round trip, {RTT_SIZE}-byte messages\n{subtitle}"):
        written["rtt_plot"] = str(out_dir / RTT_PLOT)
    if plot_percentiles(merged, "fixed", out_dir / FIXED_RATE_PLOT,
                        f"Fixed-rate round trip from scheduled send time\n{subtitle}"):
        written["fixed_rate_plot"] = str(out_dir / FIXED_RATE_PLOT)
    return written


# ------------------------------------------------------------------------------------------------- table
def _ns(value) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e4:
        return f"{value / 1e3:.1f} us"
    if value >= 1e3:
        return f"{value / 1e3:.2f} us"
    return f"{value:.0f} ns"


def _rate(value) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k"
    return f"{value:.0f}"


def _x(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _preempted(case: dict) -> str:
    p = case.get("preempted") or {}
    return f"{p.get('A', '?')}/{p.get('B', '?')}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def format_table(summary: dict) -> str:
    cases, meta = summary["cases"], summary["meta"]
    out = [
        "",
        f"== aeron-numba benchmarks ({meta.get('profile')}) {meta.get('date', '')} ==",
        f"CPU: {meta.get('cpu_model')} ({meta.get('cpu_count')} cores, TSC {meta.get('tsc_ghz')} GHz); "
        f"Python {meta.get('python')}, numba {meta.get('numba')}, numpy {meta.get('numpy')}, pyzmq {meta.get('pyzmq')}, "
        f"iceoryx2 {meta.get('iceoryx2')}",
        f"pinning: {meta.get('pinning')}",
        f"idle strategies: {meta.get('idle_strategies')}",
        f"load average (1 min) at start {meta.get('load_avg_start')}, at end {meta.get('load_avg_end')}"
        " (other work on the machine makes every figure noisier; the ratios less so)",
    ]
    failed = [(name, c.get("error")) for name, c in cases.items() if not c.get("ok")]
    compiled_p50 = figure(cases, (_rtt("aeron-compiled"), "p50"))
    python_p50 = figure(cases, (_rtt("aeron-python"), "p50"))
    rows = []
    for name, c in cases.items():
        if c["family"] != "rtt" or not c.get("ok"):
            continue
        f = c["figures_ns"]
        rows.append([c["label"], _ns(f["p50"]), _ns(f["p90"]), _ns(f["p99"]), _ns(f["p99.9"]), _ns(f["max"]),
                     _ns(f["mean"]), str(c["count"]),
                     _x(compiled_p50 / f["p50"] if compiled_p50 else None),
                     _x(python_p50 / f["p50"] if python_p50 else None), _preempted(c)])
    if rows:
        out += ["", f"Round trip, {RTT_SIZE}-byte messages, both ends pinned (HdrHistogram; *-udp: UDP loopback):",
                _table(["impl", "p50", "p90", "p99", "p99.9", "max", "mean", "count", "compiled p50 / this",
                        "python p50 / this", "preempted A/B"], rows)]
    rows = []
    for name, c in cases.items():
        if c["family"] != "fixed" or not c.get("ok"):
            continue
        f = c["figures_ns"]
        rows.append([c["label"], _rate(c["rate"]) + "/s", _ns(f["p50"]), _ns(f["p90"]), _ns(f["p99"]),
                     _ns(f["p99.9"]), _ns(f["max"]), _ns(c.get("behind_ns")),
                     "yes" if c.get("sustained") else "NO (sender fell behind)", _preempted(c)])
    if rows:
        out += ["", "Fixed-rate round trip, measured from each message's scheduled send time:",
                _table(["impl", "rate", "p50", "p90", "p99", "p99.9", "max", "last send late by", "rate sustained",
                        "preempted A/B"], rows)]
    memcpy = _lookup(cases, "tp.memcpy.")
    memcpy_mb = figure(cases, ("tp.memcpy.", "mb_per_s"))
    rows = []
    for size in MESSAGE_SIZES:
        python_rate = figure(cases, (f"tp.aeron-python.exclusive.{size}B", "msgs_per_s"))
        for name, c in cases.items():
            if c["family"] != "tp" or c["size"] != size or not c.get("ok"):
                continue
            f = c["figures"]
            rows.append([f"{size}B", c["label"], _rate(f["msgs_per_s"]) + " msgs/s", f"{f['mb_per_s']:.0f} MB/s",
                         _x(f["mb_per_s"] / memcpy_mb if memcpy_mb else None),
                         _x(python_rate / f["msgs_per_s"] if python_rate else None), _preempted(c),
                         "-" if c.get("driver_cpu_s") is None else f"{c['driver_cpu_s']:.2f}s",
                         str((c.get("partner") or {}).get("back_pressured", "-"))])
    if memcpy is not None and memcpy.get("ok"):
        rows.append([f"{memcpy['size'] // 1024 // 1024}MiB", "memcpy (floor)", "-", f"{memcpy_mb:.0f} MB/s", "1.00x", "-",
                     _preempted(memcpy), "-", "-"])
    for key in ("tp.floor-udp.", "tp.floor-udp-jumbo."):
        udp_floor = _lookup(cases, key)
        if udp_floor is not None and udp_floor.get("ok"):
            f = udp_floor["figures"]
            rows.append([f"{udp_floor['size']}B", f"{udp_floor['label']}, {udp_floor.get('dropped', 0)} dropped",
                         _rate(f["msgs_per_s"]) + " msgs/s", f"{f['mb_per_s']:.0f} MB/s",
                         _x(f["mb_per_s"] / memcpy_mb if memcpy_mb else None), "-", _preempted(udp_floor), "-", "-"])
    if rows:
        out += ["", "Throughput, one producer and one consumer process (median of windows; *-udp: UDP loopback):",
                _table(["size", "impl", "rate", "payload", "this / memcpy", "python excl / this", "preempted A/B",
                        "driver CPU", "offers back-pressured"], rows)]
    rows = []
    for name, r in summary["ratios"].items():
        target = "-" if r["target"] is None else (f"<= {r['target']}" if r["better"] == "lower" else f">= {r['target']}")
        met = "-" if r["met"] is None else ("met" if r["met"] else "NOT MET")
        rows.append([name, _x(r["value"]), f"{r['better']} is better", target, met,
                     "-" if r["gate"] is None else f"{r['gate']}x"])
    out += ["", "Ratios (same run):", _table(["ratio", "value", "", "target", "", "gate allows"], rows)]
    rows = []
    for name, t in summary["targets"].items():
        value = "-" if t["value"] is None else (_rate(t["value"]) if t["unit"] == "msgs/s" else f"{t['value']:.0f}")
        met = "-" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        wanted = _rate(t["target"]) if t["unit"] == "msgs/s" else f"{t['target']:.0f}"
        rows.append([name, f"{value} {t['unit']}", f">= {wanted}", met])
    out += ["", "Absolute targets (this machine):", _table(["target", "value", "wanted", ""], rows)]
    if failed:
        out += ["", "FAILED cases:"] + [f"  {name}: {error}" for name, error in failed]
    return "\n".join(out)
