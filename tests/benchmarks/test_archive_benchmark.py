"""Smoke test of ``python -m benchmarks.archive``: a driver and an archive process, tiny counts, every figure
printed and positive. No timing assertion."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.requires_jit


def test_the_archive_benchmark_runs_with_tiny_counts(tmp_path, capsys):
    from benchmarks.archive import main

    assert main(["--messages", "16000", "--dir", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d+)B\s+(record|replay|IPC stream)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)(.*)$",
                      output, re.MULTILINE)
    assert [(size, figure) for size, figure, *_ in rows] == [
        (size, figure) for size in ("32", "1344") for figure in ("record", "replay", "IPC stream")], output
    for size, figure, msgs, mb, floor_mb, ratio, rest in rows:
        assert int(msgs.replace(",", "")) > 0 and float(ratio) > 0, output
        if figure == "replay":
            assert float(rest) > 0, output  # the replay as a fraction of the IPC stream
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("archive-")) == []  # cleaned up
