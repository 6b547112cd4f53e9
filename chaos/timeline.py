"""The run timeline: JSON lines, one event per line (format in chaos/TIMELINE.md; keep it stable).

Every writer (the controller and each worker process) appends to its own file in the run folder with
``Timeline``; ``merge_timeline`` sorts them all by ``ts_ns`` (epoch ns, one clock for every process on the
host) into ``timeline.jsonl`` at the end of the run.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

FORMAT_VERSION = 1
TIMELINE_FILE = "timeline.jsonl"
CONTROLLER_FILE = "controller.jsonl"
WORKERS_DIR = "workers"


class Timeline:
    """Append-only JSON-lines writer, line-buffered so a SIGKILLed worker loses at most the line in flight."""

    def __init__(self, path: str | Path, source: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.source = source
        self._lock = threading.Lock()  # subscriber image handlers write from the client conductor thread
        self._file = open(self.path, "a", buffering=1, encoding="utf-8")

    def event(self, event: str, **fields) -> dict:
        record = {"ts_ns": time.time_ns(), "source": self.source, "event": event, **fields}
        line = json.dumps(record, separators=(",", ":"))
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
        return record

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: str | Path) -> list[dict]:
    """Every complete JSON line of ``path`` (a torn last line from a killed writer is skipped)."""
    events = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return events
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


class Tail:
    """Reads the complete new lines of a growing JSON-lines file on every ``poll()``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0
        self.events: list[dict] = []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._offset += end + 1
        new = []
        for line in data[: end + 1].splitlines():
            try:
                new.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        self.events.extend(new)
        return new


def merge_timeline(run_dir: str | Path) -> Path:
    """Merge the controller's and every worker's events into ``<run_dir>/timeline.jsonl`` sorted by time."""
    run_dir = Path(run_dir)
    events = read_events(run_dir / CONTROLLER_FILE)
    for path in sorted((run_dir / WORKERS_DIR).glob("*.jsonl")):
        events.extend(read_events(path))
    events.sort(key=lambda e: e.get("ts_ns", 0))  # stable: one source's order is kept on equal times
    out = run_dir / TIMELINE_FILE
    with open(out, "w", encoding="utf-8") as f:
        for record in events:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return out
