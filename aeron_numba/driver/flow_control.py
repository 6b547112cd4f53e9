"""Sender flow control for network publications (spec/transport.md §16): how far the sender may transmit.

Each status message (SM) from a receiver says where it has consumed up to and how big its window is; its limit
is ``consumption position + receiver window``. The strategy turns the receivers' limits into the sender limit
(``snd-lmt``):

* ``UnicastFlowControl`` (default for unicast): the one receiver's limit, never moving backwards.
* ``MaxFlowControl`` (default for multicast / multi-destination-cast): the fastest receiver.
* ``MinFlowControl`` (``fc=min``): the slowest receiver; a receiver silent for the receiver timeout (5 s) is
  dropped so a dead one cannot hold everyone.

Chosen with the ``fc`` channel parameter: ``max``, ``min`` or ``min,t:<timeout>`` (Aeron's ``tagged`` and group
options are refused: this driver has no receiver groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import ChannelParameterError, InvalidChannelError

FLOW_CONTROL_PARAM = "fc"
MAX_STRATEGY_NAME = "max"
MIN_STRATEGY_NAME = "min"
TAGGED_STRATEGY_NAME = "tagged"
MAX_OPTION_NUMBER_LENGTH = 63  # the C driver's option number buffer, less its terminator
DEFAULT_RECEIVER_TIMEOUT_NS = 5_000_000_000


class UnicastFlowControl:
    def initial_limit(self, initial_position: int) -> int:
        return initial_position  # nothing is sent before the first status message

    def on_status_message(self, limit: int, receiver_id: int, sender_limit: int, now_ns: int) -> int:
        return max(sender_limit, limit)

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        return sender_limit

    def next_idle_ns(self) -> int | None:
        """When ``on_idle`` next changes anything (a receiver times out), or None: never."""
        return None

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

    def next_idle_ns(self) -> int | None:
        if not self.receivers:
            return None
        return min(r.time_of_last_sm_ns for r in self.receivers.values()) + self.receiver_timeout_ns + 1

    def has_required_receivers(self) -> bool:
        return bool(self.receivers)

    @property
    def receiver_count(self) -> int:
        return len(self.receivers)


class MaxFlowControl(MinFlowControl):
    def _pick(self, sender_limit: int) -> int:
        return max(r.limit for r in self.receivers.values()) if self.receivers else sender_limit


def flow_control_for(uri: cu.ChannelUri, *, multi_receiver: bool):
    """The strategy a channel asks for (``fc=``), else the default for its kind. A bad ``fc`` is refused with the
    words of Aeron's C driver (EINVAL: GENERIC_ERROR); ``max`` reads no options there, and neither does it here."""
    spec = uri.get(FLOW_CONTROL_PARAM)
    if spec is None:
        return MaxFlowControl() if multi_receiver else UnicastFlowControl()
    name = spec.partition(",")[0]
    if not name:
        raise ChannelParameterError(f"No flow control strategy name specified, URI: {uri}")
    if name == MAX_STRATEGY_NAME:
        return MaxFlowControl()
    if name == TAGGED_STRATEGY_NAME:
        raise ChannelParameterError(f"{FLOW_CONTROL_PARAM}={spec}: tagged flow control is not supported by this"
                                    f" driver ({MAX_STRATEGY_NAME} or {MIN_STRATEGY_NAME}), URI: {uri}")
    if name != MIN_STRATEGY_NAME:
        raise ChannelParameterError(f"Invalid flow control strategy name: {name} from URI: {uri}")
    return MinFlowControl(_min_receiver_timeout_ns(spec))


def _min_receiver_timeout_ns(spec: str) -> int:
    """``t:<timeout>`` from min's options, parsed as the C driver parses them (``g:`` group options it knows; this
    driver has no groups)."""
    timeout_ns = DEFAULT_RECEIVER_TIMEOUT_NS
    for option in spec.split(",")[1:]:
        if len(option) <= 2 or option[0] not in "gt" or option[1] != ":":
            raise ChannelParameterError(
                f"Flow control options - unrecognised option, field: {option}, options: {spec}")
        value = option[2:]
        if len(value) > MAX_OPTION_NUMBER_LENGTH:
            raise ChannelParameterError(f"Flow control options - number field too long (found {len(value)}, max"
                                        f" {MAX_OPTION_NUMBER_LENGTH}), field: {value}, options: {spec}")
        if option[0] == "g":
            raise ChannelParameterError(f"Flow control options - group options are not supported by this driver,"
                                        f" field: {option}, options: {spec}")
        try:
            timeout_ns = cu.parse_duration_ns(FLOW_CONTROL_PARAM, value)
        except InvalidChannelError:
            raise ChannelParameterError(
                f"Flow control options - invalid timeout, field: {option}, options: {spec}") from None
    return timeout_ns
