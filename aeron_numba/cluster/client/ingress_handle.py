"""A cluster session's ingress for ``@njit`` code: ``AeronCluster.compiled()`` returns an ``IngressHandle``, and
``ingress_offer(handle, buffer, offset, length)`` / ``ingress_try_claim(handle, length)`` put the session header
in front, as ``AeronCluster.offer`` / ``try_claim`` do, without leaving compiled code.

They are functions, not methods of the handle as ``client/handles.py`` has for a bare publication: Numba takes the
first ``overload_method`` registered for a name on its NamedTuple type, so a second ``offer`` for another handle
type is never tried. ``ingress_offer`` copies the message behind the header in the handle's own buffer (room for
the publication's ``max_message_length``) and offers that range, fragmented if long; ``ingress_try_claim`` claims
``32 + length`` bytes of one frame in ``handle.publication.claim`` and writes the header at its start: write the
message at ``claim.offset + 32``, then ``claim.commit()``. Both return the publication's codes; ERROR for a range
outside ``buffer`` or a message over ``max_message_length``.

A handle is bound to one publication and one leadership term. Once the leader changes, ``AeronCluster`` closes that
publication and the handle's offers return CLOSED: keep calling ``poll_egress`` from Python (it follows the new
leader) and take a new handle when ``state`` is CONNECTED again. The session's state moves only in Python: a
NOT_CONNECTED from compiled code is not tracked, the egress image closing is (by ``poll_egress``). One thread
uses a handle (its buffer is shared by its offers).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from aeron_numba.client.handles import PublicationHandle
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.codecs.cluster_messages import SESSION_HEADER_LENGTH
from aeron_numba.layout.publication_status import ERROR


class IngressHandle(NamedTuple):
    """What ``AeronCluster.compiled()`` returns: pass it to ``@njit`` code and call ``offer`` / ``try_claim``."""

    publication: PublicationHandle
    message: np.ndarray  # uint8: the session header, then room for one message


def new_ingress_handle(publication: PublicationHandle, header: np.ndarray) -> IngressHandle:
    if numba.config.DISABLE_JIT:  # the publication handle's methods exist only as Numba overloads
        raise ClusterError("compiled handles need Numba's JIT, and NUMBA_DISABLE_JIT=1 is set: offer through the "
                           "AeronCluster from Python instead")
    message = np.zeros(SESSION_HEADER_LENGTH + publication.max_message_length, dtype=np.uint8)
    message[:SESSION_HEADER_LENGTH] = header[:SESSION_HEADER_LENGTH]
    return IngressHandle(publication, message)


@numba.njit(inline="always")
def ingress_offer(handle, buffer, offset, length):
    """Offer ``buffer[offset:offset + length]`` (uint8) behind the session header; the publication's result."""
    message = handle.message
    if offset < 0 or length < 0 or offset > buffer.shape[0] - length or \
            length > message.shape[0] - SESSION_HEADER_LENGTH:
        return ERROR
    for i in range(length):
        message[SESSION_HEADER_LENGTH + i] = buffer[offset + i]
    return handle.publication.offer(message, 0, SESSION_HEADER_LENGTH + length)


@numba.njit(inline="always")
def ingress_try_claim(handle, length):
    """Claim ``32 + length`` bytes in ``handle.publication.claim`` with the session header written at its start;
    the publication's result (> 0: write at ``claim.offset + 32``, then commit)."""
    claim = handle.publication.claim
    result = handle.publication.try_claim(length + SESSION_HEADER_LENGTH, claim)
    if result > 0:
        start = claim.offset
        header = handle.message
        for i in range(SESSION_HEADER_LENGTH):
            claim.buffer[start + i] = header[i]
    return result
