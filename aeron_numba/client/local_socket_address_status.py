"""The addresses a channel endpoint is bound to, as its driver publishes them (Aeron's LocalSocketAddressStatus).

A UDP endpoint asked for port 0 gets one from the OS; the driver writes the bound ``host:port`` into a type-14
counter (``rcv-local-sockaddr`` / ``snd-local-sockaddr``) whose key names the endpoint's channel status counter.
A client finds it there, e.g. to tell an archive where to send its responses.
"""

from __future__ import annotations

import struct

from aeron_numba.kernels.counters import CountersReader
from aeron_numba.layout import counters as cl

NO_ID_ALLOCATED = -1  # a channel without a status counter (IPC): always ACTIVE, as in Aeron
_I32 = struct.Struct("<i")


def channel_status(counters_reader: CountersReader, channel_status_id: int) -> int:
    """A channel's status (``CHANNEL_STATUS_*``) from its status counter."""
    if channel_status_id == NO_ID_ALLOCATED:
        return cl.CHANNEL_STATUS_ACTIVE
    return counters_reader.get_counter_value(channel_status_id)


def local_socket_addresses(counters_reader: CountersReader, channel_status_id: int) -> list[str]:
    """Every ``host:port`` bound for the channel whose status counter is ``channel_status_id``, once ACTIVE."""
    if channel_status_id == NO_ID_ALLOCATED or \
            channel_status(counters_reader, channel_status_id) != cl.CHANNEL_STATUS_ACTIVE:
        return []
    found = []
    for counter in counters_reader.for_each():
        if counter.type_id != cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID or counter.value != cl.CHANNEL_STATUS_ACTIVE:
            continue
        key = counter.key
        if _I32.unpack_from(key, cl.LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET)[0] != channel_status_id:
            continue
        length = _I32.unpack_from(key, cl.LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET)[0]
        start = cl.LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET
        if 0 < length <= len(key) - start:
            found.append(key[start:start + length].decode("ascii", errors="replace"))
    return found
