"""Every chaos scenario once in quick mode (a fixed seed, replayable), and a long randomised run (slow)."""

from __future__ import annotations

import json

import pytest

from chaos.__main__ import main as chaos_main
from chaos.scenario import run_scenario
from chaos.scenarios import SCENARIOS
from chaos.timeline import TIMELINE_FILE, read_events

QUICK_SEED = 20240601


def _assert_passed(result) -> None:
    assert result.passed, f"seed {result.seed}, run folder {result.run_dir}:\n" + "\n".join(result.failures)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_quick(name, tmp_path):
    result = run_scenario(SCENARIOS[name], QUICK_SEED, quick=True, out_root=tmp_path)
    _assert_passed(result)
    assert result.messages_checked > 0
    events = read_events(f"{result.run_dir}/{TIMELINE_FILE}")
    kinds = {e["event"] for e in events}
    assert {"run_start", "process_start", "counters", "sent", "recv", "run_end"} <= kinds
    assert [e["ts_ns"] for e in events] == sorted(e["ts_ns"] for e in events)
    assert events[0]["event"] == "run_start" and events[0]["seed"] == QUICK_SEED
    assert json.loads((tmp_path / result.run_dir.split("/")[-1] / "result.json").read_text())["passed"]


def test_cli_list(capsys):
    assert chaos_main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SCENARIOS)


@pytest.mark.parametrize("argv", [["run", "subscriber-killed", "--all"], ["run"], ["run", "subscriber-killed", "nope"],
                                  ["run", "subscriber-killed", "--iterations", "0"]])
def test_cli_rejects_bad_runs_naming_the_problem(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        chaos_main(argv)
    assert exit_info.value.code == 2
    assert {"--all": "SCENARIO names or --all", "nope": "unknown scenario nope",
            "0": "--iterations=0 must be >= 1"}.get(argv[-1], "SCENARIO names or --all") in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_all_scenarios_long_mode(tmp_path, capsys):
    code = chaos_main(["run", "--all", "--iterations", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
