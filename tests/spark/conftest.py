"""One real local SparkSession for the Spark tests of a pytest process (no mocks of Spark), with the package's
data sources registered. PySpark needs Java 17+: without ``java`` the fixture fails saying what to install."""

from __future__ import annotations

import os
import shutil
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.fail("PySpark needs Java 17 or newer on the PATH: install it (Debian/Ubuntu: apt install "
                    "openjdk-17-jre-headless) and run the tests again")
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
