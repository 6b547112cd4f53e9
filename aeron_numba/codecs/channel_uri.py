"""Channel URIs (spec/transport.md §12): ``[aeron-spy:]aeron:<media>[?key=value(|key=value)*]``.

Parsing is strict like Aeron's: unknown media, empty keys or values, a missing ``=``, duplicate keys or a
URI over 4095 characters raise ``InvalidChannelError`` naming the offending part. Values stay strings;
``parse_size``/``parse_duration_ns``/``parse_bool`` interpret them where a setting is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aeron_numba.errors import InvalidChannelError

AERON_SCHEME = "aeron"
SPY_QUALIFIER = "aeron-spy"
IPC_MEDIA = "ipc"
UDP_MEDIA = "udp"
MEDIA = (IPC_MEDIA, UDP_MEDIA)
MAX_URI_LENGTH = 4095
IPC_CHANNEL = "aeron:ipc"

# Parameter names used by the IPC driver and client.
TERM_LENGTH_PARAM = "term-length"
MTU_LENGTH_PARAM = "mtu"
SESSION_ID_PARAM = "session-id"
INITIAL_TERM_ID_PARAM = "init-term-id"
TERM_ID_PARAM = "term-id"
TERM_OFFSET_PARAM = "term-offset"
LINGER_PARAM = "linger"
ALIAS_PARAM = "alias"
TETHER_PARAM = "tether"
SPARSE_PARAM = "sparse"
EOS_PARAM = "eos"
REJOIN_PARAM = "rejoin"
RELIABLE_PARAM = "reliable"
PUBLICATION_WINDOW_PARAM = "pub-wnd"
UNTETHERED_WINDOW_LIMIT_TIMEOUT_PARAM = "untethered-window-limit-timeout"
UNTETHERED_RESTING_TIMEOUT_PARAM = "untethered-resting-timeout"
ENDPOINT_PARAM = "endpoint"
SPIES_SIMULATE_CONNECTION_PARAM = "ssc"
TAGS_PARAM = "tags"  # tags=<channel tag>[,<publication tag>]
TAG_PREFIX = "tag:"  # session-id=tag:<publication tag>: the session of the publication with that tag

_SIZE = re.compile(r"(\d+)([kKmMgG]?)")
_DURATION = re.compile(r"(\d+)(ns|us|ms|s)?")
_SIZE_FACTORS = {"": 1, "k": 1024, "m": 1024 * 1024, "g": 1024 * 1024 * 1024}
_DURATION_FACTORS = {None: 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


@dataclass(frozen=True)
class ChannelUri:
    """A parsed channel: ``media`` is ``ipc`` or ``udp``; ``params`` keeps the order they were given in."""

    media: str
    params: dict[str, str] = field(default_factory=dict)
    prefix: str = ""

    @classmethod
    def parse(cls, uri: str) -> "ChannelUri":
        """Each refusal leads with the words of Aeron's C parser (aeron_uri.c), so its messages find ours."""
        if not isinstance(uri, str):
            raise InvalidChannelError(f"channel must be a str, got {type(uri).__name__}")
        if len(uri) > MAX_URI_LENGTH:
            raise InvalidChannelError(f"URI length ({len(uri)}) exceeds max supported length ({MAX_URI_LENGTH}):"
                                      f" channel length={len(uri)} > MAX_URI_LENGTH={MAX_URI_LENGTH}")
        rest, prefix = uri, ""
        if rest.startswith(SPY_QUALIFIER + ":"):
            prefix, rest = SPY_QUALIFIER, rest[len(SPY_QUALIFIER) + 1 :]
        if not rest.startswith(AERON_SCHEME + ":"):
            raise InvalidChannelError(f"invalid URI scheme or transport: {uri} (must start with 'aeron:')")
        rest = rest[len(AERON_SCHEME) + 1 :]
        media, _, query = rest.partition("?")
        if media not in MEDIA:
            raise InvalidChannelError(
                f"invalid URI scheme or transport: {uri} (unknown media '{media}', expected one of {MEDIA})")
        params: dict[str, str] = {}
        if query or rest.endswith("?"):
            for pair in query.split("|"):
                key, eq, value = pair.partition("=")
                if not eq or not key or not value:
                    problem = "invalid end of key" if not eq else "empty key not allowed" if not key else \
                        "empty value not allowed"
                    raise InvalidChannelError(
                        f"{problem}: channel '{uri}': parameter '{pair}' must be key=value, both non-empty")
                if key in params:
                    raise InvalidChannelError(f"channel '{uri}': parameter '{key}' given twice")
                params[key] = value
        return cls(media, params, prefix)

    @property
    def is_ipc(self) -> bool:
        return self.media == IPC_MEDIA

    @property
    def is_spy(self) -> bool:
        return self.prefix == SPY_QUALIFIER

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.params.get(key, default)

    @property
    def channel_tag(self) -> str | None:
        """The channel tag of ``tags=`` (before the comma), or None when absent or empty, as Aeron splits it."""
        tag = self.params.get(TAGS_PARAM, "").partition(",")[0]
        return tag or None

    @property
    def entity_tag(self) -> str | None:
        """The publication (or subscription) tag of ``tags=`` (after the comma), or None when absent or empty."""
        tag = self.params.get(TAGS_PARAM, "").partition(",")[2]
        return tag or None

    def replace_endpoint_wildcard_port(self, resolved_endpoint: str) -> "ChannelUri":
        """This channel with the port of ``resolved_endpoint`` (``host:port``, as bound) in place of an
        ``endpoint``'s wildcard port 0, its host kept as given (Aeron's ``replaceEndpointWildcardPort``); with no
        ``endpoint`` the resolved one is added. Any other endpoint is kept."""
        _, colon, port = resolved_endpoint.rpartition(":")
        if not colon or not port:
            raise InvalidChannelError(f"resolved endpoint '{resolved_endpoint}' has no port")
        if port == "0":
            raise InvalidChannelError(f"resolved endpoint '{resolved_endpoint}' has the wildcard port 0")
        existing = self.params.get(ENDPOINT_PARAM)
        if existing is not None and not existing.endswith(":0"):
            return self
        endpoint = resolved_endpoint if existing is None else f"{existing[:-2]}:{port}"
        return ChannelUri(self.media, {**self.params, ENDPOINT_PARAM: endpoint}, self.prefix)

    def __str__(self) -> str:
        head = (self.prefix + ":" if self.prefix else "") + f"{AERON_SCHEME}:{self.media}"
        if not self.params:
            return head
        return head + "?" + "|".join(f"{k}={v}" for k, v in self.params.items())


def parse_size(name: str, value: str) -> int:
    """``64k``/``16m``/``1g``/plain bytes -> int; raises ``InvalidChannelError`` naming the parameter."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise InvalidChannelError(f"{name}={value!r} is not a size (digits with an optional k, m or g suffix)")
    return int(match.group(1)) * _SIZE_FACTORS[match.group(2).lower()]


def parse_duration_ns(name: str, value: str) -> int:
    """``5s``/``10ms``/``100us``/``250ns``/plain nanoseconds -> ns."""
    match = _DURATION.fullmatch(value)
    if not match:
        raise InvalidChannelError(f"{name}={value!r} is not a duration (digits with an optional ns/us/ms/s suffix)")
    return int(match.group(1)) * _DURATION_FACTORS[match.group(2)]


def parse_int32(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidChannelError(f"{name}={value!r} is not an integer") from None
    if not -(2**31) <= number < 2**31:
        raise InvalidChannelError(f"{name}={number} is outside the i32 range")
    return number


def parse_bool(name: str, value: str) -> bool:
    if value in ("true", "false"):
        return value == "true"
    raise InvalidChannelError(f"{name}={value!r} must be 'true' or 'false'")
