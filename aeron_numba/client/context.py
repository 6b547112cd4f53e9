"""Settings of an Aeron client (Aeron's ``Aeron.Context``), with Aeron's defaults (spec/transport.md §14).

Every setting is a keyword argument with a default; the few that Aeron also reads from the environment
are read here and nowhere else (``AERON_DIR`` through ``resolve_aeron_dir``). ``conclude()`` validates and
derives everything before ``Aeron.connect`` touches a file, and its errors quote the value and the limit.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from aeron_numba.agent.clock import SystemEpochClock, SystemNanoClock
from aeron_numba.codecs.channel_uri import parse_duration_ns
from aeron_numba.errors import ConfigurationError, InvalidChannelError

# §14 client defaults.
DEFAULT_DRIVER_TIMEOUT_MS = 10_000
DEFAULT_KEEPALIVE_INTERVAL_NS = 500_000_000
DEFAULT_RESOURCE_LINGER_DURATION_NS = 3_000_000_000
DEFAULT_IDLE_SLEEP_DURATION_NS = 16_000_000
#: Sleep of the application thread between polls of the broadcast buffer while awaiting a response.
DEFAULT_AWAIT_RESPONSE_SLEEP_NS = 1_000_000
MAX_CLIENT_NAME_LENGTH = 100

# Environment variables (Aeron's system properties, upper-cased with '_').
DRIVER_TIMEOUT_ENV = "AERON_DRIVER_TIMEOUT"  # ms
RESOURCE_LINGER_DURATION_ENV = "AERON_CLIENT_RESOURCE_LINGER_DURATION"  # ns, or with a ns/us/ms/s suffix
IDLE_SLEEP_DURATION_ENV = "AERON_CLIENT_IDLE_SLEEP_DURATION"  # ns, or with a suffix
CLIENT_NAME_ENV = "AERON_CLIENT_NAME"

ErrorHandler = Callable[[BaseException], None]


def default_error_handler(error: BaseException) -> None:
    """Aeron's default: print the error and carry on."""
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"{name}={text!r} is not an integer") from None


def _env_duration_ns(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name)
    if text is None or text == "":
        return None
    try:
        return parse_duration_ns(name, text)
    except InvalidChannelError as exc:
        raise ConfigurationError(str(exc)) from None


def _check_int(name: str, value, low: int, high: int | None = None, high_name: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name}={value!r} must be an int")
    if value < low:
        raise ConfigurationError(f"{name}={value} < {low}")
    if high is not None and value > high:
        raise ConfigurationError(f"{name}={value} > {high_name or high}")
    return value


@dataclass
class Context:
    """Client settings. ``None`` means "Aeron's default, or the environment variable if set".

    Attributes
    ----------
    aeron_dir : str or Path, optional
        Driver directory holding ``cnc.dat`` (default: ``resolve_aeron_dir()``: ``AERON_DIR`` or
        ``/dev/shm/aeron-<user>``).
    driver_timeout_ms : int, optional
        How long the driver may go without a heartbeat, and how long to wait for it to answer a command
        (default 10 000, env ``AERON_DRIVER_TIMEOUT``).
    keepalive_interval_ns : int
        Period of the client heartbeat and of the driver liveness check (500 ms).
    resource_linger_duration_ns : int, optional
        How long a released log buffer stays mapped before it is unmapped (3 s, env
        ``AERON_CLIENT_RESOURCE_LINGER_DURATION``).
    idle_sleep_duration_ns : int, optional
        Sleep of the conductor thread when a duty cycle found no work (16 ms, env
        ``AERON_CLIENT_IDLE_SLEEP_DURATION``).
    client_name : str, optional
        Appended to the client's heartbeat counter label (env ``AERON_CLIENT_NAME``).
    error_handler : callable, optional
        Receives errors raised in the conductor's duty cycle (driver/client timeouts, async command errors),
        on its thread or, in invoker mode, on the thread calling ``invoke()``.
    available_image_handler, unavailable_image_handler : callable, optional
        Default ``handler(image)`` for subscriptions that do not pass their own.
    await_response_sleep_ns : int
        Sleep between polls of the driver's responses while an API call waits for one (1 ms).
    use_conductor_agent_invoker : bool, optional
        False (default): the client conductor runs on its own daemon thread. Set in code only, as in Aeron (a
        process-wide variable would leave every client that never calls ``invoke()`` to time out). True: no thread; the application drives it with ``aeron.conductor_agent_invoker.invoke()``
        often enough to keep the client alive (well within the driver's client liveness timeout).
    driver_agent_invoker : object with ``invoke()``, optional
        The invoker of a media driver that runs on this client's own thread (Aeron's ``driverAgentInvoker``: a
        ``ClusteredMediaDriver`` runs its driver, archive and consensus module as one duty cycle). An API call that
        awaits the driver's answer then invokes the driver instead of sleeping, since nothing else would run it.
    nano_clock : object with ``nano_time()``
        Monotonic time of every conductor timer: keepalive, service and response timeouts, linger
        (``SystemNanoClock``; tests inject a ``CachedNanoClock``).
    epoch_clock : object with ``time()``
        Epoch milliseconds compared with the driver's heartbeat and written to the client's heartbeat
        counter (``SystemEpochClock``).
    environ : mapping, optional
        Where environment variables are read from (``os.environ``); tests pass a dict.
    """

    aeron_dir: str | os.PathLike | None = None
    driver_timeout_ms: int | None = None
    keepalive_interval_ns: int = DEFAULT_KEEPALIVE_INTERVAL_NS
    resource_linger_duration_ns: int | None = None
    idle_sleep_duration_ns: int | None = None
    client_name: str | None = None
    error_handler: ErrorHandler | None = None
    available_image_handler: Callable | None = None
    unavailable_image_handler: Callable | None = None
    await_response_sleep_ns: int = DEFAULT_AWAIT_RESPONSE_SLEEP_NS
    use_conductor_agent_invoker: bool = False
    driver_agent_invoker: object = field(default=None, repr=False)
    nano_clock: object = field(default=SystemNanoClock, repr=False)
    epoch_clock: object = field(default=SystemEpochClock, repr=False)
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    _is_concluded: bool = field(default=False, init=False, repr=False)

    def conclude(self) -> "Context":
        """Fill in defaults from the environment, validate every value, and return ``self``.

        Raises ``ConfigurationError`` naming the setting, its value and the limit it broke. Calling it
        again is a no-op; ``Aeron.connect`` calls it.
        """
        if self._is_concluded:
            return self
        environ = os.environ if self.environ is None else self.environ

        if self.aeron_dir is None:
            from aeron_numba.aeron_dir import resolve_aeron_dir

            self.aeron_dir = resolve_aeron_dir(None, environ)
        self.aeron_dir = Path(self.aeron_dir)

        if self.driver_timeout_ms is None:
            env = _env_int(environ, DRIVER_TIMEOUT_ENV)
            self.driver_timeout_ms = DEFAULT_DRIVER_TIMEOUT_MS if env is None else env
        if self.resource_linger_duration_ns is None:
            env = _env_duration_ns(environ, RESOURCE_LINGER_DURATION_ENV)
            self.resource_linger_duration_ns = DEFAULT_RESOURCE_LINGER_DURATION_NS if env is None else env
        if self.idle_sleep_duration_ns is None:
            env = _env_duration_ns(environ, IDLE_SLEEP_DURATION_ENV)
            self.idle_sleep_duration_ns = DEFAULT_IDLE_SLEEP_DURATION_NS if env is None else env
        if self.client_name is None:
            self.client_name = environ.get(CLIENT_NAME_ENV, "")

        _check_int("driver_timeout_ms", self.driver_timeout_ms, 1)
        driver_timeout_ns = self.driver_timeout_ms * 1_000_000
        _check_int(
            "keepalive_interval_ns", self.keepalive_interval_ns, 1, driver_timeout_ns,
            f"driver_timeout_ms * 1e6={driver_timeout_ns}",
        )
        _check_int("resource_linger_duration_ns", self.resource_linger_duration_ns, 0)
        _check_int(
            "idle_sleep_duration_ns", self.idle_sleep_duration_ns, 1, self.keepalive_interval_ns,
            f"keepalive_interval_ns={self.keepalive_interval_ns}",
        )
        _check_int(
            "await_response_sleep_ns", self.await_response_sleep_ns, 0, self.idle_sleep_duration_ns,
            f"idle_sleep_duration_ns={self.idle_sleep_duration_ns}",
        )
        if not isinstance(self.client_name, str):
            raise ConfigurationError(f"client_name={self.client_name!r} must be a str")
        if len(self.client_name) > MAX_CLIENT_NAME_LENGTH:
            raise ConfigurationError(
                f"client_name length={len(self.client_name)} > MAX_CLIENT_NAME_LENGTH={MAX_CLIENT_NAME_LENGTH}"
            )
        if not self.client_name.isascii():
            raise ConfigurationError(f"client_name={self.client_name!r} must be ASCII")
        if not isinstance(self.use_conductor_agent_invoker, bool):
            raise ConfigurationError(f"use_conductor_agent_invoker={self.use_conductor_agent_invoker!r} must be a bool")
        if self.driver_agent_invoker is not None and not callable(getattr(self.driver_agent_invoker, "invoke", None)):
            raise ConfigurationError(f"driver_agent_invoker={self.driver_agent_invoker!r} must have invoke()")
        if not callable(getattr(self.nano_clock, "nano_time", None)):
            raise ConfigurationError(f"nano_clock={self.nano_clock!r} must have nano_time()")
        if not callable(getattr(self.epoch_clock, "time", None)):
            raise ConfigurationError(f"epoch_clock={self.epoch_clock!r} must have time()")
        if self.error_handler is None:
            self.error_handler = default_error_handler
        for name in ("error_handler", "available_image_handler", "unavailable_image_handler"):
            handler = getattr(self, name)
            if handler is not None and not callable(handler):
                raise ConfigurationError(f"{name}={handler!r} must be callable")
        self._is_concluded = True
        return self

    @property
    def driver_timeout_ns(self) -> int:
        """``driver_timeout_ms`` in nanoseconds."""
        return self.driver_timeout_ms * 1_000_000

    @property
    def cnc_file_path(self) -> Path:
        """``<aeron_dir>/cnc.dat``."""
        from aeron_numba.layout.cnc import CNC_FILE

        return Path(self.aeron_dir) / CNC_FILE
