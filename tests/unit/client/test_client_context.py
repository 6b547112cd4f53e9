"""Client Context: Aeron's defaults (spec §14), environment variables, and conclude() validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeron_numba.aeron_dir import default_aeron_dir
from aeron_numba.agent import CachedEpochClock, CachedNanoClock, SystemEpochClock, SystemNanoClock
from aeron_numba.client import Context
from aeron_numba.client import context as C
from aeron_numba.errors import ConfigurationError


def test_defaults_match_spec_section_14():
    ctx = Context(aeron_dir="/tmp/x", environ={}).conclude()
    assert ctx.driver_timeout_ms == 10_000
    assert ctx.keepalive_interval_ns == 500_000_000
    assert ctx.resource_linger_duration_ns == 3_000_000_000
    assert ctx.idle_sleep_duration_ns == 16_000_000
    assert ctx.client_name == ""
    assert ctx.aeron_dir == Path("/tmp/x")
    assert ctx.cnc_file_path == Path("/tmp/x/cnc.dat")
    assert ctx.driver_timeout_ns == 10_000_000_000
    assert callable(ctx.error_handler)
    assert ctx.use_conductor_agent_invoker is False  # the conductor runs on its own thread
    assert ctx.nano_clock is SystemNanoClock and ctx.epoch_clock is SystemEpochClock


def test_default_aeron_dir_comes_from_resolve_aeron_dir():
    environ = {"USER": "someone"}
    assert Context(environ=environ).conclude().aeron_dir == default_aeron_dir(environ)
    environ = {"AERON_DIR": "/dev/shm/somewhere-else"}
    assert Context(environ=environ).conclude().aeron_dir == Path("/dev/shm/somewhere-else")


def test_environment_variables_are_read_by_conclude():
    environ = {
        C.DRIVER_TIMEOUT_ENV: "2500",
        C.RESOURCE_LINGER_DURATION_ENV: "250ms",
        C.IDLE_SLEEP_DURATION_ENV: "5ms",
        C.CLIENT_NAME_ENV: "orders",
    }
    ctx = Context(aeron_dir="/tmp/x", environ=environ).conclude()
    assert ctx.driver_timeout_ms == 2500
    assert ctx.resource_linger_duration_ns == 250_000_000
    assert ctx.idle_sleep_duration_ns == 5_000_000
    assert ctx.client_name == "orders"
    assert ctx.use_conductor_agent_invoker is False


def test_use_conductor_agent_invoker_is_set_in_code_only():
    environ = {"AERON_USE_CONDUCTOR_AGENT_INVOKER": "true"}  # not a setting (Aeron has no such variable)
    assert Context(aeron_dir="/tmp/x", environ=environ).conclude().use_conductor_agent_invoker is False
    assert Context(aeron_dir="/tmp/x", use_conductor_agent_invoker=True, environ={}).conclude().use_conductor_agent_invoker
    with pytest.raises(ConfigurationError, match="use_conductor_agent_invoker='yes' must be a bool"):
        Context(aeron_dir="/tmp/x", use_conductor_agent_invoker="yes", environ={}).conclude()


def test_clocks_are_injected():
    nano_clock, epoch_clock = CachedNanoClock(5), CachedEpochClock(7)
    ctx = Context(aeron_dir="/tmp/x", nano_clock=nano_clock, epoch_clock=epoch_clock, environ={}).conclude()
    assert ctx.nano_clock is nano_clock and ctx.epoch_clock is epoch_clock


def test_explicit_values_beat_the_environment():
    ctx = Context(aeron_dir="/tmp/x", driver_timeout_ms=700, environ={C.DRIVER_TIMEOUT_ENV: "2500"}).conclude()
    assert ctx.driver_timeout_ms == 700


@pytest.mark.parametrize(
    "kwargs, fragments",
    [
        (dict(driver_timeout_ms=0), ["driver_timeout_ms=0", "< 1"]),
        (dict(driver_timeout_ms=400), ["keepalive_interval_ns=500000000", "driver_timeout_ms * 1e6=400000000"]),
        (dict(keepalive_interval_ns=0), ["keepalive_interval_ns=0", "< 1"]),
        (dict(resource_linger_duration_ns=-1), ["resource_linger_duration_ns=-1", "< 0"]),
        (dict(idle_sleep_duration_ns=600_000_000), ["idle_sleep_duration_ns=600000000", "keepalive_interval_ns=500000000"]),
        (dict(client_name="x" * 101), ["client_name length=101", "MAX_CLIENT_NAME_LENGTH=100"]),
        (dict(client_name="caf\u00e9"), ["client_name", "ASCII"]),
        (dict(error_handler=42), ["error_handler=42", "callable"]),
        (dict(driver_timeout_ms="10"), ["driver_timeout_ms='10'", "int"]),
        (dict(use_conductor_agent_invoker="yes"), ["use_conductor_agent_invoker='yes'", "bool"]),
        (dict(nano_clock=42), ["nano_clock=42", "nano_time()"]),
        (dict(epoch_clock=CachedNanoClock()), ["epoch_clock=CachedNanoClock(0)", "time()"]),
    ],
)
def test_conclude_names_value_and_limit(kwargs, fragments):
    with pytest.raises(ConfigurationError) as info:
        Context(aeron_dir="/tmp/x", environ={}, **kwargs).conclude()
    for fragment in fragments:
        assert fragment in str(info.value)


def test_bad_environment_values_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="AERON_DRIVER_TIMEOUT='ten'"):
        Context(aeron_dir="/tmp/x", environ={C.DRIVER_TIMEOUT_ENV: "ten"}).conclude()
    with pytest.raises(ConfigurationError, match="AERON_CLIENT_RESOURCE_LINGER_DURATION"):
        Context(aeron_dir="/tmp/x", environ={C.RESOURCE_LINGER_DURATION_ENV: "soon"}).conclude()


def test_conclude_is_idempotent():
    ctx = Context(aeron_dir="/tmp/x", environ={})
    assert ctx.conclude() is ctx
    ctx.driver_timeout_ms = 0  # changed after conclude: no second validation
    assert ctx.conclude() is ctx
