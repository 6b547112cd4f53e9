"""The main job: a media driver, a publisher process and a subscriber process over ``aeron:ipc``.

Starts a driver in a fresh aeron dir, a subscriber and then a publisher (both through the Python client
API), lets ``--messages`` messages flow, prints what each side saw and the aeron-stat view of the
driver's counters while both are still connected, then stops everything and removes the dir.

Run: ``python -m aeron_numba.demo [--messages N] [--max-length BYTES]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

STREAM_ID = 1001
CHANNEL = "aeron:ipc?term-length=1m"


def _message_length(seq: int, max_length: int) -> int:
    return 8 + (seq * 7919) % (max_length - 7)


def publisher(aeron_dir: str, messages: int, max_length: int) -> int:
    import numpy as np  # here, as the client: --help answers without them

    from aeron_numba.client import Aeron, Context
    from aeron_numba.layout import publication_status as P

    buffer = np.zeros(max_length, np.uint8)
    back_pressured = 0
    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        publication = aeron.add_publication(CHANNEL, STREAM_ID)
        while not publication.is_connected:
            time.sleep(0.001)
        start = time.perf_counter()
        for seq in range(messages):
            length = _message_length(seq, max_length)
            buffer[:8].view(np.int64)[0] = seq
            while (result := publication.offer(buffer, 0, length)) < 0:
                if result == P.BACK_PRESSURED:
                    back_pressured += 1
                    time.sleep(0)
                elif result != P.ADMIN_ACTION:
                    print(f"publisher: offer failed with {P.STATUS_NAMES.get(result, result)}", flush=True)
                    return 1
        elapsed = time.perf_counter() - start
        print(f"done: published {messages:,} messages in {elapsed:.2f} s ({messages / elapsed:,.0f} msgs/s), "
              f"back pressured {back_pressured:,} times, final position {publication.position:,}", flush=True)
        sys.stdin.readline()  # stay connected until the demo has taken its aeron-stat view
    return 0


def subscriber(aeron_dir: str, messages: int, max_length: int) -> int:
    import numpy as np

    from aeron_numba.client import Aeron, Context

    state = {"next": 0, "errors": 0, "bytes": 0}

    def on_fragment(buffer, offset, length, header) -> None:
        seq = int(buffer[offset : offset + 8].view(np.int64)[0])
        if seq != state["next"] or length != _message_length(seq, max_length):
            state["errors"] += 1
        state["next"] = seq + 1
        state["bytes"] += length

    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        subscription = aeron.add_subscription(CHANNEL, STREAM_ID)
        print("ready", flush=True)
        start = None
        while state["next"] < messages:
            if subscription.poll(on_fragment, 256) == 0:
                time.sleep(0)
            elif start is None:
                start = time.perf_counter()
        elapsed = time.perf_counter() - (start or time.perf_counter())
        verdict = "in order and intact" if state["errors"] == 0 else f"{state['errors']} ERRORS"
        print(f"done: received {state['next']:,} messages ({state['bytes']:,} bytes) in {elapsed:.2f} s, {verdict}",
              flush=True)
        sys.stdin.readline()
    return 0 if state["errors"] == 0 else 1


def _spawn(role: str, aeron_dir: str, args) -> subprocess.Popen:
    argv = [sys.executable, "-m", "aeron_numba.demo", role, "--dir", aeron_dir, "--messages", str(args.messages),
            "--max-length", str(args.max_length)]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _await_line(process: subprocess.Popen, prefix: str, role: str) -> str:
    line = process.stdout.readline()
    if not line.startswith(prefix):
        raise SystemExit(f"{role} did not report '{prefix}' (exit code {process.poll()}): {line!r}")
    return line.strip()


def run(args) -> int:
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.driver import DriverContext, MediaDriverProcess
    from aeron_numba.kernels.counters import CountersReader
    from aeron_numba.tools.aeron_stat import stat_lines

    aeron_dir = tempfile.mkdtemp(prefix="aeron-numba-demo-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    shutil.rmtree(aeron_dir)  # the driver creates it
    ctx = DriverContext.from_env(aeron_dir=aeron_dir, client_liveness_timeout_ns=5_000_000_000,
                                 publication_unblock_timeout_ns=10_000_000_000, timer_interval_ns=100_000_000)
    processes = []
    try:
        print(f"starting media driver in {aeron_dir}", flush=True)
        with MediaDriverProcess.launch(ctx) as driver:
            subscriber_process = _spawn("subscriber", aeron_dir, args)
            processes.append(subscriber_process)
            _await_line(subscriber_process, "ready", "subscriber")
            publisher_process = _spawn("publisher", aeron_dir, args)
            processes.append(publisher_process)
            print(f"publisher   {_await_line(publisher_process, 'done', 'publisher')}")
            print(f"subscriber  {_await_line(subscriber_process, 'done', 'subscriber')}")
            with CncFile.open(ctx.cnc_path) as cnc_file:
                reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
                print("\n".join(stat_lines(cnc_file, reader, int(time.time() * 1000))))
                del reader
            codes = []
            for process in processes:
                process.stdin.write("stop\n")
                process.stdin.flush()
                codes.append(process.wait(60))
            print(f"stopped clients (exit codes {codes}) and driver (exit code {driver.close()})")
            return 0 if codes == [0, 0] else 1
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        shutil.rmtree(aeron_dir, ignore_errors=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    from aeron_numba import cli

    parser = argparse.ArgumentParser(prog=cli.prog_name("aeron_numba.demo", prog),
                                     description="media driver + publisher + subscriber over aeron:ipc")
    cli.add_version_argument(parser)
    parser.add_argument("role", nargs="?", default="run", choices=["run", "publisher", "subscriber"])
    parser.add_argument("--dir", help="aeron dir (publisher/subscriber roles)")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--max-length", type=int, default=1024, help="messages are 8..max-length bytes")
    args = parser.parse_args(argv)
    if args.max_length < 16:
        parser.error(f"--max-length={args.max_length} must be >= 16")
    if args.role == "publisher":
        return publisher(args.dir, args.messages, args.max_length)
    if args.role == "subscriber":
        return subscriber(args.dir, args.messages, args.max_length)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
