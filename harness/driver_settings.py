"""The media driver settings of our test, chaos and benchmark drivers, written once as ``AERON_*`` variables.

Test drivers (integration tests, chaos scenarios) share two cores with their clients and must notice a
failure quickly: small buffers and terms, short timeouts, a conductor that backs off when idle. Benchmark
drivers keep Aeron's client timeouts instead, because a client's conductor thread there shares its core with
a spinning loop, and each benchmark picks the conductor's idle strategy its transport needs.

Each function returns a new dict; ``overrides`` are added last, so a caller's value wins. (No name starts
with ``test_``: pytest would collect it from the test modules that import it.)
"""

from __future__ import annotations

from aeron_numba.driver.context import idle_strategy_environment

# The test drivers' timeouts, in the units the scenarios and tests that wait on them use.
CLIENT_LIVENESS_TIMEOUT_S = 2.0
PUBLICATION_UNBLOCK_TIMEOUT_S = 3.0
DRIVER_TIMEOUT_MS = 2000

#: Aeron's own client timeouts, set explicitly for drivers whose clients' conductor threads compete for a core
#: with a spinning loop or several other processes (benchmarks, the multicast tests' three drivers).
LENIENT_CLIENT_TIMEOUTS = {
    "AERON_CLIENT_LIVENESS_TIMEOUT": "10s",
    "AERON_PUBLICATION_UNBLOCK_TIMEOUT": "15s",
}


def driver_env_for_tests(**overrides: str) -> dict[str, str]:
    """A test driver: client liveness 2 s, unblock 3 s, timer 100 ms, driver timeout 2 s, no linger, 1 MiB IPC
    terms, 256 KiB counters, command and error buffers, and backoff idle strategies."""
    return {
        "AERON_CLIENT_LIVENESS_TIMEOUT": f"{CLIENT_LIVENESS_TIMEOUT_S:g}s",
        "AERON_PUBLICATION_UNBLOCK_TIMEOUT": f"{PUBLICATION_UNBLOCK_TIMEOUT_S:g}s",
        "AERON_TIMER_INTERVAL": "100ms",
        "AERON_DRIVER_TIMEOUT": str(DRIVER_TIMEOUT_MS),
        "AERON_IPC_TERM_BUFFER_LENGTH": "1m",
        "AERON_PUBLICATION_LINGER_TIMEOUT": "0",
        **idle_strategy_environment("backoff"),  # every agent thread, in any threading mode
        "AERON_COUNTERS_BUFFER_LENGTH": "256k",
        "AERON_CONDUCTOR_BUFFER_LENGTH": str(256 * 1024 + 768),  # 256 KiB plus the ring buffer's trailer
        "AERON_CLIENTS_BUFFER_LENGTH": str(256 * 1024 + 128),  # 256 KiB plus the broadcast buffer's trailer
        "AERON_ERROR_BUFFER_LENGTH": "256k",
        "AERON_LOSS_REPORT_BUFFER_LENGTH": "64k",
        **overrides,
    }


def udp_settings_for_tests(*, term_buffer_length: str, liveness_timeout: str) -> dict[str, str]:
    """What a test adds to ``driver_env_for_tests`` for UDP: the loss generator (loss-control.dat) and the term
    length; an image whose sender went quiet goes, and a publication without status messages becomes
    unconnected, after ``liveness_timeout``."""
    return {
        "AERON_TERM_BUFFER_LENGTH": term_buffer_length,
        "AERON_IMAGE_LIVENESS_TIMEOUT": liveness_timeout,
        "AERON_PUBLICATION_CONNECTION_TIMEOUT": liveness_timeout,
        "AERON_DEBUG_LOSS_CONTROL": "true",
    }


def driver_env_for_benchmarks(idle_strategy: str, **overrides: str) -> dict[str, str]:
    """A benchmark driver: Aeron's defaults except ``idle_strategy`` for every agent thread, no linger and the
    lenient client timeouts set explicitly."""
    return {
        **idle_strategy_environment(idle_strategy),  # every agent thread, in any threading mode
        "AERON_PUBLICATION_LINGER_TIMEOUT": "0",
        **LENIENT_CLIENT_TIMEOUTS,
        **overrides,
    }
