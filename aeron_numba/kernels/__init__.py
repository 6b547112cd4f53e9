"""Numba kernels over ``np.uint8`` views of memory-mapped files: arrays, ints and return codes only."""
