"""The client conductor as an Agent: its timers driven by injected clocks through ``do_work()``, and the
two ways it runs (an AgentRunner thread, or Aeron's invoker mode driven by the application).

Liveness (spec §6, §11.5) and timeouts are checked at their boundaries by moving cached clocks and
invoking the conductor; nothing here sleeps to let time pass. The timers are looked at no more often than
every TIMER_CHECK_INTERVAL_NS (16 ms, Aeron's idle period), so "just after" a boundary is one such step.
The scripted driver (``FakeDriver``) runs on its own thread where a test needs the driver to answer a
command, and is driven by hand otherwise.
"""

from __future__ import annotations

import threading

import pytest

from aeron_numba.agent import Agent, AgentInvoker, AgentTerminationException, CachedEpochClock, CachedNanoClock
from aeron_numba.client import CLOSED, ConductorServiceTimeoutError, DriverTimeoutError, RegistrationError
from aeron_numba.client.client_conductor import TIMER_CHECK_INTERVAL_NS, ClientConductor
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as counters_layout
from harness.awaiting import await_condition
from tests.unit.client_support import FakeDriver, connect, epoch_ms, mapping_count

KEEPALIVE_NS = 100_000_000
START_NS = 1_000_000_000_000


class SteppingNanoClock:
    """A nano clock that moves ``step_ns`` on every read: time passes only as fast as the code looks at it."""

    def __init__(self, start_ns: int, step_ns: int):
        self.now_ns = start_ns
        self.step_ns = step_ns

    def nano_time(self) -> int:
        self.now_ns += self.step_ns
        return self.now_ns


def connect_invoked(driver: FakeDriver, **context_kwargs):
    """A client in invoker mode on cached clocks: ``(aeron, errors, nano_clock, epoch_clock)``."""
    nano_clock = context_kwargs.pop("nano_clock", None) or CachedNanoClock(START_NS)
    epoch_clock = CachedEpochClock(epoch_ms())
    context_kwargs.setdefault("keepalive_interval_ns", KEEPALIVE_NS)
    aeron, errors = connect(
        driver, use_conductor_agent_invoker=True, nano_clock=nano_clock, epoch_clock=epoch_clock, **context_kwargs
    )
    return aeron, errors, nano_clock, epoch_clock


def stop_driver_heartbeat(driver: FakeDriver) -> int:
    """Stop the running driver's heartbeat; return the last one it wrote (epoch ms)."""
    driver.heartbeat = False
    cycle_done = threading.Event()
    # A task runs after its cycle's heartbeat write: once it has run, no later cycle writes one.
    driver.run_on_driver(cycle_done.set)
    await_condition(cycle_done.is_set, 5, "a driver duty cycle after the heartbeat stopped")
    return driver.ring.consumer_heartbeat_time()


def conductor_threads(client_id: int) -> list[threading.Thread]:
    name = f"{ClientConductor.ROLE_NAME}-{client_id}"
    return [thread for thread in threading.enumerate() if thread.name == name]


@pytest.fixture
def manual_driver(shm_dir):
    """A driver whose duty cycle only runs when the test calls ``do_work()``."""
    with FakeDriver(shm_dir / "aeron", start=False) as fake:
        fake.heartbeat = False  # the test writes the driver heartbeat itself
        yield fake


# ------------------------------------------------------------------------------------------ agent contract
def test_conductor_runs_on_an_agent_runner_thread_by_default(driver):
    aeron, errors = connect(driver)
    with aeron:
        conductor = aeron.conductor
        assert isinstance(conductor, Agent)
        assert conductor.role_name() == "aeron-client-conductor"
        assert aeron.conductor_agent_invoker is None
        threads = conductor_threads(aeron.client_id)
        assert len(threads) == 1 and threads[0].daemon
    threads[0].join(5)
    assert not threads[0].is_alive() and aeron.is_closed
    assert errors == []


def test_invoker_mode_has_no_thread_and_closes_through_the_invoker(driver):
    aeron, errors, _, _ = connect_invoked(driver)
    invoker = aeron.conductor_agent_invoker
    assert isinstance(invoker, AgentInvoker) and invoker.agent is aeron.conductor
    assert invoker.is_running and not invoker.is_closed
    assert conductor_threads(aeron.client_id) == []
    assert invoker.invoke() >= 0
    cnc_path = driver.aeron_dir / "cnc.dat"
    assert mapping_count(cnc_path) == 2
    aeron.close()
    assert invoker.is_closed and not invoker.is_running
    assert invoker.invoke() == 0
    assert mapping_count(cnc_path) == 1  # unmapped by the conductor's on_close
    assert driver.wait_for_command(cp.CLIENT_CLOSE)[0].client_id == aeron.client_id
    assert errors == []


def test_do_work_raises_agent_termination_once_closed(driver):
    aeron, _, _, _ = connect_invoked(driver)
    conductor = aeron.conductor
    aeron.close()
    with pytest.raises(AgentTerminationException, match=f"client_id={aeron.client_id} is closed"):
        conductor.do_work()


# ---------------------------------------------------------------------------------------------- keepalive
def test_keepalive_is_sent_each_time_the_clock_passes_the_interval(manual_driver):
    """Until the driver has allocated the heartbeat counter the conductor sends CLIENT_KEEPALIVE (§11.5)."""
    aeron, errors, nano, _ = connect_invoked(manual_driver)
    invoker = aeron.conductor_agent_invoker

    def keepalives() -> int:
        messages = manual_driver.ring.read_messages()
        return sum(1 for msg_type_id, _ in messages if msg_type_id == cp.CLIENT_KEEPALIVE)

    with aeron:
        assert keepalives() == 1  # sent on connect, so that the driver allocates the counter at once
        nano.advance(KEEPALIVE_NS - 1)
        invoker.invoke()
        assert keepalives() == 0
        nano.advance(TIMER_CHECK_INTERVAL_NS)
        assert invoker.invoke() == 1
        assert keepalives() == 1
        invoker.invoke()
        assert keepalives() == 0  # once per interval, however often it is invoked
        nano.advance(KEEPALIVE_NS)
        invoker.invoke()
        assert keepalives() == 1
    assert errors == []


def test_heartbeat_counter_is_found_and_updated_on_the_epoch_clock(manual_driver):
    aeron, errors, nano, epoch = connect_invoked(manual_driver, client_name="tester")
    invoker = aeron.conductor_agent_invoker
    with aeron:
        manual_driver.do_work()  # the driver sees the keepalive and allocates the heartbeat counter (type 11)
        counter_id = manual_driver.heartbeat_counter_by_client[aeron.client_id]
        reader = aeron.counters_reader
        assert reader.get_counter_type_id(counter_id) == counters_layout.CLIENT_HEARTBEAT_TYPE_ID
        manual_driver.ring.set_consumer_heartbeat_time(epoch.time())

        nano.advance(KEEPALIVE_NS - 1)
        invoker.invoke()
        assert aeron.conductor.heartbeat_counter_id == counters_layout.NULL_COUNTER_ID  # not looked for yet
        nano.advance(TIMER_CHECK_INTERVAL_NS)
        invoker.invoke()
        assert aeron.conductor.heartbeat_counter_id == counter_id
        assert manual_driver.counter_value(counter_id) == epoch.time()
        label = reader.get_counter_label(counter_id)
        assert label.startswith(f"client-heartbeat: id={aeron.client_id} name=tester version=")

        first = epoch.time()
        epoch.advance(250)
        manual_driver.ring.set_consumer_heartbeat_time(epoch.time())
        nano.advance(KEEPALIVE_NS - 1)
        invoker.invoke()
        assert manual_driver.counter_value(counter_id) == first
        nano.advance(TIMER_CHECK_INTERVAL_NS)
        invoker.invoke()
        assert manual_driver.counter_value(counter_id) == first + 250
        assert manual_driver.commands_of(cp.CLIENT_KEEPALIVE) != []
    assert errors == []


def test_an_idle_conductor_does_no_work_between_keepalives(manual_driver):
    """Nothing to do is 0 work (issue 16: an idle agent must let its idle strategy back off): the 16 ms timer
    checks in between count nothing; writing the heartbeat counter each keepalive interval does."""
    aeron, errors, nano, epoch = connect_invoked(manual_driver)
    invoker = aeron.conductor_agent_invoker
    with aeron:
        manual_driver.do_work()  # allocates the client's heartbeat counter
        counter_id = manual_driver.heartbeat_counter_by_client[aeron.client_id]
        for keepalive in range(3):
            for _ in range((KEEPALIVE_NS + TIMER_CHECK_INTERVAL_NS) // 1_000_000):  # 1 ms steps
                nano.advance(1_000_000)
                epoch.advance(1)
                manual_driver.ring.set_consumer_heartbeat_time(epoch.time())
                work = invoker.invoke()
                if manual_driver.counter_value(counter_id) == epoch.time() and work == 1:
                    break  # the keepalive: the heartbeat counter written
                assert work == 0
            else:
                pytest.fail(f"no keepalive {keepalive} within {KEEPALIVE_NS + TIMER_CHECK_INTERVAL_NS} ns")
    assert errors == []


def test_the_conductors_idle_watch_names_driver_events_a_cycle_left_unread(manual_driver):
    """A duty cycle that runs the conductor only when its watch says so (a cluster member's) must not leave the
    driver's answers past one cycle's batch unread until the next keepalive."""
    from aeron_numba.agent.clock import SystemNanoClock
    from aeron_numba.agent.idle_watch import IdleWatch
    from aeron_numba.client.client_conductor import ClientConductor
    from aeron_numba.client.driver_events_adapter import MESSAGE_BATCH

    assert ClientConductor.names_work_left

    def watch_changed(conductor) -> bool:
        watch = IdleWatch()
        assert conductor.add_idle_watch(watch)
        watch.snapshot()
        return watch.changed()

    aeron, errors, _, _ = connect_invoked(manual_driver, nano_clock=SystemNanoClock)
    invoker = aeron.conductor_agent_invoker
    conductor = invoker.agent
    with aeron:
        manual_driver.do_work()
        invoker.invoke()
        assert not watch_changed(conductor)  # nothing from the driver: nothing to do
        answered = len(manual_driver.responses)
        registrations = [aeron.async_add_subscription("aeron:ipc", 50 + i) for i in range(MESSAGE_BATCH + 6)]
        manual_driver.do_work()
        manual_driver.do_work()  # 64 commands a cycle
        assert len(manual_driver.responses) == answered + len(registrations)
        assert watch_changed(conductor)  # answers sent
        invoker.invoke()  # one batch of them
        assert watch_changed(conductor)  # the rest, though the broadcast's tail has not moved since
        invoker.invoke()
        assert not watch_changed(conductor)
        assert all(aeron.get_subscription(r) is not None for r in registrations)
    assert errors == []


# ------------------------------------------------------------------------------------------ driver liveness
def test_driver_timeout_closes_the_client(driver):
    """The driver is dead once its heartbeat is older than driver_timeout_ms by the client's epoch clock."""
    aeron, errors, nano, epoch = connect_invoked(driver, driver_timeout_ms=500)
    invoker = aeron.conductor_agent_invoker
    publication = aeron.add_publication("aeron:ipc", 7)
    last_heartbeat_ms = stop_driver_heartbeat(driver)

    epoch.update(last_heartbeat_ms + 500)  # exactly the timeout: still alive
    nano.advance(KEEPALIVE_NS)
    invoker.invoke()
    assert errors == [] and not aeron.is_closed

    epoch.update(last_heartbeat_ms + 501)
    nano.advance(KEEPALIVE_NS)
    invoker.invoke()
    assert len(errors) == 1 and isinstance(errors[0], DriverTimeoutError)
    assert "age=501ms > driver_timeout_ms=500" in str(errors[0])
    assert aeron.is_closed
    assert publication.is_closed and publication.offer(b"x") == CLOSED
    with pytest.raises(DriverTimeoutError, match="MediaDriver keepalive"):
        aeron.add_subscription("aeron:ipc", 7)
    with pytest.raises(DriverTimeoutError):
        aeron.add_publication("aeron:ipc", 7)
    invoker.invoke()
    assert invoker.is_closed  # the conductor ended its agent (AgentTerminationException)
    aeron.close()
    assert driver.commands_of(cp.CLIENT_CLOSE) == []  # the driver is gone: no CLIENT_CLOSE
    assert len(errors) == 1


def test_driver_shutdown_heartbeat_null_is_reported(manual_driver):
    aeron, errors, nano, _ = connect_invoked(manual_driver, driver_timeout_ms=500)
    with aeron:
        manual_driver.ring.set_consumer_heartbeat_time(-1)
        nano.advance(KEEPALIVE_NS)
        aeron.conductor_agent_invoker.invoke()
        assert len(errors) == 1 and isinstance(errors[0], DriverTimeoutError)
        assert "has been shut down" in str(errors[0])
        assert aeron.is_closed


def test_error_handler_may_close_the_client_inside_an_invoked_duty_cycle(manual_driver):
    """The unmapping waits for the end of the cycle that is still reading the broadcast buffer."""
    errors = []
    box = {}

    def on_error(error):
        errors.append(error)
        box["aeron"].close()

    aeron, _, nano, _ = connect_invoked(manual_driver, error_handler=on_error)
    box["aeron"] = aeron
    cnc_path = manual_driver.aeron_dir / "cnc.dat"
    manual_driver.send_client_timeout(aeron.client_id)  # handled inside the adapter's receive loop
    manual_driver.do_work()
    assert mapping_count(cnc_path) == 2
    aeron.conductor_agent_invoker.invoke()
    assert len(errors) == 1 and "ON_CLIENT_TIMEOUT" in str(errors[0])
    assert aeron.is_closed and aeron.conductor_agent_invoker.is_closed
    assert mapping_count(cnc_path) == 1


def test_driver_timeout_on_the_conductor_thread_may_close_the_client_from_the_error_handler(driver):
    """Thread mode: the error handler runs on the conductor thread; closing there unmaps when its loop ends."""
    nano = CachedNanoClock(START_NS)
    epoch = CachedEpochClock(epoch_ms())
    errors = []
    box = {}

    def on_error(error):
        errors.append(error)
        box["aeron"].close()

    aeron, _ = connect(driver, driver_timeout_ms=500, keepalive_interval_ns=KEEPALIVE_NS, nano_clock=nano,
                       epoch_clock=epoch, error_handler=on_error)
    box["aeron"] = aeron
    [thread] = conductor_threads(aeron.client_id)
    cnc_path = driver.aeron_dir / "cnc.dat"
    assert mapping_count(cnc_path) == 2
    epoch.update(stop_driver_heartbeat(driver) + 501)
    nano.advance(KEEPALIVE_NS)
    await_condition(lambda: not thread.is_alive(), 5, "conductor thread ended")
    assert len(errors) == 1 and isinstance(errors[0], DriverTimeoutError)
    assert aeron.is_closed and mapping_count(cnc_path) == 1
    aeron.close()  # idempotent from the application thread too


# ------------------------------------------------------------------------------------------ service timeout
def test_conductor_not_serviced_within_liveness_timeout_closes_the_client(shm_dir):
    with FakeDriver(shm_dir / "aeron", client_liveness_timeout_ns=600_000_000) as driver:
        aeron, errors, nano, _ = connect_invoked(driver)
        invoker = aeron.conductor_agent_invoker
        with aeron:
            publication = aeron.add_publication("aeron:ipc", 22)
            nano.advance(600_000_000)  # not serviced for exactly the liveness timeout: still alive
            invoker.invoke()
            assert errors == [] and not aeron.is_closed
            nano.advance(600_000_001)
            invoker.invoke()
            assert len(errors) == 1 and isinstance(errors[0], ConductorServiceTimeoutError)
            assert "> client liveness timeout 600 ms" in str(errors[0])
            assert aeron.is_closed and publication.is_closed
            with pytest.raises(ConductorServiceTimeoutError):
                aeron.add_subscription("aeron:ipc", 22)


# ---------------------------------------------------------------------------------------- awaiting replies
def test_no_response_raises_driver_timeout_by_the_nano_clock_but_keeps_the_client(driver):
    nano = SteppingNanoClock(START_NS, step_ns=1_000_000)
    aeron, errors, _, _ = connect_invoked(driver, driver_timeout_ms=400, nano_clock=nano, await_response_sleep_ns=0)
    with aeron:
        driver.respond = False
        started_ns = nano.now_ns
        with pytest.raises(DriverTimeoutError, match="no response from MediaDriver to ADD_PUBLICATION"):
            aeron.add_publication("aeron:ipc", 5)
        assert nano.now_ns - started_ns >= 400_000_000
        driver.respond = True
        assert not aeron.is_closed
        assert aeron.add_publication("aeron:ipc", 5).stream_id == 5
    assert errors == []


# ------------------------------------------------------------------------------------------ resource linger
def test_released_log_stays_mapped_for_the_linger_duration_by_the_nano_clock(driver):
    aeron, errors, nano, _ = connect_invoked(driver, resource_linger_duration_ns=1_000_000_000)
    invoker = aeron.conductor_agent_invoker
    with aeron:
        publication = aeron.add_publication("aeron:ipc", 30)
        path = publication.log_file_name
        assert mapping_count(path) == 2  # the driver's and the client's
        publication.close()
        conductor = aeron.conductor
        assert conductor.mapped_log_count == 0 and conductor.lingering_log_count == 1

        nano.advance(999_999_999)  # a keepalive check just before the linger ends
        invoker.invoke()
        assert conductor.lingering_log_count == 1 and mapping_count(path) == 2
        nano.advance(KEEPALIVE_NS)  # the first keepalive check after it unmaps
        invoker.invoke()
        assert conductor.lingering_log_count == 0 and mapping_count(path) == 1
    assert errors == []


# ------------------------------------------------------------------------------------------- invoker mode
def test_invoker_mode_delivers_images_on_the_invoking_thread(driver):
    aeron, errors, _, _ = connect_invoked(driver)
    invoker = aeron.conductor_agent_invoker
    handler_threads = []
    with aeron:
        subscription = aeron.add_subscription(
            "aeron:ipc", 40, available_image_handler=lambda image: handler_threads.append(threading.get_ident())
        )
        publication = aeron.add_publication("aeron:ipc", 40)
        await_condition(lambda: invoker.invoke() >= 0 and subscription.image_count == 1, 5, "image available")
        assert handler_threads == [threading.get_ident()]
        await_condition(lambda: publication.offer(b"hello") > 0, 5, "offer")
        received = []
        await_condition(
            lambda: subscription.poll(lambda b, o, n, h: received.append(bytes(b[o:o + n])), 10) or received,
            5, "message",
        )
        assert received == [b"hello"]
    assert errors == []


# ------------------------------------------------------------------------------ asynchronous registrations
def test_an_async_add_returns_at_once_and_its_resource_comes_with_the_drivers_answer(manual_driver):
    """Aeron's asyncAdd* / get*: nothing waits on the driver; the conductor's duty cycle takes the answer."""
    aeron, errors, nano, _ = connect_invoked(manual_driver)
    invoker = aeron.conductor_agent_invoker
    with aeron:
        publication_id = aeron.async_add_exclusive_publication("aeron:ipc", 31)
        subscription_id = aeron.async_add_subscription("aeron:ipc", 31)
        invoker.invoke()
        assert aeron.get_exclusive_publication(publication_id) is None  # the driver has not run
        assert aeron.get_subscription(subscription_id) is None
        manual_driver.do_work()
        assert aeron.get_exclusive_publication(publication_id) is None  # answered, not yet taken by the conductor
        invoker.invoke()
        publication = aeron.get_exclusive_publication(publication_id)
        subscription = aeron.get_subscription(subscription_id)
        assert (publication.registration_id, publication.stream_id) == (publication_id, 31)
        assert (subscription.registration_id, subscription.channel) == (subscription_id, "aeron:ipc")
        assert aeron.get_publication(publication_id) is None  # not a concurrent publication
        assert aeron.get_exclusive_publication(publication_id) is publication  # asked again: the same one
        aeron.async_remove_publication(publication_id)
        assert publication.is_closed
    assert errors == []


def test_an_async_add_the_driver_refuses_raises_its_error_once(manual_driver):
    aeron, errors, nano, _ = connect_invoked(manual_driver)
    invoker = aeron.conductor_agent_invoker
    with aeron:
        manual_driver.fail_next(cp.ADD_SUBSCRIPTION, cp.INVALID_CHANNEL, "bad channel for test")
        registration_id = aeron.async_add_subscription("aeron:ipc", 32)
        manual_driver.do_work()
        invoker.invoke()
        with pytest.raises(RegistrationError, match="bad channel for test"):
            aeron.get_subscription(registration_id)
        assert aeron.get_subscription(registration_id) is None  # reported once, as Aeron
    assert errors == []


def test_an_async_add_not_answered_within_the_driver_timeout_raises_driver_timeout(manual_driver):
    aeron, errors, nano, _ = connect_invoked(manual_driver)
    with aeron:
        registration_id = aeron.async_add_publication("aeron:ipc", 33)
        nano.advance(aeron.conductor.driver_timeout_ns)
        assert aeron.get_publication(registration_id) is None  # at the deadline: still waiting
        nano.advance(1)
        with pytest.raises(DriverTimeoutError, match=f"registration_id={registration_id}"):
            aeron.get_publication(registration_id)


def test_an_async_add_given_up_while_pending_is_removed_at_the_driver(manual_driver):
    aeron, errors, nano, _ = connect_invoked(manual_driver)
    invoker = aeron.conductor_agent_invoker
    with aeron:
        registration_id = aeron.async_add_subscription("aeron:ipc", 34)
        aeron.async_remove_subscription(registration_id)
        manual_driver.do_work()
        invoker.invoke()
        [remove] = manual_driver.commands_of(cp.REMOVE_SUBSCRIPTION)
        assert remove.registration_id == registration_id
        assert aeron.get_subscription(registration_id) is None  # its late answer is not taken up
    assert errors == []
