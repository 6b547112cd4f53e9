"""``python -m benchmarks run [--quick|--tiny] [--out DIR] [--only PATTERN ...]`` and
``python -m benchmarks gate [--quick] [--baseline FILE] [--summary FILE] [--update-baseline]``.

``run`` measures everything (``--quick``: CI-sized counts) and prints the summary table; ``gate`` runs (or
reads a run's ``summary.json``) and compares its ratios with the stored baseline, failing (exit 1) when
one got worse past its threshold. ``python -m benchmarks.kernels`` is the single-process kernel ceiling.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aeron_numba.cli import fail, user_error_line


def _profile(args) -> str:
    return "tiny" if getattr(args, "tiny", False) else ("quick" if args.quick else "full")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the benchmarks and print the summary table")
    gate = sub.add_parser("gate", help="compare a run's ratios with the baseline")
    for p in (run, gate):
        p.add_argument("--quick", action="store_true", help="short counts (what CI runs)")
        p.add_argument("--tiny", action="store_true", help="smoke-test counts: checks that everything works")
        p.add_argument("--out", help="output directory (default /tmp/aeron-numba-bench/<profile>-<time>)")
        p.add_argument("--only", nargs="+", metavar="PATTERN", help="only cases whose name matches")
    gate.add_argument("--baseline", help="baseline file (default benchmarks/baseline.json)")
    gate.add_argument("--summary", help="compare this run's summary.json instead of running")
    gate.add_argument("--update-baseline", action="store_true", help="store this run's ratios as the baseline")
    gate.add_argument("--threshold", type=float, help="override every ratio's allowed worsening factor")
    args = parser.parse_args(argv)

    from benchmarks import gate as gate_module
    from benchmarks.plan import build_plan
    from benchmarks.runner import run_suite

    # What the user typed is checked before anything starts: a pattern matching nothing, an --out that cannot
    # be a directory get one line, not a traceback.
    try:
        if args.command == "run" or not args.summary:
            build_plan(_profile(args), args.only)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
    except ValueError as exc:
        return fail(parser.prog, str(exc))
    except OSError as exc:
        return fail(parser.prog, user_error_line(exc, "--out directory"))

    if args.command == "run":
        summary = run_suite(_profile(args), args.out, args.only)
        return 0 if all(c.get("ok") for c in summary["cases"].values()) else 1
    if args.summary:
        try:
            summary = gate_module.load_summary(args.summary)
        except OSError as exc:
            return fail(parser.prog, f"cannot read --summary {args.summary}: {exc.strerror}")
        except ValueError as exc:  # json's errors are ValueErrors
            return fail(parser.prog, f"--summary {args.summary} is not a run's summary.json: {exc}")
    else:
        summary = run_suite(_profile(args), args.out, args.only)
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
