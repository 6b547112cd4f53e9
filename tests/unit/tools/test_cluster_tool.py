"""cluster-tool: ClusterTool's command line and output over the cluster dirs real Aeron 1.48 wrote (tests/golden,
copied from ../shared/reference), its repairs on copies of them, and one-line errors."""

from __future__ import annotations

import re
import shutil
import struct
import time
from pathlib import Path

import pytest

from aeron_numba.cluster.mark_file import ClusterMarkFile
from aeron_numba.cluster.recording_log import RecordingLog
from aeron_numba.layout import cluster as C
from aeron_numba.layout import frame as F
from aeron_numba.tools.cluster_tool import EXIT_USAGE, _recorded_messages, main

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node"
NODES = ("node-0", "node-1", "node-2")
CLOCK = re.compile(r"^(Type: \w+) \d\d:\d\d:\d\d ", re.MULTILINE)  # the clock when the tool ran


@pytest.fixture
def utc(monkeypatch):
    """Java printed the reference dates in UTC (the host's zone)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def node0(tmp_path) -> Path:
    """A writable copy of node 0's cluster and archive dirs."""
    shutil.copytree(GOLDEN / "node-0" / "cluster", tmp_path / "cluster")
    shutil.copytree(GOLDEN / "node-0" / "archive", tmp_path / "archive")
    for path in (tmp_path / "cluster").iterdir():
        path.chmod(0o644)
    return tmp_path / "cluster"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def golden(node: str, command: str) -> str:
    return (GOLDEN / node / f"clustertool-{command}.txt").read_text()


def without_clock(text: str) -> str:
    return CLOCK.sub(r"\1 HH:MM:SS ", text)


@pytest.mark.parametrize("node", NODES + ("node-2-crash-state",))
def test_recording_log_and_recovery_plan_print_as_cluster_tool_printed_them(capsys, node):
    assert run(capsys, GOLDEN / node / "cluster", "recording-log") == (0, golden(node, "recording-log"), "")
    # The crashed node's catalog still shows its log recording active: the stop position comes from its
    # segment file, as Aeron's archive found it on restart.
    assert run(capsys, GOLDEN / node / "cluster", "recovery-plan", "1") == (0, golden(node, "recovery-plan"), "")


@pytest.mark.parametrize("node", NODES)
def test_describe_prints_clustertools_lines(capsys, utc, node):
    code, out, err = run(capsys, GOLDEN / node / "cluster", "describe")
    assert (code, err) == (0, "")
    # ClusterTool ran in /tmp/golden/cluster/<node>/cluster; the copy here is elsewhere.
    expected = golden(node, "describe").replace(f"/tmp/golden/cluster/{node}/cluster/",
                                                f"{GOLDEN / node / 'cluster'}/")
    assert without_clock(out) == without_clock(expected)


@pytest.mark.parametrize("node", NODES)
def test_errors_prints_the_component_error_logs_as_cluster_tool_did(capsys, utc, node):
    code, out, err = run(capsys, GOLDEN / node / "cluster", "errors")
    assert (code, err) == (0, "")
    expected = golden(node, "errors").replace(f"/tmp/golden/cluster/{node}/cluster/",
                                              f"{GOLDEN / node / 'cluster'}/")
    # The golden run's media driver left its cnc.dat; here it is gone, and the tool says so instead.
    expected = expected.replace("\nO distinct errors observed\nINFO:",
                                f"\n/dev/shm/golden-{node}/cnc.dat does not exist: the media driver is gone and left "
                                f"no error log\nINFO:", 1)
    assert without_clock(out) == without_clock(expected)


def test_pid(capsys):
    assert run(capsys, GOLDEN / "node-0" / "cluster", "pid") == (0, "4099\n", "")


def test_invalidate_latest_snapshot_until_none_is_left(capsys, node0):
    assert run(capsys, node0, "invalidate-latest-snapshot") == (0, " invalidate latest snapshot: true\n", "")
    code, out, _ = run(capsys, node0, "recovery-plan", "1")
    assert code == 0 and "snapshots=[Snapshot{recordingId=2," in out and "startPosition=9952" in out
    assert run(capsys, node0, "invalidate-latest-snapshot") == (0, " invalidate latest snapshot: true\n", "")
    assert run(capsys, node0, "invalidate-latest-snapshot") == (1, " invalidate latest snapshot: false\n", "")
    code, out, _ = run(capsys, node0, "recording-log")
    assert out.count("isValid=false") == 4 and out.count("isValid=true") == 2


def test_seed_recording_log_from_snapshot_keeps_the_latest_set_at_position_zero(capsys, node0):
    original = (node0 / C.RECORDING_LOG_FILE).read_bytes()
    assert run(capsys, node0, "seed-recording-log-from-snapshot") == (0, "", "")
    assert (node0 / "recording.log.bak").read_bytes() == original
    code, out, _ = run(capsys, node0, "recording-log")
    assert out == ("RecordingLog{entries=[Entry{recordingId=3, leadershipTermId=1, termBaseLogPosition=0, "
                   "logPosition=0, timestamp=1795597180323, serviceId=0, type=SNAPSHOT, isValid=true, entryIndex=0}, "
                   "Entry{recordingId=4, leadershipTermId=1, termBaseLogPosition=0, logPosition=0, "
                   "timestamp=1795597180323, serviceId=-1, type=SNAPSHOT, isValid=true, entryIndex=1}], "
                   "cacheIndex={}}\n")


def test_seed_without_a_valid_snapshot_deletes_the_log(capsys, node0):
    for _ in range(2):
        run(capsys, node0, "invalidate-latest-snapshot")
    assert run(capsys, node0, "seed-recording-log-from-snapshot") == (0, "", "")
    assert not (node0 / C.RECORDING_LOG_FILE).exists() and (node0 / "recording.log.bak").exists()


def test_sort_recording_log_rewrites_an_unsorted_file_in_memory_order(capsys, tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(0, 0, 0, 1)
        log.append_term(0, 1, 100, 2)
        log.append_snapshot(1, 0, 0, 50, 3, -1)
    before = (tmp_path / C.RECORDING_LOG_FILE).read_bytes()
    assert run(capsys, tmp_path, "sort-recording-log") == (0, "", "")
    after = (tmp_path / C.RECORDING_LOG_FILE).read_bytes()
    assert after == before[:64] + before[128:192] + before[64:128]
    assert run(capsys, tmp_path, "sort-recording-log") == (0, "", "")  # sorted already: left as it is
    assert (tmp_path / C.RECORDING_LOG_FILE).read_bytes() == after


def test_repairs_refuse_to_run_under_a_live_consensus_module(capsys, node0):
    (node0 / C.MARK_FILE).unlink()
    ClusterMarkFile.create(node0 / C.MARK_FILE, component_type="CONSENSUS_MODULE", member_id=0,
                           service_id=-1).close(clean_shutdown=False)  # as a running node leaves it
    code, out, err = run(capsys, node0, "invalidate-latest-snapshot")
    assert (code, out) == (1, "")
    assert err.startswith(f"cluster-tool: a consensus module (pid {__import__('os').getpid()}) is active in {node0}")
    assert err.count("\n") == 1


def test_corrupt_recording_log_is_one_line_naming_file_offset(capsys, node0):
    path = node0 / C.RECORDING_LOG_FILE
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 64 + 44, 9)
    path.write_bytes(bytes(data))
    assert run(capsys, node0, "recording-log") == (
        1, "", f"cluster-tool: {path} at offset 108: entry 1 has entryType=9 (0x00000009): not 0 TERM, 1 SNAPSHOT, "
               f"2 STANDBY_SNAPSHOT (optionally | 0x80000000 invalid) or -1 removed\n")


def test_missing_files_are_one_line_errors(capsys, tmp_path):
    assert run(capsys, tmp_path, "recording-log") == (
        1, "", f"cluster-tool: {tmp_path / 'recording.log'}: no recording.log in this cluster directory\n")
    code, out, err = run(capsys, tmp_path, "pid")
    assert (code, out) == (1, "") and err.count("\n") == 1 and "cluster-mark.dat does not exist" in err
    assert run(capsys, tmp_path, "describe") == (1, "cluster-mark.dat does not exist.\n", "")


@pytest.mark.parametrize("argv,message", [
    (["{missing}", "recording-log"], "cluster directory not found: {missing}"),
    (["{dir}", "nope"], "unknown command 'nope' (commands: describe, pid, recovery-plan, recording-log, "
                        "sort-recording-log, seed-recording-log-from-snapshot, errors, invalidate-latest-snapshot, "
                        "describe-latest-cm-snapshot, list-members, is-leader, snapshot, suspend, resume, shutdown, "
                        "abort)"),
    (["{dir}", "backup-query"], "command 'backup-query' is not available: there is no cluster backup"),
    (["{dir}", "snapshot", "now"], "snapshot takes no arguments, got 'now'"),
    (["{dir}"], "expected <cluster-dir> <command> [args] (--help lists the commands)"),
    (["{dir}", "recovery-plan"], "recovery-plan needs the service count: recovery-plan <serviceCount> "
                                 "[--archive-dir DIR]"),
    (["{dir}", "recovery-plan", "two"], "recovery-plan: service count 'two' is not an integer"),
    (["{dir}", "pid", "extra"], "pid takes no arguments, got 'extra'"),
    (["{dir}", "describe-latest-cm-snapshot", "1"],
     "describe-latest-cm-snapshot takes only --archive-dir DIR, got '1'"),
])
def test_bad_command_lines_are_one_line_and_exit_2(capsys, tmp_path, argv, message):
    values = {"missing": tmp_path / "missing", "dir": tmp_path}
    code, out, err = run(capsys, *[a.format(**values) for a in argv])
    assert (code, out) == (EXIT_USAGE, "")
    assert err.startswith(f"cluster-tool: {message.format(**values)}") and err.count("\n") == 1


def test_recovery_plan_archive_dir_option(capsys, node0, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "archive", moved)
    code, out, err = run(capsys, node0, "recovery-plan", "1")
    assert (code, out) == (1, "") and "name the node's archive dir with --archive-dir" in err
    assert run(capsys, node0, "recovery-plan", "1", "--archive-dir", moved) == \
        (0, golden("node-0", "recovery-plan"), "")


def test_help_lists_the_commands(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and out.startswith("Usage: cluster-tool <cluster-dir> <command> [options]\n")
    assert "   recording-log: prints recording log of cluster component.\n" in out


def test_describe_latest_cm_snapshot_reads_the_snapshot_from_the_segment_files(capsys):
    # Node 2 kept its snapshot recordings' segment files: what ClusterTool printed by replaying recording 4.
    assert run(capsys, GOLDEN / "node-2" / "cluster", "describe-latest-cm-snapshot") == \
        (0, golden("node-2", "describe-latest-cm-snapshot"), "")


def test_describe_latest_cm_snapshot_without_segment_files_or_snapshots(capsys, node0):
    code, out, err = run(capsys, node0, "describe-latest-cm-snapshot")  # node 0's copy holds no .rec files
    assert (code, out) == (1, "")
    assert err == (f"cluster-tool: recording 4 has no frames at position 0 in {node0.parent / 'archive'}: its "
                   f"segment file is missing or ends before the recording's stop position 512\n")
    for _ in range(2):
        run(capsys, node0, "invalidate-latest-snapshot")
    assert run(capsys, node0, "describe-latest-cm-snapshot") == (1, "Snapshot not found\n", "")


class _Blocks:
    """A RecordingReader stand-in serving one term of crafted frames."""

    recording_id, archive_dir = 9, Path("/nowhere")

    def __init__(self, term: bytes):
        self.term = term

    def read(self, position, limit_position, max_length):
        import numpy as np

        return np.frombuffer(self.term, dtype=np.uint8), position, min(limit_position, len(self.term)) - position


def _frame(flags: int, payload: bytes, frame_type: int = F.HDR_TYPE_DATA) -> bytes:
    header = struct.pack("<iBBHiiii", 32 + len(payload), 0, flags, frame_type, 0, 1, 2, 3) + bytes(8)
    data = header + payload
    return data + bytes(-len(data) % 32)


def test_recorded_messages_joins_fragments_and_skips_padding():
    term = (_frame(F.UNFRAGMENTED, b"one") + _frame(F.BEGIN_FRAG_FLAG, b"tw") + _frame(0, b"o-") +
            _frame(F.END_FRAG_FLAG, b"parts") + _frame(F.UNFRAGMENTED, bytes(32), F.HDR_TYPE_PAD))
    got = [(bytes(data[offset:offset + length]), end) for data, offset, length, end in
           _recorded_messages(_Blocks(term), 0, len(term))]
    assert got == [(b"one", 64), (b"two-parts", 256)]


def test_errors_of_our_own_mark_files_and_a_driver_with_an_error(capsys, tmp_path, utc):
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels.error_log import DistinctErrorLog

    aeron_dir, cluster = tmp_path / "aeron", tmp_path / "cluster"
    aeron_dir.mkdir()
    cluster.mkdir()
    with CncFile.create(aeron_dir / "cnc.dat", error_log_buffer_length=64 * 1024) as cnc_file:
        DistinctErrorLog(cnc_file.error_log_buffer, epoch_clock=lambda: 1_700_000_000_000).record("driver trouble")
    cm = ClusterMarkFile.create(cluster / C.MARK_FILE, component_type="CONSENSUS_MODULE", member_id=1,
                                service_id=-1, aeron_directory=str(aeron_dir), services_cluster_dir=str(cluster),
                                epoch_clock=lambda: 1_700_000_000_000)
    DistinctErrorLog(cm.error_log_buffer, epoch_clock=lambda: 1_700_000_001_000).record("election trouble")
    cm.close()
    ClusterMarkFile.create(cluster / C.service_mark_file(0), component_type="CONTAINER", member_id=1, service_id=0,
                           epoch_clock=lambda: 1_700_000_000_000).close()
    code, out, err = run(capsys, cluster, "errors")
    assert (code, err) == (0, "")
    assert without_clock(out) == "\n".join([
        "Type: CONSENSUS_MODULE HH:MM:SS (start: 2023-11-14 22:13:20, activity: 1969-12-31 23:59:59)",
        "Cluster component error log:", "",
        "1 observations from 2023-11-14 22:13:21.000+0000 to 2023-11-14 22:13:21.000+0000 for:",
        "election trouble", "", "1 distinct errors observed.", "",
        f"Aeron driver error log (directory: {aeron_dir}):", "",
        "1 observations from 2023-11-14 22:13:20.000+0000 to 2023-11-14 22:13:20.000+0000 for:",
        "driver trouble", "", "1 distinct errors observed.",
        f"INFO: Mark file exists: {cluster / C.service_mark_file(0)}",
        "Type: CONTAINER HH:MM:SS (start: 2023-11-14 22:13:20, activity: 1969-12-31 23:59:59)",
        "Cluster component error log:", "", "O distinct errors observed", ""])
