"""RecordingReplication between two archive processes, each beside its own media driver, over UDP, driven as the
election drives it (``poll(now_ns)`` each cycle, the destination archive's recording signals fed to
``on_signal``): a recording copied up to a stop position ends with Aeron's signals and exactly the source's bytes
to that position; a replication whose source archive is SIGKILLed fails with the progress timeout, and the
destination archive's replication is stopped."""

from __future__ import annotations

import random
import time

import pytest

from aeron_numba.archive.client import AeronArchive
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.recording_replication import RecordingReplication, ReplicationParams
from aeron_numba.layout import archive as A
from harness.awaiting import NotYet, await_condition
from tests.integration.test_archive_process import publish
from tests.integration.test_archive_replication import RECORDED, STREAM, record, two_nodes

REPLAY_STREAM = 2003


def drive(replication: RecordingReplication, archive: AeronArchive, seen: list) -> None:
    """One election cycle: the archive's signals, then the replication's poll."""
    def on_signal(s):
        seen.append(s)
        replication.on_signal(s.correlation_id, s.recording_id, s.position, s.signal)

    archive.poll_for_recording_signals(on_signal)
    replication.poll(time.monotonic_ns())


def replayed(archive: AeronArchive, aeron, recording_id: int, length: int) -> list[bytes]:
    """The messages of a recording's first ``length`` bytes, replayed."""
    subscription = archive.replay(recording_id, 0, length, "aeron:ipc", REPLAY_STREAM)
    got, positions = [], []
    assembler = FragmentAssembler(lambda b, o, n, h: (got.append(bytes(b[o:o + n])), positions.append(h.position)))
    try:
        await_condition(lambda: subscription.poll(assembler, 100) >= 0 and positions and positions[-1] >= length
                        or NotYet(f"at {positions[-1] if positions else None}"), 60, "replayed")
    finally:
        subscription.close()
    return got


@pytest.mark.parametrize("tags", [None, (4_000_005, 4_000_006)], ids=["plain", "tagged"])
def test_a_recording_is_replicated_up_to_a_stop_position_with_aerons_signals(process_manager, aeron_dir, tmp_path,
                                                                             tags):
    with two_nodes(process_manager, aeron_dir, tmp_path) as (src, dst):
        src_id = record(src, 800, seed=12)
        src_stop = src.archive.get_stop_position(src_id)
        # a frame boundary about half way: where a message the source replays begins
        boundaries = []
        assembler = FragmentAssembler(lambda b, o, n, h: boundaries.append(h.position))
        subscription = src.archive.replay(src_id, 0, A.NULL_LENGTH, "aeron:ipc", REPLAY_STREAM)
        await_condition(lambda: subscription.poll(assembler, 100) >= 0 and boundaries and
                        boundaries[-1] == src_stop, 60, "source replayed")
        subscription.close()
        stop_position = boundaries[len(boundaries) // 2]
        assert 0 < stop_position < src_stop

        params = ReplicationParams(stop_position=stop_position, replication_session_id=12345)
        if tags is not None:  # ClusterBackup's tagged replication
            params = ReplicationParams(stop_position=stop_position, channel_tag_id=tags[0],
                                       subscription_tag_id=tags[1])
        replication = RecordingReplication(dst.archive, src_id, src.control_channel, A.DEFAULT_CONTROL_STREAM_ID,
                                           params, 10_000_000_000, 100_000_000, time.monotonic_ns())
        seen = []
        await_condition(lambda: drive(replication, dst.archive, seen) or (
            replication.has_replication_ended() and replication.has_stopped()) or NotYet(
            f"signals {[s.signal for s in seen]}, position {replication.position}"), 120, "replication ended")
        ours = [s for s in seen if s.correlation_id == replication.replication_id]
        assert [s.signal for s in ours] == ["REPLICATE", "EXTEND", "REPLICATE_END", "STOP"], ours
        assert replication.position == stop_position and not replication.has_synced()
        dst_id = replication.recording_id
        assert dst_id != A.NULL_VALUE
        assert dst.archive.get_stop_position(dst_id) == stop_position
        assert replayed(dst.archive, dst.aeron, dst_id, stop_position) == \
            replayed(src.archive, src.aeron, src_id, stop_position)
        replication.close()  # ended: nothing to stop
        assert dst.archive.poll_for_error_response() is None


def test_a_replication_whose_source_archive_is_killed_fails_with_the_progress_timeout(process_manager, aeron_dir,
                                                                                       tmp_path):
    progress_timeout_ns = 2_000_000_000
    with two_nodes(process_manager, aeron_dir, tmp_path) as (src, dst):
        # an active source recording that keeps growing: the replication follows it while the source lives
        src.archive.start_recording(RECORDED, STREAM)
        publication = src.aeron.add_exclusive_publication(RECORDED, STREAM)
        rng = random.Random(21)
        publish(publication, 200, rng)
        started = []
        await_condition(lambda: src.archive.poll_for_recording_signals(started.append) >= 0 and any(
            s.signal == "START" for s in started), 30, "source recording START")
        src_id = next(s.recording_id for s in started if s.signal == "START")
        replication = RecordingReplication(dst.archive, src_id, src.control_channel, A.DEFAULT_CONTROL_STREAM_ID,
                                           ReplicationParams(), progress_timeout_ns, 100_000_000,
                                           time.monotonic_ns())
        seen = []
        progressed_at = []

        def following():
            publish(publication, 5, rng)
            drive(replication, dst.archive, seen)
            progressed_at.append(replication.position)
            return replication.position > 0 and len(set(progressed_at[-30:])) > 3

        await_condition(following, 60, "the replication follows the live source recording")
        src.archive_process.kill()
        died = time.monotonic()
        failure = []

        def failed():
            try:
                drive(replication, dst.archive, seen)
            except ClusterError as exc:
                failure.append(exc)
                return True
            return False

        await_condition(failed, 60, "the progress timeout")
        assert "log replication has not progressed" in str(failure[0])
        assert time.monotonic() - died >= progress_timeout_ns / 1e9 * 0.9
        assert replication.has_replication_ended()
        # the destination archive was told to stop: its replication ends
        ended = []
        await_condition(lambda: dst.archive.poll_for_recording_signals(
            lambda s: ended.append(s.signal) if s.correlation_id == replication.replication_id else None) >= 0
            and "REPLICATE_END" in ended + [s.signal for s in seen if s.correlation_id == replication.replication_id],
            30, "REPLICATE_END after the stop")
        publication.close()
