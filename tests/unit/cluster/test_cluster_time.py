"""Cluster time units: codes as schema 111 writes them, conversions as Java's ``TimeUnit``, the clock setting."""

from __future__ import annotations

import pytest

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.cluster_time import (
    NANOSECOND_CLUSTER_CLOCK,
    SBE_INT32_NULL,
    ClusterClock,
    ClusterTimeUnit,
    convert,
    from_nanos,
    time_unit_of_clock,
    to_nanos,
)
from aeron_numba.errors import ConfigurationError

MS, US, NS = ClusterTimeUnit.MILLIS, ClusterTimeUnit.MICROS, ClusterTimeUnit.NANOS
INT64_MAX = (1 << 63) - 1


def test_codes_and_names():
    assert [int(u) for u in (MS, US, NS)] == [0, 1, 2]
    assert [u.java_name for u in (MS, US, NS)] == ["MILLISECONDS", "MICROSECONDS", "NANOSECONDS"]
    assert ClusterTimeUnit.from_code(2) is NS
    assert ClusterTimeUnit.from_code(SBE_INT32_NULL) is MS  # a snapshot marker from before schema version 4


def test_unknown_code_is_named():
    with pytest.raises(ClusterError, match="unknown ClusterTimeUnit code: 7"):
        ClusterTimeUnit.from_code(7)


@pytest.mark.parametrize(
    "value, from_unit, to_unit, expected",
    [
        (1_500, MS, NS, 1_500_000_000),
        (1_999_999, NS, MS, 1),  # truncates
        (-1_999_999, NS, MS, -1),  # toward zero
        (7, US, US, 7),
        (INT64_MAX // 1_000, MS, NS, INT64_MAX),  # saturates
        (-(INT64_MAX // 1_000), MS, NS, -INT64_MAX - 1),
        (8_000_000, NS, US, 8_000),
    ],
)
def test_convert_as_java_time_unit(value, from_unit, to_unit, expected):
    assert convert(value, from_unit, to_unit) == expected


def test_clock_reads_injected_epoch_in_its_unit():
    epoch_ns = [1_700_000_000_123_456_789]
    clock = ClusterClock(US, lambda: epoch_ns[0])
    assert clock.time() == 1_700_000_000_123_456
    assert clock.time_nanos() == epoch_ns[0]
    assert clock.convert_to_nanos(clock.time()) == 1_700_000_000_123_456_000
    assert ClusterClock(epoch_ns=lambda: 5_000_000).time() == 5  # milliseconds by default
    assert to_nanos(MS, 3) == 3_000_000 and from_nanos(NS, 3) == 3


def test_clock_setting_takes_aeron_class_names_and_unit_names():
    assert time_unit_of_clock(NANOSECOND_CLUSTER_CLOCK) is NS
    assert time_unit_of_clock("io.aeron.cluster.MillisecondClusterClock") is MS
    assert time_unit_of_clock(" us ") is US
    with pytest.raises(ConfigurationError, match="AERON_CLUSTER_CLOCK='seconds' is not a cluster clock"):
        time_unit_of_clock("seconds")
