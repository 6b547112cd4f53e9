"""Running cluster-tool as a user does, for the cluster tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from harness.awaiting import NotYet, await_condition

ROOT = Path(__file__).resolve().parents[3]


def run_cluster_tool(cluster_dir, *args: str, timeout_s: float = 120.0,
                     work: Callable[[], int] | None = None) -> tuple[int, str, str]:
    """``cluster-tool <cluster_dir> <args>``: (exit code, stdout, stderr). ``work`` (e.g. a cluster client's poll,
    which keeps its session alive) runs while the tool does: a tool process takes seconds to start here."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    tool = subprocess.Popen([sys.executable, "-m", "aeron_numba.tools.cluster_tool", str(cluster_dir), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        await_condition(lambda: tool.poll() is not None or NotYet("cluster-tool running"), timeout_s,
                        f"cluster-tool {' '.join(args)}", work=work, max_poll_interval_s=0.01)
    finally:
        if tool.poll() is None:
            tool.kill()
        out, err = tool.communicate()
    return tool.returncode, out, err
