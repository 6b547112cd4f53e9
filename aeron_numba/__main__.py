"""The front door: ``python -m aeron_numba <command> [args]`` (console script ``aeron-numba``) runs everything the
package can run; each command is also a console script of its own (``aeron-numba-driver``, ``aeron-stat``, ...).

A command's module is imported only once it is chosen, so ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from aeron_numba import cli

#: command -> (module whose ``main(argv, prog=...)`` runs it, its console script, what it does)
COMMANDS = {
    "driver": ("aeron_numba.commands.driver", "aeron-numba-driver",
               "run a media driver (aeron:ipc, aeron:udp) in this process"),
    "archive": ("aeron_numba.commands.archive", "aeron-numba-archive",
                "run an archive (record, list, replay, replicate), optionally with its own driver"),
    "cluster": ("aeron_numba.commands.cluster", "aeron-numba-cluster",
                "run a cluster node (consensus module, driver, archive, service), or 'cluster demo'"),
    "stat": ("aeron_numba.tools.aeron_stat", "aeron-stat", "print a running driver's counters (AeronStat)"),
    "error-stat": ("aeron_numba.tools.error_stat", "aeron-error-stat",
                   "print the distinct errors a driver (or a mark file) recorded (ErrorStat)"),
    "loss-stat": ("aeron_numba.tools.loss_stat", "aeron-loss-stat", "print the loss a driver observed (LossStat)"),
    "archive-tool": ("aeron_numba.tools.archive_tool", "archive-tool",
                     "inspect and repair an archive dir offline (ArchiveTool)"),
    "cluster-tool": ("aeron_numba.tools.cluster_tool", "cluster-tool",
                     "read a cluster node's dir offline: recording.log, recovery plan, mark files (ClusterTool)"),
    "cluster-service": ("aeron_numba.commands.cluster_service", "aeron-numba-cluster-service",
                        "run a clustered service container (a ClusteredService class of yours) for a node"),
    "spark": ("aeron_numba.spark.__main__", None,
              "run a Spark job over recordings, chaos runs or benchmark runs (PySpark, Java 17+)"),
    "demo": ("aeron_numba.demo", None, "driver + publisher + subscriber processes over aeron:ipc"),
    "settings": ("aeron_numba.settings_doc", None, "print every AERON_* setting with its default and meaning"),
}


def build_parser(prog: str) -> argparse.ArgumentParser:
    width = max(map(len, COMMANDS))
    listed = "\n".join(f"  {name:<{width}}  {about}" + (f" [{script}]" if script else "")
                       for name, (_, script, about) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog=prog, usage=f"{prog} [-h] [--version] <command> [args]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="aeron-numba: Aeron's media driver, client and Archive in Python, hot paths in Numba.",
        epilog=f"commands (the console script of each in brackets):\n{listed}\n\n"
               f"'{prog} <command> --help' tells more. Settings: {cli.SETTINGS_REFERENCE}")
    cli.add_version_argument(parser)
    parser.add_argument("command", choices=COMMANDS, metavar="<command>", help="one of the commands below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    prog = cli.prog_name("aeron_numba", prog)
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    return module.main(args.args, prog=f"{prog} {args.command}")


if __name__ == "__main__":
    sys.exit(main())
