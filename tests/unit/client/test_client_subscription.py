"""Subscriptions, images and fragment reassembly through the client against a scripted driver (spec §5, §11):
polling (Python and compiled handlers), controlled polling, round robin, FragmentAssembler against a
reference, image lifecycle and log unmapping after the linger."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.client import (
    ABORT,
    ADMIN_ACTION,
    BACK_PRESSURED,
    BREAK,
    COMMIT,
    CONTINUE,
    ControlledFragmentAssembler,
    FragmentAssembler,
    Header,
)
from aeron_numba.errors import AeronError, ConfigurationError, RegistrationError
from aeron_numba.kernels import term_reader
from aeron_numba.kernels.handlers import FRAGMENT_HANDLER_SIG
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import frame
from harness.awaiting import await_condition
from tests.reference import fragment_assembler as ref
from tests.unit.client_support import FakeDriver, connect, mapping_count, poll_until

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def offer(publication, data) -> int:
    for _ in range(4):
        result = publication.offer(data)
        if result != ADMIN_ACTION:
            return result
    raise AssertionError("offer kept returning ADMIN_ACTION")


class Collector:
    def __init__(self, action=None):
        self.messages: list[bytes] = []
        self.sessions: list[int] = []
        self.positions: list[int] = []
        self.action = action

    def __call__(self, buffer, offset, length, header):
        self.messages.append(bytes(buffer[offset : offset + length]))
        self.sessions.append(header.session_id)
        self.positions.append(header.position)
        return self.action


# ----------------------------------------------------------------------------------------- subscribing
def test_add_subscription_and_image_lifecycle(client, driver):
    aeron, _ = client
    available, unavailable = [], []
    subscription = aeron.add_subscription(
        "aeron:ipc", 5, available_image_handler=available.append, unavailable_image_handler=unavailable.append
    )
    command = driver.wait_for_command(cp.ADD_SUBSCRIPTION)[0]
    assert (command.stream_id, command.channel, command.registration_correlation_id) == (5, "aeron:ipc", -1)
    assert subscription.registration_id == command.correlation_id
    assert subscription.image_count == 0 and not subscription.is_connected
    assert subscription.poll(Collector(), 10) == 0

    publication = aeron.add_publication("aeron:ipc", 5)
    await_condition(lambda: available, 5, "available image handler")
    for limit in (0, -3):  # checked on the first poll of an image too
        with pytest.raises(ConfigurationError, match=f"fragment_limit={limit} must be >= 1"):
            available[0].poll(Collector(), limit)
        with pytest.raises(ConfigurationError, match=f"fragment_limit={limit} must be >= 1"):
            subscription.controlled_poll(Collector(), limit)
    await_condition(lambda: available, 5, "available image handler")
    image = available[0]
    assert subscription.images == [image] and subscription.image_count == 1 and subscription.is_connected
    assert subscription.image_by_session_id(publication.session_id) is image
    assert subscription.image_by_session_id(publication.session_id + 1) is None
    assert image.session_id == publication.session_id and image.correlation_id == publication.original_registration_id
    assert image.subscription_registration_id == subscription.registration_id
    assert image.source_identity == "aeron:ipc" and image.join_position == 0 and image.position == 0
    assert image.position_offset == driver.sub_pos_counter(publication.registration_id, subscription.registration_id) * 128
    assert not image.is_end_of_stream
    # The publication and the image share the one mapping of the log.
    assert aeron.conductor.mapped_log_count == 1

    assert offer(publication, b"last words") > 0
    publication.close()
    await_condition(lambda: unavailable, 5, "unavailable image handler")
    assert unavailable == [image] and image.is_closed and subscription.image_count == 0
    assert image.poll(Collector(), 10) == 0
    assert image.position == 0 and not image.is_end_of_stream  # it closed before consuming to the end
    assert aeron.conductor.mapped_log_count == 0


def test_a_one_image_subscription_polls_through_its_fast_path_until_the_image_goes(client, driver):
    """Subscription.poll peeks at a lone image itself (the same limit as its last poll); it must deliver as
    Image.poll does and return 0 once the image is gone."""
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 13)
    publication = aeron.add_exclusive_publication("aeron:ipc", 13)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    collector = Collector()
    assert subscription.poll(collector, 10) == 0  # the first poll with this limit goes through Image.poll
    assert subscription._lone_image is subscription.images[0]
    positions = [offer(publication, bytes([i]) * 40) for i in range(3)]
    assert subscription.poll(collector, 10) == 3  # a batch
    positions.append(offer(publication, b"one"))
    assert subscription.poll(collector, 10) == 1  # a lone fragment, consumed by its kernel call
    assert subscription.poll(collector, 10) == 0
    assert collector.messages == [bytes([i]) * 40 for i in range(3)] + [b"one"]
    assert collector.positions == positions
    assert subscription.images[0].position == positions[-1]
    publication.close()
    await_condition(lambda: subscription.image_count == 0, 5, "the image to go")
    assert subscription._lone_image is None
    assert subscription.poll(collector, 10) == 0 and subscription.poll(collector, 1) == 0


def test_poll_delivers_payload_and_header_and_stores_position(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 6)
    publication = aeron.add_exclusive_publication("aeron:ipc", 6)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    positions = [offer(publication, f"message {i}".encode()) for i in range(5)]
    headers = []

    def handler(buffer, offset, length, header):
        assert isinstance(header, Header)
        headers.append((bytes(buffer[offset : offset + length]), header.position, header.term_offset,
                        header.term_id, header.stream_id, header.flags, header.type, header.frame_length))

    assert subscription.poll(handler, 2) == 2
    image = subscription.images[0]
    assert image.position == positions[1]
    poll_until(subscription, handler, lambda: len(headers), 5)
    assert [h[0] for h in headers] == [f"message {i}".encode() for i in range(5)]
    assert [h[1] for h in headers] == positions
    assert [h[2] for h in headers] == [0] + positions[:-1]
    assert {h[3] for h in headers} == {publication.initial_term_id}
    assert {(h[4], h[5], h[6]) for h in headers} == {(6, frame.UNFRAGMENTED, frame.HDR_TYPE_DATA)}
    assert headers[0][7] == frame.HEADER_LENGTH + len(b"message 0")
    assert image.position == positions[-1]
    # The driver sees the stored sub-pos.
    sub_pos_id = driver.sub_pos_counter(publication.registration_id, subscription.registration_id)
    assert driver.counter_value(sub_pos_id) == positions[-1]
    with pytest.raises(ConfigurationError, match="fragment_limit=0 must be >= 1"):
        subscription.poll(handler, 0)


def test_handler_exception_consumes_that_fragment_and_propagates(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 7)
    publication = aeron.add_publication("aeron:ipc", 7)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    positions = [offer(publication, bytes([i]) * 10) for i in range(3)]
    seen = []

    def handler(buffer, offset, length, header):
        seen.append(buffer[offset])
        if buffer[offset] == 1:
            raise ValueError("bad message")

    with pytest.raises(ValueError, match="bad message"):
        subscription.poll(handler, 10)
    assert subscription.images[0].position == positions[1]
    assert subscription.poll(handler, 10) == 1
    assert seen == [0, 1, 2]


@pytest.mark.parametrize("kind", ["poll", "controlled_poll"])
def test_polling_one_fragment_at_a_time_crosses_term_ends_with_every_header_field(client, driver, kind):
    """A poll of one fragment is consumed by its kernel call and answered by a header that is read lazily; its
    peek at the next frame (controlled_poll peeks too) must follow the stream over padding and into the next
    term."""
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 12)
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 12)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    rng = np.random.default_rng(12)
    sent, delivered = [], []

    def handler(buffer, offset, length, header):
        delivered.append((bytes(buffer[offset:offset + length]), header.position, header.term_offset,
                          header.term_id, header.frame_length, header.offset))
        if length == 13:
            raise ValueError("thirteen")  # consumed all the same
        return CONTINUE

    do_poll = getattr(subscription, kind)
    image = subscription.images[0]
    for i in range(400):  # about three terms of 64 KiB
        size = 13 if i % 97 == 5 else int(rng.integers(0, 1000))
        message = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        results = []
        await_condition(lambda: results.append(offer(publication, message)) or results[-1] > 0, 5, "the fake driver's limit")
        position = results[-1]
        sent.append((message, position))
        try:
            await_condition(lambda: do_poll(handler, 1) == 1 or len(delivered) == len(sent), 5, f"message {i}")
        except ValueError:
            assert len(message) == 13
        assert len(delivered) == len(sent) and image.position == position
    assert do_poll(handler, 1) == 0
    assert [d[0] for d in delivered] == [m for m, _ in sent]
    assert [d[1] for d in delivered] == [p for _, p in sent]
    term_length = 64 * 1024
    for (message, position), (_, _, term_offset, term_id, frame_length, offset) in zip(sent, delivered):
        start = position - ((len(message) + frame.HEADER_LENGTH + 31) & ~31)
        assert (term_offset, term_id) == (start % term_length, publication.initial_term_id + start // term_length)
        assert (frame_length, offset) == (frame.HEADER_LENGTH + len(message), 0)
    assert sent[-1][1] > 2 * term_length


def test_round_robin_across_images(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 8)
    publications = [aeron.add_exclusive_publication("aeron:ipc", 8) for _ in range(3)]
    await_condition(lambda: subscription.image_count == 3 and all(p.position_limit > 0 for p in publications), 5, "3 images")
    for publication in publications:
        for i in range(4):
            assert offer(publication, bytes([i])) > 0
    firsts = []
    for _ in range(3):
        collector = Collector()
        assert subscription.poll(collector, 2) == 2
        # With a limit of 2, one image's fragments are taken per poll; the starting image rotates.
        assert len(set(collector.sessions)) == 1
        firsts.append(collector.sessions[0])
    assert len(set(firsts)) == 3
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), 6)
    assert sorted(collector.sessions) == sorted([p.session_id for p in publications] * 2)


# ------------------------------------------------------------------------------------------- controlled
def test_controlled_poll_actions(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 9)
    publication = aeron.add_publication("aeron:ipc", 9)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    positions = [offer(publication, bytes([i]) * 8) for i in range(6)]
    image = subscription.images[0]

    # ABORT on the first fragment: nothing consumed, delivered again next time.
    collector = Collector(ABORT)
    assert subscription.controlled_poll(collector, 10) == 0 and image.position == 0 and len(collector.messages) == 1

    # BREAK: that fragment is consumed and the poll stops.
    collector = Collector(BREAK)
    assert subscription.controlled_poll(collector, 10) == 1
    assert image.position == positions[0] and collector.messages == [bytes([0]) * 8]

    # CONTINUE then ABORT: the continued one is consumed, the aborted one is not.
    actions = iter([CONTINUE, ABORT])
    seen = []

    def continue_then_abort(buffer, offset, length, header):
        seen.append(buffer[offset])
        return next(actions)

    assert subscription.controlled_poll(continue_then_abort, 10) == 1
    assert seen == [1, 2] and image.position == positions[1]

    # COMMIT stores the position at once, visible to the handler of the next fragment.
    observed = []

    def commit(buffer, offset, length, header):
        observed.append(image.position)
        return COMMIT

    assert subscription.controlled_poll(commit, 2) == 2
    assert observed == [positions[1], positions[2]] and image.position == positions[3]

    # A handler returning something else is an error; the fragment counts as consumed.
    with pytest.raises(ConfigurationError, match="returned None"):
        subscription.controlled_poll(lambda *args: None, 10)
    assert image.position == positions[4]
    assert subscription.controlled_poll(Collector(CONTINUE), 10) == 1 and image.position == positions[5]


def test_controlled_fragment_assembler_abort_redelivers_whole_message(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 10)
    publication = aeron.add_publication("aeron:ipc", 10)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    big = np.arange(3000, dtype=np.uint8).tobytes()
    assert offer(publication, big) > 0 and offer(publication, b"small") > 0
    answers = iter([ABORT, CONTINUE, CONTINUE])
    delivered = []

    def handler(buffer, offset, length, header):
        delivered.append(bytes(buffer[offset : offset + length]))
        return next(answers)

    assembler = ControlledFragmentAssembler(handler)
    assert subscription.controlled_poll(assembler, 10) == 2  # BEGIN and middle consumed, END aborted
    assert delivered == [big]
    await_condition(lambda: subscription.controlled_poll(assembler, 10) > 0 or len(delivered) >= 3, 5, "rest")
    assert delivered == [big, big, b"small"]


# --------------------------------------------------------------------------- reassembly, property based
fragment_streams = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from([0x80, 0x00, 0x40, 0xC0]), st.binary(max_size=40), st.booleans()),
    max_size=60,
)


@SETTINGS
@given(fragment_streams)
def test_fragment_assembler_matches_reference(stream):
    """Synthetic fragments of three interleaved sessions, including orphans and gaps (skip=True)."""
    term_offsets = {0: 0, 1: 0, 2: 0}
    fragments = []
    buffer = np.zeros(64 * 1024, np.uint8)
    headers = []
    at = 0
    for session_id, flags, payload, skip in stream:
        if skip:  # a lost fragment: the session's next one does not start where the last ended
            term_offsets[session_id] += 32
        term_offset = term_offsets[session_id]
        term_offsets[session_id] += ((32 + len(payload) + 31) // 32) * 32
        fragments.append((session_id, term_offset, flags, payload))
        struct.pack_into("<iBBhiiiiq", buffer, at, 32 + len(payload), 0, flags, 1, term_offset, session_id, 1, 0, 0)
        buffer[at + 32 : at + 32 + len(payload)] = np.frombuffer(payload, np.uint8)
        headers.append(at)
        at += ((32 + len(payload) + 31) // 32) * 32
    delivered = []
    assembler = FragmentAssembler(
        lambda buf, offset, length, header: delivered.append((header.session_id, bytes(buf[offset : offset + length])))
    )
    header = Header(0, 16, buffer)
    for (session_id, term_offset, flags, payload), frame_offset in zip(fragments, headers):
        header.offset = frame_offset
        assembler(buffer, frame_offset + 32, len(payload), header)
    assert delivered == ref.reassemble(fragments)


@SETTINGS
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=25), st.integers(1, 20))
def test_offer_poll_round_trip_with_fragmentation(shm_dir, sizes, fragment_limit):
    """Random message sizes (most fragmented at mtu 1408) through a real log, polled with random limits."""
    aeron_dir = Path(tempfile.mkdtemp(dir=shm_dir))
    with FakeDriver(aeron_dir) as driver:
        aeron, errors = connect(driver)
        with aeron:
            subscription = aeron.add_subscription("aeron:ipc", 1)
            publication = aeron.add_publication("aeron:ipc", 1)
            await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
            messages = [bytes([(i + j) % 251 for j in range(size)]) for i, size in enumerate(sizes)]
            collector = Collector()
            assembler = FragmentAssembler(collector)
            for message in messages:
                while (result := offer(publication, message)) == BACK_PRESSURED:
                    subscription.poll(assembler, fragment_limit)
                assert result > 0
            poll_until(subscription, assembler, lambda: len(collector.messages), len(messages), fragment_limit=fragment_limit)
            assert collector.messages == messages
            assert collector.positions[-1] == publication.position == subscription.images[0].position
        assert errors == []
    shutil.rmtree(aeron_dir)


# ------------------------------------------------------------------------------------------- compiled
@numba.njit(FRAGMENT_HANDLER_SIG, cache=True)
def sum_fragments(ctx, buffer, offset, length):
    ctx[0] += 1
    ctx[1] += length
    for i in range(length):
        ctx[2] += buffer[offset + i]


def test_compiled_handler_polls_the_image_directly(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 11)
    publication = aeron.add_publication("aeron:ipc", 11)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    for i in range(10):
        assert offer(publication, bytes([i]) * (i + 1)) > 0
    image = subscription.images[0]
    ctx = np.zeros(3, np.int64)
    fragments = term_reader.image_poll(image.log_buffer, image.position_buffer, image.position_offset, 100, sum_fragments, ctx)
    assert fragments == 10 and ctx[0] == 10 and ctx[1] == 55 and ctx[2] == sum(i * (i + 1) for i in range(10))
    assert image.position == publication.position


# ------------------------------------------------------------------------------------- close / linger
def test_subscription_close_removes_and_closes_images(client, driver):
    aeron, _ = client
    unavailable = []
    subscription = aeron.add_subscription("aeron:ipc", 12, unavailable_image_handler=unavailable.append)
    publication = aeron.add_publication("aeron:ipc", 12)
    await_condition(lambda: subscription.image_count == 1, 5, "image")
    image = subscription.images[0]
    subscription.close()
    remove = driver.wait_for_command(cp.REMOVE_SUBSCRIPTION)[0]
    assert remove.registration_id == subscription.registration_id
    assert subscription.is_closed and subscription.image_count == 0 and image.is_closed
    assert unavailable == [image]
    assert subscription.poll(Collector(), 10) == 0
    subscription.close()
    assert len(driver.commands_of(cp.REMOVE_SUBSCRIPTION)) == 1
    assert not publication.is_closed and aeron.conductor.mapped_log_count == 1


def test_end_of_stream_after_consuming_everything(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 13)
    publication = aeron.add_publication("aeron:ipc", 13)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    end = offer(publication, b"bye")
    image = subscription.images[0]
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), 1)
    publication.close()
    await_condition(lambda: image.is_closed, 5, "image closed")
    assert image.is_end_of_stream and image.position == end == image.end_of_stream_position


def test_log_is_unmapped_after_the_linger(driver):
    aeron, errors = connect(driver, resource_linger_duration_ns=100_000_000, keepalive_interval_ns=20_000_000)
    with aeron:
        publication = aeron.add_publication("aeron:ipc", 14)
        path = publication.log_file_name
        assert mapping_count(path) == 2  # the driver's and the client's
        publication.close()
        assert aeron.conductor.mapped_log_count == 0 and aeron.conductor.lingering_log_count == 1
        assert mapping_count(path) == 2  # still mapped while it lingers
        await_condition(lambda: aeron.conductor.lingering_log_count == 0, 5, "lingering log unmapped")
        assert mapping_count(path) == 1
    assert errors == []


# ---------------------------------------------------------------------------------------------- garbage
def test_garbage_frame_in_the_log_stops_the_poll_without_harm(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 15)
    publication = aeron.add_exclusive_publication("aeron:ipc", 15)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    end = offer(publication, b"good")
    # Another process scribbles a frame length running far past the term where the next frame would go.
    log = driver.publications[publication.registration_id].log_buffers.buffer
    struct.pack_into("<i", log, end, 0x7FFF_FFF0)
    collector = Collector()
    for _ in range(3):
        subscription.poll(collector, 10)
        subscription.controlled_poll(Collector(CONTINUE), 10)
    assert collector.messages == [b"good"] and subscription.images[0].position == end
    struct.pack_into("<i", log, end, -5)  # a negative (in progress) length also stops the read
    assert subscription.poll(collector, 10) == 0 and subscription.images[0].position == end
    del log


def test_malformed_and_foreign_responses_are_reported_or_ignored(client, driver):
    aeron, errors = client
    subscription = aeron.add_subscription("aeron:ipc", 16)
    driver.run_on_driver(lambda: driver.transmitter.transmit(cp.ON_PUBLICATION_READY, b"\x01\x02\x03"))
    driver.run_on_driver(lambda: driver.transmitter.transmit(0x0FFF, b"unknown type"))
    # An image for this subscription whose log file does not exist.
    from aeron_numba.codecs import driver_commands as dc

    missing = dc.ImageBuffersReady(999, 5, 16, subscription.registration_id, 1, str(driver.aeron_dir / "nope.logbuffer"), "x")
    driver.run_on_driver(lambda: driver.transmitter.transmit(cp.ON_AVAILABLE_IMAGE, missing.encode()))
    # An image with an impossible sub-pos counter id.
    publication = aeron.add_publication("aeron:ipc", 99)
    log_file = publication.log_file_name
    bad = dc.ImageBuffersReady(998, 5, 16, subscription.registration_id, 10**6, log_file, "x")
    driver.run_on_driver(lambda: driver.transmitter.transmit(cp.ON_AVAILABLE_IMAGE, bad.encode()))
    await_condition(lambda: len(errors) >= 3, 5, "three errors reported")
    text = " | ".join(str(e) for e in errors)
    assert "bad driver response type 0xf03" in text
    assert "could not map image log" in text and "nope.logbuffer" in text
    assert "subscriber_position_id=1000000 outside" in text
    assert subscription.image_count == 0 and not aeron.is_closed
    assert aeron.conductor.mapped_log_count == 1  # only the publication's
    errors.clear()  # expected ones; the fixture checks nothing else was reported
    assert aeron.add_publication("aeron:ipc", 16).stream_id == 16


@pytest.mark.parametrize("controlled", [False, True])
def test_handlers_read_a_private_copy_the_log_changing_underneath_does_not_reach_them(client, controlled):
    """The process stops inside a handler for longer than the liveness timeout; meanwhile the driver (no
    longer counting this subscriber) cleans the term. The rest of the batch was copied while the subscriber
    still owned it, so the handlers still get the bytes that were published, never the cleaned ones."""
    from aeron_numba.client import CONTINUE

    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 9)
    publication = aeron.add_publication("aeron:ipc", 9)
    await_condition(lambda: subscription.image_count == 1, 5, "image")
    for i in range(3):
        assert offer(publication, bytes([i + 1]) * 40) > 0
    log = subscription.images[0].log_buffer
    seen = []

    def handler(buffer, offset, length, header):
        assert buffer is not log
        seen.append((bytes(buffer[offset : offset + length]), header.session_id))
        if len(seen) == 1:  # what the driver did while we were stopped
            log[0 : 96 * 3] = 0
        return CONTINUE if controlled else None

    poll = subscription.controlled_poll if controlled else subscription.poll
    assert poll(handler, 10) == 3
    assert seen == [(bytes([i + 1]) * 40, publication.session_id) for i in range(3)]
    assert subscription.images[0].position == 96 * 3


@pytest.mark.parametrize("controlled", [False, True])
def test_once_the_driver_freed_our_position_counter_nothing_is_delivered_or_stored(client, driver, controlled):
    """A subscriber the driver dropped (its sub-pos freed, maybe already reused) must not trust a batch it
    copied, nor write its position into a counter that may now belong to someone else."""
    from aeron_numba.layout import counters as counters_layout

    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 9)
    publication = aeron.add_publication("aeron:ipc", 9)
    await_condition(lambda: subscription.image_count == 1, 5, "image")
    assert offer(publication, b"x" * 40) > 0
    image = subscription.images[0]
    state = image.subscriber_position_id * counters_layout.METADATA_LENGTH + counters_layout.METADATA_STATE_OFFSET
    metadata = aeron.conductor.counters_reader.metadata_buffer
    metadata[state : state + 4].view(np.int32)[0] = counters_layout.RECORD_RECLAIMED
    seen = []
    poll = subscription.controlled_poll if controlled else subscription.poll
    assert poll(lambda *args: seen.append(args), 10) == 0
    assert seen == [] and image.position == 0
    metadata[state : state + 4].view(np.int32)[0] = counters_layout.RECORD_ALLOCATED  # let teardown free it


@pytest.mark.parametrize("controlled", [False, True])
def test_image_closed_by_the_conductor_while_a_handler_runs_finishes_the_poll(client, controlled):
    """The conductor thread closes an image (client timeout, unavailable image) while the polling thread is
    inside a handler: the poll completes with what it copied and stores its position through the buffer it
    polled with (this crashed with a numba TypingError on the closed image's None buffer, seen in chaos
    client-paused)."""
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 11)
    publication = aeron.add_publication("aeron:ipc", 11)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    positions = [offer(publication, bytes([i + 1]) * 40) for i in range(3)]
    assert all(position > 0 for position in positions)
    image = subscription.images[0]
    position_buffer, position_offset = image.position_buffer, image.position_offset
    seen = []

    def handler(buffer, offset, length, header):
        seen.append(bytes(buffer[offset : offset + length]))
        if len(seen) == 1:
            image._internal_close()  # what the conductor thread does, under its lock, meanwhile
        return CONTINUE if controlled else None

    poll = image.controlled_poll if controlled else image.poll
    assert poll(handler, 10) == 3
    assert seen == [bytes([i + 1]) * 40 for i in range(3)]
    assert image.is_closed
    assert int(position_buffer[position_offset : position_offset + 8].view(np.int64)[0]) == positions[-1]
    assert poll(handler, 10) == 0


def test_a_batch_larger_than_the_private_copy_grows_it_and_is_delivered_whole(client):
    from aeron_numba.client.image import INITIAL_COPY_LENGTH

    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 12)
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=512k", 12)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    payloads = [bytes([i]) * 1344 for i in range(100)]  # 1376-byte frames: 137,600 bytes in one batch
    positions = [offer(publication, payload) for payload in payloads]
    collector = Collector()
    assert subscription.poll(collector, 100) == 100
    assert collector.messages == payloads and collector.positions == positions
    assert subscription.images[0].position == positions[-1]
    assert subscription.images[0]._scratch.size >= 100 * 1376 > INITIAL_COPY_LENGTH


def test_add_and_remove_destination_send_the_receive_destination_commands_and_wait_for_the_answer(client, driver):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:udp?control-mode=manual", 10)
    subscription.add_destination("aeron:udp?endpoint=127.0.0.1:40100")
    subscription.remove_destination("aeron:udp?endpoint=127.0.0.1:40100")
    (added,) = driver.commands_of(cp.ADD_RCV_DESTINATION)
    (removed,) = driver.commands_of(cp.REMOVE_RCV_DESTINATION)
    for command in (added, removed):
        assert (command.registration_correlation_id, command.channel) == \
            (subscription.registration_id, "aeron:udp?endpoint=127.0.0.1:40100")
    driver.fail_next(cp.ADD_RCV_DESTINATION, cp.INVALID_CHANNEL, "channel does not allow manual control")
    with pytest.raises(RegistrationError, match="channel does not allow manual control") as refused:
        subscription.add_destination("aeron:udp?endpoint=127.0.0.1:40101")
    assert refused.value.error_code_name == "INVALID_CHANNEL"
    subscription.close()
    with pytest.raises(AeronError, match=f"subscription registration_id={subscription.registration_id} is closed"):
        subscription.add_destination("aeron:udp?endpoint=127.0.0.1:40102")


def test_async_add_destination_returns_at_once_and_a_refusal_reaches_the_error_handler(driver):
    aeron, errors = connect(driver)
    try:
        subscription = aeron.add_subscription("aeron:udp?control-mode=manual", 10)
        correlation_id = subscription.async_add_destination("aeron:udp?endpoint=127.0.0.1:40100")
        (added,) = driver.wait_for_command(cp.ADD_RCV_DESTINATION)
        assert added.correlation_id == correlation_id and errors == []
        driver.fail_next(cp.REMOVE_RCV_DESTINATION, cp.UNKNOWN_SUBSCRIPTION, "unknown subscription")
        correlation_id = subscription.async_remove_destination("aeron:udp?endpoint=127.0.0.1:40100")
        await_condition(lambda: errors, 5, "the refusal reported")
        (error,) = errors
        assert isinstance(error, RegistrationError) and error.error_code_name == "UNKNOWN_SUBSCRIPTION"
        assert driver.commands_of(cp.REMOVE_RCV_DESTINATION)[0].correlation_id == correlation_id
    finally:
        aeron.close()


def test_an_idle_watch_on_a_subscription_sees_a_frame_committed_at_each_images_position(client, driver):
    """What an application waiting in compiled code on its subscription (the archive's control requests) is woken by."""
    from aeron_numba.agent.idle_watch import IdleWatch

    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 9)
    publication = aeron.add_publication("aeron:ipc", 9)
    await_condition(lambda: subscription.image_count == 1, 5, "the image")
    kept = IdleWatch()  # named once: the frame it watches follows the image's position
    subscription.add_idle_watch(kept)
    for message in (b"first", b"second"):
        watch = IdleWatch()
        subscription.add_idle_watch(watch)
        watch.snapshot()
        kept.snapshot()
        assert watch.word_count == 2 and not watch.changed() and not kept.changed()  # a position entry's two places
        assert offer(publication, message) > 0
        assert watch.changed() and kept.changed()
        collector = Collector()
        poll_until(subscription, collector, lambda: len(collector.messages), 1)
        assert not kept.changed()  # read: the slot it watches now is the empty one past the message
