"""Aeron directories for tests: a unique one per test, waiting for a driver's ``cnc.dat``, reading its counters.

``await_cnc_ready`` is what a client does on connect (spec/transport.md §6.1): the file may not exist yet,
may be empty (created but not yet sized) or have ``cnc_version == 0`` (the driver is still initialising);
all of those are retried until the deadline. A version with another major number is not going to change,
so it fails at once.

``AeronCounters`` maps ``cnc.dat`` once and reads the counters many times (AeronStat's view): find a counter
by label, type or registration id, and await a value. The module functions take either an aeron dir
(mapped for the call) or an ``AeronCounters``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from aeron_numba.kernels.cnc_file import CncFile, CncNotReadyError
from aeron_numba.errors import LayoutError
from aeron_numba.kernels.counters import CounterInfo, CountersReader
from aeron_numba.layout import cnc
from aeron_numba.layout.bits import semantic_version_major
from harness.awaiting import NotYet, await_condition

SHM_ROOT = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else Path("/tmp")


def new_aeron_dir(prefix: str = "aeron-numba", root: str | os.PathLike | None = None) -> Path:
    """Create a unique, empty directory under /dev/shm (or /tmp where there is none) and return it."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=root or SHM_ROOT))


def remove_aeron_dir(path: str | os.PathLike) -> None:
    """Delete an aeron dir and everything in it; a missing dir is fine. Refuses filesystem roots."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in (Path("/"), SHM_ROOT.resolve(), Path("/tmp").resolve(), Path.home().resolve()):
        raise ValueError(f"refusing to remove {resolved}: not an aeron dir")
    shutil.rmtree(path, ignore_errors=True)


def cnc_path(aeron_dir: str | os.PathLike) -> Path:
    return Path(aeron_dir) / cnc.CNC_FILE


def _version_in_file(path: Path) -> int:
    """Read ``cnc_version`` with a plain ``pread`` (diagnostics only: the real check is CncFile.open's acquire load)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        data = os.pread(fd, 4, cnc.CNC_VERSION_FIELD_OFFSET)
    finally:
        os.close(fd)
    return int.from_bytes(data, "little", signed=True) if len(data) == 4 else 0


def try_open_cnc(aeron_dir: str | os.PathLike, pid: int | None = None) -> CncFile | NotYet:
    """One attempt to map a ready ``cnc.dat``: the ``CncFile``, or ``NotYet(reason)`` for a driver still starting.

    With ``pid``, a file written by another process (a previous driver in the same dir) is not ready either.
    Raises ``LayoutError`` for a file that will not become usable (another major version).
    """
    path = cnc_path(aeron_dir)
    try:
        cnc_file = CncFile.open(path)
    except FileNotFoundError:
        return NotYet(f"{path} does not exist")
    except CncNotReadyError as exc:
        return NotYet(str(exc))
    except LayoutError as exc:
        version = _version_in_file(path)
        if version != 0 and semantic_version_major(version) != semantic_version_major(cnc.CNC_VERSION):
            raise
        return NotYet(str(exc))  # created but not yet sized, or sized after we looked
    if pid is not None and cnc_file.pid != pid:
        other = cnc_file.pid
        cnc_file.close()
        return NotYet(f"{path} was written by pid {other}, waiting for pid {pid}")
    return cnc_file


def await_cnc_ready(
    aeron_dir: str | os.PathLike, timeout_s: float, *, pid: int | None = None, processes: Iterable[Any] = ()
) -> CncFile:
    """Retry mapping ``<aeron_dir>/cnc.dat`` until it is ready (version set, full length) and return it.

    ``pid``: only accept a file whose header names this driver pid. ``processes``: fail at once (with their
    log tails) if one of these ``ManagedProcess``es exits while waiting. Raises ``ConditionTimeout``.
    """
    return await_condition(
        lambda: try_open_cnc(aeron_dir, pid),
        timeout_s,
        f"{cnc_path(aeron_dir)} to be ready",
        processes=processes,
    )


# ------------------------------------------------------------------------------------------- counters
def _selector_text(selector: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in selector.items() if v is not None) or "any counter"


def counter_matches(
    info: CounterInfo,
    *,
    counter_id: int | None = None,
    type_id: int | None = None,
    label: str | None = None,
    label_contains: str | None = None,
    registration_id: int | None = None,
    where: Callable[[CounterInfo], bool] | None = None,
) -> bool:
    """True if ``info`` matches every given criterion (``label`` exact, ``label_contains`` substring)."""
    return (
        (counter_id is None or info.counter_id == counter_id)
        and (type_id is None or info.type_id == type_id)
        and (label is None or info.label == label)
        and (label_contains is None or label_contains in info.label)
        and (registration_id is None or info.registration_id == registration_id)
        and (where is None or bool(where(info)))
    )


class AeronCounters:
    """The counters of a driver's ``cnc.dat``, mapped once and read many times.

    Parameters
    ----------
    cnc_file : CncFile
        An open, ready file (``await_cnc_ready``); closed by ``close()`` if ``owns_cnc``.
    """

    def __init__(self, cnc_file: CncFile, *, owns_cnc: bool = False):
        self.cnc_file = cnc_file
        self._owns_cnc = owns_cnc
        self.reader: CountersReader | None = CountersReader(
            cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer
        )

    @classmethod
    def open(cls, aeron_dir: str | os.PathLike, timeout_s: float = 10.0, **await_kwargs) -> "AeronCounters":
        """Wait for ``cnc.dat`` to be ready (see ``await_cnc_ready``) and map its counters."""
        return cls(await_cnc_ready(aeron_dir, timeout_s, **await_kwargs), owns_cnc=True)

    def counters(self) -> list[CounterInfo]:
        """Every allocated counter, in id order."""
        return self.reader.counters()

    def find_all(self, **selector) -> list[CounterInfo]:
        return [info for info in self.reader.for_each() if counter_matches(info, **selector)]

    def find(self, **selector) -> CounterInfo | None:
        """The first allocated counter matching ``selector`` (see ``counter_matches``), or None."""
        for info in self.reader.for_each():
            if counter_matches(info, **selector):
                return info
        return None

    def value(self, counter_id: int) -> int:
        return self.reader.get_counter_value(counter_id)

    def await_counter(self, timeout_s: float, *, processes: Iterable[Any] = (), **selector) -> CounterInfo:
        """Wait until a counter matching ``selector`` is allocated; return it."""

        def found():
            info = self.find(**selector)
            return info if info is not None else NotYet(f"no counter with {_selector_text(selector)}")

        return await_condition(found, timeout_s, f"a counter with {_selector_text(selector)}", processes=processes)

    def await_value(
        self,
        predicate: Callable[[int], bool],
        timeout_s: float,
        *,
        description: str | None = None,
        processes: Iterable[Any] = (),
        **selector,
    ) -> int:
        """Wait until a counter matching ``selector`` exists and ``predicate(value)`` holds; return the value.

        The counter is looked up again on every poll, so one that is freed and re-allocated is followed.
        """
        text = _selector_text(selector)

        def satisfied():
            info = self.find(**selector)
            if info is None:
                return NotYet(f"no counter with {text}")
            if predicate(info.value):
                return (info.value,)  # wrapped: a satisfying value of 0 is falsy
            return NotYet(f"counter {info.counter_id} {info.label!r} value={info.value}")

        what = description or f"counter with {text} to satisfy {getattr(predicate, '__name__', 'predicate')}"
        return await_condition(satisfied, timeout_s, what, processes=processes)[0]

    def close(self) -> None:
        self.reader = None  # its views must go before the mapping can be closed
        if self._owns_cnc and self.cnc_file is not None:
            self.cnc_file.close()
        self.cnc_file = None

    def __enter__(self) -> "AeronCounters":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _counters_for(source, timeout_s: float) -> tuple[AeronCounters, bool]:
    if isinstance(source, AeronCounters):
        return source, False
    return AeronCounters.open(source, timeout_s), True


def read_counter(source, predicate: Callable[[CounterInfo], bool] | None = None, **selector) -> CounterInfo | None:
    """The first counter matching ``predicate`` and ``selector`` in ``source`` (an aeron dir or ``AeronCounters``).

    An aeron dir is mapped for this call and must already hold a ready ``cnc.dat``.
    """
    counters, owned = _counters_for(source, 0.0)
    try:
        return counters.find(where=predicate, **selector)
    finally:
        if owned:
            counters.close()


def await_counter_value(
    source, predicate: Callable[[int], bool], timeout_s: float, *, processes: Iterable[Any] = (), **selector
) -> int:
    """Wait for a counter matching ``selector`` whose value satisfies ``predicate``; return the value.

    ``source`` is an aeron dir (waited for and mapped once for the whole wait) or an ``AeronCounters``.
    """
    deadline = time.monotonic() + timeout_s
    counters, owned = _counters_for(source, timeout_s)
    try:
        remaining = max(0.0, deadline - time.monotonic())  # one deadline for mapping and waiting
        return counters.await_value(predicate, remaining, processes=processes, **selector)
    finally:
        if owned:
            counters.close()
