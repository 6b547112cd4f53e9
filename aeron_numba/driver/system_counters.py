"""The driver's system counters (spec/transport.md §9.5) as increments and max proposals (Aeron's
``SystemCounters``)."""

from __future__ import annotations

import numpy as np

from aeron_numba.kernels import counters as ck


class SystemCounters:
    """The §9.5 system counters (counter id == system id) as increments and max proposals."""

    def __init__(self, values_buffer: np.ndarray):
        self._values = values_buffer

    @property
    def values_buffer(self) -> np.ndarray:
        """cnc.dat's counter values, for kernels that count as they go."""
        return self._values

    def increment(self, system_id: int, delta: int = 1) -> None:
        ck.get_and_add_counter_value(self._values, system_id, delta)

    def propose_max(self, system_id: int, value: int) -> None:
        ck.propose_max_counter_value(self._values, system_id, value)

    def get(self, system_id: int) -> int:
        return int(ck.get_counter_value(self._values, system_id))
