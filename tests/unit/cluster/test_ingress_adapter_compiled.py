"""The leader's ingress poll with the compiled path (``IngressAdapter.poll(append)``) over real IPC logs of the
scripted driver: open sessions' application messages reach the log in order without the agent seeing them, a
keep-alive and a message of a session the table does not hold between them go to the agent through the codec,
a fragmented message is reassembled and handed over whole, and a log that refuses the claim keeps the message for
later."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aeron_numba.client import FragmentAssembler
from aeron_numba.client.fragment_assembler import CONTINUE
from aeron_numba.cluster.ingress_adapter import IngressAdapter
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.kernels.cluster_ingress import OpenSessionTable
from aeron_numba.layout.publication_status import PUB_STATE_CLOSED
from harness.awaiting import await_condition

TERM = 3


class Agent:
    """What the codec path calls on the consensus module: it records, and appends nothing."""

    def __init__(self):
        self.calls = []

    def on_ingress_message(self, leadership_term_id, cluster_session_id, payload):
        self.calls.append(("message", cluster_session_id, bytes(payload)))
        return CONTINUE

    def on_session_keep_alive(self, leadership_term_id, cluster_session_id):
        self.calls.append(("keep-alive", cluster_session_id))


def _stream(aeron, stream_id):
    publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", stream_id)
    subscription = aeron.add_subscription("aeron:ipc?term-length=64k", stream_id)
    await_condition(lambda: subscription.images and publication.is_connected, 10, f"stream {stream_id}")
    return publication, subscription


def _message(session_id, payload, term=TERM):
    return CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=term, cluster_session_id=session_id,
                                                       timestamp=0, payload=payload))


def _log_messages(subscription):
    seen = []
    assembler = FragmentAssembler(lambda buffer, offset, length, header: seen.append(
        CLUSTER.decode(bytes(buffer[offset:offset + length]))))
    while subscription.poll(assembler.on_fragment, 100):
        pass
    return seen


@pytest.mark.requires_jit  # polls through image.compiled(): Numba overloads, refused without the JIT
def test_open_sessions_go_to_the_log_compiled_and_everything_else_to_the_agent_in_order(aeron):
    ingress_publication, ingress = _stream(aeron, 101)
    log_publication, log = _stream(aeron, 100)
    agent = Agent()
    adapter = IngressAdapter(agent, fragment_limit=50)
    adapter.connect(ingress)
    sessions = OpenSessionTable()
    sessions.add(7)
    large = bytes(range(256)) * 20  # fragmented at the IPC MTU
    for data in (_message(7, b"a"), CLUSTER.encode(CLUSTER.SessionKeepAlive(leadership_term_id=TERM,
                                                                            cluster_session_id=7)),
                 _message(8, b"not open"), _message(7, b"b"), _message(7, large), _message(7, b"c")):
        assert ingress_publication.offer(np.frombuffer(data, np.uint8)) > 0
    append = (TERM, 555, 777_000, log_publication, sessions)
    await_condition(lambda: adapter.poll(append) == 0 and ingress.images[0].position == ingress_publication.position,
                    10, "ingress drained")
    assert agent.calls == [("keep-alive", 7), ("message", 8, b"not open"), ("message", 7, large)]
    appended = _log_messages(log)
    assert [(m.cluster_session_id, bytes(m.payload), m.timestamp, m.leadership_term_id) for m in appended] == [
        (7, b"a", 555, TERM), (7, b"b", 555, TERM), (7, b"c", 555, TERM)]
    assert sessions.activity_ns(7) == 777_000


@pytest.mark.requires_jit
def test_a_log_that_refuses_the_claim_leaves_the_message_in_the_ingress_image(aeron):
    ingress_publication, ingress = _stream(aeron, 101)
    log_publication, log = _stream(aeron, 100)
    adapter = IngressAdapter(Agent(), fragment_limit=50)
    adapter.connect(ingress)
    sessions = OpenSessionTable()
    sessions.add(7)
    assert ingress_publication.offer(np.frombuffer(_message(7, b"x"), np.uint8)) > 0
    await_condition(lambda: ingress.images[0].position < ingress_publication.position, 10, "the message in the image")
    refused_state = log_publication.pub_state.copy()
    refused_state[PUB_STATE_CLOSED] = 1  # every claim answers CLOSED, as a full window answers BACK_PRESSURED
    refusing = SimpleNamespace(log_buffer=log_publication.log_buffer, pub_state=refused_state,
                               limit_buffer=log_publication.limit_buffer)
    assert adapter.poll((TERM, 1, 1, refusing, sessions)) == 0
    assert ingress.images[0].position == 0  # left for the next poll
    assert adapter.poll((TERM, 1, 1, log_publication, sessions)) == 1
    assert [bytes(m.payload) for m in _log_messages(log)] == [b"x"]
