"""The service container's side of its compiled log read in the driver's stretch (``kernels/cluster_service_stage``):
the stage's state filled for one log image, role and set of sessions, what the stage handed over since the container
last looked (the container's log position and cluster time), and whether a commit the stage has not read yet was
made outside the stretch (``is_due``: the member's duty cycle then runs the stretch once more)."""

from __future__ import annotations

import numpy as np

from aeron_numba.driver.network_stages import OwnedStage
from aeron_numba.kernels import cluster_service_log as K
from aeron_numba.kernels import cluster_service_stage as ss
from aeron_numba.kernels.counters import counter_registration_id_address, counter_value_address
from aeron_numba.kernels.memory import function_address
from aeron_numba.layout.counters import COUNTER_VALUE_OFFSET, counter_offset


class ServiceLogStage(OwnedStage):
    """``stages``: the ``NetworkStages`` of the driver on the container's thread, or None (nothing runs compiled)."""

    def __init__(self, stages=None):
        super().__init__(ss.service_log_stage, ss.new_state(), ss.STATE_STAGE_ON, stages)
        self._messages_seen = 0
        self._commit_word = self._position_word = None  # int64 views of the two words ``is_due`` compares

    @property
    def stopped(self) -> int:
        """Why the stage last turned itself off (``ss.STOPPED_*``)."""
        return int(self.state[ss.STATE_STOPPED])

    def run_for(self, *, handle, commit, max_log_position: int, handler, service_state: np.ndarray,
                outbox: np.ndarray, is_leader: bool, sessions: list, fragment_limit: int, key) -> bool:
        """Read ``handle`` (the log image's compiled handle) up to ``commit`` (``values_buffer``, ``counter_id``,
        ``registration_id`` of ``commit-pos``) and ``max_log_position`` with ``handler`` over ``service_state`` and
        ``outbox``, and flush replies to ``sessions`` (``(cluster session id, compiled publication or None)``) as a
        leader or drop them. ``key`` names all of that: the same key again only turns the stage back on. False
        when it cannot run (no stage table, more sessions than it holds)."""
        if self.stages is None or len(sessions) > ss.MAX_SESSIONS:
            self.stop()
            return False
        state = self.state
        if self.resume(key):
            state[ss.STATE_STOPPED] = ss.STOPPED_NOT
            return True
        self.stop()
        state[:] = 0
        values, counter_id = commit.values_buffer, commit.counter_id
        state[ss.STATE_IS_LEADER] = int(is_leader)
        state[ss.STATE_LOG_ADDRESS], state[ss.STATE_LOG_LENGTH] = handle.log.ctypes.data, handle.log.size
        state[ss.STATE_POSITION_ADDRESS] = handle.position_buffer.ctypes.data + handle.position_offset
        state[ss.STATE_CLOSED_ADDRESS] = handle.state.ctypes.data
        state[ss.STATE_COMMIT_ADDRESS] = counter_value_address(values, counter_id)
        state[ss.STATE_COMMIT_REGISTRATION_ADDRESS] = counter_registration_id_address(values, counter_id)
        state[ss.STATE_COMMIT_REGISTRATION_ID] = commit.registration_id
        state[ss.STATE_MAX_LOG_POSITION] = max_log_position
        state[ss.STATE_HANDLER] = function_address(handler, K.SessionMessageHandler)
        state[ss.STATE_SERVICE_STATE_ADDRESS] = service_state.ctypes.data
        state[ss.STATE_SERVICE_STATE_LENGTH] = service_state.size
        state[ss.STATE_OUTBOX_ADDRESS], state[ss.STATE_OUTBOX_LENGTH] = outbox.ctypes.data, outbox.size
        state[ss.STATE_FRAGMENT_LIMIT] = fragment_limit
        holds = [handle.log, handle.position_buffer, handle.state, values, service_state, outbox, handler]
        for k, (cluster_session_id, publication) in enumerate(sessions):
            row = ss.STATE_SESSIONS + k * ss.SESSION_WORDS
            state[row + ss.SESSION_ID] = cluster_session_id
            if publication is not None:
                state[row + ss.SESSION_PUB_LOG_ADDRESS] = publication.log.ctypes.data
                state[row + ss.SESSION_PUB_LOG_LENGTH] = publication.log.size
                state[row + ss.SESSION_PUB_STATE_ADDRESS] = publication.pub_state.ctypes.data
                state[row + ss.SESSION_LIMIT_ADDRESS] = publication.limit_buffer.ctypes.data
                state[row + ss.SESSION_LIMIT_LENGTH] = publication.limit_buffer.size
                holds += [publication.log, publication.pub_state, publication.limit_buffer]
        state[ss.STATE_SESSION_COUNT] = len(sessions)
        commit_offset = counter_offset(counter_id) + COUNTER_VALUE_OFFSET
        self._commit_word = values[commit_offset:commit_offset + 8].view(np.int64)
        self._position_word = handle.position_buffer[handle.position_offset:handle.position_offset + 8].view(np.int64)
        self._messages_seen = 0
        self.start(key, tuple(holds), due=self.is_due)
        return True

    def take(self) -> tuple[int, int, int]:
        """``(messages, position after the last, its timestamp)`` the stage handed over since the last call
        (``messages`` 0: nothing)."""
        state = self.state
        messages = int(state[ss.STATE_MESSAGES])
        taken, self._messages_seen = messages - self._messages_seen, messages
        if taken == 0:
            return 0, 0, 0
        return (taken, int(state[ss.STATE_RESULT + K.RESULT_LAST_POSITION]),
                int(state[ss.STATE_RESULT + K.RESULT_LAST_TIMESTAMP]))

    def is_due(self) -> bool:
        """Whether the commit position is past what the running stage has read: a commit made outside the driver's
        stretch (the consensus module's Python path) that the stage takes on once the stretch runs again."""
        return (self._table_key is not None and self.state[ss.STATE_STAGE_ON] != 0
                and self._commit_word[0] > self._position_word[0])

    def stop(self) -> None:
        super().stop()
        self._commit_word = self._position_word = None
