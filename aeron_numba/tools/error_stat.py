"""aeron-error-stat: print the distinct errors of a driver's error log, like Aeron's ``ErrorStat`` (spec §10).

```
***
3 observations from 2025-02-03 14:05:06.789+0000 to 2025-02-03 14:07:00.001+0000 for:
 aeron_numba.errors.RegistrationError: unknown publication
	at conductor.on_remove_publication(conductor.py:120)

1 distinct errors observed.
```
Reads the last section of ``<aeron dir>/cnc.dat``, or with ``--file`` any file holding a distinct error log
from ``--offset`` on (archive and cluster mark files keep one too), as Aeron's C ``error_stat -f -o``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from aeron_numba import cli
from aeron_numba.cli import fail
from aeron_numba.errors import LayoutError
from aeron_numba.tools._common import (
    EXIT_OK,
    ToolError,
    add_dir_argument,
    add_timeout_argument,
    aeron_dir_of,
    close_quietly,
    format_timestamp_ms,
    non_negative_int,
    open_cnc,
    print_lines,
)

if TYPE_CHECKING:  # the kernels are imported where they are used: --help must not load Numba
    import numpy as np

    from aeron_numba.kernels.error_log import ErrorObservation

TOOL = "aeron-error-stat"


def observation_lines(observation: ErrorObservation, tz: tzinfo | None = None) -> list[str]:
    """``***``, the count and time span, then the error text indented by one space (as ErrorStat prints it)."""
    first = format_timestamp_ms(observation.first_observation_timestamp_ms, tz)
    last = format_timestamp_ms(observation.last_observation_timestamp_ms, tz)
    return [
        "***",
        f"{observation.observation_count} observations from {first} to {last} for:",
        *f" {observation.encoded_exception}".split("\n"),
    ]


def error_stat_lines(observations: list[ErrorObservation], tz: tzinfo | None = None) -> list[str]:
    lines: list[str] = []
    for observation in observations:
        lines.extend(observation_lines(observation, tz))
    lines.extend(["", f"{len(observations)} distinct errors observed."])
    return lines


def read_error_log(buffer: np.ndarray) -> tuple[list[str], bool]:
    """The report lines of an error log view, and whether a corrupt record cut the walk short."""
    from aeron_numba.kernels.error_log import ErrorLogReader

    return error_stat_lines(ErrorLogReader.read(buffer)), ErrorLogReader.is_corrupt(buffer)


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog or TOOL,
                                     description="Print the distinct errors a media driver recorded.")
    cli.add_version_argument(parser)
    add_dir_argument(parser)
    add_timeout_argument(parser)
    parser.add_argument("-f", "--file", help="read the distinct error log in this file instead of cnc.dat")
    parser.add_argument(
        "-o", "--offset", type=non_negative_int, default=0, metavar="BYTES",
        help="with --file: where the error log starts in the file (default 0)",
    )
    return parser.parse_args(argv)


def _lines_from_file(path: Path, offset: int) -> tuple[list[str], bool]:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ToolError(f"error log file {path} does not exist") from None
    if offset > size:
        raise ToolError(f"--offset={offset} > length={size} of {path}")
    if offset == size:
        return error_stat_lines([]), False
    try:
        from aeron_numba.layout.mapped_file import MappedFile

        mapped = MappedFile.open(path)
    except (OSError, LayoutError) as exc:
        raise ToolError(f"cannot map {path}: {exc}") from None
    with mapped:
        view = mapped.buffer[offset:]
        try:
            return read_error_log(view)
        finally:
            del view


def _lines_from_cnc(args: argparse.Namespace) -> tuple[list[str], bool]:
    cnc_file = open_cnc(aeron_dir_of(args), args.timeout)
    try:
        result = read_error_log(cnc_file.error_log_buffer)
    except BaseException:
        close_quietly(cnc_file)
        raise
    cnc_file.close()
    return result


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    try:
        lines, corrupt = _lines_from_file(Path(args.file), args.offset) if args.file else _lines_from_cnc(args)
    except ToolError as exc:
        return fail(TOOL, str(exc))
    print_lines(lines)
    if corrupt:
        return fail(TOOL, "the error log holds a corrupt record: errors after it were not read")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
