"""Atomic loads, stores and read-modify-writes at a byte offset of a ``np.uint8`` array.

Numba has no public CPU atomics, so these are ``numba.extending.intrinsic`` functions whose code generator
emits LLVM atomic instructions (NOTES-numba.md "Atomics"): the array's data pointer is cast to ``i8*``,
advanced by the byte offset and cast to ``iN*``, giving Aeron's "buffer + offset" addressing.

Every load or store of memory that another process reads or writes goes through one of these, at least the
relaxed (``monotonic``) form: plain numpy loads and stores may be merged, hoisted or folded by LLVM
(NOTES-numba.md pitfall 2). On x86 acquire loads and release stores are plain ``mov``s; what they buy is
that the compiler keeps their order, and correctness on weaker CPUs.

The intrinsics do no bounds checking, like Agrona's ``UnsafeBuffer``: callers check offsets first. They
cannot be called from plain Python (pitfall 3); ``kernels/atomics_for_python.py`` wraps them for tests and tools.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_INT_TYPES = {8: types.int8, 16: types.int16, 32: types.int32, 64: types.int64}


def _check_buffer(buf) -> bool:
    return isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 1


def _address(context, builder, buf_type, buf, offset_type, offset, bits):
    """``(iN*)((i8*)buf.data + offset)``."""
    array = context.make_array(buf_type)(context, builder, buf)
    base = builder.bitcast(array.data, ir.IntType(8).as_pointer())
    byte_offset = context.cast(builder, offset, offset_type, types.int64)
    return builder.bitcast(builder.gep(base, [byte_offset]), ir.IntType(bits).as_pointer())


def _make_load(bits: int, ordering: str):
    result_type = _INT_TYPES[bits]

    @intrinsic
    def load(typingctx, buf, offset):
        if not (_check_buffer(buf) and isinstance(offset, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], bits)
            return builder.load_atomic(ptr, ordering, bits // 8)

        return result_type(buf, offset), codegen

    return load


def _make_store(bits: int, ordering: str):
    value_type = _INT_TYPES[bits]

    @intrinsic
    def store(typingctx, buf, offset, value):
        if not (_check_buffer(buf) and isinstance(offset, types.Integer) and isinstance(value, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], bits)
            # Truncating/extending cast: callers pass Python ints that numba types as int64.
            val = context.cast(builder, args[2], sig.args[2], value_type)
            builder.store_atomic(val, ptr, ordering, bits // 8)
            return context.get_dummy_value()

        return types.void(buf, offset, value), codegen

    return store


def _make_get_and_add(bits: int):
    value_type = _INT_TYPES[bits]

    @intrinsic
    def get_and_add(typingctx, buf, offset, delta):
        if not (_check_buffer(buf) and isinstance(offset, types.Integer) and isinstance(delta, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], bits)
            val = context.cast(builder, args[2], sig.args[2], value_type)
            return builder.atomic_rmw("add", ptr, val, "seq_cst")

        return value_type(buf, offset, delta), codegen

    return get_and_add


def _make_compare_and_set(bits: int):
    value_type = _INT_TYPES[bits]

    @intrinsic
    def compare_and_set(typingctx, buf, offset, expected, update):
        if not (
            _check_buffer(buf)
            and isinstance(offset, types.Integer)
            and isinstance(expected, types.Integer)
            and isinstance(update, types.Integer)
        ):
            return None

        def codegen(context, builder, sig, args):
            ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], bits)
            exp = context.cast(builder, args[2], sig.args[2], value_type)
            new = context.cast(builder, args[3], sig.args[3], value_type)
            result = builder.cmpxchg(ptr, exp, new, "seq_cst", "seq_cst")
            return builder.extract_value(result, 1)

        return types.boolean(buf, offset, expected, update), codegen

    return compare_and_set


def _make_fence(ordering: str):
    @intrinsic
    def fence(typingctx):
        def codegen(context, builder, sig, args):
            builder.fence(ordering)
            return context.get_dummy_value()

        return types.void(), codegen

    return fence


# Relaxed ("plain" in Aeron's words, but never merged or hoisted by the compiler).
get_int8 = _make_load(8, "monotonic")
get_int16 = _make_load(16, "monotonic")
get_int32 = _make_load(32, "monotonic")
get_int64 = _make_load(64, "monotonic")
put_int8 = _make_store(8, "monotonic")
put_int16 = _make_store(16, "monotonic")
put_int32 = _make_store(32, "monotonic")
put_int64 = _make_store(64, "monotonic")

# Acquire loads ("volatile" gets) and release stores ("ordered"/"release" puts).
get_int32_acquire = _make_load(32, "acquire")
get_int64_acquire = _make_load(64, "acquire")
put_int32_release = _make_store(32, "release")
put_int64_release = _make_store(64, "release")

# Read-modify-writes, sequentially consistent (lock xadd / lock cmpxchg on x86).
get_and_add_int32 = _make_get_and_add(32)
get_and_add_int64 = _make_get_and_add(64)
compare_and_set_int32 = _make_compare_and_set(32)
compare_and_set_int64 = _make_compare_and_set(64)

acquire_fence = _make_fence("acquire")
release_fence = _make_fence("release")
full_fence = _make_fence("seq_cst")


# ----------------------------------------------------------------------------------------------------------
# NUMBA_DISABLE_JIT=1 (coverage runs, debugging): intrinsics have no Python body, so the same names become
# plain numpy loads and stores. They are correct in one thread only, which is all such runs need.
if numba.config.DISABLE_JIT:
    import numpy as _np

    def _py_load(dtype):
        def load(buf, offset):
            return int(buf[offset : offset + _np.dtype(dtype).itemsize].view(dtype)[0])

        return load

    def _py_store(dtype):
        def store(buf, offset, value):
            buf[offset : offset + _np.dtype(dtype).itemsize].view(dtype)[0] = _np.array(value).astype(dtype)

        return store

    def _py_get_and_add(dtype):
        load, store = _py_load(dtype), _py_store(dtype)

        def get_and_add(buf, offset, delta):
            old = load(buf, offset)
            store(buf, offset, old + delta)
            return old

        return get_and_add

    def _py_compare_and_set(dtype):
        load, store = _py_load(dtype), _py_store(dtype)

        def compare_and_set(buf, offset, expected, update):
            if load(buf, offset) != expected:
                return False
            store(buf, offset, update)
            return True

        return compare_and_set

    def _py_fence():
        return None

    get_int8, get_int16 = _py_load(_np.int8), _py_load(_np.int16)
    get_int32 = get_int32_acquire = _py_load(_np.int32)
    get_int64 = get_int64_acquire = _py_load(_np.int64)
    put_int8, put_int16 = _py_store(_np.int8), _py_store(_np.int16)
    put_int32 = put_int32_release = _py_store(_np.int32)
    put_int64 = put_int64_release = _py_store(_np.int64)
    get_and_add_int32, get_and_add_int64 = _py_get_and_add(_np.int32), _py_get_and_add(_np.int64)
    compare_and_set_int32, compare_and_set_int64 = _py_compare_and_set(_np.int32), _py_compare_and_set(_np.int64)
    acquire_fence = release_fence = full_fence = _py_fence
