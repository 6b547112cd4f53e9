"""An N-member Aeron cluster on this machine for tests and benchmarks: ``ClusterHarness``.

Each member is one ``python -m aeron_numba.cluster`` process (the node command: media driver, archive and consensus
module in one process with the service container as its child, or with ``process_layout="processes"`` the
consensus module with its media driver, archive and service container as children) on its own loopback address
127.0.0.(n+1), with its own aeron, cluster and archive dirs under one unique root in /dev/shm, and ports unique to
the harness (a lock-protected counter hands out blocks, so pytest-xdist workers and parallel runs do not collide).
Settings come from ``aeron_numba.cluster.loopback_cluster.LoopbackCluster`` (what the node command's demo also uses)
plus the test settings here: 64 KiB terms, sleeping idle strategies, the golden run's consensus timeouts (leader
heartbeat 2 s, election 1 s) but a startup canvass of 30 s (so the first election waits for members that start
late), a client liveness of 30 s (``CROWDED_MACHINE``: three nodes of Python processes start on two cores) and the
driver's loss generator on.

Usage::

    with ClusterHarness(process_manager) as cluster:       # or the ``cluster`` pytest fixture
        cluster.start()                                     # every member, then await a leader
        leader = cluster.await_leader()                     # a ClusterNode: role LEADER, election CLOSED
        env = cluster.client_environment()                  # AERON_* of an AeronCluster on the client driver
        ...
        cluster.kill(leader.member_id)                      # SIGKILL the node and its children at once
        cluster.await_leader(exclude=(leader.member_id,))
        cluster.restart(leader.member_id)                   # same dirs and settings

Reading a member: ``node.role()``, ``node.election_state()``, ``node.commit_position()``, ``node.module_state()``,
``node.counter(type_id)`` read its counters (spec §10, ``layout/cluster.py``) in its driver's ``cnc.dat``, mapped
for each read and only while the node runs (a killed node's file would show its last values). With the
``KeyValueProbeService`` (``harness/cluster_services.py``, the default service here) ``node.service_state()``
reads the key-value store's applied count, state hash and log position, which ``await_service_state`` waits on.

Faults: ``kill`` (SIGSTOP the node and its children, then SIGKILL them all, so none reacts to another's death),
``pause``/``resume`` (SIGSTOP/SIGCONT of all of them), ``stop`` (SIGTERM: the node stops its children in order),
``restart``, ``wipe`` (remove a stopped member's dirs), ``cut``/``heal`` (the link between two members: each one's
driver drops what it sends to the other's address, ``driver/loss_generator.py``; kept across restarts).
Clients: work registered with ``add_background_work`` (``KeyValueClient`` registers its egress poll and keep-alive)
runs whenever a harness call waits, so a session outlives a member's stop or restart as an application's would.
``close()`` (the ``with`` block's end, the fixture's teardown) kills every process the harness started, every
child of theirs it has seen, and removes the root dir, whether the test passed or not.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from aeron_numba.commands.cluster import LAYOUT_ONE_PROCESS, LAYOUTS
from aeron_numba.cluster.loopback_cluster import CROWDED_MACHINE, PORTS_PER_MEMBER, LoopbackCluster, member_host
from aeron_numba.driver.context import idle_strategy_environment
from aeron_numba.layout import cluster as C
from harness.aeron_dirs import SHM_ROOT, AeronCounters, new_aeron_dir, remove_aeron_dir, try_open_cnc
from harness.awaiting import NotYet, await_condition
from harness.driver_settings import driver_env_for_tests
from harness.process_manager import ManagedProcess, ProcessManager, descendant_pids, parent_pid, pid_alive

#: The service the harness's nodes run unless told otherwise: the example key-value store, its state in counters.
DEFAULT_SERVICE = "harness.cluster_services:KeyValueProbeService"
#: How long a node may take to print its start-up line (cold Numba caches compile first).
NODE_START_TIMEOUT_S = 120.0
DEFAULT_TIMEOUT_S = 60.0
#: Ports handed out to harnesses: below Linux's ephemeral range (32768-60999), above the golden run's 20000s.
PORT_RANGE = (21000, 32000)
PORT_BLOCK = 64
_PORT_COUNTER_FILE = Path("/tmp") / "aeron-numba-harness-ports"
_START_LINE = re.compile(r"aeron-numba cluster node: member (\d+) .*; pid (\d+), media driver pid (\d+), archive pid "
                         r"(\d+), service container pid (\d+)")


def _udp_port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def allocate_base_port(member_count: int) -> int:
    """A base port whose ``PORTS_PER_MEMBER * member_count`` ports are free on every member's address, taken from a
    counter shared by every process on this machine (a locked file), so two harnesses never get the same block."""
    blocks_needed = -(-PORTS_PER_MEMBER * member_count // PORT_BLOCK)
    block_count = (PORT_RANGE[1] - PORT_RANGE[0]) // PORT_BLOCK
    with open(_PORT_COUNTER_FILE, "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        text = counter.read().strip()
        next_block = int(text) if text.isdigit() else (os.getpid() % block_count)
        for _ in range(block_count):
            block = next_block % block_count
            if block + blocks_needed > block_count:
                next_block = 0
                continue
            next_block = block + blocks_needed
            base = PORT_RANGE[0] + block * PORT_BLOCK
            if all(_udp_port_free(member_host(n), base + PORTS_PER_MEMBER * n + k)
                   for n in range(member_count) for k in range(1, PORTS_PER_MEMBER)):
                counter.seek(0)
                counter.truncate()
                counter.write(str(next_block))
                return base
        raise RuntimeError(f"no free block of {PORTS_PER_MEMBER * member_count} UDP ports in {PORT_RANGE}")


def cluster_env_for_tests(**overrides: str) -> dict[str, str]:
    """The ``AERON_*`` variables the harness adds to ``LoopbackCluster``'s for every node: the test driver's
    buffers, Aeron's client liveness, the loss generator, short session timeout, sleeping idle strategies but for
    the member's thread."""
    return {
        **driver_env_for_tests(),
        **CROWDED_MACHINE,  # not the test drivers' 2 s client liveness: see loopback_cluster
        "AERON_IPC_TERM_BUFFER_LENGTH": "64k",
        "AERON_TERM_BUFFER_LENGTH": "64k",
        "AERON_DEBUG_LOSS_CONTROL": "true",
        **idle_strategy_environment("sleeping"),
        # ... except the member's own thread (one-process layout), which runs the node command's default: a backoff
        # that parks at once and wakes on its sockets, doorbell and deadlines (clustered_media_driver.py), the path
        # users run, and no dearer on two cores than a sleep.
        "AERON_SHARED_IDLE_STRATEGY": "backoff",
        # Members started together on two cores can be ready seconds apart: a long startup canvass lets the first
        # election wait for all of them (it ends as soon as every member has answered), so no member starts as a
        # late follower that must catch up (a separate test does that on purpose).
        "AERON_CLUSTER_STARTUP_CANVASS_TIMEOUT": "30s",
        **overrides,
    }


@dataclass
class ServiceState:
    """What a ``KeyValueProbeService`` member has applied: how many requests, the store's state hash, and the log
    position after the last one it applied."""
    applied: int
    state_hash: int
    log_position: int


class ClusterNode:
    """One member: its dirs, its current node process, and readings of its counters."""

    def __init__(self, harness: "ClusterHarness", member_id: int):
        self.harness = harness
        self.member_id = member_id
        self.host = member_host(member_id)
        layout = harness.layout
        self.aeron_dir = layout.aeron_dir(member_id)
        self.cluster_dir = layout.cluster_dir(member_id)
        self.archive_dir = layout.archive_dir(member_id)
        self.process: ManagedProcess | None = None
        self.child_pids: dict[str, int] = {}  # from the start-up line: media driver, archive, service container
        self.blocked_hosts: set[str] = set()
        self.starts = 0

    # ------------------------------------------------------------------------------------------- state
    def node_dir_exists(self) -> bool:
        return any(path.exists() for path in (self.aeron_dir, self.cluster_dir, self.archive_dir))

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.is_alive

    @property
    def is_paused(self) -> bool:
        return self.is_running and self.process.state == "T"

    def pids(self) -> set[int]:
        """The node process and every live process below it."""
        if self.process is None or not pid_alive(self.process.pid):
            return {p for p in self.child_pids.values() if pid_alive(p)}
        return {self.process.pid} | descendant_pids(self.process.pid) | {
            p for p in self.child_pids.values() if pid_alive(p)}

    def _counters(self) -> AeronCounters | None:
        """This run's driver's counters, or None while the node is not running or its driver not yet ready."""
        if not self.is_running:
            return None
        cnc = try_open_cnc(self.aeron_dir)
        if isinstance(cnc, NotYet):
            return None
        # The driver is the node process itself (one-process layout) or its child; the start-up line that names it
        # may not be read yet.
        driver_pid = self.child_pids.get("media driver")
        if cnc.pid not in (driver_pid, self.process.pid) and parent_pid(cnc.pid) != self.process.pid:
            cnc.close()  # a previous run's file
            return None
        return AeronCounters(cnc, owns_cnc=True)

    def counter(self, type_id: int) -> int | None:
        """The value of this cluster's counter of ``type_id`` (key: the cluster id), or None if there is none now."""
        counters = self._counters()
        if counters is None:
            return None
        with counters:
            cluster_id = self.harness.layout.cluster_id
            info = counters.find(type_id=type_id,
                                 where=lambda i: len(i.key) >= 4 and int.from_bytes(i.key[:4], "little",
                                                                                    signed=True) == cluster_id)
            return None if info is None else info.value

    def role(self) -> C.ClusterRole | None:
        value = self.counter(C.NODE_ROLE_TYPE_ID)
        return None if value is None else C.ClusterRole(value)

    def election_state(self) -> C.ElectionState | None:
        value = self.counter(C.ELECTION_STATE_TYPE_ID)
        return None if value is None else C.ElectionState(value)

    def module_state(self) -> C.ConsensusModuleState | None:
        value = self.counter(C.CONSENSUS_MODULE_STATE_TYPE_ID)
        return None if value is None else C.ConsensusModuleState(value)

    def commit_position(self) -> int | None:
        return self.counter(C.COMMIT_POSITION_TYPE_ID)

    def leadership_term_id(self) -> int | None:
        return self.counter(C.LEADERSHIP_TERM_ID_TYPE_ID)

    def is_leader(self) -> bool:
        """Role LEADER with its election closed (what cluster-tool is-leader answers)."""
        return self.role() == C.ClusterRole.LEADER and self.election_state() == C.ElectionState.CLOSED

    def is_follower(self) -> bool:
        return self.role() == C.ClusterRole.FOLLOWER and self.election_state() == C.ElectionState.CLOSED

    def service_state(self) -> ServiceState | None:
        """The ``KeyValueProbeService``'s counters, read consistently (the position before and after agree)."""
        from harness.cluster_services import APPLIED_TYPE_ID, LOG_POSITION_TYPE_ID, STATE_HASH_TYPE_ID

        counters = self._counters()
        if counters is None:
            return None
        with counters:
            ids = {}
            for type_id in (APPLIED_TYPE_ID, STATE_HASH_TYPE_ID, LOG_POSITION_TYPE_ID):
                info = counters.find(type_id=type_id)
                if info is None:
                    return None
                ids[type_id] = info.counter_id
            for _ in range(100):
                before = counters.value(ids[LOG_POSITION_TYPE_ID])
                state = ServiceState(counters.value(ids[APPLIED_TYPE_ID]), counters.value(ids[STATE_HASH_TYPE_ID]),
                                     before)
                if counters.value(ids[LOG_POSITION_TYPE_ID]) == before:
                    return state
        return None

    def timers_fired(self) -> tuple[int, int] | None:
        """The ``KeyValueProbeService``'s (timers fired, sum of their correlation ids), or None."""
        from harness.cluster_services import TIMERS_FIRED_SUM_TYPE_ID, TIMERS_FIRED_TYPE_ID

        counters = self._counters()
        if counters is None:
            return None
        with counters:
            fired, total = counters.find(type_id=TIMERS_FIRED_TYPE_ID), counters.find(type_id=TIMERS_FIRED_SUM_TYPE_ID)
            return None if fired is None or total is None else (fired.value, total.value)

    def output(self) -> str:
        return self.process.output() if self.process is not None else ""

    def __repr__(self) -> str:
        return f"ClusterNode(member_id={self.member_id}, running={self.is_running})"


class ClusterHarness:
    """An N-member cluster on this machine (see the module docstring).

    Parameters
    ----------
    process_manager : ProcessManager, optional
        Spawns and logs the node processes (the ``process_manager`` fixture's, so a failing test shows their
        output); one of the harness's own under its root dir when not given.
    member_count : int
        3 by default, 5 possible (up to ``MAX_MEMBERS``).
    service : str
        ``package.module:Class`` of the clustered service.
    env : dict
        More ``AERON_*`` variables for every node (the last word: timeouts, idle strategies...).
    name : str
        Part of the root dir's name (the test's name).
    process_layout : str
        The node command's ``--layout``: ``one-process`` (default: driver, archive and consensus module in the
        node's process, the service container a child) or ``processes`` (each of the four a process).
    """

    def __init__(self, process_manager: ProcessManager | None = None, *, member_count: int = 3,
                 service: str = DEFAULT_SERVICE, env: dict[str, str] | None = None, name: str = "cluster",
                 cluster_id: int = 0, process_layout: str = LAYOUT_ONE_PROCESS):
        if process_layout not in LAYOUTS:
            raise ValueError(f"process_layout={process_layout!r} must be one of {', '.join(LAYOUTS)}")
        self.process_layout = process_layout
        safe = "".join(c if c.isalnum() else "-" for c in name)[:40]
        self.root_dir = new_aeron_dir(f"aeron-{safe}", SHM_ROOT)
        self._owns_manager = process_manager is None
        self.process_manager = process_manager or ProcessManager(self.root_dir / "logs")
        self.service = service
        self.layout = LoopbackCluster(self.root_dir, member_count=member_count,
                                      base_port=allocate_base_port(member_count), cluster_id=cluster_id,
                                      extra_env={**cluster_env_for_tests(), **(env or {})})
        self.nodes = [ClusterNode(self, n) for n in self.layout.member_ids]
        self.client_driver: ManagedProcess | None = None
        self._seen_pids: set[int] = set()
        self._background_work: list[Callable[[], int]] = []
        self._closed = False

    # ---------------------------------------------------------------------------------- background work
    def add_background_work(self, work: Callable[[], int]) -> None:
        """Run ``work`` (returning a work count) while any harness call waits: a cluster client's egress poll and
        keep-alive, which must go on while a member stops or restarts, or its session times out meanwhile."""
        self._background_work.append(work)

    def remove_background_work(self, work: Callable[[], int]) -> None:
        if work in self._background_work:
            self._background_work.remove(work)

    def _work(self) -> int:
        return sum(work() for work in list(self._background_work))

    # --------------------------------------------------------------------------------------- lifecycle
    def node(self, member_id: int) -> ClusterNode:
        return self.nodes[member_id]

    def node_environment(self, member_id: int) -> dict[str, str]:
        return self.layout.node_environment(member_id)

    def start(self, member_ids: Iterable[int] | None = None, *, await_leader: bool = True,
              timeout_s: float = NODE_START_TIMEOUT_S) -> None:
        """Start the members (all by default) together, wait for each one's start-up line, then for a leader."""
        ids = self.launch(member_ids)
        for member_id in ids:
            self._await_started(member_id, timeout_s)
        if await_leader:
            self.await_leader(timeout_s)

    def launch(self, member_ids: Iterable[int] | None = None) -> list[int]:
        """Spawn the members (all by default) and return at once, their ids in order (a start-up timeline reads
        them as they come up; ``start`` waits)."""
        ids = list(self.layout.member_ids if member_ids is None else member_ids)
        for member_id in ids:
            self._spawn(member_id)
        return ids

    def _spawn(self, member_id: int) -> ClusterNode:
        node = self.nodes[member_id]
        if node.is_running:
            raise RuntimeError(f"member {member_id} is already running (pid {node.process.pid})")
        node.starts += 1
        node.child_pids = {}
        node.process = self.process_manager.spawn(
            f"node-{member_id}", [sys.executable, "-m", "aeron_numba.cluster", "--service", self.service,
                                  "--layout", self.process_layout],
            env=self.layout.node_environment(member_id))
        self._seen_pids.add(node.process.pid)
        return node

    def _await_started(self, member_id: int, timeout_s: float) -> ClusterNode:
        node = self.nodes[member_id]
        text = node.process.await_output("aeron-numba cluster node:", timeout_s, work=self._work)
        match = _START_LINE.search(text)
        if match is not None:
            node.child_pids = {"media driver": int(match[3]), "archive": int(match[4]),
                               "service container": int(match[5])}
            self._seen_pids.update(node.child_pids.values())
        if node.blocked_hosts:
            self._write_loss(node)
        return node

    def start_node(self, member_id: int, timeout_s: float = NODE_START_TIMEOUT_S) -> ClusterNode:
        """Start one member (its dirs as they are) and wait for its start-up line."""
        self._spawn(member_id)
        return self._await_started(member_id, timeout_s)

    def restart(self, member_id: int, timeout_s: float = NODE_START_TIMEOUT_S) -> ClusterNode:
        """Start a stopped or killed member again with the same dirs and settings."""
        node = self.nodes[member_id]
        if node.is_running:
            raise RuntimeError(f"member {member_id} is running: stop or kill it before a restart")
        self._await_gone(node, timeout_s)
        return self.start_node(member_id, timeout_s)

    # ------------------------------------------------------------------------------------------ faults
    def kill(self, member_id: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """SIGKILL the member's node process and its children (stopped first, so none sees another die and acts)."""
        node = self.nodes[member_id]
        pids = node.pids()
        self._seen_pids |= pids
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        if node.process is not None:
            node.process.kill()
        self._await_gone(node, timeout_s)

    def stop(self, member_id: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """SIGTERM the node (it stops its service, consensus module, archive and driver in order); its exit code."""
        node = self.nodes[member_id]
        self._seen_pids |= node.pids()
        code = node.process.terminate(timeout_s, group=False, work=self._work)
        self._await_gone(node, timeout_s)
        return code

    def pause(self, member_id: int, only: str | None = None, timeout_s: float = 10.0) -> None:
        """SIGSTOP the node and its children: it stays up but does nothing (a stalled member). ``only``: just that
        child (``"service container"``: a slow service; ``"archive"``; ``"media driver"``). Returns once each is
        stopped (the kernel stops a process asynchronously)."""
        from harness.process_manager import process_state

        targets = self._targets(member_id, only)
        for pid in targets:
            _signal(pid, signal.SIGSTOP)
        await_condition(lambda: all(process_state(pid) in ("T", "t", None, "Z") for pid in targets), timeout_s,
                        f"member {member_id}'s processes to stop")

    def resume(self, member_id: int, only: str | None = None, timeout_s: float = 10.0) -> None:
        """SIGCONT what ``pause`` stopped; returns once none is stopped."""
        from harness.process_manager import process_state

        targets = self._targets(member_id, only)
        for pid in targets:
            _signal(pid, signal.SIGCONT)
        await_condition(lambda: not any(process_state(pid) in ("T", "t") for pid in targets), timeout_s,
                        f"member {member_id}'s processes to run again")

    def _targets(self, member_id: int, only: str | None) -> set[int]:
        node = self.nodes[member_id]
        if only is None:
            return node.pids()
        if only not in node.child_pids:
            raise ValueError(f"only={only!r} must be one of {sorted(node.child_pids)}")
        return {node.child_pids[only]}

    def wipe(self, member_id: int) -> None:
        """Remove a stopped member's aeron, cluster and archive dirs (a restart then starts it empty)."""
        node = self.nodes[member_id]
        if node.is_running:
            raise RuntimeError(f"member {member_id} is running: stop or kill it before wiping its dirs")
        for path in (node.aeron_dir, node.cluster_dir, node.archive_dir):
            shutil.rmtree(path, ignore_errors=True)

    def _await_gone(self, node: ClusterNode, timeout_s: float) -> None:
        await_condition(lambda: not node.pids() or NotYet(f"alive: {sorted(node.pids())}"), timeout_s,
                        f"member {node.member_id}'s processes to be gone", work=self._work)

    # ------------------------------------------------------------------------------------------ network
    def cut(self, a: int, b: int) -> None:
        """Cut the link between members ``a`` and ``b`` both ways (until ``heal``), restarts included."""
        self.nodes[a].blocked_hosts.add(member_host(b))
        self.nodes[b].blocked_hosts.add(member_host(a))
        for node in (self.nodes[a], self.nodes[b]):
            self._write_loss(node)

    def heal(self, a: int, b: int) -> None:
        self.nodes[a].blocked_hosts.discard(member_host(b))
        self.nodes[b].blocked_hosts.discard(member_host(a))
        for node in (self.nodes[a], self.nodes[b]):
            self._write_loss(node)

    def isolate(self, member_id: int) -> None:
        """Cut every link of ``member_id``."""
        for other in self.layout.member_ids:
            if other != member_id:
                self.cut(member_id, other)

    def heal_all(self) -> None:
        for node in self.nodes:
            node.blocked_hosts.clear()
            self._write_loss(node)

    def _write_loss(self, node: ClusterNode) -> None:
        from aeron_numba.driver.loss_generator import LOSS_CONTROL_FILE, LossControl, LossSettings

        if not node.is_running or not (node.aeron_dir / LOSS_CONTROL_FILE).exists():
            return  # written when it starts (``_await_started``)
        control = LossControl.open(node.aeron_dir)
        try:
            control.write(LossSettings(blocked_hosts=tuple(sorted(node.blocked_hosts))))
        finally:
            control.close()

    # ------------------------------------------------------------------------------------------- awaits
    def running_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.is_running]

    def processes(self) -> list[ManagedProcess]:
        return [node.process for node in self.nodes if node.is_running]

    def leader(self) -> ClusterNode | None:
        """The running member that leads with its election closed, if one does now."""
        return next((node for node in self.running_nodes() if not node.is_paused and node.is_leader()), None)

    def await_leader(self, timeout_s: float = DEFAULT_TIMEOUT_S, *, exclude: Iterable[int] = ()) -> ClusterNode:
        """Wait until a running member (not in ``exclude``) leads with its election closed; return it."""
        excluded = set(exclude)

        def found():
            for node in self.running_nodes():
                if node.member_id not in excluded and not node.is_paused and node.is_leader():
                    return node
            return NotYet(self._roles_text())

        return await_condition(found, timeout_s, "a leader", processes=self.processes(), work=self._work)

    def await_followers(self, count: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[ClusterNode]:
        """Wait until ``count`` running members (default: every running one but the leader) follow with their
        election closed."""
        def found():
            followers = [node for node in self.running_nodes() if node.is_follower()]
            wanted = count if count is not None else len(self.running_nodes()) - 1
            return followers if len(followers) >= wanted else NotYet(self._roles_text())

        return await_condition(found, timeout_s, "followers", processes=self.processes(), work=self._work)

    def await_follower(self, member_id: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> ClusterNode:
        """Wait until member ``member_id`` follows with its election closed (a restarted or late member)."""
        node = self.nodes[member_id]
        return await_condition(lambda: node if node.is_follower() else NotYet(self._roles_text()), timeout_s,
                               f"member {member_id} to follow", processes=self.processes(), work=self._work)

    def await_commit_position(self, position: int, timeout_s: float = DEFAULT_TIMEOUT_S,
                              member_ids: Iterable[int] | None = None) -> None:
        """Wait until the commit position of each given member (default: every running one) is >= ``position``."""
        nodes = self._nodes(member_ids)

        def reached():
            behind = {n.member_id: n.commit_position() for n in nodes}
            behind = {k: v for k, v in behind.items() if v is None or v < position}
            return not behind or NotYet(f"commit positions below {position}: {behind}")

        await_condition(reached, timeout_s, f"commit position {position}", processes=self.processes(), work=self._work)

    def await_service_state(self, predicate: Callable[[ServiceState], bool], timeout_s: float = DEFAULT_TIMEOUT_S,
                            member_ids: Iterable[int] | None = None,
                            description: str = "service state") -> dict[int, ServiceState]:
        """Wait until every given member's (default: every running one's) ``ServiceState`` satisfies
        ``predicate``; returns them by member id."""
        nodes = self._nodes(member_ids)

        def reached():
            states = {n.member_id: n.service_state() for n in nodes}
            if all(s is not None and predicate(s) for s in states.values()):
                return states
            return NotYet(f"{states}")

        return await_condition(reached, timeout_s, description, processes=self.processes(), work=self._work)

    def await_applied(self, count: int, timeout_s: float = DEFAULT_TIMEOUT_S,
                      member_ids: Iterable[int] | None = None) -> dict[int, ServiceState]:
        """Wait until every given member has applied at least ``count`` requests."""
        return self.await_service_state(lambda s: s.applied >= count, timeout_s, member_ids,
                                        f"{count} requests applied")

    def _nodes(self, member_ids) -> list[ClusterNode]:
        return self.running_nodes() if member_ids is None else [self.nodes[i] for i in member_ids]

    def _roles_text(self) -> str:
        parts = []
        for node in self.nodes:
            if not node.is_running:
                parts.append(f"{node.member_id}: down")
            else:
                role, election = node.role(), node.election_state()
                parts.append(f"{node.member_id}: {role.name if role is not None else '?'} "
                             f"{election.name if election is not None else '?'}")
        return ", ".join(parts)

    # -------------------------------------------------------------------------------------------- clients
    def start_client_driver(self, timeout_s: float = NODE_START_TIMEOUT_S) -> Path:
        """A media driver for the test's cluster clients (on 127.0.0.1's egress), in its own dir; its aeron dir."""
        from harness.aeron_dirs import await_cnc_ready

        if self.client_driver is None:
            aeron_dir = self.root_dir / "client" / "aeron"
            env = {**cluster_env_for_tests(), "AERON_DIR": str(aeron_dir), "AERON_DIR_DELETE_ON_START": "true"}
            self.client_driver = self.process_manager.spawn_module("client-driver", "aeron_numba.driver", env=env)
            self._seen_pids.add(self.client_driver.pid)
            await_cnc_ready(aeron_dir, timeout_s, pid=self.client_driver.pid, processes=[self.client_driver]).close()
        return self.root_dir / "client" / "aeron"

    def client_environment(self) -> dict[str, str]:
        """``AERON_*`` of an ``AeronCluster`` client on the client driver (started if need be)."""
        return self.layout.client_environment(self.start_client_driver())

    def client_context(self, **overrides):
        """An ``AeronClusterContext`` for this cluster, its client driver started."""
        from aeron_numba.cluster.context import AeronClusterContext

        return AeronClusterContext.from_env(self.client_environment(), **overrides)

    # ---------------------------------------------------------------------------------------- teardown
    def tails(self, lines: int = 40) -> str:
        return self.process_manager.tails(lines)

    def close(self) -> None:
        """Kill every process the harness started and every child of theirs it saw; remove the root dir."""
        if self._closed:
            return
        self._closed = True
        errors = []
        for node in self.nodes:
            try:
                self._seen_pids |= node.pids()
                for pid in node.pids():
                    _signal(pid, signal.SIGKILL)
                if node.process is not None:
                    node.process.kill()
            except Exception as exc:  # keep killing the others
                errors.append(f"member {node.member_id}: {exc!r}")
        if self.client_driver is not None:
            self.client_driver.kill()
        for pid in self._seen_pids:
            if pid_alive(pid) and _is_ours(pid):
                _signal(pid, signal.SIGKILL)
        if self._owns_manager:
            self.process_manager.close()
        try:
            await_condition(lambda: not [p for p in self._seen_pids if pid_alive(p) and _is_ours(p)], 10.0,
                            "the cluster's processes to be gone")
        except AssertionError as exc:
            errors.append(str(exc))
        remove_aeron_dir(self.root_dir)
        if errors:
            raise RuntimeError(f"cluster teardown: {errors}")

    def __enter__(self) -> "ClusterHarness":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _is_ours(pid: int) -> bool:
    """A process running aeron-numba (not another that got a reused pid). Asked only of pids the harness saw: an
    empty command line is one of them being torn down after its SIGKILL (its memory, and so its command line,
    goes first), still ours until it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return not cmdline or b"aeron_numba" in cmdline
