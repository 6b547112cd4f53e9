"""The SparkSession a job runs in: ``local[*]`` by default, any master by ``--master`` (or ``spark.master`` from
``spark-submit`` / ``SPARK_MASTER``), with this package's data sources registered.

PySpark needs Java 17 or newer; without ``java`` a job stops with one line saying what to install, not a JVM
launch failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

DEFAULT_MASTER = "local[*]"
JAVA_MISSING = ("PySpark needs Java 17 or newer on the PATH: install it (Debian/Ubuntu: apt install "
                "openjdk-17-jre-headless; elsewhere any OpenJDK 17+) or set JAVA_HOME, then run again")


class SparkSetupError(RuntimeError):
    """Spark cannot start here (no Java, no PySpark); the message says what to install."""


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """``--master`` and ``--conf KEY=VALUE`` (repeatable), as spark-submit names them."""
    parser.add_argument("--master", default=None,
                        help=f"Spark master URL (local[N], spark://host:7077, local-cluster[2,1,1024], ...); "
                             f"default: spark.master if set, else {DEFAULT_MASTER}")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting, e.g. --conf spark.driver.memory=4g (repeatable)")


def parse_conf(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; raises ``ValueError`` naming a pair without ``=``."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r} must be KEY=VALUE, e.g. spark.driver.memory=4g")
        conf[key.strip()] = value
    return conf


def spark_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    """A SparkSession (the active one if there is one) with every data source of this package registered."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SparkSetupError(JAVA_MISSING)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkSetupError(f"PySpark is not installed ({exc}): pip install 'aeron-numba[spark]'") from None
    from aeron_numba.spark import register

    # Python workers must run this interpreter: it has pyarrow, numba and this package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master:
        builder = builder.master(master)
    elif not os.environ.get("SPARK_MASTER") and "spark.master" not in (conf or {}):
        builder = builder.master(DEFAULT_MASTER)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
