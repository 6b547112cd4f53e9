"""Registering a case's publications and subscriptions with the driver and waiting until they are connected.

Both loops of a benchmark (compiled or Python) start from what the public client API gives: a
``Publication``/``ExclusivePublication`` and a ``Subscription``'s ``Image``. Compiled loops take their compiled
handles (``publication.compiled()``, ``image.compiled()``).
"""

from __future__ import annotations

import time

from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED, STATUS_NAMES
from harness.awaiting import await_condition

RETRYABLE = (BACK_PRESSURED, ADMIN_ACTION, NOT_CONNECTED)


def channels(case: dict, k: int) -> tuple[str, str]:
    """The publication and subscription channels of the case's stream ``k`` (0: A to B, 1: B to A): IPC with
    the case's term length, or, for a UDP case, loopback unicast to the port the runner reserved for ``k`` (with
    the case's MTU, if it names one)."""
    term_length = case["term_length"]
    ports = case.get("udp_ports")
    if ports:
        endpoint = f"aeron:udp?endpoint={UDP_HOST}:{ports[k]}"
        mtu = f"|mtu={case['mtu']}" if case.get("mtu") else ""
        return f"{endpoint}|term-length={term_length}{mtu}", endpoint
    return f"aeron:ipc?term-length={term_length}", "aeron:ipc"


UDP_HOST = "127.0.0.1"


def open_publication(env, case: dict, k: int):
    aeron = env.aeron()
    add = aeron.add_exclusive_publication if case["exclusive"] else aeron.add_publication
    publication = add(channels(case, k)[0], env.stream_id(k))
    env.on_case_end(publication.close)
    return publication


def open_subscription(env, case: dict, k: int):
    subscription = env.aeron().add_subscription(channels(case, k)[1], env.stream_id(k))
    env.on_case_end(subscription.close)
    return subscription


def await_connected(env, publication=None, subscription=None):
    """Wait until ``publication`` has a subscriber and ``subscription`` an image; returns the image (or None)."""

    def connected() -> bool:
        return (publication is None or publication.is_connected) and (
            subscription is None or subscription.image_count > 0
        )

    await_condition(connected, max(0.0, env.case_deadline - time.monotonic()),
                    f"{env.case['name']}: connecting the publication and subscription", max_poll_interval_s=0.001)
    return subscription.images[0] if subscription is not None else None


def open_pair(env, case: dict, pub_k: int, sub_k: int):
    """Subscription on stream ``sub_k`` and publication on stream ``pub_k``, both connected:
    ``(publication, subscription, image)``."""
    subscription = open_subscription(env, case, sub_k)
    publication = open_publication(env, case, pub_k)
    image = await_connected(env, publication, subscription)
    return publication, subscription, image


def yield_mask(case: dict) -> int:
    """The compiled loops' spin-wait yield mask (``loops._idle``): UDP cases share the cores with the driver."""
    return int(case.get("yield_mask", 0))


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
