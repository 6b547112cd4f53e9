"""The recording the Spark scan benchmark reads: an archive directory (``archive.catalog`` + segment files) of one
stopped recording of a given size, written by the archive's own ``Catalog`` and ``RecordingWriter`` from a real
log buffer filled by the exclusive publication's appender kernel (no driver: the recorder's part is done here,
term by term, as ``scan_block`` hands out blocks, a PAD frame alone).

The messages are a fixed pseudo-random mix (seed ``SEED``): most payloads 32 B to 1 KiB, some 1 KiB to 4 KiB, which
an MTU of 1408 splits into 2 or 3 fragments. Payload bytes are random, so Parquet cannot compress them away.
Recordings are cached by size and layout under a root directory: ``<root>/recording-<key>``, complete only once
its ``layout.json`` is written (a build cut short is redone).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from aeron_numba.archive.catalog import Catalog
from aeron_numba.archive.segment_files import RecordingWriter
from aeron_numba.jit import kernel
from aeron_numba.kernels.term_appender import exclusive_init_state, exclusive_offer
from aeron_numba.kernels.term_scanner import scan_block
from aeron_numba.layout import archive as A
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.frame import DEFAULT_MTU_LENGTH
from aeron_numba.layout.log_buffers import LogBuffers

TERM_LENGTH = 16 * 1024 * 1024
SEGMENT_FILE_LENGTH = A.DEFAULT_SEGMENT_FILE_LENGTH
MTU_LENGTH = DEFAULT_MTU_LENGTH  # payloads above MTU_LENGTH - HEADER_LENGTH (1376 bytes) are fragmented
SMALL_PAYLOADS = (32, 1024)
LARGE_PAYLOADS = (1025, 4096)
LARGE_SHARE = 0.07
SEED = 18
INITIAL_TERM_ID, SESSION_ID, STREAM_ID = 7, 1818, 1001
CHANNEL = "aeron:ipc?term-length=16m"
LAYOUT_FILE = "layout.json"
_LAYOUT_VERSION = 1  # bump when the message mix or the writing changes: old caches are then not reused
_SOURCE_LENGTH = 64 * 1024


def parse_size(text: str) -> int:
    """``2g``, ``512m``, ``8m``, ``65536``: bytes (k/m/g are binary); raises ``ValueError`` naming the text."""
    value = text.strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(value[-1:], 1)
    digits = value[:-1] if scale != 1 else value
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(f"--size {text!r}: expected a positive size such as 8m, 512m or 2g")
    return int(digits) * scale


def layout_key(size: int) -> str:
    return f"{size}-t{TERM_LENGTH}-s{SEGMENT_FILE_LENGTH}-v{_LAYOUT_VERSION}"


def message_lengths(size: int) -> np.ndarray:
    """The payload lengths offered for a recording of ``size`` bytes (more than it takes: a frame averages over
    600 bytes); the recording holds the first ``layout["messages"]`` of them."""
    count = size // 300 + 1024
    rng = np.random.default_rng(SEED)
    small = rng.integers(SMALL_PAYLOADS[0], SMALL_PAYLOADS[1] + 1, count)
    large = rng.integers(LARGE_PAYLOADS[0], LARGE_PAYLOADS[1] + 1, count)
    return np.where(rng.random(count) < LARGE_SHARE, large, small).astype(np.int64)


@kernel
def _offer_term(log, pub_state, limit_buf, source, lengths, next_message, target_position):
    """Offer ``lengths[next_message:]`` (each from a varying offset of ``source``, its index as reserved value)
    until the term rotates (ADMIN_ACTION: that message is offered again in the next term) or the publication
    reaches ``target_position``. Returns the index of the next message to offer, or -1 on any other status."""
    i = next_message
    while i < lengths.shape[0]:
        if pub_state[P.PUB_STATE_TERM_BEGIN_POSITION] + pub_state[P.PUB_STATE_TERM_OFFSET] >= target_position:
            return i
        length = lengths[i]
        result = exclusive_offer(log, pub_state, limit_buf, source, (i * 61) % (source.shape[0] - length), length, i)
        if result == P.ADMIN_ACTION:
            return i
        if result < 0:
            return -1
        i += 1
    return i


def _record_term(writer: RecordingWriter, log: np.ndarray, term_base: int, from_offset: int, to_offset: int) -> None:
    """Hand ``[from_offset, to_offset)`` of one term to the writer in the blocks a recorder would."""
    offset = from_offset
    while offset < to_offset:
        block_end = int(scan_block(log, term_base, offset, to_offset))
        if block_end <= offset:
            raise RuntimeError(f"no whole frame at term offset {offset} of the term at {term_base}")
        writer.write(log, term_base + offset, block_end - offset)
        offset = block_end


def build_recording(archive_dir: Path, size: int, scratch_dir: Path) -> dict:
    """Write a recording of about ``size`` bytes (whole frames, ending at the first message past ``size``) into
    the empty ``archive_dir``; the log buffer lives in ``scratch_dir`` meanwhile. Returns its layout record."""
    log_path = scratch_dir / f"spark-scan-{size}.logbuffer"
    log_buffers = LogBuffers.create(log_path, term_length=TERM_LENGTH, initial_term_id=INITIAL_TERM_ID,
                                    session_id=SESSION_ID, stream_id=STREAM_ID, mtu_length=MTU_LENGTH)
    try:
        log = log_buffers.buffer
        pub_state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        exclusive_init_state(log, pub_state)
        limit_buf = np.zeros(128, np.uint8)
        limit_buf[:8].view(np.int64)[0] = 1 << 62  # no subscriber holds the publication back
        source = np.random.default_rng(SEED + 1).integers(0, 256, _SOURCE_LENGTH, dtype=np.uint8)
        lengths = message_lengths(size)
        with Catalog.open(archive_dir) as catalog:
            recording_id = catalog.add_recording(
                start_position=0, start_timestamp=1, initial_term_id=INITIAL_TERM_ID,
                segment_file_length=SEGMENT_FILE_LENGTH, term_buffer_length=TERM_LENGTH, mtu_length=MTU_LENGTH,
                session_id=SESSION_ID, stream_id=STREAM_ID, stripped_channel="aeron:ipc", original_channel=CHANNEL,
                source_identity="aeron:ipc")
            writer = RecordingWriter(archive_dir, recording_id, 0, 0, TERM_LENGTH, SEGMENT_FILE_LENGTH)
            position, next_message = 0, 0
            while position < size:
                term_begin = int(pub_state[P.PUB_STATE_TERM_BEGIN_POSITION])
                term_base = int(pub_state[P.PUB_STATE_PARTITION_INDEX]) * TERM_LENGTH
                next_message = int(_offer_term(log, pub_state, limit_buf, source, lengths, next_message, size))
                if next_message < 0:
                    raise RuntimeError(f"the appender failed at position {position}")
                rotated = int(pub_state[P.PUB_STATE_TERM_BEGIN_POSITION]) != term_begin
                end = term_begin + TERM_LENGTH if rotated else term_begin + int(pub_state[P.PUB_STATE_TERM_OFFSET])
                if end < size and not rotated:  # message_lengths is sized with room to spare: never expected
                    raise RuntimeError(f"ran out of messages at position {end} of {size}")
                _record_term(writer, log, term_base, position - term_begin, end - term_begin)
                if rotated:  # cleaned as the driver cleans a term behind the publisher, before it is reused
                    log[term_base:term_base + TERM_LENGTH] = 0
                position = end
            writer.close()
            catalog.update_stop_position(recording_id, position, 2)
    finally:
        log_buffers.close()
        log_path.unlink(missing_ok=True)
    return {"size": size, "key": layout_key(size), "recording_id": recording_id, "stop_position": position,
            "messages": next_message, "term_length": TERM_LENGTH, "segment_file_length": SEGMENT_FILE_LENGTH,
            "mtu_length": MTU_LENGTH}


def ensure_recording(root: Path, size: int) -> tuple[Path, dict, bool]:
    """``(archive_dir, layout, built)``: the cached recording of this size and layout, built first if missing."""
    archive_dir = root / f"recording-{layout_key(size)}"
    marker = archive_dir / LAYOUT_FILE
    if marker.exists():
        return archive_dir, json.loads(marker.read_text()), False
    shutil.rmtree(archive_dir, ignore_errors=True)  # a build cut short
    archive_dir.mkdir(parents=True)
    layout = build_recording(archive_dir, size, root)
    marker.write_text(json.dumps(layout, indent=1))
    return archive_dir, layout, True
