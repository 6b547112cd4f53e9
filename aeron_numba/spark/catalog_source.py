"""``spark.read.format("aeron-catalog").load(archive_dir)``: an archive's ``archive.catalog`` as a DataFrame.

One row per catalog entry, whatever its state (as ArchiveTool's ``describe-all``): the ``RecordingDescriptor``
fields in schema order, then the entry header's (``length``, ``state`` by name, ``checksum``; not ``reserved``,
which Aeron always leaves 0), then ``checksum_valid``. Catalogs do not record the checksum algorithm, so ``checksum_valid`` is null unless the read
names one (``.option("checksum", "CRC-32C")`` or Aeron's class name, as ArchiveTool's ``verify -checksum``).

A catalog is small (one partition), but the rows still travel as one Arrow record batch built from per-column
numpy arrays, the package's pattern for every source. Bad input raises ``inputs.InputError`` naming the file.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from aeron_numba.errors import ConfigurationError
from aeron_numba.layout.archive_schema import ARCHIVE_SCHEMA, ENUMS
from aeron_numba.layout.checksum import CHECKSUM_NONE, checksum_algorithm
from aeron_numba.spark import inputs

FORMAT = "aeron-catalog"

_DESCRIPTOR = ARCHIVE_SCHEMA.message("RecordingDescriptor")
#: State names as ArchiveTool prints them; a value outside the enum is SBE's NULL_VAL.
_STATE_NAMES = {value: name for name, value in ENUMS["RecordingState"].items()}
_INT_TYPES = {"int32": (np.int32, pa.int32(), "int"), "int64": (np.int64, pa.int64(), "bigint")}
#: (name, numpy dtype, Arrow type, Spark type) of the descriptor's fixed fields, in schema order.
_FIXED = tuple((f.name, *_INT_TYPES[f.primitive]) for f in _DESCRIPTOR.fields)
_STRINGS = tuple(v.name for v in _DESCRIPTOR.var_fields)

SCHEMA = ", ".join([f"{name} {spark_type}" for name, _, _, spark_type in _FIXED]
                   + [f"{name} string" for name in _STRINGS]
                   + ["length int", "state string", "checksum int", "checksum_valid boolean"])
_ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, _, arrow_type, _ in _FIXED]
                          + [(name, pa.string()) for name in _STRINGS]
                          + [("length", pa.int32()), ("state", pa.string()), ("checksum", pa.int32()),
                             ("checksum_valid", pa.bool_())])


def _checksum_option(options) -> int:
    name = options.get("checksum")
    if not name:
        return CHECKSUM_NONE
    try:
        return checksum_algorithm(name)
    except ConfigurationError as exc:
        raise inputs.InputError(f"{FORMAT} option checksum={name!r}: {exc}") from exc


def catalog_batch(archive_dir, checksum: int = CHECKSUM_NONE) -> pa.RecordBatch:
    """Every entry of the archive's catalog as one record batch of ``SCHEMA``."""
    with inputs.open_catalog(archive_dir, checksum) as catalog:
        ids = catalog.recording_ids()
        fixed = {name: np.empty(len(ids), dtype) for name, dtype, _, _ in _FIXED}
        lengths, checksums = np.empty(len(ids), np.int32), np.empty(len(ids), np.int32)
        strings: dict[str, list[str]] = {name: [] for name in _STRINGS}
        states: list[str] = []
        valid = np.empty(len(ids), np.bool_)
        for row, recording_id in enumerate(ids):
            descriptor = inputs.recording_descriptor(catalog, recording_id)
            for name in fixed:
                fixed[name][row] = getattr(descriptor, name)
            for name in _STRINGS:
                strings[name].append(getattr(descriptor, name))
            length, state, stored = catalog.entry_header(recording_id)
            lengths[row], checksums[row] = length, stored
            states.append(_STATE_NAMES.get(state, "NULL_VAL"))
            valid[row] = catalog.checksum_matches(recording_id)
    no_checksum = np.full(len(ids), checksum == CHECKSUM_NONE)
    columns = ([pa.array(fixed[name]) for name, _, _, _ in _FIXED]
               + [pa.array(strings[name], pa.string()) for name in _STRINGS]
               + [pa.array(lengths), pa.array(states, pa.string()), pa.array(checksums),
                  pa.array(valid, mask=no_checksum)])
    return pa.RecordBatch.from_arrays(columns, schema=_ARROW_SCHEMA)


class CatalogReader(DataSourceReader):
    def __init__(self, path: str, checksum: int):
        self.path = path
        self.checksum = checksum
        inputs.open_catalog(path).close()  # fail while Spark plans, naming the file, not in a task

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        yield catalog_batch(self.path, self.checksum)


class CatalogDataSource(DataSource):
    """The ``aeron-catalog`` format: ``load(archive_dir)``, option ``checksum`` (algorithm name)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> CatalogReader:
        return CatalogReader(self.options.get("path"), _checksum_option(self.options))
