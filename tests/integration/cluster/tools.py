"""Running cluster-tool as a user does, for the cluster tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_cluster_tool(cluster_dir, *args: str, timeout_s: float = 120.0) -> tuple[int, str, str]:
    """``cluster-tool <cluster_dir> <args>``: (exit code, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "aeron_numba.tools.cluster_tool", str(cluster_dir), *args],
                            capture_output=True, text=True, env=env, timeout=timeout_s, cwd=ROOT)
    return result.returncode, result.stdout, result.stderr
