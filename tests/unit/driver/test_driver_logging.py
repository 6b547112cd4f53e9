"""What a user running a driver with -v (or AERON_LOG_LEVEL=INFO) sees on the ``aeron_numba.driver`` logger: start,
publications and subscriptions added and removed, clients closed or timed out, errors (which also stay in the
error log)."""

from __future__ import annotations

import logging

import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.layout import control_protocol as cp
from tests.unit.driver_support import LIVENESS_MS, Harness, RawClient


@pytest.fixture
def harness(shm_dir, caplog):
    caplog.set_level(logging.INFO, logger="aeron_numba.driver")
    h = Harness(shm_dir / "aeron")
    yield h
    h.close()


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aeron_numba.driver"]


def test_start_and_every_added_and_removed_stream_is_logged(harness, caplog):
    started = [r.getMessage() for r in caplog.get_records("setup") if r.name == "aeron_numba.driver"]
    assert [m.split(" (pid ")[0] for m in started] == [f"media driver 0.1.0 ready in {harness.driver.ctx.aeron_dir}"]
    client = RawClient(harness.cnc)
    pub_id = client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
    sub_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=1001,
                         channel="aeron:ipc")
    harness.work(2)
    client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=sub_id)
    client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=pub_id)
    harness.work(2)
    assert _messages(caplog) == [
        f"publication {pub_id} added by client {client.client_id}: aeron:ipc stream 1001",
        f"subscription {sub_id} added by client {client.client_id}: aeron:ipc stream 1001",
        f"subscription {sub_id} removed by client {client.client_id}",
        f"publication {pub_id} removed by client {client.client_id}",
    ]


def test_a_refused_command_is_logged_as_the_error_it_records(harness, caplog):
    client = RawClient(harness.cnc)
    client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=999)
    harness.work()
    warnings = [r for r in caplog.records if r.name == "aeron_numba.driver" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unknown publication" in warnings[0].getMessage()
    assert not any("removed" in m for m in _messages(caplog))


def test_a_client_timing_out_is_logged(harness, caplog):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    harness.work()
    caplog.clear()
    harness.advance(LIVENESS_MS * 2)
    timed_out = [m for m in _messages(caplog) if m.startswith(f"client {client.client_id} timed out")]
    assert len(timed_out) == 1, _messages(caplog)


def test_quiet_below_info(shm_dir, caplog):
    caplog.set_level(logging.WARNING, logger="aeron_numba.driver")
    h = Harness(shm_dir / "aeron")
    try:
        client = RawClient(h.cnc)
        client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
        h.work()
    finally:
        h.close()
    assert _messages(caplog) == []


def test_the_warm_up_scratch_conductor_is_not_in_the_log(shm_dir, caplog):
    # Warm-up drives a scratch conductor through commands and errors on purpose: none of it is the driver's doing.
    from aeron_numba.driver.context import DriverContext
    from aeron_numba.driver.media_driver import MediaDriver

    caplog.set_level(logging.DEBUG, logger="aeron_numba.driver")
    driver = MediaDriver(DriverContext(aeron_dir=str(shm_dir / "aeron"), counters_values_buffer_length=64 * 1024,
                                       error_buffer_length=64 * 1024), warm_up=True)
    driver.close()
    messages = [m for m in _messages(caplog) if not m.startswith("setting ")]
    assert [m.split(" (pid ")[0] for m in messages] == [f"media driver 0.1.0 ready in {shm_dir / 'aeron'}",
                                                        f"media driver in {shm_dir / 'aeron'} stopped"]
    assert not logging.getLogger("aeron_numba.driver").disabled
