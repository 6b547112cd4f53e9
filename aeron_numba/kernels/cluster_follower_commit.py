"""A follower's commit position as a network cycles stage (``kernels/network_stages``): its leader's CommitPositions
read from the consensus images as they arrive, the log read up to the lower of the commit position it was told and
what its archive recorded, and the ``commit-pos`` counter moved to where that read ended: Aeron's
``ConsensusModuleAgent.onCommitPosition`` and a follower's ``consensusWork`` (``logAdapter.poll`` bounded by the
notified commit and append positions, then ``commitPosition.proposeMaxRelease``) in the same compiled stretch that
received the CommitPosition, not in the module's next Python cycle. A service stage after it reads what was
committed in the same stretch.

The consensus images are read from their subscriber positions, stopping before any frame that is not a
CommitPosition of this leadership term from this leader (the module's consensus adapter reads that one: a new
term, a termination, an election's messages). The log is read by ``cluster_service_log.bounded_session_poll``
with ``cluster_log_activity.record_session_activity`` as its handler (found by address), into an activity table
the module applies once per cycle (the sessions' last activity, the service messages swept); it stops before any
other log message, which the module's log adapter reads.

The stage turns itself off (``STATE_STAGE_ON`` 0, ``STATE_STOPPED`` says why) before anything the module's Python
path must do with the log: another log message, a full activity table, the log image closed, the recording's
counter gone. The module watches the on word.

The state (``STATE_*``, an ``int64`` array the module owns): the header (``STATE_NOTIFIED_COMMIT_POSITION`` is the
module's ``notified_commit_position``: both move it), the poll's result and outbox header, then ``MAX_IMAGES``
image rows (``IMAGE_*``: the log, the subscriber position word, the image handle's closed word).
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels import cluster_log_activity as activity
from aeron_numba.kernels.cluster_consensus import (APPEND_POSITION_LOG_POSITION_OFFSET, APPEND_POSITION_MEMBER_OFFSET,
                                                   APPEND_POSITION_TERM_OFFSET, COMMIT_POSITION_TEMPLATE_ID,
                                                   position_message_template)
from aeron_numba.kernels.cluster_service_log import (OUTBOX_HEADER_LENGTH, RESULT_LENGTH, RESULT_STOPPED_AT_OTHER,
                                                     SessionMessageHandler, bounded_session_poll, term_cursor,
                                                     whole_frame_length)
from aeron_numba.kernels.memory import bytes_at, function_at, int64s_at
from aeron_numba.kernels.network_stages import (IMAGE_CLOSED_ADDRESS, IMAGE_LOG_ADDRESS, IMAGE_LOG_LENGTH,
                                                IMAGE_POSITION_ADDRESS, IMAGE_WORDS)
from aeron_numba.layout.frame import HDR_TYPE_PAD, HEADER_LENGTH, TYPE_FIELD_OFFSET

MAX_IMAGES = 16
#: Sessions (and service messages) the activity table holds between two cycles of the module.
ACTIVITY_ROWS = 64
#: CommitPositions one call takes from an image, and log messages it reads, at most.
FRAGMENT_LIMIT = 10
LOG_FRAGMENT_LIMIT = 50

(STATE_STAGE_ON, STATE_STOPPED, STATE_LEADERSHIP_TERM_ID, STATE_LEADER_MEMBER_ID, STATE_NOTIFIED_COMMIT_POSITION,
 STATE_COMMITS, STATE_REC_POS_ADDRESS, STATE_REC_POS_REGISTRATION_ADDRESS, STATE_REC_POS_REGISTRATION_ID,
 STATE_COMMIT_ADDRESS, STATE_LOG_ADDRESS, STATE_LOG_LENGTH, STATE_LOG_POSITION_ADDRESS, STATE_LOG_CLOSED_ADDRESS,
 STATE_HANDLER, STATE_ACTIVITY_ADDRESS, STATE_ACTIVITY_LENGTH, STATE_IMAGE_COUNT) = range(18)
STATE_RESULT = 18  # bounded_session_poll's result slots
STATE_OUTBOX = STATE_RESULT + RESULT_LENGTH  # the poll's outbox: its header only, nothing is replied
STATE_IMAGES = STATE_OUTBOX + OUTBOX_HEADER_LENGTH // 8
STATE_LENGTH = STATE_IMAGES + MAX_IMAGES * IMAGE_WORDS

# Why the stage turned itself off (STATE_STOPPED).
STOPPED_NOT = 0
STOPPED_AT_OTHER = 1  # before a log message the module's log adapter reads
STOPPED_TABLE_FULL = 2  # the activity table has no row left for a new session
STOPPED_LOG_CLOSED = 3  # the log image went (the module starts an election)
STOPPED_RECORDING_GONE = 4  # the log recording's counter was freed or reused

_handler_at = function_at(SessionMessageHandler)


def new_state() -> np.ndarray:
    """A state with the stage off."""
    return np.zeros(STATE_LENGTH, np.int64)


def new_activity_table() -> np.ndarray:
    return activity.new_activity_table(ACTIVITY_ROWS)


@kernel
def _take_commit_positions(state, image):
    """The leader's CommitPositions of ``image``'s row into ``STATE_NOTIFIED_COMMIT_POSITION`` (see the module
    docstring); how many it took."""
    closed = bytes_at(state[image + IMAGE_CLOSED_ADDRESS], 8)
    if atomics.get_int64_acquire(closed, 0) != 0:
        return 0
    log = bytes_at(state[image + IMAGE_LOG_ADDRESS], state[image + IMAGE_LOG_LENGTH])
    position_word = bytes_at(state[image + IMAGE_POSITION_ADDRESS], 8)
    position = atomics.get_int64(position_word, 0)
    term_length, term_offset, term_base, term_id = term_cursor(log, position)
    offset = term_offset
    taken = 0
    while taken < FRAGMENT_LIMIT and offset < term_length:
        frame_offset = term_base + offset
        aligned = whole_frame_length(log, frame_offset, offset, term_length, term_id)
        if aligned == 0:
            break
        if (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD:
            offset += aligned
            continue
        message = frame_offset + HEADER_LENGTH
        if position_message_template(log, frame_offset) != COMMIT_POSITION_TEMPLATE_ID \
                or atomics.get_int64(log, message + APPEND_POSITION_TERM_OFFSET) != state[STATE_LEADERSHIP_TERM_ID] \
                or atomics.get_int32(log, message + APPEND_POSITION_MEMBER_OFFSET) != state[STATE_LEADER_MEMBER_ID]:
            break
        state[STATE_NOTIFIED_COMMIT_POSITION] = atomics.get_int64(log, message + APPEND_POSITION_LOG_POSITION_OFFSET)
        state[STATE_COMMITS] += 1
        taken += 1
        offset += aligned
    if offset > term_offset:
        atomics.put_int64_release(position_word, 0, position + (offset - term_offset))
    return taken


@kernel
def follower_commit_stage(state_address):
    """Take the leader's CommitPositions, read the log up to what they and the recording allow and move the commit
    position there (see the module docstring). Returns the CommitPositions and log messages taken, plus one for a
    commit position moved."""
    state = int64s_at(state_address, STATE_LENGTH)
    if state[STATE_STAGE_ON] == 0:
        return 0
    if atomics.get_int64_acquire(bytes_at(state[STATE_REC_POS_REGISTRATION_ADDRESS], 8), 0) \
            != state[STATE_REC_POS_REGISTRATION_ID]:
        state[STATE_STOPPED] = STOPPED_RECORDING_GONE
        state[STATE_STAGE_ON] = 0
        return 0
    work = 0
    for k in range(state[STATE_IMAGE_COUNT]):
        work += _take_commit_positions(state, STATE_IMAGES + k * IMAGE_WORDS)
    closed = bytes_at(state[STATE_LOG_CLOSED_ADDRESS], 8)
    if atomics.get_int64_acquire(closed, 0) != 0:
        state[STATE_STOPPED] = STOPPED_LOG_CLOSED
        state[STATE_STAGE_ON] = 0
        return work
    position_word = bytes_at(state[STATE_LOG_POSITION_ADDRESS], 8)
    recorded = atomics.get_int64_acquire(bytes_at(state[STATE_REC_POS_ADDRESS], 8), 0)
    limit = min(state[STATE_NOTIFIED_COMMIT_POSITION], recorded)
    if atomics.get_int64(position_word, 0) < limit:
        table = bytes_at(state[STATE_ACTIVITY_ADDRESS], state[STATE_ACTIVITY_LENGTH])
        free = ACTIVITY_ROWS - atomics.get_int64(table, activity.COUNT_OFFSET)
        if free <= 0:
            state[STATE_STOPPED] = STOPPED_TABLE_FULL
            state[STATE_STAGE_ON] = 0
            return work
        log = bytes_at(state[STATE_LOG_ADDRESS], state[STATE_LOG_LENGTH])
        result = int64s_at(state_address + 8 * STATE_RESULT, RESULT_LENGTH)
        outbox = bytes_at(state_address + 8 * STATE_OUTBOX, OUTBOX_HEADER_LENGTH)
        work += bounded_session_poll(log, position_word, 0, closed, limit, min(LOG_FRAGMENT_LIMIT, free),
                                     _handler_at(state[STATE_HANDLER]), table, outbox, result)
        if result[RESULT_STOPPED_AT_OTHER] != 0:
            state[STATE_STOPPED] = STOPPED_AT_OTHER
            state[STATE_STAGE_ON] = 0
    position = atomics.get_int64(position_word, 0)
    commit_word = bytes_at(state[STATE_COMMIT_ADDRESS], 8)
    if position > atomics.get_int64_acquire(commit_word, 0):
        atomics.put_int64_release(commit_word, 0, position)
        work += 1
    return work
