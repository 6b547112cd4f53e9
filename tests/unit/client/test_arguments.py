"""Publication and Subscription refuse a non-int count, offset, length or reserved value with a ConfigurationError
naming it (they were ``int()``'s bare ValueError, OverflowError, or a float silently truncated)."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.client.arguments import as_int
from aeron_numba.errors import ConfigurationError


def test_as_int_takes_python_and_numpy_ints_and_names_anything_else():
    assert as_int("n", 3) == 3 and as_int("n", np.int32(-4)) == -4
    for bad in ("x", 2.5, None, b"1"):
        with pytest.raises(ConfigurationError, match=rf"^n={bad!r} must be an int$".replace("(", r"\(")):
            as_int("n", bad)
    with pytest.raises(ConfigurationError, match=r"^n=8 outside \[0, 7\]$"):
        as_int("n", 8, 0, 7)


@pytest.mark.parametrize("call, message", [
    (lambda sub, pub: sub.poll(print, "x"), "fragment_limit='x' must be an int"),
    (lambda sub, pub: sub.poll(print, None), "fragment_limit=None must be an int"),  # was a silent 0
    (lambda sub, pub: sub.controlled_poll(print, 2.5), "fragment_limit=2.5 must be an int"),
    (lambda sub, pub: sub.images[0].block_poll(print, "x"), "block_length_limit='x' must be an int"),
    (lambda sub, pub: pub.offer(np.zeros(8, np.uint8), "x"), "offset='x' must be an int"),
    (lambda sub, pub: pub.offer(b"12345678", 0, 2.5), "length=2.5 must be an int"),
    (lambda sub, pub: pub.offer(b"12345678", 0, 8, 2**64), "reserved_value=18446744073709551616 outside"),
    (lambda sub, pub: pub.try_claim("x"), "length='x' must be an int"),
    (lambda sub, pub: pub.try_claim(2.5), "length=2.5 must be an int"),  # was a claim of 2 bytes
])
def test_the_public_api_names_a_bad_argument(client, call, message):
    from harness.awaiting import await_condition

    aeron, _ = client
    subscription = aeron.add_subscription("aeron:ipc", 21)
    publication = aeron.add_publication("aeron:ipc", 21)
    await_condition(lambda: subscription.image_count == 1 and publication.position_limit > 0, 5, "connected")
    with pytest.raises(ConfigurationError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        call(subscription, publication)
    assert publication.position == 0 and subscription.poll(print, 10) == 0  # nothing was sent


@pytest.mark.parametrize("call, message", [
    (lambda pub, counter: pub.append_padding("x"), "length='x' must be an int"),
    (lambda pub, counter: pub.offer_block(np.zeros(64, np.uint8), "x"), "offset='x' must be an int"),
    (lambda pub, counter: pub.offer_block(np.zeros(64, np.uint8), 0, 2**64), "length=18446744073709551616 outside"),
    (lambda pub, counter: counter.set("x"), "value='x' must be an int"),
    (lambda pub, counter: counter.set(2**64), "value=18446744073709551616 outside"),  # was numba's TypingError
    (lambda pub, counter: counter.get_and_add(1.5), "delta=1.5 must be an int"),
    (lambda pub, counter: counter.compare_and_set(0, "1"), "update='1' must be an int"),
])
def test_exclusive_publication_and_counter_name_a_bad_argument(client, call, message):
    aeron, _ = client
    publication = aeron.add_exclusive_publication("aeron:ipc", 22)
    counter = aeron.add_counter(1001, b"", "arguments")
    with pytest.raises(ConfigurationError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        call(publication, counter)
    assert publication.position == 0 and counter.get() == 0
