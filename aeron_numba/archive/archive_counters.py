"""The archive's counters (spec/archive.md §4.4), read by aeron-stat and the tests: their type ids, keys and
labels, and how they are kept.

Each archive has an error count, three session counts (control, recording, replay: stored only when one came or
went, so a duty cycle without news writes nothing), six recorder/replayer I/O counters (bytes, time, the
longest single write or read) and its conductor's two duty-cycle counters (the longest cycle, and how many took
longer than the threshold), labelled as the Java archive labels them in its SHARED threading mode, ours (conductor,
recorder and replayer take turns on one thread; Java adds a recorder and a replayer pair only when DEDICATED).
All are keyed by the archive id and labelled ``<name> - archiveId=<id>``, as Aeron's ArchiveCounters. Every
recording also gets a ``rec-pos`` counter (Aeron's RecordingPos).
"""

from __future__ import annotations

from aeron_numba.agent import DutyCycleTracker
from aeron_numba.layout import archive as A

#: (attribute, counter type id, label) of the recorder and replayer I/O counters.
IO_COUNTERS = (
    ("max_write_ns", A.ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID, "archive-recorder max write time in ns"),
    ("write_bytes", A.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, "archive-recorder total write bytes"),
    ("write_ns", A.ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID, "archive-recorder total write time in ns"),
    ("max_read_ns", A.ARCHIVE_REPLAYER_MAX_READ_TIME_TYPE_ID, "archive-replayer max read time in ns"),
    ("read_bytes", A.ARCHIVE_REPLAYER_TOTAL_READ_BYTES_TYPE_ID, "archive-replayer total read bytes"),
    ("read_ns", A.ARCHIVE_REPLAYER_TOTAL_READ_TIME_TYPE_ID, "archive-replayer total read time in ns"),
)


def rec_pos_key(recording_id: int, session_id: int, source_identity: str, archive_id: int) -> bytes:
    """The ``rec-pos`` counter key (§4.4), the source identity truncated so the key fits 112 bytes."""
    source = source_identity.encode("ascii", errors="replace")[:A.REC_POS_MAX_SOURCE_IDENTITY_LENGTH]
    return (recording_id.to_bytes(8, "little", signed=True) + session_id.to_bytes(4, "little", signed=True)
            + len(source).to_bytes(4, "little") + source + archive_id.to_bytes(8, "little", signed=True))


def rec_pos_label(recording_id: int, session_id: int, stream_id: int, stripped_channel: str, archive_id: int) -> str:
    """``rec-pos: <recordingId> <sessionId> <streamId> <strippedChannel> - archiveId=<archiveId>`` (§4.4)."""
    suffix = f" - archiveId={archive_id}"
    head = f"rec-pos: {recording_id} {session_id} {stream_id} "
    return head + stripped_channel[:max(0, 380 - len(head) - len(suffix))] + suffix


class ArchiveCounters:
    """One archive's counters, allocated through its Aeron client (``aeron.add_counter``)."""

    def __init__(self, aeron, archive_id: int, conductor_cycle_threshold_ns: int = A.DEFAULT_CYCLE_THRESHOLD_NS):
        self.aeron = aeron
        self.archive_id = archive_id
        self.conductor_cycle_threshold_ns = conductor_cycle_threshold_ns
        key = archive_id.to_bytes(8, "little", signed=True)
        suffix = f" - archiveId={archive_id}"
        self.errors = aeron.add_counter(A.ARCHIVE_ERROR_COUNT_TYPE_ID, key, f"Archive Errors{suffix}")
        self.control_sessions = aeron.add_counter(A.ARCHIVE_CONTROL_SESSIONS_TYPE_ID, key,
                                                  f"Archive Control Sessions{suffix}")
        self.recording_sessions = aeron.add_counter(A.ARCHIVE_RECORDING_SESSIONS_TYPE_ID, key,
                                                    f"Archive Recording Sessions{suffix}")
        self.replay_sessions = aeron.add_counter(A.ARCHIVE_REPLAY_SESSIONS_TYPE_ID, key,
                                                 f"Archive Replay Sessions{suffix}")
        self._session_counts = (0, 0, 0)  # what the three counters above hold
        self.io = {name: aeron.add_counter(type_id, key, f"{label}{suffix}") for name, type_id, label in IO_COUNTERS}
        self.max_cycle_time = aeron.add_counter(
            A.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, key, f"archive-conductor max cycle time in ns: SHARED{suffix}")
        self.cycle_time_threshold_exceeded = aeron.add_counter(
            A.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
            f"archive-conductor work cycle time exceeded count: threshold={conductor_cycle_threshold_ns}ns SHARED"
            f"{suffix}")

    def duty_cycle_tracker(self) -> DutyCycleTracker:
        """The conductor's duty cycles into the two cycle-time counters (the archive's runner times them)."""
        longest = self.max_cycle_time

        def propose_max(cycle_ns: int) -> None:  # the archive is the counter's only writer
            if cycle_ns > longest.get():
                longest.set(cycle_ns)

        return DutyCycleTracker(propose_max, self.cycle_time_threshold_exceeded,
                                cycle_time_threshold_ns=self.conductor_cycle_threshold_ns)

    def on_error(self) -> None:
        self.errors.increment()

    def update_session_counts(self, control_sessions: int, recording_sessions: int, replay_sessions: int) -> None:
        """Store the session counts, only when one changed (three counter stores a duty cycle otherwise)."""
        counts = (control_sessions, recording_sessions, replay_sessions)
        if counts != self._session_counts:
            self._session_counts = counts
            self.control_sessions.set(control_sessions)
            self.recording_sessions.set(recording_sessions)
            self.replay_sessions.set(replay_sessions)

    def on_write(self, length: int, ns: int) -> None:
        """A recorder wrote ``length`` bytes in ``ns``."""
        self._count_io("write", length, ns)

    @property
    def write_counters(self) -> tuple:
        """The recorder's total bytes, total time and longest write counters, which compiled writes count into."""
        io = self.io
        return io["write_bytes"], io["write_ns"], io["max_write_ns"]

    def on_read(self, length: int, ns: int) -> None:
        """A replayer read ``length`` bytes in ``ns``."""
        self._count_io("read", length, ns)

    def _count_io(self, kind: str, length: int, ns: int) -> None:
        io = self.io
        io[f"{kind}_bytes"].get_and_add(length)
        io[f"{kind}_ns"].get_and_add(ns)
        if ns > io[f"max_{kind}_ns"].get():
            io[f"max_{kind}_ns"].set(ns)

    def add_recording_position(self, recording_id: int, session_id: int, source_identity: str, stream_id: int,
                               stripped_channel: str):
        """A new recording's ``rec-pos`` counter (§4.4); the recording session closes it."""
        return self.aeron.add_counter(
            A.RECORDING_POSITION_TYPE_ID, rec_pos_key(recording_id, session_id, source_identity, self.archive_id),
            rec_pos_label(recording_id, session_id, stream_id, stripped_channel, self.archive_id))

    def close(self) -> None:
        for counter in (self.errors, self.control_sessions, self.recording_sessions, self.replay_sessions,
                        *self.io.values(), self.max_cycle_time, self.cycle_time_threshold_exceeded):
            counter.close()
