"""``python -m benchmarks`` refuses what a user mistyped with one line and a non-zero exit, before running."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("command", ["run", "gate"])
def test_an_out_dir_under_a_file_is_one_line(tmp_path, capsys, command):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "out"
    assert main([command, "--tiny", "--out", str(out)]) == 1
    line = _one_line(capsys)
    assert f"cannot create --out directory {out}: Not a directory" in line and "choose another path" in line


def test_an_only_pattern_that_matches_nothing_names_it_and_the_families(capsys):
    assert main(["run", "--tiny", "--only", "nomatch"]) == 1
    line = _one_line(capsys)
    assert "no case of profile tiny matches --only nomatch" in line and "rtt" in line


def test_a_summary_that_is_missing_or_not_json_is_one_line(tmp_path, capsys):
    assert main(["gate", "--summary", str(tmp_path / "none.json")]) == 1
    assert f"cannot read --summary {tmp_path / 'none.json'}: No such file or directory" in _one_line(capsys)
    (tmp_path / "bad.json").write_text("not json")
    assert main(["gate", "--summary", str(tmp_path / "bad.json")]) == 1
    assert "is not a run's summary.json" in _one_line(capsys)


def test_a_history_dir_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    history = tmp_path / "a-file" / "history"
    assert main(["run", "--tiny", "--history", str(history)]) == 1
    assert f"cannot create --history directory {history}: Not a directory" in _one_line(capsys)


def test_history_and_no_history_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--tiny", "--history", str(tmp_path), "--no-history"])
    assert info.value.code == 2  # argparse's usage error
    assert "argument --no-history: not allowed with argument --history" in capsys.readouterr().err


@pytest.mark.parametrize("argv, cluster_runs", [(["run"], True), (["run", "--no-cluster"], False),
                                               (["run", "--quick"], False), (["run", "--only", "rtt.*"], False)])
def test_the_full_run_ends_with_the_cluster_benchmark(tmp_path, monkeypatch, argv, cluster_runs):
    # The suite and the clusters are stubbed: this checks which runs include the clusters and that a failed
    # cluster benchmark fails the run, not the measuring (the smoke tests and 'benchmarks cluster --tiny' do).
    import benchmarks.cluster.bench as cluster_bench
    import benchmarks.runner as runner

    calls = []
    monkeypatch.setattr(runner, "run_suite", lambda profile, out, only, history_dir=None:
                        {"cases": {"rtt.x": {"ok": True}}})
    monkeypatch.setattr(cluster_bench, "run", lambda profile, only, out: calls.append((profile, out)) or {
        "systems": {"aeron": {"error": "RuntimeError: no leader"}}})
    assert main([*argv, "--out", str(tmp_path), "--no-history"]) == (1 if cluster_runs else 0)
    assert calls == ([("quick", tmp_path / "cluster")] if cluster_runs else [])
