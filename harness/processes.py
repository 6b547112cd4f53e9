"""Spawn worker processes, wait for them with a deadline, and kill every one of them whatever happens.

Workers are started with the ``spawn`` method: a fresh interpreter maps the shared files itself, as a
real Aeron client process would, and no lock or mapping is inherited by accident.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from aeron_numba.child_processes import die_with_parent

_CONTEXT = mp.get_context("spawn")


class WorkerFailed(RuntimeError):
    """A worker exited with a non-zero code or did not finish before its deadline."""


def _run_with_parent(parent_pid: int, target: Callable[..., Any], *args) -> Any:
    # daemon=True stops workers when the parent exits normally; the kernel covers it being killed.
    die_with_parent(parent_pid, signal.SIGKILL)
    return target(*args)


@contextmanager
def spawned(target: Callable[..., Any], args_list: Iterable[Sequence[Any]]) -> Iterator[list]:
    """Start one process per argument tuple; on exit kill any that are still alive and reap them all.

    A worker is SIGKILLed by the kernel if this process dies first (``die_with_parent``).
    """
    procs = [_CONTEXT.Process(target=_run_with_parent, args=(os.getpid(), target, *args), daemon=True)
             for args in args_list]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join(timeout=10)


class _Watched:
    """A spawned worker as ``await_condition(processes=...)`` checks it: one that exited fails the wait at once."""

    __slots__ = ("proc",)

    def __init__(self, proc):
        self.proc = proc

    def check_alive(self) -> None:
        if self.proc.exitcode is not None:
            raise WorkerFailed(f"worker pid {self.proc.pid} exited with code {self.proc.exitcode}")


def watched(procs: Iterable[Any]) -> list[_Watched]:
    """``procs`` (from ``spawned``) for ``await_condition(processes=...)``, for waits they must outlive."""
    return [_Watched(proc) for proc in procs]


def join_all(procs: list, timeout_s: float) -> None:
    """Wait until every process exits (deadline ``timeout_s``); raise ``WorkerFailed`` naming the culprits."""
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    stuck = [p.pid for p in procs if p.is_alive()]
    if stuck:
        raise WorkerFailed(f"workers {stuck} still running after {timeout_s}s")
    failed = [(p.pid, p.exitcode) for p in procs if p.exitcode != 0]
    if failed:
        raise WorkerFailed(f"workers exited with failures (pid, exitcode): {failed}")


def run_workers(target: Callable[..., Any], args_list: Iterable[Sequence[Any]], timeout_s: float) -> None:
    """Run ``target(*args)`` in one spawned process per tuple and wait for all to succeed."""
    with spawned(target, args_list) as procs:
        join_all(procs, timeout_s)
