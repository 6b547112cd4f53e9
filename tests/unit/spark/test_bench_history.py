"""The ``bench-history`` job without Spark: where the history lives, one-line errors before Spark starts,
placements, and the verdict of one series (the Spark side is in tests/spark/test_bench_history.py)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_numba.spark import history_table
from aeron_numba.spark.jobs import JOBS, bench_history

REPO = Path(__file__).resolve().parents[3]


def test_the_job_is_registered():
    assert JOBS["bench-history"][0] == bench_history.__name__


def test_the_history_lives_in_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("AERON_NUMBA_DATA_DIR", str(tmp_path / "data"))
    assert history_table.default_history_dir() == tmp_path / "data" / "benchmark-history"
    monkeypatch.delenv("AERON_NUMBA_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert history_table.default_history_dir() == tmp_path / "xdg" / "aeron-numba" / "benchmark-history"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert history_table.default_history_dir() == tmp_path / "home" / ".local/share/aeron-numba/benchmark-history"


def test_the_tests_never_write_into_the_users_data_dir():
    # tests/conftest.py points the data dir at a temporary folder for the whole session (and its children).
    assert Path(os.environ["AERON_NUMBA_DATA_DIR"]).name.startswith("aeron-numba-test-data-")


def _one_line_exit_2(argv, capsys, expected: str):
    assert bench_history.main(argv, prog="bench-history") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bench-history: ") and expected in err, err


def test_a_missing_or_empty_history_is_one_line(tmp_path, capsys):
    _one_line_exit_2(["--history", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")], capsys,
                     f"no benchmark history at {tmp_path / 'nowhere'}: `python -m benchmarks run` appends to it")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".run-x.parquet.tmp").write_bytes(b"half")  # an append cut short is not a run
    _one_line_exit_2(["--history", str(tmp_path / "empty"), "--out", str(tmp_path / "out")], capsys,
                     f"the benchmark history at {tmp_path / 'empty'} is empty: no run-*.parquet file")


def test_a_damaged_run_file_is_one_line_naming_it(tmp_path, capsys):
    history = tmp_path / "history"
    good = history_table.append_run(history, "r1", [{"run_id": "r1", "kind": "case", "name": "x", "value": 1.0}])
    damaged = history_table.run_file(history, "r2")
    damaged.write_bytes(good.read_bytes()[:100])  # cut: no Parquet footer
    _one_line_exit_2(["--history", str(history), "--out", str(tmp_path / "out")], capsys,
                     f"bench-history: {damaged}: not a readable Parquet run file (")


def test_bad_arguments_are_one_line(tmp_path, capsys):
    _one_line_exit_2(["--threshold", "-0.1"], capsys, "--threshold -0.1 must be > 0")
    _one_line_exit_2(["--alpha", "2"], capsys, "--alpha 2.0 must be between 0 and 1")
    history = tmp_path / "history"
    history_table.append_run(history, "r1", [{"run_id": "r1", "kind": "case", "name": "x"}])
    _one_line_exit_2(["--history", str(history), "--conf", "spark.driver.memory"], capsys,
                     "--conf 'spark.driver.memory' must be KEY=VALUE")


def test_python_m_benchmarks_history_runs_the_job():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "benchmarks", "history", "--history", "/nonexistent/history"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("python -m benchmarks history: no benchmark history at /nonexistent/history: "
                           "`python -m benchmarks run` appends to it (or pass --history DIR)\n")


def test_append_refuses_columns_the_table_does_not_have(tmp_path):
    with pytest.raises(ValueError, match="columns the table does not: colour"):
        history_table.append_run(tmp_path, "r1", [{"run_id": "r1", "colour": "red"}])
    assert not list(tmp_path.iterdir())


def test_placements_group_runs_by_their_compiled_floor():
    labels = bench_history.placements([("a", 80.0), ("b", 95.0), ("c", 410.0), ("d", None), ("e", 88.0),
                                       ("f", 390.0)])
    assert labels == {"a": "floor ~88 ns", "e": "floor ~88 ns", "b": "floor ~88 ns", "c": "floor ~410 ns",
                      "f": "floor ~410 ns", "d": "floor not measured"}


def test_a_series_verdict_names_the_run_and_commit_of_the_step():
    start = dt.datetime(2026, 1, 1)
    values = [100, 101, 99, 100, 102, 100, 116, 115, 114, 116]
    points = [{"run_time": start + dt.timedelta(hours=i), "run_id": f"r{i}", "commit": f"{i:040x}",
               "commit_dirty": i == 6, "value": float(v)} for i, v in enumerate(values)]
    series = {"profile": "quick", "machine": "m", "placement": "any", "kind": "case", "name": "rtt.x.32B",
              "metric": "p50", "unit": "ns", "better": "lower", "target": None, "points": points}
    v = bench_history.judge_series(series, 0.10, 0.05)
    assert v["regression"] and v["step_run_id"] == "r6" and v["step_commit"] == f"{6:040x}"
    assert v["step_commit_dirty"] is True and v["change_pct"] == pytest.approx((115.25 / (602 / 6) - 1) * 100)
    table = bench_history.format_table([v], Path("/h"), 10, 10, 0.10, 0.05)
    row = next(line for line in table.splitlines() if line.startswith("REGRESSION  "))
    assert "rtt.x.32B" in row and "100 ns" in row and "115 ns" in row and f"{6:040x}"[:10] + "+dirty" in row
