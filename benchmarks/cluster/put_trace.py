"""``python -m benchmarks.cluster.put_trace [--puts N] [--root DIR]``: where a synchronous put's time goes.

Starts the cluster benchmark's 3-node aeron-numba cluster (``aeron_system.AeronClusterSystem``: backoff agents,
the golden run's timeouts, a client over its own driver) and sends puts one at a time. From each send to its
acknowledgement it samples the value of every counter in every driver's ``cnc.dat`` (the three nodes' and the
client's) in a tight loop and notes when each first moved. It prints, for every counter that moved in most puts,
the median of those times: the put's path hop by hop (client publication, the leader's driver receiving ingress,
its consensus module reading it, the log sent, recorded by each archive, the followers' append positions, the
commit position, the response).

Not a benchmark: the sampler spins on a core the cluster would otherwise have, so every figure is inflated. It
answers which hop takes the time, not how long a put takes (``python -m benchmarks cluster`` measures that).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from aeron_numba.layout.counters import COUNTER_LENGTH
from benchmarks.cluster.load import VALUE_SIZE

#: The first puts warm the path up (compiled kernels, mapped logs) and are not counted.
WARMUP_PUTS = 20
#: A counter is listed when it moved in at least this share of the counted puts.
MOVED_SHARE = 0.6
PUT_TIMEOUT_NS = 2_000_000_000
VALUE = b"v" * VALUE_SIZE
_WORDS_PER_COUNTER = COUNTER_LENGTH // 8


def _counter_values(cnc) -> np.ndarray:
    """Every counter's value (the first int64 of each record) as one strided view of the values buffer."""
    return cnc.counters_values_buffer.view(np.int64)[::_WORDS_PER_COUNTER]


def _open_counters(system) -> dict[str, tuple]:
    """``name -> (cnc, reader)`` for each node's driver (``n<id>L`` for the leader, ``n<id>F`` otherwise) and the
    client's."""
    from aeron_numba.kernels.counters import CountersReader
    from harness.aeron_dirs import NotYet, try_open_cnc

    dirs = {f"n{n.member_id}{'L' if n.is_leader() else 'F'}": n.aeron_dir for n in system.harness.nodes}
    dirs["client"] = system.client_dir
    opened = {}
    for name, aeron_dir in dirs.items():
        cnc = try_open_cnc(aeron_dir)
        if isinstance(cnc, NotYet):
            raise RuntimeError(f"{name}'s driver has no ready cnc.dat in {aeron_dir}: {cnc}")
        opened[name] = (cnc, CountersReader(cnc.counters_metadata_buffer, cnc.counters_values_buffer))
    return opened


def trace(system, puts: int) -> tuple[list[int], dict[tuple[str, int], list[int]], dict[tuple[str, int], str]]:
    """Send ``puts`` synchronous puts; returns each counted put's round trip (ns), for each (driver, counter id)
    the times after the send at which it first moved, and the counters' labels."""
    client = system.client()
    counters = _open_counters(system)
    answered = [False]

    def on_complete(token: int, ok: bool) -> None:
        answered[0] = True

    totals: list[int] = []
    first_moves: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
    for index in range(puts + WARMUP_PUTS):
        before = {name: _counter_values(cnc).copy() for name, (cnc, _) in counters.items()}
        moved: dict[tuple[str, int], int] = {}
        answered[0] = False
        start = time.perf_counter_ns()
        while not client.put(f"k{index % 10}", VALUE, index):
            client.poll(on_complete, 0)
        elapsed = 0
        while not answered[0]:
            elapsed = time.perf_counter_ns() - start
            if elapsed > PUT_TIMEOUT_NS:
                raise TimeoutError(f"put {index} was not acknowledged within {PUT_TIMEOUT_NS / 1e9:.0f} s")
            for name, (cnc, _) in counters.items():
                for counter_id in np.nonzero(_counter_values(cnc) != before[name])[0]:
                    moved.setdefault((name, int(counter_id)), elapsed)
            client.poll(on_complete, 0)
        if index >= WARMUP_PUTS:
            totals.append(time.perf_counter_ns() - start)
            for key, at in moved.items():
                first_moves[key].append(at)
    labels = {(name, info.counter_id): info.label for name, (_, reader) in counters.items()
              for info in reader.for_each()}
    for cnc, _ in counters.values():
        cnc.close()
    return totals, first_moves, labels


def format_trace(totals: list[int], first_moves: dict, labels: dict) -> str:
    lines = [f"{len(totals)} puts, round trip p50 {np.percentile(totals, 50) / 1e3:.1f} us (inflated by the sampler)",
             f"{'median':>10}  {'puts':>4}  {'driver':6} {'id':>4} counter"]
    rows = sorted((float(np.median(times)), key, len(times)) for key, times in first_moves.items()
                  if len(times) >= MOVED_SHARE * len(totals))
    for median, (name, counter_id), count in rows:
        lines.append(f"{median / 1e3:8.1f}us  {count:4d}  {name:6} {counter_id:4d} "
                     f"{labels.get((name, counter_id), '?')[:80]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.cluster.put_trace") -> int:
    from aeron_numba.cli import fail

    from benchmarks.cluster.aeron_system import AeronClusterSystem

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[1])
    parser.add_argument("--puts", type=int, default=100, help="puts to trace after the warm-up (default 100)")
    parser.add_argument("--root", help="directory for the cluster's files (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.puts < 1:
        return fail(prog, f"--puts={args.puts} must be >= 1", 2)
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="aeron-numba-put-trace-"))
    system = AeronClusterSystem()
    try:
        system.start(root)
        print(format_trace(*trace(system, args.puts)))
    except (RuntimeError, TimeoutError, OSError) as exc:
        return fail(prog, f"{type(exc).__name__}: {exc}", 1)
    finally:
        system.stop()
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
