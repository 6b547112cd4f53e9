"""Cluster's four protocols as message sets (``codecs/cluster_messages.py``) and generated proxies
(``codecs/cluster_proxies.py``): every schema message travels on some direction or is documented as never sent;
an adapter of each direction passes its construction check only with a handler per message and hands each
message's fields from the wire to its handler; every proxy method's bytes decode back to the fields sent; and an
application message's payload travels after its SessionMessageHeader, as Aeron lays it out."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from aeron_numba.codecs import cluster_messages as M
from aeron_numba.codecs import cluster_proxies as P
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.sbe import MalformedMessageError, SbeCodec
from aeron_numba.codecs.sbe_adapter import MissingHandlerError, SbeAdapter, handler_name
from aeron_numba.layout.cluster_schema import CLUSTER_SCHEMA
from tests.unit.codecs.sbe_support import Publication, check_send_methods, field_values, recording_listener

DIRECTIONS = {
    "INGRESS": M.INGRESS, "EGRESS": M.EGRESS, "CONSENSUS": M.CONSENSUS, "BACKUP_RESPONSES": M.BACKUP_RESPONSES,
    "TO_SERVICE": M.TO_SERVICE, "TO_CONSENSUS_MODULE": M.TO_CONSENSUS_MODULE, "LOG": M.LOG,
    "CONSENSUS_MODULE_SNAPSHOT": M.CONSENSUS_MODULE_SNAPSHOT, "SERVICE_SNAPSHOT": M.SERVICE_SNAPSHOT,
}

PROXIES = [
    (P.IngressProxy, M.INGRESS),
    (P.EgressPublisher, M.EGRESS),
    (P.ConsensusPublisher, M.CONSENSUS + M.BACKUP_RESPONSES),
    (P.ServiceProxy, M.TO_SERVICE),
    (P.ConsensusModuleProxy, M.TO_CONSENSUS_MODULE),
    (P.LogPublisher, M.LOG),
    (P.ConsensusModuleSnapshotTaker, M.CONSENSUS_MODULE_SNAPSHOT),
    (P.ServiceSnapshotTaker, M.SERVICE_SNAPSHOT),
]


def test_every_schema_message_travels_on_a_direction_or_is_documented_as_never_sent():
    schema_names = {m.name for m in CLUSTER_SCHEMA.messages}
    sent = set()
    for direction, names in DIRECTIONS.items():
        assert len(set(names)) == len(names), f"{direction} lists a message twice"
        assert set(names) <= schema_names, f"{direction}: {set(names) - schema_names} are not schema messages"
        sent |= set(names)
    assert not sent & set(M.NOT_SENT), f"{sent & set(M.NOT_SENT)} are sent and listed as never sent"
    assert sent | set(M.NOT_SENT) == schema_names, f"{schema_names - sent - set(M.NOT_SENT)} are in no set"
    # every direction has a generated sender, and every generated sender's messages are its directions'
    assert {name for _, sends in PROXIES for name in sends} == sent


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_an_adapter_of_each_direction_needs_a_handler_per_message_and_hands_it_the_fields_from_the_wire(direction):
    names = DIRECTIONS[direction]
    calls, errors = [], []
    adapter = SbeAdapter(CLUSTER, recording_listener(names, calls), names, context=("header",),
                         on_error=errors.append, name=direction)
    assert adapter.template_ids == {CLUSTER_SCHEMA.message(n).template_id for n in names}
    for name in names:
        values = field_values(CLUSTER, name)
        data = CLUSTER.encode(getattr(CLUSTER, name)(**values))
        adapter.on_fragment(data, 0, len(data), "the header")
        assert calls[-1] == (name, ("the header",), values)
    assert len(calls) == len(names) and errors == [] and adapter.malformed_count == 0
    for missing in names:
        listener = recording_listener([n for n in names if n != missing], [])
        with pytest.raises(MissingHandlerError, match=f"{direction}: {missing} .*has no handler "
                                                      f"Listener.{handler_name(missing)} and is not declared"):
            SbeAdapter(CLUSTER, listener, names, name=direction)


def test_a_message_of_another_direction_is_counted_and_never_reaches_the_listener():
    calls, errors = [], []
    adapter = SbeAdapter(CLUSTER, recording_listener(M.INGRESS, calls), M.INGRESS, on_error=errors.append,
                         name="IngressAdapter")
    data = CLUSTER.encode(CLUSTER.CommitPosition(leadership_term_id=1, log_position=2, leader_member_id=3))
    adapter.on_fragment(data, 0, len(data), None)
    assert calls == [] and adapter.malformed_count == 1
    assert errors == ["IngressAdapter: message dropped: templateId=55 (CommitPosition) is not a message "
                      "IngressAdapter receives"]


@pytest.mark.parametrize("proxy_class, sends", PROXIES, ids=[c.__name__ for c, _ in PROXIES])
def test_every_generated_cluster_proxy_method_sends_the_codec_encoding_of_its_fields(proxy_class, sends):
    check_send_methods(CLUSTER, proxy_class, sends)


def test_an_application_message_is_the_32_byte_session_header_then_the_payload_as_aeron_lays_it_out():
    assert M.SESSION_HEADER_LENGTH == 32  # spec/cluster.md §6
    publication = Publication()
    proxy = P.IngressProxy(publication)
    application = np.arange(100, dtype=np.uint8)
    assert proxy.session_message_header(leadership_term_id=5, cluster_session_id=7, timestamp=-1,
                                        payload=application[10:30])  # a slice of the caller's buffer, copied
    [sent] = publication.sent
    assert sent[:M.SESSION_HEADER_LENGTH] == struct.pack("<HHHHqqq", 24, 1, 111, 12, 5, 7, -1)
    assert sent[M.SESSION_HEADER_LENGTH:] == bytes(range(10, 30))
    # an empty payload is a message too (Aeron offers zero-length application messages)
    assert proxy.session_message_header(leadership_term_id=5, cluster_session_id=7, timestamp=0, payload=b"")
    assert len(publication.sent[-1]) == M.SESSION_HEADER_LENGTH
    assert CLUSTER.decode(publication.sent[-1]).payload == b""


def test_the_payload_ends_at_the_fragment_end_and_the_handler_gets_it_as_a_copy():
    message = CLUSTER.SessionMessageHeader(leadership_term_id=1, cluster_session_id=2, timestamp=3,
                                           payload=b"order:42")
    data = bytearray(b"\xee" * 16 + CLUSTER.encode(message) + b"\xee" * 16)  # the fragment inside a term
    length = M.SESSION_HEADER_LENGTH + 8
    assert CLUSTER.decode(data, 16, length) == message
    calls = []
    adapter = SbeAdapter(CLUSTER, recording_listener(M.LOG, calls), M.LOG)
    adapter.on_fragment(data, 16, length, None)
    data[16:16 + length] = bytes(length)  # the term is reused once the poll returns...
    assert calls == [("SessionMessageHeader", (), {"leadership_term_id": 1, "cluster_session_id": 2,
                                                    "timestamp": 3, "payload": b"order:42"})]  # ...the copy stays


def test_a_payload_longer_than_the_proxy_buffer_grows_it_and_one_too_long_for_a_buffer_is_refused():
    publication = Publication()
    proxy = P.LogPublisher(publication, initial_capacity=64)
    payload = bytes(range(256)) * 8
    assert proxy.session_message_header(leadership_term_id=1, cluster_session_id=2, timestamp=3, payload=payload)
    assert proxy.buffer.size == 4096 and CLUSTER.decode(publication.sent[0]).payload == payload
    message = CLUSTER.SessionMessageHeader(payload=b"x" * 40)
    with pytest.raises(MalformedMessageError, match="SessionMessageHeader.payload: length=40 at 32 past a buffer "
                                                    "of 64 bytes"):
        CLUSTER.encode_into(bytearray(64), 0, message)


def test_only_a_message_without_a_payload_field_can_head_a_payload():
    with pytest.raises(ValueError, match="AdminRequest has a field named 'payload'"):
        SbeCodec(CLUSTER_SCHEMA, payload_follows=("AdminRequest",))
    with pytest.raises(KeyError, match="NoSuchMessage"):
        SbeCodec(CLUSTER_SCHEMA, payload_follows=("NoSuchMessage",))
    # without it, bytes after a message are not its own: the archive's messages keep ignoring them
    plain = SbeCodec(CLUSTER_SCHEMA)
    data = plain.encode(plain.SessionMessageHeader(leadership_term_id=1)) + b"after"
    assert not hasattr(plain.decode(data), "payload") and plain.decode(data).leadership_term_id == 1
