"""A leader's commit position as a network cycles stage (``kernels/network_stages``): the followers' AppendPositions
read from the consensus images as they arrive, and when the quorum of their positions and the leader's own recorded
position moves the commit position, the ``commit-pos`` counter set and a CommitPosition offered to every follower:
Aeron's ``ConsensusModuleAgent.onAppendPosition`` and ``updateLeaderPosition`` in the same compiled stretch that
received the AppendPosition, not in the module's next Python cycle.

The stage reads each image from its subscriber position and stops before any frame that is not an AppendPosition
of this leadership term or an earlier one, with no flags, from a follower in its table that Python does not keep
for itself (a catch-up): the module's consensus adapter reads that one, and the stage goes on after it. It keeps
each follower's last position and how many AppendPositions it took (``MEMBER_APPENDS``), and how many commits it
published (``STATE_COMMITS``): the module stamps its own clock on them when it sees them move (follower liveness,
the heartbeat's timing) and sweeps its uncommitted entries to the new commit position.

The state (``STATE_*``, an ``int64`` array the module owns): the header, the CommitPosition being encoded, a
scratch row for the quorum, then ``MAX_IMAGES`` image rows (``IMAGE_*``: the log, the subscriber position word,
the image handle's closed word) and ``MAX_MEMBERS`` member rows (``MEMBER_*``: id, position, appends taken, kept for
Python, and the exclusive publication to it: log, state, limit).
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.cluster_consensus import (APPEND_POSITION_FLAGS_OFFSET, APPEND_POSITION_LOG_POSITION_OFFSET,
                                                   APPEND_POSITION_MEMBER_OFFSET, APPEND_POSITION_TEMPLATE_ID,
                                                   APPEND_POSITION_TERM_OFFSET, COMMIT_POSITION_BLOCK_LENGTH,
                                                   COMMIT_POSITION_TEMPLATE_ID, MESSAGE_LENGTH_COMMIT_POSITION,
                                                   position_message_template)
from aeron_numba.kernels.cluster_service_log import SCHEMA_ID, SCHEMA_VERSION, term_cursor, whole_frame_length
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.network_stages import (IMAGE_CLOSED_ADDRESS, IMAGE_LOG_ADDRESS, IMAGE_LOG_LENGTH,
                                                IMAGE_POSITION_ADDRESS, IMAGE_WORDS)
from aeron_numba.kernels.term_appender import exclusive_offer
from aeron_numba.layout.frame import HDR_TYPE_PAD, HEADER_LENGTH, TYPE_FIELD_OFFSET
from aeron_numba.layout.publication_status import ADMIN_ACTION, PUB_STATE_LENGTH

MAX_IMAGES = 16
MAX_MEMBERS = 16

(STATE_STAGE_ON, STATE_LEADERSHIP_TERM_ID, STATE_MEMBER_ID, STATE_QUORUM_THRESHOLD, STATE_OWN_POSITION_ADDRESS,
 STATE_OWN_REGISTRATION_ADDRESS, STATE_OWN_REGISTRATION_ID, STATE_COMMIT_ADDRESS, STATE_COMMITS, STATE_IMAGE_COUNT,
 STATE_MEMBER_COUNT) = range(11)
STATE_MESSAGE = 11  # the CommitPosition being encoded
_MESSAGE_WORDS = (MESSAGE_LENGTH_COMMIT_POSITION + 7) // 8
STATE_SCRATCH = STATE_MESSAGE + _MESSAGE_WORDS  # the positions the quorum is taken over
STATE_IMAGES = STATE_SCRATCH + MAX_MEMBERS + 1
STATE_MEMBERS = STATE_IMAGES + MAX_IMAGES * IMAGE_WORDS
(MEMBER_ID, MEMBER_LOG_POSITION, MEMBER_APPENDS, MEMBER_FOR_PYTHON, MEMBER_PUB_LOG_ADDRESS, MEMBER_PUB_LOG_LENGTH,
 MEMBER_PUB_STATE_ADDRESS, MEMBER_LIMIT_ADDRESS, MEMBER_LIMIT_LENGTH) = range(9)
MEMBER_WORDS = 9
STATE_LENGTH = STATE_MEMBERS + MAX_MEMBERS * MEMBER_WORDS
#: AppendPositions one call takes from an image at most (Aeron's consensus adapter's fragment limit).
FRAGMENT_LIMIT = 10

_TEMPLATE_ID_OFFSET, _SCHEMA_ID_OFFSET, _VERSION_OFFSET = 2, 4, 6


def new_state() -> np.ndarray:
    """A state with the stage off."""
    return np.zeros(STATE_LENGTH, np.int64)


@kernel
def _member_row(state, member_id):
    """The state index of ``member_id``'s row, or -1."""
    for k in range(state[STATE_MEMBER_COUNT]):
        row = STATE_MEMBERS + k * MEMBER_WORDS
        if state[row + MEMBER_ID] == member_id:
            return row
    return -1


@kernel
def _take_append_positions(state, image):
    """AppendPositions of ``image``'s row (see the module docstring); how many it took."""
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
        if position_message_template(log, frame_offset) != APPEND_POSITION_TEMPLATE_ID \
                or (atomics.get_int8(log, message + APPEND_POSITION_FLAGS_OFFSET) & 0xFF) != 0 \
                or atomics.get_int64(log, message + APPEND_POSITION_TERM_OFFSET) > state[STATE_LEADERSHIP_TERM_ID]:
            break
        row = _member_row(state, atomics.get_int32(log, message + APPEND_POSITION_MEMBER_OFFSET))
        if row < 0 or state[row + MEMBER_FOR_PYTHON] != 0:
            break
        state[row + MEMBER_LOG_POSITION] = atomics.get_int64(log, message + APPEND_POSITION_LOG_POSITION_OFFSET)
        state[row + MEMBER_APPENDS] += 1
        taken += 1
        offset += aligned
    if offset > term_offset:
        atomics.put_int64_release(position_word, 0, position + (offset - term_offset))
    return taken


@kernel
def quorum_commit_position(state, own_position):
    """min(the quorum position of the members' positions and ``own_position``, ``own_position``), as
    ``cluster_member.quorum_position`` ranks them (an unknown position counts as 0)."""
    count = state[STATE_MEMBER_COUNT] + 1
    scratch = STATE_SCRATCH
    state[scratch] = max(own_position, 0)
    for k in range(count - 1):
        state[scratch + 1 + k] = max(state[STATE_MEMBERS + k * MEMBER_WORDS + MEMBER_LOG_POSITION], 0)
    for i in range(1, count):  # descending insertion sort: a handful of members
        value = state[scratch + i]
        j = i - 1
        while j >= 0 and state[scratch + j] < value:
            state[scratch + j + 1] = state[scratch + j]
            j -= 1
        state[scratch + j + 1] = value
    quorum = state[scratch + state[STATE_QUORUM_THRESHOLD] - 1]
    return min(quorum, own_position)


@kernel
def encode_commit_position(buffer, offset, leadership_term_id, log_position, leader_member_id):
    """CommitPosition (its SBE header and block) at ``buffer[offset:]``; its length."""
    atomics.put_int16(buffer, offset, COMMIT_POSITION_BLOCK_LENGTH)
    atomics.put_int16(buffer, offset + _TEMPLATE_ID_OFFSET, COMMIT_POSITION_TEMPLATE_ID)
    atomics.put_int16(buffer, offset + _SCHEMA_ID_OFFSET, SCHEMA_ID)
    atomics.put_int16(buffer, offset + _VERSION_OFFSET, SCHEMA_VERSION)
    atomics.put_int64(buffer, offset + APPEND_POSITION_TERM_OFFSET, leadership_term_id)
    atomics.put_int64(buffer, offset + APPEND_POSITION_LOG_POSITION_OFFSET, log_position)
    atomics.put_int32(buffer, offset + APPEND_POSITION_MEMBER_OFFSET, leader_member_id)
    return MESSAGE_LENGTH_COMMIT_POSITION


@kernel
def leader_commit_stage(state_address):
    """Take the followers' AppendPositions, and publish a commit position the quorum moved (see the module
    docstring). Returns the AppendPositions taken plus the commits published."""
    state = int64s_at(state_address, STATE_LENGTH)
    if state[STATE_STAGE_ON] == 0:
        return 0
    work = 0
    for k in range(state[STATE_IMAGE_COUNT]):
        work += _take_append_positions(state, STATE_IMAGES + k * IMAGE_WORDS)
    own = atomics.get_int64_acquire(bytes_at(state[STATE_OWN_POSITION_ADDRESS], 8), 0)
    if atomics.get_int64_acquire(bytes_at(state[STATE_OWN_REGISTRATION_ADDRESS], 8), 0) \
            != state[STATE_OWN_REGISTRATION_ID]:
        state[STATE_STAGE_ON] = 0  # the log recording's counter is gone: the module finds out in its own cycle
        return work
    commit = quorum_commit_position(state, own)
    commit_word = bytes_at(state[STATE_COMMIT_ADDRESS], 8)
    if commit <= atomics.get_int64_acquire(commit_word, 0):
        return work
    atomics.put_int64_release(commit_word, 0, commit)
    state[STATE_COMMITS] += 1
    message = bytes_at(state_address + 8 * STATE_MESSAGE, 8 * _MESSAGE_WORDS)
    length = encode_commit_position(message, 0, state[STATE_LEADERSHIP_TERM_ID], commit, state[STATE_MEMBER_ID])
    for k in range(state[STATE_MEMBER_COUNT]):
        row = STATE_MEMBERS + k * MEMBER_WORDS
        if state[row + MEMBER_PUB_LOG_ADDRESS] == 0:
            continue
        log = bytes_at(state[row + MEMBER_PUB_LOG_ADDRESS], state[row + MEMBER_PUB_LOG_LENGTH])
        pub_state = int64s_at(state[row + MEMBER_PUB_STATE_ADDRESS], PUB_STATE_LENGTH)
        limit = bytes_at(state[row + MEMBER_LIMIT_ADDRESS], state[row + MEMBER_LIMIT_LENGTH])
        # A CommitPosition a follower's publication does not take now is sent again at the heartbeat (the module's).
        if exclusive_offer(log, pub_state, limit, message, 0, length, 0) == ADMIN_ACTION:
            exclusive_offer(log, pub_state, limit, message, 0, length, 0)
    return work + 1
