"""The benchmark history table: its columns, where it lives, and appending one run to it.

``python -m benchmarks run`` appends each run as ONE Parquet file ``run-<run_id>.parquet`` under the history
folder (written under a hidden name, then renamed: a reader never sees half a file, and nothing already
written is rewritten); ``python -m aeron_numba.spark bench-history`` reads the folder as one table. The
benchmarks write through this module and the job reads what it defines, since the library may not import the
benchmarks.

Where: ``--history DIR``, else ``$AERON_NUMBA_DATA_DIR/benchmark-history``, with ``AERON_NUMBA_DATA_DIR``
defaulting to ``$XDG_DATA_HOME/aeron-numba`` (``~/.local/share/aeron-numba`` when XDG_DATA_HOME is unset): the
XDG base-directory place for data a user keeps (the history outlives runs, /tmp does not), and one variable
moves all of it (tests and CI point it at a temporary folder).

Rows: one per benchmark case per run (``kind = 'case'``: its headline figure in ``value``, p50 for latency and
msgs/s for throughput, every percentile, the raw samples and the encoded HdrHistogram) and one per ratio per
run (``kind = 'ratio'``: ours over the floor or a peer, measured in the same run). Each row carries the run:
id, start time (UTC), git commit and whether the tree was dirty (null outside a git checkout), the machine,
the profile and the placement (the floors that show whether the two workers shared a physical core).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from aeron_numba.settings import DATA_DIR_ENV

HISTORY_FOLDER = "benchmark-history"
RUN_FILE_PREFIX = "run-"
RUN_FILE_SUFFIX = ".parquet"
RUN_FILE_GLOB = f"{RUN_FILE_PREFIX}*{RUN_FILE_SUFFIX}"
KINDS = ("case", "ratio")

#: (column, Arrow type name) in file order; Spark reads ``timestamp`` as TimestampType.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"), ("run_time", "timestamp"), ("commit", "string"), ("commit_dirty", "bool"),
    ("machine", "string"), ("cpu_model", "string"), ("cpu_count", "int32"), ("python_version", "string"),
    ("numba_version", "string"), ("profile", "string"), ("pinning", "string"),
    ("floor_compiled_p50_ns", "float64"), ("floor_python_p50_ns", "float64"), ("load_avg_start", "float64"),
    ("kind", "string"), ("name", "string"), ("metric", "string"), ("unit", "string"), ("better", "string"),
    ("placement_sensitive", "bool"), ("value", "float64"), ("ok", "bool"), ("error", "string"),
    ("p50_ns", "float64"), ("p90_ns", "float64"), ("p99_ns", "float64"), ("p999_ns", "float64"),
    ("max_ns", "float64"), ("mean_ns", "float64"), ("msgs_per_s", "float64"), ("mb_per_s", "float64"),
    ("samples", "list<float64>"), ("samples_unit", "string"), ("loops", "int64"), ("hdr_histogram", "string"),
    ("target", "float64"), ("gate", "float64"), ("numerator", "string"), ("denominator", "string"),
    ("run_dir", "string"),
)


class HistoryError(OSError):
    """The history folder is missing, empty or cannot be written (the message names it)."""


def data_dir() -> Path:
    """The project's data folder: ``$AERON_NUMBA_DATA_DIR``, else ``$XDG_DATA_HOME/aeron-numba``, else
    ``~/.local/share/aeron-numba``."""
    explicit = os.environ.get(DATA_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "aeron-numba"


def default_history_dir() -> Path:
    return data_dir() / HISTORY_FOLDER


def arrow_schema():
    import pyarrow as pa

    types = {"string": pa.string(), "bool": pa.bool_(), "int32": pa.int32(), "int64": pa.int64(),
             "float64": pa.float64(), "timestamp": pa.timestamp("us", tz="UTC"),
             "list<float64>": pa.list_(pa.float64())}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def new_run_id(started_utc) -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex>``: sorts by time, unique across machines writing to one folder."""
    return f"{started_utc:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def run_file(history_dir: str | os.PathLike, run_id: str) -> Path:
    return Path(history_dir) / f"{RUN_FILE_PREFIX}{run_id}{RUN_FILE_SUFFIX}"


def append_run(history_dir: str | os.PathLike, run_id: str, rows: list[dict]) -> Path:
    """Write one run's ``rows`` (dicts keyed by ``COLUMNS``; missing keys are null) as its own Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ValueError(f"run {run_id} has no rows to append")
    unknown = sorted(set().union(*rows) - {name for name, _ in COLUMNS})
    if unknown:
        raise ValueError(f"history rows have columns the table does not: {', '.join(unknown)}")
    folder = Path(history_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryError(f"cannot create the history folder {folder}: {exc.strerror or exc}") from exc
    final = run_file(folder, run_id)
    hidden = folder / f".{final.name}.tmp"  # Spark's file listing skips names starting with '.' or '_'
    table = pa.Table.from_pylist(rows, schema=arrow_schema())
    try:
        pq.write_table(table, hidden)
        os.replace(hidden, final)
    except OSError as exc:
        hidden.unlink(missing_ok=True)
        raise HistoryError(f"cannot write {final}: {exc.strerror or exc}") from exc
    return final


def history_files(history_dir: str | os.PathLike) -> list[Path]:
    """The run files of a history folder, or a ``HistoryError`` saying why there are none."""
    folder = Path(history_dir)
    if not folder.exists():
        raise HistoryError(f"no benchmark history at {folder}: `python -m benchmarks run` appends to it "
                           f"(or pass --history DIR)")
    if not folder.is_dir():
        raise HistoryError(f"--history {folder} is not a folder")
    files = sorted(folder.glob(RUN_FILE_GLOB))
    if not files:
        raise HistoryError(f"the benchmark history at {folder} is empty: no {RUN_FILE_GLOB} file "
                           f"(`python -m benchmarks run` appends one per run)")
    return files


def check_run_files(files: list[Path]) -> None:
    """Read each run file's Parquet footer (milliseconds a file): a damaged file is named here, in one line,
    rather than deep in a Spark task's stack trace."""
    import pyarrow.parquet as pq

    for path in files:
        try:
            pq.read_metadata(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError subclasses for a damaged file
            raise HistoryError(f"{path}: not a readable Parquet run file ({exc}); move it out of the history") from exc
