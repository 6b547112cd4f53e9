"""The consensus module's side of a follower's compiled commit (``kernels/cluster_follower_commit``): the stage's state
filled for one leadership term (its leader, its consensus images, its log image, its recording and commit
counters), the notified commit position both move, and what the stage did since the module last looked (the
CommitPositions it took, the sessions' activity it read from the log)."""

from __future__ import annotations

from aeron_numba.driver.network_stages import OwnedStage, fill_image_rows
from aeron_numba.kernels import cluster_follower_commit as fc
from aeron_numba.kernels import cluster_log_activity as activity
from aeron_numba.kernels.cluster_service_log import SessionMessageHandler
from aeron_numba.kernels.counters import counter_registration_id_address, counter_value_address
from aeron_numba.kernels.memory import function_address


class FollowerCommitStage(OwnedStage):
    """``stages``: the ``NetworkStages`` of the driver on the module's thread, or None: then the state only keeps
    ``notified_commit_position`` and nothing runs compiled."""

    def __init__(self, stages=None):
        super().__init__(fc.follower_commit_stage, fc.new_state(), fc.STATE_STAGE_ON, stages)
        self.activity = fc.new_activity_table()
        self._commits_seen = 0

    @property
    def notified_commit_position(self) -> int:
        return int(self.state[fc.STATE_NOTIFIED_COMMIT_POSITION])

    @notified_commit_position.setter
    def notified_commit_position(self, position: int) -> None:
        self.state[fc.STATE_NOTIFIED_COMMIT_POSITION] = position

    @property
    def stopped(self) -> int:
        """Why the stage last turned itself off (``fc.STOPPED_*``)."""
        return int(self.state[fc.STATE_STOPPED])

    def run_for(self, *, leadership_term_id: int, leader_member_id: int, append_position, commit_counter, log,
                images: list, key) -> bool:
        """Take ``leader_member_id``'s CommitPositions of ``leadership_term_id`` from ``images`` (the consensus
        images' compiled handles), read ``log`` (the log image's compiled handle) up to them and to
        ``append_position`` (the log recording's counter: ``values_buffer``, ``counter_id``, ``registration_id``)
        and move ``commit_counter`` (the module's ``commit-pos``, a client ``Counter``) there. ``key`` names all of
        that: the same key again only turns the stage back on. False when it cannot run."""
        if self.stages is None or len(images) > fc.MAX_IMAGES:
            self.stop()
            return False
        state = self.state
        if self.resume(key):
            state[fc.STATE_STOPPED] = fc.STOPPED_NOT
            return True
        self.stop()
        notified = state[fc.STATE_NOTIFIED_COMMIT_POSITION]
        state[:] = 0
        state[fc.STATE_NOTIFIED_COMMIT_POSITION] = notified
        state[fc.STATE_LEADERSHIP_TERM_ID], state[fc.STATE_LEADER_MEMBER_ID] = leadership_term_id, leader_member_id
        own_values = append_position.values_buffer
        state[fc.STATE_REC_POS_ADDRESS] = counter_value_address(own_values, append_position.counter_id)
        state[fc.STATE_REC_POS_REGISTRATION_ADDRESS] = counter_registration_id_address(own_values,
                                                                                       append_position.counter_id)
        state[fc.STATE_REC_POS_REGISTRATION_ID] = append_position.registration_id
        state[fc.STATE_COMMIT_ADDRESS] = counter_value_address(commit_counter.values_buffer, commit_counter.id)
        state[fc.STATE_LOG_ADDRESS], state[fc.STATE_LOG_LENGTH] = log.log.ctypes.data, log.log.size
        state[fc.STATE_LOG_POSITION_ADDRESS] = log.position_buffer.ctypes.data + log.position_offset
        state[fc.STATE_LOG_CLOSED_ADDRESS] = log.state.ctypes.data
        state[fc.STATE_HANDLER] = function_address(activity.record_session_activity, SessionMessageHandler)
        state[fc.STATE_ACTIVITY_ADDRESS], state[fc.STATE_ACTIVITY_LENGTH] = (self.activity.ctypes.data,
                                                                             self.activity.size)
        holds = [own_values, commit_counter.values_buffer, log.log, log.position_buffer, log.state, self.activity]
        holds += fill_image_rows(state, fc.STATE_IMAGES, images)
        state[fc.STATE_IMAGE_COUNT] = len(images)
        self._commits_seen = 0
        self.start(key, tuple(holds))
        return True

    def take(self) -> tuple[bool, list[list[int]]]:
        """What the stage did since the last call: whether it took a CommitPosition, and ``[cluster session id,
        timestamp]`` of each session (or service message) whose messages it read from the log, in the order first
        read (the table emptied)."""
        commits = int(self.state[fc.STATE_COMMITS])
        took, self._commits_seen = commits != self._commits_seen, commits
        return took, activity.take_rows(self.activity)
