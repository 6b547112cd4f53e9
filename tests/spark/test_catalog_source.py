"""``aeron-catalog``: an archive's catalog as a DataFrame equals the archive's own ``Catalog`` reading (ours and
the Java-recorded golden archive), and bad input reaches the user as a message naming the file and the reason."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from aeron_numba.archive.catalog import Catalog
from aeron_numba.layout import archive as A
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA
from aeron_numba.layout.checksum import CHECKSUM_CRC32C, CHECKSUM_NONE

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).parents[1] / "golden" / "aeron-1.48" / "archive-java"
_DESCRIPTOR = ARCHIVE_SCHEMA.message("RecordingDescriptor")
_NAMES = [f.name for f in _DESCRIPTOR.fields] + [v.name for v in _DESCRIPTOR.var_fields]
_STATES = {A.RECORDING_STATE_INVALID: "INVALID", A.RECORDING_STATE_VALID: "VALID",
           A.RECORDING_STATE_DELETED: "DELETED"}


def catalog_rows(folder, checksum: int) -> list[dict]:
    """What ``Catalog`` itself reads from the dir, as the rows the source must give."""
    rows = []
    with Catalog.open(folder, create=False, read_only=True, checksum_algorithm=checksum) as catalog:
        for recording_id in catalog.recording_ids():
            descriptor = catalog.descriptor(recording_id)
            length, state, stored = catalog.entry_header(recording_id)
            rows.append({**{name: getattr(descriptor, name) for name in _NAMES}, "length": length,
                         "state": _STATES[state], "checksum": stored,
                         "checksum_valid": None if checksum == CHECKSUM_NONE else catalog.checksum_matches(recording_id)})
    return rows


def read(spark, folder, **options) -> list[dict]:
    frame = spark.read.format("aeron-catalog").options(**options).load(str(folder))
    return [row.asDict() for row in frame.orderBy("recording_id").collect()]


def entry_offset(catalog_path: Path, recording_id: int) -> int:
    """Entries follow one another from the first entry offset, each as long as its stored bytes."""
    with Catalog.open(catalog_path.parent, create=False, read_only=True) as catalog:
        return A.first_entry_offset(catalog.alignment) + sum(len(catalog.entry_bytes(r)) for r in range(recording_id))


@pytest.fixture(scope="module")
def our_archive(tmp_path_factory):
    """Recordings stopped, active (no stop position yet), invalid and deleted, with CRC-32C descriptor checksums,
    one of which no longer matches its body."""
    folder = tmp_path_factory.mktemp("our-archive")
    with Catalog.open(folder, capacity=4096, checksum_algorithm=CHECKSUM_CRC32C) as catalog:
        for n in range(4):
            channel = f"aeron:udp?endpoint=localhost:{20120 + n}"
            catalog.add_recording(start_position=n * 1024, start_timestamp=1_000 + n, initial_term_id=-n,
                                  segment_file_length=1 << 20, term_buffer_length=1 << 16, mtu_length=1408,
                                  session_id=n - 2, stream_id=1001 + n, stripped_channel=channel,
                                  original_channel=channel + "|term-length=64k", source_identity=f"127.0.0.1:{5000 + n}")
        catalog.update_stop_position(0, 8192, 2_000)
        catalog.change_state(2, A.RECORDING_STATE_INVALID)
        catalog.change_state(3, A.RECORDING_STATE_DELETED)
        catalog.update_stop_position(3, 4096, 3_000)
    path = folder / A.CATALOG_FILE
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, entry_offset(path, 2) + A.DESCRIPTOR_CHECKSUM_OFFSET, 12345)
    path.write_bytes(bytes(data))
    return folder


def test_our_catalog_reads_as_the_archive_reads_it(spark, our_archive):
    rows = read(spark, our_archive, checksum="CRC-32C")
    assert rows == catalog_rows(our_archive, CHECKSUM_CRC32C)
    assert [(r["state"], r["stop_position"], r["checksum_valid"]) for r in rows] == [
        ("VALID", 8192, True), ("VALID", -1, True), ("INVALID", -1, False), ("DELETED", 4096, True)]
    without = read(spark, our_archive)
    assert [r["checksum_valid"] for r in without] == [None] * 4  # no algorithm named: validity unknown
    assert [r["checksum"] for r in without] == [r["checksum"] for r in rows]


def test_the_java_recorded_catalog_reads_as_the_archive_and_archive_tool_read_it(spark):
    folder = GOLDEN / "archive"
    rows = read(spark, folder, checksum="io.aeron.archive.checksum.Crc32c")
    assert rows == catalog_rows(folder, CHECKSUM_CRC32C)
    described = []
    for line in (GOLDEN / "archivetool-describe.txt").read_text().splitlines():
        if line.startswith("[RecordingDescriptor]"):
            described.append(dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", line.split(":", 1)[1])))
    assert len(described) == len(rows) == 3
    for row, java in zip(rows, described):
        for name in _NAMES:
            camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)
            value = java[camel].strip("'") if isinstance(row[name], str) else int(java[camel])
            assert row[name] == value, (name, row[name], java[camel])
    # Aeron 1.48 wrote no descriptor checksums here: a stored 0 does not match a CRC-32C of the body.
    assert [(r["state"], r["checksum"], r["checksum_valid"]) for r in rows] == [("VALID", 0, False)] * 3


def _corrupt_entry(folder: Path) -> str:
    struct_path = folder / A.CATALOG_FILE
    data = bytearray(struct_path.read_bytes())
    struct.pack_into("<i", data, entry_offset(struct_path, 1) + A.DESCRIPTOR_LENGTH_OFFSET, 100)
    struct_path.write_bytes(bytes(data))
    return rf"{struct_path}: entry at offset \d+ has length=100 \(must be >= \d+, leave the entry 64-aligned"


@pytest.mark.parametrize("case", ["missing folder", "not an archive", "truncated catalog", "corrupt entry",
                                  "unknown checksum"])
def test_bad_input_reaches_the_user_as_a_message_naming_the_file_and_reason(spark, our_archive, tmp_path, case):
    folder, options = tmp_path / "archive", {}
    if case == "missing folder":
        expected = rf"archive dir {folder} does not exist"
    elif case == "not an archive":
        folder.mkdir()
        (folder / "0-0.rec").write_bytes(b"\0" * 64)
        expected = rf"{folder} is not an Aeron archive: it has no archive.catalog"
    else:
        shutil.copytree(our_archive, folder)
        if case == "truncated catalog":
            (folder / A.CATALOG_FILE).write_bytes((folder / A.CATALOG_FILE).read_bytes()[:20])
            expected = rf"{folder / A.CATALOG_FILE}: file length=20 < required 32"
        elif case == "corrupt entry":
            expected = _corrupt_entry(folder)
        else:
            options = {"checksum": "CRC-64"}
            expected = r"aeron-catalog option checksum='CRC-64': "
    with pytest.raises(PySparkException) as caught:
        read(spark, folder, **options)
    assert re.search(r"InputError: .*" + expected, str(caught.value)), str(caught.value)


def test_an_entry_whose_body_does_not_decode_fails_the_read_task_naming_the_file_and_recording(
        spark, our_archive, tmp_path):
    # The entry lengths are sound, so planning passes; the task decoding the body raises in the Python worker,
    # which PySpark surfaces as a PythonException carrying our message.
    folder = tmp_path / "archive"
    shutil.copytree(our_archive, folder)
    path = folder / A.CATALOG_FILE
    data = bytearray(path.read_bytes())
    stripped_channel_length = entry_offset(path, 1) + A.DESCRIPTOR_HEADER_LENGTH + A.DESCRIPTOR_BLOCK_LENGTH
    struct.pack_into("<I", data, stripped_channel_length, 100_000)
    path.write_bytes(bytes(data))
    with pytest.raises(PySparkException) as caught:
        read(spark, folder)
    assert re.search(rf"InputError: corrupt catalog: {path}: recording 1: ", str(caught.value)), str(caught.value)
