"""``aeron-chaos``: chaos run folders (chaos/TIMELINE.md, format_version 1) as rows.

``spark.read.format("aeron-chaos").load(runs_dir)`` reads every run folder at or under ``runs_dir`` (a
folder holding ``timeline.jsonl`` or ``result.json``), one partition per run folder.

Option ``rows`` (default ``events``):

* ``events``: one row per line of the run's ``timeline.jsonl`` (every process's events, merged by time).

  ====================  =======  ======================================================================
  run_id                string   the run folder's name (``<scenario>-seed<seed>-<time>-<pid>-<iteration>``)
  scenario              string   from ``result.json``, else the ``run_start`` event
  seed                  bigint   likewise
  iteration             int      likewise
  line                  int      1-based line number in ``timeline.jsonl`` (the merged order)
  ts_ns                 bigint   wall clock, ns since the Unix epoch
  source                string   ``chaos`` (the controller) or the worker name
  event                 string   the event kind (``sent``, ``recv``, ``fault``, ...)
  incarnation, session, pub, seq, position, length
                        bigint   the event's field of that name when it is an integer, else null: the
                                 fields the delivery checks join on, typed so no JSON is parsed for them
  fields                string   every field but ts_ns/source/event, as compact JSON (``from_json`` or
                                 ``get_json_object`` reads the rest: fields vary by event)
  ====================  =======  ======================================================================

* ``results``: one row per run, from its ``result.json``: run_id, scenario, seed (bigint), iteration (int),
  passed (boolean), failures (array<string>), recovery_s (array<double>), messages_checked (bigint),
  duration_s (double), metrics (string: the ``metrics`` object as JSON, its keys vary by scenario) and
  path (the run folder read). A run folder without ``result.json`` (a run that broke) is an error naming it.
"""

from __future__ import annotations

import json
import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from aeron_numba.spark.run_files import RunFileError, find_run_dirs, read_json, read_json_lines, rows_option

TIMELINE_FILE = "timeline.jsonl"
RESULT_FILE = "result.json"
ROWS_OPTIONS = ("events", "results")
#: The integer event fields given their own column (chaos/TIMELINE.md "Workers").
TYPED_FIELDS = ("incarnation", "session", "pub", "seq", "position", "length")
_COMMON_FIELDS = ("ts_ns", "source", "event")
#: Rows per Arrow batch: a quick run's timeline is ~10^4 lines, a long one ~10^6.
BATCH_ROWS = 65536

EVENTS_SCHEMA = ("run_id string, scenario string, seed bigint, iteration int, line int, ts_ns bigint, "
                 "source string, event string, "
                 + ", ".join(f"{name} bigint" for name in TYPED_FIELDS) + ", fields string")
RESULTS_SCHEMA = ("run_id string, scenario string, seed bigint, iteration int, passed boolean, "
                  "failures array<string>, recovery_s array<double>, messages_checked bigint, duration_s double, "
                  "metrics string, path string")



def _int_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None



class ChaosDataSource(DataSource):
    """``spark.read.format("aeron-chaos").option("rows", "events"|"results").load(runs_dir)``."""

    @classmethod
    def name(cls) -> str:
        return "aeron-chaos"

    def schema(self) -> str:
        return EVENTS_SCHEMA if rows_option(self.options, "aeron-chaos", ROWS_OPTIONS) == "events" else RESULTS_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return ChaosReader(self.options.get("path"), rows_option(self.options, "aeron-chaos", ROWS_OPTIONS))


class ChaosReader(DataSourceReader):
    def __init__(self, runs_dir: str, rows: str):
        self.runs_dir = runs_dir
        self.rows = rows

    def partitions(self):
        run_dirs = find_run_dirs(self.runs_dir, (TIMELINE_FILE, RESULT_FILE), "chaos run folders")
        return [InputPartition(run_dir) for run_dir in run_dirs]

    def read(self, partition: InputPartition):
        # These are small JSON files, not a per-fragment hot path: Arrow arrays from Python lists are enough.
        if self.rows == "events":
            yield from read_events(partition.value)
        else:
            yield read_result(partition.value)


def _run_identity(run_dir: str, start_event: dict | None) -> tuple:
    """(scenario, seed, iteration) of a run: its result.json, else its run_start event."""
    result_path = os.path.join(run_dir, RESULT_FILE)
    source = read_json(result_path) if os.path.exists(result_path) else start_event
    if source is None:
        raise RunFileError(f"{os.path.join(run_dir, TIMELINE_FILE)}: no run_start event and no {RESULT_FILE} "
                           "beside it: the run's scenario and seed are unknown")
    scenario = source.get("scenario")
    return (None if scenario is None else str(scenario), _int_or_none(source.get("seed")),
            _int_or_none(source.get("iteration")))


def read_events(run_dir: str):
    """Arrow record batches of the events schema for one run folder."""
    import pyarrow as pa

    path = os.path.join(run_dir, TIMELINE_FILE)
    if not os.path.exists(path):
        raise RunFileError(f"{path}: missing (rows=events reads the merged timeline; rows=results needs only "
                           f"{RESULT_FILE})")
    columns = {name: [] for name in ("line", "ts_ns", "source", "event", *TYPED_FIELDS, "fields")}
    start_event = None
    for number, record in read_json_lines(path, required=_COMMON_FIELDS):
        ts_ns = _int_or_none(record["ts_ns"])
        if ts_ns is None:
            raise RunFileError(f"{path}:{number}: ts_ns={record['ts_ns']!r} is not an integer")
        if start_event is None and record["event"] == "run_start":
            start_event = record
        columns["line"].append(number)
        columns["ts_ns"].append(ts_ns)
        columns["source"].append(str(record["source"]))
        columns["event"].append(str(record["event"]))
        for name in TYPED_FIELDS:
            columns[name].append(_int_or_none(record.get(name)))
        columns["fields"].append(json.dumps({k: v for k, v in record.items() if k not in _COMMON_FIELDS},
                                            separators=(",", ":")))
    scenario, seed, iteration = _run_identity(run_dir, start_event)
    run_id = os.path.basename(os.path.normpath(run_dir))
    total = len(columns["line"])
    for start in range(0, total, BATCH_ROWS):
        stop = min(total, start + BATCH_ROWS)
        n = stop - start
        arrays = [
            pa.array([run_id] * n, pa.string()), pa.array([scenario] * n, pa.string()),
            pa.array([seed] * n, pa.int64()), pa.array([iteration] * n, pa.int32()),
            pa.array(columns["line"][start:stop], pa.int32()), pa.array(columns["ts_ns"][start:stop], pa.int64()),
            pa.array(columns["source"][start:stop], pa.string()), pa.array(columns["event"][start:stop], pa.string()),
            *(pa.array(columns[name][start:stop], pa.int64()) for name in TYPED_FIELDS),
            pa.array(columns["fields"][start:stop], pa.string()),
        ]
        names = ["run_id", "scenario", "seed", "iteration", "line", "ts_ns", "source", "event", *TYPED_FIELDS,
                 "fields"]
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def read_result(run_dir: str):
    """One Arrow record batch (one row) of the results schema for one run folder."""
    import pyarrow as pa

    path = os.path.join(run_dir, RESULT_FILE)
    result = read_json(path)
    for key in ("scenario", "seed", "passed"):
        if key not in result:
            raise RunFileError(f"{path}: missing field {key!r}")
    if not isinstance(result["passed"], bool):
        raise RunFileError(f"{path}: passed={result['passed']!r} is not true or false")
    try:
        failures = [str(f) for f in result.get("failures") or []]
        recovery_s = [float(s) for s in result.get("recovery_s") or []]
        duration_s = None if result.get("duration_s") is None else float(result["duration_s"])
    except (TypeError, ValueError) as e:
        raise RunFileError(f"{path}: a field has the wrong type: {e}") from None
    row = {
        "run_id": (os.path.basename(os.path.normpath(run_dir)), pa.string()),
        "scenario": (str(result["scenario"]), pa.string()),
        "seed": (_int_or_none(result["seed"]), pa.int64()),
        "iteration": (_int_or_none(result.get("iteration")), pa.int32()),
        "passed": (result["passed"], pa.bool_()),
        "failures": (failures, pa.list_(pa.string())),
        "recovery_s": (recovery_s, pa.list_(pa.float64())),
        "messages_checked": (_int_or_none(result.get("messages_checked")), pa.int64()),
        "duration_s": (duration_s, pa.float64()),
        "metrics": (json.dumps(result.get("metrics") or {}, separators=(",", ":")), pa.string()),
        "path": (run_dir, pa.string()),
    }
    return pa.RecordBatch.from_arrays([pa.array([value], kind) for value, kind in row.values()], names=list(row))
