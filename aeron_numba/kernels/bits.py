"""The layouts' bit arithmetic compiled for kernels (``layout/bits.py`` holds the one definition; layouts hold data
and plain-Python arithmetic, kernels compute)."""

from aeron_numba.jit import kernel
from aeron_numba.layout import bits

#: ``layout.bits.align`` inlined into compiled callers.
align = kernel(inline="always", nogil=False)(bits.align)
