"""The archive conductor driven through its ``on_<request>`` methods, as the ControlSessionAdapter calls them: no
request bytes are built; the responses are read back from the session's response publication."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.archive.archive_conductor import ArchiveConductor
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.archive.control_session import ControlSessionState
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.errors import RegistrationError
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import BACK_PRESSURED, CLOSED
from tests.unit.archive.archive_fakes import Aeron, MarkFile

OK, ERROR = A.CONTROL_RESPONSE_CODES["OK"], A.CONTROL_RESPONSE_CODES["ERROR"]


@pytest.fixture
def conductor(tmp_path):
    ctx = ArchiveContext(archive_dir=str(tmp_path)).conclude()
    with Catalog.open(tmp_path) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=lambda: 0, epoch_clock=lambda: 5)
        yield conductor
        conductor.on_close()


def add_recording(catalog, n):
    return catalog.add_recording(
        start_position=0, start_timestamp=100 + n, initial_term_id=n, segment_file_length=128 << 20,
        term_buffer_length=64 * 1024, mtu_length=1408, session_id=n, stream_id=1001, stripped_channel="aeron:ipc",
        original_channel=f"aeron:ipc?term-length=64k|n={n}", source_identity="aeron:ipc", stop_position=64 * n,
        stop_timestamp=200 + n)


def connected_session(conductor):
    """A session connected through ``on_auth_connect_request`` (the null authenticator lets it in)."""
    conductor.on_auth_connect_request((1, 42), correlation_id=10, response_stream_id=20,
                                      version=A.ARCHIVE_PROTOCOL_VERSION, response_channel="aeron:ipc",
                                      encoded_credentials=b"")
    [session] = conductor.control_sessions.values()
    conductor.do_work()
    assert session.state is ControlSessionState.ACTIVE and session.request_image == (1, 42)
    [ok] = session.publication.sent
    assert (ok.correlation_id, ok.code, ok.relevant_id) == (10, OK, session.control_session_id)
    session.publication.raw.clear()
    return session


def test_local_udp_recordings_subscribe_through_a_spy_and_remote_ones_as_a_receiver(conductor):
    """Aeron's archive: a LOCAL aeron:udp stream is recorded through ``aeron-spy:`` on its stripped channel, for a
    start and an extend alike; REMOTE and IPC streams with the client's channel."""
    session = connected_session(conductor)
    local, no_auto_stop = "aeron:udp?endpoint=localhost:4000|term-length=64k", A.ENUMS["BooleanType"]["FALSE"]
    conductor.on_start_recording_request(session, correlation_id=20, stream_id=1001, channel=local,
                                         source_location=A.SOURCE_LOCATIONS["LOCAL"])
    conductor.on_start_recording_request2(session, correlation_id=21, stream_id=1002, auto_stop=no_auto_stop,
                                          channel=local, source_location=A.SOURCE_LOCATIONS["REMOTE"])
    conductor.on_start_recording_request(session, correlation_id=22, stream_id=1003, channel="aeron:ipc?alias=i",
                                         source_location=A.SOURCE_LOCATIONS["LOCAL"])
    recording_id = add_recording(conductor.catalog, 1)
    conductor.on_extend_recording_request2(session, correlation_id=23, recording_id=recording_id, stream_id=1001,
                                           auto_stop=no_auto_stop, channel="aeron:udp?endpoint=localhost:4001",
                                           source_location=A.SOURCE_LOCATIONS["LOCAL"])
    assert [(s.channel, s.stream_id) for s in conductor.aeron.subscriptions if s.stream_id > 1000] == [
        ("aeron-spy:aeron:udp?endpoint=localhost:4000", 1001), (local, 1002), ("aeron:ipc?alias=i", 1003),
        ("aeron-spy:aeron:udp?endpoint=localhost:4001", 1001)]
    assert [r.code for r in session.publication.sent] == [OK] * 4
    # The recording is still named by the client's channel (stop, list, catalog).
    assert [o.original_channel for o in conductor.recording_subscriptions.values()][:2] == [local, local]


def test_a_connect_then_an_archive_id_request(conductor):
    session = connected_session(conductor)
    conductor.on_archive_id_request(session, correlation_id=11, control_session_id=session.control_session_id)
    conductor.do_work()
    [response] = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (11, OK, 77)  # the client id


def test_listing_sends_each_descriptor_as_the_catalog_holds_it_then_recording_unknown(conductor):
    catalog = conductor.catalog
    ids = [add_recording(catalog, n) for n in range(3)]
    session = connected_session(conductor)
    conductor.on_list_recordings_request(session, correlation_id=12, from_recording_id=1, record_count=5)
    conductor.do_work()
    *descriptors, end = session.publication.sent
    assert [d.recording_id for d in descriptors] == ids[1:]
    assert all((d.control_session_id, d.correlation_id) == (session.control_session_id, 12) for d in descriptors)
    assert (end.correlation_id, end.code, end.relevant_id) == (12, A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"], 3)
    # The bytes are the catalog entry's whole body (alignment padding included) under a RecordingDescriptor
    # header, with the session's ids in its first two fields: what the archive always sent, and Aeron sends.
    for recording_id, raw in zip(ids[1:], session.publication.raw):
        body = catalog.descriptor_body(recording_id)
        assert len(body) > ARCHIVE.encoded_length(catalog.descriptor(recording_id)) - 8  # padding is there
        assert raw == struct.pack("<HHHH", 80, 22, 101, 10) + struct.pack("<qq", session.control_session_id, 12) + \
            body[16:]


def test_requests_about_what_is_not_there_get_the_archive_error_codes(conductor):
    add_recording(conductor.catalog, 0)
    session = connected_session(conductor)
    conductor.on_stop_replay_request(session, correlation_id=13, replay_session_id=99)
    conductor.on_truncate_recording_request(session, correlation_id=14, recording_id=0, position=33)
    conductor.on_stop_position_request(session, correlation_id=15, recording_id=5)
    conductor.on_stop_position_request(session, correlation_id=16, recording_id=0)
    conductor.do_work()
    replay, truncate, unknown, stop = session.publication.sent
    assert (replay.correlation_id, replay.code, replay.relevant_id) == \
        (13, ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_REPLAY"])
    assert (truncate.code, truncate.relevant_id) == (ERROR, A.ARCHIVE_ERROR_CODES["GENERIC"])
    assert "invalid truncate position=33" in truncate.error_message
    assert (unknown.code, unknown.relevant_id) == (ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_RECORDING"])
    assert (stop.correlation_id, stop.code, stop.relevant_id) == (16, OK, 0)


def test_close_session_ends_it(conductor):
    session = connected_session(conductor)
    conductor.on_close_session_request(session, control_session_id=session.control_session_id)
    conductor.do_work()
    assert conductor.control_sessions == {} and not session.publication.is_connected


# ------------------------------------------------------------------------------------- recording events
TERM = 64 * 1024


class Image:
    """A subscription's image over a real log, as the recorder reads it (``block_poll``'s buffers)."""

    def __init__(self, shm_dir, subscription_registration_id):
        from aeron_numba.layout import counters as C
        from aeron_numba.layout.log_buffers import LogBuffers
        from tests.unit.log_support import LimitCounter, new_pub_state

        self.log_buffer = LogBuffers.create(shm_dir / "image.logbuffer", term_length=TERM, initial_term_id=5,
                                            session_id=77, stream_id=1001).buffer
        self._state, self._limit = new_pub_state(self.log_buffer, True), LimitCounter()
        self.counters_metadata_buffer = np.zeros(4 * C.METADATA_LENGTH, dtype=np.uint8)
        self.position_buffer = np.zeros(4 * C.COUNTER_LENGTH, dtype=np.uint8)
        self.subscriber_position_id, self.subscription_registration_id = 2, subscription_registration_id
        self.counters_metadata_buffer[2 * C.METADATA_LENGTH + C.METADATA_STATE_OFFSET] = C.RECORD_ALLOCATED
        self.position_buffer[2 * C.COUNTER_LENGTH + C.COUNTER_REGISTRATION_ID_OFFSET:][:8].view(np.int64)[0] = \
            subscription_registration_id
        self.position_offset = 2 * C.COUNTER_LENGTH + C.COUNTER_VALUE_OFFSET
        self.join_position, self.initial_term_id, self.term_buffer_length, self.mtu_length = 0, 5, TERM, 1408
        self.session_id, self.source_identity = 77, "aeron:ipc"
        self.is_closed = self.is_end_of_stream = False

    def add_idle_watch(self, watch) -> None:
        """The frame at this subscriber's position (what ``client.image.Image`` watches)."""
        position = int(self.position_buffer[self.position_offset:self.position_offset + 8].view(np.int64)[0])
        watch.watch_int64(self.log_buffer, (position // TERM) % 3 * TERM + position % TERM)

    def publish(self, count: int) -> int:
        """Append ``count`` 500-byte messages (544-byte frames); returns the log's new end position."""
        from tests.unit.log_support import offer_until_done

        for _ in range(count):
            position = offer_until_done(self.log_buffer, self._state, self._limit, np.ones(500, np.uint8), True)
            assert position > 0
        return position


def record(conductor, shm_dir, channel="aeron:ipc?term-length=64k|alias=x"):
    """A client starts a recording of ``channel`` and an image comes: returns (image, its recording id)."""
    session = connected_session(conductor)
    conductor.on_start_recording_request(session, correlation_id=20, stream_id=1001, channel=channel)
    subscription = conductor.aeron.subscriptions[-1]
    image = Image(shm_dir, subscription.registration_id)
    subscription.handlers["available_image_handler"](image)
    conductor.do_work()
    [recording_id] = conductor.recordings
    return image, recording_id


@pytest.fixture
def events_conductor(tmp_path):
    ctx = ArchiveContext(archive_dir=str(tmp_path), recording_events_enabled=True,
                         recording_events_channel="aeron:ipc?term-length=64k", recording_events_stream_id=31,
                         segment_file_length=TERM, file_io_max_length=TERM).conclude()
    with Catalog.open(tmp_path) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=lambda: 0, epoch_clock=lambda: 5)
        yield conductor
        conductor.on_close()


def test_recording_events_are_started_progress_once_a_cycle_and_stopped(events_conductor, shm_dir):
    conductor = events_conductor
    [events] = conductor.aeron.publications  # made at start, before any control session's
    assert (events.channel, events.stream_id) == ("aeron:ipc?term-length=64k", 31)
    image, recording_id = record(conductor, shm_dir)
    assert [type(e).__name__ for e in events.sent] == ["RecordingStarted"]
    [started] = events.sent
    assert (started.recording_id, started.start_position, started.session_id, started.stream_id, started.channel,
            started.source_identity) == (recording_id, 0, 77, 1001, "aeron:ipc?term-length=64k|alias=x", "aeron:ipc")

    first = image.publish(3)
    conductor.do_work()
    conductor.do_work()  # nothing new recorded: no event
    second = image.publish(2)
    events.results = [BACK_PRESSURED] * 3  # this cycle's progress is dropped, not waited for...
    conductor.do_work()
    conductor.do_work()  # ...and the next cycle announces where the recording got
    image.is_end_of_stream = True
    conductor.do_work()
    assert recording_id not in conductor.recordings
    assert [(type(e).__name__, e.recording_id, e.start_position) for e in events.sent[1:]] == \
        [("RecordingProgress", recording_id, 0)] * 2 + [("RecordingStopped", recording_id, 0)]
    assert [events.sent[1].position, events.sent[2].position, events.sent[3].stop_position] == [first, second, second]
    assert second == 5 * 544 and conductor.mark_file.error_log.errors == []


def test_an_events_publication_that_can_take_no_more_is_recorded_and_the_recording_carries_on(events_conductor,
                                                                                                shm_dir):
    conductor = events_conductor
    [events] = conductor.aeron.publications
    image, recording_id = record(conductor, shm_dir)
    events.results = [CLOSED]
    end = image.publish(1)
    conductor.do_work()
    assert conductor.mark_file.error_log.errors == ["recording events publication is closed"]
    assert conductor.recordings[recording_id].position == end and conductor.counters.errors.get() == 1


def test_with_recording_events_disabled_no_events_publication_is_made(conductor, shm_dir):
    assert conductor.recording_events is None and conductor.aeron.publications == []
    image, recording_id = record(conductor, shm_dir)
    image.publish(3)
    conductor.do_work()
    image.is_end_of_stream = True
    conductor.do_work()
    assert recording_id not in conductor.recordings and conductor.catalog.stop_position(recording_id) == 3 * 544
    [response_publication] = conductor.aeron.publications  # the control session's, nothing else
    assert all(type(m).__name__ in ("ControlResponse", "RecordingSignalEvent") for m in response_publication.sent)


# ------------------------------------------------------------------------ stop recording by identity
SIGNAL = {name: code for name, code in A.RECORDING_SIGNALS.items()}


def test_stop_recording_by_identity_closes_the_subscription_and_the_stream_can_be_recorded_again(conductor,
                                                                                               shm_dir):
    image, recording_id = record(conductor, shm_dir)
    subscription = conductor.aeron.subscriptions[-1]
    [session] = conductor.control_sessions.values()
    session.publication.raw.clear()
    conductor.on_stop_recording_by_identity_request(session, correlation_id=21, recording_id=recording_id)
    conductor.do_work()
    response, stop = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (21, OK, 1)  # a subscription found
    assert (stop.recording_id, stop.signal) == (recording_id, SIGNAL["STOP"])
    assert subscription.is_closed and conductor.recording_subscriptions == {} and conductor.recordings == {}
    session.publication.raw.clear()

    conductor.on_start_recording_request(session, correlation_id=22, stream_id=1001,
                                         channel="aeron:ipc?term-length=64k|alias=x")
    [started] = session.publication.sent
    assert (started.correlation_id, started.code) == (22, OK)  # not ACTIVE_SUBSCRIPTION
    assert started.relevant_id == conductor.aeron.subscriptions[-1].registration_id != subscription.registration_id


def test_stop_recording_by_identity_of_a_stopped_recording_answers_zero(conductor):
    recording_id = add_recording(conductor.catalog, 1)
    session = connected_session(conductor)
    conductor.on_stop_recording_by_identity_request(session, correlation_id=23, recording_id=recording_id)
    [response] = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (23, OK, 0)


# -------------------------------------------------------------------------------- truncate / purge
SEGMENT = 64 * 1024


def segmented_recording(conductor, stop_position):
    """A stopped recording of 64k segments with a file for every segment up to ``stop_position``."""
    recording_id = conductor.catalog.add_recording(
        start_position=0, start_timestamp=1, initial_term_id=0, segment_file_length=SEGMENT,
        term_buffer_length=SEGMENT, mtu_length=1408, session_id=3, stream_id=1001, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc", stop_position=stop_position, stop_timestamp=2)
    for base in range(0, stop_position, SEGMENT):
        with open(f"{conductor.ctx.archive_dir}/{A.segment_file_name(recording_id, base)}", "wb") as f:
            f.write(b"\x01" * SEGMENT)
    return recording_id


def segment_bases(conductor, recording_id):
    from aeron_numba.archive.segment_files import segment_files

    return [base for base, _ in segment_files(conductor.ctx.archive_dir, recording_id)]


def test_truncate_answers_the_segment_files_deleted_then_signals_delete(conductor):
    recording_id = segmented_recording(conductor, 3 * SEGMENT + 1024)
    session = connected_session(conductor)
    conductor.on_truncate_recording_request(session, correlation_id=30, recording_id=recording_id,
                                            position=SEGMENT + 512)
    response, delete = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (30, OK, 2)
    assert (delete.correlation_id, delete.recording_id, delete.subscription_id, delete.position, delete.signal) == \
        (30, recording_id, A.NULL_VALUE, A.NULL_VALUE, SIGNAL["DELETE"])
    assert segment_bases(conductor, recording_id) == [0, SEGMENT]
    with open(f"{conductor.ctx.archive_dir}/{A.segment_file_name(recording_id, SEGMENT)}", "rb") as f:
        kept = f.read()
    assert kept == b"\x01" * 512 + bytes(SEGMENT - 512)  # what lay past the cut is zeroed
    assert conductor.catalog.stop_position(recording_id) == SEGMENT + 512


def test_truncate_at_the_stop_position_deletes_nothing_and_still_signals_delete(conductor):
    recording_id = segmented_recording(conductor, SEGMENT + 1024)
    session = connected_session(conductor)
    conductor.on_truncate_recording_request(session, correlation_id=31, recording_id=recording_id,
                                            position=SEGMENT + 1024)
    response, delete = session.publication.sent
    assert (response.code, response.relevant_id) == (OK, 0) and delete.signal == SIGNAL["DELETE"]
    assert segment_bases(conductor, recording_id) == [0, SEGMENT]


def test_purge_answers_the_segment_files_deleted_then_signals_delete(conductor):
    recording_id = segmented_recording(conductor, 2 * SEGMENT + 32)
    session = connected_session(conductor)
    conductor.on_purge_recording_request(session, correlation_id=32, recording_id=recording_id)
    response, delete = session.publication.sent
    assert (response.correlation_id, response.code, response.relevant_id) == (32, OK, 3)
    assert (delete.correlation_id, delete.recording_id, delete.subscription_id, delete.position, delete.signal) == \
        (32, recording_id, A.NULL_VALUE, A.NULL_VALUE, SIGNAL["DELETE"])
    assert segment_bases(conductor, recording_id) == []
    assert conductor.catalog.state(recording_id) == A.RECORDING_STATE_DELETED


# ----------------------------------------------------------------------------------------------- replication
def replicate(conductor, session, correlation_id=60, dst_recording_id=A.NULL_VALUE, live_destination="",
              replication_channel="aeron:udp?endpoint=localhost:0", channel_tag_id=A.NULL_VALUE,
              subscription_tag_id=A.NULL_VALUE):
    conductor.on_replicate_request2(
        session, correlation_id=correlation_id, src_recording_id=3, dst_recording_id=dst_recording_id,
        stop_position=A.NULL_POSITION, channel_tag_id=channel_tag_id, subscription_tag_id=subscription_tag_id,
        src_control_stream_id=10, src_control_channel="aeron:udp?endpoint=localhost:8010",
        live_destination=live_destination, replication_channel=replication_channel, file_io_max_length=A.NULL_VALUE,
        replication_session_id=A.NULL_VALUE, encoded_credentials=b"",
        src_response_channel="aeron:udp?endpoint=localhost:0")
    conductor.do_work()
    return session.publication.sent


@pytest.mark.parametrize("kwargs, code, message", [
    (dict(replication_channel=""), "GENERIC", "no replication channel: the request names none and the archive has "
                                              "no AERON_ARCHIVE_REPLICATION_CHANNEL"),
    (dict(dst_recording_id=12), "UNKNOWN_RECORDING", "unknown destination recording id 12"),
])
def test_a_replicate_request_the_archive_cannot_do_is_refused(conductor, kwargs, code, message):
    session = connected_session(conductor)
    [response] = replicate(conductor, session, **kwargs)
    assert (response.correlation_id, response.code, response.relevant_id, response.error_message) == \
        (60, ERROR, A.ARCHIVE_ERROR_CODES[code], message)
    assert conductor.replications == {}


def test_replicating_into_an_active_recording_is_refused(conductor):
    dst = conductor.catalog.add_recording(
        start_position=0, start_timestamp=1, initial_term_id=0, segment_file_length=128 << 20,
        term_buffer_length=64 * 1024, mtu_length=1408, session_id=1, stream_id=1001, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc")  # stop position NULL: being recorded
    session = connected_session(conductor)
    [response] = replicate(conductor, session, dst_recording_id=dst)
    assert (response.code, response.relevant_id, response.error_message) == \
        (ERROR, A.ARCHIVE_ERROR_CODES["ACTIVE_RECORDING"], f"cannot replicate to active recording {dst}")


def test_a_replication_is_answered_with_its_id_and_stopped_by_it(conductor):
    session = connected_session(conductor)
    [ok] = replicate(conductor, session)
    assert (ok.correlation_id, ok.code) == (60, OK)
    replication_id = ok.relevant_id
    assert list(conductor.replications) == [replication_id]
    # Its first duty cycles asked the source archive's control channel for a session.
    assert conductor.aeron.publications[-1].channel == "aeron:udp?endpoint=localhost:8010"
    session.publication.raw.clear()
    conductor.on_stop_replication_request(session, correlation_id=61, replication_id=replication_id)
    conductor.do_work()
    ok, end = session.publication.sent  # Aeron's order: the stop's OK, then the replication's REPLICATE_END
    assert (ok.correlation_id, ok.code) == (61, OK)
    assert (end.correlation_id, end.signal, end.recording_id) == \
        (replication_id, A.RECORDING_SIGNALS["REPLICATE_END"], A.NULL_VALUE)
    assert conductor.replications == {}
    conductor.on_stop_replication_request(session, correlation_id=62, replication_id=replication_id)
    conductor.do_work()
    [unknown] = session.publication.sent[2:]
    assert (unknown.correlation_id, unknown.code, unknown.relevant_id, unknown.error_message) == \
        (62, ERROR, A.ARCHIVE_ERROR_CODES["UNKNOWN_REPLICATION"], f"unknown replication id {replication_id}")


@pytest.mark.parametrize("request_name, tags, expected", [
    ("tagged_replicate_request", (5, 6), (True, 5, 6)),
    ("replicate_request2", (A.NULL_VALUE, 6), (True, "replication id", 6)),  # a NULL tag: the replication id, as Aeron
    ("replicate_request2", (A.NULL_VALUE, A.NULL_VALUE), (False, "replication id", "replication id")),
])
def test_a_tagged_replication_is_started_with_its_tags(tmp_path, request_name, tags, expected):
    """TaggedReplicate and ReplicateRequest2 with channelTagId/subscriptionTagId start a replication whose recording
    subscription will carry the tags (they were refused before channel tags came to the driver). TaggedReplicate
    names no channels: the archive's replication and control response channels serve."""
    ctx = ArchiveContext(archive_dir=str(tmp_path), replication_channel="aeron:udp?endpoint=localhost:0",
                         archive_client_control_response_channel="aeron:udp?endpoint=localhost:0").conclude()
    with Catalog.open(tmp_path) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=lambda: 0, epoch_clock=lambda: 5)
        try:
            _start_tagged_replication(conductor, request_name, tags, expected)
        finally:
            conductor.on_close()


def _start_tagged_replication(conductor, request_name, tags, expected):
    session = connected_session(conductor)
    fields = dict(correlation_id=60, src_recording_id=3, dst_recording_id=A.NULL_VALUE, channel_tag_id=tags[0],
                  subscription_tag_id=tags[1], src_control_stream_id=10,
                  src_control_channel="aeron:udp?endpoint=localhost:8010", live_destination="")
    if request_name == "replicate_request2":
        fields.update(stop_position=A.NULL_POSITION, replication_channel="aeron:udp?endpoint=localhost:0",
                      src_response_channel="aeron:udp?endpoint=localhost:0")
    getattr(conductor, f"on_{request_name}")(session, **fields)
    conductor.do_work()
    [ok] = session.publication.sent
    assert (ok.correlation_id, ok.code) == (60, OK)
    replication = conductor.replications[ok.relevant_id]
    resolved = tuple(ok.relevant_id if value == "replication id" else value for value in expected)
    assert (replication.is_tagged, replication.channel_tag_id, replication.subscription_tag_id) == resolved


def stopped_recording(conductor, stream_id=1001):
    return conductor.catalog.add_recording(
        start_position=0, stop_position=4096, start_timestamp=1, initial_term_id=0, segment_file_length=1 << 20,
        term_buffer_length=1 << 16, mtu_length=1408, session_id=5, stream_id=stream_id, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc")


def holding(aeron, async_add):
    """``async_add`` whose registrations stay pending (the driver has not answered) until the test clears them."""
    def add(*args, **kwargs):
        registration_id = async_add(*args, **kwargs)
        aeron.pending.add(registration_id)
        return registration_id
    return add


def test_a_replications_recording_subscription_is_added_without_waiting_on_the_driver(conductor):
    session = connected_session(conductor)
    recording_id = stopped_recording(conductor)
    aeron = conductor.aeron
    before = len(aeron.subscriptions)
    aeron.async_add_subscription = holding(aeron, aeron.async_add_subscription)
    registration_id = conductor.extend_for_replication(session, 70, recording_id, 1001,
                                                       "aeron:udp?endpoint=localhost:0|session-id=5")
    [subscription] = aeron.subscriptions[before:]
    assert (subscription.registration_id, subscription.stream_id) == (registration_id, 1001)
    assert conductor.recording_subscription(registration_id).subscription is None  # the driver has not answered
    conductor.do_work()
    assert session.publication.sent == [] and conductor.recording_subscription(registration_id).subscription is None
    aeron.pending.clear()
    conductor.do_work()
    assert conductor.recording_subscription(registration_id).subscription is subscription
    [ok] = session.publication.sent  # as Aeron's extendRecording: OK, under the replication id, with the id
    assert (ok.correlation_id, ok.code, ok.relevant_id) == (70, OK, registration_id)


def test_a_replications_recording_subscription_the_driver_refuses_is_answered_with_its_error(conductor):
    session = connected_session(conductor)
    recording_id = stopped_recording(conductor)
    aeron = conductor.aeron
    registration_id = conductor.extend_for_replication(session, 71, recording_id, 1001, "aeron:udp?endpoint=x:0")
    aeron.refused[registration_id] = RegistrationError(11, "no such interface")
    conductor.do_work()
    assert conductor.recording_subscription(registration_id) is None
    [error] = session.publication.sent
    assert (error.correlation_id, error.code, error.relevant_id) == (71, ERROR, A.ARCHIVE_ERROR_CODES["GENERIC"])
    assert "recording subscription for streamId=1001 channel=aeron:udp?endpoint=x:0: " in error.error_message
    assert "no such interface" in error.error_message


def test_a_replications_recording_subscription_stopped_while_being_added_is_removed_at_the_driver(conductor):
    session = connected_session(conductor)
    recording_id = stopped_recording(conductor)
    aeron = conductor.aeron
    aeron.async_add_subscription = holding(aeron, aeron.async_add_subscription)
    registration_id = conductor.extend_for_replication(session, 72, recording_id, 1001, "aeron:udp?endpoint=x:0")
    conductor.stop_recording_subscription(registration_id)
    assert aeron.removed == [registration_id] and conductor.recording_subscription(registration_id) is None
    aeron.pending.clear()
    conductor.do_work()
    assert session.publication.sent == []  # no OK for a subscription given up


def test_an_idle_conductor_does_no_work_between_its_timers(tmp_path):
    """Nothing to do is 0 work, so the archive's backoff idle strategy backs off (issue 16): its timers (the mark
    file's activity timestamp, a session's liveness response) still run on time without counting as work."""
    now_ns = [0]
    ctx = ArchiveContext(archive_dir=str(tmp_path)).conclude()
    with Catalog.open(tmp_path) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=lambda: now_ns[0],
                                     epoch_clock=lambda: 1_000 + now_ns[0] // 1_000_000)
        try:
            session = connected_session(conductor)
            assert conductor.mark_file.activity_timestamps_ms == [1_000]
            interval_ms = A.MARK_ACTIVITY_UPDATE_INTERVAL_MS
            assert ctx.session_liveness_check_interval_ns == interval_ms * 1_000_000  # both timers fire together
            for second in (1, 2):
                for _ in range(interval_ms):
                    now_ns[0] += 1_000_000
                    assert conductor.do_work() == 0
                assert conductor.mark_file.activity_timestamps_ms[-1] == 1_000 + second * interval_ms
                [liveness] = session.publication.sent  # one, at the end of the interval
                assert (liveness.correlation_id, liveness.code) == (-1, OK)
                session.publication.raw.clear()
            assert len(conductor.mark_file.activity_timestamps_ms) == 3
        finally:
            conductor.on_close()


# ------------------------------------------------------------------------------------------------- idle watch
@pytest.fixture
def idle_conductor(tmp_path):
    """On the monotonic clock, which a compiled wait's deadline is in (beside the ``conductor`` fixture's dir)."""
    archive_dir = tmp_path / "idle"
    archive_dir.mkdir()
    ctx = ArchiveContext(archive_dir=str(archive_dir)).conclude()
    with Catalog.open(archive_dir) as catalog:
        conductor = ArchiveConductor(ctx, Aeron(), MarkFile(), catalog, nano_clock=time.monotonic_ns,
                                     epoch_clock=lambda: 5)
        yield conductor
        conductor.on_close()


def test_an_idle_archive_is_woken_by_a_request_a_connection_change_or_its_client_and_runs_by_its_timers(
        idle_conductor):
    session = connected_session(idle_conductor)
    assert idle_conductor.do_work() == 0
    watch = IdleWatch()
    assert idle_conductor.add_idle_watch(watch)
    assert watch.deadline_ns == min(session.next_liveness_ns, idle_conductor._next_mark_update_ns)
    watch.snapshot()
    for what in (idle_conductor.control_subscriptions[0], session.publication, idle_conductor.aeron):
        assert not watch.changed()
        what.idle_word[0] += 1  # a request frame committed / the response stream's connection / a driver event
        assert watch.changed()
        watch.snapshot()


def test_an_archive_with_a_session_not_yet_active_or_with_responses_queued_idles_a_cycle_at_a_time(idle_conductor):
    idle_conductor.on_auth_connect_request((1, 42), correlation_id=10, response_stream_id=20,
                                           version=A.ARCHIVE_PROTOCOL_VERSION, response_channel="aeron:ipc",
                                           encoded_credentials=b"")
    assert not idle_conductor.add_idle_watch(IdleWatch())  # connecting: its OK is still to go out
    idle_conductor.do_work()
    assert idle_conductor.add_idle_watch(IdleWatch())
    [session] = idle_conductor.control_sessions.values()
    session.publication.results = [BACK_PRESSURED] * 9  # three sends of three offers each (Aeron's retries)
    idle_conductor.on_archive_id_request(session, correlation_id=11)
    idle_conductor.do_work()
    assert not idle_conductor.add_idle_watch(IdleWatch())  # a response waits for the back pressure to clear


def test_an_archive_on_a_test_clock_idles_a_cycle_at_a_time(conductor):
    assert not conductor.add_idle_watch(IdleWatch())  # its cached clock is not the wait's


def test_an_idle_recording_wakes_its_archive_when_the_next_frame_lands(idle_conductor, shm_dir):
    # A cluster member's archive records the log all its life: it must be able to park between messages.
    image, _ = record(idle_conductor, shm_dir)
    watch = IdleWatch()
    assert idle_conductor.add_idle_watch(watch)
    watch.snapshot()
    assert not watch.changed()
    image.publish(1)
    assert watch.changed()


def test_an_archive_awaiting_the_drivers_answer_for_a_subscription_idles_a_cycle_at_a_time(idle_conductor):
    session = connected_session(idle_conductor)
    recording_id = stopped_recording(idle_conductor)
    aeron = idle_conductor.aeron
    aeron.async_add_subscription = holding(aeron, aeron.async_add_subscription)
    idle_conductor.extend_for_replication(session, 70, recording_id, 1001,
                                          "aeron:udp?endpoint=localhost:0|session-id=5")
    idle_conductor.do_work()
    assert not idle_conductor.add_idle_watch(IdleWatch())  # the answer (or the driver timeout) is polled for
    aeron.pending.clear()
    idle_conductor.do_work()
    assert idle_conductor.add_idle_watch(IdleWatch())  # made: what comes next is an image, a driver event
