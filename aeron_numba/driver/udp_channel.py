"""A parsed, resolved ``aeron:udp`` channel (spec/transport.md §12, §16).

``UdpChannel.parse(channel)`` checks the parameters a UDP channel needs and resolves its addresses once:

* ``endpoint=host:port`` — a publication sends data there; a subscription binds there (port 0 = any port).
* ``control=host:port`` with ``control-mode=dynamic`` (or ``manual``) — multi-destination-cast: the publication
  binds ``control`` and sends to every receiver whose status messages reach it; a subscription sends its
  status messages to ``control``.
* ``interface=host[:port]`` — the local address to bind a publication (or a multicast subscription) to.
* ``ttl`` — multicast time to live.

``canonical_form`` names the pair of local and remote addresses, as Aeron does ("UDP-<local>-<remote>"), so
two channel strings that mean the same sockets share one endpoint in the driver.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import InvalidChannelError

CONTROL_PARAM = "control"
CONTROL_MODE_PARAM = "control-mode"
INTERFACE_PARAM = "interface"
TTL_PARAM = "ttl"
CONTROL_MODE_DYNAMIC = "dynamic"
CONTROL_MODE_MANUAL = "manual"
CONTROL_MODES = (CONTROL_MODE_DYNAMIC, CONTROL_MODE_MANUAL)
ANY_ADDRESS = ("0.0.0.0", 0)
MAX_TTL = 255

Address = tuple[str, int]


def parse_host_port(name: str, value: str, *, port_required: bool = True) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` accepted) -> (host, port); raises ``InvalidChannelError`` naming the value."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        if port_required:
            raise InvalidChannelError(f"{name}={value!r} must be host:port")
        host, port_text = value, "0"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise InvalidChannelError(f"{name}={value!r} has no host")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidChannelError(f"{name}={value!r}: port {port_text!r} must be in [0, 65535]")
    return host, int(port_text)


def resolve(name: str, host: str, port: int) -> Address:
    """The IPv4 socket address of ``host:port`` (names resolved once, here)."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise InvalidChannelError(f"{name}={host}:{port} could not be resolved: {exc.strerror}") from None
    address = infos[0][4]
    return address[0], address[1]


def _format(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


@dataclass(frozen=True)
class UdpChannel:
    original: str
    uri: cu.ChannelUri
    remote_data: Address | None  # where a publication sends data; what a subscription binds (endpoint)
    local_data: Address  # where a publication binds (interface or any)
    remote_control: Address | None  # control= address (MDC)
    control_mode: str | None
    is_multicast: bool
    ttl: int | None

    @classmethod
    def parse(cls, channel: str) -> "UdpChannel":
        uri = cu.ChannelUri.parse(channel)
        if uri.is_ipc:
            raise InvalidChannelError(f"channel '{channel}' is not aeron:udp")
        endpoint = uri.get(cu.ENDPOINT_PARAM)
        control = uri.get(CONTROL_PARAM)
        control_mode = uri.get(CONTROL_MODE_PARAM)
        if control_mode is not None and control_mode not in CONTROL_MODES:
            raise InvalidChannelError(f"channel '{channel}': control-mode={control_mode!r} must be one of {CONTROL_MODES}")
        if endpoint is None and control is None:
            raise InvalidChannelError(f"channel '{channel}': aeron:udp needs endpoint=host:port (or control=host:port)")
        remote_data = resolve(cu.ENDPOINT_PARAM, *parse_host_port(cu.ENDPOINT_PARAM, endpoint)) if endpoint else None
        remote_control = resolve(CONTROL_PARAM, *parse_host_port(CONTROL_PARAM, control)) if control else None
        interface = uri.get(INTERFACE_PARAM)
        local_data = ANY_ADDRESS
        if interface is not None:
            local_data = resolve(INTERFACE_PARAM, *parse_host_port(INTERFACE_PARAM, interface, port_required=False))
        is_multicast = remote_data is not None and ipaddress.ip_address(remote_data[0]).is_multicast
        ttl = None
        if uri.get(TTL_PARAM) is not None:
            ttl = cu.parse_int32(TTL_PARAM, uri.get(TTL_PARAM))
            if not 0 <= ttl <= MAX_TTL:
                raise InvalidChannelError(f"ttl={ttl} must be in [0, {MAX_TTL}]")
        return cls(channel, uri, remote_data, local_data, remote_control, control_mode, is_multicast, ttl)

    @property
    def is_multi_destination(self) -> bool:
        return self.control_mode in CONTROL_MODES

    @property
    def canonical_form(self) -> str:
        remote = self.remote_data if self.remote_data is not None else self.remote_control
        return f"UDP-{_format(self.local_data)}-{_format(remote)}"

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.uri.get(key, default)

    def __str__(self) -> str:
        return self.original
