"""The SparkSession a job runs in: ``local[*]`` by default, any master by ``--master`` (or ``spark.master`` from
``spark-submit`` / ``SPARK_MASTER``), with this package's data sources registered.

PySpark needs Java 17 or newer; without it a job stops with one line saying what to install, not a JVM launch
failure. ``python -m aeron_numba.spark.session`` checks just that (``make test`` runs it first).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17
JAVA_MISSING = (f"PySpark needs Java {MIN_JAVA} or newer on the PATH: install it (Debian/Ubuntu: apt install "
                f"openjdk-{MIN_JAVA}-jre-headless; elsewhere any OpenJDK {MIN_JAVA}+) or set JAVA_HOME, then run again")


class SparkSetupError(RuntimeError):
    """Spark cannot start here (no Java, no PySpark, a master or setting it refuses); the message says why."""


def java_problem() -> str | None:
    """What keeps PySpark from starting its JVM here (no ``java``, or one older than 17), or None. Spark uses
    ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        return f"JAVA_HOME={home} has no executable bin/java; {JAVA_MISSING}" if home else JAVA_MISSING
    try:
        banner = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed ({exc}); {JAVA_MISSING}"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if match is None:
        return None  # an unusual banner: let Spark try
    major = int(match[1]) if match[1] != "1" else int(match[2] or 0)  # "1.8.0" is Java 8
    if major < MIN_JAVA:
        return f"{java} is Java {major}; {JAVA_MISSING}"
    return None


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
    problem = java_problem()
    if problem:
        raise SparkSetupError(problem)
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
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - a bad --master or --conf stops the JVM before PySpark connects
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        asked = ", ".join([f"--master {master}" if master else f"master {DEFAULT_MASTER}",
                           *(f"--conf {key}={value}" for key, value in (conf or {}).items())])
        raise SparkSetupError(f"Spark did not start with {asked}: {first} (Spark's reason is printed above)") \
            from None
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


if __name__ == "__main__":
    _problem = java_problem()
    if _problem:
        sys.exit(_problem)
