"""One PySyncObj node of the cluster benchmark (``python -m benchmarks.cluster.pysyncobj_node``): a ``ReplDict``
(PySyncObj's own replicated dict: ``set`` goes through the Raft log, ``get`` reads the local copy) in a
``SyncObj`` on a loopback TCP port, and a control connection (a Unix socket, ``multiprocessing.connection``) over
which the benchmark asks for its status, a read, or a load run.

The node is single-threaded: ``autoTick=False`` and this process's loop calls ``doTick`` itself (between control
commands, and as the load generator's ``poll`` during a run), which waits in PySyncObj's own poller for its
sockets. That spares PySyncObj the GIL hand-offs between its tick thread and the caller of its default
``autoTick`` mode: PySyncObj at its best, in its favour. The load generator (``benchmarks.cluster.load``) runs
here, in the node, because PySyncObj has no client protocol: a Python user's application calls ``set`` in a
node. With ``--batch`` PySyncObj's default batching is on (entries go out every ``appendEntriesPeriod``);
without it, each ``set`` is sent at once (``appendEntriesUseBatch=False``).
"""

from __future__ import annotations

import argparse
import sys
from multiprocessing.connection import Listener

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.batteries import ReplDict

from benchmarks.cluster.load import FailoverSpec, LoadSpec, run_failover, run_open_loop

CONTROL_AUTHKEY = b"aeron-numba-bench"
IDLE_TICK_S = 0.005


class ReplDictClient:
    """``KvClient`` over the node's ``ReplDict``: ``set`` with a callback, acknowledgements delivered by ticks."""

    def __init__(self, syncobj: SyncObj, store: ReplDict):
        self._tick = syncobj.doTick
        self._set = store.set
        self._on_complete = None

    def _callback(self, token: int):
        def done(result, error):
            self._on_complete(token, error == FAIL_REASON.SUCCESS)
        return done

    def put(self, key: str, value: bytes, token: int) -> bool:
        self._set(key, value, callback=self._callback(token))
        return True

    def poll(self, on_complete, timeout_ns: int) -> int:
        self._on_complete = on_complete
        self._tick(timeout_ns / 1e9)
        return 0

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster.pysyncobj_node")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--ports", required=True, help="the three nodes' TCP ports, comma-separated")
    parser.add_argument("--control", required=True, help="Unix socket path of the control connection")
    parser.add_argument("--batch", action="store_true", help="PySyncObj's default batching of log entries")
    parser.add_argument("--append-entries-period", type=float, default=0.1)
    parser.add_argument("--raft-min-timeout", type=float, default=0.4)
    parser.add_argument("--raft-max-timeout", type=float, default=1.4)
    parser.add_argument("--connection-timeout", type=float, default=3.5)
    args = parser.parse_args(argv)
    addresses = [f"127.0.0.1:{p}" for p in args.ports.split(",")]
    conf = SyncObjConf(autoTick=False, appendEntriesUseBatch=args.batch,
                       appendEntriesPeriod=args.append_entries_period, raftMinTimeout=args.raft_min_timeout,
                       raftMaxTimeout=args.raft_max_timeout, connectionTimeout=args.connection_timeout,
                       dynamicMembershipChange=False)
    listener = Listener(args.control, family="AF_UNIX", authkey=CONTROL_AUTHKEY)
    print(f"pysyncobj node {args.index} control on {args.control}", flush=True)
    connection = listener.accept()
    store = ReplDict()
    me = addresses[args.index]
    syncobj = SyncObj(me, [a for a in addresses if a != me], conf=conf, consumers=[store])
    client = ReplDictClient(syncobj, store)
    print(f"pysyncobj node {args.index} on {me}", flush=True)
    while True:
        syncobj.doTick(IDLE_TICK_S)
        if not connection.poll():
            continue
        try:
            command, argument = connection.recv()
        except EOFError:
            break
        if command == "status":
            leader = syncobj._getLeader()
            reply = {"self": me, "leader": None if leader is None else leader.address, "ready": syncobj.isReady(),
                     "term": syncobj.raftCurrentTerm, "commit_index": syncobj.raftCommitIndex}
        elif command == "get":
            reply = store.get(argument)
        elif command == "load":
            reply = run_open_loop(client, LoadSpec(**argument)).to_dict()
        elif command == "failover":
            reply = run_failover(client, FailoverSpec(**argument)).to_dict()
        elif command == "stop":
            connection.send("stopped")
            break
        else:
            reply = f"unknown command {command!r}"
        connection.send(reply)
    syncobj.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
