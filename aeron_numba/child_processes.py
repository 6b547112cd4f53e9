"""Child processes that end with their parent, and parents that stop their children on SIGINT/SIGTERM.

Two halves, because no single one covers every way a parent goes:

- ``with_parent_death_signal(argv, signum)`` wraps a child's argv so that, before it execs the real
  program, the child asks Linux (``prctl(PR_SET_PDEATHSIG)``) to send it ``signum`` when its parent dies,
  however it dies, SIGKILL included (no handler in the parent runs then). The setting survives ``exec``,
  so it works for any program, not only ours. The kernel's "parent" is the *thread* that forked: spawn
  from a thread that lives as long as the child (the main thread, as every spawner here does), or the
  child is signalled when that thread ends. A ``preexec_fn`` would be shorter but makes ``Popen`` run
  Python's at-fork hooks in the parent, and an exception a signal handler raises there (``exit_on_signals``)
  is swallowed: the parent would carry on as if never signalled. The wrapper costs a ~15 ms interpreter.
- ``exit_on_signals()`` turns SIGINT/SIGTERM in a parent into ``SystemExit(128 + signum)`` so its
  ``finally``/``with`` blocks run and stop the children in order (a driver gets to remove its dir). After
  the first signal the others are ignored, so a second Ctrl-C does not cut that clean-up short.

A pipe-EOF watch in the child would also cover SIGKILL of the parent, but only for children running our
code, and a forked (not exec'd) grandchild holding the pipe's write end keeps it open; PDEATHSIG has
neither limit. Other systems get no death signal (the argv is left as it is).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from contextlib import contextmanager
from typing import Iterable, Iterator, Sequence

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def die_with_parent(parent_pid: int, signum: int = signal.SIGTERM) -> bool:
    """In a child: have the kernel send ``signum`` when ``parent_pid`` (the process, or rather the thread,
    that started this one) dies; False where there is no prctl. For children whose argv we do not choose
    (a ``multiprocessing`` worker calls it first thing)."""
    if _PRCTL is None:
        return False
    _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    # The parent may have died before prctl took effect: then no signal will ever come, so act now.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), int(signum))
    return True


# Runs in the child, between fork and the real program: set the death signal, check the parent did not
# die before it took effect, undo the signal dispositions Python's start-up changed, then exec.
_SET_DEATH_SIGNAL_THEN_EXEC = """\
import ctypes, os, signal, sys
parent_pid, signum = int(sys.argv[1]), int(sys.argv[2])
ctypes.CDLL(None).prctl(1, signum, 0, 0, 0)
if os.getppid() != parent_pid:
    os.kill(os.getpid(), signum)
for name in ("SIGPIPE", "SIGXFSZ"):
    signal.signal(getattr(signal, name), signal.SIG_DFL)
os.execvp(sys.argv[3], sys.argv[3:])
"""


def with_parent_death_signal(argv: Sequence[str], signum: int = signal.SIGTERM) -> list[str]:
    """``argv`` run so that the child receives ``signum`` when this process dies (see the module doc).

    SIGTERM lets a child of ours shut down cleanly (a driver removes its dir when told to); SIGKILL also
    ends a child that is paused (SIGSTOP) or ignores SIGTERM. The child keeps its pid across the exec.
    """
    argv = [str(a) for a in argv]
    if _PRCTL is None:
        return argv
    return [sys.executable, "-S", "-c", _SET_DEATH_SIGNAL_THEN_EXEC, str(os.getpid()), str(int(signum)), *argv]


@contextmanager
def exit_on_signals(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Within the block, each of ``signals`` raises ``SystemExit(128 + signum)`` (main thread only).

    The previous handlers come back when the block ends.
    """
    signals = tuple(signals)

    def on_signal(signum, frame):
        for other in signals:
            signal.signal(other, signal.SIG_IGN)  # the clean-up this starts must not be interrupted
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
