"""Publications through the client against a scripted driver: registration, shared logs, offer status codes,
try_claim, message limits, input types and close (spec §4, §11)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from aeron_numba.client import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    CLOSED,
    NOT_CONNECTED,
    BufferClaim,
    ExclusivePublication,
    FragmentAssembler,
    InvalidChannelError,
    MessageTooLongError,
    Publication,
    RegistrationError,
)
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels import term_appender
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as counters_layout
from aeron_numba.layout import frame
from harness.awaiting import await_condition
from tests.unit.client_support import TERM_LENGTH, connect, poll_until


def offer_retrying(publication, data, **kwargs) -> int:
    for _ in range(4):
        result = publication.offer(data, **kwargs)
        if result != ADMIN_ACTION:
            return result
    raise AssertionError("offer kept returning ADMIN_ACTION")


class Collector:
    def __init__(self):
        self.messages: list[bytes] = []
        self.headers: list[dict] = []

    def __call__(self, buffer, offset, length, header):
        self.messages.append(bytes(buffer[offset : offset + length]))
        self.headers.append(
            dict(session_id=header.session_id, stream_id=header.stream_id, reserved_value=header.reserved_value,
                 flags=header.flags, position=header.position, term_offset=header.term_offset)
        )


def connected_pair(aeron, driver, stream_id=10, exclusive=False):
    subscription = aeron.add_subscription("aeron:ipc", stream_id)
    add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
    publication = add("aeron:ipc", stream_id)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    return publication, subscription


# ------------------------------------------------------------------------------------------- register
def test_add_publication_maps_the_drivers_log(client, driver):
    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 42)
    assert isinstance(publication, Publication) and not isinstance(publication, ExclusivePublication)
    command = driver.wait_for_command(cp.ADD_PUBLICATION)[0]
    assert (command.client_id, command.stream_id, command.channel) == (aeron.client_id, 42, "aeron:ipc")
    assert publication.registration_id == command.correlation_id == publication.original_registration_id
    assert publication.stream_id == 42 and publication.channel == "aeron:ipc"
    fake = driver.publications[publication.registration_id]
    assert publication.session_id == fake.session_id
    assert publication.position_limit_counter_id == fake.limit_counter_id
    assert publication.term_buffer_length == TERM_LENGTH
    assert publication.max_message_length == TERM_LENGTH // 8
    assert publication.max_payload_length == frame.DEFAULT_MTU_LENGTH - frame.HEADER_LENGTH
    assert publication.pub_state[1] == fake.limit_counter_id * counters_layout.COUNTER_LENGTH
    assert publication.log_buffer.shape[0] == fake.log_buffers.buffer.shape[0]
    assert publication.position == 0 and publication.position_limit == 0
    assert not publication.is_connected


def test_concurrent_publications_share_one_mapping_exclusive_do_not(client, driver):
    aeron, _ = client
    first = aeron.add_publication("aeron:ipc", 9)
    second = aeron.add_publication("aeron:ipc", 9)
    assert second.registration_id != first.registration_id
    assert second.original_registration_id == first.registration_id
    assert second.session_id == first.session_id
    assert aeron.conductor.mapped_log_count == 1
    exclusive = aeron.add_exclusive_publication("aeron:ipc", 9)
    assert isinstance(exclusive, ExclusivePublication)
    assert exclusive.session_id != first.session_id
    assert aeron.conductor.mapped_log_count == 2
    # Closing one sharer keeps the mapping for the other; closing both releases it.
    first.close()
    assert aeron.conductor.mapped_log_count == 2
    second.close()
    assert aeron.conductor.mapped_log_count == 1
    removes = driver.wait_for_command(cp.REMOVE_PUBLICATION, 2)
    assert [m.registration_id for m in removes] == [first.registration_id, second.registration_id]


def test_driver_error_becomes_registration_error_with_code(client, driver):
    aeron, _ = client
    with pytest.raises(RegistrationError) as info:
        aeron.add_publication("aeron:udp?endpoint=localhost:40123", 1)
    assert info.value.error_code == cp.INVALID_CHANNEL
    assert "INVALID_CHANNEL" in str(info.value) and "only IPC" in str(info.value)
    driver.fail_next(cp.ADD_EXCLUSIVE_PUBLICATION, cp.STORAGE_SPACE, "disk full")
    with pytest.raises(RegistrationError, match=r"STORAGE_SPACE \(error_code=12\): disk full") as info:
        aeron.add_exclusive_publication("aeron:ipc", 1)
    assert info.value.error_code == cp.STORAGE_SPACE
    assert aeron.add_exclusive_publication("aeron:ipc", 1).stream_id == 1


def test_invalid_channel_is_rejected_before_sending(client, driver):
    aeron, _ = client
    for channel in ("aeron:tcp", "ipc", "aeron:ipc?term-length", 42):
        with pytest.raises(InvalidChannelError):
            aeron.add_publication(channel, 1)
    with pytest.raises(ConfigurationError, match="stream_id=4294967296 outside int32"):
        aeron.add_publication("aeron:ipc", 2**32)
    with pytest.raises(InvalidChannelError, match="must be ASCII"):
        aeron.add_publication("aeron:ipc?alias=caf\u00e9", 1)
    with pytest.raises(ConfigurationError, match="key=5 must be bytes-like"):
        aeron.add_counter(1, 5, "x")
    assert driver.commands_of(cp.ADD_PUBLICATION) == []


# ---------------------------------------------------------------------------------------- offer codes
def test_not_connected_then_back_pressured(client, driver):
    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 20)
    assert publication.offer(b"nobody listens") == NOT_CONNECTED
    subscription = aeron.add_subscription("aeron:ipc", 20)
    await_condition(lambda: publication.is_connected and publication.position_limit == TERM_LENGTH // 2, 5, "limit")
    assert publication.available_window == TERM_LENGTH // 2
    message = bytes(1000)
    positions = []
    while True:
        result = offer_retrying(publication, message)
        if result < 0:
            break
        positions.append(result)
    assert result == BACK_PRESSURED
    assert positions[0] == 1056 and all(b - a == 1056 for a, b in zip(positions, positions[1:]))
    assert positions[-1] >= TERM_LENGTH // 2 and publication.position == positions[-1]
    # Consuming moves sub-pos; the driver raises the limit; offers succeed again.
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), len(positions))
    await_condition(lambda: publication.offer(message) > 0, 5, "limit raised")


def test_offer_accepts_bytes_like_and_arrays_with_offset_length_and_reserved_value(client, driver):
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver)
    payload = bytes(range(256)) * 4
    inputs = [
        (payload, {}),
        (bytearray(payload), {"offset": 10, "length": 20}),
        (memoryview(payload)[5:105], {}),
        (np.frombuffer(payload, np.uint8), {"offset": 1000}),
        (np.arange(8, dtype=np.int64), {"reserved_value": -77}),  # any C-contiguous dtype: its bytes
        (np.arange(40, dtype=np.uint8)[::2], {}),  # not contiguous: copied
        (b"", {}),
        (np.frombuffer(payload, np.uint8), {"reserved_value": 5}),  # uint8 arrays: the fast paths
        (np.frombuffer(payload, np.uint8), {"offset": np.int64(3), "length": np.int32(4)}),
        (np.frombuffer(payload, np.uint8)[:16], {"offset": 2, "length": 6}),
        (np.arange(16, dtype=np.int8), {}),  # 1-byte items: the fast path sends them as they are
        (np.arange(6, dtype=np.int16), {"offset": 2, "length": 6}),  # its bytes, through the checked path
        (np.arange(40, dtype=np.uint8)[::2], {"offset": 3, "length": 5}),  # refused by the fast kernel: copied
        (np.arange(12, dtype=np.uint8).reshape(3, 4), {}),  # 2-D: its bytes in C order
    ]
    expected = [
        payload, payload[10:30], payload[5:105], payload[1000:], np.arange(8, dtype=np.int64).tobytes(),
        bytes(range(0, 40, 2)), b"", payload, payload[3:7], payload[2:8], bytes(range(16)),
        np.arange(6, dtype=np.int16).tobytes()[2:8], bytes(range(0, 40, 2))[3:8], bytes(range(12)),
    ]
    for data, kwargs in inputs:
        assert offer_retrying(publication, data, **kwargs) > 0
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), len(expected))
    assert collector.messages == expected
    assert [h["reserved_value"] for h in collector.headers] == [0, 0, 0, 0, -77, 0, 0, 5, 0, 0, 0, 0, 0, 0]
    assert {h["session_id"] for h in collector.headers} == {publication.session_id}
    with pytest.raises(ConfigurationError, match="offset=5 length=10 outside the message of length=8"):
        publication.offer(b"12345678", 5, 10)
    with pytest.raises(ConfigurationError, match="offset=-1 length=4 outside the message of length=8"):
        publication.offer(np.zeros(8, np.uint8), -1, 4)
    with pytest.raises(ConfigurationError, match="offset=6 length=4 outside the message of length=8"):
        publication.offer(np.zeros(8, np.uint8), 6, 4)
    with pytest.raises(ConfigurationError, match=f"offset={1 << 70} length=1 outside the message of length=8"):
        publication.offer(np.zeros(8, np.uint8), 1 << 70, 1)  # beyond int64: the checked path names it
    with pytest.raises(ConfigurationError, match="not bytes-like"):
        publication.offer("text")


@pytest.mark.parametrize("exclusive", [False, True])
def test_offer_of_bytes_bytearray_and_memoryview_takes_the_fast_path_and_delivers_their_bytes(client, driver,
                                                                                             exclusive):
    """bytes, bytearray and 1-D memoryviews of contiguous bytes go straight to the kernels (no numpy conversion in
    Python: the checked path is not entered); a non-contiguous, multi-dimensional or wider-item memoryview goes
    through the checked path, which sends its bytes (copied once when not contiguous)."""
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver, exclusive=exclusive)
    checked = []
    take_checked = publication._offer_checked
    publication._offer_checked = lambda *args: checked.append(type(args[1]).__name__) or take_checked(*args)
    payload = bytes(range(256)) * 8  # 2048 bytes: fragmented at the test log's MTU
    writable = bytearray(payload)
    fast = [
        (payload, {}),
        (payload, {"offset": 7, "length": 25}),
        (writable, {}),
        (writable, {"offset": 0, "length": 0}),
        (memoryview(payload), {}),  # read-only
        (memoryview(writable)[100:1300], {}),  # writable, sliced
        (memoryview(writable)[3:], {"offset": 2, "length": 40}),
        (memoryview(payload).cast("b"), {"offset": 9, "length": 3}),  # 1-byte signed items: sent as they are
        (b"", {}),
    ]
    copied = [
        (memoryview(payload)[::3], {}),  # not contiguous: copied once
        (memoryview(payload)[::-1], {"offset": 1, "length": 4}),
        (memoryview(payload).cast("B", (32, 64)), {}),  # 2-D: its bytes in C order
        (memoryview(np.arange(4, dtype=np.int32)), {}),  # 4-byte items: their bytes
    ]
    expected = [payload, payload[7:32], payload, b"", payload, payload[100:1300], payload[5:45], payload[9:12], b"",
                payload[::3], payload[::-1][1:5], payload, np.arange(4, dtype=np.int32).tobytes()]
    for data, kwargs in fast:
        assert offer_retrying(publication, data, **kwargs) > 0
    assert checked == []
    for data, kwargs in copied:
        assert offer_retrying(publication, data, **kwargs) > 0
    assert checked == ["memoryview"] * len(copied)
    collector = FragmentAssembler(Collector())
    poll_until(subscription, collector, lambda: len(collector.delegate.messages), len(expected))
    assert collector.delegate.messages == expected


def test_a_handler_echoing_its_fragment_as_a_view_or_a_range_takes_the_fast_path(client, driver):
    """What a fragment handler receives (an array, an offset and a length) offered back as it is, or as a slice of
    it, goes straight to the kernels and carries the fragment's bytes."""
    aeron, _ = client
    inbound, inbound_subscription = connected_pair(aeron, driver, stream_id=21)
    outbound, outbound_subscription = connected_pair(aeron, driver, stream_id=22)
    checked = []
    take_checked = outbound._offer_checked
    outbound._offer_checked = lambda *args: checked.append(args) or take_checked(*args)
    messages = [bytes([i]) * (10 + i) for i in range(6)]
    for message in messages:
        assert offer_retrying(inbound, message) > 0
    echoed = []

    def echo(buffer, offset, length, header):
        if len(echoed) % 2:
            echoed.append(outbound.offer(buffer[offset : offset + length]))
        else:
            echoed.append(outbound.offer(buffer, offset, length))

    poll_until(inbound_subscription, echo, lambda: len(echoed), len(messages))
    assert all(position > 0 for position in echoed) and checked == []
    collector = Collector()
    poll_until(outbound_subscription, collector, lambda: len(collector.messages), len(messages))
    assert collector.messages == messages


@pytest.mark.parametrize("data", [b"12345678", bytearray(8), memoryview(bytes(8)), memoryview(bytearray(16))[4:12]],
                         ids=["bytes", "bytearray", "memoryview", "sliced-memoryview"])
def test_offer_of_bytes_like_refuses_bad_ranges_and_lengths_with_the_array_errors(client, driver, data):
    aeron, _ = client
    publication, _ = connected_pair(aeron, driver)
    for offset, length in [(5, 10), (-1, 4), (6, 4), (0, -1), (1 << 70, 1)]:
        text = f"offset={offset} length={length} outside the message of length=8"
        with pytest.raises(ConfigurationError, match=text):
            publication.offer(data, offset, length)
    limit = publication.max_message_length
    too_long = type(data)(bytes(limit + 2)) if not isinstance(data, memoryview) else memoryview(bytes(limit + 2))
    with pytest.raises(MessageTooLongError, match=f"length={limit + 2} > max_message_length={limit}"):
        publication.offer(too_long)
    with pytest.raises(MessageTooLongError, match=f"length={limit + 1} > max_message_length={limit}"):
        publication.offer(too_long, 1, limit + 1)
    released = memoryview(bytes(8))
    released.release()
    with pytest.raises(ValueError, match="released memoryview"):
        publication.offer(released)
    publication.close()
    assert publication.offer(data) == CLOSED


def test_offer_reads_a_reused_array_at_each_call(client, driver):
    """offer(array) keeps its last argument tuple for the next call with the same array: what it sends is the
    array's content at each call, whichever arrays come in between."""
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver)
    first, second = np.zeros(16, np.uint8), np.full(16, 200, np.uint8)
    sent = []
    for value, array in [(1, first), (2, first), (3, second), (4, first), (5, second)]:
        array[0] = value
        assert offer_retrying(publication, array) > 0
        sent.append(array.tobytes())
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), len(sent))
    assert collector.messages == sent
    publication.close()
    assert publication.offer(first) == CLOSED


def test_message_too_long_names_length_and_limit(client, driver):
    aeron, _ = client
    publication, _ = connected_pair(aeron, driver)
    limit = publication.max_message_length
    with pytest.raises(MessageTooLongError, match=f"length={limit + 1} > max_message_length={limit}"):
        publication.offer(bytes(limit + 1))
    too_long = np.zeros(limit + 2, np.uint8)
    with pytest.raises(MessageTooLongError, match=f"length={limit + 2} > max_message_length={limit}"):
        publication.offer(too_long)  # the whole-array fast path
    with pytest.raises(MessageTooLongError, match=f"length={limit + 1} > max_message_length={limit}"):
        publication.offer(too_long, 1, limit + 1)
    assert isinstance(MessageTooLongError("x"), ValueError)
    assert offer_retrying(publication, bytes(limit)) > 0


@pytest.mark.parametrize("exclusive", [False, True])
def test_fragmented_offer_round_trip(client, driver, exclusive):
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver, exclusive=exclusive)
    max_payload = publication.max_payload_length
    sizes = [0, 1, max_payload, max_payload + 1, 3 * max_payload + 17, publication.max_message_length]
    rng = np.random.default_rng(7)
    messages = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in sizes] * 3
    collector = Collector()
    assembler = FragmentAssembler(collector)
    for message in messages:
        result = offer_retrying(publication, message)
        while result == BACK_PRESSURED:
            subscription.poll(assembler, 100)
            result = offer_retrying(publication, message)
        assert result > 0
        assert publication.position == result
    poll_until(subscription, assembler, lambda: len(collector.messages), len(messages), fragment_limit=64)
    assert collector.messages == messages
    assert all(h["flags"] == frame.UNFRAGMENTED for h in collector.headers)


# ------------------------------------------------------------------------------------------ try_claim
@pytest.mark.parametrize("exclusive", [False, True])
def test_try_claim_commit_and_abort(client, driver, exclusive):
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver, exclusive=exclusive)
    claim = publication.try_claim(100)
    assert isinstance(claim, BufferClaim) and claim.length == 100 and claim.position == 160
    claim.put_bytes(b"A" * 100)
    claim.reserved_value = 123456789
    # Not visible before commit.
    collector = Collector()
    assert subscription.poll(collector, 10) == 0
    claim.commit()
    with pytest.raises(AeronError, match="not open"):
        claim.commit()
    reused = publication.try_claim(8, claim)
    assert reused is claim and claim.position == 160 + 64
    claim.payload[:] = 7
    claim.abort()
    third = publication.try_claim(0)
    third.commit()
    poll_until(subscription, collector, lambda: len(collector.messages), 2)
    assert collector.messages == [b"A" * 100, b""]
    assert collector.headers[0]["reserved_value"] == 123456789
    assert subscription.images[0].position == 160 + 64 + 32
    with pytest.raises(MessageTooLongError, match=f"length=1377 > max_payload_length={publication.max_payload_length}"):
        publication.try_claim(publication.max_payload_length + 1)


def test_put_bytes_takes_what_offer_takes_and_names_a_bad_type(client, driver):
    """A claim's put_bytes reads bytes, bytearray, memoryview (non-contiguous ones copied) and arrays of any item
    size as their bytes, as offer does; a str is refused by type."""
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver)
    payload = bytes(range(64))
    claim = publication.try_claim(64)
    claim.put_bytes(payload[:8]).put_bytes(bytearray(payload[8:16]), 8).put_bytes(memoryview(payload)[16:24], 16)
    claim.put_bytes(memoryview(payload)[::2][12:16], 24)  # not contiguous
    claim.put_bytes(np.frombuffer(payload[28:36], np.uint8), 28)
    claim.put_bytes(np.frombuffer(payload[36:64], np.int32), 36)  # 4-byte items: their bytes
    with pytest.raises(ConfigurationError, match="message of type str is not bytes-like"):
        claim.put_bytes("text")
    with pytest.raises(ConfigurationError, match="index=60 \\+ length=8 > claimed length=64"):
        claim.put_bytes(payload[:8], 60)
    claim.commit()
    collector = Collector()
    poll_until(subscription, collector, lambda: len(collector.messages), 1)
    assert collector.messages == [payload[:24] + payload[::2][12:16] + payload[28:]]


def test_try_claim_back_pressure_and_not_connected(client, driver):
    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 33)
    assert publication.try_claim(10) == NOT_CONNECTED
    subscription = aeron.add_subscription("aeron:ipc", 33)
    await_condition(lambda: publication.position_limit > 0, 5, "limit")
    claim = BufferClaim()
    while True:
        result = publication.try_claim(1000, claim)
        if result == ADMIN_ACTION:
            continue
        if not isinstance(result, BufferClaim):
            break
        result.commit()
    assert result == BACK_PRESSURED
    # The image reaches the subscription on the client conductor's duty cycle, not necessarily before the
    # publication limit moved: wait for it rather than race it.
    await_condition(lambda: subscription.image_count == 1, 5, "the subscription's image")


# ---------------------------------------------------------------------------------------------- close
@pytest.mark.parametrize("exclusive", [False, True])
def test_close_sends_remove_and_offers_return_closed(client, driver, exclusive):
    aeron, _ = client
    publication, subscription = connected_pair(aeron, driver, exclusive=exclusive)
    log, pub_state, limit_buffer = publication.log_buffer, publication.pub_state, publication.limit_buffer
    publication.close()
    remove = driver.wait_for_command(cp.REMOVE_PUBLICATION)[0]
    assert remove.registration_id == publication.registration_id and remove.client_id == aeron.client_id
    assert publication.is_closed
    assert publication.offer(b"late") == CLOSED
    assert publication.try_claim(4) == CLOSED
    assert publication.position == CLOSED and publication.position_limit == CLOSED
    assert not publication.is_connected
    # A compiled caller holding the arrays gets CLOSED from the kernel too.
    offer = term_appender.exclusive_offer if exclusive else term_appender.concurrent_offer
    assert offer(log, pub_state, limit_buffer, np.zeros(4, np.uint8), 0, 4, 0) == CLOSED
    publication.close()  # idempotent
    assert len(driver.commands_of(cp.REMOVE_PUBLICATION)) == 1
    del log, limit_buffer


def test_publication_as_context_manager(client, driver):
    aeron, _ = client
    with aeron.add_publication("aeron:ipc", 44) as publication:
        assert not publication.is_closed
    assert publication.is_closed
    driver.wait_for_command(cp.REMOVE_PUBLICATION)


def test_client_close_closes_publications_without_remove_commands(driver):
    aeron, errors = connect(driver)
    publication = aeron.add_publication("aeron:ipc", 45)
    aeron.close()
    assert publication.is_closed and publication.offer(b"x") == CLOSED
    driver.wait_for_command(cp.CLIENT_CLOSE)
    assert driver.commands_of(cp.REMOVE_PUBLICATION) == []
    assert errors == []


def test_counter_add_use_and_remove(client, driver):
    aeron, _ = client
    counter = aeron.add_counter(1001, b"\x01\x02", "my counter")
    command = driver.wait_for_command(cp.ADD_COUNTER)[0]
    assert (command.type_id, command.key, command.label) == (1001, b"\x01\x02", "my counter")
    assert counter.registration_id == command.correlation_id
    assert aeron.counters_reader.get_counter_label(counter.id) == "my counter" == counter.label
    counter.set(41)
    assert counter.increment() == 41 and counter.get() == 42
    assert driver.counter_value(counter.id) == 42
    assert counter.get_and_add(8) == 42 and counter.compare_and_set(50, 7) and counter.get_weak() == 7
    counter.close()
    assert counter.is_closed
    assert driver.wait_for_command(cp.REMOVE_COUNTER)[0].registration_id == counter.registration_id
    with pytest.raises(AeronError, match="closed"):
        counter.get()
    with pytest.raises(ConfigurationError, match="key length=113 > MAX_KEY_LENGTH=112"):
        aeron.add_counter(1, bytes(113), "x")
    with pytest.raises(ConfigurationError, match="label length=381 > MAX_LABEL_LENGTH=380"):
        aeron.add_counter(1, b"", "x" * 381)


def test_unavailable_counter_from_driver_closes_it(client, driver):
    aeron, _ = client
    counter = aeron.add_counter(1002, b"", "shared")
    driver.run_on_driver(lambda: driver._on_remove_counter(cp.REMOVE_COUNTER, type("M", (), {
        "registration_id": counter.registration_id, "correlation_id": 0})()))
    await_condition(lambda: counter.is_closed, 5, "counter closed by ON_UNAVAILABLE_COUNTER")


# ------------------------------------------------------------------------------------ blocks (replays)
def _blocks(image, limit):
    blocks = []

    def on_block(buffer, offset, length, session_id, term_id):
        blocks.append((bytes(buffer[offset:offset + length]), session_id, term_id))

    while image.block_poll(on_block, limit):
        pass
    return blocks


def _reframe(block: bytes, session_id: int, stream_id: int, term_id: int) -> bytearray:
    """What a replayer does to a recorded block: the replay publication's ids in every frame."""
    out, offset = bytearray(block), 0
    while offset < len(out):
        length = struct.unpack_from("<i", out, offset)[0]
        struct.pack_into("<ii", out, offset + 12, session_id, stream_id)
        struct.pack_into("<i", out, offset + 20, term_id)
        offset += (length + 31) & ~31
    return out


def test_block_poll_hands_over_whole_frames_and_offer_block_appends_them_to_another_publication(client, driver):
    aeron, _ = client
    source_sub = aeron.add_subscription("aeron:ipc", 30)
    source = aeron.add_exclusive_publication("aeron:ipc", 30)
    replay_sub = aeron.add_subscription("aeron:ipc", 31)
    replay = aeron.add_exclusive_publication("aeron:ipc", 31)
    await_condition(lambda: source_sub.image_count == 1 and replay_sub.image_count == 1 and replay.position_limit > 0
               and source.position_limit > 0, 5, "both connected")
    payloads = [bytes([i]) * (10 + 37 * i) for i in range(20)]
    for payload in payloads:
        assert offer_retrying(source, payload) > 0
    image = source_sub.images[0]
    blocks = _blocks(image, 1024)
    assert all(len(b) <= 1024 and len(b) % 32 == 0 for b, _, _ in blocks) and len(blocks) > 1
    assert {(s, t) for _, s, t in blocks} == {(source.session_id, source.term_id)}
    assert sum(len(b) for b, _, _ in blocks) == source.position == image.position
    for block, _, _ in blocks:
        framed = _reframe(block, replay.session_id, replay.stream_id, replay.term_id)
        assert replay.offer_block(framed) == replay.position
    got = []
    poll_until(replay_sub, lambda buffer, offset, length, header: got.append(bytes(buffer[offset:offset + length])),
               lambda: len(got), len(payloads))
    assert got == payloads


@pytest.mark.parametrize("field_offset, value, text", [
    (6, 0, "first frame frame type=0, expected 1"),
    (8, 64, "first frame term offset=64, expected 0"),
    (12, 12345, "first frame session id=12345, expected"),
    (16, 99, "first frame stream id=99, expected 32"),
    (20, 7, "first frame term id=7, expected"),
])
def test_offer_block_refuses_a_block_not_framed_for_this_publication_naming_the_field(client, field_offset, value,
                                                                                         text):
    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 32)
    publication = aeron.add_exclusive_publication("aeron:ipc", 32)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    block = bytearray(64)
    struct.pack_into("<iBBHiiiiq", block, 0, 40, 0, 0xC0, 1, 0, publication.session_id, 32, publication.term_id, 0)
    bad = bytearray(block)
    struct.pack_into("<H" if field_offset == 6 else "<i", bad, field_offset, value)
    with pytest.raises(ConfigurationError, match=text):
        publication.offer_block(bad)
    with pytest.raises(ConfigurationError, match="block length=48 at offset=0 must be a positive multiple of 32"):
        publication.offer_block(block, 0, 48)
    assert publication.position == 0
    assert publication.offer_block(block) == 64
    assert publication.append_padding(100) == 64 + 160  # 132-byte frame, aligned to 160


def test_an_idle_watch_on_a_publication_sees_it_connect(client, driver):
    """What a waiting archive control session is woken by when its response stream connects or goes."""
    from aeron_numba.agent.idle_watch import IdleWatch

    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 13)
    watch = IdleWatch()
    publication.add_idle_watch(watch)
    watch.snapshot()
    assert not publication.is_connected and not watch.changed()
    aeron.add_subscription("aeron:ipc", 13)
    await_condition(lambda: publication.is_connected, 5, "a subscriber connects")
    assert watch.changed()


def test_compiled_handles_are_refused_with_the_jit_off(client, monkeypatch):
    """Under NUMBA_DISABLE_JIT a handle would have its fields but none of its methods (they are Numba overloads):
    ``compiled()`` says so instead of handing out a handle that fails with an AttributeError inside user code."""
    import numba

    from aeron_numba.client.handles import new_image_handle, new_image_state

    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 10)
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    with pytest.raises(AeronError, match="compiled handles need Numba's JIT, and NUMBA_DISABLE_JIT=1 is set"):
        publication.compiled()
    with pytest.raises(AeronError, match="NUMBA_DISABLE_JIT=1"):
        new_image_handle(np.zeros(64, np.uint8), np.zeros(8, np.int64), 0, new_image_state(), 1, 10)
