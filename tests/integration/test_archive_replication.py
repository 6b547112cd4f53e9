"""Replication between two archive processes, each beside its own media driver, over UDP: a stopped recording of
the source archive copied into the destination archive (Aeron's ReplicateRequest2) arrives byte-identical (catalog
stop position, segment files, CRC-32 frame checksums), also under 5 % receive loss; StopReplication; an unknown
source recording."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.client import AeronArchive, ArchiveError
from aeron_numba.client import Aeron, Context
from aeron_numba.driver.loss_generator import LossControl, LossSettings
from aeron_numba.layout import archive as A
from aeron_numba.layout.counters import NAK_MESSAGES_SENT
from aeron_numba.tools.archive_tool import main as archive_tool
from harness.aeron_dirs import new_aeron_dir, remove_aeron_dir
from harness.awaiting import await_condition
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS, udp_settings_for_tests
from tests.integration.driver_processes import start_driver
from tests.integration.test_archive_process import publish
from tests.integration.test_udp_pubsub import free_udp_port

RECORDED, STREAM = "aeron:ipc?term-length=64k", 1001
# Four processes and two drivers share two cores: Aeron's own client timeouts.
DRIVER_ENV = dict(udp_settings_for_tests(term_buffer_length="1m", liveness_timeout="3s"), **LENIENT_CLIENT_TIMEOUTS)
ARCHIVE_ENV = {
    "AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "256k",
    "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "64k",
    "AERON_ARCHIVE_RECORD_CHECKSUM": "CRC-32",
    "AERON_ARCHIVE_CONNECT_TIMEOUT": "5s",
    "AERON_ARCHIVE_MESSAGE_TIMEOUT": "5s",
}


class ArchiveNode:
    """A media driver, an archive process with a UDP control channel, and a client of it over IPC."""

    def __init__(self, process_manager, name: str, aeron_dir: Path, archive_dir: Path, **env):
        self.name, self.aeron_dir, self.archive_dir = name, aeron_dir, archive_dir
        self.driver, cnc = start_driver(process_manager, aeron_dir, name=f"driver-{name}", **DRIVER_ENV)
        cnc.close()
        self.control_channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
        self.archive_process = process_manager.spawn_module(
            f"archive-{name}", "aeron_numba.archive", "--archive-dir", str(archive_dir),
            env={**ARCHIVE_ENV, "AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_CONTROL_CHANNEL": self.control_channel,
                 "AERON_ARCHIVE_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0", **env})
        self.archive_process.await_output("aeron-numba archive", 120)
        self.aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
        self.archive = AeronArchive.connect(self.aeron)

    def stop_archive(self) -> None:
        """Close the client and stop the archive (archive-tool works on a stopped archive's files)."""
        if self.archive is not None:
            self.archive.close()
            self.archive = None
        self.archive_process.terminate(10)

    def close(self):
        if self.archive is not None:
            self.archive.close()
        self.aeron.close()


@pytest.fixture
def nodes(process_manager, aeron_dir, tmp_path):
    dst_dir = new_aeron_dir("aeron-replication-dst")
    made = []
    try:
        made.append(ArchiveNode(process_manager, "src", aeron_dir, tmp_path / "src-archive"))
        made.append(ArchiveNode(process_manager, "dst", dst_dir, tmp_path / "dst-archive"))
        yield made
    finally:
        for node in made:
            node.close()
        process_manager.close()  # the processes go before their dirs
        remove_aeron_dir(dst_dir)


def record(node: ArchiveNode, count: int, seed: int = 3) -> int:
    """A stopped recording of ``count`` random-size messages on the node's archive; returns its id."""
    archive = node.archive
    subscription_id = archive.start_recording(RECORDED, STREAM)
    publication = node.aeron.add_exclusive_publication(RECORDED, STREAM)
    _, last = publish(publication, count, random.Random(seed))[-1]
    signals = []
    await_condition(lambda: archive.poll_for_recording_signals(signals.append) >= 0 and any(
        s.signal == "START" for s in signals), 30, "recording START")
    recording_id = next(s.recording_id for s in signals if s.signal == "START")
    await_condition(lambda: archive.get_recording_position(recording_id) == last, 60, "all recorded")
    archive.stop_recording_subscription(subscription_id)
    publication.close()
    await_condition(lambda: archive.get_stop_position(recording_id) == last, 30, "recording stopped")
    return recording_id


def await_signals(archive: AeronArchive, replication_id: int, until: str, timeout_s: float = 120) -> list[str]:
    signals = []

    def arrived():
        archive.poll_for_recording_signals(lambda s: signals.append(s) if s.correlation_id == replication_id else None)
        return any(s.signal == until for s in signals)

    await_condition(arrived, timeout_s, f"{until} signal of replication {replication_id}")
    return signals


def segments(archive_dir: Path, recording_id: int) -> dict[int, bytes]:
    return {int(p.stem.split("-")[1]): p.read_bytes() for p in archive_dir.glob(f"{recording_id}-*.rec")}


def assert_identical(src: ArchiveNode, src_id: int, dst: ArchiveNode, dst_id: int) -> None:
    with Catalog.open(src.archive_dir) as src_catalog, Catalog.open(dst.archive_dir) as dst_catalog:
        s, d = src_catalog.descriptor(src_id), dst_catalog.descriptor(dst_id)
    for field in ("start_position", "stop_position", "initial_term_id", "segment_file_length", "term_buffer_length",
                  "mtu_length", "session_id", "stream_id", "stripped_channel", "original_channel", "source_identity"):
        assert getattr(d, field) == getattr(s, field), field
    src_segments, dst_segments = segments(src.archive_dir, src_id), segments(dst.archive_dir, dst_id)
    assert sorted(dst_segments) == sorted(src_segments) and len(src_segments) > 1
    for base, data in src_segments.items():
        assert dst_segments[base] == data, f"segment at base position {base} differs"
    # CRC-32 of every frame, as recorded by the destination, checked from its files.
    dst.stop_archive()
    assert archive_tool([str(dst.archive_dir), "verify", str(dst_id), "-a", "-checksum", "CRC-32"]) == 0


def replicate_and_check(src: ArchiveNode, dst: ArchiveNode, src_id: int) -> None:
    replication_id = dst.archive.replicate(src_id, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel)
    signals = await_signals(dst.archive, replication_id, "REPLICATE_END")
    names = [s.signal for s in signals]
    assert names[:2] == ["REPLICATE", "EXTEND"] and "SYNC" in names, names
    dst_id = signals[0].recording_id
    assert dst.archive.poll_for_error_response() is None
    await_condition(lambda: dst.archive.get_stop_position(dst_id) == src.archive.get_stop_position(src_id), 30,
                    "destination recording stopped at the source's stop position")
    assert_identical(src, src_id, dst, dst_id)


def test_a_stopped_recording_is_replicated_byte_identical_over_udp(nodes):
    src, dst = nodes
    src_id = record(src, 1_500)
    started = time.monotonic()
    replicate_and_check(src, dst, src_id)
    assert time.monotonic() - started < 120


def test_a_recording_is_replicated_byte_identical_under_five_percent_loss(nodes):
    src, dst = nodes
    src_id = record(src, 1_500, seed=4)
    loss = LossControl.open(dst.aeron_dir)
    try:
        loss.write(LossSettings(receive_data_rate=0.05, seed=9))
        replicate_and_check(src, dst, src_id)
        counters = dst.aeron.counters_reader
        assert counters.get_counter_value(NAK_MESSAGES_SENT) > 0  # the loss was there, and recovered
    finally:
        loss.close()


def test_an_unknown_source_recording_is_answered_unknown_recording(nodes):
    src, dst = nodes
    replication_id = dst.archive.replicate(42, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel)
    errors = []
    await_condition(lambda: errors.append(dst.archive.poll_for_error_response()) or errors[-1] is not None, 30,
                    "the replication's ERROR")
    assert errors[-1] == "archive error UNKNOWN_RECORDING: unknown src recording id 42"
    await_signals(dst.archive, replication_id, "REPLICATE_END")


def test_stop_replication_ends_it_and_an_unknown_id_is_unknown_replication(nodes):
    src, dst = nodes
    src_id = record(src, 200, seed=5)
    # A source that will not answer within the test: its control stream is one nobody listens on.
    replication_id = dst.archive.replicate(src_id, A.NULL_VALUE, 77, src.control_channel)
    dst.archive.stop_replication(replication_id)
    await_signals(dst.archive, replication_id, "REPLICATE_END", 30)
    with pytest.raises(ArchiveError) as caught:
        dst.archive.stop_replication(replication_id)
    assert caught.value.error_code_name == "UNKNOWN_REPLICATION"
    assert not dst.archive.try_stop_replication(replication_id)
