"""Channel URI parsing (spec/transport.md §12)."""

import pytest

from aeron_numba.codecs.channel_uri import ChannelUri, parse_bool, parse_duration_ns, parse_int32, parse_size
from aeron_numba.errors import InvalidChannelError


def test_spec_examples_parse_and_print_back():
    for uri in ("aeron:ipc", "aeron:ipc?term-length=64k|alias=control",
                "aeron:udp?endpoint=localhost:20121|mtu=1408|term-length=16m",
                "aeron:udp?control=host:40456|control-mode=dynamic", "aeron-spy:aeron:udp?endpoint=x:1"):
        assert str(ChannelUri.parse(uri)) == uri
    uri = ChannelUri.parse("aeron:ipc?term-length=64k|alias=control")
    assert uri.is_ipc and uri.get("term-length") == "64k" and uri.get("alias") == "control"
    assert ChannelUri.parse("aeron-spy:aeron:udp?endpoint=x:1").is_spy


@pytest.mark.parametrize("uri, message", [
    ("ipc", "must start with 'aeron:'"),
    ("aeron:tcp", "unknown media 'tcp'"),
    ("aeron:ipc?term-length", "'term-length' must be key=value"),
    ("aeron:ipc?=5", "'=5' must be key=value"),
    ("aeron:ipc?a=", "'a=' must be key=value"),
    ("aeron:ipc?", "'' must be key=value"),
    ("aeron:ipc?a=1|a=2", "'a' given twice"),
    ("aeron:ipc?alias=" + "x" * 5000, "length=5016 > MAX_URI_LENGTH=4095"),
    # Aeron's C parser's words lead (aeron_uri.c), so a user searching for them finds ours.
    ("aeron:tcp?endpoint=x:1", "^invalid URI scheme or transport: aeron:tcp?endpoint=x:1 "),
    ("aeron:ipc?term-length|mtu=1408", "^invalid end of key: "),
    ("aeron:ipc?=5", "^empty key not allowed: "),
    ("aeron:ipc?a=|mtu=1408", "^empty value not allowed: "),
    ("aeron:ipc?alias=" + "x" * 5000, r"^URI length \(5016\) exceeds max supported length \(4095\)"),
])
def test_bad_uris_name_the_problem(uri, message):
    with pytest.raises(InvalidChannelError, match=message.replace("?", r"\?").replace("|", r"\|")):
        ChannelUri.parse(uri)


def test_value_parsers():
    assert parse_size("term-length", "64k") == 65536 and parse_size("x", "16m") == 16 << 20
    assert parse_size("x", "1g") == 1 << 30 and parse_size("x", "4096") == 4096
    assert parse_duration_ns("linger", "5s") == 5_000_000_000 and parse_duration_ns("x", "10ms") == 10_000_000
    assert parse_duration_ns("x", "100us") == 100_000 and parse_duration_ns("x", "7") == 7
    assert parse_int32("session-id", "-5") == -5 and parse_bool("tether", "false") is False
    with pytest.raises(InvalidChannelError, match=r"term-length='64q' is not a size"):
        parse_size("term-length", "64q")
    with pytest.raises(InvalidChannelError, match=r"session-id=4294967296 is outside"):
        parse_int32("session-id", str(1 << 32))
    with pytest.raises(InvalidChannelError, match="must be 'true' or 'false'"):
        parse_bool("tether", "yes")


@pytest.mark.parametrize("uri, resolved, expected", [
    ("aeron:udp?endpoint=localhost:0", "127.0.0.1:40123", "aeron:udp?endpoint=localhost:40123"),  # host kept
    ("aeron:udp?endpoint=[::1]:0|mtu=8k", "[::1]:5", "aeron:udp?endpoint=[::1]:5|mtu=8k"),
    ("aeron:udp?endpoint=localhost:7", "127.0.0.1:40123", "aeron:udp?endpoint=localhost:7"),  # not a wildcard
    ("aeron:udp?control=localhost:9", "127.0.0.1:40123", "aeron:udp?control=localhost:9|endpoint=127.0.0.1:40123"),
])
def test_an_endpoints_wildcard_port_is_replaced_by_the_resolved_one(uri, resolved, expected):
    assert str(ChannelUri.parse(uri).replace_endpoint_wildcard_port(resolved)) == expected


@pytest.mark.parametrize("resolved, message", [("127.0.0.1", "has no port"), ("127.0.0.1:0", "wildcard port 0")])
def test_a_resolved_endpoint_without_a_port_is_refused(resolved, message):
    with pytest.raises(InvalidChannelError, match=message):
        ChannelUri.parse("aeron:udp?endpoint=localhost:0").replace_endpoint_wildcard_port(resolved)


@pytest.mark.parametrize("tags, channel_tag, entity_tag", [
    ("1001", "1001", None), ("1001,2002", "1001", "2002"), ("1001,", "1001", None), (",2002", None, "2002"),
    ("1,2,3", "1", "2,3"),  # split at the first comma, as Aeron's C client splits it
])
def test_tags_split_into_the_channel_tag_and_the_publication_tag(tags, channel_tag, entity_tag):
    uri = ChannelUri.parse(f"aeron:udp?endpoint=x:1|tags={tags}")
    assert (uri.channel_tag, uri.entity_tag) == (channel_tag, entity_tag)
    assert (ChannelUri.parse("aeron:ipc").channel_tag, ChannelUri.parse("aeron:ipc").entity_tag) == (None, None)
