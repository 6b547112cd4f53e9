"""The README's two set-up commands do what it says: ``make run`` installs the package alone (no test or benchmark
extras) and runs the main job through the front door; ``make test`` installs the test extras and runs the suite;
CI (.ci/run) runs the README's test command."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(target: str) -> list[str]:
    """The commands ``make <target>`` would run on a fresh clone (no venv yet: every step shown)."""
    # Run from `make test` this is a sub-make: without its parent's variables it prints no "Entering directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    result = subprocess.run(["make", "--no-print-directory", "-n", "-B", target, "VENV=/nonexistent-venv"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_make_run_installs_the_package_without_extras_and_runs_the_demo():
    commands = _dry_run("run")
    installs = [c for c in commands if " -m pip install" in c and "--upgrade pip" not in c]
    assert installs == ["/nonexistent-venv/bin/python -m pip install --quiet -e ."]
    assert commands[-1] == "/nonexistent-venv/bin/python -m aeron_numba demo"


def test_make_test_installs_the_test_extras():
    installs = [c for c in _dry_run("test") if " -m pip install" in c and "--upgrade pip" not in c]
    assert installs == ["/nonexistent-venv/bin/python -m pip install --quiet -e '.[test]'"]


def test_readme_commands_are_the_makefile_targets_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Set-up on a fresh machine.*?```sh\n(.*?)```", readme, re.S).group(1)
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in ci


def test_make_test_checks_java_before_it_runs_anything():
    commands = _dry_run("test")
    check = commands.index("/nonexistent-venv/bin/python -m aeron_numba.spark.session")
    assert check < next(i for i, c in enumerate(commands) if "lint-imports" in c)
