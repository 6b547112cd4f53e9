"""``python -m aeron_numba.spark <job> [args]`` (also ``python -m aeron_numba spark <job>``): the Spark jobs of
``aeron_numba.spark.jobs.JOBS``."""

from __future__ import annotations

import argparse
import importlib
import sys

from aeron_numba import cli
from aeron_numba.spark.jobs import JOBS

MODULE = "aeron_numba.spark"


def build_parser(prog: str) -> argparse.ArgumentParser:
    width = max(map(len, JOBS), default=0)
    listed = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in JOBS.items())
    parser = argparse.ArgumentParser(
        prog=prog, usage=f"{prog} [-h] [--version] <job> [args]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="aeron-numba's data pipeline on Spark: jobs over archive recordings, chaos runs and benchmark "
                    "runs.\nEach prints a table and writes Parquet; --master points it at any Spark cluster "
                    "(default local[*]).",
        epilog=f"jobs:\n{listed}\n\n'{prog} <job> --help' tells more.")
    cli.add_version_argument(parser)
    parser.add_argument("job", choices=JOBS, metavar="<job>", help="one of the jobs below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    prog = cli.prog_name(MODULE, prog)
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    module = importlib.import_module(JOBS[args.job][0])
    return module.main(args.args, prog=f"{prog} {args.job}")


if __name__ == "__main__":
    sys.exit(main())
