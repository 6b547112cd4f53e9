"""The example key-value service: its wire format, its rules, the two variants giving the same answers and state
hash for any sequence of requests (hypothesis), and a snapshot of either variant loaded into the other."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.examples.key_value_service import (
    DELETE,
    FULL,
    GET,
    HASH,
    INVALID,
    MAX_KEY_LENGTH,
    MAX_VALUE_LENGTH,
    NOT_FOUND,
    OK,
    PUT,
    CompiledKeyValueService,
    KeyValueService,
    decode_hash_value,
    decode_request,
    decode_response,
    encode_delete,
    encode_get,
    encode_hash,
    encode_put,
    encode_request,
    encode_response,
    load_snapshot,
    take_snapshot,
)
from harness.awaiting import await_condition
from tests.unit.client_support import FakeDriver, connect

keys = st.binary(min_size=0, max_size=MAX_KEY_LENGTH + 2)
requests = st.one_of(
    st.builds(lambda i, k, v: encode_put(i, k, v), st.integers(0, 1000), keys, st.binary(max_size=MAX_VALUE_LENGTH + 2)),
    st.builds(lambda i, k: encode_get(i, k), st.integers(0, 1000), keys),
    st.builds(lambda i, k: encode_delete(i, k), st.integers(0, 1000), keys),
    st.builds(encode_hash, st.integers(0, 1000)),
    st.binary(max_size=40),  # garbage
)


def test_wire_format_round_trips_and_refuses_bad_lengths():
    assert decode_request(encode_put(7, b"k", b"v" * 64)) == (PUT, 7, b"k", b"v" * 64)
    assert encode_response(GET, OK, 9, b"vv") == bytes([GET, OK, 0, 0, 2, 0, 0, 0]) + (9).to_bytes(8, "little") + b"vv"
    assert decode_response(encode_response(GET, OK, 9, b"vv")) == (GET, OK, 9, b"vv")
    with pytest.raises(ValueError, match="request of 3 bytes < header length 16"):
        decode_request(b"abc")
    with pytest.raises(ValueError, match="do not add up"):
        decode_request(encode_put(1, b"k", b"v") + b"x")


def test_rules_of_the_store():
    service = KeyValueService(capacity=4)  # at most 3 keys
    answers = [decode_response(service.apply(r))[:3] for r in (
        encode_put(1, b"a", b"1"), encode_put(2, b"b", b"2"), encode_put(3, b"c", b"3"), encode_put(4, b"d", b"4"),
        encode_put(5, b"a", b"new"), encode_get(6, b"a"), encode_delete(7, b"zz"), encode_delete(8, b"a"),
        encode_get(9, b"a"), encode_get(10, b""), encode_request(GET, 11, b"k", b"v"), b"short")]
    assert answers == [(PUT, OK, 1), (PUT, OK, 2), (PUT, OK, 3), (PUT, FULL, 4), (PUT, OK, 5), (GET, OK, 6),
                       (DELETE, NOT_FOUND, 7), (DELETE, OK, 8), (GET, NOT_FOUND, 9), (GET, INVALID, 10),
                       (GET, INVALID, 11), (0, INVALID, 0)]
    op, status, _, value = decode_response(service.apply(encode_hash(12)))
    assert (op, status) == (HASH, OK) and decode_hash_value(value)[1] == 12
    with pytest.raises(ClusterError, match="capacity=6 must be a power of two"):
        KeyValueService(capacity=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(requests, max_size=60))
def test_both_variants_answer_alike_and_hash_alike(sequence):
    python, compiled = KeyValueService(capacity=8), CompiledKeyValueService(capacity=8)
    expected_hash = 0
    for request in sequence:
        response = python.apply(request)
        assert compiled.apply(request) == response
        expected_hash = zlib.crc32(bytes((decode_response(response)[1],)), zlib.crc32(request, expected_hash))
    assert python.state_hash == compiled.state_hash == expected_hash
    assert dict(python.entries()) == dict(compiled.entries()) and len(python) == len(compiled)


@pytest.mark.parametrize("source, target", [(KeyValueService, CompiledKeyValueService),
                                            (CompiledKeyValueService, KeyValueService)])
def test_snapshot_of_either_variant_loads_into_the_other(tmp_path, source, target):
    driver = FakeDriver(tmp_path / "aeron")
    aeron, _ = connect(driver)
    try:
        publication = aeron.add_exclusive_publication("aeron:ipc?term-length=64k", 106)
        subscription = aeron.add_subscription("aeron:ipc?term-length=64k", 106)
        await_condition(lambda: subscription.images and publication.is_connected, 10, "image")
        original = source(capacity=64)
        for i in range(40):
            original.apply(encode_put(i, b"key-%d" % i, bytes([i]) * (i * 6)))
        original.apply(encode_delete(99, b"key-3"))
        take_snapshot(original, publication, None)
        loaded = target(capacity=64)
        load_snapshot(loaded, subscription.images[0], None)
        assert loaded.state_hash == original.state_hash and loaded.applied == original.applied == 41
        assert dict(loaded.entries()) == dict(original.entries()) and len(loaded) == 39
        assert loaded.apply(encode_get(1, b"key-7")) == original.apply(encode_get(1, b"key-7"))
    finally:
        aeron.close()
        driver.close()
