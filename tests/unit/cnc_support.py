"""A cnc.dat with a valid, ready header over a garbage body (what a stray writer or a bad copy leaves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import cnc

SMALL_SECTIONS = dict(to_driver_buffer_length=64 * 1024 + 768, to_clients_buffer_length=64 * 1024 + 128,
                      counters_values_buffer_length=64 * 1024, error_log_buffer_length=64 * 1024)


def write_garbage_cnc(path: Path, heartbeat_ms: int, seed: int = 17) -> None:
    """Random bytes after the header, then ``heartbeat_ms`` as the driver heartbeat."""
    with CncFile.create(path, **SMALL_SECTIONS) as cnc_file:
        body = cnc_file.buffer[cnc.END_OF_METADATA_OFFSET:]
        body[:] = np.random.default_rng(seed).integers(0, 256, body.size, dtype=np.uint8)
        del body
        ring = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        ring.set_consumer_heartbeat_time(heartbeat_ms)
        del ring
