"""aeron-loss-stat: print the driver's loss report as CSV, like Aeron's ``LossStat`` (spec §13.1).

```
#OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, STREAM_ID, CHANNEL, SOURCE
2,4096,2025-02-03 14:05:06.789+0000,2025-02-03 14:05:07.001+0000,1234,1001,aeron:udp?endpoint=localhost:20121,127.0.0.1:40123
1 entries read
```
Reads ``<aeron dir>/loss-report.dat`` (no running driver needed). Channel and source are printed as they
are, commas included, as Aeron does.
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
from aeron_numba.layout.loss_report import LOSS_REPORT_FILE
from aeron_numba.tools._common import (
    EXIT_OK,
    ToolError,
    add_dir_argument,
    aeron_dir_of,
    format_timestamp_ms,
    print_lines,
)

if TYPE_CHECKING:  # the kernels are imported where they are used: --help must not load Numba
    from aeron_numba.kernels.loss_report import LossEntry, LossReportScan

TOOL = "aeron-loss-stat"
HEADER = (
    "#OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION,"
    " SESSION_ID, STREAM_ID, CHANNEL, SOURCE"
)


def entry_line(entry: LossEntry, tz: tzinfo | None = None) -> str:
    return ",".join(
        (
            str(entry.observation_count),
            str(entry.total_bytes_lost),
            format_timestamp_ms(entry.first_observation_timestamp_ms, tz),
            format_timestamp_ms(entry.last_observation_timestamp_ms, tz),
            str(entry.session_id),
            str(entry.stream_id),
            entry.channel,
            entry.source,
        )
    )


def loss_stat_lines(entries: list[LossEntry], tz: tzinfo | None = None) -> list[str]:
    return [HEADER, *(entry_line(entry, tz) for entry in entries), f"{len(entries)} entries read"]


def scan_loss_report(path: Path) -> LossReportScan:
    """Map ``loss-report.dat`` and read it; ``ToolError`` if it does not exist or cannot be mapped."""
    from aeron_numba.kernels.loss_report import LossReportReader, LossReportScan
    from aeron_numba.layout.mapped_file import MappedFile

    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ToolError(f"Loss report does not exist: {path}") from None
    if size == 0:
        return LossReportScan([], None)
    try:
        mapped = MappedFile.open(path)
    except (OSError, LayoutError) as exc:
        raise ToolError(f"cannot map {path}: {exc}") from None
    with mapped:
        return LossReportReader.scan(mapped.buffer)


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog or TOOL,
                                     description="Print the loss a media driver observed, per stream.")
    cli.add_version_argument(parser)
    add_dir_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    path = aeron_dir_of(args) / LOSS_REPORT_FILE
    try:
        scan = scan_loss_report(path)
    except ToolError as exc:
        return fail(TOOL, str(exc))
    print_lines(loss_stat_lines(scan.entries))
    if scan.corrupt_offset is not None:
        return fail(TOOL, f"{path}: corrupt entry at offset {scan.corrupt_offset}: entries after it were not read")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
