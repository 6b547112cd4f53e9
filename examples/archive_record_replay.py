"""Archive example: record a stream, list the recording, replay it.

Starts an archive with its own media driver (``python -m aeron_numba archive --embedded-driver``) in fresh dirs,
then, as a client of both: starts a recording of an IPC stream, publishes ``--messages`` messages on it, stops the
recording once all of it is on disk, lists the archive's recordings, replays the recording from its start and
checks every message comes back as sent. Stops the archive (and so its driver) and removes the dirs at the end.

Run: ``python examples/archive_record_replay.py [--messages N]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from aeron_numba.archive.client import AeronArchive
from aeron_numba.client import Aeron, Context, FragmentAssembler

CHANNEL = "aeron:ipc?term-length=64k"
STREAM_ID = 1001
REPLAY_CHANNEL, REPLAY_STREAM_ID = "aeron:ipc", 1002
DEADLINE_S = 120.0


def wait_for(condition, what: str, deadline: float):
    """Poll ``condition()`` until it is truthy; exit with a message at the deadline."""
    while not (value := condition()):
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.001)
    return value


def start_archive(aeron_dir: str, archive_dir: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "aeron_numba", "archive", "--embedded-driver", "--dir", aeron_dir,
         "--archive-dir", archive_dir],
        stdout=subprocess.PIPE, text=True, start_new_session=True)


def await_archive_ready(archive: subprocess.Popen) -> None:
    """The archive prints ``aeron-numba archive ...`` once it (and its driver, which prints first) is ready."""
    for line in archive.stdout:
        print(line.strip())
        if line.startswith("aeron-numba archive"):
            return
    sys.exit(f"the archive did not start (exit code {archive.wait()})")


def record_list_replay(aeron_dir: str, messages: int, deadline: float) -> int:
    sent = [f"message {i}: {'x' * (i % 300)}".encode() for i in range(messages)]
    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        archive = AeronArchive.connect(aeron)
        try:
            # Record: the archive subscribes to the stream; every publication on it is recorded from its start.
            archive.start_recording(CHANNEL, STREAM_ID)
            publication = aeron.add_exclusive_publication(CHANNEL, STREAM_ID)
            for payload in sent:
                wait_for(lambda: publication.offer(payload) > 0, "the publication to take a message", deadline)
            recording_id = wait_for(lambda: 1 + archive.find_last_matching_recording(0, "aeron:ipc", STREAM_ID),
                                    "the recording to start", deadline) - 1
            end = publication.position
            wait_for(lambda: archive.get_recording_position(recording_id) == end, "every message on disk", deadline)
            archive.stop_recording(CHANNEL, STREAM_ID)
            publication.close()
            print(f"recorded {messages} messages as recording {recording_id} (stop position {end})")

            # List: one descriptor per recording the archive holds.
            listed = []
            archive.list_recordings(0, 100, listed.append)
            for d in listed:
                print(f"recording {d.recording_id}: {d.original_channel} stream {d.stream_id}, "
                      f"positions {d.start_position}..{d.stop_position}")

            # Replay: the archive publishes the recording again, on the replay channel, from its start to its end.
            received = []
            assembler = FragmentAssembler(lambda buffer, offset, length, header:
                                          received.append(bytes(buffer[offset:offset + length])))
            subscription = archive.replay(recording_id, 0, end, REPLAY_CHANNEL, REPLAY_STREAM_ID)
            wait_for(lambda: subscription.poll(assembler, 64) >= 0 and len(received) >= messages,
                     "the replay", deadline)
            subscription.close()
        finally:
            archive.close()
    intact = received == sent
    print(f"replayed {len(received)} messages: {'all as sent' if intact else 'NOT as sent'}")
    return 0 if intact else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/archive_record_replay.py",
                                     description="record a stream, list the recording, replay it")
    parser.add_argument("--messages", type=int, default=1000, help="how many messages to record (default 1000)")
    args = parser.parse_args(argv)
    if args.messages <= 0:
        parser.error(f"--messages={args.messages} must be > 0")
    work_dir = tempfile.mkdtemp(prefix="aeron-numba-archive-example-",
                                dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    aeron_dir, archive_dir = os.path.join(work_dir, "aeron"), os.path.join(work_dir, "archive")
    archive = None
    try:
        archive = start_archive(aeron_dir, archive_dir)
        await_archive_ready(archive)
        return record_list_replay(aeron_dir, args.messages, time.monotonic() + DEADLINE_S)
    finally:
        if archive is not None:
            archive.send_signal(signal.SIGTERM)  # the archive stops its embedded driver as it exits
            try:
                archive.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(archive.pid, signal.SIGKILL)
                archive.wait()
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
