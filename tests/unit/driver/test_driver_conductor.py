"""The driver conductor driven through do_work() with cached clocks and a raw command client (§7-§11, §15)."""

from __future__ import annotations

import errno
import os
import socket
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver.network_cycles import NetworkCycles
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels import term_appender as TA
from aeron_numba.kernels import term_reader as TR
from aeron_numba.kernels.error_log import ErrorLogReader
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import counters as cl
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout import publication_status as P
from aeron_numba.layout.log_buffers import LogBuffers
from tests.unit.driver_support import LIVENESS_MS, MS, TERM_LENGTH, TIMER_MS, UNBLOCK_MS, Harness, RawClient


@pytest.fixture
def harness(shm_dir):
    h = Harness(shm_dir / "aeron")
    yield h
    h.close()


def test_add_publication_answers_with_its_log_and_counters(harness):
    mapped_at_start = harness.system_counter(cl.BYTES_CURRENTLY_MAPPED)  # cnc.dat and loss-report.dat
    client = RawClient(harness.cnc)
    correlation_id = client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
    harness.work()
    (msg_type_id, ready), = client.responses()
    assert msg_type_id == cp.ON_PUBLICATION_READY
    assert ready.correlation_id == correlation_id == ready.registration_id and ready.stream_id == 1001
    assert ready.channel_status_indicator_id == -1
    assert ready.log_file_name.endswith(f"publications/{correlation_id}.logbuffer")
    with LogBuffers.open(ready.log_file_name) as log:
        assert log.term_length == TERM_LENGTH and log.session_id == ready.session_id
        assert log.correlation_id == correlation_id
        assert harness.system_counter(cl.BYTES_CURRENTLY_MAPPED) == mapped_at_start + log.buffer.size
    labels = {c.counter_id: c.label for c in harness.reader.counters()}
    assert labels[ready.position_limit_counter_id] == f"pub-lmt: {correlation_id} {ready.session_id} 1001 aeron:ipc "
    pub_pos = harness.counters_by_type(cl.PUBLISHER_POS_TYPE_ID)
    assert [c.label for c in pub_pos] == [f"pub-pos (sampled): {correlation_id} {ready.session_id} 1001 aeron:ipc "]
    heartbeat, = harness.counters_by_type(cl.CLIENT_HEARTBEAT_TYPE_ID)
    assert heartbeat.label == f"client-heartbeat: id={client.client_id}"
    assert not (-1 <= ready.session_id <= 1000)  # the reserved range is never auto-assigned


def test_the_warm_up_scratch_dir_lives_inside_the_aeron_dir(shm_dir, monkeypatch):
    """A driver SIGKILLed while warming up must leave nothing that removing its aeron dir does not remove."""
    from aeron_numba.driver import media_driver
    from aeron_numba.driver.context import DriverContext

    scratch_parents = []
    monkeypatch.setattr(media_driver, "warm_up_driver_kernels", scratch_parents.append)
    aeron_dir = shm_dir / "aeron"
    driver = media_driver.MediaDriver(DriverContext(aeron_dir=str(aeron_dir), counters_values_buffer_length=64 * 1024,
                                                      error_buffer_length=64 * 1024), warm_up=True)
    try:
        assert [os.path.realpath(p) for p in scratch_parents] == [os.path.realpath(aeron_dir)]
    finally:
        driver.close()


@pytest.mark.parametrize("pre_touch", [False, True])
def test_pre_touch_mapped_memory_allocates_every_page_of_a_new_log(shm_dir, pre_touch):
    """AERON_PRE_TOUCH_MAPPED_MEMORY=true: the terms' pages exist once the log is created (no allocation faults
    during the stream's first pass); by default the file stays sparse until written."""
    from aeron_numba.driver.context import DriverContext

    assert DriverContext.from_env({"AERON_PRE_TOUCH_MAPPED_MEMORY": "true"}).pre_touch_mapped_memory is True
    assert DriverContext.from_env({}).pre_touch_mapped_memory is False
    h = Harness(shm_dir / "aeron", pre_touch_mapped_memory=pre_touch)
    try:
        client = RawClient(h.cnc)
        client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
        h.work()
        (_, ready), = client.responses()
        allocated = os.stat(ready.log_file_name).st_blocks * 512
        terms = lb.PARTITION_COUNT * TERM_LENGTH
        if pre_touch:
            assert allocated >= terms
        else:
            assert allocated < terms // 2
        with LogBuffers.open(ready.log_file_name) as log:
            assert not log.buffer[:terms].any()  # touched with zeros: the terms are as clean as before
    finally:
        h.close()


def test_subscription_gets_images_and_moves_the_limit(harness):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc?term-length=64k")
    harness.work()
    (_, pub), = client.responses()
    sub_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                         channel="aeron:ipc")
    harness.work(2)
    responses = client.responses()
    assert [t for t, _ in responses] == [cp.ON_SUBSCRIPTION_READY, cp.ON_AVAILABLE_IMAGE]
    image = responses[1][1]
    assert (image.correlation_id, image.subscription_registration_id) == (pub.registration_id, sub_id)
    assert image.source_identity == "aeron:ipc" and image.log_file_name == pub.log_file_name
    sub_pos = harness.reader.get_counter_label(image.subscriber_position_id)
    assert sub_pos == f"sub-pos: {sub_id} {pub.session_id} 7 aeron:ipc @0"
    assert harness.reader.get_counter_value(pub.position_limit_counter_id) == TERM_LENGTH // 2
    with LogBuffers.open(pub.log_file_name) as log:
        assert int(log.buffer[log.metadata_offset + lb.LOG_IS_CONNECTED_OFFSET]) == 1


def test_an_ipc_publications_limit_update_is_skipped_while_nothing_it_reads_moves(harness, monkeypatch):
    """The conductor's per-cycle update of pub-pos and pub-lmt runs again only when a tail counter or a
    subscriber's position moved, or a subscriber came or went; the limit still follows the subscriber."""
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc?term-length=64k")
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel="aeron:ipc")
    harness.work(2)
    (_, pub), _, (_, image) = client.responses()
    (publication,) = harness.conductor.publications
    reads = []
    producer_position = type(publication).producer_position
    monkeypatch.setattr(publication, "producer_position", lambda: reads.append(1) or producer_position(publication))
    harness.work(3)
    assert reads == []  # nothing moved: three cycles, no update
    limit = harness.reader.get_counter_value(pub.position_limit_counter_id)
    ck.set_counter_value(harness.cnc.counters_values_buffer, image.subscriber_position_id, TERM_LENGTH // 4)
    harness.work()  # the subscriber read on: the update runs and moves the limit
    assert len(reads) == 1
    assert harness.reader.get_counter_value(pub.position_limit_counter_id) == limit + TERM_LENGTH // 4
    harness.work()
    assert len(reads) == 1
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel="aeron:ipc")
    harness.work()  # a second subscriber, at the join position: the update runs again
    assert len(reads) >= 2


def test_concurrent_publications_share_a_log_and_exclusive_ones_do_not(harness):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=3, channel="aeron:ipc")
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=3, channel="aeron:ipc")
    client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=3, channel="aeron:ipc")
    harness.work()
    (t1, a), (t2, b), (t3, x) = client.responses()
    assert (t1, t2, t3) == (cp.ON_PUBLICATION_READY, cp.ON_PUBLICATION_READY, cp.ON_EXCLUSIVE_PUBLICATION_READY)
    assert a.registration_id == b.registration_id and a.log_file_name == b.log_file_name
    assert b.correlation_id != b.registration_id
    assert x.log_file_name != a.log_file_name and x.session_id != a.session_id


def test_exclusive_publication_at_a_start_position(harness):
    client = RawClient(harness.cnc)
    channel = "aeron:ipc?term-length=64k|init-term-id=10|term-id=13|term-offset=1024"
    client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=3, channel=channel)
    harness.work()
    (_, ready), = client.responses()
    with LogBuffers.open(ready.log_file_name) as log:
        assert TA.producer_position(log.buffer) == 3 * TERM_LENGTH + 1024


@pytest.mark.parametrize("msg_type_id, body, code", [
    (0x77, b"\x00" * 16, cp.UNKNOWN_COMMAND_TYPE_ID),
    (cp.ADD_PUBLICATION, b"\x01" * 20, cp.MALFORMED_COMMAND),
    (cp.ADD_PUBLICATION, dc.PublicationMessage(1, 2, 3, "aeron:tcp").encode(), cp.INVALID_CHANNEL),
    (cp.ADD_PUBLICATION, dc.PublicationMessage(1, 2, 3, "aeron:ipc?term-length=1000").encode(), cp.GENERIC_ERROR),
    (cp.ADD_PUBLICATION, dc.PublicationMessage(1, 2, 3, "aeron:udp").encode(), cp.INVALID_CHANNEL),
    (cp.ADD_PUBLICATION, dc.PublicationMessage(1, 2, 3, "aeron:udp?endpoint=localhost").encode(), cp.GENERIC_ERROR),
    (cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage(1, 2, -1, 3, "aeron:udp?endpoint=localhost:99999").encode(),
     cp.GENERIC_ERROR),
    (cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage(1, 2, -1, 3, "aeron-spy:aeron:ipc").encode(), cp.INVALID_CHANNEL),
    (cp.ADD_PUBLICATION, dc.PublicationMessage(1, 2, 3, "aeron:ipc?init-term-id=1|term-id=2").encode(),
     cp.GENERIC_ERROR),
    (cp.REMOVE_PUBLICATION, dc.RemoveMessage(1, 2, 999).encode(), cp.UNKNOWN_PUBLICATION),
    (cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage(1, 2, 999).encode(), cp.UNKNOWN_SUBSCRIPTION),
    (cp.REMOVE_COUNTER, dc.RemoveMessage(1, 2, 999).encode(), cp.UNKNOWN_COUNTER),
    (cp.TERMINATE_DRIVER, dc.TerminateDriverMessage(1, 2, b"").encode(), cp.GENERIC_ERROR),
])
def test_bad_commands_get_an_error_and_an_error_log_entry(harness, msg_type_id, body, code):
    client = RawClient(harness.cnc)
    assert client.ring.write(msg_type_id, body)
    harness.work()
    (response_type, error), = client.responses()
    assert response_type == cp.ON_ERROR and error.error_code == code
    if len(body) >= 16:
        assert error.offending_command_correlation_id == struct.unpack_from("<q", body, 8)[0]
    observations = ErrorLogReader.read(harness.cnc.error_log_buffer)
    assert len(observations) == 1 and error.error_message in observations[0].encoded_exception
    assert harness.system_counter(cl.ERRORS) == 1
    # ... and the driver goes on serving good commands.
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=1,
                channel="aeron:ipc")
    harness.work()
    assert [t for t, _ in client.responses()] == [cp.ON_SUBSCRIPTION_READY]


PUB, SUB, XPUB = cp.ADD_PUBLICATION, cp.ADD_SUBSCRIPTION, cp.ADD_EXCLUSIVE_PUBLICATION


MULTICAST = "aeron:udp?endpoint=239.255.90.1:40456"
# Flow control applies to multi-receiver channels; a multicast one binds its group with SO_REUSEADDR, so the
# endpoint made before the fc is read never clashes with another user of the port.
FC = MULTICAST + "|interface=127.0.0.1"


# Every refusal of a channel the driver makes while adding a publication or subscription, with the code Aeron's C
# driver gives for the same input (EINVAL is GENERIC_ERROR; a negative Aeron code is that code) and the first line
# of its message (C's words; where ours says more, it follows C's). Source: aeron_uri.c, aeron_driver_uri.c,
# aeron_udp_channel.c, aeron_netutil.c, aeron_flow_control.c, aeron_driver_conductor.c (1.48).
@pytest.mark.parametrize("command, channel, code, message", [
    # A value Aeron's C driver refuses with EINVAL is GENERIC_ERROR, with its words (first line of the message).
    (PUB, "aeron:udp?endpoint=localhost:99999", cp.GENERIC_ERROR, "port out of range: 99999"),
    (SUB, "aeron:udp?endpoint=localhost:99999", cp.GENERIC_ERROR, "port out of range: 99999"),
    (PUB, "aeron:udp?endpoint=localhost:4o00", cp.GENERIC_ERROR, "port invalid: 4o00"),
    (PUB, "aeron:ipc?term-length=1000", cp.GENERIC_ERROR, "term length less than min length of 65536: length=1000"),
    (PUB, "aeron:ipc?term-length=2g", cp.GENERIC_ERROR,
     "term length greater than max length of 1073741824: length=2147483648"),
    (PUB, "aeron:ipc?term-length=96k", cp.GENERIC_ERROR, "term length not a power of 2: length=98304"),
    (PUB, "aeron:ipc?term-length=64q", cp.GENERIC_ERROR, "could not parse term-length=64q in URI"),
    (PUB, "aeron:udp?endpoint=localhost:40123|mtu=100", cp.GENERIC_ERROR,
     "mtuLength must be a multiple of FRAME_ALIGNMENT: mtuLength=100"),
    (PUB, "aeron:ipc?mtu=32", cp.GENERIC_ERROR,
     "mtuLength must be a > HEADER_LENGTH and <= MAX_UDP_PAYLOAD_LENGTH: mtuLength=32"),
    (PUB, "aeron:ipc?linger=soon", cp.GENERIC_ERROR, "could not parse linger=soon in URI"),
    (PUB, "aeron:ipc?session-id=5000000000", cp.GENERIC_ERROR,
     "could not parse session-id=5000000000 as int32_t in URI: Numerical result out of range"),
    (SUB, "aeron:ipc?session-id=x7", cp.GENERIC_ERROR, "could not parse session-id=x7 as int32_t in URI"),
    (SUB, "aeron:ipc?tether=maybe", cp.GENERIC_ERROR, "could not parse tether=maybe as bool from URI"),
    (SUB, "aeron:udp?endpoint=localhost:0|reliable=mostly", cp.GENERIC_ERROR,
     "could not parse reliable=mostly as bool from URI"),
    (SUB, "aeron:ipc?rejoin=often", cp.GENERIC_ERROR, "could not parse rejoin=often as bool from URI"),
    (SUB, "aeron:ipc?sparse=yes", cp.GENERIC_ERROR, "could not parse sparse=yes as bool from URI"),
    (PUB, "aeron:ipc?sparse=yes", cp.GENERIC_ERROR, "could not parse sparse=yes as bool from URI"),
    (PUB, "aeron:ipc?eos=yes", cp.GENERIC_ERROR, "could not parse eos=yes as bool from URI"),
    (PUB, "aeron:ipc?ssc=yes", cp.GENERIC_ERROR, "could not parse ssc=yes as bool from URI"),
    (SUB, "aeron:ipc?untethered-resting-timeout=soon", cp.GENERIC_ERROR,
     "could not parse untethered-resting-timeout=soon in URI"),
    (SUB, "aeron:ipc?untethered-window-limit-timeout=-1s", cp.GENERIC_ERROR,
     "could not parse untethered-window-limit-timeout=-1s in URI"),
    (PUB, "aeron:ipc?pub-wnd=lots", cp.GENERIC_ERROR, "could not parse pub-wnd=lots in URI"),
    (PUB, "aeron:ipc?pub-wnd=1k", cp.GENERIC_ERROR, "pub-wnd=1024 cannot be less than the mtu=1408"),
    (PUB, "aeron:ipc?pub-wnd=64k", cp.GENERIC_ERROR, "pub-wnd=65536 must not exceed half the term-length=65536"),
    (XPUB, "aeron:ipc?init-term-id=5", cp.GENERIC_ERROR,
     "params: init-term-id term-id term-offset must be used as a complete set"),
    (XPUB, "aeron:ipc?init-term-id=5|term-id=6|term-offset=16", cp.GENERIC_ERROR,
     "Param term-offset=16 must be multiple of FRAME_ALIGNMENT"),
    (XPUB, "aeron:ipc?init-term-id=5|term-id=6|term-offset=131072", cp.GENERIC_ERROR,
     "Param term-offset=131072 > term-length=65536"),
    (XPUB, "aeron:ipc?init-term-id=5|term-id=4|term-offset=0", cp.GENERIC_ERROR,
     "Param difference greater than 2^31 - 1: init-term-id=5 term-offset=4"),
    (PUB, "aeron:udp?endpoint=no-such-host.invalid:40123", cp.UNKNOWN_HOST,
     "Unable to resolve host=(no-such-host.invalid): (-2) Name or service not known"),
    (PUB, "aeron:udp?endpoint=239.255.90.1:0|interface=127.0.0.1", cp.GENERIC_ERROR,
     "endpoint has port=0 for publication: channel=aeron:udp?endpoint=239.255.90.1:0|interface=127.0.0.1"),
    (PUB, "aeron:udp?control=localhost:40124", cp.GENERIC_ERROR,
     "'control' parameter requires that either 'endpoint' or 'control-mode' is specified,"
     " channel=aeron:udp?control=localhost:40124"),
    (SUB, "aeron:udp?endpoint=localhost:40125|control=localhost:0", cp.GENERIC_ERROR,
     "control has port=0 for subscription: channel=aeron:udp?endpoint=localhost:40125|control=localhost:0"),
    (SUB, MULTICAST + "|interface=127.0.0.1/33", cp.GENERIC_ERROR, "prefixlen out of range: 33"),
    (SUB, MULTICAST + "|interface=127.0.0.1/x", cp.GENERIC_ERROR, "prefixlen invalid: x"),
    (SUB, MULTICAST + "|interface=198.51.100.77/32", cp.GENERIC_ERROR,
     "could not find matching interface='198.51.100.77/32'"),
    (SUB, "aeron:udp?endpoint=239.255.90.2:40456", cp.GENERIC_ERROR, "Multicast data address must be odd"),
    (PUB, FC + "|fc=fastest", cp.GENERIC_ERROR,
     f"Invalid flow control strategy name: fastest from URI: {FC}|fc=fastest"),
    (PUB, FC + "|fc=,t:1s", cp.GENERIC_ERROR, f"No flow control strategy name specified, URI: {FC}|fc=,t:1s"),
    (PUB, FC + "|fc=min,t:soon", cp.GENERIC_ERROR,
     "Flow control options - invalid timeout, field: t:soon, options: min,t:soon"),
    (PUB, FC + "|fc=min,x:1", cp.GENERIC_ERROR,
     "Flow control options - unrecognised option, field: x:1, options: min,x:1"),
    (PUB, FC + "|fc=min,t:", cp.GENERIC_ERROR,
     "Flow control options - unrecognised option, field: t:, options: min,t:"),
    # A malformed URI is INVALID_CHANNEL, as in Aeron.
    (PUB, "aeron:tcp?endpoint=localhost:40123", cp.INVALID_CHANNEL,
     "invalid URI scheme or transport: aeron:tcp?endpoint=localhost:40123"),
    (PUB, "aeron-spy:aeron:udp?endpoint=localhost:40123", cp.INVALID_CHANNEL,
     "invalid URI scheme or transport: aeron-spy:aeron:udp?endpoint=localhost:40123"),
    (SUB, "aeron-spy:aeron:ipc", cp.INVALID_CHANNEL, "UDP channels must use UDP URIs"),
    (PUB, "aeron:udp?term-length=64k", cp.INVALID_CHANNEL,
     "URIs for UDP must specify endpoint, control, tags, or control-mode=manual/response"),
    (SUB, "aeron:udp?endpoint=localhost:40123|control-mode=dynamic", cp.INVALID_CHANNEL,
     "explicit control expected with dynamic control mode"),
    (SUB, "aeron:ipc?tether=|alias=x", cp.INVALID_CHANNEL, "empty value not allowed"),
    (SUB, "aeron:ipc?=true", cp.INVALID_CHANNEL, "empty key not allowed"),
    (SUB, "aeron:ipc?tether|alias=x", cp.INVALID_CHANNEL, "invalid end of key"),
])
def test_bad_channel_parameters_get_the_c_driver_s_code_and_message(harness, command, channel, code, message):
    client = RawClient(harness.cnc)
    if command == SUB:
        correlation_id = client.send(SUB, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=5,
                                     channel=channel)
    else:
        correlation_id = client.send(command, dc.PublicationMessage, stream_id=5, channel=channel)
    harness.work()
    (response_type, error), = client.responses()
    assert response_type == cp.ON_ERROR and error.offending_command_correlation_id == correlation_id
    # C's words lead the first line; ours may say more after them.
    assert (cp.ERROR_CODE_NAMES[error.error_code], error.error_message.splitlines()[0][:len(message)]) == \
        (cp.ERROR_CODE_NAMES[code], message)
    network = harness.conductor.network
    assert harness.conductor.publications == network.publications == harness.conductor.subscriptions == []
    assert network.send_endpoints == network.receive_endpoints == {}


@pytest.mark.parametrize("command, channel", [
    # Values Aeron's C driver takes without complaint, so ours does too.
    (SUB, "aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1|ttl=300"),  # C clamps ttl to 255
    (PUB, "aeron:udp?endpoint=239.255.90.1:40456|interface=127.0.0.1|ttl=many"),  # C reads a non-number as 0
    (SUB, "aeron:udp?endpoint=239.255.90.1:0|interface=127.0.0.1"),  # C binds any port; only publications need one
    (SUB, "aeron:udp?endpoint=localhost:0|group=maybe"),  # C: anything but true or infer is false
    (SUB, "aeron:ipc?tether=false|untethered-window-limit-timeout=0|untethered-resting-timeout=0"),
    (PUB, "aeron:ipc?pub-wnd=32k"),  # half the term length is the most
    (PUB, "aeron:ipc?sparse=false|eos=true"),
])
def test_channel_parameters_the_c_driver_accepts_are_accepted(harness, command, channel):
    client = RawClient(harness.cnc)
    if command == SUB:
        client.send(SUB, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=5, channel=channel)
    else:
        client.send(command, dc.PublicationMessage, stream_id=5, channel=channel)
    harness.work()
    responses = client.responses()
    assert [t for t, _ in responses] == [cp.ON_SUBSCRIPTION_READY if command == SUB else cp.ON_PUBLICATION_READY], \
        [getattr(r, "error_message", None) for _, r in responses]


def test_a_shared_publication_asking_for_other_log_settings_is_refused_with_the_c_driver_s_words(harness):
    client = RawClient(harness.cnc)
    client.send(PUB, dc.PublicationMessage, stream_id=5, channel="aeron:ipc?term-length=64k")
    client.send(PUB, dc.PublicationMessage, stream_id=5, channel="aeron:ipc?term-length=128k")
    client.send(PUB, dc.PublicationMessage, stream_id=5, channel="aeron:ipc?mtu=4096")
    harness.work()
    ready, term_length, mtu = client.responses()
    assert ready[0] == cp.ON_PUBLICATION_READY
    assert [(t, e.error_code, e.error_message) for t, e in (term_length, mtu)] == [
        (cp.ON_ERROR, cp.GENERIC_ERROR, "existing publication has different 'term-length': existing=65536"
                                        " requested=131072"),
        (cp.ON_ERROR, cp.GENERIC_ERROR, "existing publication has different 'mtu': existing=1408 requested=4096")]


UDP = "aeron:udp?endpoint=localhost:40127"


@pytest.mark.parametrize("steps", [
    # A concurrent publication joins the stream's active concurrent one: only what it names must match (C's
    # aeron_confirm_publication_match), so no parameters join any log.
    [(PUB, "aeron:ipc?term-length=128k", "new"), (PUB, "aeron:ipc", "join"), (PUB, "aeron:ipc?mtu=1408", "join")],
    [(PUB, "aeron:ipc?session-id=7", "new"), (PUB, "aeron:ipc", "join"),
     (PUB, "aeron:ipc?session-id=8", "existing publication has different 'session-id': existing=7 requested=8")],
    # A session id in use on the stream cannot be had again, but by joining the concurrent publication that has it.
    [(XPUB, "aeron:ipc?session-id=7", "new"),
     (XPUB, "aeron:ipc?session-id=7", "Specified session-id is already in exclusive use for"
                                       " channel=aeron:ipc?session-id=7 stream-id=5"),
     (PUB, "aeron:ipc?session-id=7", "Specified session-id is already in exclusive use for"
                                      " channel=aeron:ipc?session-id=7 stream-id=5"),
     (PUB, "aeron:ipc?session-id=8", "new"), (PUB, "aeron:ipc?session-id=8", "join")],
    # A start position is taken by a concurrent publication too, and must match to join.
    [(PUB, "aeron:ipc?init-term-id=5|term-id=6|term-offset=1024", "new"),
     (PUB, "aeron:ipc?init-term-id=5|term-id=6|term-offset=1024", "join"), (PUB, "aeron:ipc", "join"),
     (PUB, "aeron:ipc?init-term-id=4|term-id=6|term-offset=1024",
      "existing publication has different 'init-term-id': existing=5 requested=4"),
     (PUB, "aeron:ipc?init-term-id=5|term-id=7|term-offset=1024",
      "existing publication has different 'term-id': existing=6 requested=7"),
     (PUB, "aeron:ipc?init-term-id=5|term-id=6|term-offset=0",
      "existing publication has different 'term-offset': existing=1024 requested=0")],
    [(XPUB, UDP + "|session-id=9", "new"),
     (XPUB, UDP + "|session-id=9", f"Specified session-id is already in exclusive use for channel={UDP}|session-id=9"
                                   " stream-id=5"),
     (PUB, UDP + "|ssc=false", "new"), (PUB, UDP, "join"),
     (PUB, UDP + "|ssc=true", "existing publication has different spies simulate connection: requested=true")],
])
def test_publications_of_a_stream_join_or_are_refused_as_in_aeron(harness, steps):
    client = RawClient(harness.cnc)
    registrations = []
    for command, channel, expected in steps:
        client.send(command, dc.PublicationMessage, stream_id=5, channel=channel)
        harness.work()
        (response_type, response), = client.responses()
        if expected in ("new", "join"):
            ready = cp.ON_EXCLUSIVE_PUBLICATION_READY if command == XPUB else cp.ON_PUBLICATION_READY
            assert response_type == ready, getattr(response, "error_message", response_type)
            assert (response.registration_id in registrations) == (expected == "join"), channel
            registrations.append(response.registration_id)
        else:
            assert response_type == cp.ON_ERROR, f"{channel} accepted"
            assert (cp.ERROR_CODE_NAMES[response.error_code], response.error_message) == ("GENERIC_ERROR", expected)
    if steps[0][1].startswith("aeron:ipc?init-term-id"):  # the log starts at the position asked for
        ready = [p for p in harness.conductor.publications if p.registration_id == registrations[0]][0]
        assert ready.producer_position() == ready.log.term_length + 1024  # one term after init-term-id, + 1024


@pytest.mark.parametrize("channel", ["aeron:udp?endpoint=localhost:0",
                                     "aeron:udp?endpoint=127.0.0.1:0|term-length=64k"])
def test_a_udp_publication_to_port_0_is_refused_as_aeron_refuses_it(harness, channel):
    """Nothing can be sent to port 0: accepted, it would log EINVAL on every SETUP it tried to send."""
    client = RawClient(harness.cnc)
    client.send(PUB, dc.PublicationMessage, stream_id=5, channel=channel)
    harness.work()
    (response_type, error), = client.responses()
    assert (response_type, error.error_code, error.error_message) == \
        (cp.ON_ERROR, cp.GENERIC_ERROR, f"endpoint has port=0 for publication: channel={channel}")
    network = harness.conductor.network
    assert network.publications == [] and network.send_endpoints == {}
    assert harness.counters_by_type(cl.SENDER_POSITION_TYPE_ID) == []


def test_a_udp_port_in_use_is_refused_as_aeron_refuses_it(harness):
    """A socket that cannot be bound is GENERIC_ERROR (EADDRINUSE) from Aeron's C and Java drivers, not
    CHANNEL_ENDPOINT_ERROR (that is for an endpoint failing after it was made), with the C driver's words."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        client = RawClient(harness.cnc)
        client.send(SUB, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=5,
                    channel=f"aeron:udp?endpoint=127.0.0.1:{port}")
        harness.work()
    (response_type, error), = client.responses()
    assert (response_type, cp.ERROR_CODE_NAMES[error.error_code], error.error_message.splitlines()[0]) == \
        (cp.ON_ERROR, "GENERIC_ERROR", f"failed to bind(127.0.0.1:{port}): ({errno.EADDRINUSE}) Address already in use")
    assert harness.conductor.subscriptions == [] and harness.conductor.network.receive_endpoints == {}
    assert harness.counters_by_type(cl.RECEIVE_CHANNEL_STATUS_TYPE_ID) == []


def test_add_and_remove_counter(harness):
    client = RawClient(harness.cnc)
    correlation_id = client.send(cp.ADD_COUNTER, dc.CounterMessage, type_id=1001, key=b"k" * 8, label="my counter")
    harness.work()
    (t, ready), = client.responses()
    assert t == cp.ON_COUNTER_READY and ready.correlation_id == correlation_id
    assert harness.reader.get_counter_label(ready.counter_id) == "my counter"
    assert harness.reader.get_counter_registration_id(ready.counter_id) == correlation_id
    assert harness.reader.get_counter_owner_id(ready.counter_id) == client.client_id
    client.send(cp.REMOVE_COUNTER, dc.RemoveMessage, registration_id=correlation_id)
    harness.work()
    assert [t for t, _ in client.responses()] == [cp.ON_OPERATION_SUCCESS, cp.ON_UNAVAILABLE_COUNTER]
    assert harness.reader.get_counter_state(ready.counter_id) == cl.RECORD_RECLAIMED


def test_removed_publication_drains_lingers_and_is_deleted(harness):
    mapped_at_start = harness.system_counter(cl.BYTES_CURRENTLY_MAPPED)  # cnc.dat and loss-report.dat
    client = RawClient(harness.cnc)
    pub_id = client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=5, channel="aeron:ipc")
    sub_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=5,
                         channel="aeron:ipc")
    harness.work()
    pub = client.responses()[0][1]
    client.send(cp.REMOVE_PUBLICATION, dc.RemoveMessage, registration_id=pub_id)
    harness.work()
    assert [t for t, _ in client.responses()] == [cp.ON_OPERATION_SUCCESS]
    harness.advance(3 * TIMER_MS)
    unavailable = [m for t, m in client.responses() if t == cp.ON_UNAVAILABLE_IMAGE]
    assert [(m.correlation_id, m.subscription_registration_id) for m in unavailable] == [(pub_id, sub_id)]
    assert not any(True for _ in harness.conductor.publications)
    assert not os.path.exists(pub.log_file_name)
    assert harness.counters_by_type(cl.SUBSCRIBER_POSITION_TYPE_ID) == []
    assert harness.counters_by_type(cl.PUBLISHER_LIMIT_TYPE_ID) == []
    assert harness.system_counter(cl.BYTES_CURRENTLY_MAPPED) == mapped_at_start


def test_silent_client_is_timed_out_and_its_resources_freed(harness):
    client = RawClient(harness.cnc)
    other = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=5, channel="aeron:ipc")
    client.send(cp.ADD_COUNTER, dc.CounterMessage, type_id=1001, key=b"", label="c")
    other.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=6,
               channel="aeron:ipc")
    harness.work()
    harness.advance(LIVENESS_MS + 500, keep_alive=[other])
    assert harness.system_counter(cl.CLIENT_TIMEOUTS) == 1
    timeouts = [m for t, m in other.responses() if t == cp.ON_CLIENT_TIMEOUT]
    assert [m.client_id for m in timeouts] == [client.client_id]
    labels = [c.label for c in harness.reader.counters()]
    assert f"client-heartbeat: id={client.client_id}" not in labels and "c" not in labels
    assert f"client-heartbeat: id={other.client_id}" in labels
    harness.advance(3 * TIMER_MS)  # the orphaned publication drains and goes
    assert harness.conductor.publications == []


def test_publisher_that_died_mid_claim_is_unblocked(harness):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=5, channel="aeron:ipc")
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=5,
                channel="aeron:ipc")
    harness.work(2)
    responses = client.responses()
    pub = responses[0][1]
    image = [m for t, m in responses if t == cp.ON_AVAILABLE_IMAGE][0]
    values = harness.cnc.counters_values_buffer
    with LogBuffers.open(pub.log_file_name) as log:
        state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = pub.position_limit_counter_id * cl.COUNTER_LENGTH
        claim = np.zeros(P.CLAIM_LENGTH, np.int64)
        assert TA.concurrent_try_claim(log.buffer, state, values, 100, claim) > 0  # ... and the claimer dies
        message = np.arange(50, dtype=np.uint8)
        assert TA.concurrent_offer(log.buffer, state, values, message, 0, 50, 7) > 0
        out = np.zeros((8, TR.FRAGMENT_COLUMNS), np.int64)
        position_offset = image.subscriber_position_id * cl.COUNTER_LENGTH
        assert TR.image_poll_batch(log.buffer, 0, out)[0] == 0  # blocked behind the dead claim
        for _ in range(UNBLOCK_MS // TIMER_MS + 20):
            harness.advance(TIMER_MS, keep_alive=[client])
            if harness.system_counter(cl.UNBLOCKED_PUBLICATIONS):
                break
        assert harness.system_counter(cl.UNBLOCKED_PUBLICATIONS) == 1
        count, position = TR.image_poll_batch(log.buffer, 0, out)
        assert count == 1 and out[0, TR.FRAGMENT_FRAME_LENGTH] == 82  # the later message, intact
        assert position == 160 + 96
        values[position_offset : position_offset + 8].view(np.int64)[0] = position
        del state, claim, out


@pytest.mark.parametrize("damage", ["dead_claim", "zeroed_length", "garbage_length"])
def test_blocked_or_corrupt_command_head_is_skipped_and_later_commands_served(harness, damage):
    ring = ManyToOneRingBuffer(harness.cnc.to_driver_buffer)
    head_index = ring.consumer_position() & (ring.capacity - 1)
    if damage == "dead_claim":
        assert ring.try_claim(cp.CLIENT_KEEPALIVE, 16) > 0  # the producer dies before commit
    else:
        assert ring.write(cp.CLIENT_KEEPALIVE, bytes(16))
        length_field = harness.cnc.to_driver_buffer[head_index : head_index + 4].view(np.int32)
        length_field[0] = 0 if damage == "zeroed_length" else 0x7000_0000
    client = RawClient(harness.cnc)
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=1,
                channel="aeron:ipc")
    harness.work(2)
    seen = [t for t, _ in client.responses()]
    if damage != "garbage_length":  # a blocked head waits out the client liveness timeout first
        assert seen == []
        harness.advance(LIVENESS_MS + 2 * TIMER_MS)
        seen = [t for t, _ in client.responses()]
    assert cp.ON_SUBSCRIPTION_READY in seen
    assert harness.system_counter(cl.UNBLOCKED_COMMANDS) == 1
    if damage == "garbage_length":  # skipped by the driver, not by Agrona's unblock: recorded
        text = ErrorLogReader.read(harness.cnc.error_log_buffer)[0].encoded_exception
        assert "to-driver buffer" in text and "skipped 24 bytes" in text


def test_skipping_a_corrupt_head_never_skips_a_record_still_being_written(harness):
    ring = ManyToOneRingBuffer(harness.cnc.to_driver_buffer)
    head_index = ring.consumer_position() & (ring.capacity - 1)
    assert ring.write(cp.CLIENT_KEEPALIVE, bytes(16))
    harness.cnc.to_driver_buffer[head_index : head_index + 4].view(np.int32)[0] = 3  # garbage length
    client = RawClient(harness.cnc)
    correlation_id = client.ring.next_correlation_id()
    body = dc.SubscriptionMessage(client_id=client.client_id, correlation_id=correlation_id,
                                  registration_correlation_id=-1, stream_id=1, channel="aeron:ipc").encode()
    index = ring.try_claim(cp.ADD_SUBSCRIPTION, len(body))  # in progress while the driver skips the garbage
    harness.work(2)
    harness.cnc.to_driver_buffer[index : index + len(body)] = np.frombuffer(body, np.uint8)
    ring.commit(index)
    harness.work(2)
    assert [t for t, _ in client.responses()] == [cp.ON_SUBSCRIPTION_READY]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(st.integers(-5, 0x20), st.binary(max_size=300)), max_size=12),
       raw=st.binary(max_size=200), raw_at=st.integers(0, 4000))
def test_garbage_in_the_to_driver_buffer_never_stops_the_driver(shm_dir, records, raw, raw_at):
    harness = Harness(shm_dir / f"aeron-{len(list(shm_dir.iterdir()))}")  # a fresh driver per example
    try:
        ring = ManyToOneRingBuffer(harness.cnc.to_driver_buffer)
        for msg_type_id, body in records:
            if msg_type_id >= 1:
                ring.write(msg_type_id, body)
        buffer = harness.cnc.to_driver_buffer
        capacity = buffer.size - 768
        at = raw_at % (capacity - len(raw))
        buffer[at : at + len(raw)] = np.frombuffer(raw, np.uint8)  # a rogue process scribbles
        harness.work(3)
        # Whatever happened, the driver still serves a well-behaved client.
        client = RawClient(harness.cnc)
        client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=1,
                    channel="aeron:ipc")
        seen = []
        for _ in range(3):  # a blocked head is unblocked after the client liveness timeout
            harness.work()
            harness.advance(LIVENESS_MS + 2 * TIMER_MS)
            seen += [t for t, _ in client.responses()]
            if cp.ON_SUBSCRIPTION_READY in seen:
                break
        assert cp.ON_SUBSCRIPTION_READY in seen, f"responses seen: {seen}"
    finally:
        harness.close()


def test_a_log_the_disk_cannot_hold_is_refused_with_storage_space_and_no_file_is_left(harness, monkeypatch):
    client = RawClient(harness.cnc)
    real_statvfs = os.statvfs

    class NearlyFull:  # what statvfs reports on a file system with one page free
        def __init__(self, path):
            stats = real_statvfs(path)
            self.f_frsize, self.f_bavail = stats.f_frsize, 1

    monkeypatch.setattr(os, "statvfs", NearlyFull)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
    harness.work()
    (response_type, error), = client.responses()
    assert response_type == cp.ON_ERROR and error.error_code == cp.STORAGE_SPACE
    assert "insufficient usable storage for new log of length=" in error.error_message
    assert list((harness.conductor.publications_dir).glob("*")) == []
    monkeypatch.setattr(os, "statvfs", real_statvfs)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
    harness.work()
    assert [t for t, _ in client.responses()] == [cp.ON_PUBLICATION_READY]


@pytest.mark.parametrize("error_number, code", [(errno.EFBIG, cp.GENERIC_ERROR), (errno.ENOSPC, cp.STORAGE_SPACE)])
def test_a_log_file_that_cannot_be_sized_is_removed_and_reported(harness, monkeypatch, error_number, code):
    """Only a full disk is STORAGE_SPACE, as in Aeron's C driver (ENOSPC) and Java's; any other errno is GENERIC."""
    from aeron_numba.layout import mapped_file

    client = RawClient(harness.cnc)

    def cannot_size(fd, length):
        raise OSError(error_number, os.strerror(error_number))

    monkeypatch.setattr(mapped_file.os, "ftruncate", cannot_size)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc")
    harness.work()
    (response_type, error), = client.responses()
    assert response_type == cp.ON_ERROR and error.error_code == code
    assert "cannot create" in error.error_message and os.strerror(error_number) in error.error_message
    assert list((harness.conductor.publications_dir).glob("*")) == []
    assert harness.system_counter(cl.ERRORS) == 1


UNTETHERED = "aeron:ipc?tether=false|untethered-window-limit-timeout=1s|untethered-resting-timeout=2s"


def test_an_untethered_subscriber_that_falls_behind_is_dropped_rests_and_rejoins(harness):
    """§15.2: ACTIVE -> (behind for 1 s) LINGER -> (1 s) RESTING, ignored by flow control -> (2 s) ACTIVE again
    at the consumer position. The tethered subscriber beside it is never dropped."""
    client = RawClient(harness.cnc)
    client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    tethered_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                              stream_id=7, channel="aeron:ipc")
    untethered_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                                stream_id=7, channel=UNTETHERED)
    harness.work(2)
    responses = client.responses()
    pub = responses[0][1]
    images = {m.subscription_registration_id: m for t, m in responses if t == cp.ON_AVAILABLE_IMAGE}
    tethered_counter = images[tethered_id].subscriber_position_id
    untethered_counter = images[untethered_id].subscriber_position_id
    window = TERM_LENGTH // 2
    producer = window - 2048
    values = harness.cnc.counters_values_buffer
    with LogBuffers.open(pub.log_file_name) as log:  # the publisher wrote up to `producer`
        tail_offset = log.metadata_offset + lb.term_tail_counter_offset(0)
        raw_tail = int(log.buffer[tail_offset:tail_offset + 8].view(np.int64)[0])
        log.buffer[tail_offset:tail_offset + 8].view(np.int64)[0] = raw_tail + producer
    ck.set_counter_value(values, tethered_counter, producer)  # the tethered one keeps up, the other reads nothing
    harness.advance(900, keep_alive=[client])
    assert client.responses() == []
    harness.advance(300, keep_alive=[client])
    (t, gone), = client.responses()
    assert t == cp.ON_UNAVAILABLE_IMAGE and gone.subscription_registration_id == untethered_id
    assert harness.reader.get_counter_value(pub.position_limit_counter_id) == window  # LINGER still holds it
    harness.advance(1100, keep_alive=[client])
    assert harness.reader.get_counter_value(pub.position_limit_counter_id) == producer + window  # RESTING
    harness.advance(2100, keep_alive=[client])
    (t, back), = client.responses()
    assert t == cp.ON_AVAILABLE_IMAGE and back.subscription_registration_id == untethered_id
    assert back.subscriber_position_id == untethered_counter
    assert harness.reader.get_counter_value(untethered_counter) == producer  # rejoins at the consumer position
    harness.advance(2000, keep_alive=[client])
    assert client.responses() == []  # caught up: stays ACTIVE; the tethered one was never dropped


def test_a_subscriber_that_replaces_one_that_read_everything_joins_where_it_left_off(harness):
    """Aeron's removeSubscriber takes the leaving subscriber's position into the consumer position before it goes:
    the next subscriber (at the consumer position, none other being left) must not read again what was read (a
    restarted cluster service read a ServiceTerminationPosition meant for the one before it, and stopped)."""
    client = RawClient(harness.cnc)
    client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    first_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                           stream_id=7, channel="aeron:ipc")
    harness.work(2)
    responses = client.responses()
    pub = responses[0][1]
    (first,) = [m for t, m in responses if t == cp.ON_AVAILABLE_IMAGE]
    producer = 4096
    with LogBuffers.open(pub.log_file_name) as log:  # the publisher wrote up to `producer`
        tail_offset = log.metadata_offset + lb.term_tail_counter_offset(0)
        log.buffer[tail_offset:tail_offset + 8].view(np.int64)[0] += producer
    ck.set_counter_value(harness.cnc.counters_values_buffer, first.subscriber_position_id, producer)  # read it all
    client.send(cp.REMOVE_SUBSCRIPTION, dc.RemoveMessage, registration_id=first_id)  # and left at once
    second_id = client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1,
                            stream_id=7, channel="aeron:ipc")
    harness.work(1)
    (second,) = [m for t, m in client.responses() if t == cp.ON_AVAILABLE_IMAGE]
    assert second.subscription_registration_id == second_id
    assert harness.reader.get_counter_value(second.subscriber_position_id) == producer


def test_a_tethered_subscriber_is_never_dropped_however_far_behind(harness):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel="aeron:ipc?tether=true|untethered-window-limit-timeout=1s")
    harness.work(2)
    pub = client.responses()[0][1]
    with LogBuffers.open(pub.log_file_name) as log:
        tail_offset = log.metadata_offset + lb.term_tail_counter_offset(0)
        log.buffer[tail_offset:tail_offset + 8].view(np.int64)[0] += TERM_LENGTH // 2
    harness.advance(5000, keep_alive=[client])
    assert client.responses() == []
    assert harness.reader.get_counter_value(pub.position_limit_counter_id) == TERM_LENGTH // 2


@pytest.mark.parametrize("channel, code", [("aeron:ipc?tether=maybe", cp.GENERIC_ERROR),
                                           ("aeron:ipc?tether=false|untethered-resting-timeout=-1", cp.GENERIC_ERROR)])
def test_bad_tether_parameters_are_refused(harness, channel, code):
    client = RawClient(harness.cnc)
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel=channel)
    harness.work()
    (t, error), = client.responses()
    assert t == cp.ON_ERROR and error.error_code == code


def _idle_client_with_a_stream(harness) -> RawClient:
    """A client with an IPC publication and a subscription to it, the commands answered and the limit moved."""
    client = RawClient(harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel="aeron:ipc")
    harness.work(3)
    assert [t for t, _ in client.responses()] == [
        cp.ON_PUBLICATION_READY, cp.ON_SUBSCRIPTION_READY, cp.ON_AVAILABLE_IMAGE]
    return client


def test_an_idle_conductor_does_no_work_between_timer_intervals(harness):
    """Nothing to do is 0 work, however the clocks move inside a timer interval: a count above 0 would reset the
    backoff idle strategy to spinning (issue 16: an idle driver took 17 % of a core for a 1 ms heartbeat)."""
    _idle_client_with_a_stream(harness)
    harness.advance(TIMER_MS)  # the timer has just run: the next one is a whole interval away
    for _ in range(TIMER_MS - 1):
        harness.nano.advance(1 * MS)
        harness.epoch.advance(1)
        assert harness.conductor.do_work() == 0


def test_the_to_driver_heartbeat_is_written_once_per_timer_interval(harness):
    """As Aeron's conductor does on its timer: the heartbeat age a client sees stays under the timer interval,
    far inside driver_timeout_ms (10 s by default)."""
    to_driver = ManyToOneRingBuffer(harness.cnc.to_driver_buffer)
    assert to_driver.consumer_heartbeat_time() == harness.epoch.time()  # on start
    for _ in range(3):
        written_ms = harness.epoch.time()
        for _ in range(TIMER_MS - 1):
            harness.nano.advance(1 * MS)
            harness.epoch.advance(1)
            harness.work()
            assert to_driver.consumer_heartbeat_time() == written_ms
        harness.nano.advance(1 * MS)
        harness.epoch.advance(1)
        harness.work()
        assert to_driver.consumer_heartbeat_time() == harness.epoch.time() == written_ms + TIMER_MS


def test_a_timer_interval_at_or_past_the_driver_timeout_is_refused(tmp_path):
    """The to-driver heartbeat is written on the timer: with a timer this slow, clients would think the driver
    dead between two heartbeats."""
    from aeron_numba.driver.context import DriverContext
    from aeron_numba.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="timer_interval_ns=2000000000 must be < driver_timeout_ms=2000"):
        DriverContext(aeron_dir=str(tmp_path / "aeron"), timer_interval_ns=2_000_000_000, driver_timeout_ms=2000,
                      client_liveness_timeout_ns=1_000_000_000).conclude()
    DriverContext(aeron_dir=str(tmp_path / "aeron"), timer_interval_ns=1_999_000_000, driver_timeout_ms=2000,
                  client_liveness_timeout_ns=1_000_000_000).conclude()


# ------------------------------------------------------------------------------------------------- idle watch
IDLE_TIMER_MS = 5_000


@pytest.fixture
def idle_harness(shm_dir):
    """The harness on the monotonic clock: a compiled wait's deadline is in ``time.monotonic_ns`` time."""
    # Beside, not over, the ``harness`` fixture's driver. Its timer is seconds away so that real time passing
    # under load cannot run it between a test's steps (an idle cycle must find no work).
    h = Harness(shm_dir / "aeron-idle", timer_interval_ns=IDLE_TIMER_MS * MS)
    h.conductor.nano_clock = time.monotonic_ns
    h.conductor.network.sender.nano_clock = h.conductor.network.receiver.nano_clock = time.monotonic_ns
    for agent in h.driver.runner.agent.agents:  # the network cycles hand what they read to Python with their time
        if isinstance(agent, NetworkCycles):
            agent.nano_clock = time.monotonic_ns
    h.conductor.time_of_last_timer_ns = time.monotonic_ns()
    yield h
    h.close()


def idle_watch_after_cycle(harness):
    """The runner's order: ask for the watch and snapshot it, then the duty cycle that finds no work."""
    from aeron_numba.agent.idle_watch import IdleWatch

    watch = IdleWatch()
    assert harness.driver.runner.agent.add_idle_watch(watch)
    watch.snapshot()
    assert harness.driver.runner.agent.do_work() == 0
    return watch


def settled_watch(harness, attempts: int = 500):
    """``idle_watch_after_cycle`` once a live UDP stream's traffic (SETUP, status messages, heartbeats) leaves a
    cycle with nothing to do."""
    from aeron_numba.agent.idle_watch import IdleWatch

    agent = harness.driver.runner.agent
    for _ in range(attempts):
        watch = IdleWatch()
        assert agent.add_idle_watch(watch)
        watch.snapshot()
        if agent.do_work() == 0:
            return watch
    raise AssertionError(f"the driver found work in each of {attempts} cycles")


def test_an_idle_driver_is_woken_by_a_command_and_runs_by_its_next_timer(idle_harness):
    watch = idle_watch_after_cycle(idle_harness)
    assert watch.deadline_ns == idle_harness.conductor.time_of_last_timer_ns + IDLE_TIMER_MS * MS
    assert not watch.changed()
    client = RawClient(idle_harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc")
    assert watch.changed()
    assert idle_harness.driver.runner.agent.do_work() > 0


def test_an_idle_driver_is_woken_by_a_claimed_command_when_it_is_committed(idle_harness):
    """A command claimed before the idle cycle but committed after it: the record at head is watched too."""
    client = RawClient(idle_harness.cnc)
    index = client.ring.try_claim(cp.CLIENT_KEEPALIVE, 16)
    watch = idle_watch_after_cycle(idle_harness)
    client.ring.commit(index)
    assert watch.changed()


def test_an_idle_driver_is_woken_by_an_ipc_publisher_or_subscriber_moving(idle_harness):
    client = RawClient(idle_harness.cnc)
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=7, channel="aeron:ipc?term-length=64k")
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=7,
                channel="aeron:ipc")
    idle_harness.work(3)
    responses = client.responses()
    pub = next(m for t, m in responses if t == cp.ON_PUBLICATION_READY)
    image = next(m for t, m in responses if t == cp.ON_AVAILABLE_IMAGE)
    watch = idle_watch_after_cycle(idle_harness)
    values = idle_harness.cnc.counters_values_buffer
    with LogBuffers.open(pub.log_file_name) as log:
        state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = pub.position_limit_counter_id * cl.COUNTER_LENGTH
        assert TA.concurrent_offer(log.buffer, state, values, np.arange(50, dtype=np.uint8), 0, 50, 0) > 0
    assert watch.changed()  # the publisher appended
    watch = idle_watch_after_cycle(idle_harness)  # the driver publishes pub-pos for it: idle again
    ck.set_counter_value(values, image.subscriber_position_id, 64)  # the subscriber consumes
    assert watch.changed()


def test_a_driver_with_a_test_clock_idles_one_cycle_at_a_time(harness):
    from aeron_numba.agent.idle_watch import IdleWatch

    assert not harness.driver.runner.agent.add_idle_watch(IdleWatch())  # the cached clock is not the wait's


def test_an_idle_driver_with_udp_streams_is_woken_by_a_datagram_or_a_publisher(idle_harness):
    """SHARED mode: the sender and receiver name their sockets, so the driver waits in compiled code and a datagram
    ends the wait at once; a publisher's claim or commit on a network publication ends it too; the timers run at
    least every IDLE_TIMER_CHECK_NS and never sooner than SHORT_TIMER_CHECK_NS from now."""
    from aeron_numba.driver.receiver import IDLE_TIMER_CHECK_NS, SHORT_TIMER_CHECK_NS
    from aeron_numba.kernels import idle_wait as iw

    client = RawClient(idle_harness.cnc)
    client.send(cp.ADD_SUBSCRIPTION, dc.SubscriptionMessage, registration_correlation_id=-1, stream_id=9,
                channel="aeron:udp?endpoint=127.0.0.1:0")
    idle_harness.work(2)
    endpoint = next(iter(idle_harness.conductor.network.receive_endpoints.values()))
    port = endpoint.destinations[0].transport.local_port
    client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=9,
                channel=f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k")
    idle_harness.work(3)
    pub = next(m for t, m in client.responses() if t == cp.ON_PUBLICATION_READY)
    before = time.monotonic_ns()
    watch = settled_watch(idle_harness)
    assert watch.socket_count == 2  # the receive socket and the publication's send socket
    assert watch.deadline_ns <= time.monotonic_ns() + IDLE_TIMER_CHECK_NS
    assert watch.deadline_ns >= before + SHORT_TIMER_CHECK_NS
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(b"\0" * 8, ("127.0.0.1", port))  # not a frame: the wait only sees a datagram arrive
        assert watch.park_until_changed(1_000_000, time.monotonic_ns() + 60 * 10**9) == (1, iw.WOKEN_BY_SOCKET)
    watch = settled_watch(idle_harness)  # its first cycle reads (and counts as invalid) the stray datagram
    values = idle_harness.cnc.counters_values_buffer
    with LogBuffers.open(pub.log_file_name) as log:
        state = np.zeros(P.PUB_STATE_LENGTH, np.int64)
        state[P.PUB_STATE_LIMIT_COUNTER_OFFSET] = pub.position_limit_counter_id * cl.COUNTER_LENGTH
        assert TA.concurrent_offer(log.buffer, state, values, np.arange(50, dtype=np.uint8), 0, 50, 0) > 0
    assert watch.changed()  # the publisher appended: the sender has data to send
