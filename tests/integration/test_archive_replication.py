"""Replication between two archive processes, each beside its own media driver, over UDP: a stopped recording of
the source archive copied into the destination archive (Aeron's ReplicateRequest2) arrives byte-identical (catalog
stop position, segment files, CRC-32 frame checksums), also under 5 % receive loss; StopReplication; an unknown
source recording; an active recording replicated then merged into its live stream (liveDestination)."""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path

import pytest

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.client import AeronArchive, AeronArchiveContext, ArchiveError
from aeron_numba.client import Aeron, Context
from aeron_numba.driver.loss_generator import LossControl, LossSettings
from aeron_numba.layout import archive as A
from aeron_numba.layout.counters import NAK_MESSAGES_SENT
from aeron_numba.tools.archive_tool import main as archive_tool
from harness.aeron_dirs import new_aeron_dir, remove_aeron_dir
from harness.awaiting import NotYet, await_condition
from harness.driver_settings import LENIENT_CLIENT_TIMEOUTS, udp_settings_for_tests
from tests.integration.driver_processes import start_driver
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED
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

    def __init__(self, process_manager, name: str, aeron_dir: Path, archive_dir: Path, driver_env=None,
                 client_context: AeronArchiveContext | None = None, **env):
        self.name, self.aeron_dir, self.archive_dir = name, aeron_dir, archive_dir
        self.driver, cnc = start_driver(process_manager, aeron_dir, name=f"driver-{name}", **(driver_env or DRIVER_ENV))
        cnc.close()
        self.control_channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
        self.archive_process = process_manager.spawn_module(
            f"archive-{name}", "aeron_numba.archive", "--archive-dir", str(archive_dir),
            env={**ARCHIVE_ENV, "AERON_DIR": str(aeron_dir), "AERON_ARCHIVE_CONTROL_CHANNEL": self.control_channel,
                 "AERON_ARCHIVE_REPLICATION_CHANNEL": "aeron:udp?endpoint=127.0.0.1:0", **env})
        self.archive_process.await_output("aeron-numba archive", 120)
        self.aeron = Aeron.connect(Context(aeron_dir=str(aeron_dir)))
        self.archive = AeronArchive.connect(self.aeron, client_context)

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


@contextlib.contextmanager
def two_nodes(process_manager, aeron_dir, tmp_path, driver_env=None, src_client_context=None, src_env=None,
              **archive_env):
    """A source and a destination ``ArchiveNode``, each with its own driver; torn down processes first."""
    dst_dir = new_aeron_dir("aeron-replication-dst")
    made = []
    try:
        made.append(ArchiveNode(process_manager, "src", aeron_dir, tmp_path / "src-archive", driver_env,
                                src_client_context, **archive_env, **(src_env or {})))
        made.append(ArchiveNode(process_manager, "dst", dst_dir, tmp_path / "dst-archive", driver_env,
                                **archive_env))
        yield made
    finally:
        for node in made:
            node.close()
        process_manager.close()  # the processes go before their dirs
        remove_aeron_dir(dst_dir)


@pytest.fixture
def nodes(process_manager, aeron_dir, tmp_path):
    with two_nodes(process_manager, aeron_dir, tmp_path) as made:
        yield made


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


def segments(archive_dir: Path, recording_id: int) -> dict[int, Path]:
    """The recording's segment files by base position."""
    return {int(p.stem.split("-")[1]): p for p in archive_dir.glob(f"{recording_id}-*.rec")}


def same_bytes(a: Path, b: Path, chunk_length: int = 1 << 20) -> bool:
    """Whether two files hold the same bytes, read a chunk at a time (segment files may be large)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while chunk := fa.read(chunk_length):
            if chunk != fb.read(chunk_length):
                return False
    return True


def assert_identical(src: ArchiveNode, src_id: int, dst: ArchiveNode, dst_id: int) -> None:
    with Catalog.open(src.archive_dir) as src_catalog, Catalog.open(dst.archive_dir) as dst_catalog:
        s, d = src_catalog.descriptor(src_id), dst_catalog.descriptor(dst_id)
    for field in ("start_position", "stop_position", "initial_term_id", "segment_file_length", "term_buffer_length",
                  "mtu_length", "session_id", "stream_id", "stripped_channel", "original_channel", "source_identity"):
        assert getattr(d, field) == getattr(s, field), field
    src_segments, dst_segments = segments(src.archive_dir, src_id), segments(dst.archive_dir, dst_id)
    assert sorted(dst_segments) == sorted(src_segments) and len(src_segments) > 1
    for base, path in src_segments.items():
        assert same_bytes(path, dst_segments[base]), f"segment at base position {base} differs"
    # CRC-32 of every frame, as recorded by the destination, checked from its files.
    dst.stop_archive()
    assert archive_tool([str(dst.archive_dir), "verify", str(dst_id), "-a", "-checksum", "CRC-32"]) == 0


def replicate_and_check(src: ArchiveNode, dst: ArchiveNode, src_id: int, timeout_s: float = 120,
                        tags: tuple[int, int] | None = None) -> float:
    """Replicate ``src_id`` from ``src`` to ``dst`` (``tags``: tagged_replicate with these channel and
    subscription tags) and check the copy; returns the seconds until its STOP."""
    started = time.monotonic()
    if tags is None:
        replication_id = dst.archive.replicate(src_id, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel)
    else:
        replication_id = dst.archive.tagged_replicate(src_id, A.NULL_VALUE, *tags, A.DEFAULT_CONTROL_STREAM_ID,
                                                      src.control_channel)
    signals = await_signals(dst.archive, replication_id, "STOP", timeout_s)
    replicated_s = time.monotonic() - started
    # Aeron's order (its ReplicateRecordingTest): the replication ends before its recording's STOP.
    assert [s.signal for s in signals] == ["REPLICATE", "EXTEND", "SYNC", "REPLICATE_END", "STOP"], signals
    dst_id = signals[0].recording_id
    assert dst.archive.poll_for_error_response() is None
    await_condition(lambda: dst.archive.get_stop_position(dst_id) == src.archive.get_stop_position(src_id), 30,
                    "destination recording stopped at the source's stop position")
    assert_identical(src, src_id, dst, dst_id)
    return replicated_s


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


def test_a_tagged_replication_of_a_stopped_recording_arrives_byte_identical_in_aeron_s_signal_order(nodes):
    src, dst = nodes
    replicate_and_check(src, dst, record(src, 600, seed=8), tags=(4_000_003, 4_000_004))


def test_a_tagged_replication_records_on_an_endpoint_its_channel_tag_names(nodes):
    """Aeron's taggedReplicate: the destination records the replay on a subscription tagged
    ``tags=<channelTagId>,<subscriptionTagId>``, so a subscription on ``aeron:udp?tags=<channelTagId>`` in the
    destination's driver joins that receive endpoint. The source recording is still active, so the replication
    follows it until stopped and the endpoint can be looked at while it runs."""
    src, dst = nodes
    channel_tag, subscription_tag = 4_000_001, 4_000_002
    recording_subscription_id = src.archive.start_recording(RECORDED, STREAM)
    publication = src.aeron.add_exclusive_publication(RECORDED, STREAM)
    _, last = publish(publication, 300, random.Random(6))[-1]
    src_signals = []
    await_condition(lambda: src.archive.poll_for_recording_signals(src_signals.append) >= 0 and any(
        s.signal == "START" for s in src_signals), 30, "source recording START")
    src_id = next(s.recording_id for s in src_signals if s.signal == "START")
    replication_id = dst.archive.tagged_replicate(src_id, A.NULL_VALUE, channel_tag, subscription_tag,
                                                  A.DEFAULT_CONTROL_STREAM_ID, src.control_channel)
    signals = await_signals(dst.archive, replication_id, "EXTEND")
    dst_id = signals[0].recording_id
    counters = dst.aeron.counters_reader
    tags = f"tags={channel_tag},{subscription_tag}"
    (receive_status_id,) = [c.counter_id for c in counters.counters()
                            if c.label.startswith("rcv-channel: ") and tags in c.label]
    tagged = dst.aeron.add_subscription(f"aeron:udp?tags={channel_tag}", STREAM + 1)
    try:
        assert tagged.channel_status_id == receive_status_id  # the same endpoint, named by its tag
        # The replication goes on through that endpoint: what the source records next arrives too.
        _, last = publish(publication, 300, random.Random(7))[-1]
        await_condition(lambda: dst.archive.get_recording_position(dst_id) == last, 60,
                        "the destination follows the source recording")
    finally:
        tagged.close()
    dst.archive.stop_replication(replication_id)
    await_signals(dst.archive, replication_id, "REPLICATE_END", 30)
    assert dst.archive.poll_for_error_response() is None
    src.archive.stop_recording_subscription(recording_subscription_id)
    publication.close()


# ------------------------------------------------------------------------------------------------ 1 GiB
GIB = 1 << 30
BIG_RECORDED = "aeron:ipc?term-length=16m"
BIG_MESSAGE_LENGTH = 60_000  # not a multiple of the frame alignment: padding and fragments in every term
BIG_DRIVER_ENV = dict(udp_settings_for_tests(term_buffer_length="16m", liveness_timeout="10s"),
                      **LENIENT_CLIENT_TIMEOUTS, AERON_IPC_TERM_BUFFER_LENGTH="16m")
BIG_ARCHIVE_ENV = {"AERON_ARCHIVE_SEGMENT_FILE_LENGTH": "128m", "AERON_ARCHIVE_FILE_IO_MAX_LENGTH": "1m"}


def offered(publication, payload) -> int | None:
    """The new position once the publication takes ``payload``; None while the archive holds it back."""
    result = publication.offer(payload)
    if result > 0:
        return result
    assert result in (BACK_PRESSURED, ADMIN_ACTION), result
    return None


def record_gib(node: ArchiveNode) -> int:
    """A stopped recording of at least 1 GiB (log bytes) of 60,000-byte messages, each its sequence number and a
    slice of seeded random bytes; returns its id."""
    archive = node.archive
    pool = random.Random(16).randbytes(4 << 20)
    subscription_id = archive.start_recording(BIG_RECORDED, STREAM)
    publication = node.aeron.add_exclusive_publication(BIG_RECORDED, STREAM)
    position, sequence = 0, 0
    while position < GIB:
        offset = sequence * 7919 % (len(pool) - BIG_MESSAGE_LENGTH)
        payload = sequence.to_bytes(8, "little") + pool[offset:offset + BIG_MESSAGE_LENGTH - 8]
        position = await_condition(lambda: offered(publication, payload), 60, f"message {sequence} offered")
        sequence += 1
    signals = []
    await_condition(lambda: archive.poll_for_recording_signals(signals.append) >= 0 and any(
        s.signal == "START" for s in signals), 30, "recording START")
    recording_id = next(s.recording_id for s in signals if s.signal == "START")
    await_condition(lambda: archive.get_recording_position(recording_id) == position, 300, "all recorded",
                    poll_interval_s=0.1)
    archive.stop_recording_subscription(subscription_id)
    publication.close()
    await_condition(lambda: archive.get_stop_position(recording_id) == position, 30, "recording stopped")
    return recording_id


@pytest.mark.slow
@pytest.mark.timeout(5400)  # two cores shared by four processes: the 5 % loss run is the long one
@pytest.mark.parametrize("loss_rate", [0.0, 0.05], ids=["no-loss", "five-percent-loss"])
def test_a_one_gib_recording_is_replicated_byte_identical_over_udp(process_manager, aeron_dir, tmp_path, loss_rate):
    """The issue's done-when: 1 GiB between two archive processes over UDP, byte-identical (catalog, every
    segment file compared in chunks, CRC-32 of every frame verified), without and with 5 % receive loss."""
    with two_nodes(process_manager, aeron_dir, tmp_path, BIG_DRIVER_ENV, **BIG_ARCHIVE_ENV) as (src, dst):
        started = time.monotonic()
        src_id = record_gib(src)
        recorded = time.monotonic()
        loss = LossControl.open(dst.aeron_dir)
        try:
            loss.write(LossSettings(receive_data_rate=loss_rate, seed=11))
            replicated_s = replicate_and_check(src, dst, src_id, timeout_s=3600)
            verified = time.monotonic()
            if loss_rate:
                assert dst.aeron.counters_reader.get_counter_value(NAK_MESSAGES_SENT) > 0
        finally:
            loss.close()
        print(f"\n1 GiB, loss {loss_rate:.0%}: recorded in {recorded - started:.1f}s, replicated in "
              f"{replicated_s:.1f}s, compared and verified in {verified - recorded - replicated_s:.1f}s")


# ------------------------------------------------------------------------------------------ authentication
class AdminCredentials:
    def encoded_credentials(self) -> bytes:
        return b"admin:secret"

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        return b""


def test_a_replication_sends_its_credentials_and_cannot_answer_a_challenge(process_manager, aeron_dir, tmp_path):
    """As Aeron: the request's credentials go with the connect to the source archive; a source that challenges
    them ends the replication with REPLICATION_CONNECTION_FAILURE (a replication cannot answer challenges)."""
    admin = AeronArchiveContext(credentials_supplier=AdminCredentials())
    hooks = {"AERON_AUTHENTICATOR_SUPPLIER": "tests.integration.archive_auth_hooks:ChallengingAuthenticator"}
    with two_nodes(process_manager, aeron_dir, tmp_path, src_client_context=admin, src_env=hooks) as (src, dst):
        src_id = record(src, 100, seed=6)
        challenged = dst.archive.replicate(src_id, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel,
                                           encoded_credentials=b"reader")  # the source challenges a reader
        errors = []
        await_condition(lambda: errors.append(dst.archive.poll_for_error_response()) or errors[-1] is not None, 30,
                        "the challenged replication's ERROR")
        assert errors[-1] == ("archive error REPLICATION_CONNECTION_FAILURE: Replication connection failed="
                              "Replication does not support challenge/response authentication")
        assert [s.signal for s in await_signals(dst.archive, challenged, "REPLICATE_END", 30)] == ["REPLICATE_END"]
        admitted = dst.archive.replicate(src_id, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel,
                                         encoded_credentials=b"admin:secret")
        signals = await_signals(dst.archive, admitted, "STOP", 60)
        assert [s.signal for s in signals] == ["REPLICATE", "EXTEND", "SYNC", "REPLICATE_END", "STOP"], signals

def test_a_live_recording_is_replicated_then_merged_into_the_live_stream(nodes):
    """ReplicateRequest with a liveDestination (Aeron's replicate-and-merge): the destination archive copies the
    source's active recording through a replay, joins the live stream through the live destination of its
    multi-destination recording subscription, lets go of the replay (MERGE) and records on, live; when the live
    publication ends both recordings stop at the same position with the same bytes."""
    src, dst = nodes
    rec_channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
    live_destination = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
    src.archive.start_recording(rec_channel, STREAM, "REMOTE")
    # The live stream goes to the source archive and to where the destination archive will listen for it, at the
    # pace of the slower (fc=min): the default (max) would leave a lagging destination beyond retransmission.
    live = src.aeron.add_exclusive_publication("aeron:udp?control-mode=manual|term-length=64k|fc=min", STREAM)
    live.add_destination(rec_channel)
    live.add_destination(live_destination)
    await_condition(lambda: live.is_connected, 30, "the source archive records the live stream")
    rng = random.Random(6)
    publish(live, 1_500, rng)
    started = []
    await_condition(lambda: src.archive.poll_for_recording_signals(started.append) >= 0 and any(
        s.signal == "START" for s in started), 30, "recording START")
    src_id = next(s.recording_id for s in started if s.signal == "START")

    replication_id = dst.archive.replicate(src_id, A.NULL_VALUE, A.DEFAULT_CONTROL_STREAM_ID, src.control_channel,
                                           live_destination)
    signals = []

    def signalled(name: str) -> bool:  # the live stream goes on while the replication catches up with it
        publish(live, 5, rng)
        dst.archive.poll_for_recording_signals(
            lambda s: signals.append(s) if s.correlation_id == replication_id else None)
        return any(s.signal == name for s in signals)

    await_condition(lambda: signalled("MERGE"), 120, "MERGE signal")
    await_condition(lambda: signalled("REPLICATE_END"), 30, "REPLICATE_END signal")
    assert dst.archive.poll_for_error_response() is None
    names = [s.signal for s in signals]
    assert names[:2] == ["REPLICATE", "EXTEND"] and "SYNC" not in names, names
    dst_id = signals[0].recording_id
    _, last = publish(live, 500, rng)[-1]  # recorded by the destination from the live stream alone
    await_condition(lambda: dst.archive.get_recording_position(dst_id) == last or NotYet(
        f"dst at {dst.archive.get_recording_position(dst_id)} stop {dst.archive.get_stop_position(dst_id)}, src at"
        f" {src.archive.get_recording_position(src_id)}, live at {last}"), 60, "the live stream recorded")
    live.close()
    await_condition(lambda: src.archive.get_stop_position(src_id) == last, 30, "source recording stopped")
    await_condition(lambda: dst.archive.get_stop_position(dst_id) == last, 30, "destination recording stopped")
    assert_identical(src, src_id, dst, dst_id)
