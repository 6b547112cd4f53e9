"""Byte copies and fills between ``np.uint8`` arrays at byte offsets, as single LLVM memmove/memset calls.

A copy's source may also be any other 1-D byte buffer Numba types (``bytes``, ``bytearray``, ``memoryview``):
they share the array's data model, so the same pointer arithmetic reads them.

Numba's slice assignment (``dst[a:b] = src[c:d]``) builds array objects, reference-counts them and checks
for overlap through a temporary copy: on a 32-byte message that costs more than the rest of the append.
These compile to one ``llvm.memmove`` / ``llvm.memset`` (overlapping ranges are allowed); a copy of up to
``SMALL_COPY_LIMIT`` bytes to a few inline loads and stores. Like the atomics,
they do no bounds checking: callers check offsets and lengths first.
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from aeron_numba.kernels.atomics import _address, _check_buffer


@intrinsic
def copy_bytes(typingctx, dst, dst_offset, src, src_offset, length):
    """Copy ``length`` bytes from ``src[src_offset:]`` to ``dst[dst_offset:]`` (memmove semantics)."""
    if not (
        _check_buffer(dst) and _check_source(src)
        and all(isinstance(t, types.Integer) for t in (dst_offset, src_offset, length))
    ):
        return None

    def codegen(context, builder, sig, args):
        dst_ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], 8)
        src_ptr = _address(context, builder, sig.args[2], args[2], sig.args[3], args[3], 8)
        count = context.cast(builder, args[4], sig.args[4], types.int64)
        is_small = builder.icmp_unsigned("<=", count, ir.Constant(count.type, SMALL_COPY_LIMIT))
        with builder.if_else(is_small, likely=True) as (small, large):
            with small:
                _copy_small(builder, dst_ptr, src_ptr, count)
            with large:
                cgutils.raw_memmove(builder, dst_ptr, src_ptr, count, 1)
        return context.get_dummy_value()

    return types.void(dst, dst_offset, src, src_offset, length), codegen


def _check_source(src) -> bool:
    """A 1-D buffer of bytes: a ``np.uint8`` array, or bytes / bytearray / memoryview typed by Numba."""
    return isinstance(src, types.Buffer) and src.dtype == types.uint8 and src.ndim == 1


#: Copies up to this many bytes are done inline instead of calling the C library's ``memmove`` (a call that
#: costs more than moving a small message: three such copies are in every round trip of a 32-byte echo).
SMALL_COPY_LIMIT = 64


def _copy_small(builder, dst, src, count) -> None:
    """Copy ``count`` bytes (0 to SMALL_COPY_LIMIT) as two moves of the widest power of two <= count, the first
    from the start and the second ending at the end (they overlap when count is not that width). Both loads
    come before both stores, so overlapping source and destination ranges copy as memmove does."""
    done = builder.append_basic_block("copy_small.done")
    for width in (32, 16, 8, 4, 2, 1):
        move = builder.append_basic_block(f"copy_small.{width}")
        narrower = builder.append_basic_block(f"copy_small.under{width}")
        builder.cbranch(builder.icmp_unsigned(">=", count, ir.Constant(count.type, width)), move, narrower)
        builder.position_at_end(move)
        chunk = ir.VectorType(ir.IntType(8), width) if width > 8 else ir.IntType(8 * width)
        tail = builder.sub(count, ir.Constant(count.type, width))
        pointers = [builder.bitcast(p, chunk.as_pointer())
                    for p in (src, builder.gep(src, [tail]), dst, builder.gep(dst, [tail]))]
        head_value = builder.load(pointers[0], align=1)
        tail_value = builder.load(pointers[1], align=1)
        builder.store(head_value, pointers[2], align=1)
        builder.store(tail_value, pointers[3], align=1)
        builder.branch(done)
        builder.position_at_end(narrower)
    builder.branch(done)  # count == 0
    builder.position_at_end(done)


@intrinsic
def fill_bytes(typingctx, buf, offset, length, value):
    """Set ``length`` bytes of ``buf`` from ``offset`` to ``value`` (one ``llvm.memset``)."""
    if not (_check_buffer(buf) and all(isinstance(t, types.Integer) for t in (offset, length, value))):
        return None

    def codegen(context, builder, sig, args):
        ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], 8)
        count = context.cast(builder, args[2], sig.args[2], types.int64)
        byte = builder.trunc(context.cast(builder, args[3], sig.args[3], types.int64), ir.IntType(8))
        cgutils.memset(builder, ptr, count, byte)
        return context.get_dummy_value()

    return types.void(buf, offset, length, value), codegen


@intrinsic
def prefetch_for_write(typingctx, buf, offset):
    """Ask for the cache line holding ``buf[offset]`` in a writable state (x86 ``prefetchw``), ahead of the
    stores that will need it. Only a hint: nothing is read or written, an offset past the end is harmless."""
    if not (_check_buffer(buf) and isinstance(offset, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _address(context, builder, sig.args[0], args[0], sig.args[1], args[1], 8)
        i32 = ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(prefetch, [ptr, i32(1), i32(3), i32(1)])  # write, keep in all cache levels, data
        return context.get_dummy_value()

    return types.void(buf, offset), codegen


def _make_view_at(dtype):
    """An intrinsic ``view(address, count)``: a 1-D C array of ``count`` ``dtype`` items over raw memory."""

    @intrinsic
    def view_at(typingctx, address, count):
        if not (isinstance(address, types.Integer) and isinstance(count, types.Integer)):
            return None
        array_type = types.Array(dtype, 1, "C")

        def codegen(context, builder, sig, args):
            array = context.make_array(array_type)(context, builder)
            item = context.get_data_type(dtype)
            data = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), item.as_pointer())
            itemsize = context.get_constant(types.intp, context.get_abi_sizeof(item))
            length = context.cast(builder, args[1], sig.args[1], types.intp)
            populate_array(array, data=data, shape=cgutils.pack_array(builder, [length]),
                           strides=cgutils.pack_array(builder, [itemsize]), itemsize=itemsize, meminfo=None)
            return array._getvalue()

        return array_type(address, count), codegen

    return view_at


#: ``bytes_at(address, length)`` / ``int64s_at(address, count)``: arrays over memory another array owns, found by
#: address (``ndarray.ctypes.data``), so one kernel can reach many logs and state rows without a typed list. The
#: caller keeps the owning arrays alive while the addresses are in use.
bytes_at = _make_view_at(types.uint8)
int64s_at = _make_view_at(types.int64)


def function_at(function_type: types.FunctionType):
    """An intrinsic ``function(address)``: a first-class function of ``function_type`` whose C wrapper is at
    ``address`` (``function_address``), to call from a kernel that found the address in a state array, as the
    network cycles find a stage's. The caller keeps the function's dispatcher alive while the address is in use."""

    @intrinsic
    def function(typingctx, address):
        if not isinstance(address, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            value = cgutils.create_struct_proxy(function_type)(context, builder)
            pointer = context.get_value_type(types.voidptr)
            value.c_addr = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), pointer)
            value.py_addr = pointer(None)  # no Python object: the C wrapper is called directly
            value.jit_addr = pointer(None)
            return value._getvalue()

        return function_type(address), codegen

    return function


_PYTHON_FUNCTIONS: dict[int, object] = {}  # under NUMBA_DISABLE_JIT: a function's key -> the plain function


def function_address(dispatcher, function_type: types.FunctionType) -> int:
    """The address ``function_at(function_type)`` calls ``dispatcher`` (an ``@njit`` function of that type's
    signature) at: numba's C wrapper of it, compiled or loaded from the cache on first use. Under
    ``NUMBA_DISABLE_JIT`` a key that finds the plain function."""
    if numba.config.DISABLE_JIT:
        key = next((k for k, f in _PYTHON_FUNCTIONS.items() if f is dispatcher), len(_PYTHON_FUNCTIONS) + 1)
        _PYTHON_FUNCTIONS[key] = dispatcher
        return key
    from numba.experimental.function_type import _get_wrapper_address

    return _get_wrapper_address(dispatcher, function_type.signature)


if numba.config.DISABLE_JIT:  # plain Python for coverage/debug runs (see atomics.py)

    def copy_bytes(dst, dst_offset, src, src_offset, length):  # noqa: F811
        if not isinstance(src, np.ndarray):  # bytes, bytearray, memoryview
            src = np.frombuffer(src, np.uint8)
        dst[dst_offset : dst_offset + length] = src[src_offset : src_offset + length].copy()

    def fill_bytes(buf, offset, length, value):  # noqa: F811
        buf[offset : offset + length] = value

    def prefetch_for_write(buf, offset):  # noqa: F811
        pass

    def _view_at(dtype):
        def view_at(address, count):
            size = int(count) * np.dtype(dtype).itemsize
            return np.frombuffer((ctypes.c_uint8 * size).from_address(int(address)), dtype)

        return view_at

    bytes_at, int64s_at = _view_at(np.uint8), _view_at(np.int64)  # noqa: F811

    def function_at(function_type):  # noqa: F811
        return lambda address: _PYTHON_FUNCTIONS[int(address)]
