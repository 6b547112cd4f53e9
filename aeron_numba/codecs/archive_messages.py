"""The archive control protocol's messages (schema 101, version 10): ``ARCHIVE.ControlResponse(...)``,
``ARCHIVE.encode(message)``, ``ARCHIVE.decode(buffer, offset, length)``; see ``codecs/sbe.py``."""

from aeron_numba.codecs.sbe import SbeCodec
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA

ARCHIVE = SbeCodec(ARCHIVE_SCHEMA)
