"""Archive scenarios (issue 7): an archive process beside the driver, recording the publisher's stream.

* archive-killed-mid-recording: SIGKILL the archive while it records; a new archive over the same dir recovers
  the recording's stop position to the end of the last whole frame in its segment files (checked here by
  walking the files with the spec's frame layout, not the archive's code), and a replay returns every message
  up to it intact and in order, the publisher's stream going on meanwhile to its subscriber.
* archive-storage-exhausted: a file size limit (as a full disk) stops a recording: STORAGE_SPACE to its client,
  the stop position is the end of the whole frames written, the stream goes on, the replay has all up to it.
* archive-control-client-abandoned: a control client that started a recording is SIGKILLed: its session closes
  after the liveness timeout, the recording goes on to the publisher's end, the replay has every message.
* archive-live-tail-replay: an open-ended replay (length -1) of the recording being written follows it to the
  live end while the stream goes on. The fault: the publisher is SIGSTOPped (shorter than the liveness timeout),
  so the live end stops moving; the replay must catch up to exactly that position and stay open (an active
  recording's end is not the replay's end), then follow again after SIGCONT. The recording is then stopped
  mid-stream: the replay ends at the stop position with every message from its start, in order, intact.
* archive-segment-byte-flipped: a recording made with CRC-32C record checksums; one payload byte of a frame in a
  segment file is flipped after it stopped. A checksum-verified replay fails at that frame (an error to the
  client, nothing from the bad block delivered), replays on either side of it are intact, the archive goes on
  answering, and ``archive-tool verify`` finds the mismatch at that frame and marks the recording INVALID.
* archive-replication-source-killed: an archive replicating another's recording over UDP loses the source archive
  (SIGKILL) mid-copy: REPLICATE_END without SYNC, the copy stopped at a frame boundary and byte-identical to the
  source so far, archive-tool verify passes, the destination archive and both drivers go on.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from pathlib import Path

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.client import AeronArchive
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.layout.archive import RECORDING_STATE_INVALID
from aeron_numba.client import Aeron, Context, FragmentAssembler
from chaos import faults
from chaos.scenario import (CLIENT_TIMEOUTS, LIVENESS_TIMEOUT_S, PROCESS_START_TIMEOUT_S, STREAM, UDP_DRIVER_ENV,
                            Scenario)
from chaos.workload import CHANNEL, HEADER_BYTES, message_bytes
from harness.awaiting import NotYet, await_condition

ARCHIVE_ENV = {
    "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "256k",
    "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
    "AERON_ARCHIVE_IDLE_STRATEGY": "backoff",
}
REPLAY_STREAM = 2001
ARCHIVE_BLOCK_LENGTH = 64 * 1024  # AERON_ARCHIVE_FILE_IO_MAX_LENGTH: the most one replay read may hand out


class _Process:
    """What ``faults.kill`` needs of a worker: a name and a process."""

    def __init__(self, name, process):
        self.name, self.process = name, process


def start_archive(ctx, name: str, archive_dir: Path, env: dict[str, str] | None = None):
    process = ctx.pm.spawn_module(name, "aeron_numba.archive", "--archive-dir", str(archive_dir),
                                  env={**ARCHIVE_ENV, **(env or {}), "AERON_DIR": str(ctx.aeron_dir)})
    process.await_output("aeron-numba archive", PROCESS_START_TIMEOUT_S)
    ctx.timeline.event("process_start", name=name, role="archive", pid=process.pid, **archive_fields(ctx, archive_dir))
    return process


def archive_fields(ctx, archive_dir: Path) -> dict[str, str]:
    """``archive_dir`` and, for an archive kept in the run folder, ``archive_subdir`` (its path relative to the
    folder): what ``chaos verify`` reads the recording from, even when the run folder was moved or copied."""
    fields = {"archive_dir": str(archive_dir)}
    if archive_dir.is_relative_to(ctx.run_dir):
        fields["archive_subdir"] = archive_dir.relative_to(ctx.run_dir).as_posix()
    return fields


def stop_archive(ctx, process, archive_dir: Path) -> None:
    """SIGTERM the archive (it must exit 0) and keep the first line of each error in its mark file's log."""
    code = process.terminate(10)
    ctx.timeline.event("process_exit", name=process.name, pid=process.pid, exit_code=code)
    if code != 0:
        ctx.failures.append(f"{process.name} exit code {code} on SIGTERM, expected 0")
    with ArchiveMarkFile.open(archive_dir) as mark:
        ctx.metrics["archive_errors"] = [e.encoded_exception.splitlines()[0]
                                         for e in ErrorLogReader.read(mark.error_log_buffer)]
    ctx.metrics["archive_dir"] = str(archive_dir)


def await_signal(client, kind: str):
    """The first recording signal ``kind`` (START, STOP, ...) to come to ``client``."""
    signals = []

    def arrived():
        client.poll_for_recording_signals(signals.append)
        return next((s for s in signals if s.signal == kind), None)

    return await_condition(arrived, 30, f"the {kind} signal")


def await_recording_start(client) -> int:
    """The id of the recording whose START signal comes to ``client``."""
    return await_signal(client, "START").recording_id


@dataclass
class RecordedStream:
    """What ``start_recorded_stream`` started: close ``aeron`` when done (its archive client goes with it)."""

    archive: object
    archive_dir: Path
    aeron: Aeron
    client: AeronArchive
    publisher: object
    recording_id: int


def start_recorded_stream(ctx, count: int, *, interval_us: float, exclusive: bool = False,
                          archive_env: dict[str, str] | None = None) -> RecordedStream:
    """An archive, subscriber subA, a control client recording the stream and publisher pub0 sending ``count``
    messages on it, once the recording has started."""
    archive_dir = ctx.run_dir / "archive"
    archive = start_archive(ctx, "archive", archive_dir, archive_env)
    ctx.start_subscriber("subA").await_ready()
    aeron = Aeron.connect(Context(aeron_dir=str(ctx.aeron_dir)))
    try:
        client = AeronArchive.connect(aeron)
        client.start_recording(CHANNEL, STREAM)
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=interval_us, exclusive=exclusive)
        return RecordedStream(archive, archive_dir, aeron, client, publisher, await_recording_start(client))
    except BaseException:
        aeron.close()
        raise


def describe(client, recording_id: int):
    """The recording's descriptor, as the archive lists it."""
    listed = []
    client.list_recording(recording_id, listed.append)
    (descriptor,) = listed
    return descriptor


def note_recording(ctx, descriptor, stop: int, recorded_before_fault: int, **extra) -> None:
    """The metrics ``check_recording`` reads."""
    ctx.metrics.update(recording_id=descriptor.recording_id, stop_position=stop,
                       start_position=descriptor.start_position, term_length=descriptor.term_buffer_length,
                       recorded_before_fault=recorded_before_fault, **extra)


def await_stream_end(ctx, client, recording_id: int) -> tuple[int, int]:
    """The publisher finishes and closes its publication: the recording ends with its image. Returns the
    publisher's last acknowledged position and the recording's stop position."""
    ctx.await_publishers_done()
    final = max(e["position"] for e in ctx.workers["pub0"].events() if e["event"] == "sent")
    await_condition(lambda: client.get_stop_position(recording_id) != -1, 30,
                    "the recording to stop at the end of the stream")
    client.stop_recording(CHANNEL, STREAM)  # the recording subscription
    return final, client.get_stop_position(recording_id)


def segment_files(archive_dir: Path, recording_id: int) -> list[tuple[int, Path]]:
    """(base position, path) of the recording's segment files ``<id>-<base>.rec`` (spec/archive.md §4.1)."""
    return sorted((int(p.name.split("-")[1][:-4]), p) for p in archive_dir.glob(f"{recording_id}-*.rec"))


def last_whole_frame_end(archive_dir: Path, recording_id: int, start: int, term_length: int) -> int:
    """Walk the recording's segment files with the frame layout of spec/transport.md §1 (length i32 at 0,
    type u16 at 6, term offset i32 at 8): the position after the last whole frame."""
    position = start
    for base, path in segment_files(archive_dir, recording_id):
        data = path.read_bytes()
        if base > position:
            break
        offset = position - base
        while offset + 32 <= len(data):
            length, frame_type, term_offset = struct.unpack_from("<i2xHi", data, offset)
            aligned = (length + 31) & ~31
            if length < 32 or offset + aligned > len(data) or frame_type not in (0, 1) or \
                    term_offset != (base + offset) % term_length:
                return base + offset
            offset += aligned
        position = base + offset
    return position


class Replay:
    """A replay subscription and what it delivered: (seq, length, intact, end position) of each message."""

    def __init__(self, client, recording_id: int, position: int, length: int):
        self.subscription = client.replay(recording_id, position, length, "aeron:ipc", REPLAY_STREAM)
        self.messages: list[tuple[int, int, bool, int]] = []
        self.position: int | None = None  # the image's position, kept once the image has gone
        self._assembler = FragmentAssembler(self._on_message)

    def _on_message(self, buffer, offset, length, header):
        pub, seq = struct.unpack_from("<qq", bytes(buffer[offset:offset + HEADER_BYTES]))
        intact = bytes(buffer[offset:offset + length]) == message_bytes(pub, seq, length).tobytes()
        self.messages.append((seq, length, intact, header.position))

    def drain(self) -> int | None:
        """Poll until nothing is left (await_condition sleeps between calls); the replay's position so far."""
        while self.subscription.poll(self._assembler, 256) > 0:
            pass
        if self.subscription.images:
            self.position = self.subscription.images[0].position
        return self.position

    def reached(self, position: int) -> bool:
        at = self.drain()
        return at is not None and at >= position

    def ended(self) -> bool:
        """The replay publication closed and everything it sent was consumed."""
        self.drain()
        images = self.subscription.images
        return self.position is not None and (not images or images[0].is_end_of_stream)

    def close(self) -> None:
        self.subscription.close()


def replay_messages(client, recording_id: int, start: int, stop: int) -> list:
    """(seq, length, intact, end position) of every message replayed from ``start`` to ``stop``."""
    if stop == start:
        return []
    replay = Replay(client, recording_id, start, stop - start)
    await_condition(lambda: replay.reached(stop), 60, "the replay to reach the stop position")
    replay.close()
    return replay.messages


def check_recording(ctx) -> list[str]:
    """The recording of an archive scenario: stop position at the end of the whole frames in its files, not
    below what was recorded before the fault, every message up to it replayed intact at its position, and no
    archive error."""
    m = ctx.metrics
    failures = [f"archive error log: {error}" for error in m["archive_errors"]]
    stop, start = m["stop_position"], m["start_position"]
    reported = m["recorded_before_fault"]
    walked = last_whole_frame_end(Path(m["archive_dir"]), m["recording_id"], start, m["term_length"])
    if stop != walked:
        failures.append(f"recovered stop position {stop} != end of the last whole frame written {walked}")
    if stop < reported:
        failures.append(f"stop position {stop} < the position the archive reported before the fault {reported}")
    replayed = m.pop("replayed")
    m["messages_replayed"] = len(replayed)
    sent = {e["seq"]: e["position"] for e in ctx.workers["pub0"].events() if e["event"] == "sent"}
    replay_from, skipped = m.get("replay_from", start), set(m.get("replay_skipped", ()))
    owed = sorted(seq for seq, position in sent.items() if replay_from < position <= stop and seq not in skipped)
    got = [seq for seq, _, _, _ in replayed]
    if got != owed:
        failures.append(f"replay of [{replay_from}, {stop}) gave {len(got)} messages, owed {len(owed)} "
                        f"(first difference at index "
                        f"{next((i for i, (a, b) in enumerate(zip(got, owed)) if a != b), min(len(got), len(owed)))})")
    bad = [(seq, position) for seq, _, intact, position in replayed if not intact or sent.get(seq) != position]
    if bad:
        failures.append(f"{len(bad)} replayed messages corrupt or at another position than recorded, "
                        f"first (seq, position) {bad[0]}")
    return failures


class ArchiveKilledMidRecording(Scenario):
    name = "archive-killed-mid-recording"
    summary = ("SIGKILL the archive mid-recording; restarted, it recovers the stop position to the last whole frame "
               "and replays every message up to it")
    counter_deltas = {CLIENT_TIMEOUTS: 1}  # the dead archive's Aeron client

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        interval_us = ctx.rng.choice([0, 100, 200])
        stream = start_recorded_stream(ctx, count, interval_us=interval_us, exclusive=ctx.rng.random() < 0.5)
        archive_dir, aeron, client, recording_id = (stream.archive_dir, stream.aeron, stream.client,
                                                    stream.recording_id)
        try:
            kill_at = ctx.rng.randint(count // 10, count // 2)
            ctx.timeline.event("schedule", kill_archive_after_acked=kill_at, recording_id=recording_id)
            faults.await_acked(ctx, stream.publisher, kill_at)
            reported = client.get_recording_position(recording_id)
            killed_ts = faults.kill(ctx, _Process("archive", stream.archive))
            client.close()
            ctx.await_counter(CLIENT_TIMEOUTS, lambda v: v >= 1, LIVENESS_TIMEOUT_S + 10,
                              "the killed archive's client timed out")
            archive2 = start_archive(ctx, "archive2", archive_dir)
            client = AeronArchive.connect(aeron)
            stop = client.get_stop_position(recording_id)
            recovered_ts = ctx.timeline.event("observed", what="recovered stop position", stop_position=stop,
                                              reported_before_kill=reported)["ts_ns"]
            ctx.record_recovery(killed_ts, recovered_ts, "restart to the recovered stop position")
            descriptor = describe(client, recording_id)
            note_recording(ctx, descriptor, stop, reported)
            ctx.metrics["replayed"] = replay_messages(client, recording_id, descriptor.start_position, stop)
            client.close()
        finally:
            aeron.close()
        ctx.await_publishers_done()
        stop_archive(ctx, archive2, archive_dir)

    def check(self, ctx, before, after):
        return check_recording(ctx)


class ArchiveStorageExhausted(Scenario):
    """The archive's file size limit (RLIMIT_FSIZE, as a full disk) is reached mid-recording: the recording stops
    cleanly at its last whole block (stop position = end of the frames in its files), the client that started it
    gets STORAGE_SPACE, the archive lets go of the image so the publisher's stream goes on, and a replay returns
    every message up to the stop position."""

    name = "archive-storage-exhausted"
    summary = ("the archive hits a file size limit mid-recording: STORAGE_SPACE to its client, the recording stops "
               "at its last whole block, the stream goes on, the replay has everything up to the stop")
    counter_deltas = {}

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        stream = start_recorded_stream(ctx, count, interval_us=ctx.rng.choice([0, 100, 200]))
        archive, aeron, client, recording_id = stream.archive, stream.aeron, stream.client, stream.recording_id
        try:
            limit_at = ctx.rng.randint(count // 10, count // 2)
            faults.await_acked(ctx, stream.publisher, limit_at)
            recorded = client.get_recording_position(recording_id)
            segment = 256 * 1024  # ARCHIVE_ENV's segment file length
            limit = recorded % segment + ctx.rng.randrange(0, 64 * 1024, 32)
            fault_ts = faults.limit_file_size(ctx, archive, limit)
            error = await_condition(client.poll_for_error_response, 60, "STORAGE_SPACE for the recording")
            observed = ctx.timeline.event("observed", what="recording stopped", error=error)["ts_ns"]
            ctx.record_recovery(fault_ts, observed, "file size limit to the client's STORAGE_SPACE")
            await_signal(client, "STOP")
            stop = client.get_stop_position(recording_id)
            descriptor = describe(client, recording_id)
            note_recording(ctx, descriptor, stop, recorded, storage_error=error, file_size_limit=limit)
            ctx.metrics["replayed"] = replay_messages(client, recording_id, descriptor.start_position, stop)
            client.close()
        finally:
            aeron.close()
        ctx.await_publishers_done()  # the archive let go of the image: the stream was not held back
        faults.lift_file_size_limit(ctx, archive)
        stop_archive(ctx, archive, stream.archive_dir)

    def check(self, ctx, before, after):
        m = ctx.metrics
        failures = []
        if "STORAGE_SPACE" not in m["storage_error"]:
            failures.append(f"the client got {m['storage_error']!r}, expected STORAGE_SPACE")
        expected = [e for e in m["archive_errors"] if f"recording {m['recording_id']} stopped" in e
                    and ("File too large" in e or "short write" in e)]  # EFBIG, or a write the limit cut short
        unexpected = [e for e in m["archive_errors"] if e not in expected]
        if len(expected) != 1 or unexpected:
            failures.append(f"archive error log {m['archive_errors']}: expected exactly the recording's write error")
        m["archive_errors"] = []  # checked here; the shared check below would flag the expected one
        return failures + check_recording(ctx)


ABANDONED_CLIENT_CODE = (
    "import sys, time; from aeron_numba.client import Aeron, Context; "
    "from aeron_numba.archive.client import AeronArchive; "
    "aeron = Aeron.connect(Context(aeron_dir=sys.argv[1])); archive = AeronArchive.connect(aeron); "
    "archive.start_recording(sys.argv[2], int(sys.argv[3])); print('recording', flush=True); "
    "time.sleep(3600)")


class ArchiveControlClientAbandoned(Scenario):
    """A control client starts a recording and is SIGKILLed without closing its session: the archive closes the
    session once the driver has timed the client out, and goes on recording the stream it started; another
    client's session is untouched and the replay has every message."""

    name = "archive-control-client-abandoned"
    summary = ("SIGKILL an archive control client that started a recording: its session closes after the liveness "
               "timeout, the recording and other sessions go on")
    counter_deltas = {CLIENT_TIMEOUTS: 1}  # the killed control client

    def run(self, ctx):
        from aeron_numba.layout.archive import ARCHIVE_CONTROL_SESSIONS_TYPE_ID

        count = 3000 if ctx.quick else 30000
        archive_dir = ctx.run_dir / "archive"
        archive = start_archive(ctx, "archive", archive_dir)
        subscriber = ctx.start_subscriber("subA")
        subscriber.await_ready()
        aeron = Aeron.connect(Context(aeron_dir=str(ctx.aeron_dir)))
        try:
            client = AeronArchive.connect(aeron)
            sessions = ctx.counters.await_counter(30, type_id=ARCHIVE_CONTROL_SESSIONS_TYPE_ID)
            abandoned = ctx.pm.spawn_python("control-client", ABANDONED_CLIENT_CODE, str(ctx.aeron_dir), CHANNEL,
                                            str(STREAM))
            ctx.timeline.event("process_start", name="control-client", role="archive-client", pid=abandoned.pid)
            abandoned.await_output("recording", PROCESS_START_TIMEOUT_S)
            await_condition(lambda: ctx.counters.value(sessions.counter_id) == 2, 10, "two control sessions")
            publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([0, 100, 200]))
            kill_at = ctx.rng.randint(count // 10, count // 2)
            faults.await_acked(ctx, publisher, kill_at)
            killed_ts = faults.kill(ctx, _Process("control-client", abandoned))
            closed_ts = ctx.await_counter(CLIENT_TIMEOUTS, lambda v: v >= 1, LIVENESS_TIMEOUT_S + 10,
                                          "the abandoned client timed out")
            await_condition(lambda: ctx.counters.value(sessions.counter_id) == 1, 10,
                            "the abandoned control session closed")
            closed_ts = ctx.timeline.event("observed", what="abandoned control session closed")["ts_ns"]
            ctx.record_recovery(killed_ts, closed_ts, "SIGKILL to the archive closing the session")
            listed = []
            client.list_recordings(0, 10, listed.append)
            (descriptor,) = listed
            # stop_recording there ends the recording subscription the abandoned client asked for
            final, stop = await_stream_end(ctx, client, descriptor.recording_id)
            note_recording(ctx, descriptor, stop, final)
            ctx.metrics["replayed"] = replay_messages(client, descriptor.recording_id, descriptor.start_position,
                                                      stop)
            client.close()
        finally:
            aeron.close()
        stop_archive(ctx, archive, archive_dir)

    def check(self, ctx, before, after):
        failures = check_recording(ctx)
        if ctx.metrics["stop_position"] != ctx.metrics["recorded_before_fault"]:
            failures.append(f"the recording stopped at {ctx.metrics['stop_position']}, the publisher ended at "
                            f"{ctx.metrics['recorded_before_fault']}: the abandoned session took the recording down")
        return failures


FRAME_HEADER = 32  # spec/transport.md §1
PAUSE_MAX_S = 1.0  # a paused client's last keepalive (every 0.5 s) stays within the 2 s liveness timeout


def frame_start(sent_event: dict) -> int:
    """Where the (unfragmented) message of a ``sent`` event begins: its frame ends at the acknowledged position."""
    return sent_event["position"] - ((sent_event["length"] + FRAME_HEADER + 31) & ~31)


class ArchiveLiveTailReplay(Scenario):
    """A replay with length -1 of a recording still being written follows it to the live end. The fault: the
    publisher is SIGSTOPped (within the liveness timeout), so the live end stops moving; the replay must reach
    exactly that position and stay open, then follow again on SIGCONT. The recording is then stopped mid-stream
    and the replay ends at its stop position with every message from where it began, intact, at its position."""

    name = "archive-live-tail-replay"
    summary = ("an open-ended replay tails a live recording; the publisher is SIGSTOPped: the replay waits at the "
               "still live end, follows on SIGCONT, and ends at the stop position with every message")
    counter_deltas = {}

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        interval_us = ctx.rng.choice([100, 200])  # not flat out: the stream must outlast the replay's catch-up
        stream = start_recorded_stream(ctx, count, interval_us=interval_us, exclusive=ctx.rng.random() < 0.5)
        aeron, client, publisher, recording_id = stream.aeron, stream.client, stream.publisher, stream.recording_id
        replay_at = ctx.rng.randint(count // 20, count // 10)
        from_seq = ctx.rng.randint(0, replay_at)  # the replay starts where message from_seq begins
        pause_at = ctx.rng.randint(count // 5, count * 2 // 5)
        pause_s = ctx.rng.uniform(0.3, 0.8)
        stop_at = ctx.rng.randint(count // 2, count * 7 // 10)
        ctx.timeline.event("schedule", replay_after_acked=replay_at, replay_from_seq=from_seq,
                           pause_after_acked=pause_at, pause_s=pause_s, stop_recording_after_acked=stop_at)
        try:
            faults.await_acked(ctx, publisher, replay_at)
            sent = [e for e in publisher.events() if e["event"] == "sent"]
            replay_from = client.get_start_position(recording_id) if from_seq == 0 else sent[from_seq - 1]["position"]
            await_condition(lambda: client.get_recording_position(recording_id) >= replay_from, 30,
                            f"the recording to pass the replay's start {replay_from}")
            replay = Replay(client, recording_id, replay_from, -1)
            self._await_acked(ctx, publisher, replay, pause_at)
            live = client.get_recording_position(recording_id)
            await_condition(lambda: replay.reached(live), 30, f"the replay to reach the live position {live}")
            if publisher.process.exit_code is not None or client.get_stop_position(recording_id) != -1:
                ctx.failures.append("the stream ended before the replay caught up with it: nothing was tailed")
            paused_end, resumed_ts = self._pause_publisher(ctx, publisher, client, recording_id, replay, pause_s)
            await_condition(lambda: replay.reached(paused_end + 1), 30,
                            "the replay to follow the recording past where the paused publisher stopped",
                            processes=[publisher.process])
            ctx.record_recovery(resumed_ts, ctx.timeline.event("observed", what="replay moving again")["ts_ns"],
                                "SIGCONT to the replay following the live end again")
            self._await_acked(ctx, publisher, replay, stop_at)
            client.stop_recording(CHANNEL, STREAM)
            await_signal(client, "STOP")
            stop = client.get_stop_position(recording_id)
            await_condition(replay.ended, 30, f"the replay to end at the stop position {stop}")
            ctx.timeline.event("observed", what="replay ended", position=replay.position, stop_position=stop)
            replay.close()
            note_recording(ctx, describe(client, recording_id), stop, paused_end, replay_from=replay_from,
                           replay_end=replay.position)
            ctx.metrics["replayed"] = replay.messages
            client.close()
        finally:
            aeron.close()
        ctx.await_publishers_done()
        ctx.expected_exits[publisher.name] = 0  # paused, not killed: it must finish cleanly
        stop_archive(ctx, stream.archive, stream.archive_dir)

    @staticmethod
    def _await_acked(ctx, publisher, replay, count: int) -> None:
        """``faults.await_acked``, draining the replay meanwhile."""
        await_condition(lambda: (replay.drain(), publisher.count("sent") >= count)[1], 60,
                        f"{publisher.name} to acknowledge {count} messages", processes=[publisher.process])

    @staticmethod
    def _pause_publisher(ctx, publisher, client, recording_id: int, replay, pause_s: float) -> tuple[int, int]:
        """SIGSTOP the publisher for ``pause_s`` (longer if the replay needs it, never past PAUSE_MAX_S): the
        replay must reach the recording's still end and stay open there. Returns that end and the SIGCONT ts_ns."""
        stopped = ctx.timeline.event("fault", kind="sigstop", target=publisher.name, pid=publisher.process.pid,
                                     duration_s=pause_s)["ts_ns"]
        publisher.process.pause()
        ctx.faulted.add(publisher.name)
        paused_at = time.monotonic()

        def at_live_end():
            # The recorder may still be one message short of what the stopped publisher acknowledged.
            acked = max(e["position"] for e in publisher.events() if e["event"] == "sent")
            position, recorded = replay.drain(), client.get_recording_position(recording_id)
            if replay.ended():
                return "ended"
            if position == recorded >= acked:
                return recorded
            return NotYet(f"replay at {position}, recorded {recorded}, acknowledged {acked}")

        try:
            end = await_condition(at_live_end, PAUSE_MAX_S, "the replay to reach the paused recording's end")
            if end != "ended":
                ctx.record_recovery(stopped, ctx.timeline.event("observed", what="replay at the live end",
                                                                position=end)["ts_ns"],
                                    "SIGSTOP to the replay at the still live end")
                faults.hold(pause_s - (time.monotonic() - paused_at))
                end = await_condition(at_live_end, max(0.0, paused_at + PAUSE_MAX_S - time.monotonic()),
                                      "the replay to stay at the paused recording's end")
        finally:
            publisher.process.resume()
            resumed = ctx.timeline.event("fault_end", kind="sigcont", target=publisher.name,
                                         pid=publisher.process.pid)["ts_ns"]
        if end == "ended":
            raise AssertionError("the replay ended at the end of the paused (still active) recording: "
                                 "an open-ended replay must wait there for more")
        return end, resumed

    def check(self, ctx, before, after):
        failures = check_recording(ctx)
        m = ctx.metrics
        if m["replay_end"] != m["stop_position"]:
            failures.append(f"the replay ended at {m['replay_end']}, not at the stop position {m['stop_position']}")
        return failures


CHECKSUM_ENV = {"AERON_ARCHIVE_RECORD_CHECKSUM": "CRC-32C", "AERON_ARCHIVE_REPLAY_CHECKSUM": "CRC-32C"}


class ArchiveSegmentByteFlipped(Scenario):
    """A recording made with CRC-32C record checksums has one payload byte flipped in a segment file after it
    stopped. A checksum-verified replay must fail at that frame instead of delivering it (the client gets the
    error; only whole messages before it arrive), the frames on either side still replay intact, the archive keeps
    answering, and archive-tool verify reports the mismatch at that frame and marks the recording INVALID."""

    name = "archive-segment-byte-flipped"
    summary = ("flip a payload byte in a checksummed recording's segment file: the verified replay fails at that "
               "frame, the rest replays intact, the archive goes on, archive-tool verify marks it INVALID")
    counter_deltas = {}

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        stream = start_recorded_stream(ctx, count, interval_us=ctx.rng.choice([0, 100, 200]),
                                       exclusive=ctx.rng.random() < 0.5, archive_env=CHECKSUM_ENV)
        aeron, client, recording_id = stream.aeron, stream.client, stream.recording_id
        flip_seq = ctx.rng.randrange(count // 10, count * 9 // 10)
        try:
            final, stop = await_stream_end(ctx, client, recording_id)
            descriptor = describe(client, recording_id)
            message = next(e for e in stream.publisher.events() if e["event"] == "sent" and e["seq"] == flip_seq)
            flipped_start, flipped_end = frame_start(message), message["position"]
            fault_ts = self._flip_payload_byte(ctx, stream.archive_dir, descriptor, message)
            failed = Replay(client, recording_id, descriptor.start_position, stop - descriptor.start_position)

            def replay_failed():
                failed.drain()
                return client.poll_for_error_response()

            error = await_condition(replay_failed, 30, "the verified replay to fail on the flipped byte")
            await_condition(failed.ended, 30, "the failed replay's image to end")
            failed.close()
            ctx.record_recovery(fault_ts, ctx.timeline.event("observed", what="replay failed", error=error,
                                                             delivered_to=failed.position)["ts_ns"],
                                "the flip to the replay's checksum error")
            # The archive goes on: both sides of the flipped frame replay, verified, in full.
            replayed = (replay_messages(client, recording_id, descriptor.start_position, flipped_start) +
                        replay_messages(client, recording_id, flipped_end, stop))
            note_recording(ctx, descriptor, stop, final, replay_skipped=[flip_seq], replay_error=error,
                           flipped_frame=flipped_start, flipped_frame_end=flipped_end,
                           failed_replay_end=failed.position,
                           failed_replay_messages=failed.messages, replay_block=ARCHIVE_BLOCK_LENGTH)
            ctx.metrics["replayed"] = replayed
            client.close()
        finally:
            aeron.close()
        stop_archive(ctx, stream.archive, stream.archive_dir)
        # ArchiveTool's command line: verify every segment file of the recording with the CRC-32C checksum.
        tool = ctx.pm.spawn_module("archive-tool", "aeron_numba.tools.archive_tool", str(stream.archive_dir),
                                   "verify", str(recording_id), "-a", "-checksum", "CRC-32C")
        ctx.metrics.update(verify_exit_code=tool.wait(60), verify_output=tool.stdout().strip())
        catalog = Catalog.open(stream.archive_dir, create=False, read_only=True)
        try:
            ctx.metrics["state_after_verify"] = catalog.state(recording_id)
        finally:
            catalog.close()
        flipped = ctx.metrics["flipped_frame"]
        ctx.metrics["flipped_segment"] = [str(path) for base, path in segment_files(stream.archive_dir, recording_id)
                                          if base <= flipped][-1]

    @staticmethod
    def _flip_payload_byte(ctx, archive_dir: Path, descriptor, message: dict) -> int:
        """XOR a seeded byte of the message's payload in its segment file (found by name and checked against
        the frame header of spec/transport.md §1 first); returns the fault's ts_ns."""
        start = frame_start(message)
        at = start + FRAME_HEADER + ctx.rng.randrange(message["length"])
        base, path = [(base, path) for base, path in segment_files(archive_dir, descriptor.recording_id)
                      if base <= start][-1]
        length, term_offset = struct.unpack_from("<i4xi", path.read_bytes()[start - base:start - base + 12])
        if length != message["length"] + FRAME_HEADER or term_offset != start % descriptor.term_buffer_length:
            raise AssertionError(f"no frame of message {message['seq']} at {start} in {path.name}: "
                                 f"length {length}, term offset {term_offset}")
        return faults.corrupt_byte(ctx, path, at - base, ctx.rng.randint(1, 255))

    def check(self, ctx, before, after):
        m = ctx.metrics
        failures = []
        flipped, end = m["flipped_frame"], m["failed_replay_end"]
        if f"checksum mismatch at position {flipped}" not in m["replay_error"]:
            failures.append(f"the verified replay failed with {m['replay_error']!r}, expected a checksum mismatch "
                            f"at the flipped frame {flipped}")
        sent = {e["seq"]: e["position"] for e in ctx.workers["pub0"].events() if e["event"] == "sent"}
        got = m.pop("failed_replay_messages")
        m["failed_replay_delivered"] = len(got)
        owed = sorted(seq for seq, position in sent.items() if m["start_position"] < position <= end)
        if [seq for seq, _, _, _ in got] != owed or any(not ok or sent[seq] != p for seq, _, ok, p in got):
            failures.append(f"the failed replay delivered {len(got)} messages up to {end}: not exactly the "
                            f"{len(owed)} recorded there, intact and at their positions")
        # Nothing from the flipped frame on goes out (the whole messages before it in its block may), and the
        # replay got to within one replay block of it.
        if not (m["flipped_frame_end"] - m["replay_block"] <= end <= flipped):
            failures.append(f"the failed replay reached {end}: not within one {m['replay_block']}-byte block before "
                            f"the flipped frame at {flipped}")
        # ArchiveTool's verdict: the segment file holding the flipped frame fails its checksum, the recording is
        # marked INVALID, and the tool exits with its -1 (255).
        expected = f"(recordingId={m['recording_id']}, file={m['flipped_segment']}) ERR: checksum failed"
        if m["verify_exit_code"] != 255 or expected not in m["verify_output"]:
            failures.append(f"archive-tool verify exited {m['verify_exit_code']} with {m['verify_output']!r}, "
                            f"expected 255 and {expected!r}")
        if m["state_after_verify"] != RECORDING_STATE_INVALID:
            failures.append(f"recording {m['recording_id']} is in state {m['state_after_verify']} after verify, "
                            f"expected INVALID ({RECORDING_STATE_INVALID})")
        if [f"checksum mismatch at position {flipped}" in e for e in m["archive_errors"]] != [True]:
            failures.append(f"archive error log {m['archive_errors']}: expected exactly the failed replay's error")
        m["archive_errors"] = []  # checked here; check_recording would flag the expected one
        return failures + check_recording(ctx)


REPLICATION_ARCHIVE_ENV = {"AERON_ARCHIVE_RECORD_CHECKSUM": "CRC-32", "AERON_ARCHIVE_MESSAGE_TIMEOUT": "5s"}


class ArchiveReplicationSourceKilled(Scenario):
    """An archive replicates a stopped recording from another archive (each beside its own driver, over UDP) and
    the source archive is SIGKILLed mid-copy. As Aeron's ReplicationSession: the replay image goes once the source's
    driver has timed its client out, the replication ends without SYNC (REPLICATE_END), its recording stops (STOP)
    at a frame boundary short of the source's end, what was copied is byte-identical to the source's files, the
    destination archive answers on and exits cleanly, and archive-tool verify (CRC-32) passes on its recording."""

    name = "archive-replication-source-killed"
    summary = ("SIGKILL the source archive mid-replication: REPLICATE_END without SYNC, the copy stops at a frame "
               "boundary byte-identical to the source, archive-tool verify passes, nothing else goes down")
    counter_deltas = {}
    driver_env = UDP_DRIVER_ENV

    def run(self, ctx):
        from aeron_numba.layout import archive as A

        ctx.start_peer_driver("driver-src")
        src_dir, dst_dir = ctx.run_dir / "src-archive", ctx.run_dir / "dst-archive"
        src_control = f"aeron:udp?endpoint=127.0.0.1:{_free_udp_port()}"
        src = ctx.pm.spawn_module("archive-src", "aeron_numba.archive", "--archive-dir", str(src_dir), env={
            **ARCHIVE_ENV, **REPLICATION_ARCHIVE_ENV, "AERON_DIR": str(ctx.peer.aeron_dir),
            "AERON_ARCHIVE_CONTROL_CHANNEL": src_control})
        src.await_output("aeron-numba archive", PROCESS_START_TIMEOUT_S)
        ctx.timeline.event("process_start", name="archive-src", role="archive", pid=src.pid,
                           **archive_fields(ctx, src_dir))
        dst = start_archive(ctx, "archive-dst", dst_dir, {
            **REPLICATION_ARCHIVE_ENV, "AERON_ARCHIVE_CONTROL_CHANNEL": f"aeron:udp?endpoint=127.0.0.1:{_free_udp_port()}",
            "AERON_ARCHIVE_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0"})
        src_stop = self._record_on_source(ctx, 12_000 if ctx.quick else 100_000)  # about 6 MB or 50 MB
        aeron = Aeron.connect(Context(aeron_dir=str(ctx.aeron_dir)))
        try:
            client = AeronArchive.connect(aeron)
            replication_id = client.replicate(0, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src_control)
            signals = []

            def poll():
                client.poll_for_recording_signals(
                    lambda s: signals.append(s) if s.correlation_id == replication_id else None)
                return signals

            await_condition(lambda: any(s.signal == "EXTEND" for s in poll()), 60, "the replication's EXTEND")
            dst_id = signals[0].recording_id
            await_condition(lambda: client.get_recording_position(dst_id) >= src_stop // 4, 120,
                            "a quarter of the recording copied")
            fault_ts = faults.kill(ctx, _Process("archive-src", src))
            ctx.faulted.discard("archive-src")  # not a workload worker: its exit is this scenario's to check
            await_condition(lambda: any(s.signal == "REPLICATE_END" for s in poll()), 60, "REPLICATE_END")
            end_ts = ctx.timeline.event("observed", what="REPLICATE_END")["ts_ns"]
            ctx.record_recovery(fault_ts, end_ts, "the source's death to REPLICATE_END")
            await_condition(lambda: any(s.signal == "STOP" for s in poll()), 30, "the recording's STOP")
            ctx.metrics.update(signals=[s.signal for s in signals], src_stop=src_stop, dst_id=dst_id,
                               dst_stop=client.get_stop_position(dst_id), error=client.poll_for_error_response(),
                               answering=client.get_archive_id() != A.NULL_VALUE)
            client.close()
        finally:
            aeron.close()
        stop_archive(ctx, dst, dst_dir)
        ctx.metrics["identical"] = self._copied_prefix_identical(src_dir, dst_dir, ctx.metrics["dst_id"],
                                                                 ctx.metrics["dst_stop"])
        tool = ctx.pm.spawn_module("archive-tool", "aeron_numba.tools.archive_tool", str(dst_dir), "verify",
                                   str(ctx.metrics["dst_id"]), "-a", "-checksum", "CRC-32")
        ctx.metrics.update(verify_exit_code=tool.wait(60), verify_output=tool.stdout().strip())

    @staticmethod
    def _record_on_source(ctx, count: int) -> int:
        """The workload's stream (publisher pub0, subscriber subA, both on the source's driver) recorded by the
        source archive as recording 0, stopped once pub0 is done; its stop position."""
        aeron = Aeron.connect(Context(aeron_dir=str(ctx.peer.aeron_dir)))
        try:
            client = AeronArchive.connect(aeron)
            ctx.start_subscriber("subA", on_peer=True).await_ready()
            subscription_id = client.start_recording(CHANNEL, STREAM)
            ctx.start_publisher("pub0", 0, count, interval_us=0, on_peer=True)
            await_recording_start(client)
            ctx.await_publishers_done()
            final = max(e["position"] for e in ctx.workers["pub0"].events() if e["event"] == "sent")
            await_condition(lambda: client.get_stop_position(0) == final, 60,
                            "the source recording stopped at the publisher's last position")
            client.stop_recording_subscription(subscription_id)
            client.close()
            ctx.timeline.event("observed", what="source recording", stop_position=final)
            return final
        finally:
            aeron.close()

    @staticmethod
    def _copied_prefix_identical(src_dir: Path, dst_dir: Path, dst_id: int, dst_stop: int) -> bool:
        """Every byte the destination recorded (to its stop position) equals the source's at the same position."""
        for base, path in segment_files(dst_dir, dst_id):
            copied = max(0, min(dst_stop - base, path.stat().st_size))
            if path.read_bytes()[:copied] != (src_dir / f"0-{base}.rec").read_bytes()[:copied]:
                return False
        return True

    def check(self, ctx, before, after):
        m = ctx.metrics
        failures = []
        if "SYNC" in m["signals"] or m["signals"][-2:] not in (["REPLICATE_END", "STOP"], ["STOP", "REPLICATE_END"]):
            failures.append(f"signals {m['signals']}: expected REPLICATE, EXTEND, then REPLICATE_END and STOP, no SYNC")
        if not (0 < m["dst_stop"] < m["src_stop"]) or m["dst_stop"] % 32:
            failures.append(f"destination stopped at {m['dst_stop']}: expected a frame boundary in (0, "
                            f"{m['src_stop']}) (the copy was cut mid-way)")
        if not m["identical"]:
            failures.append("the copied part of the recording differs from the source's segment files")
        if m["verify_exit_code"] != 0:
            failures.append(f"archive-tool verify exited {m['verify_exit_code']}: {m['verify_output']!r}")
        if not m["answering"]:
            failures.append("the destination archive did not answer after the source died")
        return failures


def _free_udp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
