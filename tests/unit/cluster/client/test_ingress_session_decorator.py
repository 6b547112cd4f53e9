"""The session header in front of ingress messages: the schema's bytes, updated with the term, and the message
range checked."""

from __future__ import annotations

import numpy as np
import pytest

from aeron_numba.cluster.client import IngressSessionDecorator
from aeron_numba.codecs.cluster_messages import CLUSTER, SESSION_HEADER_LENGTH
from aeron_numba.errors import ConfigurationError
from tests.unit.cluster.client.fakes import FakePublication


def test_the_header_is_the_schemas_session_message_header():
    decorator = IngressSessionDecorator(cluster_session_id=3, leadership_term_id=8)
    expected = CLUSTER.encode(CLUSTER.SessionMessageHeader(leadership_term_id=8, cluster_session_id=3,
                                                           timestamp=-1, payload=b""))
    assert bytes(decorator.header) == expected and len(expected) == SESSION_HEADER_LENGTH == 32
    decorator.leadership_term_id = 9
    assert CLUSTER.decode(decorator.header).leadership_term_id == 9


def test_offer_sends_header_and_payload_as_one_message_of_any_length():
    decorator, publication = IngressSessionDecorator(1, 2), FakePublication()
    for payload in (b"", b"abc", np.arange(10_000, dtype=np.uint8), memoryview(b"view")):
        assert decorator.offer(publication, payload) > 0
    messages = publication.messages()
    assert [bytes(m.payload) for m in messages] == [b"", b"abc", np.arange(10_000, dtype=np.uint8).tobytes(),
                                                    b"view"]
    assert all((m.cluster_session_id, m.leadership_term_id) == (1, 2) for m in messages)


@pytest.mark.parametrize("offset, length", [(-1, 2), (2, 5), (0, -1)])
def test_a_range_outside_the_message_is_refused_naming_it(offset, length):
    with pytest.raises(ConfigurationError, match=f"offset={offset} length={length}"):
        IngressSessionDecorator().offer(FakePublication(), b"abcd", offset, length)
