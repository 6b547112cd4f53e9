"""The channels the archive derives from a client's: a recording's stripped channel, the channel it subscribes
with, and a replay's channel."""

from __future__ import annotations

from types import SimpleNamespace

from aeron_numba.archive.recording_channels import recording_subscription_channel, replay_channel, strip_channel
from aeron_numba.layout import archive as A

LOCAL, REMOTE = A.SOURCE_LOCATIONS["LOCAL"], A.SOURCE_LOCATIONS["REMOTE"]


def test_strip_channel_keeps_what_names_the_stream_in_its_order():
    assert strip_channel("aeron:ipc?term-length=64k|alias=a|mtu=8k|tags=1,2") == "aeron:ipc?alias=a|tags=1,2"
    assert strip_channel("aeron:udp?mtu=1408|endpoint=localhost:4000|linger=0|session-id=5|interface=lo") == \
        "aeron:udp?endpoint=localhost:4000|session-id=5|interface=lo"
    assert strip_channel("aeron:ipc") == "aeron:ipc"
    assert strip_channel("aeron-spy:aeron:udp?endpoint=localhost:4000|term-length=64k") == \
        "aeron-spy:aeron:udp?endpoint=localhost:4000"


def test_a_local_udp_stream_is_recorded_through_a_spy_on_its_stripped_channel_as_aerons_archive_does():
    channel = "aeron:udp?endpoint=localhost:4000|term-length=64k|session-id=5|linger=0"
    assert recording_subscription_channel(channel, LOCAL) == "aeron-spy:aeron:udp?endpoint=localhost:4000|session-id=5"
    assert recording_subscription_channel(channel, REMOTE) == channel  # a network receiver, as before
    assert recording_subscription_channel("aeron:ipc?term-length=64k", LOCAL) == "aeron:ipc?term-length=64k"
    spy = "aeron-spy:aeron:udp?endpoint=localhost:4000"
    assert recording_subscription_channel(spy, LOCAL) == spy  # already a spy: not prefixed twice


def test_replay_channel_positions_the_replay_like_the_recording():
    d = SimpleNamespace(term_buffer_length=64 * 1024, initial_term_id=7, mtu_length=1408)
    position = 3 * 64 * 1024 + 4096
    channel = replay_channel("aeron:udp?endpoint=localhost:5000|term-length=1m|mtu=8k|init-term-id=1", d, position)
    assert channel == ("aeron:udp?endpoint=localhost:5000|init-term-id=7|term-id=10|term-offset=4096|"
                       "term-length=65536|mtu=1408")
    assert replay_channel("aeron:ipc", d, 0) == \
        "aeron:ipc?init-term-id=7|term-id=7|term-offset=0|term-length=65536|mtu=1408"
