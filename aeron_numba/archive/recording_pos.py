"""Finding an archive's ``rec-pos`` counters from another process (Aeron's ``RecordingPos`` static helpers): the
counter of an active recording by the session id it records or by its recording id, its recording id, and whether
it is still active. The consensus module uses them to follow its log recording's position without asking the
archive (spec/archive.md §4.4 for the key)."""

from __future__ import annotations

import struct

from aeron_numba.layout import archive as A
from aeron_numba.layout.counters import RECORD_ALLOCATED

NULL_COUNTER_ID = -1
NULL_RECORDING_ID = A.NULL_VALUE
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


def _archive_id(key: bytes) -> int:
    length = min(_I32.unpack_from(key, A.REC_POS_SOURCE_IDENTITY_LENGTH_OFFSET)[0],
                 A.REC_POS_MAX_SOURCE_IDENTITY_LENGTH)
    offset = A.REC_POS_SOURCE_IDENTITY_OFFSET + max(length, 0)
    return _I64.unpack_from(key, offset)[0] if offset + 8 <= len(key) else A.NULL_VALUE


def _matches_archive(key: bytes, archive_id: int) -> bool:
    return archive_id == A.NULL_VALUE or _archive_id(key) == archive_id


def find_counter_id_by_session(counters, session_id: int, archive_id: int = A.NULL_VALUE) -> int:
    """The rec-pos counter recording the image of ``session_id`` (of ``archive_id`` when given), else -1."""
    for info in counters.for_each():
        if info.type_id == A.RECORDING_POSITION_TYPE_ID and len(info.key) >= A.REC_POS_SOURCE_IDENTITY_OFFSET:
            if (_I32.unpack_from(info.key, A.REC_POS_SESSION_ID_OFFSET)[0] == session_id
                    and _matches_archive(info.key, archive_id)):
                return info.counter_id
    return NULL_COUNTER_ID


def find_counter_id_by_recording(counters, recording_id: int, archive_id: int = A.NULL_VALUE) -> int:
    """The rec-pos counter of the active recording ``recording_id``, else -1."""
    for info in counters.for_each():
        if info.type_id == A.RECORDING_POSITION_TYPE_ID and len(info.key) >= A.REC_POS_SOURCE_IDENTITY_OFFSET:
            if (_I64.unpack_from(info.key, A.REC_POS_RECORDING_ID_OFFSET)[0] == recording_id
                    and _matches_archive(info.key, archive_id)):
                return info.counter_id
    return NULL_COUNTER_ID


def get_recording_id(counters, counter_id: int) -> int:
    """The recording id of a rec-pos counter, or -1 when it is not (any longer) one."""
    if (counters.get_counter_state(counter_id) == RECORD_ALLOCATED
            and counters.get_counter_type_id(counter_id) == A.RECORDING_POSITION_TYPE_ID):
        return _I64.unpack_from(counters.get_counter_key(counter_id), A.REC_POS_RECORDING_ID_OFFSET)[0]
    return NULL_RECORDING_ID


def is_active(counters, counter_id: int, recording_id: int) -> bool:
    return get_recording_id(counters, counter_id) == recording_id
