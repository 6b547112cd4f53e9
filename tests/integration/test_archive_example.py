"""examples/archive_record_replay.py runs as a user runs it (a script, its own archive and driver processes):
records, lists and replays every message intact, and leaves no process or dir behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "archive_record_replay.py"


def test_archive_example_records_lists_and_replays():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, str(EXAMPLE), "--messages", "300"], capture_output=True, text=True,
                            env=env, timeout=400, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    work_dir = re.match(r"aeron-numba media driver \S+ in (\S+)/aeron, pid \d+$", lines[0]).group(1)
    assert re.fullmatch(rf"aeron-numba archive \S+ in {work_dir}/archive, archiveId \d+, pid \d+", lines[1])
    recorded = re.fullmatch(r"recorded 300 messages as recording (\d+) \(stop position (\d+)\)", lines[2])
    recording_id, stop = recorded.groups()
    assert lines[3] == f"recording {recording_id}: aeron:ipc?term-length=64k stream 1001, positions 0..{stop}"
    assert lines[4:] == ["replayed 300 messages: all as sent"]
    assert not Path(work_dir).exists()
