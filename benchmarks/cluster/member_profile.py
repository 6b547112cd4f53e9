"""``python -m benchmarks.cluster.member_profile [options]``: where a member's CPU goes (``--help`` for options).

Starts the cluster benchmark's 3-node aeron-numba cluster (``aeron_system.AeronClusterSystem``: backoff agents, a
client over its own driver), then measures two windows: ``--idle-s`` seconds with nothing sent, and ``--puts``
synchronous puts one after the other. For each node it prints the CPU of the node's process and of its service
container (``/proc``), and how many duty cycles each agent of the node's thread ran (the ``aeron-numba agent
cycles`` counters a one-process member keeps in its ``cnc.dat``): per second while idle, per put while busy. Then the
bytes per put each node's subscribers consumed in the busy window (its ``sub-pos`` counters that moved), which
names the streams a put moves, the share of each node's busy CPU spent in the kernel (its syscalls: a loopback
send delivers the datagram and wakes its receiver), and the driver's datagram counters per put (data bytes and
frames each way, status messages, heartbeats, NAKs, retransmits): the sends and receives a put costs.

With ``--py-spy DIR`` it also samples each node's process with py-spy (not a dependency: ``pip install py-spy``)
through the busy window, keeps the collapsed stacks in ``DIR/<member>.txt`` and prints each node's functions that
hold the most samples not parked, inclusive of their callees; ``--py-spy-native`` samples native frames too.

It answers how many Python duty cycles a put or an idle second costs and whose they are; ``python -m benchmarks
cluster`` measures latency and ``python -m benchmarks.cluster.put_trace`` the hops of a put. The client polls in a
loop here, on a core the cluster would otherwise have, so the busy window's CPU is not the benchmark's.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cluster.cpu import process_cpu_split_s
from benchmarks.cluster.load import VALUE_SIZE
from benchmarks.cluster.node_options import add_node_options, node_env

WARMUP_PUTS = 20
#: An idle client's keep-alive interval in the idle window, well inside the cluster's 10 s session timeout.
KEEP_ALIVE_S = 4.0
#: The driver's system counters that count what its network cycles sent and received (``layout/counters.py``).
DATAGRAM_COUNTERS = ("BYTES_SENT", "BYTES_RECEIVED", "STATUS_MESSAGES_SENT", "STATUS_MESSAGES_RECEIVED",
                     "HEARTBEATS_SENT", "HEARTBEATS_RECEIVED", "NAK_MESSAGES_SENT", "RETRANSMITS_SENT")
PUT_TIMEOUT_S = 5.0
VALUE = b"p" * VALUE_SIZE


def _agent_cycle_counters(system) -> dict[str, list[tuple[str, object, int]]]:
    """``node name -> [(agent role, cnc, counter id)]`` for each running node's agent-cycle counters."""
    from aeron_numba.kernels.counters import CountersReader
    from aeron_numba.layout.counters import AGENT_CYCLES_COUNTER_TYPE_ID, AGENT_CYCLES_LABEL
    from harness.aeron_dirs import NotYet, try_open_cnc

    prefix = AGENT_CYCLES_LABEL.format(role="")
    found = {}
    for node in system.harness.running_nodes():
        cnc = try_open_cnc(node.aeron_dir)
        if isinstance(cnc, NotYet):
            raise RuntimeError(f"member {node.member_id} has no ready cnc.dat in {node.aeron_dir}: {cnc}")
        reader = CountersReader(cnc.counters_metadata_buffer, cnc.counters_values_buffer)
        found[_node_name(node)] = [(info.label[len(prefix):], cnc, info.counter_id) for info in reader.for_each()
                                   if info.type_id == AGENT_CYCLES_COUNTER_TYPE_ID]
    return found


def _node_name(node) -> str:
    return f"member {node.member_id} ({'leader' if node.is_leader() else 'follower'})"


def _subscriber_position_counters(counters) -> dict[str, list[tuple[str, object, int]]]:
    """``node name -> [(label, cnc, counter id)]`` for each node's subscriber positions (``sub-pos``), read from the
    cnc.dat its agent-cycle counters came from."""
    from aeron_numba.kernels.counters import CountersReader
    from aeron_numba.layout.counters import SUBSCRIBER_POSITION_TYPE_ID

    found = {}
    for name, cncs in counters.items():
        if cncs:
            cnc = cncs[0][1]
            reader = CountersReader(cnc.counters_metadata_buffer, cnc.counters_values_buffer)
            found[name] = [(info.label, cnc, info.counter_id) for info in reader.for_each()
                           if info.type_id == SUBSCRIBER_POSITION_TYPE_ID]
    return found


def _reading(system, counters, positions=None) -> dict:
    """CPU seconds per (node, process), cycles per (node, agent) and, when ``positions`` is given, each
    subscriber position per (node, label), now."""
    from aeron_numba.kernels.counters import get_counter_value

    from aeron_numba.layout import counters as counters_layout

    cpu, system_cpu, cycles, streams, datagrams = {}, {}, {}, {}, {}
    for node in system.harness.running_nodes():
        name = _node_name(node)
        for pid in node.pids():
            role = "node" if pid == node.process.pid else "service container"
            user_s, system_s = process_cpu_split_s(pid) or (0.0, 0.0)
            cpu[(name, role)] = user_s + system_s
            system_cpu[(name, role)] = system_s
        for role, cnc, counter_id in counters.get(name, ()):
            cycles[(name, role)] = int(get_counter_value(cnc.counters_values_buffer, counter_id))
        cncs = counters.get(name, ())
        if cncs:  # system counter ids are their system ids (``SYSTEM_COUNTERS``)
            values = cncs[0][1].counters_values_buffer
            for counter in DATAGRAM_COUNTERS:
                datagrams[(name, counter)] = int(get_counter_value(values, getattr(counters_layout, counter)))
        for label, cnc, counter_id in (positions or {}).get(name, ()):
            streams[(name, label)] = int(get_counter_value(cnc.counters_values_buffer, counter_id))
    return {"at": time.monotonic(), "cpu": cpu, "system_cpu": system_cpu, "cycles": cycles, "streams": streams,
            "datagrams": datagrams}


def _moved(before: dict, after: dict, what: str) -> dict:
    """How much each of ``what``'s values (a reading's dict) moved between the readings."""
    return {key: after[what][key] - value for key, value in before[what].items() if key in after[what]}


def _difference(before: dict, after: dict) -> tuple[float, dict, dict]:
    return after["at"] - before["at"], _moved(before, after, "cpu"), _moved(before, after, "cycles")


def _streams_moved(before: dict, after: dict) -> dict:
    """(node, sub-pos label) -> bytes consumed between the readings, for the positions that moved."""
    return {key: moved for key, moved in _moved(before, after, "streams").items() if moved != 0}


def _put_synchronously(client, count: int, first_token: int) -> None:
    answered = [False]

    def on_complete(token: int, ok: bool) -> None:
        answered[0] = True

    for token in range(first_token, first_token + count):
        answered[0] = False
        deadline = time.monotonic() + PUT_TIMEOUT_S
        while not client.put(f"k{token % 10}", VALUE, token):
            client.poll(on_complete, 0)
            if time.monotonic() > deadline:
                raise TimeoutError(f"put {token} was not sent within {PUT_TIMEOUT_S:.0f} s")
        while not answered[0]:
            client.poll(on_complete, 1_000_000)
            if time.monotonic() > deadline:
                raise TimeoutError(f"put {token} was not acknowledged within {PUT_TIMEOUT_S:.0f} s")


PY_SPY_RATE = 250  # samples per second: enough over a few seconds, little load on 2 cores
TOP_FUNCTIONS = 25
PARKED_FRAME = "IdleWatch.park_until_changed"  # the member thread's idle park


def _start_py_spy(system, directory: Path, native: bool = False) -> list[tuple[str, subprocess.Popen, Path]]:
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        raise RuntimeError("--py-spy needs py-spy on PATH (pip install py-spy)")
    directory.mkdir(parents=True, exist_ok=True)
    samplers = []
    for node in system.harness.running_nodes():
        name = _node_name(node)
        out = directory / f"member-{node.member_id}.txt"
        sampler = subprocess.Popen([py_spy, "record", "--pid", str(node.process.pid), "--rate", str(PY_SPY_RATE),
                                    "--native" if native else "--nonblocking", "--format", "raw", "--output", str(out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        samplers.append((name, sampler, out))
    return samplers


def _stop_py_spy(samplers) -> dict[str, list[tuple[str, float]]]:
    """Each node's functions by share of samples, inclusive (a function counted once per stack)."""
    tops = {}
    for name, sampler, out in samplers:
        sampler.send_signal(signal.SIGINT)  # py-spy writes what it sampled on SIGINT
        try:
            _, err = sampler.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            sampler.kill()
            raise RuntimeError(f"py-spy of {name} did not stop") from None
        if not out.exists():
            raise RuntimeError(f"py-spy of {name} wrote nothing: {err.strip()[-300:]}")
        inclusive = collections.Counter()
        total = 0
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit() or PARKED_FRAME in stack:
                continue  # a park is not work (native samples keep the thread's waits)
            total += int(count)
            for frame in set(stack.split(";")):
                inclusive[frame] += int(count)
        tops[name] = [(frame, n / total) for frame, n in inclusive.most_common(TOP_FUNCTIONS)] if total else []
    return tops


def _idle_window(client, idle_s: float) -> None:
    """Nothing sent for ``idle_s`` but what an idle Aeron client sends: a keep-alive every ``KEEP_ALIVE_S``, or the
    cluster closes the session after its session timeout (10 s) and the puts after the window go unanswered."""
    end = time.monotonic() + idle_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, KEEP_ALIVE_S))  # the idle window: a measurement, not a wait for a condition
        if end - time.monotonic() > 0:
            client.session.send_keep_alive()


def profile(system, puts: int, idle_s: float, py_spy_dir: Path | None = None, native: bool = False) -> dict:
    counters = _agent_cycle_counters(system)
    client = system.client()
    _put_synchronously(client, WARMUP_PUTS, 0)
    before = _reading(system, counters)
    _idle_window(client, idle_s)
    idle = _difference(before, _reading(system, counters))
    samplers = _start_py_spy(system, py_spy_dir, native) if py_spy_dir is not None else []
    positions = _subscriber_position_counters(counters)
    before = _reading(system, counters, positions)
    _put_synchronously(client, puts, WARMUP_PUTS)
    after = _reading(system, counters, positions)
    busy = _difference(before, after)
    tops = _stop_py_spy(samplers)
    for cncs in counters.values():
        for cnc in {id(c): c for _, c, _ in cncs}.values():
            cnc.close()
    return {"puts": puts, "idle": idle, "busy": busy, "streams": _streams_moved(before, after), "py_spy": tops,
            "system_cpu": _moved(before, after, "system_cpu"), "datagrams": _moved(before, after, "datagrams")}


def format_profile(result: dict) -> str:
    idle_s, idle_cpu, idle_cycles = result["idle"]
    busy_s, busy_cpu, busy_cycles = result["busy"]
    puts = result["puts"]
    lines = [f"idle {idle_s:.1f} s: {sum(idle_cpu.values()) / idle_s * 100:.1f} % of a core for the members; "
             f"{puts} synchronous puts in {busy_s:.2f} s: {sum(busy_cpu.values()) * 1e3 / puts:.2f} ms of CPU per put",
             f"{'':34} {'idle':>14} {'busy':>14}"]
    system_cpu = result.get("system_cpu", {})
    for key in sorted(idle_cpu):
        busy_key = busy_cpu.get(key, 0.0)
        kernel = f"  ({system_cpu[key] / busy_key * 100:.0f} % in the kernel)" if busy_key and key in system_cpu else ""
        lines.append(f"{key[0] + ', ' + key[1]:34} {idle_cpu[key] / idle_s * 100:11.1f} % "
                     f"{busy_key * 1e3 / puts:8.2f} ms/put{kernel}")
    lines.append(f"{'cycles of':34} {'per second':>14} {'per put':>14}")
    for key in sorted(idle_cycles):
        lines.append(f"{key[0] + ', ' + key[1][:60]:34} {idle_cycles[key] / idle_s:14.0f} "
                     f"{busy_cycles.get(key, 0) / puts:14.1f}")
    datagrams = result.get("datagrams", {})
    if datagrams:
        names = sorted({name for name, _ in datagrams})
        lines.append("the driver's counters per put: "
                     + ", ".join(counter.lower().replace("_", " ") for counter in DATAGRAM_COUNTERS))
        for name in names:
            lines.append(f"{name:34} " + " ".join(f"{datagrams.get((name, counter), 0) / puts:7.1f}"
                                                  for counter in DATAGRAM_COUNTERS))
    lines.append("streams a node's subscribers consumed in the busy window, bytes per put")
    for (name, label), moved in sorted(result.get("streams", {}).items()):
        lines.append(f"{name}: {moved / puts:8.1f}  {label[:100]}")
    for name, top in result.get("py_spy", {}).items():
        lines.append(f"py-spy, {name}: share of the busy window's samples not parked, inclusive")
        lines.extend(f"  {share * 100:5.1f} %  {frame}" for frame, share in top)
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.cluster.member_profile") -> int:
    from aeron_numba.cli import fail

    from benchmarks.cluster.aeron_system import AeronClusterSystem

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[1])
    parser.add_argument("--puts", type=int, default=200, help="synchronous puts in the busy window (default 200)")
    parser.add_argument("--idle-s", type=float, default=5.0, help="length of the idle window (default 5 s)")
    add_node_options(parser, layout_help="the members' process layout (default one-process; only it counts agent "
                                         "cycles)", env_example="AERON_SHARED_IDLE_STRATEGY_INIT_ARGS=10-5-1us-1ms")
    parser.add_argument("--py-spy", metavar="DIR", type=Path,
                        help="sample each node with py-spy through the busy window; collapsed stacks go to DIR")
    parser.add_argument("--py-spy-native", action="store_true",
                        help="with --py-spy: native frames too (py-spy --native, which pauses each node at every "
                             "sample): the time in compiled code and syscalls, which a sample without them puts on "
                             "the Python line that called it")
    parser.add_argument("--root", help="directory for the cluster's files (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.puts < 1:
        return fail(prog, f"--puts={args.puts} must be >= 1", 2)
    if not 0 < args.idle_s <= 600:
        return fail(prog, f"--idle-s={args.idle_s} must be > 0 and <= 600", 2)
    try:
        env = node_env(args.env)
    except ValueError as exc:
        return fail(prog, str(exc), 2)
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="aeron-numba-member-profile-"))
    system = AeronClusterSystem(compiled_service=args.compiled_service, env=env, process_layout=args.layout)
    try:
        system.start(root)
        print(format_profile(profile(system, args.puts, args.idle_s, args.py_spy, args.py_spy_native)))
    except (RuntimeError, TimeoutError, OSError) as exc:
        return fail(prog, f"{type(exc).__name__}: {exc}", 1)
    finally:
        system.stop()
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
