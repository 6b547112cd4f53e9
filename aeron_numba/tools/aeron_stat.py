"""aeron-stat: print the driver's counters, like Aeron's ``AeronStat`` (``python -m aeron_numba.tools.aeron_stat``).

```
14:05:06 - Aeron Stat (CnC v0.2.0), pid 4242, heartbeat age 3ms
======================================================================
  0:               12,345 - Bytes sent
 ...
 41:                1,024 - pub-lmt: 5 1234 1001 aeron:ipc
--
```
The header gives the driver's pid (from cnc.dat) and how long ago the driver's conductor last stamped the
to-driver ring buffer's consumer heartbeat (§6, §7.1). Rows are ``"%3d: %,20d - %s"`` as in AeronStat.
Refreshes every second until Ctrl-C, or prints once with ``--once``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from datetime import tzinfo
from typing import TYPE_CHECKING

from aeron_numba import cli
from aeron_numba.cli import fail
from aeron_numba.layout import ring_buffer
from aeron_numba.layout.bits import semantic_version_string
from aeron_numba.tools._common import (
    EXIT_OK,
    ToolError,
    add_dir_argument,
    add_timeout_argument,
    aeron_dir_of,
    close_quietly,
    epoch_ms,
    format_time_of_day,
    open_cnc,
    positive_float,
    print_lines,
)

if TYPE_CHECKING:  # the kernels are imported where they are used: --help must not load Numba
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels.counters import CounterInfo, CountersReader

TOOL = "aeron-stat"
SEPARATOR = "=" * 70
TRAILER = "--"
DEFAULT_DELAY_S = 1.0
_CLEAR_SCREEN = "\x1b[2J\x1b[H"
#: A heartbeat further ahead of this clock is garbage, not a driver (Aeron's default driver timeout).
_FUTURE_TOLERANCE_MS = 10_000


@dataclass(frozen=True)
class CounterFilter:
    """Which counters to print: any of ``type_ids`` (all when None) whose label matches ``label_pattern``."""

    type_ids: frozenset[int] | None = None
    label_pattern: re.Pattern | None = None

    def matches(self, counter: CounterInfo) -> bool:
        if self.type_ids is not None and counter.type_id not in self.type_ids:
            return False
        return self.label_pattern is None or self.label_pattern.search(counter.label) is not None


def counter_line(counter_id: int, value: int, label: str) -> str:
    """AeronStat's row: id right-aligned in 3, value with thousands separators right-aligned in 20."""
    return f"{counter_id:3d}: {value:20,d} - {label}"


def header_line(cnc_version: int, pid: int, heartbeat_age_ms: int, now_ms: int, tz: tzinfo | None = None) -> str:
    return (
        f"{format_time_of_day(now_ms, tz)} - Aeron Stat (CnC v{semantic_version_string(cnc_version)}),"
        f" pid {pid}, heartbeat age {heartbeat_age_ms}ms"
    )


def driver_heartbeat_ms(cnc_file: CncFile) -> int:
    """Epoch ms of the driver conductor's last heartbeat: the to-driver ring buffer's consumer heartbeat (§6)."""
    from aeron_numba.kernels.ring_buffer import consumer_heartbeat_time

    buffer = cnc_file.to_driver_buffer
    return int(consumer_heartbeat_time(buffer, ring_buffer.check_capacity(buffer.size)))


def counter_lines(reader: CountersReader, counter_filter: CounterFilter | None = None) -> list[str]:
    """One row per allocated counter that passes the filter, in id order."""
    counter_filter = counter_filter or CounterFilter()
    return [
        counter_line(c.counter_id, c.value, c.label) for c in reader.for_each() if counter_filter.matches(c)
    ]


def stat_lines(
    cnc_file: CncFile,
    reader: CountersReader,
    now_ms: int,
    counter_filter: CounterFilter | None = None,
    tz: tzinfo | None = None,
) -> list[str]:
    """One screen of AeronStat: header, separator, counter rows, trailer."""
    header = header_line(cnc_file.cnc_version, cnc_file.pid, now_ms - driver_heartbeat_ms(cnc_file), now_ms, tz)
    return [header, SEPARATOR, *counter_lines(reader, counter_filter), TRAILER]


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog or TOOL, description="Print the counters of an Aeron media driver.")
    cli.add_version_argument(parser)
    add_dir_argument(parser)
    add_timeout_argument(parser)
    parser.add_argument("--once", action="store_true", help="print once and exit (default: refresh until Ctrl-C)")
    parser.add_argument(
        "--delay", type=positive_float, default=DEFAULT_DELAY_S, metavar="SECONDS",
        help=f"seconds between refreshes (default {DEFAULT_DELAY_S:g})",
    )
    parser.add_argument(
        "--type", dest="type_ids", type=int, action="append", metavar="TYPE_ID",
        help="only counters of this type id (repeat for several)",
    )
    parser.add_argument("--label-regex", metavar="REGEX", help="only counters whose label matches (re.search)")
    args = parser.parse_args(argv)
    try:
        args.label_pattern = re.compile(args.label_regex) if args.label_regex is not None else None
    except re.error as exc:
        parser.error(f"--label-regex {args.label_regex!r}: {exc}")
    return args


def _watch(cnc_file: CncFile, args: argparse.Namespace) -> None:
    from aeron_numba.kernels.counters import CountersReader

    reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
    counter_filter = CounterFilter(
        frozenset(args.type_ids) if args.type_ids else None, args.label_pattern
    )
    clear = not args.once and sys.stdout.isatty()
    try:
        while True:
            lines = stat_lines(cnc_file, reader, epoch_ms(), counter_filter)
            if not print_lines(lines, _CLEAR_SCREEN if clear else "") or args.once:
                return
            time.sleep(args.delay)
    except KeyboardInterrupt:
        return


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    try:
        cnc_file = open_cnc(aeron_dir_of(args), args.timeout)
    except ToolError as exc:
        return fail(TOOL, str(exc))
    from aeron_numba.kernels.cnc_file import body_problem
    from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer

    problem = body_problem(ManyToOneRingBuffer(cnc_file.to_driver_buffer), epoch_ms(), _FUTURE_TOLERANCE_MS)
    if problem is not None:  # a valid header over garbage: its counters would be garbage too
        path = cnc_file.path
        close_quietly(cnc_file)
        return fail(TOOL, f"{path} is corrupt ({problem}): no driver wrote it; a driver started with "
                          "AERON_DIR_DELETE_ON_START=true replaces it")
    try:
        _watch(cnc_file, args)
    except BaseException:
        close_quietly(cnc_file)
        raise
    cnc_file.close()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
