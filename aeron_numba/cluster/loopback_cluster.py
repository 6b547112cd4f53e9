"""The settings of an N-member cluster on one machine: each member on its own loopback address 127.0.0.(n+1), its
own ports and dirs, as the golden 3-node Aeron run was laid out (``tests/golden/aeron-1.48/cluster-3node``).

``LoopbackCluster`` only computes names: the cluster-members string, each node's ``AERON_*`` variables for
``python -m aeron_numba.cluster``, and a client's. It starts nothing, so the node command's demo and the test
harness (``harness/cluster.py``, which the library may not import) build their clusters from the same settings.

Ports: member n's endpoint k (1 archive control, 2 ingress, 3 consensus, 4 log, 5 catch-up) is
``base_port + port_stride * n + k``; replication and the archive's control responses take ephemeral ports on the
member's address, as in the golden run. The golden run used base 20000 and stride 100; tests take a base of their
own (so parallel tests do not collide) and stride 10. A link between two members is cut by address, not port (the
driver's loss generator drops what is sent to a blocked host), so ephemeral ports are cut too.

Timing: ``GOLDEN_TIMEOUTS`` are the golden run's (leader heartbeat timeout 2 s, election timeout 1 s, startup
canvass 5 s); ``NODE_IDLE`` makes every agent of a node sleep 1 ms when idle, as the golden run did, so that three
nodes and their clients share two cores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from aeron_numba.driver.context import idle_strategy_environment
from aeron_numba.errors import ConfigurationError

ARCHIVE_CONTROL_PORT = 1
INGRESS_PORT = 2
CONSENSUS_PORT = 3
LOG_PORT = 4
CATCHUP_PORT = 5
#: The port numbers a member takes above its base (the highest k above, plus room for more).
PORTS_PER_MEMBER = 10
MAX_MEMBERS = 10  # 127.0.0.1 .. 127.0.0.10; Aeron's clusters are 3 or 5 members in practice

#: The golden run's consensus timing (its README), as AERON_CLUSTER_* variables.
GOLDEN_TIMEOUTS = {
    "AERON_CLUSTER_LEADER_HEARTBEAT_TIMEOUT": "2s",
    "AERON_CLUSTER_LEADER_HEARTBEAT_INTERVAL": "200ms",
    "AERON_CLUSTER_ELECTION_TIMEOUT": "1s",
    "AERON_CLUSTER_ELECTION_STATUS_INTERVAL": "100ms",
    "AERON_CLUSTER_STARTUP_CANVASS_TIMEOUT": "5s",
    "AERON_CLUSTER_SESSION_TIMEOUT": "10s",
}
#: Every agent of a node sleeps when it has no work (1 ms, the golden run's sleeping idle strategy).
NODE_IDLE = {
    **idle_strategy_environment("sleeping"),  # every driver agent thread, in any threading mode
    "AERON_ARCHIVE_IDLE_STRATEGY": "sleeping",
    "AERON_CLUSTER_IDLE_STRATEGY": "sleeping",
}
#: Small terms and segments (64 KiB, Aeron's smallest segment), as the golden run had.
SMALL_TERMS = {
    "AERON_TERM_BUFFER_LENGTH": "64k",
    "AERON_IPC_TERM_BUFFER_LENGTH": "64k",
    "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "64k",
    "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
    "AERON_ARCHIVE_CATALOG_CAPACITY": "64k",
}
#: Client liveness for a node's clients when several nodes start on two cores: a starting service container or
#: consensus module loads its kernels while its client conductor thread waits for the GIL, which has taken over
#: Aeron's default 10 s there. (The unblock timeout must stay above it.)
CROWDED_MACHINE = {
    "AERON_CLIENT_LIVENESS_TIMEOUT": "30s",
    "AERON_PUBLICATION_UNBLOCK_TIMEOUT": "40s",
    "AERON_DRIVER_TIMEOUT": "30000",
}
INGRESS_CHANNEL = "aeron:udp?term-length=64k"
LOG_CHANNEL = "aeron:udp?term-length=64k"


def member_host(member_id: int) -> str:
    """The loopback address of member ``member_id``: 127.0.0.(id+1)."""
    return f"127.0.0.{member_id + 1}"


@dataclass
class LoopbackCluster:
    """Where each member of a cluster on this machine listens and keeps its files.

    Parameters
    ----------
    root_dir : path
        Each member's dirs are ``<root_dir>/node-<n>/{aeron,cluster,archive}``.
    member_count : int
        3 by default; 1 to ``MAX_MEMBERS``.
    base_port, port_stride : int
        Member n's endpoint k is at ``base_port + port_stride * n + k``.
    cluster_id : int
    extra_env : dict
        More ``AERON_*`` variables for every node, last (so they win).
    """

    root_dir: Path
    member_count: int = 3
    base_port: int = 20000
    port_stride: int = PORTS_PER_MEMBER
    cluster_id: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root_dir = Path(self.root_dir)
        if not 1 <= self.member_count <= MAX_MEMBERS:
            raise ConfigurationError(f"member_count={self.member_count} must be in [1, {MAX_MEMBERS}]")
        if self.port_stride < PORTS_PER_MEMBER:
            raise ConfigurationError(f"port_stride={self.port_stride} must be >= {PORTS_PER_MEMBER}")
        highest = self.base_port + self.port_stride * (self.member_count - 1) + PORTS_PER_MEMBER
        if not 1024 <= self.base_port or highest > 65535:
            raise ConfigurationError(f"base_port={self.base_port}: the members' ports must be in [1024, 65535], the "
                                     f"last would be {highest}")

    # --------------------------------------------------------------------------------------- addresses
    @property
    def member_ids(self) -> range:
        return range(self.member_count)

    def port(self, member_id: int, which: int) -> int:
        return self.base_port + self.port_stride * member_id + which

    def endpoint(self, member_id: int, which: int) -> str:
        return f"{member_host(member_id)}:{self.port(member_id, which)}"

    def cluster_members(self) -> str:
        """Aeron's cluster-members string: ``id,ingress,consensus,log,catchup,archive`` per member, ``|`` between."""
        return "|".join(
            ",".join([str(n)] + [self.endpoint(n, k) for k in (INGRESS_PORT, CONSENSUS_PORT, LOG_PORT, CATCHUP_PORT,
                                                              ARCHIVE_CONTROL_PORT)])
            for n in self.member_ids)

    def ingress_endpoints(self) -> str:
        """The client's ingress endpoints: ``0=host:port,1=...``."""
        return ",".join(f"{n}={self.endpoint(n, INGRESS_PORT)}" for n in self.member_ids)

    # -------------------------------------------------------------------------------------------- dirs
    def node_dir(self, member_id: int) -> Path:
        return self.root_dir / f"node-{member_id}"

    def aeron_dir(self, member_id: int) -> Path:
        return self.node_dir(member_id) / "aeron"

    def cluster_dir(self, member_id: int) -> Path:
        return self.node_dir(member_id) / "cluster"

    def archive_dir(self, member_id: int) -> Path:
        return self.node_dir(member_id) / "archive"

    # ---------------------------------------------------------------------------------------- settings
    def node_environment(self, member_id: int) -> dict[str, str]:
        """The ``AERON_*`` variables of member ``member_id``'s ``python -m aeron_numba.cluster``."""
        if member_id not in self.member_ids:
            raise ConfigurationError(f"member_id={member_id} must be in [0, {self.member_count - 1}]")
        host = member_host(member_id)
        return {
            "AERON_DIR": str(self.aeron_dir(member_id)),
            "AERON_DIR_DELETE_ON_START": "true",
            "AERON_CLUSTER_DIR": str(self.cluster_dir(member_id)),
            "AERON_ARCHIVE_DIR": str(self.archive_dir(member_id)),
            "AERON_CLUSTER_ID": str(self.cluster_id),
            "AERON_CLUSTER_MEMBER_ID": str(member_id),
            "AERON_CLUSTER_MEMBERS": self.cluster_members(),
            "AERON_CLUSTER_INGRESS_CHANNEL": INGRESS_CHANNEL,
            "AERON_CLUSTER_LOG_CHANNEL": LOG_CHANNEL,
            "AERON_CLUSTER_REPLICATION_CHANNEL": f"aeron:udp?endpoint={host}:0",
            "AERON_ARCHIVE_CONTROL_CHANNEL": f"aeron:udp?endpoint={self.endpoint(member_id, ARCHIVE_CONTROL_PORT)}",
            "AERON_ARCHIVE_REPLICATION_CHANNEL": f"aeron:udp?endpoint={host}:0",
            "AERON_ARCHIVE_CONTROL_RESPONSE_CHANNEL": f"aeron:udp?endpoint={host}:0",
            **SMALL_TERMS,
            **NODE_IDLE,
            **CROWDED_MACHINE,
            **GOLDEN_TIMEOUTS,
            **self.extra_env,
        }

    def client_environment(self, aeron_dir: str | os.PathLike, egress_host: str = "127.0.0.1") -> dict[str, str]:
        """The ``AERON_*`` variables of an ``AeronCluster`` client whose media driver runs in ``aeron_dir``."""
        return {
            "AERON_DIR": str(aeron_dir),
            "AERON_CLUSTER_INGRESS_CHANNEL": INGRESS_CHANNEL,
            "AERON_CLUSTER_INGRESS_ENDPOINTS": self.ingress_endpoints(),
            "AERON_CLUSTER_EGRESS_CHANNEL": f"aeron:udp?endpoint={egress_host}:0",
        }
