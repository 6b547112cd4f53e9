"""Run folders are found, and a bad file is reported naming the file (and line), without Spark."""

from __future__ import annotations

import pytest

from aeron_numba.spark.run_files import RunFileError, find_run_dirs, read_json, read_json_lines


def test_run_folders_are_found_at_any_depth_but_not_inside_a_run(tmp_path):
    for run in ("a/run1", "a/run2", "b/c/run3", "run4"):
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "result.json").write_text("{}")
    (tmp_path / "run4" / "logs").mkdir()  # a run's own sub-folder: never searched
    (tmp_path / "run4" / "logs" / "result.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    found = find_run_dirs(str(tmp_path), ("timeline.jsonl", "result.json"), "runs")
    assert found == [str(tmp_path / r) for r in ("a/run1", "a/run2", "b/c/run3", "run4")]
    assert find_run_dirs(str(tmp_path / "a" / "run1"), ("result.json",), "runs") == [str(tmp_path / "a" / "run1")]


def test_no_runs_or_no_folder_is_an_error_naming_the_path(tmp_path):
    with pytest.raises(RunFileError, match=f"^{tmp_path}: no chaos runs found \\(a run folder holds x.json\\)"):
        find_run_dirs(str(tmp_path), ("x.json",), "chaos runs")
    with pytest.raises(RunFileError, match=f"^{tmp_path / 'nope'}: not a folder"):
        find_run_dirs(str(tmp_path / "nope"), ("x.json",), "chaos runs")
    with pytest.raises(RunFileError, match="no path given"):
        find_run_dirs(None, ("x.json",), "chaos runs")


def test_json_lines_are_numbered_and_each_bad_line_is_named(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"ts_ns":1,"event":"a"}\n\n{"ts_ns":2,"event":"b"}\n')
    assert list(read_json_lines(path, ("ts_ns",))) == [(1, {"ts_ns": 1, "event": "a"}), (3, {"ts_ns": 2, "event": "b"})]
    for content, message in ((b'{"ts_ns":1}\n{"ts_ns":\n', ":2: not a JSON line"),
                             (b'{"ts_ns":1}\n[1,2]\n', ":2: expected a JSON object, found list"),
                             (b'{"ts_ns":1}\n{"x":"\xff"}\n', ":2: not a JSON line"),
                             (b'{"event":"a"}\n', ":1: missing field\\(s\\) ts_ns")):
        path.write_bytes(content)
        with pytest.raises(RunFileError, match=f"^{path}{message}"):
            list(read_json_lines(path, ("ts_ns",)))
    with pytest.raises(RunFileError, match=f"^{tmp_path / 'gone.jsonl'}: missing"):
        list(read_json_lines(tmp_path / "gone.jsonl"))


def test_a_json_file_must_hold_one_object(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{"passed": true}')
    assert read_json(path) == {"passed": True}
    path.write_text('{"passed": tr')
    with pytest.raises(RunFileError, match=f"^{path}: not valid JSON"):
        read_json(path)
    path.write_text("[]")
    with pytest.raises(RunFileError, match=f"^{path}: expected a JSON object, found list"):
        read_json(path)
