"""The two consensus messages a busy member reads at rate, decoded in place without the reflective codec: a
leader's ``AppendPosition`` from each follower and a follower's ``CommitPosition`` from the leader (stream 108,
``ConsensusAdapter``). ``read_positions`` reads whole unfragmented frames of an image from its subscriber position,
writes each such message as one row of ``rows`` and stops *before* any other frame (an election's messages, a
catch-up's, a message of another schema, version or block length): the Python path decodes that one with the
codec, then the compiled read goes on. The position is stored once, after the last frame read.

A row: the message's template id, leadership term id, log position, member id (the follower's or the leader's) and
flags (AppendPosition's; 0 for CommitPosition).
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.cluster_service_log import SCHEMA_ID, term_cursor, whole_frame_length
from aeron_numba.layout.cluster_schema import CLUSTER_SCHEMA
from aeron_numba.layout.frame import FLAGS_FIELD_OFFSET, HDR_TYPE_PAD, HEADER_LENGTH, TYPE_FIELD_OFFSET, UNFRAGMENTED
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH

_APPEND = CLUSTER_SCHEMA.message("AppendPosition")
_COMMIT = CLUSTER_SCHEMA.message("CommitPosition")
APPEND_POSITION_TEMPLATE_ID = _APPEND.template_id
COMMIT_POSITION_TEMPLATE_ID = _COMMIT.template_id
_APPEND_BLOCK_LENGTH = _APPEND.block_length
_COMMIT_BLOCK_LENGTH = _COMMIT.block_length
_APPEND_FIELDS = {f.name: MESSAGE_HEADER_LENGTH + f.offset for f in _APPEND.fields}
_COMMIT_FIELDS = {f.name: MESSAGE_HEADER_LENGTH + f.offset for f in _COMMIT.fields}
# Both messages start leadershipTermId i64 | logPosition i64 | memberId i32 (the follower's, the leader's).
_TERM_OFFSET = _APPEND_FIELDS["leadership_term_id"]
_LOG_POSITION_OFFSET = _APPEND_FIELDS["log_position"]
_MEMBER_OFFSET = _APPEND_FIELDS["follower_member_id"]
_FLAGS_OFFSET = _APPEND_FIELDS["flags"]
# A sender of an older version has no flags (the codec reads them as null): the Python path takes its messages.
_FLAGS_SINCE = next(f.since for f in _APPEND.fields if f.name == "flags")
assert (_COMMIT_FIELDS["leadership_term_id"], _COMMIT_FIELDS["log_position"], _COMMIT_FIELDS["leader_member_id"]) \
    == (_TERM_OFFSET, _LOG_POSITION_OFFSET, _MEMBER_OFFSET)
#: AppendPosition's layout for compiled writers and readers (``cluster_append_position``, ``cluster_leader_commit``):
#: its fields' offsets from the start of its SBE header, its whole length, the version its flags came in.
APPEND_POSITION_BLOCK_LENGTH = _APPEND_BLOCK_LENGTH
APPEND_POSITION_TERM_OFFSET, APPEND_POSITION_LOG_POSITION_OFFSET = _TERM_OFFSET, _LOG_POSITION_OFFSET
APPEND_POSITION_MEMBER_OFFSET, APPEND_POSITION_FLAGS_OFFSET = _MEMBER_OFFSET, _FLAGS_OFFSET
MESSAGE_LENGTH_APPEND_POSITION = MESSAGE_HEADER_LENGTH + _APPEND_BLOCK_LENGTH
APPEND_POSITION_FLAGS_SINCE = _FLAGS_SINCE
#: CommitPosition's: the same three fields at the same offsets (asserted above), and its length.
COMMIT_POSITION_BLOCK_LENGTH = _COMMIT_BLOCK_LENGTH
MESSAGE_LENGTH_COMMIT_POSITION = MESSAGE_HEADER_LENGTH + _COMMIT_BLOCK_LENGTH

# SBE message header: blockLength u16 | templateId u16 | schemaId u16 | version u16
_BLOCK_LENGTH_OFFSET = 0
_TEMPLATE_ID_OFFSET = 2
_SCHEMA_ID_OFFSET = 4
_VERSION_OFFSET = 6

#: A row of ``rows``.
ROW_TEMPLATE_ID, ROW_LEADERSHIP_TERM_ID, ROW_LOG_POSITION, ROW_MEMBER_ID, ROW_FLAGS = range(5)
ROW_COLUMNS = 5
#: ``result[RESULT_STOPPED_AT_OTHER]``: 1 when the read stopped before a frame the Python path must take.
RESULT_STOPPED_AT_OTHER = 0
RESULT_LENGTH = 2


@kernel(inline="always")
def position_message_template(log, frame_offset):
    """The template id of the (whole, not padding) frame at ``frame_offset`` when it is an AppendPosition or a
    CommitPosition the compiled readers decode: unfragmented, this schema, its block length, all of it there, an
    AppendPosition of a version with flags. -1 for any other frame (the Python path's)."""
    message = frame_offset + HEADER_LENGTH
    length = atomics.get_int32(log, frame_offset) - HEADER_LENGTH
    flags = atomics.get_int8(log, frame_offset + FLAGS_FIELD_OFFSET) & 0xFF
    if (flags & UNFRAGMENTED) != UNFRAGMENTED or length < MESSAGE_HEADER_LENGTH \
            or (atomics.get_int16(log, message + _SCHEMA_ID_OFFSET) & 0xFFFF) != SCHEMA_ID:
        return -1
    template_id = atomics.get_int16(log, message + _TEMPLATE_ID_OFFSET) & 0xFFFF
    block_length = atomics.get_int16(log, message + _BLOCK_LENGTH_OFFSET) & 0xFFFF
    if template_id == APPEND_POSITION_TEMPLATE_ID:
        if block_length != _APPEND_BLOCK_LENGTH or length < MESSAGE_HEADER_LENGTH + block_length \
                or (atomics.get_int16(log, message + _VERSION_OFFSET) & 0xFFFF) < _FLAGS_SINCE:
            return -1
        return template_id
    if template_id == COMMIT_POSITION_TEMPLATE_ID:
        if block_length != _COMMIT_BLOCK_LENGTH or length < MESSAGE_HEADER_LENGTH + block_length:
            return -1
        return template_id
    return -1


@kernel
def read_positions(log, position_buf, position_offset, closed_word, fragment_limit, rows, result):
    """Up to ``fragment_limit`` AppendPosition and CommitPosition messages (and no more than ``rows`` holds) from the
    image's position into ``rows`` (see the module docstring); returns how many. ``closed_word`` is the image
    handle's: nonzero, nothing is read."""
    result[RESULT_STOPPED_AT_OTHER] = 0
    if atomics.get_int64_acquire(closed_word, 0) != 0:
        return 0
    position = atomics.get_int64(position_buf, position_offset)
    term_length, term_offset, term_base, term_id = term_cursor(log, position)
    offset = term_offset
    count = 0
    limit = min(fragment_limit, rows.shape[0])
    while count < limit and offset < term_length:
        frame_offset = term_base + offset
        aligned = whole_frame_length(log, frame_offset, offset, term_length, term_id)
        if aligned == 0:
            break
        if (atomics.get_int16(log, frame_offset + TYPE_FIELD_OFFSET) & 0xFFFF) == HDR_TYPE_PAD:
            offset += aligned
            continue
        message = frame_offset + HEADER_LENGTH
        template_id = position_message_template(log, frame_offset)
        if template_id < 0:
            result[RESULT_STOPPED_AT_OTHER] = 1
            break
        rows[count, ROW_TEMPLATE_ID] = template_id
        rows[count, ROW_LEADERSHIP_TERM_ID] = atomics.get_int64(log, message + _TERM_OFFSET)
        rows[count, ROW_LOG_POSITION] = atomics.get_int64(log, message + _LOG_POSITION_OFFSET)
        rows[count, ROW_MEMBER_ID] = atomics.get_int32(log, message + _MEMBER_OFFSET)
        rows[count, ROW_FLAGS] = (atomics.get_int8(log, message + _FLAGS_OFFSET) & 0xFF) \
            if template_id == APPEND_POSITION_TEMPLATE_ID else 0
        count += 1
        offset += aligned
    if offset > term_offset:
        atomics.put_int64_release(position_buf, position_offset, position + (offset - term_offset))
    return count
