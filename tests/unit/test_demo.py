"""The demo's command line: counts and lengths it cannot run with are refused with one line naming the value
and the limit, and a non-zero exit, before anything starts."""

from __future__ import annotations

import pytest

from aeron_numba import demo


@pytest.mark.parametrize("argv, message", [
    (["--messages", "-5"], "--messages=-5 must be >= 1"),
    (["--messages", "0"], "--messages=0 must be >= 1"),
    (["--max-length", "8"], "--max-length=8 must be in [16, 131072]"),
    (["--max-length", "131073"], "--max-length=131073 must be in [16, 131072]"),
    (["--timeout", "0"], "--timeout=0 must be in (0, 1e6) seconds"),
    (["--timeout", "nan"], "--timeout=nan must be in (0, 1e6) seconds"),
])
def test_bad_values_are_refused_before_anything_starts(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(demo, "run", lambda args: pytest.fail("the demo started"))

    with pytest.raises(SystemExit) as exited:
        demo.main(argv)

    assert exited.value.code == 2
    err = capsys.readouterr().err
    error_lines = [line for line in err.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and message in error_lines[0], err
    assert "Traceback" not in err


def test_the_longest_message_a_one_mebibyte_term_takes_is_accepted(monkeypatch):
    started = []
    monkeypatch.setattr(demo, "run", lambda args: started.append(args.max_length) or 0)

    assert demo.main(["--max-length", "131072", "--messages", "1"]) == 0
    assert started == [131072]
