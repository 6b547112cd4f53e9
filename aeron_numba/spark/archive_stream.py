"""``spark.readStream.format("aeron-archive").load(archive_dir)``: recordings followed as they grow.

Same rows, columns and partitions as the batch source (``archive_source``), planned between two offsets.
An offset is JSON ``{"<recording_id>": position}``, every position a unit boundary the recording has made durable
(a *unit* is a frame, or with ``messages=true`` a whole message, so a micro-batch never splits one):

- a stopped recording (its catalog entry has a stop position) is durable up to its stop position;
- a recording still being written is durable up to the last whole frame found by walking its segment files from
  the last offset (``walk_units``): a frame counts once its length word is positive and its header's term
  offset and term id say it lies where it lies. The archive writes a block's first length word last
  (``RecordingWriter``), and a header still being copied in fails the check, so a frame being written is never
  read. The archive's recording-position counter is not used: another process (Spark's driver) cannot map it
  portably.

Recordings that appear in the catalog while the query runs join the offsets at their start position.

Options (besides the batch source's ``messages``, ``verifyChecksums``, ``failOnDataLoss``, ``maxBytesPerPartition``):

- ``startingPositions`` (earliest): where a new query starts: ``earliest`` (each recording's start),
  ``latest`` (its durable end), or JSON ``{"<recording_id>": position}`` (unnamed recordings from their start);
  a query restarted from its checkpoint resumes at its last committed offset instead.
- ``maxBytesPerTrigger`` (none): the most bytes a micro-batch advances all recordings by, shared fairly:
  the recordings take turns going first, each takes at most an equal share of what is left, whole units only.
  A unit larger than the limit still goes through alone.
- ``recordingIds`` / ``streamIds`` / ``sessionIds`` (all): comma-separated ids; only those recordings are followed.

``endingPositions`` and ``includeInvalid`` are the batch source's only: given to a stream, they are an error.

``Trigger.AvailableNow`` reads what was durable when the query started (in as many micro-batches as
``maxBytesPerTrigger`` needs) and stops; recordings created after that are left to the next run.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, SupportsTriggerAvailableNow

from aeron_numba.kernels.segment_columns import (
    SCAN_BAD_FRAME,
    WALK_BAD_LENGTH,
    WALK_BAD_OFFSET,
    WALK_BOUNDARY,
    WALK_FIRST_UNIT_END,
    walk_units,
)
from aeron_numba.layout import archive as A
from aeron_numba.spark import inputs
from aeron_numba.spark.archive_source import (
    DEFAULT_MAX_BYTES_PER_PARTITION,
    ArchiveSourceError,
    SegmentRange,
    byte_count_option,
    checksum_option,
    flag_option,
    ids_option,
    plan_segment_ranges,
    positions_option,
    scan_segment_range,
)

log = logging.getLogger(__name__)

_MAX_PASSES = 8  # sharing passes per trigger: each re-offers what the others left unused


def _starting_option(options) -> str | dict[int, int]:
    text = str(options.get("startingPositions", "earliest")).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    if not text.startswith("{"):
        raise ArchiveSourceError(f"option startingPositions={text!r}: expected earliest, latest or JSON "
                                 f"{{\"<recording_id>\": position}}")
    return positions_option(options, "startingPositions")


def _offset(positions: dict[int, int]) -> dict[str, int]:
    """The JSON form, keys in recording id order: Spark compares offsets by their JSON text."""
    return {str(recording_id): int(positions[recording_id]) for recording_id in sorted(positions)}


def _positions(offset: dict) -> dict[int, int]:
    return {int(recording_id): int(position) for recording_id, position in offset.items()}


class ArchiveStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches on Spark's driver (offsets, partitions) and reads them in the workers (``read``)."""

    def __init__(self, path: str, options):
        self.archive_dir = Path(path)
        if options.get("endingPositions") is not None:
            raise ArchiveSourceError("option endingPositions is for spark.read (batch) only: a stream has no end")
        if options.get("includeInvalid") is not None:  # silently following only VALID ones would read less than asked
            raise ArchiveSourceError("option includeInvalid is for spark.read (batch) only: a stream follows the "
                                     "VALID recordings")
        self.messages = flag_option(options, "messages", False)
        self.fail_on_data_loss = flag_option(options, "failOnDataLoss", True)
        self.checksum_algorithm = checksum_option(options)
        self.max_bytes_per_partition = byte_count_option(options, "maxBytesPerPartition",
                                                         DEFAULT_MAX_BYTES_PER_PARTITION)
        self.max_bytes_per_trigger = byte_count_option(options, "maxBytesPerTrigger", None)
        self.starting = _starting_option(options)
        self.recording_ids = ids_option(options, "recordingIds")
        self.stream_ids = ids_option(options, "streamIds")
        self.session_ids = ids_option(options, "sessionIds")
        self._target: dict[int, int] | None = None  # Trigger.AvailableNow: the durable ends at the query's start
        self._first_turn = -1  # the recording that went first in the last shared trigger

    # ------------------------------------------------------------------------------------- Spark's calls
    def initialOffset(self) -> dict:
        descriptors, names = self._recordings()
        if self.starting == "earliest":
            return _offset({rid: d.start_position for rid, d in descriptors.items()})
        if self.starting == "latest":
            return _offset({rid: self._durable_end(d, names) for rid, d in descriptors.items()})
        positions = {rid: d.start_position for rid, d in descriptors.items()}
        for rid, position in self.starting.items():
            if rid not in descriptors:
                raise ArchiveSourceError(f"option startingPositions: recording {rid} is not a VALID recording of "
                                         f"{self.archive_dir} that this query follows")
            positions[rid] = self._check_start(descriptors[rid], names, position)
        return _offset(positions)

    def getDefaultReadLimit(self):
        if self.max_bytes_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxBytes(self.max_bytes_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        descriptors, names = self._recordings()
        self._target = {rid: self._durable_end(d, names) for rid, d in descriptors.items()}

    def latestOffset(self, start: dict, limit) -> dict:
        descriptors, names = self._recordings()
        positions = self._joined(_positions(start), descriptors)
        hard_ends = {rid: self._hard_end(descriptors[rid], positions[rid]) for rid in positions if rid in descriptors}
        if isinstance(limit, ReadMaxBytes):
            return _offset(self._share(positions, descriptors, names, hard_ends, limit.max_bytes))
        ends = dict(positions)
        for rid, hard_end in hard_ends.items():
            ends[rid] = self._walk(descriptors[rid], names, positions[rid], hard_end, None)[0]
        return _offset(ends)

    def partitions(self, start: dict, end: dict):
        descriptors, names = self._recordings()
        begin = _positions(start)
        ranges = []
        for rid, high in sorted(_positions(end).items()):
            d = descriptors.get(rid)
            low = begin.get(rid, d.start_position if d is not None else high)
            if high <= low:
                continue
            if d is None:
                lost = (f"recording {rid}: data lost at position {low}: it is no longer a VALID recording of "
                        f"{self.archive_dir}")
                if self.fail_on_data_loss:
                    raise ArchiveSourceError(lost + " (option failOnDataLoss=false skips it)")
                log.warning("%s: skipping positions %d to %d", lost, low, high)
                continue
            ranges.extend(plan_segment_ranges(self.archive_dir, d, names, max(low, d.start_position), high,
                                              stopped=True, max_bytes_per_partition=self.max_bytes_per_partition,
                                              fail_on_data_loss=self.fail_on_data_loss))
        return ranges

    def read(self, partition: SegmentRange):
        if not isinstance(partition, SegmentRange):
            return
        batch = scan_segment_range(partition, self.messages, self.checksum_algorithm, self.fail_on_data_loss)
        if batch.num_rows:
            yield batch

    # ------------------------------------------------------------------------------------- planning
    def _recordings(self):
        """The followed VALID recordings by id, and the archive dir's file names."""
        catalog = inputs.open_catalog(self.archive_dir)
        try:
            descriptors = {d.recording_id: d for d in catalog.descriptors()
                           if (self.recording_ids is None or d.recording_id in self.recording_ids)
                           and (self.stream_ids is None or d.stream_id in self.stream_ids)
                           and (self.session_ids is None or d.session_id in self.session_ids)}
        finally:
            catalog.close()
        return descriptors, {p.name for p in self.archive_dir.iterdir()}

    def _joined(self, positions: dict[int, int], descriptors) -> dict[int, int]:
        """The start offset with new recordings joined at their start, and positions the archive has since cut
        off (segments detached or deleted) moved to the recording's new start, or a data-lost error."""
        positions = dict(positions)
        for rid, d in descriptors.items():
            position = positions.setdefault(rid, d.start_position)
            if position < d.start_position:
                lost = (f"recording {rid}: data lost at position {position}: the recording now starts at "
                        f"{d.start_position}")
                if self.fail_on_data_loss:
                    raise ArchiveSourceError(lost + " (option failOnDataLoss=false skips to it)")
                log.warning("%s: skipping to it", lost)
                positions[rid] = d.start_position
        return positions

    def _hard_end(self, d, position: int) -> int | None:
        """Where a recording's reading must end (a unit boundary): its stop position, the Trigger.AvailableNow
        target, or None while it is being written."""
        hard_end = None if d.stop_position == A.NULL_POSITION else d.stop_position
        if self._target is not None:
            target = self._target.get(d.recording_id, position)  # created after the query started: not read
            hard_end = target if hard_end is None else min(hard_end, target)
        return hard_end if hard_end is None else max(hard_end, position)

    def _durable_end(self, d, names: set[str]) -> int:
        """The durable end of a recording: its stop position, or the last unit boundary of its last segment."""
        if d.stop_position != A.NULL_POSITION:
            return d.stop_position
        bases = [parsed[1] for name in names
                 if (parsed := A.parse_segment_file_name(name)) and parsed[0] == d.recording_id]
        # segments start at term boundaries and no message crosses a term: a segment's base is a unit boundary
        from_position = max([d.start_position, *bases])
        return self._walk(d, names, from_position, None, None)[0]

    def _check_start(self, d, names: set[str], position: int) -> int:
        """A startingPositions entry, after checking it is a unit boundary in the recording's durable range."""
        end = self._durable_end(d, names)
        if not d.start_position <= position <= end:
            raise ArchiveSourceError(f"option startingPositions: recording {d.recording_id} position={position} is "
                                     f"outside [{d.start_position}, {end}], its start and durable end")
        if position in (d.start_position, end):
            return position
        term_base = position - position % d.term_buffer_length
        walk_from = max(d.start_position, term_base)
        boundary = self._walk(d, names, walk_from, None, position - walk_from)[0]
        if boundary != position:
            unit = "message" if self.messages else "frame"
            raise ArchiveSourceError(f"option startingPositions: recording {d.recording_id} position={position} "
                                     f"is not at the start of a {unit} (the {unit} holding it starts at {boundary})")
        return position

    def _walk(self, d, names: set[str], position: int, hard_end: int | None, budget: int | None) -> tuple[int, int]:
        """``(boundary, first_unit_end)`` from ``position`` (a unit boundary): the furthest durable unit boundary at
        most ``budget`` bytes on (None: no limit) and at most ``hard_end``, and the end of the first whole unit
        however long (``position`` when none is durable yet)."""
        if hard_end is not None and (position >= hard_end or budget is None):
            return hard_end, hard_end
        limit = None if budget is None else position + budget
        term_length, segment_length = d.term_buffer_length, d.segment_file_length
        boundary = first_end = at = position
        out = np.zeros(4, np.int64)
        while hard_end is None or at < hard_end:
            base = A.segment_file_base_position(d.start_position, at, term_length, segment_length)
            name = A.segment_file_name(d.recording_id, base)
            end_offset = segment_length if hard_end is None else min(segment_length, hard_end - base)
            segment = self._map(name) if name in names else None
            if segment is None:
                later = any((p := A.parse_segment_file_name(n)) and p[0] == d.recording_id and p[1] > base
                            for n in names)
                if hard_end is None and not later:
                    break  # the recorder has not rolled into this segment yet (or is creating it)
                at = self._lost(d, at, base + end_offset, f"segment file {name} is missing")
                boundary = first_end = at
                continue
            from_offset = at - base
            limit_offset = end_offset if budget is None else min(end_offset, limit - base)
            reached = int(walk_units(segment, from_offset, min(end_offset, segment.size), limit_offset, base,
                                     term_length, d.initial_term_id, self.messages, out))
            if reached == SCAN_BAD_FRAME:
                if hard_end is not None:
                    raise ArchiveSourceError(
                        f"recording {d.recording_id}, file {self.archive_dir / name}: bad frame at position "
                        f"{base + int(out[WALK_BAD_OFFSET])}: frame_length={int(out[WALK_BAD_LENGTH])}")
                reached = int(out[WALK_BAD_OFFSET])  # a header not yet whole: the written frames end here
            length_there = int(segment[reached:reached + 4].view(np.int32)[0]) if reached + 4 <= segment.size else 0
            del segment
            if int(out[WALK_BOUNDARY]) > from_offset:
                boundary = base + int(out[WALK_BOUNDARY])
            if first_end == position and int(out[WALK_FIRST_UNIT_END]) > from_offset:
                first_end = base + int(out[WALK_FIRST_UNIT_END])
            if reached < end_offset and length_there > 0 and budget is not None:
                break  # the next unit would pass the limit
            if hard_end is not None and base + end_offset == hard_end:
                if reached < end_offset:  # a stopped recording's frames end before its stop position
                    self._lost(d, base + reached, hard_end, f"no frame in {self.archive_dir / name} from offset "
                                                            f"{reached}")
                if budget is None or hard_end <= limit:
                    boundary = hard_end  # a stop position ends the last (maybe partial) message
                if first_end == position:
                    first_end = hard_end
                break
            if reached < segment_length:
                break  # the written frames end here
            at = base + segment_length
        return boundary, first_end

    def _map(self, name: str) -> np.ndarray | None:
        """A segment file mapped read-only, or None when it is gone or still empty (just created)."""
        try:
            return np.memmap(self.archive_dir / name, dtype=np.uint8, mode="r")
        except (FileNotFoundError, ValueError):  # ValueError: numpy cannot map an empty file
            return None

    def _lost(self, d, position: int, resume: int, why: str) -> int:
        lost = f"recording {d.recording_id}: data lost at position {position}: {why}"
        if self.fail_on_data_loss:
            raise ArchiveSourceError(lost + " (option failOnDataLoss=false skips it)")
        log.warning("%s: skipping to position %d", lost, resume)
        return resume

    def _share(self, positions: dict[int, int], descriptors, names: set[str], hard_ends: dict[int, int | None],
               budget: int) -> dict[int, int]:
        """End positions advancing the recordings by at most ``budget`` bytes in all, in whole units. The
        recordings take turns going first (the one after last trigger's first), and each takes at most an equal
        share of what is left; later passes offer what was left unused. A first unit larger than its share goes
        whole if it fits what is left, and a unit larger than the whole budget goes alone when nothing else has
        been taken, so no recording waits forever."""
        ends = dict(positions)
        order = sorted(hard_ends)
        if not order:
            return ends
        turn = next((i for i, rid in enumerate(order) if rid > self._first_turn), 0)
        order = order[turn:] + order[:turn]
        self._first_turn = order[0]
        remaining, taken_any = budget, False
        pending = list(order)
        for _ in range(_MAX_PASSES):
            still = []
            for i, rid in enumerate(pending):
                if remaining <= 0:
                    break
                share = max(1, remaining // (len(pending) - i))
                boundary, first_end = self._walk(descriptors[rid], names, ends[rid], hard_ends[rid], share)
                if boundary > ends[rid]:
                    taken = boundary - ends[rid]
                elif first_end > ends[rid] and (first_end - ends[rid] <= remaining or not taken_any):
                    taken = first_end - ends[rid]
                    if taken > budget:  # larger than the limit: it goes alone
                        ends[rid] = first_end
                        return ends
                else:
                    continue  # nothing durable, or a unit larger than what is left: next trigger
                ends[rid] += taken
                remaining -= taken
                taken_any = True
                still.append(rid)
            if not still or remaining <= 0:
                break
            pending = still
        return ends
