"""The ``nothing-lost`` job over a real archive chaos run made in the test (``python -m chaos run``) and copies of
its folder, each altered the way the failure it models would leave the files: a message's frame turned into
padding (lost), two neighbouring frames swapped (reordered), a copy of a frame appended to the recording
(duplicated), one payload byte flipped in a segment file (corrupted), a frame no publisher acknowledged appended
(unexpected), a killed publisher with one unlogged message and one more after it, a flipped byte in a recording
archive-tool marked INVALID, and an archive dir gone. One job run reads them all; each copy must flip exactly its
verdict, at the right first position, and the untouched run must stay clean."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from aeron_numba.archive.catalog import Catalog
from aeron_numba.layout import archive as A
from aeron_numba.layout import frame as fr
from aeron_numba.layout.bits import align
from aeron_numba.spark.jobs import nothing_lost
from chaos.workload import SEQ_BITS, message_bytes

PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "archive-control-client-abandoned"  # records the stream from its first message to its last
KINDS = nothing_lost.KINDS


def _chaos_run(out: Path) -> Path:
    """A passing run of SCENARIO under ``out``. The run is this test's input, not what it checks: one broken by
    the machine (a client starved past its liveness timeout while Numba compiles on a loaded host) is made again
    once, in a fresh folder."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for attempt in range(2):
        folder = out / f"attempt{attempt}"
        done = subprocess.run([sys.executable, "-m", "chaos", "run", SCENARIO, "--quick", "--seed", "11", "--out",
                               str(folder)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            (run_dir,) = [p.parent for p in folder.rglob("result.json")]
            return run_dir
    raise AssertionError(f"chaos run failed twice:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


class Recording:
    """A run folder's recording 0 (its archive kept in the folder): its descriptor, the acknowledged messages,
    and raw frame edits through the segment file layout of spec/archive.md §4.1."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.archive = run_dir, run_dir / "archive"
        with Catalog.open(self.archive, create=False, read_only=True) as catalog:
            self.d = catalog.descriptor(0)
        self.sent = {e["seq"]: e for e in map(json.loads, (run_dir / "timeline.jsonl").read_text().splitlines())
                     if e["event"] == "sent"}

    def begin(self, seq: int) -> int:
        e = self.sent[seq]
        return e["position"] - self.frame_length(seq)

    def _locate(self, position: int) -> tuple[Path, int]:
        d = self.d
        base = A.segment_file_base_position(d.start_position, position, d.term_buffer_length, d.segment_file_length)
        return self.archive / A.segment_file_name(0, base), position - base

    def read(self, position: int, length: int) -> bytes:
        path, offset = self._locate(position)
        return path.read_bytes()[offset:offset + length]

    def write(self, position: int, data: bytes) -> None:
        path, offset = self._locate(position)
        if not path.exists():
            path.write_bytes(bytes(self.d.segment_file_length))
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(data)

    def frame_length(self, seq: int) -> int:
        return align(self.sent[seq]["length"] + fr.HEADER_LENGTH, fr.FRAME_ALIGNMENT)

    def rewrite(self, position: int, data: bytes) -> None:
        """Write a whole frame at ``position`` with the term offset and term id it has there."""
        data = bytearray(data)
        term = self.d.term_buffer_length
        struct.pack_into("<i", data, fr.TERM_OFFSET_FIELD_OFFSET, position % term)
        struct.pack_into("<i", data, fr.TERM_ID_FIELD_OFFSET, self.d.initial_term_id + position // term)
        self.write(position, bytes(data))

    def append(self, frames: list[bytes]) -> list[int]:
        """Write ``frames`` (whole, aligned) after the recording's end as the recorder would (a term's rest
        padded when a frame does not fit), with their term offset and term id; move the stop position past them.
        Returns where each frame begins."""
        term = self.d.term_buffer_length
        position, at = self.stop, []
        for data in frames:
            if position % term + len(data) > term:
                rest = term - position % term
                self.write(position, self._header(position, rest, fr.HDR_TYPE_PAD) + bytes(rest - fr.HEADER_LENGTH))
                position += rest
            self.rewrite(position, data)
            at.append(position)
            position += len(data)
        with Catalog.open(self.archive, create=False) as catalog:
            catalog.update_stop_position(0, position, self.d.stop_timestamp)
        return at

    @property
    def stop(self) -> int:
        with Catalog.open(self.archive, create=False, read_only=True) as catalog:
            return catalog.stop_position(0)

    def _header(self, position: int, length: int, frame_type: int, reserved: int = 0) -> bytes:
        term = self.d.term_buffer_length
        return struct.pack("<iBBHiiiiq", length, fr.CURRENT_VERSION, fr.UNFRAGMENTED, frame_type, position % term,
                           self.d.session_id, self.d.stream_id, self.d.initial_term_id + position // term, reserved)

    def frame(self, seq: int) -> bytes:
        """The recorded frame of acknowledged message ``seq`` (checked: its header says so)."""
        e = self.sent[seq]
        data = self.read(self.begin(seq), self.frame_length(seq))
        assert struct.unpack_from("<i", data)[0] == e["length"] + fr.HEADER_LENGTH
        assert struct.unpack_from("<qq", data, fr.HEADER_LENGTH) == (0, seq)
        return data

    def new_frame(self, pub: int, seq: int, length: int) -> bytes:
        """A frame of message (pub, seq) as the workload builds it (chaos/workload.py)."""
        header = self._header(0, length + fr.HEADER_LENGTH, fr.HDR_TYPE_DATA, pub << SEQ_BITS | seq)
        data = header + message_bytes(pub, seq, length).tobytes()
        return data + bytes(align(len(data), fr.FRAME_ALIGNMENT) - len(data))


def _copy(run_dir: Path, runs: Path, suffix: str) -> Recording:
    return Recording(Path(shutil.copytree(run_dir, runs / f"{run_dir.name}-{suffix}")))


@pytest.fixture(scope="module")
def verdicts(spark, tmp_path_factory):
    """The job's exit code, printed table, summary rows by run folder suffix and findings, over the untouched
    run and its altered copies; plus what each alteration expects."""
    runs = tmp_path_factory.mktemp("runs")
    original = _chaos_run(tmp_path_factory.mktemp("made"))
    clean = _copy(original, runs, "clean")
    last = len(clean.sent) - 1
    k = next(seq for seq in range(last // 3, last) if clean.sent[seq]["length"] > 40)  # room past (pub, seq)
    expected = {"clean": {}}

    dropped = _copy(original, runs, "dropped")  # the recorder never wrote it: padding where it was
    dropped.write(dropped.begin(k) + fr.TYPE_FIELD_OFFSET, struct.pack("<H", fr.HDR_TYPE_PAD))
    expected["dropped"] = {"lost": (1, dropped.begin(k))}

    duplicated = _copy(original, runs, "duplicated")  # recorded twice: again after the end
    (at,) = duplicated.append([duplicated.frame(k)])
    expected["duplicated"] = {"duplicated": (1, at)}

    flipped = _copy(original, runs, "flipped")  # one payload byte past (pub, seq) changed in its segment file
    byte = flipped.begin(k) + fr.HEADER_LENGTH + 16 + 7
    flipped.write(byte, bytes([flipped.read(byte, 1)[0] ^ 0x5A]))
    expected["flipped"] = {"corrupted": (1, flipped.begin(k))}

    swapped = _copy(original, runs, "reordered")  # two neighbours of one frame size recorded the other way round
    j = next(seq for seq in range(k, last) if swapped.frame_length(seq) == swapped.frame_length(seq + 1))
    first, second = swapped.frame(j), swapped.frame(j + 1)
    swapped.rewrite(swapped.begin(j), second)
    swapped.rewrite(swapped.begin(j + 1), first)
    expected["reordered"] = {"reordered": (1, swapped.begin(j + 1))}

    stray = _copy(original, runs, "unexpected")  # a message of the publisher's stream never acknowledged
    (at,) = stray.append([stray.new_frame(0, last + 5, 100)])
    expected["unexpected"] = {"unexpected": (1, at)}

    killed = _copy(original, runs, "killed")  # SIGKILLed after offering last+1 (allowed) and last+2 (not)
    timeline = killed.run_dir / "timeline.jsonl"
    lines = [json.loads(line) for line in timeline.read_text().splitlines()]
    for e in lines:
        if e["event"] == "process_exit" and e.get("name") == "pub0":
            e["exit_code"] = -9
    timeline.write_text("".join(json.dumps(e) + "\n" for e in lines))
    _, at = killed.append([killed.new_frame(0, last + 1, 64), killed.new_frame(0, last + 2, 64)])
    expected["killed"] = {"unexpected": (1, at)}

    invalid = _copy(original, runs, "invalid")  # as archive-tool verify leaves a flipped byte: the recording INVALID
    invalid.write(byte, bytes([invalid.read(byte, 1)[0] ^ 0x5A]))
    with Catalog.open(invalid.archive, create=False) as catalog:
        catalog.change_state(0, A.RECORDING_STATE_INVALID)
    unrecorded = _copy(original, runs, "unrecorded")  # its only recording deleted: nothing covers the session
    with Catalog.open(unrecorded.archive, create=False) as catalog:
        catalog.change_state(0, A.RECORDING_STATE_DELETED)
        gone = _copy(original, runs, "gone")
    shutil.rmtree(gone.archive)

    out = tmp_path_factory.mktemp("out") / "verdicts"
    printed = io.StringIO()
    # Spark's default: no filter pushdown to Python sources (aeron-archive's default reader does not need it)
    spark.conf.set(PUSHDOWN_SETTING, "false")
    try:
        with contextlib.redirect_stdout(printed):
            code = nothing_lost.main([str(runs), "--out", str(out)], prog="nothing-lost")
    finally:
        spark.conf.unset(PUSHDOWN_SETTING)
    summary = {row["run_id"].rsplit("-", 1)[1]: row for row in spark.read.parquet(str(out / "summary")).collect()}
    findings = spark.read.parquet(str(out / "findings")).collect()
    return code, summary, findings, expected, printed.getvalue(), (k, j), last


def test_an_untouched_run_is_clean_and_each_alteration_flips_exactly_its_verdict(verdicts):
    code, summary, _, expected, _, _, last = verdicts
    assert code == 1
    for name, flips in expected.items():
        row = summary[name]
        assert row["scenario"] == SCENARIO and row["archive"] == "archive" and row["recording_id"] == 0
        assert row["pub"] == 0 and row["acked"] == last + 1, name
        got = {kind: (row[kind], row[f"first_{kind}"]) for kind in KINDS if row[kind] or row[f"first_{kind}"]}
        assert got == flips, name
        assert row["verdict"] == (", ".join(flips) or "clean"), name
    assert summary["clean"]["recorded"] == last + 1
    assert summary["dropped"]["recorded"] == last
    assert summary["duplicated"]["recorded"] == summary["unexpected"]["recorded"] == last + 2


def test_an_invalid_recording_is_read_and_a_gone_archive_reported_never_skipped(verdicts):
    _, summary, _, _, _, (k, _), last = verdicts
    invalid = summary["invalid"]
    assert invalid["verdict"] == "corrupted; recording INVALID in the catalog"
    assert (invalid["acked"], invalid["corrupted"], invalid["first_corrupted"]) == \
        (last + 1, 1, summary["flipped"]["first_corrupted"])
    assert summary["gone"]["verdict"].startswith("archive dir ") and "is gone" in summary["gone"]["verdict"]
    unrecorded = summary["unrecorded"]
    assert re.fullmatch(r"session -?\d+: acknowledged, never recorded", unrecorded["verdict"])
    assert (unrecorded["acked"], unrecorded["recorded"], unrecorded["archive"]) == (last + 1, 0, None)


def test_findings_name_each_offending_message(verdicts):
    _, _, findings, _, _, (k, j), last = verdicts
    got = sorted((row["run_id"].rsplit("-", 1)[1], row["kind"], row["pub"], row["seq"]) for row in findings)
    assert got == sorted([("dropped", "lost", 0, k), ("duplicated", "duplicated", 0, k),
                          ("reordered", "reordered", 0, j),
                          ("flipped", "corrupted", 0, k), ("invalid", "corrupted", 0, k),
                          ("unexpected", "unexpected", 0, last + 5),
                          ("killed", "unexpected", 0, last + 2)])


def test_the_printed_table_has_a_row_per_recording_and_publisher(verdicts):
    _, summary, _, _, printed, _, _ = verdicts
    lines = printed.splitlines()
    assert lines[0].split()[:4] == ["run", "archive", "rec", "pub"]
    rows = {line.split()[0].rsplit("-", 1)[1]: line for line in lines[2:2 + len(summary)]}
    assert set(rows) == set(summary)
    assert f"1 @{summary['flipped']['first_corrupted']}" in rows["flipped"] and rows["clean"].endswith("clean")
    assert "not clean" in lines[-1] and f"{len(summary) - 1} of {len(summary)} rows" in lines[-1]


def test_message_ids_read_spark_arrow_batches(spark):
    """The mapInArrow decoder on the binary column Spark hands it (offsets into one data buffer)."""
    payloads = [message_bytes(3, 7, 40).tobytes(), b"short", message_bytes(1, 2**39, 16).tobytes()]
    df = spark.createDataFrame([(p,) for p in payloads], "payload binary")
    schema = "pub bigint, seq bigint"

    def ids(batches):
        for batch in batches:
            pub, seq, valid = nothing_lost.message_ids(batch.column("payload"))
            yield pa.RecordBatch.from_arrays([pa.array(pub, mask=~valid), pa.array(seq, mask=~valid)],
                                             names=["pub", "seq"])

    assert sorted(map(tuple, df.coalesce(1).mapInArrow(ids, schema).collect()), key=str) == \
        sorted([(3, 7), (None, None), (1, 2**39)], key=str)


def test_where_an_acknowledged_message_begins_as_the_delivery_check_computes_it(spark):
    """The job's Spark expression against chaos/invariants.py's message_start, fragmented messages included."""
    from chaos.invariants import message_start

    cases = [(p, length, mtu) for p in (4096, 1 << 20) for mtu in (1408, 4096)
             for length in (0, 1, 16, mtu - 33, mtu - 32, mtu - 31, 2 * (mtu - 32), 2 * (mtu - 32) + 1, 65000)]
    df = spark.createDataFrame(cases, "acked_position bigint, length bigint, mtu int")
    got = [row[0] for row in df.select(F.expr(nothing_lost.BEGIN_POSITION)).collect()]
    assert got == [message_start(p, length, mtu) for p, length, mtu in cases]
