"""The election state machine of spec/cluster.md §8 (Aeron's Election): canvass, nominate, ballots, leader and
follower log replay, catch-up, log replication, and the appointed-leader and single-member paths.

The election decides; it never touches bytes. Consensus messages arrive as ``on_<message>`` calls with decoded
fields (from the consensus adapter), outgoing ones go through one ``ElectionPublisher`` per other member (the
generated ``ConsensusPublisher`` fits), and everything it needs from the consensus module — the log, replay,
the log publication and subscription, catch-up, archive replication — goes through the ``ElectionHost`` protocol.
The election itself writes the two files whose rules it owns: candidate terms to node-state.dat and TERM entries
to recording.log.

Time is injected: ``do_work(now_ns)`` drives every deadline, and the ``on_*`` handlers use the time of the last
``do_work`` (a cached clock, as Aeron's agents use). A stage that fails or times out, or news that another
election is under way, is counted through ``host.on_error`` and restarts the election from INIT: it never
escapes to kill the consensus module.
"""

from __future__ import annotations

import random as _random
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from aeron_numba.cluster import cluster_member as cm
from aeron_numba.cluster.cluster_error import ClusterError, ClusterEvent, ClusterTimeoutError
from aeron_numba.cluster.cluster_member import NULL_POSITION, ClusterMember
from aeron_numba.cluster.election_host import ElectionHost, ElectionPublisher, LogReplay, LogReplication
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster import ClusterRole, ElectionState

NULL_SESSION_ID = NULL_VALUE
_ONE_DAY_NS = 86_400 * 1_000_000_000
_NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class ElectionConfig:
    """The consensus module settings an election reads (spec §11 defaults)."""
    election_timeout_ns: int = C.DEFAULT_ELECTION_TIMEOUT_NS
    election_status_interval_ns: int = C.DEFAULT_ELECTION_STATUS_INTERVAL_NS
    leader_heartbeat_timeout_ns: int = C.DEFAULT_LEADER_HEARTBEAT_TIMEOUT_NS
    leader_heartbeat_interval_ns: int = C.DEFAULT_LEADER_HEARTBEAT_INTERVAL_NS
    startup_canvass_timeout_ns: int = C.DEFAULT_STARTUP_CANVASS_TIMEOUT_NS
    appointed_leader_id: int = C.DEFAULT_APPOINTED_LEADER_ID
    app_version: int = 0
    protocol_version: int = C.CONSENSUS_PROTOCOL_SEMANTIC_VERSION

    def __post_init__(self):
        for name in ("election_timeout_ns", "election_status_interval_ns", "leader_heartbeat_timeout_ns",
                     "leader_heartbeat_interval_ns", "startup_canvass_timeout_ns"):
            if getattr(self, name) <= 0:
                raise ClusterError(f"{name}={getattr(self, name)} must be > 0")
        if self.election_status_interval_ns >= self.election_timeout_ns:
            raise ClusterError(f"election_status_interval_ns={self.election_status_interval_ns} must be < "
                               f"election_timeout_ns={self.election_timeout_ns}")


class Election:
    """One election, from INIT to CLOSED. The host mirrors ``state`` into the election-state counter (207) and
    ``role`` into the node-role counter (201) after each call, and counts the election (counter 238) when it
    creates one.

    ``members`` are shared with the consensus module (it reads their positions); ``publishers`` maps each other
    member's id to its consensus publisher; ``node_state_file`` is a ``NodeStateFile`` and ``recording_log`` a
    ``RecordingLog`` (or anything with the same methods); ``leadership_term_id`` / ``term_base_log_position`` /
    ``log_position`` / ``append_position`` come from the recovery plan. Cluster timestamps are in milliseconds,
    Aeron's default cluster time unit.
    """

    def __init__(self, *, is_node_startup: bool, this_member_id: int, members: list[ClusterMember],
                 leadership_term_id: int, term_base_log_position: int, log_position: int, append_position: int,
                 publishers: Mapping[int, ElectionPublisher], host: ElectionHost, node_state_file,
                 recording_log, now_ns: int, config: ElectionConfig = ElectionConfig(),
                 random: _random.Random | None = None, epoch_clock_ms: Callable[[], int] | None = None,
                 graceful_closed_leader_id: int = NULL_VALUE):
        this_member = cm.find_member(members, this_member_id)
        if this_member is None:
            raise ClusterError(f"memberId={this_member_id} not found in clusterMembers "
                               f"{[m.id for m in members]}")
        self.members = members
        self.this_member = this_member
        self._by_id = {m.id: m for m in members}
        self._publishers = publishers
        self._host = host
        self._node_state = node_state_file
        self._recording_log = recording_log
        self._config = config
        self._random = random if random is not None else _random.Random()
        self._epoch_clock_ms = epoch_clock_ms or (lambda: time.time_ns() // _NS_PER_MS)

        self.is_node_startup = is_node_startup
        self._is_extended_canvass = is_node_startup
        self._is_first_init = True
        self.is_leader_startup = False
        self._graceful_closed_leader_id = graceful_closed_leader_id
        self.log_position = log_position
        self.append_position = append_position
        self.log_leadership_term_id = leadership_term_id
        self._initial_log_leadership_term_id = leadership_term_id
        self._initial_term_base_log_position = term_base_log_position
        self.leadership_term_id = leadership_term_id
        self.candidate_term_id = leadership_term_id
        self.leader_member: ClusterMember | None = None
        self.log_session_id = NULL_SESSION_ID
        self.leader_recording_id = NULL_VALUE
        self.catchup_join_position = NULL_POSITION
        self._catchup_commit_position = 0
        self._replication_leadership_term_id = NULL_VALUE
        self._replication_stop_position = NULL_POSITION
        self._replication_term_base_log_position = NULL_VALUE
        self._replication_commit_position = 0
        self._replication_deadline_ns = 0
        self._last_published_commit_position = 0
        self._log_replay: LogReplay | None = None
        self._log_replication: LogReplication | None = None
        self._has_log_subscription = False
        self._nomination_deadline_ns = 0

        self.state = ElectionState.INIT
        self.role = ClusterRole.FOLLOWER
        self.last_state_change_reason = ""
        self._now_ns = now_ns
        self._initial_time_of_last_update_ns = now_ns - _ONE_DAY_NS
        self._time_of_last_state_change_ns = now_ns
        self._time_of_last_update_ns = self._initial_time_of_last_update_ns
        self._time_of_last_commit_position_update_ns = self._initial_time_of_last_update_ns

        if self._is_single_member():
            # A cluster of one needs no votes: take the next term straight away (§8.2 INIT).
            self.candidate_term_id = max(leadership_term_id + 1, self._node_state.candidate_term_id + 1)
            self.leadership_term_id = self.candidate_term_id
            self.leader_member = this_member
            self._node_state.update_candidate_term_id(self.candidate_term_id, log_position, self._epoch_clock_ms())
            self._state(ElectionState.LEADER_LOG_REPLICATION, now_ns)

    # -------------------------------------------------------------------------------------------- queries
    @property
    def leader_member_id(self) -> int:
        return NULL_VALUE if self.leader_member is None else self.leader_member.id

    @property
    def this_member_id(self) -> int:
        return self.this_member.id

    def __repr__(self) -> str:
        return (f"Election{{memberId={self.this_member.id}, state={self.state.name}, role={self.role.name}, "
                f"leaderId={self.leader_member_id}, candidateTermId={self.candidate_term_id}, "
                f"leadershipTermId={self.leadership_term_id}, logLeadershipTermId={self.log_leadership_term_id}, "
                f"logPosition={self.log_position}, appendPosition={self.append_position}}}")

    # -------------------------------------------------------------------------------------------- duty cycle
    def do_work(self, now_ns: int) -> int:
        self._now_ns = now_ns
        try:
            return self._STATE_WORK[self.state](self, now_ns)
        except ClusterError as error:
            self.handle_error(now_ns, error)
            return 1

    def handle_error(self, now_ns: int, error: Exception) -> None:
        """Count the error and start the election again from what has been committed."""
        self._host.on_error(error)
        self.log_position = self._host.commit_position()
        self._state(ElectionState.INIT, now_ns, str(error))

    def _guarded(self, handler: Callable[[], None]) -> None:
        if self.state == ElectionState.INIT:
            return  # not listening until INIT has prepared the member list
        try:
            handler()
        except ClusterError as error:
            self.handle_error(self._now_ns, error)

    # -------------------------------------------------------------------------------------------- messages in
    def on_canvass_position(self, log_leadership_term_id: int, log_position: int, leadership_term_id: int,
                            follower_member_id: int, protocol_version: int) -> None:
        def handle():
            if follower_member_id == self._graceful_closed_leader_id:
                self._graceful_closed_leader_id = NULL_VALUE
            follower = self._by_id.get(follower_member_id)
            if follower is None or follower is self.this_member:
                return
            follower.leadership_term_id = log_leadership_term_id
            follower.log_position = log_position
            if log_leadership_term_id < self.leadership_term_id:
                if self.role == ClusterRole.LEADER:
                    # a member that missed our term learns of it from us
                    self._publish_new_leadership_term_to(follower, log_leadership_term_id, self._timestamp())
            elif log_leadership_term_id > self.leadership_term_id and self.state in (
                    ElectionState.LEADER_LOG_REPLICATION, ElectionState.LEADER_READY):
                raise ClusterEvent("potential new election in progress")
        self._guarded(handle)

    def on_request_vote(self, log_leadership_term_id: int, log_position: int, candidate_term_id: int,
                        candidate_member_id: int, protocol_version: int) -> None:
        def handle():
            if candidate_member_id == self.this_member.id:
                return
            if candidate_term_id <= self.candidate_term_id:
                self._place_vote(candidate_term_id, candidate_member_id, False)
            elif cm.compare_log(self.log_leadership_term_id, self.append_position,
                                log_leadership_term_id, log_position) > 0:
                # our log is more recent: refuse, but never vote in this term again
                self.candidate_term_id = self._propose_max_candidate_term_id(candidate_term_id, log_position)
                self._place_vote(candidate_term_id, candidate_member_id, False)
                candidate = self._by_id.get(candidate_member_id)
                if candidate is not None and self.role == ClusterRole.LEADER:
                    self._publish_new_leadership_term_to(candidate, log_leadership_term_id, self._timestamp())
            elif self.state in (ElectionState.CANVASS, ElectionState.NOMINATE, ElectionState.CANDIDATE_BALLOT,
                                ElectionState.FOLLOWER_BALLOT):
                self.candidate_term_id = self._propose_max_candidate_term_id(candidate_term_id, log_position)
                self._place_vote(candidate_term_id, candidate_member_id, True)
                self._state(ElectionState.FOLLOWER_BALLOT, self._now_ns)
        self._guarded(handle)

    def on_vote(self, candidate_term_id: int, log_leadership_term_id: int, log_position: int,
                candidate_member_id: int, follower_member_id: int, vote: int | bool) -> None:
        def handle():
            if (self.state == ElectionState.CANDIDATE_BALLOT and candidate_term_id == self.candidate_term_id
                    and candidate_member_id == self.this_member.id):
                follower = self._by_id.get(follower_member_id)
                if follower is not None:
                    follower.candidate_term_id = candidate_term_id
                    follower.leadership_term_id = log_leadership_term_id
                    follower.log_position = log_position
                    follower.vote = bool(vote)
        self._guarded(handle)

    def on_new_leadership_term(self, log_leadership_term_id: int, next_leadership_term_id: int,
                               next_term_base_log_position: int, next_log_position: int, leadership_term_id: int,
                               term_base_log_position: int, log_position: int, leader_recording_id: int,
                               timestamp: int, leader_member_id: int, log_session_id: int, app_version: int = 0,
                               is_startup: int | bool = False) -> None:
        def handle():
            leader = self._by_id.get(leader_member_id)
            if leader is None or (leader is self.this_member and leadership_term_id == self.leadership_term_id):
                return
            if leader_member_id == self._graceful_closed_leader_id:
                self._graceful_closed_leader_id = NULL_VALUE
            in_matching_ballot = (self.state in (ElectionState.FOLLOWER_BALLOT, ElectionState.CANDIDATE_BALLOT)
                                  and leadership_term_id == self.candidate_term_id)
            if in_matching_ballot or self.state == ElectionState.CANVASS:
                if log_leadership_term_id == self.log_leadership_term_id:
                    self._follow(leader, next_leadership_term_id, next_term_base_log_position, next_log_position,
                                 leadership_term_id, term_base_log_position, log_position, leader_recording_id,
                                 log_session_id, bool(is_startup), log_leadership_term_id)
                else:
                    # our log ends in another term than the leader's: canvass again to learn what to fetch
                    self._state(ElectionState.CANVASS, self._now_ns, "leader log in another term")
            if (self.state == ElectionState.FOLLOWER_LOG_REPLICATION and self.leader_member is not None
                    and leader_member_id == self.leader_member.id):
                self._replication_deadline_ns = self._now_ns + self._config.leader_heartbeat_timeout_ns
        self._guarded(handle)

    def _follow(self, leader, next_leadership_term_id, next_term_base_log_position, next_log_position,
                leadership_term_id, term_base_log_position, log_position, leader_recording_id, log_session_id,
                is_startup, log_leadership_term_id) -> None:
        if next_term_base_log_position != NULL_POSITION and next_term_base_log_position < self.append_position:
            # we hold log the leader never committed: drop it and start again (§8.2)
            self._host.truncate_log_entry(log_leadership_term_id, next_term_base_log_position)
            raise ClusterEvent(f"Truncating Cluster Log - memberId={self.this_member.id} state={self.state.name} "
                               f"this.appendPosition={self.append_position} "
                               f"newPosition={next_term_base_log_position}")
        self.leader_member = leader
        self.is_leader_startup = is_startup
        self.leadership_term_id = leadership_term_id
        self.candidate_term_id = max(leadership_term_id, self.candidate_term_id)
        self.log_session_id = log_session_id
        self.leader_recording_id = leader_recording_id
        self.catchup_join_position = log_position if self.append_position < log_position else NULL_POSITION
        if self.append_position >= term_base_log_position:
            self._state(ElectionState.FOLLOWER_REPLAY, self._now_ns)
        elif next_leadership_term_id == NULL_VALUE:
            raise ClusterError(f"invalid newLeadershipTerm - this.appendPosition={self.append_position} < "
                               f"termBaseLogPosition={term_base_log_position} and nextLeadershipTermId="
                               f"{next_leadership_term_id}, logLeadershipTermId={log_leadership_term_id}, "
                               f"leadershipTermId={leadership_term_id}, leaderMemberId={leader.id}")
        elif self.append_position < next_term_base_log_position:
            # we miss the rest of our own last term: fetch it up to where the next term starts
            self._replication_leadership_term_id = log_leadership_term_id
            self._replication_stop_position = next_term_base_log_position
            self._replication_term_base_log_position = NULL_VALUE
            self._state(ElectionState.FOLLOWER_LOG_REPLICATION, self._now_ns)
        elif self.append_position == next_term_base_log_position and next_log_position != NULL_POSITION:
            self._replication_leadership_term_id = next_leadership_term_id
            self._replication_stop_position = next_log_position
            self._replication_term_base_log_position = next_term_base_log_position
            self._state(ElectionState.FOLLOWER_LOG_REPLICATION, self._now_ns)

    def on_append_position(self, leadership_term_id: int, log_position: int, follower_member_id: int,
                           flags: int = C.APPEND_POSITION_FLAG_NONE) -> None:
        def handle():
            if leadership_term_id <= self.leadership_term_id:
                follower = self._by_id.get(follower_member_id)
                if follower is not None:
                    follower.leadership_term_id = leadership_term_id
                    follower.log_position = log_position
                    follower.time_of_last_append_position_ns = self._now_ns
                    self._host.track_catchup_completion(follower, leadership_term_id, flags)
        self._guarded(handle)

    def on_commit_position(self, leadership_term_id: int, log_position: int, leader_member_id: int) -> None:
        def handle():
            from_leader = self.leader_member is not None and leader_member_id == self.leader_member.id
            if (leadership_term_id == self.leadership_term_id and self.catchup_join_position != NULL_POSITION
                    and self.state == ElectionState.FOLLOWER_CATCHUP and from_leader):
                self._catchup_commit_position = max(self._catchup_commit_position, log_position)
            elif self.state == ElectionState.FOLLOWER_LOG_REPLICATION and from_leader:
                self._replication_commit_position = max(self._replication_commit_position, log_position)
                self._replication_deadline_ns = self._now_ns + self._config.leader_heartbeat_timeout_ns
            elif leadership_term_id > self.leadership_term_id and self.state == ElectionState.LEADER_READY:
                raise ClusterEvent("new leader detected due to commit position")
        self._guarded(handle)

    def on_recording_signal(self, correlation_id: int, recording_id: int, position: int, signal: int) -> None:
        """An archive RecordingSignal: it drives the log replication in FOLLOWER_LOG_REPLICATION."""
        def handle():
            if self._log_replication is not None:
                self._log_replication.on_signal(correlation_id, recording_id, position, signal)
                self._host.update_log_recording_id(self._log_replication.recording_id)
        self._guarded(handle)

    def on_replay_new_leadership_term_event(self, leadership_term_id: int, log_position: int, timestamp: int,
                                            term_base_log_position: int) -> None:
        """A NewLeadershipTermEvent read from the log while replaying or catching up: record that term."""
        def handle():
            if self.state in (ElectionState.FOLLOWER_CATCHUP, ElectionState.FOLLOWER_REPLAY):
                self._ensure_recording_log_coherent(leadership_term_id, term_base_log_position, NULL_POSITION,
                                                    timestamp)
                self.log_position = log_position
                self.log_leadership_term_id = leadership_term_id
        self._guarded(handle)

    # -------------------------------------------------------------------------------------------- states
    def _init(self, now_ns: int) -> int:
        if self._is_first_init:
            self._is_first_init = False
            if not self.is_node_startup:
                self._prepare_for_new_leadership(now_ns)
        else:
            self._stop_log_replication()
            self._stop_catchup()
            self._prepare_for_new_leadership(now_ns)
            self.log_session_id = NULL_SESSION_ID
            self._stop_replay()
            if self._has_log_subscription:
                self._host.close_log_subscription()
                self._has_log_subscription = False
        self.candidate_term_id = max(self._node_state.candidate_term_id, self.leadership_term_id)
        if self._is_single_member():
            self.leader_member = self.this_member
            self._state(ElectionState.LEADER_LOG_REPLICATION, now_ns)
        else:
            self._state(ElectionState.CANVASS, now_ns)
        return 1

    def _canvass(self, now_ns: int) -> int:
        work_count = 0
        if self._is_extended_canvass:
            deadline_ns = self._time_of_last_state_change_ns + self._config.startup_canvass_timeout_ns
        else:
            deadline_ns = self._host.time_of_last_leader_update_ns() + self._config.leader_heartbeat_timeout_ns
        if self._has_update_interval_expired(now_ns, self._config.election_status_interval_ns):
            self._time_of_last_update_ns = now_ns
            self._publish_canvass_position()
            work_count += 1
        appointed = self._config.appointed_leader_id
        if appointed != NULL_VALUE and appointed != self.this_member.id:
            return work_count  # only the appointed leader may stand
        if (cm.is_unanimous_candidate(self.members, self.this_member, self._graceful_closed_leader_id)
                or (now_ns >= deadline_ns and cm.is_quorum_candidate(self.members, self.this_member))):
            # a random delay makes it unlikely that two equally good candidates split the vote
            delay_ns = int(self._random.random() * (self._config.election_timeout_ns >> 1))
            self._nomination_deadline_ns = now_ns + delay_ns
            self._state(ElectionState.NOMINATE, now_ns)
            work_count += 1
        return work_count

    def _nominate(self, now_ns: int) -> int:
        if now_ns >= self._nomination_deadline_ns:
            self.candidate_term_id = self._propose_max_candidate_term_id(self.candidate_term_id + 1,
                                                                         self.log_position)
            cm.become_candidate(self.members, self.candidate_term_id, self.this_member.id)
            self._state(ElectionState.CANDIDATE_BALLOT, now_ns)
            return 1
        if self._has_update_interval_expired(now_ns, self._config.election_status_interval_ns):
            self._time_of_last_update_ns = now_ns
            self._publish_canvass_position()
            return 1
        return 0

    def _candidate_ballot(self, now_ns: int) -> int:
        if cm.is_unanimous_leader(self.members, self.candidate_term_id, self._graceful_closed_leader_id):
            self._become_leader(now_ns)
            return 1
        if now_ns >= self._time_of_last_state_change_ns + self._config.election_timeout_ns:
            if cm.is_quorum_leader(self.members, self.candidate_term_id):
                self._become_leader(now_ns)
            else:
                self._state(ElectionState.CANVASS, now_ns, "ballot timed out without a majority")
            return 1
        work_count = 0
        for member in self.members:
            if not member.is_ballot_sent:
                work_count += 1
                publisher = self._publishers.get(member.id)
                member.is_ballot_sent = publisher is not None and publisher.request_vote(
                    self.log_leadership_term_id, self.append_position, self.candidate_term_id,
                    self.this_member.id, self._config.protocol_version)
        return work_count

    def _follower_ballot(self, now_ns: int) -> int:
        if now_ns >= self._time_of_last_state_change_ns + self._config.election_timeout_ns:
            self._state(ElectionState.CANVASS, now_ns, "no new leadership term after the vote")
            return 1
        return 0

    def _leader_log_replication(self, now_ns: int) -> int:
        self.this_member.log_position = self.append_position
        self.this_member.time_of_last_append_position_ns = now_ns
        quorum_position = cm.quorum_position(self.members)
        work_count = self._publish_new_leadership_term_on_interval(now_ns)
        work_count += self._publish_commit_position_on_interval(quorum_position, now_ns)
        if quorum_position >= self.append_position:
            # a majority holds our whole log, so every entry in it is committed
            self._state(ElectionState.LEADER_REPLAY, now_ns)
            work_count += 1
        return work_count

    def _leader_replay(self, now_ns: int) -> int:
        work_count = 0
        if self._log_replay is None:
            if self.log_position < self.append_position:
                self._log_replay = self._host.new_log_replay(self.log_position, self.append_position)
            else:
                self._state(ElectionState.LEADER_INIT, now_ns)
            work_count += 1
            self.is_leader_startup = self.is_node_startup
            cm.reset_log_positions(self.members, NULL_POSITION)
            self.this_member.leadership_term_id = self.leadership_term_id
            self.this_member.log_position = self.append_position
        else:
            work_count += self._log_replay.do_work()
            if self._log_replay.is_done():
                self._stop_replay()
                self.log_position = self.append_position
                self._state(ElectionState.LEADER_INIT, now_ns)
        work_count += self._publish_new_leadership_term_on_interval(now_ns)
        work_count += self._publish_commit_position_on_interval(cm.quorum_position(self.members), now_ns)
        return work_count

    def _leader_init(self, now_ns: int) -> int:
        self._host.join_log_as_leader(self.leadership_term_id, self.log_position, self.log_session_id,
                                      self.is_leader_startup)
        self._update_recording_log(now_ns)
        self._state(ElectionState.LEADER_READY, now_ns)
        return 1

    def _leader_ready(self, now_ns: int) -> int:
        work_count = self._host.update_leader_position(now_ns, self.append_position)
        work_count += self._publish_new_leadership_term_on_interval(now_ns)
        heartbeat_expired = now_ns >= self._time_of_last_state_change_ns + self._config.leader_heartbeat_timeout_ns
        if (cm.has_voters_at_position(self.members, self.log_position, self.leadership_term_id)
                or (heartbeat_expired
                    and cm.has_quorum_at_position(self.members, self.log_position, self.leadership_term_id))):
            if self._host.append_new_leadership_term_event(now_ns):
                self._host.election_complete(now_ns)
                self._state(ElectionState.CLOSED, now_ns)
                work_count += 1
        return work_count

    def _follower_log_replication(self, now_ns: int) -> int:
        if self._log_replication is None:
            if self.append_position < self._replication_stop_position:
                self._log_replication = self._host.new_log_replication(
                    self.leader_member, self.leader_recording_id, self._replication_stop_position, now_ns)
                self._replication_deadline_ns = now_ns + self._config.leader_heartbeat_timeout_ns
            else:
                self._update_recording_log_for_replication(now_ns)
                self._state(ElectionState.CANVASS, now_ns, "log replicated")
            return 1
        replication = self._log_replication
        work_count = replication.poll(now_ns)
        replication_done = replication.has_replication_ended() and replication.has_stopped()
        # after the completion check, so the final position is reported to the leader too
        work_count += self._publish_follower_replication_position(now_ns)
        if replication_done:
            if self._replication_commit_position >= self.append_position:
                self.append_position = replication.position
                self._stop_log_replication()
                self._update_recording_log_for_replication(now_ns)
                self._state(ElectionState.CANVASS, now_ns, "log replicated")
                work_count += 1
            elif now_ns >= self._replication_deadline_ns:
                raise ClusterTimeoutError("timeout awaiting commit position")
        return work_count

    def _follower_replay(self, now_ns: int) -> int:
        if self._log_replay is None:
            if self.log_position < self.append_position:
                self._log_replay = self._host.new_log_replay(self.log_position, self.append_position)
            else:
                self._state(self._after_replay_state(), now_ns)
            return 1
        work_count = self._log_replay.do_work()
        if self._log_replay.is_done():
            self._stop_replay()
            self.log_position = self.append_position
            self._state(self._after_replay_state(), now_ns)
        return work_count

    def _after_replay_state(self) -> ElectionState:
        if self.catchup_join_position != NULL_POSITION:
            return ElectionState.FOLLOWER_CATCHUP_INIT
        return ElectionState.FOLLOWER_LOG_INIT

    def _follower_catchup_init(self, now_ns: int) -> int:
        if not self._has_log_subscription:
            self._host.add_follower_log_subscription(self.log_session_id)
            self._has_log_subscription = True
            self._host.add_catchup_log_destination(self.this_member.catchup_endpoint)
        catchup_endpoint = self._resolved_catchup_endpoint()
        if catchup_endpoint is not None and self._publish_to_leader(
                lambda p: p.catchup_position(self.leadership_term_id, self.log_position, self.this_member.id,
                                             catchup_endpoint)):
            self._time_of_last_update_ns = now_ns
            self._host.catchup_initiated(now_ns)
            self._state(ElectionState.FOLLOWER_CATCHUP_AWAIT, now_ns)
        elif self._stage_timed_out(now_ns):
            raise ClusterTimeoutError("failed to send catchup position")
        return 1

    def _resolved_catchup_endpoint(self) -> str | None:
        endpoint = self.this_member.catchup_endpoint
        if not endpoint.endswith(":0"):
            return endpoint
        resolved = self._host.log_subscription_resolved_endpoint()
        if resolved is None:
            return None
        return endpoint[:-2] + resolved[resolved.rfind(":"):]

    def _follower_catchup_await(self, now_ns: int) -> int:
        join_position = self._host.log_image_join_position(self.log_session_id)
        if join_position != NULL_POSITION:
            self._verify_log_join_position("followerCatchupAwait", join_position)
            if self._host.try_join_log_as_follower(self.is_leader_startup, now_ns):
                self._state(ElectionState.FOLLOWER_CATCHUP, now_ns)
                return 1
            if self._host.is_log_subscription_errored():
                raise ClusterError("failed to add catchup log as follower")
            if self._stage_timed_out(now_ns):
                raise ClusterTimeoutError("failed to join catchup log as follower")
        elif self._stage_timed_out(now_ns):
            raise ClusterTimeoutError("failed to join catchup log")
        return 0

    def _follower_catchup(self, now_ns: int) -> int:
        work_count = self._host.catchup_poll(self._catchup_commit_position, now_ns)
        if (not self._host.has_live_log_destination()
                and self._host.is_catchup_near_live(max(self.catchup_join_position, self._catchup_commit_position))):
            self._host.add_live_log_destination()
            work_count += 1
        position = self._host.commit_position()
        if (position >= self.catchup_join_position and position >= self._catchup_commit_position
                and not self._host.has_catchup_log_destination() and not self._host.is_taking_snapshot()):
            self.append_position = position
            self.log_position = position
            self._state(ElectionState.FOLLOWER_LOG_INIT, now_ns)
            work_count += 1
        return work_count

    def _follower_log_init(self, now_ns: int) -> int:
        if not self._has_log_subscription:
            if self.log_session_id != NULL_SESSION_ID:
                self._host.add_follower_log_subscription(self.log_session_id)
                self._has_log_subscription = True
                self._host.add_live_log_destination()
                self._state(ElectionState.FOLLOWER_LOG_AWAIT, now_ns)
        else:
            self._state(ElectionState.FOLLOWER_READY, now_ns)  # joined already through catch-up
        return 1

    def _follower_log_await(self, now_ns: int) -> int:
        join_position = self._host.log_image_join_position(self.log_session_id)
        if join_position != NULL_POSITION:
            self._verify_log_join_position("followerLogAwait", join_position)
            if self._host.try_join_log_as_follower(self.is_leader_startup, now_ns):
                self.append_position = join_position
                self.log_position = join_position
                self._update_recording_log(now_ns)
                self._state(ElectionState.FOLLOWER_READY, now_ns)
                return 1
            if self._stage_timed_out(now_ns):
                raise ClusterTimeoutError("failed to join live log as follower")
        elif self._host.is_log_subscription_errored():
            raise ClusterError("failed to add live log as follower")
        elif self._stage_timed_out(now_ns):
            raise ClusterTimeoutError("failed to join live log")
        return 0

    def _follower_ready(self, now_ns: int) -> int:
        if self._publish_to_leader(lambda p: p.append_position(self.leadership_term_id, self.log_position,
                                                               self.this_member.id, C.APPEND_POSITION_FLAG_NONE)):
            self._host.election_complete(now_ns)
            self._state(ElectionState.CLOSED, now_ns)
        elif self._stage_timed_out(now_ns):
            raise ClusterTimeoutError("ready follower failed to notify leader")
        return 1

    def _closed(self, now_ns: int) -> int:
        return 0

    _STATE_WORK = {
        ElectionState.INIT: _init,
        ElectionState.CANVASS: _canvass,
        ElectionState.NOMINATE: _nominate,
        ElectionState.CANDIDATE_BALLOT: _candidate_ballot,
        ElectionState.FOLLOWER_BALLOT: _follower_ballot,
        ElectionState.LEADER_LOG_REPLICATION: _leader_log_replication,
        ElectionState.LEADER_REPLAY: _leader_replay,
        ElectionState.LEADER_INIT: _leader_init,
        ElectionState.LEADER_READY: _leader_ready,
        ElectionState.FOLLOWER_LOG_REPLICATION: _follower_log_replication,
        ElectionState.FOLLOWER_REPLAY: _follower_replay,
        ElectionState.FOLLOWER_CATCHUP_INIT: _follower_catchup_init,
        ElectionState.FOLLOWER_CATCHUP_AWAIT: _follower_catchup_await,
        ElectionState.FOLLOWER_CATCHUP: _follower_catchup,
        ElectionState.FOLLOWER_LOG_INIT: _follower_log_init,
        ElectionState.FOLLOWER_LOG_AWAIT: _follower_log_await,
        ElectionState.FOLLOWER_READY: _follower_ready,
        ElectionState.CLOSED: _closed,
    }

    # -------------------------------------------------------------------------------------------- transitions
    def _state(self, new_state: ElectionState, now_ns: int, reason: str = "") -> None:
        if new_state == self.state:
            return
        if self.state == ElectionState.CANVASS:
            self._is_extended_canvass = False  # only the first canvass after start waits for everyone
        if new_state == ElectionState.CANVASS:
            self._reset_members()
            self.role = ClusterRole.FOLLOWER
        elif new_state == ElectionState.CANDIDATE_BALLOT:
            self.role = ClusterRole.CANDIDATE
        elif new_state == ElectionState.LEADER_LOG_REPLICATION:
            self.role = ClusterRole.LEADER
            self.log_session_id = self._host.add_log_publication(self.append_position)
        elif new_state in (ElectionState.FOLLOWER_LOG_REPLICATION, ElectionState.FOLLOWER_REPLAY):
            self.role = ClusterRole.FOLLOWER
        self.state = new_state
        self.last_state_change_reason = reason
        self._time_of_last_state_change_ns = now_ns
        self._time_of_last_update_ns = self._initial_time_of_last_update_ns
        self._time_of_last_commit_position_update_ns = self._initial_time_of_last_update_ns

    def _become_leader(self, now_ns: int) -> None:
        self.leader_member = self.this_member
        self.leadership_term_id = self.candidate_term_id
        self._state(ElectionState.LEADER_LOG_REPLICATION, now_ns)

    def _reset_members(self) -> None:
        for member in self.members:
            member.reset()
        self.this_member.leadership_term_id = self.leadership_term_id
        self.this_member.log_position = self.append_position
        self.leader_member = None

    def _prepare_for_new_leadership(self, now_ns: int) -> None:
        last_append_position = self._host.prepare_for_new_leadership(self.log_position, now_ns)
        if last_append_position != NULL_POSITION:
            self.append_position = last_append_position

    def _stop_catchup(self) -> None:
        self._host.stop_all_catchups()
        self.catchup_join_position = NULL_POSITION
        self._catchup_commit_position = 0

    def _stop_replay(self) -> None:
        if self._log_replay is not None:
            self._log_replay.close()
            self._log_replay = None

    def _stop_log_replication(self) -> None:
        if self._log_replication is not None:
            self._log_replication.close()
            self._log_replication = None
        self._replication_commit_position = 0
        self._replication_deadline_ns = 0
        self._last_published_commit_position = 0

    # -------------------------------------------------------------------------------------------- files
    def _propose_max_candidate_term_id(self, candidate_term_id: int, log_position: int) -> int:
        return self._node_state.propose_max_candidate_term_id(candidate_term_id, log_position,
                                                              self._epoch_clock_ms())

    def _ensure_recording_log_coherent(self, leadership_term_id: int, term_base_log_position: int,
                                       log_position: int, timestamp: int) -> None:
        recording_id = self._host.log_recording_id()
        if recording_id == NULL_VALUE:
            return  # nothing recorded yet (a replication from an empty log)
        if term_base_log_position == NULL_VALUE:
            term_base_log_position = self._initial_term_base_log_position
        self._recording_log.ensure_coherent(recording_id, self._initial_log_leadership_term_id,
                                            self._initial_term_base_log_position, leadership_term_id,
                                            term_base_log_position, log_position, timestamp)

    def _update_recording_log(self, now_ns: int) -> None:
        self._ensure_recording_log_coherent(self.leadership_term_id, self.log_position, NULL_POSITION,
                                            now_ns // _NS_PER_MS)
        self.log_leadership_term_id = self.leadership_term_id

    def _update_recording_log_for_replication(self, now_ns: int) -> None:
        self._ensure_recording_log_coherent(self._replication_leadership_term_id,
                                            self._replication_term_base_log_position,
                                            self._replication_stop_position, now_ns // _NS_PER_MS)
        self.log_leadership_term_id = self._replication_leadership_term_id

    # -------------------------------------------------------------------------------------------- messages out
    def _publish_canvass_position(self) -> None:
        for member in self.members:
            publisher = self._publishers.get(member.id)
            if member is not self.this_member and publisher is not None:
                publisher.canvass_position(self.log_leadership_term_id, self.append_position,
                                           self.leadership_term_id, self.this_member.id,
                                           self._config.protocol_version)

    def _place_vote(self, candidate_term_id: int, candidate_member_id: int, vote: bool) -> None:
        publisher = self._publishers.get(candidate_member_id)
        if candidate_member_id in self._by_id and publisher is not None:
            publisher.vote(candidate_term_id, self.log_leadership_term_id, self.append_position,
                           candidate_member_id, self.this_member.id, int(vote))

    def _publish_new_leadership_term_on_interval(self, now_ns: int) -> int:
        if self._has_update_interval_expired(now_ns, self._config.leader_heartbeat_interval_ns):
            self._time_of_last_update_ns = now_ns
            timestamp = now_ns // _NS_PER_MS
            for member in self.members:
                self._publish_new_leadership_term_to(member, self.log_leadership_term_id, timestamp)
            return 1
        return 0

    def _publish_new_leadership_term_to(self, member: ClusterMember, log_leadership_term_id: int,
                                        timestamp: int) -> None:
        publisher = self._publishers.get(member.id)
        if member is self.this_member or publisher is None or self.log_session_id == NULL_SESSION_ID:
            return
        # tell the member where the term after its log's term starts, so it can fetch what it misses
        next_term = self._recording_log.find_term_entry(log_leadership_term_id + 1)
        if next_term is not None:
            next_leadership_term_id = next_term.leadership_term_id
            next_term_base_log_position = next_term.term_base_log_position
            next_log_position = (next_term.log_position if next_term.log_position != NULL_POSITION
                                 else self.append_position)
        else:
            next_leadership_term_id = self.leadership_term_id
            next_term_base_log_position = self.append_position
            next_log_position = NULL_POSITION
        publisher.new_leadership_term(log_leadership_term_id, next_leadership_term_id, next_term_base_log_position,
                                      next_log_position, self.leadership_term_id, self.append_position,
                                      self.append_position, self._host.log_recording_id(), timestamp,
                                      self.this_member.id, self.log_session_id, self._config.app_version,
                                      int(self.is_leader_startup))

    def _publish_commit_position_on_interval(self, quorum_position: int, now_ns: int) -> int:
        if (self._last_published_commit_position < quorum_position
                or (self._last_published_commit_position == quorum_position
                    and now_ns - self._time_of_last_commit_position_update_ns
                    >= self._config.leader_heartbeat_interval_ns)):
            self._time_of_last_commit_position_update_ns = now_ns
            self._last_published_commit_position = quorum_position
            self._host.publish_commit_position(quorum_position)
            return 1
        return 0

    def _publish_follower_replication_position(self, now_ns: int) -> int:
        position = self._log_replication.position
        if position > self.append_position or (
                position == self.append_position
                and self._has_update_interval_expired(now_ns, self._config.leader_heartbeat_interval_ns)):
            if self._publish_to_leader(lambda p: p.append_position(self.leadership_term_id, position,
                                                                   self.this_member.id,
                                                                   C.APPEND_POSITION_FLAG_NONE)):
                self.append_position = position
                self._time_of_last_update_ns = now_ns
                return 1
        return 0

    def _publish_to_leader(self, send: Callable[[ElectionPublisher], bool]) -> bool:
        publisher = None if self.leader_member is None else self._publishers.get(self.leader_member.id)
        return publisher is not None and bool(send(publisher))

    # -------------------------------------------------------------------------------------------- helpers
    def _is_single_member(self) -> bool:
        return len(self.members) == 1 and self.members[0] is self.this_member

    def _has_update_interval_expired(self, now_ns: int, interval_ns: int) -> bool:
        return now_ns - self._time_of_last_update_ns >= interval_ns

    def _stage_timed_out(self, now_ns: int) -> bool:
        return now_ns >= self._time_of_last_state_change_ns + self._config.leader_heartbeat_timeout_ns

    def _verify_log_join_position(self, stage: str, join_position: int) -> None:
        if join_position != self.log_position:
            relation = "less" if join_position < self.log_position else "greater"
            raise ClusterEvent(f"{stage} - joinPosition={join_position} {relation} than "
                               f"logPosition={self.log_position}")

    def _timestamp(self) -> int:
        return self._now_ns // _NS_PER_MS
