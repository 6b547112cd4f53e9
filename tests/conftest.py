import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from aeron_numba.settings import DATA_DIR_ENV

pytest_plugins = ["harness.pytest_plugin"]

SHM_ROOT = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
_saved_data_dir: list = []


def pytest_configure(config):
    """The project's data dir (the benchmark history's default home) is a temporary folder for the whole
    session and every process it starts: no test writes into the user's ~/.local/share."""
    _saved_data_dir.append((os.environ.get(DATA_DIR_ENV), tempfile.mkdtemp(prefix="aeron-numba-test-data-")))
    os.environ[DATA_DIR_ENV] = _saved_data_dir[-1][1]


def pytest_unconfigure(config):
    if _saved_data_dir:
        previous, folder = _saved_data_dir.pop()
        shutil.rmtree(folder, ignore_errors=True)
        if previous is None:
            os.environ.pop(DATA_DIR_ENV, None)
        else:
            os.environ[DATA_DIR_ENV] = previous


@pytest.fixture
def shm_dir():
    """A unique directory in /dev/shm for one test, removed afterwards even when the test fails."""
    path = SHM_ROOT / f"aeron-numba-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """With NUMBA_DISABLE_JIT=1 (coverage/debug runs) the atomics are plain numpy loads and stores, so
    tests of cross-process atomicity cannot hold: skip the ``stress`` and ``requires_jit`` ones, saying why."""
    import numba

    if not numba.config.DISABLE_JIT:
        return
    skip = pytest.mark.skip(reason="needs compiled atomics; NUMBA_DISABLE_JIT=1 makes them plain loads/stores")
    for item in items:
        if "stress" in item.keywords or "requires_jit" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the Spark tests of a pytest process (tests/spark, the spark-scan smoke test;
    no mocks of Spark), with the package's data sources registered. PySpark needs Java 17+: without it the fixture
    fails saying what to install."""
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
