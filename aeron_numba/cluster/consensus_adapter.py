"""Member to member, stream 108 (Aeron's ``ConsensusAdapter``): an ``SbeAdapter`` over
``codecs.cluster_messages.CONSENSUS`` on this member's consensus subscription; each message becomes the agent's
``on_<message>`` (which hands it to the election while there is one).

The two messages a busy cluster sends at rate, a follower's AppendPosition and the leader's CommitPosition, are
read in place by ``kernels/cluster_consensus.read_positions`` and handed to the agent's handlers as ints, without
the codec's message objects; at any other frame the kernel stops and the codec takes that one message.

Backup and standby queries (BackupQuery, HeartbeatRequest, StandbySnapshot) are ClusterBackup's and standby
nodes' protocol, not built in aeron-numba: they are answered as unsupported (counted in the agent's error log),
not silently dropped.
"""

from __future__ import annotations

import numba
import numpy as np

from aeron_numba.client.handles import ImageHandles
from aeron_numba.client.subscription import Subscription
from aeron_numba.codecs.cluster_messages import CLUSTER, CONSENSUS
from aeron_numba.codecs.sbe_adapter import SbeAdapter
from aeron_numba.kernels import cluster_consensus as K

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
        self._rows = np.zeros((FRAGMENT_LIMIT, K.ROW_COLUMNS), np.int64)
        self._result = np.zeros(K.RESULT_LENGTH, np.int64)
        self._handles = ImageHandles()

    def compiled_images(self) -> list | None:
        """The compiled handles of the subscription's open images (for a stage reading them in the driver's stretch),
        or None where they cannot be had (no JIT, no client subscription)."""
        subscription = self.subscription
        if subscription is None or numba.config.DISABLE_JIT or not isinstance(subscription, Subscription):
            return None
        handles = [self._handles.of(image) for image in subscription.images]
        return [handle for handle in handles if handle is not None]

    def _unsupported(self, message) -> None:
        self._on_error(f"ConsensusAdapter: {message.SPEC.name} is not supported (no cluster backup or standby)")

    def poll(self) -> int:
        """Up to ``FRAGMENT_LIMIT`` messages over the subscription's images: each image's positions through the
        kernel, any other message through the codec (one, then the kernel goes on)."""
        subscription = self.subscription
        if subscription is None:
            return 0
        if numba.config.DISABLE_JIT or not isinstance(subscription, Subscription):
            # Compiled handles need the JIT and a client's mapped images: the codec reads everything.
            return subscription.poll(self._sbe.on_fragment, FRAGMENT_LIMIT)
        rows, result = self._rows, self._result
        budget = FRAGMENT_LIMIT
        for image in subscription.images:
            compiled = self._handles.of(image)
            if compiled is None:
                continue
            while budget > 0:
                count = K.read_positions(compiled.log, compiled.position_buffer, compiled.position_offset,
                                         compiled.state, budget, rows, result)
                if count:
                    budget -= count
                    self._on_rows(count)
                if not result[K.RESULT_STOPPED_AT_OTHER]:
                    if count == 0:  # nothing more yet (a read that ends at a term's end goes on in the next)
                        break
                    continue
                if budget <= 0:
                    break
                image.sync_position()  # the kernel moved the position under the image's Python peek
                taken = image.poll(self._sbe.on_fragment, 1)
                if taken == 0:
                    break
                budget -= taken
        self._handles.drop_closed()
        return FRAGMENT_LIMIT - budget

    def _on_rows(self, count: int) -> None:
        agent = self._agent
        for template_id, leadership_term_id, log_position, member_id, flags in self._rows[:count].tolist():
            if template_id == K.APPEND_POSITION_TEMPLATE_ID:
                agent.on_append_position(leadership_term_id, log_position, member_id, flags)
            else:
                agent.on_commit_position(leadership_term_id, log_position, member_id)

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
