"""Archive record and replay throughput beside the floor: a raw sequential write and read of the same bytes, in
the same run (``python -m benchmarks.archive [--messages N] [--dir DIR]``).

For each message size (32 B and 1344 B) a media driver and an archive process (both ``backoff`` idle) run on
a fresh aeron dir and archive dir. This process publishes ``N`` messages as fast as the log takes them
(``loops.stream_publish``, compiled) while the archive records them; the record figure runs from the first
offer to the archive's recorded position reaching the end (the archive keeps up or the publisher is held by
it), seen on the recording's ``rec-pos`` counter polled every 0.1 ms (not through archive requests). Then the
recording is replayed into a compiled consumer (``loops.stream_subscribe``). The floors write the same number
of log bytes to a file in ``file_io_max_length`` blocks (``os.pwrite``), then read them back (``os.preadv``
into one buffer), both through the page cache as the archive does (no fsync: Aeron's default file sync level
0); an ``os.sync()`` before the record figure and before the floor lets each start with no dirty pages of
earlier writes waiting for write-back. Figures: messages/s and MB/s of log bytes (headers and padding
included), and each archive figure as a fraction of its floor (issue target: at least 0.8).

Beside them, the same messages through a plain IPC stream of the same term length (a compiled publisher thread,
the same compiled consumer), with the archive and its driver still running: what a log carries here, the
ceiling of any replay, which must go through one. The replay is also given as a fraction of it.

Then a second archive process on the same driver (its own archive dir, local control stream 11) replicates the
recording from the first (ReplicateRequest2; the replay comes over a UDP loopback replication channel through the
driver's sender and receiver): the replication figure runs from the replicate request to its REPLICATE_END
signal, beside the plain replay of the same recording above.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from aeron_numba.archive.client import AeronArchive, AeronArchiveContext
from aeron_numba.client import Aeron, Context
from aeron_numba.layout.archive import DEFAULT_LOCAL_CONTROL_CHANNEL, NULL_VALUE, RECORDING_POSITION_TYPE_ID
from benchmarks import loops
from harness.aeron_dirs import await_cnc_ready, new_aeron_dir, remove_aeron_dir
from harness.awaiting import await_condition
from harness.driver_settings import driver_env_for_benchmarks
from harness.process_manager import ProcessManager

TERM_LENGTH = 16 * 1024 * 1024
FILE_IO_MAX_LENGTH = 1024 * 1024
RECORDED_POLL_S = 0.0001
STREAM, REPLAY_STREAM, IPC_STREAM = 1001, 2002, 3003
DRIVER_ENV = driver_env_for_benchmarks("backoff")


def frame_length(size: int) -> int:
    return (size + 32 + 31) // 32 * 32


def rec_pos_counter_id(counters, recording_id: int) -> tuple[int] | None:
    """``(id,)`` of the recording's ``rec-pos`` counter (its key starts with the recording id), or None."""
    key = recording_id.to_bytes(8, "little", signed=True)
    for info in counters.for_each():
        if info.type_id == RECORDING_POSITION_TYPE_ID and info.key.startswith(key):
            return (info.counter_id,)
    return None


def floor_write_read(directory: Path, total_bytes: int) -> tuple[float, float]:
    """Seconds to write ``total_bytes`` sequentially in 1 MiB blocks, and to read them back."""
    block = np.full(FILE_IO_MAX_LENGTH, 7, dtype=np.uint8)
    path = directory / "floor.dat"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, total_bytes)
        os.sync()  # as before the record figure: no dirty pages of the archive's run to write back meanwhile
        t0 = time.perf_counter()
        for offset in range(0, total_bytes, FILE_IO_MAX_LENGTH):
            os.pwrite(fd, memoryview(block)[:min(FILE_IO_MAX_LENGTH, total_bytes - offset)], offset)
        t1 = time.perf_counter()
        sink = np.zeros(FILE_IO_MAX_LENGTH, dtype=np.uint8)
        for offset in range(0, total_bytes, FILE_IO_MAX_LENGTH):
            os.preadv(fd, [memoryview(sink)[:min(FILE_IO_MAX_LENGTH, total_bytes - offset)]], offset)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink()
    return t1 - t0, t2 - t1


def stream_ipc(aeron, size: int, messages: int, tsc_hz: float) -> float:
    """Seconds for ``messages`` through a plain IPC stream (exclusive publication, this module's term length):
    the publisher in a thread (the kernels release the GIL), the consumer in this one."""
    channel = f"aeron:ipc?term-length={TERM_LENGTH}"
    subscription = aeron.add_subscription(channel, IPC_STREAM)
    publication = aeron.add_exclusive_publication(channel, IPC_STREAM)
    try:
        await_condition(lambda: publication.is_connected and subscription.image_count > 0, 30, "the IPC stream")
        image = subscription.images[0]
        message = np.zeros(size, dtype=np.uint8)
        counters = np.zeros(loops.PUB_COUNTERS, dtype=np.int64)
        ctx = np.zeros(loops.ECHO_CTX_WORDS, dtype=np.int64)
        sent = []
        pub = publication.compiled()
        publisher = threading.Thread(target=lambda: sent.append(loops.stream_publish(
            pub, message, size, 0, messages, counters, int(120 * tsc_hz), 0)))
        t0 = time.perf_counter()
        publisher.start()
        got = loops.stream_subscribe(image.compiled(), 256, loops.on_stream_fragment, ctx, messages, int(120 * tsc_hz),
                                     0)
        elapsed = time.perf_counter() - t0
        publisher.join()
        if sent != [messages] or got != messages or ctx[loops.CTX_ERRORS]:
            raise RuntimeError(f"IPC stream: sent {sent}, received {got} of {messages}, "
                               f"{int(ctx[loops.CTX_ERRORS])} out of order")
        return elapsed
    finally:
        publication.close()
        subscription.close()


def measure(size: int, messages: int, root: Path, tsc_hz: float) -> dict:
    aeron_dir = new_aeron_dir("aeron-numba-bench-archive")
    archive_dir = root / f"archive-{size}"
    processes = ProcessManager(root / f"logs-{size}")
    channel = f"aeron:ipc?term-length={TERM_LENGTH}"
    try:
        driver = processes.spawn_module("driver", "aeron_numba.driver", env={**DRIVER_ENV, "AERON_DIR": str(aeron_dir)})
        await_cnc_ready(aeron_dir, 120, pid=driver.pid, processes=[driver]).close()
        archive_process = processes.spawn_module(
            "archive", "aeron_numba.archive", "--archive-dir", str(archive_dir),
            env={"AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_IDLE_STRATEGY": "backoff",
                 "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": str(FILE_IO_MAX_LENGTH)})
        archive_process.await_output("aeron-numba archive", 120)
        with Aeron.connect(Context(aeron_dir=str(aeron_dir))) as aeron, AeronArchive.connect(aeron) as archive:
            archive.start_recording(channel, STREAM)
            publication = aeron.add_exclusive_publication(channel, STREAM)
            signals = []
            await_condition(lambda: archive.poll_for_recording_signals(signals.append) or signals, 30, "START")
            recording_id = signals[0].recording_id
            reader = aeron.counters_reader
            (rec_pos,) = await_condition(lambda: rec_pos_counter_id(reader, recording_id), 30, "the rec-pos counter")
            message = np.zeros(size, dtype=np.uint8)
            os.sync()  # no dirty pages of earlier runs to write back during the figure (the floor starts so too)
            counters = np.zeros(loops.PUB_COUNTERS, dtype=np.int64)
            t0 = time.perf_counter()
            sent = loops.stream_publish(publication.compiled(), message, size, 0, messages, counters, int(120 * tsc_hz),
                                        0)
            end = publication.position
            if sent != messages:
                raise RuntimeError(f"published {sent} of {messages}")
            # The recording's rec-pos counter, read directly: asking the archive every few ms would add control
            # requests to its duty cycles and a polling interval (up to 10 ms) to the figure.
            while reader.get_counter_value(rec_pos) < end:
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError(f"recorded {reader.get_counter_value(rec_pos)} of {end} bytes in 300 s")
                time.sleep(RECORDED_POLL_S)
            record_s = time.perf_counter() - t0
            archive.stop_recording(channel, STREAM)
            ctx = np.zeros(loops.ECHO_CTX_WORDS, dtype=np.int64)
            # The clock starts with the replay request: the archive replays as soon as the image connects, so a
            # clock started after that would not count what went into the log meanwhile (up to a window).
            t0 = time.perf_counter()
            subscription = archive.replay(recording_id, 0, end, "aeron:ipc", REPLAY_STREAM)
            await_condition(lambda: subscription.image_count > 0, 30, "the replay image", poll_interval_s=0.0001)
            image = subscription.images[0]
            got = loops.stream_subscribe(image.compiled(), 256, loops.on_stream_fragment, ctx, messages,
                                         int(120 * tsc_hz), 0)
            replay_s = time.perf_counter() - t0
            if got != messages or ctx[loops.CTX_ERRORS]:
                raise RuntimeError(f"replayed {got} of {messages}, {int(ctx[loops.CTX_ERRORS])} out of order")
            publication.close()
            subscription.close()
            ipc_s = stream_ipc(aeron, size, messages, tsc_hz)
            replicate_s = replicate(processes, aeron, aeron_dir, root / f"replica-{size}", recording_id, end)
        write_s, read_s = floor_write_read(root, end)
        return {"size": size, "messages": messages, "bytes": end, "record_s": record_s, "replay_s": replay_s,
                "ipc_s": ipc_s, "replicate_s": replicate_s, "floor_write_s": write_s, "floor_read_s": read_s}
    finally:
        processes.close()
        remove_aeron_dir(aeron_dir)
        shutil.rmtree(archive_dir, ignore_errors=True)
        shutil.rmtree(root / f"replica-{size}", ignore_errors=True)


def replicate(processes, aeron, aeron_dir: Path, replica_dir: Path, recording_id: int, end: int) -> float:
    """Seconds for a second archive to replicate ``recording_id`` (``end`` bytes) from the first, over UDP."""
    replica = processes.spawn_module(
        "replica", "aeron_numba.archive", "--archive-dir", str(replica_dir),
        env={"AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_IDLE_STRATEGY": "backoff",
             "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": str(FILE_IO_MAX_LENGTH),
             "AERON_ARCHIVE_LOCAL_CONTROL_STREAM_ID": "11", "AERON_ARCHIVE_CONTROL_RESPONSE_CHANNEL": "aeron:ipc",
             "AERON_ARCHIVE_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0"})
    replica.await_output("aeron-numba archive", 120)
    with AeronArchive.connect(aeron, AeronArchiveContext(control_request_stream_id=11,
                                                         control_response_stream_id=21)) as archive:
        signals = []
        os.sync()
        t0 = time.perf_counter()
        replication_id = archive.replicate(recording_id, NULL_VALUE, 10, DEFAULT_LOCAL_CONTROL_CHANNEL)
        await_condition(lambda: archive.poll_for_recording_signals(signals.append) >= 0 and any(
            s.signal == "REPLICATE_END" for s in signals), 600, "REPLICATE_END", poll_interval_s=RECORDED_POLL_S)
        seconds = time.perf_counter() - t0
        names = [s.signal for s in signals if s.correlation_id == replication_id]
        if "SYNC" not in names:
            raise RuntimeError(f"replication ended without SYNC: {names}, {archive.poll_for_error_response()}")
        dst_id = signals[0].recording_id
        await_condition(lambda: archive.get_stop_position(dst_id) == end, 30, "the replica stopped at the end")
    return seconds


def table(results: list[dict]) -> str:
    lines = [f"{'size':>6}  {'figure':<10}  {'msgs/s':>12}  {'MB/s':>9}  {'floor MB/s':>10}  {'/ floor':>7}  "
             f"{'/ IPC stream':>12}"]
    for r in results:
        for name, seconds, floor in (("record", r["record_s"], r["floor_write_s"]),
                                     ("replay", r["replay_s"], r["floor_read_s"]),
                                     ("replicate", r["replicate_s"], r["floor_read_s"]),
                                     ("IPC stream", r["ipc_s"], r["floor_read_s"])):
            mb, floor_mb = r["bytes"] / seconds / 1e6, r["bytes"] / floor / 1e6
            of_ipc = f"{r['ipc_s'] / seconds:>12.2f}" if name in ("replay", "replicate") else f"{'':>12}"
            lines.append(f"{r['size']:>5}B  {name:<10}  {r['messages'] / seconds:>12,.0f}  {mb:>9,.0f}  "
                         f"{floor_mb:>10,.0f}  {mb / floor_mb:>7.2f}  {of_ipc}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.archive", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000,
                        help="32-byte messages (default 2,000,000); an eighth as many 1344-byte ones")
    parser.add_argument("--dir", help="where the archive dirs and the floor file go (default: a temp dir in /tmp)")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error(f"--messages={args.messages} must be >= 1")
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="aeron-numba-bench-archive-"))
    root.mkdir(parents=True, exist_ok=True)
    tsc_hz = loops.calibrate_tsc()
    try:
        # 1344-byte messages: an eighth as many, so both sizes write a comparable number of bytes.
        results = [measure(32, args.messages, root, tsc_hz), measure(1344, max(1, args.messages // 8), root, tsc_hz)]
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(f"archive record/replay throughput, term {TERM_LENGTH >> 20} MiB, "
          f"file IO {FILE_IO_MAX_LENGTH >> 20} MiB blocks, archive dir on {root}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
