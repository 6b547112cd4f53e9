"""aeron-numba: Aeron (media driver, client, Archive) in Python with Numba kernels.

Numba's on-disk cache is pointed at a directory stamped with a hash of the kernel sources when
``aeron_numba.jit`` is first imported, which every kernel module does before defining a kernel (see
``aeron_numba/jit.py`` for why). The public API below is loaded on first use, so ``import aeron_numba``
imports neither Numba nor a kernel: a tool's ``--help`` answers at once.
"""

import logging as _logging
import sys as _sys

# A library stays silent unless the application configures logging (the command lines do: -v, AERON_LOG_LEVEL).
_logging.getLogger("aeron_numba").addHandler(_logging.NullHandler())

if "numba" in _sys.modules:  # numba already paid for: a user's own cached kernels share the stamped dir
    from aeron_numba import jit as _jit  # noqa: F401  (configures the cache on import)

__version__ = "0.1.0"

_PUBLIC = {
    "aeron_numba.client": (
        "Aeron", "Context", "Publication", "ExclusivePublication", "Subscription", "Image", "Header",
        "FragmentAssembler", "ControlledFragmentAssembler", "ControlledFragmentAction", "BufferClaim",
        "Counter", "CountersReader", "ABORT", "BREAK", "COMMIT", "CONTINUE",
    ),
    "aeron_numba.driver": ("MediaDriver", "MediaDriverProcess", "DriverContext", "ActiveDriverError"),
    "aeron_numba.errors": (
        "AeronError", "ConfigurationError", "LayoutError", "InvalidChannelError", "DriverTimeoutError",
        "ClientTimeoutError", "ConductorServiceTimeoutError", "ClientClosedError", "RegistrationError",
        "MessageTooLongError", "CountersFullError",
    ),
    "aeron_numba.layout.publication_status": (
        "NOT_CONNECTED", "BACK_PRESSURED", "ADMIN_ACTION", "CLOSED", "MAX_POSITION_EXCEEDED",
    ),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'aeron_numba' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
