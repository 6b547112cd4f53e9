"""A counter allocated by the driver for this client (Aeron's client ``Counter``, spec §9, §11.3 ADD_COUNTER).

The value lives in the counters values section of ``cnc.dat``; reads and writes are one kernel call each.
``close()`` sends REMOVE_COUNTER; the driver frees the id. ON_UNAVAILABLE_COUNTER (the driver freed it,
e.g. another client removed a shared counter) closes it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from aeron_numba.client.arguments import INT64_MAX, INT64_MIN, as_int
from aeron_numba.errors import ClientClosedError
from aeron_numba.kernels import counters as counters_kernels
from aeron_numba.layout import counters as counters_layout

if TYPE_CHECKING:
    from aeron_numba.client.client_conductor import ClientConductor


def _int64(name: str, value) -> int:
    # A plain int in range passes with one type test and a comparison (archive counters are set every cycle).
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return as_int(name, value, INT64_MIN, INT64_MAX)  # a counter is an int64


class Counter:
    """A live counter: ``get``/``set``/``increment``/``get_and_add`` on its value.

    Attributes
    ----------
    id : int
        Counter id (index into the values and metadata sections).
    registration_id : int
        Correlation id of the ADD_COUNTER command that created it.
    values_buffer : np.ndarray
        The counters values section, for compiled callers: the value is at ``value_offset``.
    """

    def __init__(self, conductor: "ClientConductor", registration_id: int, counter_id: int, values_buffer: np.ndarray):
        self._conductor = conductor
        self.registration_id = registration_id
        self.id = counter_id
        self.values_buffer: np.ndarray | None = values_buffer
        self.value_offset = counter_id * counters_layout.COUNTER_LENGTH + counters_layout.COUNTER_VALUE_OFFSET
        self._is_closed = False

    def _values(self) -> np.ndarray:
        values = self.values_buffer
        if values is None:
            raise ClientClosedError(f"counter id={self.id} registration_id={self.registration_id} is closed")
        return values

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` ran, or the driver or the counter's owner removed the counter."""
        return self._is_closed

    @property
    def label(self) -> str:
        """The counter's label, as the driver stores it in its metadata."""
        self._values()  # raises once closed
        return self._conductor.counters_reader.get_counter_label(self.id)

    def get(self) -> int:
        """Acquire-load of the value."""
        return int(counters_kernels.get_counter_value(self._values(), self.id))

    def get_weak(self) -> int:
        """Plain load of the value (no ordering): cheaper where staleness does not matter."""
        return int(counters_kernels.get_counter_value_weak(self._values(), self.id))

    def set(self, value: int) -> None:
        """Release-store of the value."""
        counters_kernels.set_counter_value(self._values(), self.id, _int64("value", value))

    def increment(self) -> int:
        """Atomic increment; returns the previous value."""
        return int(counters_kernels.get_and_add_counter_value(self._values(), self.id, 1))

    def get_and_add(self, delta: int) -> int:
        """Atomic add of ``delta``; returns the previous value."""
        return int(counters_kernels.get_and_add_counter_value(self._values(), self.id, _int64("delta", delta)))

    def compare_and_set(self, expected: int, update: int) -> bool:
        """Atomically set ``update`` if the value is ``expected``; True when it was set."""
        return bool(counters_kernels.compare_and_set_counter_value(self._values(), self.id, _int64("expected", expected),
                                                                  _int64("update", update)))

    def close(self) -> None:
        """Send REMOVE_COUNTER; idempotent."""
        if not self._is_closed:
            self._conductor.release_counter(self)

    def _internal_close(self) -> None:
        self._is_closed = True
        self.values_buffer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Counter(id={self.id}, registration_id={self.registration_id}, closed={self._is_closed})"
