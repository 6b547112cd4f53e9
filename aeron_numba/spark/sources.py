"""Every data source the package registers (``aeron_numba.spark.register``), by format name."""

from __future__ import annotations

from aeron_numba.spark.archive_source import AeronArchiveDataSource
from aeron_numba.spark.bench_source import BenchDataSource
from aeron_numba.spark.catalog_source import CatalogDataSource
from aeron_numba.spark.chaos_source import ChaosDataSource

#: The ``pyspark.sql.datasource.DataSource`` subclasses, each answering ``name()`` with its format.
DATA_SOURCES: tuple = (AeronArchiveDataSource, CatalogDataSource, ChaosDataSource, BenchDataSource)
