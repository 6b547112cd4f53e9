"""Member to member, stream 108 (Aeron's ``ConsensusAdapter``): an ``SbeAdapter`` over
``codecs.cluster_messages.CONSENSUS`` on this member's consensus subscription; each message becomes the agent's
``on_<message>`` (which hands it to the election while there is one).

Backup and standby queries (BackupQuery, HeartbeatRequest, StandbySnapshot) are ClusterBackup's and standby
nodes' protocol, not built in aeron-numba: they are answered as unsupported (counted in the agent's error log),
not silently dropped.
"""

from __future__ import annotations

from aeron_numba.codecs.cluster_messages import CLUSTER, CONSENSUS
from aeron_numba.codecs.sbe_adapter import SbeAdapter

#: Aeron's ConsensusAdapter fragment limit.
FRAGMENT_LIMIT = 10
UNSUPPORTED = ("BackupQuery", "HeartbeatRequest", "StandbySnapshot")


class ConsensusAdapter:
    def __init__(self, subscription, agent, on_error=None):
        self.subscription = subscription
        self._agent = agent
        self._on_error = on_error or (lambda text: None)
        self._sbe = SbeAdapter(CLUSTER, self, CONSENSUS, unsupported=UNSUPPORTED, on_unsupported=self._unsupported,
                               on_error=on_error, name="ConsensusAdapter")

    def _unsupported(self, message) -> None:
        self._on_error(f"ConsensusAdapter: {message.SPEC.name} is not supported (no cluster backup or standby)")

    def poll(self) -> int:
        if self.subscription is None:
            return 0
        return self.subscription.poll(self._sbe.on_fragment, FRAGMENT_LIMIT)

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None

    def on_canvass_position(self, log_leadership_term_id, log_position, leadership_term_id, follower_member_id,
                            protocol_version):
        self._agent.on_canvass_position(log_leadership_term_id, log_position, leadership_term_id,
                                        follower_member_id, protocol_version)

    def on_request_vote(self, log_leadership_term_id, log_position, candidate_term_id, candidate_member_id,
                        protocol_version):
        self._agent.on_request_vote(log_leadership_term_id, log_position, candidate_term_id, candidate_member_id,
                                    protocol_version)

    def on_vote(self, candidate_term_id, log_leadership_term_id, log_position, candidate_member_id,
                follower_member_id, vote):
        self._agent.on_vote(candidate_term_id, log_leadership_term_id, log_position, candidate_member_id,
                            follower_member_id, vote)

    def on_new_leadership_term(self, log_leadership_term_id, next_leadership_term_id, next_term_base_log_position,
                               next_log_position, leadership_term_id, term_base_log_position, log_position,
                               leader_recording_id, timestamp, leader_member_id, log_session_id, app_version,
                               is_startup):
        self._agent.on_new_leadership_term(log_leadership_term_id, next_leadership_term_id,
                                           next_term_base_log_position, next_log_position, leadership_term_id,
                                           term_base_log_position, log_position, leader_recording_id, timestamp,
                                           leader_member_id, log_session_id, app_version, is_startup)

    def on_append_position(self, leadership_term_id, log_position, follower_member_id, flags):
        self._agent.on_append_position(leadership_term_id, log_position, follower_member_id, flags)

    def on_commit_position(self, leadership_term_id, log_position, leader_member_id):
        self._agent.on_commit_position(leadership_term_id, log_position, leader_member_id)

    def on_catchup_position(self, leadership_term_id, log_position, follower_member_id, catchup_endpoint):
        self._agent.on_catchup_position(leadership_term_id, log_position, follower_member_id, catchup_endpoint)

    def on_stop_catchup(self, leadership_term_id, follower_member_id):
        self._agent.on_stop_catchup(leadership_term_id, follower_member_id)

    def on_termination_position(self, leadership_term_id, log_position):
        self._agent.on_termination_position(leadership_term_id, log_position)

    def on_termination_ack(self, leadership_term_id, log_position, member_id):
        self._agent.on_termination_ack(leadership_term_id, log_position, member_id)

    def on_challenge_response(self, correlation_id, cluster_session_id, encoded_credentials):
        self._agent.on_consensus_challenge_response(correlation_id, cluster_session_id, encoded_credentials)
