"""SBE codecs of the archive (schema 101 v10) and cluster (schema 111 v12) messages (spec/archive.md §1, §8;
spec/cluster.md §13).

The golden messages below are typed from the spec's tables by hand (struct formats and offsets written here,
not taken from ``aeron_numba.layout``), so a wrong schema description cannot hide itself; every other message
round-trips with hypothesis values. Older and newer versions, and garbage, are decoded as the spec says.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.codecs.archive_messages import ARCHIVE
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.sbe import MalformedMessageError, UnknownMessageError
from aeron_numba.layout import sbe as L


def header(block_length, template_id, schema_id, version):
    return struct.pack("<HHHH", block_length, template_id, schema_id, version)


def var(text: str | bytes) -> bytes:
    data = text.encode("ascii") if isinstance(text, str) else text
    return struct.pack("<I", len(data)) + data


# ------------------------------------------------------------------------------------------ golden bytes
def test_control_response_bytes_are_the_spec_table():
    # templateId=1, blockLength=32: controlSessionId@0 i64, correlationId@8 i64, relevantId@16 i64, code@24 i32,
    # version@28 i32, then errorMessage (u32 length + ASCII)
    expected = header(32, 1, 101, 10) + struct.pack("<qqqii", 5, 6, 7, 1, 68352) + var("bad request")
    message = ARCHIVE.ControlResponse(control_session_id=5, correlation_id=6, relevant_id=7, code=1, version=68352,
                                      error_message="bad request")
    assert ARCHIVE.encode(message) == expected
    assert ARCHIVE.decode(expected) == message


def test_recording_descriptor_bytes_are_the_catalog_body_of_the_spec():
    # templateId=22, blockLength=80 (§8), the same body a catalog entry holds (§3.2)
    block = struct.pack("<qqqqqqqiiiiii", 1, 2, 3, 1000, -1, 0, -1, 17, 128 << 20, 64 * 1024, 1408, -9, 1001)
    expected = header(80, 22, 101, 10) + block + var("aeron:ipc") + var("aeron:ipc?term-length=64k") + var("aeron:ipc")
    message = ARCHIVE.decode(expected)
    assert (message.recording_id, message.start_timestamp, message.stop_timestamp, message.stop_position) == (3, 1000, -1, -1)
    assert (message.initial_term_id, message.segment_file_length, message.term_buffer_length, message.mtu_length,
            message.session_id, message.stream_id) == (17, 128 << 20, 64 * 1024, 1408, -9, 1001)
    assert (message.stripped_channel, message.original_channel, message.source_identity) == (
        "aeron:ipc", "aeron:ipc?term-length=64k", "aeron:ipc")
    assert ARCHIVE.encode(message) == expected


def test_replay_request_fields_at_their_offsets_with_since_versions():
    # templateId=6, blockLength=56: ..., replayStreamId@40 i32, fileIoMaxLength@44 i32 (v7), replayToken@48 i64 (v10)
    expected = header(56, 6, 101, 10) + struct.pack("<qqqqqiiq", 1, 2, 3, 64, -1, 1002, 1 << 20, -1) + var("aeron:ipc")
    message = ARCHIVE.ReplayRequest(control_session_id=1, correlation_id=2, recording_id=3, position=64, length=-1,
                                    replay_stream_id=1002, file_io_max_length=1 << 20, replay_token=-1,
                                    replay_channel="aeron:ipc")
    assert ARCHIVE.encode(message) == expected


def test_a_cluster_message_with_groups_is_the_spec_table():
    # ClusterMembersExtendedResponse, templateId=43, blockLength=24, then group activeMembers (entry 28 bytes + five
    # var strings), group passiveMembers
    entry = struct.pack("<qqqi", 4, 4096, 123, 2) + b"".join(var(f"host{i}:900{i}") for i in range(5))
    expected = (header(24, 43, 111, 12) + struct.pack("<qqii", 77, 999, 2, 1) + struct.pack("<HH", 28, 1) + entry
                + struct.pack("<HH", 28, 0))
    message = CLUSTER.decode(expected)
    assert (message.correlation_id, message.current_time_ns, message.leader_member_id, message.member_id) == (77, 999, 2, 1)
    (member,) = message.active_members
    assert (member.leadership_term_id, member.log_position, member.time_of_last_append_ns, member.member_id) == (4, 4096, 123, 2)
    assert (member.ingress_endpoint, member.archive_endpoint) == ("host0:9000", "host4:9004")
    assert message.passive_members == ()
    assert CLUSTER.encode(message) == expected


def test_schema_descriptions_hold_what_the_spec_lists():
    assert (ARCHIVE.schema.schema_id, ARCHIVE.schema.version, len(ARCHIVE.schema.messages)) == (101, 10, 48)
    assert (CLUSTER.schema.schema_id, CLUSTER.schema.version, len(CLUSTER.schema.messages)) == (111, 12, 54)
    assert ARCHIVE.schema.enums["RecordingSignal"]["REPLICATE_END"] == 7
    assert ARCHIVE.schema.enums["RecordingState"] == {"INVALID": 0, "VALID": 1, "DELETED": 2}
    assert CLUSTER.schema.enums["EventCode"]["CLOSED"] == 4
    for codec in (ARCHIVE, CLUSTER):
        for message in codec.schema.messages:  # every field inside its block, none overlapping
            at = 0
            for f in sorted(message.fields, key=lambda f: f.offset):
                assert f.offset >= at and f.offset + f.size <= message.block_length, (message.name, f.name)
                at = f.offset + f.size


# ------------------------------------------------------------------------------------------ round trips
def _value(draw, spec_field: L.SbeField):
    fmt, size, _ = L.PRIMITIVES[spec_field.primitive]
    bits = 8 * size
    lo, hi = (0, (1 << bits) - 1) if fmt.isupper() else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return draw(st.integers(lo, hi))


def _var(draw, v: L.SbeVarField):
    if v.kind == L.VAR_ASCII:
        return draw(st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40))
    return draw(st.binary(max_size=40))


@st.composite
def messages(draw, codec):
    spec = draw(st.sampled_from(codec.schema.messages))
    values = {f.name: _value(draw, f) for f in spec.fields}
    for group in spec.groups:
        entries = []
        for _ in range(draw(st.integers(0, 3))):
            entry = {f.name: _value(draw, f) for f in group.fields}
            entry.update({v.name: _var(draw, v) for v in group.var_fields})
            entries.append(entry)
        values[group.name] = entries
    values.update({v.name: _var(draw, v) for v in spec.var_fields})
    if spec.name in codec.payload_follows:  # the application's bytes after a SessionMessageHeader
        values["payload"] = draw(st.binary(max_size=100))
    return spec, values


def _build(codec, spec, values):
    cls = getattr(codec, spec.name)
    groups = {}
    for group in spec.groups:
        entry_class = codec.group_class(spec.name, group.name)
        groups[group.name] = tuple(entry_class(**entry) for entry in values[group.name])
    return cls(**{**values, **groups})


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_message_of_both_schemas_round_trips(data):
    codec = data.draw(st.sampled_from([ARCHIVE, CLUSTER]))
    spec, values = data.draw(messages(codec))
    message = _build(codec, spec, values)
    encoded = codec.encode(message)
    assert struct.unpack_from("<HHHH", encoded) == (spec.block_length, spec.template_id, codec.schema.schema_id,
                                                    codec.schema.version)
    assert codec.template_id(encoded) == spec.template_id
    padded = b"\xAA" * 5 + encoded + b"\xBB" * 3
    assert codec.decode(padded, 5, len(encoded)) == message


# ------------------------------------------------------------------------------------------- versions
def test_an_older_version_reads_newer_fields_as_null():
    # A version-3 ControlResponse: blockLength 28 (no version field, since v4), then the error message.
    old = header(28, 1, 101, 3) + struct.pack("<qqqi", 5, 6, 7, 0) + var("fine")
    message = ARCHIVE.decode(old)
    assert (message.code, message.version, message.error_message) == (0, 0, "fine")  # version_t null is 0
    # A version-6 ReplayRequest block of 56 bytes still has no fileIoMaxLength (v7) or replayToken (v10).
    v6 = header(56, 6, 101, 6) + struct.pack("<qqqqqiiq", 1, 2, 3, 0, -1, 9, 12345, 777) + var("aeron:ipc")
    replay = ARCHIVE.decode(v6)
    assert (replay.replay_stream_id, replay.file_io_max_length, replay.replay_token) == (9, -(1 << 31), -(1 << 63))


def test_a_newer_version_with_a_longer_block_has_its_unknown_fields_skipped():
    newer = header(40, 1, 101, 11) + struct.pack("<qqqii", 5, 6, 7, 2, 68352) + b"\x01" * 8 + var("later")
    message = ARCHIVE.decode(newer)
    assert (message.code, message.version, message.error_message) == (2, 68352, "later")


# -------------------------------------------------------------------------------------------- garbage
@pytest.mark.parametrize("data, error, text", [
    (b"\x20\x00\x01", MalformedMessageError, "shorter than its 8-byte header"),
    (header(32, 1, 100, 10) + bytes(36), UnknownMessageError, "schemaId=100, expected 101"),
    (header(32, 999, 101, 10) + bytes(36), UnknownMessageError, "templateId=999"),
    (header(32, 1, 101, 10) + bytes(20), MalformedMessageError, "blockLength=32"),
    (header(32, 1, 101, 10) + bytes(32) + b"\x01\x00", MalformedMessageError, "error_message: length prefix"),
    (header(32, 1, 101, 10) + bytes(32) + struct.pack("<I", 1 << 31), MalformedMessageError,
     "error_message: length=2147483648 runs past"),
    (header(32, 1, 101, 10) + bytes(32) + var(b"\xff\xfe"), MalformedMessageError, "error_message is not ASCII"),
    (header(24, 43, 111, 12) + bytes(24) + struct.pack("<HH", 28, 1000), MalformedMessageError,
     "ClusterMembersExtendedResponse.active_members: blockLength=28"),
])
def test_garbage_gets_a_typed_error_naming_what_is_wrong(data, error, text):
    codec = CLUSTER if len(data) >= 8 and struct.unpack_from("<H", data, 4)[0] == 111 else ARCHIVE
    with pytest.raises(error, match=text.replace("[", r"\[")):
        codec.decode(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_but_the_typed_errors(data):
    for codec in (ARCHIVE, CLUSTER):
        try:
            codec.decode(data)
        except (MalformedMessageError, UnknownMessageError):
            pass


def test_encoding_refuses_values_that_do_not_fit_naming_the_message():
    with pytest.raises(MalformedMessageError, match="ControlResponse"):
        ARCHIVE.encode(ARCHIVE.ControlResponse(code=1 << 40))
    with pytest.raises(MalformedMessageError, match="ControlResponse.error_message is not ASCII"):
        ARCHIVE.encode(ARCHIVE.ControlResponse(error_message="caf\u00e9"))
