"""Compiled handles (``client/handles.py``): ``@njit`` code offers, claims and polls through
``publication.compiled()`` and ``image.compiled()`` against a scripted driver; the exact bytes arrive, Aeron's
status codes come back, and a closed publication or image is refused without touching its log."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

from aeron_numba.client import ADMIN_ACTION, BACK_PRESSURED, CLOSED, NOT_CONNECTED
from aeron_numba.client.handles import image_handle_type, new_buffer_claim, publication_handle_type
from aeron_numba.errors import AeronError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.handlers import FRAGMENT_HANDLER_SIG, FragmentHandler
from aeron_numba.layout.publication_status import ERROR
from harness.awaiting import await_condition
from tests.unit.client_support import connect

# The methods are Numba overloads; without the JIT compiled() refuses (test_client_publication).
pytestmark = pytest.mark.requires_jit

# ctx slots of the collecting handler: fragments, bytes copied so far; the bytes follow from COLLECT_DATA.
COLLECT_FRAGMENTS = 0
COLLECT_BYTES = 1
COLLECT_DATA = 2


@numba.njit(FRAGMENT_HANDLER_SIG, cache=True)
def collect(ctx, buffer, offset, length):
    """Appends each fragment's payload bytes (one int64 slot per byte) after its length."""
    at = COLLECT_DATA + ctx[COLLECT_BYTES]
    ctx[at] = length
    for i in range(length):
        ctx[at + 1 + i] = buffer[offset + i]
    ctx[COLLECT_BYTES] += length + 1
    ctx[COLLECT_FRAGMENTS] += 1


def collected(ctx: np.ndarray) -> list[bytes]:
    messages, at = [], COLLECT_DATA
    for _ in range(ctx[COLLECT_FRAGMENTS]):
        length = int(ctx[at])
        messages.append(bytes(ctx[at + 1:at + 1 + length].astype(np.uint8)))
        at += length + 1
    return messages


# Some callers are compiled as jit.kernel compiles (no reference counting, how hot loops should be), the others
# with Numba's defaults: the handles work under both.
@kernel(numba.int64(publication_handle_type, numba.uint8[::1], numba.int64, numba.int64))
def offer_retrying(publication, buffer, offset, length):
    """``offer`` until it is not ADMIN_ACTION (a term rotation)."""
    while True:
        result = publication.offer(buffer, offset, length)
        if result != ADMIN_ACTION:
            return result


@numba.njit(cache=True)
def offer_whole(publication, buffer):
    return publication.offer(buffer)


@numba.njit(cache=True)
def claim_write_commit(publication, payload):
    """``try_claim`` the payload's length in the handle's own claim, write it in place, commit; returns the
    position/status."""
    while True:
        result = publication.try_claim(payload.shape[0])
        if result != ADMIN_ACTION:
            break
    claim = publication.claim
    if result > 0:
        if not claim.is_open or claim.length != payload.shape[0]:
            return -1000  # (no assert here: pytest rewrites asserts into Python calls Numba cannot compile)
        for i in range(payload.shape[0]):
            claim.buffer[claim.offset + i] = payload[i]
        if not claim.commit() or claim.is_open or claim.commit():
            return -1001  # a claim commits once
    return result


@numba.njit(cache=True)
def claim_abort(publication, claim, length):
    """``try_claim(length, claim)`` (Aeron's shape), then abort: readers skip the frame."""
    while True:
        result = publication.try_claim(length, claim)
        if result != ADMIN_ACTION:
            break
    if result > 0:
        claim.abort()
    return result


@kernel(numba.int64(image_handle_type, FragmentHandler, numba.int64[::1], numba.int64))
def poll(image, handler, ctx, fragment_limit):
    return image.poll(handler, ctx, fragment_limit)


@numba.njit(cache=True)
def poll_collect(image, ctx, fragment_limit):
    """A handler named directly in compiled code (a dispatcher, not a passed function pointer)."""
    return image.poll(collect, ctx, fragment_limit)


@numba.njit(cache=True)
def handle_position(handle):
    return handle.position()


@numba.njit(cache=True)
def handle_is_closed(handle):
    return handle.is_closed()


def connected_pair(aeron, stream_id, exclusive=False):
    subscription = aeron.add_subscription("aeron:ipc", stream_id)
    add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
    publication = add("aeron:ipc", stream_id)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    return publication, subscription.images[0]


@pytest.mark.parametrize("exclusive", [False, True], ids=["concurrent", "exclusive"])
def test_offer_and_try_claim_through_handles_deliver_the_exact_bytes(client, exclusive):
    aeron, _ = client
    publication, image = connected_pair(aeron, 21 if exclusive else 22, exclusive)
    pub, img = publication.compiled(), image.compiled()
    messages = [bytes((i * 7 + j) & 0xFF for j in range(i * 5 + 1)) for i in range(12)]
    frame = np.zeros(256, np.uint8)
    for message in messages[:6]:
        frame[3:3 + len(message)] = np.frombuffer(message, np.uint8)  # a range inside a larger buffer
        assert offer_retrying(pub, frame, 3, len(message)) > 0
    for message in messages[6:9]:
        assert claim_write_commit(pub, np.frombuffer(message, np.uint8).copy()) > 0
    assert claim_abort(pub, new_buffer_claim(pub), 40) > 0  # an aborted claim is padding: never delivered
    other = aeron.add_publication("aeron:ipc", 99).compiled()
    assert claim_abort(pub, new_buffer_claim(other), 40) == ERROR  # a claim of another publication's log
    for message in messages[9:]:
        assert offer_whole(pub, np.frombuffer(message, np.uint8).copy()) > 0
    ctx = np.zeros(4096, np.int64)
    total = 0
    while total < len(messages):
        got = poll(img, collect, ctx, 5)
        assert got > 0
        total += got
    assert collected(ctx) == messages
    assert image.position == publication.position == handle_position(pub) == handle_position(img)


def test_a_handler_named_inside_compiled_code_polls_too(client):
    aeron, _ = client
    publication, image = connected_pair(aeron, 23)
    assert publication.offer(b"named") > 0
    ctx = np.zeros(64, np.int64)
    assert poll_collect(image.compiled(), ctx, 10) == 1
    assert collected(ctx) == [b"named"]


def test_offer_out_of_range_or_too_long_is_error_and_appends_nothing(client):
    aeron, _ = client
    publication, _ = connected_pair(aeron, 24)
    pub = publication.compiled()
    buffer = np.zeros(16, np.uint8)
    before = publication.position
    assert offer_retrying(pub, buffer, 10, 7) == ERROR
    assert offer_retrying(pub, buffer, -1, 4) == ERROR
    assert offer_retrying(pub, buffer, 0, -1) == ERROR
    big = np.zeros(publication.max_message_length + 1, np.uint8)
    assert offer_retrying(pub, big, 0, big.shape[0]) == ERROR
    assert publication.position == before


def test_not_connected_then_back_pressured(client):
    aeron, _ = client
    publication = aeron.add_publication("aeron:ipc", 25)
    pub = publication.compiled()
    message = np.zeros(200, np.uint8)
    assert offer_retrying(pub, message, 0, 200) == NOT_CONNECTED
    subscription = aeron.add_subscription("aeron:ipc", 25)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    # Nobody polls: the window (the fake driver's half a term) fills, then offers are back-pressured.
    results = [offer_retrying(pub, message, 0, 200) for _ in range(publication.term_buffer_length // 200 + 2)]
    assert results[0] > 0 and results[-1] == BACK_PRESSURED
    assert publication.position >= publication.position_limit


@pytest.mark.parametrize("exclusive", [False, True], ids=["concurrent", "exclusive"])
def test_a_closed_publications_handle_returns_closed(client, exclusive):
    aeron, _ = client
    publication, _ = connected_pair(aeron, 26, exclusive)
    pub = publication.compiled()
    assert not handle_is_closed(pub)
    publication.close()
    assert handle_is_closed(pub)
    message = np.zeros(8, np.uint8)
    assert offer_retrying(pub, message, 0, 8) == CLOSED
    assert claim_write_commit(pub, message) == CLOSED
    with pytest.raises(AeronError, match="closed"):
        publication.compiled()


def test_a_closed_images_handle_delivers_nothing_and_reads_nothing(client):
    aeron, _ = client
    publication, image = connected_pair(aeron, 27)
    img = image.compiled()
    assert publication.offer(b"left unread") > 0
    position = image.position
    image.subscription.close()  # the image closes with its subscription
    assert image.is_closed and handle_is_closed(img)
    ctx = np.zeros(64, np.int64)
    assert poll(img, collect, ctx, 10) == 0
    assert ctx[COLLECT_FRAGMENTS] == 0
    with pytest.raises(AeronError, match="closed"):
        image.compiled()
    assert position == image.position


def test_handles_outlive_the_client_and_keep_their_mappings(driver):
    """Closing the client unmaps what it can; a handle still held keeps its log mapped and refuses with CLOSED."""
    aeron, errors = connect(driver, resource_linger_duration_ns=0)
    publication, image = connected_pair(aeron, 28)
    pub, img = publication.compiled(), image.compiled()
    aeron.close()
    del publication, image
    message = np.zeros(8, np.uint8)
    assert offer_retrying(pub, message, 0, 8) == CLOSED
    assert poll(img, collect, np.zeros(8, np.int64), 10) == 0
    assert errors == []


@kernel(numba.int64(publication_handle_type, numba.uint8[::1], numba.int64[::1]))
def offer_until_closed(publication, buffer, progress):
    """Offer until CLOSED (the publication is never connected: NOT_CONNECTED until then); ``progress[0]`` counts
    the offers, ``progress[1]`` is set to 1 on exit. Returns the last result."""
    result = 0
    while True:
        result = publication.offer(buffer, 0, buffer.shape[0])
        progress[0] += 1
        if result == CLOSED or progress[0] > 2_000_000_000:
            break
    atomics.put_int64_release(progress.view(np.uint8), 8, 1)
    return result


def test_a_handle_offering_on_another_thread_sees_the_close_and_stops_with_closed(driver):
    aeron, errors = connect(driver, resource_linger_duration_ns=0)
    publication = aeron.add_publication("aeron:ipc", 29)
    pub = publication.compiled()
    progress = np.zeros(2, np.int64)
    results = []
    writer = threading.Thread(target=lambda: results.append(offer_until_closed(pub, np.zeros(64, np.uint8), progress)),
                              daemon=True)
    writer.start()  # offer_until_closed releases the GIL (nogil): it runs beside the close below
    await_condition(lambda: progress[0] > 1000, 5, "the compiled writer offering")
    aeron.close()  # closes the publication and unmaps what nobody holds; the writer still holds its log
    writer.join(10)
    assert not writer.is_alive() and results == [CLOSED] and progress[1] == 1
    assert errors == []
