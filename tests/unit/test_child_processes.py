"""``exit_on_signals``: SIGINT/SIGTERM become ``SystemExit(128 + signum)`` so clean-up runs, a second signal
does not cut that clean-up short, and the previous handlers come back. ``with_parent_death_signal`` is checked
with real processes in tests/integration/test_process_cleanup.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from aeron_numba.child_processes import exit_on_signals, with_parent_death_signal


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_exits_through_the_clean_up_and_a_second_one_is_ignored(signum):
    before = signal.getsignal(signum)
    cleaned_up = []

    with pytest.raises(SystemExit) as exited:
        with exit_on_signals():
            try:
                os.kill(os.getpid(), signum)  # the handler runs before the next bytecode
                pytest.fail("the signal did not interrupt the block")
            finally:
                os.kill(os.getpid(), signum)  # e.g. a second Ctrl-C while children are being stopped
                cleaned_up.append(True)

    assert exited.value.code == 128 + signum
    assert cleaned_up == [True]
    assert signal.getsignal(signum) is before


def test_the_handlers_are_restored_when_the_block_ends_normally():
    before = signal.getsignal(signal.SIGTERM)
    with exit_on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_wrapped_child_is_the_real_program_under_the_same_pid_with_default_signals():
    # `cat` is not Python: it must not inherit the SIGPIPE ignore that the wrapper's interpreter sets up.
    process = subprocess.Popen(with_parent_death_signal(["cat", "/proc/self/status"]), stdout=subprocess.PIPE,
                               text=True)
    out, _ = process.communicate(timeout=30)

    fields = dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)
    assert process.returncode == 0
    assert fields["Name"].strip() == "cat" and int(fields["Pid"]) == process.pid
    assert int(fields["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1)) == 0


def test_a_wrapped_child_keeps_its_exit_code():
    argv = with_parent_death_signal([sys.executable, "-c", "import sys; sys.exit(7)"], signal.SIGKILL)
    assert subprocess.run(argv, timeout=30).returncode == 7
