"""Faults the scenarios inject, each logged to the timeline as a ``fault`` event (and ``fault_end``).

Timing comes from the run's seeded ``random.Random`` (``RunContext.rng``), expressed in workload terms
where possible ("after the publisher acknowledged K messages"), so a replay with the same seed injects
the same faults at the same points of the stream.
"""

from __future__ import annotations

import mmap
import os
import resource
import signal
import time

from aeron_numba.driver.loss_generator import LossControl
from harness.awaiting import await_condition


def kill(ctx, worker) -> int:
    """SIGKILL a worker (its whole process group); returns the fault's ts_ns."""
    event = ctx.timeline.event("fault", kind="sigkill", target=worker.name, pid=worker.process.pid)
    worker.process.kill()
    ctx.faulted.add(worker.name)
    ctx.timeline.event("process_exit", name=worker.name, pid=worker.process.pid,
                       exit_code=worker.process.exit_code)
    return event["ts_ns"]


def hold(duration_s: float) -> None:
    """Let a fault last ``duration_s`` (a fault's duration, not a wait for a condition)."""
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))


def pause(ctx, worker, duration_s: float) -> tuple[int, int]:
    """SIGSTOP a worker for ``duration_s`` then SIGCONT it; returns the (stop, continue) ts_ns."""
    stopped = ctx.timeline.event("fault", kind="sigstop", target=worker.name, pid=worker.process.pid,
                                 duration_s=duration_s)
    worker.process.pause()
    ctx.faulted.add(worker.name)
    hold(duration_s)
    worker.process.resume()
    resumed = ctx.timeline.event("fault_end", kind="sigcont", target=worker.name, pid=worker.process.pid)
    return stopped["ts_ns"], resumed["ts_ns"]


def stall(ctx, worker) -> int:
    """Make a subscriber stop polling (SIGUSR2) while its client stays alive; returns the fault's ts_ns."""
    event = ctx.timeline.event("fault", kind="stall", target=worker.name, pid=worker.process.pid)
    worker.process.send_signal(signal.SIGUSR2, group=False)
    await_condition(lambda: worker.count("stalled") > worker.count("resumed"), 30,
                    f"{worker.name} to stall", processes=[worker.process])
    return event["ts_ns"]


def unstall(ctx, worker) -> int:
    """Let a stalled subscriber poll again (SIGUSR2); returns the ts_ns of the ``fault_end``."""
    event = ctx.timeline.event("fault_end", kind="unstall", target=worker.name, pid=worker.process.pid)
    worker.process.send_signal(signal.SIGUSR2, group=False)
    await_condition(lambda: worker.count("resumed") >= worker.count("stalled"), 30,
                    f"{worker.name} to resume", processes=[worker.process])
    return event["ts_ns"]


def corrupt_byte(ctx, path, offset: int, xor_mask: int) -> int:
    """XOR one byte of a file under test in place (through a shared mapping, as another process would)."""
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mapped:
            old = mapped[offset]
            mapped[offset] = old ^ xor_mask
            new = mapped[offset]
    finally:
        os.close(fd)
    return ctx.timeline.event("fault", kind="corrupt_byte", target=str(path), offset=offset, old=old,
                              new=new)["ts_ns"]


def limit_file_size(ctx, process, max_bytes: int) -> int:
    """Set RLIMIT_FSIZE on a live process: creating or growing files past ``max_bytes`` fails with EFBIG,
    as on a full disk, while mapped files keep working (Python ignores SIGXFSZ)."""
    event = ctx.timeline.event("fault", kind="file_size_limit", target=process.name, pid=process.pid,
                               max_bytes=max_bytes)
    resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (max_bytes, resource.RLIM_INFINITY))
    return event["ts_ns"]


def lift_file_size_limit(ctx, process) -> int:
    event = ctx.timeline.event("fault_end", kind="file_size_limit_lifted", target=process.name, pid=process.pid)
    resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    return event["ts_ns"]


def kill_between_claim_and_commit(ctx, worker, timeout_s: float = 30.0) -> int:
    """Tell a ``claim-and-die`` worker to claim and SIGKILL itself before committing; returns ts_ns of death."""
    ctx.timeline.event("fault", kind="kill_between_claim_and_commit", target=worker.name, pid=worker.process.pid)
    worker.process.send_signal(signal.SIGUSR1, group=False)
    worker.process.wait(timeout_s)
    ctx.faulted.add(worker.name)
    event = ctx.timeline.event("process_exit", name=worker.name, pid=worker.process.pid,
                               exit_code=worker.process.exit_code)
    return event["ts_ns"]


def kill_driver(ctx) -> int:
    """SIGKILL the media driver, leaving its dir (cnc.dat, logs) behind."""
    driver = ctx.driver
    event = ctx.timeline.event("fault", kind="sigkill", target=driver.name, pid=driver.pid)
    ctx.close_counters()
    driver.kill()
    ctx.timeline.event("process_exit", name=driver.name, pid=driver.pid, exit_code=driver.exit_code)
    return event["ts_ns"]


def stop_driver(ctx) -> int:
    """Stop the media driver gracefully (SIGTERM): it closes and exits 0, leaving its dir behind."""
    driver = ctx.driver
    event = ctx.timeline.event("fault", kind="sigterm", target=driver.name, pid=driver.pid)
    ctx.close_counters()
    code = driver.terminate(10)
    ctx.timeline.event("process_exit", name=driver.name, pid=driver.pid, exit_code=code)
    if code != 0:
        ctx.failures.append(f"{driver.name} exit code {code} on SIGTERM, expected 0")
    return event["ts_ns"]


def await_acked(ctx, worker, count: int, timeout_s: float = 60.0) -> None:
    """Wait until publisher ``worker`` has logged ``count`` acknowledged messages (the fault trigger)."""
    await_condition(lambda: worker.count("sent") >= count, timeout_s,
                    f"{worker.name} to acknowledge {count} messages", processes=[worker.process])


# ------------------------------------------------------------------------------------------- network
def set_loss(ctx, aeron_dir, settings, what: str) -> int:
    """Switch a driver's loss generator (its loss-control.dat) to ``settings``; returns the fault's ts_ns."""
    control = LossControl.open(aeron_dir)
    try:
        control.write(settings)
    finally:
        control.close()
    fields = {k: v for k, v in vars(settings).items() if v not in (0, 0.0, ())}
    kind = "network_heal" if not fields else "network_loss"
    return ctx.timeline.event("fault_end" if not fields else "fault", kind=kind, target=str(aeron_dir), what=what,
                              **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()})["ts_ns"]


def kill_peer_driver(ctx) -> int:
    """SIGKILL the second driver of a UDP scenario, leaving its dir behind."""
    peer = ctx.peer
    event = ctx.timeline.event("fault", kind="sigkill", target=peer.process.name, pid=peer.process.pid)
    peer.close_counters()
    peer.process.kill()
    ctx.timeline.event("process_exit", name=peer.process.name, pid=peer.process.pid, exit_code=peer.process.exit_code)
    return event["ts_ns"]
