"""What the command-line tools share: the aeron dir options, mapping cnc.dat with a wait, Aeron's date format.

Tools print what they read and exit; a problem the user must fix (no driver, wrong version, corrupt file)
is a ``ToolError`` whose message ``main()`` prints to stderr before exiting with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from aeron_numba.aeron_dir import AERON_DIR_ENV, resolve_aeron_dir
from aeron_numba.errors import AeronError, LayoutError
from aeron_numba.layout import cnc

if TYPE_CHECKING:
    from aeron_numba.kernels.cnc_file import CncFile

EXIT_OK = 0
EXIT_FAILURE = 1
#: Like Aeron's C tools (``-t``): how long to wait for a starting driver's cnc.dat to become ready.
DEFAULT_CNC_TIMEOUT_MS = 1000
_CNC_POLL_S = 0.016  # the client's default idle sleep (§14)


class ToolError(AeronError):
    """A condition the user has to fix; the tool prints the message and exits with ``EXIT_FAILURE``."""


def add_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-d",
        "--dir",
        default=None,
        help=f"aeron directory (default: ${AERON_DIR_ENV}, else /dev/shm/aeron-<user> on Linux)",
    )


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t",
        "--timeout",
        type=non_negative_int,
        default=DEFAULT_CNC_TIMEOUT_MS,
        metavar="MS",
        help=f"milliseconds to wait for the driver's cnc.dat to be ready (default {DEFAULT_CNC_TIMEOUT_MS})",
    )


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} < 0")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} must be > 0")
    return value


def aeron_dir_of(args: argparse.Namespace) -> Path:
    return resolve_aeron_dir(args.dir)


def _cnc_problem(aeron_dir: Path, path: Path) -> str | None:
    """Why cnc.dat cannot be mapped yet, or None when it is worth trying."""
    if not aeron_dir.is_dir():
        return f"aeron directory {aeron_dir} does not exist: is a media driver running? (use --dir or ${AERON_DIR_ENV})"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{path} does not exist: no media driver has started in {aeron_dir}"
    if size <= cnc.END_OF_METADATA_OFFSET:
        return f"{path} is {size} bytes long: the media driver has not finished creating it"
    return None


def open_cnc(aeron_dir: Path, timeout_ms: int = DEFAULT_CNC_TIMEOUT_MS) -> CncFile:
    """Map ``<aeron_dir>/cnc.dat``, waiting up to ``timeout_ms`` for a starting driver to make it ready.

    Raises ``ToolError`` saying what was missing at the deadline, or at once for an incompatible version.
    """
    from aeron_numba.kernels.cnc_file import CncFile, CncNotReadyError  # here: a tool's --help must not load Numba

    path = aeron_dir / cnc.CNC_FILE
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        problem = _cnc_problem(aeron_dir, path)
        if problem is None:
            try:
                return CncFile.open(path)
            except CncNotReadyError as exc:
                problem = str(exc)
            except FileNotFoundError:
                problem = f"{path} does not exist: no media driver has started in {aeron_dir}"
            except LayoutError as exc:
                raise ToolError(f"{path}: {exc}") from None
            except OSError as exc:
                raise ToolError(f"cannot map {path}: {exc}") from None
        if time.monotonic() >= deadline:
            raise ToolError(problem)
        time.sleep(_CNC_POLL_S)


def close_quietly(cnc_file: CncFile) -> None:
    """Unmap while an exception is on its way out: its traceback may still hold views (BufferError)."""
    try:
        cnc_file.close()
    except BufferError:
        pass


def _as_datetime(timestamp_ms: int, tz: tzinfo | None) -> datetime | None:
    try:
        moment = datetime.fromtimestamp(timestamp_ms // 1000, tz=timezone.utc)
        return moment.astimezone(tz) if tz is not None else moment.astimezone()
    except (OverflowError, OSError, ValueError):
        return None  # a timestamp no clock could have produced (garbage in the file)


def format_timestamp_ms(timestamp_ms: int, tz: tzinfo | None = None) -> str:
    """Aeron's date format ``yyyy-MM-dd HH:mm:ss.SSSZ``, e.g. ``2025-02-03 14:05:06.789+0000``.

    Local time unless ``tz`` is given; a timestamp outside the calendar prints as the raw number.
    """
    moment = _as_datetime(timestamp_ms, tz)
    if moment is None:
        return str(timestamp_ms)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{timestamp_ms % 1000:03d}{moment:%z}"


def format_time_of_day(timestamp_ms: int, tz: tzinfo | None = None) -> str:
    """``HH:mm:ss`` (AeronStat's header clock)."""
    moment = _as_datetime(timestamp_ms, tz)
    return str(timestamp_ms) if moment is None else f"{moment:%H:%M:%S}"


def epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def print_lines(lines: list[str], prefix: str = "") -> bool:
    """Write the lines to stdout; False when the reader went away (``| head``), after which stdout is /dev/null
    so the interpreter's final flush does not fail again."""
    try:
        sys.stdout.write(prefix + "\n".join(lines) + "\n")
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False


