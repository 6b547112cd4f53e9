"""IPC through a real media driver process with real client processes (issue: driver and client, done-when)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from aeron_numba.client import Aeron, Context
from aeron_numba.errors import DriverTimeoutError
from aeron_numba.layout import counters as cl
from aeron_numba.layout import publication_status as P
from harness.aeron_dirs import AeronCounters
from harness.awaiting import await_condition
from tests.integration.driver_processes import start_driver

WORKER = "tests.integration.pubsub_worker"
STREAM = 1001


@pytest.fixture
def driver(process_manager, aeron_dir):
    process, cnc_file = start_driver(process_manager, aeron_dir)
    counters = AeronCounters(cnc_file, owns_cnc=True)
    yield process, counters
    counters.close() if hasattr(counters, "close") else None


def run_exchange(process_manager, aeron_dir, tmp_path, *, publishers, subscribers, count, exclusive=False,
                 max_length=64 * 1024, timeout_s=240):
    """Start the subscribers, wait until they are subscribed, start the publishers, check every result."""
    common = ["--dir", str(aeron_dir), "--stream", str(STREAM), "--count", str(count), "--seed", "7",
              "--max-length", str(max_length)]
    subs = []
    for index in range(subscribers):
        out = tmp_path / f"sub{index}.json"
        process = process_manager.spawn_module(
            f"sub{index}", WORKER, "subscribe", *common, "--publishers", ",".join(map(str, range(publishers))),
            "--out", str(out))
        subs.append((process, out))
    for process, _ in subs:
        process.await_output("ready", 60)
    pubs = [
        process_manager.spawn_module(f"pub{p}", WORKER, "publish", *common, "--id", str(p),
                                     *(["--exclusive"] if exclusive else []))
        for p in range(publishers)
    ]
    for process in pubs + [p for p, _ in subs]:
        assert process.wait(timeout_s) == 0, process.tail()
    for _, out in subs:
        result = json.loads(out.read_text())
        assert result["errors"] == []
        assert result["received"] == {str(p): count for p in range(publishers)}


def test_one_publisher_two_subscribers_random_sizes(driver, process_manager, aeron_dir, tmp_path):
    run_exchange(process_manager, aeron_dir, tmp_path, publishers=1, subscribers=2, count=5_000)


def test_three_concurrent_publishers_interleave_without_loss(driver, process_manager, aeron_dir, tmp_path):
    run_exchange(process_manager, aeron_dir, tmp_path, publishers=3, subscribers=1, count=2_000, max_length=8192)


def test_exclusive_publication(driver, process_manager, aeron_dir, tmp_path):
    run_exchange(process_manager, aeron_dir, tmp_path, publishers=1, subscribers=1, count=3_000, exclusive=True)


@pytest.mark.slow
def test_a_million_messages_of_random_sizes(driver, process_manager, aeron_dir, tmp_path):
    run_exchange(process_manager, aeron_dir, tmp_path, publishers=1, subscribers=1, count=1_000_000,
                 timeout_s=3600)


def _client(aeron_dir, **kwargs) -> Aeron:
    return Aeron.connect(Context(aeron_dir=str(aeron_dir), **kwargs))


def _offer_all(publication, messages: list[bytes]) -> None:
    for message in messages:
        await_condition(lambda: publication.offer(message) > 0, 10, "offer")


def _receive(subscription, count: int) -> list[bytes]:
    """Poll until ``count`` messages came and the image has no more; returns them."""
    received = []
    await_condition(lambda: subscription.poll(lambda b, o, n, h: received.append(bytes(b[o:o + n])), 1000) == 0
                    and len(received) == count, 10, f"{count} messages")
    return received


EARLY = [f"early-{i}".encode() for i in range(100)]


def test_late_subscriber_joins_at_the_live_position_once_the_others_consumed(driver, aeron_dir):
    with _client(aeron_dir) as aeron:
        publication = aeron.add_publication("aeron:ipc?term-length=64k", STREAM)
        early = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: publication.is_connected, 10, "publication connected")
        _offer_all(publication, EARLY)
        assert _receive(early, len(EARLY)) == EARLY
        live_position = publication.position
        # the driver saw the early subscriber's position (it moved the limit to it plus the window, half the term)
        await_condition(lambda: publication.position_limit == live_position + 32 * 1024, 10, "limit moved")
        late = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: late.image_count == 1, 10, "late image")
        assert late.images[0].position == live_position
        _offer_all(publication, [b"after-join"])
        assert _receive(late, 1) == [b"after-join"]


def test_late_subscriber_joins_at_the_slowest_subscriber(driver, aeron_dir):
    # Aeron's joinPosition: a subscriber that arrives while another has not read what was published starts where
    # that one is, so both see the same messages (a cluster's service container joining a log replay relies on it).
    with _client(aeron_dir) as aeron:
        publication = aeron.add_publication("aeron:ipc?term-length=64k", STREAM)
        early = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: publication.is_connected, 10, "publication connected")
        _offer_all(publication, EARLY)
        late = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: late.image_count == 1, 10, "late image")
        assert late.images[0].position == early.images[0].position == 0
        for subscription in (early, late):
            assert _receive(subscription, len(EARLY)) == EARLY


def test_a_subscriber_added_while_a_closed_publication_drains_still_reads_it(driver, aeron_dir):
    # Aeron's isAcceptingSubscriptions: a closed publication whose data a subscriber has not read yet still links
    # new subscribers (an archive replay that sent everything and closed before the cluster service subscribed).
    with _client(aeron_dir) as aeron, _client(aeron_dir) as publisher_client:
        publication = publisher_client.add_exclusive_publication("aeron:ipc?term-length=64k", STREAM)
        first = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: publication.is_connected, 10, "publication connected")
        replayed = [f"replayed-{i}".encode() for i in range(10)]
        _offer_all(publication, replayed)
        publication.close()
        second = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: second.image_count == 1, 10, "an image for the late subscriber")
        for subscription in (first, second):
            assert _receive(subscription, len(replayed)) == replayed


def test_stalled_subscriber_back_pressures_and_loses_nothing(driver, aeron_dir):
    with _client(aeron_dir) as aeron:
        publication = aeron.add_publication("aeron:ipc?term-length=64k", STREAM)
        subscription = aeron.add_subscription("aeron:ipc", STREAM)
        await_condition(lambda: publication.is_connected and subscription.image_count == 1, 10, "connected")
        message = np.zeros(1000, np.uint8)
        sent = 0
        result = 0
        while sent < 1000:  # far more than the 32 KiB window
            message[:8].view(np.int64)[0] = sent
            result = publication.offer(message)
            if result < 0:
                break
            sent += 1
        assert result == P.BACK_PRESSURED and sent < 1000
        seen = []
        handler = lambda b, o, n, h: seen.append(int(b[o:o + 8].view(np.int64)[0]))  # noqa: E731
        while len(seen) < sent:
            assert subscription.poll(handler, 100) > 0 or len(seen) == sent
        assert seen == list(range(sent))
        await_condition(lambda: publication.offer(message) > 0, 10, "the window reopens once read")


def test_killed_client_is_timed_out_and_its_resources_freed(driver, process_manager, aeron_dir, tmp_path):
    _, counters = driver
    out = tmp_path / "sub.json"
    subscriber = process_manager.spawn_module(
        "sub", WORKER, "subscribe", "--dir", str(aeron_dir), "--stream", str(STREAM), "--count", "10",
        "--out", str(out))
    subscriber.await_output("ready", 60)
    heartbeat = counters.await_counter(30, type_id=cl.CLIENT_HEARTBEAT_TYPE_ID)
    with _client(aeron_dir) as aeron:
        publication = aeron.add_publication("aeron:ipc", STREAM)
        await_condition(lambda: counters.find(type_id=cl.SUBSCRIBER_POSITION_TYPE_ID), 10, "sub-pos allocated")
        subscriber.kill()
        counters.await_value(lambda v: v == 1, 30, label="Client liveness timeouts")
        await_condition(lambda: counters.find(type_id=cl.SUBSCRIBER_POSITION_TYPE_ID) is None, 10, "sub-pos freed")
        assert counters.find(label=heartbeat.label) is None
        assert not publication.is_connected
        assert counters.find(label_contains=f"id={aeron.client_id}") is not None  # the live client stays


def test_publisher_killed_between_claim_and_commit_is_unblocked(driver, process_manager, aeron_dir):
    _, counters = driver
    with _client(aeron_dir) as aeron:
        subscription = aeron.add_subscription("aeron:ipc", STREAM)
        publication = aeron.add_publication("aeron:ipc", STREAM)
        await_condition(lambda: publication.is_connected and subscription.image_count == 1, 10, "connected")
        dead = process_manager.spawn_module("claimer", WORKER, "claim-and-die", "--dir", str(aeron_dir),
                                            "--stream", str(STREAM))
        dead.wait(60)
        assert dead.exit_code == -9 and "claimed at" in dead.stdout()
        await_condition(lambda: publication.offer(b"after the dead claim") > 0, 10, "offer")
        received = []
        handler = lambda b, o, n, h: received.append(bytes(b[o:o + n]))  # noqa: E731
        assert subscription.poll(handler, 10) == 0  # blocked behind the claim that will never commit
        counters.await_value(lambda v: v == 1, 30, label="Unblocked Publications")
        await_condition(lambda: subscription.poll(handler, 10) > 0 or received, 10, "message after the hole")
        assert received == [b"after the dead claim"]


def test_invoker_mode_client_publishes_and_receives_with_no_conductor_thread(driver, aeron_dir):
    """use_conductor_agent_invoker: the application's own loop drives the conductor (keepalives, images)."""
    _, counters = driver
    errors = []
    with _client(aeron_dir, use_conductor_agent_invoker=True, error_handler=errors.append) as aeron:
        invoker = aeron.conductor_agent_invoker
        assert invoker.is_running
        assert not [t for t in threading.enumerate() if t.name.endswith(f"conductor-{aeron.client_id}")]

        def invoked(condition):
            return lambda: invoker.invoke() >= 0 and condition()

        subscription = aeron.add_subscription("aeron:ipc", STREAM)
        publication = aeron.add_publication("aeron:ipc", STREAM)
        await_condition(invoked(lambda: publication.is_connected and subscription.image_count == 1), 10, "connected")
        sent = [f"invoked-{i}".encode() for i in range(20)]
        for message in sent:
            await_condition(invoked(lambda: publication.offer(message) > 0), 10, "offer")
        received = []
        handler = lambda b, o, n, h: received.append(bytes(b[o:o + n]))  # noqa: E731
        await_condition(invoked(lambda: subscription.poll(handler, 10) >= 0 and len(received) == len(sent)), 10,
                        "every message received")
        assert received == sent
        # Only invoke() drives the keepalives: the driver sees the client's heartbeat move.
        heartbeat = counters.await_counter(10, type_id=cl.CLIENT_HEARTBEAT_TYPE_ID, registration_id=aeron.client_id)
        first = counters.await_value(lambda v: v > 0, 10, counter_id=heartbeat.counter_id)
        await_condition(invoked(lambda: counters.value(heartbeat.counter_id) > first), 10, "heartbeat advanced")
        assert not aeron.is_closed
    assert invoker.is_closed
    assert errors == []


def test_stopping_the_driver_raises_driver_timeout_in_a_connected_client(driver, aeron_dir):
    process, _ = driver
    aeron = _client(aeron_dir, driver_timeout_ms=1000)
    try:
        aeron.add_subscription("aeron:ipc", STREAM)
        process.kill()
        start = time.monotonic()

        def raises_driver_timeout():
            try:
                aeron.add_subscription("aeron:ipc", STREAM + 1)
            except DriverTimeoutError:
                return True
            return False

        await_condition(raises_driver_timeout, 10, "DriverTimeoutError")
        assert time.monotonic() - start < 10
    finally:
        aeron.close()
