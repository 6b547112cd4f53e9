"""The benchmarks: run them, gate a run against the baseline, judge the history of runs.

``python -m benchmarks run [--quick|--tiny] [--out DIR] [--only PATTERN ...] [--history DIR | --no-history]``,
``python -m benchmarks gate [--quick] [--baseline FILE] [--summary FILE] [--update-baseline]``,
``python -m benchmarks history [--history DIR] [--out DIR] [--master URL]``,
``python -m benchmarks cluster [--quick|--tiny] [--only SYSTEM ...] [--out DIR]`` and
``python -m benchmarks spark-scan [--size 2g] [--master URL] [--out DIR]``.

``run`` measures everything (``--quick``: CI-sized counts; the full profile ends with the cluster benchmark's
quick profile unless ``--no-cluster``), prints the summary table and appends the run to the benchmark history (``aeron_numba/spark/history_table.py`` says where); ``gate`` runs (or reads a run's
``summary.json``) and compares its ratios with the stored baseline, failing (exit 1) when one got worse past
its threshold; ``history`` reads the history with Spark, draws the ratios' trends and flags a step to a worse
level (exit 1; the job ``bench-history`` of ``python -m aeron_numba.spark``); ``spark-scan`` times the
``aeron-archive`` Spark source beside Parquet and a plain scan (``benchmarks/spark_scan.py``); ``cluster`` measures
3-node clusters on loopback, aeron-numba's beside PySyncObj and etcd (``benchmarks/cluster/``).
``python -m benchmarks.kernels`` is the single-process kernel ceiling.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aeron_numba.cli import fail, user_error_line


#: The cluster benchmark's profile inside ``run``'s full profile.
CLUSTER_PROFILE_IN_RUN = "quick"


def _profile(args) -> str:
    return "tiny" if getattr(args, "tiny", False) else ("quick" if args.quick else "full")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["spark-scan"]:  # its own options (and its own --help)
        from benchmarks import spark_scan

        return spark_scan.main(argv[1:], "python -m benchmarks spark-scan")
    if argv[:1] == ["cluster"]:  # its own profiles and options
        from benchmarks.cluster.bench import main as cluster_main

        return cluster_main(argv[1:], "python -m benchmarks cluster")
    if argv[:1] == ["history"]:  # the Spark job parses its own arguments (and answers its own --help)
        from aeron_numba.spark.jobs import bench_history

        return bench_history.main(argv[1:], prog="python -m benchmarks history")
    from aeron_numba.spark.history_table import DATA_DIR_ENV, default_history_dir

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the benchmarks, print the summary table and append the run to the history")
    gate = sub.add_parser("gate", help="compare a run's ratios with the baseline")
    sub.add_parser("history", add_help=False,
                   help="read the benchmark history with Spark: trend plots and regressions ('history --help')")
    sub.add_parser("cluster", add_help=False,
                   help="3-node clusters (aeron-numba, PySyncObj, etcd): put latency, sustained rate, failover "
                        "('cluster --help')")
    sub.add_parser("spark-scan", add_help=False,
                   help="Spark scan throughput of a recording beside Parquet and a plain scan ('spark-scan --help')")
    run.add_argument("--no-cluster", action="store_true",
                     help="the full profile without the 3-node cluster benchmark ('python -m benchmarks cluster')")
    for p in (run, gate):
        p.add_argument("--quick", action="store_true", help="short counts (what CI runs)")
        p.add_argument("--tiny", action="store_true", help="smoke-test counts: checks that everything works")
        p.add_argument("--out", help="output directory (default /tmp/aeron-numba-bench/<profile>-<time>)")
        p.add_argument("--only", nargs="+", metavar="PATTERN", help="only cases whose name matches")
        where = p.add_mutually_exclusive_group()
        where.add_argument("--history", metavar="DIR",
                           help=f"append the run to the benchmark history in DIR (default ${DATA_DIR_ENV}/"
                                f"benchmark-history, {DATA_DIR_ENV} defaulting to ~/.local/share/aeron-numba)")
        where.add_argument("--no-history", action="store_true", help="do not append the run to the history")
    gate.add_argument("--baseline", help="baseline file (default benchmarks/baseline.json)")
    gate.add_argument("--summary", help="compare this run's summary.json instead of running")
    gate.add_argument("--update-baseline", action="store_true", help="store this run's ratios as the baseline")
    gate.add_argument("--threshold", type=float, help="override every ratio's allowed worsening factor")
    args = parser.parse_args(argv)

    from benchmarks import gate as gate_module
    from benchmarks.plan import build_plan
    from benchmarks.runner import default_out_dir, run_suite

    # What the user typed is checked before anything starts: a pattern matching nothing, an --out that cannot
    # be a directory get one line, not a traceback.
    runs = args.command == "run" or not args.summary
    history_dir = None if args.no_history or not runs else Path(args.history or default_history_dir())
    try:
        if runs:
            build_plan(_profile(args), args.only)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
    except ValueError as exc:
        return fail(parser.prog, str(exc))
    except OSError as exc:
        return fail(parser.prog, user_error_line(exc, "--out directory"))
    try:
        if history_dir is not None:
            history_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return fail(parser.prog, user_error_line(exc, "--history directory"))

    if args.command == "run":
        out = Path(args.out) if args.out else default_out_dir(_profile(args))
        summary = run_suite(_profile(args), out, args.only, history_dir=history_dir)
        passed = all(c.get("ok") for c in summary["cases"].values()) and "history_error" not in summary
        if _profile(args) == "full" and not args.only and not args.no_cluster:
            # The 3-node clusters, in the same run (their own harness and table; the quick counts keep it to
            # minutes a system): 'python -m benchmarks cluster' runs them alone, with more profiles.
            from benchmarks.cluster import bench as cluster_bench

            passed = cluster_bench.ok(cluster_bench.run(CLUSTER_PROFILE_IN_RUN, None, out / "cluster")) and passed
        return 0 if passed else 1
    if args.summary:
        try:
            summary = gate_module.load_summary(args.summary)
        except OSError as exc:
            return fail(parser.prog, f"cannot read --summary {args.summary}: {exc.strerror}")
        except ValueError as exc:  # json's errors are ValueErrors
            return fail(parser.prog, f"--summary {args.summary} is not a run's summary.json: {exc}")
    else:
        summary = run_suite(_profile(args), args.out, args.only, history_dir=history_dir)
    baseline_path = args.baseline or gate_module.DEFAULT_BASELINE
    if args.update_baseline:
        gate_module.update_baseline(baseline_path, summary)
        print(f"baseline for profile {summary['meta']['profile']!r} written to {baseline_path}")
        return 0
    outcome = gate_module.compare(summary, gate_module.load_baseline(baseline_path), threshold=args.threshold)
    print(gate_module.format_outcome(outcome))
    return 0 if outcome["passed"] else 1


if __name__ == "__main__":
    from aeron_numba.child_processes import exit_on_signals

    with exit_on_signals():  # SIGINT/SIGTERM unwind through the runs' clean-up: processes stopped, dirs removed
        sys.exit(main())
