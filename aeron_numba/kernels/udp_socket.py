"""libc's UDP socket calls from compiled code: batched receives (``recvmmsg``), batched and single sends.

The driver's sender and receiver duty cycles read and write datagrams without returning to Python for each one:
a kernel calls ``recvmmsg`` on a non-blocking socket into a ``ReceiveBatch`` (up to ``vlen`` datagrams, each
into its own slot of one buffer, with its source address), and ``sendmmsg`` / ``sendto`` straight from a
publication's log (no copy: the ``iovec`` points into the term).

The calls take the socket's file descriptor and raw addresses of structures built once in numpy arrays
(``layout/linux_socket.py``): the caller keeps those arrays alive while the addresses are in use. Results follow
the project's rule for kernels, a count or a negative status: ``-errno`` on failure, and 0 for "nothing to read"
(EAGAIN). ``libc`` symbols are called as external functions, as ``kernels/idle_wait.py`` calls ``nanosleep``;
under ``NUMBA_DISABLE_JIT`` the same functions go through ``ctypes``.
"""

from __future__ import annotations

import ctypes
import errno as errno_codes
import socket

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.layout import linux_socket as ls

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
EAGAIN = errno_codes.EAGAIN
EINTR = errno_codes.EINTR
#: Errors the network hands back for a datagram, not for our socket (an ICMP port unreachable surfacing as
#: ECONNREFUSED, a full socket buffer, a peer gone): the datagram is lost, nothing else.
TRANSIENT_ERRORS = (errno_codes.ECONNREFUSED, errno_codes.EHOSTUNREACH, errno_codes.ENETUNREACH, errno_codes.EAGAIN,
                    errno_codes.ENOBUFS, errno_codes.EPERM, errno_codes.EMSGSIZE, errno_codes.EINTR)


def _as_pointer(context, builder, value, value_type):
    return builder.inttoptr(context.cast(builder, value, value_type, types.int64), _I8P)


def _as_i32(context, builder, value, value_type):
    return builder.trunc(context.cast(builder, value, value_type, types.int64), _I32)


@intrinsic
def _recvmmsg(typingctx, fd, msgs_address, vlen, flags):
    """``recvmmsg(fd, msgs, vlen, flags, NULL)``: datagrams received, or -1 with errno set."""
    if not all(isinstance(t, types.Integer) for t in (fd, msgs_address, vlen, flags)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I32, [_I32, _I8P, _I32, _I32, _I8P])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "recvmmsg")
        result = builder.call(fn, [_as_i32(context, builder, args[0], sig.args[0]),
                                   _as_pointer(context, builder, args[1], sig.args[1]),
                                   _as_i32(context, builder, args[2], sig.args[2]),
                                   _as_i32(context, builder, args[3], sig.args[3]), ir.Constant(_I8P, None)])
        return builder.sext(result, _I64)

    return types.int64(fd, msgs_address, vlen, flags), codegen


@intrinsic
def _sendmmsg(typingctx, fd, msgs_address, vlen, flags):
    """``sendmmsg(fd, msgs, vlen, flags)``: datagrams sent, or -1 with errno set."""
    if not all(isinstance(t, types.Integer) for t in (fd, msgs_address, vlen, flags)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I32, [_I32, _I8P, _I32, _I32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "sendmmsg")
        result = builder.call(fn, [_as_i32(context, builder, args[0], sig.args[0]),
                                   _as_pointer(context, builder, args[1], sig.args[1]),
                                   _as_i32(context, builder, args[2], sig.args[2]),
                                   _as_i32(context, builder, args[3], sig.args[3])])
        return builder.sext(result, _I64)

    return types.int64(fd, msgs_address, vlen, flags), codegen


@intrinsic
def _sendto(typingctx, fd, data_address, length, flags, sockaddr_address):
    """``sendto(fd, data, length, flags, sockaddr_in, 16)``: bytes sent, or -1 with errno set."""
    if not all(isinstance(t, types.Integer) for t in (fd, data_address, length, flags, sockaddr_address)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I64, [_I32, _I8P, _I64, _I32, _I8P, _I32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "sendto")
        return builder.call(fn, [_as_i32(context, builder, args[0], sig.args[0]),
                                 _as_pointer(context, builder, args[1], sig.args[1]),
                                 context.cast(builder, args[2], sig.args[2], types.int64),
                                 _as_i32(context, builder, args[3], sig.args[3]),
                                 _as_pointer(context, builder, args[4], sig.args[4]),
                                 _I32(ls.SOCKADDR_IN_LENGTH)])

    return types.int64(fd, data_address, length, flags, sockaddr_address), codegen


@intrinsic
def last_errno(typingctx):
    """The calling thread's ``errno`` (glibc's ``__errno_location``), after a libc call of compiled code that
    failed (here and ``recorder``'s ``pwrite``)."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I32.as_pointer(), []),
                                            "__errno_location")
        return builder.sext(builder.load(builder.call(fn, [])), _I64)

    return types.int64(), codegen


@intrinsic
def address_of(typingctx, array):
    """The address of ``array``'s first element (its data pointer as an int64)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, _I64)

    return types.int64(array), codegen


if numba.config.DISABLE_JIT:  # plain Python for coverage/debug runs: the same calls through ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    _libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    _libc.sendto.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_uint]
    _libc.sendto.restype = ctypes.c_ssize_t

    def _recvmmsg(fd, msgs_address, vlen, flags):  # noqa: F811
        return _libc.recvmmsg(int(fd), int(msgs_address), int(vlen), int(flags), None)

    def _sendmmsg(fd, msgs_address, vlen, flags):  # noqa: F811
        return _libc.sendmmsg(int(fd), int(msgs_address), int(vlen), int(flags))

    def _sendto(fd, data_address, length, flags, sockaddr_address):  # noqa: F811
        return _libc.sendto(int(fd), int(data_address), int(length), int(flags), int(sockaddr_address),
                            ls.SOCKADDR_IN_LENGTH)

    def last_errno():  # noqa: F811
        return ctypes.get_errno()

    def address_of(array):  # noqa: F811
        return array.ctypes.data


# ------------------------------------------------------------------------------------------------ kernels
@kernel
def receive_datagrams(fd, msgs, vlen):
    """Read up to ``vlen`` waiting datagrams into the batch whose headers are ``msgs`` (``ReceiveBatch.msgs``),
    without blocking. Returns how many were read, 0 when none was waiting (or a signal interrupted the call), or
    ``-errno``. Each source address length is reset first: the kernel shortens it for every datagram it returns."""
    for i in range(vlen):
        atomics.put_int32(msgs, i * ls.MMSGHDR_LENGTH + ls.MSG_NAMELEN_OFFSET, ls.SOCKADDR_IN_LENGTH)
    count = _recvmmsg(fd, address_of(msgs), vlen, ls.MSG_DONTWAIT)
    if count >= 0:
        return count
    error = last_errno()
    if error == EAGAIN or error == EINTR:
        return 0
    return -error


@kernel
def datagram_length(msgs, index):
    """Bytes of datagram ``index`` of the last ``receive_datagrams``; -1 if it was cut short (larger than its
    slot)."""
    header = index * ls.MMSGHDR_LENGTH
    if atomics.get_int32(msgs, header + ls.MSG_FLAGS_OFFSET) & ls.MSG_TRUNC:
        return -1
    return atomics.get_int32(msgs, header + ls.MSG_LEN_OFFSET) & 0xFFFFFFFF


@kernel
def send_datagram(fd, data_address, length, sockaddr):
    """Send ``length`` bytes at ``data_address`` to the ``sockaddr_in`` in ``sockaddr`` (16 bytes). Returns the
    bytes sent or ``-errno``."""
    return send_datagram_to(fd, data_address, length, address_of(sockaddr))


@kernel
def send_datagram_to(fd, data_address, length, sockaddr_address):
    """``send_datagram`` to the ``sockaddr_in`` at ``sockaddr_address``."""
    sent = _sendto(fd, data_address, length, 0, sockaddr_address)
    if sent >= 0:
        return sent
    return -last_errno()


@kernel
def send_datagrams(fd, msgs, vlen):
    """``sendmmsg`` of the first ``vlen`` headers of ``msgs`` (a ``SendBatch``). Returns how many went, or
    ``-errno`` if the first could not go."""
    sent = _sendmmsg(fd, address_of(msgs), vlen, 0)
    if sent >= 0:
        return sent
    return -last_errno()


# ------------------------------------------------------------------------------------ Python-side set-up
def _aligned(length: int, dtype=np.uint8, alignment: int = 64) -> np.ndarray:
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(length * itemsize + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + length * itemsize].view(dtype)


def sockaddr_in(host: str, port: int) -> np.ndarray:
    """``struct sockaddr_in`` for an IPv4 ``host`` and ``port``, as 16 bytes."""
    address = np.zeros(ls.SOCKADDR_IN_LENGTH, np.uint8)
    address[ls.SOCKADDR_IN_FAMILY_OFFSET:ls.SOCKADDR_IN_FAMILY_OFFSET + 2].view(np.uint16)[0] = ls.AF_INET
    address[ls.SOCKADDR_IN_PORT_OFFSET:ls.SOCKADDR_IN_PORT_OFFSET + 2] = np.frombuffer(port.to_bytes(2, "big"),
                                                                                       np.uint8)
    address[ls.SOCKADDR_IN_ADDRESS_OFFSET:ls.SOCKADDR_IN_ADDRESS_OFFSET + 4] = np.frombuffer(
        socket.inet_aton(host), np.uint8)
    return address


def sockaddr_host_port(names: np.ndarray, offset: int) -> tuple[str, int]:
    """The ``(host, port)`` of the ``sockaddr_in`` at ``names[offset:]``."""
    port_at = offset + ls.SOCKADDR_IN_PORT_OFFSET
    address_at = offset + ls.SOCKADDR_IN_ADDRESS_OFFSET
    return (socket.inet_ntoa(names[address_at:address_at + 4].tobytes()),
            int.from_bytes(names[port_at:port_at + 2].tobytes(), "big"))


class ReceiveBatch:
    """``vlen`` datagram slots of ``slot_length`` bytes each for ``receive_datagrams``: datagram ``i`` lands at
    ``buffer[i * slot_length:]`` and its source address at ``names[i * 16:]``."""

    def __init__(self, vlen: int, slot_length: int):
        if vlen <= 0 or slot_length <= 0:
            raise ValueError(f"vlen={vlen} and slot_length={slot_length} must be > 0")
        self.vlen = vlen
        self.slot_length = slot_length
        self.buffer = _aligned(vlen * slot_length)
        self.names = _aligned(vlen * ls.SOCKADDR_IN_LENGTH)
        self.iovecs = _aligned(vlen * ls.IOVEC_LENGTH)
        self.msgs = _aligned(vlen * ls.MMSGHDR_LENGTH)
        iovecs, msgs = self.iovecs.view(np.int64), self.msgs
        for i in range(vlen):
            iovecs[2 * i] = self.buffer.ctypes.data + i * slot_length
            iovecs[2 * i + 1] = slot_length
            header = msgs[i * ls.MMSGHDR_LENGTH:(i + 1) * ls.MMSGHDR_LENGTH]
            header[ls.MSG_NAME_OFFSET:ls.MSG_NAME_OFFSET + 8].view(np.int64)[0] = \
                self.names.ctypes.data + i * ls.SOCKADDR_IN_LENGTH
            header[ls.MSG_NAMELEN_OFFSET:ls.MSG_NAMELEN_OFFSET + 4].view(np.int32)[0] = ls.SOCKADDR_IN_LENGTH
            header[ls.MSG_IOV_OFFSET:ls.MSG_IOV_OFFSET + 8].view(np.int64)[0] = \
                self.iovecs.ctypes.data + i * ls.IOVEC_LENGTH
            header[ls.MSG_IOVLEN_OFFSET:ls.MSG_IOVLEN_OFFSET + 8].view(np.int64)[0] = 1

    def datagram(self, index: int, length: int) -> np.ndarray:
        """The bytes of datagram ``index`` (a view of its slot)."""
        start = index * self.slot_length
        return self.buffer[start:start + length]

    def source(self, index: int) -> tuple[str, int]:
        return sockaddr_host_port(self.names, index * ls.SOCKADDR_IN_LENGTH)


class SendBatch:
    """``vlen`` message headers for ``send_datagrams``, each with one ``iovec``; a kernel fills in where each
    datagram's bytes are (``iovecs``: base address, length) and where it goes (``msg_name``: a ``sockaddr_in``)."""

    def __init__(self, vlen: int):
        if vlen <= 0:
            raise ValueError(f"vlen={vlen} must be > 0")
        self.vlen = vlen
        self.iovecs = _aligned(vlen * ls.IOVEC_LENGTH)
        self.msgs = _aligned(vlen * ls.MMSGHDR_LENGTH)
        for i in range(vlen):
            header = self.msgs[i * ls.MMSGHDR_LENGTH:(i + 1) * ls.MMSGHDR_LENGTH]
            header[ls.MSG_NAMELEN_OFFSET:ls.MSG_NAMELEN_OFFSET + 4].view(np.int32)[0] = ls.SOCKADDR_IN_LENGTH
            header[ls.MSG_IOV_OFFSET:ls.MSG_IOV_OFFSET + 8].view(np.int64)[0] = \
                self.iovecs.ctypes.data + i * ls.IOVEC_LENGTH
            header[ls.MSG_IOVLEN_OFFSET:ls.MSG_IOVLEN_OFFSET + 8].view(np.int64)[0] = 1

    def entry(self, index: int) -> tuple[int, int]:
        """(address, length) of the bytes entry ``index`` sends."""
        iovec = self.iovecs[index * ls.IOVEC_LENGTH:(index + 1) * ls.IOVEC_LENGTH].view(np.int64)
        return int(iovec[0]), int(iovec[1])


@kernel
def set_send_entry(msgs, iovecs, index, data_address, length, sockaddr_address):
    """Header ``index`` of a ``SendBatch``: ``length`` bytes at ``data_address`` to the ``sockaddr_in`` at
    ``sockaddr_address``."""
    atomics.put_int64(iovecs, index * ls.IOVEC_LENGTH + ls.IOVEC_BASE_OFFSET, data_address)
    atomics.put_int64(iovecs, index * ls.IOVEC_LENGTH + ls.IOVEC_LENGTH_OFFSET, length)
    atomics.put_int64(msgs, index * ls.MMSGHDR_LENGTH + ls.MSG_NAME_OFFSET, sockaddr_address)
