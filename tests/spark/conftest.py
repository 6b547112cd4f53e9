"""One real local SparkSession for the Spark tests of a pytest process (no mocks of Spark), with the package's
data sources registered. PySpark needs Java 17+: without ``java`` the fixture fails saying what to install."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    from aeron_numba.spark.session import java_problem

    problem = java_problem()
    if problem:
        pytest.fail(problem)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers must see this environment's pyarrow and numba
    from pyspark.sql import SparkSession

    from aeron_numba.spark import register

    session = (SparkSession.builder.master("local[2]").appName("aeron-numba-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
