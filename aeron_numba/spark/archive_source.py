"""``spark.read.format("aeron-archive").load(archive_dir)``: an archive's recordings as rows, one per fragment.
(``spark.readStream`` follows recordings as they grow: ``archive_stream``.)

Rows come from the catalog's VALID recordings (what ListRecordings answers; ``includeInvalid`` adds INVALID ones).
Columns: recording_id, stream_id, session_id (the recording's, from the catalog: with record checksums the frame's
own session id field holds the checksum), position, term_id, term_offset, frame_length, flags, frame_type,
reserved_value, payload (binary), channel (the original channel), stripped_channel, source_identity. Padding frames
never appear.

Planning (driver side) reads only ``archive.catalog`` and file names: one partition per segment file, split at term
boundaries into ranges of at most ``maxBytesPerPartition`` (frames never cross a term), so a worker that sees the
archive directory opens exactly one segment. The options ``recordingIds``, ``streamIds`` and ``sessionIds`` prune
recordings there, before any segment is opened, and are always safe.

Filters (``where``) are evaluated by Spark on the rows by default. With ``pushFilters=true`` the reader also takes
filters on recording_id, stream_id, session_id (equality, IN) and position and term_id ranges to prune recordings
and segments at planning (Spark still checks every row). That needs ``spark.sql.python.filterPushdown.enabled=true`` (Spark's
error says so when it is off), and it is opt-in because of a PySpark bug up to at least 4.3.0: the read plan of a
pushdown is stored on the relation, so a later query on the *same* DataFrame that pushes no filter reuses it and
silently reads only the pruned segments (Spark's master keeps the plan per scan; no release has the fix yet). With
``pushFilters=true``, load the archive again for each query. A source that merely implements ``pushFilters`` makes
PySpark refuse every read while the setting is off, hence two readers.

Options (strings, as Spark passes them):

- ``messages`` (false): one row per whole message, its fragments joined (BEGIN .. END flags): the header fields of
  its first frame, flags BEGIN|END, frame_length = header + whole message; a message whose BEGIN is not in the
  recording (or the position range) is dropped, as Aeron's FragmentAssembler drops it.
- ``startingPositions`` / ``endingPositions``: JSON ``{"<recording_id>": position}``; rows whose position is at
  least the start and before the end. Unnamed recordings read from their start / to their stop position.
- ``verifyChecksums`` (false): ``true`` or ``crc32`` / ``crc32c``: check each DATA frame's record checksum (stored
  in its session id field, as ArchiveTool ``verify -checksum``); a mismatch fails the read naming the file.
- ``failOnDataLoss`` (true): a segment file missing between a recording's start and stop fails the read naming the
  recording and position; false skips that range with a warning.
- ``maxBytesPerPartition`` (128 MiB): the most segment bytes one partition scans.
- ``recordingIds`` / ``streamIds`` / ``sessionIds`` (all): comma-separated ids; only those recordings are read.
- ``pushFilters`` (false): prune by ``where`` filters too (above).
- ``includeInvalid`` (false): read INVALID recordings too (``archive-tool verify`` marks a recording INVALID when a
  frame or checksum is wrong; its rows show what the segments hold).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from aeron_numba.errors import AeronError
from aeron_numba.kernels.segment_columns import (
    COUNT_FRAMES,
    COUNT_PAYLOAD_BYTES,
    SCAN_BAD_FRAME,
    SCAN_CHECKSUM_MISMATCH,
    count_fragments,
    fill_fragments,
)
from aeron_numba.layout import archive as A
from aeron_numba.layout.checksum import CHECKSUM_CRC32, CHECKSUM_CRC32C, CHECKSUM_NONE
from aeron_numba.spark import inputs

log = logging.getLogger(__name__)

SCHEMA = pa.schema([
    ("recording_id", pa.int64()), ("stream_id", pa.int32()), ("session_id", pa.int32()),
    ("position", pa.int64()), ("term_id", pa.int32()), ("term_offset", pa.int32()),
    ("frame_length", pa.int32()), ("flags", pa.int16()), ("frame_type", pa.int32()),
    ("reserved_value", pa.int64()), ("payload", pa.binary()),
    ("channel", pa.string()), ("stripped_channel", pa.string()), ("source_identity", pa.string()),
])
_SPARK_TYPES = {pa.int64(): "long", pa.int32(): "int", pa.int16(): "short", pa.binary(): "binary",
                pa.string(): "string"}
SPARK_SCHEMA = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in SCHEMA)

DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
_CHECKSUMS = {"false": CHECKSUM_NONE, "true": CHECKSUM_CRC32, "crc32": CHECKSUM_CRC32, "crc32c": CHECKSUM_CRC32C}
_MAX_POSITION = (1 << 63) - 1
_NO_LOW, _NO_HIGH = -(1 << 63), (1 << 63) - 1  # a term_id range no filter narrowed


class ArchiveSourceError(AeronError):
    """The archive cannot be read as asked (bad option, data lost, a corrupt or mismatching frame)."""


def flag_option(options, name: str, default: bool) -> bool:
    text = str(options.get(name, str(default))).strip().lower()
    if text not in ("true", "false"):
        raise ArchiveSourceError(f"option {name}={options.get(name)!r}: expected true or false")
    return text == "true"


def positions_option(options, name: str) -> dict[int, int]:
    text = options.get(name)
    if text is None:
        return {}
    try:
        return {int(k): int(v) for k, v in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ArchiveSourceError(f"option {name}={text!r}: expected JSON {{\"<recording_id>\": position}} "
                                 f"({exc})") from None


def checksum_option(options) -> int:
    """The record checksum algorithm ``verifyChecksums`` names (none by default)."""
    checksum = str(options.get("verifyChecksums", "false")).strip().lower()
    if checksum not in _CHECKSUMS:
        raise ArchiveSourceError(f"option verifyChecksums={checksum!r}: expected one of {sorted(_CHECKSUMS)}")
    return _CHECKSUMS[checksum]


def byte_count_option(options, name: str, default: int | None) -> int | None:
    text = options.get(name)
    if text is None:
        return default
    if not str(text).strip().isdigit() or int(text) <= 0:
        raise ArchiveSourceError(f"option {name}={text!r}: expected a positive byte count")
    return int(text)


#: option name -> the catalog field it selects recordings by
ID_OPTIONS = {"recordingIds": "recording_id", "streamIds": "stream_id", "sessionIds": "session_id"}


def ids_option(options, name: str) -> set[int] | None:
    """A comma-separated id list option as a set (None when not given)."""
    text = options.get(name)
    if text is None:
        return None
    try:
        return {int(part) for part in str(text).split(",") if part.strip()}
    except ValueError:
        raise ArchiveSourceError(f"option {name}={text!r}: expected comma-separated integer ids") from None


def readable_descriptors(catalog, include_invalid: bool) -> list:
    """The VALID recordings' descriptors (what ListRecordings answers), and the INVALID ones with
    ``include_invalid``."""
    if not include_invalid:
        return list(catalog.descriptors())
    wanted = (A.RECORDING_STATE_VALID, A.RECORDING_STATE_INVALID)
    return [inputs.recording_descriptor(catalog, rid) for rid in catalog.recording_ids()
            if catalog.state(rid) in wanted]


@dataclass(frozen=True)
class SegmentRange(InputPartition):
    """One partition: ``[from_offset, to_offset)`` of one segment file, rows in ``[low, high)`` positions."""
    path: str
    recording_id: int
    stream_id: int
    session_id: int
    channel: str
    stripped_channel: str
    source_identity: str
    base_position: int
    from_offset: int
    to_offset: int
    low_position: int
    high_position: int
    stopped: bool  # the recording has a stop position: every byte up to it must hold frames


class _Bounds:
    """What the pushed filters allow: sets of ids, and ranges (inclusive low, exclusive high) of position and of
    term_id (a recording's term ids map to position ranges through its initial term id and term length)."""

    def __init__(self):
        self.ids: dict[str, set | None] = {"recording_id": None, "stream_id": None, "session_id": None}
        self.ranges: dict[str, list[int]] = {"position": [0, _MAX_POSITION], "term_id": [_NO_LOW, _NO_HIGH]}

    def take(self, f) -> None:
        column = f.attribute[0] if len(getattr(f, "attribute", ())) == 1 else None
        if not hasattr(f, "value"):
            return
        if column in self.ids and isinstance(f, (EqualTo, In)):
            self.allow(column, {f.value} if isinstance(f, EqualTo) else set(f.value))
        elif column in self.ranges and isinstance(f.value, int) and not isinstance(f.value, bool):
            low, high = self.ranges[column]
            if isinstance(f, EqualTo):
                low, high = max(low, f.value), min(high, f.value + 1)
            elif isinstance(f, GreaterThan):
                low = max(low, f.value + 1)
            elif isinstance(f, GreaterThanOrEqual):
                low = max(low, f.value)
            elif isinstance(f, LessThan):
                high = min(high, f.value)
            elif isinstance(f, LessThanOrEqual):
                high = min(high, f.value + 1)
            self.ranges[column] = [low, high]

    def positions(self, d) -> tuple[int, int]:
        """The position range recording ``d`` may contribute: the position filters and its terms in the term
        filters."""
        low, high = self.ranges["position"]
        term_low, term_high = self.ranges["term_id"]
        if term_low != _NO_LOW:
            low = max(low, (term_low - d.initial_term_id) * d.term_buffer_length)
        if term_high != _NO_HIGH:
            high = min(high, max(0, (term_high - d.initial_term_id) * d.term_buffer_length))
        return low, high

    def allow(self, column: str, values: set) -> None:
        current = self.ids[column]
        self.ids[column] = values if current is None else current & values

    def admits(self, descriptor) -> bool:
        return all(allowed is None or getattr(descriptor, column) in allowed for column, allowed in self.ids.items())


class ArchiveReader(DataSourceReader):
    """The default reader: no ``pushFilters``, so it works whatever the session's pushdown setting."""

    def __init__(self, path: str, options):
        self.archive_dir = Path(path)
        self.messages = flag_option(options, "messages", False)
        self.fail_on_data_loss = flag_option(options, "failOnDataLoss", True)
        self.checksum_algorithm = checksum_option(options)
        self.starting = positions_option(options, "startingPositions")
        self.ending = positions_option(options, "endingPositions")
        self.max_bytes_per_partition = byte_count_option(options, "maxBytesPerPartition",
                                                         DEFAULT_MAX_BYTES_PER_PARTITION)
        self.include_invalid = flag_option(options, "includeInvalid", False)
        self.bounds = _Bounds()
        for name, column in ID_OPTIONS.items():
            ids = ids_option(options, name)
            if ids is not None:
                self.bounds.allow(column, ids)

    def partitions(self):
        catalog = inputs.open_catalog(self.archive_dir)  # a clear error for a missing dir or a corrupt catalog
        try:
            descriptors = [d for d in readable_descriptors(catalog, self.include_invalid) if self.bounds.admits(d)]
        finally:
            catalog.close()
        names = {p.name for p in self.archive_dir.iterdir()}
        ranges = []
        for d in descriptors:
            ranges.extend(self._recording_ranges(d, names))
        return ranges

    def _recording_ranges(self, d, names: set[str]) -> list[SegmentRange]:
        segment_length = d.segment_file_length
        filter_low, filter_high = self.bounds.positions(d)
        low = max(d.start_position, filter_low, self.starting.get(d.recording_id, 0))
        high = min(filter_high, self.ending.get(d.recording_id, _MAX_POSITION))
        if d.stop_position != A.NULL_POSITION:
            high = min(high, d.stop_position)
        else:  # active: to the end of its highest segment file, the scan stops where the frames do
            bases = [b for n in names if (p := A.parse_segment_file_name(n)) and p[0] == d.recording_id
                     for b in [p[1]]]
            high = min(high, max(bases) + segment_length if bases else d.start_position)
        return plan_segment_ranges(self.archive_dir, d, names, low, high, stopped=d.stop_position != A.NULL_POSITION,
                                   max_bytes_per_partition=self.max_bytes_per_partition,
                                   fail_on_data_loss=self.fail_on_data_loss)

    def read(self, partition: SegmentRange):
        if not isinstance(partition, SegmentRange):
            return  # nothing planned: Spark then reads one empty InputPartition(None)
        batch = scan_segment_range(partition, self.messages, self.checksum_algorithm, self.fail_on_data_loss)
        if batch.num_rows:
            yield batch


class PruningArchiveReader(ArchiveReader):
    """``pushFilters=true``: where-filters prune recordings and segments too (see the module docstring)."""

    def pushFilters(self, filters):
        for f in filters:
            self.bounds.take(f)
            yield f  # the bounds only prune; Spark still checks each row


def plan_segment_ranges(archive_dir: Path, d, names: set[str], low: int, high: int, *, stopped: bool,
                        max_bytes_per_partition: int, fail_on_data_loss: bool) -> list[SegmentRange]:
    """The partitions reading positions ``[low, high)`` of recording ``d`` (its descriptor): one per segment file
    (``names``: the archive dir's file names), split at term boundaries into pieces of at most
    ``max_bytes_per_partition`` (frames never cross a term). ``stopped``: every byte up to ``high`` must hold
    frames (a shorter scan is data lost)."""
    ranges = []
    if low >= high:
        return ranges
    term_length, segment_length = d.term_buffer_length, d.segment_file_length
    base = A.segment_file_base_position(d.start_position, low, term_length, segment_length)
    while base < high:
        name = A.segment_file_name(d.recording_id, base)
        # the scan starts at the term holding ``low`` (frames never cross a term), not at the segment's start: a
        # micro-batch deep into a segment must not rescan all that comes before it
        begin, end = max(base, d.start_position, low - low % term_length), min(base + segment_length, high)
        if name not in names:
            if fail_on_data_loss:
                raise ArchiveSourceError(
                    f"recording {d.recording_id}: data lost at position {max(begin, low)}: segment file {name} "
                    f"is missing from {archive_dir} (option failOnDataLoss=false skips it)")
            log.warning("recording %d: segment file %s is missing, skipping positions %d to %d",
                        d.recording_id, name, max(begin, low), end)
        else:
            path = str(archive_dir / name)
            # term-aligned pieces of at most max_bytes_per_partition (at least one term each)
            step = max(term_length, max_bytes_per_partition - max_bytes_per_partition % term_length)
            at, to_offset = begin - base, end - base
            while at < to_offset:
                stop = min(to_offset, at - at % term_length + step)
                ranges.append(SegmentRange(path, d.recording_id, d.stream_id, d.session_id, d.original_channel,
                                           d.stripped_channel, d.source_identity, base, at, stop, low, high,
                                           stopped))
                at = stop
        base += segment_length
    return ranges


def scan_segment_range(part: SegmentRange, messages: bool, checksum_algorithm: int,
                       fail_on_data_loss: bool = True) -> pa.RecordBatch:
    """The rows of one partition as a RecordBatch: two kernel passes over the mapped segment file. In a stopped
    recording, frames that end before the range does (a short file, a zeroed stretch) are data lost."""
    try:
        segment = np.memmap(part.path, dtype=np.uint8, mode="r")
    except (FileNotFoundError, ValueError) as exc:
        raise ArchiveSourceError(f"recording {part.recording_id}: cannot open segment file {part.path}: {exc}") \
            from None
    end = min(part.to_offset, segment.size)
    out = np.zeros(3, np.int64)
    status = count_fragments(segment, part.from_offset, end, part.base_position, part.low_position,
                             part.high_position, checksum_algorithm, out)
    if status == SCAN_BAD_FRAME and segment.size < part.to_offset and int(out[0]) + int(out[1]) > segment.size:
        end = int(out[0])  # a file cut short inside a frame: what lies before it is whole, the rest is lost
        status = count_fragments(segment, part.from_offset, end, part.base_position, part.low_position,
                                 part.high_position, checksum_algorithm, out)
    if status == SCAN_CHECKSUM_MISMATCH:
        raise ArchiveSourceError(f"recording {part.recording_id}, file {part.path}: checksum failed at position "
                                 f"{part.base_position + int(out[0])}: recorded={int(out[2])} "
                                 f"(expected={int(out[1])})")
    if status == SCAN_BAD_FRAME:
        raise ArchiveSourceError(f"recording {part.recording_id}, file {part.path}: bad frame at position "
                                 f"{part.base_position + int(out[0])} (offset {int(out[0])}): frame_length="
                                 f"{int(out[1])}, type={int(out[2])}, file length {segment.size}")
    expected_end = min(part.to_offset, max(part.from_offset, part.high_position - part.base_position))
    if part.stopped and status < expected_end:
        lost = (f"recording {part.recording_id}: data lost at position {part.base_position + status}: no frame "
                f"in {part.path} from offset {status} (file length {segment.size}), the recording holds frames up "
                f"to position {part.base_position + expected_end}")
        if fail_on_data_loss:
            raise ArchiveSourceError(lost + " (option failOnDataLoss=false skips it)")
        log.warning("%s: skipped", lost)
    frames, payload_bytes = int(out[COUNT_FRAMES]), int(out[COUNT_PAYLOAD_BYTES])
    columns = {
        "position": np.empty(frames, np.int64), "term_id": np.empty(frames, np.int32),
        "term_offset": np.empty(frames, np.int32), "frame_length": np.empty(frames, np.int32),
        "flags": np.empty(frames, np.int16), "frame_type": np.empty(frames, np.int32),
        "reserved_value": np.empty(frames, np.int64),
    }
    offsets = np.empty(frames + 1, np.int32)
    payload = np.empty(payload_bytes, np.uint8)
    rows = int(fill_fragments(segment, part.from_offset, end, part.base_position, part.low_position,
                              part.high_position, messages, columns["position"], columns["term_id"],
                              columns["term_offset"], columns["frame_length"], columns["flags"],
                              columns["frame_type"], columns["reserved_value"], offsets, payload))
    del segment
    arrays = {name: pa.array(values[:rows]) for name, values in columns.items()}
    arrays["recording_id"] = pa.array(np.full(rows, part.recording_id, np.int64))
    arrays["stream_id"] = pa.array(np.full(rows, part.stream_id, np.int32))
    arrays["session_id"] = pa.array(np.full(rows, part.session_id, np.int32))
    arrays["payload"] = pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets[:rows + 1]),
                                                                  pa.py_buffer(payload)])
    for name, value in (("channel", part.channel), ("stripped_channel", part.stripped_channel),
                        ("source_identity", part.source_identity)):
        arrays[name] = pa.repeat(pa.scalar(value, pa.string()), rows)
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in SCHEMA], schema=SCHEMA)


class AeronArchiveDataSource(DataSource):
    """``format("aeron-archive")``: see the module docstring for columns and options."""

    @classmethod
    def name(cls) -> str:
        return "aeron-archive"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema) -> ArchiveReader:
        reader = PruningArchiveReader if flag_option(self.options, "pushFilters", False) else ArchiveReader
        return reader(os.fspath(inputs.archive_dir(self.options.get("path"))), self.options)

    def streamReader(self, schema):
        """``spark.readStream.format("aeron-archive")``: see ``archive_stream``."""
        from aeron_numba.spark.archive_stream import ArchiveStreamReader  # it builds on this module

        return ArchiveStreamReader(os.fspath(inputs.archive_dir(self.options.get("path"))), self.options)
