"""The benchmark history read with Spark, judged for regressions, its ratios drawn over time (``bench-history``).

``python -m aeron_numba.spark bench-history [--history DIR] [--out DIR] [--threshold 0.10] [--alpha 0.05]
[--master URL]`` (also ``python -m benchmarks history``) reads the history folder that ``python -m benchmarks
run`` appends to (``aeron_numba/spark/history_table.py``: the table and where it lives) and:

* with Spark, builds one series per benchmark case and per ratio, on one machine, profile and placement (the
  placement, from the run's compiled floor, splits only the series that depend on it: where the hypervisor
  put the two vCPUs moves those by up to 5x, which must not read as a regression): one value per run, in
  run order, with the run's commit;
* judges each series as asv does (``aeron_numba.spark.step_detect``): a step to a level worse by more than
  ``--threshold``, significant at ``--alpha`` given the spread of the runs on either side;
* prints a table (series, before, after, change, p-value, the commit of the step), writes it as Parquet
  (``<out>/verdicts.parquet``) and draws one PNG per ratio (``<out>/plots/``): the ratio over runs, its target,
  the fitted levels and the step.

Exit status 0: no regression; 1: a regression; 2: bad arguments, a missing, empty or unreadable history, no
Spark.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from aeron_numba import cli
from aeron_numba.spark import history_table, step_detect
from aeron_numba.spark.session import SparkSetupError, add_spark_arguments, parse_conf, spark_session

#: A series: the same figure of the same benchmark, on one machine, profile and placement.
SERIES_KEY = ("profile", "machine", "placement", "kind", "name", "metric", "unit", "better")
PLACEMENT_TOLERANCE = 2.0  # compiled floors within this factor are one placement (as the gate judges them)
NOT_PLACED = "any"
VERDICTS_FILE = "verdicts.parquet"
PLOTS_FOLDER = "plots"
VERDICT_SCHEMA = (
    "profile string, machine string, placement string, kind string, name string, metric string, unit string, "
    "better string, runs int, status string, regression boolean, before double, after double, change_pct double, "
    "worse_pct double, p_value double, step_commit string, step_commit_dirty boolean, step_run_id string, "
    "step_time timestamp, last_commit string, last_time timestamp, threshold double, alpha double")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--history", metavar="DIR",
                        help=f"the history folder (default {history_table.default_history_dir()})")
    parser.add_argument("--out", metavar="DIR",
                        help="where the verdicts (Parquet) and plots (PNG) go "
                             "(default /tmp/aeron-numba-bench/history-<time>)")
    parser.add_argument("--threshold", type=float, default=step_detect.DEFAULT_THRESHOLD,
                        help="a step must be worse than this fraction to count (default %(default)s: 10 %%)")
    parser.add_argument("--alpha", type=float, default=step_detect.DEFAULT_ALPHA,
                        help="and its Welch's t-test p-value below this (default %(default)s)")
    add_spark_arguments(parser)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m aeron_numba.spark bench-history") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.threshold > 0:
        return cli.fail(prog, f"--threshold {args.threshold} must be > 0 (a fraction: 0.10 is 10 %)", 2)
    if not 0 < args.alpha < 1:
        return cli.fail(prog, f"--alpha {args.alpha} must be between 0 and 1", 2)
    history_dir = Path(args.history) if args.history else history_table.default_history_dir()
    out_dir = (Path(args.out) if args.out
               else Path("/tmp/aeron-numba-bench") / f"history-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        files = history_table.history_files(history_dir)  # before Spark starts: a missing history is one line
        history_table.check_run_files(files)
        conf = parse_conf(args.conf)
        (out_dir / PLOTS_FOLDER).mkdir(parents=True, exist_ok=True)
    except history_table.HistoryError as exc:
        return cli.fail(prog, str(exc), 2)
    except ValueError as exc:
        return cli.fail(prog, str(exc), 2)
    except OSError as exc:
        return cli.fail(prog, cli.user_error_line(exc, "--out directory"), 2)
    try:
        spark = spark_session("aeron-numba bench-history", args.master, conf)
    except SparkSetupError as exc:
        return cli.fail(prog, str(exc), 2)

    try:
        series = per_run_series(spark, history_dir)
    except Exception as exc:  # e.g. files of one column with two types: the line naming a file, not the JVM's trace
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        named = next((line for line in lines if str(history_dir) in line), lines[0])
        return cli.fail(prog, f"cannot read the benchmark history at {history_dir}: {named}", 2)
    verdicts = [judge_series(s, args.threshold, args.alpha) for s in series]
    runs = len({p["run_id"] for s in series for p in s["points"]})
    print(format_table(verdicts, history_dir, len(files), runs, args.threshold, args.alpha))
    write_verdicts(spark, verdicts, out_dir / VERDICTS_FILE)
    plots = plot_ratios(series, verdicts, out_dir / PLOTS_FOLDER)
    print(f"verdicts: {out_dir / VERDICTS_FILE}; plots: {len(plots)} PNG in {out_dir / PLOTS_FOLDER}")
    return 1 if any(v["regression"] for v in verdicts) else 0


# ------------------------------------------------------------------------------------------ Spark: series
def placements(floors: list[tuple[str, float | None]]) -> dict[str, str]:
    """run_id -> placement label: runs whose compiled floors lie within ``PLACEMENT_TOLERANCE`` of the previous
    one (sorted) form one placement, named by its median floor; runs without a floor are ``floor not measured``."""
    measured = sorted((floor, run_id) for run_id, floor in floors if floor is not None and floor > 0)
    labels = {run_id: "floor not measured" for run_id, floor in floors if floor is None or floor <= 0}
    group: list[tuple[float, str]] = []

    def close_group():
        if group:
            median = group[len(group) // 2][0]
            labels.update({run_id: f"floor ~{median:.0f} ns" for _, run_id in group})

    for floor, run_id in measured:
        if group and floor / group[-1][0] > PLACEMENT_TOLERANCE:
            close_group()
            group = []
        group.append((floor, run_id))
    close_group()
    return labels


def per_run_series(spark, history_dir: Path) -> list[dict]:
    """Every series of the history as ``{key columns..., "target", "points": [{run_time, run_id, commit,
    commit_dirty, value}, ...]}``, points in run order: Spark reads the folder and does the grouping."""
    from pyspark.sql import functions as F

    rows = (spark.read.option("pathGlobFilter", history_table.RUN_FILE_GLOB).option("mergeSchema", "true")
            .parquet(str(history_dir)))
    floors = [(r.run_id, r.floor_compiled_p50_ns)
              for r in rows.select("run_id", "floor_compiled_p50_ns").distinct().collect()]
    placement = spark.createDataFrame(sorted(placements(floors).items()), "run_id string, run_placement string")
    judged = (rows.filter(F.col("ok") & F.col("value").isNotNull() & ~F.isnan("value")
                          & F.col("better").isin(*step_detect.BETTER))
              .join(F.broadcast(placement), "run_id", "left")
              .withColumn("placement", F.when(F.col("placement_sensitive"), F.col("run_placement"))
                          .otherwise(F.lit(NOT_PLACED))))
    per_run = judged.groupBy(*SERIES_KEY, "run_id").agg(
        F.min("run_time").alias("run_time"), F.first("commit", ignorenulls=True).alias("commit"),
        F.max("commit_dirty").alias("commit_dirty"), F.avg("value").alias("value"), F.max("target").alias("target"))
    series = per_run.groupBy(*SERIES_KEY).agg(
        F.sort_array(F.collect_list(F.struct("run_time", "run_id", "commit", "commit_dirty", "value"))).alias("points"),
        F.max("target").alias("target"))
    out = []
    for row in series.orderBy(*SERIES_KEY).collect():
        item = {key: row[key] for key in SERIES_KEY}
        item["target"] = row["target"]
        item["points"] = [p.asDict() for p in row["points"]]
        out.append(item)
    return out


# ------------------------------------------------------------------------------------- verdicts and output
def judge_series(series: dict, threshold: float, alpha: float) -> dict:
    """The verdict row of one series (``VERDICT_SCHEMA``), with the fitted levels for the plots."""
    points = series["points"]
    verdict = step_detect.judge([p["value"] for p in points], series["better"], threshold, alpha)
    step = points[verdict.step_index] if verdict.step_index is not None else None
    return {
        **{key: series[key] for key in SERIES_KEY}, "runs": verdict.runs, "status": verdict.status,
        "regression": verdict.regression, "before": verdict.before, "after": verdict.after,
        "change_pct": None if verdict.change is None else 100.0 * verdict.change,
        "worse_pct": None if verdict.worse is None else 100.0 * verdict.worse, "p_value": verdict.p_value,
        "step_commit": step and step["commit"], "step_commit_dirty": step and step["commit_dirty"],
        "step_run_id": step and step["run_id"], "step_time": step and step["run_time"],
        "last_commit": points[-1]["commit"], "last_time": points[-1]["run_time"], "threshold": threshold,
        "alpha": alpha, "_segments": verdict.segments, "_levels": verdict.levels,
    }


def _figure(value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ns":
        return f"{value / 1e3:.2f} us" if value >= 1e3 else f"{value:.0f} ns"
    if unit == "msgs/s":
        return f"{value / 1e6:.2f} M/s" if value >= 1e6 else f"{value / 1e3:.1f} k/s"
    return f"{value:.3f}"


def _commit(commit: str | None, dirty: bool | None) -> str:
    if commit is None:
        return "-" if dirty is None else "(no git)"
    return commit[:10] + ("+dirty" if dirty else "")


_ORDER = {"regression": 0, "not significant": 1, "ok": 2, "too few runs": 3}


def format_table(verdicts: list[dict], history_dir: Path, files: int, runs: int, threshold: float,
                 alpha: float) -> str:
    headers = ["verdict", "kind", "series", "metric", "runs", "before", "after", "change", "p-value", "step commit"]
    several = len({(v["profile"], v["machine"], v["placement"]) for v in verdicts}) > 1
    rows = []
    for v in sorted(verdicts, key=lambda v: (_ORDER[v["status"]], v["kind"], v["name"])):
        name = v["name"] + (f" [{v['profile']}, {v['placement']}]" if several else "")
        change = "-" if v["change_pct"] is None else f"{v['change_pct']:+.1f} %"
        p_value = "-" if v["p_value"] is None else f"{v['p_value']:.2g}"
        rows.append([v["status"].upper() if v["regression"] else v["status"], v["kind"], name,
                     f"{v['metric']} ({v['better']} better)", str(v["runs"]), _figure(v["before"], v["unit"]),
                     _figure(v["after"], v["unit"]), change, p_value,
                     _commit(v["step_commit"], v["step_commit_dirty"]) if v["step_run_id"] else "-"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    found = sum(v["regression"] for v in verdicts)
    lines = [f"benchmark history {history_dir}: {files} run files, {runs} runs judged, {len(verdicts)} series; a "
             f"regression is a step worse than {100 * threshold:.0f} % with p < {alpha:g} (Welch's t-test over runs)",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append(f"REGRESSION in {found} series" if found else "no regression")
    return "\n".join(lines)


def write_verdicts(spark, verdicts: list[dict], path: Path) -> None:
    columns = [c.split(" ")[0] for c in VERDICT_SCHEMA.split(", ")]
    data = [tuple(v[c] for c in columns) for v in verdicts]
    spark.createDataFrame(data, VERDICT_SCHEMA).coalesce(1).write.mode("overwrite").parquet(str(path))


def plot_file_name(ratio: str) -> str:
    return "ratio-" + re.sub(r"[^a-z0-9]+", "-", ratio.lower()).strip("-") + ".png"


def plot_ratios(series: list[dict], verdicts: list[dict], folder: Path) -> list[Path]:
    """One PNG per ratio: its value per run (one line per machine, profile and placement), the target, the
    fitted levels and, dashed in red, the step of a regression. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_ratio: dict[str, list[tuple[dict, dict]]] = {}
    for s, v in zip(series, verdicts):
        if s["kind"] == "ratio":
            by_ratio.setdefault(s["name"], []).append((s, v))
    written = []
    for ratio, pairs in sorted(by_ratio.items()):
        fig, ax = plt.subplots(figsize=(10, 5))
        for s, v in pairs:
            times = [p["run_time"] for p in s["points"]]
            values = [p["value"] for p in s["points"]]
            label = f"{s['profile']}, {s['machine']}" + ("" if s["placement"] == NOT_PLACED else f", {s['placement']}")
            line, = ax.plot(times, values, "o-", markersize=3, linewidth=1, label=label)
            for (start, end), level in zip(v["_segments"], v["_levels"]):
                ax.plot([times[start], times[end - 1]], [level, level], color=line.get_color(), linewidth=3, alpha=0.4)
            if v["regression"]:
                ax.axvline(v["step_time"], color="red", linestyle="--", linewidth=1)
                ax.annotate(f"{v['worse_pct']:+.0f} % at {_commit(v['step_commit'], v['step_commit_dirty'])}",
                            (v["step_time"], v["after"]), color="red", fontsize=8, xytext=(4, 4),
                            textcoords="offset points")
        target = pairs[0][0]["target"]
        if target is not None:
            ax.axhline(target, color="green", linestyle=":", linewidth=1, label=f"target {target:g}")
        better = pairs[0][0]["better"]
        ax.set_title(ratio)
        ax.set_ylabel(f"ratio ({better} is better)")
        ax.set_xlabel("run start")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.autofmt_xdate()
        fig.tight_layout()
        path = folder / plot_file_name(ratio)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written

