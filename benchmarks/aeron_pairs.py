"""Registering a case's publications and subscriptions with the driver and waiting until they are connected.

Both loops of a benchmark (compiled or Python) start from what the public client API gives: a
``Publication``/``ExclusivePublication`` and a ``Subscription``'s ``Image``. Compiled loops take their arrays
(``log_buffer``, ``pub_state``, ``limit_buffer``; ``log_buffer``, ``position_buffer``, ``position_offset``).
"""

from __future__ import annotations

import time

from aeron_numba.layout.publication import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED, STATUS_NAMES

RETRYABLE = (BACK_PRESSURED, ADMIN_ACTION, NOT_CONNECTED)


def ipc_channel(term_length: int) -> str:
    return f"aeron:ipc?term-length={term_length}"


def open_publication(env, stream_id: int, exclusive: bool, term_length: int):
    aeron = env.aeron()
    add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
    publication = add(ipc_channel(term_length), stream_id)
    env.on_case_end(publication.close)
    return publication


def open_subscription(env, stream_id: int):
    subscription = env.aeron().add_subscription("aeron:ipc", stream_id)
    env.on_case_end(subscription.close)
    return subscription


def await_connected(env, publication=None, subscription=None):
    """Wait until ``publication`` has a subscriber and ``subscription`` an image; returns the image (or None)."""
    while (publication is not None and not publication.is_connected) or (
        subscription is not None and subscription.image_count == 0
    ):
        env.check_deadline("connecting the publication and subscription")
        time.sleep(0.001)
    return subscription.images[0] if subscription is not None else None


def open_pair(env, pub_stream: int, sub_stream: int, exclusive: bool, term_length: int):
    """Subscription on ``sub_stream`` and publication on ``pub_stream``, both connected: ``(publication, image)``."""
    subscription = open_subscription(env, sub_stream)
    publication = open_publication(env, pub_stream, exclusive, term_length)
    image = await_connected(env, publication, subscription)
    return publication, subscription, image


def status_text(code: int) -> str:
    return STATUS_NAMES.get(int(code), "TIMED_OUT" if int(code) == -100 else str(int(code)))


class OfferFailed(RuntimeError):
    pass


def offer_python(offer, deadline: float, *args) -> int:
    """Offer through the public API until accepted; retry the transient statuses up to ``deadline``."""
    while True:
        result = offer(*args)
        if result > 0:
            return result
        if result not in RETRYABLE:
            raise OfferFailed(f"offer failed: {status_text(result)}")
        if time.monotonic() > deadline:
            raise OfferFailed(f"offer still {status_text(result)} at the deadline")
