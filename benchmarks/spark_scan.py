"""``python -m benchmarks spark-scan [--size 2g] [--master URL] [--out DIR] [--dir DIR] [--repeats N]``: how fast
Spark scans a recording through the ``aeron-archive`` source, beside ``spark.read.parquet`` of the same rows and a
single-process scan of the segment files with the same kernels, in one run.

Each reader computes the same three figures, so Spark must read every payload and position: the fragment count,
the sum of payload lengths and the sum of positions. The readers run alternately (the order rotates each round)
after one warm-up round (page cache, Python workers, Numba's cache), and the report gives the median and the
spread (min to max) of each, fragments/s, MB/s of segment bytes, fragments/s per core, the ratio of the archive
source to Parquet and the targets of issue 18 (at least 0.5x Parquet, at least 2 M fragments/s per core). It also
lists which executor ran how many of the scan's tasks (``--master local-cluster[2,1,1024]`` shows two), and the
CPU seconds each reader took, split into the JVMs' and the Python processes' (Spark's workers and this one): on a
shared machine wall time follows the other load, CPU time much less.

(c) runs the source's two kernel passes over every partition (columns filled, no Arrow); (d) adds the Arrow batch
(``scan_segment_range``, what the source's ``read`` does): with (c), it splits (a)'s time into kernels, Arrow, and
the rest, Spark's (moving the batches to the JVM and aggregating).

The recording (see ``benchmarks/scan_recording.py``) and its Parquet copy are cached under ``--dir`` (default
``/tmp/aeron-numba-spark-scan``) by size and layout, and reused by later runs. The table and ``spark_scan.json``
go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from aeron_numba.cli import fail, user_error_line

DESCRIPTION = ("how fast Spark scans a recording through the aeron-archive source, beside spark.read.parquet of the "
               "same rows and a single-process scan of the segment files")
DEFAULT_ROOT = Path("/tmp/aeron-numba-spark-scan")
DEFAULT_REPEATS = 5
TARGET_PARQUET_RATIO = 0.5
TARGET_FRAGMENTS_PER_CORE = 2_000_000
PARQUET_MARKER = "_aeron_numba_complete"
READERS = {
    "a": "spark aeron-archive",
    "b": "spark parquet",
    "c": "numpy scan, 1 process",
}
BREAKDOWN = {"d": "(a) without Spark, 1 process"}


def _spark_totals(df) -> tuple[int, int, int]:
    from pyspark.sql import functions as F

    row = df.agg(F.count("*"), F.sum(F.length("payload")), F.sum("position")).collect()[0]
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def _partitions(archive_dir: Path) -> list:
    from aeron_numba.spark.archive_source import ArchiveReader

    return ArchiveReader(str(archive_dir), {}).partitions()


def kernel_scan(partitions) -> tuple[int, int, int]:
    """(c): the two kernel passes of every partition, columns filled, no Arrow."""
    from aeron_numba.kernels.segment_columns import count_fragments, fill_fragments

    out = np.zeros(3, np.int64)
    frames = payload_bytes = position_sum = 0
    for part in partitions:
        segment = np.memmap(part.path, dtype=np.uint8, mode="r")
        end = min(part.to_offset, segment.size)
        status = count_fragments(segment, part.from_offset, end, part.base_position, part.low_position,
                                 part.high_position, 0, out)
        if status < 0:
            raise RuntimeError(f"bad frame in {part.path} at offset {int(out[0])}")
        n = int(out[0])
        positions, term_ids, term_offsets = np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.int32)
        lengths, flags, types = np.empty(n, np.int32), np.empty(n, np.int16), np.empty(n, np.int32)
        reserved, offsets, payload = np.empty(n, np.int64), np.empty(n + 1, np.int32), np.empty(int(out[1]), np.uint8)
        rows = int(fill_fragments(segment, part.from_offset, end, part.base_position, part.low_position,
                                  part.high_position, False, positions, term_ids, term_offsets, lengths, flags,
                                  types, reserved, offsets, payload))
        frames += rows
        payload_bytes += int(offsets[rows])
        position_sum += int(positions[:rows].sum())
        del segment
    return frames, payload_bytes, position_sum


def arrow_scan(partitions) -> tuple[int, int, int]:
    """(d): what the source's ``read`` does per partition, in this process."""
    import pyarrow.compute as pc

    from aeron_numba.spark.archive_source import scan_segment_range

    frames = payload_bytes = position_sum = 0
    for part in partitions:
        batch = scan_segment_range(part, False, 0)
        frames += batch.num_rows
        payload_bytes += len(batch.column("payload").buffers()[2]) if batch.num_rows else 0
        position_sum += pc.sum(batch.column("position")).as_py() or 0
    return frames, payload_bytes, position_sum


def ensure_parquet(spark, root: Path, key: str, archive_dir: Path) -> tuple[Path, bool]:
    """The recording's rows written once as Parquet by Spark (all columns, Spark's default codec)."""
    parquet_dir = root / f"parquet-{key}"
    if (parquet_dir / PARQUET_MARKER).exists():
        return parquet_dir, False
    shutil.rmtree(parquet_dir, ignore_errors=True)
    spark.read.format("aeron-archive").load(str(archive_dir)).write.parquet(str(parquet_dir))
    (parquet_dir / PARQUET_MARKER).write_text(key)
    return parquet_dir, True


def scan_executors(spark, group: str) -> dict[str, int]:
    """Executor id -> tasks of the widest stage of the jobs of ``group`` (the scan; the other is the final sum),
    from Spark's own status store (the UI may be off: the store is kept regardless)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    stages = [s for job in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(job).stageIds]
    store = sc._jsc.sc().statusStore()
    widest: dict[str, int] = {}
    for stage in stages:
        tasks = store.taskList(int(stage), 0, 1 << 20)
        per_executor: dict[str, int] = {}
        for i in range(tasks.size()):
            executor = str(tasks.apply(i).executorId())
            per_executor[executor] = per_executor.get(executor, 0) + 1
        if sum(per_executor.values()) > sum(widest.values()):
            widest = per_executor
    return widest


def tree_cpu_seconds(root_pid: int) -> dict[int, tuple[str, float]]:
    """pid -> (kind, user + system CPU seconds, with its reaped children's) of ``root_pid`` and every process below
    it (the JVM, its executors and their Python workers); kind is ``jvm`` (java) or ``python`` (the rest)."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            comm, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 1:].split()
            stats[int(entry.name)] = (int(fields[1]), "jvm" if comm == "java" else "python",
                                      sum(int(f) for f in fields[11:15]) / ticks)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = {}, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree[pid] = stats[pid][1:]
        todo.extend(children.get(pid, ()))
    return tree


def cpu_used(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by kind between two ``tree_cpu_seconds``: a process that ended meanwhile (a Python worker
    Spark let go) takes its last seconds with it, so this is a lower bound."""
    used = {"jvm": 0.0, "python": 0.0}
    for pid, (kind, seconds) in after.items():
        used[kind] += max(0.0, seconds - before.get(pid, (kind, 0.0))[1])
    return used


def _summary(seconds: list[float], cpu: list[dict[str, float]], fragments: int, segment_bytes: int,
             cores: int) -> dict:
    median = statistics.median(seconds)
    cpu_total = statistics.median(sum(c.values()) for c in cpu)
    return {"seconds": seconds, "median_s": median, "min_s": min(seconds), "max_s": max(seconds),
            "fragments_per_s": fragments / median, "mb_per_s": segment_bytes / median / 1e6, "cores": cores,
            "fragments_per_s_per_core": fragments / median / cores, "cpu_seconds": cpu,
            "median_cpu_s": cpu_total, "median_jvm_cpu_s": statistics.median(c["jvm"] for c in cpu),
            "median_python_cpu_s": statistics.median(c["python"] for c in cpu),
            "fragments_per_cpu_s": fragments / cpu_total if cpu_total else None}


def measure(spark, archive_dir: Path, parquet_dir: Path, repeats: int, segment_bytes: int) -> dict:
    partitions = _partitions(archive_dir)
    cores = spark.sparkContext.defaultParallelism
    readers = {
        "a": (lambda: _spark_totals(spark.read.format("aeron-archive").load(str(archive_dir))), cores),
        "b": (lambda: _spark_totals(spark.read.parquet(str(parquet_dir))), cores),
        "c": (lambda: kernel_scan(partitions), 1),
        "d": (lambda: arrow_scan(partitions), 1),
    }
    totals = {name: run() for name, (run, _) in readers.items()}  # warm-up round, and the rows each reader saw
    sc = spark.sparkContext
    sc.setJobGroup("spark-scan-executors", "aeron-archive scan: which executor ran each task")
    try:
        _spark_totals(spark.read.format("aeron-archive").load(str(archive_dir)))
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description"):  # a shared session's later jobs are not ours
            sc.setLocalProperty(key, None)
    executors = scan_executors(spark, "spark-scan-executors")
    jvm_pid = sc._gateway.proc.pid if getattr(sc._gateway, "proc", None) else None

    def cpu_now() -> dict[int, tuple[str, float]]:  # the JVMs, their Python workers, this process (driver or scans)
        cpu = tree_cpu_seconds(jvm_pid) if jvm_pid else {}
        cpu[os.getpid()] = ("python", time.process_time())  # precise, and not below the JVM
        return cpu

    seconds: dict[str, list[float]] = {name: [] for name in readers}
    cpu_seconds: dict[str, list[dict[str, float]]] = {name: [] for name in readers}
    order = list(readers)
    for round_ in range(repeats):
        for name in order[round_ % len(order):] + order[:round_ % len(order)]:
            before, start = cpu_now(), time.perf_counter()
            readers[name][0]()
            seconds[name].append(time.perf_counter() - start)
            cpu_seconds[name].append(cpu_used(before, cpu_now()))
    fragments = totals["c"][0]
    results = {name: _summary(seconds[name], cpu_seconds[name], fragments, segment_bytes, readers[name][1])
               for name in readers}
    return {"totals": totals, "results": results, "executors": executors, "partitions": len(partitions),
            "cores": cores}


def _fmt(value: float, unit: str = "") -> str:
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}{unit}"
    return f"{value:.2f} {unit}".rstrip()


def format_report(report: dict) -> str:
    meta, results = report["meta"], report["results"]
    headers = ["reader", "median s", "spread s", "fragments/s", "MB/s", "cores", "fragments/s/core",
               "CPU s (JVM+Python)", "fragments/CPU s"]
    rows = []
    for name, label in {**READERS, **BREAKDOWN}.items():
        r = results[name]
        rows.append([f"({name}) {label}", f"{r['median_s']:.3f}", f"{r['min_s']:.3f}..{r['max_s']:.3f}",
                     _fmt(r["fragments_per_s"]), f"{r['mb_per_s']:.0f}", str(r["cores"]),
                     _fmt(r["fragments_per_s_per_core"]),
                     f"{r['median_cpu_s']:.2f} ({r['median_jvm_cpu_s']:.2f}+{r['median_python_cpu_s']:.2f})",
                     _fmt(r["fragments_per_cpu_s"]) if r["fragments_per_cpu_s"] else "-"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    table = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    table += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    targets = report["targets"]
    executors = ", ".join(f"{e}: {n}" for e, n in sorted(report["executors"].items()))
    return "\n".join([
        f"== spark-scan: {meta['size_bytes'] / 2**30:.2f} GiB recording, {report['fragments']:,} fragments, "
        f"{report['partitions']} partitions, master {meta['master']} ({report['cores']} cores) ==",
        f"{meta['date']}  {meta['cpu_model']} ({meta['cpu_count']} cores); pyspark {meta['pyspark']}, "
        f"load average (1 min) {meta['load_avg_start']} at start, {meta['load_avg_end']} at end",
        f"recording {meta['archive_dir']}; parquet {meta['parquet_dir']} ({meta['parquet_bytes'] / 2**20:.0f} MiB)",
        f"{meta['repeats']} alternating rounds after a warm-up; MB/s counts the recording's segment bytes; CPU s: "
        f"the JVMs' and the Python processes' CPU time (this one and Spark's workers): other load sways it less "
        f"than wall time",
        "",
        *table,
        "",
        f"(a)/(b) = {targets['archive_over_parquet']:.2f}x (target >= {TARGET_PARQUET_RATIO}x: "
        f"{'met' if targets['parquet_ratio_met'] else 'MISSED'}); (a) per core "
        f"{_fmt(targets['archive_fragments_per_s_per_core'])} fragments/s (target >= "
        f"{_fmt(TARGET_FRAGMENTS_PER_CORE)}: {'met' if targets['per_core_met'] else 'MISSED'}; per CPU second "
        f"{_fmt(targets['archive_fragments_per_cpu_s'] or 0)}); by CPU seconds (a)/(b) = "
        f"{targets['archive_over_parquet_cpu']:.2f}x",
        f"rows agree across readers: {report['rows_agree']}  (fragments, payload bytes, position sum each: "
        f"{report['totals']['a']})",
        f"tasks of the aeron-archive scan per executor: {executors}",
    ])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(args, conf: dict[str, str], spark=None) -> dict:
    """The whole benchmark (``args``: size, dir, repeats, master) as the report dict; in its own SparkSession
    unless given one (which it leaves running)."""
    from aeron_numba.spark.session import spark_session
    from benchmarks.scan_recording import ensure_recording, layout_key

    load_start = os.getloadavg()[0]
    root = Path(args.dir)
    archive_dir, layout, built = ensure_recording(root, args.size)
    print(f"recording {'written' if built else 'reused'}: {archive_dir}", flush=True)
    own_session = spark is None
    if own_session:
        spark = spark_session("aeron-numba spark-scan", args.master, {"spark.ui.enabled": "false", **conf})
    try:
        parquet_dir, written = ensure_parquet(spark, root, layout_key(args.size), archive_dir)
        print(f"parquet {'written' if written else 'reused'}: {parquet_dir}", flush=True)
        measured = measure(spark, archive_dir, parquet_dir, args.repeats, layout["stop_position"])
        master = spark.sparkContext.master
    finally:
        if own_session:
            spark.stop()
    import pyspark

    results, totals = measured["results"], measured["totals"]
    ratio = results["a"]["fragments_per_s"] / results["b"]["fragments_per_s"]
    return {
        "meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "size_bytes": args.size,
                 "master": master, "repeats": args.repeats, "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
                 "python": platform.python_version(), "pyspark": pyspark.__version__,
                 "load_avg_start": round(load_start, 2), "load_avg_end": round(os.getloadavg()[0], 2),
                 "archive_dir": str(archive_dir), "parquet_dir": str(parquet_dir),
                 "parquet_bytes": sum(p.stat().st_size for p in parquet_dir.glob("*.parquet")),
                 "layout": layout, "conf": conf},
        "fragments": totals["c"][0],
        "partitions": measured["partitions"],
        "cores": measured["cores"],
        "totals": {name: list(t) for name, t in totals.items()},
        "rows_agree": len({tuple(t) for t in totals.values()}) == 1,
        "results": {name: results[name] for name in (*READERS, *BREAKDOWN)},
        "executors": measured["executors"],
        "targets": {"archive_over_parquet": ratio, "parquet_ratio_met": ratio >= TARGET_PARQUET_RATIO,
                    "archive_fragments_per_s_per_core": results["a"]["fragments_per_s_per_core"],
                    "per_core_met": results["a"]["fragments_per_s_per_core"] >= TARGET_FRAGMENTS_PER_CORE,
                    "archive_fragments_per_cpu_s": results["a"]["fragments_per_cpu_s"],
                    "archive_over_parquet_cpu": results["b"]["median_cpu_s"] / results["a"]["median_cpu_s"]},
    }


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks spark-scan") -> int:
    from aeron_numba.spark.session import SparkSetupError, add_spark_arguments, parse_conf
    from benchmarks.scan_recording import layout_key, parse_size

    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("--size", default="2g", help="recording size: 8m, 512m, 2g (default 2g)")
    parser.add_argument("--out", help="where the table and spark_scan.json go (default "
                                      "/tmp/aeron-numba-bench/spark-scan-<time>)")
    parser.add_argument("--dir", default=str(DEFAULT_ROOT),
                        help=f"where the recording and its Parquet copy are kept and reused (default {DEFAULT_ROOT})")
    parser.add_argument("--repeats", type=_positive_int, default=DEFAULT_REPEATS,
                        help=f"measured rounds of every reader (default {DEFAULT_REPEATS})")
    add_spark_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.size = parse_size(args.size)
        conf = parse_conf(args.conf)
    except ValueError as exc:
        return fail(prog, str(exc), 2)
    out = Path(args.out or f"/tmp/aeron-numba-bench/spark-scan-{time.strftime('%Y%m%d-%H%M%S')}")
    for path, what in ((out, "--out directory"), (Path(args.dir), "--dir directory")):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return fail(prog, user_error_line(exc, what), 2)
    free = shutil.disk_usage(args.dir).free
    cached = (Path(args.dir) / f"parquet-{layout_key(args.size)}" / PARQUET_MARKER).exists()
    if not cached and free < 2.5 * args.size:
        return fail(prog, f"--dir {args.dir} has {free / 2**30:.1f} GiB free: a {args.size / 2**30:.2f} GiB "
                          f"recording and its Parquet copy need about {2.5 * args.size / 2**30:.1f} GiB", 2)
    try:
        report = run(args, conf)
    except SparkSetupError as exc:
        return fail(prog, str(exc), 2)
    text = format_report(report)
    print(text)
    (out / "spark_scan.json").write_text(json.dumps(report, indent=1))
    (out / "spark_scan.txt").write_text(text + "\n")
    print(f"written: {out / 'spark_scan.json'}, {out / 'spark_scan.txt'}")
    return 0 if report["rows_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
