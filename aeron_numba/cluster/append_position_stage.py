"""The consensus module's side of a follower's compiled AppendPosition (``kernels/cluster_append_position``): its
state, turned on for one leadership term's follower and its leader's publication, and the sends it made, which the
module stamps with its own clock."""

from __future__ import annotations

import numpy as np

from aeron_numba.driver.network_stages import OwnedStage
from aeron_numba.kernels import cluster_append_position as cap
from aeron_numba.kernels.counters import counter_registration_id_address, counter_value_address
from aeron_numba.layout.counters import COUNTER_VALUE_OFFSET, counter_offset


class AppendPositionStage(OwnedStage):
    """``stages``: the ``NetworkStages`` of the driver on the module's thread (a ``ClusteredMediaDriver``), or None:
    then the state only keeps ``last_append_position`` and nothing is sent from compiled code."""

    def __init__(self, stages=None):
        super().__init__(cap.append_position_stage, cap.new_state(), cap.STATE_STAGE_ON, stages)
        self._sends_seen = 0
        self._recorded_word = None  # an int64 view of the recorded position, which ``is_due`` compares

    @property
    def last_append_position(self) -> int:
        return int(self.state[cap.STATE_LAST_APPEND_POSITION])

    @last_append_position.setter
    def last_append_position(self, position: int) -> None:
        self.state[cap.STATE_LAST_APPEND_POSITION] = position

    def take_sends(self) -> bool:
        """Whether the stage sent since the last call."""
        sends = int(self.state[cap.STATE_SENDS])
        if sends == self._sends_seen:
            return False
        self._sends_seen = sends
        return True

    def run_for(self, append_position, publication, leadership_term_id: int, member_id: int) -> None:
        """Send from compiled code what ``append_position`` (the log recording's rec-pos counter, a
        ``_ReadableCounter``) records beyond ``last_append_position``, on ``publication`` (the leader's exclusive
        consensus publication), as ``member_id`` in ``leadership_term_id``; named again as is, nothing changes."""
        if self.stages is None:
            return
        key = (append_position, publication, leadership_term_id, member_id)
        if self.resume(key):
            return
        self.stop()
        log, pub_state, limit = publication.log_buffer, publication.pub_state, publication.limit_buffer
        if log is None or limit is None:  # closed
            return
        values = append_position.values_buffer
        state = self.state
        state[cap.STATE_REC_POS_ADDRESS] = counter_value_address(values, append_position.counter_id)
        state[cap.STATE_REC_POS_REGISTRATION_ADDRESS] = counter_registration_id_address(values,
                                                                                        append_position.counter_id)
        state[cap.STATE_REC_POS_REGISTRATION_ID] = append_position.registration_id
        state[cap.STATE_LEADERSHIP_TERM_ID], state[cap.STATE_MEMBER_ID] = leadership_term_id, member_id
        state[cap.STATE_PUB_LOG_ADDRESS], state[cap.STATE_PUB_LOG_LENGTH] = log.ctypes.data, log.size
        state[cap.STATE_PUB_STATE_ADDRESS] = pub_state.ctypes.data
        state[cap.STATE_LIMIT_ADDRESS], state[cap.STATE_LIMIT_LENGTH] = limit.ctypes.data, limit.size
        offset = counter_offset(append_position.counter_id) + COUNTER_VALUE_OFFSET
        self._recorded_word = values[offset:offset + 8].view(np.int64)
        self.start(key, (log, pub_state, limit, values), due=self.is_due)

    def is_due(self) -> bool:
        """Whether the archive recorded past the last AppendPosition while the stage was paused (a wait in the
        module's own cycle ran the recording): the stage sends it once the stretch runs again."""
        return (self._table_key is not None and self.state[cap.STATE_STAGE_ON] != 0
                and self._recorded_word[0] > self.state[cap.STATE_LAST_APPEND_POSITION])

    def stop(self) -> None:
        """Nothing more sent from compiled code (an election, another leader or term, the module closing)."""
        super().stop()
        self._recorded_word = None
