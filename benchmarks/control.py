"""The control file shared by the two worker processes: a step barrier per case, and a scratch page per case.

Layout (``/dev/shm``, mapped by both workers): page 0 holds one int64 slot per worker (its current
``(case + 1) << 8 | step``) and, from byte 256, one int64 abort flag per case; page ``1 + case`` is that
case's scratch (the floors ping-pong on its first cache line).

A worker sets a case's abort flag *before* it moves its slot past the case (release store, then release
store), and the partner loads the slot *before* the flag (acquire, then acquire): a partner seen past the
case either finished it normally (which needed this worker at the last barrier) or is seen aborting it.

A worker that fails a case marks it aborted and moves on; its partner sees that at its next barrier (or
its compiled loop times out) and moves on too, so one broken benchmark does not lose the others.
"""

from __future__ import annotations

import os
import time

import numpy as np

from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.layout.mapped_file import MappedFile

PAGE = 4096
_SLOT = {"A": 0, "B": 64}
_ABORT_FLAGS = 256
_STEP_BITS = 8
MAX_CASES = (PAGE - _ABORT_FLAGS) // 8


class CaseAborted(RuntimeError):
    """The partner gave up on this case (or already moved past it)."""


class Control:
    """One worker's view of the control file (``role`` is ``"A"`` or ``"B"``)."""

    def __init__(self, mapped: MappedFile, role: str):
        if role not in _SLOT:
            raise ValueError(f"role={role!r} must be 'A' or 'B'")
        self._mapped = mapped
        self.buffer: np.ndarray = mapped.buffer
        self.role = role
        self._own = _SLOT[role]
        self._partner = _SLOT["B" if role == "A" else "A"]

    @staticmethod
    def create(path: str | os.PathLike, cases: int) -> None:
        """Create the zeroed control file for ``cases`` cases (the parent does this once)."""
        if cases > MAX_CASES:
            raise ValueError(f"cases={cases} > MAX_CASES={MAX_CASES}")
        MappedFile.create(path, PAGE * (cases + 1)).close()

    @classmethod
    def open(cls, path: str | os.PathLike, role: str) -> "Control":
        return cls(MappedFile.open(path), role)

    def page(self, case_index: int) -> np.ndarray:
        """The case's scratch page (a ``np.uint8`` view of 4096 bytes)."""
        start = PAGE * (case_index + 1)
        if start + PAGE > self.buffer.shape[0]:
            raise IndexError(f"case_index={case_index} >= cases={self.buffer.shape[0] // PAGE - 1}")
        return self.buffer[start : start + PAGE]

    def abort(self, case_index: int) -> None:
        put_int64_release(self.buffer, _ABORT_FLAGS + 8 * case_index, 1)

    def aborted(self, case_index: int) -> bool:
        return int(get_int64_acquire(self.buffer, _ABORT_FLAGS + 8 * case_index)) != 0

    def sync(self, case_index: int, step: int, timeout_s: float) -> None:
        """Announce ``step`` of ``case_index`` and wait until the partner has reached it too.

        Raises ``CaseAborted`` if the partner gave up on this case, ``TimeoutError`` at the deadline.
        """
        want = ((case_index + 1) << _STEP_BITS) | step
        put_int64_release(self.buffer, self._own, want)
        deadline = time.monotonic() + timeout_s
        spins = 0
        while True:
            seen = int(get_int64_acquire(self.buffer, self._partner))  # the slot first, then the flag
            if self.aborted(case_index):
                raise CaseAborted(f"partner aborted case {case_index}")
            if seen >= want:
                return  # at or past this step (past the case only after finishing it with us)
            spins += 1
            if spins > 1000:  # the partner is still setting up: stop competing for the core
                if time.monotonic() > deadline:
                    raise TimeoutError(f"partner did not reach step {step} of case {case_index} within {timeout_s}s")
                time.sleep(0.0002)

    def close(self) -> None:
        self.buffer = None
        self._mapped.close()
