"""Signatures of the handlers that compiled callers pass to reading kernels.

A handler is an ``@njit`` function passed as a first-class function pointer (``types.FunctionType``): the
reading kernel is then compiled and cached once, whatever the handler (a dispatcher-typed argument would
recompile the kernel in every process and grow the cache). The cost is one indirect call per message.

``ctx`` is the caller's state: an ``int64`` array the handler may read and write (counts, positions,
offsets into its own buffers).
"""

from numba import types

#: ``on_fragment(ctx, buffer, offset, length)``: payload at ``buffer[offset:offset+length]``, its data
#: header at ``offset - HEADER_LENGTH`` (Aeron's FragmentHandler with the header read from the buffer).
FRAGMENT_HANDLER_SIG = types.void(types.int64[::1], types.uint8[::1], types.int64, types.int64)
FragmentHandler = types.FunctionType(FRAGMENT_HANDLER_SIG)

#: ``on_message(ctx, msg_type_id, buffer, offset, length)`` for ring buffer and broadcast records.
MESSAGE_HANDLER_SIG = types.void(types.int64[::1], types.int64, types.uint8[::1], types.int64, types.int64)
MessageHandler = types.FunctionType(MESSAGE_HANDLER_SIG)
