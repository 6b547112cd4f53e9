"""node-state.dat (spec/cluster.md §3): Aeron 1.48's files read back, a fresh file byte for byte as the spec's
table lays it out, the candidate term only ever rising, and typed errors for damaged files."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from aeron_numba.cluster.cluster_error import ClusterFileError
from aeron_numba.cluster.node_state_file import NodeStateFile
from aeron_numba.layout import cluster as C

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "aeron-1.48" / "cluster-3node"


def fresh_file_head() -> bytes:
    """The first 64 bytes of a new file, from §3's table."""
    data = bytearray(64)
    struct.pack_into("<i", data, 0, 768)  # nodeStateHeader.version 0.3.0
    struct.pack_into("<HHHHii", data, 8, 24, 301, 112, 10, 40, 0)
    struct.pack_into("<qqq", data, 24, -1, -1, -1)
    struct.pack_into("<HHHHii", data, 48, 0, 304, 112, 10, 16, 0)
    return bytes(data)


@pytest.mark.parametrize("node,expected", [
    ("node-0", (1, 1795597167477, 19552)),  # voted in the election of term 1
    ("node-1", (1, 1795597167481, 19552)),
    ("node-2", (0, 1795597161877, 0)),  # SIGKILLed in term 0, rejoined as a follower
])
def test_golden_node_state_files(node, expected):
    with NodeStateFile.open(GOLDEN / node / "cluster", read_only=True) as state:
        assert (state.candidate_term_id, state.timestamp, state.log_position) == expected


def test_a_fresh_file_is_laid_out_as_the_spec_says(tmp_path):
    with NodeStateFile.open(tmp_path, create_new=True) as state:
        assert (state.candidate_term_id, state.timestamp, state.log_position) == (-1, -1, -1)
    data = (tmp_path / C.NODE_STATE_FILE).read_bytes()
    assert len(data) == 1 << 20
    assert data[:64] == fresh_file_head() and not any(data[64:])
    # Aeron's files have the same frames where ours has them: only the three values differ.
    golden = (GOLDEN / "node-0/cluster/node-state.dat").read_bytes()
    assert golden[:24] == data[:24] and golden[48:] == data[48:]


def test_candidate_term_only_rises_and_survives_a_reopen(tmp_path):
    with NodeStateFile.open(tmp_path, create_new=True) as state:
        assert state.propose_max_candidate_term_id(3, 4096, 1_700_000_000_000) == 3
        assert state.propose_max_candidate_term_id(2, 8192, 1_700_000_000_500) == 3  # lower: ignored
        assert (state.timestamp, state.log_position) == (1_700_000_000_000, 4096)
    with NodeStateFile.open(tmp_path) as state:
        assert (state.candidate_term_id, state.timestamp, state.log_position) == (3, 1_700_000_000_000, 4096)
        state.update_candidate_term_id(5, 12288, 1_700_000_001_000)
    assert struct.unpack_from("<qqq", (tmp_path / C.NODE_STATE_FILE).read_bytes(), 24) == \
        (5, 1_700_000_001_000, 12288)


def test_missing_file_without_create_new(tmp_path):
    with pytest.raises(ClusterFileError, match="NodeStateFile does not exist and createNew=false"):
        NodeStateFile.open(tmp_path)


@pytest.mark.parametrize("patch,message,offset", [
    ((0, "<i", 1 << 16), "node state version 1.0.0 does not match major version 0", 0),
    ((48 + 2, "<H", 999), "failed to find NodeStateFooter entry", 8),
    ((8 + 8, "<i", -8), "frame with templateId=301 has frameLength=-8 < 0", 16),
])
def test_damaged_files_name_file_offset_and_limit(tmp_path, patch, message, offset):
    shutil.copy(GOLDEN / "node-0/cluster/node-state.dat", tmp_path / C.NODE_STATE_FILE)
    (tmp_path / C.NODE_STATE_FILE).chmod(0o644)
    data = bytearray((tmp_path / C.NODE_STATE_FILE).read_bytes())
    at, fmt, value = patch
    struct.pack_into(fmt, data, at, value)
    (tmp_path / C.NODE_STATE_FILE).write_bytes(bytes(data))
    with pytest.raises(ClusterFileError, match=message) as info:
        NodeStateFile.open(tmp_path, read_only=True)
    assert (info.value.offset, info.value.limit) == (offset, 1 << 20)


def test_truncated_file(tmp_path):
    (tmp_path / C.NODE_STATE_FILE).write_bytes(fresh_file_head()[:40])
    with pytest.raises(ClusterFileError, match="file length=40 < 64") as info:
        NodeStateFile.open(tmp_path, read_only=True)
    assert (info.value.offset, info.value.limit) == (0, 40)
