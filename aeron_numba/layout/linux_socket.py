"""The Linux (LP64: x86-64, aarch64) structures the compiled UDP path hands to ``recvmmsg`` / ``sendmmsg`` / ``sendto``.

``struct sockaddr_in`` (16 bytes), ``struct iovec`` (16) and ``struct mmsghdr`` (a 56-byte ``struct msghdr``
followed by ``unsigned int msg_len``, padded to 64). The driver builds them once in numpy arrays and the kernels
read and write their fields at these offsets (``kernels/udp_socket.py``).
"""

from __future__ import annotations

AF_INET = 2

SOCKADDR_IN_LENGTH = 16
SOCKADDR_IN_FAMILY_OFFSET = 0  # uint16, host order
SOCKADDR_IN_PORT_OFFSET = 2  # uint16, network order
SOCKADDR_IN_ADDRESS_OFFSET = 4  # 4 bytes, network order

IOVEC_LENGTH = 16
IOVEC_BASE_OFFSET = 0
IOVEC_LENGTH_OFFSET = 8

MMSGHDR_LENGTH = 64
MSG_NAME_OFFSET = 0
MSG_NAMELEN_OFFSET = 8  # uint32
MSG_IOV_OFFSET = 16
MSG_IOVLEN_OFFSET = 24
MSG_CONTROL_OFFSET = 32
MSG_CONTROLLEN_OFFSET = 40
MSG_FLAGS_OFFSET = 48  # int32, set by recvmmsg
MSG_LEN_OFFSET = 56  # uint32: bytes received / sent for this message

MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20
