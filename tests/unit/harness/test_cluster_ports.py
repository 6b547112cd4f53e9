"""The cluster harness's port blocks: two harnesses (in this process or another) never get the same ports, and a
block whose ports are taken is skipped."""

from __future__ import annotations

import socket

from harness import cluster as cluster_harness
from harness.cluster import allocate_base_port
from aeron_numba.cluster.loopback_cluster import PORTS_PER_MEMBER


def _ports(base: int, members: int) -> set[int]:
    return {base + PORTS_PER_MEMBER * n + k for n in range(members) for k in range(1, PORTS_PER_MEMBER)}


def test_successive_blocks_do_not_overlap_and_stay_in_range(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_harness, "_PORT_COUNTER_FILE", tmp_path / "ports")
    bases = [allocate_base_port(5) for _ in range(4)]
    taken = [_ports(base, 5) for base in bases]
    for i, ports in enumerate(taken):
        assert min(ports) >= cluster_harness.PORT_RANGE[0] and max(ports) < cluster_harness.PORT_RANGE[1]
        for other in taken[i + 1:]:
            assert not ports & other


def test_a_block_with_a_port_in_use_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_harness, "_PORT_COUNTER_FILE", tmp_path / "ports")
    first = allocate_base_port(3)
    (tmp_path / "ports").write_text(str((first - cluster_harness.PORT_RANGE[0]) // cluster_harness.PORT_BLOCK))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("127.0.0.2", first + PORTS_PER_MEMBER + 3))  # member 1's consensus port
        second = allocate_base_port(3)
    assert second != first and not _ports(second, 3) & {first + PORTS_PER_MEMBER + 3}
