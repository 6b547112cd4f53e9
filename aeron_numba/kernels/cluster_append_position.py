"""A follower's AppendPosition to its leader as a network cycles stage (``kernels/network_stages``): once its archive
has recorded more of the log (its ``rec-pos`` counter), the AppendPosition goes on the consensus publication in
the same compiled stretch, as Aeron's ``ConsensusModuleAgent.updateFollowerPosition`` sends it when the append
position moved, and the stretch's next pass sends it. The consensus module's Python cycle no longer runs for each
block the follower receives.

The state (``STATE_*``, an ``int64`` array the consensus module owns) holds the rec-pos word's address (and its
registration id's, checked at every send: a recording stopped and its counter reused turns the stage off), the last
append position sent (the consensus module's ``last_append_position``: both send from it and move it), how many
the stage sent (the module stamps the time of the last send and update with its own clock when it sees the count
move), the leadership term and member id it sends, and the exclusive publication's log, state and limit. The
module turns the stage on only between elections on a follower with its leader's publication, and off otherwise;
the sends at the leader heartbeat interval stay the module's.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.cluster_consensus import (APPEND_POSITION_BLOCK_LENGTH, APPEND_POSITION_FLAGS_OFFSET,
                                                   APPEND_POSITION_LOG_POSITION_OFFSET,
                                                   APPEND_POSITION_MEMBER_OFFSET, APPEND_POSITION_TEMPLATE_ID,
                                                   APPEND_POSITION_TERM_OFFSET, MESSAGE_LENGTH_APPEND_POSITION)
from aeron_numba.kernels.cluster_service_log import SCHEMA_ID, SCHEMA_VERSION
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.term_appender import exclusive_offer
from aeron_numba.layout.cluster import APPEND_POSITION_FLAG_NONE
from aeron_numba.layout.publication_status import ADMIN_ACTION, PUB_STATE_LENGTH

(STATE_STAGE_ON, STATE_REC_POS_ADDRESS, STATE_REC_POS_REGISTRATION_ADDRESS, STATE_REC_POS_REGISTRATION_ID,
 STATE_LAST_APPEND_POSITION, STATE_SENDS, STATE_LEADERSHIP_TERM_ID, STATE_MEMBER_ID, STATE_PUB_LOG_ADDRESS,
 STATE_PUB_LOG_LENGTH, STATE_PUB_STATE_ADDRESS, STATE_LIMIT_ADDRESS, STATE_LIMIT_LENGTH, STATE_MESSAGE) = range(14)
#: The message is encoded in the state's last words (``STATE_MESSAGE`` on), rewritten before each offer.
_MESSAGE_WORDS = (MESSAGE_LENGTH_APPEND_POSITION + 7) // 8
STATE_LENGTH = STATE_MESSAGE + _MESSAGE_WORDS


def new_state() -> np.ndarray:
    """A state with the stage off."""
    return np.zeros(STATE_LENGTH, np.int64)


@kernel
def encode_append_position(buffer, offset, leadership_term_id, log_position, member_id, flags):
    """AppendPosition (its SBE header and block) at ``buffer[offset:]``; its length."""
    atomics.put_int16(buffer, offset, APPEND_POSITION_BLOCK_LENGTH)
    atomics.put_int16(buffer, offset + 2, APPEND_POSITION_TEMPLATE_ID)
    atomics.put_int16(buffer, offset + 4, SCHEMA_ID)
    atomics.put_int16(buffer, offset + 6, SCHEMA_VERSION)
    atomics.put_int64(buffer, offset + APPEND_POSITION_TERM_OFFSET, leadership_term_id)
    atomics.put_int64(buffer, offset + APPEND_POSITION_LOG_POSITION_OFFSET, log_position)
    atomics.put_int32(buffer, offset + APPEND_POSITION_MEMBER_OFFSET, member_id)
    atomics.put_int8(buffer, offset + APPEND_POSITION_FLAGS_OFFSET, flags)
    return MESSAGE_LENGTH_APPEND_POSITION


@kernel
def append_position_stage(state_address):
    """Offer an AppendPosition when the recorded position passed the last one sent; 1 when one went, else 0."""
    state = int64s_at(state_address, STATE_LENGTH)
    if state[STATE_STAGE_ON] == 0:
        return 0
    position = atomics.get_int64_acquire(bytes_at(state[STATE_REC_POS_ADDRESS], 8), 0)
    if position <= state[STATE_LAST_APPEND_POSITION]:
        return 0
    # The counter is still the log recording's (read after its value: a counter freed and reused meanwhile shows).
    if atomics.get_int64_acquire(bytes_at(state[STATE_REC_POS_REGISTRATION_ADDRESS], 8), 0) \
            != state[STATE_REC_POS_REGISTRATION_ID]:
        state[STATE_STAGE_ON] = 0  # the module finds the recording gone in its own cycle
        return 0
    message = bytes_at(state_address + 8 * STATE_MESSAGE, 8 * _MESSAGE_WORDS)
    length = encode_append_position(message, 0, state[STATE_LEADERSHIP_TERM_ID], position, state[STATE_MEMBER_ID],
                                    APPEND_POSITION_FLAG_NONE)
    log = bytes_at(state[STATE_PUB_LOG_ADDRESS], state[STATE_PUB_LOG_LENGTH])
    pub_state = int64s_at(state[STATE_PUB_STATE_ADDRESS], PUB_STATE_LENGTH)
    limit = bytes_at(state[STATE_LIMIT_ADDRESS], state[STATE_LIMIT_LENGTH])
    result = exclusive_offer(log, pub_state, limit, message, 0, length, 0)
    if result == ADMIN_ACTION:  # the offer rotated the term: the message goes into the next one
        result = exclusive_offer(log, pub_state, limit, message, 0, length, 0)
    if result < 0:  # back pressure, not connected, closed: the module's cycle retries at its heartbeat
        return 0
    state[STATE_LAST_APPEND_POSITION] = position
    state[STATE_SENDS] += 1
    return 1
