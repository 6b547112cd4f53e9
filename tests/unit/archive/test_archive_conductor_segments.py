"""The archive conductor's segment operations (DetachSegments, DeleteDetachedSegments, PurgeSegments, AttachSegments,
MigrateSegments) and replay tokens, driven through its ``on_<request>`` methods with Aeron 1.48's rules, answers,
error words and DELETE signals; the files are real ones in the archive dir."""

from __future__ import annotations

import os
import struct

import pytest

from aeron_numba.layout import archive as A
from aeron_numba.layout import frame
from tests.unit.archive.test_archive_conductor import (  # noqa: F401 (fixture)
    ERROR,
    OK,
    SIGNAL,
    conductor,
    connected_session,
    record,
)

SEGMENT = 64 * 1024  # one term a segment
GENERIC = A.ARCHIVE_ERROR_CODES["GENERIC"]
STREAM = 1001


def write_segment(conductor, recording_id, base, first_frame_offset=0, term_id=None, stream_id=STREAM,
                  length=SEGMENT):
    """A segment file whose first term holds a DATA frame at ``first_frame_offset`` (zeros before it)."""
    header = struct.pack("<iBBHiiiiq", 64, 0, 0xC0, frame.HDR_TYPE_DATA, first_frame_offset, 3, stream_id,
                         base // SEGMENT if term_id is None else term_id, 0)
    with open(path_of(conductor, recording_id, base), "wb") as f:
        f.truncate(length)
        f.seek(first_frame_offset)
        f.write(header)


def path_of(conductor, recording_id, base):
    return os.path.join(conductor.ctx.archive_dir, A.segment_file_name(recording_id, base))


def bases(conductor, recording_id):
    from aeron_numba.archive.segment_files import segment_files

    return [base for base, _ in segment_files(conductor.ctx.archive_dir, recording_id)]


def recording(conductor, start_position, stop_position, files=True):
    """A stopped recording of 64k segments (initial term id 0, stream 1001) with a file for every segment it
    covers."""
    recording_id = conductor.catalog.add_recording(
        start_position=start_position, start_timestamp=1, initial_term_id=0, segment_file_length=SEGMENT,
        term_buffer_length=SEGMENT, mtu_length=1408, session_id=3, stream_id=STREAM, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc", stop_position=stop_position, stop_timestamp=2)
    first = start_position - start_position % SEGMENT
    for base in range(first, stop_position, SEGMENT) if files else ():
        write_segment(conductor, recording_id, base, first_frame_offset=start_position - base if base == first else 0)
    return recording_id


def answers(session):
    """What the session was sent since last asked: (correlation id, code, relevant id, message) of responses and
    ('signal', recording id, signal) of recording signals."""
    sent = session.publication.sent
    session.publication.raw.clear()
    return [("signal", m.recording_id, m.signal) if type(m).__name__ == "RecordingSignalEvent" else
            (m.correlation_id, m.code, m.relevant_id, m.error_message) for m in sent]


def connected_session_second(conductor):
    """Another client's session (its own request image and response publication)."""
    before = set(conductor.control_sessions)
    conductor.on_connect_request((1, 43), correlation_id=11, response_stream_id=21,
                                 version=A.ARCHIVE_PROTOCOL_VERSION, response_channel="aeron:ipc")
    [new_id] = set(conductor.control_sessions) - before
    session = conductor.control_sessions[new_id]
    conductor.do_work()
    session.publication.raw.clear()
    return session


def start_position(conductor, recording_id):
    return conductor.catalog.descriptor(recording_id).start_position


# ----------------------------------------------------------------------------------------------- detach
def test_detach_moves_the_start_to_a_later_segment_boundary_and_keeps_the_files(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=1, recording_id=recording_id,
                                         new_start_position=2 * SEGMENT)
    assert answers(session) == [(1, OK, 0, "")]
    assert start_position(conductor, recording_id) == 2 * SEGMENT
    assert bases(conductor, recording_id) == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]


@pytest.mark.parametrize("position, message", [
    (SEGMENT + 32, f"invalid segment start: newStartPosition={SEGMENT + 32}"),
    (0, f"invalid detach: newStartPosition=0 lowerBound={SEGMENT}"),
    (4 * SEGMENT, f"invalid detach: in use, newStartPosition={4 * SEGMENT} upperBound={3 * SEGMENT}"),
])
def test_detach_refuses_a_start_off_a_boundary_in_the_first_segment_or_past_the_last(conductor, position, message):
    recording_id = recording(conductor, 0, 3 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=2, recording_id=recording_id,
                                         new_start_position=position)
    assert answers(session) == [(2, ERROR, GENERIC, message)]
    assert start_position(conductor, recording_id) == 0


def test_detach_of_an_unknown_recording_is_unknown_recording(conductor):
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=3, recording_id=7, new_start_position=SEGMENT)
    [(correlation_id, code, relevant_id, _)] = answers(session)
    assert (correlation_id, code, relevant_id) == (3, ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_RECORDING"])


def test_detach_may_not_pass_the_segment_a_replay_is_reading(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_replay_request(session, correlation_id=4, recording_id=recording_id, position=SEGMENT + 64,
                                length=-1, replay_stream_id=9, file_io_max_length=0, replay_channel="aeron:ipc")
    [(_, _, replay_session_id, _)] = answers(session)
    conductor.on_detach_segments_request(session, correlation_id=5, recording_id=recording_id,
                                         new_start_position=2 * SEGMENT)
    conductor.on_detach_segments_request(session, correlation_id=6, recording_id=recording_id,
                                         new_start_position=SEGMENT)  # the replay's own segment stays
    replay = conductor.replays[replay_session_id].publication
    assert answers(session) == [
        (5, ERROR, GENERIC, f"invalid detach: replay in progress -  state=INIT newStartPosition={2 * SEGMENT} "
                            f"upperBound={SEGMENT} sessionId={replay.session_id} streamId=9 channel={replay.channel}"),
        (6, OK, 0, "")]


def test_detach_of_an_active_recording_is_bounded_by_the_segment_being_recorded(conductor, shm_dir):
    image, recording_id = record(conductor, shm_dir)
    image.publish(3)
    conductor.do_work()
    [session] = conductor.control_sessions.values()
    session.publication.raw.clear()
    segment = conductor.catalog.descriptor(recording_id).segment_file_length
    conductor.on_detach_segments_request(session, correlation_id=7, recording_id=recording_id,
                                         new_start_position=segment)
    assert answers(session) == [(7, ERROR, GENERIC, f"invalid detach: in use, newStartPosition={segment} "
                                                    "upperBound=0")]


# ---------------------------------------------------------------------------------- delete / purge
def test_delete_detached_segments_deletes_the_files_before_the_start_then_signals_delete(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=1, recording_id=recording_id,
                                         new_start_position=2 * SEGMENT)
    conductor.on_delete_detached_segments_request(session, correlation_id=2, recording_id=recording_id)
    assert answers(session) == [(1, OK, 0, ""), (2, OK, 2, ""), ("signal", recording_id, SIGNAL["DELETE"])]
    assert bases(conductor, recording_id) == [2 * SEGMENT, 3 * SEGMENT]

    conductor.on_delete_detached_segments_request(session, correlation_id=3, recording_id=recording_id)
    assert answers(session) == [(3, OK, 0, ""), ("signal", recording_id, SIGNAL["DELETE"])]  # nothing left: 0


def test_delete_detached_segments_takes_files_renamed_for_deletion_too(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT)
    conductor.catalog.update_start_position(recording_id, 2 * SEGMENT)
    os.rename(path_of(conductor, recording_id, 0), path_of(conductor, recording_id, 0) + ".del")
    session = connected_session(conductor)
    conductor.on_delete_detached_segments_request(session, correlation_id=4, recording_id=recording_id)
    assert answers(session) == [(4, OK, 2, ""), ("signal", recording_id, SIGNAL["DELETE"])]
    assert sorted(os.listdir(conductor.ctx.archive_dir)) == ["0-131072.rec", "archive.catalog"]


def test_purge_segments_moves_the_start_and_deletes_what_lay_before_it(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_purge_segments_request(session, correlation_id=5, recording_id=recording_id,
                                        new_start_position=3 * SEGMENT)
    conductor.on_purge_segments_request(session, correlation_id=6, recording_id=recording_id,
                                        new_start_position=SEGMENT)
    assert answers(session) == [
        (5, OK, 3, ""), ("signal", recording_id, SIGNAL["DELETE"]),
        (6, ERROR, GENERIC, f"invalid detach: newStartPosition={SEGMENT} lowerBound={4 * SEGMENT}")]
    assert start_position(conductor, recording_id) == 3 * SEGMENT
    assert bases(conductor, recording_id) == [3 * SEGMENT]


# ----------------------------------------------------------------------------------------------- attach
def test_attach_takes_back_the_detached_files_still_there(conductor):
    recording_id = recording(conductor, 0, 4 * SEGMENT)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=1, recording_id=recording_id,
                                         new_start_position=3 * SEGMENT)
    os.unlink(path_of(conductor, recording_id, 0))  # gone: the walk down stops at it
    conductor.on_attach_segments_request(session, correlation_id=2, recording_id=recording_id)
    assert answers(session) == [(1, OK, 0, ""), (2, OK, 2, "")]
    assert start_position(conductor, recording_id) == SEGMENT


def test_attach_stops_at_a_file_whose_first_frame_is_not_at_its_start(conductor):
    recording_id = recording(conductor, 160, 3 * SEGMENT)  # the first segment's frames begin at 160
    session = connected_session(conductor)
    conductor.on_purge_segments_request(session, correlation_id=1, recording_id=recording_id,
                                        new_start_position=2 * SEGMENT)
    write_segment(conductor, recording_id, SEGMENT)
    write_segment(conductor, recording_id, 0, first_frame_offset=160)
    conductor.on_attach_segments_request(session, correlation_id=2, recording_id=recording_id)
    assert answers(session)[-1] == (2, OK, 2, "")
    assert start_position(conductor, recording_id) == 160


@pytest.mark.parametrize("damage, message", [
    (dict(term_id=9), "term id does not match: actual=9 expected=1"),
    (dict(stream_id=5), f"stream id does not match: actual=5 expected={STREAM}"),
    (dict(length=SEGMENT // 2), f"fileLength={SEGMENT // 2} not equal to segmentLength={SEGMENT}"),
])
def test_attach_refuses_a_file_not_of_the_recording(conductor, damage, message):
    recording_id = recording(conductor, 0, 3 * SEGMENT)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=1, recording_id=recording_id,
                                         new_start_position=2 * SEGMENT)
    write_segment(conductor, recording_id, SEGMENT, **damage)
    conductor.on_attach_segments_request(session, correlation_id=2, recording_id=recording_id)
    assert answers(session) == [(1, OK, 0, ""), (2, ERROR, GENERIC, message)]
    assert start_position(conductor, recording_id) == 2 * SEGMENT


def test_attach_refuses_a_file_with_no_frame_in_its_first_term_keeping_what_it_attached_before(conductor):
    recording_id = recording(conductor, 0, 3 * SEGMENT)
    session = connected_session(conductor)
    conductor.on_detach_segments_request(session, correlation_id=1, recording_id=recording_id,
                                         new_start_position=2 * SEGMENT)
    with open(path_of(conductor, recording_id, 0), "wb") as f:
        f.truncate(SEGMENT)
    conductor.on_attach_segments_request(session, correlation_id=2, recording_id=recording_id)
    assert answers(session)[-1] == (2, ERROR, GENERIC, "fragment not found in first term of segment "
                                                       f"{path_of(conductor, recording_id, 0)}")
    assert start_position(conductor, recording_id) == SEGMENT  # the good file before the bad one stays attached


# ---------------------------------------------------------------------------------------------- migrate
def test_migrate_gives_the_files_to_the_recording_that_follows_and_empties_the_source(conductor):
    src = recording(conductor, 0, 2 * SEGMENT)
    dst = recording(conductor, 2 * SEGMENT, 3 * SEGMENT + 64)
    with open(path_of(conductor, src, 2 * SEGMENT), "wb"):
        pass  # a segment begun at the stop position holds nothing: deleted, not moved
    session = connected_session(conductor)
    conductor.on_migrate_segments_request(session, correlation_id=1, src_recording_id=src, dst_recording_id=dst)
    assert answers(session) == [(1, OK, 2, ""), ("signal", src, SIGNAL["DELETE"])]
    assert bases(conductor, src) == [] and bases(conductor, dst) == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]
    assert start_position(conductor, dst) == 0 and conductor.catalog.stop_position(dst) == 3 * SEGMENT + 64
    assert start_position(conductor, src) == 0 == conductor.catalog.stop_position(src)


def test_migrate_to_the_recording_before_moves_its_stop_position(conductor):
    dst = recording(conductor, 0, SEGMENT)
    src = recording(conductor, SEGMENT, 2 * SEGMENT + 96)
    session = connected_session(conductor)
    conductor.on_migrate_segments_request(session, correlation_id=2, src_recording_id=src, dst_recording_id=dst)
    assert answers(session) == [(2, OK, 2, ""), ("signal", src, SIGNAL["DELETE"])]
    assert bases(conductor, dst) == [0, SEGMENT, 2 * SEGMENT]
    assert conductor.catalog.stop_position(dst) == 2 * SEGMENT + 96
    assert conductor.catalog.stop_position(src) == SEGMENT == start_position(conductor, src)


def test_migrate_refusals_are_aerons(conductor):
    src = recording(conductor, 0, 2 * SEGMENT)
    gap = recording(conductor, 3 * SEGMENT, 4 * SEGMENT)
    other_stream = conductor.catalog.add_recording(
        start_position=2 * SEGMENT, start_timestamp=1, initial_term_id=0, segment_file_length=SEGMENT,
        term_buffer_length=SEGMENT, mtu_length=1408, session_id=3, stream_id=5, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc", stop_position=3 * SEGMENT, stop_timestamp=2)
    unaligned_src = recording(conductor, 0, SEGMENT + 64)
    unaligned_dst = recording(conductor, SEGMENT + 64, SEGMENT + 128, files=False)
    active = recording(conductor, 0, SEGMENT)
    conductor.catalog.update_stop_position(active, A.NULL_POSITION, A.NULL_TIMESTAMP)
    session = connected_session(conductor)
    for correlation_id, (s, d) in enumerate([(src, gap), (src, other_stream), (unaligned_src, unaligned_dst),
                                             (active, src)]):
        conductor.on_migrate_segments_request(session, correlation_id=correlation_id, src_recording_id=s,
                                              dst_recording_id=d)
    assert answers(session) == [
        (0, ERROR, GENERIC, f"invalid migrate: src and dst are not contiguous srcStartPosition=0 "
                            f"srcStopPosition={2 * SEGMENT} dstStartPosition={3 * SEGMENT} "
                            f"dstStopPosition={4 * SEGMENT}"),
        (1, ERROR, GENERIC, f"invalid migrate: srcStreamId={STREAM} dstStreamId=5"),
        (2, ERROR, GENERIC, f"invalid migrate: join position is not on segment boundary of src recording "
                            f"seamPosition={SEGMENT + 64} startPosition=0 stopPosition={SEGMENT + 64} "
                            f"termBufferLength={SEGMENT} segmentFileLength={SEGMENT}"),
        (3, ERROR, GENERIC, f"recording {active} is still active")]
    assert bases(conductor, src) == [0, SEGMENT]  # nothing moved


def test_migrate_moves_nothing_when_a_destination_file_exists(conductor):
    src = recording(conductor, 0, 2 * SEGMENT)
    dst = recording(conductor, 2 * SEGMENT, 3 * SEGMENT)
    write_segment(conductor, dst, SEGMENT)  # in the way of the source's second file
    session = connected_session(conductor)
    conductor.on_migrate_segments_request(session, correlation_id=3, src_recording_id=src, dst_recording_id=dst)
    assert answers(session) == [(3, ERROR, GENERIC, f"preexisting dst segment file {path_of(conductor, dst, SEGMENT)}")]
    assert bases(conductor, src) == [0, SEGMENT] and start_position(conductor, dst) == 2 * SEGMENT


# ------------------------------------------------------------------------------------------ replay tokens
def token_for(conductor, session, recording_id, correlation_id=1):
    conductor.on_replay_token_request(session, correlation_id=correlation_id, recording_id=recording_id)
    [(got_correlation_id, code, token, _)] = answers(session)
    assert (got_correlation_id, code) == (correlation_id, OK) and token != A.NULL_VALUE
    return token


def response_replay(conductor, session, recording_id, token, correlation_id):
    conductor.on_replay_request(session, correlation_id=correlation_id, recording_id=recording_id, position=-1,
                                length=-1, replay_stream_id=9, file_io_max_length=0, replay_token=token,
                                replay_channel="aeron:udp?control-mode=response|control=localhost:10001")


def test_a_replay_token_names_its_session_for_a_replay_on_a_response_channel(conductor):
    recording_id = recording(conductor, 0, SEGMENT)
    owner = connected_session(conductor)
    token = token_for(conductor, owner, recording_id)
    assert token_for(conductor, owner, recording_id, correlation_id=2) != token  # each request a new one
    other = connected_session_second(conductor)
    response_replay(conductor, other, recording_id, token, correlation_id=3)
    [(correlation_id, code, replay_session_id, _)] = answers(owner)  # the token's session owns the replay
    assert (correlation_id, code) == (3, OK) and replay_session_id in conductor.replays
    assert answers(other) == []


def test_a_replay_token_of_another_recording_unknown_or_expired_is_refused(conductor):
    now = [0]
    conductor.nano_clock = lambda: now[0]
    recording_id = recording(conductor, 0, SEGMENT)
    session = connected_session(conductor)
    token = token_for(conductor, session, recording_id)
    response_replay(conductor, session, recording_id + 1, token, correlation_id=2)
    response_replay(conductor, session, recording_id, token + 1, correlation_id=3)
    now[0] = conductor.ctx.connect_timeout_ns  # the token lives one connect timeout
    conductor.do_work()
    assert conductor._replay_tokens == {}
    response_replay(conductor, session, recording_id, token, correlation_id=4)
    assert [a[:3] for a in answers(session) if a[1] == ERROR] == [(2, ERROR, GENERIC), (3, ERROR, GENERIC),
                                                                  (4, ERROR, GENERIC)]
    assert conductor.mark_file.error_log.errors[-1] == f"Unknown session or token timeout for replayToken={token}"
    assert conductor.replays == {}


def test_a_replay_token_goes_with_its_session(conductor):
    recording_id = recording(conductor, 0, SEGMENT)
    session = connected_session(conductor)
    token_for(conductor, session, recording_id)
    conductor.on_close_session_request(session, control_session_id=session.control_session_id)
    conductor.do_work()
    assert conductor._replay_tokens == {}


def test_a_token_on_a_channel_that_is_not_a_response_channel_is_not_looked_at(conductor):
    recording_id = recording(conductor, 0, SEGMENT)
    session = connected_session(conductor)
    conductor.on_replay_request(session, correlation_id=5, recording_id=recording_id, position=-1, length=-1,
                                replay_stream_id=9, file_io_max_length=0, replay_token=12345,
                                replay_channel="aeron:ipc")
    [(correlation_id, code, _, _)] = answers(session)
    assert (correlation_id, code) == (5, OK)

