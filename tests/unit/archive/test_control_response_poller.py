"""The archive client's ControlResponsePoller: what the archive's ControlResponseProxy sends comes back decoded and
kept by correlation id; other sessions' messages and garbage do not."""

from __future__ import annotations

from aeron_numba.archive.control_response_poller import ControlResponsePoller, RecordingSignal
from aeron_numba.codecs.archive_proxies import ControlResponseProxyBase
from aeron_numba.layout import archive as A
from tests.unit.archive.archive_fakes import Publication, Subscription


def test_what_the_archive_sends_is_kept_for_its_session():
    publication, subscription = Publication(), Subscription(1)
    proxy, poller = ControlResponseProxyBase(publication), ControlResponsePoller(subscription)
    proxy.challenge(control_session_id=4, correlation_id=1, version=1, encoded_challenge=b"who?")
    proxy.control_response(control_session_id=4, correlation_id=1, relevant_id=4, code=0, version=2, error_message="")
    subscription.fragments += [(data, 9) for data in publication.raw]
    assert poller.poll() == 2
    assert poller.challenges[1].encoded_challenge == b"who?" and poller.responses[1].relevant_id == 4
    poller.control_session_id = 4  # connected: only this session's from now on
    publication.raw.clear()
    proxy.control_response(control_session_id=5, correlation_id=2, relevant_id=0, code=0, version=2, error_message="")
    proxy.recording_descriptor(
        control_session_id=4, correlation_id=3, recording_id=7, start_timestamp=1, stop_timestamp=2,
        start_position=0, stop_position=64, initial_term_id=0, segment_file_length=1 << 20,
        term_buffer_length=1 << 16, mtu_length=1408, session_id=1, stream_id=2, stripped_channel="aeron:ipc",
        original_channel="aeron:ipc", source_identity="aeron:ipc")
    proxy.recording_subscription_descriptor(control_session_id=5, correlation_id=3, subscription_id=1, stream_id=2,
                                            stripped_channel="aeron:ipc")
    proxy.recording_signal_event(control_session_id=4, correlation_id=3, recording_id=7, subscription_id=1,
                                 position=64, signal=A.RECORDING_SIGNALS["STOP"])
    subscription.fragments += [(data, 9) for data in publication.raw] + [(b"garbage!", 9)]
    poller.poll()
    assert 2 not in poller.responses
    assert [d.recording_id for d in poller.descriptors[3]] == [7]
    assert list(poller.signals) == [RecordingSignal(4, 3, 7, 1, 64, "STOP")]
    assert poller.malformed_count == 1
