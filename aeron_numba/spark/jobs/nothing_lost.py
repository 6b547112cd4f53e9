"""``nothing-lost``: what publishers acknowledged in chaos runs against what the runs' recordings hold.

``python -m aeron_numba.spark nothing-lost RUNS_DIR... [--out PARQUET_DIR] [--master URL] [--conf K=V]``
(also ``python -m chaos verify``). Every run folder at or under the RUNS_DIRs whose timeline has an archive
(``process_start`` of role ``archive``, chaos/TIMELINE.md) is checked; other runs are counted and skipped.

For each recording of each archive of a run, and each publisher ``pub`` (chaos/TIMELINE.md: a message's payload
starts with the int64 pair (pub, seq), its reserved value is ``pub << 40 | seq``), the verdicts of Jepsen's queue
and Kafka checkers, each a count and the first offending position (where the message begins in the stream):

* lost: acknowledged (a ``sent`` event) on the recording's session, inside its recorded range (from its start
  position to its stop position; an active recording: to the last message it holds), and not recorded;
* duplicated: a recorded copy of a message recorded earlier (each copy after the first counts);
* reordered: a recorded message whose seq is below the one recorded just before it from that publisher
  (first copies only, so a duplicate is not also a reorder);
* corrupted: recorded with other bytes than acknowledged (length, CRC-32 of the payload from the ``sent`` event's
  ``crc32``, or the reserved value);
* unexpected: recorded but never acknowledged on that session, except the one message past a killed publisher's
  last ``sent`` that TIMELINE.md allows (acknowledged, then killed before it could log it). A message too short
  to carry (pub, seq) is unexpected with pub null.

A recording the catalog marks INVALID (``archive-tool verify`` found it corrupt) is read too, and its verdict says
so beside what the messages show (e.g. ``corrupted; recording INVALID in the catalog``: never clean). An archive
dir that is gone is reported as a problem row. The table prints one row per (run, archive,
recording, pub); ``--out`` (default ``<first RUNS_DIR>/nothing-lost``) gets Parquet folders ``summary`` (those
rows), ``findings`` (one row per offending message) and is overwritten. Exit 0: every verdict clean; 1: something
lost, duplicated, reordered, corrupted, unexpected or unreadable; 2: bad arguments or input.

The rows stay in Spark: sent events (``aeron-chaos``) and recorded messages (``aeron-archive`` with
``messages=true``) are joined per run and session; (pub, seq) come out of the payloads by a numpy gather over the
Arrow buffer (``mapInArrow``), order and copies by window functions; only the summary and one row per run,
archive and recording reach the driver.
"""

from __future__ import annotations

import argparse
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aeron_numba import cli
from aeron_numba.layout.frame import DEFAULT_MTU_LENGTH, FRAME_ALIGNMENT, HEADER_LENGTH

APP_NAME = "aeron-numba nothing-lost"
SEQ_BITS = 40  # chaos/TIMELINE.md: reserved value pub << 40 | seq
ID_BYTES = 16  # the payload's leading little-endian int64 pair (pub, seq)
KINDS = ("lost", "duplicated", "reordered", "corrupted", "unexpected")
RUN_MARKERS = ("timeline.jsonl", "result.json")  # what makes a folder a chaos run folder (aeron-chaos)
DEFAULT_OUT = "nothing-lost"
CLEAN = "clean"
READ_STATES = ("VALID", "INVALID")  # the recording states whose messages are compared
INVALID_NOTE = "recording INVALID in the catalog"
_GROUP = ("run_id", "archive", "recording_id", "pub")
SUMMARY_COLUMNS = ("run_id", "scenario", "archive", "recording_id", "pub", "acked", "recorded",
                   *(name for kind in KINDS for name in (kind, f"first_{kind}")), "verdict")
_RECORDED_SCHEMA = ("run_id string, archive string, recording_id bigint, session_id int, position bigint, "
                    "reserved_value bigint, payload_crc bigint, payload_length int, pub bigint, seq bigint")
_RANGES_SCHEMA = ("run_id string, archive string, recording_id bigint, session_id int, start_position bigint, "
                  "stop_position bigint, state string")
_FINDINGS_SCHEMA = ("run_id string, archive string, recording_id bigint, pub bigint, seq bigint, kind string, "
                    "position bigint")
SUMMARY_SCHEMA = ", ".join(f"{name} {'string' if name in ('run_id', 'scenario', 'archive', 'verdict') else 'bigint'}"
                           for name in SUMMARY_COLUMNS)


# --------------------------------------------------------------------------------------- payload decoding
def message_ids(payload) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pub, seq, valid) of each value of the Arrow binary array ``payload``: its first 16 bytes as two
    little-endian int64, gathered with numpy from the array's buffers (no Python per row). ``valid`` is false
    for a null or a payload shorter than 16 bytes; pub and seq are 0 there."""
    import pyarrow as pa

    n = len(payload)
    offset_type = np.int64 if pa.types.is_large_binary(payload.type) else np.int32
    _, offsets_buffer, data_buffer = payload.buffers()
    ids = np.zeros((n, 2), np.int64)
    if n == 0:
        return ids[:, 0], ids[:, 1], np.zeros(0, np.bool_)
    offsets = np.frombuffer(offsets_buffer, offset_type, count=n + 1,
                            offset=payload.offset * np.dtype(offset_type).itemsize)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    valid = (offsets[1:] - offsets[:-1]) >= ID_BYTES
    if payload.null_count:
        valid &= ~np.asarray(payload.is_null().to_numpy(zero_copy_only=False), np.bool_)
    rows = np.flatnonzero(valid)
    if rows.size:
        gathered = data[starts[rows, None] + np.arange(ID_BYTES)]
        ids[rows] = np.ascontiguousarray(gathered).view("<i8")
    return ids[:, 0], ids[:, 1], valid


def _with_message_ids(batches):
    """``mapInArrow`` body: each batch of recorded messages without its payload, with pub and seq."""
    import pyarrow as pa

    for batch in batches:
        pub, seq, valid = message_ids(batch.column("payload"))
        kept = [name for name in batch.schema.names if name != "payload"]
        yield pa.RecordBatch.from_arrays(
            [batch.column(name) for name in kept] + [pa.array(pub, mask=~valid), pa.array(seq, mask=~valid)],
            names=kept + ["pub", "seq"])


# ------------------------------------------------------------------------------------------ the Spark plan
def _aligned(expr: str) -> str:
    return f"((({expr}) + {FRAME_ALIGNMENT - 1}) div {FRAME_ALIGNMENT}) * {FRAME_ALIGNMENT}"


#: Where an acknowledged message begins: its end (the ``sent`` position) less its frames, every fragment but the
#: last carrying ``mtu - header`` payload bytes (chaos/TIMELINE.md ``publication``: mtu; absent: Aeron's default).
BEGIN_POSITION = (
    f"acked_position - (floor(length / (mtu - {HEADER_LENGTH})) * {_aligned('mtu')} + "
    f"case when length % (mtu - {HEADER_LENGTH}) > 0 or length = 0 "
    f"then {_aligned(f'length % (mtu - {HEADER_LENGTH}) + {HEADER_LENGTH}')} else 0 end)")


@functools.lru_cache(maxsize=None)
def _functions():
    # PySpark is imported on first use, so bad arguments and --help answer without loading it.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return F, Window


def _union(frames):
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


@dataclass(frozen=True)
class Archive:
    """One archive of one run: where its folder is (or was) and what the job calls it."""

    run_id: str
    scenario: str | None
    name: str
    path: Path


def find_archives(events, run_dirs: dict[str, str]) -> list[Archive]:
    """The archives of the runs' timelines (a handful of rows collected): an archive kept in its run folder is
    read from there (``archive_subdir``), wherever the folder now is; else from ``archive_dir`` as logged."""
    F, _ = _functions()
    rows = (events.filter("event = 'process_start'")
            .select("run_id", "scenario",
                    F.get_json_object("fields", "$.role").alias("role"),
                    F.get_json_object("fields", "$.archive_dir").alias("archive_dir"),
                    F.get_json_object("fields", "$.archive_subdir").alias("archive_subdir"))
            .filter("role = 'archive' and (archive_dir is not null or archive_subdir is not null)")
            .drop("role").distinct().collect())
    archives = {}
    for row in rows:
        if row.archive_subdir and row.run_id in run_dirs:
            path, name = Path(run_dirs[row.run_id]) / row.archive_subdir, row.archive_subdir
        elif row.archive_dir:
            path, name = Path(row.archive_dir), Path(row.archive_dir).name
        else:
            continue
        archives.setdefault((row.run_id, str(path)), Archive(row.run_id, row.scenario, name, path))
    return sorted(archives.values(), key=lambda a: (a.run_id, a.name))


@dataclass
class Verdicts:
    """The job's result: ``summary`` (SUMMARY_SCHEMA rows) and ``findings`` (one row per offending message:
    run_id, archive, recording_id, pub, seq, kind, position), plus how many runs were read and had no archive."""

    summary: object
    findings: object
    runs: int
    runs_without_archive: int


def nothing_lost(spark, runs_dirs: list[str], run_dirs: dict[str, str]) -> Verdicts:
    """The verdicts for every run under ``runs_dirs`` (``run_dirs``: run_id -> run folder, to find archives kept
    in their run folders)."""
    F, _ = _functions()
    # cached: the timelines' JSON is parsed once for the run list, the archives, sent and the rest
    events = _union([spark.read.format("aeron-chaos").load(d) for d in runs_dirs]).cache()
    runs = events.select("run_id", "scenario").distinct()
    scenarios = {row.run_id: row.scenario for row in runs.collect()}
    archives = find_archives(events, run_dirs)
    present = [a for a in archives if (a.path / "archive.catalog").is_file()]
    problems = [(a.run_id, a.scenario, a.name, None,
                 f"archive dir {a.path} " + ("has no archive.catalog" if a.path.is_dir() else "is gone") +
                 ": not checked")
                for a in archives if a not in present]

    sent = _sent(events).cache()
    findings = None
    if present:
        # One row per recording: collected once, so later queries do not plan the catalog sources again.
        catalogs = _union([spark.read.format("aeron-catalog").load(str(a.path))
                           .select(F.lit(a.run_id).alias("run_id"), F.lit(a.name).alias("archive"), "recording_id",
                                   "session_id", "start_position", "stop_position", "state")
                           for a in present]).collect()
        for row in catalogs:
            if row.state not in READ_STATES + ("DELETED",):
                problems.append((row.run_id, scenarios.get(row.run_id), row.archive, row.recording_id,
                                 f"recording {row.state}: not read"))
        ranges = spark.createDataFrame([row for row in catalogs if row.state in READ_STATES], _RANGES_SCHEMA)
        recorded = _recorded(spark, present).cache()
        acked, findings = _compare(events, sent, recorded, ranges)
        summary = _summary(acked, recorded, findings.cache(), runs, ranges)
        summary = summary.unionByName(_unrecorded(spark, sent, ranges, {a.run_id for a in present}, scenarios))
    else:
        summary = spark.createDataFrame([], SUMMARY_SCHEMA)
    if problems:
        rows = [(run_id, scenario, archive, recording_id, None, None, None, *([None] * 2 * len(KINDS)), verdict)
                for run_id, scenario, archive, recording_id, verdict in problems]
        summary = summary.unionByName(spark.createDataFrame(rows, SUMMARY_SCHEMA))
    summary = summary.orderBy("run_id", "archive", "recording_id", "pub").cache()  # printed, then written
    with_archive = {a.run_id for a in archives}
    return Verdicts(summary, findings if findings is not None else spark.createDataFrame([], _FINDINGS_SCHEMA),
                    len(scenarios), len(set(scenarios) - with_archive))



def _unrecorded(spark, sent, ranges, checked_runs: set[str], scenarios: dict[str, str]):
    """Summary rows for sessions whose messages publishers acknowledged in a run with an archive, but that no
    recording of the run covers: nothing of them can be compared, which is never clean."""
    F, _ = _functions()
    recorded_sessions = ranges.select("run_id", F.col("session_id").alias("session")).distinct()
    missing = (sent.filter(F.col("run_id").isin(sorted(checked_runs)))
               .join(recorded_sessions, ["run_id", "session"], "left_anti")
               .groupBy("run_id", "pub", "session").count().collect())
    rows = [(row.run_id, scenarios.get(row.run_id), None, None, row.pub, row["count"], 0, *([None] * 2 * len(KINDS)),
             f"session {row.session}: acknowledged, never recorded") for row in missing]
    return spark.createDataFrame(rows, SUMMARY_SCHEMA)


def _sent(events):
    """Acknowledged messages: the ``sent`` events with their session's MTU and where each begins."""
    F, _ = _functions()
    mtus = (events.filter("event = 'publication'")
            .select("run_id", "session", F.get_json_object("fields", "$.mtu").cast("int").alias("mtu"))
            .dropna().dropDuplicates(["run_id", "session"]))
    return (events.filter("event = 'sent'")
            .select("run_id", "source", "pub", "seq", "session", "length",
                    F.col("position").alias("acked_position"),
                    F.get_json_object("fields", "$.crc32").cast("bigint").alias("acked_crc"))
            .join(mtus, ["run_id", "session"], "left")
            .withColumn("mtu", F.coalesce("mtu", F.lit(DEFAULT_MTU_LENGTH)))
            .withColumn("begin_position", F.expr(BEGIN_POSITION)))


def _recorded(spark, archives: list[Archive]):
    """Every whole message of the archives' VALID and INVALID recordings, with its payload's CRC-32 and (pub, seq)."""
    F, _ = _functions()
    frames = []
    for a in archives:
        frames.append(spark.read.format("aeron-archive").option("messages", "true")
                      .option("failOnDataLoss", "false")  # a missing segment is lost messages, reported as such
                      .option("includeInvalid", "true")  # what archive-tool verify found is reported, not skipped
                      .load(str(a.path))
                      .select(F.lit(a.run_id).alias("run_id"), F.lit(a.name).alias("archive"),
                              F.col("recording_id").cast("bigint"), "session_id", "position", "reserved_value",
                              F.crc32("payload").alias("payload_crc"),
                              F.length("payload").cast("int").alias("payload_length"), "payload"))
    return _union(frames).mapInArrow(_with_message_ids, _RECORDED_SCHEMA)


def _compare(events, sent, recorded, catalogs):
    """The acknowledged messages inside the recordings' ranges (run_id, archive, recording_id, pub, seq, ...) and
    one row per offending message (run_id, archive, recording_id, pub, seq, kind, position)."""
    F, Window = _functions()
    recording = ["run_id", "archive", "recording_id"]
    columns = [*_GROUP, "seq", "kind", "position"]
    last_begin = recorded.groupBy(*recording).agg(F.max("position").alias("last_begin"))
    ranges = catalogs.join(last_begin, recording, "left").withColumnRenamed("session_id", "session")
    acked = (sent.join(ranges, ["run_id", "session"])
             .filter("begin_position >= start_position and (stop_position >= 0 and acked_position <= stop_position"
                     " or stop_position < 0 and begin_position <= coalesce(last_begin, -1))"))
    lost = (acked.join(recorded.select(*recording, "pub", "seq").dropna().distinct(), [*recording, "pub", "seq"],
                       "left_anti")
            .select(*recording, "pub", "seq", F.lit("lost").alias("kind"), F.col("begin_position").alias("position")))

    copies = recorded.withColumn("copy", F.row_number().over(
        Window.partitionBy(*recording, "pub", "seq").orderBy("position")))
    duplicated = copies.filter("pub is not null and copy > 1").select(*_GROUP, "seq", F.lit("duplicated").alias("kind"),
                                                                      "position")
    firsts = copies.filter("pub is null or copy = 1")
    reordered = (firsts.filter("pub is not null")
                 .withColumn("previous_seq", F.lag("seq").over(Window.partitionBy(*_GROUP).orderBy("position")))
                 .filter("seq < previous_seq").select(*_GROUP, "seq", F.lit("reordered").alias("kind"), "position"))

    acked_ids = sent.select("run_id", F.col("session").alias("session_id"), "pub", "seq",
                            F.col("length").alias("acked_length"), "acked_crc")
    matched = firsts.join(acked_ids, ["run_id", "session_id", "pub", "seq"], "left")
    corrupted = (matched.filter(
        "acked_length is not null and (payload_length != acked_length or payload_crc != coalesce(acked_crc, "
        f"payload_crc) or reserved_value != (shiftleft(pub, {SEQ_BITS}) | seq))")
        .select(*_GROUP, "seq", F.lit("corrupted").alias("kind"), "position"))

    # TIMELINE.md allows one unlogged message past the last `sent` of a publisher that was killed.
    killed = (events.filter("event = 'process_exit'")
              .select("run_id", F.get_json_object("fields", "$.name").alias("source"),
                      F.get_json_object("fields", "$.exit_code").cast("int").alias("exit_code"))
              .filter("exit_code < 0").select("run_id", "source").distinct().withColumn("killed", F.lit(True)))
    allowed = (sent.groupBy("run_id", "pub", "source").agg(F.max("seq").alias("last_seq"))
               .join(killed, ["run_id", "source"])
               .select("run_id", "pub", (F.col("last_seq") + 1).alias("seq"), "killed"))
    unexpected = (matched.filter("acked_length is null").join(allowed, ["run_id", "pub", "seq"], "left")
                  .filter("killed is null").select(*_GROUP, "seq", F.lit("unexpected").alias("kind"), "position"))
    return acked, _union([lost.select(*columns), duplicated, reordered, corrupted, unexpected])


def _summary(acked, recorded, findings, runs, ranges):
    """One row per (run, archive, recording, pub) of SUMMARY_SCHEMA: acked and recorded counts, each verdict's
    count and first position, and the verdict (``clean`` or the kinds found; an INVALID recording says so)."""
    F, _ = _functions()
    no_position = F.lit(None).cast("bigint").alias("position")
    stats = _union([acked.select(*_GROUP, F.lit("acked").alias("kind"), no_position),
                    recorded.select(*_GROUP, F.lit("recorded").alias("kind"), no_position),
                    findings.select(*_GROUP, "kind", "position")])
    pivoted = (stats.groupBy(*_GROUP).pivot("kind", ["acked", "recorded", *KINDS])
               .agg(F.count(F.lit(1)).alias("n"), F.min("position").alias("first")))
    counts = [F.coalesce(F.col(f"{kind}_n"), F.lit(0)).alias(kind) for kind in ("acked", "recorded")]
    for kind in KINDS:
        counts += [F.coalesce(F.col(f"{kind}_n"), F.lit(0)).alias(kind),
                   F.col(f"{kind}_first").alias(f"first_{kind}")]
    found = F.concat_ws(", ", *[F.when(F.col(kind) > 0, F.lit(kind)) for kind in KINDS])
    states = ranges.select("run_id", "archive", "recording_id", "state")
    invalid = F.col("state") == "INVALID"
    verdict = (F.when(invalid & (found == ""), F.lit(f"messages intact; {INVALID_NOTE}"))
               .when(invalid, F.concat(found, F.lit(f"; {INVALID_NOTE}")))
               .when(found == "", F.lit(CLEAN)).otherwise(found))
    return (pivoted.select(*_GROUP, *counts).join(runs, "run_id", "left")
            .join(states, ["run_id", "archive", "recording_id"], "left")
            .withColumn("verdict", verdict)
            .select(*SUMMARY_COLUMNS))


# ---------------------------------------------------------------------------------------------- the job
_TABLE_COLUMNS = (("run", "run_id"), ("archive", "archive"), ("rec", "recording_id"), ("pub", "pub"),
                  ("acked", "acked"), ("recorded", "recorded"),
                  *((kind, kind) for kind in KINDS), ("verdict", "verdict"))


def format_table(rows: list[dict]) -> str:
    """The summary as aligned text: a verdict's count is followed by its first position (``2 @4096``)."""
    def cell(row, key):
        value = row.get(key)
        if key in KINDS and value:
            return f"{value} @{row.get(f'first_{key}')}"
        return "-" if value is None else str(value)

    table = [tuple(title for title, _ in _TABLE_COLUMNS)]
    table += [tuple(cell(row, key) for _, key in _TABLE_COLUMNS) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_TABLE_COLUMNS))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def build_parser(prog: str) -> argparse.ArgumentParser:
    from aeron_numba.spark.session import add_spark_arguments

    parser = argparse.ArgumentParser(
        prog=prog, description="Compare what the publishers of chaos runs acknowledged with what the runs' "
                               "recordings hold: lost, duplicated, reordered, corrupted and unexpected messages.")
    parser.add_argument("runs_dirs", nargs="+", metavar="RUNS_DIR",
                        help="a chaos run folder, or a folder of them (searched below)")
    parser.add_argument("--out", metavar="PARQUET_DIR",
                        help=f"where the summary and findings Parquet folders go (overwritten); default "
                             f"<first RUNS_DIR>/{DEFAULT_OUT}")
    add_spark_arguments(parser)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    prog = cli.prog_name("aeron_numba.spark nothing-lost", prog)
    args = build_parser(prog).parse_args(argv)
    from aeron_numba.spark.run_files import RunFileError, find_run_dirs
    from aeron_numba.spark.session import SparkSetupError, parse_conf, spark_session

    # A folder inside another one given would be read twice.
    roots = sorted({os.path.abspath(d) for d in args.runs_dirs})
    roots = [d for d in roots if not any(d != o and d.startswith(o.rstrip(os.sep) + os.sep) for o in roots)]
    try:
        conf = parse_conf(args.conf)
        run_dirs = {}
        for root in roots:
            for run_dir in find_run_dirs(root, RUN_MARKERS, "chaos run folders"):
                run_id = os.path.basename(os.path.normpath(run_dir))
                # a run's id is its folder's name (aeron-chaos): two folders of one name would merge into one run
                if run_id in run_dirs and os.path.realpath(run_dirs[run_id]) != os.path.realpath(run_dir):
                    raise ValueError(f"two run folders are named {run_id}: {run_dirs[run_id]} and {run_dir} (a "
                                     f"run's id is its folder's name): verify them in separate runs")
                run_dirs[run_id] = run_dir
    except (ValueError, RunFileError) as exc:
        return cli.fail(prog, str(exc), 2)
    out = Path(args.out) if args.out else Path(args.runs_dirs[0]) / DEFAULT_OUT
    try:  # an --out that cannot be a folder gets one line before Spark starts
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return cli.fail(prog, cli.user_error_line(exc, "--out directory"), 2)
    try:
        spark = spark_session(APP_NAME, args.master, conf)
    except SparkSetupError as exc:
        return cli.fail(prog, str(exc), 2)
    try:
        verdicts = nothing_lost(spark, roots, run_dirs)
        checked = verdicts.runs - verdicts.runs_without_archive
        if checked == 0:
            return cli.fail(prog, f"none of the {verdicts.runs} runs under {', '.join(args.runs_dirs)} recorded "
                                  f"its streams (no archive in its timeline): nothing to verify", 2)
        rows = [row.asDict() for row in verdicts.summary.collect()]
        verdicts.summary.write.mode("overwrite").parquet(str(out / "summary"))
        verdicts.findings.write.mode("overwrite").parquet(str(out / "findings"))
    except Exception as exc:  # noqa: BLE001 - Spark wraps our sources' input errors; show their one line
        line = input_error_line(exc)
        if line is None:
            raise
        return cli.fail(prog, line, 2)
    print(format_table(rows))
    bad = [row for row in rows if row["verdict"] != CLEAN]
    print(f"\n{checked} runs with recordings checked, {verdicts.runs_without_archive} without skipped; "
          f"{len(bad)} of {len(rows)} rows not clean; Parquet in {out}")
    return 1 if bad else 0


#: The errors our data sources raise for bad input; Spark carries their text inside its own exception.
_INPUT_ERRORS = ("RunFileError: ", "InputError: ", "ArchiveSourceError: ")


def input_error_line(exc: BaseException) -> str | None:
    """The one-line message of a data source's input error inside a Spark exception, or None for anything else
    (a bug keeps its traceback)."""
    text = str(exc)
    for marker in _INPUT_ERRORS:
        at = text.rfind(marker)
        if at >= 0:
            return text[at + len(marker):].splitlines()[0].strip()
    return None
