"""Aeron.connect and the client conductor thread against a scripted driver: waiting for cnc.dat, client
timeout, loss of the heartbeat counter, async errors, close and reentrancy (spec §6, §11.5, §14).

The conductor's timers (keepalive, driver timeout, service timeout, response deadline, linger) are tested
with injected clocks in tests/unit/client/test_client_conductor_agent.py."""

from __future__ import annotations

import re
import threading
import time

import pytest

from aeron_numba.client import (
    Aeron,
    ClientClosedError,
    ClientTimeoutError,
    Context,
    DriverTimeoutError,
)
from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from harness.awaiting import await_condition
from tests.unit.cnc_support import write_garbage_cnc
from tests.unit.client_support import SMALL_CNC, FakeDriver, connect, epoch_ms, mapping_count


# ------------------------------------------------------------------------------------------------ connect
def test_connect_gets_a_client_id_and_closes(driver):
    aeron, errors = connect(driver)
    with aeron:
        assert aeron.client_id >= 0
        assert not aeron.is_closed
        assert aeron.next_correlation_id() > aeron.client_id
    assert aeron.is_closed
    close = driver.wait_for_command(cp.CLIENT_CLOSE)
    assert close[0].client_id == aeron.client_id
    assert errors == []
    aeron.close()  # idempotent
    with pytest.raises(ClientClosedError, match="is closed"):
        aeron.add_publication("aeron:ipc", 1)
    with pytest.raises(ClientClosedError):
        aeron.next_correlation_id()


def test_two_clients_get_different_ids(driver):
    first, _ = connect(driver)
    second, _ = connect(driver)
    with first, second:
        assert first.client_id != second.client_id


def test_connect_without_driver_times_out(shm_dir):
    started = time.monotonic()
    with pytest.raises(DriverTimeoutError, match="cnc.dat not created within driver_timeout_ms=300"):
        Aeron.connect(Context(aeron_dir=shm_dir / "nobody", driver_timeout_ms=300, keepalive_interval_ns=100_000_000))
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 2.0


def test_connect_waits_for_a_driver_that_starts_later(shm_dir):
    """cnc.dat appears, then signals ready later; connect waits for both within the deadline."""
    aeron_dir = shm_dir / "aeron"
    box = {}

    def start_driver():
        box["driver"] = FakeDriver(aeron_dir, signal_ready=False, start=False)
        box["created"] = True

    timer = threading.Timer(0.2, start_driver)
    timer.start()
    result = {}

    def client():
        try:
            result["aeron"] = Aeron.connect(Context(aeron_dir=aeron_dir, driver_timeout_ms=5000))
        except BaseException as exc:  # noqa: BLE001
            result["error"] = exc

    thread = threading.Thread(target=client)
    thread.start()
    await_condition(lambda: box.get("created"), 5, "driver created")
    driver = box["driver"]
    try:
        assert "aeron" not in result  # not ready yet: version 0
        driver.signal_ready()
        driver.start()
        thread.join(5)
        assert "error" not in result, result.get("error")
        result["aeron"].close()
    finally:
        timer.cancel()
        driver.close()


def test_connect_rejects_a_stale_cnc_left_by_a_dead_driver(shm_dir):
    aeron_dir = shm_dir / "aeron"
    aeron_dir.mkdir()
    with CncFile.create(aeron_dir / "cnc.dat", **SMALL_CNC) as cnc_file:
        ring = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        ring.set_consumer_heartbeat_time(epoch_ms() - 60_000)
        del ring
        started = time.monotonic()
        with pytest.raises(DriverTimeoutError, match=r"heartbeat age=\d+ms > driver_timeout_ms=400"):
            Aeron.connect(Context(aeron_dir=aeron_dir, driver_timeout_ms=400, keepalive_interval_ns=100_000_000))
        assert time.monotonic() - started >= 0.4


@pytest.mark.parametrize("heartbeat", ["in the future", "negative", "fresh"])
def test_connect_calls_a_cnc_with_a_garbage_body_corrupt(shm_dir, heartbeat):
    """A valid header over garbage is not a live driver: seen as ``ring buffer status -7`` on the first command."""
    aeron_dir = shm_dir / "aeron"
    aeron_dir.mkdir()
    heartbeat_ms = {"in the future": epoch_ms() + 10**9, "negative": -12345, "fresh": epoch_ms()}[heartbeat]
    write_garbage_cnc(aeron_dir / "cnc.dat", heartbeat_ms)
    expected = {"in the future": " ms in the future", "negative": f"heartbeat={heartbeat_ms} is negative",
                "fresh": "to-driver ring buffer head="}[heartbeat]
    with pytest.raises(DriverTimeoutError, match=rf"cnc.dat is corrupt \(.*{re.escape(expected)}.*AERON_DIR_DELETE_ON_START"):
        Aeron.connect(Context(aeron_dir=aeron_dir, driver_timeout_ms=300, keepalive_interval_ns=100_000_000))


def test_keepalive_interval_must_be_below_the_drivers_client_liveness_timeout(shm_dir):
    with FakeDriver(shm_dir / "aeron", client_liveness_timeout_ns=400_000_000) as driver:
        with pytest.raises(ConfigurationError, match="keepalive_interval_ns=500000000"):
            connect(driver)


# ------------------------------------------------------------------------------------------- liveness
def test_client_timeout_from_driver_closes_the_client(driver):
    aeron, errors = connect(driver)
    other, other_errors = connect(driver)
    with aeron, other:
        subscription = aeron.add_subscription("aeron:ipc", 3)
        driver.send_client_timeout(aeron.client_id)
        await_condition(lambda: errors, 5, "client timeout reported")
        assert isinstance(errors[0], ClientTimeoutError)
        assert str(aeron.client_id) in str(errors[0])
        assert aeron.is_closed and subscription.is_closed
        with pytest.raises(ClientTimeoutError):
            aeron.add_publication("aeron:ipc", 3)
        # Only the named client ends.
        assert not other.is_closed and other_errors == []
        other.add_publication("aeron:ipc", 3)


def test_heartbeat_counter_freed_by_driver_ends_the_client(driver):
    aeron, errors = connect(driver, keepalive_interval_ns=50_000_000)
    with aeron:
        await_condition(lambda: aeron.conductor.heartbeat_counter_id >= 0, 5, "heartbeat counter found")
        counter_id = aeron.conductor.heartbeat_counter_id
        driver.run_on_driver(lambda: driver.counters.free(counter_id))
        await_condition(lambda: errors, 5, "loss of the heartbeat counter reported")
        assert isinstance(errors[0], ClientTimeoutError) and f"id={counter_id}" in str(errors[0])
        assert aeron.is_closed


# ------------------------------------------------------------------------------------------ commands
def test_handlers_may_not_call_back_into_the_client(driver):
    aeron, errors = connect(driver)
    with aeron:
        outcome = {}

        def on_available(image):
            try:
                aeron.add_publication("aeron:ipc", 11)
            except AeronError as exc:
                outcome["error"] = exc

        aeron.add_subscription("aeron:ipc", 11, available_image_handler=on_available)
        aeron.add_publication("aeron:ipc", 11)
        await_condition(lambda: "error" in outcome, 5, "handler ran")
        assert "reentrant" in str(outcome["error"])


def test_handler_exceptions_go_to_the_error_handler(driver):
    aeron, errors = connect(driver)
    with aeron:
        def on_available(image):
            raise RuntimeError("boom")

        subscription = aeron.add_subscription("aeron:ipc", 12, available_image_handler=on_available)
        aeron.add_publication("aeron:ipc", 12)
        await_condition(lambda: errors, 5, "handler error reported")
        assert isinstance(errors[0], RuntimeError) and subscription.image_count == 1


def test_async_remove_error_goes_to_the_error_handler(driver):
    aeron, errors = connect(driver)
    with aeron:
        publication = aeron.add_publication("aeron:ipc", 13)
        driver.fail_next(cp.REMOVE_PUBLICATION, cp.GENERIC_ERROR, "cannot remove")
        publication.close()
        await_condition(lambda: errors, 5, "async error reported")
        assert "GENERIC_ERROR (error_code=11): cannot remove" in str(errors[0])
        assert not aeron.is_closed


def test_close_unmaps_cnc_and_every_log(driver):
    aeron, errors = connect(driver)
    subscription = aeron.add_subscription("aeron:ipc", 21)
    publication = aeron.add_publication("aeron:ipc", 21)
    exclusive = aeron.add_exclusive_publication("aeron:ipc", 21)
    await_condition(lambda: subscription.image_count == 2 and publication.position_limit > 0, 5, "connected")
    assert publication.offer(b"x") > 0 and subscription.poll(lambda *args: None, 10) == 1
    claim = exclusive.try_claim(8)
    claim.commit()
    paths = [driver.aeron_dir / "cnc.dat", publication.log_file_name, exclusive.log_file_name]
    # The driver maps each file once; the client once more (one mapping per log, shared by its users).
    assert [mapping_count(path) for path in paths] == [2, 2, 2]
    aeron.close()
    assert [mapping_count(path) for path in paths] == [1, 1, 1]
    assert errors == []


def test_the_work_generation_moves_after_a_cycle_that_handled_a_driver_event_and_not_after_an_idle_one(driver):
    """Another thread waiting in compiled code watches it to learn that this client's conductor changed something
    (an image added on its thread)."""
    aeron, errors = connect(driver, use_conductor_agent_invoker=True)
    try:
        invoker, conductor = aeron.conductor_agent_invoker, aeron.conductor
        while invoker.invoke():
            pass
        generation = int(conductor.work_generation[0])
        assert invoker.invoke() == 0 and int(conductor.work_generation[0]) == generation
        available = []
        aeron.add_subscription("aeron:ipc", 3, available_image_handler=available.append)
        aeron.add_publication("aeron:ipc", 3)
        await_condition(lambda: available, 5.0, "the image", work=invoker.invoke)
        assert int(conductor.work_generation[0]) > generation
    finally:
        aeron.close()
    assert errors == []
