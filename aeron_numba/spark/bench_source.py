"""``aeron-bench``: benchmark runs (``python -m benchmarks run`` output folders) as rows.

``spark.read.format("aeron-bench").load(bench_dir)`` reads every run folder at or under ``bench_dir`` (a folder
holding ``summary.json``), one partition per run folder. A run folder holds ``summary.json`` (the machine
description in ``meta``, each case's figures, the ratios and the absolute targets), ``results.pyperf.json``
(pyperf's suite: each case's raw samples; absent when no case succeeded) and ``histograms.json`` (each latency
case's HdrHistogram, encoded; absent in folders written before the runner kept them).

Rows of every kind carry the run's identity: run_id (the folder's name), date (string, the runner's
local time ``YYYY-mm-dd HH:MM:SS``), profile (``tiny``/``quick``/``full``), commit (``meta.commit``, the git
commit measured; null outside a git checkout), commit_dirty (boolean: tracked files differed from the commit)
and cpu_model.

Option ``rows`` (default ``cases``):

* ``cases``: one row per benchmark case per run. Machine: cpu_count (int), tsc_ghz, python_version,
  numba_version, numpy_version, pinning, load_avg_start, load_avg_end, floor_compiled_p50_ns and
  floor_python_p50_ns (the placement floors: which vCPUs the workers shared), meta (the whole ``meta`` as
  JSON). Case: case_name (``rtt.aeron-python.32B``), label, family (``rtt``/``fixed``/``tp``/...), impl, size
  (bigint, bytes), exclusive (boolean), ok (boolean), error (string, why a case failed), kind, measured_count
  (bigint, the summary's ``count``: round trips or throughput windows measured). Figures (double, null when the case has no such figure): p50_ns, p90_ns,
  p99_ns, p999_ns, max_ns, min_ns, mean_ns (latency cases), msgs_per_s, mb_per_s (throughput cases), and
  figures (map<string,double>: every figure, its key suffixed ``_ns`` for latencies). Samples: samples
  (array<double>, pyperf's values of every run in order, warmups left out), samples_unit (``second``: each
  sample is the mean time of one of ``loops`` iterations), loops (bigint), hdr_histogram (string: the case's whole
  latency distribution in HdrHistogram's V2 compressed base64 encoding, values in ns; null for throughput).
* ``ratios``: one row per ratio per run (same-run comparisons, what the gate judges): ratio, value, better
  (``lower``/``higher``), target, met (boolean), gate (the factor the gate allows), numerator_case,
  numerator_figure, denominator_case, denominator_figure, note.
* ``targets``: one row per absolute target per run: target_name, value, target, unit, met.
"""

from __future__ import annotations

import json
import os
import re

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from aeron_numba.spark.run_files import RunFileError, find_run_dirs, read_json, rows_option

SUMMARY_FILE = "summary.json"
PYPERF_FILE = "results.pyperf.json"
HISTOGRAMS_FILE = "histograms.json"
ROWS_OPTIONS = ("cases", "ratios", "targets")

_RUN_COLUMNS = "run_id string, date string, profile string, commit string, commit_dirty boolean, cpu_model string"
#: The latency figures given their own column: summary key -> column.
LATENCY_COLUMNS = {"p50": "p50_ns", "p90": "p90_ns", "p99": "p99_ns", "p99.9": "p999_ns", "max": "max_ns",
                   "min": "min_ns", "mean": "mean_ns"}
RATE_COLUMNS = ("msgs_per_s", "mb_per_s")

CASES_SCHEMA = (
    _RUN_COLUMNS + ", cpu_count int, tsc_ghz double, python_version string, numba_version string, "
    "numpy_version string, pinning string, load_avg_start double, load_avg_end double, floor_compiled_p50_ns double, "
    "floor_python_p50_ns double, meta string, case_name string, label string, family string, impl string, "
    "size bigint, exclusive boolean, ok boolean, error string, kind string, measured_count bigint, "
    + ", ".join(f"{c} double" for c in (*LATENCY_COLUMNS.values(), *RATE_COLUMNS))
    + ", figures map<string,double>, samples array<double>, samples_unit string, loops bigint, hdr_histogram string")
RATIOS_SCHEMA = (_RUN_COLUMNS + ", ratio string, value double, better string, target double, met boolean, "
                 "gate double, numerator_case string, numerator_figure string, denominator_case string, "
                 "denominator_figure string, note string")
TARGETS_SCHEMA = _RUN_COLUMNS + ", target_name string, value double, target double, unit string, met boolean"
SCHEMAS = {"cases": CASES_SCHEMA, "ratios": RATIOS_SCHEMA, "targets": TARGETS_SCHEMA}




class BenchDataSource(DataSource):
    """``spark.read.format("aeron-bench").option("rows", "cases"|"ratios"|"targets").load(bench_dir)``."""

    @classmethod
    def name(cls) -> str:
        return "aeron-bench"

    def schema(self) -> str:
        return SCHEMAS[rows_option(self.options, "aeron-bench", ROWS_OPTIONS)]

    def reader(self, schema) -> DataSourceReader:
        return BenchReader(self.options.get("path"), rows_option(self.options, "aeron-bench", ROWS_OPTIONS))


class BenchReader(DataSourceReader):
    def __init__(self, bench_dir: str, rows: str):
        self.bench_dir = bench_dir
        self.rows = rows

    def partitions(self):
        return [InputPartition(d) for d in find_run_dirs(self.bench_dir, (SUMMARY_FILE,), "benchmark run folders")]

    def read(self, partition: InputPartition):
        # A handful of small JSON files per run, not a per-fragment hot path: Arrow arrays from Python lists.
        yield read_run(partition.value, self.rows)


class _Fields:
    """Typed access to one JSON object's fields; a wrong type raises naming the file and the field."""

    def __init__(self, path: str, where: str, obj):
        if not isinstance(obj, dict):
            raise RunFileError(f"{path}: {where} is not a JSON object")
        self.path, self.where, self.obj = path, where, obj

    def _fail(self, key, kind):
        raise RunFileError(f"{self.path}: {self.where}.{key}={self.obj[key]!r} is not {kind}")

    def float(self, key):
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self._fail(key, "a number")
        return float(value)

    def int(self, key):
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self._fail(key, "an integer")
        return value

    def str(self, key):
        value = self.obj.get(key)
        return None if value is None else str(value)

    def bool(self, key):
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self._fail(key, "true or false")
        return value

    def pair(self, key) -> tuple:
        """A ``[case, figure]`` reference of a ratio."""
        value = self.obj.get(key)
        if value is None:
            return None, None
        if not isinstance(value, list) or len(value) != 2:
            self._fail(key, "a [case, figure] pair")
        return tuple(None if v is None else str(v) for v in value)

    def dict(self, key) -> _Fields:
        return _Fields(self.path, f"{self.where}.{key}", self.obj.get(key) or {})


def _pyperf_samples(path: str) -> dict:
    """case name -> (samples, loops) from pyperf's suite JSON (its common metadata is hoisted to the suite)."""
    if not os.path.exists(path):
        return {}
    suite = read_json(path)
    suite_meta = suite.get("metadata") or {}
    samples = {}
    for index, benchmark in enumerate(suite.get("benchmarks") or []):
        bench_meta = {**suite_meta, **(benchmark.get("metadata") or {})}
        name = bench_meta.get("name")
        if name is None:
            raise RunFileError(f"{path}: benchmarks[{index}] has no name")
        values, loops = [], None
        for run in benchmark.get("runs") or []:
            run_meta = {**bench_meta, **(run.get("metadata") or {})}
            loops = run_meta.get("loops", loops)
            if loops is not None and (isinstance(loops, bool) or not isinstance(loops, int)):
                raise RunFileError(f"{path}: benchmark {name!r}: loops={loops!r} is not an integer")
            try:
                values += [float(v) for v in run.get("values") or []]
            except (TypeError, ValueError):
                raise RunFileError(f"{path}: benchmark {name!r} has a sample that is not a number") from None
        samples[name] = (values, loops)
    return samples


def _histograms(path: str) -> dict:
    """case name -> encoded HdrHistogram from ``histograms.json`` (empty for a folder without one)."""
    if not os.path.exists(path):
        return {}
    histograms = read_json(path).get("histograms") or {}
    if not isinstance(histograms, dict) or not all(isinstance(v, str) for v in histograms.values()):
        raise RunFileError(f"{path}: 'histograms' is not an object of encoded histograms (strings)")
    return histograms


def read_run(run_dir: str, rows: str):
    """One Arrow record batch of the ``rows`` schema for one run folder."""
    import pyarrow as pa

    path = os.path.join(run_dir, SUMMARY_FILE)
    summary = read_json(path)
    for key in ("meta", "cases"):
        if not isinstance(summary.get(key), dict):
            raise RunFileError(f"{path}: no {key!r} object (not a benchmarks summary)")
    meta = _Fields(path, "meta", summary["meta"])
    run = {"run_id": os.path.basename(os.path.normpath(run_dir)), "date": meta.str("date"),
           "profile": meta.str("profile"), "commit": meta.str("commit"), "commit_dirty": meta.bool("commit_dirty"),
           "cpu_model": meta.str("cpu_model")}
    out = []
    if rows == "cases":
        placement = _Fields(path, "placement", summary.get("placement") or {})
        machine = {"cpu_count": meta.int("cpu_count"), "tsc_ghz": meta.float("tsc_ghz"),
                   "python_version": meta.str("python"), "numba_version": meta.str("numba"),
                   "numpy_version": meta.str("numpy"), "pinning": meta.str("pinning"),
                   "load_avg_start": meta.float("load_avg_start"), "load_avg_end": meta.float("load_avg_end"),
                   "floor_compiled_p50_ns": placement.float("floor_compiled_p50_ns"),
                   "floor_python_p50_ns": placement.float("floor_python_p50_ns"),
                   "meta": json.dumps(summary["meta"], separators=(",", ":"))}
        samples = _pyperf_samples(os.path.join(run_dir, PYPERF_FILE))
        histograms = _histograms(os.path.join(run_dir, HISTOGRAMS_FILE))
        for name, raw in summary["cases"].items():
            case = _Fields(path, f"cases[{name!r}]", raw)
            latency, rates = case.dict("figures_ns"), case.dict("figures")
            figures = {f"{k}_ns": latency.float(k) for k in latency.obj}
            figures.update({k: rates.float(k) for k in rates.obj})
            values, loops = samples.get(name, ([], None))
            out.append({**run, **machine, "case_name": name, "label": case.str("label"),
                        "family": case.str("family"), "impl": case.str("impl"), "size": case.int("size"),
                        "exclusive": case.bool("exclusive"), "ok": case.bool("ok"), "error": case.str("error"),
                        "kind": case.str("kind"), "measured_count": case.int("count"),
                        **{column: latency.float(key) for key, column in LATENCY_COLUMNS.items()},
                        **{column: rates.float(column) for column in RATE_COLUMNS},
                        "figures": figures, "samples": values, "samples_unit": "second" if values else None,
                        "loops": loops, "hdr_histogram": histograms.get(name)})
    elif rows == "ratios":
        for name, raw in (summary.get("ratios") or {}).items():
            ratio = _Fields(path, f"ratios[{name!r}]", raw)
            numerator, denominator = ratio.pair("numerator"), ratio.pair("denominator")
            out.append({**run, "ratio": name, "value": ratio.float("value"), "better": ratio.str("better"),
                        "target": ratio.float("target"), "met": ratio.bool("met"), "gate": ratio.float("gate"),
                        "numerator_case": numerator[0], "numerator_figure": numerator[1],
                        "denominator_case": denominator[0], "denominator_figure": denominator[1],
                        "note": ratio.str("note")})
    else:
        for name, raw in (summary.get("targets") or {}).items():
            target = _Fields(path, f"targets[{name!r}]", raw)
            out.append({**run, "target_name": name, "value": target.float("value"),
                        "target": target.float("target"), "unit": target.str("unit"), "met": target.bool("met")})
    return pa.RecordBatch.from_pylist(out, schema=_arrow_schema(rows))


_ARROW_TYPES = {"string": "string", "bigint": "int64", "int": "int32", "double": "float64", "boolean": "bool_"}


def _arrow_type(ddl: str):
    import pyarrow as pa

    if ddl.startswith("array<"):
        return pa.list_(_arrow_type(ddl[len("array<"):-1]))
    if ddl.startswith("map<"):
        key, value = ddl[len("map<"):-1].split(",")
        return pa.map_(_arrow_type(key.strip()), _arrow_type(value.strip()))
    return getattr(pa, _ARROW_TYPES[ddl])()


def _arrow_schema(rows: str):
    """The Arrow schema of ``SCHEMAS[rows]`` (Spark's DDL parser needs a JVM, which executors' Python lacks)."""
    import pyarrow as pa

    columns = re.split(r",\s*(?![^<]*>)", SCHEMAS[rows])
    return pa.schema([(name, _arrow_type(kind)) for name, kind in (c.split(" ", 1) for c in columns)])
