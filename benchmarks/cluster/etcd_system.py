"""etcd behind the benchmark's ``KvSystem``: three ``etcd`` members (Debian's ``etcd-server``, 3.4) on loopback,
data on /dev/shm, and a client in this process speaking to etcd's gRPC gateway (its JSON API over HTTP/1.1) with
the standard library only.

The client (``EtcdHttpClient``) keeps ``connections`` keep-alive TCP connections to one member and pipelines
``POST /v3/kv/put`` requests on them (non-blocking sockets, a ``selectors`` loop; responses come back in order
on each connection, so a FIFO of tokens per connection matches them). etcd serves one connection's requests one
after another, so several connections are what lets it work on more than one put at a time (as a gRPC client's
concurrent streams would). Loads go to the leader's client endpoint (as an Aeron client's ingress goes to the
leader); a failover client, when its connection dies or a member answers with an error, moves on to the next
member and carries on.

The members' heartbeat interval and election timeout default to ``FAILOVER_TIMEOUTS`` (the Aeron golden run's
200 ms heartbeat and 2 s timeout, in etcd's terms); etcd's own defaults are 100 ms and 1 s.
"""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import deque
from pathlib import Path

from harness.awaiting import await_condition
from harness.process_manager import ProcessManager

from benchmarks.cluster.systems import START_TIMEOUT_S, LocalClientSystem, SystemUnavailable, reserve_tcp_ports

ETCD = "etcd"
FAILOVER_TIMEOUTS = {"heartbeat_interval_ms": 200, "election_timeout_ms": 2000}
CONNECTIONS = 16
PUT_PATH = "/v3/kv/put"
STATUS_PATH = "/v3/maintenance/status"
DATA_ROOT = Path("/dev/shm")
RECONNECT_INTERVAL_NS = 1_000_000
RECV_BYTES = 256 * 1024
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)")


def etcd_binary() -> str | None:
    return shutil.which(ETCD)


def etcd_version() -> str | None:
    binary = etcd_binary()
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.splitlines()[0].split(":", 1)[1].strip() if out else "unknown"


def post_json(endpoint: str, path: str, body: dict, timeout_s: float = 2.0) -> dict:
    request = urllib.request.Request(f"http://{endpoint}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode("ascii")


def _dechunk(buf: bytearray, at: int) -> tuple[bytes, int] | None:
    """The body of a chunked HTTP/1.1 message starting at ``at`` and where it ends (None: not all here yet)."""
    body = bytearray()
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            return None
        size = int(bytes(buf[at:eol]).split(b";", 1)[0], 16)
        if size == 0:
            trailer_end = buf.find(b"\r\n\r\n", eol)
            if buf[eol:eol + 4] == b"\r\n\r\n":
                return bytes(body), eol + 4
            if trailer_end < 0:
                return None
            return bytes(body), trailer_end + 4
        if len(buf) < eol + 2 + size + 2:
            return None
        body += buf[eol + 2:eol + 2 + size]
        at = eol + 2 + size + 2


class _Connection:
    __slots__ = ("sock", "out", "inbuf", "tokens", "endpoint", "writing")

    def __init__(self, endpoint: str):
        host, port = endpoint.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=2.0)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.endpoint = endpoint
        self.out = bytearray()
        self.inbuf = bytearray()
        self.tokens: deque[int] = deque()
        self.writing = False


class EtcdHttpClient:
    """``KvClient`` for etcd's JSON gateway: pipelined puts over ``connections`` connections to ``endpoints[0]``
    (with ``failover``, the next endpoint when a connection dies or a member answers an error)."""

    def __init__(self, endpoints: list[str], connections: int = CONNECTIONS, failover: bool = False,
                 clock=time.perf_counter_ns):
        self.endpoints = list(endpoints)
        self.failover = failover
        self.clock = clock
        self.selector = selectors.DefaultSelector()
        self.connections: list[_Connection] = []
        self.wanted = connections
        self.endpoint_index = 0
        self.next = 0
        self.key_cache: dict[str, bytes] = {}
        self.value_cache: tuple[bytes, str] | None = None
        self.last_connect_ns = 0
        self._failed: list[int] = []
        self._connect_all()

    def _connect_all(self) -> None:
        endpoint = self.endpoints[self.endpoint_index % len(self.endpoints)]
        while len(self.connections) < self.wanted:
            try:
                connection = _Connection(endpoint)
            except OSError:
                if not self.failover:
                    raise
                self.endpoint_index += 1
                return
            self.connections.append(connection)
            self.selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _request(self, key: str, value: bytes) -> bytes:
        if self.value_cache is None or self.value_cache[0] is not value:
            self.value_cache = (value, _b64(value))
        prefix = self.key_cache.get(key)
        if prefix is None:
            prefix = self.key_cache[key] = f'{{"key":"{_b64(key)}","value":"'.encode()
        body = prefix + self.value_cache[1].encode() + b'"}'
        return (b"POST " + PUT_PATH.encode() + b" HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def put(self, key: str, value: bytes, token: int) -> bool:
        if not self.connections:
            now = self.clock()
            if now - self.last_connect_ns < RECONNECT_INTERVAL_NS:
                return False
            self.last_connect_ns = now
            self._connect_all()
            if not self.connections:
                return False
        connection = self.connections[self.next % len(self.connections)]
        self.next += 1
        connection.tokens.append(token)
        connection.out += self._request(key, value)
        self._flush(connection)
        return True

    def _flush(self, connection: _Connection) -> None:
        try:
            sent = connection.sock.send(connection.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(connection)
            return
        del connection.out[:sent]
        want = bool(connection.out)
        if want != connection.writing:
            connection.writing = want
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self.selector.modify(connection.sock, events, connection)

    def _drop(self, connection: _Connection) -> None:
        """A connection died: its outstanding puts fail; a failover client moves to the next member."""
        if connection not in self.connections:
            return
        self.connections.remove(connection)
        self.selector.unregister(connection.sock)
        connection.sock.close()
        self._failed.extend(connection.tokens)
        connection.tokens.clear()
        if not self.failover:
            raise ConnectionError(f"etcd connection to {connection.endpoint} closed with puts outstanding")
        if self.endpoints[self.endpoint_index % len(self.endpoints)] == connection.endpoint:
            self.endpoint_index += 1

    def _move_on(self, endpoint: str) -> None:
        """A member answered an error (no leader, leader changed): a failover client tries the next member."""
        if self.failover and self.endpoints[self.endpoint_index % len(self.endpoints)] == endpoint:
            self.endpoint_index += 1
            for connection in list(self.connections):
                if connection.endpoint == endpoint:
                    self._drop(connection)

    def poll(self, on_complete, timeout_ns: int) -> int:
        completed = 0
        while self._failed:
            on_complete(self._failed.pop(), False)
            completed += 1
        for key, events in self.selector.select(timeout_ns / 1e9 if not completed else 0):
            connection = key.data
            if events & selectors.EVENT_WRITE:
                self._flush(connection)
            if events & selectors.EVENT_READ and connection in self.connections:
                completed += self._read(connection, on_complete)
        while self._failed:
            on_complete(self._failed.pop(), False)
            completed += 1
        return completed

    def _read(self, connection: _Connection, on_complete) -> int:
        try:
            data = connection.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return 0
        except OSError:
            data = b""
        if not data:
            self._drop(connection)
            return 0
        buf = connection.inbuf
        buf += data
        completed = 0
        errors = False
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = bytes(buf[:end]).lower()
            match = _CONTENT_LENGTH.search(head)
            if match is not None:
                length = int(match.group(1))
                if len(buf) < end + 4 + length:
                    break
                body = bytes(buf[end + 4:end + 4 + length])
                consumed = end + 4 + length
            elif b"\r\ntransfer-encoding: chunked" in head:  # etcd's error answers (503 no leader, ...)
                parsed = _dechunk(buf, end + 4)
                if parsed is None:
                    break
                body, consumed = parsed
            else:
                raise ConnectionError(f"etcd answered with neither Content-Length nor chunks: {head[:200]!r}")
            status_ok = head.startswith(b"http/1.1 200")
            del buf[:consumed]
            success = status_ok and b'"error"' not in body and b'"header"' in body
            errors = errors or not success
            on_complete(connection.tokens.popleft(), success)
            completed += 1
        if errors:
            self._move_on(connection.endpoint)
        return completed

    def close(self) -> None:
        for connection in self.connections:
            self.selector.unregister(connection.sock)
            connection.sock.close()
        self.connections = []
        self.selector.close()


def grpc_available() -> bool:
    try:
        import grpc  # noqa: F401
    except ImportError:
        return False
    return True


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def put_request(key: bytes, value: bytes) -> bytes:
    """etcd's ``PutRequest`` in protobuf (field 1 key, field 2 value, both bytes): all a put needs, encoded here
    rather than through generated stubs (the ``etcd3`` package's do not load with current protobuf)."""
    return b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(len(value)) + value


class EtcdGrpcClient:
    """``KvClient`` over etcd's own protocol, gRPC (``grpcio``): each put an asynchronous unary call
    (``/etcdserverpb.KV/Put`` as a future) on one channel to ``endpoints[0]``; gRPC multiplexes them over its
    HTTP/2 connection. Acknowledgements arrive on gRPC's threads, which stamp them and queue them for ``poll``.
    With ``failover``, a failed call moves the next puts to the next endpoint's channel."""

    def __init__(self, endpoints: list[str], failover: bool = False, clock=time.perf_counter_ns):
        import queue

        import grpc

        self._grpc = grpc
        self.endpoints = list(endpoints)
        self.failover = failover
        self.clock = clock
        self.endpoint_index = 0
        self.channels: dict[str, object] = {}
        self.done = queue.SimpleQueue()
        self.key_cache: dict[str, bytes] = {}
        self._put = self._stub(self.endpoints[0])

    def _stub(self, endpoint: str):
        channel = self.channels.get(endpoint)
        if channel is None:
            channel = self.channels[endpoint] = self._grpc.insecure_channel(endpoint)
        return channel.unary_unary("/etcdserverpb.KV/Put", request_serializer=None, response_deserializer=None)

    def put(self, key: str, value: bytes, token: int) -> bool:
        encoded = self.key_cache.get(key)
        if encoded is None:
            encoded = self.key_cache[key] = key.encode()
        endpoint = self.endpoints[self.endpoint_index % len(self.endpoints)]
        future = self._put.future(put_request(encoded, value))
        clock, done = self.clock, self.done

        def on_done(f, token=token, endpoint=endpoint):
            done.put((token, f.exception() is None, clock(), endpoint))

        future.add_done_callback(on_done)
        return True

    def poll(self, on_complete, timeout_ns: int) -> int:
        import queue

        try:
            item = self.done.get(timeout=timeout_ns / 1e9) if timeout_ns > 0 else self.done.get_nowait()
        except queue.Empty:
            return 0
        completed = 0
        while True:
            token, success, at_ns, endpoint = item
            if not success and self.failover and endpoint == self.endpoints[self.endpoint_index % len(self.endpoints)]:
                self.endpoint_index += 1
                self._put = self._stub(self.endpoints[self.endpoint_index % len(self.endpoints)])
            on_complete(token, success, at_ns)
            completed += 1
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return completed

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.channels = {}


class EtcdSystem(LocalClientSystem):
    name = "etcd"
    label = "etcd"

    def __init__(self, timeouts: dict | None = None, connections: int = CONNECTIONS, protocol: str | None = None):
        if protocol not in (None, "grpc", "http"):
            raise ValueError(f"protocol={protocol!r} must be 'grpc', 'http' or None (gRPC when grpcio is installed)")
        self.protocol = protocol or ("grpc" if grpc_available() else "http")
        self.timeouts = dict(timeouts or FAILOVER_TIMEOUTS)
        self.connections = connections
        self.processes: ProcessManager | None = None
        self.members = []
        self.client_endpoints: list[str] = []
        self.data_root: Path | None = None
        self.member_ids: list[str | None] = [None] * 3

    @classmethod
    def unavailable(cls) -> str | None:
        if etcd_binary() is None:
            return "etcd is not installed (Debian: apt-get install etcd-server)"
        return None

    def describe(self) -> dict:
        return {"version": etcd_version(), **self.timeouts, "data": str(DATA_ROOT),
                "client": ("this process, gRPC (grpcio, asynchronous unary Put calls on one channel to the leader)"
                           if self.protocol == "grpc" else
                           f"this process, JSON gateway over HTTP/1.1, {self.connections} pipelined connections to "
                           "the leader")}

    def start(self, root: Path, timeout_s: float = START_TIMEOUT_S) -> None:
        reason = self.unavailable()
        if reason:
            raise SystemUnavailable(reason)
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        self.processes = ProcessManager(root / "logs")
        self.data_root = Path(DATA_ROOT if DATA_ROOT.is_dir() else root) / f"aeron-numba-bench-etcd-{os.getpid()}-" \
                                                                            f"{time.monotonic_ns()}"
        ports = reserve_tcp_ports(6)
        client_ports, peer_ports = ports[:3], ports[3:]
        self.client_endpoints = [f"127.0.0.1:{p}" for p in client_ports]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(peer_ports))
        for i in range(3):
            self.members.append(self.processes.spawn(f"etcd-{i}", [
                etcd_binary(), "--name", f"m{i}", "--data-dir", str(self.data_root / f"m{i}"),
                "--listen-client-urls", f"http://{self.client_endpoints[i]}",
                "--advertise-client-urls", f"http://{self.client_endpoints[i]}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer_ports[i]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_ports[i]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.data_root.name,
                "--heartbeat-interval", str(self.timeouts["heartbeat_interval_ms"]),
                "--election-timeout", str(self.timeouts["election_timeout_ms"]),
                "--logger", "zap", "--log-level", "warn"]))
        await_condition(lambda: self.leader() is not None, timeout_s, "etcd: three members agreeing on a leader",
                        processes=self.members, poll_interval_s=0.05)

    def _status(self, index: int) -> dict | None:
        try:
            return post_json(self.client_endpoints[index], STATUS_PATH, {}, timeout_s=1.0)
        except (OSError, ValueError):
            return None

    def leader(self) -> int | None:
        statuses = [self._status(i) if m.is_alive else None for i, m in enumerate(self.members)]
        for i, status in enumerate(statuses):
            if status is not None:
                self.member_ids[i] = status["header"]["member_id"]
        leaders = {s.get("leader") for s in statuses if s is not None}
        if len(leaders) != 1 or None in leaders or sum(s is not None for s in statuses) < 2:
            return None
        leader = leaders.pop()
        return self.member_ids.index(leader) if leader in self.member_ids else None

    def leader_kill_target(self) -> int:
        index = self.leader()
        if index is None:
            raise RuntimeError("etcd: no leader")
        return os.getpgid(self.members[index].pid)

    def client(self, *, failover: bool = False):
        leader = self.leader()
        if leader is None:
            raise RuntimeError("etcd: no leader")
        order = [leader] + [i for i in range(3) if i != leader]
        endpoints = [self.client_endpoints[i] for i in order if self.members[i].is_alive]
        if self.protocol == "grpc":
            return EtcdGrpcClient(endpoints, failover=failover)
        return EtcdHttpClient(endpoints, self.connections if not failover else 1, failover=failover)

    def get(self, index: int, key: str) -> bytes | None:
        reply = post_json(self.client_endpoints[index], "/v3/kv/range", {"key": _b64(key)})
        kvs = reply.get("kvs") or []
        return base64.b64decode(kvs[0]["value"]) if kvs else None

    def stop(self) -> None:
        if self.processes is not None:
            self.processes.close()
        self.members = []
        if self.data_root is not None:
            shutil.rmtree(self.data_root, ignore_errors=True)
