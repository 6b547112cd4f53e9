"""Running an archive: ``python -m aeron_numba.archive`` / ``aeron-numba-archive``, or ``Archive`` in a
process of one's own (spec/archive.md §2-§7).

Start-up: validate the context, take the archive dir (refusing one a live archive holds: the mark file), open
the catalog and recover every recording that was active when an archive died (its stop position recomputed
from the frames in its last segment file, §3.2), connect the Aeron client, then run the conductor with its
idle strategy until SIGINT/SIGTERM. With ``--embedded-driver`` a media driver runs in a child process first
(like Aeron's ArchivingMediaDriver, but the driver keeps a process of its own: two Python duty cycles must
not share one GIL); it is started only once every setting has been checked, stopped however the archive
stops, and signalled by the kernel if the archive is killed (``MediaDriverProcess``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from aeron_numba.agent import AgentRunner, idle_strategy_from_name
from aeron_numba.agent.agent_runner import close_on_signals
from aeron_numba.archive.archive_conductor import ArchiveConductor
from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.archive.mark_file import ArchiveMarkFile
from aeron_numba.archive.segment_files import recover_stop_position
from aeron_numba.archive.warmup import warm_up_archive_kernels
from aeron_numba.layout import archive as A

ARCHIVE_VERSION = "0.1.0"
log = logging.getLogger("aeron_numba.archive")


def recover_catalog(catalog: Catalog, archive_dir: str, now_ms: int) -> list[tuple[int, int]]:
    """Give every VALID recording still marked active (stop position -1) the stop position its segment files
    show; returns ``(recording id, recovered stop position)`` for each."""
    recovered = []
    for recording_id in catalog.recording_ids():
        if catalog.state(recording_id) != A.RECORDING_STATE_VALID or \
                catalog.stop_position(recording_id) != A.NULL_POSITION:
            continue
        d = catalog.descriptor(recording_id)
        stop = recover_stop_position(archive_dir, recording_id, d.start_position, d.term_buffer_length,
                                     d.segment_file_length)
        catalog.update_stop_position(recording_id, stop, now_ms)
        recovered.append((recording_id, stop))
    return recovered


class Archive:
    def __init__(self, ctx: ArchiveContext, aeron=None):
        from aeron_numba.client import Aeron, Context

        self.ctx = ctx.conclude()
        warm_up_archive_kernels()
        Path(self.ctx.archive_dir).mkdir(parents=True, exist_ok=True)
        # Named as the Java archive names its client (its client-heartbeat counter's label shows it).
        client_name = "archive" if self.ctx.archive_id == A.NULL_VALUE else f"archive-{self.ctx.archive_id}"
        self.aeron = aeron if aeron is not None else Aeron.connect(Context(aeron_dir=ctx.aeron_dir,
                                                                           client_name=client_name))
        self._owns_aeron = aeron is None
        archive_id = self.ctx.archive_id if self.ctx.archive_id != A.NULL_VALUE else self.aeron.client_id
        self.mark_file = ArchiveMarkFile.create(
            self.ctx.archive_dir, archive_id=archive_id, control_channel=self.ctx.control_channel,
            control_stream_id=self.ctx.control_stream_id, local_control_channel=self.ctx.local_control_channel,
            local_control_stream_id=self.ctx.local_control_stream_id,
            events_channel=self.ctx.recording_events_channel, events_stream_id=self.ctx.recording_events_stream_id,
            aeron_directory=str(self.aeron.context.aeron_dir), error_buffer_length=self.ctx.error_buffer_length)
        self.catalog = Catalog.open(self.ctx.archive_dir, capacity=self.ctx.catalog_capacity,
                                    checksum_algorithm=self.ctx.record_checksum_algorithm)
        for error in self.catalog.errors:
            self.mark_file.error_log.record(error)
        self.recovered = recover_catalog(self.catalog, self.ctx.archive_dir, self.mark_file.epoch_clock())
        self.ctx.archive_id = archive_id
        self.conductor = ArchiveConductor(self.ctx, self.aeron, self.mark_file, self.catalog)
        self.runner = AgentRunner(self.conductor, idle_strategy_from_name(self.ctx.idle_strategy),
                                  self.conductor.record_error,
                                  duty_cycle_tracker=self.conductor.counters.duty_cycle_tracker())

        log.info("archive %d ready in %s (aeron dir %s, control channel %r stream %d, local control %s stream %d)",
                 archive_id, self.ctx.archive_dir, self.aeron.context.aeron_dir, self.ctx.control_channel,
                 self.ctx.control_stream_id, self.ctx.local_control_channel, self.ctx.local_control_stream_id)
        for recording_id, stop_position in self.recovered:
            log.info("recording %d recovered: stop position %d from its segment files", recording_id, stop_position)
        for name, value in sorted(vars(self.ctx).items()):
            log.debug("setting %s=%r", name, value)

    def run(self) -> None:
        close_on_signals(self.runner)
        try:
            self.runner.run()
        finally:
            self.close()

    def close(self) -> None:
        self.catalog.close()
        self.mark_file.close()
        if self._owns_aeron:
            self.aeron.close()
        log.info("archive in %s stopped", self.ctx.archive_dir)
