"""Reading an archive's ``rec-pos`` counters from another process (Aeron's ``RecordingPos`` lookups): which counter
tracks a recording (by recording id or by the recorded image's session id), the recording a counter tracks, and
whether a counter still tracks it.

The key layout (spec/archive.md §4.4) is in ``layout/archive.py``; the archive writes the counters
(``archive_counters.py``). A consumer that has an archive id only accepts that archive's counters, so two archives
on one driver are told apart, as Aeron's lookups do (``NULL_VALUE``: any archive).
"""

from __future__ import annotations

import struct

from aeron_numba.layout import archive as A
from aeron_numba.layout.bits import NULL_VALUE
from aeron_numba.layout.counters import RECORD_ALLOCATED

NULL_COUNTER_ID = -1
NULL_RECORDING_ID = NULL_VALUE
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


def _archive_id_of(key: bytes) -> int:
    source_length = _I32.unpack_from(key, A.REC_POS_SOURCE_IDENTITY_LENGTH_OFFSET)[0]
    offset = A.REC_POS_SOURCE_IDENTITY_OFFSET + max(0, min(source_length, A.REC_POS_MAX_SOURCE_IDENTITY_LENGTH))
    return _I64.unpack_from(key, offset)[0]


def _find(counters_reader, archive_id: int, matches) -> int:
    for info in counters_reader.for_each():
        if info.type_id == A.RECORDING_POSITION_TYPE_ID and matches(info.key):
            if archive_id == NULL_VALUE or _archive_id_of(info.key) == archive_id:
                return info.counter_id
    return NULL_COUNTER_ID


def find_counter_id_by_recording(counters_reader, recording_id: int, archive_id: int = NULL_VALUE) -> int:
    """The ``rec-pos`` counter of ``recording_id`` (of archive ``archive_id``), or ``NULL_COUNTER_ID``."""
    return _find(counters_reader, archive_id,
                 lambda key: _I64.unpack_from(key, A.REC_POS_RECORDING_ID_OFFSET)[0] == recording_id)


def find_counter_id_by_session(counters_reader, session_id: int, archive_id: int = NULL_VALUE) -> int:
    """The ``rec-pos`` counter of the recording of the image with ``session_id``, or ``NULL_COUNTER_ID``."""
    return _find(counters_reader, archive_id,
                 lambda key: _I32.unpack_from(key, A.REC_POS_SESSION_ID_OFFSET)[0] == session_id)


def get_recording_id(counters_reader, counter_id: int) -> int:
    """The recording ``counter_id`` tracks, or ``NULL_RECORDING_ID`` when it is not an allocated ``rec-pos``."""
    if (counters_reader.get_counter_state(counter_id) == RECORD_ALLOCATED
            and counters_reader.get_counter_type_id(counter_id) == A.RECORDING_POSITION_TYPE_ID):
        return _I64.unpack_from(counters_reader.get_counter_key(counter_id), A.REC_POS_RECORDING_ID_OFFSET)[0]
    return NULL_RECORDING_ID


def is_active(counters_reader, counter_id: int, recording_id: int) -> bool:
    """Whether ``counter_id`` is still the allocated ``rec-pos`` of ``recording_id`` (it goes when the recording
    stops, and its id may then be reused)."""
    return counter_id != NULL_COUNTER_ID and get_recording_id(counters_reader, counter_id) == recording_id
