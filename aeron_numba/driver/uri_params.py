"""The driver's reading of channel parameter values, refused with the messages of Aeron's C driver
(aeron_uri.c, aeron_driver_uri.c, aeron_logbuffer_descriptor.c, aeron_driver_context.c).

The C driver refuses a value that does not parse or is out of range with EINVAL, which a client sees as
GENERIC_ERROR: these raise ``ChannelParameterError``. A malformed URI stays ``InvalidChannelError``
(INVALID_CHANNEL). The codecs' ``parse_*`` helpers, which also read environment settings, keep their own words.
"""

from __future__ import annotations

import re

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import ChannelParameterError, InvalidChannelError
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_BASE_10 = re.compile(r"\s*([+-]?)([0-9]+)")
_BASE_0 = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _parsed(uri: cu.ChannelUri, name: str, parse) -> int | None:
    """``parse(name, value)`` of the parameter, or None when absent; a value it refuses is C's EINVAL."""
    value = uri.get(name)
    if value is None:
        return None
    try:
        return parse(name, value)
    except InvalidChannelError:
        raise ChannelParameterError(f"could not parse {name}={value} in URI") from None


def size_param(uri: cu.ChannelUri, name: str) -> int | None:
    """``64k``-style size, or None when absent."""
    return _parsed(uri, name, cu.parse_size)


def duration_param(uri: cu.ChannelUri, name: str) -> int | None:
    """``10ms``-style duration in ns, or None when absent."""
    return _parsed(uri, name, cu.parse_duration_ns)


def int32_param(uri: cu.ChannelUri, name: str) -> int | None:
    """A signed 32-bit integer, or None when absent."""
    value = uri.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        # C appends strerror(errno), which is "Success" for letters (strtol sets no errno): left out.
        raise ChannelParameterError(f"could not parse {name}={value} as int32_t in URI") from None
    if not _I32_MIN <= number <= _I32_MAX:
        raise ChannelParameterError(f"could not parse {name}={value} as int32_t in URI: Numerical result out of range")
    return number


def int64_text(name: str, value: str, number_text: str, base: int = 0) -> int:
    """``number_text`` (part of ``name=value``) read whole as C's strtoll does: base 10, or base 0 (decimal, 0x hex,
    0-prefixed octal); nothing may follow the digits and the value must fit a signed 64-bit integer."""
    match = (_BASE_0 if base == 0 else _BASE_10).fullmatch(number_text)
    if match is None:
        raise ChannelParameterError(f"could not parse {name}={value} as int64_t in URI")
    sign, digits = match.group(1), match.group(2)
    if digits[:2] in ("0x", "0X"):
        number = int(digits[2:], 16)
    elif base == 0 and digits.startswith("0"):
        number = int(digits, 8)
    else:
        number = int(digits)
    number = -number if sign == "-" else number
    if not -(2**63) <= number < 2**63:
        raise ChannelParameterError(f"could not parse {name}={value} as int64_t in URI due to: Numerical result out of"
                                    " range")
    return number


def bool_param(uri: cu.ChannelUri, name: str, default: bool) -> bool:
    value = uri.get(name)
    if value is None:
        return default
    if value in ("true", "false"):
        return value == "true"
    raise ChannelParameterError(f"could not parse {name}={value} as bool from URI")


def check_publication_flags(uri: cu.ChannelUri) -> None:
    """Flags Aeron reads from a publication channel and this driver does not act on (its logs are never sparse,
    it always signals end of stream): refused when they are not booleans, as the C driver refuses them."""
    for name in (cu.SPARSE_PARAM, cu.EOS_PARAM):
        bool_param(uri, name, True)


def check_subscription_flags(uri: cu.ChannelUri) -> None:
    """``reliable`` (read again at each image's SETUP), and ``sparse`` and ``rejoin``, which this driver does not act
    on: refused here when they are not booleans, as the C driver refuses them when the subscription is added."""
    for name in (cu.RELIABLE_PARAM, cu.SPARSE_PARAM, cu.REJOIN_PARAM):
        bool_param(uri, name, True)


def check_publication_window_length(window_length: int, mtu_length: int, term_length: int) -> None:
    if window_length < mtu_length:
        raise ChannelParameterError(
            f"{cu.PUBLICATION_WINDOW_PARAM}={window_length} cannot be less than the {cu.MTU_LENGTH_PARAM}={mtu_length}")
    if window_length > term_length >> 1:
        raise ChannelParameterError(f"{cu.PUBLICATION_WINDOW_PARAM}={window_length} must not exceed half the"
                                    f" {cu.TERM_LENGTH_PARAM}={term_length}")


def check_term_length(term_length: int) -> None:
    if term_length < lb.TERM_MIN_LENGTH:
        raise ChannelParameterError(
            f"term length less than min length of {lb.TERM_MIN_LENGTH}: length={term_length}")
    if term_length > lb.TERM_MAX_LENGTH:
        raise ChannelParameterError(
            f"term length greater than max length of {lb.TERM_MAX_LENGTH}: length={term_length}")
    if term_length & (term_length - 1):
        raise ChannelParameterError(f"term length not a power of 2: length={term_length}")


def check_mtu_length(mtu_length: int) -> None:
    if not frame.HEADER_LENGTH < mtu_length <= frame.MAX_UDP_PAYLOAD_LENGTH:
        raise ChannelParameterError(
            f"mtuLength must be a > HEADER_LENGTH and <= MAX_UDP_PAYLOAD_LENGTH: mtuLength={mtu_length}")
    if mtu_length % frame.FRAME_ALIGNMENT:
        raise ChannelParameterError(f"mtuLength must be a multiple of FRAME_ALIGNMENT: mtuLength={mtu_length}")
