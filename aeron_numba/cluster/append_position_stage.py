"""The consensus module's side of a follower's compiled AppendPosition (``kernels/cluster_append_position``): its
state, turned on for one leadership term's follower and its leader's publication, and the sends it made, which the
module stamps with its own clock."""

from __future__ import annotations

from aeron_numba.kernels import cluster_append_position as cap
from aeron_numba.kernels.counters import counter_registration_id_address, counter_value_address


class AppendPositionStage:
    """``stages``: the ``NetworkStages`` of the driver on the module's thread (a ``ClusteredMediaDriver``), or None:
    then the state only keeps ``last_append_position`` and nothing is sent from compiled code."""

    def __init__(self, stages=None):
        self.state = cap.new_state()
        self.stages = stages
        self._key = None  # what the stage runs for now (None: off)
        self._table_key = None  # its row in the stage table
        self._sends_seen = 0

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
        if key == self._key and self.state[cap.STATE_STAGE_ON]:
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
        self._table_key = self.stages.add(cap.append_position_stage, state, (log, pub_state, limit, values))
        state[cap.STATE_STAGE_ON] = 1
        self._key = key

    @property
    def is_running(self) -> bool:
        return bool(self.state[cap.STATE_STAGE_ON])

    def stop(self) -> None:
        """Nothing more sent from compiled code (an election, another leader or term, the module closing)."""
        self.state[cap.STATE_STAGE_ON] = 0
        if self._table_key is not None:
            self.stages.remove(self._table_key)
            self._table_key = None
        self._key = None
