"""The consensus module agent's decisions, driven through its on_* methods and do_work() with fakes around it
(cm_fakes.py) and a fake clock: start-up and the single-member election, client sessions (connect, refusals,
redirects, timeouts, close), the log appends, timers, service messages, the control toggle, commit positions
and heartbeats of a three-member cluster, and errors that must not stop it."""

from __future__ import annotations

import pytest

from aeron_numba.client.fragment_assembler import ABORT, CONTINUE
from aeron_numba.cluster.cluster_error import ClusterError, ClusterEvent
from aeron_numba.cluster.cluster_session import State
from aeron_numba.cluster.consensus_module_agent import ServiceAck, has_reached
from aeron_numba.cluster.pending_service_message_tracker import service_session_id
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout import cluster as C
from aeron_numba.layout.cluster import ClusterControlToggle, ClusterRole, ConsensusModuleState, ElectionState
from aeron_numba.layout.cluster_schema import ENUMS
from tests.unit.cluster.cm_fakes import FakeImage, make_agent

EVENT = ENUMS["EventCode"]
CLOSE = ENUMS["CloseReason"]
ACTION = ENUMS["ClusterAction"]
EGRESS = "aeron:udp?endpoint=127.0.0.9:40000"


def run(world, cycles: int = 10, step_ms: int = 20) -> None:
    for _ in range(cycles):
        world.clock.advance_ms(step_ms)
        world.agent.do_work()


def started_leader(tmp_path, **overrides):
    world = make_agent(tmp_path, **overrides)
    world.agent.on_start()
    run(world)
    assert world.agent.election is None, world.agent.election
    return world


def log_publication(world):
    return world.aeron.publication(C_LOG_STREAM, "alias=log")


C_LOG_STREAM = 100


def connect_client(world, correlation_id: int = 77, version: int = C.CLIENT_PROTOCOL_SEMANTIC_VERSION,
                   channel: str = EGRESS):
    world.agent.on_session_connect(correlation_id, 102, version, channel, b"")
    run(world, 3)


# ------------------------------------------------------------------------------------------------ start-up
def test_a_single_member_starts_leader_after_its_service_acked_the_start_and_the_join(tmp_path):
    world = started_leader(tmp_path)
    agent, counters = world.agent, world.counters
    assert agent.role == ClusterRole.LEADER and counters.cluster_role.value == int(ClusterRole.LEADER)
    assert counters.module_state.value == int(ConsensusModuleState.ACTIVE)
    assert counters.election_state.value == int(ElectionState.CLOSED)
    assert counters.election_count.value == 1
    assert counters.leadership_term_id.value == 0 and agent.leadership_term_id == 0
    assert counters.control_toggle.value == int(ClusterControlToggle.NEUTRAL)
    # the service's first ack carried its Aeron client id
    assert agent.service_client_ids == [2000]
    # recovery state counter allocated (then closed) before the services started
    assert [t for t, _, _ in world.aeron.added_counters] == [C.RECOVERY_STATE_TYPE_ID]
    # the log: exclusive UDP publication, manual MDC, alias and tags, spies simulate the connection of a member alone
    publication = log_publication(world)
    params = dict(p.split("=") for p in publication.channel.split("?")[1].split("|"))
    assert params["alias"] == "log" and params["control-mode"] == "manual" and params["ssc"] == "true"
    assert params["init-term-id"] == params["term-id"] == params["term-offset"] == "0"
    channel_tag = params["tags"].split(",")[0]
    # recorded by the local archive, a spy for the services
    assert world.archive.calls[0] == ("start_recording", f"aeron:udp?tags={channel_tag}|session-id="
                                      f"{publication.session_id}|alias=log", 100, "LOCAL", True)
    join = world.aeron.publication(104).of("JoinLog")[0]
    assert (join.log_position, join.role, join.is_startup, join.log_session_id) == (0, 2, 1, publication.session_id)
    assert join.log_channel.startswith("aeron-spy:aeron:udp?tags=")
    # the term is in recording.log with the log recording, and the first thing in the log is the new term event
    entry = agent.recording_log.find_term_entry(0)
    assert entry.recording_id == 0 and entry.term_base_log_position == 0
    assert publication.names() == ["NewLeadershipTermEvent"]
    event = publication.messages[0]
    assert (event.leadership_term_id, event.term_base_log_position, event.leader_member_id) == (0, 0, 0)
    assert world.errors == []


def test_service_acks_must_come_in_sequence(tmp_path):
    queues = [__import__("collections").deque([ServiceAck(1, 64, -1)])]
    assert has_reached(64, 1, queues)
    assert not has_reached(64, 1, [queues[0], __import__("collections").deque()])
    with pytest.raises(ClusterError, match="ack out of sequence"):
        has_reached(128, 1, queues)


def test_a_duplicate_initial_service_ack_is_an_error(tmp_path):
    world = started_leader(tmp_path)
    with pytest.raises(ClusterError, match="possible duplicate serviceId=0"):
        world.agent.on_service_ack(0, 0, 0, 3000, 0)


def test_the_mark_file_activity_timestamp_is_updated_every_second(tmp_path):
    world = started_leader(tmp_path)
    before = len(world.agent.mark_file.activity_timestamps)
    run(world, 50, 100)  # 5 s
    assert len(world.agent.mark_file.activity_timestamps) - before in (5, 6)


# ------------------------------------------------------------------------------------------------ sessions
def test_a_connect_opens_the_session_in_the_log_first_then_sends_ok(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    session = world.agent.session_by_id[1]
    assert session.state == State.OPEN
    open_event = log_publication(world).of("SessionOpenEvent")[0]
    assert (open_event.cluster_session_id, open_event.correlation_id, open_event.response_stream_id,
            open_event.response_channel) == (1, 77, 102, EGRESS)
    assert session.opened_log_position == log_publication(world).position
    response = world.aeron.publication(102)
    event = response.of("SessionEvent")[0]
    assert (event.cluster_session_id, event.correlation_id, event.code, event.leader_member_id,
            event.leadership_term_id, event.version, event.detail) == (1, 77, EVENT["OK"], 0, 0,
                                                                       C.CLIENT_PROTOCOL_SEMANTIC_VERSION, "")


def test_the_ok_waits_for_the_response_publication_to_connect(tmp_path):
    world = started_leader(tmp_path)
    world.agent.on_session_connect(5, 102, C.CLIENT_PROTOCOL_SEMANTIC_VERSION, EGRESS, b"")
    response = world.aeron.publication(102)
    response.connected = False
    run(world, 3)
    assert world.agent.pending_user_sessions and not log_publication(world).of("SessionOpenEvent")
    response.connected = True
    run(world, 3)
    assert log_publication(world).of("SessionOpenEvent") and response.of("SessionEvent")


def test_a_client_of_another_major_version_is_refused_with_an_error_event(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world, version=(1 << 16))
    event = world.aeron.publication(102).of("SessionEvent")[0]
    assert event.code == EVENT["ERROR"]
    assert event.detail == "invalid client version 1.0.0, cluster is 0.3.0"
    assert not log_publication(world).of("SessionOpenEvent") and not world.agent.sessions


def test_connects_beyond_max_concurrent_sessions_are_refused(tmp_path):
    world = started_leader(tmp_path, max_concurrent_sessions=2)
    for correlation_id in (1, 2, 3):
        connect_client(world, correlation_id, channel=f"aeron:udp?endpoint=127.0.0.9:{40000 + correlation_id}")
    assert len(world.agent.sessions) == 2
    refused = world.aeron.publication(102, "40003").of("SessionEvent")[0]
    assert (refused.code, refused.detail, refused.correlation_id) == (EVENT["ERROR"], "concurrent session limit", 3)


def test_a_session_whose_response_channel_cannot_be_used_is_dropped_without_an_error(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world, channel="aeron:udp?endpoint=bad")
    assert not world.agent.pending_user_sessions and not world.agent.sessions and world.errors == []


def test_ingress_messages_go_into_the_log_with_the_term_and_cluster_time(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    world.clock.advance_ms(3)
    action = world.agent.on_ingress_message(0, 1, b"hello")
    assert action == CONTINUE
    message = log_publication(world).of("SessionMessageHeader")[0]
    assert (message.leadership_term_id, message.cluster_session_id, bytes(message.payload)) == (0, 1, b"hello")
    assert message.timestamp == world.clock.now_ns // 1_000_000
    # a message of another term or an unknown session is not appended
    world.agent.on_ingress_message(5, 1, b"old term")
    world.agent.on_ingress_message(0, 99, b"unknown")
    assert len(log_publication(world).of("SessionMessageHeader")) == 1


def test_a_back_pressured_log_leaves_the_ingress_message_to_be_delivered_again(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    log_publication(world).accept = False
    assert world.agent.on_ingress_message(0, 1, b"later") == ABORT


def test_a_session_without_keepalive_times_out_into_the_log(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    run(world, 20, 200)  # 4 s < 5 s timeout
    world.agent.on_session_keep_alive(0, 1)
    run(world, 20, 200)
    assert 1 in world.agent.session_by_id
    run(world, 30, 200)
    assert 1 not in world.agent.session_by_id
    close = log_publication(world).of("SessionCloseEvent")[0]
    assert (close.cluster_session_id, close.close_reason) == (1, CLOSE["TIMEOUT"])
    closed = world.aeron.publication(102).of("SessionEvent")[-1]
    assert (closed.code, closed.detail) == (EVENT["CLOSED"], "TIMEOUT")
    assert world.counters.timed_out_client_counter.value == 1


def test_a_close_request_appends_the_close_with_client_action(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    world.agent.on_session_close(0, 1)
    close = log_publication(world).of("SessionCloseEvent")[0]
    assert close.close_reason == CLOSE["CLIENT_ACTION"] and 1 not in world.agent.session_by_id
    # held until committed, then forgotten
    assert list(world.agent.uncommitted_closed_sessions)[0].id == 1
    world.archive.aeron.counters_reader.counters[100].value = log_publication(world).position
    run(world, 3)
    assert not world.agent.uncommitted_closed_sessions


def test_a_follower_redirects_a_client_to_the_members_ingress_endpoints(tmp_path):
    world = make_agent(tmp_path, member_count=3)
    agent = world.agent
    agent.role = ClusterRole.FOLLOWER
    agent.leader_member = agent.member_by_id[2]
    agent.leadership_term_id = 4
    agent.on_session_connect(9, 102, C.CLIENT_PROTOCOL_SEMANTIC_VERSION, EGRESS, b"")
    agent._send_redirects(agent.redirect_user_sessions, world.clock.now_ns)
    event = world.aeron.publication(102).of("SessionEvent")[0]
    assert (event.code, event.leader_member_id, event.leadership_term_id, event.cluster_session_id) == \
        (EVENT["REDIRECT"], 2, 4, -1)
    assert event.detail == "0=127.0.0.1:20000,1=127.0.0.2:20010,2=127.0.0.3:20020"


def test_an_authenticator_may_challenge_then_accept(tmp_path, monkeypatch):
    class Challenging:
        def __init__(self):
            self.responses = []

        def on_connect_request(self, session_id, credentials, now_ms):
            assert credentials == b""

        def on_connected_session(self, session, now_ms):
            session.challenge(b"who?")

        def on_challenge_response(self, session_id, credentials, now_ms):
            self.responses.append(credentials)

        def on_challenged_session(self, session, now_ms):
            if self.responses == [b"me"]:
                session.authenticate(b"principal")

    world = started_leader(tmp_path)
    world.agent.authenticator = Challenging()
    connect_client(world)
    response = world.aeron.publication(102)
    challenge = response.of("Challenge")[0]
    assert (challenge.cluster_session_id, bytes(challenge.encoded_challenge)) == (1, b"who?")
    assert not log_publication(world).of("SessionOpenEvent")
    world.agent.on_ingress_challenge_response(77, 1, b"me")
    run(world, 3)
    assert bytes(log_publication(world).of("SessionOpenEvent")[0].encoded_principal) == b"principal"
    assert response.of("SessionEvent")[0].code == EVENT["OK"]


def test_a_rejecting_authenticator_sends_authentication_rejected(tmp_path):
    class Rejecting:
        def on_connect_request(self, *args): pass
        def on_challenge_response(self, *args): pass
        def on_connected_session(self, session, now_ms): session.reject()
        def on_challenged_session(self, session, now_ms): session.reject()

    world = started_leader(tmp_path)
    world.agent.authenticator = Rejecting()
    connect_client(world)
    event = world.aeron.publication(102).of("SessionEvent")[0]
    assert (event.code, event.detail) == (EVENT["AUTHENTICATION_REJECTED"], "Authentication rejected")


def test_admin_snapshot_is_refused_by_the_default_authorisation(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    world.agent.on_admin_request(0, 1, 55, ENUMS["AdminRequestType"]["SNAPSHOT"], b"")
    response = world.aeron.publication(102).of("AdminResponse")[0]
    assert (response.correlation_id, response.response_code) == (55, ENUMS["AdminResponseCode"]["UNAUTHORISED_ACCESS"])
    assert response.message == "Execution of the SNAPSHOT request was not authorised"
    assert world.counters.control_toggle.value == int(ClusterControlToggle.NEUTRAL)


def test_admin_snapshot_sets_the_toggle_when_authorised(tmp_path):
    world = started_leader(tmp_path)
    world.agent.authorisation_service = type("AllowAll", (), {"is_authorised": lambda self, *a: True})()
    connect_client(world)
    world.agent.on_admin_request(0, 1, 56, ENUMS["AdminRequestType"]["SNAPSHOT"], b"")
    response = world.aeron.publication(102).of("AdminResponse")[0]
    assert response.response_code == ENUMS["AdminResponseCode"]["OK"]
    assert world.counters.control_toggle.value == int(ClusterControlToggle.SNAPSHOT)


# ------------------------------------------------------------------------------------------------ services
def test_a_service_timer_expires_into_the_log(tmp_path):
    world = started_leader(tmp_path)
    now_ms = world.clock.now_ns // 1_000_000
    world.agent.on_schedule_timer(42, now_ms + 100)
    world.agent.on_schedule_timer(43, now_ms + 100)
    world.agent.on_cancel_timer(43)
    run(world, 3)
    assert not log_publication(world).of("TimerEvent")
    run(world, 10)
    events = log_publication(world).of("TimerEvent")
    assert [e.correlation_id for e in events] == [42]
    assert events[0].leadership_term_id == 0


def test_a_service_message_is_appended_with_its_service_session_id_and_kept_until_committed(tmp_path):
    world = started_leader(tmp_path)
    world.agent.on_service_message(0, b"from service 0")
    run(world, 1)
    message = log_publication(world).of("SessionMessageHeader")[0]
    first_id = service_session_id(0, -(1 << 63)) + 1
    assert message.cluster_session_id == first_id and bytes(message.payload) == b"from service 0"
    tracker = world.agent.pending_service_message_trackers[0]
    assert len(tracker) == 1
    world.aeron.counters_reader.counters[100].value = log_publication(world).position
    run(world, 2)
    assert len(tracker) == 0 and tracker.log_service_session_id == first_id


def test_a_service_message_naming_an_unknown_service_is_refused(tmp_path):
    world = started_leader(tmp_path)
    with pytest.raises(ClusterError, match="serviceId=3"):
        world.agent.on_service_message(3, b"x")


def test_a_service_closing_a_session_appends_service_action(tmp_path):
    world = started_leader(tmp_path)
    connect_client(world)
    world.agent.on_service_close_session(1)
    assert log_publication(world).of("SessionCloseEvent")[0].close_reason == CLOSE["SERVICE_ACTION"]
    closed = world.aeron.publication(102).of("SessionEvent")[-1]
    assert (closed.code, closed.detail) == (EVENT["CLOSED"], "SERVICE_ACTION")


# ------------------------------------------------------------------------------------------------ control toggle
def test_suspend_then_resume_through_the_control_toggle(tmp_path):
    world = started_leader(tmp_path)
    toggle = world.counters.control_toggle
    assert toggle.compare_and_set(int(ClusterControlToggle.NEUTRAL), int(ClusterControlToggle.SUSPEND))
    run(world, 2)
    assert world.agent.state == ConsensusModuleState.SUSPENDED
    assert world.counters.module_state.value == int(ConsensusModuleState.SUSPENDED)
    action = log_publication(world).of("ClusterActionRequest")[0]
    assert action.action == ACTION["SUSPEND"] and action.log_position == log_publication(world).position
    toggle.set(int(ClusterControlToggle.RESUME))
    run(world, 2)
    assert world.agent.state == ConsensusModuleState.ACTIVE
    assert toggle.value == int(ClusterControlToggle.NEUTRAL)
    assert [a.action for a in log_publication(world).of("ClusterActionRequest")] == [ACTION["SUSPEND"],
                                                                                     ACTION["RESUME"]]


def test_a_snapshot_toggle_appends_the_action_and_waits_for_the_services(tmp_path):
    world = started_leader(tmp_path)
    world.counters.control_toggle.set(int(ClusterControlToggle.SNAPSHOT))
    run(world, 2)
    assert world.agent.state == ConsensusModuleState.SNAPSHOT
    action = log_publication(world).of("ClusterActionRequest")[0]
    assert (action.action, action.flags) == (ACTION["SNAPSHOT"], 0)


def test_a_follower_reads_suspend_and_snapshot_actions_from_the_log(tmp_path):
    world = make_agent(tmp_path, member_count=3, member_id=1)
    agent = world.agent
    agent.leadership_term_id = 2
    agent.on_replay_cluster_action(2, 128, 0, ACTION["SUSPEND"], 0)
    assert agent.state == ConsensusModuleState.SUSPENDED
    agent.on_replay_cluster_action(2, 256, 0, ACTION["RESUME"], 0)
    assert agent.state == ConsensusModuleState.ACTIVE
    agent.on_replay_cluster_action(1, 384, 0, ACTION["SUSPEND"], 0)  # another term's: ignored
    assert agent.state == ConsensusModuleState.ACTIVE


# ------------------------------------------------------------------------------------------------ three members
def three_member_leader(tmp_path):
    """A leader of a three-member cluster without an election: as the election leaves it."""
    world = make_agent(tmp_path, member_count=3, member_id=0, service_count=0)
    agent = world.agent
    agent.on_start()
    agent.election = None
    agent.set_role(ClusterRole.LEADER)
    agent.set_state(ConsensusModuleState.ACTIVE)
    agent.set_leadership_term_id(3)
    agent.leader_member = agent.this_member
    agent.timer_service.current_time(world.clock.now_ns // 1_000_000)  # as election_complete sets it
    agent.add_log_publication(0)
    world.archive.add_recording(0, log_publication(world).session_id)
    assert agent._try_create_append_position(log_publication(world).session_id)
    for member in agent.active_members:
        member.time_of_last_append_position_ns = world.clock.now_ns
    return world


def test_commit_position_is_the_quorum_of_the_append_positions_and_followers_hear_it(tmp_path):
    world = three_member_leader(tmp_path)
    agent = world.agent
    log = log_publication(world)
    assert log.destinations == ["aeron:udp?endpoint=127.0.0.2:20012", "aeron:udp?endpoint=127.0.0.3:20022"]
    world.aeron.counters_reader.counters[100].value = 1024  # the leader's own recording
    agent.on_append_position(3, 512, 1, 0)
    agent.on_append_position(3, 256, 2, 0)
    run(world, 1)
    assert world.counters.commit_position.value == 512
    for member_id in (1, 2):
        commit = world.aeron.publication(108, f"127.0.0.{member_id + 1}").of("CommitPosition")[-1]
        assert (commit.leadership_term_id, commit.log_position, commit.leader_member_id) == (3, 512, 0)
    # nothing new: sent again after the leader heartbeat interval only (it is the heartbeat)
    to_follower = world.aeron.publication(108, "127.0.0.2")
    sent = len(to_follower.of("CommitPosition"))
    world.clock.advance_ms(50)
    agent.do_work()
    assert len(to_follower.of("CommitPosition")) == sent
    world.clock.advance_ms(200)
    agent.do_work()
    assert len(to_follower.of("CommitPosition")) == sent + 1


def test_a_leaders_own_position_commits_only_up_to_what_the_followers_reached(tmp_path):
    # Its watch leaves its recording's counter out once its position is at or past that (agent.add_idle_watch).
    world = three_member_leader(tmp_path)
    agent = world.agent
    agent.on_append_position(3, 512, 1, 0)
    agent.on_append_position(3, 256, 2, 0)
    assert agent._quorum_position_beyond_own() == 512
    for position in (256, 511, 512, 4096):  # below it, the commit follows the leader; at or past it, never
        agent.update_leader_position(world.clock.now_ns, position)
        assert world.counters.commit_position.value == min(position, 512)
    (tmp_path / "single").mkdir()
    single = make_agent(tmp_path / "single")
    single.agent.on_start()
    run(single)
    assert single.agent._quorum_position_beyond_own() > 1 << 62  # a quorum alone: its own position commits


def test_cluster_tools_members_query_is_answered_extended_or_plain_on_the_service_stream(tmp_path):
    from tests.unit.cluster.cm_fakes import member_endpoints

    world = three_member_leader(tmp_path)
    agent = world.agent
    agent.on_append_position(3, 512, 1, 0)
    agent.on_cluster_members_query(73, True)  # what ClusterTool asks, before snapshot/suspend/resume/shutdown
    agent.on_cluster_members_query(74, False)
    to_services = world.aeron.publication(104)
    (extended,) = to_services.of("ClusterMembersExtendedResponse")
    assert (extended.correlation_id, extended.leader_member_id, extended.member_id) == (73, 0, 0)
    assert extended.current_time_ns == agent.cluster_clock.time_nanos() and extended.passive_members == ()
    rows = [(m.member_id, m.leadership_term_id, m.log_position,
             ",".join((m.ingress_endpoint, m.consensus_endpoint, m.log_endpoint, m.catchup_endpoint,
                       m.archive_endpoint))) for m in extended.active_members]
    assert rows[1] == (1, agent.active_members[1].leadership_term_id, 512, member_endpoints(1))  # as last heard
    assert [r[0] for r in rows] == [0, 1, 2] and [r[3] for r in rows] == [member_endpoints(i) for i in range(3)]
    (plain,) = to_services.of("ClusterMembersResponse")
    assert (plain.correlation_id, plain.leader_member_id) == (74, 0)
    assert plain.active_members == "|".join(f"{i},{member_endpoints(i)}" for i in range(3))
    assert world.errors == []


def test_a_leader_without_an_active_follower_quorum_starts_an_election(tmp_path):
    world = three_member_leader(tmp_path)
    for member_id in (1, 2):
        world.agent.member_by_id[member_id].time_of_last_append_position_ns = world.clock.now_ns
    world.agent.on_append_position(3, 0, 1, 0)
    run(world, 60, 200)  # 12 s: member 1 went quiet after its one append position, member 2 never spoke
    assert world.agent.election is not None
    assert any(isinstance(e, ClusterEvent) and str(e) == "inactive follower quorum" for e in world.errors)
    assert world.counters.election_count.value == 2


def follower(tmp_path):
    world = make_agent(tmp_path, member_count=3, member_id=1, service_count=0)
    agent = world.agent
    agent.on_start()
    agent.election = None
    agent.set_role(ClusterRole.FOLLOWER)
    agent.set_state(ConsensusModuleState.ACTIVE)
    agent.set_leadership_term_id(3)
    agent.leader_member = agent.member_by_id[0]
    agent.add_follower_log_subscription(7777)
    subscription = agent.log_adapter.subscription
    image = FakeImage(subscription, 7777)
    subscription.images.append(image)
    world.archive.add_recording(0, 7777)
    assert agent._try_create_append_position(7777)
    agent.log_adapter.set_image(image)
    agent.time_of_last_log_update_ns = world.clock.now_ns
    return world, image


def test_a_follower_reads_the_log_only_up_to_the_leaders_commit_position(tmp_path):
    world, image = follower(tmp_path)
    agent = world.agent
    image.pending.append(CLUSTER.encode(CLUSTER.SessionOpenEvent(
        leadership_term_id=3, correlation_id=8, cluster_session_id=11, timestamp=5, response_stream_id=102,
        response_channel=EGRESS, encoded_principal=b"")))
    image.pending.append(CLUSTER.encode(CLUSTER.TimerEvent(leadership_term_id=3, correlation_id=9, timestamp=6)))
    world.aeron.counters_reader.counters[100].value = 1024  # recorded locally
    run(world, 1)
    assert 11 not in agent.session_by_id  # not committed yet
    agent.on_commit_position(3, 128, 0)
    run(world, 1)
    assert agent.session_by_id[11].opened_log_position == 128
    assert agent.next_session_id == 12
    assert len(image.pending) == 1 and world.counters.commit_position.value == 128
    # the follower tells the leader how far it has recorded
    append = world.aeron.publication(108, "127.0.0.1").of("AppendPosition")[-1]
    assert (append.leadership_term_id, append.log_position, append.follower_member_id) == (3, 1024, 1)


def test_leader_heartbeat_timeout_starts_an_election_and_is_logged_as_aeron_does(tmp_path):
    world, image = follower(tmp_path)
    agent = world.agent
    run(world, 40, 200)  # 8 s of commit positions
    for _ in range(40):
        world.clock.advance_ms(200)
        agent.on_commit_position(3, 0, 0)
        agent.do_work()
    assert agent.election is None
    run(world, 60, 200)  # 12 s of silence > 10 s leader heartbeat timeout
    assert agent.election is not None and agent.role == ClusterRole.FOLLOWER
    events = [e for e in world.errors if isinstance(e, ClusterEvent)]
    assert [str(e) for e in events] == ["leader heartbeat timeout"]
    assert world.counters.election_count.value == 2


def heartbeat(world, seconds: float, commit_position, recorded_position=None) -> None:
    """``seconds`` of the leader's commit positions every 200 ms (``commit_position(step)``), the local recording at
    ``recorded_position(step)`` when given; until an election starts."""
    for step in range(int(seconds * 5)):
        if world.agent.election is not None:
            return
        world.clock.advance_ms(200)
        if recorded_position is not None:
            world.aeron.counters_reader.counters[100].value = recorded_position(step)
        world.agent.on_commit_position(3, commit_position(step), 0)
        world.agent.do_work()


def test_a_follower_whose_recorded_log_stops_behind_the_leaders_commit_starts_an_election(tmp_path):
    world, image = follower(tmp_path)
    agent = world.agent
    # an idle cluster: the commit position stays where this follower has recorded to
    world.aeron.counters_reader.counters[100].value = 1024
    heartbeat(world, 15, lambda step: 1024)
    # a slow follower: it records behind the leader's commit but keeps moving
    heartbeat(world, 15, lambda step: 8192 + 4096 * step, lambda step: 1024 + 4096 * step)
    assert agent.election is None
    # lapped: the recording stops, the commit position goes on; an election after the 10 s heartbeat timeout
    stalled_at = 1024 + 4096 * 74
    heartbeat(world, 9.8, lambda step: 400_000 + 4096 * step, lambda step: stalled_at)
    assert agent.election is None
    heartbeat(world, 1, lambda step: 500_000, lambda step: stalled_at)
    assert agent.election is not None and agent.role == ClusterRole.FOLLOWER
    events = [str(e) for e in world.errors if isinstance(e, ClusterEvent)]
    assert events == [f"log stalled: appendPosition={stalled_at} commitPosition=500000"]


def test_a_commit_position_of_a_later_term_starts_an_election(tmp_path):
    world, image = follower(tmp_path)
    world.agent.on_commit_position(4, 0, 2)
    assert world.agent.election is not None
    assert [str(e) for e in world.errors] == ["unexpected commit position from new leader"]


def test_a_follower_forwards_a_challenge_response_to_the_leader(tmp_path):
    world, image = follower(tmp_path)
    world.agent.on_ingress_challenge_response(4, 11, b"creds")
    forwarded = world.aeron.publication(108, "127.0.0.1").of("ChallengeResponse")[0]
    assert (forwarded.correlation_id, forwarded.cluster_session_id, bytes(forwarded.encoded_credentials)) == \
        (4, 11, b"creds")


def test_an_error_during_an_election_restarts_it_and_is_counted(tmp_path):
    world = make_agent(tmp_path, member_count=3, member_id=0, service_count=0)
    agent = world.agent
    agent.on_start()
    assert agent.election.state == ElectionState.CANVASS

    def fail(*args):
        raise ClusterError("archive went away")
    agent.consensus_adapter.poll = fail
    agent.do_work()
    assert agent.election is not None and agent.election.state in (ElectionState.INIT, ElectionState.CANVASS)
    assert [str(e) for e in world.errors] == ["archive went away"]
    assert world.counters.errors.value == 1


def test_a_malformed_consensus_message_is_counted_not_passed_on(tmp_path):
    world = make_agent(tmp_path, member_count=3, member_id=0, service_count=0)
    world.agent.on_start()
    consensus = world.aeron.subscription(108)
    consensus.pending.append(b"\x01\x02\x03")
    run(world, 1)
    assert world.counters.errors.value == 1 and "ConsensusAdapter" in str(world.errors[0])


def test_consensus_publications_go_to_every_other_member(tmp_path):
    world = make_agent(tmp_path, member_count=3, member_id=0, service_count=0)
    world.agent.on_start()
    channels = sorted(p.channel for p in world.aeron.publications if p.stream_id == 108)
    assert channels == ["aeron:udp?term-length=64k|endpoint=127.0.0.2:20011",
                        "aeron:udp?term-length=64k|endpoint=127.0.0.3:20021"]
    assert world.aeron.subscription(108).channel == "aeron:udp?term-length=64k|endpoint=127.0.0.1:20001"
    run(world, 10)
    sent = world.aeron.publication(108, "127.0.0.2").of("CanvassPosition")
    assert sent and sent[0].follower_member_id == 0


# ------------------------------------------------------------------------------------------------ snapshot, abort
def test_a_snapshot_is_taken_once_the_service_acked_it_and_indexed_services_first(tmp_path):
    world = started_leader(tmp_path)
    world.counters.control_toggle.set(int(ClusterControlToggle.SNAPSHOT))
    run(world, 2)
    position = log_publication(world).of("ClusterActionRequest")[0].log_position

    def recorded():  # the archive records the CM's snapshot publication as fast as it is written
        for publication in world.aeron.publications:
            if publication.stream_id == 107:
                for info in world.aeron.counters_reader.counters.values():
                    if info.counter_id != 100:
                        info.value = publication.position
    world.idle.on_idle = recorded
    world.service.ack(position, relevant_id=55)  # the service's snapshot is recording 55
    run(world, 2)
    assert world.agent.state == ConsensusModuleState.ACTIVE
    assert world.counters.snapshot_counter.value == 1
    assert world.counters.control_toggle.value == int(ClusterControlToggle.NEUTRAL)
    snapshot = world.aeron.publication(107)
    names = snapshot.names()
    assert names[0] == "SnapshotMarker" and names[-1] == "SnapshotMarker" and "ConsensusModule" in names
    entries = [e for e in world.agent.recording_log.entries if e.type == C.ENTRY_TYPE_SNAPSHOT]
    assert [(e.service_id, e.recording_id, e.log_position) for e in entries] == [(0, 55, position), (-1, 1, position)]


def test_abort_tells_the_service_where_to_stop_and_ends_once_it_acked(tmp_path):
    from aeron_numba.cluster.consensus_module_agent import ClusterTerminationException

    world = started_leader(tmp_path)
    position = log_publication(world).position
    world.counters.control_toggle.set(int(ClusterControlToggle.ABORT))
    run(world, 2)
    assert world.agent.state == ConsensusModuleState.TERMINATING
    assert world.aeron.publication(104).of("ServiceTerminationPosition")[0].log_position == position
    world.service.ack(position)
    with pytest.raises(ClusterTerminationException) as ended:
        run(world, 2)
    assert ended.value.is_expected and world.agent.state == ConsensusModuleState.CLOSED
    assert world.agent.recording_log.find_term_entry(0).log_position == position
