"""The consensus module's side of a leader's compiled commit (``kernels/cluster_leader_commit``): the stage's state
filled for one leadership term (its consensus images, its followers and their publications, its recording and
commit counters), and what the stage did since the module last looked (the followers' positions it took, the
commits it published)."""

from __future__ import annotations

from aeron_numba.driver.network_stages import OwnedStage, fill_image_rows
from aeron_numba.kernels import cluster_leader_commit as lc
from aeron_numba.kernels.counters import counter_registration_id_address, counter_value_address


class LeaderCommitStage(OwnedStage):
    """``stages``: the ``NetworkStages`` of the driver on the module's thread, or None (nothing runs compiled)."""

    def __init__(self, stages=None):
        super().__init__(lc.leader_commit_stage, lc.new_state(), lc.STATE_STAGE_ON, stages)
        self._commits_seen = 0
        self._appends_seen: dict[int, int] = {}  # follower member id -> its row's MEMBER_APPENDS last seen

    def run_for(self, *, leadership_term_id: int, member_id: int, quorum_threshold: int, own_position,
                commit_counter, images: list, followers: list, key) -> None:
        """Take AppendPositions and publish commits from compiled code for this term: ``own_position`` is the log
        recording's counter (``values_buffer``, ``counter_id``, ``registration_id``), ``commit_counter`` the
        module's ``commit-pos`` (a client ``Counter``), ``images`` the consensus images' compiled handles,
        ``followers`` ``(member, publication or None, kept for Python)`` for every other member. ``key`` names
        all of that: the same key again only turns the stage back on (the followers' positions the module took
        meanwhile are in its rows: ``set_position``)."""
        if self.stages is None:
            return
        if self.resume(key):
            return
        self.stop()
        if len(images) > lc.MAX_IMAGES or len(followers) > lc.MAX_MEMBERS:
            return  # more than the table holds: the module's Python cycle does it
        state = self.state
        state[:] = 0
        state[lc.STATE_LEADERSHIP_TERM_ID], state[lc.STATE_MEMBER_ID] = leadership_term_id, member_id
        state[lc.STATE_QUORUM_THRESHOLD] = quorum_threshold
        own_values = own_position.values_buffer
        state[lc.STATE_OWN_POSITION_ADDRESS] = counter_value_address(own_values, own_position.counter_id)
        state[lc.STATE_OWN_REGISTRATION_ADDRESS] = counter_registration_id_address(own_values,
                                                                                   own_position.counter_id)
        state[lc.STATE_OWN_REGISTRATION_ID] = own_position.registration_id
        state[lc.STATE_COMMIT_ADDRESS] = counter_value_address(commit_counter.values_buffer, commit_counter.id)
        holds = [own_values, commit_counter.values_buffer]
        holds += fill_image_rows(state, lc.STATE_IMAGES, images)
        state[lc.STATE_IMAGE_COUNT] = len(images)
        for k, (member, publication, for_python) in enumerate(followers):
            row = lc.STATE_MEMBERS + k * lc.MEMBER_WORDS
            state[row + lc.MEMBER_ID], state[row + lc.MEMBER_LOG_POSITION] = member.id, member.log_position
            state[row + lc.MEMBER_FOR_PYTHON] = int(for_python)
            log = publication.log_buffer if publication is not None else None
            if log is not None and publication.limit_buffer is not None:
                state[row + lc.MEMBER_PUB_LOG_ADDRESS], state[row + lc.MEMBER_PUB_LOG_LENGTH] = (log.ctypes.data,
                                                                                                 log.size)
                state[row + lc.MEMBER_PUB_STATE_ADDRESS] = publication.pub_state.ctypes.data
                state[row + lc.MEMBER_LIMIT_ADDRESS] = publication.limit_buffer.ctypes.data
                state[row + lc.MEMBER_LIMIT_LENGTH] = publication.limit_buffer.size
                holds += [log, publication.pub_state, publication.limit_buffer]
        state[lc.STATE_MEMBER_COUNT] = len(followers)
        self._appends_seen = {member.id: 0 for member, _, _ in followers}
        self._commits_seen = 0
        self.start(key, tuple(holds))

    def take(self) -> tuple[list[tuple[int, int]], bool]:
        """What the stage did since the last call: ``(member id, position)`` of each follower whose AppendPositions
        it took, and whether it published a commit."""
        state = self.state
        moved = []
        for k in range(int(state[lc.STATE_MEMBER_COUNT])):
            row = lc.STATE_MEMBERS + k * lc.MEMBER_WORDS
            member_id, appends = int(state[row + lc.MEMBER_ID]), int(state[row + lc.MEMBER_APPENDS])
            if appends != self._appends_seen.get(member_id):
                self._appends_seen[member_id] = appends
                moved.append((member_id, int(state[row + lc.MEMBER_LOG_POSITION])))
        commits = int(state[lc.STATE_COMMITS])
        committed = commits != self._commits_seen
        self._commits_seen = commits
        return moved, committed

    def set_position(self, member_id: int, position: int) -> None:
        """A follower's position the module took itself (an AppendPosition the stage left to it)."""
        for k in range(int(self.state[lc.STATE_MEMBER_COUNT])):
            row = lc.STATE_MEMBERS + k * lc.MEMBER_WORDS
            if self.state[row + lc.MEMBER_ID] == member_id:
                self.state[row + lc.MEMBER_LOG_POSITION] = position
