"""One place for the JIT flags of every kernel, and the cache version stamp.

Numba's ``cache=True`` checks only the timestamp of the file that defines a function, not of the modules
it calls (NOTES-numba.md, pitfall 1): after a change to ``kernels/atomics.py`` the cached kernels that
inline the old intrinsics would still load. So the cache directory carries a stamp, a hash of the source of
``layout/`` and ``kernels/``: any change there starts a fresh cache, and stale code can never be loaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import numba

_PACKAGE_DIR = Path(__file__).resolve().parent
_STAMPED_DIRS = ("layout", "kernels")
# Outside those directories, modules whose code is inlined into callers' cached functions: the handles' methods.
_STAMPED_FILES = ("client/handles.py",)
_CACHE_ENV = "NUMBA_CACHE_DIR"
_DEFAULT_CACHE_ROOT = Path.home() / ".cache" / "aeron-numba"
_STAMP_PATTERN = re.compile(r"[0-9a-f]{16}")
_KEEP_STAMPS = 4

#: Flags for every kernel: compiled once, cached on disk, no Python objects inside, and no NRT reference
#: counting. Kernels only borrow the arrays they are given (they never allocate or keep one), but with NRT on,
#: every call to a kernel that is not inlined increfs and decrefs each array argument with an atomic
#: read-modify-write (measured on this project's 2-core machine: 35 of the 45 ns of a 32-byte exclusive offer).
#: Called from Python they release the GIL, so that agent threads run compiled code side by side; the kernels
#: the client calls from Python once per message hold it instead (``@kernel(nogil=False)``): releasing and
#: re-taking it costs about 27 ns, a tenth of such a call, and they return within a microsecond or so.
KERNEL_FLAGS = dict(cache=True, nogil=True, boundscheck=False, _nrt=False)


def source_stamp() -> str:
    """Hash of every ``.py`` file under ``layout/`` and ``kernels/`` and of ``client/handles.py`` (the code baked
    into cached kernels and into callers of the handles) and of this file (the flags they were compiled with)."""
    digest = hashlib.sha256(numba.__version__.encode())
    digest.update(Path(__file__).read_bytes())
    for name in _STAMPED_DIRS:
        for path in sorted((_PACKAGE_DIR / name).rglob("*.py")):
            digest.update(str(path.relative_to(_PACKAGE_DIR)).encode())
            digest.update(path.read_bytes())
    for name in _STAMPED_FILES:
        digest.update(name.encode())
        digest.update((_PACKAGE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """``$NUMBA_CACHE_DIR`` (or ``~/.cache/aeron-numba``) joined with the source stamp."""
    root = Path(os.environ.get(_CACHE_ENV) or _DEFAULT_CACHE_ROOT)
    return root / source_stamp()


def _prune_old_stamps(current: Path) -> None:
    """Each source change leaves a stamp directory behind: keep the few most recently used ones."""
    stamps = [p for p in current.parent.iterdir() if _STAMP_PATTERN.fullmatch(p.name) and p != current]
    stamps.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in stamps[_KEEP_STAMPS - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)


def configure_cache() -> None:
    """Point numba's cache at the stamped directory; must run before any kernel module is imported."""
    if numba.config.DISABLE_JIT:
        return
    path = cache_dir()
    is_new = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    os.utime(path)  # mtime = last use, for pruning
    if is_new:
        try:
            _prune_old_stamps(path)
        except OSError:
            pass  # another process pruning at the same time; nothing is lost but disk space
    numba.config.CACHE_DIR = str(path)


def kernel(*args, **kwargs):
    """``numba.njit`` with the project's kernel flags (``cache=True`` always)."""
    flags = dict(KERNEL_FLAGS)
    flags.update(kwargs)
    if args and callable(args[0]) and len(args) == 1:
        return numba.njit(**flags)(args[0])
    return numba.njit(*args, **flags)


def compiled_entry(dispatcher, *example_args):
    """``dispatcher``'s compiled function for the types of ``example_args``, to call from Python without Numba's
    per-call type dispatch (measured here: 168 instead of 295 ns for a call with four arrays). Every later call
    must pass arguments of exactly those types (arrays are not checked again): for the client's hot kernels,
    whose arrays it owns. Under ``NUMBA_DISABLE_JIT`` the plain function."""
    if numba.config.DISABLE_JIT:
        return dispatcher
    signature = tuple(numba.typeof(arg) for arg in example_args)
    existing = dispatcher.overloads.get(signature)
    return existing.entry_point if existing is not None else dispatcher.compile(signature)


def handler_address(dispatcher, function_type):
    """``dispatcher`` (an ``@njit`` handler) as an argument of ``function_type`` (``types.FunctionType``) for a
    kernel called from Python, with its address looked up once: passed as is, a dispatcher is typed and its address
    asked of LLVM at every call (numba's unboxing of a first-class function; 3-5 % of a cluster member's busy
    samples under py-spy, ``benchmarks.cluster.member_profile --py-spy``). Under ``NUMBA_DISABLE_JIT`` the plain
    function."""
    if numba.config.DISABLE_JIT:
        return dispatcher
    return _HandlerAddress(dispatcher, function_type.signature)


class _HandlerAddress(numba.types.WrapperAddressProtocol):
    """numba's wrapper address protocol: the address numba's unboxing would look up, looked up once (with numba's
    own lookup, so it is the same cfunc wrapper numba would call)."""

    def __init__(self, dispatcher, signature):
        from numba.experimental.function_type import _get_wrapper_address

        self.dispatcher = dispatcher  # holds its compiled code
        self._signature = signature
        self._address = _get_wrapper_address(dispatcher, signature)

    def __wrapper_address__(self) -> int:
        return self._address

    def signature(self):
        return self._signature

    def __repr__(self) -> str:
        return f"handler_address({self.dispatcher!r})"


# Here rather than in the package's __init__: importing ``aeron_numba`` must not import Numba (tools' --help), and
# every kernel module imports this module before it defines a kernel.
configure_cache()
