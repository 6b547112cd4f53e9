"""A parsed, resolved ``aeron:udp`` channel (spec/transport.md §12, §16).

``UdpChannel.parse(channel)`` checks the parameters a UDP channel needs and resolves its addresses once:

* ``endpoint=host:port`` — a publication sends data there; a subscription binds there (port 0 = any port).
* ``control=host:port`` with ``control-mode=dynamic`` (or ``manual``) — multi-destination-cast: the publication
  binds ``control`` and sends to every receiver whose status messages reach it; a subscription sends its
  status messages to ``control``.
* ``interface=host[:port][/prefix]`` — the local address to bind a publication to, or the interface a multicast
  channel joins its groups on and sends from. With a ``/prefix`` it is a search: the first local IPv4 interface
  address inside that subnet (``interface=127.0.0.0/8`` -> ``127.0.0.1``), as Aeron's interface search does.
* ``endpoint=<group>:<port>`` with a multicast group: multicast. Data, SETUP and heartbeats go to the data
  group; status messages, NAKs and RTT replies to the control group, which is the data group with its last
  octet + 1 (so the data group's last octet must be odd, as Aeron requires), on the same port. A multicast
  channel takes no ``control``/``control-mode``; a publication's needs a port (as any publication's endpoint).
* ``ttl`` — multicast time to live (IP_MULTICAST_TTL), read as Aeron's C driver reads it (clamped to 255).
* ``group=true|false|infer`` — a subscription's group semantics (multicast NAK backoff); ``infer`` (the default)
  means "a multicast channel, or a SETUP flagged group"; any other value is false, as in Aeron's C driver.

Refusals carry the C driver's code and words: a malformed channel is INVALID_CHANNEL (``InvalidChannelError``), a
bad value EINVAL, which a client sees as GENERIC_ERROR (``ChannelParameterError``), an unknown host UNKNOWN_HOST.

``canonical_form`` names the pair of local and remote addresses, as Aeron does ("UDP-<local>-<remote>"), so
two channel strings that mean the same sockets share one endpoint in the driver.

* ``tags=<channel tag>[,<publication tag>]`` — the channel tag names this channel's endpoint, so that a later
  ``aeron:udp?tags=<channel tag>`` (no endpoint of its own) reuses it (``matches_tag``). A tagged channel with no
  address of its own (or a wildcard port) gets ``#<tag>`` after its canonical form, as Aeron's, so that it is told
  apart from an untagged one.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
from dataclasses import dataclass

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import ChannelParameterError, InvalidChannelError, UnknownHostError

CONTROL_PARAM = "control"
CONTROL_MODE_PARAM = "control-mode"
INTERFACE_PARAM = "interface"
TTL_PARAM = "ttl"
GROUP_PARAM = "group"
GROUP_INFER = "infer"
CONTROL_MODE_DYNAMIC = "dynamic"
CONTROL_MODE_MANUAL = "manual"
CONTROL_MODES = (CONTROL_MODE_DYNAMIC, CONTROL_MODE_MANUAL)
ANY_ADDRESS = ("0.0.0.0", 0)
MAX_TTL = 255
MAX_IPV4_PREFIX = 32
SIOCGIFADDR = 0x8915  # Linux ioctl: the IPv4 address of a named interface
IFREQ = struct.Struct("16s24x")  # struct ifreq: name, then the union the kernel fills with a sockaddr
IFREQ_ADDRESS_OFFSET = 20  # sin_addr inside the returned ifreq (16 name + 2 family + 2 port)

Address = tuple[str, int]
_TAG_PREFIX = re.compile(r"\s*([+-]?)([0-9]+)")  # what C's strtoul(tag, 10) reads; the rest is ignored, as C does
_MAX_TAG = 2**63 - 1


def parse_host_port(name: str, value: str, *, port_required: bool = True) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` accepted) -> (host, port); a bad port is refused with Aeron's C driver's words
    and code (``ChannelParameterError``: GENERIC_ERROR), followed by the line C appends naming the parameter."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        if port_required:
            raise ChannelParameterError(f"port invalid: \n{_unresolved(name, value)}")
        host, port_text = value, "0"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit():
        raise ChannelParameterError(f"port invalid: {port_text}\n{_unresolved(name, value)}")
    if int(port_text) > 65535:
        raise ChannelParameterError(f"port out of range: {port_text}\n{_unresolved(name, value)}")
    return host, int(port_text)


def _unresolved(name: str, value: str) -> str:
    return f"Unresolved - {name}={value}, name-and-port={value}"


def resolve(name: str, host: str, port: int) -> Address:
    """The IPv4 socket address of ``host:port`` (names resolved once, here); an unknown (or empty) host is
    UNKNOWN_HOST with the C driver's words."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise UnknownHostError(f"Unable to resolve host=({host}): ({exc.errno}) {exc.strerror}\n"
                               f"{_unresolved(name, f'{host}:{port}')}") from None
    address = infos[0][4]
    return address[0], address[1]


def _format(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


def local_ipv4_addresses() -> list[tuple[str, str]]:
    """(interface name, IPv4 address) of every local interface that has one, in interface index order.

    Linux only (SIOCGIFADDR); elsewhere the list is empty and only an exact ``interface=`` address works.
    """
    found = []
    try:
        import fcntl  # not on every platform

        names = [name for _, name in socket.if_nameindex()]
    except (ImportError, OSError):
        return found
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for name in names:
            try:
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, IFREQ.pack(name.encode()[:15]))
            except OSError:  # no IPv4 address on it (or not Linux)
                continue
            found.append((name, socket.inet_ntoa(reply[IFREQ_ADDRESS_OFFSET:IFREQ_ADDRESS_OFFSET + 4])))
    return found


def resolve_interface(value: str) -> Address:
    """``host[:port][/prefix]`` -> the local (address, port): the address itself, or with a prefix the first
    local interface address in that subnet. A bad prefix, or none in the subnet, is the C driver's EINVAL
    (``ChannelParameterError``) with its words."""
    host_port, slash, prefix_text = value.partition("/")
    host, port = parse_host_port(INTERFACE_PARAM, host_port, port_required=False)
    address = resolve(INTERFACE_PARAM, host, port)
    if not slash:
        return address
    if not prefix_text.isdigit() or int(prefix_text) > MAX_IPV4_PREFIX:
        problem = "prefixlen out of range" if prefix_text.isdigit() else "prefixlen invalid"
        raise ChannelParameterError(f"{problem}: {prefix_text}\ncould not parse {INTERFACE_PARAM}='{value}':"
                                    f" the prefix must be in [0, {MAX_IPV4_PREFIX}]")
    subnet = ipaddress.ip_network(f"{address[0]}/{prefix_text}", strict=False)
    candidates = local_ipv4_addresses()
    for _, local in candidates:
        if ipaddress.ip_address(local) in subnet:
            return local, port
    listed = ", ".join(f"{name}={local}" for name, local in candidates) or "none found"
    raise ChannelParameterError(f"could not find matching {INTERFACE_PARAM}='{value}': no local IPv4 interface"
                                f" address in {subnet} (local addresses: {listed})")


def multicast_control_address(data_group: Address) -> Address:
    """The control group of a multicast data group: last octet + 1, same port (Aeron's rule). The data group's
    last octet must be odd, so control groups never land on another channel's data group."""
    octets = bytearray(socket.inet_aton(data_group[0]))
    if octets[-1] % 2 == 0:
        raise ChannelParameterError(
            f"Multicast data address must be odd\n{cu.ENDPOINT_PARAM}={data_group[0]}:{data_group[1]}: last octet"
            f" {octets[-1]} is even (the control group is the data group + 1)")
    octets[-1] = (octets[-1] + 1) & 0xFF  # .255 -> .0, as Aeron's byte arithmetic does
    return socket.inet_ntoa(bytes(octets)), data_group[1]


def route_source_address(remote: Address) -> str | None:
    """The local IPv4 address the kernel picks to send to ``remote`` (None when it has no route there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(remote)  # a UDP connect only selects the route; nothing is sent
        except OSError:
            return None
        return probe.getsockname()[0]


def parse_channel_tag(text: str) -> int:
    """A channel tag as the C driver reads it (strtoul, base 10): the leading decimal digits, anything after them
    ignored. No digits, a negative value or one past a signed 64-bit integer: INVALID_CHANNEL with C's words."""
    match = _TAG_PREFIX.match(text)
    if match is None or match.group(1) == "-" or int(match.group(2)) > _MAX_TAG:
        raise InvalidChannelError(f"could not parse channel tag string: {text}")
    return int(match.group(2))


def _group_semantics(value: str | None) -> bool | None:
    """As Aeron's C driver reads an inferable boolean: ``true``, ``infer`` (or absent: None), anything else false."""
    if value is None or value == GROUP_INFER:
        return None
    return value == "true"


def multicast_ttl(value: str) -> int:
    """The C driver's reading of ``ttl`` (strtoull, base 0, clamped to 255): a value is never refused; text that
    is not a number reads as 0, a negative number (which wraps) or one over 255 as 255."""
    text = value.strip()
    negative = text[:1] == "-"
    text = text[1:] if text[:1] in "+-" else text
    base, digits = (16, "0123456789abcdefABCDEF") if text[:2] in ("0x", "0X") else \
        (8, "01234567") if text[:1] == "0" else (10, "0123456789")
    if base == 16:
        text = text[2:]
    number_text = ""
    for char in text:
        if char not in digits:
            break
        number_text += char
    number = int(number_text, base) if number_text else 0
    if negative and number:
        return MAX_TTL
    return min(number, MAX_TTL)


@dataclass(frozen=True)
class UdpChannel:
    original: str
    uri: cu.ChannelUri
    remote_data: Address | None  # where a publication sends data; what a subscription binds (endpoint)
    local_data: Address  # where a publication binds (interface or any)
    remote_control: Address | None  # control= address (MDC), or the control group of a multicast channel
    control_mode: str | None
    is_multicast: bool
    ttl: int | None
    group_semantics: bool | None = None  # group= of a subscription; None: infer
    tag: int | None = None  # the channel tag of tags=

    @classmethod
    def parse(cls, channel: str) -> "UdpChannel":
        uri = cu.ChannelUri.parse(channel)
        if uri.is_ipc:
            raise InvalidChannelError(f"UDP channels must use UDP URIs: channel '{channel}' is not aeron:udp")
        endpoint = uri.get(cu.ENDPOINT_PARAM)
        control = uri.get(CONTROL_PARAM)
        control_mode = uri.get(CONTROL_MODE_PARAM)
        if control_mode is not None and control_mode not in CONTROL_MODES:
            raise InvalidChannelError(f"channel '{channel}': control-mode={control_mode!r} must be one of {CONTROL_MODES}")
        if control_mode == CONTROL_MODE_DYNAMIC and control is None:
            raise InvalidChannelError(f"explicit control expected with dynamic control mode: channel '{channel}'")
        tag_text = uri.channel_tag
        if endpoint is None and control is None and tag_text is None and control_mode != CONTROL_MODE_MANUAL:
            # C's words; this driver has no response channels.
            raise InvalidChannelError("URIs for UDP must specify endpoint, control, tags, or control-mode=manual/"
                                      f"response: channel '{channel}'")
        remote_data = resolve(cu.ENDPOINT_PARAM, *parse_host_port(cu.ENDPOINT_PARAM, endpoint)) if endpoint else None
        remote_control = resolve(CONTROL_PARAM, *parse_host_port(CONTROL_PARAM, control)) if control else None
        interface = uri.get(INTERFACE_PARAM)
        local_data = ANY_ADDRESS if interface is None else resolve_interface(interface)
        is_multicast = remote_data is not None and ipaddress.ip_address(remote_data[0]).is_multicast
        if is_multicast:
            if control is not None or control_mode is not None:
                raise InvalidChannelError(
                    f"channel '{channel}': a multicast endpoint={endpoint} takes no {CONTROL_PARAM} or"
                    f" {CONTROL_MODE_PARAM} (its control group is derived from the data group)")
            remote_control = multicast_control_address(remote_data)  # port 0: refused for publications only
        ttl = None if uri.get(TTL_PARAM) is None else multicast_ttl(uri.get(TTL_PARAM))
        return cls(channel, uri, remote_data, local_data, remote_control, control_mode, is_multicast, ttl,
                   _group_semantics(uri.get(GROUP_PARAM)), None if tag_text is None else parse_channel_tag(tag_text))

    def check_for_publication(self) -> None:
        """What the C driver requires of a publication's channel, after its parameters (its words, EINVAL)."""
        if not self.is_multi_destination and self.uri.get(cu.ENDPOINT_PARAM) is not None and \
                self.remote_data[1] == 0:
            # Nothing could ever be sent there (sendto port 0 is EINVAL).
            raise ChannelParameterError(f"{cu.ENDPOINT_PARAM} has port=0 for publication: channel={self.original}")
        if self.uri.get(CONTROL_PARAM) is not None and self.uri.get(cu.ENDPOINT_PARAM) is None and \
                self.control_mode is None:
            raise ChannelParameterError(f"'{CONTROL_PARAM}' parameter requires that either '{cu.ENDPOINT_PARAM}' or"
                                        f" '{CONTROL_MODE_PARAM}' is specified, channel={self.original}")

    def check_for_subscription(self) -> None:
        """What the C driver requires of a network subscription's channel (its words, EINVAL)."""
        if self.uri.get(CONTROL_PARAM) is not None and not self.is_multicast and self.remote_control[1] == 0:
            raise ChannelParameterError(f"{CONTROL_PARAM} has port=0 for subscription: channel={self.original}")

    @property
    def is_multi_destination(self) -> bool:
        return self.control_mode in CONTROL_MODES

    @property
    def is_manual_destination_control(self) -> bool:
        """MDC whose destinations the publication's clients add and remove (ADD_/REMOVE_DESTINATION)."""
        return self.control_mode == CONTROL_MODE_MANUAL

    @property
    def has_group_semantics(self) -> bool:
        """Many receivers per publication (multicast or MDC): SETUPs carry the group flag, flow control is max."""
        return self.is_multicast or self.is_multi_destination

    @property
    def multicast_interface(self) -> str:
        """The address of the interface a multicast channel joins and sends on (0.0.0.0: the kernel's choice)."""
        return self.local_data[0]

    @property
    def has_explicit_endpoint(self) -> bool:
        return self.uri.get(cu.ENDPOINT_PARAM) is not None

    @property
    def has_explicit_control(self) -> bool:
        return self.uri.get(CONTROL_PARAM) is not None

    @property
    def canonical_form(self) -> str:
        remote = self.remote_data if self.remote_data is not None else self.remote_control
        if remote is None and self.tag is None:  # manual MDC without control=: no address of its own
            return f"UDP-{_format(self.local_data)}-{CONTROL_MODE_MANUAL}"
        form = f"UDP-{_format(self.local_data)}-{_format(remote or ANY_ADDRESS)}"
        if self.tag is not None and self._has_no_address_of_its_own():
            form += f"#{self.tag}"  # Aeron's suffix: two such channels are the same endpoint only by their tag
        return form

    def _has_no_address_of_its_own(self) -> bool:
        """Aeron's test for a canonical form that needs a suffix: no endpoint and no control, or a wildcard port."""
        if self.remote_data is None and not self.has_explicit_control:
            return True
        return (self.remote_data is not None and self.remote_data[1] == 0) or \
            (self.has_explicit_control and self.remote_control[1] == 0)

    def _tag_addresses(self) -> tuple[Address, Address]:
        """(remote, local) as Aeron's UDP channel holds them when matching tags: the endpoint (or the wildcard), and
        the control address when one is given, else the interface (or the wildcard)."""
        local = self.remote_control if self.has_explicit_control else self.local_data
        return (self.remote_data or ANY_ADDRESS), local

    def matches_tag(self, endpoint_channel: "UdpChannel") -> bool:
        """True when this channel's tag names the endpoint made for ``endpoint_channel`` (Aeron's matchesTag); a
        channel that names the tag but contradicts the endpoint's control mode or addresses is refused with C's
        words (GENERIC_ERROR)."""
        if self.tag is None or self.tag != endpoint_channel.tag:
            return False
        if self.control_mode is not None and self.control_mode != endpoint_channel.control_mode:
            raise ChannelParameterError(f"matching tag {self.tag} has mismatched control-mode: {self.original} <> "
                                        f"{endpoint_channel.original}")
        remote, local = self._tag_addresses()
        if remote == ANY_ADDRESS and local == ANY_ADDRESS:
            return True  # names only the tag: whatever the endpoint's addresses are
        endpoint_remote, endpoint_local = endpoint_channel._tag_addresses()
        if remote != endpoint_remote or local != endpoint_local:
            raise ChannelParameterError(f"matching tag {self.tag} has mismatched endpoint or control: "
                                        f"{self.original} <> {endpoint_channel.original}")
        return True

    def send_bind_address(self) -> Address:
        """Where a publication's send endpoint binds: MDC its control address, multicast its control group, else
        the ``interface`` (or any). A unicast endpoint with no interface binds the local address the kernel sends
        from to reach the endpoint: the address Aeron's connected send socket has, which peers answer to and
        which snd-local-sockaddr shows (not 0.0.0.0)."""
        if self.is_multi_destination or self.is_multicast:
            return self.remote_control if self.remote_control is not None else self.local_data  # manual MDC: any
        if self.local_data[0] != ANY_ADDRESS[0] or self.remote_data is None:
            return self.local_data
        source = route_source_address(self.remote_data)
        return self.local_data if source is None else (source, self.local_data[1])

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.uri.get(key, default)

    def __str__(self) -> str:
        return self.original
