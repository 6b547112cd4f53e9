"""The media driver: conductor, IPC publications, cnc.dat, and launching it as a process.

The public names load on first use: ``python -m aeron_numba.driver --help`` and the settings reference read
``driver.context`` without importing the driver's kernels (and Numba).
"""

_PUBLIC = {
    "DriverContext": "aeron_numba.driver.context",
    "ActiveDriverError": "aeron_numba.driver.media_driver",
    "MediaDriver": "aeron_numba.driver.media_driver",
    "MediaDriverProcess": "aeron_numba.driver.media_driver",
}

__all__ = ["ActiveDriverError", "DriverContext", "MediaDriver", "MediaDriverProcess"]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'aeron_numba.driver' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
