"""Cluster mark files (spec/cluster.md §4): Aeron 1.48's described as its ClusterTool described them, ours laid out
as the spec's table says, the error log at 8192 read with the project's reader, and typed errors."""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from aeron_numba.cluster.cluster_error import ClusterError, ClusterFileError
from aeron_numba.cluster.mark_file import ClusterMarkFile, resolve_mark_file_dir, service_mark_files
from aeron_numba.kernels.error_log import DistinctErrorLog, ErrorLogReader
from aeron_numba.layout import cluster as C

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node"


def golden_describe_lines(node: str) -> list[str]:
    return [line for line in (GOLDEN / node / "clustertool-describe.txt").read_text().splitlines()
            if line.startswith("[MarkFileHeader]")]


@pytest.mark.parametrize("node", ["node-0", "node-1", "node-2"])
def test_golden_mark_files_describe_as_cluster_tool_did(node):
    cluster = GOLDEN / node / "cluster"
    with ClusterMarkFile.open(cluster / C.MARK_FILE) as cm, \
            ClusterMarkFile.open(cluster / C.service_mark_file(0)) as service:
        assert [cm.describe(), service.describe()] == golden_describe_lines(node)
        assert (cm.component_type, service.component_type) == ("CONSENSUS_MODULE", "CONTAINER")
        assert (cm.service_id, service.service_id, cm.member_id) == (-1, 0, int(node[-1]))
        assert cm.activity_timestamp == -1  # closed cleanly
        assert cm.error_log_buffer.size == 1024 * 1024


def test_golden_error_logs_read_with_the_error_log_reader():
    with ClusterMarkFile.open(GOLDEN / "node-0/cluster" / C.MARK_FILE) as cm:
        [observation] = ErrorLogReader.read(cm.error_log_buffer)
    assert observation.observation_count == 1
    assert observation.encoded_exception.startswith("io.aeron.cluster.client.ClusterEvent: WARN - leader heartbeat")
    with ClusterMarkFile.open(GOLDEN / "node-2/cluster" / C.MARK_FILE) as cm:
        assert ErrorLogReader.read(cm.error_log_buffer) == []


def test_created_mark_file_follows_the_spec_table(tmp_path):
    path = tmp_path / C.MARK_FILE
    with ClusterMarkFile.create(path, component_type="CONSENSUS_MODULE", member_id=2, service_id=-1, cluster_id=7,
                                ingress_stream_id=101, aeron_directory="/dev/shm/x", control_channel="aeron:ipc",
                                ingress_channel="aeron:udp", authenticator="auth", services_cluster_dir="/c",
                                epoch_clock=lambda: 1_700_000_000_123) as mark:
        error_log = DistinctErrorLog(mark.error_log_buffer, epoch_clock=lambda: 1_700_000_000_500)
        assert error_log.record("ClusterEvent: WARN - something")
        del error_log
    data = path.read_bytes()
    assert len(data) == 8192 + 1024 * 1024
    assert struct.unpack_from("<HHHH", data, 0) == (128, 200, 110, 2)
    assert struct.unpack_from("<iiqqqqiiiiiiiii", data, 8) == (
        768, 1, -1, 1_700_000_000_123, os.getpid(), -1, 10, 104, 105, 101, 2, -1, 8192, 1024 * 1024, 7)
    assert not any(data[84:136])
    at, strings = 136, []
    for _ in range(6):
        (length,) = struct.unpack_from("<I", data, at)
        strings.append(data[at + 4:at + 4 + length].decode())
        at += 4 + length
    assert strings == ["/dev/shm/x", "aeron:ipc", "aeron:udp", "", "auth", "/c"]
    with ClusterMarkFile.open(path) as mark:
        assert mark.describe().startswith("[MarkFileHeader](sbeTemplateId=200|sbeSchemaId=110|sbeSchemaVersion=2|"
                                          "sbeBlockLength=128):version=768|componentType=CONSENSUS_MODULE|"
                                          "activityTimestamp=-1|")
        assert mark.describe().endswith("|aeronDirectory='/dev/shm/x'|controlChannel='aeron:ipc'|ingressChannel="
                                        "'aeron:udp'|serviceName=''|authenticator='auth'|servicesClusterDir='/c'")
        [observation] = ErrorLogReader.read(mark.error_log_buffer)
        assert (observation.encoded_exception, observation.first_observation_timestamp_ms) == \
            ("ClusterEvent: WARN - something", 1_700_000_000_500)


def test_liveness_needs_a_recent_timestamp_and_a_running_pid(tmp_path):
    now = int(time.time() * 1000)
    with ClusterMarkFile.create(tmp_path / C.MARK_FILE, component_type="CONTAINER", member_id=0, service_id=0,
                                epoch_clock=lambda: now) as mark:
        assert mark.is_active(now + 1000)
        assert not mark.is_active(now + C.MARK_LIVENESS_TIMEOUT_MS)
    with ClusterMarkFile.open(tmp_path / C.MARK_FILE) as mark:
        assert not mark.is_active(now + 1000)  # its owner closed it cleanly: timestamp -1


def test_link_files_point_at_the_mark_file_dirs(tmp_path):
    elsewhere = tmp_path / "marks"
    elsewhere.mkdir()
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / C.MARK_LINK_FILE).write_text(f"{elsewhere}\n")
    (cluster / "cluster-mark-service-1.lnk").write_text(str(elsewhere))
    (cluster / "cluster-mark-service-1.dat").write_bytes(b"")  # the link wins over a file of the same name
    (cluster / "cluster-mark-service-0.dat").write_bytes(b"")
    assert resolve_mark_file_dir(cluster) == elsewhere
    assert service_mark_files(cluster) == [elsewhere / "cluster-mark-service-1.dat",
                                           cluster / "cluster-mark-service-0.dat"]


@pytest.mark.parametrize("patch,message,offset", [
    ((4, "<H", 100), "templateId=200, schemaId=100: not a cluster mark file", 0),
    ((8, "<i", -1), "mark file major version 255", 8),
    ((76, "<i", 1 << 30), "headerLength=8192 \\+ errorBufferLength=1073741824 runs past the file length", 72),
])
def test_damaged_mark_files_name_file_offset_and_limit(tmp_path, patch, message, offset):
    path = tmp_path / C.MARK_FILE
    shutil.copy(GOLDEN / "node-0/cluster" / C.MARK_FILE, path)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    at, fmt, value = patch
    struct.pack_into(fmt, data, at, value)
    path.write_bytes(bytes(data))
    with pytest.raises(ClusterFileError, match=message) as info:
        ClusterMarkFile.open(path)
    assert (info.value.offset, info.value.limit) == (offset, len(data))


def test_string_running_past_the_header_and_a_truncated_file(tmp_path):
    path = tmp_path / C.MARK_FILE
    shutil.copy(GOLDEN / "node-0/cluster" / C.MARK_FILE, path)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 136, 9000)
    path.write_bytes(bytes(data))
    with ClusterMarkFile.open(path) as mark, pytest.raises(ClusterFileError, match="aeronDirectory length=9000 "
                                                                                   "runs past headerLength=8192"):
        mark.strings()
    path.write_bytes(bytes(data[:100]))
    with pytest.raises(ClusterFileError, match="file length=100 < 136") as info:
        ClusterMarkFile.open(path)
    assert info.value.limit == 100
    with pytest.raises(ClusterFileError, match="mark file does not exist"):
        ClusterMarkFile.open(tmp_path / "nope.dat")


def test_create_refuses_bad_settings(tmp_path):
    with pytest.raises(ClusterError, match="componentType='LEADER'"):
        ClusterMarkFile.create(tmp_path / C.MARK_FILE, component_type="LEADER", member_id=0, service_id=-1)
    with pytest.raises(ValueError, match=r"errorBufferLength=1024 outside \[1048576, "):
        ClusterMarkFile.create(tmp_path / C.MARK_FILE, component_type="BACKUP", member_id=0, service_id=-1,
                               error_buffer_length=1024)
