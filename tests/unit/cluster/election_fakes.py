"""Fakes for driving an Election: a publisher that records what it was asked to send, and a consensus-module
host whose answers a test sets. Both are plain objects, so a test states exactly what the host reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from aeron_numba.cluster.cluster_member import NULL_POSITION
from aeron_numba.layout.bits import NULL_VALUE


@dataclass
class Sent:
    to: int
    message: str
    fields: dict


class RecordingPublisher:
    """One member's ConsensusPublisher: records each message into the shared list ``sent``."""

    def __init__(self, to: int, sent: list, accept: bool = True):
        self.to, self.sent, self.accept = to, sent, accept

    def _record(self, message, **fields):
        self.sent.append(Sent(self.to, message, fields))
        return self.accept

    def canvass_position(self, log_leadership_term_id, log_position, leadership_term_id, follower_member_id,
                         protocol_version):
        return self._record("canvass_position", log_leadership_term_id=log_leadership_term_id,
                            log_position=log_position, leadership_term_id=leadership_term_id,
                            follower_member_id=follower_member_id, protocol_version=protocol_version)

    def request_vote(self, log_leadership_term_id, log_position, candidate_term_id, candidate_member_id,
                     protocol_version):
        return self._record("request_vote", log_leadership_term_id=log_leadership_term_id,
                            log_position=log_position, candidate_term_id=candidate_term_id,
                            candidate_member_id=candidate_member_id, protocol_version=protocol_version)

    def vote(self, candidate_term_id, log_leadership_term_id, log_position, candidate_member_id, follower_member_id,
             vote):
        return self._record("vote", candidate_term_id=candidate_term_id, log_leadership_term_id=log_leadership_term_id,
                            log_position=log_position, candidate_member_id=candidate_member_id,
                            follower_member_id=follower_member_id, vote=vote)

    def new_leadership_term(self, log_leadership_term_id, next_leadership_term_id, next_term_base_log_position,
                            next_log_position, leadership_term_id, term_base_log_position, log_position,
                            leader_recording_id, timestamp, leader_member_id, log_session_id, app_version,
                            is_startup):
        return self._record("new_leadership_term", log_leadership_term_id=log_leadership_term_id,
                            next_leadership_term_id=next_leadership_term_id,
                            next_term_base_log_position=next_term_base_log_position,
                            next_log_position=next_log_position, leadership_term_id=leadership_term_id,
                            term_base_log_position=term_base_log_position, log_position=log_position,
                            leader_recording_id=leader_recording_id, timestamp=timestamp,
                            leader_member_id=leader_member_id, log_session_id=log_session_id,
                            app_version=app_version, is_startup=is_startup)

    def append_position(self, leadership_term_id, log_position, follower_member_id, flags):
        return self._record("append_position", leadership_term_id=leadership_term_id, log_position=log_position,
                            follower_member_id=follower_member_id, flags=flags)

    def catchup_position(self, leadership_term_id, log_position, follower_member_id, catchup_endpoint):
        return self._record("catchup_position", leadership_term_id=leadership_term_id, log_position=log_position,
                            follower_member_id=follower_member_id, catchup_endpoint=catchup_endpoint)


@dataclass
class FakeReplay:
    steps_left: int = 1
    closed: bool = False

    def do_work(self):
        if self.steps_left:
            self.steps_left -= 1
            return 1
        return 0

    def is_done(self):
        return self.steps_left == 0

    def close(self):
        self.closed = True


@dataclass
class FakeReplication:
    stop_position: int
    position: int = 0
    recording_id: int = 0
    ended: bool = False
    closed: bool = False

    signals: list = field(default_factory=list)

    def poll(self, now_ns):
        return 0

    def on_signal(self, correlation_id, recording_id, position, signal):
        self.signals.append((correlation_id, recording_id, position, signal))

    def has_replication_ended(self):
        return self.ended

    def has_stopped(self):
        return self.ended

    def close(self):
        self.closed = True


@dataclass
class FakeHost:
    """The consensus module as an election sees it; ``calls`` lists (method, args) in order."""
    recording_id: int = 0
    commit: int = 0
    last_leader_update_ns: int = 0
    image_join_position: int = NULL_POSITION
    join_succeeds: bool = True
    replay_steps: int = 1
    append_event_succeeds: bool = True
    live_destination: bool = False
    catchup_destination: bool = False
    calls: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    replays: list = field(default_factory=list)
    replications: list = field(default_factory=list)

    def _call(self, name, *args):
        self.calls.append((name, args))

    def called(self, name):
        return [args for call, args in self.calls if call == name]

    def on_error(self, error):
        self.errors.append(error)

    def prepare_for_new_leadership(self, log_position, now_ns):
        self._call("prepare_for_new_leadership", log_position)
        return NULL_POSITION

    def time_of_last_leader_update_ns(self):
        return self.last_leader_update_ns

    def log_recording_id(self):
        return self.recording_id

    def commit_position(self):
        return self.commit

    def update_log_recording_id(self, recording_id):
        self._call("update_log_recording_id", recording_id)

    def add_log_publication(self, append_position):
        self._call("add_log_publication", append_position)
        return 77

    def publish_commit_position(self, position):
        self._call("publish_commit_position", position)

    def new_log_replay(self, from_position, to_position):
        self._call("new_log_replay", from_position, to_position)
        replay = FakeReplay(self.replay_steps)
        self.replays.append(replay)
        return replay

    def join_log_as_leader(self, leadership_term_id, log_position, log_session_id, is_startup):
        self._call("join_log_as_leader", leadership_term_id, log_position, log_session_id, is_startup)

    def update_leader_position(self, now_ns, append_position):
        return 0

    def append_new_leadership_term_event(self, now_ns):
        self._call("append_new_leadership_term_event")
        return self.append_event_succeeds

    def election_complete(self, now_ns):
        self._call("election_complete", now_ns)

    def truncate_log_entry(self, log_leadership_term_id, log_position):
        self._call("truncate_log_entry", log_leadership_term_id, log_position)

    def track_catchup_completion(self, follower, leadership_term_id, flags):
        self._call("track_catchup_completion", follower.id, leadership_term_id, flags)

    def new_log_replication(self, leader, leader_recording_id, stop_position, now_ns):
        self._call("new_log_replication", leader.id, leader_recording_id, stop_position)
        replication = FakeReplication(stop_position)
        self.replications.append(replication)
        return replication

    def add_follower_log_subscription(self, log_session_id):
        self._call("add_follower_log_subscription", log_session_id)

    def log_subscription_resolved_endpoint(self):
        return "0.0.0.0:40123"

    def add_catchup_log_destination(self, catchup_endpoint):
        self._call("add_catchup_log_destination", catchup_endpoint)
        self.catchup_destination = True

    def add_live_log_destination(self):
        self._call("add_live_log_destination")
        self.live_destination = True

    def has_live_log_destination(self):
        return self.live_destination

    def has_catchup_log_destination(self):
        return self.catchup_destination

    def catchup_initiated(self, now_ns):
        self._call("catchup_initiated")

    def log_image_join_position(self, log_session_id):
        return self.image_join_position

    def is_log_subscription_errored(self):
        return False

    def try_join_log_as_follower(self, is_leader_startup, now_ns):
        self._call("try_join_log_as_follower", is_leader_startup)
        return self.join_succeeds

    def catchup_poll(self, limit_position, now_ns):
        self._call("catchup_poll", limit_position)
        return 0

    def is_catchup_near_live(self, position):
        return True

    def is_taking_snapshot(self):
        return False

    def stop_all_catchups(self):
        self._call("stop_all_catchups")

    def close_log_subscription(self):
        self._call("close_log_subscription")


class FixedRandom:
    """random() always returns ``value``: makes the nomination delay known."""

    def __init__(self, value=0.0):
        self.value = value

    def random(self):
        return self.value


class MemoryNodeState:
    """node-state.dat's candidate term, in memory (for the many-election simulations)."""

    def __init__(self, candidate_term_id=NULL_VALUE):
        self.candidate_term_id = candidate_term_id

    def update_candidate_term_id(self, candidate_term_id, log_position, timestamp_ms):
        self.candidate_term_id = candidate_term_id

    def propose_max_candidate_term_id(self, candidate_term_id, log_position, timestamp_ms):
        self.candidate_term_id = max(self.candidate_term_id, candidate_term_id)
        return self.candidate_term_id


class MemoryRecordingLog:
    """recording.log's term entries, in memory: ensure_coherent records the terms asked for."""

    def __init__(self):
        self.terms = {}

    def find_term_entry(self, leadership_term_id):
        return None

    def ensure_coherent(self, recording_id, initial_log_leadership_term_id, initial_term_base_log_position,
                        leadership_term_id, term_base_log_position, log_position, timestamp):
        self.terms[leadership_term_id] = (term_base_log_position, log_position)
