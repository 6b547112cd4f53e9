"""aeron-numba's cluster behind the benchmark's ``KvSystem``: three nodes of ``python -m aeron_numba.cluster``
(consensus module, media driver, archive and the example key-value service of
``aeron_numba/cluster/examples/key_value_service.py``) on 127.0.0.1-3, started by the cluster harness
(``harness/cluster.py``: ``LoopbackCluster``'s layout, the Aeron golden run's timeouts: leader heartbeat timeout
2 s, interval 200 ms, election timeout 1 s), and a client in this process: ``AeronCluster`` over a media driver of
its own.

A put is the service's PUT request (``encode_put``, the run's base plus the token as its request id) offered on the
ingress of one session kept for the system's life; its acknowledgement is the leader's response on the egress
(``decode_response``: status OK), matched by request id. A refused offer (back pressure, no leader while one is
elected) is a refused ``put``: the generator offers it again and the wait counts in its latency. The client polls
the egress in its ``poll`` and yields the core (``sched_yield``) between empty polls: two cores are shared by the
nodes' twelve processes, a driver and this one.

Settings over the harness's test settings (``NODE_ENV``): every agent of a node and the client's driver idle with
``backoff`` (spin, yield, then park up to 1 ms; the harness's 1 ms ``sleeping`` would add up to a millisecond per
hop) and the driver's loss generator off; the log's term is 256 KiB (``LOG_TERM_LENGTH``, its archive segments
the same), not the harness's 64 KiB: a follower's receive window is half a term up to 128 KiB, and with 64 KiB
terms a follower 32 KiB behind the fastest at 10 k/s (20 ms on this machine) dropped the log's frames past its
window, NAKed a gap the leader had run a term past and stalled into an election (Aeron's own default log term
is 64 MiB). The leader is the harness's (node-role counter LEADER, election
closed); killing it is the harness's ``kill`` (SIGSTOP then SIGKILL of the node process and its three children).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from aeron_numba.driver.context import idle_strategy_environment
from harness.aeron_dirs import await_cnc_ready
from harness.driver_settings import driver_env_for_benchmarks

from benchmarks.cluster.load import LoadSpec
from benchmarks.cluster.systems import START_TIMEOUT_S, LocalClientSystem, SystemUnavailable

SERVICE = "aeron_numba.cluster.examples.key_value_service:KeyValueService"
COMPILED_SERVICE = "aeron_numba.cluster.examples.key_value_service:CompiledKeyValueService"
IDLE_STRATEGY = "backoff"
LOG_TERM_LENGTH = "256k"
NODE_ENV = {**idle_strategy_environment(IDLE_STRATEGY), "AERON_ARCHIVE_IDLE_STRATEGY": IDLE_STRATEGY,
            "AERON_CLUSTER_IDLE_STRATEGY": IDLE_STRATEGY, "AERON_DEBUG_LOSS_CONTROL": "false",
            "AERON_CLUSTER_LOG_CHANNEL": f"aeron:udp?term-length={LOG_TERM_LENGTH}",
            "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": LOG_TERM_LENGTH}
CONNECT_TIMEOUT_S = 30.0


def _missing() -> str | None:
    try:
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster  # noqa: F401
        from aeron_numba.cluster.examples.key_value_service import decode_response, encode_put  # noqa: F401
        from harness.cluster import ClusterHarness  # noqa: F401
    except ImportError as exc:
        return f"aeron-numba's cluster is not complete in this checkout ({exc})"
    return None


#: Request ids of one run are ``run * RUN_ID_STRIDE + token``: an answer to an earlier run's put (an overloaded run
#: leaves some in flight) is never taken for this run's.
RUN_ID_STRIDE = 1 << 32


class AeronClusterKvClient:
    """``KvClient`` over an ``AeronCluster`` session with the key-value service.

    One session serves every run of a system (as one client session served the golden run's whole history; a
    session per run would add a connect per case): ``begin_run`` starts a run's request ids afresh and sends a
    keep-alive, ``close`` ends a run and keeps the session, ``close_session`` closes it."""

    def __init__(self, aeron, ctx):
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster
        from aeron_numba.cluster.client.egress_listener import EgressListener
        from aeron_numba.cluster.examples import key_value_service as kv

        self._pending = None
        self._base = 0
        self.new_leader_ns: int | None = None  # when the last NewLeaderEvent came (time.perf_counter_ns)
        client = self

        class Listener(EgressListener):
            def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
                op, status, request_id, _ = kv.decode_response(bytes(buffer[offset:offset + length]))
                token = request_id - client._base
                if client._pending is not None and 0 <= token < RUN_ID_STRIDE:
                    client._pending(token, status == kv.OK)

            def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints):
                client.new_leader_ns = time.perf_counter_ns()  # the load generator's clock

        self.session = AeronCluster.connect(ctx, aeron, egress_listener=Listener())
        self._offer = self.session.offer
        self._poll = self.session.poll_egress
        self._encode = kv.encode_put
        self._keys: dict[str, bytes] = {}

    def begin_run(self) -> "AeronClusterKvClient":
        self._base += RUN_ID_STRIDE
        self._pending = None
        self.session.send_keep_alive()
        return self

    def put(self, key: str, value: bytes, token: int) -> bool:
        encoded = self._keys.get(key)
        if encoded is None:
            encoded = self._keys[key] = key.encode()
        return self._offer(self._encode(self._base + token, encoded, value)) > 0

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
        self._pending = None

    def close_session(self) -> None:
        if not self.session.is_closed:
            self.session.close()


class AeronClusterSystem(LocalClientSystem):
    name = "aeron"
    label = "aeron-numba"

    def __init__(self, compiled_service: bool = False, env: dict[str, str] | None = None,
                 process_layout: str = "one-process"):
        self.service = COMPILED_SERVICE if compiled_service else SERVICE
        self.process_layout = process_layout
        if process_layout != "one-process":
            self.name = f"aeron-{process_layout}"
            self.label = f"aeron-numba ({process_layout})"
        elif compiled_service:  # the service on the member's thread (the node command's default for it)
            self.name = "aeron-compiled"
            self.label = "aeron-numba (compiled service in the member)"
        self.env = {**NODE_ENV, **(env or {})}
        self.harness = None
        self.client_driver = None
        self.client_dir: Path | None = None
        self.aeron = None
        self.session_client: AeronClusterKvClient | None = None

    @classmethod
    def unavailable(cls) -> str | None:
        return _missing()

    def describe(self) -> dict:
        from aeron_numba.cluster.loopback_cluster import GOLDEN_TIMEOUTS

        return {"service": self.service.rsplit(":", 1)[1], "layout": self.process_layout, "idle": IDLE_STRATEGY,
                "log_term_length": self.env.get("AERON_CLUSTER_LOG_CHANNEL", "").rpartition("term-length=")[2],
                **{k.removeprefix("AERON_CLUSTER_").lower(): v for k, v in GOLDEN_TIMEOUTS.items()
                   if "HEARTBEAT" in k or k.endswith("ELECTION_TIMEOUT")},
                "client": f"this process, AeronCluster over its own driver ({IDLE_STRATEGY}), egress polled, "
                          "sched_yield between empty polls"}

    @property
    def processes(self):
        return self.harness.process_manager if self.harness is not None else None

    def start(self, root: Path, timeout_s: float = START_TIMEOUT_S) -> None:
        reason = self.unavailable()
        if reason:
            raise SystemUnavailable(reason)
        from aeron_numba.client import Aeron, Context
        from harness.cluster import ClusterHarness
        from harness.process_manager import ProcessManager

        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        self.harness = ClusterHarness(ProcessManager(root / "logs"), service=self.service, env=self.env,
                                      name="bench", process_layout=self.process_layout)
        self.harness.start(timeout_s=timeout_s)
        # Three members, not a leader and one follower: a member stuck catching up would leave no quorum to fail
        # over to, and a lighter machine than the peers get.
        self.harness.await_followers(2, timeout_s)
        self.client_dir = self.harness.root_dir / "bench-client" / "aeron"
        self.client_driver = self.harness.process_manager.spawn_module(
            "client-driver", "aeron_numba.driver",
            env=driver_env_for_benchmarks(IDLE_STRATEGY, AERON_DIR=str(self.client_dir),
                                          AERON_DIR_DELETE_ON_START="true", AERON_TERM_BUFFER_LENGTH="64k"))
        await_cnc_ready(self.client_dir, timeout_s, pid=self.client_driver.pid,
                        processes=[self.client_driver]).close()
        self.aeron = Aeron.connect(Context(aeron_dir=str(self.client_dir)))
        # Ready when a session connects and a put is answered.
        result = self.run_load(LoadSpec(rate=None, count=1, drain_s=timeout_s))
        if not result.ok.all():
            raise RuntimeError(f"aeron-numba: the first put was not acknowledged within {timeout_s:.0f}s")

    def member_pids(self) -> set[int] | None:
        """Each running node and every process below it (its service container; in the ``processes`` layout its
        driver and archive too); the client and its driver are this process and the harness's."""
        return set().union(*(node.pids() for node in self.harness.running_nodes()))

    def leader(self) -> int | None:
        node = self.harness.leader()
        return None if node is None else node.member_id

    def status_text(self) -> str:
        parts = []
        for node in self.harness.nodes:
            if not node.is_running:
                parts.append(f"member {node.member_id} down")
                continue
            role, election = node.role(), node.election_state()
            parts.append(f"member {node.member_id} {getattr(role, 'name', role)}, election "
                         f"{getattr(election, 'name', election)}, term {node.leadership_term_id()}, commit "
                         f"{node.commit_position()}")
        return "; ".join(parts)

    def await_replicated(self, timeout_s: float) -> None:
        """Every member's commit position at the leader's: a follower the rate ladder lapped catches up from the
        leader's archive first (its log-stall election), and a failover measured meanwhile would wait for it."""
        leader = self.harness.await_leader(timeout_s)
        position = leader.commit_position()
        if position is None:
            raise RuntimeError(f"aeron-numba: the leader (member {leader.member_id}) has no commit position counter")
        self.harness.await_commit_position(position, timeout_s)

    def leader_kill_target(self) -> int:
        index = self.leader()
        if index is None:
            raise RuntimeError("aeron-numba: no leader")
        return index

    def kill(self, target: int) -> None:
        """SIGKILL member ``target``'s node and children (the harness stops them all first, then kills them)."""
        self.harness.kill(target)

    def restart_killed(self, target: int, timeout_s: float) -> bool:
        """The killed member restarted from its dirs; it has rejoined as a follower when this returns (the next
        run's ``await_replicated`` waits for it to catch up)."""
        self.harness.restart(target, timeout_s)
        self.harness.await_followers(2, timeout_s)
        return True

    def client(self, *, failover: bool = False) -> AeronClusterKvClient:
        from aeron_numba.cluster.context import AeronClusterContext

        if self.session_client is None or self.session_client.session.is_closed:
            ctx = AeronClusterContext.from_env(self.harness.layout.client_environment(self.client_dir),
                                               message_timeout_ns=int(CONNECT_TIMEOUT_S * 1e9)).conclude()
            self.session_client = AeronClusterKvClient(self.aeron, ctx)
        return self.session_client.begin_run()

    def stop(self) -> None:
        if self.session_client is not None:
            try:
                self.session_client.close_session()
            except Exception:  # a session the cluster closed already, a client timed out: the nodes go anyway
                pass
            self.session_client = None
        if self.aeron is not None:
            self.aeron.close()
            self.aeron = None
        if self.harness is not None:
            for node in self.harness.running_nodes():  # SIGTERM: each node stops its children in order
                try:
                    self.harness.stop(node.member_id, timeout_s=15.0)
                except Exception:  # close() kills it either way
                    pass
            self.harness.close()
            self.harness.process_manager.close()
