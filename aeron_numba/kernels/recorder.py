"""A recorder's block in one compiled call, and the same as a stage of a driver's network cycles.

``record_block(state)`` does what ``archive/recording_session.py`` does per block in Python: the next block of
its image (``segment_scanner.record_block_extent``: whole frames of one term from the subscriber position, at most
the file I/O length, a padding frame alone) written straight from the image's log into the open segment file the
way ``RecordingWriter`` writes it (a block that crosses a page boundary: its frames after the first header, then
that header; of a padding frame only its header), then the subscriber position handed back
(``commit_record_block``), the writer's position moved, ``rec-pos`` set and the archive's write counters counted.

What is rare it leaves to Python and says so by its result: no segment file open, or the open one full
(``NEEDS_SEGMENT``: Python opens or rolls it, and writes that block itself); a write the file system took only
part of (``WRITE_FAILED``: ``STATE_WRITTEN`` holds what it took, or ``-errno``; nothing is handed back yet); the
image dropped by the driver while the write read its log (``NOT_OWNED``: the writer's position stays before the
block, which Python zeroes; asked again, it writes the block again and finds the same). The state lives in one
``int64`` array (``STATE_*``) that ``RecordingWriter`` owns: its position, segment and file are the writer's own
words, so a block written here or in Python moves the same recording.

``recording_stage(state_address)`` runs it as a stage (``kernels/network_stages``): inside the network cycles of a
driver whose archive shares its thread, a block the receiver just put into a log is recorded in the same compiled
stretch, with no Python cycle of the archive. It records while blocks are there, and turns itself off
(``STATE_STAGE_ON`` = 0) at the first result Python must handle, which the archive's watch on its image's next
frame then wakes it for.
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.idle_wait import monotonic_ns
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.segment_scanner import (EXTENT_END_POSITION, EXTENT_LOG_OFFSET, commit_record_block,
                                                 record_block_extent)
from aeron_numba.kernels.udp_socket import last_errno
from aeron_numba.layout.frame import HDR_TYPE_PAD, HEADER_LENGTH, TYPE_FIELD_OFFSET

# The state array: the image (its log, and the counters buffers of its subscriber position), the writer (its file,
# position and segment), where to count, and the last block's extent and write.
(STATE_LOG_ADDRESS, STATE_LOG_LENGTH, STATE_VALUES_ADDRESS, STATE_VALUES_LENGTH, STATE_METADATA_ADDRESS,
 STATE_METADATA_LENGTH, STATE_POSITION_OFFSET, STATE_COUNTER_ID, STATE_REGISTRATION_ID, STATE_FILE_IO_MAX_LENGTH,
 STATE_FD, STATE_POSITION, STATE_SEGMENT_BASE, STATE_SEGMENT_LENGTH, STATE_PAGE_SIZE, STATE_REC_POS_ADDRESS,
 STATE_WRITE_BYTES_ADDRESS, STATE_WRITE_NS_ADDRESS, STATE_MAX_WRITE_NS_ADDRESS, STATE_STAGE_ON,
 STATE_BLOCK_LOG_OFFSET, STATE_BLOCK_LENGTH, STATE_BLOCK_END_POSITION, STATE_WRITTEN, STATE_EXTENT_0,
 STATE_EXTENT_1) = range(26)
STATE_LENGTH = 26

#: ``record_block``'s results below 0 (0: nothing new; above 0: the bytes recorded).
NEEDS_SEGMENT, WRITE_FAILED, NOT_OWNED = -1, -2, -3
#: Blocks one stage call records at most: a stretch's other work (sending, status messages) comes between.
STAGE_MAX_BLOCKS = 16


@intrinsic
def _pwrite(typingctx, fd, address, length, offset):
    """``pwrite(fd, address, length, offset)``: bytes written, or -1 with errno set."""
    if not all(isinstance(t, types.Integer) for t in (fd, address, length, offset)):
        return None

    def codegen(context, builder, sig, args):
        i64, i8p = ir.IntType(64), ir.IntType(8).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [ir.IntType(32), i8p, i64, i64]),
                                            "pwrite")
        values = [context.cast(builder, a, t, types.int64) for a, t in zip(args, sig.args)]
        return builder.call(fn, [builder.trunc(values[0], ir.IntType(32)), builder.inttoptr(values[1], i8p),
                                 values[2], values[3]])

    return types.int64(fd, address, length, offset), codegen


if numba.config.DISABLE_JIT:  # plain Python for coverage/debug runs: the same call through ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.pwrite.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64]
    _libc.pwrite.restype = ctypes.c_ssize_t

    def _pwrite(fd, address, length, offset):  # noqa: F811
        return _libc.pwrite(int(fd), int(address), int(length), int(offset))


@kernel
def write_fully(fd, address, length, offset):
    """``pwrite`` until all ``length`` bytes are written or one call writes nothing or fails: the bytes written,
    or ``-errno`` when the first call failed."""
    done = 0
    while done < length:
        wrote = _pwrite(fd, address + done, length - done, offset + done)
        if wrote < 0:
            return -last_errno() if done == 0 else done
        if wrote == 0:
            break
        done += wrote
    return done


@kernel
def _write_header_last(fd, address, length, segment_offset, page_size):
    """The block at ``address`` at ``segment_offset``: as one write within a page, else its frames after the first
    header and then that header (``RecordingWriter._write_frames_first_header_last`` says why). The bytes written
    from its start, or ``-errno``."""
    if length <= HEADER_LENGTH or segment_offset // page_size == (segment_offset + length - 1) // page_size:
        return write_fully(fd, address, length, segment_offset)
    body = write_fully(fd, address + HEADER_LENGTH, length - HEADER_LENGTH, segment_offset + HEADER_LENGTH)
    if body <= 0:
        return body
    # The header even after a short body: Python keeps the whole frames the two writes made (a torn one is zeroed).
    head = write_fully(fd, address, HEADER_LENGTH, segment_offset)
    if head != HEADER_LENGTH:
        return 0 if head >= 0 else head
    return HEADER_LENGTH + body


@kernel
def record_block(state):
    """Record the next block of the image into the open segment (see the module docstring). Returns the bytes
    recorded, 0 when there is nothing new, or ``NEEDS_SEGMENT``, ``WRITE_FAILED`` or ``NOT_OWNED``."""
    log = bytes_at(state[STATE_LOG_ADDRESS], state[STATE_LOG_LENGTH])
    values = bytes_at(state[STATE_VALUES_ADDRESS], state[STATE_VALUES_LENGTH])
    extent = state[STATE_EXTENT_0:STATE_EXTENT_1 + 1]
    length = record_block_extent(log, values, state[STATE_POSITION_OFFSET], state[STATE_FILE_IO_MAX_LENGTH], extent)
    if length <= 0:
        return 0
    log_offset = extent[EXTENT_LOG_OFFSET]
    state[STATE_BLOCK_LOG_OFFSET] = log_offset
    state[STATE_BLOCK_LENGTH] = length
    state[STATE_BLOCK_END_POSITION] = extent[EXTENT_END_POSITION]
    position = state[STATE_POSITION]
    segment_offset = position - state[STATE_SEGMENT_BASE]
    if state[STATE_FD] < 0 or segment_offset + length > state[STATE_SEGMENT_LENGTH]:
        return NEEDS_SEGMENT
    data_length = length
    if (atomics.get_int16(log, log_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD:
        data_length = HEADER_LENGTH  # the rest of a padding frame stays the segment's sparse zeros
    started = monotonic_ns()
    written = _write_header_last(state[STATE_FD], state[STATE_LOG_ADDRESS] + log_offset, data_length,
                                 segment_offset, state[STATE_PAGE_SIZE])
    elapsed = monotonic_ns() - started
    state[STATE_WRITTEN] = written
    if written != data_length:
        return WRITE_FAILED
    metadata = bytes_at(state[STATE_METADATA_ADDRESS], state[STATE_METADATA_LENGTH])
    if not commit_record_block(metadata, values, state[STATE_COUNTER_ID], state[STATE_REGISTRATION_ID],
                               state[STATE_POSITION_OFFSET], extent[EXTENT_END_POSITION]):
        return NOT_OWNED  # the writer's position stays before the block, which Python zeroes
    state[STATE_POSITION] = position + length
    if state[STATE_REC_POS_ADDRESS] != 0:
        atomics.put_int64_release(bytes_at(state[STATE_REC_POS_ADDRESS], 8), 0, position + length)
    if state[STATE_WRITE_BYTES_ADDRESS] != 0:
        atomics.get_and_add_int64(bytes_at(state[STATE_WRITE_BYTES_ADDRESS], 8), 0, length)
        atomics.get_and_add_int64(bytes_at(state[STATE_WRITE_NS_ADDRESS], 8), 0, elapsed)
        longest = bytes_at(state[STATE_MAX_WRITE_NS_ADDRESS], 8)
        if elapsed > atomics.get_int64(longest, 0):  # the archive is the counter's only writer
            atomics.put_int64_release(longest, 0, elapsed)
    return length


@kernel
def recording_stage(state_address):
    """``record_block`` as a network cycles stage: blocks while there are any (at most ``STAGE_MAX_BLOCKS``);
    turns the stage off at a result Python must handle. Returns the blocks recorded."""
    state = int64s_at(state_address, STATE_LENGTH)
    if state[STATE_STAGE_ON] == 0:
        return 0
    blocks = 0
    while blocks < STAGE_MAX_BLOCKS:
        recorded = record_block(state)
        if recorded <= 0:
            if recorded < 0:
                state[STATE_STAGE_ON] = 0
            break
        blocks += 1
    return blocks


def new_state() -> np.ndarray:
    """A state array with no file open (``STATE_FD`` -1) and the stage off."""
    state = np.zeros(STATE_LENGTH, np.int64)
    state[STATE_FD] = -1
    return state
