"""aeron-numba: Aeron (media driver, client, Archive, Cluster) in Python with Numba kernels.

Importing the package points Numba's on-disk cache at a directory stamped with a hash of the kernel
sources, before any kernel module is imported (see ``aeron_numba/jit.py`` for why).
"""

from aeron_numba import jit as _jit

_jit.configure_cache()

__version__ = "0.1.0"
