"""aeron-numba's cluster behind the benchmark's ``KvSystem``: three nodes of ``python -m aeron_numba.cluster``
(consensus module, media driver, archive and the example key-value service of
``aeron_numba/cluster/examples/key_value_service.py``) on 127.0.0.1-3 as ``LoopbackCluster`` lays them out, with
the Aeron golden run's timeouts (leader heartbeat timeout 2 s, interval 200 ms, election timeout 1 s), and a client
in this process: ``AeronCluster`` over a media driver of its own.

A put is the service's PUT request (``encode_put``, the token as its request id) offered on the session's ingress;
its acknowledgement is the leader's response on the egress (``decode_response``: status OK), matched by request
id. A refused offer (back pressure, no leader while one is elected) is a refused ``put``: the generator offers it
again and the wait counts in its latency. The client polls the egress in its ``poll`` and yields the core
(``sched_yield``) between empty polls: two cores are shared by the nodes' twelve processes, a driver and this one.

The nodes' agents idle with ``NODE_IDLE`` (``backoff`` here: spin, then yield, then park up to 1 ms; the golden
run's 1 ms ``sleeping`` would add up to a millisecond per hop) and the leader is known from each node's
node-role counter (type 201, ``ClusterRole.LEADER``). Killing the leader is SIGKILL to its node process (the
consensus module); the kernel then ends its driver, archive and service container (``child_processes.py``).
"""

from __future__ import annotations

import os
import random
import socket
import time
from pathlib import Path

from harness.aeron_dirs import await_cnc_ready, new_aeron_dir, read_counter, remove_aeron_dir
from harness.awaiting import await_condition
from harness.driver_settings import driver_env_for_benchmarks
from harness.process_manager import ProcessManager

from benchmarks.cluster.systems import START_TIMEOUT_S, LocalClientSystem, SystemUnavailable

SERVICE = "aeron_numba.cluster.examples.key_value_service:KeyValueService"
COMPILED_SERVICE = "aeron_numba.cluster.examples.key_value_service:CompiledKeyValueService"
NODE_IDLE_STRATEGY = "backoff"
CLIENT_DRIVER_IDLE_STRATEGY = "backoff"
PORT_STRIDE = 10
CONNECT_TIMEOUT_S = 30.0


def _missing() -> str | None:
    try:
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster  # noqa: F401
        from aeron_numba.cluster.examples.key_value_service import decode_response, encode_put  # noqa: F401
        from aeron_numba.cluster.loopback_cluster import LoopbackCluster  # noqa: F401
        from aeron_numba.commands import cluster  # noqa: F401
    except ImportError as exc:
        return f"aeron-numba's cluster is not complete in this checkout ({exc})"
    return None


def _ports_free(cluster) -> bool:
    """Every port of every member free on its loopback address (UDP and TCP)."""
    from aeron_numba.cluster.loopback_cluster import PORTS_PER_MEMBER, member_host

    for n in cluster.member_ids:
        for k in range(1, PORTS_PER_MEMBER):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as sock:
                    try:
                        sock.bind((member_host(n), cluster.port(n, k)))
                    except OSError:
                        return False
    return True


class AeronClusterKvClient:
    """``KvClient`` over an ``AeronCluster`` session with the key-value service."""

    def __init__(self, aeron, ctx):
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster
        from aeron_numba.cluster.client.egress_listener import EgressListener
        from aeron_numba.cluster.examples import key_value_service as kv

        self._kv = kv
        self._pending = None
        client = self

        class Listener(EgressListener):
            def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
                op, status, request_id, _ = kv.decode_response(bytes(buffer[offset:offset + length]))
                client._pending(request_id, status == kv.OK)

        self.session = AeronCluster.connect(ctx, aeron, egress_listener=Listener())
        self._offer = self.session.offer
        self._poll = self.session.poll_egress
        self._encode = kv.encode_put
        self._keys: dict[str, bytes] = {}

    def put(self, key: str, value: bytes, token: int) -> bool:
        encoded = self._keys.get(key)
        if encoded is None:
            encoded = self._keys[key] = key.encode()
        return self._offer(self._encode(token, encoded, value)) > 0

    def poll(self, on_complete, timeout_ns: int) -> int:
        self._pending = on_complete
        work = self._poll()
        if work or timeout_ns <= 0:
            return work
        end = time.perf_counter_ns() + timeout_ns
        while not work and time.perf_counter_ns() < end:
            os.sched_yield()
            work = self._poll()
        return work

    def close(self) -> None:
        if not self.session.is_closed:
            self.session.close()


class AeronClusterSystem(LocalClientSystem):
    name = "aeron"
    label = "aeron-numba"

    def __init__(self, compiled_service: bool = False, node_idle: str = NODE_IDLE_STRATEGY):
        self.service = COMPILED_SERVICE if compiled_service else SERVICE
        self.node_idle = node_idle
        self.cluster = None
        self.processes: ProcessManager | None = None
        self.nodes = []
        self.client_dir: Path | None = None
        self.aeron = None

    @classmethod
    def unavailable(cls) -> str | None:
        return _missing()

    def describe(self) -> dict:
        from aeron_numba.cluster.loopback_cluster import GOLDEN_TIMEOUTS

        return {"service": self.service.rsplit(":", 1)[1], "node_idle": self.node_idle,
                **{k.removeprefix("AERON_CLUSTER_").lower(): v for k, v in GOLDEN_TIMEOUTS.items()
                   if "HEARTBEAT" in k or k.endswith("ELECTION_TIMEOUT")},
                "client": f"this process, AeronCluster over its own driver ({CLIENT_DRIVER_IDLE_STRATEGY}), egress "
                          "polled, sched_yield between empty polls"}

    def start(self, root: Path, timeout_s: float = START_TIMEOUT_S) -> None:
        reason = self.unavailable()
        if reason:
            raise SystemUnavailable(reason)
        from aeron_numba.client import Aeron, Context
        from aeron_numba.cluster.loopback_cluster import LoopbackCluster

        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        idle = {"AERON_CONDUCTOR_IDLE_STRATEGY": self.node_idle, "AERON_ARCHIVE_IDLE_STRATEGY": self.node_idle,
                "AERON_CLUSTER_IDLE_STRATEGY": self.node_idle, "AERON_CLUSTER_SERVICE_CLASS_NAME": self.service,
                "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k"}
        rng = random.Random(os.getpid() ^ time.monotonic_ns())
        for _ in range(50):
            cluster = LoopbackCluster(root / "nodes", 3, base_port=rng.randrange(20000, 60000, 100),
                                      port_stride=PORT_STRIDE, extra_env=idle)
            if _ports_free(cluster):
                break
        else:
            raise RuntimeError("no free block of ports for three members on 127.0.0.1-3")
        self.cluster = cluster
        self.processes = ProcessManager(root / "logs")
        for n in cluster.member_ids:
            self.nodes.append(self.processes.spawn_module(f"node-{n}", "aeron_numba.cluster",
                                                          env=cluster.node_environment(n)))
        self.client_dir = new_aeron_dir("aeron-numba-bench-cluster-client")
        driver = self.processes.spawn_module("client-driver", "aeron_numba.driver", env=driver_env_for_benchmarks(
            CLIENT_DRIVER_IDLE_STRATEGY, AERON_DIR=str(self.client_dir), AERON_TERM_BUFFER_LENGTH="64k"))
        await_cnc_ready(self.client_dir, timeout_s, pid=driver.pid, processes=[driver]).close()
        self.aeron = Aeron.connect(Context(aeron_dir=str(self.client_dir)))
        await_condition(lambda: self.leader() is not None, timeout_s, "aeron-numba: a leader of three nodes",
                        processes=self.nodes, poll_interval_s=0.05, max_poll_interval_s=0.1)
        # Ready when a session connects and a put is answered.
        client = self.client()
        try:
            done = []
            await_condition(lambda: client.put("ready", b"", 0), timeout_s, "the first put offered",
                            processes=self.nodes)
            await_condition(lambda: client.poll(lambda token, ok, at_ns=None: done.append(ok), 1_000_000) or done,
                            timeout_s, "the first put answered", processes=self.nodes)
            if done != [True]:
                raise RuntimeError(f"the first put was answered {done}")
        finally:
            client.close()

    def _role(self, n: int) -> int | None:
        from aeron_numba.layout.cluster import NODE_ROLE_TYPE_ID

        aeron_dir = self.cluster.aeron_dir(n)
        if not self.nodes[n].is_alive or not (aeron_dir / "cnc.dat").exists():
            return None
        try:
            info = read_counter(aeron_dir, type_id=NODE_ROLE_TYPE_ID)
        except Exception:  # a cnc.dat being created or torn down is not a role yet
            return None
        return None if info is None else info.value

    def leader(self) -> int | None:
        from aeron_numba.layout.cluster import ClusterRole

        leaders = [n for n in self.cluster.member_ids if self._role(n) == ClusterRole.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def leader_pgid(self) -> int:
        index = self.leader()
        if index is None:
            raise RuntimeError("aeron-numba: no leader")
        return os.getpgid(self.nodes[index].pid)

    def client(self, *, failover: bool = False) -> AeronClusterKvClient:
        from aeron_numba.cluster.context import AeronClusterContext

        ctx = AeronClusterContext.from_env(self.cluster.client_environment(self.client_dir),
                                           message_timeout_ns=int(CONNECT_TIMEOUT_S * 1e9)).conclude()
        return AeronClusterKvClient(self.aeron, ctx)

    def stop(self) -> None:
        if self.aeron is not None:
            self.aeron.close()
            self.aeron = None
        for node in self.nodes:
            if node.is_alive:  # SIGTERM: the node stops its service, archive and driver, then exits
                try:
                    node.terminate(15.0)
                except Exception:  # it is killed below either way
                    pass
        if self.processes is not None:
            self.processes.close()
        if self.client_dir is not None:
            remove_aeron_dir(self.client_dir)
        self.nodes = []
