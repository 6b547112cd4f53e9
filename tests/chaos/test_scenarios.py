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


@pytest.mark.timeout(120)
def test_cli_interrupted_twice_still_stops_every_process_and_removes_the_aeron_dir(process_manager, tmp_path):
    """Ctrl-C then a SIGTERM (or ``timeout`` forwarding a signal it also got) must not cut the teardown short:
    the run's driver and workers, each in its own session, would outlive the CLI with their aeron dir."""
    import signal

    from harness.aeron_dirs import SHM_ROOT
    from harness.awaiting import await_condition
    from harness.process_manager import pid_alive

    cli = process_manager.spawn_module("chaos-cli", "chaos", "run", "slow-consumer", "--seed", "7",
                                       "--out", str(tmp_path))

    def started_pids():
        timelines = list(tmp_path.glob("slow-consumer-*/controller.jsonl"))
        events = read_events(timelines[0]) if timelines else []
        pids = [e["pid"] for e in events if e["event"] == "process_start"]
        return pids if len(pids) >= 3 else None  # the driver and both subscribers

    pids = await_condition(started_pids, 60, "the run's driver and subscribers to start", processes=[cli])
    assert list(SHM_ROOT.glob(f"chaos-slow-consumer-{cli.pid}-*"))
    # Two different signals are never merged into one: the second one's handler runs while the first one's
    # KeyboardInterrupt unwinds through the run's teardown.
    cli.send_signal(signal.SIGINT, group=False)
    cli.send_signal(signal.SIGTERM, group=False)
    assert cli.wait(60) == 130, cli.tail()
    assert [pid for pid in pids if pid_alive(pid)] == []
    assert list(SHM_ROOT.glob(f"chaos-slow-consumer-{cli.pid}-*")) == []


def test_cli_signal_handler_interrupts_once_then_lets_the_teardown_finish():
    from chaos.__main__ import _InterruptOnce

    handler = _InterruptOnce()
    with pytest.raises(KeyboardInterrupt, match="signal 2"):
        handler(2, None)
    assert handler(15, None) is None and handler(2, None) is None
