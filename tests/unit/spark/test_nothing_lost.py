"""The nothing-lost job's pure parts, without Spark: (pub, seq) from Arrow payloads against a plain struct
reading, the printed table, and one-line errors for bad arguments (exit 2, before Spark starts)."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from aeron_numba.spark.jobs import nothing_lost
from chaos.__main__ import main as chaos_main


def _naive_ids(values):
    return [struct.unpack_from("<qq", v) if v is not None and len(v) >= 16 else None for v in values]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_message_ids_equal_a_struct_reading_of_each_payload(kind):
    rng = random.Random(5)
    values = []
    for _ in range(300):
        length = rng.choice([0, 3, 15, 16, 17, 64, 1000])
        values.append(None if rng.random() < 0.1 else rng.randbytes(length))
    array = pa.array(values, kind)
    for sliced in (array, array.slice(37, 200)):  # a slice starts at an offset into the same buffers
        pub, seq, valid = nothing_lost.message_ids(sliced)
        got = [(int(p), int(s)) if ok else None for p, s, ok in zip(pub, seq, valid)]
        assert got == _naive_ids(sliced.to_pylist())


def test_message_ids_of_an_empty_or_all_short_batch():
    for values in ([], [b"", b"abc"]):
        pub, seq, valid = nothing_lost.message_ids(pa.array(values, pa.binary()))
        assert len(pub) == len(seq) == len(valid) == len(values) and not valid.any()


def _row(run_id, **counts):
    row = {"run_id": run_id, "archive": "archive", "recording_id": 0, "pub": 0, "acked": 10, "recorded": 10,
           "verdict": "clean"}
    for kind in nothing_lost.KINDS:
        row[kind], row[f"first_{kind}"] = counts.get(kind, (0, None))
    return row


def test_the_table_shows_each_count_with_its_first_position():
    lost = _row("run-b", lost=(2, 4096))
    lost["verdict"] = "lost"
    problem = {"run_id": "run-c", "archive": "archive", "recording_id": 3, "verdict": "recording INVALID: not read"}
    lines = nothing_lost.format_table([_row("run-a"), lost, problem]).splitlines()
    assert lines[0].split() == ["run", "archive", "rec", "pub", "acked", "recorded", *nothing_lost.KINDS, "verdict"]
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split() == ["run-a", "archive", "0", "0", "10", "10", "0", "0", "0", "0", "0", "clean"]
    assert lines[3].split() == ["run-b", "archive", "0", "0", "10", "10", "2", "@4096", "0", "0", "0", "0", "lost"]
    assert lines[4].split()[:5] == ["run-c", "archive", "3", "-", "-"] and lines[4].endswith("INVALID: not read")
    assert lines[3].index("lost") == lines[0].index("verdict")  # columns aligned


def test_input_errors_inside_spark_exceptions_become_their_one_line():
    wrapped = RuntimeError("[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n  File x\n"
                           "aeron_numba.spark.inputs.InputError: archive dir /x does not exist\n  more\n")
    assert nothing_lost.input_error_line(wrapped) == "archive dir /x does not exist"
    assert nothing_lost.input_error_line(RuntimeError("NullPointerException")) is None


@pytest.mark.parametrize("argv, message", [
    (["{tmp}/nope"], "{tmp}/nope: not a folder (expected a folder of chaos run folders)"),
    (["{tmp}"], "{tmp}: no chaos run folders found (a run folder holds timeline.jsonl or result.json)"),
    (["{tmp}", "--conf", "spark.x"], "--conf 'spark.x' must be KEY=VALUE, e.g. spark.driver.memory=4g"),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert nothing_lost.main(argv, prog="nothing-lost") == 2
    assert capsys.readouterr().err == f"nothing-lost: {message.format(tmp=tmp_path)}\n"
    assert chaos_main(["verify", *argv]) == 2
    assert capsys.readouterr().err == f"python -m chaos verify: {message.format(tmp=tmp_path)}\n"


def test_two_run_folders_of_one_name_are_one_line_and_exit_2(tmp_path, capsys):
    # aeron-chaos names a run by its folder: two copies of a run under two RUNS_DIRs would merge their events
    # and have only one of their archives read
    for root in ("a", "b"):
        (tmp_path / root / "run-1").mkdir(parents=True)
        (tmp_path / root / "run-1" / "result.json").write_text("{}")
    assert nothing_lost.main([str(tmp_path / "a"), str(tmp_path / "b")], prog="nl") == 2
    assert capsys.readouterr().err == (f"nl: two run folders are named run-1: {tmp_path / 'a' / 'run-1'} and "
                                       f"{tmp_path / 'b' / 'run-1'} (a run's id is its folder's name): verify them "
                                       f"in separate runs\n")


def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text("{}")
    (tmp_path / "file").write_text("")
    assert nothing_lost.main([str(tmp_path / "run"), "--out", str(tmp_path / "file" / "out")], prog="nl") == 2
    assert capsys.readouterr().err.startswith(f"nl: cannot create --out directory {tmp_path / 'file' / 'out'}: ")


def test_no_runs_dir_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        chaos_main(["verify"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == ("python -m chaos verify: error: the following arguments are "
                                                        "required: RUNS_DIR")
