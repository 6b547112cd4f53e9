"""Every offset and constant pinned against the tables of spec/transport.md, and the check_* guards."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import position
from aeron_numba.layout import bits, broadcast, cnc, counters, error_log, frame, log_buffer_descriptor as lb, publication_status
from aeron_numba.layout import ring_buffer


def test_frame_header_section_1():
    assert (frame.FRAME_LENGTH_FIELD_OFFSET, frame.VERSION_FIELD_OFFSET, frame.FLAGS_FIELD_OFFSET,
            frame.TYPE_FIELD_OFFSET) == (0, 4, 5, 6)
    assert (frame.TERM_OFFSET_FIELD_OFFSET, frame.SESSION_ID_FIELD_OFFSET, frame.STREAM_ID_FIELD_OFFSET,
            frame.TERM_ID_FIELD_OFFSET, frame.RESERVED_VALUE_OFFSET, frame.HEADER_LENGTH) == (8, 12, 16, 20, 24, 32)
    assert (frame.HDR_TYPE_PAD, frame.HDR_TYPE_DATA, frame.HDR_TYPE_NAK, frame.HDR_TYPE_SM, frame.HDR_TYPE_ERR,
            frame.HDR_TYPE_SETUP, frame.HDR_TYPE_RTTM, frame.HDR_TYPE_RES, frame.HDR_TYPE_ATS_DATA,
            frame.HDR_TYPE_RSP_SETUP, frame.HDR_TYPE_EXT) == (0, 1, 2, 3, 4, 5, 6, 7, 8, 0x0B, 0xFFFF)
    assert (frame.BEGIN_FRAG_FLAG, frame.END_FRAG_FLAG, frame.UNFRAGMENTED, frame.EOS_FLAG) == (0x80, 0x40, 0xC0, 0x20)
    assert (frame.FRAME_ALIGNMENT, frame.MAX_UDP_PAYLOAD_LENGTH, frame.DEFAULT_MTU_LENGTH) == (32, 65504, 1408)
    assert frame.max_payload_length(1408) == 1376
    assert frame.compute_fragmented_length(3000, 1376) == 3104  # §1.4 example
    assert frame.compute_max_message_length(64 * 1024 * 1024) == 8 * 1024 * 1024
    assert frame.compute_max_message_length(1024 * 1024 * 1024) == 16 * 1024 * 1024


@pytest.mark.parametrize("mtu", [0, 32, 33, 100, 65536])
def test_bad_mtu_is_rejected_with_the_value(mtu):
    with pytest.raises(ConfigurationError, match=f"mtu_length={mtu}"):
        frame.check_mtu_length(mtu)


def test_log_buffer_section_2():
    assert lb.PARTITION_COUNT == 3
    assert (lb.TERM_MIN_LENGTH, lb.TERM_MAX_LENGTH) == (65536, 1 << 30)
    assert (lb.PAGE_MIN_SIZE, lb.PAGE_MAX_SIZE, lb.LOG_META_DATA_LENGTH) == (4096, 1 << 30, 4096)
    offsets = [
        lb.TERM_TAIL_COUNTERS_OFFSET, lb.LOG_ACTIVE_TERM_COUNT_OFFSET,
        lb.LOG_END_OF_STREAM_POSITION_OFFSET, lb.LOG_IS_CONNECTED_OFFSET,
        lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, lb.LOG_CORRELATION_ID_OFFSET,
        lb.LOG_INITIAL_TERM_ID_OFFSET, lb.LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET,
        lb.LOG_MTU_LENGTH_OFFSET, lb.LOG_TERM_LENGTH_OFFSET, lb.LOG_PAGE_SIZE_OFFSET,
        lb.LOG_PUBLICATION_WINDOW_LENGTH_OFFSET, lb.LOG_RECEIVER_WINDOW_LENGTH_OFFSET,
        lb.LOG_SOCKET_SNDBUF_LENGTH_OFFSET, lb.LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET,
        lb.LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET, lb.LOG_SOCKET_RCVBUF_LENGTH_OFFSET,
        lb.LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET, lb.LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET,
        lb.LOG_MAX_RESEND_OFFSET, lb.LOG_DEFAULT_FRAME_HEADER_OFFSET,
        lb.LOG_ENTITY_TAG_OFFSET, lb.LOG_RESPONSE_CORRELATION_ID_OFFSET,
        lb.LOG_LINGER_TIMEOUT_NS_OFFSET, lb.LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET,
        lb.LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET, lb.LOG_IS_GROUP_OFFSET,
        lb.LOG_IS_RESPONSE_OFFSET, lb.LOG_REJOIN_OFFSET, lb.LOG_RELIABLE_OFFSET,
        lb.LOG_SPARSE_OFFSET, lb.LOG_SIGNAL_EOS_OFFSET,
        lb.LOG_SPIES_SIMULATE_CONNECTION_OFFSET, lb.LOG_TETHER_OFFSET,
    ]
    assert offsets == [0, 24, 128, 136, 140, 256, 264, 268, 272, 276, 280, 284, 288, 292, 296, 300, 304, 308, 312,
                       316, 320, 448, 456, 464, 472, 480, 488, 489, 490, 491, 492, 493, 494, 495]
    assert lb.compute_log_length(64 * 1024) == 200_704
    assert lb.compute_log_length(16 * 1024 * 1024) == 50_335_744
    assert lb.compute_log_length(64 * 1024 * 1024) == 201_330_688
    assert lb.compute_log_length(64 * 1024, page_size=2 * 1024 * 1024) == 2 * 1024 * 1024
    assert lb.metadata_offset(200_704) == 3 * 65536


@pytest.mark.parametrize("term_length", [0, 32 * 1024, 100_000, 2 << 30, 3 * 65536])
def test_bad_term_length_is_rejected(term_length):
    with pytest.raises(ConfigurationError, match=f"term_length={term_length}"):
        lb.check_term_length(term_length)


@pytest.mark.parametrize("page_size", [0, 1024, 5000, 2 << 30])
def test_bad_page_size_is_rejected(page_size):
    with pytest.raises(ConfigurationError, match=f"page_size={page_size}"):
        lb.check_page_size(page_size)


def test_log_file_shorter_than_its_terms_is_rejected():
    with pytest.raises(LayoutError, match="file_length=100000"):
        lb.check_log_file(100_000, 65536, 4096)


def test_position_math_section_3():
    shift = position.position_bits_to_shift(65536)
    assert shift == 16
    # Every legal term length (64 KiB to 1 GiB, powers of two), as int32 (read from a log) or int; a corrupt 0
    # gives a shift that is still below 64.
    for bits in range(16, 31):
        shift_of = position.position_bits_to_shift
        assert shift_of(1 << bits) == shift_of(np.int32(1 << bits)) == bits
    assert position.position_bits_to_shift(0) == 62
    assert position.compute_position(10, 96, shift, 7) == 3 * 65536 + 96
    assert position.compute_term_id_from_position(3 * 65536 + 96, shift, 7) == 10
    assert position.compute_term_offset_from_position(3 * 65536 + 96, shift) == 96
    assert position.index_by_position(4 * 65536, shift) == 1
    assert position.index_by_term(7, 11) == 1 and position.index_by_term_count(5) == 2
    # Term ids wrap in 32 bits: one term after INT32_MAX is INT32_MIN.
    assert position.compute_position(-(2**31), 0, shift, 2**31 - 1) == 65536
    assert position.compute_term_id_from_position(65536, shift, 2**31 - 1) == -(2**31)
    raw = position.pack_tail(-5, 70000)
    assert position.raw_tail_term_id(raw) == -5
    assert position.raw_tail_term_offset(raw, 65536) == 65536  # clamped
    assert position.max_possible_position(65536) == 65536 << 31


def test_cnc_section_6():
    assert cnc.CNC_VERSION == 512 == bits.semantic_version(0, 2, 0)
    assert (cnc.TO_DRIVER_BUFFER_LENGTH_FIELD_OFFSET, cnc.TO_CLIENTS_BUFFER_LENGTH_FIELD_OFFSET,
            cnc.COUNTERS_METADATA_BUFFER_LENGTH_FIELD_OFFSET, cnc.COUNTERS_VALUES_BUFFER_LENGTH_FIELD_OFFSET,
            cnc.ERROR_LOG_BUFFER_LENGTH_FIELD_OFFSET, cnc.CLIENT_LIVENESS_TIMEOUT_FIELD_OFFSET,
            cnc.START_TIMESTAMP_FIELD_OFFSET, cnc.PID_FIELD_OFFSET) == (4, 8, 12, 16, 20, 24, 32, 40)
    assert (cnc.META_DATA_LENGTH, cnc.END_OF_METADATA_OFFSET) == (48, 128)
    sections = cnc.compute_sections()
    assert sections.to_driver_offset == 128 and sections.to_driver_length == 1_049_344
    assert sections.to_clients_length == 1_048_704
    assert sections.counters_metadata_length == 4 * 1024 * 1024
    assert sections.counters_values_offset == sections.counters_metadata_offset + 4 * 1024 * 1024
    assert sections.file_length == 8_392_704  # §6.2 default total
    cnc.check_version(cnc.CNC_VERSION)
    with pytest.raises(LayoutError, match="1.0.0"):
        cnc.check_version(bits.semantic_version(1, 0, 0))
    with pytest.raises(LayoutError, match="file_length=4096"):
        cnc.check_file_length(4096, sections)


def test_ring_buffer_section_7():
    assert (ring_buffer.TAIL_POSITION_OFFSET, ring_buffer.HEAD_CACHE_POSITION_OFFSET,
            ring_buffer.HEAD_POSITION_OFFSET, ring_buffer.CORRELATION_COUNTER_OFFSET,
            ring_buffer.CONSUMER_HEARTBEAT_OFFSET, ring_buffer.TRAILER_LENGTH) == (128, 256, 384, 512, 640, 768)
    assert (ring_buffer.RECORD_HEADER_LENGTH, ring_buffer.RECORD_ALIGNMENT, ring_buffer.PADDING_MSG_TYPE_ID) == (8, 8, -1)
    assert ring_buffer.check_capacity(1024 + 768) == 1024
    assert ring_buffer.max_msg_length(1024) == 128
    for bad in (1000 + 768, 768, 4 + 768):
        with pytest.raises(LayoutError, match=f"capacity={bad - 768}"):
            ring_buffer.check_capacity(bad)


def test_broadcast_section_8():
    assert (broadcast.TAIL_INTENT_COUNTER_OFFSET, broadcast.TAIL_COUNTER_OFFSET, broadcast.LATEST_COUNTER_OFFSET,
            broadcast.TRAILER_LENGTH) == (0, 8, 16, 128)
    assert (broadcast.RECORD_HEADER_LENGTH, broadcast.RECORD_ALIGNMENT, broadcast.PADDING_MSG_TYPE_ID) == (8, 8, -1)
    assert broadcast.check_capacity(4096 + 128) == 4096
    with pytest.raises(LayoutError, match="capacity=3968"):
        broadcast.check_capacity(4096)


def test_counters_section_9():
    assert (counters.COUNTER_LENGTH, counters.COUNTER_VALUE_OFFSET, counters.COUNTER_REGISTRATION_ID_OFFSET,
            counters.COUNTER_OWNER_ID_OFFSET, counters.COUNTER_REFERENCE_ID_OFFSET) == (128, 0, 8, 16, 24)
    assert (counters.METADATA_LENGTH, counters.METADATA_STATE_OFFSET, counters.METADATA_TYPE_ID_OFFSET,
            counters.METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET, counters.METADATA_KEY_OFFSET, counters.MAX_KEY_LENGTH,
            counters.METADATA_LABEL_LENGTH_OFFSET, counters.METADATA_LABEL_OFFSET,
            counters.MAX_LABEL_LENGTH) == (512, 0, 4, 8, 16, 112, 128, 132, 380)
    assert (counters.RECORD_UNUSED, counters.RECORD_ALLOCATED, counters.RECORD_RECLAIMED) == (0, 1, -1)
    assert counters.NOT_FREE_TO_REUSE == 2**63 - 1
    type_ids = (counters.SYSTEM_COUNTER_TYPE_ID, counters.PUBLISHER_LIMIT_TYPE_ID, counters.SENDER_POSITION_TYPE_ID,
                counters.RECEIVER_HWM_TYPE_ID, counters.SUBSCRIBER_POSITION_TYPE_ID,
                counters.RECEIVER_POSITION_TYPE_ID, counters.SEND_CHANNEL_STATUS_TYPE_ID,
                counters.RECEIVE_CHANNEL_STATUS_TYPE_ID, counters.SENDER_LIMIT_TYPE_ID, counters.PER_IMAGE_TYPE_ID,
                counters.CLIENT_HEARTBEAT_TYPE_ID, counters.PUBLISHER_POS_TYPE_ID, counters.SENDER_BPE_TYPE_ID,
                counters.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID, counters.FLOW_CONTROL_RECEIVERS_COUNTER_TYPE_ID,
                counters.MDC_DESTINATIONS_COUNTER_TYPE_ID)
    assert type_ids == (0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18)
    assert (counters.STREAM_KEY_SESSION_ID_OFFSET, counters.STREAM_KEY_STREAM_ID_OFFSET,
            counters.STREAM_KEY_CHANNEL_LENGTH_OFFSET, counters.STREAM_KEY_CHANNEL_OFFSET,
            counters.STREAM_KEY_MAX_CHANNEL_LENGTH) == (8, 12, 16, 20, 92)
    assert counters.CHANNEL_KEY_MAX_CHANNEL_LENGTH == 108
    ids = [i for i, _ in counters.SYSTEM_COUNTERS]
    assert ids == list(range(40))
    labels = dict(counters.SYSTEM_COUNTERS)
    assert labels[19] == "Unblocked Publications" and labels[24] == "Client liveness timeouts"
    assert labels[counters.UNBLOCKED_COMMANDS] == "Unblocked Control Commands"
    assert labels[counters.ERRORS].startswith("Errors")
    assert counters.check_counters_buffers(4 * 1024 * 1024, 1024 * 1024) == 8192
    with pytest.raises(LayoutError, match="values_length=1000"):
        counters.check_counters_buffers(4000, 1000)
    with pytest.raises(LayoutError, match="metadata_length=1024"):
        counters.check_counters_buffers(1024, 1024)


def test_error_log_section_10():
    assert (error_log.LENGTH_OFFSET, error_log.OBSERVATION_COUNT_OFFSET, error_log.LAST_OBSERVATION_TIMESTAMP_OFFSET,
            error_log.FIRST_OBSERVATION_TIMESTAMP_OFFSET, error_log.ENCODED_ERROR_OFFSET,
            error_log.RECORD_ALIGNMENT) == (0, 4, 8, 16, 24, 8)
    with pytest.raises(LayoutError, match="buffer_length=20"):
        error_log.check_buffer_length(20)


def test_publication_status_codes_section_4_5():
    assert (publication_status.NOT_CONNECTED, publication_status.BACK_PRESSURED, publication_status.ADMIN_ACTION, publication_status.CLOSED,
            publication_status.MAX_POSITION_EXCEEDED, publication_status.ERROR) == (-1, -2, -3, -4, -5, -6)
