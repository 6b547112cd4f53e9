"""The front door (``python -m aeron_numba``) and what every entry point shares: the program name the user typed,
``--version``, a ``--help`` that answers without importing Numba."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import aeron_numba
from aeron_numba import __main__ as front_door

ROOT = Path(__file__).resolve().parents[2]

# Every way a user starts something: (argv after the interpreter, the program name its usage must show).
ENTRY_POINTS = [
    (["-m", "aeron_numba"], "python -m aeron_numba"),
    *((["-m", "aeron_numba", name], f"python -m aeron_numba {name}") for name in front_door.COMMANDS),
    (["-m", "aeron_numba.driver"], "python -m aeron_numba.driver"),
    (["-m", "aeron_numba.archive"], "python -m aeron_numba.archive"),
    (["-m", "aeron_numba.cluster"], "python -m aeron_numba.cluster"),
    (["-m", "aeron_numba.demo"], "python -m aeron_numba.demo"),
    (["-m", "aeron_numba.tools.aeron_stat"], "aeron-stat"),
    (["-m", "aeron_numba.tools.error_stat"], "aeron-error-stat"),
    (["-m", "aeron_numba.tools.loss_stat"], "aeron-loss-stat"),
    (["-m", "aeron_numba.tools.archive_tool"], "archive-tool"),
    (["-m", "aeron_numba.tools.cluster_tool"], "cluster-tool"),
]
# Runs the entry point with ``--help`` in this interpreter, then reports whether Numba was imported.
_PROBE = """
import runpy, sys
sys.argv = [sys.argv[1]] + sys.argv[2:]
module = sys.argv[0]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print("NUMBA-IMPORTED" if "numba" in sys.modules else "NUMBA-NOT-IMPORTED", code)
"""


def _python(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("argv,prog", ENTRY_POINTS, ids=[" ".join(a[1:]) for a, _ in ENTRY_POINTS])
def test_help_names_the_command_typed_and_does_not_import_numba(argv, prog):
    result = _python("-c", _PROBE, *argv[1:], "--help")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "NUMBA-NOT-IMPORTED 0", result.stdout
    usage = next(line for line in lines if line.startswith("usage:") or line.startswith("Usage:"))
    assert f" {prog} " in usage + " " or usage.startswith(f"Usage: {prog} "), usage
    assert "__main__.py" not in result.stdout


@pytest.mark.parametrize("argv,prog", ENTRY_POINTS, ids=[" ".join(a[1:]) for a, _ in ENTRY_POINTS])
def test_every_entry_point_prints_its_version(argv, prog):
    result = _python(*argv, "--version")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{prog} (aeron-numba {aeron_numba.__version__}; Aeron 1.48 wire and file formats)\n"


def test_driver_help_lists_every_setting_and_where_they_are_explained(capsys):
    from aeron_numba.settings_doc import context_settings
    from aeron_numba.driver.context import DriverContext

    with pytest.raises(SystemExit):
        front_door.main(["driver", "--help"], prog="aeron-numba")
    out = capsys.readouterr().out
    assert out.startswith("usage: aeron-numba driver ")
    for env, default, _, _ in context_settings(DriverContext):
        assert any(line.split() == [env, default] for line in out.splitlines()), env
    assert "docs/settings.md" in out


def test_front_door_runs_the_chosen_command_with_its_arguments(tmp_path, capsys):
    # A tool through the front door is the tool: same arguments, same answer, same exit code.
    missing = tmp_path / "no-driver"
    assert front_door.main(["loss-stat", "--dir", str(missing)]) == 1
    assert capsys.readouterr().err == f"aeron-loss-stat: Loss report does not exist: {missing / 'loss-report.dat'}\n"


def test_unknown_command_is_a_usage_error_listing_the_commands(capsys):
    with pytest.raises(SystemExit) as info:
        front_door.main(["nope"], prog="aeron-numba")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and "'archive-tool'" in err
