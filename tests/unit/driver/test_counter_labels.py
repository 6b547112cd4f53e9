"""Counter labels, order and values as Aeron 1.48's C driver (aeronmd) writes them, so AeronStat output from our
driver lines up with aeronmd's: the system counters' suffixes, the stream counters' trailing space, the channel
status counters with their bound address, the local socket address counters with the address the socket has
(not 0.0.0.0), the IPC publication's pub-pos before pub-lmt, and Bytes currently mapped counting cnc.dat and
loss-report.dat. Expected labels are written out as aeronmd prints them."""

from __future__ import annotations

import os
import struct

import pytest

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver import DriverContext
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from tests.unit.driver_support import MS, Harness, RawClient, run

IPC_STREAM = 1001
UDP_STREAM = 10
VERSION = "version=0.1.0 commit=aeron-numba"


@pytest.fixture
def harness(shm_dir):
    h = Harness(shm_dir / "aeron")
    yield h
    h.close()


def command(harness, client, msg_type_id, message_class, expected_response, **fields):
    correlation_id = client.send(msg_type_id, message_class, **fields)
    harness.work()
    responses = [m for t, m in client.responses() if t == expected_response]
    assert len(responses) == 1, (msg_type_id, responses)
    return correlation_id, responses[0]


def labels_from(harness, first_id: int) -> list[str]:
    return [c.label for c in harness.reader.counters() if c.counter_id >= first_id]


def test_system_counter_labels_carry_the_c_drivers_suffixes(harness):
    labels = {c.counter_id: c.label for c in harness.reader.counters() if c.type_id == cl.SYSTEM_COUNTER_TYPE_ID}
    assert labels[15] == f"Errors: {VERSION}"
    assert labels[25] == "Resolution changes: driverName="
    assert labels[26] == "Conductor max cycle time doing its work in ns: SHARED"
    assert labels[27] == "Conductor work cycle exceeded threshold count: threshold=1000000000ns SHARED"
    assert labels[28] == "Sender max cycle time doing its work in ns: SHARED"
    assert labels[29] == "Sender work cycle exceeded threshold count: threshold=1000000000ns SHARED"
    assert labels[30] == "Receiver max cycle time doing its work in ns: SHARED"
    assert labels[31] == "Receiver work cycle exceeded threshold count: threshold=1000000000ns SHARED"
    assert labels[34] == f"Aeron software: {VERSION}"
    unsuffixed = {15, 25, 26, 27, 28, 29, 30, 31, 34}
    assert [labels[i] for i in sorted(labels) if i not in unsuffixed] == \
        [label for i, label in cl.SYSTEM_COUNTERS if i not in unsuffixed]


def test_resolver_name_and_thresholds_from_the_context_appear_in_the_labels(shm_dir):
    h = Harness(shm_dir / "aeron", resolver_name="node-a", sender_cycle_threshold_ns=2 * MS,
                receiver_cycle_threshold_ns=3 * MS)
    try:
        assert h.reader.get_counter_label(25) == "Resolution changes: driverName=node-a"
        assert h.reader.get_counter_label(29) == "Sender work cycle exceeded threshold count: threshold=2000000ns SHARED"
        assert h.reader.get_counter_label(31) == \
            "Receiver work cycle exceeded threshold count: threshold=3000000ns SHARED"
    finally:
        h.close()


def test_the_label_settings_take_aeronmds_environment_names():
    ctx = DriverContext.from_env({
        "AERON_DRIVER_RESOLVER_NAME": "node-b", "AERON_DRIVER_CONDUCTOR_CYCLE_THRESHOLD": "4ms",
        "AERON_DRIVER_SENDER_CYCLE_THRESHOLD": "5ms", "AERON_DRIVER_RECEIVER_CYCLE_THRESHOLD": "6ms"})
    assert (ctx.resolver_name, ctx.conductor_cycle_threshold_ns, ctx.sender_cycle_threshold_ns,
            ctx.receiver_cycle_threshold_ns) == ("node-b", 4 * MS, 5 * MS, 6 * MS)


@pytest.mark.parametrize("name", ["conductor_cycle_threshold_ns", "sender_cycle_threshold_ns",
                                  "receiver_cycle_threshold_ns"])
def test_a_cycle_threshold_that_is_not_positive_is_refused(tmp_path, name):
    with pytest.raises(ConfigurationError, match=f"{name}=0 must be > 0"):
        DriverContext(aeron_dir=str(tmp_path / "aeron"), **{name: 0}).conclude()


def test_the_shared_duty_cycle_feeds_the_conductor_sender_and_receiver_cycle_counters(shm_dir):
    h = Harness(shm_dir / "aeron", sender_cycle_threshold_ns=5 * MS, receiver_cycle_threshold_ns=20 * MS)
    try:
        tracker = h.driver.runner.duty_cycle_tracker
        for cycle_ns in (3 * MS, 10 * MS, 1 * MS):
            tracker.record(cycle_ns)
        assert [h.system_counter(i) for i in (cl.CONDUCTOR_MAX_CYCLE_TIME, cl.SENDER_MAX_CYCLE_TIME,
                                              cl.RECEIVER_MAX_CYCLE_TIME)] == [10 * MS] * 3
        # Conductor threshold 1 s: never exceeded; sender 5 ms: once (10 ms); receiver 20 ms: never.
        assert [h.system_counter(i) for i in (cl.CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED,
                                              cl.SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED,
                                              cl.RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED)] == [0, 1, 0]
    finally:
        h.close()


def test_bytes_currently_mapped_counts_cnc_and_loss_report_from_the_start(harness):
    aeron_dir = harness.driver.ctx.aeron_dir
    files = os.path.getsize(os.path.join(aeron_dir, "cnc.dat")) + os.path.getsize(
        os.path.join(aeron_dir, "loss-report.dat"))
    assert harness.system_counter(cl.BYTES_CURRENTLY_MAPPED) == files
    client = RawClient(harness.cnc)
    command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage, cp.ON_PUBLICATION_READY,
            stream_id=IPC_STREAM, channel="aeron:ipc")
    (publication,) = harness.conductor.publications
    assert harness.system_counter(cl.BYTES_CURRENTLY_MAPPED) == files + publication.log.buffer.size


def test_a_driver_with_ipc_and_udp_streams_labels_and_orders_its_counters_as_aeronmd(harness):
    # After the system counters, aeron-numba's one addition to aeronmd's counters: the doorbell that parked agents
    # sleep on (kernels/idle_wait.py). Aeron's tools list it as any other counter.
    doorbell_id = len(cl.SYSTEM_COUNTERS)
    assert labels_from(harness, doorbell_id)[:1] == [cl.DOORBELL_NAME]
    assert harness.reader.get_counter_type_id(doorbell_id) == cl.DOORBELL_COUNTER_TYPE_ID
    first_id = doorbell_id + 1
    client = RawClient(harness.cnc)
    ipc_pub_id, ipc_pub = command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage,
                                  cp.ON_PUBLICATION_READY, stream_id=IPC_STREAM, channel="aeron:ipc")
    ipc_sub_id, _ = command(harness, client, cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage,
                            cp.ON_SUBSCRIPTION_READY, registration_correlation_id=-1, stream_id=IPC_STREAM,
                            channel="aeron:ipc")
    udp_sub_channel = "aeron:udp?endpoint=127.0.0.1:0"
    udp_sub_id, udp_sub = command(harness, client, cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage,
                                  cp.ON_SUBSCRIPTION_READY, registration_correlation_id=-1, stream_id=UDP_STREAM,
                                  channel=udp_sub_channel)
    network = harness.conductor.network
    (receive_endpoint,) = network.receive_endpoints.values()
    rcv_port = receive_endpoint.local_address[1]
    # A host name, not an address: the bound address shown is the one the kernel sends from to reach it.
    udp_pub_channel = f"aeron:udp?endpoint=localhost:{rcv_port}|term-length=64k"
    udp_pub_id, udp_pub = command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage,
                                  cp.ON_PUBLICATION_READY, stream_id=UDP_STREAM, channel=udp_pub_channel)
    (send_endpoint,) = network.send_endpoints.values()
    snd_port = send_endpoint.local_address[1]
    run(harness, client, 20)
    (image,) = network.images
    join = harness.reader.get_counter_value(image.subscribers[0].counter_id)

    ipc_session, udp_session = ipc_pub.session_id, udp_pub.session_id
    rcv_status_id = udp_sub.channel_status_indicator_id
    snd_status_id = udp_pub.channel_status_indicator_id
    expected = [
        f"client-heartbeat: id={client.client_id}",
        # IPC: pub-pos before pub-lmt, and the space C leaves after a stream label with no suffix.
        f"pub-pos (sampled): {ipc_pub_id} {ipc_session} {IPC_STREAM} aeron:ipc ",
        f"pub-lmt: {ipc_pub_id} {ipc_session} {IPC_STREAM} aeron:ipc ",
        f"sub-pos: {ipc_sub_id} {ipc_session} {IPC_STREAM} aeron:ipc @0",
        f"rcv-channel: {udp_sub_channel} 127.0.0.1:{rcv_port}",
        f"rcv-local-sockaddr: {rcv_status_id} 127.0.0.1:{rcv_port}",
        f"snd-channel: {udp_pub_channel} 127.0.0.1:{snd_port}",
        f"snd-local-sockaddr: {snd_status_id} 127.0.0.1:{snd_port}",
        f"pub-pos (sampled): {udp_pub_id} {udp_session} {UDP_STREAM} {udp_pub_channel} ",
        f"pub-lmt: {udp_pub_id} {udp_session} {UDP_STREAM} {udp_pub_channel} ",
        f"snd-pos: {udp_pub_id} {udp_session} {UDP_STREAM} {udp_pub_channel} ",
        f"snd-lmt: {udp_pub_id} {udp_session} {UDP_STREAM} {udp_pub_channel} ",
        f"snd-bpe: {udp_pub_id} {udp_session} {UDP_STREAM} {udp_pub_channel} ",
        f"rcv-hwm: {image.correlation_id} {udp_session} {UDP_STREAM} {udp_sub_channel} ",
        f"rcv-pos: {image.correlation_id} {udp_session} {UDP_STREAM} {udp_sub_channel} ",
        f"sub-pos: {udp_sub_id} {udp_session} {UDP_STREAM} {udp_sub_channel} @{join}",
    ]
    assert labels_from(harness, first_id) == expected
    assert (rcv_status_id, snd_status_id) == (first_id + 4, first_id + 6)


def test_channel_endpoint_counters_carry_the_registration_id_and_the_bound_address_key(harness):
    client = RawClient(harness.cnc)
    sub_id, sub = command(harness, client, cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, cp.ON_SUBSCRIPTION_READY,
                          registration_correlation_id=-1, stream_id=UDP_STREAM,
                          channel="aeron:udp?endpoint=127.0.0.1:0")
    (receive_endpoint,) = harness.conductor.network.receive_endpoints.values()
    port = receive_endpoint.local_address[1]
    pub_id, pub = command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage, cp.ON_PUBLICATION_READY,
                          stream_id=UDP_STREAM, channel=f"aeron:udp?endpoint=127.0.0.1:{port}")
    by_id = {c.counter_id: c for c in harness.reader.counters()}
    for status_id, registration_id in ((sub.channel_status_indicator_id, sub_id),
                                       (pub.channel_status_indicator_id, pub_id)):
        (sockaddr,) = [c for c in by_id.values() if c.type_id == cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID
                       and struct.unpack_from("<i", c.key, cl.LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET)[0]
                       == status_id]
        address = sockaddr.label.split(" ")[-1]
        assert address.startswith("127.0.0.1:")
        (length,) = struct.unpack_from("<i", sockaddr.key, cl.LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET)
        start = cl.LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET
        assert sockaddr.key[start:start + length].decode() == address
        assert by_id[status_id].registration_id == registration_id == sockaddr.registration_id
        assert by_id[status_id].value == sockaddr.value == cl.CHANNEL_STATUS_ACTIVE


def test_only_pub_lmt_names_the_client_as_owner_as_in_the_c_driver(harness):
    RawClient(harness.cnc)  # takes id 0, the default owner id: the client below must be told apart from it
    client = RawClient(harness.cnc)
    assert client.client_id != cl.DEFAULT_OWNER_ID
    command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage, cp.ON_PUBLICATION_READY,
            stream_id=IPC_STREAM, channel="aeron:ipc")
    owners = {c.type_id: c.owner_id for c in harness.reader.counters()
              if c.type_id in (cl.PUBLISHER_POS_TYPE_ID, cl.PUBLISHER_LIMIT_TYPE_ID)}
    assert owners == {cl.PUBLISHER_POS_TYPE_ID: cl.DEFAULT_OWNER_ID, cl.PUBLISHER_LIMIT_TYPE_ID: client.client_id}


def test_image_counters_name_the_channel_of_the_subscription_that_wants_the_stream(harness):
    """Two subscriptions share one receive endpoint with different channel strings; the image of the second's
    stream is labelled with the second's channel, as the C driver labels it (not the endpoint's first channel)."""
    client = RawClient(harness.cnc)
    other_channel = "aeron:udp?endpoint=127.0.0.1:0|alias=other"
    command(harness, client, cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, cp.ON_SUBSCRIPTION_READY,
            registration_correlation_id=-1, stream_id=UDP_STREAM + 1, channel=other_channel)
    sub_channel = "aeron:udp?endpoint=127.0.0.1:0|alias=mine"
    command(harness, client, cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, cp.ON_SUBSCRIPTION_READY,
            registration_correlation_id=-1, stream_id=UDP_STREAM, channel=sub_channel)
    network = harness.conductor.network
    (receive_endpoint,) = network.receive_endpoints.values()
    command(harness, client, cp.ADD_PUBLICATION, dc.PublicationMessage, cp.ON_PUBLICATION_READY,
            stream_id=UDP_STREAM, channel=f"aeron:udp?endpoint=127.0.0.1:{receive_endpoint.local_address[1]}")
    run(harness, client, 20)
    (image,) = network.images
    for type_id in (cl.RECEIVER_HWM_TYPE_ID, cl.RECEIVER_POSITION_TYPE_ID):
        (counter,) = harness.counters_by_type(type_id)
        assert counter.label.endswith(f" {UDP_STREAM} {sub_channel} ")
        assert counter.key[cl.STREAM_KEY_CHANNEL_OFFSET:].rstrip(b"\0") == sub_channel.encode()
