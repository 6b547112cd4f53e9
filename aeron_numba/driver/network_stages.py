"""The stages a driver's network cycles run after each pass (``kernels/network_stages``): another agent's compiled
work on the driver's thread, added and removed by that agent (a cluster member's archive recording its log)."""

from __future__ import annotations

import numpy as np

from aeron_numba.kernels.network_stages import (IMAGE_CLOSED_ADDRESS, IMAGE_LOG_ADDRESS, IMAGE_LOG_LENGTH,
                                                IMAGE_POSITION_ADDRESS, IMAGE_WORDS, STAGE_COLUMNS, STAGE_FUNCTION,
                                                STAGE_STATE, stage_address)


class NetworkStages:
    """The stage table of one ``NetworkCycles``: rows in the order they were added. Each entry holds its state
    array and whatever its state points into (``holds``: a log, counters buffers), so nothing it reads is unmapped
    while it is in the table. Only the thread that runs the network cycles may add or remove."""

    def __init__(self):
        self._entries: dict[int, tuple] = {}  # key -> (function address, state, holds)
        self._dues: dict[int, object] = {}  # key -> its due() check, for the stages that have one
        self._next_key = 1
        self.table = np.zeros((0, STAGE_COLUMNS), np.int64)

    def add(self, stage, state: np.ndarray, holds: tuple = (), due=None) -> int:
        """Run ``stage`` (an ``@kernel`` ``int64(int64)`` function) over ``state`` from the next call on; the key
        to ``remove`` it with. ``due``, when given, says (``due() -> bool``) whether work for the stage was made
        outside the network cycles (``any_due``)."""
        if state.dtype != np.int64 or not state.flags.c_contiguous:
            raise ValueError("a stage's state must be a contiguous int64 array")
        key = self._next_key
        self._next_key += 1
        self._entries[key] = (stage_address(stage), state, holds)
        if due is not None:
            self._dues[key] = due
        self._rebuild()
        return key

    def any_due(self) -> bool:
        """Whether a stage has work that Python code on the thread made since the network cycles last ran (a commit
        position the consensus module set, which the service's log stage reads): the thread's duty cycle then runs
        them once more rather than leaving that work to the stage owner's next Python cycle."""
        return any(due() for due in self._dues.values())

    def remove(self, key: int) -> None:
        """Stop running the stage added as ``key`` (a key not in the table is ignored)."""
        self._dues.pop(key, None)
        if self._entries.pop(key, None) is not None:
            self._rebuild()

    def __len__(self) -> int:
        return len(self._entries)

    def _rebuild(self) -> None:
        table = np.zeros((len(self._entries), STAGE_COLUMNS), np.int64)
        for row, (address, state, _) in enumerate(self._entries.values()):
            table[row, STAGE_FUNCTION], table[row, STAGE_STATE] = address, state.ctypes.data
        self.table = table


def fill_image_rows(state: np.ndarray, first: int, images: list) -> list:
    """Write ``images`` (compiled image handles) as rows of ``IMAGE_WORDS`` words of ``state`` from index ``first``;
    the arrays those words point into, for the stage's table row to hold."""
    holds = []
    for k, handle in enumerate(images):
        row = first + k * IMAGE_WORDS
        state[row + IMAGE_LOG_ADDRESS], state[row + IMAGE_LOG_LENGTH] = handle.log.ctypes.data, handle.log.size
        state[row + IMAGE_POSITION_ADDRESS] = handle.position_buffer.ctypes.data + handle.position_offset
        state[row + IMAGE_CLOSED_ADDRESS] = handle.state.ctypes.data
        holds += [handle.log, handle.position_buffer, handle.state]
    return holds


class OwnedStage:
    """An agent's stage in a ``NetworkStages`` table: its state (word ``on_index`` says whether it runs), the key of
    what the state was filled for, and its row. A subclass fills the state in its ``run_for`` and calls ``resume``
    first (the same key again: only turned back on) and ``start`` last."""

    def __init__(self, function, state: np.ndarray, on_index: int, stages: NetworkStages | None = None):
        self.function, self.state, self.stages = function, state, stages
        self._on = on_index
        self._key = None
        self._table_key = None

    @property
    def is_running(self) -> bool:
        return bool(self.state[self._on])

    def resume(self, key) -> bool:
        """Turn the stage back on when its state was filled for ``key`` and it is still in the table."""
        if key == self._key and self._table_key is not None:
            self.state[self._on] = 1
            return True
        return False

    def start(self, key, holds: tuple, due=None) -> None:
        """Into the table, on, for ``key`` (``holds``: what the state points into; ``due``: ``NetworkStages.add``'s)."""
        self._table_key = self.stages.add(self.function, self.state, holds, due=due)
        self.state[self._on] = 1
        self._key = key

    def add_idle_watch(self, watch) -> None:
        """Wake when the stage turns itself off: what it stopped before is its owner's."""
        watch.watch_int64(self.state, 8 * self._on)

    def pause(self) -> None:
        """Off until ``run_for`` again (the owner's own cycle does the work meanwhile); the table keeps it."""
        self.state[self._on] = 0

    def stop(self) -> None:
        """Out of the table (what it ran for changed or went, or its owner is closing)."""
        self.state[self._on] = 0
        if self._table_key is not None:
            self.stages.remove(self._table_key)
            self._table_key = None
        self._key = None
