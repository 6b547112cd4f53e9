"""The driver conductor's decisions called directly, with plain values and a recording proxy: no command bytes, no
broadcast buffer (DESIGN.md: a conductor never touches bytes; a unit test drives it through its on_* methods)."""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest

from aeron_numba.driver.command_errors import ControlProtocolError, error_code_of
from aeron_numba.driver.network_conductor import ChannelEndpointError
from aeron_numba.errors import ChannelParameterError
from aeron_numba.kernels import counters as ck
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import log_buffer_descriptor as lb
from tests.unit.driver.test_driver_udp import free_udp_port
from tests.unit.driver_support import Harness

CLIENT_ID = 7


class RecordingProxy:
    """Stands in for ClientProxy: every response the conductor sends, as (method name, arguments)."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)

        def record(*args, **kwargs):
            self.calls.append((name, {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}))

        return record

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def harness(shm_dir):
    harness = Harness(shm_dir / "aeron")
    harness.conductor.client_proxy = RecordingProxy()
    harness.conductor.on_client_command(CLIENT_ID)
    yield harness
    harness.close()


@pytest.fixture
def conductor(harness):
    return harness.conductor


def test_a_publication_then_a_subscription_on_its_stream_link_an_image(conductor):
    proxy = conductor.client_proxy
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=1001, channel="aeron:ipc")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=101, registration_correlation_id=-1,
                                  stream_id=1001, channel="aeron:ipc")
    assert proxy.names() == ["on_publication_ready", "on_subscription_ready", "on_available_image"]
    ready, subscribed, image = (args for _, args in proxy.calls)
    assert (ready["correlation_id"], ready["registration_id"], ready["stream_id"], ready["is_exclusive"]) == \
        (100, 100, 1001, False)
    assert ready["log_file_name"].endswith("publications/100.logbuffer")
    assert subscribed == {"arg0": 101, "arg1": -1}  # no channel status indicator for IPC
    assert (image["correlation_id"], image["subscription_registration_id"], image["session_id"]) == \
        (100, 101, ready["session_id"])
    assert image["source_identity"] == "aeron:ipc"


def test_a_second_shared_publication_on_the_stream_reuses_the_log(conductor):
    proxy = conductor.client_proxy
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=5, channel="aeron:ipc")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=102, stream_id=5, channel="aeron:ipc")
    first, second = (args for _, args in proxy.calls)
    assert (second["correlation_id"], second["registration_id"]) == (102, 100)
    assert second["log_file_name"] == first["log_file_name"]
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=103, stream_id=5, channel="aeron:ipc")
    _, exclusive = proxy.calls[-1]
    assert exclusive["is_exclusive"] and exclusive["registration_id"] == 103
    assert exclusive["log_file_name"] != first["log_file_name"]


def _images(proxy) -> list[tuple[int, int]]:
    """(subscription registration id, publication registration id) of every available image sent."""
    return [(args["subscription_registration_id"], args["correlation_id"])
            for name, args in proxy.calls if name == "on_available_image"]


@pytest.mark.parametrize("publication_first", [True, False])
def test_an_ipc_publication_links_only_to_ipc_subscriptions_on_its_stream(conductor, publication_first):
    """As Aeron: a UDP subscription on the same stream id gets no IPC image (it listens on a socket)."""
    def publish():
        conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10, channel="aeron:ipc")

    if publication_first:
        publish()
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=101, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron:udp?endpoint=127.0.0.1:0")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=102, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron:ipc")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=103, registration_correlation_id=-1,
                                  stream_id=11, channel="aeron:ipc")
    if not publication_first:
        publish()
    assert _images(conductor.client_proxy) == [(102, 100)]
    (publication,) = conductor.publications
    assert [s.subscription.registration_id for s in publication.subscribers] == [102]


@pytest.mark.parametrize("subscription_first", [True, False])
def test_session_id_on_an_ipc_subscription_channel_filters_its_images(conductor, subscription_first):
    def subscribe():
        conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=200, registration_correlation_id=-1,
                                      stream_id=10, channel="aeron:ipc?session-id=77")
        conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=201, registration_correlation_id=-1,
                                      stream_id=10, channel="aeron:ipc")

    if subscription_first:
        subscribe()
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                           channel="aeron:ipc?session-id=76")
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=10,
                                           channel="aeron:ipc?session-id=77")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=102, stream_id=10, channel="aeron:ipc")
    if not subscription_first:
        subscribe()
    assert sorted(_images(conductor.client_proxy)) == [(200, 101), (201, 100), (201, 101), (201, 102)]


def test_a_bad_session_id_on_a_subscription_channel_is_refused(conductor):
    with pytest.raises(ChannelParameterError, match="^could not parse session-id=x7 as int32_t in URI$"):
        conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=200, registration_correlation_id=-1,
                                      stream_id=10, channel="aeron:ipc?session-id=x7")
    assert conductor.subscriptions == []


@pytest.mark.parametrize("decision, error_code", [
    ("on_remove_publication", cp.UNKNOWN_PUBLICATION),
    ("on_remove_subscription", cp.UNKNOWN_SUBSCRIPTION),
    ("on_remove_counter", cp.UNKNOWN_COUNTER),
])
def test_removing_what_the_client_never_added_is_refused_with_aeron_s_code(conductor, decision, error_code):
    with pytest.raises(ControlProtocolError, match=f"client_id={CLIENT_ID} registration_id=555") as refused:
        getattr(conductor, decision)(client_id=CLIENT_ID, correlation_id=200, registration_id=555)
    assert refused.value.error_code == error_code
    assert conductor.client_proxy.calls == []  # the adapter answers a refusal, not the conductor


def test_a_counter_is_added_then_removed(harness, conductor):
    proxy = conductor.client_proxy
    conductor.on_add_counter(client_id=CLIENT_ID, correlation_id=300, type_id=1101, key=b"k", label="orders")
    (_, ready), = proxy.calls
    counter_id = ready["arg1"]
    assert ready["arg0"] == 300 and harness.reader.get_counter_label(counter_id) == "orders"
    conductor.on_remove_counter(client_id=CLIENT_ID, correlation_id=301, registration_id=300)
    assert proxy.names()[1:] == ["on_operation_succeeded", "on_unavailable_counter"]
    assert [args for _, args in proxy.calls[1:]] == [{"arg0": 301}, {"arg0": 300, "arg1": counter_id}]


def test_terminate_driver_is_refused_unless_the_validator_allows_it(conductor):
    with pytest.raises(ControlProtocolError, match="terminate driver refused") as refused:
        conductor.on_terminate_driver(client_id=CLIENT_ID, correlation_id=400, token=b"")
    assert refused.value.error_code == cp.GENERIC_ERROR and not conductor.terminate_requested


# ------------------------------------------------------------------------------------------- channel tags
def _ready(proxy, correlation_id: int) -> dict:
    (args,) = [a for name, a in proxy.calls if name == "on_publication_ready" and a["correlation_id"] == correlation_id]
    return args


def _subscribed(proxy, correlation_id: int) -> dict:
    (args,) = [a for name, a in proxy.calls if name == "on_subscription_ready" and a["arg0"] == correlation_id]
    return args


def test_a_publication_tagged_channel_reuses_the_send_endpoint_of_the_channel_that_carried_the_tag(conductor):
    """``aeron:udp?tags=1001`` names no address: it is the endpoint of ``endpoint=...|tags=1001`` (C driver's
    findExistingSendChannelEndpoint), for another stream a new publication there, for the same one the same."""
    port = free_udp_port()
    proxy = conductor.client_proxy
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=11, channel="aeron:udp?tags=1001")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=102, stream_id=10, channel="aeron:udp?tags=1001")
    network = conductor.network
    (endpoint,) = network.send_endpoints.values()
    assert [p.stream_id for p in network.publications] == [10, 11]
    assert all(p.endpoint is endpoint for p in network.publications)
    first, other_stream, same_stream = (_ready(proxy, i) for i in (100, 101, 102))
    assert first["channel_status_indicator_id"] == other_stream["channel_status_indicator_id"] == \
        endpoint.status_counter_id
    assert other_stream["registration_id"] == 101 and same_stream["registration_id"] == 100
    # The tagged publication sends where the endpoint sends, and its counters name its own channel.
    assert network.publications[1].channel.remote_data == ("127.0.0.1", port)
    labels = [c.label for c in ck.CountersReader(conductor.counters.metadata_buffer,
                                                  conductor.counters.values_buffer).counters()]
    assert any(label.startswith("snd-pos: 101 ") and "aeron:udp?tags=1001" in label for label in labels)


def test_an_untagged_channel_of_the_same_address_shares_a_tagged_endpoint_and_another_tag_does_not(harness,
                                                                                                  conductor):
    port = free_udp_port()
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=11,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=102, stream_id=12,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=103, stream_id=13,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1002")
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=104, stream_id=14, channel="aeron:udp?tags=1002")
    tagged_1001, tagged_1002 = conductor.network.send_endpoints.values()
    assert [p.endpoint for p in conductor.network.publications] == [tagged_1001] * 3 + [tagged_1002] * 2
    conductor.on_remove_publication(client_id=CLIENT_ID, correlation_id=105, registration_id=103)
    conductor.on_remove_publication(client_id=CLIENT_ID, correlation_id=106, registration_id=104)
    harness.advance(1_000)
    assert list(conductor.network.send_endpoints.values()) == [tagged_1001]


@pytest.mark.parametrize("channel, message", [
    # A tag no endpoint carries, on a channel with no address of its own: the C driver's EINVAL.
    ("aeron:udp?tags=1002",
     "^URI must have explicit control, endpoint, or be manual control-mode when original: channel=aeron:udp"
     r"\?tags=1002$"),
    # The tag names the endpoint, the rest of the channel contradicts it.
    ("aeron:udp?endpoint=127.0.0.1:{other}|tags=1001",
     r"^matching tag 1001 has mismatched endpoint or control: aeron:udp\?endpoint=127.0.0.1:{other}\|tags=1001 <> "
     r"aeron:udp\?endpoint=127.0.0.1:{port}\|tags=1001$"),
    ("aeron:udp?tags=1001|control-mode=manual",
     r"^matching tag 1001 has mismatched control-mode: aeron:udp\?tags=1001\|control-mode=manual <> "
     r"aeron:udp\?endpoint=127.0.0.1:{port}\|tags=1001$"),
])
def test_a_publication_tag_that_names_no_endpoint_or_contradicts_it_is_refused_as_c_refuses_it(
        conductor, channel, message):
    port, other = free_udp_port(), free_udp_port()
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                 channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001")
    with pytest.raises(ChannelParameterError, match=message.format(port=port, other=other)) as refused:
        conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=11,
                                     channel=channel.format(port=port, other=other))
    assert error_code_of(refused.value) == cp.GENERIC_ERROR
    assert len(conductor.network.publications) == 1 and len(conductor.network.send_endpoints) == 1


def test_a_subscription_tagged_channel_joins_the_receive_endpoint_that_carried_the_tag(conductor):
    proxy = conductor.client_proxy
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=200, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron:udp?endpoint=127.0.0.1:0|tags=2001")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=201, registration_correlation_id=-1,
                                  stream_id=11, channel="aeron:udp?tags=2001")
    (endpoint,) = conductor.network.receive_endpoints.values()
    assert _subscribed(proxy, 200)["arg1"] == _subscribed(proxy, 201)["arg1"] == endpoint.status_counter_id
    assert sorted(endpoint.stream_refs) == [10, 11]
    port = endpoint.local_address[1]
    with pytest.raises(ChannelParameterError, match="^matching tag 2001 has mismatched endpoint or control: "):
        conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=202, registration_correlation_id=-1,
                                      stream_id=12, channel=f"aeron:udp?endpoint=127.0.0.1:{port + 1}|tags=2001")
    # A tag no receive endpoint carries makes an endpoint of its own on the wildcard address, as the C driver does.
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=203, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron:udp?tags=2002")
    assert endpoint.channel.canonical_form == "UDP-0.0.0.0:0-127.0.0.1:0#2001"
    assert sorted(conductor.network.receive_endpoints) == ["UDP-0.0.0.0:0-0.0.0.0:0#2002",
                                                           "UDP-0.0.0.0:0-127.0.0.1:0#2001"]
    assert [s.registration_id for s in conductor.subscriptions] == [200, 201, 203]


def test_session_id_tag_takes_the_session_and_log_shape_of_the_tagged_network_publication(conductor):
    port, other = free_udp_port(), free_udp_port()
    proxy = conductor.client_proxy
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                           channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001,42"
                                                   "|term-length=128k|mtu=4096")
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=10,
                                           channel=f"aeron:udp?endpoint=127.0.0.1:{other}|session-id=tag:42")
    tagged, follower = conductor.network.publications
    assert _ready(proxy, 101)["session_id"] == _ready(proxy, 100)["session_id"] == tagged.session_id
    assert (follower.term_length, follower.mtu) == (128 * 1024, 4096)
    assert (tagged.tag, follower.tag) == (42, None)
    # The publication tag is in the log's metadata, where the C driver writes it (-1: none).
    assert [_entity_tag(p.log) for p in (tagged, follower)] == [42, lb.INVALID_TAG]


def test_session_id_tag_on_the_tagged_endpoint_and_stream_is_refused_as_already_in_use(conductor):
    """The same session and stream twice on one endpoint could not be told apart: C's refusal. On another stream of
    the endpoint the tagged session is free."""
    port = free_udp_port()
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                           channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001,42")
    with pytest.raises(ChannelParameterError, match=r"^Specified session-id is already in exclusive use for channel="
                                                    r"aeron:udp\?tags=1001\|session-id=tag:42 stream-id=10$"):
        conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=101, stream_id=10,
                                               channel="aeron:udp?tags=1001|session-id=tag:42")
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=102, stream_id=11,
                                           channel="aeron:udp?tags=1001|session-id=tag:42")
    tagged, other_stream = conductor.network.publications
    assert other_stream.session_id == tagged.session_id and other_stream.endpoint is tagged.endpoint


def _entity_tag(log) -> int:
    meta = lb.metadata_offset(log.buffer.size)
    return int(log.buffer[meta + lb.LOG_ENTITY_TAG_OFFSET:meta + lb.LOG_ENTITY_TAG_OFFSET + 8].view(np.int64)[0])


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp?endpoint=127.0.0.1:{port}|session-id=tag:43",
     "^session-id=tag:43 must reference a network publication$"),
    ("aeron:udp?endpoint=127.0.0.1:{port}|session-id=tag:x", "^could not parse session-id=tag:x as int64_t in URI$"),
    ("aeron:udp?endpoint=127.0.0.1:{port}|tags=1,4x", "^Entity tag invalid: 4x$"),
    ("aeron:ipc?tags=1,", None),  # an empty publication tag is no tag, as C splits it
])
def test_publication_tags_that_name_nothing_or_do_not_parse_are_refused_as_c_refuses_them(conductor, channel,
                                                                                          message):
    channel = channel.format(port=free_udp_port())
    if message is None:
        conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10, channel=channel)
        assert _entity_tag(conductor.publications[0].log) == lb.INVALID_TAG
        return
    with pytest.raises(ChannelParameterError, match=message) as refused:
        conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10, channel=channel)
    assert error_code_of(refused.value) == cp.GENERIC_ERROR
    assert conductor.network.publications == [] and conductor.network.send_endpoints == {}


def test_a_spy_on_the_channel_tag_sees_every_session_at_the_tagged_endpoint(conductor):
    """The C driver's spy match: the same channel tag matches whatever the spy's session-id says."""
    port = free_udp_port()
    conductor.on_add_exclusive_publication(client_id=CLIENT_ID, correlation_id=100, stream_id=10,
                                           channel=f"aeron:udp?endpoint=127.0.0.1:{port}|tags=1001|session-id=5")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=200, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron-spy:aeron:udp?tags=1001|session-id=6")
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=201, registration_correlation_id=-1,
                                  stream_id=10, channel="aeron-spy:aeron:udp?tags=1002")
    assert _images(conductor.client_proxy) == [(200, 100)]


def _mds_subscription(conductor, correlation_id: int = 500, channel: str = "aeron:udp?control-mode=manual") -> None:
    conductor.on_add_subscription(client_id=CLIENT_ID, correlation_id=correlation_id, registration_correlation_id=-1,
                                  stream_id=10, channel=channel)


def test_a_receive_destination_is_added_to_and_removed_from_an_mds_subscription(conductor):
    _mds_subscription(conductor)
    proxy = conductor.client_proxy
    conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=501, registration_correlation_id=500,
                                     channel="aeron:udp?endpoint=127.0.0.1:0")
    (endpoint,) = conductor.network.receive_endpoints.values()
    (destination,) = endpoint.destinations
    assert destination.local_address[0] == "127.0.0.1" and destination.local_address[1] > 0
    conductor.on_remove_rcv_destination(client_id=CLIENT_ID, correlation_id=502, registration_correlation_id=500,
                                        channel="aeron:udp?endpoint=127.0.0.1:0")
    assert endpoint.destinations == [] and destination.transport.closed
    # Removing one that is not there is answered OK, as Aeron's drivers answer it.
    conductor.on_remove_rcv_destination(client_id=CLIENT_ID, correlation_id=503, registration_correlation_id=500,
                                        channel="aeron:udp?endpoint=127.0.0.1:9")
    assert proxy.calls[1:] == [("on_operation_succeeded", {"arg0": 501}), ("on_operation_succeeded", {"arg0": 502}),
                               ("on_operation_succeeded", {"arg0": 503})]


@pytest.mark.parametrize("decision", ["on_add_rcv_destination", "on_remove_rcv_destination"])
@pytest.mark.parametrize("subscription_channel", [None, "aeron:ipc"])
def test_a_receive_destination_for_an_unknown_subscription_is_refused(conductor, decision, subscription_channel):
    if subscription_channel is not None:  # an IPC subscription is not one a destination can be added to
        _mds_subscription(conductor, 555, subscription_channel)
    with pytest.raises(ControlProtocolError, match=f"^unknown subscription client_id={CLIENT_ID} registration_id=555$") \
            as refused:
        getattr(conductor, decision)(client_id=CLIENT_ID, correlation_id=200, registration_correlation_id=555,
                                     channel="aeron:udp?endpoint=127.0.0.1:0")
    assert refused.value.error_code == cp.UNKNOWN_SUBSCRIPTION


@pytest.mark.parametrize("decision", ["on_add_rcv_destination", "on_remove_rcv_destination"])
def test_a_receive_destination_for_a_subscription_without_manual_control_is_refused(conductor, decision):
    _mds_subscription(conductor, channel="aeron:udp?endpoint=127.0.0.1:0")
    with pytest.raises(ControlProtocolError, match="^channel does not allow manual control$") as refused:
        getattr(conductor, decision)(client_id=CLIENT_ID, correlation_id=501, registration_correlation_id=500,
                                     channel="aeron:udp?endpoint=127.0.0.1:0")
    assert refused.value.error_code == cp.INVALID_CHANNEL


@pytest.mark.parametrize("channel, message", [
    ("aeron:udp?endpoint=127.0.0.1:0|mtu=1408",
     "^destinations must not contain the key: mtu channel=aeron:udp\\?endpoint=127.0.0.1:0\\|mtu=1408$"),
    ("aeron:udp?endpoint=127.0.0.1:0|so-rcvbuf=64k", "^destinations must not contain the key: so-rcvbuf "),
    ("aeron:udp?endpoint=127.0.0.1:0|rcv-wnd=64k", "^destinations must not contain the key: rcv-wnd "),
    ("aeron:udp?control=127.0.0.1:4000", "needs endpoint=host:port to receive on$"),
])
def test_a_receive_destination_the_driver_cannot_receive_on_is_refused(conductor, channel, message):
    _mds_subscription(conductor)
    with pytest.raises(ControlProtocolError, match=message) as refused:
        conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=501, registration_correlation_id=500,
                                         channel=channel)
    assert refused.value.error_code == cp.INVALID_CHANNEL
    (endpoint,) = conductor.network.receive_endpoints.values()
    assert endpoint.destinations == []


def test_an_ipc_destination_links_the_mds_subscription_to_ipc_publications_until_it_is_removed(conductor):
    proxy = conductor.client_proxy
    _mds_subscription(conductor)
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=600, stream_id=10, channel="aeron:ipc")
    (publication,) = conductor.publications
    del proxy.calls[:]
    conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=501, registration_correlation_id=500,
                                     channel="aeron:ipc")
    assert proxy.names() == ["on_operation_succeeded", "on_available_image"]
    image = proxy.calls[1][1]
    assert (image["correlation_id"], image["subscription_registration_id"], image["source_identity"]) == \
        (600, 500, "aeron:ipc")  # the client's MDS subscription gets the IPC publication's image
    del proxy.calls[:]
    conductor.on_remove_rcv_destination(client_id=CLIENT_ID, correlation_id=502, registration_correlation_id=500,
                                        channel="aeron:ipc")
    assert proxy.calls == [("on_operation_succeeded", {"arg0": 502}), ("on_unavailable_image", {
        "correlation_id": 600, "subscription_registration_id": 500, "stream_id": 10, "channel": "aeron:ipc"})]
    assert publication.subscribers == []
    with pytest.raises(ControlProtocolError, match=f"^unknown subscription client_id={CLIENT_ID} registration_id=500$") \
            as refused:
        conductor.on_remove_rcv_destination(client_id=CLIENT_ID, correlation_id=503, registration_correlation_id=500,
                                            channel="aeron:ipc")
    assert refused.value.error_code == cp.UNKNOWN_SUBSCRIPTION
    # Removing the subscription removes its IPC destination too.
    conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=504, registration_correlation_id=500,
                                     channel="aeron:ipc")
    conductor.on_remove_subscription(client_id=CLIENT_ID, correlation_id=505, registration_id=500)
    assert conductor.subscriptions == [] and publication.subscribers == []
    assert conductor.network.receive_endpoints == {}


def test_a_spy_destination_links_the_mds_subscription_to_a_local_network_publication(conductor):
    proxy = conductor.client_proxy
    _mds_subscription(conductor)
    conductor.on_add_publication(client_id=CLIENT_ID, correlation_id=600, stream_id=10,
                                 channel="aeron:udp?endpoint=127.0.0.1:40999")
    del proxy.calls[:]
    conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=501, registration_correlation_id=500,
                                     channel="aeron-spy:aeron:udp?endpoint=127.0.0.1:40999")
    assert proxy.names() == ["on_operation_succeeded", "on_available_image"]
    image = proxy.calls[1][1]
    assert (image["correlation_id"], image["subscription_registration_id"]) == (600, 500)
    conductor.on_remove_rcv_destination(client_id=CLIENT_ID, correlation_id=502, registration_correlation_id=500,
                                        channel="aeron-spy:aeron:udp?endpoint=127.0.0.1:40999")
    assert proxy.names()[2:] == ["on_operation_succeeded", "on_unavailable_image"]
    (publication,) = conductor.network.publications
    assert publication.spies == []


def test_a_receive_destination_whose_port_is_taken_is_refused_as_a_failed_bind(conductor):
    _mds_subscription(conductor)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
        with pytest.raises(ChannelEndpointError, match=re.escape(f"failed to bind(127.0.0.1:{port}): ")) as refused:
            conductor.on_add_rcv_destination(client_id=CLIENT_ID, correlation_id=501,
                                             registration_correlation_id=500, channel=channel)
    assert str(refused.value).endswith(f"\nchannel={channel}")
    assert error_code_of(refused.value) == cp.GENERIC_ERROR  # as the C driver answers a failed bind
    (endpoint,) = conductor.network.receive_endpoints.values()
    assert endpoint.destinations == [] and conductor.client_proxy.names() == ["on_subscription_ready"]
