"""Counters kernels (spec §9) against the spec tables and the pure-Python model in tests/reference/counters.py."""

from __future__ import annotations

import struct

import numba
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aeron_numba.errors import ConfigurationError, LayoutError
from aeron_numba.kernels import counters as k
from aeron_numba.layout import counters as lay
from tests.reference.counters import (
    ReferenceCounters,
    decode_allocated,
    reference_capacity,
    reference_choose_id,
)
from tests.unit.guarded_memory import guarded, u8

INT64_MAX = 2**63 - 1


def new_buffers(capacity: int):
    return (
        np.zeros(capacity * lay.METADATA_LENGTH, dtype=np.uint8),
        np.zeros(capacity * lay.COUNTER_LENGTH, dtype=np.uint8),
    )


# --- layout pins against the §9 tables -------------------------------------------------------------------


def test_layout_constants_match_spec_tables():
    # §9.1 value record
    assert (lay.COUNTER_LENGTH, lay.COUNTER_VALUE_OFFSET, lay.COUNTER_REGISTRATION_ID_OFFSET) == (128, 0, 8)
    assert (lay.COUNTER_OWNER_ID_OFFSET, lay.COUNTER_REFERENCE_ID_OFFSET) == (16, 24)
    # §9.2 metadata record
    assert (lay.METADATA_LENGTH, lay.METADATA_STATE_OFFSET, lay.METADATA_TYPE_ID_OFFSET) == (512, 0, 4)
    assert (lay.METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET, lay.METADATA_KEY_OFFSET, lay.MAX_KEY_LENGTH) == (8, 16, 112)
    assert (lay.METADATA_LABEL_LENGTH_OFFSET, lay.METADATA_LABEL_OFFSET, lay.MAX_LABEL_LENGTH) == (128, 132, 380)
    assert (lay.RECORD_UNUSED, lay.RECORD_ALLOCATED, lay.RECORD_RECLAIMED) == (0, 1, -1)
    assert lay.NOT_FREE_TO_REUSE == INT64_MAX
    assert lay.DEFAULT_FREE_TO_REUSE_TIMEOUT_MS == 1000
    # §9.4 stream key
    assert (lay.STREAM_KEY_SESSION_ID_OFFSET, lay.STREAM_KEY_STREAM_ID_OFFSET) == (8, 12)
    assert (lay.STREAM_KEY_CHANNEL_LENGTH_OFFSET, lay.STREAM_KEY_CHANNEL_OFFSET, lay.STREAM_KEY_MAX_CHANNEL_LENGTH) == (
        16,
        20,
        92,
    )
    assert lay.CLIENT_HEARTBEAT_TYPE_ID == 11
    # Status codes never collide with ids or with each other.
    codes = {lay.NULL_COUNTER_ID, lay.COUNTERS_FULL, lay.COUNTER_ID_INVALID, lay.COUNTER_NOT_ALLOCATED}
    assert len(codes) == 4 and max(codes) < 0


def test_allocate_writes_fields_at_spec_offsets():
    metadata, values = new_buffers(4)
    key = bytes(range(1, 21))
    label = b"pub-lmt: 5 1234 1001 aeron:ipc"
    counter_id = k.allocate(metadata, values, 1, u8(key), len(key), u8(label), len(label), 1000)
    assert counter_id == 0
    k.set_counter_value(values, 0, 0x1122334455667788)
    k.set_counter_registration_id(values, 0, 5)
    k.set_counter_owner_id(values, 0, 77)
    k.set_counter_reference_id(values, 0, -9)
    m = metadata.tobytes()
    assert struct.unpack_from("<iiq", m, 0) == (1, 1, INT64_MAX)
    assert m[16:36] == key and m[36:128] == bytes(92)
    assert struct.unpack_from("<i", m, 128)[0] == len(label)
    assert m[132 : 132 + len(label)] == label
    assert struct.unpack_from("<qqqq", values.tobytes(), 0) == (0x1122334455667788, 5, 77, -9)
    assert not values[32:].any() and not metadata[512:].any()

    assert k.free(metadata, values, 0, 2000, 1000) == 0
    m = metadata.tobytes()
    assert struct.unpack_from("<iiq", m, 0) == (-1, 1, 3000)
    assert m[16:128] == bytes(112)


def test_second_counter_records_are_at_id_times_record_length():
    metadata, values = new_buffers(4)
    for i in range(3):
        label = f"c{i}".encode()
        assert k.allocate(metadata, values, 10 + i, u8(b""), 0, u8(label), len(label), 0) == i
        k.set_counter_value(values, i, 100 + i)
    for i in range(3):
        assert struct.unpack_from("<ii", metadata.tobytes(), i * 512) == (1, 10 + i)
        assert metadata[i * 512 + 132 : i * 512 + 134].tobytes() == f"c{i}".encode()
        assert struct.unpack_from("<q", values.tobytes(), i * 128)[0] == 100 + i


# --- allocate / free / reuse -----------------------------------------------------------------------------


def test_reuse_only_after_deadline_and_value_record_reset():
    metadata, values = new_buffers(2)
    a = k.allocate(metadata, values, 4, u8(b"k"), 1, u8(b"a"), 1, 0)
    b = k.allocate(metadata, values, 4, u8(b"k"), 1, u8(b"b"), 1, 0)
    assert (a, b) == (0, 1)
    assert k.allocate(metadata, values, 4, u8(b""), 0, u8(b""), 0, 0) == lay.COUNTERS_FULL
    for setter in (k.set_counter_value, k.set_counter_registration_id, k.set_counter_owner_id, k.set_counter_reference_id):
        assert setter(values, a, 42) == 0
    assert k.free(metadata, values, a, 100, 1000) == 0
    assert k.free(metadata, values, a, 100, 1000) == lay.COUNTER_NOT_ALLOCATED
    assert k.allocate(metadata, values, 4, u8(b""), 0, u8(b""), 0, 1099) == lay.COUNTERS_FULL
    assert k.allocate(metadata, values, 5, u8(b""), 0, u8(b"again"), 5, 1100) == a
    assert k.get_counter_value(values, a) == 0
    assert k.get_counter_registration_id(values, a) == 0
    assert k.get_counter_owner_id(values, a) == 0
    assert k.get_counter_reference_id(values, a) == 0
    assert k.get_counter_type_id(metadata, a) == 5
    assert k.get_free_for_reuse_deadline(metadata, a) == INT64_MAX


def test_invalid_ids_return_codes():
    metadata, values = new_buffers(2)
    for bad in (-1, 2, 1 << 40):
        assert k.free(metadata, values, bad, 0, 0) == lay.COUNTER_ID_INVALID
        assert k.get_counter_state(metadata, bad) == lay.COUNTER_ID_INVALID
        assert k.get_counter_type_id(metadata, bad) == lay.COUNTER_ID_INVALID
        assert k.get_counter_label(metadata, bad, np.zeros(8, np.uint8)) == lay.COUNTER_ID_INVALID
        assert k.set_counter_value(values, bad, 1) == lay.COUNTER_ID_INVALID
        assert k.set_counter_registration_id(values, bad, 1) == lay.COUNTER_ID_INVALID
        assert k.get_counter_value(values, bad) == 0
        assert k.get_and_add_counter_value(values, bad, 1) == 0
        assert not k.compare_and_set_counter_value(values, bad, 0, 1)
        assert not k.is_valid_counter_id(metadata, values, bad)
    assert k.free(metadata, values, 1, 0, 0) == lay.COUNTER_NOT_ALLOCATED
    assert not values.any() and not metadata.any()


def test_value_operations():
    metadata, values = new_buffers(2)
    cid = k.allocate(metadata, values, 0, u8(b""), 0, u8(b""), 0, 0)
    assert k.get_and_add_counter_value(values, cid, 5) == 0
    assert k.get_and_add_counter_value(values, cid, -2) == 5
    assert k.get_counter_value(values, cid) == 3 and k.get_counter_value_weak(values, cid) == 3
    assert k.compare_and_set_counter_value(values, cid, 3, 10)
    assert not k.compare_and_set_counter_value(values, cid, 3, 11)
    assert k.set_counter_value_weak(values, cid, -7) == 0 and k.get_counter_value(values, cid) == -7
    assert k.propose_max_counter_value(values, cid, 4) and k.get_counter_value(values, cid) == 4
    assert not k.propose_max_counter_value(values, cid, 3) and k.get_counter_value(values, cid) == 4


def test_free_deadline_saturates_and_clamps_timeout():
    metadata, values = new_buffers(2)
    a = k.allocate(metadata, values, 0, u8(b""), 0, u8(b""), 0, 0)
    assert k.free(metadata, values, a, 5, INT64_MAX) == 0
    assert k.get_free_for_reuse_deadline(metadata, a) == INT64_MAX
    assert k.allocate(metadata, values, 0, u8(b""), 0, u8(b""), 0, INT64_MAX - 1) == 1
    b = 1
    assert k.free(metadata, values, b, 5, -100) == 0
    assert k.get_free_for_reuse_deadline(metadata, b) == 5
    assert k.allocate(metadata, values, 0, u8(b""), 0, u8(b""), 0, 5) == b


@numba.njit
def _sum_allocated_values(metadata, values):
    total = 0
    i = k.next_allocated_counter_id(metadata, values, 0)
    while i != lay.NULL_COUNTER_ID:
        total += k.get_counter_value(values, i)
        i = k.next_allocated_counter_id(metadata, values, i + 1)
    return total


def test_compiled_callers_iterate_and_update():
    metadata, values = new_buffers(8)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    for i in range(6):
        mgr.allocate(f"c{i}")
        mgr.set_counter_value(i, 10**i)
    mgr.free(2)
    assert _sum_allocated_values(metadata, values) == 111111 - 100


def test_max_counter_id_from_buffer_lengths():
    assert k.max_counter_id(*new_buffers(16)) == 15
    # The shorter section bounds the ids.
    assert k.max_counter_id(np.zeros(3 * 512, np.uint8), np.zeros(16 * 128, np.uint8)) == 2
    assert k.max_counter_id(np.zeros(16 * 512, np.uint8), np.zeros(5 * 128 + 127, np.uint8)) == 4
    assert k.max_counter_id(np.zeros(100, np.uint8), np.zeros(100, np.uint8)) == -1


# --- property test against the reference ----------------------------------------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("alloc"),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(0, 130),  # key length
            st.one_of(st.integers(0, 40), st.integers(370, 400)),  # label length
            st.integers(0, 700),
        ),
        st.tuples(st.just("free"), st.integers(-1, 8), st.integers(0, 700)),
        st.tuples(st.just("free"), st.integers(0, 2), st.integers(0, 700)),
        st.tuples(st.just("set"), st.integers(0, 7), st.integers(-(2**63), 2**63 - 1)),
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(ops=_ops, capacity=st.sampled_from([1, 2, 3, 5, 8]), timeout_ms=st.sampled_from([0, 500, 1000]))
def test_alloc_free_sequences_match_reference(ops, capacity, timeout_ms):
    metadata, values = new_buffers(capacity)
    ref = ReferenceCounters(capacity)
    rng = np.random.default_rng(len(ops))
    now_ms = 1_000_000
    for op in ops:
        if op[0] == "alloc":
            _, type_id, key_length, label_length, dt = op
            now_ms += dt
            key = rng.integers(0, 256, key_length, dtype=np.uint8).tobytes()
            label = rng.integers(0, 256, label_length, dtype=np.uint8).tobytes()
            before = [rec.state for rec in ref.records]
            got = k.allocate(metadata, values, type_id, u8(key), len(key), u8(label), len(label), now_ms)
            assert got == ref.allocate(type_id, key, label, now_ms)
            if got >= 0 and before[got] == lay.RECORD_RECLAIMED:
                event("reused a reclaimed id")
            elif got == lay.COUNTERS_FULL:
                event("full" if lay.RECORD_RECLAIMED not in before else "full with reclaimed ids not yet reusable")
        elif op[0] == "free":
            _, counter_id, dt = op
            now_ms += dt
            assert k.free(metadata, values, counter_id, now_ms, timeout_ms) == ref.free(counter_id, now_ms, timeout_ms)
        else:
            _, counter_id, value = op
            if counter_id < capacity and ref.records[counter_id].state == lay.RECORD_ALLOCATED:
                k.set_counter_value(values, counter_id, value)
                k.set_counter_registration_id(values, counter_id, value ^ 1)
                ref.records[counter_id].value = value
                ref.records[counter_id].registration_id = value ^ 1

    # Every record, field by field.
    for counter_id, rec in enumerate(ref.records):
        assert k.get_counter_state(metadata, counter_id) == rec.state
        if rec.state == lay.RECORD_UNUSED:
            continue
        assert k.get_counter_type_id(metadata, counter_id) == rec.type_id
        assert k.get_free_for_reuse_deadline(metadata, counter_id) == rec.deadline_ms
        key = np.zeros(lay.MAX_KEY_LENGTH, np.uint8)
        assert k.get_counter_key(metadata, counter_id, key) == lay.MAX_KEY_LENGTH
        assert key.tobytes() == rec.key
        if rec.state == lay.RECORD_ALLOCATED:
            label = np.zeros(lay.MAX_LABEL_LENGTH, np.uint8)
            n = k.get_counter_label(metadata, counter_id, label)
            assert label[:n].tobytes() == rec.label
            assert k.get_counter_value(values, counter_id) == rec.value
            assert k.get_counter_registration_id(values, counter_id) == rec.registration_id

    # The reader sees exactly the allocated counters.
    reader = k.CountersReader(metadata, values)
    seen = [(c.counter_id, c.type_id, c.key, c.label) for c in reader.for_each()]
    assert seen == [(i, t, key, label.decode("ascii", "replace")) for i, t, key, label in ref.allocated()]
    ids = []
    i = k.next_allocated_counter_id(metadata, values, 0)
    while i != lay.NULL_COUNTER_ID:
        ids.append(i)
        i = k.next_allocated_counter_id(metadata, values, i + 1)
    assert ids == [c[0] for c in ref.allocated()]
    # Prefix invariant: records in use never follow an UNUSED one.
    states = [rec.state for rec in ref.records]
    if lay.RECORD_UNUSED in states:
        assert set(states[states.index(lay.RECORD_UNUSED) :]) == {lay.RECORD_UNUSED}


# --- finding counters ------------------------------------------------------------------------------------


def test_find_by_type_and_registration_id():
    metadata, values = new_buffers(8)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    mgr.allocate("other", lay.PUBLISHER_LIMIT_TYPE_ID, registration_id=99)
    hb = mgr.allocate(
        k.heartbeat_counter_label(99), lay.CLIENT_HEARTBEAT_TYPE_ID, k.heartbeat_counter_key(99), registration_id=99, owner_id=99
    )
    assert mgr.find_by_type_id_and_registration_id(lay.CLIENT_HEARTBEAT_TYPE_ID, 99) == hb == 1
    assert mgr.find_by_registration_id(99) == 0
    assert mgr.find_by_type_id_and_registration_id(lay.CLIENT_HEARTBEAT_TYPE_ID, 98) == lay.NULL_COUNTER_ID
    mgr.free(hb)
    assert mgr.find_by_type_id_and_registration_id(lay.CLIENT_HEARTBEAT_TYPE_ID, 99) == lay.NULL_COUNTER_ID
    assert mgr.get_counter_owner_id(hb) == 99  # value record kept until reuse


# --- Python classes --------------------------------------------------------------------------------------


def test_manager_labels_and_keys_round_trip_and_truncate():
    metadata, values = new_buffers(8)
    clock = [0]
    mgr = k.CountersManager(metadata, values, free_to_reuse_timeout_ms=10, epoch_clock=lambda: clock[0])
    long_label = "x" * 500
    a = mgr.allocate(long_label, 7, bytes(range(200)))
    assert mgr.get_counter_label(a) == "x" * 380
    assert mgr.get_counter_key(a) == bytes(range(112))
    b = mgr.allocate("caf\u00e9 \u2603", 8, b"\x01")
    assert mgr.get_counter_label(b) == "caf? ?"
    assert mgr.get_counter_key(b) == b"\x01" + bytes(111)
    c = mgr.allocate("", 9, reference_id=3)
    assert mgr.get_counter_label(c) == "" and mgr.get_counter_reference_id(c) == 3
    assert [x.counter_id for x in mgr.counters()] == [a, b, c]
    mgr.free(b)
    assert [x.counter_id for x in mgr.counters()] == [a, c]
    assert mgr.allocate("new") == 3
    clock[0] = 10
    assert mgr.allocate("reused") == b
    assert mgr.get_counter_state(b) == lay.RECORD_ALLOCATED


def test_manager_errors():
    metadata, values = new_buffers(2)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    mgr.allocate("a")
    mgr.allocate("b")
    with pytest.raises(k.CountersFullError):
        mgr.allocate("c")
    with pytest.raises(ConfigurationError, match="counter_id=2 > max_counter_id=1"):
        mgr.free(2)
    with pytest.raises(ConfigurationError, match="counter_id=-1 < 0"):
        mgr.get_counter_value(-1)
    with pytest.raises(ConfigurationError, match="type_id=2147483648"):
        mgr.allocate("x", 2**31)
    with pytest.raises(ConfigurationError, match="label"):
        mgr.allocate(b"bytes label")
    mgr.free(0)
    with pytest.raises(k.CounterStateError, match="counter_id=0 not allocated"):
        mgr.free(0)
    with pytest.raises(LayoutError, match="4 \\* values_length"):
        k.CountersReader(np.zeros(512, np.uint8), np.zeros(256, np.uint8))
    with pytest.raises(LayoutError, match="values_length=100"):
        k.CountersReader(np.zeros(512, np.uint8), np.zeros(100, np.uint8))


def test_for_each_crosses_batches():
    metadata, values = new_buffers(200)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    for i in range(150):
        mgr.allocate(f"counter {i}", i % 5, registration_id=i)
        mgr.set_counter_value(i, i * 3)
    for i in range(0, 150, 7):
        mgr.free(i)
    expected = [i for i in range(150) if i % 7]
    infos = mgr.counters()
    assert [c.counter_id for c in infos] == expected
    assert all(c.label == f"counter {c.counter_id}" and c.value == 3 * c.counter_id for c in infos)
    assert all(c.registration_id == c.counter_id and c.type_id == c.counter_id % 5 for c in infos)


def test_system_counters_allocation():
    metadata, values = new_buffers(64)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    ids = mgr.allocate_system_counters({15: ": version=1.48.0 commit=abc", 34: ": version=1.48.0 commit=abc"})
    assert ids == list(range(len(lay.SYSTEM_COUNTERS))) and len(ids) == 40
    infos = mgr.counters()
    for (system_id, label), info in zip(lay.SYSTEM_COUNTERS, infos):
        assert info.counter_id == system_id and info.type_id == lay.SYSTEM_COUNTER_TYPE_ID
        assert info.key == struct.pack("<i", system_id) + bytes(108)
        if system_id not in (15, 34):
            assert info.label == label
    assert infos[15].label == "Errors: version=1.48.0 commit=abc"
    assert infos[0].label == "Bytes sent" and infos[39].label == "Error Frames sent"
    with pytest.raises(LayoutError, match="expected 0"):
        mgr.allocate_system_counters()


def test_stream_key_and_label_helpers():
    # The C driver's form: a space after the channel even with no suffix.
    assert k.stream_counter_label(lay.PUBLISHER_LIMIT_NAME, 5, 1234, 1001, "aeron:ipc") == "pub-lmt: 5 1234 1001 aeron:ipc "
    assert k.subscriber_position_label(7, 1, 2, "aeron:ipc", 4096) == "sub-pos: 7 1 2 aeron:ipc @4096"
    key = k.stream_counter_key(5, 1234, 1001, "aeron:ipc")
    assert struct.unpack_from("<qiii", key, 0) == (5, 1234, 1001, 9)
    assert key[20:] == b"aeron:ipc"
    long_channel = "aeron:udp?endpoint=" + "h" * 200
    key = k.stream_counter_key(1, 2, 3, long_channel)
    assert len(key) == 112 and struct.unpack_from("<i", key, 16)[0] == 92
    assert key[20:] == long_channel.encode()[:92]
    assert k.channel_status_key("aeron:udp") == struct.pack("<i", 9) + b"aeron:udp"
    assert k.channel_status_label(lay.SEND_CHANNEL_STATUS_NAME, "aeron:udp") == "snd-channel: aeron:udp"
    assert k.channel_status_label(lay.RECEIVE_CHANNEL_STATUS_NAME, "aeron:udp?endpoint=localhost:0", "127.0.0.1:40123") \
        == "rcv-channel: aeron:udp?endpoint=localhost:0 127.0.0.1:40123"
    key = k.local_sockaddr_key(7, "127.0.0.1:40123")
    assert struct.unpack_from("<ii", key, 0) == (7, 15) and key[8:] == b"127.0.0.1:40123"
    key = k.local_sockaddr_key(7, "h" * 200)  # C keeps a NUL inside the 112-byte key: 103 characters at most
    assert struct.unpack_from("<i", key, 4)[0] == 103 and len(key) == 111
    assert k.local_sockaddr_label(lay.SND_LOCAL_SOCKADDR_NAME, 7, "127.0.0.1:40123") == \
        "snd-local-sockaddr: 7 127.0.0.1:40123"
    assert k.heartbeat_counter_key(-3) == struct.pack("<q", -3)
    assert k.heartbeat_counter_label(42) == "client-heartbeat: id=42"
    assert (
        k.heartbeat_counter_label(42, "app", "1.48.0", "abc")
        == "client-heartbeat: id=42 name=app version=1.48.0 commit=abc"
    )
    # Through the manager the long stream label is truncated to 380 ASCII bytes.
    metadata, values = new_buffers(2)
    mgr = k.CountersManager(metadata, values, epoch_clock=lambda: 0)
    label = k.stream_counter_label(lay.SENDER_POSITION_NAME, 1, 2, 3, "aeron:udp?" + "a" * 400)
    cid = mgr.allocate(label, lay.SENDER_POSITION_TYPE_ID, k.stream_counter_key(1, 2, 3, long_channel))
    assert mgr.get_counter_label(cid) == label[:380]


# --- garbage ---------------------------------------------------------------------------------------------

_label_lengths = st.one_of(
    st.sampled_from([-(2**31), -1, 0, 1, 379, 380, 381, 512, 2**31 - 1]), st.integers(-(2**31), 2**31 - 1)
)
_garbage_record = st.tuples(
    st.one_of(st.sampled_from([0, 1, -1]), st.integers(-(2**31), 2**31 - 1)),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    _label_lengths,
    st.integers(0, 2**32 - 1),  # seed of the record's random body (key, label, padding)
)


@settings(max_examples=120, deadline=None)
@given(
    records=st.lists(_garbage_record, min_size=8, max_size=8),
    values_seed=st.integers(0, 2**32 - 1),
    trim_metadata=st.integers(0, 700),
    trim_values=st.integers(0, 200),
    now_ms=st.integers(-(2**62), 2**62),
)
def test_garbage_buffers_are_read_safely(records, values_seed, trim_metadata, trim_values, now_ms):
    raw = bytearray()
    for state, type_id, deadline, label_length, seed in records:
        rec = bytearray(np.random.default_rng(seed).integers(0, 256, 512, dtype=np.uint8).tobytes())
        struct.pack_into("<iiq", rec, 0, state, type_id, deadline)
        struct.pack_into("<i", rec, 128, label_length)
        raw += rec
    metadata = guarded(len(raw) - trim_metadata)
    metadata[:] = np.frombuffer(bytes(raw[: metadata.size]), np.uint8)
    values_noise = np.random.default_rng(values_seed).integers(0, 256, 8 * 128, dtype=np.uint8)
    values = guarded(values_noise.size - trim_values)
    values[:] = values_noise[: values.size]
    m, v = metadata.tobytes(), values.tobytes()

    capacity = reference_capacity(m, v)
    assert k.max_counter_id(metadata, values) == capacity - 1
    expected = decode_allocated(m, v)
    desc = np.zeros((16, k.COUNTER_DESC_COLUMNS), np.int64)
    keys = np.zeros((16, lay.MAX_KEY_LENGTH), np.uint8)
    labels = np.zeros((16, lay.MAX_LABEL_LENGTH), np.uint8)
    n = k.collect_counters(metadata, values, 0, desc, keys, labels)
    got = [
        (
            int(d[0]),
            int(d[1]),
            keys[r].tobytes(),
            labels[r, : d[2]].tobytes(),
            *(int(x) for x in d[3:7]),
        )
        for r, d in enumerate(desc[:n])
    ]
    assert got == expected
    for counter_id in range(-1, 10):
        k.get_counter_label(metadata, counter_id, np.zeros(lay.MAX_LABEL_LENGTH, np.uint8))
        k.get_counter_key(metadata, counter_id, np.zeros(lay.MAX_KEY_LENGTH, np.uint8))
        k.get_counter_value(values, counter_id)
        length = k.get_counter_label_length(metadata, counter_id)
        if 0 <= counter_id < metadata.size // 512:
            assert 0 <= length <= lay.MAX_LABEL_LENGTH
        else:
            assert length == lay.COUNTER_ID_INVALID
    k.find_counter_by_type_id_and_registration_id(metadata, values, 11, 0)
    k.next_allocated_counter_id(metadata, values, 0)

    chosen = reference_choose_id(m, v, now_ms)
    label = b"L" * 400
    got_id = k.allocate(metadata, values, 3, u8(b"K" * 200), 200, u8(label), len(label), now_ms)
    assert got_id == chosen
    if got_id >= 0:
        assert k.get_counter_state(metadata, got_id) == lay.RECORD_ALLOCATED
        out = np.zeros(lay.MAX_LABEL_LENGTH, np.uint8)
        assert k.get_counter_label(metadata, got_id, out) == 380 and out.tobytes() == b"L" * 380


def test_reader_with_narrow_output_arrays():
    metadata, values = new_buffers(4)
    label = b"abcdefghij"
    k.allocate(metadata, values, 1, u8(b"0123456789"), 10, u8(label), 10, 0)
    desc = np.zeros((2, k.COUNTER_DESC_COLUMNS), np.int64)
    n = k.collect_counters(metadata, values, 0, desc, np.zeros((2, 4), np.uint8), np.zeros((1, 3), np.uint8))
    assert n == 1 and desc[0, k.COUNTER_DESC_LABEL_LENGTH] == 3
    assert k.collect_counters(metadata, values, 0, np.zeros((2, 3), np.int64), np.zeros((2, 112), np.uint8), np.zeros((2, 380), np.uint8)) == 0
    small = np.zeros(4, np.uint8)
    assert k.get_counter_label(metadata, 0, small) == 4 and small.tobytes() == b"abcd"
