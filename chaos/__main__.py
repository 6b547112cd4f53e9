"""``python -m chaos list`` | ``python -m chaos run SCENARIO|--all [--seed N] [--iterations N] [--quick] [--out DIR]``
| ``python -m chaos verify RUNS_DIR... [--out PARQUET_DIR] [--master URL] [--conf KEY=VALUE]``.

Each run prints its seed and replay command; iteration ``i`` of ``--seed S`` uses seed ``S + i`` (without
``--seed`` a random one is drawn and printed). Exit code 0 only if every run passed.

``verify`` is the Spark job ``nothing-lost`` (aeron_numba/spark/jobs/nothing_lost.py) over every run folder under
the RUNS_DIRs: in the runs that recorded their streams (the archive scenarios), each acknowledged message is in the
recording once, in order and intact, and nothing else is. Exit 0: clean; 1: a verdict is not; 2: bad input.
"""

from __future__ import annotations

import argparse
import random
import signal
import statistics
import sys
from pathlib import Path

from tqdm import tqdm

from aeron_numba.cli import fail, user_error_line

from chaos.scenario import run_scenario
from chaos.scenarios import SCENARIOS


def summary_table(results) -> str:
    rows = [("scenario", "iterations", "passed", "failed", "recovery p50 s", "recovery max s", "messages checked")]
    for name in dict.fromkeys(r.scenario for r in results):
        mine = [r for r in results if r.scenario == name]
        recoveries = [s for r in mine for s in r.recovery_s]
        rows.append((name, str(len(mine)), str(sum(r.passed for r in mine)), str(sum(not r.passed for r in mine)),
                     f"{statistics.median(recoveries):.2f}" if recoveries else "-",
                     f"{max(recoveries):.2f}" if recoveries else "-",
                     str(sum(r.messages_checked for r in mine))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the scenarios")
    run = commands.add_parser("run", help="run scenarios")
    run.add_argument("scenario", nargs="*", metavar="SCENARIO",
                     help=f"one or more of: {', '.join(SCENARIOS)}")
    run.add_argument("--all", action="store_true")
    run.add_argument("--seed", type=int)
    run.add_argument("--iterations", type=int, default=1)
    run.add_argument("--quick", action="store_true", help="short workloads (what pytest runs)")
    run.add_argument("--out", default="chaos-runs", help="where run folders go (default ./chaos-runs)")
    # Listed for --help; its arguments go whole to the job's own parser (argparse's REMAINDER drops a leading
    # option such as --help).
    commands.add_parser("verify", add_help=False, help="check the runs' recordings against what was acknowledged "
                        "(Spark; 'verify --help' for its options)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["verify"]:
        from aeron_numba.spark.jobs import nothing_lost  # PySpark is imported only for this command

        return nothing_lost.main(argv[1:], prog=f"{parser.prog} verify")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, scenario in SCENARIOS.items():
            print(f"{name:28} {scenario.summary}")
        return 0
    if args.all == bool(args.scenario):
        parser.error("give SCENARIO names or --all")
    unknown = [name for name in args.scenario if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}: `python -m chaos list` shows them")
    if args.iterations < 1:
        parser.error(f"--iterations={args.iterations} must be >= 1")
    try:  # an --out that cannot be a directory gets one line before any process starts
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return fail(parser.prog, user_error_line(exc, "--out directory"))
    names = list(SCENARIOS) if args.all else list(dict.fromkeys(args.scenario))
    base_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    results = []
    interrupted = False
    # SIGTERM (a CI timeout, ``kill``) unwinds like Ctrl-C, so every run's teardown stops its processes and
    # removes its aeron dir instead of leaving them behind. Only the first signal interrupts: a second one
    # (Ctrl-C pressed twice, ``timeout`` forwarding a signal) would cut that teardown short and orphan them.
    interrupt = _InterruptOnce()
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        _run_all(args, names, base_seed, results)
    except KeyboardInterrupt:
        interrupted = True
        print(f"\n[chaos] interrupted after {len(results)} completed runs; the unfinished run's processes and aeron dir were cleaned up", flush=True)
    print()
    print(summary_table(results))
    if interrupted:
        return 130
    return 0 if all(r.passed for r in results) else 1


class _InterruptOnce:
    """Signal handler: the first SIGINT/SIGTERM raises KeyboardInterrupt, later ones only say to wait."""

    def __init__(self):
        self.interrupted = False

    def __call__(self, signum, frame):
        if self.interrupted:
            print(f"\n[chaos] signal {signum} ignored: stopping the run's processes and removing its aeron dirs",
                  file=sys.stderr, flush=True)
            return
        self.interrupted = True
        raise KeyboardInterrupt(f"signal {signum}")


def _run_all(args, names, base_seed, results) -> None:
    # The bar (runs done, pass/fail so far, ETA) shows on a terminal only; the per-run lines always print.
    with tqdm(total=len(names) * args.iterations, unit="run", disable=None, dynamic_ncols=True) as bar:
        for name in names:
            for iteration in range(args.iterations):
                seed = base_seed + iteration
                bar.set_description(name)
                bar.write(f"[chaos] {name} iteration {iteration + 1}/{args.iterations} seed {seed} "
                          f"(replay: python -m chaos run {name} --seed {seed}{' --quick' if args.quick else ''})")
                result = run_scenario(SCENARIOS[name], seed, quick=args.quick, iteration=iteration, out_root=args.out)
                status = "PASS" if result.passed else "FAIL"
                bar.write(f"[chaos] {status} {name} seed {seed} in {result.duration_s:.1f}s, "
                          f"{result.messages_checked} messages checked, run folder {result.run_dir}")
                for failure in result.failures:
                    bar.write(f"    {failure}")
                results.append(result)
                bar.set_postfix(passed=sum(r.passed for r in results), failed=sum(not r.passed for r in results))
                bar.update()


if __name__ == "__main__":
    sys.exit(main())
