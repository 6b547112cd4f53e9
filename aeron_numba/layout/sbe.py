"""SBE message layout (spec/archive.md §1): the message header, groups, var-length fields, and the classes a
schema description is written in (``layout/archive_schema.py``, ``layout/cluster_schema.py``).

```
| message header (8) | root block (blockLength) | repeating groups* | var-length fields* |

message header:   0 u16 blockLength | 2 u16 templateId | 4 u16 schemaId | 6 u16 version
group header:     0 u16 blockLength | 2 u16 numInGroup, then numInGroup x (entry block + the entry's var fields)
var-length field: 0 u32 length | 4 the bytes (ASCII for varAsciiEncoding)
```

Fixed fields are packed at the offsets the schema gives, with no implicit alignment. A decoder honours the
*received* blockLength and version: fields past the block, or newer than the version ("since vN"), read as
their null value; unknown trailing block bytes are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MESSAGE_HEADER_LENGTH = 8
BLOCK_LENGTH_OFFSET = 0
TEMPLATE_ID_OFFSET = 2
SCHEMA_ID_OFFSET = 4
VERSION_OFFSET = 6

GROUP_HEADER_LENGTH = 4  # u16 blockLength, u16 numInGroup
GROUP_BLOCK_LENGTH_OFFSET = 0
GROUP_NUM_IN_GROUP_OFFSET = 2
VAR_LENGTH_PREFIX = 4  # u32 length before the bytes

#: Primitive -> (struct format, size in bytes, SBE null value).
PRIMITIVES = {
    "int8": ("b", 1, -(1 << 7)),
    "uint8": ("B", 1, 0xFF),
    "int16": ("h", 2, -(1 << 15)),
    "uint16": ("H", 2, 0xFFFF),
    "int32": ("i", 4, -(1 << 31)),
    "uint32": ("I", 4, 0xFFFFFFFF),
    "int64": ("q", 8, -(1 << 63)),
}
#: Schema types whose null value is not their primitive's (both schemas: ``version_t`` / ``capacity_t`` null = 0).
NULL_VALUES = {"version_t": 0, "capacity_t": 0}

VAR_ASCII = "ascii"  # varAsciiEncoding
VAR_DATA = "data"  # varDataEncoding


def snake_case(name: str) -> str:
    """A schema name as this project spells it: ``StartRecordingRequest`` -> ``start_recording_request``,
    ``controlSessionId`` -> ``control_session_id`` (fields, generated send methods and ``on_`` handlers)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class SbeField:
    """A fixed field of a block: ``name`` (snake_case), ``primitive`` (a ``PRIMITIVES`` key), ``offset`` in the
    block, ``type_name`` as the schema calls it (an enum, ``time_t``...), present ``since`` a schema version."""

    name: str
    primitive: str
    offset: int
    type_name: str
    since: int = 0

    @property
    def size(self) -> int:
        return PRIMITIVES[self.primitive][1]

    @property
    def null_value(self) -> int:
        return NULL_VALUES.get(self.type_name, PRIMITIVES[self.primitive][2])


@dataclass(frozen=True)
class SbeVarField:
    name: str
    kind: str  # VAR_ASCII or VAR_DATA
    since: int = 0


@dataclass(frozen=True)
class SbeGroup:
    name: str
    block_length: int
    fields: tuple[SbeField, ...]
    var_fields: tuple[SbeVarField, ...] = ()


@dataclass(frozen=True)
class SbeMessage:
    name: str  # the schema's message name (CamelCase)
    template_id: int
    block_length: int
    fields: tuple[SbeField, ...]
    groups: tuple[SbeGroup, ...] = ()
    var_fields: tuple[SbeVarField, ...] = ()


@dataclass(frozen=True)
class SbeSchema:
    name: str
    schema_id: int
    version: int
    messages: tuple[SbeMessage, ...]
    enums: dict[str, dict[str, int]]

    def message(self, name: str) -> SbeMessage:
        for message in self.messages:
            if message.name == name:
                return message
        raise KeyError(f"no message {name!r} in the {self.name} schema (id {self.schema_id})")
