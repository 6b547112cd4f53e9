"""The Java check behind ``make test`` and every Spark job: no java, or one older than 17, is named with what to
install; 17+ passes. Fake ``java`` executables print the banners real JDKs print."""

import subprocess
import sys

import pytest

from aeron_numba.spark.session import JAVA_MISSING, java_problem, parse_conf


def fake_jdk(tmp_path, banner: str):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(0o755)
    return tmp_path


@pytest.mark.parametrize("banner, major", [
    ('openjdk version "11.0.21" 2023-10-17', 11),
    ('java version "1.8.0_392"', 8),
])
def test_an_old_java_is_named_with_its_version(tmp_path, monkeypatch, banner, major):
    monkeypatch.setenv("JAVA_HOME", str(fake_jdk(tmp_path, banner)))
    problem = java_problem()
    assert problem == f"{tmp_path / 'bin' / 'java'} is Java {major}; {JAVA_MISSING}"


@pytest.mark.parametrize("banner", ['openjdk version "17.0.15" 2025-04-15', 'openjdk version "21" 2023-09-19'])
def test_java_17_and_newer_pass(tmp_path, monkeypatch, banner):
    monkeypatch.setenv("JAVA_HOME", str(fake_jdk(tmp_path, banner)))
    assert java_problem() is None


def test_no_java_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert java_problem() == JAVA_MISSING
    assert "apt install openjdk-17-jre-headless" in JAVA_MISSING
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_problem() == f"JAVA_HOME={tmp_path} has no executable bin/java; {JAVA_MISSING}"


def test_the_module_exits_1_with_the_problem_as_its_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "aeron_numba.spark.session"], capture_output=True, text=True,
                            env={"PATH": str(tmp_path)}, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", JAVA_MISSING + "\n")


def test_conf_pairs():
    assert parse_conf(["spark.driver.memory=4g", "a=b=c"]) == {"spark.driver.memory": "4g", "a": "b=c"}
    with pytest.raises(ValueError, match="--conf 'nope' must be KEY=VALUE"):
        parse_conf(["nope"])


def test_a_master_spark_refuses_is_one_line_and_exit_2(tmp_path):
    # the JVM exits before PySpark connects: the job says so in one line, not PySpark's traceback
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text("{}")
    result = subprocess.run([sys.executable, "-m", "aeron_numba.spark", "nothing-lost", str(tmp_path / "run"),
                             "--master", "nowhere[", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "python -m aeron_numba.spark nothing-lost: Spark did not start with --master nowhere[: ")
