"""The media driver's command line: ``python -m aeron_numba driver``, ``python -m aeron_numba.driver``,
``aeron-numba-driver``.

Parses the arguments and sets up logging before importing the driver itself, so ``--help`` (which lists every
setting) and ``--version`` answer without importing Numba.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from aeron_numba import cli
from aeron_numba.cli import fail, user_error_line
from aeron_numba.driver.context import DriverContext

MODULE = "aeron_numba.driver"
log = logging.getLogger("aeron_numba.driver")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from aeron_numba.settings_doc import help_epilog

    prog = cli.prog_name(MODULE, prog)
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an aeron-numba media driver (aeron:ipc and aeron:udp, Aeron's SHARED threading mode)\n"
                    "in this process until SIGINT/SIGTERM. Settings come from AERON_* environment variables.",
        epilog=help_epilog(DriverContext, prog))
    parser.add_argument("--dir", help="aeron dir (default: AERON_DIR, else /dev/shm/aeron-<user>)")
    cli.add_logging_arguments(parser)
    cli.add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    cli.configure_logging(parser, args.verbose)
    cli.warn_ignored_variables(log)
    from aeron_numba.agent import StopOnSignals
    from aeron_numba.driver.media_driver import DRIVER_VERSION, MediaDriver
    from aeron_numba.errors import AeronError

    overrides = {"aeron_dir": args.dir} if args.dir else {}
    # A launcher may stop the driver as soon as cnc.dat says ready, before run() takes the signals over.
    stop = StopOnSignals()
    try:
        driver = MediaDriver(DriverContext.from_env(**overrides))
    except (AeronError, ValueError) as exc:
        return fail(parser.prog, str(exc))
    except OSError as exc:  # the user's dir: missing parent, a file in the way, read-only, no room
        return fail(parser.prog, user_error_line(exc, "aeron dir"))
    print(f"aeron-numba media driver {DRIVER_VERSION} in {driver.ctx.aeron_dir}, pid {os.getpid()}", flush=True)
    stop.forward_to(driver.runner.request_close)
    try:
        driver.run()
    except AeronError as exc:  # a network agent's thread failed and stopped the driver (recorded in its error log)
        print(f"{parser.prog}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0
