"""The cluster node's command line (``python -m aeron_numba.cluster``): flags and variables to settings, the
channels derived from the member's endpoints, and every bad setting as one line and exit 2 before anything starts;
and ``LoopbackCluster``, the settings of a cluster on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_numba.cluster.loopback_cluster import LoopbackCluster, member_host
from aeron_numba.commands import cluster as node_command
from aeron_numba.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[3]
SERVICE = "aeron_numba.cluster.examples.key_value_service:KeyValueService"
MEMBERS = ("0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
           "1,127.0.0.2:20102,127.0.0.2:20103,127.0.0.2:20104,127.0.0.2:20105,127.0.0.2:20101")


def _settings(tmp_path, *argv, **env):
    parser = node_command.build_parser("node")
    args = parser.parse_args(list(argv))
    environ = {"AERON_CLUSTER_INGRESS_CHANNEL": "aeron:udp?term-length=64k", "AERON_CLUSTER_MEMBERS": MEMBERS,
               "AERON_DIR": str(tmp_path / "aeron"), "AERON_CLUSTER_DIR": str(tmp_path / "cluster"),
               "AERON_ARCHIVE_DIR": str(tmp_path / "archive"), **env}
    return node_command.node_settings(args, environ)


def test_flags_set_the_variables_the_children_get_and_channels_follow_from_the_members_endpoints(tmp_path):
    settings = _settings(tmp_path, "--member-id", "1", "--cluster-dir", str(tmp_path / "c1"), "--archive-dir",
                         str(tmp_path / "a1"), "--dir", str(tmp_path / "d1"), "--service", SERVICE)
    env = settings.environ
    assert settings.consensus_module.cluster_member_id == 1
    assert env["AERON_CLUSTER_MEMBER_ID"] == "1"
    assert env["AERON_CLUSTER_DIR"] == str(tmp_path / "c1") == settings.consensus_module.cluster_dir
    assert env["AERON_ARCHIVE_DIR"] == str(tmp_path / "a1") == settings.archive.archive_dir
    assert env["AERON_DIR"] == str(tmp_path / "d1") == settings.driver.aeron_dir
    assert env["AERON_CLUSTER_SERVICE_CLASS_NAME"] == SERVICE == settings.service_spec
    # member 1's archive endpoint is 127.0.0.2:20101
    assert settings.archive.control_channel == "aeron:udp?endpoint=127.0.0.2:20101"
    assert settings.archive.replication_channel == "aeron:udp?endpoint=127.0.0.2:0"
    assert settings.consensus_module.replication_channel == "aeron:udp?endpoint=127.0.0.2:0"
    assert settings.driver.dir_delete_on_shutdown  # the node's own driver


def test_what_the_user_set_wins_over_what_is_derived(tmp_path):
    settings = _settings(tmp_path, AERON_CLUSTER_MEMBER_ID="0",
                         AERON_ARCHIVE_CONTROL_CHANNEL="aeron:udp?endpoint=127.0.0.1:7777",
                         AERON_CLUSTER_REPLICATION_CHANNEL="aeron:udp?endpoint=127.0.0.1:7778",
                         AERON_DIR_DELETE_ON_SHUTDOWN="false")
    assert settings.archive.control_channel == "aeron:udp?endpoint=127.0.0.1:7777"
    assert settings.consensus_module.replication_channel == "aeron:udp?endpoint=127.0.0.1:7778"
    assert settings.archive.replication_channel == "aeron:udp?endpoint=127.0.0.1:0"
    assert not settings.driver.dir_delete_on_shutdown


@pytest.mark.parametrize("argv,env,message", [
    (["--member-id", "7"], {}, "cluster_member_id=7 is not a member id of cluster_members (ids [0, 1])"),
    (["--member-id", "x"], {}, "AERON_CLUSTER_MEMBER_ID='x' is not an integer"),
    ([], {"AERON_CLUSTER_MEMBERS": ""}, "cluster_members must be set"),
    ([], {"AERON_CLUSTER_ELECTION_TIMEOUT": "soon"}, "AERON_CLUSTER_ELECTION_TIMEOUT='soon' is not a duration"),
    ([], {"AERON_CLUSTER_INGRESS_CHANNEL": ""}, "ingress_channel must be set"),
    ([], {"AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "1000"}, "segment"),
    ([], {"AERON_TERM_BUFFER_LENGTH": "3k"}, "term"),
    (["--service", "no.such.module:Service"], {}, "cannot be loaded"),
    (["--service", "aeron_numba.cluster.examples.key_value_service:encode_put"], {},
     "must name a ClusteredService class"),
    (["--service", ""], {}, "--service must not be empty"),
    ([], {"AERON_CLUSTER_SERVICE_COUNT": "2"}, "AERON_CLUSTER_SERVICE_COUNT must be 1"),
    ([], {"AERON_ARCHIVE_DIR": "{tmp}/same", "AERON_CLUSTER_DIR": "{tmp}/same"}, "give each its own"),
])
def test_each_bad_setting_is_named_before_anything_starts(tmp_path, argv, env, message):
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    with pytest.raises(node_command.NodeSettingsError) as info:
        _settings(tmp_path, *argv, **env)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not any(tmp_path.iterdir())  # nothing made


def _run_node_command(tmp_path, member_id: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m aeron_numba.cluster --cluster-dir <tmp>/c <args>`` as a user types it, member ``member_id`` of
    MEMBERS, its aeron dir in ``tmp_path``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), AERON_CLUSTER_MEMBERS=MEMBERS, AERON_CLUSTER_MEMBER_ID=member_id,
               AERON_CLUSTER_INGRESS_CHANNEL="aeron:udp", AERON_DIR=str(tmp_path / "aeron"))
    return subprocess.run([sys.executable, "-m", "aeron_numba.cluster", "--cluster-dir", str(tmp_path / "c"), *args],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


def test_a_bad_setting_is_one_line_and_exit_2_from_the_command_line(tmp_path):
    result = _run_node_command(tmp_path, "5")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("python -m aeron_numba.cluster: cluster_member_id=5 is not a member id of "
                             "cluster_members (ids [0, 1])\n")
    assert not (tmp_path / "aeron").exists() and not (tmp_path / "c").exists()


def test_help_lists_the_settings_of_all_four_parts():
    text = node_command.build_parser("node").format_help()
    for variable in ("AERON_CLUSTER_MEMBERS", "AERON_CLUSTER_SERVICE_CLASS_NAME", "AERON_ARCHIVE_CONTROL_CHANNEL",
                     "AERON_TERM_BUFFER_LENGTH", "AERON_CLUSTER_ELECTION_TIMEOUT"):
        assert variable in text
    assert "node demo" in text


def test_loopback_cluster_lays_members_out_as_the_golden_run(tmp_path):
    layout = LoopbackCluster(tmp_path, base_port=20000, port_stride=100)
    assert layout.cluster_members() == (
        "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
        "1,127.0.0.2:20102,127.0.0.2:20103,127.0.0.2:20104,127.0.0.2:20105,127.0.0.2:20101|"
        "2,127.0.0.3:20202,127.0.0.3:20203,127.0.0.3:20204,127.0.0.3:20205,127.0.0.3:20201")
    assert layout.ingress_endpoints() == "0=127.0.0.1:20002,1=127.0.0.2:20102,2=127.0.0.3:20202"
    env = layout.node_environment(2)
    assert env["AERON_CLUSTER_MEMBER_ID"] == "2" and env["AERON_DIR"] == str(tmp_path / "node-2" / "aeron")
    assert env["AERON_ARCHIVE_CONTROL_CHANNEL"] == "aeron:udp?endpoint=127.0.0.3:20201"
    assert env["AERON_CLUSTER_LEADER_HEARTBEAT_TIMEOUT"] == "2s" and env["AERON_CLUSTER_ELECTION_TIMEOUT"] == "1s"
    assert member_host(4) == "127.0.0.5"
    client = layout.client_environment(tmp_path / "client")
    assert client["AERON_CLUSTER_INGRESS_ENDPOINTS"] == layout.ingress_endpoints()


def test_every_members_node_settings_pass_the_node_command_checks(tmp_path):
    layout = LoopbackCluster(tmp_path, member_count=5, base_port=24000)
    parser = node_command.build_parser("node")
    for member_id in layout.member_ids:
        settings = node_command.node_settings(parser.parse_args(["--service", SERVICE]),
                                              layout.node_environment(member_id))
        assert settings.consensus_module.cluster_member_id == member_id
        assert len(settings.consensus_module.members) == 5


@pytest.mark.parametrize("kwargs,message", [
    (dict(member_count=0), "member_count=0"), (dict(member_count=11), "member_count=11"),
    (dict(base_port=65530), "must be in [1024, 65535]"), (dict(port_stride=5), "port_stride=5"),
])
def test_loopback_cluster_refuses_what_does_not_fit(tmp_path, kwargs, message):
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LoopbackCluster(tmp_path, **kwargs)
    with pytest.raises(ConfigurationError, match="member_id=3"):
        LoopbackCluster(tmp_path).node_environment(3)


def test_placing_the_service_container_is_refused_with_the_processes_layout(tmp_path):
    result = _run_node_command(tmp_path, "0", "--archive-dir", str(tmp_path / "a"), "--service", SERVICE,
                               "--layout", "processes", "--service-container", "member")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("python -m aeron_numba.cluster: --service-container member: only the one-process "
                             "layout places the service container (--layout processes always runs it in a child)\n")
    assert not (tmp_path / "aeron").exists() and not (tmp_path / "c").exists()


def test_auto_runs_a_compiled_service_on_the_members_thread_and_a_python_one_in_a_child():
    from aeron_numba.cluster.examples.key_value_service import CompiledKeyValueService, KeyValueService

    class Busy(CompiledKeyValueService):
        def do_background_work(self, now_ns):  # work of its own every cycle: not on the consensus module's thread
            return 0

    assert node_command.is_compiled_service(CompiledKeyValueService(capacity=16))
    assert not node_command.is_compiled_service(KeyValueService())
    assert not node_command.is_compiled_service(Busy(capacity=16))
