"""``SbeAdapter`` over both schemas: the construction check (every received message handled or declared
unsupported, each handler able to take its message's fields) and malformed input counted, reported and kept from
the listener."""

from __future__ import annotations

import re
import struct

import pytest

from aeron_numba.codecs.archive_messages import ARCHIVE, CONTROL_REQUESTS
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.sbe_adapter import MissingHandlerError, SbeAdapter, handler_name
from tests.unit.codecs.sbe_support import recording_listener


@pytest.mark.parametrize("codec", [ARCHIVE, CLUSTER], ids=["archive", "cluster"])
def test_a_listener_handling_every_message_passes_the_check_and_one_missing_a_handler_fails_naming_it(codec):
    names = [m.name for m in codec.schema.messages]
    adapter = SbeAdapter(codec, recording_listener(names, []), names)
    assert adapter.template_ids == {m.template_id for m in codec.schema.messages}
    for missing in (names[0], names[len(names) // 2], names[-1]):
        listener = recording_listener([n for n in names if n != missing], [])
        with pytest.raises(MissingHandlerError, match=f"{missing} .*has no handler Listener.{handler_name(missing)}"):
            SbeAdapter(codec, listener, names)
        # ...unless it is declared unsupported, then it goes to on_unsupported
        SbeAdapter(codec, listener, names, unsupported=[missing], on_unsupported=lambda message: None)


def test_the_archive_control_requests_and_a_cluster_protocol_dispatch_their_fields_by_name():
    calls = []
    adapter = SbeAdapter(ARCHIVE, recording_listener(CONTROL_REQUESTS, calls), CONTROL_REQUESTS, context=("session",))
    adapter.dispatch(ARCHIVE.StopReplayRequest(control_session_id=1, correlation_id=2, replay_session_id=3), "s")
    assert calls == [("StopReplayRequest", ("s",), {"control_session_id": 1, "correlation_id": 2,
                                                     "replay_session_id": 3})]
    calls.clear()
    ingress = ("SessionConnectRequest", "SessionCloseRequest", "SessionMessageHeader", "SessionKeepAlive")
    adapter = SbeAdapter(CLUSTER, recording_listener(ingress, calls), ingress, context=("header",))
    data = CLUSTER.encode(CLUSTER.SessionCloseRequest(leadership_term_id=7, cluster_session_id=9))
    adapter.on_fragment(data, 0, len(data), "the header")
    assert calls == [("SessionCloseRequest", ("the header",), {"leadership_term_id": 7, "cluster_session_id": 9})]


def test_a_handler_that_cannot_take_the_fields_fails_the_check_naming_what_it_lacks():
    class Listener:
        def on_stop_replay_request(self, session, correlation_id):  # no replay_session_id, no **rest
            pass

    with pytest.raises(MissingHandlerError, match="on_stop_replay_request cannot take StopReplayRequest"):
        SbeAdapter(ARCHIVE, Listener(), ["StopReplayRequest"], context=("session",))


def test_unsupported_messages_need_an_answer_and_are_not_handled_too():
    listener = recording_listener(["StopReplayRequest"], [])
    with pytest.raises(ValueError, match="without an on_unsupported"):
        SbeAdapter(ARCHIVE, listener, ["ReplicateRequest"], unsupported=["ReplicateRequest"])
    with pytest.raises(MissingHandlerError, match="declared unsupported but Listener.on_stop_replay_request"):
        SbeAdapter(ARCHIVE, listener, ["StopReplayRequest"], unsupported=["StopReplayRequest"],
                   on_unsupported=lambda m: None)
    with pytest.raises(KeyError, match="NoSuchRequest"):
        SbeAdapter(ARCHIVE, listener, ["NoSuchRequest"])
    answered = []
    adapter = SbeAdapter(ARCHIVE, listener, ["StopReplayRequest", "ReplicateRequest2"],
                         unsupported=["ReplicateRequest2"], on_unsupported=lambda m, s: answered.append((m, s)),
                         context=("session",))
    message = ARCHIVE.ReplicateRequest2(control_session_id=1, correlation_id=2)
    adapter.dispatch(message, "s")
    assert answered == [(message, "s")]


def _stop_replay(**fields) -> bytes:
    return ARCHIVE.encode(ARCHIVE.StopReplayRequest(control_session_id=1, correlation_id=2, replay_session_id=3,
                                                    **fields))


@pytest.mark.parametrize("data, complaint", [
    (b"\x01\x02\x03", "shorter than its 8-byte header"),
    (_stop_replay()[:12], "runs past the message end"),  # a block cut short
    (struct.pack("<HHHH", 24, 7, 111, 10) + _stop_replay()[8:], "schemaId=111, expected 101"),
    (struct.pack("<HHHH", 24, 999, 101, 10) + _stop_replay()[8:], "templateId=999 is not a message"),
    (ARCHIVE.encode(ARCHIVE.ControlResponse(error_message="x")), "templateId=1 \\(ControlResponse\\) is not a "
                                                                 "message Adapter receives"),
    (ARCHIVE.encode(ARCHIVE.StopRecordingRequest(channel="aeron:ipc"))[:-3], "channel: length=9 runs past"),
    (ARCHIVE.encode(ARCHIVE.StopRecordingRequest(channel="aeron:ipc"))[:-9] + b"\xff" * 9, "not ASCII"),
], ids=["short", "cut-block", "wrong-schema", "unknown-template", "not-received", "bad-var-length", "not-ascii"])
def test_malformed_input_is_counted_and_reported_and_never_reaches_the_listener(data, complaint):
    calls, errors = [], []
    names = ["StopReplayRequest", "StopRecordingRequest"]
    adapter = SbeAdapter(ARCHIVE, recording_listener(names, calls), names, on_error=errors.append,
                         name="Adapter")
    adapter.on_fragment(data, 0, len(data), None)
    assert calls == [] and adapter.malformed_count == 1
    [error] = errors
    assert error.startswith("Adapter: message dropped: ") and re.search(complaint, error), error
    good = _stop_replay()
    adapter.on_fragment(good, 0, len(good), None)  # and the adapter carries on
    assert [name for name, _, _ in calls] == ["StopReplayRequest"] and adapter.malformed_count == 1
