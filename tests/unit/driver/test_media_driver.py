"""Starting a driver where it cannot start: one line naming the path and what to do, never a traceback."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from aeron_numba.commands import driver as driver_command
from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.media_driver import ActiveDriverError, MediaDriver, prepare_aeron_dir
from aeron_numba.errors import AeronError, InsufficientStorageError
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer

SMALL = dict(counters_values_buffer_length=64 * 1024, error_buffer_length=64 * 1024)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("make_path, advice", [
    (lambda tmp: "/proc/aeron-numba-no-such-dir", "a parent directory is missing"),
    (lambda tmp: str(tmp / "a-file" / "aeron"), "a part of the path is a file"),
    (lambda tmp: str(tmp / "a-file"), "a part of the path is a file"),  # the file itself, left alone
])
def test_a_dir_that_cannot_be_created_gets_one_line_naming_it(tmp_path, capsys, make_path, advice):
    (tmp_path / "a-file").write_text("not a directory")
    path = make_path(tmp_path)
    assert driver_command.main(["--dir", path], prog="aeron-numba-driver") == 1
    line = _one_line(capsys)
    assert line.startswith(f"aeron-numba-driver: cannot create aeron dir {path}: ")
    assert advice in line
    assert (tmp_path / "a-file").read_text() == "not a directory"


def _statvfs_with_room(room: int):
    real = os.statvfs

    def statvfs(path):
        stats = real(path)
        return os.statvfs_result((stats.f_bsize, 4096, stats.f_blocks, room // 4096, room // 4096,
                                  *tuple(stats)[5:]))
    return statvfs


def test_a_driver_on_a_file_system_without_room_names_the_cause(shm_dir, monkeypatch, capsys):
    """Seen on a 64 KiB tmpfs: an IndexError from the warm-up. The start is refused before any file is made."""
    monkeypatch.setattr(os, "statvfs", _statvfs_with_room(64 * 1024))
    aeron_dir = shm_dir / "aeron"
    with pytest.raises(InsufficientStorageError, match=rf"in {aeron_dir}: needs \d+ bytes .* usable=65536"):
        MediaDriver(DriverContext(aeron_dir=str(aeron_dir), **SMALL))
    assert list(aeron_dir.iterdir()) == []

    monkeypatch.setenv("AERON_DIR", str(aeron_dir))
    assert driver_command.main([], prog="aeron-numba-driver") == 1
    assert "insufficient usable storage to start a driver" in _one_line(capsys)


def test_the_warm_up_says_why_its_publication_was_refused(shm_dir, monkeypatch):
    """Room for the driver's own files but not for the warm-up's logs: the conductor's refusal is quoted."""
    from aeron_numba.driver import warmup

    monkeypatch.setattr(os, "statvfs", _statvfs_with_room(64 * 1024))
    with pytest.raises(AeronError, match="could not add an IPC publication.*insufficient usable storage"):
        warmup.warm_up_driver_kernels(str(shm_dir))  # was an IndexError


def test_a_restart_straight_after_a_clean_stop_says_how_to_go_on(shm_dir):
    """As Aeron, the stopped driver's heartbeat keeps the dir for the driver timeout; the message says what to do."""
    ctx = DriverContext(aeron_dir=str(shm_dir / "aeron"), driver_timeout_ms=10_000, **SMALL)
    MediaDriver(ctx, warm_up=False).close()
    with pytest.raises(ActiveDriverError) as info:
        MediaDriver(DriverContext(aeron_dir=str(shm_dir / "aeron"), driver_timeout_ms=10_000, **SMALL),
                    warm_up=False)
    message = str(info.value)
    assert "AERON_DIR_DELETE_ON_START=true" in message
    wait_s = int(message.split("wait ")[1].split(" s")[0])
    assert 1 <= wait_s <= 10
    MediaDriver(DriverContext(aeron_dir=str(shm_dir / "aeron"), dir_delete_on_start=True, **SMALL),
                warm_up=False).close()


def test_a_heartbeat_from_the_future_is_not_a_live_driver(shm_dir):
    """A garbage cnc.dat body can hold any heartbeat: one far ahead of the clock does not keep the dir."""
    ctx = DriverContext(aeron_dir=str(shm_dir / "aeron"), **SMALL).conclude()
    driver = MediaDriver(ctx, warm_up=False)
    ManyToOneRingBuffer(driver.cnc_file.to_driver_buffer).set_consumer_heartbeat_time(
        int(time.time() * 1000) + 10**9)
    driver.close()
    prepare_aeron_dir(ctx)  # replaced, not refused
    assert not ctx.cnc_path.exists()


def test_a_fresh_heartbeat_over_garbage_ring_positions_is_not_a_live_driver(shm_dir):
    from tests.unit.cnc_support import write_garbage_cnc

    ctx = DriverContext(aeron_dir=str(shm_dir / "aeron"), **SMALL).conclude()
    (shm_dir / "aeron").mkdir()
    write_garbage_cnc(ctx.cnc_path, int(time.time() * 1000))
    prepare_aeron_dir(ctx)  # replaced, not refused as an active driver
    assert not ctx.cnc_path.exists()


def test_the_doorbell_holds_the_address_of_the_drivers_wake_socket_until_the_driver_closes(shm_dir):
    """A ring sends to that address when the driver is parked in ppoll on its sockets, where the doorbell's futex
    cannot wake it; a closed driver's doorbell names no socket, so rings stop sending."""
    from aeron_numba.agent.idle_watch import IdleWatch
    from aeron_numba.kernels.udp_socket import sockaddr_host_port
    from aeron_numba.layout import counters as cl

    driver = MediaDriver(DriverContext(aeron_dir=str(shm_dir / "aeron"), **SMALL), warm_up=False)
    conductor = driver.conductor
    slot = cl.counter_offset(conductor.doorbell_counter_id) + cl.COUNTER_VALUE_OFFSET
    values = conductor.counters.values_buffer.view(np.uint8)
    wake_offset = slot + cl.DOORBELL_WAKE_SOCKADDR_OFFSET
    try:
        assert sockaddr_host_port(values, wake_offset) == driver.doorbell_wake_socket.getsockname()
        watch = IdleWatch()
        assert conductor.add_idle_watch(watch)
        assert watch.wake_fd == driver.doorbell_wake_socket.fileno()
    finally:
        driver.close()
    assert driver.doorbell_wake_socket.fileno() == -1


def test_a_client_rings_the_doorbell_from_an_application_thread_and_a_parked_driver_gets_the_wake_datagram(shm_dir):
    """``Aeron.ring_doorbell``: what a cluster client's ingress offer calls, since no agent runner rings for an
    application thread. It counts the ring and, with the driver parked in ppoll, sends to the driver's wake socket;
    once the client is closed it does nothing."""
    import select

    from aeron_numba.client import Aeron, Context
    from aeron_numba.layout import counters as cl

    driver = MediaDriver(DriverContext(aeron_dir=str(shm_dir / "aeron"), **SMALL), warm_up=False)
    conductor = driver.conductor
    slot = (cl.counter_offset(conductor.doorbell_counter_id) + cl.COUNTER_VALUE_OFFSET) // 8
    values = conductor.counters.values_buffer.view(np.int64)
    wake = driver.doorbell_wake_socket
    try:
        aeron = Aeron.connect(Context(aeron_dir=str(shm_dir / "aeron"), use_conductor_agent_invoker=True))
        rings = int(values[slot])
        aeron.ring_doorbell()
        assert int(values[slot]) == rings + 1 and not select.select([wake], [], [], 0)[0]  # nobody parked: no datagram
        values[slot + cl.DOORBELL_POLL_WAITERS_OFFSET // 8] = 1  # as the driver counts itself while parked in ppoll
        aeron.ring_doorbell()
        assert int(values[slot]) == rings + 2 and select.select([wake], [], [], 10.0)[0]
        aeron.close()
        aeron.ring_doorbell()  # closed: its mapping of cnc.dat is gone, and with it the ring
        assert int(values[slot]) == rings + 2
    finally:
        driver.close()
