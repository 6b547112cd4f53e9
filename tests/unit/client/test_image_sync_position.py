"""``Image.sync_position``: a Python poll after compiled polls of the same image must not peek at the frame of
its own last stored position, which the driver may have cleaned since (the cluster service container mixes the
two on its log image)."""

from __future__ import annotations

import numba
import numpy as np

from aeron_numba.kernels import term_reader
from aeron_numba.kernels.handlers import FRAGMENT_HANDLER_SIG
from aeron_numba.layout.frame import FRAME_ALIGNMENT, HEADER_LENGTH
from harness.awaiting import await_condition
from tests.unit.client_support import FakeDriver, connect


@numba.njit(FRAGMENT_HANDLER_SIG, cache=True)
def _count(ctx, buffer, offset, length):
    ctx[0] += 1


def test_python_poll_after_compiled_polls_finds_new_frames_once_synced(tmp_path):
    driver = FakeDriver(tmp_path / "aeron")
    aeron, _ = connect(driver)
    try:
        subscription = aeron.add_subscription("aeron:ipc", 12)
        publication = aeron.add_publication("aeron:ipc", 12)
        await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
        image = subscription.images[0]
        assert publication.offer(b"one") > 0 and publication.offer(b"two") > 0
        got = []
        assert image.poll(lambda b, o, n, h: got.append(bytes(b[o:o + n])), 1) == 1  # Python: peek now at "two"
        ctx = np.zeros(1, np.int64)
        assert term_reader.image_poll(image.log_buffer, image.position_buffer, image.position_offset, 10, _count,
                                      ctx) == 1  # compiled: "two" consumed
        frame = (len(b"one") + HEADER_LENGTH + FRAME_ALIGNMENT - 1) // FRAME_ALIGNMENT * FRAME_ALIGNMENT
        image.log_buffer[frame:frame + 2 * FRAME_ALIGNMENT] = 0  # what the driver's cleaning does to consumed frames
        assert publication.offer(b"three") > 0
        assert image.poll(lambda b, o, n, h: got.append(bytes(b[o:o + n])), 10) == 0, "stale peek (the bug)"
        image.sync_position()
        assert image.poll(lambda b, o, n, h: got.append(bytes(b[o:o + n])), 10) == 1
        assert got == [b"one", b"three"]
    finally:
        aeron.close()
        driver.close()
