"""How ArchiveTool prints things, so that archive-tool output reads (and diffs) like Aeron's.

- SBE messages as the generated Java codecs' ``toString()`` prints them:
  ``[RecordingDescriptor](sbeTemplateId=22|sbeSchemaId=101|sbeSchemaVersion=10|sbeBlockLength=80):recordingId=0|...``
  with camelCase field names, enum fields by name and strings in single quotes.
- The mark file summary line ``HH:MM:SS (start: yyyy-MM-dd HH:MM:SS, activity: ...)``.
- Agrona's ``PrintBufferUtil.prettyHexDump`` table for frame payloads.
- Aeron's ``CommonContext.printErrorLog`` report of a distinct error log.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import TYPE_CHECKING

from aeron_numba.layout import archive as A
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA, ENUMS
from aeron_numba.tools._common import _as_datetime, format_timestamp_ms

if TYPE_CHECKING:
    import numpy as np

_STATE_NAMES = {value: name for name, value in ENUMS["RecordingState"].items()}


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def state_name(state: int) -> str:
    return _STATE_NAMES.get(state, "NULL_VAL")


class _EnumName(str):
    """An enum field's value: printed bare, where a string field's is quoted."""


def _sbe_text(name: str, template_id: int, schema_id: int, schema_version: int, block_length: int,
              fields: list[tuple[str, object]]) -> str:
    values = "|".join(f"{camel_case(k)}='{v}'" if isinstance(v, str) and not isinstance(v, _EnumName) else
                      f"{camel_case(k)}={v}" for k, v in fields)
    return (f"[{name}](sbeTemplateId={template_id}|sbeSchemaId={schema_id}|sbeSchemaVersion={schema_version}|"
            f"sbeBlockLength={block_length}):{values}")


def _archive_message_text(message_name: str, fields: list[tuple[str, object]]) -> str:
    message = ARCHIVE_SCHEMA.message(message_name)
    return _sbe_text(message.name, message.template_id, ARCHIVE_SCHEMA.schema_id, ARCHIVE_SCHEMA.version,
                     message.block_length, fields)


def descriptor_text(descriptor) -> str:
    """A ``RecordingDescriptor`` (decoded catalog entry body) as Java's ``RecordingDescriptorDecoder.toString()``."""
    message = ARCHIVE_SCHEMA.message("RecordingDescriptor")
    names = [f.name for f in message.fields] + [f.name for f in message.var_fields]
    return _archive_message_text("RecordingDescriptor", [(n, getattr(descriptor, n)) for n in names])


def descriptor_header_text(length: int, state: int, checksum: int) -> str:
    """The entry's ``RecordingDescriptorHeader`` (``reserved`` is always 0 in a catalog Aeron wrote)."""
    return _archive_message_text("RecordingDescriptorHeader", [
        ("length", length), ("state", _EnumName(state_name(state))), ("checksum", checksum), ("reserved", 0)])


def mark_header_text(mark) -> str:
    """The archive mark file's ``MarkFileHeader`` (schema 100) as ``MarkFileHeaderDecoder.toString()``."""
    control, local_control, events = mark.stream_ids()
    strings = mark.strings()
    return _sbe_text("MarkFileHeader", A.MARK_TEMPLATE_ID, A.MARK_SCHEMA_ID, A.MARK_SCHEMA_VERSION,
                     A.MARK_BLOCK_LENGTH, [
                         ("version", mark.version), ("activity_timestamp", mark.activity_timestamp),
                         ("start_timestamp", mark.start_timestamp), ("pid", mark.pid),
                         ("control_stream_id", control), ("local_control_stream_id", local_control),
                         ("events_stream_id", events), ("header_length", mark.header_length),
                         ("error_buffer_length", mark.error_buffer_length), ("archive_id", mark.archive_id),
                         *((name, strings[name]) for name in A.MARK_STRINGS)])


def _date_time(timestamp_ms: int, tz: tzinfo | None) -> str:
    moment = _as_datetime(timestamp_ms, tz)
    return str(timestamp_ms) if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


def mark_summary_line(now_ms: int, start_timestamp_ms: int, activity_timestamp_ms: int,
                      tz: tzinfo | None = None) -> str:
    """``09:01:25 (start: 2026-11-25 09:00:44, activity: 1969-12-31 23:59:59)``: the clock now, then the archive's
    start and last activity (-1, a clean shutdown, prints as the second before the epoch, as Java's Date does)."""
    now = _as_datetime(now_ms, tz)
    clock = str(now_ms) if now is None else f"{now:%H:%M:%S}"
    return (f"{clock} (start: {_date_time(start_timestamp_ms, tz)}, "
            f"activity: {_date_time(activity_timestamp_ms, tz)})")


_HEX_TOP = ["         +-------------------------------------------------+",
            "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |",
            "+--------+-------------------------------------------------+----------------+"]
_HEX_BOTTOM = "+--------+-------------------------------------------------+----------------+"


def pretty_hex_dump(data: bytes) -> str:
    """Rows of 16 bytes: the offset, the bytes in hex and as printable ASCII ('.' otherwise); '' when empty."""
    if not data:
        return ""
    rows = list(_HEX_TOP)
    for start in range(0, len(data), 16):
        chunk = data[start:start + 16]
        hex_part = " ".join(f"{b:02x}" for b in chunk).ljust(47)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk).ljust(16)
        rows.append(f"|{start:08x}| {hex_part} |{text}|")
    rows.append(_HEX_BOTTOM)
    return "\n".join(rows)


def error_log_lines(buffer: np.ndarray, tz: tzinfo | None = None) -> list[str]:
    """A distinct error log as ``CommonContext.printErrorLog`` prints it (its "O distinct errors" spelling too)."""
    from aeron_numba.kernels.error_log import ErrorLogReader  # here: archive-tool --help must not load Numba

    observations = ErrorLogReader.read(buffer)
    if not observations:
        return ["", "O distinct errors observed"]
    lines: list[str] = []
    for o in observations:
        lines += ["", f"{o.observation_count} observations from "
                      f"{format_timestamp_ms(o.first_observation_timestamp_ms, tz)} to "
                      f"{format_timestamp_ms(o.last_observation_timestamp_ms, tz)} for:",
                  *o.encoded_exception.split("\n")]
    return lines + ["", f"{len(observations)} distinct errors observed."]
