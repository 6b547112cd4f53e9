"""``python -m benchmarks spark-scan``: its recording holds the messages it says, its three readers (the
``aeron-archive`` source, Parquet of the same rows, the single-process kernel scan) see the same rows, and a bad
argument is one line. Correctness only: the timings are the benchmark's, not a test's."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from aeron_numba.layout.frame import HEADER_LENGTH

from benchmarks import scan_recording as R
from benchmarks.__main__ import main
from benchmarks.spark_scan import format_report, run

SIZE = 8 * 1024 * 1024


@pytest.mark.spark
def test_the_three_readers_agree_with_the_messages_written(spark, tmp_path, capsys):  # noqa: F811
    args = argparse.Namespace(size=SIZE, dir=str(tmp_path), repeats=1, master=None)
    report = run(args, {}, spark)
    layout = report["meta"]["layout"]
    assert "recording written" in capsys.readouterr().out
    assert R.ensure_recording(tmp_path, SIZE)[2] is False  # the next run reuses it
    lengths = R.message_lengths(SIZE)[:layout["messages"]]  # the seeded mix, regenerated
    max_payload = R.MTU_LENGTH - HEADER_LENGTH
    expected_fragments = int(np.sum((lengths + max_payload - 1) // max_payload))
    assert expected_fragments > layout["messages"]  # fragmented messages are in it
    assert SIZE <= layout["stop_position"] < SIZE + 5 * 1024

    totals = report["totals"]
    assert set(totals) == {"a", "b", "c", "d"}
    assert {tuple(t) for t in totals.values()} == {(expected_fragments, int(lengths.sum()), totals["c"][2])}
    assert report["rows_agree"] and report["fragments"] == expected_fragments
    assert report["executors"] == {"driver": report["partitions"]}  # local mode: the driver ran every task
    assert all(len(r["seconds"]) == 1 for r in report["results"].values())
    assert report["results"]["a"]["median_jvm_cpu_s"] > 0  # the JVM's CPU time is found and counted
    json.dumps(report)  # what goes to spark_scan.json
    text = format_report(report)
    assert "(a) spark aeron-archive" in text and "(b) spark parquet" in text and "rows agree across readers: True" \
        in text


def test_a_bad_size_or_conf_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["spark-scan", "--size", "2x", "--dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == \
        "python -m benchmarks spark-scan: --size '2x': expected a positive size such as 8m, 512m or 2g"
    assert main(["spark-scan", "--conf", "nokey", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--conf 'nokey' must be KEY=VALUE" in err


def test_a_dir_under_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    assert main(["spark-scan", "--size", "8m", "--dir", str(tmp_path / "a-file" / "x"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot create --dir directory" in err and "Not a directory" in err
