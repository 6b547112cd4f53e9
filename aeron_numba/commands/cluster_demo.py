"""The cluster demo: ``python -m aeron_numba.cluster demo`` (``aeron-numba cluster demo``).

Starts a 3-member cluster on this machine with the example key-value service, each member a node process
(``python -m aeron_numba.cluster``) on its own loopback address 127.0.0.(n+1), laid out as the golden Aeron run
(``cluster/loopback_cluster.py``: ports 20000 + 100 n + k by default, 64 KiB terms, sleeping idle strategies, leader
heartbeat timeout 2 s, election timeout 1 s). Then a client (``AeronCluster`` on a media driver of its own) puts
keys one after another, each acknowledged by the leader; half way the leader's node is killed (SIGKILL of its
process and its children), the members elect a new leader, the client follows it and carries on; at the end the
client reads every key back through the new leader. It prints each step with its time, and how long the cluster
took to elect a new leader and the client to hear of it.

A request in flight when the leader dies is sent again once the client follows the new leader: a PUT of the same
key and value changes nothing, so the store ends the same whether the first one was applied or not.

Everything runs under one temporary root in /dev/shm, removed at the end; whatever ends the demo (done, timeout,
SIGINT/SIGTERM, an error) stops every process it started, and if the demo itself is killed the kernel stops them
(``with_parent_death_signal``). Exit 0 when every acknowledged key is read back with its value, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aeron_numba import cli
from aeron_numba.child_processes import exit_on_signals, with_parent_death_signal

MODULE = "aeron_numba.cluster"
SERVICE = "aeron_numba.cluster.examples.key_value_service:KeyValueService"
DEFAULT_TIMEOUT_S = 300.0


class DemoFailed(Exception):
    """The demo could not go on (a node died, nothing happened in time): one line for the user."""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="A 3-member cluster with the example key-value service on 127.0.0.1-3, a client "
                               "putting keys, and the leader killed while it runs.")
    parser.add_argument("--messages", type=int, default=200, help="keys the client puts (default 200)")
    parser.add_argument("--members", type=int, default=3, help="members of the cluster (default 3; 5 works too)")
    parser.add_argument("--base-port", type=int, default=20000, help="member n listens on base + 100 n + 1..5 "
                                                                     "(default 20000, the golden run's)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"give up after this many seconds (default {DEFAULT_TIMEOUT_S:g})")
    cli.add_version_argument(parser)
    return parser


class Clock:
    def __init__(self, timeout_s: float):
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s

    def now(self) -> float:
        return time.monotonic() - self.start

    def say(self, text: str) -> None:
        print(f"[{self.now():6.1f}s] {text}", flush=True)

    def check(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise DemoFailed(f"timed out waiting for {what}")


# ---------------------------------------------------------------------------------------------- processes
def _children_of(pid: int) -> set[int]:
    """Every process below ``pid`` (read from /proc), to kill a node with its children as a crash would."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _kill_tree(process: subprocess.Popen) -> None:
    pids = {process.pid} | _children_of(process.pid)
    for signum in (signal.SIGSTOP, signal.SIGKILL):  # stopped first: none reacts to another's death
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
    process.wait()


class Node:
    def __init__(self, member_id: int, layout, log_dir: Path):
        self.member_id = member_id
        self.layout = layout
        self.log_path = log_dir / f"node-{member_id}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, **self.layout.node_environment(self.member_id))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                with_parent_death_signal([sys.executable, "-m", MODULE, "--service", SERVICE], signal.SIGTERM),
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def counter(self, type_id: int) -> int | None:
        from aeron_numba.errors import LayoutError
        from aeron_numba.kernels.cnc_file import CncFile, CncNotReadyError
        from aeron_numba.kernels.counters import CountersReader
        from aeron_numba.tools.cluster_control import find_cluster_counter

        if not self.alive:
            return None
        try:
            cnc_file = CncFile.open(self.layout.aeron_dir(self.member_id) / "cnc.dat")
        except (FileNotFoundError, CncNotReadyError, LayoutError):
            return None
        try:
            reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
            info = find_cluster_counter(reader, type_id, self.layout.cluster_id)
            value = None if info is None else info.value
            reader = None
            return value
        finally:
            cnc_file.close()

    def is_leader(self) -> bool:
        from aeron_numba.layout import cluster as C

        return (self.counter(C.NODE_ROLE_TYPE_ID) == C.ClusterRole.LEADER
                and self.counter(C.ELECTION_STATE_TYPE_ID) == C.ElectionState.CLOSED)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                _kill_tree(self.process)


def _await_leader(nodes: list[Node], clock: Clock, exclude: int | None = None) -> Node:
    while True:
        for node in nodes:
            if node.member_id != exclude and node.is_leader():
                return node
        for node in nodes:
            if node.member_id != exclude and node.process is not None and not node.alive:
                raise DemoFailed(f"member {node.member_id} exited with code {node.process.returncode}: "
                                 f"{node.log_tail(3)}")
        clock.check("a leader")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ client
class KeyValueClient:
    """Puts and gets through an ``AeronCluster``, one request at a time, following the leader."""

    def __init__(self, ctx, clock: Clock):
        from aeron_numba.cluster.client.aeron_cluster import AeronCluster
        from aeron_numba.cluster.client.egress_listener import EgressListener

        client = self

        class Listener(EgressListener):
            def on_message(self, cluster_session_id, timestamp, buffer, offset, length, header):
                client.responses.append(bytes(buffer[offset:offset + length]))

            def on_new_leader(self, cluster_session_id, leadership_term_id, leader_member_id, ingress_endpoints):
                client.new_leaders.append((clock.now(), leader_member_id, leadership_term_id))

        self.clock = clock
        self.responses: list[bytes] = []
        self.new_leaders: list[tuple[float, int, int]] = []
        self.cluster = AeronCluster.connect(ctx, egress_listener=Listener())
        self.last_keep_alive = time.monotonic()

    def request(self, request: bytes, request_id: int, retry_after_s: float = 5.0) -> tuple[int, bytes]:
        """Send until the response with ``request_id`` comes (a resend after ``retry_after_s`` without one, as
        after a leader's death); returns (status, value)."""
        from aeron_numba.cluster.examples.key_value_service import decode_response

        sent_at = None
        while True:
            if sent_at is None or time.monotonic() - sent_at > retry_after_s:
                if self.cluster.offer(request) > 0:
                    sent_at = time.monotonic()
            self.cluster.poll_egress()
            while self.responses:
                _, status, answered_id, value = decode_response(self.responses.pop(0))
                if answered_id == request_id:
                    return status, value
            self.clock.check(f"the answer to request {request_id}")
            time.sleep(0.0005)

    def close(self) -> None:
        self.cluster.close()


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog or "python -m aeron_numba.cluster demo")
    args = parser.parse_args(argv)
    if args.messages < 2:
        parser.error(f"--messages {args.messages} must be at least 2 (half before the leader is killed, half after)")
    if not 3 <= args.members <= 9:
        parser.error(f"--members {args.members} must be in [3, 9]")
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout} must be > 0")
    from aeron_numba.cluster.loopback_cluster import LoopbackCluster
    from aeron_numba.errors import AeronError

    root = Path(tempfile.mkdtemp(prefix="aeron-numba-cluster-demo-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                                 else None))
    try:
        layout = LoopbackCluster(root, member_count=args.members, base_port=args.base_port, port_stride=100)
    except AeronError as exc:
        shutil.rmtree(root, ignore_errors=True)
        parser.error(str(exc))
    clock = Clock(args.timeout)
    nodes = [Node(n, layout, root) for n in layout.member_ids]
    client_driver = client = None
    with exit_on_signals():
        try:
            clock.say(f"starting {args.members} cluster members on 127.0.0.1-{args.members} (logs in {root})")
            for node in nodes:
                node.start()
            leader = _await_leader(nodes, clock)
            clock.say(f"member {leader.member_id} is the leader")
            client_driver = _start_client_driver(root)
            client = KeyValueClient(_client_context(layout, root), clock)
            clock.say(f"client connected: session {client.cluster.cluster_session_id}")
            return _run(args, nodes, leader, client, clock)
        except (DemoFailed, AeronError) as exc:
            print(f"{parser.prog}: {exc}", file=sys.stderr, flush=True)
            for node in nodes:
                if node.process is not None:
                    print(f"--- member {node.member_id} log tail ---\n{node.log_tail(8)}", file=sys.stderr)
            return 1
        finally:
            if client is not None:
                try:
                    client.close()
                except Exception:  # the demo is ending anyway
                    pass
            for node in nodes:
                node.stop()
            if client_driver is not None:
                client_driver.close()
            shutil.rmtree(root, ignore_errors=True)


def _start_client_driver(root: Path):
    from aeron_numba.driver import DriverContext, MediaDriverProcess

    from aeron_numba.cluster.loopback_cluster import CROWDED_MACHINE, NODE_IDLE, SMALL_TERMS

    environ = {**os.environ, **SMALL_TERMS, **NODE_IDLE, **CROWDED_MACHINE}
    ctx = DriverContext.from_env(environ, aeron_dir=str(root / "client"))
    ctx.dir_delete_on_shutdown = True
    return MediaDriverProcess.launch(ctx, stdout=subprocess.DEVNULL)


def _client_context(layout, root: Path):
    from aeron_numba.cluster.context import AeronClusterContext

    return AeronClusterContext.from_env(layout.client_environment(root / "client"))


def _run(args, nodes: list[Node], leader: Node, client: KeyValueClient, clock: Clock) -> int:
    from aeron_numba.cluster.examples.key_value_service import OK, STATUS_NAMES, encode_get, encode_put

    def key(i: int) -> bytes:
        return f"key-{i}".encode()

    def value(i: int) -> bytes:
        return f"value-{i}".encode()

    half = args.messages // 2
    for i in range(half):
        status, _ = client.request(encode_put(i, key(i), value(i)), i)
        if status != OK:
            raise DemoFailed(f"PUT {key(i)!r} answered {STATUS_NAMES.get(status, status)}")
    clock.say(f"{half} keys put, each acknowledged by member {leader.member_id}")

    killed_at = clock.now()
    _kill_tree(leader.process)
    clock.say(f"killed the leader, member {leader.member_id} (SIGKILL of its node, driver, archive and service)")
    for i in range(half, args.messages):
        status, _ = client.request(encode_put(i, key(i), value(i)), i)
        if status != OK:
            raise DemoFailed(f"PUT {key(i)!r} answered {STATUS_NAMES.get(status, status)}")
        if i == half:
            first_ack = clock.now()
    new_leader = _await_leader(nodes, clock, exclude=leader.member_id)
    if client.new_leaders:
        heard_at, heard_member, term = client.new_leaders[0]
        clock.say(f"member {heard_member} became leader of term {term}: the client heard of it "
                  f"{heard_at - killed_at:.1f}s after the kill, and its first put after the kill was acknowledged "
                  f"{first_ack - killed_at:.1f}s after it")
    else:
        clock.say(f"member {new_leader.member_id} leads now; the first put after the kill was acknowledged "
                  f"{first_ack - killed_at:.1f}s after it")
    clock.say(f"{args.messages - half} more keys put through member {new_leader.member_id}")

    missing = []
    for i in range(args.messages):
        status, answer = client.request(encode_get(args.messages + i, key(i)), args.messages + i)
        if status != OK or answer != value(i):
            missing.append(key(i).decode())
    if missing:
        clock.say(f"{len(missing)} keys not read back: {', '.join(missing[:10])}")
        return 1
    clock.say(f"all {args.messages} keys read back from the new leader with their values: nothing acknowledged "
              f"was lost")
    return 0
