"""What each driver threading mode costs idle: CPU of one media driver with a UDP publication and subscription
(a client process, on the driver's own loopback endpoint) doing nothing, in SHARED, SHARED_NETWORK and DEDICATED
(``python -m benchmarks.driver_threading_idle [--seconds 10] [--settle 3] [--idle backoff] [--modes ...]``).

Each mode gets a fresh driver with every idle strategy variable set to ``--idle`` (Aeron's default ``backoff``);
the client connects, opens ``aeron:udp?endpoint=127.0.0.1:<port>`` for publication and subscription, waits until
the image is there, says it is ready and waits. After ``--settle`` s the driver's CPU time (user + system, all its
threads, ``/proc/<pid>/stat``) is read over ``--seconds`` and printed as % of one core, with its thread count.
The modes run one after the other, so compare them within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from aeron_numba.driver.context import SUPPORTED_THREADING_MODES, idle_strategy_environment
from benchmarks.idle_cpu import START_TIMEOUT_S, cpu_seconds
from harness.aeron_dirs import await_cnc_ready, new_aeron_dir, remove_aeron_dir
from harness.process_manager import ProcessManager

READY = "udp client ready"
CLIENT_CODE = f"""
import socket, threading, time
from aeron_numba.client import Aeron, Context
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
channel = f"aeron:udp?endpoint=127.0.0.1:{{port}}|term-length=64k"
aeron = Aeron.connect(Context())
subscription = aeron.add_subscription(channel, 7)
publication = aeron.add_publication(channel, 7)
deadline = time.monotonic() + 60
while not (publication.is_connected and subscription.image_count == 1):
    if time.monotonic() > deadline:
        raise SystemExit("not connected within 60 s")
    time.sleep(0.01)
print({READY!r}, flush=True)
threading.Event().wait()
"""


def measure_mode(root: Path, mode: str, idle: str, seconds: float, settle_s: float) -> tuple[float, int]:
    """% of one core the driver took over ``seconds``, and its thread count."""
    aeron_dir = new_aeron_dir(f"aeron-numba-bench-threading-{mode.lower()}")
    processes = ProcessManager(root / f"logs-{mode}")
    env = {"AERON_DIR": str(aeron_dir), "AERON_THREADING_MODE": mode, **idle_strategy_environment(idle)}
    try:
        driver = processes.spawn_module("driver", "aeron_numba.driver", env=env)
        await_cnc_ready(aeron_dir, START_TIMEOUT_S, pid=driver.pid, processes=[driver]).close()
        client = processes.spawn("client", [sys.executable, "-c", CLIENT_CODE], env=env)
        client.await_output(READY, START_TIMEOUT_S)
        time.sleep(settle_s)
        start_cpu, start = cpu_seconds(driver.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(driver.pid) - start_cpu, time.monotonic() - start
        threads = len(os.listdir(f"/proc/{driver.pid}/task"))
        return 100.0 * used / elapsed, threads
    finally:
        processes.close()
        remove_aeron_dir(aeron_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.driver_threading_idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--idle", default="backoff", help="every driver idle strategy (default: backoff)")
    parser.add_argument("--modes", nargs="+", default=list(SUPPORTED_THREADING_MODES))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aeron-numba-threading-idle-") as root:
        for mode in args.modes:
            percent, threads = measure_mode(Path(root), mode, args.idle, args.seconds, args.settle)
            print(f"{mode:15s} idle={args.idle:9s} driver CPU {percent:5.1f} % of a core, {threads} threads",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
