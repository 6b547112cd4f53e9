"""The example clustered service: a replicated key-value store with a state hash.

Clients send PUT / GET / DELETE requests of byte keys and values; every member applies them in log order and the
leader answers each with a response carrying the request's id. Two variants with the same wire format, limits,
answers, state hash and snapshot format (a snapshot of one loads into the other):

- ``KeyValueService``: Python (a dict), its ``on_session_message`` a Python method;
- ``CompiledKeyValueService``: the store is an open-addressing hash table in one ``uint8`` array and requests are
  applied by an ``@njit`` handler on the container's compiled path, replies written to the outbox in compiled code.

Run one: ``python -m aeron_numba.cluster.service --service
aeron_numba.cluster.examples.key_value_service:KeyValueService`` (or ``...:CompiledKeyValueService``).

Wire format (little-endian; ``encode_*`` / ``decode_*`` below)::

    request   0 op u8 (PUT 1, GET 2, DELETE 3, HASH 4) | 1 reserved u8 | 2 key length u16 | 4 value length u32
              8 request id i64 | 16 key | value (PUT only)
    response  0 op u8 (the request's; 0 if unreadable) | 1 status u8 (OK 0, NOT_FOUND 1, INVALID 2, FULL 3)
              2 reserved u16 | 4 value length u32 | 8 request id i64 | 16 value (GET of a present key; HASH:
              the state hash u64 and the requests applied i64, both before this request)

HASH (no key, no value) asks for the state hash, for tests and tools comparing members; like every request it is
applied (it goes into the hash) on every member. Limits: keys 1..64 bytes, values 0..256 bytes (a request outside
them, of an unknown op or whose lengths do not match its size is INVALID and changes nothing); at most
``capacity * 3 // 4`` keys (a PUT of a new key beyond that is FULL). ``capacity`` (a power of two, default 16384) is
a constructor argument of both variants.

State hash: CRC-32 (zlib's) chained over every applied request's bytes and then its status byte, starting from 0.
It depends only on the sequence of requests in the log, so two members that applied the same log have equal
hashes; the snapshot carries it.

Snapshot (after the container's END marker): one message ``magic u32 'KVS1' | version u32 1 | count i64 | hash
u64 | applied i64``, then one message per key ``key length u16 | reserved u16 | value length u32 | key | value``.
"""

from __future__ import annotations

import struct
import zlib

import numba
import numpy as np

from aeron_numba.client.fragment_assembler import FragmentAssembler
from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.cluster.service.clustered_service import ClusteredServiceBase
from aeron_numba.cluster.service.service_snapshot import offer_until_taken
from aeron_numba.kernels import cluster_service_log as K
from aeron_numba.kernels.crc32 import crc32_update
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED

PUT, GET, DELETE, HASH = 1, 2, 3, 4
OK, NOT_FOUND, INVALID, FULL = 0, 1, 2, 3
OP_NAMES = {PUT: "PUT", GET: "GET", DELETE: "DELETE", HASH: "HASH"}
STATUS_NAMES = {OK: "OK", NOT_FOUND: "NOT_FOUND", INVALID: "INVALID", FULL: "FULL"}
MAX_KEY_LENGTH = 64
MAX_VALUE_LENGTH = 256
DEFAULT_CAPACITY = 16384
HEADER_LENGTH = 16
_HEADER = struct.Struct("<BBHIq")
_SNAPSHOT_HEADER = struct.Struct("<IIqQq")
_HASH_VALUE = struct.Struct("<Qq")
_SNAPSHOT_ENTRY = struct.Struct("<HHI")
SNAPSHOT_MAGIC = 0x3153564B  # "KVS1"
SNAPSHOT_VERSION = 1


# ------------------------------------------------------------------------------------------- wire format
def encode_request(op: int, request_id: int, key: bytes, value: bytes = b"") -> bytes:
    return _HEADER.pack(op, 0, len(key), len(value), request_id) + bytes(key) + bytes(value)


def encode_put(request_id: int, key: bytes, value: bytes) -> bytes:
    return encode_request(PUT, request_id, key, value)


def encode_get(request_id: int, key: bytes) -> bytes:
    return encode_request(GET, request_id, key)


def encode_delete(request_id: int, key: bytes) -> bytes:
    return encode_request(DELETE, request_id, key)


def encode_hash(request_id: int) -> bytes:
    return encode_request(HASH, request_id, b"")


def decode_hash_value(value: bytes) -> tuple[int, int]:
    """``(state_hash, applied)`` of a HASH response's value."""
    return _HASH_VALUE.unpack(value)


def decode_request(data) -> tuple[int, int, bytes, bytes]:
    """``(op, request_id, key, value)``; ``ValueError`` for bytes that are not a well-formed request."""
    data = bytes(data)
    if len(data) < HEADER_LENGTH:
        raise ValueError(f"request of {len(data)} bytes < header length {HEADER_LENGTH}")
    op, _, key_length, value_length, request_id = _HEADER.unpack_from(data, 0)
    if HEADER_LENGTH + key_length + value_length != len(data):
        raise ValueError(f"request of {len(data)} bytes: key length {key_length} + value length {value_length} "
                         f"+ header {HEADER_LENGTH} do not add up")
    return op, request_id, data[HEADER_LENGTH:HEADER_LENGTH + key_length], data[HEADER_LENGTH + key_length:]


def encode_response(op: int, status: int, request_id: int, value: bytes = b"") -> bytes:
    return _HEADER.pack(op, status, 0, len(value), request_id) + bytes(value)


def decode_response(data) -> tuple[int, int, int, bytes]:
    """``(op, status, request_id, value)``; ``ValueError`` for bytes that are not a response."""
    data = bytes(data)
    if len(data) < HEADER_LENGTH:
        raise ValueError(f"response of {len(data)} bytes < header length {HEADER_LENGTH}")
    op, status, _, value_length, request_id = _HEADER.unpack_from(data, 0)
    if HEADER_LENGTH + value_length != len(data):
        raise ValueError(f"response of {len(data)} bytes with value length {value_length}")
    return op, status, request_id, data[HEADER_LENGTH:]


def _check_capacity(capacity: int) -> int:
    if capacity < 4 or capacity & (capacity - 1):
        raise ClusterError(f"capacity={capacity} must be a power of two >= 4")
    return capacity


def _request_fields(data: bytes):
    """(op, request_id, key, value, status) of a request as both variants judge it (status INVALID or None)."""
    if len(data) < HEADER_LENGTH:
        return 0, 0, b"", b"", INVALID
    op, _, key_length, value_length, request_id = _HEADER.unpack_from(data, 0)
    if op == HASH:
        bad = key_length != 0 or value_length != 0 or len(data) != HEADER_LENGTH
    else:
        bad = (op not in OP_NAMES or HEADER_LENGTH + key_length + value_length != len(data)
               or not 1 <= key_length <= MAX_KEY_LENGTH or value_length > MAX_VALUE_LENGTH
               or (op != PUT and value_length != 0))
    if bad:
        return op, request_id, b"", b"", INVALID
    return op, request_id, data[HEADER_LENGTH:HEADER_LENGTH + key_length], data[HEADER_LENGTH + key_length:], None


# ------------------------------------------------------------------------------------------- Python variant
class KeyValueService(ClusteredServiceBase):
    """The store in a dict (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        self.capacity = _check_capacity(capacity)
        self.max_entries = capacity * 3 // 4
        self.store: dict[bytes, bytes] = {}
        self._hash = 0
        self.applied = 0
        self.cluster = None
        self.role = None

    @property
    def state_hash(self) -> int:
        return self._hash

    def entries(self):
        return self.store.items()

    def __len__(self) -> int:
        return len(self.store)

    def apply(self, request: bytes) -> bytes:
        """Apply one request to the store; returns the response."""
        op, request_id, key, value, status = _request_fields(request)
        answer = b""
        if status is None:
            if op == PUT:
                if key not in self.store and len(self.store) >= self.max_entries:
                    status = FULL
                else:
                    self.store[key] = value
                    status = OK
            elif op == GET:
                found = self.store.get(key)
                status, answer = (NOT_FOUND, b"") if found is None else (OK, found)
            elif op == HASH:
                status, answer = OK, _HASH_VALUE.pack(self._hash, self.applied)
            else:
                status = OK if self.store.pop(key, None) is not None else NOT_FOUND
        self._hash = zlib.crc32(bytes((status,)), zlib.crc32(request, self._hash))
        self.applied += 1
        return encode_response(op, status, request_id, answer)

    # ----------------------------------------------------------------------------------- callbacks
    def on_start(self, cluster, snapshot_image) -> None:
        self.cluster = cluster
        if snapshot_image is not None:
            load_snapshot(self, snapshot_image, cluster)

    def on_session_message(self, session, timestamp, buffer, offset, length, header) -> None:
        response = self.apply(bytes(buffer[offset:offset + length]))
        if session is not None:
            while session.offer(response) in (BACK_PRESSURED, ADMIN_ACTION):
                self.cluster.idle()

    def on_take_snapshot(self, snapshot_publication) -> None:
        take_snapshot(self, snapshot_publication, self.cluster)

    def on_role_change(self, new_role) -> None:
        self.role = new_role

    def _restore(self, count: int, state_hash: int, applied: int, entries) -> None:
        self.store = dict(entries)
        self._hash, self.applied = state_hash, applied


def take_snapshot(service, publication, cluster) -> None:
    """Write the store of either variant to a snapshot publication (the module docstring's format)."""
    idle = cluster.idle if cluster is not None else (lambda: None)
    entries = list(service.entries())
    header = _SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, len(entries), service.state_hash,
                                   service.applied)
    offer_until_taken(publication, header, 0, len(header), idle)
    for key, value in entries:
        message = _SNAPSHOT_ENTRY.pack(len(key), 0, len(value)) + key + value
        offer_until_taken(publication, message, 0, len(message), idle)


def load_snapshot(service, image, cluster) -> None:
    """Read a store written by ``take_snapshot`` from the snapshot image (after the container's END marker)."""
    head: list = []
    entries: list[tuple[bytes, bytes]] = []

    def on_message(buffer, offset, length, header) -> None:
        data = bytes(buffer[offset:offset + length])
        if not head:
            if len(data) != _SNAPSHOT_HEADER.size:
                raise ClusterError(f"key-value snapshot: header of {len(data)} bytes, expected {_SNAPSHOT_HEADER.size}")
            magic, version, count, state_hash, applied = _SNAPSHOT_HEADER.unpack(data)
            if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
                raise ClusterError(f"key-value snapshot: magic={magic:#x} version={version}, expected "
                                   f"{SNAPSHOT_MAGIC:#x} version {SNAPSHOT_VERSION}")
            head.extend((count, state_hash, applied))
            return
        key_length, _, value_length = _SNAPSHOT_ENTRY.unpack_from(data, 0)
        start = _SNAPSHOT_ENTRY.size
        if start + key_length + value_length != len(data):
            raise ClusterError(f"key-value snapshot: entry of {len(data)} bytes with key length {key_length} and "
                               f"value length {value_length}")
        entries.append((data[start:start + key_length], data[start + key_length:]))

    assembler = FragmentAssembler(on_message)
    while not head or len(entries) < head[0]:
        fragments = image.poll(assembler.on_fragment, 64)
        if fragments == 0:
            if image.is_closed or image.is_end_of_stream:
                raise ClusterError(f"key-value snapshot ended after {len(entries)} of "
                                   f"{head[0] if head else '?'} entries")
            if cluster is not None:
                cluster.idle()
    service._restore(head[0], head[1], head[2], entries)


# ------------------------------------------------------------------------------------------- compiled variant
# The store: a header, then ``capacity`` slots, open addressing with linear probing and backward-shift deletion (no
# tombstones: every probe ends at an empty slot, which the 3/4 load limit guarantees).
#   header  0 capacity i64 | 8 count i64 | 16 hash i64 (a CRC-32) | 24 applied i64 | 32 status scratch u8
#   slot    0 state u8 (0 empty, 1 full) | 2 key length u16 | 4 value length u32 | 8 key hash i64
#          16 key [64] | 80 value [256]
STORE_HEADER_LENGTH = 64
_CAPACITY, _COUNT, _HASH, _APPLIED, _STATUS_SCRATCH = 0, 8, 16, 24, 32
SLOT_LENGTH = 16 + MAX_KEY_LENGTH + MAX_VALUE_LENGTH
_SLOT_KEY, _SLOT_VALUE = 16, 16 + MAX_KEY_LENGTH


def new_store(capacity: int = DEFAULT_CAPACITY) -> np.ndarray:
    store = np.zeros(STORE_HEADER_LENGTH + _check_capacity(capacity) * SLOT_LENGTH, dtype=np.uint8)
    store[:8].view(np.int64)[0] = capacity
    return store


@numba.njit(cache=True)
def _i64(a, at):
    v = 0
    for i in range(8):
        v |= np.int64(a[at + i]) << (8 * i)
    return v


@numba.njit(cache=True)
def _put_i64(a, at, v):
    for i in range(8):
        a[at + i] = (v >> (8 * i)) & 0xFF


@numba.njit(cache=True)
def _u16(a, at):
    return np.int64(a[at]) | (np.int64(a[at + 1]) << 8)


@numba.njit(cache=True)
def _u32(a, at):
    return np.int64(a[at]) | (np.int64(a[at + 1]) << 8) | (np.int64(a[at + 2]) << 16) | (np.int64(a[at + 3]) << 24)


@numba.njit(cache=True)
def _put_u16(a, at, v):
    a[at] = v & 0xFF
    a[at + 1] = (v >> 8) & 0xFF


@numba.njit(cache=True)
def _put_u32(a, at, v):
    for i in range(4):
        a[at + i] = (v >> (8 * i)) & 0xFF


@numba.njit(cache=True)
def _key_hash(buffer, offset, length):
    return np.int64(crc32_update(0, buffer, offset, length))


@numba.njit(cache=True)
def _slot(store, index):
    return STORE_HEADER_LENGTH + index * SLOT_LENGTH


@numba.njit(cache=True)
def _find(store, buffer, key_offset, key_length, key_hash):
    """The slot index holding the key, or -(first empty slot index) - 1."""
    capacity = _i64(store, _CAPACITY)
    index = key_hash & (capacity - 1)
    while True:
        at = _slot(store, index)
        if store[at] == 0:
            return -index - 1
        if _i64(store, at + 8) == key_hash and _u16(store, at + 2) == key_length:
            same = True
            for i in range(key_length):
                if store[at + _SLOT_KEY + i] != buffer[key_offset + i]:
                    same = False
                    break
            if same:
                return index
        index = (index + 1) & (capacity - 1)


@numba.njit(cache=True)
def _remove(store, index):
    capacity = _i64(store, _CAPACITY)
    mask = capacity - 1
    store[_slot(store, index)] = 0
    hole = index
    j = index
    while True:
        j = (j + 1) & mask
        at = _slot(store, j)
        if store[at] == 0:
            break
        home = _i64(store, at + 8) & mask
        # the entry at j may move to the hole if its home is not cyclically in (hole, j]
        if hole <= j:
            stays = hole < home <= j
        else:
            stays = home > hole or home <= j
        if stays:
            continue
        dst = _slot(store, hole)
        store[dst:dst + SLOT_LENGTH] = store[at:at + SLOT_LENGTH]
        store[at] = 0
        hole = j


@numba.njit(cache=True)
def apply_request(store, buffer, offset, length, outbox, cluster_session_id, reply):
    """Apply one request (the module docstring's rules) and, if ``reply``, queue the response in ``outbox``."""
    op = 0
    request_id = 0
    status = INVALID
    answer_at = -1
    answer_length = 0
    if length >= HEADER_LENGTH:
        op = np.int64(buffer[offset])
        key_length = _u16(buffer, offset + 2)
        value_length = _u32(buffer, offset + 4)
        request_id = _i64(buffer, offset + 8)
        valid = (PUT <= op <= DELETE and HEADER_LENGTH + key_length + value_length == length
                 and 1 <= key_length <= MAX_KEY_LENGTH and value_length <= MAX_VALUE_LENGTH
                 and (op == PUT or value_length == 0))
        if op == HASH and key_length == 0 and value_length == 0 and length == HEADER_LENGTH:
            status = OK
            answer_length = 16  # written below from the header, before this request is hashed
        elif valid:
            key_offset = offset + HEADER_LENGTH
            key_hash = _key_hash(buffer, key_offset, key_length)
            found = _find(store, buffer, key_offset, key_length, key_hash)
            if op == PUT:
                count = _i64(store, _COUNT)
                if found < 0 and count >= (_i64(store, _CAPACITY) * 3) // 4:
                    status = FULL
                else:
                    index = found if found >= 0 else -found - 1
                    at = _slot(store, index)
                    if found < 0:
                        store[at] = 1
                        _put_u16(store, at + 2, key_length)
                        _put_i64(store, at + 8, key_hash)
                        store[at + _SLOT_KEY:at + _SLOT_KEY + key_length] = buffer[key_offset:key_offset + key_length]
                        _put_i64(store, _COUNT, count + 1)
                    _put_u32(store, at + 4, value_length)
                    value_offset = key_offset + key_length
                    store[at + _SLOT_VALUE:at + _SLOT_VALUE + value_length] = \
                        buffer[value_offset:value_offset + value_length]
                    status = OK
            elif op == GET:
                if found >= 0:
                    at = _slot(store, found)
                    answer_at = at + _SLOT_VALUE
                    answer_length = _u32(store, at + 4)
                    status = OK
                else:
                    status = NOT_FOUND
            else:
                if found >= 0:
                    _remove(store, found)
                    _put_i64(store, _COUNT, _i64(store, _COUNT) - 1)
                    status = OK
                else:
                    status = NOT_FOUND
    hash_before = _i64(store, _HASH)
    applied_before = _i64(store, _APPLIED)
    crc = crc32_update(hash_before, buffer, offset, length)
    store[_STATUS_SCRATCH] = status
    _put_i64(store, _HASH, crc32_update(crc, store, _STATUS_SCRATCH, 1))
    _put_i64(store, _APPLIED, _i64(store, _APPLIED) + 1)
    if reply:
        at = K.reply_claim(outbox, cluster_session_id, HEADER_LENGTH + answer_length)
        if at >= 0:
            outbox[at] = op
            outbox[at + 1] = status
            _put_u16(outbox, at + 2, 0)
            _put_u32(outbox, at + 4, answer_length)
            _put_i64(outbox, at + 8, request_id)
            if op == HASH and status == OK:
                _put_i64(outbox, at + HEADER_LENGTH, hash_before)
                _put_i64(outbox, at + HEADER_LENGTH + 8, applied_before)
            elif answer_length > 0:
                outbox[at + HEADER_LENGTH:at + HEADER_LENGTH + answer_length] = \
                    store[answer_at:answer_at + answer_length]


@numba.njit(K.SESSION_MESSAGE_HANDLER_SIG, cache=True)
def on_session_message_compiled(state, buffer, offset, length, cluster_session_id, timestamp, outbox):
    """The compiled service's session message handler: apply the request and queue its response."""
    apply_request(state, buffer, offset, length, outbox, cluster_session_id, True)


class CompiledKeyValueService(ClusteredServiceBase):
    """The store in a ``uint8`` array, requests applied by ``on_session_message_compiled`` (module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        self.capacity = _check_capacity(capacity)
        self.max_entries = capacity * 3 // 4
        # instance attributes: a dispatcher set on the class would be bound as a method
        self.session_message_handler = on_session_message_compiled
        self.state = new_store(capacity)
        self.cluster = None
        self.role = None
        self._scratch_outbox = K.new_outbox(4096)

    @property
    def state_hash(self) -> int:
        return int(self.state[_HASH:_HASH + 8].view(np.int64)[0])

    @property
    def applied(self) -> int:
        return int(self.state[_APPLIED:_APPLIED + 8].view(np.int64)[0])

    def __len__(self) -> int:
        return int(self.state[_COUNT:_COUNT + 8].view(np.int64)[0])

    def entries(self):
        slots = self.state[STORE_HEADER_LENGTH:].reshape(self.capacity, SLOT_LENGTH)
        for index in np.flatnonzero(slots[:, 0]).tolist():
            slot = slots[index]
            key_length = int(slot[2:4].view(np.uint16)[0])
            value_length = int(slot[4:8].view(np.uint32)[0])
            yield bytes(slot[_SLOT_KEY:_SLOT_KEY + key_length]), bytes(slot[_SLOT_VALUE:_SLOT_VALUE + value_length])

    def apply(self, request: bytes) -> bytes:
        """Apply one request from Python (tests, tools): the same code as the compiled path; returns the response."""
        outbox = self._scratch_outbox
        K.clear_outbox(outbox)
        data = np.frombuffer(bytes(request), dtype=np.uint8)
        apply_request(self.state, data, 0, data.size, outbox, 0, True)
        length = int(outbox[K.OUTBOX_HEADER_LENGTH:K.OUTBOX_HEADER_LENGTH + 4].view(np.int32)[0])
        start = K.OUTBOX_HEADER_LENGTH + K.RECORD_HEADER_LENGTH + K.SESSION_HEADER_LENGTH
        return bytes(outbox[start:start + length - K.SESSION_HEADER_LENGTH])

    def on_start(self, cluster, snapshot_image) -> None:
        self.cluster = cluster
        if snapshot_image is not None:
            load_snapshot(self, snapshot_image, cluster)

    def on_take_snapshot(self, snapshot_publication) -> None:
        take_snapshot(self, snapshot_publication, self.cluster)

    def on_role_change(self, new_role) -> None:
        self.role = new_role

    def _restore(self, count: int, state_hash: int, applied: int, entries) -> None:
        self.state[:] = new_store(self.capacity)  # in place: the container's compiled path holds this array
        outbox = self._scratch_outbox
        for key, value in entries:
            K.clear_outbox(outbox)
            request = np.frombuffer(encode_put(0, key, value), dtype=np.uint8)
            apply_request(self.state, request, 0, request.size, outbox, 0, False)
        if len(self) != count:
            raise ClusterError(f"key-value snapshot: {len(self)} keys loaded of {count}")
        self.state[_HASH:_HASH + 8].view(np.int64)[0] = state_hash
        self.state[_APPLIED:_APPLIED + 8].view(np.int64)[0] = applied
