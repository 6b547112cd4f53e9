"""Cluster time: the one place that knows the cluster's time unit and converts to and from it.

Aeron Cluster stamps its log (TimerEvent, SessionOpenEvent, recording.log's ``timestamp``) and takes timer
deadlines in the time unit of its ``ClusterClock``: milliseconds by default (``MillisecondClusterClock``),
nanoseconds with ``NanosecondClusterClock`` (setting ``aeron.cluster.clock``), microseconds with a user clock. The
unit travels in snapshot markers and JoinLog as schema 111's ``ClusterTimeUnit`` (MILLIS 0, MICROS 1, NANOS 2; the
null value, written by schema versions before 4, means MILLIS). Conversions truncate toward zero to a coarser unit
and saturate to a finer one, as Java's ``TimeUnit.convert`` does, so our numbers match Aeron's.
"""

from __future__ import annotations

import enum
import time
from typing import Callable

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout.cluster_schema import ENUMS

_CODES = ENUMS["ClusterTimeUnit"]

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
#: SBE null value of an int32 enum such as ClusterTimeUnit.
SBE_INT32_NULL = -(1 << 31)

CLUSTER_CLOCK_PROP_NAME = "aeron.cluster.clock"
CLUSTER_CLOCK_ENV = "AERON_CLUSTER_CLOCK"
MILLISECOND_CLUSTER_CLOCK = "io.aeron.cluster.MillisecondClusterClock"
NANOSECOND_CLUSTER_CLOCK = "io.aeron.cluster.NanosecondClusterClock"


class ClusterTimeUnit(enum.IntEnum):
    """Schema 111's ClusterTimeUnit codes; the value is what goes on the wire."""

    MILLIS = _CODES["MILLIS"]
    MICROS = _CODES["MICROS"]
    NANOS = _CODES["NANOS"]

    @property
    def nanos_per_unit(self) -> int:
        return _NANOS_PER_UNIT[self]

    @property
    def java_name(self) -> str:
        """The name of Java's ``TimeUnit`` (ClusterTool prints it)."""
        return _JAVA_NAMES[self]

    @classmethod
    def from_code(cls, code: int) -> "ClusterTimeUnit":
        """The unit of a decoded ``time_unit`` field: the SBE null value is MILLIS (Aeron's ``ClusterClock.map``)."""
        if code == SBE_INT32_NULL:
            return cls.MILLIS
        try:
            return cls(code)
        except ValueError:
            raise ClusterError(f"unknown ClusterTimeUnit code: {code} (MILLIS 0, MICROS 1, NANOS 2)") from None


_NANOS_PER_UNIT = {ClusterTimeUnit.MILLIS: 1_000_000, ClusterTimeUnit.MICROS: 1_000, ClusterTimeUnit.NANOS: 1}
_JAVA_NAMES = {
    ClusterTimeUnit.MILLIS: "MILLISECONDS",
    ClusterTimeUnit.MICROS: "MICROSECONDS",
    ClusterTimeUnit.NANOS: "NANOSECONDS",
}


def convert(value: int, from_unit: ClusterTimeUnit, to_unit: ClusterTimeUnit) -> int:
    """``value`` in ``from_unit`` expressed in ``to_unit`` (Java ``to_unit.convert(value, from_unit)``)."""
    source, target = _NANOS_PER_UNIT[from_unit], _NANOS_PER_UNIT[to_unit]
    if source >= target:
        return max(_INT64_MIN, min(_INT64_MAX, value * (source // target)))
    ratio = target // source
    quotient = abs(value) // ratio  # truncate toward zero, as Java's integer division
    return quotient if value >= 0 else -quotient


def to_nanos(time_unit: ClusterTimeUnit, value: int) -> int:
    return convert(value, time_unit, ClusterTimeUnit.NANOS)


def from_nanos(time_unit: ClusterTimeUnit, value_ns: int) -> int:
    return convert(value_ns, ClusterTimeUnit.NANOS, time_unit)


def time_unit_of_clock(value: str, name: str = CLUSTER_CLOCK_ENV) -> ClusterTimeUnit:
    """The time unit a ``aeron.cluster.clock`` setting selects: Aeron's clock class names, or a unit name
    (``MILLISECONDS``/``MICROSECONDS``/``NANOSECONDS``, or ``ms``/``us``/``ns``). A settings parser."""
    key = value.strip()
    units = {
        MILLISECOND_CLUSTER_CLOCK: ClusterTimeUnit.MILLIS,
        NANOSECOND_CLUSTER_CLOCK: ClusterTimeUnit.NANOS,
        "MILLISECONDS": ClusterTimeUnit.MILLIS,
        "MICROSECONDS": ClusterTimeUnit.MICROS,
        "NANOSECONDS": ClusterTimeUnit.NANOS,
        "MS": ClusterTimeUnit.MILLIS,
        "US": ClusterTimeUnit.MICROS,
        "NS": ClusterTimeUnit.NANOS,
    }
    unit = units.get(key, units.get(key.upper()))  # not ``or``: MILLIS is 0
    if unit is None:
        raise ConfigurationError(
            f"{name}={value!r} is not a cluster clock: expected {MILLISECOND_CLUSTER_CLOCK}, "
            f"{NANOSECOND_CLUSTER_CLOCK}, MILLISECONDS, MICROSECONDS or NANOSECONDS"
        )
    return unit


class ClusterClock:
    """The cluster's clock: epoch time in ``time_unit``. ``epoch_ns`` is injectable so tests drive time."""

    def __init__(self, time_unit: ClusterTimeUnit = ClusterTimeUnit.MILLIS, epoch_ns: Callable[[], int] = time.time_ns):
        self.time_unit = ClusterTimeUnit(time_unit)
        self._epoch_ns = epoch_ns

    def time(self) -> int:
        return from_nanos(self.time_unit, self._epoch_ns())

    def time_nanos(self) -> int:
        return self._epoch_ns()

    @property
    def is_system_clock(self) -> bool:
        """Whether it reads the system's epoch clock (``time.time_ns``), as compiled code reading it does."""
        return self._epoch_ns is time.time_ns

    def convert_to_nanos(self, time_value: int) -> int:
        return to_nanos(self.time_unit, time_value)
