"""Several Elections wired through an in-memory message bus under one injected clock.

Each member is a ``SimNode``: a stand-in consensus module that runs its election and, once that closes, does
what Aeron's consensus module does when ACTIVE (heartbeats, a new election when the leader goes quiet or a later
term appears). Its ``SimHost`` answers the election's ``ElectionHost`` calls: the log is a position in a term,
replays finish in one step, archive replication copies up to the requested position, the leader commits what a
quorum has appended. A ``policy(src, dst, message, now_ns)`` returns a delivery delay in ns, or None to drop
the message, so tests can lose and reorder messages. CatchupPosition is not simulated (never delivered).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from aeron_numba.cluster.cluster_member import NULL_POSITION, parse_cluster_members, quorum_position, quorum_threshold
from aeron_numba.cluster.election import Election, ElectionConfig
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.cluster import ClusterRole, ElectionState

from tests.unit.cluster.election_fakes import FakeReplay, MemoryNodeState, MemoryRecordingLog

MS = 1_000_000
FAST = ElectionConfig(election_timeout_ns=200 * MS, election_status_interval_ns=20 * MS,
                      leader_heartbeat_timeout_ns=1_000 * MS, leader_heartbeat_interval_ns=50 * MS,
                      startup_canvass_timeout_ns=1_000 * MS)
_ON = {"canvass_position": "on_canvass_position", "request_vote": "on_request_vote", "vote": "on_vote",
       "new_leadership_term": "on_new_leadership_term", "append_position": "on_append_position",
       "commit_position": "on_commit_position"}


def now_ms(bus):
    return bus.now_ns // MS


def reliable(src, dst, message, now_ns):
    return 1 * MS


class Bus:
    def __init__(self, policy=reliable):
        self.policy = policy
        self.now_ns = 0
        self._queue = []
        self._seq = 0
        self.elections: dict[int, Election] = {}
        self.nodes: dict[int, "SimNode"] = {}

    def send(self, src, dst, message, args):
        delay_ns = self.policy(src, dst, message, self.now_ns)
        if delay_ns is not None and message in _ON:
            self._seq += 1
            heapq.heappush(self._queue, (self.now_ns + delay_ns, self._seq, dst, message, args))
        return True

    def pending(self):
        return bool(self._queue)

    def deliver_due(self):
        while self._queue and self._queue[0][0] <= self.now_ns:
            _, _, dst, message, args = heapq.heappop(self._queue)
            if dst in self.nodes:
                self.nodes[dst].receive(message, args)


class BusPublisher:
    """The consensus publication from ``src`` to ``dst``."""

    def __init__(self, bus, src, dst):
        self._bus, self._src, self._dst = bus, src, dst

    def __getattr__(self, message):
        if message not in _ON and message != "catchup_position":
            raise AttributeError(message)
        return lambda *args: self._bus.send(self._src, self._dst, message, args)


@dataclass
class SimReplication:
    stop_position: int
    position: int = 0
    recording_id: int = 0
    ended: bool = False

    def poll(self, now_ns):
        self.position, self.ended = self.stop_position, True
        return 1

    def on_signal(self, correlation_id, recording_id, position, signal):
        pass

    def has_replication_ended(self):
        return self.ended

    def has_stopped(self):
        return self.ended

    def close(self):
        pass


@dataclass
class SimHost:
    member_id: int
    bus: Bus
    commit: int = 0
    errors: list = field(default_factory=list)
    completed: int = 0
    truncated_to: int = NULL_POSITION
    _last_heartbeat_ns: int = -(1 << 62)
    last_leader_update_ns: int = 0

    @property
    def election(self) -> Election:
        return self.bus.elections[self.member_id]

    def on_error(self, error):
        self.errors.append(error)

    def prepare_for_new_leadership(self, log_position, now_ns):
        # the log was cut back to the new leader's term base: the next election starts from there
        truncated_to, self.truncated_to = self.truncated_to, NULL_POSITION
        return truncated_to

    def time_of_last_leader_update_ns(self):
        return self.last_leader_update_ns

    def log_recording_id(self):
        return 0

    def commit_position(self):
        return self.commit

    def update_log_recording_id(self, recording_id):
        pass

    def add_log_publication(self, append_position):
        return 100 + self.member_id

    def publish_commit_position(self, position):
        self.commit = position
        for other in self.bus.elections:
            if other != self.member_id:
                self.bus.send(self.member_id, other, "commit_position",
                              (self.election.leadership_term_id, position, self.member_id))

    def heartbeat(self, now_ns):
        """The consensus module's leader heartbeat: CommitPosition every heartbeat interval."""
        if now_ns - self._last_heartbeat_ns >= FAST.leader_heartbeat_interval_ns:
            self._last_heartbeat_ns = now_ns
            # commit only what a majority has appended, never going back
            self.publish_commit_position(max(self.commit, quorum_position(self.election.members)))
        return 0

    def follower_heartbeat(self, now_ns):
        """The consensus module's follower: AppendPosition to the leader every heartbeat interval."""
        election = self.election
        if now_ns - self._last_heartbeat_ns >= FAST.leader_heartbeat_interval_ns:
            self._last_heartbeat_ns = now_ns
            self.bus.send(self.member_id, election.leader_member_id, "append_position",
                          (election.leadership_term_id, election.log_position, self.member_id, 0))

    def new_log_replay(self, from_position, to_position):
        return FakeReplay(1)

    def join_log_as_leader(self, leadership_term_id, log_position, log_session_id, is_startup):
        pass

    def update_leader_position(self, now_ns, append_position):
        return self.heartbeat(now_ns)

    def append_new_leadership_term_event(self, now_ns):
        return True

    def election_complete(self, now_ns):
        self.completed += 1
        self.last_leader_update_ns = now_ns

    def truncate_log_entry(self, log_leadership_term_id, log_position):
        self.truncated_to = log_position

    def track_catchup_completion(self, follower, leadership_term_id, flags):
        pass

    def new_log_replication(self, leader, leader_recording_id, stop_position, now_ns):
        return SimReplication(stop_position)

    def add_follower_log_subscription(self, log_session_id):
        pass

    def log_subscription_resolved_endpoint(self):
        return None

    def add_catchup_log_destination(self, catchup_endpoint):
        pass

    def add_live_log_destination(self):
        pass

    def has_live_log_destination(self):
        return True

    def has_catchup_log_destination(self):
        return False

    def catchup_initiated(self, now_ns):
        pass

    def log_image_join_position(self, log_session_id):
        # the leader's new log publication starts at the leader's log position for the term
        for election in self.bus.elections.values():
            if election.role == ClusterRole.LEADER and election.log_session_id == log_session_id and \
                    election.state in (ElectionState.LEADER_READY, ElectionState.CLOSED):
                return election.log_position
        return NULL_POSITION

    def is_log_subscription_errored(self):
        return False

    def try_join_log_as_follower(self, is_leader_startup, now_ns):
        return True

    def catchup_poll(self, limit_position, now_ns):
        return 0

    def is_catchup_near_live(self, position):
        return True

    def is_taking_snapshot(self):
        return False

    def stop_all_catchups(self):
        pass

    def close_log_subscription(self):
        pass


@dataclass
class Outcome:
    closed: bool
    leader_ids: list
    leaders_by_term: dict
    elections: dict
    now_ns: int


class SimNode:
    """A member's consensus module around its elections: it runs the election, and once that has closed it does
    what Aeron's ConsensusModuleAgent does when ACTIVE: heartbeats (CommitPosition from the leader, AppendPosition
    from followers), and a new election when the leader goes quiet, when a leader loses its quorum of followers,
    or when a later term shows up."""

    def __init__(self, member_id, bus, new_election):
        self.member_id, self.bus = member_id, bus
        self.host = SimHost(member_id, bus)
        self._new_election = new_election
        self.elections_started = 0
        self._active_since_ns = 0
        self.start_election(is_node_startup=True)

    @property
    def election(self) -> Election:
        return self.bus.elections[self.member_id]

    def start_election(self, is_node_startup):
        previous = self.bus.elections.get(self.member_id)
        self.bus.elections[self.member_id] = self._new_election(self, is_node_startup, previous)
        self.elections_started += 1

    def receive(self, message, args):
        election = self.election
        if election.state == ElectionState.CLOSED:
            term = election.leadership_term_id
            if message in ("new_leadership_term", "commit_position"):
                leadership_term_id = args[4] if message == "new_leadership_term" else args[0]
                if leadership_term_id > term:
                    self.start_election(is_node_startup=False)  # a later leader exists
                    return
                if leadership_term_id == term and election.role == ClusterRole.FOLLOWER:
                    self.host.last_leader_update_ns = self.bus.now_ns
            elif message == "request_vote" and args[2] > term:
                self.start_election(is_node_startup=False)
                return
            elif message == "canvass_position" and election.role == ClusterRole.LEADER and args[0] == term:
                # a member of our term canvassing (it lost the live log): tell it where to join
                log_leadership_term_id, _, _, follower_member_id, _ = args
                self.bus.send(self.member_id, follower_member_id, "new_leadership_term",
                              (term, NULL_VALUE, NULL_POSITION, NULL_POSITION, term, election.log_position,
                               election.append_position, 0, now_ms(self.bus), self.member_id,
                               election.log_session_id, 0, 0))
                return
        getattr(election, _ON[message])(*args)

    def do_work(self, now_ns):
        election = self.election
        if election.state != ElectionState.CLOSED:
            self._active_since_ns = now_ns
            return election.do_work(now_ns)
        election.do_work(now_ns)  # keeps its cached clock for the messages it still handles
        timeout_ns = FAST.leader_heartbeat_timeout_ns
        if election.role == ClusterRole.LEADER:
            self.host.heartbeat(now_ns)
            alive = 1 + sum(1 for m in election.members if m is not election.this_member
                            and m.time_of_last_append_position_ns != -1
                            and now_ns - m.time_of_last_append_position_ns < timeout_ns)
            if alive < quorum_threshold(len(election.members)) and now_ns - self._active_since_ns >= timeout_ns:
                self.start_election(is_node_startup=False)  # lost its followers: step down
        else:
            self.host.follower_heartbeat(now_ns)
            if now_ns - self.host.last_leader_update_ns >= timeout_ns:
                self.start_election(is_node_startup=False)  # the leader went quiet
        return 0


def run_cluster(logs, *, policy=reliable, seed=0, step_ns=2 * MS, limit_ns=20_000 * MS, down=(), randoms=None):
    """Elect among ``len(logs)`` members whose logs are (term, position); members in ``down`` never run;
    ``randoms`` may give a member its nomination-delay random. Returns once every running member's election has
    closed and no message is in flight, or at ``limit_ns``."""
    count = len(logs)
    members_value = "|".join(f"{i},h{i}:1,h{i}:2,h{i}:3,h{i}:4,h{i}:5" for i in range(count))
    bus = Bus(policy)
    node_states = {m: MemoryNodeState(term) for m, (term, _) in enumerate(logs)}

    def new_election(node, is_node_startup, previous):
        member_id = node.member_id
        if previous is None:  # a node start with no snapshot: the services replay the whole log
            term, append_position = logs[member_id]
            log_position = 0
        else:  # a later election starts from what the last one left
            term = previous.log_leadership_term_id
            log_position, append_position = previous.log_position, previous.append_position
        seeded = random.Random(seed * 1000 + member_id + 7919 * node.elections_started)
        return Election(
            is_node_startup=is_node_startup, this_member_id=member_id, members=parse_cluster_members(members_value),
            leadership_term_id=term, term_base_log_position=0, log_position=log_position,
            append_position=append_position,
            publishers={dst: BusPublisher(bus, member_id, dst) for dst in range(count) if dst != member_id},
            host=node.host, node_state_file=node_states[member_id], recording_log=MemoryRecordingLog(),
            now_ns=bus.now_ns, config=FAST, random=(randoms or {}).get(member_id, seeded))

    running = [m for m in range(count) if m not in down]
    for member_id in running:
        bus.nodes[member_id] = SimNode(member_id, bus, new_election)
    leaders_by_term: dict[int, set] = {}
    while bus.now_ns <= limit_ns:
        bus.deliver_due()
        for member_id in running:
            bus.nodes[member_id].do_work(bus.now_ns)
            election = bus.elections[member_id]
            if election.role == ClusterRole.LEADER and election.state >= ElectionState.LEADER_LOG_REPLICATION:
                leaders_by_term.setdefault(election.leadership_term_id, set()).add(member_id)
        if _settled([bus.elections[m] for m in running]) and not bus.pending():
            break
        bus.now_ns += step_ns
    elections = {m: bus.elections[m] for m in running}
    closed = all(e.state == ElectionState.CLOSED for e in elections.values())
    leader_ids = [m for m, e in elections.items() if e.role == ClusterRole.LEADER]
    return Outcome(closed, leader_ids, leaders_by_term, elections, bus.now_ns)


def _settled(elections):
    """Every election closed, one leader, everyone in its term (what the tests then check in detail)."""
    if not all(e.state == ElectionState.CLOSED for e in elections):
        return False
    leaders = [e for e in elections if e.role == ClusterRole.LEADER]
    return len(leaders) == 1 and all(e.leadership_term_id == leaders[0].leadership_term_id for e in elections)
