"""What every command line of the package shares: the program name a user typed, ``--version``, logging
(``--verbose`` / ``AERON_LOG_LEVEL``), and one line instead of a traceback for an error the user caused.

An operating-system error from creating a directory or a file is the user's (a bad ``--dir`` or ``--out``, a full
or read-only file system), so the entry points catch ``OSError`` where they set up and print ``user_error_line``
of it; a bug still shows its traceback.

Imports nothing but the standard library and ``aeron_numba``'s light package module: a ``--help`` or
``--version`` answers before Numba or a kernel is imported (the tools' start-up time is mostly that import).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from typing import Mapping

import aeron_numba

#: Python logging level of every component (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``); ``--verbose`` wins.
LOG_LEVEL_ENV = "AERON_LOG_LEVEL"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Where a user finds every setting (generated from the contexts by ``aeron_numba/settings_doc.py``).
SETTINGS_REFERENCE = "docs/settings.md, or print them with: python -m aeron_numba settings"


def prog_name(module: str, prog: str | None = None) -> str:
    """The command as the user typed it: ``prog`` when a front door passes one, the console script's name, or
    ``python -m <module>`` when Python ran a file (argparse would show ``__main__.py``)."""
    if prog:
        return prog
    invoked = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not invoked or invoked.endswith(".py") or invoked in ("-c", "-m"):
        return f"python -m {module}"
    return invoked


def version_text(prog: str) -> str:
    return f"{prog} (aeron-numba {aeron_numba.__version__}; Aeron 1.48 wire and file formats)"


class _VersionAction(argparse.Action):
    """``--version``: one unwrapped line (argparse's own action wraps it to the terminal's width)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text(parser.prog))
        parser.exit()


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help=f"log what happens (-v: INFO, -vv: DEBUG) to stderr; default: ${LOG_LEVEL_ENV}, "
                             f"else WARNING")


def log_level(verbosity: int, environ: Mapping[str, str] | None = None) -> int:
    """The logging level for ``-v`` given ``verbosity`` times, else ``AERON_LOG_LEVEL``, else WARNING.

    Raises ``ValueError`` naming the variable's value and the levels it may take."""
    if verbosity >= 2:
        return logging.DEBUG
    if verbosity == 1:
        return logging.INFO
    environ = os.environ if environ is None else environ
    name = environ.get(LOG_LEVEL_ENV, "").strip().upper()
    if not name:
        return logging.WARNING
    if name not in LOG_LEVELS:
        raise ValueError(f"{LOG_LEVEL_ENV}={environ[LOG_LEVEL_ENV]!r} must be one of {', '.join(LOG_LEVELS)}")
    return getattr(logging, name)


def warn_ignored_variables(logger: logging.Logger) -> None:
    """Name every AERON_* variable of this process that no part of aeron-numba reads: a setting a user expects
    to act must not be silently ignored."""
    from aeron_numba.settings_doc import ignored_variables

    for name in ignored_variables():
        logger.warning("%s=%r is not a setting aeron-numba reads: it has no effect (see %s)", name, os.environ[name],
                       SETTINGS_REFERENCE)


def configure_logging(parser: argparse.ArgumentParser, verbosity: int) -> int:
    """Send the package's log records (loggers ``aeron_numba.*``) to stderr at the chosen level; a bad
    ``AERON_LOG_LEVEL`` is a usage error. Returns the level, for child processes to inherit."""
    try:
        level = log_level(verbosity)
    except ValueError as exc:
        parser.error(str(exc))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("aeron_numba")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
    return level


# What to do about each cause a user can fix, by errno.
_ADVICE = {
    errno.ENOENT: "a parent directory is missing or cannot hold directories: choose a path under a directory "
                  "you can write",
    errno.ENOTDIR: "a part of the path is a file, not a directory: choose another path",
    errno.EEXIST: "something else is in the way: remove it or choose another path",
    errno.EISDIR: "it is a directory: choose a file path",
    errno.EACCES: "permission denied: choose a directory you can write, or change its permissions",
    errno.EPERM: "not permitted: choose a directory you can write",
    errno.EROFS: "the file system is read-only: choose a path on a writable file system",
    errno.ENOSPC: "no space left on the device: free some space or choose a larger file system",
    errno.EDQUOT: "disk quota exceeded: free some space or choose another file system",
    errno.EFBIG: "the file is larger than this process may write (ulimit -f) or the file system allows: "
                 "raise the limit or choose another file system",
    errno.ENAMETOOLONG: "the path is too long: choose a shorter one",
}


def user_error_line(exc: OSError, what: str) -> str:
    """``cannot create <what> <path>: <strerror>; <advice>`` for an ``OSError`` raised while setting up.

    An error without a file name (``MappedFile.create`` words its own, naming the file) keeps its text.
    """
    reason = exc.strerror or str(exc)
    advice = _ADVICE.get(exc.errno)
    line = reason if exc.filename is None else f"cannot create {what} {os.fsdecode(exc.filename)}: {reason}"
    return line + (f"; {advice}" if advice else "")


def fail(prog: str, message: str, exit_code: int = 1) -> int:
    """Print ``prog: message`` to stderr and return the exit code for ``main`` to return."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return exit_code
