"""Demo: one process appends messages to a log buffer file, another reads them, both in compiled loops.

There is no media driver yet (that is the next layer), so the subscriber process also does the driver's
two duties on the log: it moves the publication limit to ``sub-pos + term_length / 2`` (§4.7) and zeroes
each term it leaves so the publisher can reuse it. Every message carries its sequence number; the
subscriber checks order and a running checksum, and both sides report what they saw.

Run: ``python examples/log_buffer_two_processes.py [--messages N] [--length BYTES] [--term-length BYTES] [--exclusive]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from aeron_numba.kernels import atomics, term_appender, term_reader
from aeron_numba.kernels.handlers import FragmentHandler
from aeron_numba.layout import frame, log_buffer_descriptor as lb, publication_status
from aeron_numba.layout.counters import COUNTER_LENGTH
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.layout.mapped_file import MappedFile
from harness.processes import spawned

# The demo's stand-in for the two counters the driver would own: sub-pos and pub-lmt, a record apart.
SUB_POS_OFFSET = 0
PUB_LMT_OFFSET = COUNTER_LENGTH
POSITIONS_FILE_LENGTH = 4096
FRAGMENTED_EVERY = 1000  # every 1000th message is longer than the MTU payload, to show fragmentation
FRAGMENTED_LENGTH = 5000

# Subscriber context slots (int64 array handed to the compiled fragment handler).
CTX_NEXT_SEQ = 0
CTX_MESSAGES = 1
CTX_CHECKSUM = 2
CTX_ERRORS = 3
CTX_BYTES = 4
CTX_LENGTH = 5


@numba.njit(cache=True)
def _message_length(seq, length):
    return FRAGMENTED_LENGTH if seq % FRAGMENTED_EVERY == FRAGMENTED_EVERY - 1 else length


@numba.njit(cache=True)
def _publish(log, pub_state, limit_buf, exclusive, seq, end_seq, scratch, length, checksum):
    """Offer from ``seq`` until back pressure or ``end_seq``; returns (next seq, running checksum)."""
    while seq < end_seq:
        message_length = _message_length(seq, length)
        scratch[0:8].view(np.int64)[0] = seq
        scratch[8] = seq & 0xFF
        if exclusive:
            result = term_appender.exclusive_offer(log, pub_state, limit_buf, scratch, 0, message_length, 0)
        else:
            result = term_appender.concurrent_offer(log, pub_state, limit_buf, scratch, 0, message_length, 0)
        if result > 0:
            checksum = (checksum * 31 + seq + message_length) & 0xFFFF_FFFF
            seq += 1
        elif result != publication_status.ADMIN_ACTION:
            break
    return seq, checksum


@numba.njit
def _on_fragment(ctx, buffer, offset, length):
    """Check order on each message's first fragment; count whole messages on the last one."""
    flags = buffer[offset - frame.HEADER_LENGTH + frame.FLAGS_FIELD_OFFSET]
    ctx[CTX_BYTES] += length
    if flags & frame.BEGIN_FRAG_FLAG:
        seq = buffer[offset : offset + 8].view(np.int64)[0]
        if seq != ctx[CTX_NEXT_SEQ] or buffer[offset + 8] != (seq & 0xFF):
            ctx[CTX_ERRORS] += 1
        ctx[CTX_NEXT_SEQ] = seq + 1
        if flags & frame.END_FRAG_FLAG:
            ctx[CTX_CHECKSUM] = (ctx[CTX_CHECKSUM] * 31 + seq + length) & 0xFFFF_FFFF
        else:
            ctx[CTX_CHECKSUM] = (ctx[CTX_CHECKSUM] * 31 + seq + FRAGMENTED_LENGTH) & 0xFFFF_FFFF
    if flags & frame.END_FRAG_FLAG:
        ctx[CTX_MESSAGES] += 1


@numba.njit(
    numba.types.int64(
        numba.types.uint8[::1], numba.types.uint8[::1], FragmentHandler, numba.types.int64[::1],
        numba.types.int64, numba.types.int64,
    ),
    cache=True,
)
def _subscribe(log, positions, handler, ctx, term_length, fragment_limit):
    """Poll once, then do the driver's part: clean the term left behind and move the limit."""
    before = atomics.get_int64(positions, SUB_POS_OFFSET)
    fragments = term_reader.image_poll(log, positions, SUB_POS_OFFSET, fragment_limit, handler, ctx)
    after = atomics.get_int64(positions, SUB_POS_OFFSET)
    if after // term_length > before // term_length:
        left = (before // term_length) % lb.PARTITION_COUNT
        log[left * term_length : (left + 1) * term_length] = 0
    atomics.put_int64_release(positions, PUB_LMT_OFFSET, after + term_length // 2)
    return fragments


def _idle(idle_count: int) -> None:
    """Back-off: yield first, then sleep briefly (two cores are shared by both processes)."""
    if idle_count < 20:
        os.sched_yield()
    else:
        time.sleep(0.0001)


def subscriber_main(log_path: str, positions_path: str, count: int, result_path: str) -> None:
    with LogBuffers.open(log_path) as logbuf, MappedFile.open(positions_path) as positions_file:
        log, positions = logbuf.buffer, positions_file.buffer
        ctx = np.zeros(CTX_LENGTH, np.int64)
        idle_count = 0
        start = None
        while ctx[CTX_MESSAGES] < count:
            if _subscribe(log, positions, _on_fragment, ctx, logbuf.term_length, 256) == 0:
                idle_count += 1
                _idle(idle_count)
            else:
                start = start or time.perf_counter()
                idle_count = 0
        elapsed = time.perf_counter() - (start or time.perf_counter())
        Path(result_path).write_text(
            f"{ctx[CTX_MESSAGES]} {ctx[CTX_CHECKSUM]} {ctx[CTX_ERRORS]} {ctx[CTX_BYTES]} {elapsed}\n"
        )
        del log, positions


def run(messages: int, length: int, term_length: int, exclusive: bool) -> int:
    max_payload = frame.max_payload_length(frame.DEFAULT_MTU_LENGTH)
    if not 8 < length <= max_payload:
        raise SystemExit(f"--length={length} must be in (8, {max_payload}]")
    work_dir = Path(tempfile.mkdtemp(prefix="aeron-numba-demo-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        log_path, positions_path, result_path = work_dir / "1.logbuffer", work_dir / "positions", work_dir / "result"
        logbuf = LogBuffers.create(log_path, term_length=term_length, initial_term_id=1000, session_id=7, stream_id=1001)
        positions_file = MappedFile.create(positions_path, POSITIONS_FILE_LENGTH)
        log, positions = logbuf.buffer, positions_file.buffer
        log[logbuf.metadata_offset + lb.LOG_IS_CONNECTED_OFFSET] = 1
        positions[PUB_LMT_OFFSET : PUB_LMT_OFFSET + 8].view(np.int64)[0] = term_length // 2
        pub_state = np.zeros(publication_status.PUB_STATE_LENGTH, np.int64)
        pub_state[publication_status.PUB_STATE_LIMIT_COUNTER_OFFSET] = PUB_LMT_OFFSET
        if exclusive:
            term_appender.exclusive_init_state(log, pub_state)
        scratch = np.zeros(FRAGMENTED_LENGTH, np.uint8)
        _publish(log, pub_state, positions, exclusive, 0, 0, scratch, length, 0)  # compile before timing

        print(f"log buffer {log_path} ({logbuf.term_length // 1024} KiB terms), "
              f"{'exclusive' if exclusive else 'concurrent'} publication, {messages:,} messages of {length} bytes "
              f"(every {FRAGMENTED_EVERY}th is {FRAGMENTED_LENGTH} bytes, fragmented)")
        with spawned(subscriber_main, [(str(log_path), str(positions_path), messages, str(result_path))]) as procs:
            seq, checksum, idle_count = 0, 0, 0
            start = time.perf_counter()
            deadline = time.monotonic() + 300
            while seq < messages:
                new_seq, checksum = _publish(log, pub_state, positions, exclusive, seq, messages, scratch, length, checksum)
                if new_seq == seq:
                    idle_count += 1
                    _idle(idle_count)
                    if not procs[0].is_alive() or time.monotonic() > deadline:
                        raise SystemExit(f"subscriber gone or stuck at message {seq}")
                else:
                    idle_count = 0
                seq = new_seq
            publish_elapsed = time.perf_counter() - start
            procs[0].join(timeout=120)
            if procs[0].exitcode != 0:
                raise SystemExit(f"subscriber failed with exit code {procs[0].exitcode}")
        received, sub_checksum, errors, payload_bytes, sub_elapsed = result_path.read_text().split()
        ok = int(received) == messages and int(sub_checksum) == checksum and int(errors) == 0
        rate = messages / max(publish_elapsed, 1e-9)
        print(f"published {messages:,} in {publish_elapsed:.3f} s ({rate:,.0f} msgs/s); "
              f"subscriber read {int(received):,} messages, {int(payload_bytes):,} payload bytes in {float(sub_elapsed):.3f} s")
        print(f"order and checksum check: {'OK' if ok else 'FAILED'} (checksum {checksum:#010x}, "
              f"out-of-order {errors}), final position {term_appender.producer_position(log):,}")
        del log, positions
        logbuf.close()
        positions_file.close()
        return 0 if ok else 1
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--length", type=int, default=32, help="message length in bytes")
    parser.add_argument("--term-length", type=int, default=1024 * 1024)
    parser.add_argument("--exclusive", action="store_true", help="use an exclusive publication")
    args = parser.parse_args(argv)
    lb.check_term_length(args.term_length)
    return run(args.messages, args.length, args.term_length, args.exclusive)


if __name__ == "__main__":
    sys.exit(main())
