"""The users' list of settings (docs/settings.md), generated from the contexts' ``setting(...)`` definitions so the
names, defaults and meanings it shows are the ones the code uses.

``python -m aeron_numba settings`` prints it; ``python -m aeron_numba.settings_doc --write docs/settings.md``
regenerates the checked-in file (a test fails while the two differ). ``ignored_variables`` names the ``AERON_*``
variables of an environment that no part of aeron-numba reads, for the processes to warn about.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import MISSING, fields
from typing import Mapping

from aeron_numba.archive.context import ArchiveContext
from aeron_numba.cli import LOG_LEVEL_ENV, add_version_argument
from aeron_numba.cluster.context import AeronClusterContext, ClusteredServiceContext, ConsensusModuleContext
from aeron_numba.driver.context import DriverContext
from aeron_numba.settings import CLUSTER_TOOL_TIMEOUT_ENV, DATA_DIR_ENV, boolean, duration, size

DOC_PATH = "docs/settings.md"

def client_variables() -> dict[str, tuple[str, str]]:
    """The variables the client reads itself (``client/context.py``, after its keyword arguments), with its
    defaults; imported here, not at the top, as the client's context imports its agents (and Numba)."""
    from aeron_numba.client import context as c

    return {
        c.DRIVER_TIMEOUT_ENV: (str(c.DEFAULT_DRIVER_TIMEOUT_MS), "Milliseconds without a driver heartbeat after "
                                                                 "which the client gives up on the driver."),
        c.RESOURCE_LINGER_DURATION_ENV: (_duration_text(c.DEFAULT_RESOURCE_LINGER_DURATION_NS),
                                         "How long a released log buffer stays mapped in the client."),
        c.IDLE_SLEEP_DURATION_ENV: (_duration_text(c.DEFAULT_IDLE_SLEEP_DURATION_NS),
                                    "Sleep of the client conductor when a duty cycle found no work."),
        c.CLIENT_NAME_ENV: ("(empty)", "Name of the client, shown in its heartbeat counter's label."),
    }


PROCESS_VARIABLES = {
    LOG_LEVEL_ENV: ("WARNING", "Level of the log lines the driver, archive and tools write to stderr (DEBUG, INFO, "
                               "WARNING, ERROR); -v / --verbose overrides it."),
    CLUSTER_TOOL_TIMEOUT_ENV: ("0", "Least time cluster-tool's live commands wait for a node's answer (Aeron's "
                                        "aeron.cluster.tool.timeout); 0: each command's own (1 s, 30 s for snapshot)."),
    DATA_DIR_ENV: ("$XDG_DATA_HOME/aeron-numba, else ~/.local/share/aeron-numba",
                   "The project's data folder: the benchmark history (benchmark-history/) lives there."),
}
_SECTIONS = (
    ("Media driver", "python -m aeron_numba driver, aeron-numba-driver, DriverContext", DriverContext),
    ("Archive", "python -m aeron_numba archive, aeron-numba-archive, ArchiveContext", ArchiveContext),
    ("Cluster consensus module", "ConsensusModuleContext", ConsensusModuleContext),
    ("Clustered service container", "ClusteredServiceContext", ClusteredServiceContext),
    ("Cluster client", "AeronClusterContext", AeronClusterContext),
)


def _duration_text(ns: int) -> str:
    for unit, scale in (("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)):
        if ns and ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns" if ns else "0"


def _size_text(length: int) -> str:
    for unit, scale in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if length and length % scale == 0:
            return f"{length // scale}{unit}"
    return str(length)


def default_text(field) -> str:
    """A default as a user would write it in the variable (``10s``, ``16m``, ``true``; ``(unset)`` for None)."""
    value, parse = field.default, field.metadata.get("parse")
    if value is MISSING or value is None:
        return "(unset)"
    if parse is boolean:
        return "true" if value else "false"
    if parse is duration:
        return _duration_text(value)
    if parse is size:
        return _size_text(value)
    return str(value) if value != "" else "(empty)"


def context_settings(cls) -> list[tuple[str, str, str, str]]:
    """``(variable, default, field name, meaning)`` of every setting of a context class, in definition order."""
    return [(f.metadata["env"], default_text(f), f.name, f.metadata.get("doc", "")) for f in fields(cls)
            if f.metadata.get("env")]


def known_variables() -> set[str]:
    """Every environment variable some part of aeron-numba reads."""
    names = set(client_variables()) | set(PROCESS_VARIABLES)
    for _, _, cls in _SECTIONS:
        names.update(env for env, _, _, _ in context_settings(cls))
    return names


def ignored_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``AERON_*`` variables set in ``environ`` that nothing in aeron-numba reads (a user expecting an effect
    must be told there is none)."""
    environ = os.environ if environ is None else environ
    known = known_variables()
    return sorted(name for name in environ if name.startswith("AERON_") and name not in known)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows) -> list[str]:
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    lines += [f"| `{env}` | `{_cell(default)}` | {_cell(meaning)} |" for env, default, meaning in rows]
    return lines


def render() -> str:
    """docs/settings.md as the code defines it."""
    lines = [
        "# Settings",
        "",
        "<!-- AUTOGENERATED by aeron_numba/settings_doc.py from the contexts' setting(...) definitions: do not edit;",
        "     regenerate with: python -m aeron_numba.settings_doc --write docs/settings.md -->",
        "",
        "Every process takes Aeron's environment variables. Durations take Aeron's suffixes (`10s`, `500ms`,",
        "`100us`, a plain number is nanoseconds) and lengths `k`, `m`, `g`. Settings are checked before anything",
        "starts; a bad value stops the process with a message naming the value and its limit. An `AERON_*`",
        "variable that no part of aeron-numba reads is named in a warning when a driver or archive starts.",
        "",
    ]
    for title, runs, cls in _SECTIONS:
        lines += [f"## {title}", "", f"Read by: {runs}.", ""]
        lines += _table((env, default, meaning) for env, default, _, meaning in context_settings(cls))
        lines.append("")
    lines += ["## Client", "", "Read by `Context.conclude()` for each keyword argument not given (and `AERON_DIR`, "
              "whose default is the driver's).", ""]
    lines += _table((env, default, meaning) for env, (default, meaning) in client_variables().items())
    lines += ["", "## Every process", ""]
    lines += _table((env, default, meaning) for env, (default, meaning) in PROCESS_VARIABLES.items())
    return "\n".join(lines) + "\n"


def help_epilog(cls, prog: str) -> str:
    """The settings of one context for a ``--help`` (variable and default), and where their meanings are."""
    rows = context_settings(cls)
    width = max(len(env) for env, _, _, _ in rows)
    listed = "\n".join(f"  {env:<{width}}  {default}" for env, default, _, _ in rows)
    return (f"settings (environment variables, with their defaults):\n{listed}\n\n"
            f"What each one means: docs/settings.md, or: python -m aeron_numba settings")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog or "python -m aeron_numba.settings_doc",
                                     description="Print (or write) the users' list of settings.")
    add_version_argument(parser)
    parser.add_argument("--write", metavar="PATH", help=f"write the reference to PATH (e.g. {DOC_PATH})")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
