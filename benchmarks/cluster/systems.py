"""The interface every system of the cluster benchmark sits behind, and what they share.

A ``KvSystem`` starts three nodes on loopback (``start``), says which node leads (``leader``) and the process group
to kill to kill it (``leader_kill_target``, ``kill``), runs a load against itself (``run_load`` with a ``LoadSpec``,
``run_failover`` with a ``FailoverSpec``; both return a ``LoadResult``) and stops (``stop``: every process it
started is killed and reaped, its directories removed). Systems whose client lives in this process (Aeron, etcd)
get ``run_load``/``run_failover`` from ``LocalClientSystem``: the generator of ``load.py`` drives their
``KvClient`` here. PySyncObj has no client protocol (a Python user puts the application in the node), so its
generator runs the same functions inside a node process and sends the result back.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from pathlib import Path

from benchmarks.cluster.load import (FailoverSpec, KvClient, LoadResult, LoadSpec, kill_process_group, run_failover,
                                     run_open_loop)

START_TIMEOUT_S = 60.0


class SystemUnavailable(RuntimeError):
    """The system cannot run here (not installed); the message says what is missing."""


class KvSystem(ABC):
    #: Short name (case names, ``--only``) and what the report prints.
    name: str = ""
    label: str = ""

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this system cannot run on this machine (None: it can)."""
        return None

    @abstractmethod
    def start(self, root: Path, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start three nodes under ``root`` and wait until they have a leader and take puts."""

    @abstractmethod
    def leader(self) -> int | None:
        """The leading node's index (0..2), None while there is none."""

    @abstractmethod
    def leader_kill_target(self) -> int:
        """What ``kill`` takes to kill the leading node, every process of it: its process group by default."""

    def kill(self, target: int) -> None:
        """Kill a node at once (``target`` from ``leader_kill_target``): SIGKILL to its process group."""
        kill_process_group(target)

    @abstractmethod
    def run_load(self, spec: LoadSpec) -> LoadResult: ...

    @abstractmethod
    def run_failover(self, spec: FailoverSpec) -> LoadResult: ...

    @abstractmethod
    def stop(self) -> None: ...

    def status_text(self) -> str:
        """The nodes' state in a line, for a failure's message (what each node thinks it is)."""
        return ""

    def await_replicated(self, timeout_s: float) -> None:
        """Wait until every node has what the leader committed, where the system lets one see that (before a
        failover: the kill then finds the followers caught up, as Aeron's golden run's did). By default nothing
        to wait for."""

    def restart_killed(self, target: int, timeout_s: float) -> bool:
        """Bring back the node ``kill(target)`` killed, caught up with the others, for another failover run; False
        where the system cannot (one failover run then)."""
        return False

    def describe(self) -> dict:
        """Settings worth printing beside the figures (versions, timeouts, batching, where the client runs)."""
        return {}

    def member_pids(self) -> set[int] | None:
        """Every process of the three members, for their CPU per put and idle CPU; None where the members' CPU
        cannot be told from the client's (a load generator that runs inside a node)."""
        return None


class LocalClientSystem(KvSystem):
    """A system whose client runs in this process: ``client()`` makes one for a load run."""

    @abstractmethod
    def client(self, *, failover: bool = False) -> KvClient:
        """A connected client; ``failover``: one that finds the new leader after the old one is killed."""

    def run_load(self, spec: LoadSpec) -> LoadResult:
        client = self.client()
        try:
            return run_open_loop(client, spec)
        finally:
            client.close()

    def run_failover(self, spec: FailoverSpec) -> LoadResult:
        client = self.client(failover=True)
        try:
            result = run_failover(client, spec, kill=self.kill)
            # A client that sees the new leader's NewLeaderEvent (Aeron's) notes when: the golden run's figure.
            new_leader_ns = getattr(client, "new_leader_ns", None)
            if new_leader_ns is not None and result.kill_ns is not None and new_leader_ns > result.kill_ns:
                result.extra["new_leader_event_ns"] = new_leader_ns
            return result
        finally:
            client.close()


def reserve_tcp_ports(count: int) -> list[int]:
    """``count`` distinct loopback TCP ports that were free a moment ago (bound to port 0, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
