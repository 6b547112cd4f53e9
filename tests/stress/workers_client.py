"""Publisher processes for the client stress test: each connects its own Aeron client to the (scripted)
driver of the parent test and publishes a numbered, verifiable stream through the Python API."""

from __future__ import annotations

import time

import numpy as np

from aeron_numba.client import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED, Aeron, BufferClaim, Context
from tests.stress.stress_support import mix32

CHANNEL = "aeron:ipc"
STREAM_ID = 77
MIN_LENGTH = 12  # publisher id (4) + sequence (8)
MAX_LENGTH = 3000  # above mtu 1408 - 32: some messages are fragmented
RETRYABLE = (NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION)


def message(publisher_id: int, seq: int) -> np.ndarray:
    """Deterministic message: i32 publisher id, i64 sequence, then bytes (id * 31 + seq + i) & 0xFF."""
    length = MIN_LENGTH + int(mix32(publisher_id, seq)) % (MAX_LENGTH - MIN_LENGTH + 1)
    buf = ((publisher_id * 31 + seq + np.arange(length)) & 0xFF).astype(np.uint8)
    buf[0:4].view(np.int32)[0] = publisher_id
    buf[4:12].view(np.int64)[0] = seq
    return buf


def publisher_main(aeron_dir: str, publisher_id: int, messages: int, mode: str, timeout_s: float) -> None:
    """``mode``: ``concurrent`` (shared log, offer), ``exclusive`` (own log, offer) or ``claim`` (shared log,
    try_claim when the message fits one frame, offer otherwise)."""
    deadline = time.monotonic() + timeout_s
    with Aeron.connect(Context(aeron_dir=aeron_dir, driver_timeout_ms=20_000)) as aeron:
        if mode == "exclusive":
            publication = aeron.add_exclusive_publication(CHANNEL, STREAM_ID)
        else:
            publication = aeron.add_publication(CHANNEL, STREAM_ID)
        claim = BufferClaim()
        for seq in range(messages):
            data = message(publisher_id, seq)
            while True:
                if mode == "claim" and data.size <= publication.max_payload_length:
                    result = publication.try_claim(data.size, claim)
                    if isinstance(result, BufferClaim):
                        claim.put_bytes(data)
                        claim.reserved_value = seq
                        claim.commit()
                        break
                else:
                    result = publication.offer(data, reserved_value=seq)
                    if result > 0:
                        break
                if result not in RETRYABLE:
                    raise AssertionError(f"publisher {publisher_id} seq {seq}: offer returned {result}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"publisher {publisher_id} stuck at seq {seq} (last status {result})")
                time.sleep(0.0002)
