"""Compiled publish and subscribe loops on top of the Python client (IPC).

The Python client registers a publication and a subscription with the media driver; from then on both
loops stay in compiled code, through the handles the client gives them: ``publication.compiled()`` (the
publisher calls ``pub.offer(buf, offset, length)``) and ``image.compiled()`` (the subscriber calls
``image.poll(handler, ctx, fragment_limit)`` with a compiled ``FragmentHandler``). Every compiled function has
an explicit signature, so it is compiled once and then loaded from Numba's cache. The loops are compiled without
Numba's reference counting (``_nrt=False``, the project's kernel flags): with it, every array a loop hands on is
counted with atomic instructions, several times slower per message (``aeron_numba/client/handles.py``).

Run it against a media driver on the same aeron dir:

    # terminal 1: this project's driver (or Aeron's C driver, ``aeronmd``, with AERON_DIR set)
    .venv/bin/python -m aeron_numba.driver --dir /dev/shm/aeron-example
    # terminal 2: both roles in one process, or run --role sub and --role pub in two processes
    .venv/bin/python examples/compiled_pub_sub.py --dir /dev/shm/aeron-example --messages 1000000

Each message carries a sequence number; the subscriber checks they arrive in order and counts gaps.
"""

from __future__ import annotations

import argparse
import sys
import time

import numba
import numpy as np
from numba import types

from aeron_numba.client import Aeron, Context
from aeron_numba.client.handles import image_handle_type, publication_handle_type
from aeron_numba.kernels.handlers import FRAGMENT_HANDLER_SIG, FragmentHandler
from aeron_numba.layout.publication_status import ADMIN_ACTION

CHANNEL = "aeron:ipc"
STREAM_ID = 1001

# Subscriber context slots (an int64 array the compiled handler updates).
CTX_NEXT_SEQ = 0
CTX_MESSAGES = 1
CTX_OUT_OF_ORDER = 2
CTX_BYTES = 3
CTX_LENGTH = 4


@numba.njit(
    types.int64(publication_handle_type, types.uint8[::1], types.int64, types.int64, types.int64),
    cache=True, nogil=True, _nrt=False,
)
def publish(publication, scratch, length, next_seq, end_seq):
    """Offer messages ``next_seq .. end_seq - 1`` until back pressure; returns the next sequence to send."""
    while next_seq < end_seq:
        scratch[0:8].view(np.int64)[0] = next_seq
        result = publication.offer(scratch, 0, length)
        if result > 0:
            next_seq += 1
        elif result != ADMIN_ACTION:
            break  # NOT_CONNECTED / BACK_PRESSURED / CLOSED: let the caller idle or stop
    return next_seq


@numba.njit(FRAGMENT_HANDLER_SIG, cache=True, _nrt=False)
def on_fragment(ctx, buffer, offset, length):
    """Check the sequence number at the start of each message."""
    seq = buffer[offset : offset + 8].view(np.int64)[0]
    if seq != ctx[CTX_NEXT_SEQ]:
        ctx[CTX_OUT_OF_ORDER] += 1
    ctx[CTX_NEXT_SEQ] = seq + 1
    ctx[CTX_MESSAGES] += 1
    ctx[CTX_BYTES] += length


@numba.njit(
    types.int64(image_handle_type, types.int64, FragmentHandler, types.int64[::1]),
    cache=True, nogil=True, _nrt=False,
)
def subscribe(image, fragment_limit, handler, ctx):
    """Poll the image until a poll finds nothing (or it is closed); returns the fragments read."""
    total = 0
    while True:
        fragments = image.poll(handler, ctx, fragment_limit)
        if fragments == 0:
            return total
        total += fragments


def _idle(idle_count: int) -> None:
    time.sleep(0 if idle_count < 100 else 0.0001)


def run(aeron_dir: str, messages: int, length: int = 64, role: str = "both", timeout_s: float = 60.0) -> dict:
    """Publish and/or receive ``messages`` messages of ``length`` bytes (>= 8); returns the statistics."""
    if length < 8:
        raise SystemExit(f"--length={length} must be >= 8 (the sequence number)")
    deadline = time.monotonic() + timeout_s
    with Aeron.connect(Context(aeron_dir=aeron_dir)) as aeron:
        subscription = aeron.add_subscription(CHANNEL, STREAM_ID) if role in ("both", "sub") else None
        publication = aeron.add_publication(CHANNEL, STREAM_ID) if role in ("both", "pub") else None
        if publication is not None and length > publication.max_payload_length:
            raise SystemExit(f"--length={length} > max_payload_length={publication.max_payload_length}")
        pub = publication.compiled() if publication is not None else None
        image = None
        if subscription is not None:
            # A compiled caller learns of images from the Python side: here the first one; a subscription whose
            # images come and go would take a new handle from ``subscription.images`` between compiled batches.
            while subscription.image_count == 0:
                if time.monotonic() > deadline:
                    raise TimeoutError("no publisher appeared")
                time.sleep(0.001)
            image = subscription.images[0].compiled()

        scratch = np.zeros(max(length, 8), np.uint8)
        ctx = np.zeros(CTX_LENGTH, np.int64)
        next_seq = 0
        idle_count = 0
        started = time.perf_counter()
        while True:
            work = 0
            if pub is not None and next_seq < messages:
                sent = publish(pub, scratch, length, next_seq, messages)
                work += sent - next_seq
                next_seq = sent
            if image is not None:
                work += subscribe(image, 256, on_fragment, ctx)
            done_publishing = pub is None or next_seq >= messages
            done_receiving = image is None or ctx[CTX_MESSAGES] >= messages
            if done_publishing and done_receiving:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"sent {next_seq}, received {ctx[CTX_MESSAGES]} of {messages} before the deadline")
            idle_count = 0 if work else idle_count + 1
            if not work:
                _idle(idle_count)
        elapsed = time.perf_counter() - started
        del pub, image  # the handles keep the logs mapped: drop them before the client unmaps
    received = int(ctx[CTX_MESSAGES])
    return dict(
        sent=next_seq, received=received, out_of_order=int(ctx[CTX_OUT_OF_ORDER]), bytes=int(ctx[CTX_BYTES]),
        seconds=elapsed, messages_per_second=(max(next_seq, received) / elapsed) if elapsed > 0 else 0.0,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="aeron dir of the running driver (default: AERON_DIR or /dev/shm/aeron-<user>)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--role", choices=("both", "pub", "sub"), default="both")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    stats = run(args.dir, args.messages, args.length, args.role, args.timeout)
    print(
        f"sent={stats['sent']} received={stats['received']} out_of_order={stats['out_of_order']}"
        f" in {stats['seconds']:.3f}s ({stats['messages_per_second']:,.0f} msg/s)"
    )
    return 0 if stats["out_of_order"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
