"""The data pipeline on Spark: what the system records (archive recordings and catalogs, chaos run folders,
benchmark runs) as DataFrames, through PySpark's Python Data Source API.

``register(spark)`` makes every source of ``aeron_numba.spark.sources.DATA_SOURCES`` known to a session, after
which ``spark.read.format("<name>").load(path)`` reads it. PySpark is imported only here and below, never by the
rest of the package: install the ``spark`` extra (``pip install 'aeron-numba[spark]'``, Java 17+ on the PATH).
"""

from __future__ import annotations


def register(spark) -> None:
    """Register every data source of this package with the SparkSession ``spark``."""
    from aeron_numba.spark.sources import DATA_SOURCES

    for source in DATA_SOURCES:
        spark.dataSource.register(source)
