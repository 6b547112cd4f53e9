"""The group NAK backoff in compiled code (``driver/feedback_delay.OptimalMulticastFeedbackDelay``'s formula).

RFC 5401 §3.5's truncated exponential with ``lambda = ln(group_size) + 1``, as Aeron's
``OptimalMulticastDelayGenerator``: inverting its CDF gives ``delay = (max_backoff / lambda) * ln(1 + u *
(e^lambda - 1))`` for ``u`` uniform in ``[0, 1)``. The Python generator and an image's compiled receiver work
(``image_receiver.receiver_work``, drawing from the state word of the image's row) share this one formula.
"""

from __future__ import annotations

import math

from aeron_numba.jit import kernel
from aeron_numba.kernels import minstd
from aeron_numba.layout import network_state as ns


@kernel
def multicast_delay_ns(max_backoff_ns, group_size, uniform):
    """The backoff for ``uniform`` in ``[0, 1)``: in ``[0, max_backoff_ns)``."""
    lam = math.log(group_size) + 1.0
    delay = int(max_backoff_ns / lam * math.log1p(uniform * math.expm1(lam)))
    return min(delay, max_backoff_ns - 1)  # float rounding must not reach the max


@kernel
def next_image_nak_delay_ns(row):
    """A fresh backoff for the image ``row`` (``IMAGE_NAK_RANDOM_STATE`` moves on)."""
    x = minstd.next_state(row[ns.IMAGE_NAK_RANDOM_STATE])
    row[ns.IMAGE_NAK_RANDOM_STATE] = x
    return multicast_delay_ns(row[ns.IMAGE_NAK_MAX_BACKOFF_NS], row[ns.IMAGE_NAK_GROUP_SIZE],
                              (x - 1) / (minstd.MODULUS - 1))
