"""The archive as a process (``python -m aeron_numba.archive``) driven through ``AeronArchive`` over its control
protocol, beside a media driver process: record, list, position queries, replay, errors, truncate, purge,
segment operations, and recovery of a recording whose archive was SIGKILLed."""

from __future__ import annotations

import random
import time

import pytest

from aeron_numba.archive.client import AeronArchive, ArchiveError, RecordingEventsAdapter
from aeron_numba.client import Aeron, Context, FragmentAssembler
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED
from harness.awaiting import NotYet, await_condition
from tests.integration.driver_processes import start_driver

RECORDED = "aeron:ipc?term-length=64k"
STREAM, REPLAY_STREAM = 1001, 2002
ARCHIVE_ENV = {
    "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "128k",
    "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
    "AERON_ARCHIVE_IDLE_STRATEGY": "backoff",
    "AERON_ARCHIVE_CONNECT_TIMEOUT": "5s",
}


class Stack:
    def __init__(self, process_manager, aeron_dir, archive_dir, **archive_env):
        self.process_manager, self.aeron_dir, self.archive_dir = process_manager, aeron_dir, archive_dir
        self.archive_env = {**ARCHIVE_ENV, **archive_env}
        _, cnc = start_driver(process_manager, aeron_dir)
        cnc.close()
        self.archive_process = self.start_archive()
        self.aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
        self.archive = AeronArchive.connect(self.aeron)

    def start_archive(self):
        process = self.process_manager.spawn_module(
            "archive", "aeron_numba.archive", "--archive-dir", str(self.archive_dir),
            env={**self.archive_env, "AERON_DIR": str(self.aeron_dir)})
        process.await_output("aeron-numba archive", 120)
        return process

    def close(self):
        self.archive.close()
        self.aeron.close()


@pytest.fixture
def stack(process_manager, aeron_dir, tmp_path):
    s = Stack(process_manager, aeron_dir, tmp_path / "archive")
    yield s
    s.close()


def publish(publication, count, rng, wait=lambda: None):
    """Offers ``count`` random-size messages once a subscriber (the archive's recording) has joined; NOT_CONNECTED
    before that is the driver still linking the archive's subscription, not a failure."""
    await_condition(lambda: publication.is_connected, 30, f"{publication.channel} connected")
    sent = []
    for _ in range(count):
        payload = rng.randbytes(rng.choice([rng.randint(1, 100), rng.randint(100, 4000)]))
        while True:
            result = publication.offer(payload)
            if result > 0:
                break
            assert result in (BACK_PRESSURED, ADMIN_ACTION), result
            wait()
            time.sleep(0.0001)
        sent.append((payload, result))
    return sent


def io_counters(aeron_dir) -> dict[str, int]:
    """The archive's recorder and replayer counters (§4.4, types 105-110) by label, as aeron-stat shows them."""
    from harness.aeron_dirs import AeronCounters

    with AeronCounters.open(aeron_dir) as counters:
        return {c.label.split(" - ")[0]: c.value for c in counters.counters() if 105 <= c.type_id <= 110}


def signals(archive, wanted: str, timeout_s=10):
    got = []

    def arrived():
        archive.poll_for_recording_signals(got.append)
        return [s for s in got if s.signal == wanted]

    return await_condition(arrived, timeout_s, f"recording signal {wanted}")


def replayed(archive, aeron, recording_id, position, length, count):
    subscription = archive.replay(recording_id, position, length, "aeron:ipc", REPLAY_STREAM)
    got = []
    assembler = FragmentAssembler(lambda b, o, n, h: got.append((bytes(b[o:o + n]), h.position)))

    def done():
        while subscription.poll(assembler, 256) > 0 and len(got) < count:
            pass  # drain what is there: await_condition sleeps between calls
        position = subscription.images[0].position if subscription.images else None
        return len(got) >= count or NotYet(f"{len(got)} of {count} messages, image position {position}, "
                                           f"archive says {archive.poll_for_error_response()}")

    await_condition(done, max(30, count // 10_000), f"{count} replayed messages")
    subscription.close()
    return got


def session_counts(aeron) -> tuple[int, int, int]:
    """The archive's control, recording and replay session counters."""
    reader, values = aeron.counters_reader, {}
    for info in reader.for_each():
        values[info.type_id] = reader.get_counter_value(info.counter_id)
    return tuple(values.get(type_id) for type_id in (A.ARCHIVE_CONTROL_SESSIONS_TYPE_ID,
                                                      A.ARCHIVE_RECORDING_SESSIONS_TYPE_ID,
                                                      A.ARCHIVE_REPLAY_SESSIONS_TYPE_ID))


def test_record_list_replay_and_the_errors_of_bad_requests(stack):
    archive, aeron = stack.archive, stack.aeron
    assert archive.get_archive_id() == archive.get_archive_id() != -1
    subscription_id = archive.start_recording(RECORDED, STREAM)
    publication = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    recording_id = start.recording_id
    assert (start.subscription_id, start.position) == (subscription_id, 0)
    sent = publish(publication, 3000, random.Random(3))
    end = publication.position
    await_condition(lambda: archive.get_recording_position(recording_id) == end, 30, "everything recorded")
    assert archive.get_stop_position(recording_id) == -1  # still recording
    assert session_counts(aeron) == (1, 1, 0)  # this client's control session, the recording
    listed = []
    assert archive.list_recordings(0, 10, listed.append) == 1
    (descriptor,) = listed
    assert (descriptor.recording_id, descriptor.start_position, descriptor.stop_position, descriptor.stream_id,
            descriptor.stripped_channel, descriptor.original_channel) == (recording_id, 0, -1, STREAM, "aeron:ipc",
                                                                          RECORDED)
    assert archive.find_last_matching_recording(0, "aeron:ipc", STREAM) == recording_id
    assert archive.find_last_matching_recording(0, "aeron:ipc", STREAM + 1) == -1

    archive.stop_recording(RECORDED, STREAM)
    signals(archive, "STOP")
    await_condition(lambda: session_counts(aeron) == (1, 0, 0), 10, "the recording sessions counter back to 0")
    assert archive.get_stop_position(recording_id) == end == archive.get_max_recorded_position(recording_id)
    assert archive.get_recording_position(recording_id) == -1
    with pytest.raises(ArchiveError, match="no recording found for streamId=1001") as error:
        archive.stop_recording(RECORDED, STREAM)
    assert error.value.error_code_name == "UNKNOWN_SUBSCRIPTION"

    assert replayed(archive, aeron, recording_id, -1, -1, len(sent)) == sent
    middle = sent[1499][1]  # where message 1500 begins
    assert replayed(archive, aeron, recording_id, middle, sent[1999][1] - middle, 500) == sent[1500:2000]
    io = io_counters(stack.aeron_dir)
    assert io["archive-recorder total write bytes"] == end  # every block of the recording, padding included
    assert io["archive-replayer total read bytes"] == end + sent[1999][1] - middle  # both replays
    assert 0 < io["archive-recorder max write time in ns"] <= io["archive-recorder total write time in ns"]
    assert 0 < io["archive-replayer max read time in ns"] <= io["archive-replayer total read time in ns"]

    with pytest.raises(ArchiveError, match="unknown recording id=99") as error:
        archive.start_replay(99, 0, -1, "aeron:ipc", REPLAY_STREAM)
    assert error.value.error_code_name == "UNKNOWN_RECORDING"
    with pytest.raises(ArchiveError, match="position=33 must be a multiple of 32"):
        archive.start_replay(recording_id, 33, -1, "aeron:ipc", REPLAY_STREAM)
    with pytest.raises(ArchiveError, match=f"position={end} must be less than the stop position={end}"):
        archive.start_replay(recording_id, end, -1, "aeron:ipc", REPLAY_STREAM)

    def segment_count():
        return sum(1 for p in stack.archive_dir.iterdir() if p.name.startswith(f"{recording_id}-"))

    before = segment_count()
    assert archive.truncate_recording(recording_id, middle) == before - segment_count() > 0  # files deleted
    assert archive.get_stop_position(recording_id) == middle
    assert replayed(archive, aeron, recording_id, -1, -1, 1500) == sent[:1500]
    with pytest.raises(ArchiveError, match="invalid truncate position=40"):
        archive.truncate_recording(recording_id, 40)
    before = segment_count()
    assert archive.purge_recording(recording_id) == before > 0 and segment_count() == 0
    assert archive.list_recording(recording_id) == 0
    assert archive.list_recordings(0, 10) == 0
    with pytest.raises(ArchiveError, match=f"unknown recording id={recording_id}"):
        archive.get_stop_position(recording_id)


def test_segments_detached_are_attached_back_then_deleted_and_the_archive_still_replays_and_verifies(stack,
                                                                                                    capsys):
    from aeron_numba.tools.archive_tool import main as archive_tool

    archive, aeron = stack.archive, stack.aeron
    segment = 128 * 1024  # AERON_ARCHIVE_SEGMENT_FILE_LENGTH
    archive.start_recording(RECORDED, STREAM)
    publication = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    rid = start.recording_id
    sent = publish(publication, 600, random.Random(13))
    await_condition(lambda: archive.get_recording_position(rid) == publication.position, 30, "recorded")
    archive.stop_recording(RECORDED, STREAM)
    signals(archive, "STOP")
    assert publication.position > 3 * segment

    def segment_bases():
        return sorted(int(p.name.split("-")[1].split(".")[0]) for p in stack.archive_dir.iterdir()
                      if p.name.startswith(f"{rid}-"))

    new_start = 2 * segment
    after = [m for m in sent if m[1] > new_start]  # messages never span terms: these begin at or past it
    archive.detach_segments(rid, new_start)
    assert archive.get_start_position(rid) == new_start and segment_bases()[:2] == [0, segment]  # still there
    assert replayed(archive, aeron, rid, -1, -1, len(after)) == after
    with pytest.raises(ArchiveError, match=f"invalid detach: newStartPosition={segment} lowerBound={3 * segment}"):
        archive.detach_segments(rid, segment)

    assert archive.attach_segments(rid) == 2
    assert archive.get_start_position(rid) == 0
    assert replayed(archive, aeron, rid, -1, -1, len(sent)) == sent

    archive.detach_segments(rid, new_start)
    assert archive.delete_detached_segments(rid) == 2
    signals(archive, "DELETE")
    assert segment_bases()[0] == new_start
    assert archive.attach_segments(rid) == 0  # nothing left to attach
    assert replayed(archive, aeron, rid, -1, -1, len(after)) == after
    assert archive.request_replay_token(rid) not in (archive.request_replay_token(rid), -1)
    new_start = 3 * segment
    after = [m for m in sent if m[1] > new_start]
    assert archive.purge_segments(rid, new_start) == 1
    signals(archive, "DELETE")
    assert segment_bases()[0] == new_start and archive.get_start_position(rid) == new_start
    assert replayed(archive, aeron, rid, -1, -1, len(after)) == after

    stack.close()
    stack.archive_process.terminate(10)
    capsys.readouterr()
    assert archive_tool([str(stack.archive_dir), "verify", "-a"]) == 0
    assert f"(recordingId={rid}) OK" in capsys.readouterr().out
    assert archive_tool([str(stack.archive_dir), "describe", str(rid)]) == 0
    assert f"startPosition={new_start}" in capsys.readouterr().out.replace(" ", "")


def test_a_recording_whose_archive_was_killed_is_recovered_to_its_last_whole_frame(stack):
    archive, aeron = stack.archive, stack.aeron
    archive.start_recording(RECORDED, STREAM)
    publication = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    sent = publish(publication, 1000, random.Random(5))
    end = publication.position
    await_condition(lambda: archive.get_recording_position(start.recording_id) == end, 30, "everything recorded")
    stack.archive_process.kill()
    publication.close()
    archive.close()
    stack.archive_process = stack.start_archive()  # over the dead archive's mark file, catalog and segments
    stack.archive = archive = AeronArchive.connect(aeron)
    assert archive.get_stop_position(start.recording_id) == end
    assert replayed(archive, aeron, start.recording_id, -1, -1, len(sent)) == sent


def test_a_stopped_recording_is_extended_by_an_image_that_joins_at_its_stop_position(stack):
    archive, aeron = stack.archive, stack.aeron
    archive.start_recording(RECORDED, STREAM)
    first = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    rid = start.recording_id
    sent = publish(first, 500, random.Random(8))
    await_condition(lambda: archive.get_recording_position(rid) == first.position, 30, "first part recorded")
    archive.stop_recording(RECORDED, STREAM)
    signals(archive, "STOP")
    first.close()
    stop = archive.get_stop_position(rid)
    # A fresh publication joins at 0: refused when its image arrives.
    archive.extend_recording(rid, RECORDED, STREAM)
    wrong = aeron.add_exclusive_publication(RECORDED, STREAM)
    error = await_condition(archive.poll_for_error_response, 10, "the extension to be refused")
    assert "INVALID_EXTENSION" in error and f"image join position=0, the recording's is {stop}" in error
    wrong.close()
    assert archive.get_stop_position(rid) == stop
    # One that continues the stream where the recording stopped.
    listed = []
    archive.list_recording(rid, listed.append)
    (d,) = listed
    term = d.term_buffer_length
    channel = (f"{RECORDED}|init-term-id={d.initial_term_id}|term-id={d.initial_term_id + stop // term}"
               f"|term-offset={stop % term}")
    archive.extend_recording(rid, RECORDED, STREAM)
    second = aeron.add_exclusive_publication(channel, STREAM)
    (extend,) = signals(archive, "EXTEND")
    assert (extend.recording_id, extend.position) == (rid, stop)
    sent += publish(second, 500, random.Random(9))
    await_condition(lambda: archive.get_recording_position(rid) == second.position, 30, "second part recorded")
    archive.stop_recording(RECORDED, STREAM)
    assert replayed(archive, aeron, rid, -1, -1, len(sent)) == sent
    with pytest.raises(ArchiveError, match="streamId=7, the recording's is 1001") as refused:
        archive.extend_recording(rid, RECORDED, 7)
    assert refused.value.error_code_name == "INVALID_EXTENSION"


def test_a_udp_stream_is_recorded_and_replayed_over_ipc(stack):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    archive, aeron = stack.archive, stack.aeron
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    archive.start_recording(channel, STREAM, "REMOTE")
    publication = aeron.add_exclusive_publication(f"{channel}|term-length=64k", STREAM)
    (start,) = signals(archive, "START")
    sent = publish(publication, 800, random.Random(11))
    await_condition(lambda: archive.get_recording_position(start.recording_id) == publication.position, 30,
                    "the UDP stream recorded")
    listed = []
    archive.list_recordings_for_uri(0, 10, "127.0.0.1", STREAM, listed.append)
    (d,) = listed
    assert d.stripped_channel == channel and d.original_channel == channel
    assert d.source_identity.startswith("127.0.0.1:")
    archive.stop_recording(channel, STREAM)
    signals(archive, "STOP")
    assert replayed(archive, aeron, start.recording_id, -1, -1, len(sent)) == sent


def test_a_local_udp_stream_is_recorded_through_a_spy_with_aerons_source_identity(stack):
    """As Aeron's archive: a LOCAL aeron:udp recording subscribes with ``aeron-spy:`` on the stripped channel, so
    it reads the publication's own log (source identity ``aeron:ipc``, as Aeron's catalog has it) and the archive
    is no network receiver of the stream. Nothing else receives it: ``ssc=true`` lets the spy connect it."""
    import socket

    from harness.aeron_dirs import AeronCounters
    from aeron_numba.layout import counters as cl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    archive, aeron = stack.archive, stack.aeron
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    archive.start_recording(channel, STREAM, "LOCAL")
    publication = aeron.add_exclusive_publication(f"{channel}|term-length=64k|ssc=true", STREAM)
    (start,) = signals(archive, "START")
    sent = publish(publication, 800, random.Random(12))
    await_condition(lambda: archive.get_recording_position(start.recording_id) == publication.position, 30,
                    "the UDP stream recorded")
    listed = []
    archive.list_recordings_for_uri(0, 10, "127.0.0.1", STREAM, listed.append)
    (d,) = listed
    assert d.source_identity == "aeron:ipc"
    assert d.stripped_channel == channel and d.original_channel == channel
    with AeronCounters.open(stack.aeron_dir) as counters:
        assert counters.find(type_id=cl.RECEIVE_CHANNEL_STATUS_TYPE_ID) is None
        spy = counters.find(type_id=cl.SUBSCRIBER_POSITION_TYPE_ID, label_contains=f"aeron-spy:{channel}")
        assert spy is not None and spy.label.startswith("sub-pos: ")
    archive.stop_recording(channel, STREAM)
    signals(archive, "STOP")
    assert replayed(archive, aeron, start.recording_id, -1, -1, len(sent)) == sent


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_million_random_size_messages_recorded_and_replayed_whole_and_from_the_middle(process_manager, aeron_dir,
                                                                                       tmp_path):
    stack = Stack(process_manager, aeron_dir, tmp_path / "archive", AERON_ARCHIVE_SEGMENT_FILE_LENGTH="16m",
                  AERON_ARCHIVE_FILE_IO_MAX_LENGTH="1m")
    try:
        archive, aeron = stack.archive, stack.aeron
        channel = "aeron:ipc?term-length=1m"
        archive.start_recording(channel, STREAM)
        publication = aeron.add_exclusive_publication(channel, STREAM)
        (start,) = signals(archive, "START")
        rng = random.Random(1_000_000)
        sent = []
        for _ in range(1_000_000):
            payload = rng.randbytes(rng.randint(1, 500))
            while (result := publication.offer(payload)) < 0:
                assert result in (BACK_PRESSURED, ADMIN_ACTION), result
            sent.append((payload, result))
        await_condition(lambda: archive.get_recording_position(start.recording_id) == publication.position, 120,
                        "a million messages recorded")
        archive.stop_recording(channel, STREAM)
        signals(archive, "STOP")
        assert replayed(archive, aeron, start.recording_id, -1, -1, len(sent)) == sent
        middle = sent[499_999][1]
        assert replayed(archive, aeron, start.recording_id, middle, sent[599_999][1] - middle, 100_000) == \
            sent[500_000:600_000]
    finally:
        stack.close()


def test_a_replay_of_a_live_recording_follows_it_to_the_live_end_and_a_bounded_one_stops_at_its_counter(stack):
    from aeron_numba.layout.archive import RECORDING_POSITION_TYPE_ID

    archive, aeron = stack.archive, stack.aeron
    archive.start_recording(RECORDED, STREAM)
    publication = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    rid = start.recording_id
    sent = publish(publication, 300, random.Random(12))
    await_condition(lambda: archive.get_recording_position(rid) == sent[-1][1], 10, "all 300 recorded")
    beyond = sent[-1][1] + 1024  # aligned, but past what the active recording has written
    with pytest.raises(ArchiveError, match=f"start position={beyond} must be less than the highest recorded "
                                           f"position={sent[-1][1]}"):
        archive.start_replay(rid, beyond, -1, "aeron:ipc", REPLAY_STREAM)
    live = archive.replay(rid, 0, -1, "aeron:ipc", REPLAY_STREAM)
    limit = aeron.add_counter(RECORDING_POSITION_TYPE_ID + 1000, b"", "replay limit")
    limit.set(sent[99][1])
    bounded_id = archive.start_bounded_replay(rid, 0, -1, limit.id, "aeron:ipc", REPLAY_STREAM + 1)
    bounded = aeron.add_subscription(f"aeron:ipc?session-id={_session(bounded_id)}", REPLAY_STREAM + 1)
    got, got_bounded = [], []
    live_assembler = FragmentAssembler(lambda b, o, n, h: got.append((bytes(b[o:o + n]), h.position)))
    bounded_assembler = FragmentAssembler(lambda b, o, n, h: got_bounded.append((bytes(b[o:o + n]), h.position)))

    def poll_until(count, bounded_count=0):
        def done():
            live.poll(live_assembler, 64)
            bounded.poll(bounded_assembler, 64)
            return len(got) >= count and len(got_bounded) >= bounded_count
        await_condition(done, 30, f"{count} messages through the live replay")

    poll_until(300, 100)
    sent += publish(publication, 300, random.Random(13), wait=lambda: live.poll(live_assembler, 64))
    poll_until(600)
    assert got == sent
    assert got_bounded == sent[:100]  # never past its limit counter
    limit.set(sent[199][1])

    def bounded_reached_200():
        bounded.poll(bounded_assembler, 64)
        return len(got_bounded) >= 200

    await_condition(bounded_reached_200, 30, "the bounded replay to follow its limit")
    assert got_bounded == sent[:200]
    archive.stop_recording(RECORDED, STREAM)
    limit.close()


def _session(replay_session_id: int) -> int:
    session_id = replay_session_id & 0xFFFFFFFF
    return session_id - (1 << 32) if session_id >= 1 << 31 else session_id


def test_a_flipped_byte_in_a_segment_is_caught_by_checksum_verified_replay_and_by_archive_tool(process_manager,
                                                                                               aeron_dir, tmp_path,
                                                                                               capsys):
    from aeron_numba.tools.archive_tool import main as archive_tool

    stack = Stack(process_manager, aeron_dir, tmp_path / "archive", AERON_ARCHIVE_RECORD_CHECKSUM="CRC-32C",
                  AERON_ARCHIVE_REPLAY_CHECKSUM="CRC-32C")
    try:
        archive, aeron = stack.archive, stack.aeron
        archive.start_recording(RECORDED, STREAM)
        publication = aeron.add_exclusive_publication(RECORDED, STREAM)
        (start,) = signals(archive, "START")
        sent = publish(publication, 400, random.Random(21))
        await_condition(lambda: archive.get_recording_position(start.recording_id) == publication.position, 30,
                        "recorded")
        archive.stop_recording(RECORDED, STREAM)
        signals(archive, "STOP")
        assert replayed(archive, aeron, start.recording_id, -1, -1, len(sent)) == sent  # intact: checksums agree
        at = sent[200][1] - 8  # among the last payload bytes of message 200
        base = at // (128 * 1024) * (128 * 1024)  # AERON_ARCHIVE_SEGMENT_FILE_LENGTH
        segment = stack.archive_dir / f"{start.recording_id}-{base}.rec"
        data = bytearray(segment.read_bytes())
        data[at - base] ^= 0x01
        segment.write_bytes(bytes(data))
        subscription = archive.replay(start.recording_id, -1, -1, "aeron:ipc", REPLAY_STREAM)
        got = []
        assembler = FragmentAssembler(lambda b, o, n, h: got.append((bytes(b[o:o + n]), h.position)))

        def replay_failed():
            subscription.poll(assembler, 64)  # consumed, so the replay gets as far as the flipped byte
            return archive.poll_for_error_response()

        error = await_condition(replay_failed, 30, "the replay to fail on the checksum")
        assert "checksum mismatch at position" in error
        assert got == sent[:len(got)] and len(got) <= 200  # nothing from the bad block on
        subscription.close()
    finally:
        stack.close()
    stack.archive_process.terminate(10)
    assert archive_tool([str(stack.archive_dir), "verify", "-a", "-checksum", "CRC-32C"]) == 255  # ArchiveTool's -1
    assert f"(recordingId={start.recording_id}, file={segment}) ERR: checksum failed" in capsys.readouterr().out


def test_an_abandoned_control_client_is_closed_after_the_liveness_timeout_and_the_archive_goes_on(stack):
    from aeron_numba.layout.archive import ARCHIVE_CONTROL_SESSIONS_TYPE_ID
    from harness.aeron_dirs import AeronCounters

    code = ("import sys, time; from aeron_numba.client import Aeron, Context; "
            "from aeron_numba.archive.client import AeronArchive; "
            "aeron = Aeron.connect(Context(aeron_dir=sys.argv[1])); archive = AeronArchive.connect(aeron); "
            "print('connected', archive.control_session_id, flush=True); time.sleep(600)")
    with AeronCounters.open(stack.aeron_dir) as counters:
        sessions = counters.await_counter(10, type_id=ARCHIVE_CONTROL_SESSIONS_TYPE_ID)
        await_condition(lambda: counters.value(sessions.counter_id) == 1, 10, "the test's own control session")
        client = stack.process_manager.spawn_python("abandoned", code, str(stack.aeron_dir))
        client.await_output("connected", 60)
        await_condition(lambda: counters.value(sessions.counter_id) == 2, 10, "the second control session")
        client.kill()  # no CloseSession: the driver times its client out, the response publication disconnects
        await_condition(lambda: counters.value(sessions.counter_id) == 1, 15, "the abandoned session closed")
    assert stack.archive.get_archive_id() != -1  # the archive answers as before


def test_a_recording_is_refused_with_storage_space_below_the_threshold(process_manager, aeron_dir, tmp_path):
    stack = Stack(process_manager, aeron_dir, tmp_path / "archive", AERON_ARCHIVE_LOW_STORAGE_SPACE_THRESHOLD="1000000g")
    try:
        with pytest.raises(ArchiveError, match="insufficient usable storage for new recording") as refused:
            stack.archive.start_recording(RECORDED, STREAM)
        assert refused.value.error_code_name == "STORAGE_SPACE"
        assert stack.archive.list_recordings(0, 10) == 0
    finally:
        stack.close()


def test_the_archive_files_of_a_real_run_read_back_with_a_parser_written_from_the_spec(stack):
    """archive.catalog (§3), archive-mark.dat (§5) and the segment files (§4) of a real archive run, read with
    struct formats typed here from the spec's tables, not with aeron_numba.layout."""
    import os
    import struct as s

    archive, aeron = stack.archive, stack.aeron
    archive_id = archive.get_archive_id()
    archive.start_recording(RECORDED, STREAM)
    publication = aeron.add_exclusive_publication(RECORDED, STREAM)
    (start,) = signals(archive, "START")
    sent = publish(publication, 300, random.Random(31))
    end = publication.position
    await_condition(lambda: archive.get_recording_position(start.recording_id) == end, 30, "recorded")
    archive.stop_recording(RECORDED, STREAM)
    signals(archive, "STOP")
    directory = stack.archive_dir

    catalog = (directory / "archive.catalog").read_bytes()
    version, header_length, next_recording_id, alignment = s.unpack_from("<iiqi", catalog, 0)
    assert (version, header_length, next_recording_id, alignment) == ((3 << 16) | (1 << 8), 32, 1, 64)
    body_length, state, checksum = s.unpack_from("<iii", catalog, 32)
    assert state == 1 and checksum == 0 and (32 + body_length) % 64 == 0
    body = 64
    (control_session_id, correlation_id, recording_id, start_timestamp, stop_timestamp, start_position, stop_position,
     initial_term_id, segment_file_length, term_buffer_length, mtu_length, session_id, stream_id) = s.unpack_from(
        "<qqqqqqqiiiiii", catalog, body)
    assert (recording_id, start_position, stop_position, stream_id) == (start.recording_id, 0, end, STREAM)
    assert stop_timestamp >= start_timestamp > 1_700_000_000_000
    assert (segment_file_length, term_buffer_length, mtu_length) == (128 * 1024, 64 * 1024, 1408)
    at, strings = body + 80, []
    for _ in range(3):
        (length,) = s.unpack_from("<I", catalog, at)
        strings.append(catalog[at + 4:at + 4 + length].decode("ascii"))
        at += 4 + length
    assert strings == ["aeron:ipc", RECORDED, "aeron:ipc"]
    assert at <= 32 + 32 + body_length and s.unpack_from("<i", catalog, 32 + 32 + body_length)[0] == 0

    mark = (directory / "archive-mark.dat").read_bytes()
    assert s.unpack_from("<HHHH", mark, 0) == (128, 200, 100, 2)
    mark_version, _, activity, started, pid = s.unpack_from("<iiqqq", mark, 8)
    assert mark_version == (3 << 16) | (1 << 8) and activity >= started > 0
    assert pid == stack.archive_process.pid
    control_stream, local_stream, events_stream, mark_header_length, error_length = s.unpack_from("<iiiii", mark, 40)
    assert (control_stream, local_stream, events_stream, mark_header_length) == (10, 10, 30, 8192)
    assert len(mark) == 8192 + error_length and s.unpack_from("<q", mark, 64)[0] == archive_id
    at, mark_strings = 136, []
    for _ in range(4):
        (length,) = s.unpack_from("<I", mark, at)
        mark_strings.append(mark[at + 4:at + 4 + length].decode("ascii"))
        at += 4 + length
    assert mark_strings[1] == "aeron:ipc?term-length=64k" and mark_strings[3] == str(stack.aeron_dir)

    frames, position = [], 0
    while position < end:
        base = position // segment_file_length * segment_file_length
        path = directory / f"{recording_id}-{base}.rec"
        assert os.path.getsize(path) == segment_file_length
        data = path.read_bytes()
        while position < min(end, base + segment_file_length):
            length, frame_version, flags, frame_type, term_offset, frame_session, frame_stream, term_id = \
                s.unpack_from("<iBBHiiii", data, position - base)
            assert frame_version == 0 and frame_type in (0, 1) and term_offset == position % term_buffer_length
            assert (frame_session, frame_stream) == (session_id, stream_id)
            assert term_id == initial_term_id + position // term_buffer_length
            if frame_type == 1:
                frames.append((flags, data[position - base + 32:position - base + length]))
            position += (length + 31) & ~31
    messages, partial = [], b""
    for flags, payload in frames:  # reassemble: BEGIN 0x80, END 0x40
        partial = payload if flags & 0x80 else partial + payload
        if flags & 0x40:
            messages.append(partial)
    assert messages == [payload for payload, _ in sent]


EVENTS_CHANNEL, EVENTS_STREAM = "aeron:ipc?term-length=64k", 31


def test_recording_events_from_start_through_progress_to_stop(process_manager, aeron_dir, tmp_path):
    stack = Stack(process_manager, aeron_dir, tmp_path / "archive",
                  AERON_ARCHIVE_RECORDING_EVENTS_ENABLED="true",
                  AERON_ARCHIVE_RECORDING_EVENTS_CHANNEL=EVENTS_CHANNEL,
                  AERON_ARCHIVE_RECORDING_EVENTS_STREAM_ID=str(EVENTS_STREAM))
    try:
        archive, aeron = stack.archive, stack.aeron
        events = []

        class Listener:
            def on_recording_started(self, recording_id, start_position, session_id, stream_id, channel,
                                     source_identity):
                events.append(("started", recording_id, start_position, session_id, stream_id, channel))

            def on_recording_progress(self, recording_id, start_position, position):
                events.append(("progress", recording_id, start_position, position))

            def on_recording_stopped(self, recording_id, start_position, stop_position):
                events.append(("stopped", recording_id, start_position, stop_position))

        adapter = RecordingEventsAdapter(Listener(), aeron.add_subscription(EVENTS_CHANNEL, EVENTS_STREAM))
        await_condition(lambda: adapter.subscription.is_connected, 10, "the archive's events publication")
        archive.start_recording(RECORDED, STREAM)
        publication = aeron.add_exclusive_publication(RECORDED, STREAM)
        (start,) = signals(archive, "START")
        publish(publication, 500, random.Random(5), wait=adapter.poll)
        end = publication.position
        await_condition(lambda: adapter.poll() >= 0 and events and events[-1][0] == "progress"
                        and events[-1][3] == end, 30, "a progress event at the end of what was published")
        archive.stop_recording(RECORDED, STREAM)
        await_condition(lambda: adapter.poll() >= 0 and events[-1][0] == "stopped", 10, "the stopped event")
        recording_id = start.recording_id
        assert events[0] == ("started", recording_id, 0, publication.session_id, STREAM, RECORDED)
        progress = [e[3] for e in events if e[0] == "progress"]
        assert progress == sorted(set(progress)) and progress[-1] == end  # each one further on
        assert [e[0] for e in events] == ["started"] + ["progress"] * len(progress) + ["stopped"]
        assert events[-1] == ("stopped", recording_id, 0, end) and adapter.malformed_count == 0
    finally:
        stack.close()


def test_a_client_whose_response_channel_asks_for_port_0_is_answered_on_the_port_bound(process_manager, aeron_dir,
                                                                                      tmp_path):
    import socket

    from aeron_numba.archive.client import AeronArchiveContext

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    control = f"aeron:udp?endpoint=localhost:{port}"
    # Its own stream id: the local IPC control channel's requests are not also this subscription's.
    stack = Stack(process_manager, aeron_dir, tmp_path / "archive", AERON_ARCHIVE_CONTROL_CHANNEL=control,
                  AERON_ARCHIVE_CONTROL_STREAM_ID="11")
    try:
        stack.archive.start_recording(RECORDED, STREAM, "LOCAL")
        publication = stack.aeron.add_exclusive_publication(RECORDED, STREAM)
        signals(stack.archive, "START")
        publish(publication, 10, random.Random(3))
        ctx = AeronArchiveContext(control_request_channel=control, control_request_stream_id=11,
                                  control_response_channel="aeron:udp?endpoint=localhost:0",
                                  message_timeout_ns=10_000_000_000)
        remote = AeronArchive.connect(stack.aeron, ctx)
        try:
            listed = []
            assert remote.list_recordings(0, 10, listed.append) == 1
            assert listed[0].stream_id == STREAM and listed[0].original_channel == RECORDED
        finally:
            remote.close()
    finally:
        stack.close()


def test_the_archive_counts_its_duty_cycles_and_its_client_is_named_as_javas(stack):
    from harness.aeron_dirs import AeronCounters

    def counters():
        with AeronCounters.open(stack.aeron_dir) as reader:
            return [(c.type_id, c.label, c.value) for c in reader.counters()]

    archive_id = stack.archive.get_archive_id()
    suffix = f" - archiveId={archive_id}"
    await_condition(lambda: any(t == A.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID and v > 0 for t, _, v in counters()), 10,
                    "a duty cycle measured")
    found = counters()
    assert [label for t, label, _ in found if t in (A.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID,
                                                    A.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID)] == [
        f"archive-conductor max cycle time in ns: SHARED{suffix}",
        f"archive-conductor work cycle time exceeded count: threshold=1000000000ns SHARED{suffix}"]

    def heartbeat_labels():  # the client names itself in the label at its first heartbeat
        prefix = f"client-heartbeat: id={archive_id} name="
        return [label for t, label, _ in counters() if t == 11 and label.startswith(prefix)]

    await_condition(heartbeat_labels, 10, "the archive's client heartbeat labelled")
    [label] = heartbeat_labels()
    assert " name=archive " in label  # archiveId unset: Java's archive names its client "archive"
