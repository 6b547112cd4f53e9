"""Every data source the package registers (``aeron_numba.spark.register``), by format name."""

from __future__ import annotations

from aeron_numba.spark.archive_source import AeronArchiveDataSource

#: The ``pyspark.sql.datasource.DataSource`` subclasses, each answering ``name()`` with its format.
DATA_SOURCES: tuple = (AeronArchiveDataSource,)
