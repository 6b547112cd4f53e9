"""Compile (or load from Numba's cache) every kernel the archive runs, before it takes requests: a kernel
compiled lazily in the middle of a duty cycle would stall recordings, replays and control sessions for
seconds on a cold cache."""

from __future__ import annotations

import numpy as np

from aeron_numba.kernels.replay_rewrite import frame_checksum, record_checksums, replay_rewrite
from aeron_numba.kernels.segment_scanner import recorded_frames_end, verify_frames, whole_messages_length
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout.checksum import CHECKSUM_CRC32, CHECKSUM_CRC32C, REWRITE_OUT_LENGTH


def warm_up_archive_kernels() -> None:
    block = np.zeros(4096, dtype=np.uint8)
    block[0:4] = np.frombuffer(np.int32(64).tobytes(), np.uint8)  # one DATA frame of 64 bytes
    block[6] = 1
    out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)
    for algorithm in (CHECKSUM_CRC32, CHECKSUM_CRC32C):
        record_checksums(block, 0, 64, algorithm, out)
        replay_rewrite(block, 0, 64, 1, 2, algorithm, out)
        frame_checksum(algorithm, block, 32, 32)
    recorded_frames_end(block, 0, 0, 65536)
    whole_messages_length(block, 0, 64)
    verify_frames(block, 0, 64, 0, 65536, CHECKSUM_CRC32C, out)
    scan_block(block, 0, 0, 4096)
