"""The channels the archive derives from a client's (spec/archive.md §6): a recorded stream's stripped channel,
which names it in the catalog and in listings, the channel it subscribes with to record it, and a replay's
channel, positioned like the recording."""

from __future__ import annotations

from aeron_numba.codecs.channel_uri import SPY_QUALIFIER, ChannelUri
from aeron_numba.layout import archive as A

#: Channel parameters that identify a recorded stream (Aeron's stripped channel): the rest (term length, MTU,
#: linger...) does not change which stream it is.
STRIPPED_PARAMS = ("endpoint", "interface", "control", "control-mode", "tags", "rejoin", "group", "tether", "fc",
                   "gtag", "cc", "so-rcvbuf", "so-sndbuf", "rcv-wnd", "session-id", "alias")
#: What a replay channel takes from the recording, whatever the client's channel says.
REPLAY_POSITION_PARAMS = ("init-term-id", "term-id", "term-offset", "term-length", "mtu")


def strip_channel(channel: str) -> str:
    """``channel`` with only the parameters in ``STRIPPED_PARAMS``, in the order it had them."""
    uri = ChannelUri.parse(channel)
    params = {k: v for k, v in uri.params.items() if k in STRIPPED_PARAMS}
    return str(ChannelUri(uri.media, params, uri.prefix))


def recording_subscription_channel(channel: str, source_location: int) -> str:
    """What the archive subscribes to for a recording: a LOCAL ``aeron:udp`` stream (published through the
    archive's own driver) through a spy on the publication's log, as Aeron's archive does, so no second network
    receiver joins the stream and the recording's source identity is Aeron's (``aeron:ipc``); anything else with
    the client's channel."""
    uri = ChannelUri.parse(channel)
    if source_location == A.SOURCE_LOCATIONS["LOCAL"] and not uri.is_ipc and not uri.is_spy:
        return f"{SPY_QUALIFIER}:{strip_channel(channel)}"
    return channel


def replay_channel(channel: str, descriptor, position: int) -> str:
    """The replay publication's channel: the client's, positioned so that replayed positions equal recorded
    ones (init-term-id, term-id, term-offset) with the recording's term length and MTU (§6.3)."""
    uri = ChannelUri.parse(channel)
    term_length = descriptor.term_buffer_length
    params = {k: v for k, v in uri.params.items() if k not in REPLAY_POSITION_PARAMS}
    params.update({"init-term-id": str(descriptor.initial_term_id),
                   "term-id": str(descriptor.initial_term_id + position // term_length),
                   "term-offset": str(position & (term_length - 1)), "term-length": str(term_length),
                   "mtu": str(descriptor.mtu_length)})
    return str(ChannelUri(uri.media, params, uri.prefix))
