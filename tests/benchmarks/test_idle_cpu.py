"""Smoke test of ``python -m benchmarks.idle_cpu``: a driver, an archive, a connected client and the floor
process start, a short window is measured, every figure is printed. No CPU assertion (the machine is shared)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.requires_jit


def test_the_idle_cpu_benchmark_runs_with_a_short_window(tmp_path, capsys):
    from benchmarks.idle_cpu import main

    assert main(["--seconds", "0.5", "--settle", "0", "--dir", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    rows = re.findall(r"^(driver|archive|client|floor)\s+([\d.]+)\s*(ok|OVER)?\s*$", output, re.MULTILINE)
    assert [name for name, *_ in rows] == ["driver", "archive", "client", "floor"], output
    assert all(float(percent) >= 0 for _, percent, _ in rows), output
    assert [verdict != "" for *_, verdict in rows] == [True, True, True, False], output  # the floor has no target
    assert not (tmp_path / "archive").exists()  # cleaned up; the process logs stay in --dir
    assert {p.name for p in (tmp_path / "logs").iterdir()} >= {"driver.out", "archive.out", "client.out"}
