"""Settings with Aeron's names: a context field is a default, an environment variable and a parser.

Durations accept Aeron's suffixes (``10s``, ``500ms``, ``100us``, plain = ns) and sizes ``k``/``m``/``g``, as
Aeron's system properties do. Used by the driver's and the archive's contexts; only contexts read the
environment.
"""

from __future__ import annotations

import os
from dataclasses import field, fields

from aeron_numba.codecs.channel_uri import parse_duration_ns, parse_size
from aeron_numba.errors import ConfigurationError

#: The project's data folder (the benchmark history's home): read by ``aeron_numba.spark.history_table``.
DATA_DIR_ENV = "AERON_NUMBA_DATA_DIR"
#: cluster-tool's live commands: the least time they wait for a node (Aeron's aeron.cluster.tool.timeout).
CLUSTER_TOOL_TIMEOUT_ENV = "AERON_CLUSTER_TOOL_TIMEOUT"


def duration(value: str, name: str) -> int:
    return parse_duration_ns(name, value.strip())


def size(value: str, name: str) -> int:
    return parse_size(name, value.strip())


def boolean(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"{name}={value!r} must be true or false")


def integer(value: str, name: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigurationError(f"{name}={value!r} is not an integer") from None


def text(value: str, name: str) -> str:
    return value


def setting(default, env: str | None, parse=None, doc: str = ""):
    """A context field with its default, its environment variable, how to parse it and what it means for a user
    (``doc``: one sentence, listed in docs/settings.md by ``aeron_numba/settings_doc.py``)."""
    return field(default=default, metadata={"env": env, "parse": parse, "doc": doc})


def from_env(cls, environ: dict[str, str] | None = None, **overrides):
    """``cls`` (a dataclass of ``setting`` fields) from its defaults, then the environment variables, then
    explicit ``overrides`` (highest priority)."""
    environ = os.environ if environ is None else environ
    values = {}
    for f in fields(cls):
        env, parse = f.metadata.get("env"), f.metadata.get("parse")
        if env and env in environ and environ[env] != "":
            values[f.name] = parse(environ[env], env)
    values.update(overrides)
    return cls(**values)
