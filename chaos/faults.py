"""Faults the scenarios inject, each logged to the timeline as a ``fault`` event (and ``fault_end``).

Timing comes from the run's seeded ``random.Random`` (``RunContext.rng``), expressed in workload terms
where possible ("after the publisher acknowledged K messages"), so a replay with the same seed injects
the same faults at the same points of the stream.
"""

from __future__ import annotations

import signal
import time

from harness.awaiting import await_condition


def kill(ctx, worker) -> int:
    """SIGKILL a worker (its whole process group); returns the fault's ts_ns."""
    event = ctx.timeline.event("fault", kind="sigkill", target=worker.name, pid=worker.process.pid)
    worker.process.kill()
    ctx.faulted.add(worker.name)
    ctx.timeline.event("process_exit", name=worker.name, pid=worker.process.pid,
                       exit_code=worker.process.exit_code)
    return event["ts_ns"]


def pause(ctx, worker, duration_s: float) -> tuple[int, int]:
    """SIGSTOP a worker for ``duration_s`` then SIGCONT it; returns the (stop, continue) ts_ns."""
    stopped = ctx.timeline.event("fault", kind="sigstop", target=worker.name, pid=worker.process.pid,
                                 duration_s=duration_s)
    worker.process.pause()
    ctx.faulted.add(worker.name)
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))  # a fault's duration, not a wait for a condition
    worker.process.resume()
    resumed = ctx.timeline.event("fault_end", kind="sigcont", target=worker.name, pid=worker.process.pid)
    return stopped["ts_ns"], resumed["ts_ns"]


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


def await_acked(ctx, worker, count: int, timeout_s: float = 60.0) -> None:
    """Wait until publisher ``worker`` has logged ``count`` acknowledged messages (the fault trigger)."""
    await_condition(lambda: worker.count("sent") >= count, timeout_s,
                    f"{worker.name} to acknowledge {count} messages", processes=[worker.process])
