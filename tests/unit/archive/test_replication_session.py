"""ReplicationSession driven step by step with a fake source archive connection, a fake recording subscription and a
real catalog: the requests it sends the source, the catalog entry it makes, its signals and errors (as Aeron's
ReplicationSession), with an injected clock for the timeouts."""

from __future__ import annotations

import collections

import pytest

from aeron_numba.archive.async_connect import ArchiveConnectError
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.replication_session import ReplicationSession, ReplicationState
from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.archive_proxies import ArchiveProxy
from aeron_numba.codecs.channel_uri import ChannelUri
from aeron_numba.layout import archive as A
from tests.unit.archive.archive_fakes import Publication

OK, ERROR = A.CONTROL_RESPONSE_CODES["OK"], A.CONTROL_RESPONSE_CODES["ERROR"]
RECORDING_UNKNOWN = A.CONTROL_RESPONSE_CODES["RECORDING_UNKNOWN"]
REPLICATION_ID, SRC_ID, SRC_SESSION, STREAM = 9, 4, 555, 1001
TIMEOUT_NS = 1_000_000_000


class Poller:
    def __init__(self):
        self.control_session_id = 31
        self.responses, self.descriptors = {}, collections.defaultdict(list)

    def poll(self):
        return 0


class Source:
    """The source archive's control session: requests land decoded in ``sent``; tests put answers in ``poller``."""

    def __init__(self):
        self.publication = Publication()
        self.proxy = ArchiveProxy(self.publication)
        self.poller = Poller()
        self.control_session_id = 31
        self.closed = False

    @property
    def sent(self):
        return self.publication.sent

    def close(self):
        self.closed = True


class Connect:
    def __init__(self, source, error=None):
        self.source, self.error, self.step, self.closed = source, error, "connecting", False

    def poll(self):
        if self.error:
            raise ArchiveConnectError(self.error)
        self.step = "done"
        return self.source

    def close(self):
        self.closed = True


class Image:
    def __init__(self, join_position):
        self.session_id, self.join_position, self.position = SRC_SESSION, join_position, join_position
        self.is_closed = self.is_end_of_stream = False
        self.term_buffer_length, self.active_transport_count = 64 * 1024, 1


class RecordingSubscription:
    def __init__(self, channel):
        self.registration_id, self.channel, self.is_closed = 700, channel, False
        self.images = []
        self.destinations: list[tuple[str, str]] = []  # ("add" | "remove", channel), in order

    @property
    def resolved_endpoint(self):  # MDS: known once the replay destination is added
        return "127.0.0.1:40124" if ("add", "aeron:udp?endpoint=localhost:0") in self.destinations else None

    def async_add_destination(self, channel):
        self.destinations.append(("add", channel))
        return 1

    def async_remove_destination(self, channel):
        self.destinations.append(("remove", channel))
        return 2

    def try_resolve_channel_endpoint_port(self):
        return self.channel.replace("localhost:0", "localhost:40123")

    def image_by_session_id(self, session_id):
        return next((i for i in self.images if i.session_id == session_id), None)


class Owner:
    def __init__(self, channel):
        self.original_channel, self.subscription = channel, None


class Conductor:
    """Adds the recording subscription as the archive's conductor does, without waiting on the driver: the
    subscription is made once ``made`` is set (at once by default), refused when ``refused`` is."""

    def __init__(self):
        self.subscription, self.stopped, self.owner = None, [], None
        self.made, self.refused = True, False

    def extend_for_replication(self, session, replication_id, recording_id, stream_id, channel):
        self.extended = (replication_id, recording_id, stream_id)
        self.subscription = RecordingSubscription(channel)
        self.owner = Owner(channel)
        return self.subscription.registration_id

    def recording_subscription(self, registration_id):
        assert registration_id == self.subscription.registration_id
        if self.refused:
            return None
        if self.made:
            self.owner.subscription = self.subscription
        return self.owner

    def stop_recording_subscription(self, subscription_id):
        self.stopped.append(subscription_id)


class ControlSession:
    def __init__(self):
        self.signals, self.errors = [], []

    def signal(self, correlation_id, recording_id, subscription_id, position, signal):
        self.signals.append((correlation_id, recording_id, subscription_id, position, signal))

    def error(self, correlation_id, error_code, message):
        self.errors.append((correlation_id, error_code, message))


class Clock:
    now = 0

    def __call__(self):
        return self.now


@pytest.fixture
def catalog(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        yield catalog


def make(catalog, source=None, dst_recording_id=A.NULL_VALUE, stop_position=A.NULL_POSITION, connect_error=None,
         file_io_max_length=A.NULL_VALUE, live_destination="", replication_channel="aeron:udp?endpoint=localhost:0",
         **tags):
    clock, ids = Clock(), iter(range(100, 200))
    connect = Connect(source or Source(), connect_error)
    replication = ReplicationSession(
        replication_id=REPLICATION_ID, src_recording_id=SRC_ID, dst_recording_id=dst_recording_id,
        stop_position=stop_position, replication_channel=replication_channel,
        file_io_max_length=file_io_max_length, replication_session_id=A.NULL_VALUE, control_session=ControlSession(),
        conductor=Conductor(), catalog=catalog, connect=lambda: connect, next_correlation_id=lambda: next(ids),
        message_timeout_ns=TIMEOUT_NS, nano_clock=clock, live_destination=live_destination, **tags)
    replication.clock, replication.connect_attempt = clock, connect
    return replication


def descriptor(start=1024, stop=65536, **fields):
    values = dict(control_session_id=31, correlation_id=0, recording_id=SRC_ID, start_timestamp=11, stop_timestamp=12,
                  start_position=start, stop_position=stop, initial_term_id=7, segment_file_length=128 * 1024,
                  term_buffer_length=64 * 1024, mtu_length=1408, session_id=SRC_SESSION, stream_id=STREAM,
                  stripped_channel="aeron:udp?endpoint=src:1", original_channel="aeron:udp?endpoint=src:1|mtu=1408",
                  source_identity="127.0.0.1:5555")
    values.update(fields)
    return ARCHIVE.RecordingDescriptor(**values)


def run_to_replay(replication, source, d):
    """Connect, answer ListRecording with ``d``, extend: up to the replay request sent."""
    replication.do_work()  # starts the connect
    replication.do_work()  # connected
    assert replication.state is ReplicationState.REPLICATE_DESCRIPTOR
    replication.do_work()
    [listing] = source.sent
    assert (type(listing).__name__, listing.recording_id, listing.control_session_id) == \
        ("ListRecordingRequest", SRC_ID, 31)
    source.poller.descriptors[listing.correlation_id].append(d)
    replication.do_work()
    if replication.state is ReplicationState.EXTEND:
        replication.do_work()
        replication.do_work()  # sends the replay request
    return listing


def test_a_new_recording_is_replicated_until_sync_then_ends(catalog):
    source = Source()
    replication = make(catalog, source)
    run_to_replay(replication, source, descriptor())
    dst = replication.dst_recording_id
    d = catalog.descriptor(dst)  # the source's descriptor, empty at its start position
    assert (d.start_position, d.stop_position, d.initial_term_id, d.segment_file_length, d.term_buffer_length,
            d.session_id, d.stream_id, d.original_channel, d.source_identity) == \
        (1024, 1024, 7, 128 * 1024, 64 * 1024, SRC_SESSION, STREAM, "aeron:udp?endpoint=src:1|mtu=1408",
         "127.0.0.1:5555")
    conductor = replication.conductor
    assert conductor.extended == (REPLICATION_ID, dst, STREAM)
    assert conductor.subscription.channel == f"aeron:udp?endpoint=localhost:0|rejoin=false|session-id={SRC_SESSION}"
    replay = source.sent[-1]
    assert (type(replay).__name__, replay.recording_id, replay.position, replay.length, replay.replay_stream_id,
            replay.replay_channel) == ("ReplayRequest", SRC_ID, 1024, A.NULL_LENGTH, STREAM,
                                       f"aeron:udp?endpoint=localhost:40123|session-id={SRC_SESSION}")
    source.poller.responses[replay.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=replay.correlation_id, relevant_id=(3 << 32) | SRC_SESSION, code=OK,
        version=0, error_message="")
    replication.do_work()
    assert replication.state is ReplicationState.AWAIT_IMAGE
    replication.do_work()
    assert replication.state is ReplicationState.AWAIT_IMAGE  # no image yet
    image = Image(1024)
    conductor.subscription.images.append(image)
    replication.do_work()
    image.position = 65504
    replication.do_work()
    assert replication.state is ReplicationState.REPLICATE
    image.position = 65536
    replication.do_work()
    assert replication.is_done
    replication.close()
    assert conductor.stopped == [700]
    assert [type(m).__name__ for m in source.sent] == ["ListRecordingRequest", "ReplayRequest"]  # replay ended itself
    assert source.closed
    assert replication.control_session.signals == [
        (REPLICATION_ID, dst, A.NULL_VALUE, 1024, "REPLICATE"), (REPLICATION_ID, dst, 700, 65536, "SYNC"),
        (REPLICATION_ID, dst, A.NULL_VALUE, A.NULL_POSITION, "REPLICATE_END")]
    assert replication.control_session.errors == []


@pytest.mark.parametrize("tags, recorded_tags", [
    (dict(channel_tag_id=1001, subscription_tag_id=2002), "1001,2002"),
    # A NULL tag is the replication id, as in Aeron's ReplicationSession.
    (dict(channel_tag_id=1001), f"1001,{REPLICATION_ID}"),
    (dict(subscription_tag_id=2002), f"{REPLICATION_ID},2002"),
])
def test_a_tagged_replication_records_through_a_tagged_multi_destination_subscription(catalog, tags, recorded_tags):
    """As Aeron's: the recording subscription is ``control-mode=manual`` with the tags and no endpoint, the
    replication channel's endpoint is added to it as the replay destination, and the source replays there."""
    source = Source()
    replication = make(catalog, source, **tags)
    run_to_replay(replication, source, descriptor())
    subscription = replication.conductor.subscription
    recorded = ChannelUri.parse(subscription.channel)
    assert (recorded.get("endpoint"), recorded.get("control-mode"), recorded.get("tags"), recorded.get("rejoin"),
            recorded.get("session-id")) == (None, "manual", recorded_tags, "false", str(SRC_SESSION))
    assert subscription.destinations == [("add", "aeron:udp?endpoint=localhost:0")]
    replayed = ChannelUri.parse(source.sent[-1].replay_channel)
    assert (replayed.get("endpoint"), replayed.get("tags"), replayed.get("session-id")) == \
        ("localhost:40124", None, str(SRC_SESSION))


def test_an_untagged_replication_records_on_the_replication_channel_as_given(catalog):
    source = Source()
    replication = make(catalog, source, replication_channel="aeron:udp?endpoint=localhost:0|tags=5")
    run_to_replay(replication, source, descriptor())
    subscription = replication.conductor.subscription
    assert subscription.channel == f"aeron:udp?endpoint=localhost:0|tags=5|rejoin=false|session-id={SRC_SESSION}"
    assert subscription.destinations == []
    assert source.sent[-1].replay_channel == f"aeron:udp?endpoint=localhost:40123|tags=5|session-id={SRC_SESSION}"


def test_an_existing_recording_is_extended_from_its_stop_position_to_the_given_stop(catalog):
    dst = catalog.add_recording(start_position=1024, stop_position=4096, start_timestamp=1, initial_term_id=7,
                                segment_file_length=128 * 1024, term_buffer_length=64 * 1024, mtu_length=1408,
                                session_id=SRC_SESSION, stream_id=STREAM, stripped_channel="c", original_channel="c",
                                source_identity="s")
    source = Source()
    replication = make(catalog, source, dst_recording_id=dst, stop_position=8192)
    run_to_replay(replication, source, descriptor())
    replay = source.sent[-1]
    assert (replay.position, replay.length) == (4096, 8192 - 4096)
    assert catalog.next_recording_id == dst + 1  # no new entry
    assert ("REPLICATE" not in [s[-1] for s in replication.control_session.signals])


def test_a_source_recording_where_the_destination_stops_is_in_sync_at_once(catalog):
    source = Source()
    replication = make(catalog, source)
    run_to_replay(replication, source, descriptor(start=2048, stop=2048))
    assert replication.is_done and replication.conductor.subscription is None
    replication.close()
    assert [s[-1] for s in replication.control_session.signals] == ["REPLICATE", "SYNC", "REPLICATE_END"]


def test_an_unknown_source_recording_ends_with_unknown_recording(catalog):
    source = Source()
    replication = make(catalog, source)
    replication.do_work(), replication.do_work(), replication.do_work()
    [listing] = source.sent
    source.poller.responses[listing.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=listing.correlation_id, relevant_id=SRC_ID, code=RECORDING_UNKNOWN,
        version=0, error_message="")
    replication.do_work()
    assert replication.is_done
    assert replication.control_session.errors == [
        (REPLICATION_ID, "UNKNOWN_RECORDING", f"unknown src recording id {SRC_ID}")]
    replication.close()
    assert replication.control_session.signals[-1][-1] == "REPLICATE_END"
    assert catalog.next_recording_id == 0


def test_a_source_that_cannot_be_connected_is_a_replication_connection_failure(catalog):
    replication = make(catalog, connect_error="no archive on aeron:udp?endpoint=src:8010 stream 10")
    replication.do_work(), replication.do_work()
    assert replication.is_done
    [(correlation_id, code, message)] = replication.control_session.errors
    assert (correlation_id, code) == (REPLICATION_ID, "REPLICATION_CONNECTION_FAILURE")
    assert message.startswith("Replication connection failed=no archive on")


def test_an_error_from_the_source_ends_the_replication_with_its_message(catalog):
    source = Source()
    replication = make(catalog, source)
    run_to_replay(replication, source, descriptor())
    replay = source.sent[-1]
    source.poller.responses[replay.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=replay.correlation_id, relevant_id=5, code=ERROR, version=0,
        error_message="max concurrent replays reached: 20")
    replication.do_work()
    assert replication.is_done
    assert replication.control_session.errors == [(REPLICATION_ID, "GENERIC", "max concurrent replays reached: 20")]


def test_a_source_that_does_not_answer_times_out(catalog):
    source = Source()
    replication = make(catalog, source)
    replication.do_work(), replication.do_work(), replication.do_work()
    replication.clock.now = TIMEOUT_NS - 1
    replication.do_work()
    assert not replication.is_done
    replication.clock.now = TIMEOUT_NS
    replication.do_work()
    assert replication.control_session.errors == [
        (REPLICATION_ID, "GENERIC", "failed to fetch remote recording descriptor")]


def test_a_replay_image_that_goes_away_ends_without_sync(catalog):
    source = Source()
    replication = make(catalog, source)
    run_to_replay(replication, source, descriptor())
    replay = source.sent[-1]
    source.poller.responses[replay.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=replay.correlation_id, relevant_id=77, code=OK, version=0,
        error_message="")
    replication.do_work()
    image = Image(1024)
    replication.conductor.subscription.images.append(image)
    replication.do_work()
    image.position, image.is_closed = 30000, True  # the source died mid-copy
    replication.do_work()
    assert replication.is_done
    replication.close()
    assert [s[-1] for s in replication.control_session.signals] == ["REPLICATE", "REPLICATE_END"]


def test_stopping_a_running_replication_stops_the_source_replay(catalog):
    source = Source()
    replication = make(catalog, source)
    run_to_replay(replication, source, descriptor())
    replay = source.sent[-1]
    source.poller.responses[replay.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=replay.correlation_id, relevant_id=(3 << 32) | SRC_SESSION, code=OK,
        version=0, error_message="")
    replication.do_work()
    replication.abort("stop replication")
    replication.close()
    stop = source.sent[-1]
    assert (type(stop).__name__, stop.replay_session_id) == ("StopReplayRequest", (3 << 32) | SRC_SESSION)
    assert replication.conductor.stopped == [700] and source.closed
    assert replication.control_session.signals[-1][-1] == "REPLICATE_END"


def test_a_file_io_max_length_below_the_mtu_is_refused(catalog):
    source = Source()
    replication = make(catalog, source, file_io_max_length=1024)
    run_to_replay(replication, source, descriptor())
    assert replication.control_session.errors == [
        (REPLICATION_ID, "GENERIC",
         "Replication fileIoMaxLength (1024) is less than than the recording mtuLength (1408)")]


def test_the_replay_waits_for_the_recording_subscription_and_times_out_without_it(catalog):
    """The archive's duty cycle never waits on the driver: the subscription is added asynchronously and the replay
    request goes only once it is made, within the message timeout."""
    source = Source()
    replication = make(catalog, source)
    replication.conductor.made = False
    run_to_replay(replication, source, descriptor())
    assert replication.state is ReplicationState.REPLAY
    assert [type(m).__name__ for m in source.sent] == ["ListRecordingRequest"]  # no replay request yet
    replication.clock.now = TIMEOUT_NS - 1
    replication.do_work()
    assert not replication.is_done
    replication.clock.now = TIMEOUT_NS
    replication.do_work()
    assert replication.is_done
    [(correlation_id, code, message)] = replication.control_session.errors
    assert (correlation_id, code) == (REPLICATION_ID, "GENERIC")
    assert message == "failed to add the recording subscription: channel=aeron:udp?endpoint=localhost:0|rejoin=false|" \
                      f"session-id={SRC_SESSION}"
    replication.close()
    assert replication.conductor.stopped == [700]  # given up while being added: removed too


def test_a_recording_subscription_the_driver_refused_ends_the_replication_with_the_conductors_error(catalog):
    source = Source()
    replication = make(catalog, source)
    replication.conductor.refused = True
    run_to_replay(replication, source, descriptor())
    assert replication.is_done
    assert replication.control_session.errors == []  # the conductor answered the refusal itself
    assert [type(m).__name__ for m in source.sent] == ["ListRecordingRequest"]


LIVE = "aeron:udp?endpoint=localhost:9100"


def answer(source, request, relevant_id, code=OK, error_message=""):
    source.poller.responses[request.correlation_id] = ARCHIVE.ControlResponse(
        control_session_id=31, correlation_id=request.correlation_id, relevant_id=relevant_id, code=code, version=0,
        error_message=error_message)


def run_to_live_join(catalog, source, recorded=8192):
    """A live replication up to ATTEMPT_LIVE_JOIN: the source has recorded ``recorded`` of an active recording."""
    replication = make(catalog, source, live_destination=LIVE)
    replication.do_work(), replication.do_work(), replication.do_work()
    [listing] = source.sent
    source.poller.descriptors[listing.correlation_id].append(descriptor(start=0, stop=A.NULL_POSITION))
    replication.do_work()
    assert replication.state is ReplicationState.SRC_RECORDING_POSITION
    replication.do_work()
    position_request = source.sent[-1]
    assert (type(position_request).__name__, position_request.recording_id) == ("RecordingPositionRequest", SRC_ID)
    answer(source, position_request, recorded)
    replication.do_work()
    assert replication.state is ReplicationState.EXTEND
    replication.do_work()
    subscription = replication.conductor.subscription
    # One image for the replay and the live stream: a multi-destination subscription, tagged as Aeron tags it.
    assert subscription.channel == (f"aeron:udp?rejoin=false|session-id={SRC_SESSION}|"
                                    f"tags={REPLICATION_ID},{REPLICATION_ID}|control-mode=manual")
    assert subscription.destinations == []
    replication.do_work()  # the subscription made: the replay destination added, the replay asked for
    assert subscription.destinations == [("add", "aeron:udp?endpoint=localhost:0")]
    replay = source.sent[-1]
    assert (type(replay).__name__, replay.position, replay.replay_channel) == (
        "ReplayRequest", 0, f"aeron:udp?endpoint=localhost:40124|session-id={SRC_SESSION}|linger=0|eos=false")
    answer(source, replay, (3 << 32) | SRC_SESSION)
    replication.do_work()
    image = Image(0)
    subscription.images.append(image)
    replication.do_work()
    assert replication.state is ReplicationState.CATCHUP
    return replication, subscription, image


def test_a_live_replication_catches_up_adds_the_live_destination_then_lets_go_of_the_replay(catalog):
    source = Source()
    replication, subscription, image = run_to_live_join(catalog, source)
    image.position = 4096
    replication.do_work()
    assert replication.state is ReplicationState.CATCHUP  # behind what the source had recorded
    image.position = 8192
    replication.do_work()
    assert replication.state is ReplicationState.ATTEMPT_LIVE_JOIN
    replication.do_work()
    answer(source, source.sent[-1], 8192 + 64 * 1024 // 4 + 32)  # the live stream moved on: too far to join
    replication.do_work()
    assert subscription.destinations[1:] == []
    replication.do_work()
    answer(source, source.sent[-1], 8192 + 64 * 1024 // 4)  # within a quarter term: join the live stream
    replication.do_work()
    assert subscription.destinations[1:] == [("add", LIVE)]
    image.position = 8192 + 64 * 1024 // 4
    replication.do_work()
    answer(source, source.sent[-1], image.position)  # caught up, but the live stream has not arrived yet
    replication.do_work()
    assert replication.state is ReplicationState.ATTEMPT_LIVE_JOIN
    image.active_transport_count = 2
    replication.do_work()
    answer(source, source.sent[-1], image.position)
    replication.do_work()
    assert replication.is_done and replication.reason == "merge"
    assert subscription.destinations[2:] == [("remove", "aeron:udp?endpoint=localhost:0")]
    replication.close()
    assert replication.conductor.stopped == []  # the recording goes on with the live stream
    assert type(source.sent[-1]).__name__ == "StopReplayRequest" and source.closed
    dst = replication.dst_recording_id
    assert replication.control_session.signals == [
        (REPLICATION_ID, dst, A.NULL_VALUE, 0, "REPLICATE"),
        (REPLICATION_ID, dst, A.NULL_VALUE, image.position, "MERGE"),
        (REPLICATION_ID, dst, A.NULL_VALUE, A.NULL_POSITION, "REPLICATE_END")]
    assert replication.control_session.errors == []


def test_a_live_replication_of_a_stopped_recording_is_refused(catalog):
    source = Source()
    replication = make(catalog, source, live_destination=LIVE)
    run_to_replay(replication, source, descriptor())
    assert replication.is_done
    assert replication.control_session.errors == [
        (REPLICATION_ID, "GENERIC", "cannot live merge without active source recording")]


def test_a_live_join_gives_up_after_three_unanswered_position_requests(catalog):
    source = Source()
    replication, _, image = run_to_live_join(catalog, source)
    image.position = 8192
    replication.do_work()
    for attempt in range(3):
        replication.do_work()  # asks
        replication.clock.now += TIMEOUT_NS
        replication.do_work()  # no answer in time
    assert replication.is_done
    assert replication.control_session.errors == [(REPLICATION_ID, "GENERIC", "failed to get recording position")]


def test_a_replay_image_that_closes_before_the_live_join_is_an_error(catalog):
    source = Source()
    replication, _, image = run_to_live_join(catalog, source)
    image.is_closed = True
    replication.do_work()
    assert replication.control_session.errors == [
        (REPLICATION_ID, "GENERIC", "replication image closed unexpectedly")]
