"""The cluster's settings: Aeron 1.48's defaults and names (spec/cluster.md §5, §11), read from AERON_CLUSTER_*
variables, and ``conclude()`` refusing a bad or inconsistent value with a message naming it and its limit."""

from dataclasses import fields
from pathlib import Path

import pytest

from aeron_numba import settings_doc
from aeron_numba.cluster.context import AeronClusterContext, ClusteredServiceContext, ConsensusModuleContext
from aeron_numba.errors import ConfigurationError

MEMBERS = ("0,localhost:20000,localhost:20001,localhost:20002,localhost:0,localhost:8010|"
           "1,localhost:20100,localhost:20101,localhost:20102,localhost:0,localhost:8011|"
           "2,localhost:20200,localhost:20201,localhost:20202,localhost:0,localhost:8012")
REQUIRED = {"cluster_members": MEMBERS, "ingress_channel": "aeron:udp?term-length=64k",
            "replication_channel": "aeron:udp?endpoint=localhost:0"}
CONTEXTS = (ConsensusModuleContext, ClusteredServiceContext, AeronClusterContext)


def consensus_module(tmp_path, **overrides) -> ConsensusModuleContext:
    return ConsensusModuleContext.from_env({}, cluster_dir=str(tmp_path / "cluster"), **{**REQUIRED, **overrides})


def test_consensus_module_defaults_are_aerons():
    ctx = ConsensusModuleContext.from_env({})
    # ConsensusModule.Configuration (aeron-cluster/src/main/java/io/aeron/cluster/ConsensusModule.java, 1.48)
    assert ctx.session_timeout_ns == 10_000_000_000  # SESSION_TIMEOUT_DEFAULT_NS
    assert ctx.leader_heartbeat_timeout_ns == 10_000_000_000  # LEADER_HEARTBEAT_TIMEOUT_DEFAULT_NS
    assert ctx.leader_heartbeat_interval_ns == 200_000_000  # LEADER_HEARTBEAT_INTERVAL_DEFAULT_NS
    assert ctx.startup_canvass_timeout_ns == 60_000_000_000  # STARTUP_CANVASS_TIMEOUT_DEFAULT_NS
    assert ctx.election_timeout_ns == 1_000_000_000  # ELECTION_TIMEOUT_DEFAULT_NS
    assert ctx.election_status_interval_ns == 100_000_000  # ELECTION_STATUS_INTERVAL_DEFAULT_NS
    assert ctx.termination_timeout_ns == 10_000_000_000  # TERMINATION_TIMEOUT_DEFAULT_NS
    assert ctx.replication_progress_timeout_ns == 10_000_000_000  # CLUSTER_REPLICATION_PROGRESS_TIMEOUT_DEFAULT_NS
    assert (ctx.wheel_tick_resolution_ns, ctx.ticks_per_wheel) == (8_000_000, 128)
    assert (ctx.service_count, ctx.max_concurrent_sessions) == (1, 10)
    assert (ctx.ingress_fragment_limit, ctx.log_fragment_limit) == (50, 50)
    assert (ctx.cycle_threshold_ns, ctx.total_snapshot_duration_threshold_ns) == (1_000_000_000, 1_000_000_000)
    assert ctx.error_buffer_length == 1024 * 1024  # ClusterMarkFile.ERROR_BUFFER_MIN_LENGTH
    assert (ctx.file_sync_level, ctx.cluster_id, ctx.cluster_member_id, ctx.appointed_leader_id) == (0, 0, 0, -1)
    assert ctx.cluster_dir == "aeron-cluster"  # ClusteredServiceContainer.Configuration.CLUSTER_DIR_DEFAULT
    assert ctx.is_ipc_ingress_allowed is False and ctx.accept_standby_snapshots is False
    assert ctx.idle_strategy == "backoff"  # ClusteredServiceContainer.Configuration.DEFAULT_IDLE_STRATEGY
    # spec/cluster.md §5: channels and streams
    assert (ctx.log_channel, ctx.log_stream_id) == ("aeron:udp?term-length=64m", 100)
    assert ctx.ingress_stream_id == 101
    assert (ctx.replay_channel, ctx.replay_stream_id) == ("aeron:ipc", 103)
    assert (ctx.control_channel, ctx.service_stream_id, ctx.consensus_module_stream_id) == (
        "aeron:ipc?term-length=128k", 104, 105)
    assert (ctx.snapshot_channel, ctx.snapshot_stream_id) == ("aeron:ipc?alias=snapshot", 107)
    assert (ctx.consensus_channel, ctx.consensus_stream_id) == ("aeron:udp?term-length=64k", 108)
    assert ctx.follower_catchup_channel == "aeron:udp"
    assert ctx.leader_archive_control_channel == "aeron:udp?term-length=64k"
    # Aeron has no default for these three: a consensus module must be given them.
    assert (ctx.cluster_members, ctx.ingress_channel, ctx.replication_channel) == ("", "", "")


def test_service_and_client_defaults_are_aerons():
    service = ClusteredServiceContext.from_env({})
    # ClusteredServiceContainer.Configuration (aeron-cluster/.../service/ClusteredServiceContainer.java, 1.48)
    assert (service.service_id, service.service_name, service.cluster_id) == (0, "clustered-service", 0)
    assert (service.snapshot_channel, service.snapshot_stream_id) == ("aeron:ipc?alias=snapshot", 106)
    assert (service.replay_channel, service.replay_stream_id) == ("aeron:ipc", 103)
    assert (service.service_stream_id, service.consensus_module_stream_id) == (104, 105)
    assert service.error_buffer_length == 1024 * 1024 and service.log_fragment_limit == 50
    assert service.is_respond_to_clients is True and service.standby_snapshot_enabled is False
    assert (service.cycle_threshold_ns, service.snapshot_duration_threshold_ns) == (1_000_000_000, 1_000_000_000)
    client = AeronClusterContext.from_env({})
    # AeronCluster.Configuration (aeron-cluster/.../client/AeronCluster.java, 1.48)
    assert client.message_timeout_ns == 5_000_000_000
    assert (client.ingress_stream_id, client.egress_stream_id) == (101, 102)
    assert (client.ingress_channel, client.egress_channel, client.ingress_endpoints) == ("", "", "")


def test_variables_are_aerons_property_names():
    # Aeron reads aeron.cluster.x.y as AERON_CLUSTER_X_Y; the names that do not follow the field's name:
    env = {f.name: f.metadata["env"] for f in fields(ConsensusModuleContext)}
    assert env["max_concurrent_sessions"] == "AERON_CLUSTER_MAX_SESSIONS"  # aeron.cluster.max.sessions
    assert env["total_snapshot_duration_threshold_ns"] == "AERON_CLUSTER_TOTAL_SNAPSHOT_THRESHOLD"
    assert env["is_ipc_ingress_allowed"] == "AERON_CLUSTER_INGRESS_IPC_ALLOWED"
    assert env["agent_role_name"] == "AERON_CLUSTER_CONSENSUS_MODULE_AGENT_ROLE_NAME"
    service_env = {f.name: f.metadata["env"] for f in fields(ClusteredServiceContext)}
    assert service_env["is_respond_to_clients"] == "AERON_CLUSTER_SERVICE_RESPONDER"
    assert service_env["error_buffer_length"] == "AERON_CLUSTER_SERVICE_ERROR_BUFFER_LENGTH"


def test_environment_variables_are_parsed_as_aeron_does(tmp_path):
    environ = {"AERON_CLUSTER_MEMBERS": MEMBERS, "AERON_CLUSTER_MEMBER_ID": "2",
               "AERON_CLUSTER_APPOINTED_LEADER_ID": "1", "AERON_CLUSTER_INGRESS_CHANNEL": "aeron:udp",
               "AERON_CLUSTER_REPLICATION_CHANNEL": "aeron:udp?endpoint=localhost:0",
               "AERON_CLUSTER_DIR": str(tmp_path / "c"), "AERON_CLUSTER_ID": "3",
               "AERON_CLUSTER_LEADER_HEARTBEAT_TIMEOUT": "2s", "AERON_CLUSTER_LEADER_HEARTBEAT_INTERVAL": "500ms",
               "AERON_CLUSTER_STARTUP_CANVASS_TIMEOUT": "4000000000", "AERON_CLUSTER_SESSION_TIMEOUT": "250us",
               "AERON_CLUSTER_ERROR_BUFFER_LENGTH": "2m", "AERON_CLUSTER_INGRESS_IPC_ALLOWED": "true",
               "AERON_CLUSTER_IDLE_STRATEGY": "sleeping", "AERON_CLUSTER_SERVICE_COUNT": "2"}
    ctx = ConsensusModuleContext.from_env(environ).conclude()
    assert (ctx.cluster_member_id, ctx.appointed_leader_id, ctx.cluster_id, ctx.service_count) == (2, 1, 3, 2)
    assert (ctx.leader_heartbeat_timeout_ns, ctx.leader_heartbeat_interval_ns) == (2_000_000_000, 500_000_000)
    assert (ctx.startup_canvass_timeout_ns, ctx.session_timeout_ns) == (4_000_000_000, 250_000)
    assert ctx.error_buffer_length == 2 << 20 and ctx.is_ipc_ingress_allowed is True
    assert [m.id for m in ctx.members] == [0, 1, 2] and ctx.members[2].consensus_endpoint == "localhost:20201"
    assert ctx.agent_role_name == "consensus-module-3-2"
    assert ctx.archive_control_response_stream_id == 3 * 100 + 100 + 20  # as ConsensusModule.Context derives it
    # an explicit keyword beats the variable
    assert ConsensusModuleContext.from_env(environ, cluster_member_id=0).conclude().cluster_member_id == 0


def test_an_election_reads_the_concluded_settings(tmp_path):
    ctx = consensus_module(tmp_path, election_timeout_ns=500_000_000, leader_heartbeat_timeout_ns=2_000_000_000,
                           appointed_leader_id=1).conclude()
    config = ctx.election_config(app_version=7)
    assert (config.election_timeout_ns, config.leader_heartbeat_timeout_ns) == (500_000_000, 2_000_000_000)
    assert (config.election_status_interval_ns, config.leader_heartbeat_interval_ns) == (100_000_000, 200_000_000)
    assert (config.startup_canvass_timeout_ns, config.appointed_leader_id, config.app_version) == (
        60_000_000_000, 1, 7)


def test_directories_are_derived_as_aeron_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = ConsensusModuleContext.from_env({}, **REQUIRED).conclude()
    assert ctx.cluster_dir == str(tmp_path / "aeron-cluster")  # relative to where the process runs, made absolute
    assert ctx.mark_file_dir == ctx.cluster_dir == ctx.cluster_services_dir
    ctx = ConsensusModuleContext.from_env({"AERON_CLUSTER_MARK_FILE_DIR": "marks", "AERON_CLUSTER_SERVICES_DIR": "s"},
                                          **REQUIRED).conclude()
    assert (ctx.mark_file_dir, ctx.cluster_services_dir) == (str(tmp_path / "marks"), str(tmp_path / "s"))
    service = ClusteredServiceContext.from_env({"AERON_CLUSTER_SERVICE_ID": "3"}).conclude()
    assert service.mark_file_dir == service.cluster_dir == str(tmp_path / "aeron-cluster")
    assert service.mark_file_name == "cluster-mark-service-3.dat"
    assert not (tmp_path / "aeron-cluster").exists()  # conclude checks and derives; it creates nothing


@pytest.mark.parametrize("overrides, message", [
    ({"cluster_members": ""}, "cluster_members must be set"),
    ({"cluster_members": "0,a:1,b:2"}, "cluster_members='0,a:1,b:2': invalid member value"),
    ({"cluster_members": "x,a:1,b:2,c:3,d:4,e:5"}, "invalid cluster member id"),
    ({"cluster_member_id": 3}, "cluster_member_id=3 is not a member id of cluster_members (ids [0, 1, 2])"),
    ({"appointed_leader_id": 5}, "appointed_leader_id=5 is not a member id of cluster_members (ids [0, 1, 2])"),
    ({"leader_heartbeat_interval_ns": 10_000_000_000},
     "leader_heartbeat_interval_ns=10000000000 must be < leader_heartbeat_timeout_ns=10000000000"),
    ({"startup_canvass_timeout_ns": 15_000_000_000},
     "startup_canvass_timeout_ns=15000000000 must be at least 2 x leader_heartbeat_timeout_ns=10000000000"),
    ({"election_status_interval_ns": 1_000_000_000},
     "election_status_interval_ns=1000000000 must be < election_timeout_ns=1000000000"),
    ({"session_timeout_ns": 0}, "session_timeout_ns=0 must be > 0"),
    ({"election_timeout_ns": -1}, "election_timeout_ns=-1 must be > 0"),
    ({"max_concurrent_sessions": 0}, "max_concurrent_sessions=0 must be > 0"),
    ({"ingress_fragment_limit": 0}, "ingress_fragment_limit=0 must be > 0"),
    ({"ticks_per_wheel": 100}, "ticks_per_wheel=100 must be a power of two"),
    ({"service_count": 129}, "service_count=129 must be in [0, 128]"),
    ({"service_count": -1}, "service_count=-1 must be in [0, 128]"),
    ({"file_sync_level": 3}, "file_sync_level=3 must be one of (0, 1, 2)"),
    ({"cluster_id": -1}, "cluster_id=-1 must be >= 0"),
    ({"error_buffer_length": 1024}, "error_buffer_length=1024 must be in [1048576, "),
    ({"ingress_channel": ""}, "ingress_channel must be set"),
    ({"replication_channel": ""}, "replication_channel must be set"),
    ({"log_channel": "aeron:tcp?endpoint=x:1"}, "log_channel='aeron:tcp?endpoint=x:1': "),
    ({"consensus_channel": "udp://x"}, "consensus_channel='udp://x': "),
    ({"idle_strategy": "lazy"}, "idle_strategy='lazy': "),
    ({"authenticator_supplier": "nowhere"}, "authenticator_supplier='nowhere' must be 'package.module:factory'"),
])
def test_consensus_module_refuses_a_bad_value_naming_it_and_its_limit(tmp_path, overrides, message):
    with pytest.raises(ConfigurationError) as info:
        consensus_module(tmp_path, **overrides).conclude()
    assert message in str(info.value)


def test_a_bad_variable_is_named_with_its_value():
    with pytest.raises(ConfigurationError, match="AERON_CLUSTER_SESSION_TIMEOUT='10 seconds' is not a duration"):
        ConsensusModuleContext.from_env({"AERON_CLUSTER_SESSION_TIMEOUT": "10 seconds"})
    with pytest.raises(ConfigurationError, match="AERON_CLUSTER_MEMBER_ID='one' is not an integer"):
        ConsensusModuleContext.from_env({"AERON_CLUSTER_MEMBER_ID": "one"})
    with pytest.raises(ConfigurationError, match="AERON_CLUSTER_ACCEPT_STANDBY_SNAPSHOTS='maybe' must be true or"):
        ConsensusModuleContext.from_env({"AERON_CLUSTER_ACCEPT_STANDBY_SNAPSHOTS": "maybe"})


@pytest.mark.parametrize("overrides, message", [
    ({"service_id": 128}, "service_id=128 is outside the allowed range [0, 127]"),
    ({"service_id": -1}, "service_id=-1 is outside the allowed range [0, 127]"),
    ({"service_name": ""}, "service_name must not be empty"),
    ({"control_channel": ""}, "control_channel must be set"),
    ({"log_fragment_limit": 0}, "log_fragment_limit=0 must be > 0"),
    ({"error_buffer_length": 1 << 31}, "error_buffer_length=2147483648 must be in [1048576, "),
    ({"service_class_name": "no_such_module:Service"}, "service_class_name='no_such_module:Service' cannot be"),
])
def test_service_container_refuses_a_bad_value_naming_it_and_its_limit(tmp_path, overrides, message):
    with pytest.raises(ConfigurationError) as info:
        ClusteredServiceContext.from_env({}, cluster_dir=str(tmp_path), **overrides).conclude()
    assert message in str(info.value)


def test_client_reads_its_channels_and_ingress_endpoints():
    environ = {"AERON_CLUSTER_INGRESS_CHANNEL": "aeron:udp", "AERON_CLUSTER_EGRESS_CHANNEL":
               "aeron:udp?endpoint=localhost:0", "AERON_CLUSTER_INGRESS_ENDPOINTS": "0=h0:9000,1=h1:9001,2=h2:9002",
               "AERON_CLUSTER_MESSAGE_TIMEOUT": "10s"}
    ctx = AeronClusterContext.from_env(environ).conclude()
    assert ctx.ingress_endpoint_map == {0: "h0:9000", 1: "h1:9001", 2: "h2:9002"}
    assert ctx.message_timeout_ns == 10_000_000_000


@pytest.mark.parametrize("overrides, message", [
    ({"ingress_channel": ""}, "ingress_channel must be set"),
    ({"egress_channel": ""}, "egress_channel must be set"),
    ({"message_timeout_ns": 0}, "message_timeout_ns=0 must be > 0"),
    ({"ingress_endpoints": "0=h0:9000,h1:9001"}, "entry 'h1:9001' is not <member id>=<host>:<port>"),
    ({"ingress_endpoints": "0=h0:9000,0=h1:9001"}, "member id 0 appears twice"),
    ({"ingress_endpoints": "0=h0:9000", "ingress_channel": "aeron:ipc"},
     "ingress_endpoints='0=h0:9000' must be empty when ingress_channel='aeron:ipc' is IPC"),
])
def test_client_refuses_a_bad_value_naming_it(overrides, message):
    settings = {"ingress_channel": "aeron:udp", "egress_channel": "aeron:udp?endpoint=localhost:0", **overrides}
    with pytest.raises(ConfigurationError) as info:
        AeronClusterContext.from_env({}, **settings).conclude()
    assert message in str(info.value)


def test_settings_reference_lists_every_cluster_setting():
    doc = (Path(__file__).resolve().parents[3] / settings_doc.DOC_PATH).read_text(encoding="utf-8")
    assert doc == settings_doc.render(), "stale: python -m aeron_numba.settings_doc --write docs/settings.md"
    for cls in CONTEXTS:
        for f in fields(cls):
            meaning = f.metadata["doc"].replace("|", "\\|")  # escaped in a Markdown table cell
            assert f"| `{f.metadata['env']}` | `{settings_doc.default_text(f)}` | {meaning} |" in doc
            # the default as written in the reference, set as the variable, gives the default back
            text = settings_doc.default_text(f)
            if text not in ("(unset)", "(empty)"):
                assert f.metadata["parse"](text, f.metadata["env"]) == f.default, f.name


def test_no_cluster_variable_the_contexts_read_is_reported_as_ignored():
    environ = {f.metadata["env"]: "x" for cls in CONTEXTS for f in fields(cls)}
    assert any(name.startswith("AERON_CLUSTER_") for name in environ)
    assert settings_doc.ignored_variables(environ) == []
    assert settings_doc.ignored_variables({**environ, "AERON_CLUSTER_NO_SUCH_SETTING": "1"}) == [
        "AERON_CLUSTER_NO_SUCH_SETTING"]


def test_a_wheel_tick_that_is_no_power_of_two_is_rounded_up_as_aeron_does(tmp_path):
    from aeron_numba.cluster.cluster_time import ClusterTimeUnit
    from aeron_numba.cluster.timer_service import wheel_tick_resolution

    ctx = consensus_module(tmp_path, wheel_tick_resolution_ns=10_000_000).conclude()  # Aeron takes 10ms too
    assert wheel_tick_resolution(ClusterTimeUnit.MILLIS, ctx.wheel_tick_resolution_ns) == 16
