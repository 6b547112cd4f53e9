"""UDP loopback through the media driver, beside raw UDP sockets (the floor).

The Aeron cases are the IPC ones over ``aeron:udp?endpoint=127.0.0.1:<port>`` channels (``aeron_pairs.channels``
picks them from the ports the runner reserved): the same compiled loops, so one message travels publication
log -> A's driver's sender -> loopback socket -> B's driver's receiver -> image log. Each worker has a driver of
its own, as two hosts would (``runner.UDP_DRIVER_ENV``: the sender and receiver share the conductor's thread,
Aeron's SHARED mode, with a yielding idle strategy), and their loops yield the core every ``YIELD_MASK + 1``
empty spins, because on two cores the drivers have to run where the pinned loops spin.

* ``rtt-aeron-compiled-udp`` / ``tp-aeron-compiled-udp``: ``ipc_rtt`` / ``ipc_throughput``'s compiled roles.
* ``rtt-floor-udp``: two compiled processes ping-pong a datagram over two connected loopback sockets with
  libc ``send`` and a spinning non-blocking ``recv`` (``loops.udp_floor_ping`` / ``udp_floor_pong``).
* ``tp-floor-udp``: A sends MTU-payload datagrams as fast as ``send`` takes them, B receives and marks every
  window; what the kernel drops (receive buffer full) is reported, not retried.
* ``rtt-relay-floor-udp``: the floor of any driver on this round trip. Each worker starts a relay process of its
  own (unpinned, in the runner's session, as the drivers are) that does the least a driver does: every pass it
  looks at one word its client writes and makes one non-blocking ``recv``, and yields after a pass that found
  nothing (``loops.udp_relay``); the clients ping-pong one value through them, yielding as the Aeron loops do.
  Four busy processes share the two cores as in the Aeron case, so what separates the two is the driver's own
  work, and what separates this floor from ``rtt-floor-udp`` is the two extra hops and their scheduling.
"""

from __future__ import annotations

import mmap
import os
import socket
import time
from pathlib import Path

import numpy as np

from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.layout.frame import DEFAULT_MTU_LENGTH, HEADER_LENGTH, MAX_UDP_PAYLOAD_LENGTH
from benchmarks import ipc_rtt, ipc_throughput, loops, stats
from benchmarks.aeron_pairs import UDP_HOST
from harness.awaiting import await_condition
from harness.process_manager import ProcessManager

#: The loops yield every 256 empty spins (about 1 us of spinning).
YIELD_MASK = 0xFF
#: A raw datagram the size of the payload one Aeron datagram of the default MTU carries.
FLOOR_DATAGRAM = DEFAULT_MTU_LENGTH - HEADER_LENGTH
#: The jumbo cases' MTU (Aeron's largest) and the raw datagram of that size's payload.
JUMBO_MTU = MAX_UDP_PAYLOAD_LENGTH
JUMBO_FLOOR_DATAGRAM = JUMBO_MTU - HEADER_LENGTH
#: Floor receiver's socket buffer (the kernel caps it at net.core.rmem_max).
FLOOR_RCVBUF = 4 * 1024 * 1024
#: ``python -c`` code of a relay process (``relay_main``); it dies with the worker that started it.
RELAY_CODE = ("from benchmarks.worker import die_with_parent; die_with_parent(); "
              "import sys; from benchmarks.udp import relay_main; sys.exit(relay_main(sys.argv[1:]))")
#: The line a client shares with its relay (``loops.RELAY_*`` words), a file both map.
RELAY_LINE_LENGTH = 64
#: A relay loads its compiled loop from the cache the parent filled, then binds: seconds, not minutes.
RELAY_START_TIMEOUT_S = 60.0


def _connected_socket(env, case: dict) -> socket.socket:
    """A's socket is bound to port 0 of the case and connected to port 1, B's the other way round."""
    ports = case["udp_ports"]
    mine, theirs = (ports[0], ports[1]) if env.role == "A" else (ports[1], ports[0])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    env.on_case_end(sock.close)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, FLOOR_RCVBUF)
    sock.bind((UDP_HOST, mine))
    sock.connect((UDP_HOST, theirs))
    return sock


def _total(case: dict) -> int:
    return case["warmup"] + case["runs"] * case["n"]


def floor_ping(case: dict, env) -> dict:
    sock = _connected_socket(env, case)
    env.sync(1)  # both sockets bound: no datagram meets a closed port
    src = np.zeros(max(case["size"], 8), np.uint8)
    dst = np.zeros(2048, np.uint8)
    return stats.compiled_round_trips(
        case, env,
        lambda base, count, lat, timeout: loops.udp_floor_ping(sock.fileno(), src, dst, case["size"], base, count,
                                                               lat, timeout),
        "raw UDP round trips before the deadline or a send error")


def floor_pong(case: dict, env) -> dict:
    sock = _connected_socket(env, case)
    env.sync(1)
    total = _total(case)
    done = loops.udp_floor_pong(sock.fileno(), np.zeros(MAX_UDP_PAYLOAD_LENGTH, np.uint8), total, env.timeout_ticks())
    if done != total:
        raise RuntimeError(f"echoed {done} of {total} datagrams before the deadline or a send error")
    return {"echoed": int(done)}


def _stop_line(env) -> np.ndarray:
    line = env.page()[:64]
    line[:] = 0  # both sides clear it before the first barrier
    return line


def floor_send(case: dict, env) -> dict:
    sock = _connected_socket(env, case)
    stop = _stop_line(env)
    env.sync(1)
    sent = loops.udp_floor_send(sock.fileno(), np.zeros(case["size"], np.uint8), case["size"], stop,
                                env.timeout_ticks())
    if sent < 0:
        raise RuntimeError(f"sent {-sent - 1} datagrams, the receiver never said stop")
    return {"sent": int(sent)}


def floor_receive(case: dict, env) -> dict:
    sock = _connected_socket(env, case)
    stop = _stop_line(env)
    env.sync(1)
    ctx = np.zeros(loops.ECHO_CTX_WORDS, np.int64)
    buffer = np.zeros(MAX_UDP_PAYLOAD_LENGTH, np.uint8)
    marks = []
    try:
        for target in ipc_throughput.targets(case):
            got = loops.udp_floor_receive(sock.fileno(), buffer, ctx, target, env.timeout_ticks())
            marks.append((int(got), time.perf_counter_ns()))
            if got < target:
                raise RuntimeError(f"received {got} of {target} datagrams before the deadline")
    finally:
        put_int64_release(stop, 0, 1)
    received = int(ctx[loops.CTX_RECEIVED])
    return stats.throughput_result(marks, case["size"], case["runs"], received=received, expected=received,
                                   errors=0, dropped=int(ctx[loops.CTX_ERRORS]))


def _map_line(path) -> np.ndarray:
    """The line a client and its relay share, mapped from its file (the mapping outlives the file's handle)."""
    with open(path, "r+b") as f:
        return np.frombuffer(mmap.mmap(f.fileno(), RELAY_LINE_LENGTH), np.uint8)


def relay_main(argv: list[str]) -> int:
    """A relay process: ``line_path my_port their_port datagram_length timeout_ticks``."""
    line_path, mine, theirs, length, timeout_ticks = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    unpin()  # it inherited its worker's core; the drivers it stands for are unpinned
    line = _map_line(line_path)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, FLOOR_RCVBUF)
    sock.bind((UDP_HOST, mine))
    sock.connect((UDP_HOST, theirs))
    relayed = loops.udp_relay(sock.fileno(), line, np.zeros(max(length, 8), np.uint8),
                              np.zeros(MAX_UDP_PAYLOAD_LENGTH, np.uint8), length, timeout_ticks)
    if relayed == loops.RELAY_SEND_FAILED:
        print(f"relay: send from port {mine} to port {theirs} failed", flush=True)
        return 1
    return 0


def unpin() -> None:
    """Let this process run on every online core (Linux; elsewhere, or where a cgroup forbids it, as it was)."""
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass


def _start_relay(case: dict, env) -> np.ndarray:
    """This worker's relay process, bound and polling; returns the line its client shares with it. The relay is
    stopped, and killed if it does not stop, when the case ends."""
    ports = case["udp_ports"]
    mine, theirs = (ports[0], ports[1]) if env.role == "A" else (ports[1], ports[0])
    path = Path(env.path(f"relay-line-{env.role}"))
    path.write_bytes(bytes(RELAY_LINE_LENGTH))
    line = _map_line(path)
    processes = ProcessManager(path.parent / f"relay-logs-{env.role}")
    relay = processes.spawn_python(f"relay-{env.role}", RELAY_CODE, str(path), str(mine), str(theirs),
                                   str(case["size"]), str(env.timeout_ticks()), own_session=False)

    def stop() -> None:
        put_int64_release(line, loops.RELAY_STOP, 1)
        try:
            relay.wait(10.0)
        finally:
            processes.close()
            path.unlink(missing_ok=True)

    env.on_case_end(stop)
    await_condition(lambda: get_int64_acquire(line, loops.RELAY_READY) != 0, RELAY_START_TIMEOUT_S,
                    f"relay {env.role} to bind port {mine}", processes=[relay])
    return line


def relay_floor_ping(case: dict, env) -> dict:
    line = _start_relay(case, env)
    env.sync(1)  # both relays bound: no datagram meets a closed port
    return stats.compiled_round_trips(
        case, env,
        lambda base, count, lat, timeout: loops.relay_ping(line, base, count, lat, timeout, case["yield_mask"]),
        "round trips through the relays before the deadline")


def relay_floor_pong(case: dict, env) -> dict:
    line = _start_relay(case, env)
    env.sync(1)
    total = _total(case)
    done = loops.relay_pong(line, 0, total, env.timeout_ticks(), case["yield_mask"])
    if done != total:
        raise RuntimeError(f"echoed {done} of {total} values through the relays before the deadline")
    return {"echoed": int(done)}


ROLES = {
    "rtt-aeron-compiled-udp": {"A": ipc_rtt.ping_compiled, "B": ipc_rtt.echo_compiled},
    "tp-aeron-compiled-udp": {"A": ipc_throughput.produce_compiled, "B": ipc_throughput.consume_compiled},
    "rtt-floor-udp": {"A": floor_ping, "B": floor_pong},
    "rtt-relay-floor-udp": {"A": relay_floor_ping, "B": relay_floor_pong},
    "tp-floor-udp": {"A": floor_send, "B": floor_receive},
}
