"""UDP channel parsing (§12, §16), flow control strategies and the loss generator the tests drive."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.driver.flow_control import MaxFlowControl, MinFlowControl, UnicastFlowControl, flow_control_for
from aeron_numba.driver.loss_generator import LossControl, LossGenerator, LossSettings
from aeron_numba.driver.udp_channel import UdpChannel
from aeron_numba.errors import ConfigurationError, InvalidChannelError
from aeron_numba.kernels import udp_frames as uf
from aeron_numba.layout import frame


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


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp", "needs endpoint=host:port"),
    ("aeron:udp?endpoint=localhost", "must be host:port"),
    ("aeron:udp?endpoint=localhost:70000", "port '70000' must be in [0, 65535]"),
    ("aeron:udp?endpoint=:4000", "has no host"),
    ("aeron:udp?endpoint=no-such-host.invalid:4000", "could not be resolved"),
    ("aeron:udp?endpoint=localhost:4000|control-mode=sideways", "control-mode='sideways'"),
    ("aeron:udp?endpoint=localhost:4000|ttl=300", "ttl=300 must be in [0, 255]"),
    ("aeron:ipc", "is not aeron:udp"),
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


@pytest.mark.parametrize("spec", ["tagged,g:1", "min,x:1", "fast"])
def test_unsupported_flow_control_is_refused(spec):
    with pytest.raises(InvalidChannelError, match="fc="):
        flow_control_for(UdpChannel.parse(f"aeron:udp?endpoint=localhost:4000|fc={spec}").uri, multi_receiver=False)


def _data_frame(term_id: int, term_offset: int) -> np.ndarray:
    buf = np.zeros(64, np.uint8)
    uf.encode_heartbeat(buf, 0, term_offset, 1, 2, term_id, False)
    buf[0:4].view(np.int32)[0] = 64
    return buf


def test_loss_control_round_trip_and_a_writer_mid_update_is_not_read(shm_dir):
    control = LossControl.create(shm_dir)
    assert control.read()[1] == LossSettings()
    settings = LossSettings(receive_data_rate=0.25, send_control_rate=0.5, seed=7, gap_term_id=3, gap_term_offset=64,
                            gap_length=128, blocked_ports=(4000, 4001))
    control.write(settings)
    version, read = control.read()
    assert read == settings and version == 2
    control.buffer[0:8].view(np.int64)[0] = 3  # a writer is between its two version stores
    assert control.read() is None
    control.close()


@pytest.mark.parametrize("bad", [dict(receive_data_rate=1.5), dict(gap_length=-1), dict(blocked_ports=(0,)),
                                 dict(blocked_ports=tuple(range(1, 18)))])
def test_bad_loss_settings_are_refused(bad):
    with pytest.raises(ConfigurationError):
        LossSettings(**bad).check()


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
    control.write(LossSettings(blocked_ports=(4000,)))
    generator.update(control)
    assert generator.should_drop_receive(data, 64, 4000, 5000)
    assert generator.should_drop_send(data, 64, 4000, 5000)
    assert not generator.should_drop_send(data, 64, 4001, 5000)
    control.close()

