"""How long a receiver waits before it NAKs a gap (Aeron's ``FeedbackDelayGenerator``; spec/transport.md §14).

* ``StaticFeedbackDelay``: unicast. The first NAK of a gap waits the NAK delay (100 µs), each retry the
  retry delay (ratio x delay).
* ``OptimalMulticastFeedbackDelay``: group semantics (multicast, or a SETUP with the group flag). Every NAK,
  first or retry, waits a fresh random delay in ``[0, max_backoff)`` (10 ms). Many receivers usually see the
  same loss at the same time, and the sender retransmits to all of them over the group: spreading the NAKs
  out means one NAK usually triggers the retransmit, and the others then find the gap filled (the loss
  detector forgets a filled gap). The delay follows the truncated exponential of RFC 5401 §3.5 with
  ``lambda = ln(group_size) + 1``, as Aeron's ``OptimalMulticastDelayGenerator`` does
  (``kernels/feedback_delay.py``), which puts most delays near the max and a few near zero. An image draws its
  delays in compiled code with the same formula, from a generator this one seeds.

Both answer ``delay_ns()`` (a gap seen for the first time) and ``retry_delay_ns()`` (the gap is still there
after a NAK).
"""

from __future__ import annotations

import random

from aeron_numba.errors import ConfigurationError
from aeron_numba.kernels.feedback_delay import multicast_delay_ns
from aeron_numba.kernels.minstd import seed_state


class StaticFeedbackDelay:
    def __init__(self, delay_ns: int, retry_delay_ns: int):
        self._delay_ns = delay_ns
        self._retry_delay_ns = retry_delay_ns

    def delay_ns(self) -> int:
        return self._delay_ns

    def retry_delay_ns(self) -> int:
        return self._retry_delay_ns


class OptimalMulticastFeedbackDelay:
    def __init__(self, max_backoff_ns: int, group_size: int, rng: random.Random | None = None):
        if max_backoff_ns <= 0:
            raise ConfigurationError(f"nak_multicast_max_backoff_ns={max_backoff_ns} must be > 0")
        if group_size < 1:
            raise ConfigurationError(f"nak_multicast_group_size={group_size} must be >= 1")
        self.max_backoff_ns = max_backoff_ns
        self.group_size = group_size
        self._rng = rng if rng is not None else random.Random()

    def delay_ns(self) -> int:
        return int(multicast_delay_ns(self.max_backoff_ns, self.group_size, self._rng.random()))

    retry_delay_ns = delay_ns

    def image_random_state(self) -> int:
        """A seed for an image's own generator, from which its compiled receiver work draws each NAK's delay with
        this formula (``kernels/feedback_delay.next_image_nak_delay_ns``)."""
        return seed_state(self._rng.getrandbits(31))
