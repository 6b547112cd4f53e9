"""The archive's command line: ``python -m aeron_numba archive``, ``python -m aeron_numba.archive``,
``aeron-numba-archive``.

Parses the arguments and sets up logging before importing the archive itself, so ``--help`` (which lists every
setting) and ``--version`` answer without importing Numba.
"""

from __future__ import annotations

import argparse
import logging
import os

from aeron_numba import cli
from aeron_numba.child_processes import exit_on_signals
from aeron_numba.cli import fail, user_error_line
from aeron_numba.archive.context import ArchiveContext

MODULE = "aeron_numba.archive"
log = logging.getLogger("aeron_numba.archive")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from aeron_numba.settings_doc import help_epilog

    prog = cli.prog_name(MODULE, prog)
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an aeron-numba archive (record, list, replay, replicate streams) in this process until\n"
                    "SIGINT/SIGTERM. Settings come from AERON_ARCHIVE_* environment variables.",
        epilog=help_epilog(ArchiveContext, prog))
    parser.add_argument("--archive-dir", help="archive dir (default: AERON_ARCHIVE_DIR, else aeron-archive)")
    parser.add_argument("--dir", help="aeron dir of the media driver (default: AERON_DIR)")
    parser.add_argument("--embedded-driver", action="store_true",
                        help="start a media driver (a child process) on the aeron dir first")
    cli.add_logging_arguments(parser)
    cli.add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    level = cli.configure_logging(parser, args.verbose)
    cli.warn_ignored_variables(log)
    from aeron_numba.archive.archive import ARCHIVE_VERSION, Archive
    from aeron_numba.errors import AeronError

    overrides = {k: v for k, v in (("archive_dir", args.archive_dir), ("aeron_dir", args.dir)) if v}
    driver = None
    # SIGINT/SIGTERM while starting up unwind through the clean-up below, which a second one cannot cut short.
    with exit_on_signals():
        try:
            try:
                # Every setting is checked before anything starts: a bad one must not leave a driver behind.
                ctx = ArchiveContext.from_env(**overrides).conclude()
                if args.embedded_driver:
                    if args.verbose:  # the driver logs at the archive's level
                        os.environ[cli.LOG_LEVEL_ENV] = logging.getLevelName(level)
                    driver = _launch_embedded_driver(ctx)
                    ctx.aeron_dir = driver.aeron_dir
                archive = Archive(ctx)
            except (AeronError, ValueError, OSError) as exc:
                # An OSError here is the user's archive dir (a file in the way, read-only, no room): say what to do.
                return fail(parser.prog, user_error_line(exc, "archive path") if isinstance(exc, OSError) else str(exc))
            print(f"aeron-numba archive {ARCHIVE_VERSION} in {archive.ctx.archive_dir}, archiveId "
                  f"{archive.ctx.archive_id}, pid {os.getpid()}"
                  + (f"; recovered {archive.recovered}" if archive.recovered else ""), flush=True)
            archive.run()  # from here the runner's own handlers turn SIGINT/SIGTERM into a clean stop
            return 0
        finally:
            if driver is not None:
                driver.close()


def _launch_embedded_driver(ctx: ArchiveContext):
    """The ``--embedded-driver`` child: settings checked first, and its dir removed when it stops unless
    ``AERON_DIR_DELETE_ON_SHUTDOWN`` says otherwise (it lives and dies with this archive)."""
    from aeron_numba.driver import DriverContext, MediaDriverProcess

    overrides = {"aeron_dir": ctx.aeron_dir} if ctx.aeron_dir else {}
    driver_ctx = DriverContext.from_env(**overrides)
    if "AERON_DIR_DELETE_ON_SHUTDOWN" not in os.environ:
        driver_ctx.dir_delete_on_shutdown = True
    return MediaDriverProcess.launch(driver_ctx.conclude())
