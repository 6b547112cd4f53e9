"""Finding run folders and reading their JSON files, for the ``aeron-chaos`` and ``aeron-bench`` sources.

The chaos runner and the benchmark runner write small JSON files (chaos/TIMELINE.md, benchmarks/report.py);
the library may not import either tool (import-linter), so the formats are read here directly. Every error
names the file (and the line, for JSON lines) so a bad folder is found without reading a JVM stack trace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from aeron_numba.errors import AeronError


class RunFileError(AeronError, ValueError):
    """A run folder or one of its files cannot be read: the message names the file (and line) and why."""


def find_run_dirs(root: str, marker_files: tuple[str, ...], what: str) -> list[str]:
    """Every folder at or under ``root`` holding one of ``marker_files``, sorted by path. A run folder's own
    sub-folders are not searched (they hold its logs, never another run)."""
    if not root:
        raise RunFileError(f"no path given: load(<folder of {what}>)")
    if not os.path.isdir(root):
        raise RunFileError(f"{root}: not a folder (expected a folder of {what})")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if any(name in filenames for name in marker_files):
            found.append(dirpath)
            dirnames.clear()
        else:
            dirnames.sort()
    if not found:
        raise RunFileError(f"{root}: no {what} found (a run folder holds {' or '.join(marker_files)})")
    return sorted(found)


def read_json(path: str | Path) -> dict:
    """The JSON object in ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunFileError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def read_json_lines(path: str | Path, required: tuple[str, ...] = ()):
    """Yield ``(line_number, object)`` for each line of the JSON-lines file ``path`` (1-based numbers).

    A line that is not a JSON object, or lacks a ``required`` key, raises ``RunFileError`` naming the file
    and line: the merged timeline is written whole at the end of a run, so a bad line is damage, not a torn
    write to skip."""
    try:
        f = open(path, "rb")  # bytes: a line that is not UTF-8 is reported with its number like any bad line
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing") from None
    with f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise RunFileError(f"{path}:{number}: not a JSON line: {e}") from None
            if not isinstance(value, dict):
                raise RunFileError(f"{path}:{number}: expected a JSON object, found {type(value).__name__}")
            missing = [key for key in required if key not in value]
            if missing:
                raise RunFileError(f"{path}:{number}: missing field(s) {', '.join(missing)}")
            yield number, value


def rows_option(options, source: str, allowed: tuple[str, ...]) -> str:
    """The ``rows`` option of a run-folder source (the first of ``allowed`` by default), or a ValueError naming
    the source, the value and what it may be."""
    rows = str(options.get("rows", allowed[0])).lower()
    if rows not in allowed:
        raise ValueError(f"{source}: rows={rows!r} is not one of {', '.join(allowed)}")
    return rows
