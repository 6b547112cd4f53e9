"""What an Election needs from around it, as protocols: ``ElectionPublisher`` (the consensus messages it sends to
one member, which the generated ``ConsensusPublisher`` implements), ``ElectionHost`` (what it asks of the consensus
module, documented per method so the consensus module can implement it), and the ``LogReplay`` and
``LogReplication`` handles the host returns. Kept apart from the state machine so the consensus module and the
test fakes depend on these contracts only."""

from __future__ import annotations

from typing import Protocol

from aeron_numba.cluster.cluster_member import ClusterMember


class ElectionPublisher(Protocol):
    """The consensus messages an election sends to one member (the methods of codecs ``ConsensusPublisher``).
    Each returns False when the message could not be sent (back pressure, not connected)."""

    def canvass_position(self, log_leadership_term_id: int, log_position: int, leadership_term_id: int,
                         follower_member_id: int, protocol_version: int) -> bool: ...

    def request_vote(self, log_leadership_term_id: int, log_position: int, candidate_term_id: int,
                     candidate_member_id: int, protocol_version: int) -> bool: ...

    def vote(self, candidate_term_id: int, log_leadership_term_id: int, log_position: int,
             candidate_member_id: int, follower_member_id: int, vote: int) -> bool: ...

    def new_leadership_term(self, log_leadership_term_id: int, next_leadership_term_id: int,
                            next_term_base_log_position: int, next_log_position: int, leadership_term_id: int,
                            term_base_log_position: int, log_position: int, leader_recording_id: int,
                            timestamp: int, leader_member_id: int, log_session_id: int, app_version: int,
                            is_startup: int) -> bool: ...

    def append_position(self, leadership_term_id: int, log_position: int, follower_member_id: int,
                        flags: int) -> bool: ...

    def catchup_position(self, leadership_term_id: int, log_position: int, follower_member_id: int,
                         catchup_endpoint: str) -> bool: ...


class LogReplay(Protocol):
    """Replay of the local log recording into the services (Aeron's LogReplay)."""

    def do_work(self) -> int: ...

    def is_done(self) -> bool: ...

    def close(self) -> None: ...


class LogReplication(Protocol):
    """Archive replication of the leader's log recording into ours (Aeron's RecordingReplication)."""

    position: int
    recording_id: int

    def poll(self, now_ns: int) -> int: ...

    def on_signal(self, correlation_id: int, recording_id: int, position: int, signal: int) -> None: ...

    def has_replication_ended(self) -> bool: ...

    def has_stopped(self) -> bool: ...

    def close(self) -> None: ...


class ElectionHost(Protocol):
    """What an election asks of the consensus module (Aeron's ConsensusModuleAgent, as Election uses it)."""

    def on_error(self, error: Exception) -> None:
        """Count and log an error that restarted the election (the counted error handler)."""

    def prepare_for_new_leadership(self, log_position: int, now_ns: int) -> int:
        """Stop following the old term (close the log adapter, stop its recording) and return the local log
        recording's append position, or NULL_POSITION when unchanged."""

    def time_of_last_leader_update_ns(self) -> int:
        """When the leader was last heard from (CANVASS's deadline after the first election)."""

    def log_recording_id(self) -> int:
        """This member's log recording id, NULL_VALUE before it has one."""

    def commit_position(self) -> int:
        """The commit-position counter's value."""

    def update_log_recording_id(self, recording_id: int) -> None:
        """The log recording is the one replication writes into (it may be new)."""

    def add_log_publication(self, append_position: int) -> int:
        """Become leader: add the log publication positioned at ``append_position``; return its session id."""

    def publish_commit_position(self, position: int) -> None:
        """Set the commit position and send CommitPosition to every follower (leader only)."""

    def new_log_replay(self, from_position: int, to_position: int) -> LogReplay:
        """Start replaying the local log between the positions into the services."""

    def join_log_as_leader(self, leadership_term_id: int, log_position: int, log_session_id: int,
                           is_startup: bool) -> None:
        """Start the services and the log recording on the new term's log publication."""

    def update_leader_position(self, now_ns: int, append_position: int) -> int:
        """Track the leader's own append position and publish commit positions; returns a work count."""

    def append_new_leadership_term_event(self, now_ns: int) -> bool:
        """Append NewLeadershipTermEvent to the log; False under back pressure (try again)."""

    def election_complete(self, now_ns: int) -> None:
        """The election is over: the consensus module goes ACTIVE in the elected role."""

    def truncate_log_entry(self, log_leadership_term_id: int, log_position: int) -> None:
        """Truncate our log (recording and recording.log) to the leader's ``log_position``."""

    def track_catchup_completion(self, follower: ClusterMember, leadership_term_id: int, flags: int) -> None:
        """A follower reported its append position: stop its catch-up replay once it has caught up."""

    def new_log_replication(self, leader: ClusterMember, leader_recording_id: int, stop_position: int,
                            now_ns: int) -> LogReplication:
        """Replicate the leader's log recording from its archive up to ``stop_position``."""

    def add_follower_log_subscription(self, log_session_id: int) -> None:
        """Add the follower's log subscription (manual MDC, the leader's log session id)."""

    def log_subscription_resolved_endpoint(self) -> str | None:
        """The endpoint the log subscription bound, once resolved (for a catch-up endpoint ending in ':0')."""

    def add_catchup_log_destination(self, catchup_endpoint: str) -> None:
        """Add the catch-up destination to the log subscription."""

    def add_live_log_destination(self) -> None:
        """Add the live log destination to the log subscription."""

    def has_live_log_destination(self) -> bool: ...

    def has_catchup_log_destination(self) -> bool: ...

    def catchup_initiated(self, now_ns: int) -> None:
        """CatchupPosition has been sent to the leader."""

    def log_image_join_position(self, log_session_id: int) -> int:
        """The join position of the log image with this session id, NULL_POSITION while there is none."""

    def is_log_subscription_errored(self) -> bool:
        """The log subscription's channel endpoint status is ERRORED."""

    def try_join_log_as_follower(self, is_leader_startup: bool, now_ns: int) -> bool:
        """Join the services and the log recording to the log image; False to try again."""

    def catchup_poll(self, limit_position: int, now_ns: int) -> int:
        """Consume the catch-up log up to ``limit_position``; returns a work count."""

    def is_catchup_near_live(self, position: int) -> bool:
        """Is the catch-up close enough to ``position`` to add the live destination."""

    def is_taking_snapshot(self) -> bool:
        """The consensus module state is SNAPSHOT (catch-up must not finish in the middle of one)."""

    def stop_all_catchups(self) -> None:
        """Leader: stop every follower's catch-up replay. Follower: remove the catch-up destination."""

    def close_log_subscription(self) -> None:
        """Close the follower log subscription and wait for its local sockets to close."""
