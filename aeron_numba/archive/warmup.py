"""Compile (or load from Numba's cache) every kernel the archive runs, before it takes requests: a kernel
compiled lazily in the middle of a duty cycle would stall recordings, replays and control sessions for
seconds on a cold cache."""

from __future__ import annotations

import numpy as np

from aeron_numba.kernels import recorder
from aeron_numba.kernels.network_stages import run_stages, stage_address
from aeron_numba.kernels.replay_rewrite import frame_checksum, record_checksums, replay_block, replay_rewrite
from aeron_numba.kernels.segment_scanner import (
    commit_record_block,
    record_block_extent,
    recorded_frames_end,
    whole_messages_length,
)
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout.checksum import CHECKSUM_CRC32, CHECKSUM_CRC32C, CHECKSUM_NONE, REWRITE_OUT_LENGTH
from aeron_numba.layout.log_buffer_descriptor import LOG_META_DATA_LENGTH, LOG_TERM_LENGTH_OFFSET
from aeron_numba.layout.publication_status import PUB_STATE_CLOSED, PUB_STATE_LENGTH


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
    scan_block(block, 0, 0, 4096)
    # The recorder's and replayer's block kernels: a log whose publication is closed and an image with nothing
    # to poll exercise no path but still compile every one.
    term_length = 64 * 1024
    log = np.zeros(3 * term_length + LOG_META_DATA_LENGTH, dtype=np.uint8)
    log[3 * term_length + LOG_TERM_LENGTH_OFFSET:3 * term_length + LOG_TERM_LENGTH_OFFSET + 4] = \
        np.frombuffer(np.int32(term_length).tobytes(), np.uint8)
    values = np.zeros(4096, dtype=np.uint8)
    pub_state = np.zeros(PUB_STATE_LENGTH, dtype=np.int64)
    pub_state[PUB_STATE_CLOSED] = 1
    out = np.zeros(REWRITE_OUT_LENGTH, dtype=np.int64)
    replay_block(log, 0, 0, 64, log, pub_state, values, CHECKSUM_NONE, out)
    record_block_extent(log, values, 0, 4096, out)
    commit_record_block(values, values, 0, 1, 0, 0)
    # The compiled block write, called and as a stage (its C wrapper too): an image with nothing new writes nothing.
    state = recorder.new_state()
    state[recorder.STATE_LOG_ADDRESS], state[recorder.STATE_LOG_LENGTH] = log.ctypes.data, log.size
    state[recorder.STATE_VALUES_ADDRESS], state[recorder.STATE_VALUES_LENGTH] = values.ctypes.data, values.size
    state[recorder.STATE_METADATA_ADDRESS], state[recorder.STATE_METADATA_LENGTH] = values.ctypes.data, values.size
    state[recorder.STATE_FILE_IO_MAX_LENGTH] = 4096
    recorder.record_block(state)
    state[recorder.STATE_STAGE_ON] = 1
    stages = np.array([[stage_address(recorder.recording_stage), state.ctypes.data]], np.int64)
    run_stages(stages, 1)
