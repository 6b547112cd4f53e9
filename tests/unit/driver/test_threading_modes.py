"""Aeron's driver threading modes (SHARED, SHARED_NETWORK, DEDICATED), the per-agent idle strategies, the command
queues behind the Sender/Receiver/DriverConductor proxies, and how a driver with threads stops."""

from __future__ import annotations

import socket
import sys
import threading
import time

import pytest

from aeron_numba.agent import BackoffIdleStrategy, SleepingIdleStrategy, YieldingIdleStrategy
from aeron_numba.agent.idle_watch import IdleWatch
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver import DriverContext, MediaDriver
from aeron_numba.driver.command_queue import CommandQueue
from aeron_numba.driver.context import AERON_THREADING_MODES
from aeron_numba.driver.driver_conductor_proxy import DriverConductorProxy
from aeron_numba.driver.receiver_proxy import ReceiverProxy
from aeron_numba.driver.sender_proxy import SenderProxy
from aeron_numba.errors import AeronError, ConfigurationError
from aeron_numba.kernels import counters as ck
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from harness.awaiting import ConditionTimeout, await_condition
from tests.unit.driver_support import RawClient

MS = 1_000_000
SMALL = dict(ipc_term_buffer_length=64 * 1024, term_buffer_length=64 * 1024, conductor_buffer_length=64 * 1024 + 768,
             clients_buffer_length=64 * 1024 + 128, counters_values_buffer_length=64 * 1024,
             error_buffer_length=64 * 1024, loss_report_buffer_length=4096, timer_interval_ns=100 * MS,
             shared_idle_strategy="sleeping", conductor_idle_strategy="sleeping",
             sender_idle_strategy="sleeping", receiver_idle_strategy="sleeping",
             shared_network_idle_strategy="sleeping")


# ------------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("text, mode", [("SHARED", "SHARED"), ("shared_network", "SHARED_NETWORK"),
                                        (" Dedicated ", "DEDICATED")])
def test_the_three_threading_modes_are_accepted_in_any_case(tmp_path, text, mode):
    ctx = DriverContext.from_env({"AERON_THREADING_MODE": text}, aeron_dir=str(tmp_path)).conclude()
    assert ctx.threading_mode == mode


def test_shared_is_the_default_mode_and_aeron_knows_four(tmp_path):
    assert DriverContext(aeron_dir=str(tmp_path)).conclude().threading_mode == "SHARED"
    assert AERON_THREADING_MODES == ("DEDICATED", "SHARED_NETWORK", "SHARED", "INVOKER")


def test_invoker_is_refused_saying_why(tmp_path):
    with pytest.raises(ConfigurationError) as info:
        DriverContext.from_env({"AERON_THREADING_MODE": "INVOKER"}, aeron_dir=str(tmp_path)).conclude()
    assert str(info.value) == (
        "threading_mode='INVOKER' (AERON_THREADING_MODE) is not supported: INVOKER runs an embedded driver from the "
        "application's own loop, and aeron-numba has no embedded driver invoker API (its driver is a process); use "
        "one of SHARED, SHARED_NETWORK, DEDICATED")


def test_an_unknown_threading_mode_is_named_with_the_choices(tmp_path):
    with pytest.raises(ConfigurationError, match=r"^threading_mode='FAST' \(AERON_THREADING_MODE\) is not one of "
                                                 r"SHARED, SHARED_NETWORK, DEDICATED$"):
        DriverContext.from_env({"AERON_THREADING_MODE": "FAST"}, aeron_dir=str(tmp_path)).conclude()


@pytest.mark.parametrize("env", ["AERON_CONDUCTOR_IDLE_STRATEGY", "AERON_SENDER_IDLE_STRATEGY",
                                 "AERON_RECEIVER_IDLE_STRATEGY", "AERON_SHAREDNETWORK_IDLE_STRATEGY",
                                 "AERON_SHARED_IDLE_STRATEGY"])
def test_every_idle_strategy_setting_is_validated_naming_the_setting_and_the_value(tmp_path, env):
    ctx = DriverContext.from_env({env: "snooze"}, aeron_dir=str(tmp_path))
    with pytest.raises(ConfigurationError) as info:
        ctx.conclude()
    message = str(info.value)
    assert f"({env})" in message and "'snooze'" in message and "backoff" in message and "sleeping" in message


def test_aeron_defaults_every_idle_strategy_to_backoff(tmp_path):
    ctx = DriverContext(aeron_dir=str(tmp_path)).conclude()
    assert {ctx.conductor_idle_strategy, ctx.sender_idle_strategy, ctx.receiver_idle_strategy,
            ctx.shared_network_idle_strategy, ctx.shared_idle_strategy} == {"backoff"}


def test_each_mode_uses_aeron_s_idle_strategy_settings(tmp_path):
    env = {"AERON_CONDUCTOR_IDLE_STRATEGY": "c", "AERON_SENDER_IDLE_STRATEGY": "s",
           "AERON_RECEIVER_IDLE_STRATEGY": "r", "AERON_SHAREDNETWORK_IDLE_STRATEGY": "sn",
           "AERON_SHARED_IDLE_STRATEGY": "sh"}

    def strategies(mode):
        return DriverContext.from_env({**env, "AERON_THREADING_MODE": mode}).agent_idle_strategies()

    # SHARED mode: the shared strategy, not the conductor's (aeron_driver.c).
    assert strategies("SHARED") == (("[conductor,sender,receiver]", "sh"),)
    assert strategies("SHARED_NETWORK") == (("conductor", "c"), ("[sender,receiver]", "sn"))
    assert strategies("DEDICATED") == (("conductor", "c"), ("sender", "s"), ("receiver", "r"))


def test_idle_strategy_init_args_are_aeron_s_and_checked(tmp_path):
    ctx = DriverContext.from_env({"AERON_RECEIVER_IDLE_STRATEGY": "sleep-ns",
                                  "AERON_RECEIVER_IDLE_STRATEGY_INIT_ARGS": "50us",
                                  "AERON_SHARED_IDLE_STRATEGY_INIT_ARGS": "1-2-3us-4ms"}, aeron_dir=str(tmp_path))
    ctx.conclude()
    assert ctx.idle_strategy("receiver_idle_strategy").sleep_period_ns == 50_000
    shared = ctx.idle_strategy("shared_idle_strategy")
    assert (shared.max_spins, shared.max_yields, shared.min_park_period_ns, shared.max_park_period_ns) == \
        (1, 2, 3_000, 4_000_000)
    bad = DriverContext.from_env({"AERON_SENDER_IDLE_STRATEGY_INIT_ARGS": "fast"}, aeron_dir=str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"^sender_idle_strategy \(AERON_SENDER_IDLE_STRATEGY, "
                                                 r"AERON_SENDER_IDLE_STRATEGY_INIT_ARGS='fast'\): backoff "
                                                 r"init_args='fast' must be"):
        bad.conclude()


# ----------------------------------------------------------------------------------- command queue, proxies
class FakeSender:
    def __init__(self):
        self.publications, self.endpoints, self.applied_on = [], [], []

    def add_publication(self, publication):
        self.publications.append(publication)
        self.applied_on.append(threading.current_thread().name)

    def remove_publication(self, publication):
        self.publications.remove(publication)
        self.applied_on.append(threading.current_thread().name)

    def add_endpoint(self, endpoint):
        self.endpoints.append(endpoint)

    def remove_endpoint(self, endpoint):
        self.endpoints.remove(endpoint)


class FakeEndpoint:
    def __init__(self):
        self.publications = []

    def add_publication(self, publication):
        self.publications.append(publication)

    def remove_publication(self, publication):
        self.publications.remove(publication)


class FakePublication:
    def __init__(self, number, endpoint):
        self.number, self.endpoint = number, endpoint


class FakeNetworkConductor:
    def __init__(self):
        self.released = []

    def on_network_publication_released(self, publication):
        self.released.append((publication.number, threading.current_thread().name))


def test_commands_offered_from_another_thread_apply_on_the_agent_s_next_duty_cycle_in_order():
    sender, endpoint, network = FakeSender(), FakeEndpoint(), FakeNetworkConductor()
    conductor_proxy = DriverConductorProxy(network, CommandQueue("driver-conductor"))
    proxy = SenderProxy(sender, conductor_proxy, CommandQueue("sender"))
    publications = [FakePublication(n, endpoint) for n in range(100)]

    def conductor():
        for publication in publications:
            proxy.new_network_publication(publication)
        for publication in publications[:50]:
            proxy.remove_network_publication(publication)

    thread = threading.Thread(target=conductor, name="conductor-thread")
    offers_before = int(proxy.queue.offers[0])
    thread.start()
    thread.join()
    assert sender.publications == [] and len(proxy.queue) == 150  # nothing applied on the offering thread
    assert int(proxy.queue.offers[0]) != offers_before  # what an idle watch wakes on
    applied = 0
    while len(proxy.queue):
        applied += proxy.queue.drain()  # the sender's duty cycle: a bounded batch each
    assert applied == 150
    assert sender.publications == publications[50:] and endpoint.publications == publications[50:]
    assert set(sender.applied_on) == {threading.current_thread().name}
    # The sender released each removed publication back to the conductor, in order, for its next cycle.
    assert network.released == []
    conductor_proxy.drain()
    assert [n for n, _ in network.released] == list(range(50))


def test_a_command_that_fails_is_not_retried_and_the_rest_wait_for_the_next_cycle():
    queue = CommandQueue("receiver")
    applied = []
    queue.offer(applied.append, 1)
    queue.offer(lambda: 1 / 0)
    queue.offer(applied.append, 3)
    with pytest.raises(ZeroDivisionError):
        queue.drain()
    assert applied == [1] and len(queue) == 1
    assert queue.drain() == 1 and applied == [1, 3]


def test_in_shared_mode_the_proxies_call_directly():
    sender, endpoint, network = FakeSender(), FakeEndpoint(), FakeNetworkConductor()
    conductor_proxy = DriverConductorProxy(network)
    proxy = SenderProxy(sender, conductor_proxy)
    publication = FakePublication(7, endpoint)
    proxy.new_network_publication(publication)
    assert sender.publications == [publication] and endpoint.publications == [publication]
    proxy.remove_network_publication(publication)
    assert sender.publications == [] and network.released == [(7, threading.current_thread().name)]
    assert conductor_proxy.drain() == 0


def test_run_directly_applies_what_was_left_queued_first_then_calls_directly():
    receiver_images = []

    class FakeReceiver:
        nano_clock = staticmethod(time.monotonic_ns)

        def add_image(self, image):
            receiver_images.append(image)

        def add_endpoint(self, endpoint):
            pass

    class Endpoint:
        def add_image(self, image):
            pass

    proxy = ReceiverProxy(FakeReceiver(), DriverConductorProxy(FakeNetworkConductor()), CommandQueue("receiver"))
    proxy.new_publication_image(Endpoint(), "a")
    assert receiver_images == []
    proxy.run_directly()
    assert receiver_images == ["a"] and proxy.is_direct
    proxy.new_publication_image(Endpoint(), "b")
    assert receiver_images == ["a", "b"]


# ----------------------------------------------------------------------------------------- runners per mode
def _driver(shm_dir, mode, **overrides) -> MediaDriver:
    return MediaDriver(DriverContext(aeron_dir=str(shm_dir / f"aeron-{mode}"), threading_mode=mode,
                                     **(SMALL | overrides)), warm_up=False)


def _label(driver: MediaDriver, counter_id: int) -> str:
    reader = ck.CountersReader(driver.cnc_file.counters_metadata_buffer, driver.cnc_file.counters_values_buffer)
    return reader.get_counter_label(counter_id)


@pytest.mark.parametrize("mode, roles, strategies", [
    ("SHARED", [], [SleepingIdleStrategy]),
    ("SHARED_NETWORK", ["[sender,receiver]"], [YieldingIdleStrategy, SleepingIdleStrategy]),
    ("DEDICATED", ["sender", "receiver"], [YieldingIdleStrategy, BackoffIdleStrategy, SleepingIdleStrategy]),
])
def test_each_mode_runs_its_agents_on_aeron_s_threads_with_their_idle_strategies(shm_dir, mode, roles, strategies):
    driver = _driver(shm_dir, mode, conductor_idle_strategy="yield", sender_idle_strategy="backoff",
                     receiver_idle_strategy="sleeping", shared_network_idle_strategy="sleeping",
                     shared_idle_strategy="sleeping")
    try:
        assert [r.role_name() for r in driver.network_runners] == roles
        runners = [driver.runner, *driver.network_runners]
        assert [type(r.idle_strategy) for r in runners] == strategies
        expected_main = "[network-cycles,driver-conductor,sender,receiver]" if mode == "SHARED" else "driver-conductor"
        assert driver.runner.role_name() == expected_main
        # aeronmd's labels name the mode the driver runs in.
        assert _label(driver, cl.SENDER_MAX_CYCLE_TIME).endswith(f": {mode}")
        assert _label(driver, cl.RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED).endswith(f": threshold=1000000000ns {mode}")
    finally:
        driver.conductor.on_close()
        driver.close()


def _run_until(driver: MediaDriver, condition, timeout_s: float = 30.0) -> list[str]:
    """Run the driver on this (main) thread; a helper thread waits for ``condition`` then asks it to stop."""
    seen: list[str] = []

    def stop_when_ready():
        try:
            await_condition(condition, timeout_s, "the driver's threads running")
        except ConditionTimeout:
            pass  # stopped all the same: the test's assertions say what was missing
        finally:
            seen.extend(t.name for t in threading.enumerate() if t.name.startswith("aeron-numba-"))
            driver.runner.request_close()

    stopper = threading.Thread(target=stop_when_ready)
    stopper.start()
    try:
        driver.run()
    finally:
        stopper.join()
    return seen


def test_closing_a_dedicated_driver_stops_every_thread_before_the_conductor_closes(shm_dir, monkeypatch):
    driver = _driver(shm_dir, "DEDICATED", dir_delete_on_shutdown=True)
    conductor_on_close = driver.conductor.on_close
    alive_at_close = []

    def on_close():
        alive_at_close.extend(t.name for t in driver.threads if t.is_alive())
        conductor_on_close()

    monkeypatch.setattr(driver.conductor, "on_close", on_close)
    counters = driver.conductor.system_counters
    running = _run_until(driver, lambda: counters.get(cl.SENDER_MAX_CYCLE_TIME) > 0 and
                         counters.get(cl.RECEIVER_MAX_CYCLE_TIME) > 0)
    assert running == ["aeron-numba-sender", "aeron-numba-receiver"]
    assert alive_at_close == []  # the conductor released everything after the network agents had stopped
    assert not any(t.is_alive() for t in driver.threads)
    assert not any(t.name.startswith("aeron-numba-") for t in threading.enumerate())
    assert not (shm_dir / "aeron-DEDICATED").exists()


@pytest.mark.parametrize("mode", ["SHARED_NETWORK", "DEDICATED"])
def test_terminate_driver_stops_every_thread(shm_dir, mode):
    driver = _driver(shm_dir, mode, allow_terminate_driver=True)
    client = RawClient(driver.cnc_file)

    def terminate_when_running():
        await_condition(lambda: driver.threads and all(t.is_alive() for t in driver.threads), 30,
                        "every network thread running")
        client.send(cp.TERMINATE_DRIVER, dc.TerminateDriverMessage, token=b"")

    helper = threading.Thread(target=terminate_when_running)
    helper.start()
    try:
        driver.run()  # returns once the conductor has handled TERMINATE_DRIVER and every thread has stopped
    finally:
        helper.join()
    assert len(driver.threads) == (1 if mode == "SHARED_NETWORK" else 2)
    assert not any(t.is_alive() for t in driver.threads) and driver.failure is None


def test_a_network_thread_that_dies_stops_the_driver_with_the_error_recorded(shm_dir, monkeypatch):
    driver = _driver(shm_dir, "SHARED_NETWORK")
    errors_before = driver.conductor.system_counters.get(cl.ERRORS)
    recorded = []
    monkeypatch.setattr(driver.conductor.error_log, "record", lambda error: recorded.append(error))

    def die():
        raise SystemExit("a bug that escapes the runner")  # not an Exception: the runner does not catch it

    monkeypatch.setattr(driver.conductor.network.receiver, "do_work", die)
    errors_at_close = []
    conductor_on_close = driver.conductor.on_close

    def on_close():  # the counters are unmapped once run() returns: read them while the driver closes
        errors_at_close.append(driver.conductor.system_counters.get(cl.ERRORS))
        conductor_on_close()

    monkeypatch.setattr(driver.conductor, "on_close", on_close)
    stopper_deadline = time.monotonic() + 30
    with pytest.raises(AeronError, match=r"^the \[sender,receiver\] agent's thread stopped: SystemExit: a bug that "
                                         r"escapes the runner; the driver stops$"):
        # No request to stop: the dying thread must stop the driver by itself.
        driver.run()
    assert time.monotonic() < stopper_deadline
    assert [str(e) for e in recorded] == ["the [sender,receiver] agent's thread stopped: SystemExit: a bug that "
                                          "escapes the runner; the driver stops"]
    assert errors_at_close == [errors_before + 1]  # counted in ERRORS too
    assert not any(t.is_alive() for t in driver.threads)


def test_an_exception_in_a_network_agent_is_counted_and_the_thread_carries_on(shm_dir, monkeypatch):
    driver = _driver(shm_dir, "DEDICATED")
    sender = driver.conductor.network.sender
    calls = []
    real_do_work = sender.do_work

    def flaky():
        calls.append(1)
        if len(calls) <= 3:
            raise ValueError(f"bad cycle {len(calls)}")
        return real_do_work()

    monkeypatch.setattr(sender, "do_work", flaky)
    counters = driver.conductor.system_counters
    before = counters.get(cl.ERRORS)
    errors_seen = []
    _run_until(driver, lambda: len(calls) > 10 and not errors_seen.append(counters.get(cl.ERRORS)))
    assert len(calls) > 10  # it kept running after the errors (Agrona's policy)
    assert errors_seen[-1] == before + 3 and driver.network_runners[0].error_count == 3
    assert driver.failure is None


# --------------------------------------------------------------------------------------------- idle watches
@pytest.mark.parametrize("mode", ["SHARED_NETWORK", "DEDICATED"])
def test_a_conductor_on_its_own_thread_waits_in_compiled_code_even_with_udp_endpoints(shm_dir, mode):
    """Its sockets are the network threads' to poll: the conductor wakes for a command, a queued request from the
    sender or receiver, or a position its limits follow."""
    driver = _driver(shm_dir, mode)
    try:
        client = RawClient(driver.cnc_file)
        client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=3,
                    channel="aeron:udp?endpoint=127.0.0.1:0")
        driver.conductor.do_work()
        network = driver.conductor.network
        assert len(network.receive_endpoints) == 1
        watch = IdleWatch()
        assert driver.runner.agent.add_idle_watch(watch)
        watch.snapshot()
        assert not watch.changed()
        network.conductor_proxy.queue.offer(lambda: None)
        assert watch.changed()
        # The receiver's thread waits on its socket.
        receiver_agent = driver.network_runners[-1].agent
        receiver_agent.do_work()  # applies the endpoint registration the conductor queued
        watch = IdleWatch()
        assert receiver_agent.add_idle_watch(watch)
        assert watch.socket_count == 1
    finally:
        driver.conductor.on_close()
        driver.close()


def test_in_shared_mode_a_driver_with_udp_endpoints_waits_on_their_sockets(shm_dir):
    driver = _driver(shm_dir, "SHARED")
    try:
        client = RawClient(driver.cnc_file)
        client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=3,
                    channel="aeron:udp?endpoint=127.0.0.1:0")
        driver.conductor.do_work()
        watch = IdleWatch()
        assert driver.runner.agent.add_idle_watch(watch)
        assert watch.socket_count == 1
    finally:
        driver.conductor.on_close()
        driver.close()


# ------------------------------------------------------------------------------- real threads, churning
@pytest.mark.parametrize("mode", ["SHARED_NETWORK", "DEDICATED"])
def test_udp_streams_opened_and_closed_while_every_agent_runs_on_its_thread_leave_nothing_behind(
        shm_dir, mode):
    """A client opens a UDP subscription and a publication to it, waits for the image, closes both, and again,
    while the conductor and the network threads run for real (a tiny GIL switch interval interleaves them at
    almost every bytecode): no error, every image and publication released, every counter but the system ones
    and the client's heartbeat freed, no log file left."""
    previous = sys.getswitchinterval()
    driver = _driver(shm_dir, mode, publication_linger_timeout_ns=0, image_liveness_timeout_ns=500 * MS,
                     publication_connection_timeout_ns=500 * MS, counter_free_to_reuse_timeout_ns=0,
                     conductor_idle_strategy="backoff", sender_idle_strategy="backoff",
                     receiver_idle_strategy="backoff", shared_network_idle_strategy="backoff")
    network, counters = driver.conductor.network, driver.conductor.system_counters
    aeron_dir = shm_dir / f"aeron-{mode}"
    outcome: dict = {}

    def responses_until(client, wanted, timeout_s=20.0):
        def wanted_response():
            for t, message in client.responses():
                if t == cp.ON_ERROR:
                    raise AssertionError(f"driver error: {message}")
                if wanted(t, message):
                    return (message,)
            return None

        return await_condition(wanted_response, timeout_s, "the wanted driver response")[0]

    def _await(condition, what, timeout_s=20.0):
        await_condition(condition, timeout_s, what)

    def workload():
        try:
            client = RawClient(driver.cnc_file)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
            for round_number in range(8):
                sub_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                     stream_id=5, channel=channel)
                responses_until(client, lambda t, m: t == cp.ON_SUBSCRIPTION_READY and m.correlation_id == sub_id)
                pub_id = client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=5,
                                     channel=f"{channel}|term-length=64k")
                responses_until(client, lambda t, m: t == cp.ON_AVAILABLE_IMAGE)
                client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=pub_id)
                if round_number % 2:  # half the rounds close the subscription before the image has gone
                    client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=sub_id)
                else:
                    responses_until(client, lambda t, m: t == cp.ON_UNAVAILABLE_IMAGE)
                    _await(lambda: not (network.images or network.releasing_images), "the image released")
                    # The endpoint closes with the subscription; opened again at once, on the same port: the
                    # conductor lets the receiver let go of the old socket and closes it before binding anew.
                    client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=sub_id)
                    again = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                        stream_id=5, channel=channel)
                    responses_until(client, lambda t, m: t == cp.ON_SUBSCRIPTION_READY and m.correlation_id == again)
                    client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=again)
                _await(lambda: not (network.publications or network.images or network.receive_endpoints or
                                    network.send_endpoints or network.releasing_publications or
                                    network.releasing_images or network.closing_endpoints), "everything released")
            reader = ck.CountersReader(driver.cnc_file.counters_metadata_buffer, driver.cnc_file.counters_values_buffer)
            outcome["counters"] = sorted(c.type_id for c in reader.counters()  # but the driver's own, for its life
                                         if c.type_id not in (cl.SYSTEM_COUNTER_TYPE_ID, cl.DOORBELL_COUNTER_TYPE_ID))
            outcome["errors"] = counters.get(cl.ERRORS)
            outcome["logs"] = sorted(p.name for p in aeron_dir.rglob("*.logbuffer"))
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["failure"] = exc
        finally:
            driver.runner.request_close()

    worker = threading.Thread(target=workload)
    sys.setswitchinterval(1e-6)
    try:
        worker.start()
        driver.run()
    finally:
        sys.setswitchinterval(previous)
        worker.join()
    assert "failure" not in outcome, outcome.get("failure")
    assert outcome == {"counters": [cl.CLIENT_HEARTBEAT_TYPE_ID], "errors": 0, "logs": []}
    assert not any(t.is_alive() for t in driver.threads)
