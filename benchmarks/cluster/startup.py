"""``python -m benchmarks.cluster.startup [options]``: how long a 3-member cluster takes from the command to its first
leader, and where that time goes (``--help`` for options).

Starts the members together with the harness (``harness/cluster.py``: the node command, the benchmark's backoff
agents, the example key-value service), then samples each member's counters every few milliseconds until every
election has closed with a leader and its followers. It prints, per member, when its start-up line came (imports,
kernels loaded or compiled, driver, archive and consensus module up), when its driver's cnc.dat was ready, and how
long its election stayed in each state; and the time from the command to the leader. Run it twice: the first run
of a fresh kernel cache includes compiling (issue 28's start-up target is for a warm cache).

A measurement, not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cluster.node_options import add_node_options, node_env

SAMPLE_S = 0.005
DEFAULT_TIMEOUT_S = 120.0


def timeline(harness, timeout_s: float) -> dict:
    """Start every member, sample until a leader and two followers have closed their elections; per member: the
    start-up line's time, cnc.dat's ready time and ``[(election state, entered at)]``, all from the command."""
    from aeron_numba.layout import cluster as C
    from harness.aeron_dirs import NotYet, try_open_cnc

    started = time.monotonic()
    ids = harness.launch()
    members = {member_id: {"line_s": None, "cnc_s": None, "states": []} for member_id in ids}
    deadline = started + timeout_s
    while True:
        now = time.monotonic() - started
        for member_id in ids:
            node, member = harness.node(member_id), members[member_id]
            if member["line_s"] is None and "aeron-numba cluster node:" in node.process.output():
                member["line_s"] = now
            if member["cnc_s"] is None:
                cnc = try_open_cnc(node.aeron_dir)
                if not isinstance(cnc, NotYet):
                    cnc.close()
                    member["cnc_s"] = now
                continue
            state = node.election_state()
            if state is not None and (not member["states"] or member["states"][-1][0] != state):
                member["states"].append((state, now))
        closed = [harness.node(m) for m in ids if members[m]["states"]
                  and members[m]["states"][-1][0] == C.ElectionState.CLOSED]
        if len(closed) == len(ids) and sum(node.is_leader() for node in closed) == 1:
            leader = next(node.member_id for node in closed if node.is_leader())
            return {"members": members, "leader": leader, "leader_s": members[leader]["states"][-1][1]}
        if time.monotonic() > deadline:
            raise TimeoutError(f"no leader with every election closed within {timeout_s:.0f} s: "
                               + "; ".join(f"member {m}: {_states_text(members[m]['states'])}" for m in ids))
        time.sleep(SAMPLE_S)


def _states_text(states) -> str:
    return " ".join(state.name for state, _ in states) or "no election counter yet"


def format_timeline(result: dict) -> str:
    lines = [f"first leader: member {result['leader']}, {result['leader_s']:.2f} s after the command"]
    for member_id, member in result["members"].items():
        line = "-" if member["line_s"] is None else f"{member['line_s']:.2f} s"
        lines.append(f"member {member_id}: start-up line at {line}, cnc.dat ready at {member['cnc_s']:.2f} s")
        states = member["states"]
        for (state, entered), following in zip(states, states[1:] + [(None, None)]):
            spent = "" if following[1] is None else f" for {following[1] - entered:.2f} s"
            lines.append(f"  {state.name:<26} from {entered:.2f} s{spent}")
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.cluster.startup") -> int:
    from aeron_numba.cli import fail

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[1])
    add_node_options(parser, layout_help="the members' process layout (default one-process)",
                     env_example="AERON_SHARED_IDLE_STRATEGY=sleeping (what the demo runs)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"give up after this many seconds (default {DEFAULT_TIMEOUT_S:.0f})")
    parser.add_argument("--root", help="directory for the cluster's files (default: a temporary one)")
    args = parser.parse_args(argv)
    if not 0 < args.timeout <= 3600:
        return fail(prog, f"--timeout={args.timeout} must be > 0 and <= 3600", 2)
    try:
        env = node_env(args.env)
    except ValueError as exc:
        return fail(prog, str(exc), 2)
    from benchmarks.cluster.aeron_system import COMPILED_SERVICE, NODE_ENV, SERVICE
    from harness.cluster import ClusterHarness
    from harness.process_manager import ProcessManager

    service = COMPILED_SERVICE if args.compiled_service else SERVICE
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="aeron-numba-startup-"))
    harness = ClusterHarness(ProcessManager(root / "logs"), service=service, env={**NODE_ENV, **env}, name="startup",
                             process_layout=args.layout)
    try:
        print(format_timeline(timeline(harness, args.timeout)))
    except (RuntimeError, TimeoutError, OSError) as exc:
        return fail(prog, f"{type(exc).__name__}: {exc}", 1)
    finally:
        harness.close()
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
