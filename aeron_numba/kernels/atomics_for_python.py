"""Plain-Python entry points to the atomics (intrinsics cannot be called from Python, NOTES pitfall 3).

For tests, tools and cold paths only; hot paths call ``kernels.atomics`` from compiled code. They hold the
GIL: for one load or store, releasing and re-taking it would cost more than the rest of the call.
"""

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics


@kernel(nogil=False)
def get_int32_acquire(buf, offset):
    return atomics.get_int32_acquire(buf, offset)


@kernel(nogil=False)
def get_int64_acquire(buf, offset):
    return atomics.get_int64_acquire(buf, offset)


@kernel(nogil=False)
def put_int32_release(buf, offset, value):
    atomics.put_int32_release(buf, offset, value)


@kernel(nogil=False)
def put_int64_release(buf, offset, value):
    atomics.put_int64_release(buf, offset, value)


@kernel(nogil=False)
def get_and_add_int64(buf, offset, delta):
    return atomics.get_and_add_int64(buf, offset, delta)


@kernel(nogil=False)
def get_and_add_int32(buf, offset, delta):
    return atomics.get_and_add_int32(buf, offset, delta)


@kernel(nogil=False)
def compare_and_set_int64(buf, offset, expected, update):
    return atomics.compare_and_set_int64(buf, offset, expected, update)


@kernel(nogil=False)
def compare_and_set_int32(buf, offset, expected, update):
    return atomics.compare_and_set_int32(buf, offset, expected, update)
