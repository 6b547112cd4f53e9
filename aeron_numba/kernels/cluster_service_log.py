"""A clustered service's compiled path: read the committed log and hand each application message to an ``@njit``
handler without Python per message, and queue the handler's replies to clients for a compiled flush.

``bounded_session_poll`` is Aeron's ``Image.boundedControlledPoll`` as the service container's BoundedLogAdapter
uses it, specialised to the one message a service sees at rate: an unfragmented ``SessionMessageHeader`` (schema
111, template 1) with the application's bytes after it. It reads frames in place from the subscriber position up to
``limit_position`` (the commit position: no frame ending past it is read), calls
``handler(state, log, offset, length, cluster_session_id, timestamp, outbox)`` for each such message and stops
*before* any other frame (a timer, a session open or close, a snapshot request, a new term, a fragment of a large
message, a message of another schema): the Python side handles that one, then the compiled poll goes on. The
position is stored once per poll, after the last frame consumed.

The outbox is one ``uint8`` array: a header, then records that each hold a whole egress message (the
``SessionMessageHeader`` with the cluster session id and timestamp, then the reply). A handler claims one with
``reply_claim(outbox, cluster_session_id, length)`` and writes its bytes at the offset returned. After the poll,
the container flushes the records of each session to that session's response publication with
``offer_replies`` (one call per session and poll, not per reply), or drops them when it is not the leader (as
Aeron's ClientSession.offer answers MOCKED_OFFER on a follower).

```
outbox:  0 tail i64 (bytes used, from 0) | 8 record count i64 | 16 leadershipTermId i64 | 24 timestamp i64
        32 claims refused for room i64 | ... | 64 records
record:  0 message length i32 | 4 sent i32 | 8 clusterSessionId i64 | 16 message (32-byte session header + reply)
         aligned to 8
```
"""

from __future__ import annotations

import numpy as np
from numba import types

from aeron_numba.jit import compiled_entry, kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.bits import align
from aeron_numba.kernels.position import index_by_position, position_bits_to_shift, to_int32
from aeron_numba.kernels.term_appender import concurrent_offer, log_initial_term_id, log_term_length
from aeron_numba.layout.cluster_schema import CLUSTER_SCHEMA
from aeron_numba.layout.frame import (
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    TERM_ID_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
    UNFRAGMENTED,
)
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH

_SESSION_MESSAGE = CLUSTER_SCHEMA.message("SessionMessageHeader")
_FIELDS = {f.name: f.offset for f in _SESSION_MESSAGE.fields}
SCHEMA_ID = CLUSTER_SCHEMA.schema_id
SCHEMA_VERSION = CLUSTER_SCHEMA.version
SESSION_MESSAGE_TEMPLATE_ID = _SESSION_MESSAGE.template_id
SESSION_MESSAGE_BLOCK_LENGTH = _SESSION_MESSAGE.block_length
#: Application bytes start here in a session message (Aeron's AeronCluster.SESSION_HEADER_LENGTH).
SESSION_HEADER_LENGTH = MESSAGE_HEADER_LENGTH + SESSION_MESSAGE_BLOCK_LENGTH
LEADERSHIP_TERM_ID_OFFSET = MESSAGE_HEADER_LENGTH + _FIELDS["leadership_term_id"]
CLUSTER_SESSION_ID_OFFSET = MESSAGE_HEADER_LENGTH + _FIELDS["cluster_session_id"]
TIMESTAMP_OFFSET = MESSAGE_HEADER_LENGTH + _FIELDS["timestamp"]
# SBE message header: blockLength u16 | templateId u16 | schemaId u16 | version u16
_TEMPLATE_ID_OFFSET = 2
_SCHEMA_ID_OFFSET = 4

#: ``handler(state, buffer, offset, length, cluster_session_id, timestamp, outbox)``: the application's bytes are
#: ``buffer[offset:offset + length]`` (the log, read in place: valid during the call only); ``state`` is the
#: service's own array; replies go through ``reply_claim(outbox, ...)``.
SESSION_MESSAGE_HANDLER_SIG = types.void(types.uint8[::1], types.uint8[::1], types.int64, types.int64, types.int64,
                                         types.int64, types.uint8[::1])
SessionMessageHandler = types.FunctionType(SESSION_MESSAGE_HANDLER_SIG)

# Slots of the poll's result (int64): the position after the last message handed over and its timestamp (the
# container's log position and cluster time), and why it stopped.
RESULT_LAST_POSITION = 0
RESULT_LAST_TIMESTAMP = 1
RESULT_STOPPED_AT_OTHER = 2  # 1: stopped before a frame the Python path must take
RESULT_LENGTH = 4

OUTBOX_TAIL_OFFSET = 0
OUTBOX_COUNT_OFFSET = 8
OUTBOX_LEADERSHIP_TERM_ID_OFFSET = 16
OUTBOX_TIMESTAMP_OFFSET = 24
OUTBOX_REFUSED_OFFSET = 32
OUTBOX_HEADER_LENGTH = 64
RECORD_LENGTH_OFFSET = 0
RECORD_SENT_OFFSET = 4
RECORD_SESSION_ID_OFFSET = 8
RECORD_HEADER_LENGTH = 16
RECORD_ALIGNMENT = 8
DEFAULT_OUTBOX_LENGTH = 1 << 20


def new_outbox(length: int = DEFAULT_OUTBOX_LENGTH) -> np.ndarray:
    """An empty outbox of ``length`` bytes (at least its header and one small record)."""
    least = OUTBOX_HEADER_LENGTH + RECORD_HEADER_LENGTH + SESSION_HEADER_LENGTH
    if length < least:
        raise ValueError(f"outbox length={length} < {least}")
    outbox = np.zeros(length, dtype=np.uint8)
    outbox[:8].view(np.int64)[0] = OUTBOX_HEADER_LENGTH
    return outbox


@kernel(inline="always")
def term_cursor(log, position):
    """Where ``position`` is in ``log``: (term length, offset in the term, the term's partition offset, term id)."""
    term_length = log_term_length(log)
    shift = position_bits_to_shift(term_length)
    term_offset = position & (term_length - 1)
    term_base = index_by_position(position, shift) * term_length
    term_id = to_int32(log_initial_term_id(log) + ((position - term_offset) >> shift))
    return term_length, term_offset, term_base, term_id


@kernel(inline="always")
def whole_frame_length(log, frame_offset, offset, term_length, term_id):
    """The aligned length of the committed frame of term ``term_id`` at ``frame_offset`` (``offset`` in its term),
    or 0 when there is none yet (not committed, not of this term, or not whole in the term)."""
    frame_length = atomics.get_int32_acquire(log, frame_offset)
    if frame_length < HEADER_LENGTH or offset + align(frame_length, FRAME_ALIGNMENT) > term_length:
        return 0
    if atomics.get_int32(log, frame_offset + TERM_ID_FIELD_OFFSET) != term_id:
        return 0
    return align(frame_length, FRAME_ALIGNMENT)


_POLL_SIG = types.int64(types.uint8[::1], types.uint8[::1], types.int64, types.uint8[::1], types.int64, types.int64,
                        SessionMessageHandler, types.uint8[::1], types.uint8[::1], types.int64[::1])


@kernel(_POLL_SIG)
def bounded_session_poll(log, position_buf, position_offset, closed_word, limit_position, fragment_limit, handler,
                         state, outbox, result):
    """Hand up to ``fragment_limit`` session messages ending at or before ``limit_position`` to ``handler`` (see
    the module docstring); returns how many. ``closed_word`` is the image handle's: nonzero, nothing is read."""
    result[RESULT_STOPPED_AT_OTHER] = 0
    if atomics.get_int64_acquire(closed_word, 0) != 0:
        return 0
    position = atomics.get_int64(position_buf, position_offset)
    term_length, term_offset, term_base, term_id = term_cursor(log, position)
    offset = term_offset
    fragments = 0
    while fragments < fragment_limit and offset < term_length:
        frame_offset = term_base + offset
        aligned = whole_frame_length(log, frame_offset, offset, term_length, term_id)
        if aligned == 0:
            break
        frame_length = atomics.get_int32(log, frame_offset)
        if position + (offset + aligned - term_offset) > limit_position:
            break
        if (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD:
            offset += aligned
            continue
        payload = frame_offset + HEADER_LENGTH
        length = frame_length - HEADER_LENGTH
        flags = atomics.get_int8(log, frame_offset + FLAGS_FIELD_OFFSET) & 0xFF
        if (flags & UNFRAGMENTED) != UNFRAGMENTED or length < SESSION_HEADER_LENGTH \
                or (atomics.get_int16(log, payload + _SCHEMA_ID_OFFSET) & 0xFFFF) != SCHEMA_ID \
                or (atomics.get_int16(log, payload + _TEMPLATE_ID_OFFSET) & 0xFFFF) != SESSION_MESSAGE_TEMPLATE_ID:
            result[RESULT_STOPPED_AT_OTHER] = 1
            break
        cluster_session_id = atomics.get_int64(log, payload + CLUSTER_SESSION_ID_OFFSET)
        timestamp = atomics.get_int64(log, payload + TIMESTAMP_OFFSET)
        offset += aligned  # consumed before the handler runs, as Aeron's polls do
        atomics.put_int64(outbox, OUTBOX_TIMESTAMP_OFFSET, timestamp)
        handler(state, log, payload + SESSION_HEADER_LENGTH, length - SESSION_HEADER_LENGTH, cluster_session_id,
                timestamp, outbox)
        fragments += 1
        result[RESULT_LAST_POSITION] = position + (offset - term_offset)
        result[RESULT_LAST_TIMESTAMP] = timestamp
    if offset > term_offset:
        atomics.put_int64_release(position_buf, position_offset, position + (offset - term_offset))
    return fragments


class BoundSessionPoll:
    """``bounded_session_poll`` of one image (its compiled ``handle``) with one handler (``handler_address``'s) and
    its arrays, called without Numba's dispatch, which types the handler argument in Python at every call (its
    fallback for a first-class function: 5-6 % of a follower's busy samples, member_profile --py-spy). Holds the
    handle, so the image's log stays mapped while it lives."""

    def __init__(self, handle, handler, state, outbox, result):
        self.handle, self.handler, self.state, self.outbox, self.result = handle, handler, state, outbox, result
        self._entry = compiled_entry(bounded_session_poll, handle.log, handle.position_buffer, handle.position_offset,
                                     handle.state, 0, 0, handler, state, outbox, result)

    def poll(self, limit_position: int, fragment_limit: int) -> int:
        """``bounded_session_poll`` up to ``limit_position``; ``result`` then says where and why it stopped."""
        handle = self.handle
        return self._entry(handle.log, handle.position_buffer, handle.position_offset, handle.state, limit_position,
                           fragment_limit, self.handler, self.state, self.outbox, self.result)


@kernel(inline="always")
def reply_claim(outbox, cluster_session_id, length):
    """Claim a reply of ``length`` bytes to ``cluster_session_id``: the offset in ``outbox`` to write it at, or -1
    (counted) when the outbox has no room left. The session header (the current leadership term and the timestamp
    of the message being handled) is written here."""
    tail = atomics.get_int64(outbox, OUTBOX_TAIL_OFFSET)
    message_length = SESSION_HEADER_LENGTH + length
    record_length = align(RECORD_HEADER_LENGTH + message_length, RECORD_ALIGNMENT)
    if length < 0 or tail + record_length > outbox.shape[0]:
        atomics.put_int64(outbox, OUTBOX_REFUSED_OFFSET, atomics.get_int64(outbox, OUTBOX_REFUSED_OFFSET) + 1)
        return -1
    atomics.put_int32(outbox, tail + RECORD_LENGTH_OFFSET, message_length)
    atomics.put_int32(outbox, tail + RECORD_SENT_OFFSET, 0)
    atomics.put_int64(outbox, tail + RECORD_SESSION_ID_OFFSET, cluster_session_id)
    message = tail + RECORD_HEADER_LENGTH
    atomics.put_int16(outbox, message, SESSION_MESSAGE_BLOCK_LENGTH)
    atomics.put_int16(outbox, message + _TEMPLATE_ID_OFFSET, SESSION_MESSAGE_TEMPLATE_ID)
    atomics.put_int16(outbox, message + _SCHEMA_ID_OFFSET, SCHEMA_ID)
    atomics.put_int16(outbox, message + 6, SCHEMA_VERSION)
    atomics.put_int64(outbox, message + LEADERSHIP_TERM_ID_OFFSET,
                      atomics.get_int64(outbox, OUTBOX_LEADERSHIP_TERM_ID_OFFSET))
    atomics.put_int64(outbox, message + CLUSTER_SESSION_ID_OFFSET, cluster_session_id)
    atomics.put_int64(outbox, message + TIMESTAMP_OFFSET, atomics.get_int64(outbox, OUTBOX_TIMESTAMP_OFFSET))
    atomics.put_int64(outbox, OUTBOX_TAIL_OFFSET, tail + record_length)
    atomics.put_int64(outbox, OUTBOX_COUNT_OFFSET, atomics.get_int64(outbox, OUTBOX_COUNT_OFFSET) + 1)
    return message + SESSION_HEADER_LENGTH


@kernel
def outbox_session_ids(outbox, out):
    """The distinct session ids of the records not sent yet, in ``out`` (up to its length); returns how many."""
    count = 0
    at = OUTBOX_HEADER_LENGTH
    tail = atomics.get_int64(outbox, OUTBOX_TAIL_OFFSET)
    while at < tail:
        message_length = atomics.get_int32(outbox, at + RECORD_LENGTH_OFFSET)
        if atomics.get_int32(outbox, at + RECORD_SENT_OFFSET) == 0:
            session_id = atomics.get_int64(outbox, at + RECORD_SESSION_ID_OFFSET)
            seen = False
            for i in range(count):
                if out[i] == session_id:
                    seen = True
                    break
            if not seen and count < out.shape[0]:
                out[count] = session_id
                count += 1
        at += align(RECORD_HEADER_LENGTH + message_length, RECORD_ALIGNMENT)
    return count


@kernel
def offer_replies(outbox, cluster_session_id, log, pub_state, limit_buffer):
    """Offer, in order, the unsent records of ``cluster_session_id`` on a (concurrent) publication given by its
    arrays; each one taken is marked sent. Returns how many were sent, or the publication's status (< 0) for the
    first one refused (the rest of that session wait for the next flush, keeping their order)."""
    sent = 0
    at = OUTBOX_HEADER_LENGTH
    tail = atomics.get_int64(outbox, OUTBOX_TAIL_OFFSET)
    while at < tail:
        message_length = atomics.get_int32(outbox, at + RECORD_LENGTH_OFFSET)
        if atomics.get_int32(outbox, at + RECORD_SENT_OFFSET) == 0 \
                and atomics.get_int64(outbox, at + RECORD_SESSION_ID_OFFSET) == cluster_session_id:
            result = concurrent_offer(log, pub_state, limit_buffer, outbox, at + RECORD_HEADER_LENGTH,
                                      message_length, 0)
            if result < 0:
                return result
            atomics.put_int32(outbox, at + RECORD_SENT_OFFSET, 1)
            sent += 1
        at += align(RECORD_HEADER_LENGTH + message_length, RECORD_ALIGNMENT)
    return sent


@kernel
def drop_replies(outbox, cluster_session_id):
    """Mark the unsent records of ``cluster_session_id`` sent without sending them; returns how many."""
    dropped = 0
    at = OUTBOX_HEADER_LENGTH
    tail = atomics.get_int64(outbox, OUTBOX_TAIL_OFFSET)
    while at < tail:
        message_length = atomics.get_int32(outbox, at + RECORD_LENGTH_OFFSET)
        if atomics.get_int32(outbox, at + RECORD_SENT_OFFSET) == 0 \
                and atomics.get_int64(outbox, at + RECORD_SESSION_ID_OFFSET) == cluster_session_id:
            atomics.put_int32(outbox, at + RECORD_SENT_OFFSET, 1)
            dropped += 1
        at += align(RECORD_HEADER_LENGTH + message_length, RECORD_ALIGNMENT)
    return dropped


@kernel
def clear_outbox(outbox):
    """Forget every record (all sent or dropped)."""
    atomics.put_int64(outbox, OUTBOX_TAIL_OFFSET, OUTBOX_HEADER_LENGTH)
    atomics.put_int64(outbox, OUTBOX_COUNT_OFFSET, 0)
