"""CPU time of a system's member processes, read from ``/proc/<pid>/stat`` (user + system, in seconds), for the
cluster benchmark's CPU per put and idle CPU figures.

A process that is gone by the second reading is left out of both, so a figure is never the CPU of a process that
was only half measured; a case that kills nodes (the failover) is not measured this way.
"""

from __future__ import annotations

import os

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_cpu_split_s(pid: int) -> tuple[float, float] | None:
    """User and system CPU seconds of ``pid`` so far (the system part: its syscalls, such as a loopback send that
    delivers the datagram and wakes the receiver); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 (state) onwards
    return int(fields[11]) / _TICKS_PER_S, int(fields[12]) / _TICKS_PER_S  # utime, stime: fields 14 and 15 of stat


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far; None when it is gone."""
    split = process_cpu_split_s(pid)
    return None if split is None else split[0] + split[1]


def cpu_snapshot(pids) -> dict[int, float]:
    """Each live pid's CPU seconds so far."""
    return {pid: cpu for pid in pids if (cpu := process_cpu_s(pid)) is not None}


def cpu_used_s(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the processes present in both snapshots used between them."""
    return sum(after[pid] - before[pid] for pid in before.keys() & after.keys())
