"""Recording and replay sessions against a real media driver process (spec/archive.md §4, §6.3): a stream is
recorded into segment files through ``Image.block_poll``, then replayed through a positioned exclusive
publication; payloads, flags, reserved values and positions come back as recorded. The sessions are driven by
the test here; the archive conductor will drive them the same way."""

from __future__ import annotations

import dataclasses
import random
import time

import numpy as np
import pytest

from aeron_numba.archive.archive_counters import rec_pos_key, rec_pos_label
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.recording_session import RecordingSession, RecordingState
from aeron_numba.archive.replay_session import ReplaySession, ReplayState, replay_position_error
from aeron_numba.archive.segment_files import RecordingWriter, segment_files
from aeron_numba.client import Aeron, Context, FragmentAssembler
from aeron_numba.layout import archive as A
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED
from harness.awaiting import await_condition
from tests.integration.driver_processes import start_driver

TERM = 64 * 1024
SEGMENT = 2 * TERM
RECORDED_STREAM, REPLAY_STREAM = 100, 200


@pytest.fixture
def aeron(process_manager, aeron_dir):
    _, cnc = start_driver(process_manager, aeron_dir)
    cnc.close()
    client = Aeron.connect(Context(aeron_dir=str(aeron_dir), driver_timeout_ms=5000))
    yield client
    client.close()


class Collected:
    """Whole messages (via a FragmentAssembler) with the header fields a replay must preserve."""

    def __init__(self):
        self.messages: list[tuple[bytes, int, int]] = []  # payload, reserved value, position after it
        self.assembler = FragmentAssembler(self._on_message)

    def _on_message(self, buffer, offset, length, header):
        self.messages.append((bytes(buffer[offset:offset + length]), header.reserved_value, header.position))


def record_stream(aeron, archive_dir, catalog, count, rng):
    subscription = aeron.add_subscription("aeron:ipc", RECORDED_STREAM)
    publication = aeron.add_exclusive_publication(f"aeron:ipc?term-length={TERM // 1024}k", RECORDED_STREAM)
    await_condition(lambda: subscription.image_count == 1 and publication.is_connected, 10, "recording subscription")
    image = subscription.images[0]
    recording_id = catalog.add_recording(
        start_position=image.join_position, start_timestamp=int(time.time() * 1000),
        initial_term_id=image.initial_term_id, segment_file_length=SEGMENT, term_buffer_length=TERM,
        mtu_length=image.mtu_length, session_id=image.session_id, stream_id=RECORDED_STREAM,
        stripped_channel="aeron:ipc", original_channel=publication.channel, source_identity=image.source_identity)
    counter = aeron.add_counter(A.RECORDING_POSITION_TYPE_ID,
                                rec_pos_key(recording_id, image.session_id, image.source_identity, 0),
                                rec_pos_label(recording_id, image.session_id, RECORDED_STREAM, "aeron:ipc", 0))
    writer = RecordingWriter(archive_dir, recording_id, image.join_position, image.join_position, TERM, SEGMENT)
    session = RecordingSession(catalog=catalog, recording_id=recording_id, image=image, writer=writer,
                               position_counter=counter, file_io_max_length=16 * 1024)
    sent = []  # payload, reserved value, position after it
    for i in range(count):
        payload = rng.randbytes(rng.choice([rng.randint(0, 200), rng.randint(0, 5000)]))
        reserved = rng.randint(-2**63, 2**63 - 1)
        while True:
            result = publication.offer(payload, reserved_value=reserved)
            if result > 0:
                break
            assert result in (BACK_PRESSURED, ADMIN_ACTION), result
            session.do_work()
        sent.append((payload, reserved, result))
        if i % 8 == 0:
            session.do_work()
    end = publication.position
    publication.close()
    await_condition(lambda: session.state is RecordingState.STOPPED, 10, "recording to stop at the end of stream",
                    work=session.do_work)
    assert session.position == end and counter.get() == end
    session.close()
    subscription.close()
    return recording_id, sent, end


def replay(aeron, archive_dir, catalog, recording_id, position, length, replay_id=1):
    descriptor = catalog.descriptor(recording_id)
    start = descriptor.start_position if position == A.NULL_POSITION else position
    term_id = descriptor.initial_term_id + (start // TERM)
    channel = (f"aeron:ipc?term-length={TERM // 1024}k|init-term-id={descriptor.initial_term_id}|term-id={term_id}"
               f"|term-offset={start % TERM}")
    subscription = aeron.add_subscription("aeron:ipc", REPLAY_STREAM)
    publication = aeron.add_exclusive_publication(channel, REPLAY_STREAM)
    session = ReplaySession(
        replay_session_id=(replay_id << 32) | (publication.session_id & 0xFFFFFFFF), descriptor=descriptor,
        publication=publication, archive_dir=archive_dir, position=position, length=length,
        replay_buffer=np.zeros(64 * 1024, np.uint8), stop_position=lambda: catalog.stop_position(recording_id),
        recorded_position=lambda: catalog.stop_position(recording_id))
    collected = Collected()

    def work():
        return session.do_work() + subscription.poll(collected.assembler, 64)

    await_condition(lambda: session.state in (ReplayState.DONE, ReplayState.INACTIVE), 30, "replay to finish",
                    work=work)
    assert session.state is ReplayState.DONE, session.error
    end = descriptor.stop_position if length == A.NULL_LENGTH else start + length
    await_condition(lambda: subscription.images and subscription.images[0].position >= end, 10, "replay consumed",
                    work=work)
    session.close()
    subscription.close()
    return collected.messages


def test_a_recorded_stream_replays_whole_and_from_the_middle_with_recorded_positions(aeron, tmp_path):
    rng = random.Random(7)
    with Catalog.open(tmp_path) as catalog:
        recording_id, sent, end = record_stream(aeron, tmp_path, catalog, 1500, rng)
        descriptor = catalog.descriptor(recording_id)
        assert (descriptor.start_position, descriptor.stop_position) == (0, end)
        assert [base for base, _ in segment_files(tmp_path, recording_id)] == list(range(0, end, SEGMENT))
        assert replay(aeron, tmp_path, catalog, recording_id, A.NULL_POSITION, A.NULL_LENGTH) == sent
        middle = len(sent) // 2
        start = sent[middle - 1][2]  # the position a message begins at
        length = sent[middle + 100][2] - start
        assert replay(aeron, tmp_path, catalog, recording_id, start, length, replay_id=2) == \
            sent[middle:middle + 101]


def test_replay_requests_outside_the_recording_are_refused_with_the_reason(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        catalog.add_recording(start_position=4096, start_timestamp=0, initial_term_id=0, segment_file_length=SEGMENT,
                              term_buffer_length=TERM, mtu_length=1408, session_id=1, stream_id=1,
                              stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc",
                              stop_position=8192)
        descriptor = catalog.descriptor(0)
    assert replay_position_error(descriptor, 4100, -1) == \
        "requested replay start position=4100 must be a multiple of 32"
    assert replay_position_error(descriptor, 2048, -1) == \
        "requested replay start position=2048 is less than recording start position=4096"
    assert replay_position_error(descriptor, 8192, -1) == \
        "requested replay start position=8192 must be less than the stop position=8192"
    assert replay_position_error(descriptor, 4096, -5) == \
        "requested replay length=-5 must be -1 (to the end) or >= 0"
    assert replay_position_error(descriptor, -1, -1) is None and replay_position_error(descriptor, 8160, 32) is None
    active = dataclasses.replace(descriptor, stop_position=-1)  # still recording, written up to 8192 so far
    assert replay_position_error(active, 8224, -1, recorded_position=8192) == \
        "requested replay start position=8224 must be less than the highest recorded position=8192"
    assert replay_position_error(active, 8192, -1, recorded_position=8192) is None  # waits at the live end
