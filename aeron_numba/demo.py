"""The main job: a media driver, a publisher process and a subscriber process over ``aeron:ipc``.

Starts a driver in a fresh aeron dir, a subscriber and then a publisher (both through the Python client
API), lets ``--messages`` messages flow, prints what each side saw and the aeron-stat view of the
driver's counters while both are still connected, then stops everything and removes the dir.
Messages longer than the MTU go as fragments and the subscriber reassembles them (``FragmentAssembler``).

Whatever ends it (done, ``--timeout``, SIGINT/SIGTERM, an error) stops the children and removes the dir;
if the demo itself is killed, the kernel signals its children (``with_parent_death_signal``) and the driver
removes its dir on the way out (``dir_delete_on_shutdown``).

Run: ``python -m aeron_numba.demo [--messages N] [--max-length BYTES] [--timeout SECONDS]``
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from aeron_numba.child_processes import exit_on_signals, with_parent_death_signal
from aeron_numba.layout.frame import compute_max_message_length

STREAM_ID = 1001
TERM_LENGTH = 1 << 20
CHANNEL = f"aeron:ipc?term-length={TERM_LENGTH}"
MIN_LENGTH = 16  # room for the sequence number and a varying tail
MAX_LENGTH = compute_max_message_length(TERM_LENGTH)
DEFAULT_TIMEOUT_S = 120.0


class DeadlineExceeded(Exception):
    """The demo (or one of its roles) did not finish within ``--timeout``."""


def _deadline(timeout_s: float):
    """A check that raises ``DeadlineExceeded`` once ``timeout_s`` has passed."""
    end = time.monotonic() + timeout_s

    def check(doing: str) -> None:
        if time.monotonic() > end:
            raise DeadlineExceeded(f"{doing} not done within --timeout={timeout_s:g} s")

    return check


def _message_length(seq: int, max_length: int) -> int:
    return 8 + (seq * 7919) % (max_length - 7)


def publisher(aeron_dir: str, messages: int, max_length: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    import numpy as np  # here, as the client: --help answers without them

    from aeron_numba.client import Aeron, Context
    from aeron_numba.layout import publication_status as P

    check_deadline = _deadline(timeout_s)
    buffer = np.zeros(max_length, np.uint8)
    back_pressured = 0
    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        publication = aeron.add_publication(CHANNEL, STREAM_ID)
        while not publication.is_connected:
            check_deadline("publisher: connecting")
            time.sleep(0.001)
        start = time.perf_counter()
        for seq in range(messages):
            length = _message_length(seq, max_length)
            buffer[:8].view(np.int64)[0] = seq
            while (result := publication.offer(buffer, 0, length)) < 0:
                if result == P.BACK_PRESSURED:
                    back_pressured += 1
                    check_deadline(f"publisher: message {seq:,} of {messages:,}")
                    time.sleep(0)
                elif result != P.ADMIN_ACTION:
                    print(f"publisher: offer failed with {P.STATUS_NAMES.get(result, result)}", flush=True)
                    return 1
        elapsed = time.perf_counter() - start
        print(f"done: published {messages:,} messages in {elapsed:.2f} s ({messages / elapsed:,.0f} msgs/s), "
              f"back pressured {back_pressured:,} times, final position {publication.position:,}", flush=True)
        sys.stdin.readline()  # stay connected until the demo has taken its aeron-stat view
    return 0


def subscriber(aeron_dir: str, messages: int, max_length: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    import numpy as np

    from aeron_numba.client import Aeron, Context, FragmentAssembler

    check_deadline = _deadline(timeout_s)
    state = {"next": 0, "errors": 0, "bytes": 0}

    def on_message(buffer, offset, length, header) -> None:
        seq = int(buffer[offset : offset + 8].view(np.int64)[0])
        if seq != state["next"] or length != _message_length(seq, max_length):
            state["errors"] += 1
        state["next"] = seq + 1
        state["bytes"] += length

    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        subscription = aeron.add_subscription(CHANNEL, STREAM_ID)
        assembler = FragmentAssembler(on_message)  # messages above the MTU arrive as fragments
        print("ready", flush=True)
        start = None
        while state["next"] < messages:
            if subscription.poll(assembler, 256) == 0:
                check_deadline(f"subscriber: {state['next']:,} of {messages:,} messages received,")
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
            "--max-length", str(args.max_length), "--timeout", str(args.timeout)]
    return subprocess.Popen(with_parent_death_signal(argv, signal.SIGTERM), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _await_line(process: subprocess.Popen, prefix: str, role: str) -> str:
    line = process.stdout.readline()
    if not line.startswith(prefix):
        raise SystemExit(f"{role} did not report '{prefix}' (exit code {process.poll()}): {line!r}")
    return line.strip()


def _on_alarm(signum, frame):
    raise DeadlineExceeded("the demo did not finish within --timeout")


def _stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()


def run(args) -> int:
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.driver import DriverContext, MediaDriverProcess
    from aeron_numba.kernels.counters import CountersReader
    from aeron_numba.tools.aeron_stat import stat_lines

    aeron_dir = tempfile.mkdtemp(prefix="aeron-numba-demo-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    shutil.rmtree(aeron_dir)  # the driver creates it
    # Aeron's default client liveness (10 s): on a busy machine a Python client can miss 5 s of keepalives.
    ctx = DriverContext.from_env(aeron_dir=aeron_dir, client_liveness_timeout_ns=10_000_000_000,
                                 publication_unblock_timeout_ns=15_000_000_000, timer_interval_ns=100_000_000,
                                 dir_delete_on_shutdown=True)
    processes, driver = [], None
    # SIGALRM bounds the whole run, blocking reads of the children's output included.
    previous_alarm = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(max(1, math.ceil(args.timeout)))
    with exit_on_signals():  # outside the try: a second signal must not cut the clean-up short
        try:
            print(f"starting media driver in {aeron_dir}", flush=True)
            driver = MediaDriverProcess.launch(ctx)
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
        except DeadlineExceeded as exc:
            print(f"demo: {exc} ({args.timeout:g} s); stopped the driver and clients", file=sys.stderr, flush=True)
            return 1
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous_alarm)
            for process in processes:
                _stop_process(process)
            if driver is not None:
                driver.close()
            shutil.rmtree(aeron_dir, ignore_errors=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    from aeron_numba import cli

    parser = argparse.ArgumentParser(prog=cli.prog_name("aeron_numba.demo", prog),
                                     description="media driver + publisher + subscriber over aeron:ipc")
    cli.add_version_argument(parser)
    parser.add_argument("role", nargs="?", default="run", choices=["run", "publisher", "subscriber"])
    parser.add_argument("--dir", help="aeron dir (publisher/subscriber roles)")
    parser.add_argument("--messages", type=int, default=200_000, help="how many messages to send (>= 1)")
    parser.add_argument("--max-length", type=int, default=1024,
                        help=f"messages are 8..max-length bytes ({MIN_LENGTH}..{MAX_LENGTH}); above the MTU "
                             "they go as fragments and are reassembled")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds before the demo gives up and stops everything (default %(default)g)")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error(f"--messages={args.messages} must be >= 1")
    if not MIN_LENGTH <= args.max_length <= MAX_LENGTH:
        parser.error(f"--max-length={args.max_length} must be in [{MIN_LENGTH}, {MAX_LENGTH}] "
                     f"(the max message length of a {TERM_LENGTH // 1024} KiB term)")
    if not (0 < args.timeout < 1e6):
        parser.error(f"--timeout={args.timeout:g} must be in (0, 1e6) seconds")
    if args.role == "run":
        return run(args)
    role = publisher if args.role == "publisher" else subscriber
    try:
        # Ctrl-C reaches the clients too (the demo's process group): they leave quietly, closing their client.
        with exit_on_signals():
            return role(args.dir, args.messages, args.max_length, args.timeout)
    except DeadlineExceeded as exc:
        print(f"{args.role}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
