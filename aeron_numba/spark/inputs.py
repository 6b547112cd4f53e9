"""Checks on what a Spark data source is pointed at, shared by every source of the package.

A source calls these before it reads (on the driver, while Spark plans) and again where it reads (in a Python
worker). Each failure is an ``InputError`` whose message names the file and the bad value with its limit, so the
text PySpark shows (an ``AnalysisException`` or ``PythonException`` carrying the Python message) says what is
wrong with which file rather than only a JVM stack trace.
"""

from __future__ import annotations

import os
from pathlib import Path

from aeron_numba.archive.catalog import Catalog, CatalogError
from aeron_numba.codecs.sbe import MalformedMessageError
from aeron_numba.errors import AeronError, LayoutError
from aeron_numba.layout import archive as A
from aeron_numba.layout.checksum import CHECKSUM_NONE


class InputError(AeronError, ValueError):
    """A source's input is missing or not what the source reads (the message names the file and why)."""


def archive_dir(path: str | os.PathLike | None) -> Path:
    """The archive dir ``path`` after checking it exists, is a folder and holds an ``archive.catalog``."""
    if not path:
        raise InputError("no archive dir given: use spark.read.format(...).load(<archive dir>)")
    folder = Path(path)
    if not folder.exists():
        raise InputError(f"archive dir {folder} does not exist")
    if not folder.is_dir():
        raise InputError(f"archive dir {folder} is not a folder")
    if not (folder / A.CATALOG_FILE).is_file():
        raise InputError(f"{folder} is not an Aeron archive: it has no {A.CATALOG_FILE}")
    return folder


def open_catalog(path: str | os.PathLike | None, checksum_algorithm: int = CHECKSUM_NONE) -> Catalog:
    """The archive's catalog mapped read-only, refusing one with a corrupt entry (the walk's report);
    ``checksum_algorithm`` is the one its ``checksum_matches`` checks with."""
    folder = archive_dir(path)
    try:
        catalog = Catalog.open(folder, create=False, read_only=True, checksum_algorithm=checksum_algorithm)
    except (LayoutError, CatalogError, OSError) as exc:  # OSError: unreadable (permissions, I/O)
        message = str(exc)
        if str(folder) not in message:  # every message must name the file
            message = f"{folder / A.CATALOG_FILE}: {message}"
        raise InputError(message) from exc
    if catalog.errors:
        problem = catalog.errors[0]
        catalog.close()
        raise InputError(f"corrupt catalog: {problem}")
    return catalog


def recording_descriptor(catalog: Catalog, recording_id: int):
    """The decoded descriptor of one entry, or an ``InputError`` naming the catalog and recording."""
    try:
        return catalog.descriptor(recording_id)
    except MalformedMessageError as exc:
        raise InputError(f"corrupt catalog: {catalog.path}: recording {recording_id}: {exc}") from exc


def check_segment_file(path: str | os.PathLike, segment_file_length: int) -> Path:
    """A segment file after checking it is the full ``segment_file_length`` the catalog gives: the archive
    creates each segment at its full length, so a shorter file was truncated and its tail is lost."""
    segment = Path(path)
    try:
        length = segment.stat().st_size
    except FileNotFoundError:
        raise InputError(f"segment file {segment} does not exist") from None
    if length < segment_file_length:
        raise InputError(f"truncated segment file {segment}: length={length} < segment_file_length="
                         f"{segment_file_length}")
    return segment
