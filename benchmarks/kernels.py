"""Kernel ceiling: append + read of small messages in ONE process through the compiled kernels.

No second process, no driver: this is the upper bound of what the data path kernels can do on this
machine, to compare the cross-process benchmarks against. Not a test; figures go in issue notes.

Run: ``python -m benchmarks.kernels [--messages N] [--length BYTES] [--runs R]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from aeron_numba.kernels import term_appender, term_reader
from aeron_numba.kernels.handlers import FragmentHandler
from aeron_numba.layout import log_buffer_descriptor as lb, publication_status
from aeron_numba.layout.log_buffers import LogBuffers

TERM_LENGTH = 1024 * 1024
BATCH = 4096  # messages appended before they are read back (fits in half a term at 32 bytes)


@numba.njit
def _count(ctx, buffer, offset, length):
    ctx[0] += 1
    ctx[1] += buffer[offset]


@numba.njit(
    numba.types.int64(
        numba.types.uint8[::1], numba.types.int64[::1], numba.types.uint8[::1], numba.types.uint8[::1],
        numba.types.int64, numba.types.int64, numba.types.boolean, FragmentHandler, numba.types.int64[::1],
    ),
    cache=True,
)
def append_and_read(log, pub_state, limit_buf, sub_pos, messages, length, exclusive, handler, ctx):
    """Append ``messages`` in batches and read each batch back; returns messages read."""
    src = np.zeros(length, np.uint8)
    term_length = term_appender.log_term_length(log)
    sent = 0
    while sent < messages:
        batch_end = min(sent + BATCH, messages)
        while sent < batch_end:
            src[0] = sent & 0xFF
            if exclusive:
                result = term_appender.exclusive_offer(log, pub_state, limit_buf, src, 0, length, 0)
            else:
                result = term_appender.concurrent_offer(log, pub_state, limit_buf, src, 0, length, 0)
            if result > 0:
                sent += 1
            elif result != publication_status.ADMIN_ACTION:
                return -1
        before = sub_pos[0:8].view(np.int64)[0]
        after = before
        while True:  # a poll over padding alone reads 0 fragments but moves the position
            term_reader.image_poll(log, sub_pos, 0, BATCH, handler, ctx)
            position = sub_pos[0:8].view(np.int64)[0]
            if position == after:
                break
            after = position
        if after // term_length > before // term_length:  # clean the term we left, as the driver would
            left = (before // term_length) % lb.PARTITION_COUNT
            log[left * term_length : (left + 1) * term_length] = 0
    return ctx[0]


def measure(messages: int, length: int, exclusive: bool, work_dir: Path) -> float:
    path = work_dir / f"{'x' if exclusive else 'c'}.logbuffer"
    logbuf = LogBuffers.create(path, term_length=TERM_LENGTH, initial_term_id=0, session_id=1, stream_id=1)
    log = logbuf.buffer
    pub_state = np.zeros(publication_status.PUB_STATE_LENGTH, np.int64)
    if exclusive:
        term_appender.exclusive_init_state(log, pub_state)
    limit = np.zeros(128, np.uint8)
    limit[:8].view(np.int64)[0] = 1 << 62
    sub_pos = np.zeros(128, np.uint8)
    ctx = np.zeros(2, np.int64)
    start = time.perf_counter()
    read = append_and_read(log, pub_state, limit, sub_pos, messages, length, exclusive, _count, ctx)
    elapsed = time.perf_counter() - start
    if read != messages:
        raise RuntimeError(f"read {read} of {messages} messages")
    del log
    logbuf.close()
    path.unlink()
    return messages / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="append+read kernel ceiling, one process")
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    work_dir = Path(tempfile.mkdtemp(prefix="aeron-numba-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        print(f"numba {numba.__version__}, {args.messages:,} messages of {args.length} bytes, {args.runs} runs, "
              f"term {TERM_LENGTH // 1024} KiB, batches of {BATCH}")
        for exclusive in (True, False):
            measure(10_000, args.length, exclusive, work_dir)  # warm-up (compile or load from cache)
            rates = [measure(args.messages, args.length, exclusive, work_dir) for _ in range(args.runs)]
            kind = "exclusive " if exclusive else "concurrent"
            print(f"{kind} append+read: median {statistics.median(rates) / 1e6:.1f} M msgs/s, "
                  f"best {max(rates) / 1e6:.1f} M msgs/s "
                  f"({statistics.median(rates) * args.length / 1e6:.0f} MB/s payload)")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
