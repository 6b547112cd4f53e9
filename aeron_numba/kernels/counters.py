"""Counters: Agrona's ``CountersManager`` / ``CountersReader`` over the metadata and values sections (spec §9).

Counter ``id`` owns a 512-byte metadata record at ``id * 512`` and a 128-byte value record at ``id * 128``
(``layout/counters.py``). Kernels take the two ``np.uint8`` views and return ids or negative status codes.

Publication protocol (§9.2): an allocation writes type, deadline, key, label and label length, and only then
release-stores ``state = ALLOCATED``; a reader acquire-loads the state first, so whatever it reads after
seeing ALLOCATED is complete. A free release-stores RECLAIMED before it zeroes the key, and an id is reused
only after its ``free_for_reuse_deadline_ms``: that delay is what lets a reader that saw ALLOCATED finish
reading a record before anyone can overwrite it. ``collect_counters`` re-checks the state after its copy
(after an acquire fence, as in a seqlock) and drops a record that was freed under it.

The allocator keeps no private state: the next id is derived from the buffers alone (the records in use are
a prefix of non-UNUSED records), so a driver restarting over the same file carries on where it stopped.
Agrona reuses freed ids in the order they were freed; here the lowest reusable id wins, which is the same
set of ids and needs no free list.

Bounds: every kernel checks the id against both buffer lengths before touching memory, and clamps lengths
read from shared memory (a label length is another process's data): garbage never causes an out-of-bounds
access. Getters of a value return 0 for an invalid id, so validate ids from untrusted sources once with
``is_valid_counter_id`` (the Python classes below do).

Python wrappers (``CountersReader``, ``CountersManager``) and the key/label builders of §9.4 follow the
kernels; they are cold-path conveniences for the driver's conductor and AeronStat-style tools.
"""

from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import numpy as np

from aeron_numba.errors import ConfigurationError, CounterStateError, CountersFullError, LayoutError
from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.memory import copy_bytes, fill_bytes
from aeron_numba.layout.bits import INT32_MAX
from aeron_numba.layout.counters import (
    CHANNEL_KEY_MAX_CHANNEL_LENGTH,
    CLIENT_HEARTBEAT_NAME,
    COUNTER_ID_INVALID,
    COUNTER_LENGTH,
    COUNTER_NOT_ALLOCATED,
    COUNTER_OWNER_ID_OFFSET,
    COUNTER_REFERENCE_ID_OFFSET,
    COUNTER_REGISTRATION_ID_OFFSET,
    COUNTER_VALUE_OFFSET,
    COUNTERS_FULL,
    DEFAULT_FREE_TO_REUSE_TIMEOUT_MS,
    DEFAULT_OWNER_ID,
    DEFAULT_REFERENCE_ID,
    DEFAULT_REGISTRATION_ID,
    LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET,
    LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET,
    LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET,
    LOCAL_SOCKADDR_KEY_MAX_ADDRESS_LENGTH,
    MAX_KEY_LENGTH,
    MAX_LABEL_LENGTH,
    METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET,
    METADATA_KEY_OFFSET,
    METADATA_LABEL_LENGTH_OFFSET,
    METADATA_LABEL_OFFSET,
    METADATA_LENGTH,
    METADATA_STATE_OFFSET,
    METADATA_TYPE_ID_OFFSET,
    NOT_FREE_TO_REUSE,
    NULL_COUNTER_ID,
    RECORD_ALLOCATED,
    RECORD_RECLAIMED,
    RECORD_UNUSED,
    STREAM_KEY_MAX_CHANNEL_LENGTH,
    SUBSCRIBER_POSITION_NAME,
    SYSTEM_COUNTER_TYPE_ID,
    SYSTEM_COUNTERS,
    check_counters_buffers,
)

# Columns of the counter descriptor array filled by ``collect_counters``.
COUNTER_DESC_ID = 0
COUNTER_DESC_TYPE_ID = 1
COUNTER_DESC_LABEL_LENGTH = 2
COUNTER_DESC_VALUE = 3
COUNTER_DESC_REGISTRATION_ID = 4
COUNTER_DESC_OWNER_ID = 5
COUNTER_DESC_REFERENCE_ID = 6
COUNTER_DESC_COLUMNS = 7

_INT32_MIN = -INT32_MAX - 1


# --------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------


@kernel(inline="always")
def _capacity(metadata, values):
    # Both sections bound the id: a short metadata section (garbage lengths) must not be over-read.
    return min(values.size // COUNTER_LENGTH, metadata.size // METADATA_LENGTH)


@kernel(inline="always")
def _clamp(length, limit):
    if length < 0:
        return 0
    return min(length, limit)


@kernel
def max_counter_id(metadata, values):
    """Highest counter id the two sections can hold: ``min(values/128, metadata/512) - 1`` (§9).

    Returns ``-1`` when the sections cannot hold a single counter.
    """
    return _capacity(metadata, values) - 1


@kernel
def is_valid_counter_id(metadata, values, counter_id):
    """True when ``0 <= counter_id <= max_counter_id``."""
    return 0 <= counter_id < _capacity(metadata, values)


@kernel
def allocate(metadata, values, type_id, key, key_length, label, label_length, now_ms):
    """Allocate a counter (§9.2) and return its id.

    Picks the lowest RECLAIMED id whose ``free_for_reuse_deadline_ms <= now_ms``, otherwise the first UNUSED
    id, and resets its value record (registration id, owner id, reference id, value; the spec resets only
    reused ids, but a driver restarted over an old file may find stale values past the prefix). Writes the type id,
    deadline ``NOT_FREE_TO_REUSE``, key (truncated to 112, rest zeroed), label (truncated to 380, rest
    zeroed) and label length, then release-stores ``state = ALLOCATED``.

    Parameters
    ----------
    metadata, values : uint8[::1]
        The counters metadata and values sections.
    type_id : int
        Counter type (§9.3), stored as i32.
    key, label : uint8[::1]
        Key bytes and ASCII label bytes; ``key_length`` / ``label_length`` are clamped to their arrays.
    now_ms : int
        Epoch-ms clock reading used against reuse deadlines.

    Returns
    -------
    int
        Counter id ``>= 0``, or ``COUNTERS_FULL``.
    """
    capacity = _capacity(metadata, values)
    counter_id = NULL_COUNTER_ID
    for i in range(capacity):
        record = i * METADATA_LENGTH
        state = atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET)
        if state == RECORD_UNUSED:
            counter_id = i
            break
        if state == RECORD_RECLAIMED:
            if now_ms >= atomics.get_int64(metadata, record + METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET):
                counter_id = i
                break
    if counter_id < 0:
        return COUNTERS_FULL

    # Reset the value record before publishing: a reused id must not show its previous owner's values,
    # and a client polling find-by-registration-id must not match a stale registration id.
    value_record = counter_id * COUNTER_LENGTH
    atomics.put_int64_release(values, value_record + COUNTER_REGISTRATION_ID_OFFSET, DEFAULT_REGISTRATION_ID)
    atomics.put_int64(values, value_record + COUNTER_OWNER_ID_OFFSET, DEFAULT_OWNER_ID)
    atomics.put_int64(values, value_record + COUNTER_REFERENCE_ID_OFFSET, DEFAULT_REFERENCE_ID)
    atomics.put_int64_release(values, value_record + COUNTER_VALUE_OFFSET, 0)

    record = counter_id * METADATA_LENGTH
    atomics.put_int32(metadata, record + METADATA_TYPE_ID_OFFSET, type_id)
    atomics.put_int64(metadata, record + METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET, NOT_FREE_TO_REUSE)
    key_start = record + METADATA_KEY_OFFSET
    n = _clamp(key_length, min(MAX_KEY_LENGTH, key.size))
    copy_bytes(metadata, key_start, key, 0, n)
    fill_bytes(metadata, key_start + n, MAX_KEY_LENGTH - n, 0)
    label_start = record + METADATA_LABEL_OFFSET
    n = _clamp(label_length, min(MAX_LABEL_LENGTH, label.size))
    copy_bytes(metadata, label_start, label, 0, n)
    fill_bytes(metadata, label_start + n, MAX_LABEL_LENGTH - n, 0)
    atomics.put_int32(metadata, record + METADATA_LABEL_LENGTH_OFFSET, n)
    # Last: a reader that acquire-loads ALLOCATED sees every field above.
    atomics.put_int32_release(metadata, record + METADATA_STATE_OFFSET, RECORD_ALLOCATED)
    return counter_id


@kernel
def free(metadata, values, counter_id, now_ms, free_to_reuse_timeout_ms):
    """Free an allocated counter (§9.2): release-store RECLAIMED, zero the key, set the reuse deadline.

    The deadline is ``now_ms + free_to_reuse_timeout_ms`` (saturating; a negative timeout counts as 0).

    Returns
    -------
    int
        0, ``COUNTER_ID_INVALID`` or ``COUNTER_NOT_ALLOCATED``.
    """
    if not (0 <= counter_id < _capacity(metadata, values)):
        return COUNTER_ID_INVALID
    record = counter_id * METADATA_LENGTH
    if atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET) != RECORD_ALLOCATED:
        return COUNTER_NOT_ALLOCATED
    # State first, and the fence keeps the zeroing below from moving above it (seqlock writer): a reader
    # that copied zeros from the key is then sure to see RECLAIMED when it re-checks the state.
    atomics.put_int32_release(metadata, record + METADATA_STATE_OFFSET, RECORD_RECLAIMED)
    atomics.release_fence()
    key_start = record + METADATA_KEY_OFFSET
    fill_bytes(metadata, key_start, MAX_KEY_LENGTH, 0)
    timeout = max(free_to_reuse_timeout_ms, 0)
    deadline = NOT_FREE_TO_REUSE if now_ms > NOT_FREE_TO_REUSE - timeout else now_ms + timeout
    atomics.put_int64(metadata, record + METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET, deadline)
    return 0


# --- value record (§9.1) ---------------------------------------------------------------------------------


def counter_value_address(values: np.ndarray, counter_id: int) -> int:
    """The raw address of counter ``counter_id``'s value in the values buffer ``values``, for compiled code that
    reads or waits on it by address (idle watches, the doorbell, the network cycles' stages); valid while
    ``values`` is mapped."""
    return _field_address(values, counter_id, COUNTER_VALUE_OFFSET)


def counter_registration_id_address(values: np.ndarray, counter_id: int) -> int:
    """The raw address of counter ``counter_id``'s registration id, for compiled code that checks by address that the
    counter is still the one it was given (a stage's)."""
    return _field_address(values, counter_id, COUNTER_REGISTRATION_ID_OFFSET)


def _field_address(values: np.ndarray, counter_id: int, field_offset: int) -> int:
    if not 0 <= counter_id < values.nbytes // COUNTER_LENGTH:
        raise ValueError(f"counter_id={counter_id} is outside the values buffer of {values.nbytes // COUNTER_LENGTH}")
    return values.ctypes.data + counter_id * COUNTER_LENGTH + field_offset


@kernel(inline="always")
def _value_offset(values, counter_id, field_offset):
    """Byte offset of a value-record field, or -1 when the id is outside the values section."""
    if 0 <= counter_id < values.size // COUNTER_LENGTH:
        return counter_id * COUNTER_LENGTH + field_offset
    return -1


@kernel
def get_counter_value(values, counter_id):
    """Acquire-load the counter value (Agrona ``getCounterValue``); 0 for an invalid id."""
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_int64_acquire(values, offset)


@kernel
def get_counter_value_weak(values, counter_id):
    """Relaxed load of the counter value (Agrona ``getWeak``); 0 for an invalid id."""
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_int64(values, offset)


@kernel
def set_counter_value(values, counter_id, value):
    """Release-store the counter value (Agrona ``setCounterValue`` / ``setRelease``).

    Returns 0 or ``COUNTER_ID_INVALID``.
    """
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return COUNTER_ID_INVALID
    atomics.put_int64_release(values, offset, value)
    return 0


@kernel
def set_counter_value_weak(values, counter_id, value):
    """Relaxed store of the counter value (Agrona ``setWeak``). Returns 0 or ``COUNTER_ID_INVALID``."""
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return COUNTER_ID_INVALID
    atomics.put_int64(values, offset, value)
    return 0


@kernel
def get_and_add_counter_value(values, counter_id, delta):
    """Atomic get-and-add on the value; returns the previous value (0 and no effect for an invalid id)."""
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_and_add_int64(values, offset, delta)


@kernel
def compare_and_set_counter_value(values, counter_id, expected, update):
    """Atomic compare-and-set on the value; False for an invalid id."""
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return False
    return atomics.compare_and_set_int64(values, offset, expected, update)


@kernel
def propose_max_counter_value(values, counter_id, proposed):
    """Single-writer ``proposeMaxRelease``: release-store ``proposed`` if it exceeds the value.

    Returns True when the value was updated.
    """
    offset = _value_offset(values, counter_id, COUNTER_VALUE_OFFSET)
    if offset < 0:
        return False
    if atomics.get_int64(values, offset) < proposed:
        atomics.put_int64_release(values, offset, proposed)
        return True
    return False


@kernel
def get_counter_registration_id(values, counter_id):
    """Acquire-load the registration id (0 default; 0 for an invalid id)."""
    offset = _value_offset(values, counter_id, COUNTER_REGISTRATION_ID_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_int64_acquire(values, offset)


@kernel
def set_counter_registration_id(values, counter_id, registration_id):
    """Release-store the registration id. Returns 0 or ``COUNTER_ID_INVALID``."""
    offset = _value_offset(values, counter_id, COUNTER_REGISTRATION_ID_OFFSET)
    if offset < 0:
        return COUNTER_ID_INVALID
    atomics.put_int64_release(values, offset, registration_id)
    return 0


@kernel
def get_counter_owner_id(values, counter_id):
    """Load the owner (client) id (0 default; 0 for an invalid id)."""
    offset = _value_offset(values, counter_id, COUNTER_OWNER_ID_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_int64(values, offset)


@kernel
def set_counter_owner_id(values, counter_id, owner_id):
    """Store the owner id. Returns 0 or ``COUNTER_ID_INVALID``."""
    offset = _value_offset(values, counter_id, COUNTER_OWNER_ID_OFFSET)
    if offset < 0:
        return COUNTER_ID_INVALID
    atomics.put_int64(values, offset, owner_id)
    return 0


@kernel
def get_counter_reference_id(values, counter_id):
    """Load the reference id (0 default; 0 for an invalid id)."""
    offset = _value_offset(values, counter_id, COUNTER_REFERENCE_ID_OFFSET)
    if offset < 0:
        return 0
    return atomics.get_int64(values, offset)


@kernel
def set_counter_reference_id(values, counter_id, reference_id):
    """Store the reference id. Returns 0 or ``COUNTER_ID_INVALID``."""
    offset = _value_offset(values, counter_id, COUNTER_REFERENCE_ID_OFFSET)
    if offset < 0:
        return COUNTER_ID_INVALID
    atomics.put_int64(values, offset, reference_id)
    return 0


# --- metadata record (§9.2) ------------------------------------------------------------------------------


@kernel(inline="always")
def _metadata_offset(metadata, counter_id):
    """Byte offset of the metadata record, or -1 when the id is outside the metadata section."""
    if 0 <= counter_id < metadata.size // METADATA_LENGTH:
        return counter_id * METADATA_LENGTH
    return -1


@kernel
def get_counter_state(metadata, counter_id):
    """Acquire-load the record state: ``RECORD_UNUSED``/``ALLOCATED``/``RECLAIMED``, or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    return atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET)


@kernel
def get_counter_type_id(metadata, counter_id):
    """Load the type id, or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    return atomics.get_int32(metadata, record + METADATA_TYPE_ID_OFFSET)


@kernel
def get_free_for_reuse_deadline(metadata, counter_id):
    """Load ``free_for_reuse_deadline_ms`` (``NOT_FREE_TO_REUSE`` while allocated), or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    return atomics.get_int64(metadata, record + METADATA_FREE_FOR_REUSE_DEADLINE_OFFSET)


@kernel
def get_counter_label_length(metadata, counter_id):
    """Label length clamped to ``[0, MAX_LABEL_LENGTH]``, or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    return _clamp(atomics.get_int32(metadata, record + METADATA_LABEL_LENGTH_OFFSET), MAX_LABEL_LENGTH)


@kernel
def get_counter_label(metadata, counter_id, dst):
    """Copy the label into ``dst`` (truncated to ``dst.size``); returns the bytes copied or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    length = _clamp(atomics.get_int32(metadata, record + METADATA_LABEL_LENGTH_OFFSET), MAX_LABEL_LENGTH)
    length = min(length, dst.size)
    start = record + METADATA_LABEL_OFFSET
    copy_bytes(dst, 0, metadata, start, length)
    return length


@kernel
def get_counter_key(metadata, counter_id, dst):
    """Copy the 112-byte key into ``dst`` (truncated to ``dst.size``); returns bytes copied or ``COUNTER_ID_INVALID``."""
    record = _metadata_offset(metadata, counter_id)
    if record < 0:
        return COUNTER_ID_INVALID
    length = min(MAX_KEY_LENGTH, dst.size)
    start = record + METADATA_KEY_OFFSET
    copy_bytes(dst, 0, metadata, start, length)
    return length


# --- iteration and search --------------------------------------------------------------------------------


@kernel
def next_allocated_counter_id(metadata, values, from_id):
    """Lowest ALLOCATED id ``>= from_id``, or ``NULL_COUNTER_ID`` at the first UNUSED record / the end.

    Compiled callers iterate with ``i = next_allocated_counter_id(m, v, i + 1)``; RECLAIMED records are
    skipped and the walk stops at the first UNUSED one, like Agrona's ``forEach``.
    """
    capacity = _capacity(metadata, values)
    for i in range(max(from_id, 0), capacity):
        state = atomics.get_int32_acquire(metadata, i * METADATA_LENGTH + METADATA_STATE_OFFSET)
        if state == RECORD_ALLOCATED:
            return i
        if state == RECORD_UNUSED:
            break
    return NULL_COUNTER_ID


@kernel
def find_counter_by_type_id_and_registration_id(metadata, values, type_id, registration_id):
    """First ALLOCATED counter with this type id and registration id (e.g. a client's heartbeat, type 11).

    Returns the id or ``NULL_COUNTER_ID``.
    """
    capacity = _capacity(metadata, values)
    for i in range(capacity):
        record = i * METADATA_LENGTH
        state = atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET)
        if state == RECORD_UNUSED:
            break
        if (
            state == RECORD_ALLOCATED
            and atomics.get_int32(metadata, record + METADATA_TYPE_ID_OFFSET) == type_id
            and atomics.get_int64_acquire(values, i * COUNTER_LENGTH + COUNTER_REGISTRATION_ID_OFFSET)
            == registration_id
        ):
            return i
    return NULL_COUNTER_ID


@kernel
def find_counter_by_registration_id(metadata, values, registration_id):
    """First ALLOCATED counter with this registration id, or ``NULL_COUNTER_ID``."""
    capacity = _capacity(metadata, values)
    for i in range(capacity):
        state = atomics.get_int32_acquire(metadata, i * METADATA_LENGTH + METADATA_STATE_OFFSET)
        if state == RECORD_UNUSED:
            break
        if (
            state == RECORD_ALLOCATED
            and atomics.get_int64_acquire(values, i * COUNTER_LENGTH + COUNTER_REGISTRATION_ID_OFFSET)
            == registration_id
        ):
            return i
    return NULL_COUNTER_ID


@kernel
def collect_counters(metadata, values, start_id, out_desc, out_keys, out_labels):
    """Describe up to ``n`` ALLOCATED counters from ``start_id`` on, for Python callers (one call per batch).

    Walks ids like ``next_allocated_counter_id``. Row ``r`` gets the descriptor columns ``COUNTER_DESC_*``
    in ``out_desc[r]``, the key in ``out_keys[r, :112]`` and the label in
    ``out_labels[r, :label_length]``. After copying a record the state is re-read behind an acquire fence
    and the row is dropped unless it is still ALLOCATED (it was freed during the copy).

    Parameters
    ----------
    out_desc : int64[:, ::1]
        ``n x COUNTER_DESC_COLUMNS`` (``n`` = the fewest rows of the three outputs).
    out_keys : uint8[:, ::1]
        ``n x MAX_KEY_LENGTH`` (narrower keeps a prefix).
    out_labels : uint8[:, ::1]
        ``n x MAX_LABEL_LENGTH`` (narrower keeps a prefix; the descriptor has the copied length).

    Returns
    -------
    int
        Rows filled. Fewer than ``n`` means the walk reached the end; otherwise resume from the last id + 1.
        0 if ``out_desc`` has fewer than ``COUNTER_DESC_COLUMNS`` columns.
    """
    if out_desc.shape[1] < COUNTER_DESC_COLUMNS:
        return 0
    limit = min(out_desc.shape[0], min(out_keys.shape[0], out_labels.shape[0]))
    key_width = min(MAX_KEY_LENGTH, out_keys.shape[1])
    label_width = min(MAX_LABEL_LENGTH, out_labels.shape[1])
    capacity = _capacity(metadata, values)
    count = 0
    i = max(start_id, 0)
    while count < limit and i < capacity:
        record = i * METADATA_LENGTH
        state = atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET)
        if state == RECORD_UNUSED:
            break
        if state == RECORD_ALLOCATED:
            type_id = atomics.get_int32(metadata, record + METADATA_TYPE_ID_OFFSET)
            label_length = _clamp(atomics.get_int32(metadata, record + METADATA_LABEL_LENGTH_OFFSET), label_width)
            start = record + METADATA_KEY_OFFSET
            copy_bytes(out_keys[count], 0, metadata, start, key_width)
            start = record + METADATA_LABEL_OFFSET
            copy_bytes(out_labels[count], 0, metadata, start, label_length)
            # Seqlock-style re-check: the copies above must not be reordered after this load.
            atomics.acquire_fence()
            if atomics.get_int32_acquire(metadata, record + METADATA_STATE_OFFSET) == RECORD_ALLOCATED:
                value_record = i * COUNTER_LENGTH
                out_desc[count, COUNTER_DESC_ID] = i
                out_desc[count, COUNTER_DESC_TYPE_ID] = type_id
                out_desc[count, COUNTER_DESC_LABEL_LENGTH] = label_length
                out_desc[count, COUNTER_DESC_VALUE] = atomics.get_int64_acquire(
                    values, value_record + COUNTER_VALUE_OFFSET
                )
                out_desc[count, COUNTER_DESC_REGISTRATION_ID] = atomics.get_int64_acquire(
                    values, value_record + COUNTER_REGISTRATION_ID_OFFSET
                )
                out_desc[count, COUNTER_DESC_OWNER_ID] = atomics.get_int64(values, value_record + COUNTER_OWNER_ID_OFFSET)
                out_desc[count, COUNTER_DESC_REFERENCE_ID] = atomics.get_int64(
                    values, value_record + COUNTER_REFERENCE_ID_OFFSET
                )
                count += 1
        i += 1
    return count


# --------------------------------------------------------------------------------------------------------
# Keys and labels of the driver's counters (§9.4) — Python, cold path
# --------------------------------------------------------------------------------------------------------


def _ascii(text: str) -> bytes:
    # Agrona's putStringWithoutLengthAscii writes '?' for anything outside ASCII.
    return text.encode("ascii", errors="replace")


def stream_counter_key(registration_id: int, session_id: int, stream_id: int, channel: str) -> bytes:
    """Stream position key (§9.4, types 1 2 3 4 5 9 12 13): ids, then the channel truncated to 92 bytes."""
    channel_bytes = _ascii(channel)[:STREAM_KEY_MAX_CHANNEL_LENGTH]
    return struct.pack("<qiii", registration_id, session_id, stream_id, len(channel_bytes)) + channel_bytes


def stream_counter_label(
    name: str, registration_id: int, session_id: int, stream_id: int, channel: str, suffix: str = ""
) -> str:
    """``"<name>: <registrationId> <sessionId> <streamId> <channel> <suffix>"``, e.g. ``pub-lmt: 5 1234 1001 aeron:ipc ``.

    The C driver's form (aeron_stream_counter_allocate): the space before the suffix is there even when the
    suffix is empty, so AeronStat shows our labels exactly as aeronmd's.
    """
    return f"{name}: {registration_id} {session_id} {stream_id} {channel} {suffix}"


def subscriber_position_label(
    registration_id: int, session_id: int, stream_id: int, channel: str, join_position: int
) -> str:
    """``sub-pos`` label: the stream label with ``@<joinPosition>`` as its suffix (§9.4)."""
    return stream_counter_label(
        SUBSCRIBER_POSITION_NAME, registration_id, session_id, stream_id, channel, f"@{join_position}"
    )


def channel_status_key(channel: str) -> bytes:
    """Channel status key (§9.4, types 6 7): i32 length, then the channel truncated to 108 bytes."""
    channel_bytes = _ascii(channel)[:CHANNEL_KEY_MAX_CHANNEL_LENGTH]
    return struct.pack("<i", len(channel_bytes)) + channel_bytes


def channel_status_label(name: str, channel: str, bind_address: str | None = None) -> str:
    """``"snd-channel: <channel> <bindAddress>"`` / ``"rcv-channel: ..."``: the C driver appends the bound
    ``host:port`` once the endpoint's socket is open (aeron_channel_endpoint_status_update_label)."""
    return f"{name}: {channel}" if bind_address is None else f"{name}: {channel} {bind_address}"


def local_sockaddr_key(channel_status_id: int, address: str) -> bytes:
    """Local socket address key (type 14): the channel status counter id, then ``host:port`` (at most 103 bytes)."""
    address_bytes = _ascii(address)[:LOCAL_SOCKADDR_KEY_MAX_ADDRESS_LENGTH]
    key = bytearray(LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET + len(address_bytes))
    struct.pack_into("<i", key, LOCAL_SOCKADDR_KEY_CHANNEL_STATUS_ID_OFFSET, channel_status_id)
    struct.pack_into("<i", key, LOCAL_SOCKADDR_KEY_ADDRESS_LENGTH_OFFSET, len(address_bytes))
    key[LOCAL_SOCKADDR_KEY_ADDRESS_OFFSET:] = address_bytes
    return bytes(key)


def local_sockaddr_label(name: str, channel_status_id: int, address: str) -> str:
    """``"snd-local-sockaddr: <channelStatusId> <host:port>"`` / ``"rcv-local-sockaddr: ..."``."""
    return f"{name}: {channel_status_id} {address}"


def heartbeat_counter_key(client_id: int) -> bytes:
    """Client heartbeat key (§9.4, type 11): the i64 client id."""
    return struct.pack("<q", client_id)


def heartbeat_counter_label(
    client_id: int, client_name: str | None = None, version: str | None = None, commit: str | None = None
) -> str:
    """``"client-heartbeat: id=<clientId>"`` plus the client's `` name=… version=… commit=…`` when given (§9.4)."""
    label = f"{CLIENT_HEARTBEAT_NAME}: id={client_id}"
    for field, text in (("name", client_name), ("version", version), ("commit", commit)):
        if text is not None:
            label += f" {field}={text}"
    return label


# --------------------------------------------------------------------------------------------------------
# Python wrappers
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CounterInfo:
    """One allocated counter as seen by a reader (AeronStat's row)."""

    counter_id: int
    type_id: int
    key: bytes
    label: str
    value: int
    registration_id: int
    owner_id: int
    reference_id: int


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_view(name: str, buffer: np.ndarray) -> None:
    if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
        raise LayoutError(f"{name} must be a 1-D np.uint8 array, got {type(buffer).__name__} {getattr(buffer, 'dtype', '')}")
    if not buffer.flags.c_contiguous:
        raise LayoutError(f"{name} must be C-contiguous")


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise ConfigurationError(f"{name}={value!r} must be an int")
    if value < low or value > high:
        raise ConfigurationError(f"{name}={value} outside [{low}, {high}]")
    return int(value)


def _u8(data: bytes) -> np.ndarray:
    # A writable copy: one array type for every call, so each kernel compiles (and caches) once.
    return np.frombuffer(bytearray(data), dtype=np.uint8)


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class CountersReader:
    """Read-only view of the counters (Agrona ``CountersReader``): iterate, read labels, keys and values.

    Parameters
    ----------
    metadata_buffer, values_buffer : np.ndarray
        ``np.uint8`` views of the metadata and values sections (metadata at least 4x values, §6.2).
    """

    _BATCH = 64

    def __init__(self, metadata_buffer: np.ndarray, values_buffer: np.ndarray):
        _check_view("metadata_buffer", metadata_buffer)
        _check_view("values_buffer", values_buffer)
        check_counters_buffers(metadata_buffer.size, values_buffer.size)
        self.metadata_buffer = metadata_buffer
        self.values_buffer = values_buffer
        self._max_counter_id = int(max_counter_id(metadata_buffer, values_buffer))

    @property
    def max_counter_id(self) -> int:
        """The highest counter id both the metadata and the values sections have room for."""
        return self._max_counter_id

    def _check_id(self, counter_id: int) -> int:
        if not isinstance(counter_id, (int, np.integer)) or isinstance(counter_id, bool):
            raise ConfigurationError(f"counter_id={counter_id!r} must be an int")
        if counter_id < 0:
            raise ConfigurationError(f"counter_id={counter_id} < 0")
        if counter_id > self._max_counter_id:
            raise ConfigurationError(f"counter_id={counter_id} > max_counter_id={self._max_counter_id}")
        return int(counter_id)

    def get_counter_state(self, counter_id: int) -> int:
        """RECORD_UNUSED, RECORD_ALLOCATED or RECORD_RECLAIMED of a counter id."""
        return int(get_counter_state(self.metadata_buffer, self._check_id(counter_id)))

    def get_counter_type_id(self, counter_id: int) -> int:
        """The type id of a counter (e.g. 0 for system counters, 1 for publisher limits)."""
        return int(get_counter_type_id(self.metadata_buffer, self._check_id(counter_id)))

    def get_free_for_reuse_deadline_ms(self, counter_id: int) -> int:
        """Epoch ms after which a freed counter id may be allocated again."""
        return int(get_free_for_reuse_deadline(self.metadata_buffer, self._check_id(counter_id)))

    def get_counter_label(self, counter_id: int) -> str:
        """The counter's label."""
        dst = np.zeros(MAX_LABEL_LENGTH, dtype=np.uint8)
        length = get_counter_label(self.metadata_buffer, self._check_id(counter_id), dst)
        return dst[:length].tobytes().decode("ascii", errors="replace")

    def get_counter_key(self, counter_id: int) -> bytes:
        """The counter's key bytes (what identifies it within its type)."""
        dst = np.zeros(MAX_KEY_LENGTH, dtype=np.uint8)
        length = get_counter_key(self.metadata_buffer, self._check_id(counter_id), dst)
        return dst[:length].tobytes()

    def get_counter_value(self, counter_id: int) -> int:
        """Acquire-load of the counter's value."""
        return int(get_counter_value(self.values_buffer, self._check_id(counter_id)))

    def get_counter_registration_id(self, counter_id: int) -> int:
        """The registration id of the resource the counter belongs to."""
        return int(get_counter_registration_id(self.values_buffer, self._check_id(counter_id)))

    def get_counter_owner_id(self, counter_id: int) -> int:
        """The client id that owns the counter (freed when that client closes or times out)."""
        return int(get_counter_owner_id(self.values_buffer, self._check_id(counter_id)))

    def get_counter_reference_id(self, counter_id: int) -> int:
        """The id of what the counter refers to (e.g. a recording id), or the null value."""
        return int(get_counter_reference_id(self.values_buffer, self._check_id(counter_id)))

    def find_by_type_id_and_registration_id(self, type_id: int, registration_id: int) -> int:
        """Counter id, or ``NULL_COUNTER_ID`` (-1)."""
        type_id = _check_int("type_id", type_id, _INT32_MIN, INT32_MAX)
        registration_id = _check_int("registration_id", registration_id, _INT64_MIN, _INT64_MAX)
        return int(
            find_counter_by_type_id_and_registration_id(
                self.metadata_buffer, self.values_buffer, type_id, registration_id
            )
        )

    def find_by_registration_id(self, registration_id: int) -> int:
        """Counter id, or ``NULL_COUNTER_ID`` (-1)."""
        registration_id = _check_int("registration_id", registration_id, _INT64_MIN, _INT64_MAX)
        return int(find_counter_by_registration_id(self.metadata_buffer, self.values_buffer, registration_id))

    def for_each(self) -> Iterator[CounterInfo]:
        """Yield every ALLOCATED counter in id order (stops at the first UNUSED record), batch by batch."""
        desc = np.zeros((self._BATCH, COUNTER_DESC_COLUMNS), dtype=np.int64)
        keys = np.zeros((self._BATCH, MAX_KEY_LENGTH), dtype=np.uint8)
        labels = np.zeros((self._BATCH, MAX_LABEL_LENGTH), dtype=np.uint8)
        start_id = 0
        while True:
            count = collect_counters(self.metadata_buffer, self.values_buffer, start_id, desc, keys, labels)
            for row in range(count):
                d = desc[row]
                yield CounterInfo(
                    counter_id=int(d[COUNTER_DESC_ID]),
                    type_id=int(d[COUNTER_DESC_TYPE_ID]),
                    key=keys[row].tobytes(),
                    label=labels[row, : d[COUNTER_DESC_LABEL_LENGTH]].tobytes().decode("ascii", errors="replace"),
                    value=int(d[COUNTER_DESC_VALUE]),
                    registration_id=int(d[COUNTER_DESC_REGISTRATION_ID]),
                    owner_id=int(d[COUNTER_DESC_OWNER_ID]),
                    reference_id=int(d[COUNTER_DESC_REFERENCE_ID]),
                )
            if count < self._BATCH:
                return
            start_id = int(desc[count - 1, COUNTER_DESC_ID]) + 1

    __iter__ = for_each

    def counters(self) -> list[CounterInfo]:
        """Every allocated counter with its id, type, label and value, in id order."""
        return list(self.for_each())


class CountersManager(CountersReader):
    """Allocates and frees counters (Agrona ``CountersManager``); only the driver's conductor uses one.

    Parameters
    ----------
    metadata_buffer, values_buffer : np.ndarray
        As for ``CountersReader``.
    free_to_reuse_timeout_ms : int
        How long a freed id stays RECLAIMED before reuse (default 1 s, §9.2).
    epoch_clock : callable, optional
        Returns epoch ms (a fake clock in tests); defaults to the wall clock.
    """

    def __init__(
        self,
        metadata_buffer: np.ndarray,
        values_buffer: np.ndarray,
        *,
        free_to_reuse_timeout_ms: int = DEFAULT_FREE_TO_REUSE_TIMEOUT_MS,
        epoch_clock: Callable[[], int] | None = None,
    ):
        super().__init__(metadata_buffer, values_buffer)
        self.free_to_reuse_timeout_ms = _check_int("free_to_reuse_timeout_ms", free_to_reuse_timeout_ms, 0, _INT64_MAX)
        self._epoch_clock = epoch_clock or _epoch_ms
        self._lock = threading.Lock()  # allocate scans then writes: one allocator at a time

    def allocate(
        self,
        label: str,
        type_id: int = 0,
        key: bytes = b"",
        *,
        registration_id: int | None = None,
        owner_id: int | None = None,
        reference_id: int | None = None,
    ) -> int:
        """Allocate a counter; the label is ASCII ('?' for other characters) truncated to 380 bytes, the key to 112.

        Registration, owner and reference ids are set after the allocation when given (§9.2).
        Raises ``CountersFullError`` when no id is free.
        """
        if not isinstance(label, str):
            raise ConfigurationError(f"label={label!r} must be a str")
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise ConfigurationError(f"key={key!r} must be bytes")
        type_id = _check_int("type_id", type_id, _INT32_MIN, INT32_MAX)
        ids = {}
        for name, value in (("registration_id", registration_id), ("owner_id", owner_id), ("reference_id", reference_id)):
            if value is not None:
                ids[name] = _check_int(name, value, _INT64_MIN, _INT64_MAX)
        key_bytes = bytes(key)[:MAX_KEY_LENGTH]
        label_bytes = _ascii(label)[:MAX_LABEL_LENGTH]
        with self._lock:
            counter_id = int(
                allocate(
                    self.metadata_buffer,
                    self.values_buffer,
                    type_id,
                    _u8(key_bytes),
                    len(key_bytes),
                    _u8(label_bytes),
                    len(label_bytes),
                    int(self._epoch_clock()),
                )
            )
        if counter_id == COUNTERS_FULL:
            raise CountersFullError(  # Aeron's C words first
                f"Max counter id ({self._max_counter_id}) exceeded: unable to allocate counter {label[:64]!r}: all"
                f" {self._max_counter_id + 1} counters in use or not yet free to reuse"
            )
        if "registration_id" in ids:
            set_counter_registration_id(self.values_buffer, counter_id, ids["registration_id"])
        if "owner_id" in ids:
            set_counter_owner_id(self.values_buffer, counter_id, ids["owner_id"])
        if "reference_id" in ids:
            set_counter_reference_id(self.values_buffer, counter_id, ids["reference_id"])
        return counter_id

    def free(self, counter_id: int) -> None:
        """Free an ALLOCATED counter; its id is reusable after ``free_to_reuse_timeout_ms``."""
        counter_id = self._check_id(counter_id)
        with self._lock:
            result = free(
                self.metadata_buffer,
                self.values_buffer,
                counter_id,
                int(self._epoch_clock()),
                self.free_to_reuse_timeout_ms,
            )
        if result == COUNTER_NOT_ALLOCATED:
            state = self.get_counter_state(counter_id)
            raise CounterStateError(f"counter_id={counter_id} not allocated (state={state})")

    def allocate_system_counters(self, label_suffixes: Mapping[int, str] | None = None) -> list[int]:
        """Allocate the §9.5 system counters in order (type 0, key = i32 id), so counter id == system id.

        ``label_suffixes`` maps a system id to text appended to its label (e.g. ``{15: ": version=… commit=…"}``).
        Raises ``LayoutError`` if an id comes out different (the buffers were not empty).
        """
        suffixes = dict(label_suffixes or {})
        ids = []
        for system_id, label in SYSTEM_COUNTERS:
            counter_id = self.allocate(
                label + suffixes.get(system_id, ""), SYSTEM_COUNTER_TYPE_ID, struct.pack("<i", system_id)
            )
            if counter_id != system_id:
                raise LayoutError(
                    f"system counter {label!r} got counter_id={counter_id}, expected {system_id}:"
                    " counters must be allocated into empty buffers"
                )
            ids.append(counter_id)
        return ids

    def set_counter_value(self, counter_id: int, value: int) -> None:
        set_counter_value(self.values_buffer, self._check_id(counter_id), _check_int("value", value, _INT64_MIN, _INT64_MAX))

    def get_and_add_counter_value(self, counter_id: int, delta: int) -> int:
        delta = _check_int("delta", delta, _INT64_MIN, _INT64_MAX)
        return int(get_and_add_counter_value(self.values_buffer, self._check_id(counter_id), delta))

    def set_counter_registration_id(self, counter_id: int, registration_id: int) -> None:
        registration_id = _check_int("registration_id", registration_id, _INT64_MIN, _INT64_MAX)
        set_counter_registration_id(self.values_buffer, self._check_id(counter_id), registration_id)

    def set_counter_owner_id(self, counter_id: int, owner_id: int) -> None:
        owner_id = _check_int("owner_id", owner_id, _INT64_MIN, _INT64_MAX)
        set_counter_owner_id(self.values_buffer, self._check_id(counter_id), owner_id)

    def set_counter_reference_id(self, counter_id: int, reference_id: int) -> None:
        reference_id = _check_int("reference_id", reference_id, _INT64_MIN, _INT64_MAX)
        set_counter_reference_id(self.values_buffer, self._check_id(counter_id), reference_id)
