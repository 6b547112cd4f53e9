"""A compiled service's log as a network cycles stage (``kernels/network_stages``): the committed log read and
handed to the service's ``@njit`` handler, and on a leader the handler's replies offered to their sessions'
response publications, in the same compiled stretch that moved the commit position (the leader's commit stage, or
the follower's commit from its leader) rather than in the service container's next Python cycle.

Each call is one ``cluster_service_log.bounded_session_poll`` of the service's log image up to the lower of the
``commit-pos`` counter and the join's max log position, with the handler found by address (``memory.function_at``),
then a flush of the outbox: on a leader each reply is offered to its session's publication in the order queued,
dropped when its session has none (not connected, or unknown: Aeron's ClientSession answers NOT_CONNECTED) or its
publication refuses it for good; on a follower every reply is dropped (Aeron's MOCKED_OFFER).

The stage turns itself off (``STATE_STAGE_ON`` 0, ``STATE_STOPPED`` says why) before anything the container's
Python path does: a log frame other than an unfragmented session message, a reply its publication cannot take now
(back pressure: the container retries it on its timer), the image closed or read to the join's max position, the
commit counter gone. The container watches the on word, so turning off wakes it; it turns the stage on again at the
end of a cycle that left nothing for Python.

The state (``STATE_*``, an ``int64`` array the container owns): the header, the poll's result (its
``RESULT_*`` slots), then ``MAX_SESSIONS`` session rows (``SESSION_*``: the cluster session id and its response
publication's log, state and limit; no log address: the session's replies are dropped).
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.kernels.cluster_service_log import (
    OUTBOX_COUNT_OFFSET,
    OUTBOX_HEADER_LENGTH,
    OUTBOX_TAIL_OFFSET,
    RECORD_ALIGNMENT,
    RECORD_HEADER_LENGTH,
    RECORD_LENGTH_OFFSET,
    RECORD_SENT_OFFSET,
    RECORD_SESSION_ID_OFFSET,
    RESULT_LENGTH,
    RESULT_STOPPED_AT_OTHER,
    SessionMessageHandler,
    bounded_session_poll,
    clear_outbox,
)
from aeron_numba.kernels.memory import bytes_at, function_at, int64s_at
from aeron_numba.kernels.term_appender import concurrent_offer
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, PUB_STATE_LENGTH

MAX_SESSIONS = 64
#: Session messages one call hands over at most (the container's log fragment limit by default).
FRAGMENT_LIMIT = 50

(STATE_STAGE_ON, STATE_STOPPED, STATE_IS_LEADER, STATE_LOG_ADDRESS, STATE_LOG_LENGTH, STATE_POSITION_ADDRESS,
 STATE_CLOSED_ADDRESS, STATE_COMMIT_ADDRESS, STATE_COMMIT_REGISTRATION_ADDRESS, STATE_COMMIT_REGISTRATION_ID,
 STATE_MAX_LOG_POSITION, STATE_HANDLER, STATE_SERVICE_STATE_ADDRESS, STATE_SERVICE_STATE_LENGTH,
 STATE_OUTBOX_ADDRESS, STATE_OUTBOX_LENGTH, STATE_FRAGMENT_LIMIT, STATE_MESSAGES, STATE_SESSION_COUNT) = range(19)
STATE_RESULT = 19  # bounded_session_poll's result slots
STATE_SESSIONS = STATE_RESULT + RESULT_LENGTH
(SESSION_ID, SESSION_PUB_LOG_ADDRESS, SESSION_PUB_LOG_LENGTH, SESSION_PUB_STATE_ADDRESS, SESSION_LIMIT_ADDRESS,
 SESSION_LIMIT_LENGTH) = range(6)
SESSION_WORDS = 6
STATE_LENGTH = STATE_SESSIONS + MAX_SESSIONS * SESSION_WORDS

# Why the stage turned itself off (STATE_STOPPED).
STOPPED_NOT = 0
STOPPED_AT_OTHER = 1  # before a log frame the container's Python path reads
STOPPED_AT_BACK_PRESSURE = 2  # a reply its publication cannot take now
STOPPED_AT_END = 3  # the image closed, or read to the join's max log position
STOPPED_COMMIT_GONE = 4  # the commit-pos counter was freed or reused

_handler_at = function_at(SessionMessageHandler)


def new_state() -> np.ndarray:
    """A state with the stage off."""
    return np.zeros(STATE_LENGTH, np.int64)


@kernel
def _session_row(state, cluster_session_id):
    """The state index of ``cluster_session_id``'s row, or -1."""
    for k in range(state[STATE_SESSION_COUNT]):
        row = STATE_SESSIONS + k * SESSION_WORDS
        if state[row + SESSION_ID] == cluster_session_id:
            return row
    return -1


@kernel
def _offer_one(state, row, outbox, message, length):
    """Offer one reply on the publication of session row ``row`` (ADMIN_ACTION, a term rotation, retried at once);
    the publication's result."""
    log = bytes_at(state[row + SESSION_PUB_LOG_ADDRESS], state[row + SESSION_PUB_LOG_LENGTH])
    pub_state = int64s_at(state[row + SESSION_PUB_STATE_ADDRESS], PUB_STATE_LENGTH)
    limit = bytes_at(state[row + SESSION_LIMIT_ADDRESS], state[row + SESSION_LIMIT_LENGTH])
    result = concurrent_offer(log, pub_state, limit, outbox, message, length, 0)
    if result == ADMIN_ACTION:
        result = concurrent_offer(log, pub_state, limit, outbox, message, length, 0)
    return result


@kernel
def flush_outbox(state, outbox):
    """Send (leader) or drop (any other role) every reply not sent yet, in order; True when the outbox is empty
    after it, False at a reply its publication cannot take now (it and every later reply stay queued)."""
    if atomics.get_int64(outbox, OUTBOX_COUNT_OFFSET) == 0:
        return True
    if state[STATE_IS_LEADER] != 0:
        at = OUTBOX_HEADER_LENGTH
        tail = atomics.get_int64(outbox, OUTBOX_TAIL_OFFSET)
        while at < tail:
            message_length = atomics.get_int32(outbox, at + RECORD_LENGTH_OFFSET)
            if atomics.get_int32(outbox, at + RECORD_SENT_OFFSET) == 0:
                row = _session_row(state, atomics.get_int64(outbox, at + RECORD_SESSION_ID_OFFSET))
                if row >= 0 and state[row + SESSION_PUB_LOG_ADDRESS] != 0:
                    result = _offer_one(state, row, outbox, at + RECORD_HEADER_LENGTH, message_length)
                    if result == BACK_PRESSURED or result == ADMIN_ACTION:
                        return False
                atomics.put_int32(outbox, at + RECORD_SENT_OFFSET, 1)  # sent, or dropped for good
            at += align(RECORD_HEADER_LENGTH + message_length, RECORD_ALIGNMENT)
    clear_outbox(outbox)
    return True


@kernel
def service_log_stage(state_address):
    """Hand the committed session messages to the service's handler and flush its replies (see the module
    docstring). Returns the messages handed over."""
    state = int64s_at(state_address, STATE_LENGTH)
    if state[STATE_STAGE_ON] == 0:
        return 0
    if atomics.get_int64_acquire(bytes_at(state[STATE_COMMIT_REGISTRATION_ADDRESS], 8), 0) \
            != state[STATE_COMMIT_REGISTRATION_ID]:
        state[STATE_STOPPED] = STOPPED_COMMIT_GONE
        state[STATE_STAGE_ON] = 0
        return 0
    closed = bytes_at(state[STATE_CLOSED_ADDRESS], 8)
    position_word = bytes_at(state[STATE_POSITION_ADDRESS], 8)
    max_position = state[STATE_MAX_LOG_POSITION]
    if atomics.get_int64_acquire(closed, 0) != 0 or atomics.get_int64(position_word, 0) >= max_position:
        state[STATE_STOPPED] = STOPPED_AT_END
        state[STATE_STAGE_ON] = 0
        return 0
    limit = min(atomics.get_int64_acquire(bytes_at(state[STATE_COMMIT_ADDRESS], 8), 0), max_position)
    log = bytes_at(state[STATE_LOG_ADDRESS], state[STATE_LOG_LENGTH])
    service_state = bytes_at(state[STATE_SERVICE_STATE_ADDRESS], state[STATE_SERVICE_STATE_LENGTH])
    outbox = bytes_at(state[STATE_OUTBOX_ADDRESS], state[STATE_OUTBOX_LENGTH])
    result = int64s_at(state_address + 8 * STATE_RESULT, RESULT_LENGTH)
    count = bounded_session_poll(log, position_word, 0, closed, limit, state[STATE_FRAGMENT_LIMIT],
                                 _handler_at(state[STATE_HANDLER]), service_state, outbox, result)
    state[STATE_MESSAGES] += count
    if not flush_outbox(state, outbox):
        state[STATE_STOPPED] = STOPPED_AT_BACK_PRESSURE
        state[STATE_STAGE_ON] = 0
    elif result[RESULT_STOPPED_AT_OTHER] != 0:
        state[STATE_STOPPED] = STOPPED_AT_OTHER
        state[STATE_STAGE_ON] = 0
    return count
