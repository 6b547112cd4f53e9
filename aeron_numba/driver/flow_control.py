"""Sender flow control for network publications (spec/transport.md §16): how far the sender may transmit.

Each status message (SM) from a receiver says where it has consumed up to and how big its window is; its limit
is ``consumption position + receiver window``. The strategy turns the receivers' limits into the sender limit
(``snd-lmt``):

* ``UnicastFlowControl`` (default for unicast): the one receiver's limit, never moving backwards.
* ``MaxFlowControl`` (default for multicast / multi-destination-cast): the fastest receiver.
* ``MinFlowControl`` (``fc=min``): the slowest receiver; a receiver silent for the receiver timeout (5 s) is
  dropped so a dead one cannot hold everyone.

Chosen with the ``fc`` channel parameter: ``max``, ``min`` or ``min,t:<timeout>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import InvalidChannelError

FLOW_CONTROL_PARAM = "fc"
DEFAULT_RECEIVER_TIMEOUT_NS = 5_000_000_000


class UnicastFlowControl:
    def initial_limit(self, initial_position: int) -> int:
        return initial_position  # nothing is sent before the first status message

    def on_status_message(self, limit: int, receiver_id: int, sender_limit: int, now_ns: int) -> int:
        return max(sender_limit, limit)

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        return sender_limit

    def has_required_receivers(self) -> bool:
        return True

    @property
    def receiver_count(self) -> int:
        return 1


@dataclass
class _Receiver:
    limit: int
    time_of_last_sm_ns: int


class MinFlowControl:
    def __init__(self, receiver_timeout_ns: int = DEFAULT_RECEIVER_TIMEOUT_NS):
        self.receiver_timeout_ns = receiver_timeout_ns
        self.receivers: dict[int, _Receiver] = {}

    def initial_limit(self, initial_position: int) -> int:
        return initial_position

    def _pick(self, sender_limit: int) -> int:
        return min(r.limit for r in self.receivers.values()) if self.receivers else sender_limit

    def on_status_message(self, limit: int, receiver_id: int, sender_limit: int, now_ns: int) -> int:
        receiver = self.receivers.get(receiver_id)
        if receiver is None:
            self.receivers[receiver_id] = _Receiver(limit, now_ns)
        else:
            receiver.limit, receiver.time_of_last_sm_ns = max(receiver.limit, limit), now_ns
        return self._pick(sender_limit)

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        for receiver_id in [k for k, r in self.receivers.items()
                            if now_ns - r.time_of_last_sm_ns > self.receiver_timeout_ns]:
            del self.receivers[receiver_id]
        return self._pick(sender_limit)

    def has_required_receivers(self) -> bool:
        return bool(self.receivers)

    @property
    def receiver_count(self) -> int:
        return len(self.receivers)


class MaxFlowControl(MinFlowControl):
    def _pick(self, sender_limit: int) -> int:
        return max(r.limit for r in self.receivers.values()) if self.receivers else sender_limit


def flow_control_for(uri: cu.ChannelUri, *, multi_receiver: bool):
    """The strategy a channel asks for (``fc=``), else the default for its kind."""
    spec = uri.get(FLOW_CONTROL_PARAM)
    if spec is None:
        return MaxFlowControl() if multi_receiver else UnicastFlowControl()
    kind, *options = spec.split(",")
    timeout_ns = DEFAULT_RECEIVER_TIMEOUT_NS
    for option in options:
        key, _, value = option.partition(":")
        if key == "t" and value:
            timeout_ns = cu.parse_duration_ns("fc timeout", value)
        else:
            raise InvalidChannelError(f"fc={spec!r}: option {option!r} not supported (only t:<timeout>)")
    if kind == "min":
        return MinFlowControl(timeout_ns)
    if kind == "max":
        return MaxFlowControl(timeout_ns)
    raise InvalidChannelError(f"fc={spec!r}: flow control '{kind}' not supported (max or min)")
