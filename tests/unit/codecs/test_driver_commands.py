"""Client<->driver message codecs against the byte offsets of spec/transport.md §11.3."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.codecs import driver_commands as dc

ascii_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)


def test_publication_message_offsets():
    data = dc.PublicationMessage(client_id=1, correlation_id=2, stream_id=1001, channel="aeron:ipc").encode()
    assert struct.unpack_from("<qqii", data, 0) == (1, 2, 1001, 9)
    assert data[24:] == b"aeron:ipc" and len(data) == 24 + 9


def test_subscription_message_offsets():
    data = dc.SubscriptionMessage(client_id=1, correlation_id=2, registration_correlation_id=-1, stream_id=7,
                                  channel="aeron:ipc").encode()
    assert struct.unpack_from("<qqqii", data, 0) == (1, 2, -1, 7, 9) and data[32:] == b"aeron:ipc"


def test_counter_message_aligns_the_label_after_the_key():
    data = dc.CounterMessage(client_id=1, correlation_id=2, type_id=1001, key=b"\x01\x02\x03\x04\x05",
                             label="my label").encode()
    assert struct.unpack_from("<qqii", data, 0) == (1, 2, 1001, 5)
    assert data[24:29] == b"\x01\x02\x03\x04\x05"
    label_at = 24 + 8  # align(5, 4)
    assert struct.unpack_from("<i", data, label_at)[0] == 8 and data[label_at + 4 :] == b"my label"
    assert len(data) == 28 + 8 + 8  # 28 + align(key_length, 4) + label_length


def test_image_buffers_ready_offsets():
    data = dc.ImageBuffersReady(correlation_id=5, session_id=6, stream_id=7, subscription_registration_id=8,
                                subscriber_position_id=9, log_file_name="/x/1.logbuffer",
                                source_identity="aeron:ipc").encode()
    assert struct.unpack_from("<qiiqii", data, 0) == (5, 6, 7, 8, 9, 14)
    assert data[32:46] == b"/x/1.logbuffer"
    source_at = 32 + 16
    assert struct.unpack_from("<i", data, source_at)[0] == 9 and data[source_at + 4 :] == b"aeron:ipc"


def test_publication_buffers_ready_and_error_offsets():
    ready = dc.PublicationBuffersReady(correlation_id=1, registration_id=2, session_id=3, stream_id=4,
                                       position_limit_counter_id=5, channel_status_indicator_id=-1,
                                       log_file_name="f").encode()
    assert struct.unpack_from("<qqiiiii", ready, 0) == (1, 2, 3, 4, 5, -1, 1) and ready[36:] == b"f"
    error = dc.ErrorResponse(offending_command_correlation_id=9, error_code=1, error_message="bad").encode()
    assert struct.unpack_from("<qii", error, 0) == (9, 1, 3) and error[16:] == b"bad"


def test_publication_error_frame_offsets():
    data = dc.PublicationErrorFrame(registration_id=1, destination_registration_id=2, session_id=3, stream_id=4,
                                    receiver_id=5, group_tag=6, address_type=1, source_port=40123,
                                    source_address=bytes([127, 0, 0, 1]) + bytes(12), error_code=7,
                                    error_message="x").encode()
    assert struct.unpack_from("<qqiiqqhH", data, 0) == (1, 2, 3, 4, 5, 6, 1, 40123)
    assert data[44:48] == bytes([127, 0, 0, 1])
    assert struct.unpack_from("<ii", data, 60) == (7, 1) and data[68:] == b"x"


MESSAGE_STRATEGIES = {
    dc.PublicationMessage: st.builds(dc.PublicationMessage, client_id=I64, correlation_id=I64, stream_id=I32,
                                     channel=ascii_text),
    dc.CounterMessage: st.builds(dc.CounterMessage, client_id=I64, correlation_id=I64, type_id=I32,
                                 key=st.binary(max_size=112), label=ascii_text),
    dc.ImageBuffersReady: st.builds(dc.ImageBuffersReady, correlation_id=I64, session_id=I32, stream_id=I32,
                                    subscription_registration_id=I64, subscriber_position_id=I32,
                                    log_file_name=ascii_text, source_identity=ascii_text),
    dc.RejectImageMessage: st.builds(dc.RejectImageMessage, client_id=I64, correlation_id=I64,
                                     image_correlation_id=I64, position=I64, reason=ascii_text),
}


@settings(max_examples=200, deadline=None)
@given(st.one_of(*MESSAGE_STRATEGIES.values()), st.integers(0, 16))
def test_round_trip_at_any_offset_in_a_numpy_buffer(message, pad):
    data = message.encode()
    buffer = np.zeros(pad + len(data) + 8, np.uint8)
    buffer[pad : pad + len(data)] = np.frombuffer(data, np.uint8)
    assert type(message).decode(buffer, pad, len(data)) == message


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(dc.COMMANDS)), st.binary(max_size=80))
def test_garbage_decodes_or_raises_malformed_never_anything_else(msg_type_id, garbage):
    try:
        message = dc.decode_command(msg_type_id, garbage, 0, len(garbage))
    except dc.MalformedCommandError:
        return
    assert len(message.encode()) <= len(garbage)  # whatever decoded fitted inside the record


def test_truncated_message_names_the_field_and_lengths():
    data = dc.PublicationMessage(client_id=1, correlation_id=2, stream_id=3, channel="aeron:ipc").encode()
    with pytest.raises(dc.MalformedCommandError, match=r"PublicationMessage: channel length=9 runs past"):
        dc.PublicationMessage.decode(data, 0, len(data) - 1)
    with pytest.raises(dc.MalformedCommandError, match="stream_id"):
        dc.PublicationMessage.decode(data, 0, 18)
    negative = bytearray(data)
    negative[20:24] = struct.pack("<i", -5)
    with pytest.raises(dc.MalformedCommandError, match="length=-5"):
        dc.PublicationMessage.decode(bytes(negative), 0, len(negative))


def test_unknown_command_type_is_a_key_error():
    with pytest.raises(KeyError):
        dc.decode_command(0x77, b"", 0, 0)


@settings(max_examples=200, deadline=None)
@given(st.one_of(*MESSAGE_STRATEGIES.values()), st.integers(0, 16))
def test_encode_into_a_dirty_reused_buffer_writes_exactly_encode(message, offset):
    """What a proxy's reused buffer holds after encode_into is the message's encoding, padding zeroed."""
    data = message.encode()
    buffer = np.full(offset + len(data) + 8, 0xAB, np.uint8)
    assert message.encode_into(buffer, offset) == len(data) == message.encoded_length()
    assert buffer[offset : offset + len(data)].tobytes() == data
    assert (buffer[:offset] == 0xAB).all() and (buffer[offset + len(data):] == 0xAB).all()


def test_encode_into_a_buffer_too_small_raises_and_writes_nothing():
    message = dc.PublicationMessage(client_id=1, correlation_id=2, stream_id=3, channel="aeron:ipc")
    buffer = np.zeros(32, np.uint8)
    with pytest.raises(dc.MalformedCommandError, match="PublicationMessage: length=33 at offset=0 does not fit"):
        message.encode_into(buffer)
    assert not buffer.any()
