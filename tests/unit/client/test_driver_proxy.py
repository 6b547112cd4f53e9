"""DriverProxy: a command that cannot be written because cnc.dat's ring buffer is garbage says so."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.client.driver_proxy import DriverProxy
from aeron_numba.errors import LayoutError
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import ring_buffer as L


def test_a_corrupt_to_driver_ring_buffer_names_the_command_and_what_to_do():
    ring = ManyToOneRingBuffer(np.zeros(1024 + L.TRAILER_LENGTH, np.uint8))
    ring.buffer[1024 + L.TAIL_POSITION_OFFSET:][:8].view(np.int64)[0] = 13  # no producer stores an odd tail
    proxy = DriverProxy(ring, client_id=1, driver_timeout_ns=10**9)
    with pytest.raises(LayoutError, match=r"cannot write ADD_PUBLICATION: the to-driver ring buffer is corrupt.*"
                                          r"cnc.dat is damaged.*AERON_DIR_DELETE_ON_START=true"):
        proxy.add_publication("aeron:ipc", 1)
