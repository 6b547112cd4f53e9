"""UDP channel parsing (§12, §16), flow control strategies and the loss generator the tests drive."""

from __future__ import annotations

import numpy as np
import pytest

import math
import random

from aeron_numba.driver.feedback_delay import OptimalMulticastFeedbackDelay, StaticFeedbackDelay
from aeron_numba.driver.flow_control import MaxFlowControl, MinFlowControl, UnicastFlowControl, flow_control_for
from aeron_numba.driver.loss_generator import LossControl, LossGenerator, LossSettings
from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.errors import ChannelParameterError, ConfigurationError, InvalidChannelError
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.kernels.feedback_delay import next_image_nak_delay_ns
from aeron_numba.layout import network_state as ns
from aeron_numba.layout import udp_frames as ul


@pytest.mark.parametrize("uri, bind", [
    # Unicast with no interface: the address the kernel sends from to reach the endpoint (Aeron's connected
    # socket has it), so snd-local-sockaddr shows 127.0.0.1, not 0.0.0.0.
    ("aeron:udp?endpoint=localhost:40123", ("127.0.0.1", 0)),
    ("aeron:udp?endpoint=127.0.0.1:40123|interface=127.0.0.1:40200", ("127.0.0.1", 40200)),
    ("aeron:udp?endpoint=239.255.90.1:40123|interface=127.0.0.1", ("239.255.90.2", 40123)),
    ("aeron:udp?control=127.0.0.1:40300|control-mode=dynamic", ("127.0.0.1", 40300)),
    ("aeron:udp?control-mode=manual", ("0.0.0.0", 0)),
])
def test_a_send_endpoint_binds_where_aeron_would(uri, bind):
    assert UdpChannel.parse(uri).send_bind_address() == bind


def test_unicast_endpoint_is_resolved_once_and_named_canonically():
    channel = UdpChannel.parse("aeron:udp?endpoint=localhost:40123|term-length=64k")
    assert channel.remote_data == ("127.0.0.1", 40123) and channel.local_data == ("0.0.0.0", 0)
    assert channel.canonical_form == "UDP-0.0.0.0:0-127.0.0.1:40123"
    assert not channel.is_multicast and not channel.is_multi_destination
    assert UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40123").canonical_form == channel.canonical_form
    assert str(channel) == "aeron:udp?endpoint=localhost:40123|term-length=64k"


def test_control_interface_ttl_and_multicast():
    mdc = UdpChannel.parse("aeron:udp?control=127.0.0.1:40124|control-mode=dynamic")
    assert mdc.is_multi_destination and mdc.remote_control == ("127.0.0.1", 40124) and mdc.remote_data is None
    bound = UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40125|interface=127.0.0.1")
    assert bound.local_data == ("127.0.0.1", 0)
    multicast = UdpChannel.parse("aeron:udp?endpoint=224.0.1.1:40456|ttl=4")
    assert multicast.is_multicast and multicast.ttl == 4


def test_multicast_data_group_control_group_and_interface():
    channel = UdpChannel.parse("aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1|ttl=0")
    assert channel.is_multicast and channel.has_group_semantics and not channel.is_multi_destination
    assert channel.remote_data == ("239.255.90.1", 40456)
    assert channel.remote_control == ("239.255.90.2", 40456)  # last octet + 1, same port
    assert channel.multicast_interface == "127.0.0.1" and channel.ttl == 0
    assert channel.canonical_form == "UDP-127.0.0.1:0-239.255.90.1:40456"
    assert channel.group_semantics is None  # infer
    wrapped = UdpChannel.parse("aeron:udp?endpoint=239.255.90.255:40456")
    assert wrapped.remote_control == ("239.255.90.0", 40456)  # byte arithmetic, as Aeron's
    assert wrapped.multicast_interface == "0.0.0.0"  # no interface: the kernel's choice


def test_an_interface_with_a_prefix_is_a_search_for_a_local_address():
    channel = UdpChannel.parse("aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.0/8")
    assert channel.multicast_interface == "127.0.0.1"
    assert UdpChannel.parse("aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1/32").local_data == \
        ("127.0.0.1", 0)
    unicast = UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40457|interface=127.1.2.3:0/8")
    assert unicast.local_data == ("127.0.0.1", 0)


@pytest.mark.parametrize("value, semantics", [(None, None), ("infer", None), ("true", True), ("false", False),
                                             ("maybe", False)])  # the C driver: anything else is false
def test_group_parameter(value, semantics):
    channel = "aeron:udp?endpoint=127.0.0.1:40458" + (f"|group={value}" if value else "")
    assert UdpChannel.parse(channel).group_semantics is semantics


def test_multicast_and_mdc_default_to_max_flow_control():
    for channel in ("aeron:udp?endpoint=239.255.90.1:40456", "aeron:udp?control=127.0.0.1:40459|control-mode=dynamic"):
        parsed = UdpChannel.parse(channel)
        assert type(flow_control_for(parsed.uri, multi_receiver=parsed.has_group_semantics)) is MaxFlowControl
    unicast = UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40458")
    assert not unicast.has_group_semantics


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp?endpoint=239.255.90.2:40456", "Multicast data address must be odd\nendpoint=239.255.90.2:40456: last"),
    ("aeron:udp?endpoint=224.0.1.0:40456", "last octet 0 is even"),
    ("aeron:udp?endpoint=239.255.90.1:40456|control=127.0.0.1:40457", "takes no control or control-mode"),
    ("aeron:udp?endpoint=239.255.90.1:40456|control-mode=manual", "takes no control or control-mode"),
    ("aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1/33",
     "prefixlen out of range: 33\ncould not parse interface='127.0.0.1/33'"),
    ("aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1/x", "prefixlen invalid: x\ncould not parse interface="),
    ("aeron:udp?endpoint=239.255.90.1:40456|interface=198.51.100.77/32",
     "could not find matching interface='198.51.100.77/32': no local IPv4 interface address in 198.51.100.77/32"),
])
def test_bad_multicast_channels_are_refused_naming_the_value(channel, message):
    with pytest.raises(InvalidChannelError) as raised:
        UdpChannel.parse(channel)
    assert message in str(raised.value)


def test_static_feedback_delay_is_the_unicast_nak_delay():
    delay = StaticFeedbackDelay(ul.NAK_UNICAST_DELAY_NS, ul.NAK_UNICAST_RETRY_DELAY_NS)
    assert (delay.delay_ns(), delay.retry_delay_ns()) == (100_000, 10_000_000)


def test_multicast_feedback_delay_is_a_random_backoff_below_the_max_shaped_by_the_group_size():
    max_backoff, group_size = ul.NAK_MULTICAST_MAX_BACKOFF_NS, ul.NAK_MULTICAST_GROUP_SIZE
    generator = OptimalMulticastFeedbackDelay(max_backoff, group_size, random.Random(5))
    delays = [generator.delay_ns() for _ in range(20_000)] + [generator.retry_delay_ns() for _ in range(20_000)]
    assert 0 <= min(delays) and max(delays) < max_backoff
    lam = math.log(group_size) + 1  # RFC 5401 §3.5: P(delay <= d) = (e^(lam d / T) - 1) / (e^lam - 1)
    for fraction in (0.25, 0.5, 0.75, 0.9):
        expected = math.expm1(lam * fraction) / math.expm1(lam)
        observed = sum(d <= fraction * max_backoff for d in delays) / len(delays)
        assert abs(observed - expected) < 0.015, (fraction, observed, expected)
    assert len(set(delays)) > 1_000
    one = OptimalMulticastFeedbackDelay(max_backoff, 1, random.Random(5))  # lambda = 1: still below the max
    assert all(0 <= one.delay_ns() < max_backoff for _ in range(1_000))


def test_an_image_draws_its_group_nak_delays_in_compiled_code_from_the_same_backoff_its_generator_seeded():
    """A group image's receiver work (compiled, so the network cycles can run it) draws a fresh delay for every
    scan of a gap from a generator state in its row, with the formula the Python generator uses."""
    max_backoff, group_size = ul.NAK_MULTICAST_MAX_BACKOFF_NS, ul.NAK_MULTICAST_GROUP_SIZE
    generator = OptimalMulticastFeedbackDelay(max_backoff, group_size, random.Random(5))
    row = np.zeros(ns.IMAGE_ROW_LENGTH, np.int64)
    row[ns.IMAGE_NAK_GROUP_SIZE], row[ns.IMAGE_NAK_MAX_BACKOFF_NS] = group_size, max_backoff
    row[ns.IMAGE_NAK_RANDOM_STATE] = generator.image_random_state()
    first = row.copy()
    delays = [int(next_image_nak_delay_ns(row)) for _ in range(40_000)]
    assert delays[:100] == [int(next_image_nak_delay_ns(first)) for _ in range(100)]  # its own sequence
    assert 0 <= min(delays) and max(delays) < max_backoff and len(set(delays)) > 1_000
    lam = math.log(group_size) + 1
    for fraction in (0.25, 0.5, 0.75, 0.9):
        expected = math.expm1(lam * fraction) / math.expm1(lam)
        observed = sum(d <= fraction * max_backoff for d in delays) / len(delays)
        assert abs(observed - expected) < 0.015, (fraction, observed, expected)


@pytest.mark.parametrize("max_backoff, group_size, message", [(0, 10, "nak_multicast_max_backoff_ns=0 must be > 0"),
                                                              (10, 0, "nak_multicast_group_size=0 must be >= 1")])
def test_bad_multicast_feedback_settings_are_refused(max_backoff, group_size, message):
    with pytest.raises(ConfigurationError, match=message):
        OptimalMulticastFeedbackDelay(max_backoff, group_size)


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp", "URIs for UDP must specify endpoint, control, tags, or control-mode=manual/response"),
    ("aeron:udp?endpoint=localhost", "port invalid: \nUnresolved - endpoint=localhost,"),
    ("aeron:udp?endpoint=localhost:70000", "port out of range: 70000\nUnresolved - endpoint=localhost:70000"),
    ("aeron:udp?endpoint=:4000", "Unable to resolve host=(): (-2)"),
    ("aeron:udp?endpoint=no-such-host.invalid:4000", "Unable to resolve host=(no-such-host.invalid)"),
    ("aeron:udp?endpoint=localhost:4000|control-mode=sideways", "control-mode='sideways'"),
    ("aeron:udp?endpoint=localhost:4000|control-mode=dynamic", "explicit control expected with dynamic control mode"),
    ("aeron:ipc", "UDP channels must use UDP URIs"),
])
def test_bad_channels_are_refused_naming_the_value(channel, message):
    with pytest.raises(InvalidChannelError, match=None) as raised:
        UdpChannel.parse(channel)
    assert message in str(raised.value)


def test_unicast_flow_control_follows_its_receiver_and_never_goes_back():
    fc = UnicastFlowControl()
    assert fc.initial_limit(4096) == 4096  # nothing may be sent before a status message
    assert fc.on_status_message(10_000, 1, 4096, 0) == 10_000
    assert fc.on_status_message(8_000, 1, 10_000, 1) == 10_000


def test_min_follows_the_slowest_receiver_until_it_times_out_and_max_the_fastest():
    fc = MinFlowControl(receiver_timeout_ns=5)
    assert fc.on_status_message(100, 1, 0, 0) == 100
    assert fc.on_status_message(300, 2, 100, 1) == 100
    assert fc.on_idle(6, 100) == 300  # receiver 1 silent for more than 5 ns: dropped
    fast = MaxFlowControl()
    fast.on_status_message(100, 1, 0, 0)
    assert fast.on_status_message(300, 2, 100, 0) == 300


@pytest.mark.parametrize("spec, kind", [(None, UnicastFlowControl), ("min", MinFlowControl), ("max", MaxFlowControl),
                                        ("min,t:2s", MinFlowControl)])
def test_flow_control_from_the_channel(spec, kind):
    channel = "aeron:udp?endpoint=localhost:4000" + (f"|fc={spec}" if spec else "")
    fc = flow_control_for(UdpChannel.parse(channel).uri, multi_receiver=False)
    assert type(fc) is kind
    if spec == "min,t:2s":
        assert fc.receiver_timeout_ns == 2_000_000_000


@pytest.mark.parametrize("spec, message", [
    ("tagged,g:1", "fc=tagged,g:1: tagged flow control is not supported by this driver"),
    ("min,g:1/2", "Flow control options - group options are not supported by this driver, field: g:1/2"),
    ("min,x:1", "Flow control options - unrecognised option, field: x:1, options: min,x:1"),
    ("min,t:" + "9" * 64, "Flow control options - number field too long (found 64, max 63), field: 999"),
    ("fast", "Invalid flow control strategy name: fast from URI: aeron:udp?endpoint=localhost:4000|fc=fast"),
])
def test_unsupported_flow_control_is_refused(spec, message):
    with pytest.raises(ChannelParameterError) as raised:
        flow_control_for(UdpChannel.parse(f"aeron:udp?endpoint=localhost:4000|fc={spec}").uri, multi_receiver=False)
    assert str(raised.value).startswith(message)


def test_max_flow_control_reads_no_options_as_in_the_c_driver():
    channel = UdpChannel.parse("aeron:udp?endpoint=239.255.90.1:40456|fc=max,t:soon,x:1")
    assert type(flow_control_for(channel.uri, multi_receiver=True)) is MaxFlowControl


@pytest.mark.parametrize("value, ttl", [("0", 0), ("4", 4), ("255", 255), ("300", 255), ("-1", 255), ("-0", 0),
                                        ("many", 0), ("12hops", 12), ("0x10", 16), ("010", 8), (" 7", 7)])
def test_ttl_is_read_as_the_c_driver_reads_it(value, ttl):
    """strtoull with base 0, clamped to 255: never refused."""
    assert UdpChannel.parse(f"aeron:udp?endpoint=239.255.90.1:40456|ttl={value}").ttl == ttl


def _data_frame(term_id: int, term_offset: int) -> np.ndarray:
    buf = np.zeros(64, np.uint8)
    uf.encode_heartbeat(buf, 0, term_offset, 1, 2, term_id, False)
    buf[0:4].view(np.int32)[0] = 64
    return buf


def test_loss_control_round_trip_and_a_writer_mid_update_is_not_read(shm_dir):
    control = LossControl.create(shm_dir)
    assert control.read()[1] == LossSettings()
    settings = LossSettings(receive_data_rate=0.25, send_control_rate=0.5, seed=7, gap_term_id=3, gap_term_offset=64,
                            gap_length=128, blocked_ports=(4000, 4001), blocked_hosts=("127.0.0.2", "10.1.2.3"))
    control.write(settings)
    version, read = control.read()
    assert read == settings and version == 2
    control.buffer[0:8].view(np.int64)[0] = 3  # a writer is between its two version stores
    assert control.read() is None
    control.close()


@pytest.mark.parametrize("bad", [dict(receive_data_rate=1.5), dict(gap_length=-1), dict(blocked_ports=(0,)),
                                 dict(blocked_ports=tuple(range(1, 18))), dict(blocked_hosts=("localhost",)),
                                 dict(blocked_hosts=tuple(f"127.0.0.{n}" for n in range(1, 18)))])
def test_bad_loss_settings_are_refused(bad):
    with pytest.raises(ConfigurationError):
        LossSettings(**bad).check()


def test_a_writer_learns_when_the_driver_has_taken_its_settings(shm_dir):
    control = LossControl.create(shm_dir)
    generators = [LossGenerator(), LossGenerator()]  # two endpoints' generators of one driver
    version = control.write(LossSettings(blocked_ports=(4000,)))
    assert control.taken_version() < version  # written, not in force yet
    generators[0].update(control)
    assert control.taken_version() == version
    generators[1].update(control)
    assert control.taken_version() == version and generators[1].settings.blocked_ports == (4000,)
    control.close()


def test_loss_generator_drops_its_share_the_gap_once_and_everything_from_a_blocked_port(shm_dir):
    control = LossControl.create(shm_dir)
    generator = LossGenerator()
    control.write(LossSettings(receive_data_rate=0.2, seed=11))
    generator.update(control)
    data = _data_frame(5, 0)
    drops = sum(generator.should_drop_receive(data, 64, 4000, 5000) for _ in range(10_000))
    assert 1_700 < drops < 2_300
    control.write(LossSettings(gap_term_id=5, gap_term_offset=64, gap_length=64))
    generator.update(control)
    in_gap = _data_frame(5, 64)
    assert generator.should_drop_receive(in_gap, 64, 4000, 5000)
    assert not generator.should_drop_receive(in_gap, 64, 4000, 5000)  # the retransmit passes
    assert not generator.should_drop_receive(_data_frame(5, 128), 64, 4000, 5000)
    assert not generator.should_drop_receive(_data_frame(6, 64), 64, 4000, 5000)
    # a gap shorter than the datagram carrying it, which begins before it (as Aeron's FixedLossGenerator drops)
    control.write(LossSettings(gap_term_id=5, gap_term_offset=96, gap_length=32))
    generator.update(control)
    carrying = np.concatenate([_data_frame(5, 64), _data_frame(5, 128)])  # two frames, [64, 192)
    assert generator.should_drop_receive(carrying, 128, 4000, 5000)
    assert not generator.should_drop_receive(carrying, 128, 4000, 5000)  # the retransmit passes
    before = np.concatenate([_data_frame(5, 0), _data_frame(5, 64)[:32]])  # [0, 96): ends where the gap begins
    assert not generator.should_drop_receive(before, 96, 4000, 5000)
    control.write(LossSettings(blocked_ports=(4000,)))
    generator.update(control)
    assert generator.should_drop_receive(data, 64, 4000, 5000)
    assert generator.should_drop_send(data, 64, 4000, 5000)
    assert not generator.should_drop_send(data, 64, 4001, 5000)
    control.close()


def test_a_blocked_host_gets_nothing_sent_to_it_on_any_port_and_a_heal_lets_it_through(shm_dir):
    control = LossControl.create(shm_dir)
    generator = LossGenerator()
    control.write(LossSettings(blocked_hosts=("127.0.0.2",)))
    generator.update(control)
    data = _data_frame(5, 0)
    assert all(generator.should_drop_send(data, 64, port, 5000, "127.0.0.2") for port in (4000, 40000, 61000))
    assert not generator.should_drop_send(data, 64, 4000, 5000, "127.0.0.3")
    # receives are not judged by their source address (on loopback it is often 127.0.0.1, whoever sent it)
    assert not generator.should_drop_receive(data, 64, 4000, 5000)
    control.write(LossSettings())
    generator.update(control)
    assert not generator.should_drop_send(data, 64, 4000, 5000, "127.0.0.2")
    control.close()



def test_manual_multi_destination_cast_needs_no_address_of_its_own():
    channel = UdpChannel.parse("aeron:udp?control-mode=manual")
    assert channel.is_multi_destination and channel.is_manual_destination_control and channel.remote_data is None
    assert channel.canonical_form == "UDP-0.0.0.0:0-manual"
    assert not UdpChannel.parse("aeron:udp?control-mode=dynamic|control=127.0.0.1:40123").is_manual_destination_control
    with pytest.raises(InvalidChannelError, match="explicit control expected with dynamic control mode"):
        UdpChannel.parse("aeron:udp?control-mode=dynamic")  # dynamic needs the control address receivers reach


# ------------------------------------------------------------------------------------------- channel tags
def test_tags_name_a_channel_that_has_no_address_of_its_own():
    """``tags=<channel tag>[,<publication tag>]``: the channel tag alone is enough for a UDP channel (C's rule:
    endpoint, control, tags or control-mode=manual), and such a channel's canonical form carries ``#<tag>``, as C's
    does."""
    tagged = UdpChannel.parse("aeron:udp?tags=1001")
    assert tagged.tag == 1001 and tagged.remote_data is None and not tagged.has_explicit_endpoint
    assert tagged.canonical_form == "UDP-0.0.0.0:0-0.0.0.0:0#1001"
    assert UdpChannel.parse("aeron:udp?tags=1001,2002").tag == 1001
    # A wildcard port is no address of its own either; a fixed one is, and keeps the untagged canonical form.
    assert UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:0|tags=7").canonical_form == "UDP-0.0.0.0:0-127.0.0.1:0#7"
    assert UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40123|tags=7").canonical_form == \
        UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40123").canonical_form == "UDP-0.0.0.0:0-127.0.0.1:40123"
    assert UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40123").tag is None
    assert UdpChannel.parse("aeron:udp?control-mode=manual|tags=9").canonical_form == "UDP-0.0.0.0:0-0.0.0.0:0#9"


@pytest.mark.parametrize("tags, tag", [("12", 12), ("12abc", 12), (" 3", 3), ("0", 0), ("5,", 5)])
def test_a_channel_tag_is_read_as_c_reads_it(tags, tag):
    """C reads the tag with strtoul(base 10): leading digits, the rest ignored."""
    assert UdpChannel.parse(f"aeron:udp?endpoint=127.0.0.1:40123|tags={tags}").tag == tag


@pytest.mark.parametrize("tags", ["abc", "-1", "99999999999999999999", ",5"])
def test_a_channel_tag_that_does_not_parse_is_an_invalid_channel(tags):
    channel = f"aeron:udp?endpoint=127.0.0.1:40123|tags={tags}"
    if tags == ",5":  # an empty channel tag is no tag (C splits at the comma): the channel needs no tag then
        assert UdpChannel.parse(channel).tag is None
        return
    with pytest.raises(InvalidChannelError, match=f"^could not parse channel tag string: {tags}$") as refused:
        UdpChannel.parse(channel)
    assert not isinstance(refused.value, ChannelParameterError)  # INVALID_CHANNEL, as C's


@pytest.mark.parametrize("channel, matches", [
    ("aeron:udp?tags=1001", True),  # the tag alone: whatever the endpoint's addresses
    ("aeron:udp?endpoint=127.0.0.1:40123|tags=1001", True),  # the tag and the endpoint's own address
    ("aeron:udp?tags=1002", False),
    ("aeron:udp?endpoint=127.0.0.1:40123", False),  # no tag: a match by canonical form only
    ("aeron:udp?endpoint=127.0.0.1:40124|tags=1001", "mismatched endpoint or control"),
    ("aeron:udp?tags=1001|interface=127.0.0.1", "mismatched endpoint or control"),
    ("aeron:udp?tags=1001|control-mode=manual", "mismatched control-mode"),
])
def test_a_tagged_channel_matches_the_endpoint_channel_of_its_tag_or_is_refused(channel, matches):
    endpoint_channel = UdpChannel.parse("aeron:udp?endpoint=127.0.0.1:40123|tags=1001")
    if isinstance(matches, bool):
        assert UdpChannel.parse(channel).matches_tag(endpoint_channel) is matches
        return
    with pytest.raises(ChannelParameterError, match=f"^matching tag 1001 has {matches}: "):
        UdpChannel.parse(channel).matches_tag(endpoint_channel)
