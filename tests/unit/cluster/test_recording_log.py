"""recording.log (spec/cluster.md §2): the files real Aeron 1.48 wrote read back as its ClusterTool printed them,
the same history replayed through our append/commit rules giving the same bytes, the in-place updates
(commit, invalidate, remove, re-validate), the sort order, and the typed errors for damaged files."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.archive.catalog import Catalog
from aeron_numba.cluster.cluster_error import ClusterError, ClusterFileError
from aeron_numba.cluster.recording_log import (Entry, RecordingLog, is_sorted_on_disk, parse_entries,
                                               rewrite_recording_log)
from aeron_numba.cluster.recovery_plan import RecordingExtent
from aeron_numba.layout import cluster as C

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node"
NODES = ("node-0", "node-1", "node-2", "node-2-crash-state")
T0 = 1_795_597_162_014


def golden_text(node: str, command: str) -> str:
    return (GOLDEN / node / f"clustertool-{command}.txt").read_text().rstrip("\n")


def spec_entry(recording_id, term, base, log_position, timestamp, service_id, entry_type) -> bytes:
    """An entry's 64 bytes from the §2.1 table, written out field by field."""
    data = bytearray(64)
    struct.pack_into("<q", data, 0, recording_id)
    struct.pack_into("<q", data, 8, term)
    struct.pack_into("<q", data, 16, base)
    struct.pack_into("<q", data, 24, log_position)
    struct.pack_into("<q", data, 32, timestamp)
    struct.pack_into("<i", data, 40, service_id)
    struct.pack_into("<I", data, 44, entry_type & 0xFFFF_FFFF)
    return bytes(data)


@pytest.fixture
def node0(tmp_path) -> Path:
    """A writable copy of node 0's cluster dir (the golden files stay untouched)."""
    shutil.copytree(GOLDEN / "node-0" / "cluster", tmp_path / "cluster")
    return tmp_path / "cluster"


@pytest.mark.parametrize("node", NODES)
def test_golden_recording_log_prints_as_cluster_tool_printed_it(node):
    with RecordingLog(GOLDEN / node / "cluster", read_only=True) as log:
        assert str(log) == golden_text(node, "recording-log")


@pytest.mark.parametrize("node", NODES[:3])
def test_golden_recovery_plan_from_recording_log_and_catalog(node):
    with RecordingLog(GOLDEN / node / "cluster", read_only=True) as log, \
            Catalog.open(GOLDEN / node / "archive", create=False, read_only=True) as catalog:
        def extent_of(recording_id):
            d = catalog.descriptor(recording_id)
            return RecordingExtent(d.start_position, d.stop_position, d.initial_term_id, d.term_buffer_length,
                                   d.mtu_length, d.session_id)

        assert str(log.create_recovery_plan(1, extent_of)) == golden_text(node, "recovery-plan")


def test_replaying_node_0s_history_writes_aerons_bytes(tmp_path):
    # The golden run's history: term 0, a snapshot at 9952 (service 0, then the consensus module), the leader
    # killed and term 1 from 19552, a second snapshot at 29344. Our appends must write what Aeron wrote.
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(0, 0, 0, T0)
        log.append_snapshot(1, 0, 0, 9952, 1795597163864, 0)
        log.append_snapshot(2, 0, 0, 9952, 1795597163864, C.CONSENSUS_MODULE_SERVICE_ID)
        log.append_term(0, 1, 19552, 1795597168483)  # commits term 0 at term 1's base
        log.append_snapshot(3, 1, 19552, 29344, 1795597180323, 0)
        log.append_snapshot(4, 1, 19552, 29344, 1795597180323, C.CONSENSUS_MODULE_SERVICE_ID)
        assert str(log) == golden_text("node-0", "recording-log")
    assert (tmp_path / C.RECORDING_LOG_FILE).read_bytes() == (GOLDEN / "node-0/cluster/recording.log").read_bytes()


def test_entry_bytes_follow_the_spec_table_and_the_next_term_commits_the_previous(tmp_path):
    path = tmp_path / C.RECORDING_LOG_FILE
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(7, 0, 0, 1000)
        assert path.read_bytes() == spec_entry(7, 0, 0, -1, 1000, -1, C.ENTRY_TYPE_TERM)
        log.append_term(7, 1, 4096, 2000)
        log.append_snapshot(9, 1, 4096, 5000, 3000, 1)
        log.append_snapshot(8, 1, 4096, 5000, 3000, 0)
        log.append_snapshot(10, 1, 4096, 5000, 3000, -1)
    assert path.read_bytes() == b"".join([
        spec_entry(7, 0, 0, 4096, 1000, -1, C.ENTRY_TYPE_TERM),  # logPosition committed in place
        spec_entry(7, 1, 4096, -1, 2000, -1, C.ENTRY_TYPE_TERM),
        spec_entry(9, 1, 4096, 5000, 3000, 1, C.ENTRY_TYPE_SNAPSHOT),
        spec_entry(8, 1, 4096, 5000, 3000, 0, C.ENTRY_TYPE_SNAPSHOT),
        spec_entry(10, 1, 4096, 5000, 3000, -1, C.ENTRY_TYPE_SNAPSHOT),
    ])
    with RecordingLog(tmp_path, read_only=True) as log:
        assert [e.recording_id for e in log.entries] == [7, 7, 9, 8, 10]
        assert log.find_last_term().leadership_term_id == 1
        assert log.get_term_entry(0).log_position == 4096
        assert log.get_latest_snapshot(-1).recording_id == 10
        assert log.get_latest_snapshot(0).recording_id == 8
        assert log.get_latest_snapshot(1).recording_id == 9
        assert str(log.term_index) == "{1=1, 0=0}"


def test_standby_snapshot_carries_its_endpoint_and_takes_an_aligned_length(tmp_path):
    endpoint = "127.0.0.9:" + "9" * 20  # 30 bytes: 48 + 4 + 30 = 82, aligned to 128
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(0, 0, 0, 1)
        log.append_standby_snapshot(5, 0, 0, 640, 2, -1, endpoint)
        log.append_snapshot(6, 0, 0, 640, 3, -1)
    data = (tmp_path / C.RECORDING_LOG_FILE).read_bytes()
    assert len(data) == 64 + 128 + 64
    assert struct.unpack_from("<iI", data, 64 + 44) == (C.ENTRY_TYPE_STANDBY_SNAPSHOT, len(endpoint))
    assert data[64 + 52:64 + 52 + len(endpoint)] == endpoint.encode()
    with RecordingLog(tmp_path, read_only=True) as log:
        standby = next(e for e in log.entries if e.type == C.ENTRY_TYPE_STANDBY_SNAPSHOT)
        assert standby.archive_endpoint == endpoint and standby.position == 64
        assert str(standby).endswith(f"entryIndex=1, archiveEndpoint={endpoint}}}")
        assert [e.recording_id for e in log.entries] == [0, 5, 6]  # STANDBY_SNAPSHOT sorts before SNAPSHOT


def test_invalidate_latest_snapshot_falls_back_to_the_previous_set_and_is_restored_in_place(node0):
    with RecordingLog(node0) as log:
        assert log.invalidate_latest_snapshot()
    data = (node0 / C.RECORDING_LOG_FILE).read_bytes()
    assert [struct.unpack_from("<I", data, 64 * i + 44)[0] for i in range(6)] == \
        [0, 1, 1, 0, 1 | 0x8000_0000, 1 | 0x8000_0000]
    with RecordingLog(node0) as log:
        assert [e.is_valid for e in log.entries] == [True, True, True, True, False, False]
        assert log.get_latest_snapshot(-1).recording_id == 2
        plan = log.create_recovery_plan(1, lambda rid: RecordingExtent(0, 34240, 0, 65536, 1408, 7))
        assert [s.recording_id for s in plan.snapshots] == [2, 1]
        assert plan.log.start_position == 9952 and plan.committed_log_position == 9952
        # The same snapshot taken again is made valid where it was; the file does not grow.
        log.append_snapshot(3, 1, 19552, 29344, 1795597180323, 0)
        log.append_snapshot(4, 1, 19552, 29344, 1795597180323, -1)
    assert (node0 / C.RECORDING_LOG_FILE).read_bytes() == (GOLDEN / "node-0/cluster/recording.log").read_bytes()


def test_invalidating_every_snapshot_then_none_left(node0):
    with RecordingLog(node0) as log:
        assert log.invalidate_latest_snapshot() and log.invalidate_latest_snapshot()
        assert not log.invalidate_latest_snapshot()
        assert log.get_latest_snapshot(-1) is None
        plan = log.create_recovery_plan(1, lambda rid: RecordingExtent(0, 34240, 0, 65536, 1408, 7))
        assert plan.snapshots == () and plan.log.start_position == 0 and plan.committed_log_position == 0


def test_removed_entry_is_skipped_but_keeps_its_index(node0):
    with RecordingLog(node0) as log:
        log.remove_entry(0, 1)
        assert [e.entry_index for e in log.entries] == [0, 2, 3, 4, 5]
        assert log.next_entry_index == 6
    assert struct.unpack_from("<i", (node0 / C.RECORDING_LOG_FILE).read_bytes(), 64 + 44)[0] == -1


def test_out_of_order_appends_sort_in_memory_and_rewrite_sorts_the_file(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(0, 0, 0, 1)
        log.append_term(0, 1, 100, 2)
        log.append_snapshot(1, 0, 0, 50, 3, -1)  # a term-0 snapshot recorded after term 1 began
        assert [(e.leadership_term_id, e.type) for e in log.entries] == [(0, 0), (0, 1), (1, 0)]
        assert str(log.term_index) == "{1=2, 0=0}"  # term 1's index moved when the snapshot went before it
        assert not is_sorted_on_disk(log.entries)
        entries = list(log.entries)
    rewrite_recording_log(tmp_path, entries)
    with RecordingLog(tmp_path, read_only=True) as log:
        assert is_sorted_on_disk(log.entries)
        assert [(e.leadership_term_id, e.type, e.recording_id) for e in log.entries] == \
            [(0, 0, 0), (0, 1, 1), (1, 0, 0)]


def test_ensure_coherent_back_fills_missing_terms(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.ensure_coherent(0, 0, 0, 2, 0, -1, 10)
        assert [(e.leadership_term_id, e.term_base_log_position, e.log_position) for e in log.entries] == \
            [(0, 0, 0), (1, 0, 0), (2, 0, -1)]
        log.ensure_coherent(0, 0, 0, 4, 800, 900, 11)
        assert [(e.leadership_term_id, e.log_position) for e in log.entries][2:] == [(2, 800), (3, 800), (4, 900)]


def test_rules_refuse_duplicate_terms_unknown_terms_and_a_second_log_recording(tmp_path):
    with RecordingLog(tmp_path, create_new=True) as log:
        log.append_term(3, 0, 0, 1)
        with pytest.raises(ClusterError, match="duplicate TERM entry for leadershipTermId=0"):
            log.append_term(3, 0, 0, 1)
        with pytest.raises(ClusterError, match="invalid TERM recordingId=4, expected recordingId=3"):
            log.append_term(4, 1, 0, 1)
        with pytest.raises(ClusterError, match="unknown leadershipTermId=9"):
            log.commit_log_position(9, 100)
        with pytest.raises(ClusterError, match="invalid recordingId=-1"):
            log.append_snapshot(-1, 0, 0, 0, 0, -1)


def test_missing_file_and_read_only_writes_are_refused(tmp_path, node0):
    with pytest.raises(ClusterFileError, match="no recording.log"):
        RecordingLog(tmp_path)
    with RecordingLog(node0, read_only=True) as log, pytest.raises(ClusterError, match="read-only"):
        log.commit_log_position(1, 30000)


def test_truncated_entry_names_file_offset_and_limit(node0):
    path = node0 / C.RECORDING_LOG_FILE
    path.write_bytes(path.read_bytes()[:364])  # the last entry cut to 44 bytes
    with pytest.raises(ClusterFileError) as info:
        RecordingLog(node0, read_only=True)
    assert (info.value.offset, info.value.limit) == (320, 364)
    assert str(info.value) == (f"{path} at offset 320: truncated entry 5: 44 bytes < the 48 of an entry's fields "
                               f"(file length=364)")


def test_unknown_entry_type_names_file_offset_and_the_types_allowed(node0):
    path = node0 / C.RECORDING_LOG_FILE
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 128 + 44, 7)
    path.write_bytes(bytes(data))
    with pytest.raises(ClusterFileError, match=r"at offset 172: entry 2 has entryType=7 \(0x00000007\): not 0 TERM"):
        RecordingLog(node0, read_only=True)


def test_term_entries_naming_two_log_recordings_are_refused(node0):
    path = node0 / C.RECORDING_LOG_FILE
    data = bytearray(path.read_bytes())
    struct.pack_into("<q", data, 192, 5)  # term 1's entry names recording 5, term 0's recording 0
    path.write_bytes(bytes(data))
    with pytest.raises(ClusterFileError, match="TERM entry 3 has recordingId=5, but the log's TERM entries name "
                                               "recordingId=0"):
        RecordingLog(node0, read_only=True)


# ------------------------------------------------------------------------------------------- properties
_entries = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(-1, 2), st.booleans()),
                    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(_entries)
def test_any_entries_written_read_back_equal_and_sorted(tmp_path_factory, spec):
    """Entries encoded back to back parse to themselves, and a reload sorts them as §2.3 says."""
    entries = []
    for i, (term, kind, service, valid) in enumerate(spec):
        entry_type = C.ENTRY_TYPE_TERM if kind == 0 else C.ENTRY_TYPE_SNAPSHOT
        entries.append(Entry(0 if kind == 0 else 10 + i, term, term * 100, term * 100 + 50 * kind, i,
                             -1 if kind == 0 else service, entry_type, valid, i, None, 64 * i))
    data = b"".join(e.encode() for e in entries)
    parsed, next_index = parse_entries(data, "recording.log")
    assert parsed == entries and next_index == len(entries)
    directory = tmp_path_factory.mktemp("log")
    (directory / C.RECORDING_LOG_FILE).write_bytes(data)
    with RecordingLog(directory, read_only=True) as log:
        keys = [(e.leadership_term_id, e.term_base_log_position, e.type != C.ENTRY_TYPE_SNAPSHOT) for e in log.entries]
        assert [(k[0], k[1]) for k in keys] == sorted((k[0], k[1]) for k in keys)
        for a, b in zip(log.entries, log.entries[1:]):
            if (a.leadership_term_id, a.term_base_log_position) == (b.leadership_term_id, b.term_base_log_position):
                assert not (a.type == C.ENTRY_TYPE_SNAPSHOT and b.type == C.ENTRY_TYPE_TERM)
                if a.type == b.type == C.ENTRY_TYPE_SNAPSHOT and a.log_position == b.log_position:
                    assert a.service_id >= b.service_id
        valid_terms = {e.leadership_term_id: i for i, e in enumerate(log.entries)
                       if e.type == C.ENTRY_TYPE_TERM and e.is_valid}
        assert dict(log.term_index.items()) == valid_terms


_operations = st.lists(st.tuples(st.sampled_from(["term", "snapshot", "invalidate", "commit", "remove"]),
                                 st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(_operations)
def test_after_any_operations_the_file_reloads_to_what_memory_holds(tmp_path_factory, operations):
    """Appends in any order (terms, snapshot sets for any term), invalidations, commits and removals: the sorted
    list, the term index and the invalid snapshots kept in memory are what a fresh read of the file gives."""
    directory = tmp_path_factory.mktemp("log")
    with RecordingLog(directory, create_new=True) as log:
        for op, term, k in operations:
            if op == "term" and term not in log.term_index:
                log.append_term(0, term, term * 1000, term)
            elif op == "snapshot":
                for service_id in range(k - 1, -2, -1):  # services in descending id, then the consensus module
                    log.append_snapshot(100 + len(log.entries), term, term * 1000, term * 1000 + 100 * k, 7,
                                        service_id)
            elif op == "invalidate" and all(e.leadership_term_id in log.term_index for e in log.entries
                                            if e.is_valid and e.type == C.ENTRY_TYPE_SNAPSHOT):
                log.invalidate_latest_snapshot()
            elif op == "commit" and term in log.term_index:
                log.commit_log_position(term, term * 1000 + 10 * k)
            elif op == "remove" and log.entries:
                victim = log.entries[k % len(log.entries)]
                log.remove_entry(victim.leadership_term_id, victim.entry_index)
        in_memory = (list(log.entries), dict(log.term_index.items()), sorted(log._invalid_snapshots))
    with RecordingLog(directory) as reloaded:  # (the map's slot order may differ: it depends on insertion order)
        assert (reloaded.entries, dict(reloaded.term_index.items()), sorted(reloaded._invalid_snapshots)) == in_memory
