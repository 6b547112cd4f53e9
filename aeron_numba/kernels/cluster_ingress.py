"""The leader's compiled ingress path: client session messages from an ingress image appended to the log without
Python per message (Aeron's ``IngressAdapter.onFragment`` -> ``ConsensusModuleAgent.onIngressMessage`` ->
``LogPublisher.appendMessage``).

``ingress_to_log`` reads the image's frames in place from the subscriber position. For each unfragmented
``SessionMessageHeader`` (schema 111) of the current leadership term from an open session it claims a frame of the
same length in the log publication, writes the log's ``SessionMessageHeader`` (the term, the session, the cluster
time of this poll) and the application's bytes, commits it, and stores the session's activity time. It stops
*before* any frame the Python path must decide on: another message (connect, close, keep-alive, admin request,
challenge response), a fragment of a large message, another term, a session not in the table, another block
length. It also stops before a message the log cannot take now (back pressure, not connected): the message stays
in the image, as the Python path's ABORT leaves it, and is tried again next duty cycle. A rotation of the log's
term (ADMIN_ACTION) is retried at once. The subscriber position is stored once, after the last frame consumed.

The open sessions are an ``int64`` table the consensus module keeps (``OpenSessionTable``): only sessions in the
OPEN state are in it, so a message the table does not know goes to Python, which drops it or not as Aeron does.

```
sessions: 0 count | 1 + 2i cluster session id | 2 + 2i time of last activity (ns)
result:   0 why it stopped (STOPPED_*) | 1 log position after the last append (0: none)
```

``ingress_stage`` runs it as a network cycles stage (``kernels/network_stages``): the leader's ingress images read
in the same compiled stretch that received their datagrams, with the cluster time read there (the epoch clock in
the cluster's time unit), so a client's message reaches the log, and the followers, without a Python cycle of the
consensus module. Its state (``STAGE_*``, an ``int64`` array the module owns) holds the term, the time unit, the
log publication, the open session table, the claim and result, then ``MAX_IMAGES`` image rows. It turns itself off
at the first frame the Python path must decide on (left in the image, where the module's watch sees it); back
pressure leaves the message for the next pass, as the Python path's ABORT does.
"""

from __future__ import annotations

import numpy as np
from numba import types

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.cluster_service_log import (
    CLUSTER_SESSION_ID_OFFSET,
    LEADERSHIP_TERM_ID_OFFSET,
    SCHEMA_ID,
    SCHEMA_VERSION,
    SESSION_HEADER_LENGTH,
    SESSION_MESSAGE_BLOCK_LENGTH,
    SESSION_MESSAGE_TEMPLATE_ID,
    TIMESTAMP_OFFSET,
    term_cursor,
    whole_frame_length,
)
from aeron_numba.kernels.idle_wait import epoch_ns
from aeron_numba.kernels.memory import bytes_at, copy_bytes, int64s_at
from aeron_numba.kernels.network_stages import (IMAGE_CLOSED_ADDRESS, IMAGE_LOG_ADDRESS, IMAGE_LOG_LENGTH,
                                                IMAGE_POSITION_ADDRESS, IMAGE_WORDS)
from aeron_numba.kernels.term_appender import commit_claim, exclusive_try_claim
from aeron_numba.layout.frame import (
    FLAGS_FIELD_OFFSET,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    TYPE_FIELD_OFFSET,
    UNFRAGMENTED,
)
from aeron_numba.layout.publication_status import ADMIN_ACTION, CLAIM_FRAME_OFFSET, CLAIM_LENGTH, PUB_STATE_LENGTH

# Why the poll stopped (result[RESULT_STOPPED]).
STOPPED_NOTHING_LEFT = 0  # no more frames, or the fragment limit
STOPPED_AT_PYTHON = 1  # before a frame the Python path takes
STOPPED_AT_BACK_PRESSURE = 2  # before a message the log did not take
RESULT_STOPPED = 0
RESULT_APPENDED_POSITION = 1
RESULT_LENGTH = 2

_BLOCK_LENGTH_OFFSET = 0
_TEMPLATE_ID_OFFSET = 2
_SCHEMA_ID_OFFSET = 4
_VERSION_OFFSET = 6

_SIG = types.int64(types.uint8[::1], types.uint8[::1], types.int64, types.uint8[::1], types.int64, types.uint8[::1],
                   types.int64[::1], types.uint8[::1], types.int64[::1], types.int64[::1], types.int64, types.int64,
                   types.int64, types.int64[::1])


@kernel(inline="always")
def _session_slot(sessions, cluster_session_id):
    for i in range(sessions[0]):
        if sessions[1 + 2 * i] == cluster_session_id:
            return 1 + 2 * i
    return -1


@kernel(_SIG)
def ingress_to_log(log, position_buf, position_offset, closed_word, fragment_limit, pub_log, pub_state, pub_limit_buf,
                   claim, sessions, leadership_term_id, timestamp, activity_ns, result):
    """Append up to ``fragment_limit`` session messages of ``log`` (an ingress image) to ``pub_log`` (the log
    publication); returns the ingress fragments consumed (see the module docstring). ``closed_word``: the image
    handle's, nonzero once closed (nothing is read)."""
    result[RESULT_STOPPED] = STOPPED_NOTHING_LEFT
    result[RESULT_APPENDED_POSITION] = 0
    if atomics.get_int64_acquire(closed_word, 0) != 0:
        return 0
    position = atomics.get_int64(position_buf, position_offset)
    term_length, term_offset, term_base, term_id = term_cursor(log, position)
    offset = term_offset
    fragments = 0
    while fragments < fragment_limit and offset < term_length:
        frame_offset = term_base + offset
        aligned = whole_frame_length(log, frame_offset, offset, term_length, term_id)
        if aligned == 0:
            break
        frame_length = atomics.get_int32(log, frame_offset)
        if (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD:
            offset += aligned
            continue
        message = frame_offset + HEADER_LENGTH
        length = frame_length - HEADER_LENGTH
        flags = atomics.get_int8(log, frame_offset + FLAGS_FIELD_OFFSET) & 0xFF
        if (flags & UNFRAGMENTED) != UNFRAGMENTED or length < SESSION_HEADER_LENGTH \
                or (atomics.get_int16(log, message + _SCHEMA_ID_OFFSET) & 0xFFFF) != SCHEMA_ID \
                or (atomics.get_int16(log, message + _TEMPLATE_ID_OFFSET) & 0xFFFF) != SESSION_MESSAGE_TEMPLATE_ID \
                or (atomics.get_int16(log, message + _BLOCK_LENGTH_OFFSET) & 0xFFFF) != SESSION_MESSAGE_BLOCK_LENGTH \
                or atomics.get_int64(log, message + LEADERSHIP_TERM_ID_OFFSET) != leadership_term_id:
            result[RESULT_STOPPED] = STOPPED_AT_PYTHON
            break
        cluster_session_id = atomics.get_int64(log, message + CLUSTER_SESSION_ID_OFFSET)
        slot = _session_slot(sessions, cluster_session_id)
        if slot < 0:
            result[RESULT_STOPPED] = STOPPED_AT_PYTHON
            break
        appended = exclusive_try_claim(pub_log, pub_state, pub_limit_buf, length, claim)
        if appended == ADMIN_ACTION:  # the claim rotated the log's term: the next one is in the new term
            appended = exclusive_try_claim(pub_log, pub_state, pub_limit_buf, length, claim)
        if appended < 0:
            result[RESULT_STOPPED] = STOPPED_AT_BACK_PRESSURE
            break
        at = claim[CLAIM_FRAME_OFFSET] + HEADER_LENGTH
        atomics.put_int16(pub_log, at + _BLOCK_LENGTH_OFFSET, SESSION_MESSAGE_BLOCK_LENGTH)
        atomics.put_int16(pub_log, at + _TEMPLATE_ID_OFFSET, SESSION_MESSAGE_TEMPLATE_ID)
        atomics.put_int16(pub_log, at + _SCHEMA_ID_OFFSET, SCHEMA_ID)
        atomics.put_int16(pub_log, at + _VERSION_OFFSET, SCHEMA_VERSION)
        atomics.put_int64(pub_log, at + LEADERSHIP_TERM_ID_OFFSET, leadership_term_id)
        atomics.put_int64(pub_log, at + CLUSTER_SESSION_ID_OFFSET, cluster_session_id)
        atomics.put_int64(pub_log, at + TIMESTAMP_OFFSET, timestamp)
        copy_bytes(pub_log, at + SESSION_HEADER_LENGTH, log, message + SESSION_HEADER_LENGTH,
                   length - SESSION_HEADER_LENGTH)
        commit_claim(pub_log, claim)
        sessions[slot + 1] = activity_ns
        result[RESULT_APPENDED_POSITION] = appended
        offset += aligned
        fragments += 1
    if offset > term_offset:
        atomics.put_int64_release(position_buf, position_offset, position + (offset - term_offset))
    return fragments


MAX_IMAGES = 64
#: Ingress fragments one call takes from an image at most (the module's ingress fragment limit by default).
FRAGMENT_LIMIT = 50

(STAGE_ON, STAGE_LEADERSHIP_TERM_ID, STAGE_NS_PER_UNIT, STAGE_PUB_LOG_ADDRESS, STAGE_PUB_LOG_LENGTH,
 STAGE_PUB_STATE_ADDRESS, STAGE_LIMIT_ADDRESS, STAGE_LIMIT_LENGTH, STAGE_SESSIONS_ADDRESS, STAGE_SESSIONS_LENGTH,
 STAGE_APPENDED, STAGE_IMAGE_COUNT) = range(12)
STAGE_CLAIM = 12
STAGE_RESULT = STAGE_CLAIM + CLAIM_LENGTH
STAGE_IMAGES = STAGE_RESULT + RESULT_LENGTH
STAGE_LENGTH = STAGE_IMAGES + MAX_IMAGES * IMAGE_WORDS


def new_stage_state() -> np.ndarray:
    """A stage state with the stage off."""
    return np.zeros(STAGE_LENGTH, np.int64)


@kernel
def ingress_stage(state_address):
    """Append the ingress images' session messages to the log (see the module docstring); the fragments taken."""
    state = int64s_at(state_address, STAGE_LENGTH)
    if state[STAGE_ON] == 0:
        return 0
    ns_per_unit = state[STAGE_NS_PER_UNIT]
    timestamp = epoch_ns() // ns_per_unit
    pub_log = bytes_at(state[STAGE_PUB_LOG_ADDRESS], state[STAGE_PUB_LOG_LENGTH])
    pub_state = int64s_at(state[STAGE_PUB_STATE_ADDRESS], PUB_STATE_LENGTH)
    limit = bytes_at(state[STAGE_LIMIT_ADDRESS], state[STAGE_LIMIT_LENGTH])
    sessions = int64s_at(state[STAGE_SESSIONS_ADDRESS], state[STAGE_SESSIONS_LENGTH])
    claim = int64s_at(state_address + 8 * STAGE_CLAIM, CLAIM_LENGTH)
    result = int64s_at(state_address + 8 * STAGE_RESULT, RESULT_LENGTH)
    work = 0
    for k in range(state[STAGE_IMAGE_COUNT]):
        row = STAGE_IMAGES + k * IMAGE_WORDS
        taken = ingress_to_log(bytes_at(state[row + IMAGE_LOG_ADDRESS], state[row + IMAGE_LOG_LENGTH]),
                               bytes_at(state[row + IMAGE_POSITION_ADDRESS], 8), 0,
                               bytes_at(state[row + IMAGE_CLOSED_ADDRESS], 8), FRAGMENT_LIMIT, pub_log, pub_state,
                               limit, claim, sessions, state[STAGE_LEADERSHIP_TERM_ID], timestamp,
                               timestamp * ns_per_unit, result)
        work += taken
        state[STAGE_APPENDED] += taken
        if result[RESULT_STOPPED] == STOPPED_AT_PYTHON:
            state[STAGE_ON] = 0  # the module's watch sees the frame left in the image
            break
    return work


class OpenSessionTable:
    """The consensus module's open sessions as the compiled ingress path reads them (the module docstring's
    ``sessions`` table): ``add`` when a session opens, ``remove`` when it leaves OPEN; ``activity_ns(id)`` is the
    time of the last message the compiled path appended for it (0: none)."""

    def __init__(self, capacity: int = 64):
        self.table = np.zeros(1 + 2 * max(1, capacity), np.int64)

    def __len__(self) -> int:
        return int(self.table[0])

    def _slot(self, cluster_session_id: int) -> int:
        table = self.table
        for i in range(int(table[0])):
            if table[1 + 2 * i] == cluster_session_id:
                return 1 + 2 * i
        return -1

    def add(self, cluster_session_id: int) -> None:
        if self._slot(cluster_session_id) >= 0:
            return
        count = int(self.table[0])
        if 1 + 2 * (count + 1) > self.table.shape[0]:
            grown = np.zeros(1 + 4 * (count + 1), np.int64)
            grown[:self.table.shape[0]] = self.table
            self.table = grown
        self.table[1 + 2 * count] = cluster_session_id
        self.table[2 + 2 * count] = 0
        self.table[0] = count + 1

    def remove(self, cluster_session_id: int) -> None:
        slot = self._slot(cluster_session_id)
        if slot < 0:
            return
        last = 1 + 2 * (int(self.table[0]) - 1)
        self.table[slot], self.table[slot + 1] = self.table[last], self.table[last + 1]
        self.table[0] -= 1

    def activity_ns(self, cluster_session_id: int) -> int:
        slot = self._slot(cluster_session_id)
        return 0 if slot < 0 else int(self.table[slot + 1])

    def clear(self) -> None:
        self.table[0] = 0
