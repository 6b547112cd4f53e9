"""PySyncObj behind the benchmark's ``KvSystem``: three ``pysyncobj_node`` processes on loopback TCP, each with a
control connection from this process.

Loads run inside a node (see ``pysyncobj_node``): ``run_load`` in the leader (no client hop: PySyncObj at its
best), ``run_failover`` in a follower (the leader is the one killed; a follower forwards each ``set`` to whoever
leads, and holds them while nobody does, PySyncObj's ``commandsWaitLeader``).

``batch=False`` (``pysyncobj``): every ``set`` goes out at once. ``batch=True`` (``pysyncobj-batch``): PySyncObj's
default, entries batched every ``appendEntriesPeriod`` (100 ms), for throughput. The timeouts default to the
failover settings of the benchmark (``FAILOVER_TIMEOUTS``: the heartbeat period and election timeout of the Aeron
golden run's cluster, 200 ms and 2 s, in PySyncObj's terms) unless given.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Client
from pathlib import Path

from harness.awaiting import await_condition
from harness.process_manager import ProcessManager

from benchmarks.cluster.load import FailoverSpec, LoadResult, LoadSpec
from benchmarks.cluster.pysyncobj_node import CONTROL_AUTHKEY
from benchmarks.cluster.systems import START_TIMEOUT_S, KvSystem, SystemUnavailable, reserve_tcp_ports

#: appendEntriesPeriod (the leader's heartbeat) 200 ms; a follower starts an election 2-3 s after it last heard
#: from the leader (PySyncObj draws it from [raftMinTimeout, raftMaxTimeout]).
FAILOVER_TIMEOUTS = {"append_entries_period": 0.2, "raft_min_timeout": 2.0, "raft_max_timeout": 3.0,
                     "connection_timeout": 3.5}
#: PySyncObj's own defaults (the batching configuration keeps them: its batch period is appendEntriesPeriod).
DEFAULT_TIMEOUTS = {"append_entries_period": 0.1, "raft_min_timeout": 0.4, "raft_max_timeout": 1.4,
                    "connection_timeout": 3.5}
#: A load's reply may take its drain time plus its run: the control connection waits this much over the spec.
REPLY_SLACK_S = 60.0


def _version() -> str:
    from importlib.metadata import version

    return version("pysyncobj")


class PySyncObjSystem(KvSystem):
    def __init__(self, batch: bool = False, timeouts: dict | None = None):
        self.batch = batch
        self.name = "pysyncobj-batch" if batch else "pysyncobj"
        self.label = "PySyncObj (batched)" if batch else "PySyncObj"
        self.timeouts = dict(timeouts or (DEFAULT_TIMEOUTS if batch else FAILOVER_TIMEOUTS))
        self.processes: ProcessManager | None = None
        self.nodes = []
        self.connections = []
        self.addresses: list[str] = []

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import pysyncobj  # noqa: F401
        except ImportError:
            return "pysyncobj is not installed (pip install pysyncobj, or the bench extra)"
        return None

    def describe(self) -> dict:
        return {"version": _version(), "batching": self.batch, **self.timeouts,
                "client": "load generator in the leader's process (run_load), in a follower (failover)",
                "tick": "single-threaded node, autoTick=False, the node's loop ticks"}

    def start(self, root: Path, timeout_s: float = START_TIMEOUT_S) -> None:
        reason = self.unavailable()
        if reason:
            raise SystemUnavailable(reason)
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        self.processes = ProcessManager(root / "logs")
        ports = reserve_tcp_ports(3)
        self.addresses = [f"127.0.0.1:{p}" for p in ports]
        options = [f"--{k.replace('_', '-')}={v}" for k, v in self.timeouts.items()]
        controls = []
        for index in range(3):
            control = root / f"control-{index}.sock"
            controls.append(control)
            self.nodes.append(self.processes.spawn_module(
                f"{self.name}-{index}", "benchmarks.cluster.pysyncobj_node", "--index", str(index),
                "--ports", ",".join(map(str, ports)), "--control", str(control),
                *(["--batch"] if self.batch else []), *options))
        for node, control in zip(self.nodes, controls):
            # The socket file appears at bind(), before listen(): a connect in between is refused, so retry it.
            self.connections.append(await_condition(
                lambda: Client(str(control), family="AF_UNIX", authkey=CONTROL_AUTHKEY), timeout_s,
                f"{node.name}'s control socket", processes=[node],
                ignore=(FileNotFoundError, ConnectionRefusedError)))

        def agreed_leader():
            statuses = [self._ask(i, "status", None, 10.0) for i in range(3)]
            leaders = {s["leader"] for s in statuses}
            return len(leaders) == 1 and None not in leaders and all(s["ready"] for s in statuses)

        await_condition(agreed_leader, timeout_s, f"{self.name}: three nodes agreeing on a leader",
                        processes=self.nodes, poll_interval_s=0.05)

    def _ask(self, index: int, command: str, argument, timeout_s: float):
        connection = self.connections[index]
        connection.send((command, argument))
        if not connection.poll(timeout_s):
            raise TimeoutError(f"{self.name} node {index}: no answer to {command!r} within {timeout_s:.0f}s")
        return connection.recv()

    def status(self, index: int) -> dict:
        return self._ask(index, "status", None, 10.0)

    def get(self, index: int, key: str):
        return self._ask(index, "get", key, 10.0)

    def leader(self) -> int | None:
        for index, node in enumerate(self.nodes):
            if node.is_alive:
                try:
                    address = self.status(index)["leader"]
                except (OSError, EOFError, TimeoutError):  # killed a moment ago: its reaping may lag; ask the next
                    continue
                return None if address is None else self.addresses.index(address)
        return None

    def leader_kill_target(self) -> int:
        index = self.leader()
        if index is None:
            raise RuntimeError(f"{self.name}: no leader")
        return os.getpgid(self.nodes[index].pid)

    def run_load(self, spec: LoadSpec) -> LoadResult:
        index = self.leader()
        if index is None:
            raise RuntimeError(f"{self.name}: no leader")
        budget = spec.count / (spec.rate or 1000.0) + (spec.max_seconds or 0) + spec.drain_s + REPLY_SLACK_S
        reply = self._ask(index, "load", spec.to_dict(), budget)
        if isinstance(reply, str):
            raise RuntimeError(f"{self.name} node {index}: {reply}")
        return LoadResult.from_dict(reply)

    def run_failover(self, spec: FailoverSpec) -> LoadResult:
        leader = self.leader()
        if leader is None:
            raise RuntimeError(f"{self.name}: no leader")
        follower = next(i for i in range(3) if i != leader and self.nodes[i].is_alive)
        reply = self._ask(follower, "failover", spec.to_dict(), spec.kill_after_s + spec.timeout_s + REPLY_SLACK_S)
        return LoadResult.from_dict(reply)

    def stop(self) -> None:
        for connection, node in zip(self.connections, self.nodes):
            try:
                if node.is_alive:
                    connection.send(("stop", None))
                    connection.poll(2.0)
            except OSError:
                pass
            connection.close()
        deadline = time.monotonic() + 3.0
        while any(n.is_alive for n in self.nodes) and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.processes is not None:
            self.processes.close()
        self.connections, self.nodes = [], []
