"""The command-line options the cluster's diagnosis tools share (``member_profile``, ``startup``): which layout and
service the members run, and settings for every node over the benchmark's."""

from __future__ import annotations

import argparse

LAYOUTS = ("one-process", "processes")


def add_node_options(parser: argparse.ArgumentParser, *, layout_help: str, env_example: str) -> None:
    parser.add_argument("--layout", choices=LAYOUTS, default=LAYOUTS[0], help=layout_help)
    parser.add_argument("--compiled-service", action="store_true",
                        help="the compiled key-value service (CompiledKeyValueService) instead of the Python one")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help=f"a setting for every node over the benchmark's (repeatable), e.g. {env_example}")


def node_env(items: list[str]) -> dict[str, str]:
    """``--env`` items as a dict; ValueError naming the first that is not ``AERON_<NAME>=<value>``."""
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("AERON_"):
            raise ValueError(f"--env {item!r} must be AERON_<NAME>=<value>")
        env[name] = value
    return env
